//! [`Entity`] ids, their [`EntityLocation`]s, and the [`Entities`] allocator.
//!
//! The types and the allocator's bookkeeping (`EntityMeta`, `Metas`) are here; the
//! allocator's operations are in `allocator` (making and freeing ids, locations) and
//! `reservations` (reserving ids through `&self`, flushing them), `state` (the whole state as
//! plain data, and making one given id alive) and, with the `serde` feature, `serde`. The design (layout, reuse
//! order, retired slots, reservations) is on [`Entities`]' own docs. The only `unsafe` code is
//! `Metas`' typed view of its column.

use std::alloc::Layout;
use std::collections::VecDeque;
use std::fmt;
use std::num::NonZeroU32;

use crate::column::Column;
use crate::error::StorageError;
// The atomics shim: loom's `AtomicUsize` under `--cfg folio_loom`, for `tests/loom.rs`.
use crate::sync::AtomicUsize;

mod allocator;
mod reservations;
#[cfg(feature = "serde")]
mod serde;
mod snapshot;
mod state;

pub use snapshot::EntitiesSnapshot;
pub use state::{EntitiesState, EntitiesStateError, EntityIdError};

/// A generational id: a slot index and the generation of the slot when the entity was made.
///
/// An [`Entity`] is 64 bits: a slot `index` and a `generation`. The generation is a `NonZeroU32`,
/// so `Option<Entity>` is 8 bytes too. An entity is alive while its slot is in use *and* the slot's
/// generation is the entity's; freeing bumps the slot's generation, so every copy of the old id
/// kept elsewhere is detected as stale from then on.
///
/// Ordering is by index, then generation. `Debug` and `Display` print `12v3` for index 12,
/// generation 3.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entity {
    index: u32,
    generation: NonZeroU32,
}

impl Entity {
    /// An id that is never alive in any [`Entities`] (its index, `u32::MAX`, is never handed
    /// out): a stand-in to overwrite before use.
    pub const PLACEHOLDER: Self = Self { index: u32::MAX, generation: NonZeroU32::MIN };

    /// The slot index (dense, so it can index side tables).
    #[inline]
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The generation of the slot when this entity was made.
    #[inline]
    pub const fn generation(self) -> NonZeroU32 {
        self.generation
    }

    /// The id as 64 bits: the generation in the high half, the index in the low half. Never 0.
    #[inline]
    pub const fn to_bits(self) -> u64 {
        ((self.generation.get() as u64) << 32) | self.index as u64
    }

    /// The id [`Self::to_bits`] made, or `None` when the generation half is zero.
    ///
    /// Any non-zero generation is accepted: whether the id is alive is for [`Entities`] to say.
    #[inline]
    pub const fn from_bits(bits: u64) -> Option<Self> {
        match NonZeroU32::new((bits >> 32) as u32) {
            Some(generation) => Some(Self { index: bits as u32, generation }),
            None => None,
        }
    }
}

impl fmt::Debug for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}v{}", self.index, self.generation)
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Where an entity's data lives. Opaque to the storage layer: the archetype layer fills it in
/// (the entity's table is its archetype's, so it is not stored here: a meta stays 16 bytes).
///
/// `archetype_id` is never `u32::MAX` (the mark of a slot that is not alive) nor `u32::MAX - 1`
/// ([`EntityLocation::INVALID`]'s) for a placed entity: no world has that many archetypes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntityLocation {
    /// The entity's archetype.
    pub archetype_id: u32,
    /// The entity's row in its archetype's entity list.
    pub archetype_row: u32,
    /// The entity's row in its archetype's table.
    pub table_row: u32,
}

impl EntityLocation {
    /// No location yet: what a live entity has until it is placed, and what freeing such an
    /// entity returns. Its archetype id is `u32::MAX - 1`, the rest `u32::MAX`.
    pub const INVALID: Self =
        Self { archetype_id: u32::MAX - 1, archetype_row: u32::MAX, table_row: u32::MAX };

