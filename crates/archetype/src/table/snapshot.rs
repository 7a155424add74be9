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

/// Which rows a refresh copies: those whose changed tick in the world is newer than `world`
/// (a tick of the world's current frame) and, for a forked snapshot, those whose changed tick
/// in the snapshot is newer than `kept` (a tick minus the shift, as the snapshot keeps them).
#[derive(Clone, Copy)]
pub(crate) struct ChangedSince {
    pub(crate) world: u32,
    pub(crate) kept: Option<u32>,
    /// The world's tick shift: what is taken off each tick copied.
    pub(crate) shift: u32,
}

/// Rows scanned at once for a change before looking at each: a block with none (the usual
/// case) costs a few vector compares.
const SCAN_BLOCK: usize = 64;

/// Whether `tick` is newer than `since` (wrapping: within 2^31 ticks either side; an older
/// tick that reads as newer only makes a row copied that need not be).
#[inline(always)]
fn newer(tick: u32, since: u32) -> u32 {
    u32::from((tick.wrapping_sub(since) as i32) > 0)
}

/// Whether any tick of `block` is newer than `since`.
#[inline(always)]
fn any_newer(block: &[u32], since: u32) -> bool {
    block.iter().fold(0, |acc, &t| acc | newer(t, since)) != 0
}

/// Collects into `rows` (cleared first) the rows whose world tick in `world` is newer than
/// `since.world`, or whose tick in `kept` (as long) is newer than `since.kept`.
fn changed_rows(
    world: &[u32],
    kept: &[u32],
    since: ChangedSince,
    rows: &mut Vec<u32>,
) -> Result<(), StorageError> {
    rows.clear();
    debug_assert_eq!(world.len(), kept.len());
    for (b, block) in world.chunks(SCAN_BLOCK).enumerate() {
        let start = b * SCAN_BLOCK;
        let kept = &kept[start..start + block.len()];
        let in_kept = since.kept.is_some_and(|k| any_newer(kept, k));
        if !in_kept && !any_newer(block, since.world) {
            continue;
        }
        for (i, (&t, &k)) in block.iter().zip(kept).enumerate() {
            let changed = newer(t, since.world) | since.kept.map_or(0, |s| newer(k, s));
            if changed != 0 {
                if rows.len() == rows.capacity() {
                    rows.try_reserve(SCAN_BLOCK).map_err(|e| StorageError::alloc(SCAN_BLOCK, e))?;
                }
                rows.push((start + i) as u32);
            }
        }
    }
    Ok(())
}

/// Makes `out` a copy of `ticks` minus `shift`, reusing its buffer.
fn copy_ticks(ticks: &[u32], out: &mut Vec<u32>, shift: u32) -> Result<(), StorageError> {
    if shift == 0 {
        return try_copy_into(ticks, out);
    }
    out.clear();
    out.try_reserve_exact(ticks.len()).map_err(|e| StorageError::alloc(ticks.len(), e))?;
    out.extend(ticks.iter().map(|t| t.wrapping_sub(shift)));
    Ok(())
}

impl Table {
    /// Copies the rows into `out`, reusing its buffers: `copy` copies each data column (given
    /// its component id) into the place given; the ticks are kept minus `shift`.
    pub(crate) fn snapshot_into<E>(
        &self,
        out: &mut TableSnapshot,
        shift: u32,
        mut copy: impl FnMut(ComponentId, &Column, &mut ColumnData) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<StorageError>,
    {
        out.version = self.version();
        self.entities.copy_bytes_into(&mut out.entities)?;
        let n = if self.is_empty() { 0 } else { self.columns.len() };
        out.columns.truncate(n);
        let more = n - out.columns.len();
        out.columns.try_reserve_exact(more).map_err(|e| StorageError::alloc(more, e))?;
        out.columns.resize_with(n, ColumnSnapshot::default);
        for ((&id, column), saved) in self.ids.iter().zip(self.columns.iter()).zip(&mut out.columns)
        {
            copy(id, &column.data, &mut saved.data)?;
            copy_ticks(column.added_ticks(), &mut saved.added, shift)?;
            copy_ticks(column.changed_ticks(), &mut saved.changed, shift)?;
        }
        Ok(())
    }

    /// Brings `out`, a copy of this table taken at the same [`Table::version`] (so of the
    /// same rows), up to date: in each column, the rows `since` names have their value
    /// copied by `refresh` (given the component id, the column, the kept values and the
    /// rows) and their ticks copied minus `since.shift`. `rows` is scratch. Returns the bytes
    /// copied as plain data.
    pub(crate) fn refresh_into<E>(
        &self,
        out: &mut TableSnapshot,
        since: ChangedSince,
        rows: &mut Vec<u32>,
        mut refresh: impl FnMut(ComponentId, &Column, &mut ColumnData, &[u32]) -> Result<(), E>,
    ) -> Result<usize, E>
    where
        E: From<StorageError>,
    {
        debug_assert_eq!(out.version, self.version());
        debug_assert_eq!(out.entities.len(), self.len());
        if self.is_empty() {
            return Ok(0);
        }
        debug_assert_eq!(out.columns.len(), self.columns.len());
        let mut bytes = 0;
        for ((&id, column), saved) in self.ids.iter().zip(self.columns.iter()).zip(&mut out.columns)
        {
            changed_rows(column.changed_ticks(), &saved.changed, since, rows)?;
            if rows.is_empty() {
                continue;
            }
            refresh(id, &column.data, &mut saved.data, rows)?;
            let (added, changed) = (column.added_ticks(), column.changed_ticks());
            for &row in rows.iter() {
                let row = row as usize;
                saved.added[row] = added[row].wrapping_sub(since.shift);
                saved.changed[row] = changed[row].wrapping_sub(since.shift);
            }
            bytes += rows.len() * (column.data.item_layout().size() + 2 * size_of::<u32>());
        }
        Ok(bytes)
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
