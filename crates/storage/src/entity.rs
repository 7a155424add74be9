//! [`Entity`] ids, their [`EntityLocation`]s, and the [`Entities`] allocator.
//!
//! An [`Entity`] is 64 bits: a slot `index` and a `generation`. The generation is a `NonZeroU32`,
//! so `Option<Entity>` is 8 bytes too. An entity is alive while its slot is in use *and* the slot's
//! generation is the entity's; freeing bumps the slot's generation, so every copy of the old id
//! kept elsewhere is detected as stale from then on.
//!
//! # Layout
//! [`Entities`] keeps one 16-byte `EntityMeta` per index ever used, in a [`Column`]: the slot's
//! generation and the entity's [`EntityLocation`], whose archetype id is `u32::MAX` while the
//! slot is not alive (no archetype has that id). Four metas fill a cache line exactly, so none
//! straddles two (a random despawn misses on its entity's meta and on the moved entity's: one
//! line each, and a smaller array). Past the column's
//! small heap phase the metas never move, so growing the entity count never copies the table;
//! as a column, the metas also get a coloured, reusable reservation (see `raw.rs`), so a fresh
//! world reuses warm pages. The location is opaque here: the archetype
//! layer writes it (through [`Entities::set_location`] or the `init` callback of
//! [`Entities::flush`]) and reads it back. That mark makes [`Entities::is_alive`] exact: a
//! freed entity, a never-allocated one, and one fabricated with [`Entity::from_bits`] from the
//! slot's *next* generation all report dead, whatever their location says.
//!
//! # Reuse order: a FIFO freelist (seed 003)
//! Freed indices go to the back of a `VecDeque` and are taken from the front, so an index is
//! reused as late as possible: only after every index freed before it. This spreads generation
//! bumps over all free slots (a slot reaches the generation limit as late as possible) and keeps a
//! stale id pointing at an empty slot for as long as possible, which makes use-after-despawn bugs
//! easier to see while debugging.
//!
//! # Generation overflow: the slot retires
//! When a slot whose generation is already `u32::MAX` is freed, its generation cannot be bumped.
//! The slot then *retires*: it is never put on the freelist again, so no `(index, generation)` pair
//! is ever handed out twice. A retired slot costs one meta (16 bytes); it takes 2^32 - 1 frees of
//! the same index to retire it.
//!
//! # Reserving ids from `&self`
//! Parallel systems need ids for entities they will spawn later, without a `&mut` borrow.
//! [`Entities::reserve`] hands them out with one atomic counter `reserved`, the number of ids
//! reserved since the last flush: the `k`-th reservation is `free[k]` (the freelist keeps each
//! slot's already bumped generation beside its index, so reserving reads no meta) while
//! `k < free.len()`, and the brand-new index
//! `metas.len() + (k - free.len())` (generation 1) after that. Nothing but the counter changes, so
//! any number of threads can reserve at once. [`Entities::flush`] (at the next sync point, with
//! `&mut self`) materialises them in the same order: it pops `free[0]` or pushes a new meta, lowers
//! the counter by one, marks the entity alive and lets the caller place it. Each step keeps the
//! mapping above true for the ids still pending, so a panicking `init` loses nothing. Room for
//! every new meta is made before the first step, so a refused commit
//! ([`Entities::try_flush`]'s error) leaves every reservation pending and nothing alive.
//! Reserved-but-unflushed ids are not alive.
//!
//! [`Entities::alloc`] changes the freelist the reservations are read from, so it **panics**
//! while reservations are pending ("flush reserved entities first") instead of flushing silently
//! with no location. [`Entities::free`] and [`Entities::clear`] work meanwhile: the indices they
//! free join the freelist once no reservation is pending, so every pending reservation keeps the
//! id it was handed.
//!
//! This module has no `unsafe` code.

use std::alloc::Layout;
use std::collections::VecDeque;
use std::fmt;
use std::num::NonZeroU32;

use crate::column::Column;
use crate::config::StorageConfig;
use crate::error::StorageError;
// The atomics shim: loom's `AtomicUsize` under `--cfg folio_loom`, for `tests/loom.rs`.
use crate::sync::{AtomicUsize, Ordering};

/// A generational id: a slot index and the generation of the slot when the entity was made.
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
pub struct Entities {
    /// One meta per index ever handed out (flushed); `metas.len() <= max_len`.
    metas: Metas,
    /// Free, non-retired indices, oldest first, each as the id it is handed out as next (its
    /// meta's already bumped generation, kept here too so that [`Self::reserve`] reads no meta:
    /// a freed slot's meta is a cache miss, often in another core's cache); each
    /// `metas[e.index]` has `alive == false` and `generation == e.generation`. Taken from the
    /// front, pushed at the back (FIFO).
    free: VecDeque<Entity>,
    /// Indices freed while reservations were pending, oldest first, as in `free`: they join the
    /// back of `free` when the last pending reservation is flushed (appending them earlier would
    /// change which index a pending reservation stands for).
    freed_while_reserved: Vec<Entity>,
    /// Ids reserved since the last flush. The `k`-th is `free[k]` while `k < free.len()`, then
    /// the new index `metas.len() + k - free.len()`. At rest (no `reserve` running)
    /// `metas.len() + reserved.saturating_sub(free.len()) <= max_len`; a failing `try_reserve`
    /// raises `reserved` past that for an instant and lowers it again.
    reserved: AtomicUsize,
    /// Live (alive) entities.
    len: usize,
    /// The most indices this allocator hands out: `<= u32::MAX` (so `u32::MAX` is never an
    /// index) and `<= metas.max_capacity()`.
    max_len: usize,
}

impl Entities {
    /// An empty allocator with the default reservation for its metas
    /// ([`DEFAULT_RESERVE_BYTES`](crate::vm::DEFAULT_RESERVE_BYTES), 16 bytes per index).
    pub fn new() -> Self {
        Self::with_config(&StorageConfig::new())
    }

    /// An empty allocator whose metas take their pages from `config` and reserve
    /// [`StorageConfig::reserve_bytes`] (so at most that many bytes / 16 entities).
    pub fn with_config(config: &StorageConfig) -> Self {
        Self::from_metas(Metas::new(config.column_of::<EntityMeta>()), u32::MAX)
    }

    /// An empty allocator that hands out at most `max_entities` indices (and reserves address
    /// space for just that many metas).
    pub fn with_max_entities(max_entities: u32) -> Self {
        let bytes = (max_entities as usize).saturating_mul(size_of::<EntityMeta>());
        let config = StorageConfig::new().with_reserve_bytes(bytes);
        Self::from_metas(Metas::new(config.column_of::<EntityMeta>()), max_entities)
    }