    /// The location a slot that is not alive keeps: [`FREE`] as its archetype.
    const FREED: Self = Self { archetype_id: FREE, archetype_row: u32::MAX, table_row: u32::MAX };
}

/// The archetype id in the location of a slot that is not alive (free, reserved but not yet
/// flushed, or retired); no live entity's location has it.
const FREE: u32 = u32::MAX;

/// The bookkeeping for one index: 16 bytes, so four fill a cache line and none straddles two.
#[derive(Clone, Copy, Debug)]
struct EntityMeta {
    /// While alive: the generation of the live entity. While free: the generation the slot's
    /// next entity gets (bumped on free). A retired slot keeps `u32::MAX` and is never free-listed.
    generation: NonZeroU32,
    /// The live entity's location, [`EntityLocation::INVALID`] until it is placed. While the
    /// slot is not alive (free, reserved-but-unflushed, retired): [`EntityLocation::FREED`], whose
    /// archetype id [`FREE`] no live location has; that is what "alive" means.
    location: EntityLocation,
}

const _: () = assert!(size_of::<EntityMeta>() == 16);

impl EntityMeta {
    /// Whether the slot holds a live entity (of generation `generation`).
    #[inline(always)]
    fn is_alive(&self) -> bool {
        self.location.archetype_id != FREE
    }

    /// Whether the slot holds `entity`, alive.
    #[inline(always)]
    fn holds(&self, entity: Entity) -> bool {
        self.is_alive() && self.generation == entity.generation
    }
}

