//! Reserving ids through `&self` and making them alive later: [`Entities::reserve`],
//! [`Entities::flush`] and their variants.

use std::num::NonZeroU32;

use super::{Entities, Entity, EntityLocation, EntityMeta, FREE, store_location};
use crate::error::StorageError;
use crate::sync::Ordering;

impl Entities {
    /// Reserves an id through a shared reference; any number of threads may call it at once.
    ///
    /// The id is not alive until [`Self::flush`] materialises it. Reservations take indices from
    /// the front of the freelist first, then brand-new indices.
    ///
    /// # Panics
    /// When all indices are in use, reserved or retired; [`Self::try_reserve`] returns the error.
    #[inline]
    #[track_caller]
    pub fn reserve(&self) -> Entity {
        match self.try_reserve() {
            Ok(entity) => entity,
            Err(e) => reserve_failed(e),
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
        if k < self.free_len {
            return Ok(self.free[k]);
        }
        let index = self.metas.len().saturating_add(k - self.free_len);
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
        let room = self.free_len + (self.max_len - self.metas.len());
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
    #[track_caller]
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
        let new = pending.saturating_sub(self.free_len);
        self.reserve_free_room(self.metas.len() + new)?;
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
            Some(&entity) if self.free_len > 0 => entity,
            // A real reservation of a new index is pending, so `metas.len() < max_len <=
            // u32::MAX`.
            _ => Entity { index: self.metas.len() as u32, generation: NonZeroU32::MIN },
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
    #[track_caller]
    pub fn flush_front(&mut self, location: EntityLocation) -> Result<Entity, StorageError> {
        assert!(*self.reserved.get_mut() > 0, "Entities::flush_front: nothing is reserved");
        let entity = match self.free_len {
            1.. => {
                self.free_len -= 1;
                let entity = self.free.pop_front().expect("free_len <= free.len()");
                let meta = &mut self.metas[entity.index as usize];
                debug_assert!(!meta.is_alive(), "reserved index {} is already alive", entity.index);
                debug_assert_eq!(meta.generation, entity.generation);
                store_location(&mut meta.location, location);
                entity
            }
            0 => {
                let index = self.metas.len();
                debug_assert!(index < self.max_len, "reserved past max_len");
                debug_assert_ne!(location.archetype_id, FREE, "a live entity's location");
                self.reserve_free_room(index + 1)?;
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

    /// Makes the indices freed while reservations were pending (they wait at the back of the
    /// freelist) takeable.
    #[inline]
    fn release_freed_while_reserved(&mut self) {
        self.free_len = self.free.len();
    }
}

/// The panic of [`Entities::reserve`]: out of line, so the reservation itself stays small.
#[cold]
#[inline(never)]
#[track_caller]
fn reserve_failed(e: StorageError) -> ! {
    panic!("Entities::reserve: cannot reserve another entity: {e}")
}