    fn from_metas(metas: Metas, max_entities: u32) -> Self {
        let max_len = metas.max_capacity().min(max_entities as usize).min(u32::MAX as usize);
        Self {
            metas,
            free: VecDeque::new(),
            freed_while_reserved: Vec::new(),
            reserved: AtomicUsize::new(0),
            len: 0,
            max_len,
        }
    }

    /// The number of live entities (reserved-but-unflushed ones not included).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entity is alive.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most indices this allocator can hand out.
    pub fn max_entities(&self) -> usize {
        self.max_len
    }

    /// Makes a new live entity, with location [`EntityLocation::INVALID`] until it is set.
    ///
    /// Reuses the index freed longest ago, if any, else takes a new one.
    ///
    /// # Panics
    /// When all indices are in use or retired (at most 2^32 - 1, or [`Self::max_entities`]), when
    /// the OS refuses memory for the metas, and when reservations are pending (flush reserved
    /// entities first). [`Self::try_alloc`] returns the first two as errors.
    pub fn alloc(&mut self) -> Entity {
        match self.try_alloc() {
            Ok(entity) => entity,
            Err(e) => panic!("Entities::alloc: cannot make another entity: {e}"),
        }
    }

    /// Makes a new live entity like [`Self::alloc`], or says why it cannot.
    ///
    /// # Errors
    /// [`StorageError::CapacityExceeded`] when every index is in use or retired; the commit error
    /// when the OS refuses memory for a new meta. Nothing changes on error.
    ///
    /// # Panics
    /// When reservations are pending (flush reserved entities first).
    #[inline]
    pub fn try_alloc(&mut self) -> Result<Entity, StorageError> {
        self.try_alloc_at(EntityLocation::INVALID)
    }

    /// Makes a new live entity like [`Self::try_alloc`], already placed at `location` (one
    /// write instead of a second look-up through [`Self::set_location`]).
    ///
    /// # Errors
    /// As [`Self::try_alloc`]; nothing changes on error.
    ///
    /// # Panics
    /// When reservations are pending (flush reserved entities first).
    #[inline(always)]
    pub fn try_alloc_at(&mut self, location: EntityLocation) -> Result<Entity, StorageError> {
        self.assert_no_pending("try_alloc");
        if let Some(entity) = self.free.pop_front() {
            let meta = &mut self.metas[entity.index as usize];
            debug_assert!(!meta.is_alive(), "free-listed index {} is alive", entity.index);
            debug_assert_eq!(meta.generation, entity.generation);
            store_location(&mut meta.location, location);
            self.len += 1;
            return Ok(entity);
        }
        let index = self.metas.len();
        if index >= self.max_len {
            return Err(StorageError::CapacityExceeded {
                capacity: self.max_len,
                requested: index + 1,
            });
        }
        debug_assert_ne!(location.archetype_id, FREE, "a live entity's location");
        let meta = EntityMeta { generation: NonZeroU32::MIN, location };
        self.metas.try_push(meta)?;
        self.len += 1;
        // `index < max_len <= u32::MAX`.
        Ok(Entity { index: index as u32, generation: NonZeroU32::MIN })
    }

    /// Makes room for `additional` more entities without committing memory per allocation (a
    /// batch spawn calls it once). Failing changes nothing but the commit attempt.
    ///
    /// # Errors
    /// The commit error when the OS refuses memory for the metas.
    pub fn try_reserve_new(&mut self, additional: usize) -> Result<(), StorageError> {
        let new = additional.saturating_sub(self.free.len());
        let new = new.min(self.max_len - self.metas.len());
        self.metas.try_reserve(new)
    }

    /// Frees `entity` and returns its last location, or `None` (changing nothing) when it is not
    /// alive.
    ///
    /// The slot's generation is bumped and its index goes to the back of the freelist; a slot
    /// whose generation is `u32::MAX` retires instead: it is never handed out again. While
    /// reservations are pending the index waits, and joins the freelist after them when the
    /// last one is flushed (so a pending reservation keeps the index it was given).
    pub fn free(&mut self, entity: Entity) -> Option<EntityLocation> {
        let meta = self.metas.get_mut(entity.index as usize)?;
        if !meta.holds(entity) {
            return None;
        }
        let location = meta.location;
        if Self::release(meta) {
            let next = Entity { index: entity.index, generation: meta.generation };
            if *self.reserved.get_mut() == 0 {
                self.free.push_back(next);
            } else {
                self.freed_while_reserved.push(next);
            }
        }
        self.len -= 1;
        Some(location)
    }

    /// Marks a live meta free: bumps its generation and resets its location. Returns whether the
    /// slot can be reused (false: it retired).
    fn release(meta: &mut EntityMeta) -> bool {
        meta.location = EntityLocation::FREED;
        match meta.generation.checked_add(1) {
            Some(next) => {
                meta.generation = next;
                true
            }
            None => false,
        }
    }

    /// Frees every live entity (generations bumped, slots at `u32::MAX` retired). The indices
    /// join the back of the freelist in index order, after those already free. While
    /// reservations are pending they stay reserved, each with the id it was handed: the freed
    /// indices join the freelist once they are flushed, as with [`Self::free`].
    pub fn clear(&mut self) {
        let pending = *self.reserved.get_mut() != 0;
        for (index, meta) in self.metas.iter_mut().enumerate() {
            if meta.is_alive() && Self::release(meta) {
                // `index < metas.len() <= max_len <= u32::MAX`.
                let next = Entity { index: index as u32, generation: meta.generation };
                if pending {
                    self.freed_while_reserved.push(next);
                } else {
                    self.free.push_back(next);
                }
            }
        }
        self.len = 0;
    }

    /// Whether `entity` is alive: allocated (or reserved and flushed), not freed since, and of
    /// the slot's current generation.
    #[inline]
    pub fn is_alive(&self, entity: Entity) -> bool {
        self.meta(entity).is_some()
    }

    /// Where `entity` lives, or `None` when it is not alive.
    #[inline]
    pub fn location(&self, entity: Entity) -> Option<EntityLocation> {
        self.meta(entity).map(|meta| meta.location)
    }

    /// Where `entity` lives, mutably, or `None` when it is not alive: for a caller that
    /// changes one field (a row after a swap-remove) with one lookup instead of a read and a
    /// [`Self::set_location`]. The archetype id must not become `u32::MAX`: that marks a slot
    /// that is not alive, so the entity would read as dead without being freed (a `World`
    /// never hands out its `Entities` mutably, and never writes that id).
    #[inline]
    pub fn location_mut(&mut self, entity: Entity) -> Option<&mut EntityLocation> {
        match self.metas.get_mut(entity.index as usize) {
            Some(meta) if meta.holds(entity) => Some(&mut meta.location),
            _ => None,
        }
    }