/// The entity allocator: hands out [`Entity`] ids, frees them, and keeps each one's
/// [`EntityLocation`].
///
/// - Freed indices are reused first-in first-out, so an index comes back as late as possible.
/// - Freeing bumps the slot's generation; a slot freed at generation `u32::MAX` retires for good,
///   so no `(index, generation)` pair is ever handed out twice.
/// - [`Self::reserve`] hands out ids through `&self` (one atomic counter) from any number of
///   threads; [`Self::flush`] (or [`Self::try_flush`]) makes them alive later, all at once, or
///   [`Self::flush_front`] one at a time. [`Self::alloc`] panics while reservations are
///   pending: flush reserved entities first. [`Self::free`] and [`Self::clear`] work meanwhile:
///   an index they free joins the freelist once no reservation is pending.
///
/// # Layout
/// [`Entities`] keeps one 16-byte `EntityMeta` per index ever used, in a [`Column`]: the slot's
/// generation and the entity's [`EntityLocation`], whose archetype id is `u32::MAX` while the
/// slot is not alive (no archetype has that id). Four metas fill a cache line exactly, so none
/// straddles two (a random despawn misses on its entity's meta and on the moved entity's: one
/// line each, and a smaller array). Past the column's small heap phase the metas grow in a
/// reservation that moves without copying when they outgrow it, so growing the entity count
/// never copies the table; as a column, the metas also get a coloured,
/// reusable reservation (see [`Column`](crate::Column#reservations-colouring-and-reuse)), so a
/// fresh world reuses warm pages. The location is opaque to the allocator: the archetype layer
/// writes it (through [`Entities::set_location`] or the `init` callback of
/// [`Entities::flush`]) and reads it back. That mark makes [`Entities::is_alive`] exact: a
/// freed entity, a never-allocated one, and one fabricated with [`Entity::from_bits`] from the
/// slot's *next* generation all report dead, whatever their location says.
///
/// # Reuse order: a FIFO freelist (seed 003)
/// Freed indices go to the back of a `VecDeque` and are taken from the front, so an index is
/// reused as late as possible: only after every index freed before it. This spreads generation
/// bumps over all free slots (a slot reaches the generation limit as late as possible) and keeps a
/// stale id pointing at an empty slot for as long as possible, which makes use-after-despawn bugs
/// easier to see while debugging.
///
/// # Generation overflow: the slot retires
/// When a slot whose generation is already `u32::MAX` is freed, its generation cannot be bumped.
/// The slot then *retires*: it is never put on the freelist again, so no `(index, generation)` pair
/// is ever handed out twice. A retired slot costs one meta (16 bytes); it takes 2^32 - 1 frees of
/// the same index to retire it.
///
/// # Reserving ids from `&self`
/// Parallel systems need ids for entities they will spawn later, without a `&mut` borrow.
/// [`Entities::reserve`] hands them out with one atomic counter `reserved`, the number of ids
/// reserved since the last flush: the `k`-th reservation is `free[k]` (the freelist keeps each
/// slot's already bumped generation beside its index, so reserving reads no meta) while
/// `k` is under the count of takeable freelist entries, and a brand-new index (generation 1)
/// after that. Nothing but the counter changes, so
/// any number of threads can reserve at once. [`Entities::flush`] (at the next sync point, with
/// `&mut self`) materialises them in the same order: it pops `free[0]` or pushes a new meta, lowers
/// the counter by one, marks the entity alive and lets the caller place it. Each step keeps the
/// mapping above true for the ids still pending, so a panicking `init` loses nothing. Room for
/// every new meta is made before the first step, so a refused commit
/// ([`Entities::try_flush`]'s error) leaves every reservation pending and nothing alive.
/// Reserved-but-unflushed ids are not alive.
///
/// [`Entities::alloc`] changes the freelist the reservations are read from, so it **panics**
/// while reservations are pending ("flush reserved entities first") instead of flushing silently
/// with no location. [`Entities::free`] and [`Entities::clear`] work meanwhile: the indices they
/// free join the freelist once no reservation is pending, so every pending reservation keeps the
/// id it was handed.
///
/// # Freeing never allocates
/// The freelist's heap block always has room for one entry per index ever used: room is made
/// (fallibly, before anything changes) whenever a new index is, so [`Entities::free`] and
/// [`Entities::clear`] never grow it, and a despawn under memory pressure cannot abort. It costs
/// 8 bytes per index ever used, half a meta.
pub struct Entities {
    /// One meta per index ever handed out (flushed); `metas.len() <= max_len`.
    metas: Metas,
    /// Free, non-retired indices, oldest first, each as the id it is handed out as next (its
    /// meta's already bumped generation, kept here too so that [`Self::reserve`] reads no meta:
    /// a freed slot's meta is a cache miss, often in another core's cache); each
    /// `metas[e.index]` has `alive == false` and `generation == e.generation`. Taken from the
    /// front, pushed at the back (FIFO). Its capacity is kept at least `metas.len()` (room is
    /// made whenever a new meta is, before anything changes), so freeing never allocates: an
    /// index is in the list at most once, and only while its slot is not alive.
    free: VecDeque<Entity>,
    /// How many of `free`'s entries, from the front, reservations may take: all of them while
    /// no reservation is pending. Indices freed while reservations are pending wait behind
    /// them, and become takeable when the last pending reservation is flushed (taking them
    /// earlier would change which index a pending reservation stands for).
    free_len: usize,
    /// Ids reserved since the last flush. The `k`-th is `free[k]` while `k < free_len`, then
    /// the new index `metas.len() + k - free_len`. At rest (no `reserve` running)
    /// `metas.len() + reserved.saturating_sub(free_len) <= max_len`; a failing `try_reserve`
    /// raises `reserved` past that for an instant and lowers it again.
    reserved: AtomicUsize,
    /// Live (alive) entities.
    len: usize,
    /// The most indices this allocator hands out: `<= u32::MAX` (so `u32::MAX` is never an
    /// index) and `<= metas.max_capacity()`.
    max_len: usize,
}

