//! A sparse set's membership (dense entities and their change ticks) copied out and put back,
//! for a world snapshot. The values are the caller's: it copies them with the column's own
//! methods, as plain bytes or by `Clone`, knowing the type.
//!
//! # Safety model
//! [`ComponentSparseSet::restore_unchecked`] rebuilds the entities, ticks and sparse entries
//! around a data column the caller refills; its promise is that the refilled column holds the
//! membership's count of values, in its dense order.

use super::{ComponentSparseSet, EMPTY};
use crate::column::{Column, try_copy_into};
use crate::entity::Entity;
use crate::error::StorageError;

/// The dense entities of a [`ComponentSparseSet`] and their added and changed ticks.
#[derive(Clone, Debug, Default)]
pub struct SparseMembership {
    entities: Vec<Entity>,
    added: Vec<u32>,
    changed: Vec<u32>,
}

impl SparseMembership {
    /// The number of entities.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// The entities, in dense order.
    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }
}

impl ComponentSparseSet {
    /// The dense entities and their ticks, copied into `out` (reusing its buffers).
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses the copy.
    pub fn membership_into(&self, out: &mut SparseMembership) -> Result<(), StorageError> {
        try_copy_into(&self.entities, &mut out.entities)?;
        try_copy_into(self.added_ticks(), &mut out.added)?;
        try_copy_into(self.changed_ticks(), &mut out.changed)
    }

    /// Makes room for [`Self::restore_unchecked`] of `membership`: capacity for its entities
    /// in every dense column, and the sparse page of each of them. Changes nothing visible.
    ///
    /// # Errors
    /// [`StorageError`] when memory is refused.
    pub fn try_reserve_membership(
        &mut self,
        membership: &SparseMembership,
    ) -> Result<(), StorageError> {
        self.try_reserve(membership.len().saturating_sub(self.len()))?;
        for entity in &membership.entities {
            // Makes the page; the entry itself is left as it is.
            self.sparse.try_entry(entity.index())?;
        }
        Ok(())
    }

    /// Replaces the set's membership with `membership`, its ticks shifted by `tick_delta`
    /// (wrapping), around `refill`, which must empty the data column (moving or forgetting
    /// its values) and fill it with `membership`'s values in its dense order.
    ///
    /// # Safety
    /// - [`Self::try_reserve_membership`] of `membership` succeeded since the set last grew.
    /// - `refill` leaves exactly `membership.len()` values of the set's type in the column, the
    ///   one for `membership.entities()[i]` at `i`, and does not panic.
    pub unsafe fn restore_unchecked(
        &mut self,
        membership: &SparseMembership,
        tick_delta: u32,
        refill: impl FnOnce(&mut Column),
    ) {
        let n = membership.len();
        debug_assert!(n <= self.cap);
        for entity in self.entities.drain(..) {
            self.sparse.set_on_page(entity.index(), EMPTY);
        }
        refill(&mut self.data);
        debug_assert_eq!(self.data.len(), n);
        // Within the capacity reserved (`n <= cap`): no allocation.
        self.entities.extend_from_slice(&membership.entities);
        for (column, ticks) in
            [(&mut self.added, &membership.added), (&mut self.changed, &membership.changed)]
        {
            let first = column.as_ptr().cast::<u32>().as_ptr();
            for (i, &tick) in ticks.iter().enumerate() {
                // SAFETY: `i < n <= cap <= capacity` of the tick column (reserved, caller),
                // whose items are `u32`s: the slot is inside its buffer and aligned. The
                // slots may be past the length, so they are written through the raw pointer.
                unsafe { first.add(i).write(tick.wrapping_add(tick_delta)) };
            }
            // SAFETY: `n <= capacity`, and `[0, n)` was just written with `u32`s (plain data:
            // the old ones are overwritten, nothing to drop).
            unsafe { column.set_len(n) };
        }
        for (dense, entity) in membership.entities.iter().enumerate() {
            // Its page was made by `try_reserve_membership`; `dense < n <= u32::MAX`.
            self.sparse.set_on_page(entity.index(), dense as u32);
        }
    }
}