    /// Starts loading `entity`'s meta into the cache (a hint; nothing is checked).
    #[inline]
    pub fn prefetch(&self, entity: Entity) {
        self.metas.column.prefetch_row(entity.index as usize);
    }

    /// Sets where `entity` lives.
    ///
    /// # Panics
    /// When `entity` is not alive (a stale id must never overwrite the location of the entity
    /// that now holds its index).
    #[inline]
    pub fn set_location(&mut self, entity: Entity, location: EntityLocation) {
        match self.metas.get_mut(entity.index as usize) {
            Some(meta) if meta.holds(entity) => store_location(&mut meta.location, location),
            _ => panic!("Entities::set_location: entity {entity} is not alive"),
        }
    }

    /// Sets the location of each of `entities` to archetype `archetype_id`, the `i`-th at
    /// archetype row and table row `first_row + i`: what moving a block of table rows between
    /// two tables records (one pass over the metas instead of one [`Self::set_location`] call
    /// per entity).
    ///
    /// # Panics
    /// When one of them is not alive (the ones before it have been moved by then), or
    /// `archetype_id` is `u32::MAX` (that marks a slot that is not alive).
    pub fn set_block_locations(&mut self, entities: &[Entity], archetype_id: u32, first_row: u32) {
        assert_ne!(archetype_id, FREE, "a live entity's location");
        let metas = self.metas.as_mut_slice();
        for (row, &entity) in (first_row..).zip(entities) {
            match metas.get_mut(entity.index as usize) {
                // The whole meta in one store (its generation is the entity's): 4-byte stores
                // of the fields were a quarter slower in add_remove's batch.
                Some(meta) if meta.holds(entity) => {
                    *meta = EntityMeta {
                        generation: entity.generation,
                        location: EntityLocation {
                            archetype_id,
                            archetype_row: row,
                            table_row: row,
                        },
                    };
                }
                _ => not_alive("set_block_locations", entity),
            }
        }
    }

    /// Sets the archetype of each of `entities` to `archetype_id`, the `i`-th at archetype row
    /// `first_row + i`, keeping each one's table row: what moving a block of entities between
    /// two archetypes of one table records.
    ///
    /// # Panics
    /// As [`Self::set_block_locations`].
    pub fn set_block_archetype(
        &mut self,
        entities: impl IntoIterator<Item = Entity>,
        archetype_id: u32,
        first_row: u32,
    ) {
        assert_ne!(archetype_id, FREE, "a live entity's location");
        let metas = self.metas.as_mut_slice();
        for (row, entity) in (first_row..).zip(entities) {
            match metas.get_mut(entity.index as usize) {
                Some(meta) if meta.holds(entity) => {
                    meta.location.archetype_id = archetype_id;
                    meta.location.archetype_row = row;
                }
                _ => not_alive("set_block_archetype", entity),
            }
        }
    }

    /// The live entity at `index`, if any.
    #[inline]
    pub fn resolve_index(&self, index: u32) -> Option<Entity> {
        let meta = self.metas.get(index as usize)?;
        meta.is_alive().then_some(Entity { index, generation: meta.generation })
    }

    #[inline]
    fn meta(&self, entity: Entity) -> Option<&EntityMeta> {
        let meta = self.metas.get(entity.index as usize)?;
        meta.holds(entity).then_some(meta)
    }

    /// Reserves an id through a shared reference; any number of threads may call it at once.
    ///
    /// The id is not alive until [`Self::flush`] materialises it. Reservations take indices from
    /// the front of the freelist first, then brand-new indices.
    ///
    /// # Panics
    /// When all indices are in use, reserved or retired; [`Self::try_reserve`] returns the error.
    #[inline]
    pub fn reserve(&self) -> Entity {
        match self.try_reserve() {
            Ok(entity) => entity,
            Err(e) => panic!("Entities::reserve: cannot reserve another entity: {e}"),
        }
    }

    /// Reserves an id like [`Self::reserve`], or says why it cannot.
    ///
    /// # Errors
    /// [`StorageError::CapacityExceeded`] when every index is in use, reserved or retired.
    pub fn try_reserve(&self) -> Result<Entity, StorageError> {
        // Relaxed is enough: the counter only has to hand each caller a distinct `k`; everything
        // else read here is frozen while `&self` is shared, and `flush` needs `&mut self`.
        let k = self.reserved.fetch_add(1, Ordering::Relaxed);
        if let Some(&entity) = self.free.get(k) {
            return Ok(entity);
        }
        let index = self.metas.len().saturating_add(k - self.free.len());
        if index >= self.max_len {
            // Undo. Every caller that got a `k` past the limit undoes its own increment, and the
            // counter never drops below the limit while one of them is in flight, so no later
            // caller is handed a `k` that was refused.
            self.reserved.fetch_sub(1, Ordering::Relaxed);
            return Err(StorageError::CapacityExceeded {
                capacity: self.max_len,
                requested: index.saturating_add(1),
            });
        }
        // `index < max_len <= u32::MAX`.
        Ok(Entity { index: index as u32, generation: NonZeroU32::MIN })
    }

    /// Whether any id may be waiting for [`Self::flush`]: the one-load check a structural
    /// change makes before each operation ([`Self::reserved_len`] is exact).
    #[inline]
    pub fn has_reserved(&self) -> bool {
        self.reserved.load(Ordering::Relaxed) != 0
    }

    /// The number of reserved ids waiting for [`Self::flush`].
    #[inline]
    pub fn reserved_len(&self) -> usize {
        // A failing `try_reserve` may have raised the counter for an instant past what can exist.
        let room = self.free.len() + (self.max_len - self.metas.len());
        self.reserved.load(Ordering::Relaxed).min(room)
    }

    /// Materialises every reserved id, in reservation order: marks it alive (location
    /// [`EntityLocation::INVALID`]) and calls `init` with it and its location, so the caller can
    /// place it.
    ///
    /// Each id is alive before `init` sees it; if `init` panics, the ids not reached yet stay
    /// reserved and a later flush materialises them.
    ///
    /// # Panics
    /// When the OS refuses memory for the new metas (before anything changes;
    /// [`Self::try_flush`] returns that as an error), or when `init` panics.
    pub fn flush(&mut self, init: impl FnMut(Entity, &mut EntityLocation)) {
        let pending = self.reserved_len();
        if let Err(e) = self.try_flush(init) {
            panic!("Entities::flush: cannot make room for {pending} reserved entities: {e}");
        }
    }