/// Copies `src` into `dst` field by field, not as one 16-byte copy. Callers build locations
/// with 4-byte writes just before, and a 16-byte load of those stalls on store forwarding
/// (measured with perf annotate: 40% of `World::finish_move`'s samples in add_remove, two
/// thirds of `try_alloc_at`'s in simple_insert). When `src` sits in memory LLVM may merge the
/// four stores back into one copy, so the hot callers are inlined, keeping `src` in registers.
#[inline(always)]
fn store_location(dst: &mut EntityLocation, src: EntityLocation) {
    let EntityLocation { archetype_id, archetype_row, table_row } = src;
    // A live entity's location never says "free" (that would make it dead).
    debug_assert_ne!(archetype_id, FREE, "a live entity's location");
    dst.archetype_id = archetype_id;
    dst.archetype_row = archetype_row;
    dst.table_row = table_row;
}

/// The panic of a method given an entity that is not alive: out of line, so a loop calling it
/// keeps the entity in registers.
#[cold]
#[inline(never)]
#[track_caller]
fn not_alive(method: &str, entity: Entity) -> ! {
    panic!("Entities::{method}: entity {entity} is not alive")
}

/// The metas: a `Column` of `EntityMeta`s with a typed face.
struct Metas {
    /// Holds `EntityMeta`s only (made with their layout; `EntityMeta` needs no drop).
    column: Column,
    /// The most metas the column can hold.
    max_len: usize,
}

impl Metas {
    /// Metas in `column`, which must be empty and made for `EntityMeta`s.
    fn new(column: Column) -> Self {
        debug_assert!(column.is_empty() && column.item_layout() == Layout::new::<EntityMeta>());
        let max_len = column.max_capacity();
        Self { column, max_len }
    }

    #[inline]
    fn len(&self) -> usize {
        self.column.len()
    }

    fn max_capacity(&self) -> usize {
        self.max_len
    }

    #[inline]
    fn as_slice(&self) -> &[EntityMeta] {
        // SAFETY: the column holds `EntityMeta`s.
        unsafe { self.column.as_slice() }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [EntityMeta] {
        // SAFETY: the column holds `EntityMeta`s.
        unsafe { self.column.as_mut_slice() }
    }

    #[inline]
    fn get(&self, index: usize) -> Option<&EntityMeta> {
        self.as_slice().get(index)
    }

    #[inline]
    fn get_mut(&mut self, index: usize) -> Option<&mut EntityMeta> {
        self.as_mut_slice().get_mut(index)
    }

    fn iter_mut(&mut self) -> std::slice::IterMut<'_, EntityMeta> {
        self.as_mut_slice().iter_mut()
    }

    fn try_reserve(&mut self, additional: usize) -> Result<(), StorageError> {
        self.column.try_reserve(additional)
    }

    #[inline]
    fn try_push(&mut self, meta: EntityMeta) -> Result<(), StorageError> {
        self.column.try_reserve(1)?;
        let len = self.column.len();
        // SAFETY:
        // - `len < capacity` after `try_reserve(1)`, so the slot is inside the buffer, aligned
        //   for `EntityMeta` (the column's type); a typed write, not a `memcpy` call.
        // - then `[0, len + 1)` holds initialised metas.
        unsafe {
            self.column.get_unchecked(len).cast::<EntityMeta>().as_ptr().write(meta);
            self.column.set_len(len + 1);
        }
        Ok(())
    }
}

impl std::ops::Index<usize> for Metas {
    type Output = EntityMeta;

    #[inline]
    fn index(&self, index: usize) -> &EntityMeta {
        &self.as_slice()[index]
    }
}

impl std::ops::IndexMut<usize> for Metas {
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut EntityMeta {
        &mut self.as_mut_slice()[index]
    }
}

impl Default for Entities {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Entities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entities")
            .field("len", &self.len)
            .field("indices", &self.metas.len())
            .field("free", &self.free.len())
            .field("reserved", &self.reserved_len())
            .field("max_entities", &self.max_len)
            .finish()
    }
}

#[cfg(test)]
mod tests;
