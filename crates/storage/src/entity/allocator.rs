//! The allocator's own operations on [`Entities`]: making and freeing ids, and reading and
//! writing their locations.

use std::collections::VecDeque;
use std::num::NonZeroU32;

use super::{Entities, Entity, EntityLocation, EntityMeta, FREE, Metas, not_alive, store_location};
use crate::config::StorageConfig;
use crate::error::StorageError;
use crate::sync::AtomicUsize;

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
            free_len: 0,
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

    /// `(reserved, committed, used)` bytes of the metas (one per index ever used).
    pub fn memory(&self) -> (usize, usize, usize) {
        self.metas.column.memory()
    }

    /// What the metas' reservation fell back to (see [`Column::fallback`](crate::Column::fallback)).
    pub fn fallback(&self) -> crate::Fallback {
        self.metas.column.fallback()
    }

    /// Makes a new live entity, with location [`EntityLocation::INVALID`] until it is set.
    ///
    /// Reuses the index freed longest ago, if any, else takes a new one.
    ///
    /// # Panics
    /// When all indices are in use or retired (at most 2^32 - 1, or [`Self::max_entities`]), when
    /// the OS refuses memory for the metas, and when reservations are pending (flush reserved
    /// entities first). [`Self::try_alloc`] returns the first two as errors.
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
    pub fn try_alloc_at(&mut self, location: EntityLocation) -> Result<Entity, StorageError> {
        self.assert_no_pending("try_alloc");
        if let Some(entity) = self.free.pop_front() {
            // No reservation is pending, so every entry is takeable.
            self.free_len -= 1;
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
        self.reserve_free_room(index + 1)?;
        let meta = EntityMeta { generation: NonZeroU32::MIN, location };
        self.metas.try_push(meta)?;
        self.len += 1;
        // `index < max_len <= u32::MAX`.
        Ok(Entity { index: index as u32, generation: NonZeroU32::MIN })
    }

    /// The id [`Self::try_alloc`] hands out next, or `None` when it would fail: the front of
    /// the freelist, else the next new index. For a caller that makes room keyed by the id
    /// before allocating it.
    ///
    /// # Panics
    /// When reservations are pending (flush reserved entities first).
    #[track_caller]
    pub fn next_alloc(&mut self) -> Option<Entity> {
        self.assert_no_pending("next_alloc");
        match self.free.front() {
            Some(&entity) => Some(entity),
            None => (self.metas.len() < self.max_len)
                .then_some(Entity { index: self.metas.len() as u32, generation: NonZeroU32::MIN }),
        }
    }

    /// Makes room for `additional` more entities without committing memory per allocation (a
    /// batch spawn calls it once). Failing changes nothing but the commit attempt.
    ///
    /// # Errors
    /// The commit error when the OS refuses memory for the metas.
    pub fn try_reserve_new(&mut self, additional: usize) -> Result<(), StorageError> {
        let new = additional.saturating_sub(self.free_len);
        let new = new.min(self.max_len - self.metas.len());
        self.reserve_free_room(self.metas.len() + new)?;
        self.metas.try_reserve(new)
    }

    /// Makes the freelist's heap block room for `indices` entries, so that freeing any of the
    /// first `indices` indices never allocates: called before a new index is made. One compare
    /// when there is room already.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses; nothing changes.
    #[inline(always)]
    pub(super) fn reserve_free_room(&mut self, indices: usize) -> Result<(), StorageError> {
        if indices <= self.free.capacity() {
            return Ok(());
        }
        self.grow_free(indices)
    }

    #[cold]
    #[inline(never)]
    fn grow_free(&mut self, indices: usize) -> Result<(), StorageError> {
        let additional = indices - self.free.len();
        self.free.try_reserve(additional).map_err(|e| StorageError::alloc(additional, e))
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
            // Never grows: the capacity is at least `metas.len()` (see `reserve_free_room`).
            debug_assert!(self.free.len() < self.free.capacity());
            self.free.push_back(next);
            if *self.reserved.get_mut() == 0 {
                self.free_len += 1;
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
                // Never grows, as in `free`.
                self.free.push_back(next);
            }
        }
        if !pending {
            self.free_len = self.free.len();
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
    #[track_caller]
    pub fn set_location(&mut self, entity: Entity, location: EntityLocation) {
        match self.metas.get_mut(entity.index as usize) {
            Some(meta) if meta.holds(entity) => store_location(&mut meta.location, location),
            _ => not_alive("set_location", entity),
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
    #[track_caller]
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
    #[track_caller]
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

    #[inline]
    #[track_caller]
    fn assert_no_pending(&mut self, op: &str) {
        let pending = *self.reserved.get_mut();
        if pending != 0 {
            pending_reservations(op, pending);
        }
    }
}

/// The panic of an allocation while reservations are pending: out of line, so the allocation
/// itself stays small.
#[cold]
#[inline(never)]
#[track_caller]
fn pending_reservations(op: &str, pending: usize) -> ! {
    panic!("Entities::{op}: {pending} reserved entities are pending; flush reserved entities first")
}
