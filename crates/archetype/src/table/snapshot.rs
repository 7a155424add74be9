//! A table's rows copied out for a snapshot, and put back: the entity column and every data
//! column as bytes (`Copy` types) or typed clones, the tick columns shifted by the restore's
//! tick delta.
//!
//! # Safety model
//! A restore goes in two steps: [`Table::prepare_restore`] makes room in every column and a
//! graveyard column for the current values of each column whose type needs dropping (it can
//! fail, and changes nothing visible); [`Table::restore_unchecked`] then moves the current
//! values to the graveyard (or forgets them, for types without drop), and writes the
//! snapshot's in, without running user code or allocating.

use folio_storage::{Column, StorageConfig, StorageError, try_copy_into};

use super::{Table, TableColumn};
use crate::component::ComponentId;
use crate::snapshot::{ColumnData, ColumnSnapshot, StagedValues, TableSnapshot};

/// What [`Table::restore_unchecked`] needs that may fail to make, by column.
pub(crate) struct TableRestore {
    /// Where each column's current values go, for the columns whose type needs dropping and
    /// that have values; each with room for them.
    graves: Vec<Option<Column>>,
}

impl TableRestore {
    /// The graveyard columns, holding the values moved out.
    pub(crate) fn into_graves(self) -> impl Iterator<Item = Column> {
        self.graves.into_iter().flatten()
    }
}

