//! Save games (the `serde` feature): a [`SaveRegistry`] names the component and resource types
//! a game saves; [`World::save`](crate::World::save) writes a world to any serde format and
//! [`World::load`](crate::World::load) reads one back.
//!
//! # What a save holds
//! - The entity allocator's state ([`EntitiesState`](folio_storage::EntitiesState)): every
//!   index's generation, the freelist in reuse order, and the count of ids reserved but not
//!   yet flushed. The alive ids are the archetypes' entities.
//! - Column by column, as the world holds them: for each archetype with entities, its
//!   entities in row order, then for each registered component of the archetype, by its
//!   registered name, the values in the same order.
//! - For each registered resource type, by its name, its value.
//!
//! In a self-describing format such as JSON a column is a sequence of values, readable and
//! editable by hand. In a compact one such as postcard or bincode
//! ([`is_human_readable`](serde::Serializer::is_human_readable) false) a column is one byte
//! string holding the values in postcard's encoding, written and read by code made for the
//! component type: the registry reaches each type through a function pointer, and one call
//! per column (not one per value and field) keeps a save and a load at the speed of the
//! values' own serde code.
//!
//! Types the registry does not name are skipped, and [`WorldSave::skipped`] lists them; an
//! entity with none of the registered components is saved, with no component. Change
//! ticks, hooks, storage types, removal logs and query caches are not saved: they belong to
//! the program, which sets up the world it loads into as it sets up any world.
//!
//! # Three ways to load
//! [`LoadMode`] chooses how saved ids become ids of the target world:
//! - [`LoadMode::Restore`] (into a world with no entity): every entity at its saved id and
//!   generation, and the allocator as it was, so the ids later spawns get, and the ids pending
//!   reservations stand for, are the saved world's. A simulation saved and loaded this way runs
//!   on as the original does.
//! - [`LoadMode::KeepIds`]: into a world that has entities, each saved entity at its saved id
//!   ([`World::try_spawn_at`](crate::World::try_spawn_at)); a saved id alive in the target is
//!   an error.
//! - [`LoadMode::Remap`]: new ids, with the [`EntityMap`] from saved to new ids returned and
//!   applied to every component and resource registered with
//!   [`SaveRegistry::component_with_entities`] through its [`MapEntities`].
//!
//! # Bad input changes nothing
//! A load first reads the whole save into a staging area ([`SavedWorld`]), checking it as it
//! goes: the format's own errors (truncated or corrupted data), unknown names, values that do
//! not read as their registered type, a column whose length is not its archetype's entity
//! count, an inconsistent allocator state, entities the saved allocator does not hold alive.
//! Then it checks the target (empty for a restore; every saved id free for
//! [`LoadMode::KeepIds`]). Only then does it change the world. Each failure is a
//! [`LoadError`] naming what is wrong, and the world is as it was. The one failure left after
//! that point is the OS refusing memory, which a load meets before it places any entity (room
//! for every row is reserved first): it then puts the allocator back as it was, so the world
//! hands out the ids it would have.
//!
//! # How a load places entities
//! Archetype by archetype: each saved archetype's entities become rows of the target
//! archetype with the same components, each column's values moved in as one block (a sparse
//! set's one by one), with the current change tick. Then, for a load with new ids, each
//! component registered with entities maps its ids; then each entity's `on_add` and
//! `on_insert` hooks run, as for a spawn, entity by entity in the save's order.

mod entity_map;
mod error;
pub(crate) mod read;
pub(crate) mod registry;

pub use entity_map::{EntityMap, MapEntities};
pub use error::LoadError;
pub use read::{LoadSeed, SavedWorld};
pub use registry::SaveRegistry;

pub use crate::world::{LoadMode, WorldSave};

/// The format version a save writes, and the only one a load reads.
pub const SAVE_VERSION: u32 = 2;