    /// Materialises every reserved id like [`Self::flush`], or says why it cannot.
    ///
    /// Room for every new meta is made before the first id is materialised, so once `init` has
    /// seen an id nothing here can fail: a caller that also makes room for its own placement
    /// first (a table's rows) never holds an id that is alive but unplaced.
    ///
    /// # Errors
    /// The commit error when the OS refuses memory for the new metas. Nothing changed then:
    /// every reservation is still pending, `init` saw none, and a later flush materialises them.
    ///
    /// # Panics
    /// When `init` panics (the ids not reached yet stay reserved).
    pub fn try_flush(
        &mut self,
        mut init: impl FnMut(Entity, &mut EntityLocation),
    ) -> Result<(), StorageError> {
        let pending = *self.reserved.get_mut();
        if pending == 0 {
            return Ok(());
        }
        let new = pending.saturating_sub(self.free.len());
        self.metas.try_reserve(new)?;
        for _ in 0..pending {
            // The first pending reservation, alive before `init` sees it; the mapping from
            // reservation number to id stays true for the rest (see `flush_front`).
            let entity = match self.flush_front(EntityLocation::INVALID) {
                Ok(entity) => entity,
                Err(e) => unreachable!("room for the new metas was made above: {e}"),
            };
            init(entity, &mut self.metas[entity.index as usize].location);
        }
        Ok(())
    }

    /// The id the next flush materialises first (the oldest pending reservation), if any.
    #[inline]
    pub fn front_reserved(&self) -> Option<Entity> {
        // `reserved_len`, not the bare counter: a `try_reserve` being refused on another thread
        // raises the counter for an instant, and is refused only when there is no room, where
        // `reserved_len` caps the count at 0.
        if self.reserved_len() == 0 {
            return None;
        }
        Some(match self.free.front() {
            Some(&entity) => entity,
            // A real reservation of a new index is pending, so `metas.len() < max_len <=
            // u32::MAX`.
            None => Entity { index: self.metas.len() as u32, generation: NonZeroU32::MIN },
        })
    }

    /// Materialises the oldest pending reservation alone, placed at `location`, and returns
    /// it: what [`Self::flush`] does for its first id. The later reservations keep their ids.
    ///
    /// # Errors
    /// The commit error when the OS refuses memory for a new meta; nothing changes.
    ///
    /// # Panics
    /// When no reservation is pending.
    pub fn flush_front(&mut self, location: EntityLocation) -> Result<Entity, StorageError> {
        assert!(*self.reserved.get_mut() > 0, "Entities::flush_front: nothing is reserved");
        let entity = match self.free.pop_front() {
            Some(entity) => {
                let meta = &mut self.metas[entity.index as usize];
                debug_assert!(!meta.is_alive(), "reserved index {} is already alive", entity.index);
                debug_assert_eq!(meta.generation, entity.generation);
                store_location(&mut meta.location, location);
                entity
            }
            None => {
                let index = self.metas.len();
                debug_assert!(index < self.max_len, "reserved past max_len");
                debug_assert_ne!(location.archetype_id, FREE, "a live entity's location");
                self.metas.try_push(EntityMeta { generation: NonZeroU32::MIN, location })?;
                // `index < max_len <= u32::MAX`.
                Entity { index: index as u32, generation: NonZeroU32::MIN }
            }
        };
        *self.reserved.get_mut() -= 1;
        self.len += 1;
        if *self.reserved.get_mut() == 0 {
            self.release_freed_while_reserved();
        }
        Ok(entity)
    }

    /// Moves the indices freed while reservations were pending to the back of the freelist.
    #[inline]
    fn release_freed_while_reserved(&mut self) {
        if !self.freed_while_reserved.is_empty() {
            self.free.extend(self.freed_while_reserved.drain(..));
        }
    }

    #[inline]
    fn assert_no_pending(&mut self, op: &str) {
        let pending = *self.reserved.get_mut();
        assert!(
            pending == 0,
            "Entities::{op}: {pending} reserved entities are pending; flush reserved entities first"
        );
    }

    /// Test hook: gives the live `entity` the generation `generation` and returns its new id.
    #[cfg(test)]
    fn set_generation(&mut self, entity: Entity, generation: NonZeroU32) -> Entity {
        assert!(self.is_alive(entity));
        self.metas[entity.index as usize].generation = generation;
        Entity { index: entity.index, generation }
    }
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
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    fn gen_of(g: u32) -> NonZeroU32 {
        NonZeroU32::new(g).unwrap()
    }

    fn small() -> Entities {
        Entities::with_max_entities(1 << 14)
    }

    fn loc(n: u32) -> EntityLocation {
        EntityLocation { archetype_id: n, archetype_row: n + 1, table_row: n + 3 }
    }

    #[test]
    fn entity_sizes() {
        assert_eq!(size_of::<Entity>(), 8);
        assert_eq!(size_of::<Option<Entity>>(), 8);
        assert_eq!(size_of::<EntityMeta>(), 16);
        assert_eq!(size_of::<EntityLocation>(), 12);
    }

    #[test]
    fn entity_bits_round_trip_and_format() {
        let e = Entity { index: 12, generation: gen_of(3) };
        assert_eq!(e.to_bits(), (3 << 32) | 12);
        assert_eq!(Entity::from_bits(e.to_bits()), Some(e));
        assert_eq!(Entity::from_bits(12), None);
        let max = Entity { index: u32::MAX, generation: gen_of(u32::MAX) };
        assert_eq!(Entity::from_bits(u64::MAX), Some(max));
        assert_eq!(format!("{e:?}"), "12v3");
        assert_eq!(e.to_string(), "12v3");
        assert_eq!(Entity::from_bits(Entity::PLACEHOLDER.to_bits()), Some(Entity::PLACEHOLDER));
    }

    #[test]
    fn set_block_locations_numbers_the_rows_and_keeps_generations() {
        let mut entities = small();
        let es: Vec<Entity> = (0..6).map(|_| entities.alloc()).collect();
        entities.free(es[1]);
        let again = entities.alloc();
        assert_eq!(again.index(), 1);
        let block = [es[4], again, es[0]];
        entities.set_block_locations(&block, 7, 10);
        for (row, &e) in (10..).zip(&block) {
            assert!(entities.is_alive(e));
            let expected = EntityLocation { archetype_id: 7, archetype_row: row, table_row: row };
            assert_eq!(entities.location(e), Some(expected));
        }
        assert!(!entities.is_alive(es[1]), "the stale id stays dead");
        assert_eq!(entities.location(es[2]), Some(EntityLocation::INVALID), "others untouched");
    }

