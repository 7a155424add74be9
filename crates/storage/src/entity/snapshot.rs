//! [`EntitiesSnapshot`]: the allocator copied whole, locations included, for a world snapshot
//! that puts every entity back where it was. Unlike [`EntitiesState`](super::EntitiesState)
//! (plain data for a save, locations left to the loader), it is a `memcpy` of the metas.

use super::{Entities, Entity};
use crate::column::ColumnBytes;
use crate::error::StorageError;

/// A copy of an [`Entities`]: every meta (generation and location), the freelist in order, and
/// the pending reservations. Taken with [`Entities::snapshot`], put back with
/// [`Entities::try_restore_snapshot`].
#[derive(Clone, Debug, Default)]
pub struct EntitiesSnapshot {
    /// The metas' bytes (`EntityMeta`s, which are plain data).
    metas: ColumnBytes,
    free: Vec<Entity>,
    free_len: usize,
    reserved: usize,
    len: usize,
}

impl EntitiesSnapshot {
    /// The indices ever used when it was taken.
    pub fn indices(&self) -> usize {
        self.metas.len()
    }

    /// The live entities when it was taken.
    pub fn alive(&self) -> usize {
        self.len
    }

    /// Whether `entities` has the counts it had when this was taken: as many indices, live
    /// entities, free indices (takeable or not) and pending reservations. Equal counts do not
    /// prove equal metas; the layer above knows, from its own bookkeeping, that no entity was
    /// allocated, freed or moved since, and checks with this that no reservation was made.
    pub fn same_counts(&self, entities: &Entities) -> bool {
        self.metas.len() == entities.metas.column.len()
            && self.free.len() == entities.free.len()
            && self.free_len == entities.free_len
            && self.reserved == entities.reserved_len()
            && self.len == entities.len
    }
}

impl Entities {
    /// A copy of the whole allocator: metas (with the locations the layer above wrote), the
    /// freelist and the pending reservations.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses the copy.
    pub fn snapshot(&self) -> Result<EntitiesSnapshot, StorageError> {
        let mut out = EntitiesSnapshot::default();
        self.snapshot_into(&mut out)?;
        Ok(out)
    }

    /// [`Entities::snapshot`] into `out`, reusing its buffers (a ring of snapshots taken every
    /// frame allocates nothing once warm). On error `out` is left partly written: take another
    /// before restoring it.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses the copy.
    pub fn snapshot_into(&self, out: &mut EntitiesSnapshot) -> Result<(), StorageError> {
        self.metas.column.copy_bytes_into(&mut out.metas)?;
        out.free.clear();
        out.free
            .try_reserve_exact(self.free.len())
            .map_err(|e| StorageError::alloc(self.free.len(), e))?;
        out.free.extend(self.free.iter().copied());
        out.free_len = self.free_len;
        out.reserved = self.reserved_len();
        out.len = self.len;
        Ok(())
    }

    /// Puts back the allocator `snapshot` was taken from: every meta (generation and
    /// location), the freelist order, the pending reservations. Indices used since are
    /// forgotten (their slots never held an id the snapshot knows).
    ///
    /// `snapshot` must come from this allocator (the layer above checks that); its locations
    /// are the caller's to make true again.
    ///
    /// # Errors
    /// [`StorageError`] when memory for the metas or the freelist is refused; nothing changed
    /// then.
    pub fn try_restore_snapshot(
        &mut self,
        snapshot: &EntitiesSnapshot,
    ) -> Result<(), StorageError> {
        let n = snapshot.metas.len();
        debug_assert!(n <= self.max_len, "a snapshot of another allocator");
        // Room first: nothing below fails.
        if let Some(more) = n.checked_sub(self.metas.len()) {
            self.metas.try_reserve(more)?;
        }
        self.reserve_free_room(n)?;
        // SAFETY:
        // - `EntityMeta` is `Copy` with no drop: plain data, and the metas column has no drop
        //   fn.
        // - the bytes were copied from a metas column (this allocator's, by the caller).
        // - `n <= capacity`: room was made above.
        unsafe { self.metas.column.restore_bytes_unchecked(&snapshot.metas) };
        self.free.clear();
        // Within the capacity reserved above (`free.len() <= n`): no allocation.
        self.free.extend(snapshot.free.iter().copied());
        self.free_len = snapshot.free_len;
        *self.reserved.get_mut() = snapshot.reserved;
        self.len = snapshot.len;
        Ok(())
    }
}