impl Table {
    /// Copies the rows into `out`, reusing its buffers: `copy` copies each data column (given
    /// its component id) into the place given.
    pub(crate) fn snapshot_into<E>(
        &self,
        out: &mut TableSnapshot,
        mut copy: impl FnMut(ComponentId, &Column, &mut ColumnData) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<StorageError>,
    {
        self.entities.copy_bytes_into(&mut out.entities)?;
        let n = if self.is_empty() { 0 } else { self.columns.len() };
        out.columns.truncate(n);
        let more = n - out.columns.len();
        out.columns.try_reserve_exact(more).map_err(|e| StorageError::alloc(more, e))?;
        out.columns.resize_with(n, ColumnSnapshot::default);
        for ((&id, column), saved) in self.ids.iter().zip(self.columns.iter()).zip(&mut out.columns)
        {
            copy(id, &column.data, &mut saved.data)?;
            try_copy_into(column.added_ticks(), &mut saved.added)?;
            try_copy_into(column.changed_ticks(), &mut saved.changed)?;
        }
        Ok(())
    }

    /// Makes room for restoring `snapshot` (`None`: emptying the table): every column's
    /// capacity, and graveyard columns (from `config`) for the current values that need
    /// dropping. Changes nothing visible.
    pub(crate) fn prepare_restore(
        &mut self,
        snapshot: Option<&TableSnapshot>,
        config: &StorageConfig,
    ) -> Result<TableRestore, StorageError> {
        let rows = snapshot.map_or(0, |s| s.entities.len());
        self.try_reserve(rows.saturating_sub(self.len()))?;
        let mut graves = Vec::new();
        graves
            .try_reserve_exact(self.columns.len())
            .map_err(|e| StorageError::alloc(self.columns.len(), e))?;
        for column in self.columns.iter() {
            let data = &column.data;
            let grave = match data.drop_fn() {
                Some(drop) if !data.is_empty() => {
                    // SAFETY:
                    // - the layout and drop fn are the column's: one `Send + Sync` component
                    //   type's.
                    let mut grave = unsafe { config.column(data.item_layout(), Some(drop)) };
                    grave.try_reserve(data.len())?;
                    Some(grave)
                }
                _ => None,
            };
            graves.push(grave);
        }
        Ok(TableRestore { graves })
    }

    /// Replaces the rows with `snapshot`'s (`None`: none), its ticks shifted by `tick_delta`;
    /// the current values go to `restore`'s graveyard columns (or are forgotten, for types
    /// that need no drop). `staged` holds, by column, the values of each cloned column.
    ///
    /// # Safety
    /// - `restore` was made by [`Self::prepare_restore`] of `snapshot` on this table, and the
    ///   table has not changed since.
    /// - `snapshot` was taken from this table, and each of its byte columns holds a `Copy`
    ///   type; `staged[i]` is `Some` exactly for its cloned columns, holding that column's
    ///   type, as many values as it has rows.
    pub(crate) unsafe fn restore_unchecked(
        &mut self,
        snapshot: Option<&TableSnapshot>,
        staged: Vec<Option<Box<dyn StagedValues>>>,
        restore: &mut TableRestore,
        tick_delta: u32,
    ) {
        for (column, grave) in self.columns.iter_mut().zip(restore.graves.iter_mut()) {
            match grave {
                // SAFETY:
                // - the grave was made for the column's type, with room for its values.
                Some(grave) => unsafe { column.data.move_all_into_unchecked(grave) },
                // SAFETY:
                // - `0 <= capacity`; the type needs no drop (or there are no values), so
                //   forgetting the values is all dropping them would do.
                None => unsafe { column.data.set_len(0) },
            }
        }
        let Some(snapshot) = snapshot.filter(|s| !s.entities.is_empty()) else {
            // SAFETY: `0 <= capacity`; the data columns are empty, the ticks and entities
            // are plain data.
            unsafe {
                for column in self.columns.iter_mut() {
                    column.set_len(0);
                }
                self.entities.set_len(0);
            }
            return;
        };
        debug_assert_eq!(snapshot.columns.len(), self.columns.len());
        for ((column, saved), staged) in self.columns.iter_mut().zip(&snapshot.columns).zip(staged)
        {
            match (&saved.data, staged) {
                // SAFETY:
                // - the column's type is `Copy` (the snapshot's bytes say so, caller): plain
                //   data with no drop fn.
                // - the bytes were copied from this column (caller).
                // - room for the table's rows was made by `prepare_restore` (caller).
                (ColumnData::Bytes(bytes), _) => unsafe {
                    column.data.restore_bytes_unchecked(bytes)
                },
                // SAFETY:
                // - the column is empty (moved out above) and holds the staged values' type,
                //   with room for the snapshot's rows (caller).
                (ColumnData::Cloned(_), Some(staged)) => unsafe {
                    staged.move_into(&mut column.data)
                },
                (ColumnData::Cloned(_), None) => unreachable!("a cloned column is staged"),
            }
            // SAFETY: room for the rows was made (caller); the tick columns hold `u32`s.
            unsafe { restore_ticks(column, saved, tick_delta) };
        }
        // SAFETY:
        // - `Entity` is `Copy` (plain data), and the entity column has no drop fn.
        // - the bytes were copied from this table's entity column (caller), with room made.
        unsafe { self.entities.restore_bytes_unchecked(&snapshot.entities) };
    }
}

/// Writes `saved`'s ticks into `column`'s tick columns, shifted by `delta`.
///
/// # Safety
/// - Both tick columns have capacity for `saved`'s ticks.
unsafe fn restore_ticks(column: &mut TableColumn, saved: &ColumnSnapshot, delta: u32) {
    for (ticks, saved) in [(&mut column.added, &saved.added), (&mut column.changed, &saved.changed)]
    {
        debug_assert!(saved.len() <= ticks.capacity());
        let first = ticks.as_ptr().cast::<u32>().as_ptr();
        for (i, &tick) in saved.iter().enumerate() {
            // SAFETY: `i < saved.len() <= capacity` (caller); the column holds `u32`s, so the
            // slot is inside its buffer and aligned. Slots past the length may be
            // uninitialised, so they are written through the raw pointer.
            unsafe { first.add(i).write(tick.wrapping_add(delta)) };
        }
        // SAFETY: `[0, saved.len())` was just written; `u32`s need no drop.
        unsafe { ticks.set_len(saved.len()) };
    }
}