    #[test]
    fn set_block_archetype_keeps_table_rows() {
        let mut entities = small();
        let es: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
        for (i, &e) in es.iter().enumerate() {
            entities.set_location(e, loc(i as u32));
        }
        entities.set_block_archetype([es[3], es[1]], 9, 20);
        assert_eq!(
            entities.location(es[3]),
            Some(EntityLocation {
                archetype_id: 9,
                archetype_row: 20,
                table_row: loc(3).table_row
            })
        );
        assert_eq!(
            entities.location(es[1]),
            Some(EntityLocation {
                archetype_id: 9,
                archetype_row: 21,
                table_row: loc(1).table_row
            })
        );
        assert_eq!(entities.location(es[0]), Some(loc(0)));
        entities.free(es[2]);
        let dead = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            entities.set_block_archetype([es[2]], 9, 0);
        }));
        assert!(dead.is_err(), "a dead entity is refused");
    }

    #[test]
    #[should_panic(expected = "is not alive")]
    fn set_block_locations_refuses_a_dead_entity() {
        let mut entities = small();
        let a = entities.alloc();
        let b = entities.alloc();
        entities.free(b);
        entities.set_block_locations(&[a, b], 0, 0);
    }

    #[test]
    fn new_uses_default_reservation() {
        let mut entities = Entities::default();
        let e = entities.alloc();
        assert_eq!((e.index(), e.generation().get()), (0, 1));
        assert!(entities.is_alive(e));
        assert!(entities.max_entities() <= u32::MAX as usize);
        assert!(format!("{entities:?}").contains("len: 1"));
    }

    #[test]
    fn alloc_free_is_alive() {
        let mut entities = small();
        assert!(entities.is_empty());
        let a = entities.alloc();
        let b = entities.alloc();
        assert_ne!(a, b);
        assert_eq!((a.index(), b.index()), (0, 1));
        assert!(entities.is_alive(a) && entities.is_alive(b));
        assert_eq!(entities.len(), 2);
        assert_eq!(entities.free(a), Some(EntityLocation::INVALID));
        assert!(!entities.is_alive(a));
        assert!(entities.is_alive(b));
        assert_eq!(entities.len(), 1);
        assert!(!entities.is_alive(Entity::PLACEHOLDER));
        // Never allocated.
        assert!(!entities.is_alive(Entity { index: 7, generation: NonZeroU32::MIN }));
        assert_eq!(entities.free(Entity { index: 7, generation: NonZeroU32::MIN }), None);
    }

    #[test]
    fn stale_entity_is_detected_after_free_and_reuse() {
        let mut entities = small();
        let a = entities.alloc();
        entities.set_location(a, loc(1));
        assert_eq!(entities.free(a), Some(loc(1)));
        assert_eq!(entities.free(a), None, "double free");
        assert_eq!(entities.location(a), None);
        // The next generation of the freed slot, fabricated, is not alive either.
        let next = Entity::from_bits(a.to_bits() + (1 << 32)).unwrap();
        assert!(!entities.is_alive(next));
        assert_eq!(entities.free(next), None);
        let b = entities.alloc();
        assert_eq!(b, next);
        assert!(entities.is_alive(b));
        assert!(!entities.is_alive(a));
        assert_eq!(entities.location(b), Some(EntityLocation::INVALID));
        assert_eq!(entities.free(a), None);
        assert!(entities.is_alive(b));
    }

    #[test]
    fn generation_bumps_on_free() {
        let mut entities = small();
        let mut e = entities.alloc();
        for g in 1..5 {
            assert_eq!(e.generation().get(), g);
            entities.free(e);
            e = entities.alloc();
            assert_eq!(e.index(), 0);
        }
        assert_eq!(e.generation().get(), 5);
    }

    #[test]
    fn freelist_is_fifo() {
        let mut entities = small();
        let es: Vec<Entity> = (0..6).map(|_| entities.alloc()).collect();
        for i in [3, 0, 5, 1] {
            entities.free(es[i]);
        }
        let reused: Vec<u32> = (0..4).map(|_| entities.alloc().index()).collect();
        assert_eq!(reused, [3, 0, 5, 1]);
        assert_eq!(entities.alloc().index(), 6);
    }

    #[test]
    fn clear_frees_everything_and_bumps_generations() {
        let mut entities = small();
        let es: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
        entities.free(es[2]);
        entities.clear();
        assert!(entities.is_empty());
        assert!(es.iter().all(|&e| !entities.is_alive(e)));
        // Index 2 was free before the clear, so it comes first; then the rest in index order.
        let again: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
        let got: Vec<(u32, u32)> =
            again.iter().map(|e| (e.index(), e.generation().get())).collect();
        assert_eq!(got, [(2, 2), (0, 2), (1, 2), (3, 2)]);
    }

    #[test]
    fn clear_keeps_pending_reservations_and_frees_after_them() {
        let mut entities = small();
        let es: Vec<Entity> = (0..3).map(|_| entities.alloc()).collect();
        entities.free(es[1]);
        // One reservation takes the free index 1, the next a new index 3.
        let reserved = [entities.reserve(), entities.reserve()];
        assert_eq!(reserved.map(|e| (e.index(), e.generation().get())), [(1, 2), (3, 1)]);
        entities.clear();
        assert!(entities.is_empty() && !entities.is_alive(es[0]) && !entities.is_alive(es[2]));
        assert_eq!(entities.flush_front(loc(0)).unwrap(), reserved[0]);
        assert_eq!(entities.flush_front(loc(1)).unwrap(), reserved[1]);
        assert!(reserved.iter().all(|&e| entities.is_alive(e)) && entities.len() == 2);
        // The indices the clear freed come back once nothing is pending, in index order.
        let again: Vec<(u32, u32)> =
            (0..3).map(|_| entities.alloc()).map(|e| (e.index(), e.generation().get())).collect();
        assert_eq!(again, [(0, 2), (2, 2), (4, 1)]);
    }

    #[test]
    fn reserved_ids_of_freed_slots_carry_their_bumped_generations() {
        // The freelist keeps each slot's next generation beside its index, so `reserve` reads
        // no meta: what it hands out must still be what the flush makes alive, for slots freed
        // one by one, by `clear`, and while reservations were pending.
        let mut entities = small();
        let es: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
        entities.free(es[1]);
        let freed_twice = entities.alloc();
        assert_eq!((freed_twice.index(), freed_twice.generation().get()), (1, 2));
        entities.free(freed_twice);
        entities.clear();
        let reserved: Vec<Entity> = (0..5).map(|_| entities.reserve()).collect();
        let got: Vec<(u32, u32)> =
            reserved.iter().map(|e| (e.index(), e.generation().get())).collect();
        assert_eq!(got, [(1, 3), (0, 2), (2, 2), (3, 2), (4, 1)]);
        entities.free(reserved[0]); // not alive yet: refused, nothing changes
        let mut flushed = Vec::new();
        entities.flush_front(loc(0)).unwrap();
        entities.free(reserved[0]); // freed while four reservations are pending
        entities.flush(|e, _| flushed.push(e));
        assert_eq!(flushed, reserved[1..]);
        let again = entities.reserve();
        assert_eq!((again.index(), again.generation().get()), (1, 4));
        entities.flush(|e, _| assert_eq!(e, again));
        assert!(entities.is_alive(again) && !entities.is_alive(reserved[0]));
    }

    #[test]
    fn generation_overflow_retires_the_slot() {
        let mut entities = small();
        let e = entities.alloc();
        let e = entities.set_generation(e, gen_of(u32::MAX - 1));
        entities.free(e);
        let last = entities.alloc();
        assert_eq!((last.index(), last.generation().get()), (0, u32::MAX));
        assert_eq!(entities.free(last), Some(EntityLocation::INVALID));
        assert!(!entities.is_alive(last));
        assert_eq!(entities.resolve_index(0), None);
        // The slot is never handed out again, neither by alloc nor by reserve.
        let fresh: Vec<Entity> = (0..3).map(|_| entities.alloc()).collect();
        assert!(fresh.iter().all(|e| e.index() != 0));
        for &e in &fresh {
            entities.free(e);
        }
        entities.clear();
        let reserved: Vec<Entity> = (0..5).map(|_| entities.reserve()).collect();
        assert!(reserved.iter().all(|e| e.index() != 0));
        entities.flush(|_, _| {});
        assert!(!entities.is_alive(last));
        for g in [1, u32::MAX - 1, u32::MAX] {
            assert!(!entities.is_alive(Entity { index: 0, generation: gen_of(g) }));
        }
    }

    #[test]
    fn capacity_exhaustion() {
        let mut entities = Entities::with_max_entities(3);
        let es: Vec<Entity> = (0..3).map(|_| entities.alloc()).collect();
        assert!(matches!(
            entities.try_alloc(),
            Err(StorageError::CapacityExceeded { capacity: 3, requested: 4 })
        ));
        assert!(entities.try_reserve().is_err());
        assert_eq!(entities.reserved_len(), 0);
        entities.free(es[1]);
        let r = entities.reserve();
        assert_eq!(r.index(), 1);
        assert!(entities.try_reserve().is_err());
        assert_eq!(entities.reserved_len(), 1);
        entities.flush(|_, _| {});
        assert!(entities.is_alive(r));
        assert_eq!(entities.len(), 3);
    }

    #[test]
    #[should_panic(expected = "Entities::alloc: cannot make another entity")]
    fn alloc_panics_when_full() {
        let mut entities = Entities::with_max_entities(1);
        entities.alloc();
        entities.alloc();
    }

    #[test]
    #[should_panic(expected = "flush reserved entities first")]
    fn alloc_with_pending_reservations_panics() {
        let mut entities = small();
        entities.reserve();
        entities.alloc();
    }

    #[test]
    fn an_index_freed_while_reserved_comes_back_after_the_reservations() {
        let mut entities = small();
        let a = entities.alloc();
        let b = entities.alloc();
        entities.free(a);
        // `r1` takes the free index of `a`; `r2` a new one.
        let (r1, r2) = (entities.reserve(), entities.reserve());
        assert_eq!(r1.index(), a.index());
        assert_eq!(entities.free(b), Some(EntityLocation::INVALID));
        assert!(!entities.is_alive(b));
        // A reservation made now still gets a new index: `b`'s waits for the flush.
        let r3 = entities.reserve();
        assert_eq!((r2.index(), r3.index()), (2, 3));
        assert_eq!(entities.front_reserved(), Some(r1));
        assert_eq!(entities.flush_front(loc(7)).unwrap(), r1);
        assert_eq!(entities.location(r1), Some(loc(7)));
        assert_eq!(entities.front_reserved(), Some(r2));
        let mut seen = Vec::new();
        entities.flush(|e, l| {
            *l = loc(e.index());
            seen.push(e);
        });
        assert_eq!(seen, [r2, r3]);
        assert_eq!(entities.front_reserved(), None);
        let c = entities.alloc();
        assert_eq!(c.index(), b.index(), "b's index joined the freelist with the flush");
        assert_eq!(entities.len(), 4);
    }

    #[test]
    #[should_panic(expected = "nothing is reserved")]
    fn flush_front_without_reservations_panics() {
        small().flush_front(EntityLocation::INVALID).unwrap();
    }

    #[test]
    fn locations_set_and_get() {
        let mut entities = small();
        let a = entities.alloc();
        let b = entities.alloc();
        assert_eq!(entities.location(a), Some(EntityLocation::INVALID));
        entities.set_location(a, loc(10));
        entities.set_location(b, loc(20));
        assert_eq!(entities.location(a), Some(loc(10)));
        assert_eq!(entities.location(b), Some(loc(20)));
        assert_eq!(entities.free(a), Some(loc(10)));
        assert_eq!(entities.location(a), None);
        // A reused slot starts with no location.
        let c = entities.alloc();
        assert_eq!(c.index(), a.index());
        assert_eq!(entities.location(c), Some(EntityLocation::INVALID));
    }

    #[test]
    fn location_mut_changes_one_field_of_a_live_entity_only() {
        let mut entities = small();
        let a = entities.alloc();
        let b = entities.alloc();
        entities.set_location(a, loc(10));
        entities.set_location(b, loc(20));
        entities.location_mut(a).unwrap().table_row = 99;
        assert_eq!(entities.location(a), Some(EntityLocation { table_row: 99, ..loc(10) }));
        assert_eq!(entities.location(b), Some(loc(20)));
        entities.free(a);
        assert!(entities.location_mut(a).is_none(), "freed");
        let c = entities.alloc();
        assert_eq!(c.index(), a.index());
        assert!(entities.location_mut(a).is_none(), "stale: the slot holds another generation");
        assert_eq!(entities.location_mut(c).copied(), Some(EntityLocation::INVALID));
        let never = Entity::from_bits((7u64 << 32) | 1_000).unwrap();
        assert!(entities.location_mut(never).is_none(), "never made");
    }

    #[test]
    #[should_panic(expected = "is not alive")]
    fn set_location_of_stale_entity_panics() {
        let mut entities = small();
        let a = entities.alloc();
        entities.free(a);
        entities.alloc();
        entities.set_location(a, loc(1));
    }

    #[test]
    fn resolve_index_finds_the_live_entity() {
        let mut entities = small();
        let a = entities.alloc();
        assert_eq!(entities.resolve_index(0), Some(a));
        assert_eq!(entities.resolve_index(1), None);
        assert_eq!(entities.resolve_index(u32::MAX), None);
        entities.free(a);
        assert_eq!(entities.resolve_index(0), None);
        let b = entities.alloc();
        assert_eq!(entities.resolve_index(0), Some(b));
    }

    #[test]
    fn reserve_uses_freed_indices_first() {
        let mut entities = small();
        let es: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
        entities.free(es[2]);
        entities.free(es[0]);
        let r: Vec<Entity> = (0..3).map(|_| entities.reserve()).collect();
        let got: Vec<(u32, u32)> = r.iter().map(|e| (e.index(), e.generation().get())).collect();
        assert_eq!(got, [(2, 2), (0, 2), (4, 1)]);
        assert_eq!(entities.reserved_len(), 3);
        assert!(r.iter().all(|&e| !entities.is_alive(e)), "reserved ids are not alive yet");
        assert_eq!(entities.len(), 2);
        let mut seen = Vec::new();
        entities.flush(|e, location| {
            seen.push(e);
            *location = loc(e.index());
        });
        assert_eq!(seen, r);
        assert_eq!(entities.reserved_len(), 0);
        assert_eq!(entities.len(), 5);
        for &e in &r {
            assert_eq!(entities.location(e), Some(loc(e.index())));
        }
        // Flushing with nothing pending does nothing.
        entities.flush(|_, _| panic!("nothing is pending"));
        assert_eq!(entities.alloc().index(), 5);
    }

    #[test]
    fn flush_after_panicking_init_keeps_the_rest_reserved() {
        let mut entities = small();
        let a = entities.alloc();
        entities.free(a);
        let r: Vec<Entity> = (0..3).map(|_| entities.reserve()).collect();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            entities.flush(|e, _| assert_ne!(e, r[1], "boom"));
        }));
        assert!(result.is_err());
        assert!(entities.is_alive(r[0]) && entities.is_alive(r[1]));
        assert!(!entities.is_alive(r[2]));
        assert_eq!(entities.reserved_len(), 1);
        let mut rest = Vec::new();
        entities.flush(|e, _| rest.push(e));
        assert_eq!(rest, [r[2]]);
        assert_eq!(entities.len(), 3);
    }

    #[test]
    fn a_refused_meta_commit_fails_the_flush_before_anything_changes() {
        use crate::vm::FaultyPages;
        let source = FaultyPages::failing_commit(0);
        let mut entities = Entities::with_config(&StorageConfig::new().with_source(source.clone()));
        // 1,024 metas fill the column's heap block; the next one moves it into its reservation,
        // which commits.
        let es: Vec<Entity> = (0..1024).map(|_| entities.alloc()).collect();
        entities.free(es[7]);
        entities.free(es[3]);
        let r: Vec<Entity> = (0..3).map(|_| entities.reserve()).collect();
        assert_eq!(r.iter().map(|e| e.index()).collect::<Vec<_>>(), [7, 3, 1024]);
        source.fail_commit_after(1);
        let err = entities.try_flush(|e, _| panic!("{e} was materialised"));
        assert!(matches!(err, Err(StorageError::Commit { .. })), "{err:?}");
        // Nothing changed: the reservations (free-listed indices too) are pending, not alive.
        assert_eq!(entities.reserved_len(), 3);
        assert_eq!(entities.front_reserved(), Some(r[0]));
        assert!(r.iter().all(|&e| !entities.is_alive(e)));
        assert_eq!(entities.len(), 1022);
        // The panicking form says why, and changes nothing either.
        source.fail_commit_after(1);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            entities.flush(|e, _| panic!("{e} was materialised"));
        }));
        let message = panicked.unwrap_err();
        let message = message.downcast_ref::<String>().expect("a formatted message");
        assert!(message.contains("cannot make room for 3 reserved entities"), "{message}");
        assert_eq!((entities.reserved_len(), entities.len()), (3, 1022));
        // With memory back, the same reservations materialise, in order.
        let mut seen = Vec::new();
        entities
            .try_flush(|e, l| {
                seen.push(e);
                *l = loc(e.index());
            })
            .unwrap();
        assert_eq!(seen, r);
        assert_eq!((entities.reserved_len(), entities.len()), (0, 1025));
        assert!(r.iter().all(|&e| entities.location(e) == Some(loc(e.index()))));
        assert_eq!(entities.alloc().index(), 1025);
    }

    #[test]
    fn an_index_freed_while_reserved_is_released_when_the_last_init_panics() {
        let mut entities = small();
        let a = entities.alloc();
        let r = entities.reserve();
        entities.free(a);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            entities.flush(|_, _| panic!("boom"));
        }));
        assert!(result.is_err());
        assert!(entities.is_alive(r));
        assert_eq!(entities.reserved_len(), 0);
        assert_eq!(entities.alloc().index(), a.index(), "a's index joined the freelist");
    }

    #[test]
    fn reserve_from_many_threads() {
        let (threads, per_thread) = if cfg!(miri) { (3, 20) } else { (4, 1000) };
        let mut entities = small();
        let existing: Vec<Entity> = (0..64).map(|_| entities.alloc()).collect();
        let freed: Vec<Entity> = existing.iter().copied().step_by(2).collect();
        for &e in &freed {
            entities.free(e);
        }
        let alive_before: HashSet<Entity> =
            existing.iter().copied().filter(|&e| entities.is_alive(e)).collect();

        let shared = &entities;
        let reserved: Vec<Entity> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| s.spawn(|| (0..per_thread).map(|_| shared.reserve()).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let total = threads * per_thread;
        let distinct: HashSet<Entity> = reserved.iter().copied().collect();
        assert_eq!(distinct.len(), total, "reserved ids are distinct");
        assert_eq!(entities.reserved_len(), total);
        assert!(reserved.iter().all(|&e| !entities.is_alive(e)));
        // Every freed index is reused (with its bumped generation) before any new one.
        for e in &freed {
            let next = Entity { index: e.index(), generation: gen_of(2) };
            assert!(distinct.contains(&next));
        }
        assert!(distinct.is_disjoint(&alive_before));

        let mut flushed = HashSet::new();
        entities.flush(|e, location| {
            assert!(flushed.insert(e));
            *location = loc(e.index());
        });
        assert_eq!(flushed, distinct);
        assert_eq!(entities.len(), alive_before.len() + total);
        for &e in &reserved {
            assert!(entities.is_alive(e));
            assert_eq!(entities.location(e), Some(loc(e.index())));
        }
        assert!(alive_before.iter().all(|&e| entities.is_alive(e)));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Alloc,
        Free(usize),
        FreeStale(usize),
        SetLocation(usize, u32),
        Reserve(u8),
        Flush,
        FlushFront(u32),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => Just(Op::Alloc),
            4 => any::<usize>().prop_map(Op::Free),
            1 => any::<usize>().prop_map(Op::FreeStale),
            2 => (any::<usize>(), any::<u32>()).prop_map(|(i, l)| Op::SetLocation(i, l)),
            3 => (1u8..6).prop_map(Op::Reserve),
            2 => Just(Op::Flush),
            2 => any::<u32>().prop_map(Op::FlushFront),
            1 => Just(Op::Clear),
        ]
    }

    /// The model: which ids are live, pending or dead, where each live one is, and the order in
    /// which free indices must come back.
    #[derive(Default)]
    struct Model {
        live: Vec<(Entity, EntityLocation)>,
        pending: Vec<Entity>,
        dead: Vec<Entity>,
        /// Every id ever handed out (allocated or reserved).
        handed_out: HashSet<Entity>,
        free: VecDeque<u32>,
        /// Indices freed while reservations were pending; they join `free` with the flush.
        deferred: Vec<u32>,
        indices: u32,
    }

    impl Model {
        fn hand_out(&mut self, e: Entity) -> Result<(), TestCaseError> {
            prop_assert!(self.handed_out.insert(e), "{e} handed out twice");
            Ok(())
        }

        /// The id the next alloc / flushed reservation must be, given the FIFO freelist.
        fn next_id(&self, k: usize, generations: &dyn Fn(u32) -> u32) -> (u32, u32) {
            match self.free.get(k) {
                Some(&i) => (i, generations(i)),
                None => (self.indices + (k - self.free.len()) as u32, 1),
            }
        }

        fn flush(&mut self, entities: &mut Entities) -> Result<(), TestCaseError> {
            let mut seen = Vec::new();
            entities.flush(|e, location| {
                *location = loc(e.index());
                seen.push(e);
            });
            prop_assert_eq!(&seen, &self.pending);
            for e in self.pending.drain(..) {
                if self.free.front() == Some(&e.index()) {
                    self.free.pop_front();
                } else {
                    prop_assert_eq!(e.index(), self.indices);
                    self.indices += 1;
                }
                self.live.push((e, loc(e.index())));
            }
            self.free.extend(self.deferred.drain(..));
            Ok(())
        }

        fn flush_front(&mut self, entities: &mut Entities, l: u32) -> Result<(), TestCaseError> {
            let e = self.pending.remove(0);
            prop_assert_eq!(entities.flush_front(loc(l)).unwrap(), e);
            if self.free.front() == Some(&e.index()) {
                self.free.pop_front();
            } else {
                prop_assert_eq!(e.index(), self.indices);
                self.indices += 1;
            }
            self.live.push((e, loc(l)));
            if self.pending.is_empty() {
                self.free.extend(self.deferred.drain(..));
            }
            Ok(())
        }
    }

    const MAX: u32 = 24;

    fn check(entities: &Entities, model: &Model) -> Result<(), TestCaseError> {
        prop_assert_eq!(entities.len(), model.live.len());
        prop_assert_eq!(entities.reserved_len(), model.pending.len());
        prop_assert_eq!(entities.front_reserved(), model.pending.first().copied());
        for &(e, location) in &model.live {
            prop_assert!(entities.is_alive(e));
            prop_assert_eq!(entities.location(e), Some(location));
            prop_assert_eq!(entities.resolve_index(e.index()), Some(e));
            let next = Entity { index: e.index(), generation: e.generation().saturating_add(1) };
            prop_assert!(!entities.is_alive(next));
        }
        for &e in model.dead.iter().chain(&model.pending) {
            prop_assert!(!entities.is_alive(e));
            prop_assert_eq!(entities.location(e), None);
        }
        Ok(())
    }

    fn run_model(ops: Vec<Op>) -> Result<(), TestCaseError> {
        let mut entities = Entities::with_max_entities(MAX);
        let mut model = Model::default();
        // The generation a free index comes back with, read from the allocator's own answer for
        // the dead id it last held (dead ids of an index are pushed in order).
        let next_generation = |model: &Model, index: u32| {
            model
                .dead
                .iter()
                .rev()
                .find(|e| e.index() == index)
                .map_or(1, |e| e.generation().get() + 1)
        };
        for op in ops {
            let needs_flush = matches!(op, Op::Alloc | Op::Clear);
            if needs_flush && !model.pending.is_empty() {
                model.flush(&mut entities)?;
            }
            match op {
                Op::Alloc => match entities.try_alloc() {
                    Ok(e) => {
                        let gens = |i| next_generation(&model, i);
                        let (index, generation) = model.next_id(0, &gens);
                        prop_assert_eq!((e.index(), e.generation().get()), (index, generation));
                        model.hand_out(e)?;
                        if model.free.pop_front().is_none() {
                            model.indices += 1;
                        }
                        model.live.push((e, EntityLocation::INVALID));
                    }
                    Err(_) => prop_assert_eq!(model.live.len(), MAX as usize),
                },
                Op::Free(i) if !model.live.is_empty() => {
                    let (e, location) = model.live.swap_remove(i % model.live.len());
                    prop_assert_eq!(entities.free(e), Some(location));
                    if model.pending.is_empty() {
                        model.free.push_back(e.index());
                    } else {
                        model.deferred.push(e.index());
                    }
                    model.dead.push(e);
                }
                Op::FreeStale(i) if !model.dead.is_empty() => {
                    let e = model.dead[i % model.dead.len()];
                    prop_assert_eq!(entities.free(e), None);
                }
                Op::SetLocation(i, l) if !model.live.is_empty() => {
                    let slot = i % model.live.len();
                    let location = loc(l % 1000);
                    entities.set_location(model.live[slot].0, location);
                    model.live[slot].1 = location;
                }
                Op::Reserve(n) => {
                    for _ in 0..n {
                        let k = model.pending.len();
                        match entities.try_reserve() {
                            Ok(e) => {
                                let gens = |i| next_generation(&model, i);
                                let (index, generation) = model.next_id(k, &gens);
                                prop_assert_eq!(
                                    (e.index(), e.generation().get()),
                                    (index, generation)
                                );
                                model.hand_out(e)?;
                                model.pending.push(e);
                            }
                            Err(_) => {
                                // Refused once the freelist and the new indices are spent;
                                // indices freed meanwhile wait for the flush.
                                let room = model.free.len() + (MAX - model.indices) as usize;
                                prop_assert_eq!(k, room);
                            }
                        }
                    }
                }
                Op::Flush => model.flush(&mut entities)?,
                Op::FlushFront(l) if !model.pending.is_empty() => {
                    model.flush_front(&mut entities, l % 1000)?;
                }
                Op::Clear => {
                    entities.clear();
                    let mut live: Vec<Entity> = model.live.drain(..).map(|(e, _)| e).collect();
                    live.sort_by_key(|e| e.index());
                    model.free.extend(live.iter().map(|e| e.index()));
                    model.dead.extend(live);
                }
                _ => {}
            }
            check(&entities, &model)?;
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 256 },
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn model_no_live_id_is_handed_out_twice(
            ops in proptest::collection::vec(op(), 1..if cfg!(miri) { 40 } else { 300 })
        ) {
            run_model(ops)?;
        }
    }
}
