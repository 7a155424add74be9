//! Save games (the `serde` feature): a [`SaveRegistry`] names the component and resource types
//! a game saves; [`World::save`](crate::World::save) writes a world to any serde format and
//! [`World::load`](crate::World::load) reads one back.
//!
//! # What a save holds
//! - The entity allocator's whole state ([`EntitiesState`](folio_storage::EntitiesState)):
//!   every index's generation, the alive ids in archetype order, the freelist in reuse order,
//!   and the count of ids reserved but not yet flushed.
//! - For each registered component type, by its registered name: every `(entity, value)`
//!   pair, archetype by archetype in row order.
//! - For each registered resource type, by its name, its value.
//!
//! Types the registry does not name are skipped, and [`WorldSave::skipped`] lists them. Change
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
//! not read as their registered type, an inconsistent allocator state, rows of entities the
//! save does not hold alive. Then it checks the target (empty for a restore; every saved id
//! free for [`LoadMode::KeepIds`]). Only then does it change the world. Each failure is a
//! [`LoadError`] naming what is wrong, and the world is as it was. The one failure left after
//! that point is the OS refusing memory: the load then despawns what it spawned and puts the
//! allocator back as it was, so the world hands out the ids it would have.

mod entity_map;
mod error;
mod read;
pub(crate) mod registry;

pub use entity_map::{EntityMap, MapEntities};
pub use error::LoadError;
pub use read::{LoadSeed, SavedWorld};
pub use registry::SaveRegistry;

pub use crate::world::{LoadMode, WorldSave};

/// The format version a save writes, and the only one a load reads.
pub const SAVE_VERSION: u32 = 1;
