//! [`Table`]: the rows of every entity that has one combination of table-stored components.
//!
//! A table holds one [`Column`] per component (sorted by [`ComponentId`]), an entity column, and
//! per component two tick columns (the tick it was added at and last changed at). Rows are dense:
//! removal swap-removes, so iteration is a linear walk over column slices. Every column follows
//! the storage layer's small-column policy: a near-empty table costs a few heap bytes, a large one
//! lives in reservations that never move.
//!
//! # Safety model
//! Every column (entities, data, ticks) has exactly `len` items, outside of a method's body. Each
//! data column holds values of the component type its id names in the registry the table was
//! built from. A panicking component `Drop` during removal cannot break the first fact: a guard
//! finishes the removal in every remaining column.

use std::ptr::NonNull;

use smallvec::SmallVec;

use folio_storage::{Column, Entity, StorageConfig, StorageError, copy_item};

use crate::bundle::ComponentIds;
use crate::component::{ComponentId, Components};
use crate::unwind::for_each_finishing;

/// A table's index in the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub(crate) u32);

impl TableId {
    /// The table with no components (entities that have only sparse-set components, or none).
    pub const EMPTY: Self = Self(0);

    /// The id as an index.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// One component's data and change ticks in a table.
#[derive(Debug)]
pub struct TableColumn {
    data: Column,
    added: Column,
    changed: Column,
}

impl TableColumn {
    fn new(components: &Components, id: ComponentId, config: &StorageConfig) -> Self {
        let info = components.info(id);
        Self {
            // SAFETY:
            // - the registry records the layout and drop fn of one `Component` type, which is
            //   `Send + Sync`.
            data: unsafe { config.column(info.layout(), info.drop_fn()) },
            added: config.column_of::<u32>(),
            changed: config.column_of::<u32>(),
        }
    }

    /// The component values.
    #[inline]
    pub fn data(&self) -> &Column {
        &self.data
    }

    /// The component values, mutably.
    #[inline]
    pub(crate) fn data_mut(&mut self) -> &mut Column {
        &mut self.data
    }

    /// The tick at which each row's value was added.
    #[inline]
    pub fn added_ticks(&self) -> &[u32] {
        // SAFETY: the column was built with `Column::of::<u32>()`.
        unsafe { self.added.as_slice() }
    }

    /// The tick at which each row's value was last changed.
    #[inline]
    pub fn changed_ticks(&self) -> &[u32] {
        // SAFETY: the column was built with `Column::of::<u32>()`.
        unsafe { self.changed.as_slice() }
    }

    /// The changed ticks, mutably (for writes that mark a change).
    #[inline]
    pub fn changed_ticks_mut(&mut self) -> &mut [u32] {
        // SAFETY: the column was built with `Column::of::<u32>()`.
        unsafe { self.changed.as_mut_slice() }
    }

    /// A pointer to the first changed tick (`u32`s, `len` of them): how a query holding
    /// exclusive access to this component marks a write while the world is shared. It carries
    /// the column's own provenance, so writes through it are allowed while no reference to the
    /// ticks is live.
    #[inline]
    pub fn changed_ticks_ptr(&self) -> NonNull<u32> {
        self.changed.as_ptr().cast()
    }

    /// The added and changed ticks, mutably.
    pub fn ticks_mut(&mut self) -> (&mut [u32], &mut [u32]) {
        // SAFETY: both columns were built with `Column::of::<u32>()`.
        unsafe { (self.added.as_mut_slice(), self.changed.as_mut_slice()) }
    }

    fn try_reserve(&mut self, additional: usize) -> Result<(), StorageError> {
        self.data.try_reserve(additional)?;
        self.added.try_reserve(additional)?;
        self.changed.try_reserve(additional)
    }

    /// The rows that fit in all three columns without growing.
    fn capacity(&self) -> usize {
        self.data.capacity().min(self.added.capacity()).min(self.changed.capacity())
    }

    /// Writes the ticks of slot `row`, past the columns' lengths (a row being pushed).
    ///
    /// # Safety
    /// - `row < capacity()`.
    #[inline]
    unsafe fn write_ticks(&mut self, row: usize, added: u32, changed: u32) {
        // SAFETY:
        // - `row < capacity` of both tick columns (caller), so each slot is inside its buffer;
        //   both columns hold `u32`s (built with `Column::of::<u32>()`), so the slots are
        //   aligned for them.
        unsafe {
            tick_slot(&self.added, row).write(added);
            tick_slot(&self.changed, row).write(changed);
        }
    }

    /// Writes `tick` as the added and changed tick of rows `start..start + n`.
    ///
    /// # Safety
    /// - `start + n <= capacity` of both tick columns.
    #[inline]
    unsafe fn fill_ticks(&mut self, start: usize, n: usize, tick: u32) {
        for column in [&mut self.added, &mut self.changed] {
            // SAFETY: `start <= capacity` (caller): the pointer is inside the buffer, or one
            // past its end when `n == 0`; the items are `u32`s (built with
            // `Column::of::<u32>()`), so it is aligned for them.
            let first = unsafe { tick_slot(column, start) };
            for i in 0..n {
                // SAFETY: `start + i < start + n <= capacity` (caller). The slots are past the
                // column's length, possibly uninitialised, so they are written through the raw
                // pointer (no reference to them is made).
                unsafe { first.add(i).write(tick) };
            }
        }
    }

    /// Sets the length of the data and both tick columns.
    ///
    /// # Safety
    /// - As [`Column::set_len`] for each of the three columns.
    #[inline]
    unsafe fn set_len(&mut self, len: usize) {
        // SAFETY: the caller's promise, for each column.
        unsafe {
            self.data.set_len(len);
            self.added.set_len(len);
            self.changed.set_len(len);
        }
    }

    /// The added and changed ticks of row `row`.
    ///
    /// # Safety
    /// - `row < len`.
    #[inline]
    unsafe fn ticks(&self, row: usize) -> (u32, u32) {
        debug_assert!(row < self.added.len() && row < self.changed.len());
        // SAFETY: `row < len` (caller): a live `u32` in each tick column.
        unsafe { (tick_slot(&self.added, row).read(), tick_slot(&self.changed, row).read()) }
    }

    /// Moves the ticks of the last row into `row` and drops the last row from both tick columns.
    ///
    /// # Safety
    /// - `row < len`.
    #[inline]
    unsafe fn swap_remove_ticks(&mut self, row: usize) {
        // SAFETY: the tick columns hold `u32`s; `row < len` (caller).
        unsafe {
            self.added.swap_remove_copy::<u32>(row);
            self.changed.swap_remove_copy::<u32>(row);
        }
    }
}

/// A pointer to slot `row` of a tick column: a `u32` offset, where [`Column::get_unchecked`]
/// would multiply by the item size it reads from the column.
///
/// # Safety
/// - `column` was built with `Column::of::<u32>()`, and `row <= capacity`.
#[inline(always)]
unsafe fn tick_slot(column: &Column, row: usize) -> *mut u32 {
    debug_assert!(row <= column.capacity());
    // SAFETY: `row <= capacity` (caller): inside the buffer or one past its end; the column's
    // items are `u32`s, so the offset is one of `row` items and the result is aligned.
    unsafe { column.as_ptr().cast::<u32>().as_ptr().add(row) }
}

/// How one table's columns map onto another's, computed once per archetype-graph edge so that
/// moving a row between the two tables searches nothing.
#[derive(Clone, Debug)]
pub(crate) struct ColumnMap {
    /// For each column of the source table, its index in the destination, or [`ColumnMap::NONE`].
    src_to_dst: Box<[u32]>,
    /// The destination's columns that the source lacks.
    dst_new: Box<[u32]>,
}

impl ColumnMap {
    /// No such column.
    pub(crate) const NONE: u32 = u32::MAX;

    /// The map from `src`'s columns to `dst`'s.
    pub(crate) fn new(src: &Table, dst: &Table) -> Self {
        let src_to_dst = src
            .ids
            .iter()
            .map(|&id| dst.column_index(id).map_or(Self::NONE, |i| i as u32))
            .collect();
        let dst_new = (0..dst.ids.len() as u32)
            .filter(|&i| src.column_index(dst.ids[i as usize]).is_none())
            .collect();
        Self { src_to_dst, dst_new }
    }
}

/// Where a row went and which entity took its old place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MovedRow {
    /// The row's index in the destination table.
    pub new_row: usize,
    /// The entity that was swapped into the old row (its location must be updated), if any.
    pub swapped_in: Option<Entity>,
}

/// The rows of all entities with one set of table-stored components.
#[derive(Debug)]
pub struct Table {
    /// Sorted ids of the table's components; `columns[i]` holds `ids[i]`.
    ids: ComponentIds,
    columns: Box<[TableColumn]>,
    /// One `Entity` per row.
    entities: Column,
    /// Rows that fit in every column (entities, data, ticks) without growing: the smallest of
    /// their capacities. `len <= cap`.
    cap: usize,
    /// Whether some column's type has a drop fn. Without one, removing a row cannot panic and
    /// needs no unwind guard.
    needs_drop: bool,
}

impl Table {
    /// An empty table for the sorted, distinct component ids `ids`, all registered in
    /// `components` with table storage.
    pub fn new(components: &Components, ids: &[ComponentId]) -> Self {
        Self::with_config(components, ids, &StorageConfig::new())
    }

    /// An empty table like [`Table::new`], whose columns take their pages from `config`.
    pub fn with_config(
        components: &Components,
        ids: &[ComponentId],
        config: &StorageConfig,
    ) -> Self {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids must be sorted and distinct");
        Self {
            ids: ids.into(),
            columns: ids.iter().map(|&id| TableColumn::new(components, id, config)).collect(),
            entities: config.column_of::<Entity>(),
            cap: 0,
            needs_drop: ids.iter().any(|&id| components.info(id).drop_fn().is_some()),
        }
        .with_capacity_recorded()
    }

    fn with_capacity_recorded(mut self) -> Self {
        self.cap = self.capacity_now();
        self
    }

    /// The smallest capacity over every column.
    fn capacity_now(&self) -> usize {
        self.columns.iter().fold(self.entities.capacity(), |cap, c| cap.min(c.capacity()))
    }

    /// The number of rows.
    #[inline]
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// Whether the table has no rows.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// The sorted component ids.
    #[inline]
    pub fn component_ids(&self) -> &[ComponentId] {
        &self.ids
    }

    /// The entity of each row.
    #[inline]
    pub fn entities(&self) -> &[Entity] {
        // SAFETY: the column was built with `Column::of::<Entity>()`.
        unsafe { self.entities.as_slice() }
    }

    /// The position of `id`'s column, if the table has it.
    #[inline]
    pub fn column_index(&self, id: ComponentId) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }

    /// `id`'s column, if the table has it.
    #[inline]
    pub fn column(&self, id: ComponentId) -> Option<&TableColumn> {
        self.column_index(id).map(|i| &self.columns[i])
    }

    /// `id`'s column, mutably.
    #[inline]
    pub fn column_mut(&mut self, id: ComponentId) -> Option<&mut TableColumn> {
        self.column_index(id).map(|i| &mut self.columns[i])
    }

    /// The columns, in component id order.
    #[inline]
    pub fn columns(&self) -> &[TableColumn] {
        &self.columns
    }

    /// The columns, mutably (their values and ticks, not their number).
    #[inline]
    pub fn columns_mut(&mut self) -> &mut [TableColumn] {
        &mut self.columns
    }

    /// Makes room for `additional` rows in every column; on error the table is unchanged (some
    /// columns may have committed more memory, which is harmless).
    #[inline]
    pub fn try_reserve(&mut self, additional: usize) -> Result<(), StorageError> {
        if additional <= self.cap - self.len() {
            return Ok(());
        }
        self.grow(additional)
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, additional: usize) -> Result<(), StorageError> {
        let result = self
            .entities
            .try_reserve(additional)
            .and_then(|()| self.columns.iter_mut().try_for_each(|c| c.try_reserve(additional)));
        self.cap = self.capacity_now();
        result
    }

    /// Starts loading every column's item at `row` (data, ticks and entity) into the cache, so
    /// the misses of a random-row removal overlap instead of following one another.
    #[inline]
    pub fn prefetch_row(&self, row: usize) {
        self.entities.prefetch_row(row);
        for column in self.columns.iter() {
            column.data.prefetch_row(row);
            column.added.prefetch_row(row);
            column.changed.prefetch_row(row);
        }
    }

    /// A pointer to column `col`'s slot in row `row`, where a row being pushed writes its value
    /// before [`Table::commit_row`].
    ///
    /// # Safety
    /// - `col < columns().len()`.
    /// - `row <= len + r`, where `try_reserve(r)` was the last successful reservation, so the slot
    ///   is inside every column's buffer (`row < cap`).
    #[inline]
    pub(crate) unsafe fn data_slot(&mut self, col: usize, row: usize) -> *mut u8 {
        debug_assert!(col < self.columns.len() && row < self.cap);
        // SAFETY:
        // - `col < columns.len()` (caller).
        // - `row < cap <= capacity` of the column (caller), so the offset is inside its buffer.
        unsafe { self.columns.get_unchecked_mut(col).data.get_unchecked(row).as_ptr() }
    }

    /// Appends the row whose values were written with [`Table::data_slot`]: records `entity`,
    /// and `tick` as each component's added and changed tick. Returns the row.
    ///
    /// # Safety
    /// - `len < cap` (a successful `try_reserve(1)` since the length last changed).
    /// - For every column, the slot at `len` holds a valid value of the column's type, which
    ///   the table now owns.
    #[inline]
    pub(crate) unsafe fn commit_row(&mut self, entity: Entity, tick: u32) -> usize {
        let row = self.len();
        debug_assert!(row < self.cap);
        for column in self.columns.iter_mut() {
            // SAFETY:
            // - `row < cap <= capacity` of each tick column (caller).
            // - the slot at `row` of the data column holds a value (caller), the ticks were just
            //   written, so `[0, row + 1)` is initialised in all three columns.
            unsafe {
                column.write_ticks(row, tick, tick);
                column.set_len(row + 1);
            }
        }
        // SAFETY:
        // - `row < cap <= capacity` of the entity column; `Entity` slots are aligned for it.
        // - after the write `[0, row + 1)` is initialised.
        unsafe {
            self.entities.get_unchecked(row).cast::<Entity>().as_ptr().write(entity);
            self.entities.set_len(row + 1);
        }
        row
    }

    /// Rows that fit without a reservation: `cap - len`.
    #[inline]
    pub(crate) fn spare_rows(&self) -> usize {
        self.cap - self.len()
    }

    /// Where a batch of rows is written before [`Table::commit_rows`]: every column's first
    /// item, in column order, and the entity column's first slot. Row `r` of column `c` is `r`
    /// items of the column's type on from `bases[c]`.
    ///
    /// The pointers stay valid until the table is next reserved, cleared or shrunk; the slots
    /// from `len` to `len + spare_rows()` may be written through them.
    pub(crate) fn row_bases(&mut self) -> (SmallVec<[*mut u8; 8]>, *mut Entity) {
        let bases = self
            .columns
            .iter_mut()
            // SAFETY: row 0 is at most the capacity, so the pointer is the buffer's start.
            .map(|c| unsafe { c.data.get_unchecked(0) }.as_ptr())
            .collect();
        // SAFETY: as above, for the entity column.
        let entities = unsafe { self.entities.get_unchecked(0) }.cast::<Entity>().as_ptr();
        (bases, entities)
    }

    /// Appends rows `len..len + n`, whose values and entities were written through
    /// [`Table::row_bases`]: each component's added and changed ticks become `tick`, written as
    /// one fill per tick column instead of two stores per row and component.
    ///
    /// # Safety
    /// - `n <= spare_rows()`.
    /// - For every column, the slots of those rows hold valid values of the column's type,
    ///   which the table now owns, and the entity column's slots hold their entities.
    pub(crate) unsafe fn commit_rows(&mut self, n: usize, tick: u32) {
        let len = self.len();
        debug_assert!(n <= self.cap - len);
        for column in self.columns.iter_mut() {
            // SAFETY: `len + n <= cap <= capacity` of every column (caller); the values were
            // written (caller) and the ticks are written here, so `[0, len + n)` is initialised.
            unsafe {
                column.fill_ticks(len, n, tick);
                column.set_len(len + n);
            }
        }
        // SAFETY: as above, for the entity column, whose slots the caller wrote.
        unsafe { self.entities.set_len(len + n) };
    }

    /// Appends a row for `entity`, taking each component's value from `value(id)`.
    ///
    /// On error nothing changed and no value was taken.
    ///
    /// # Safety
    /// - For each of the table's ids, `value(id)` returns a pointer to a valid value of that
    ///   component's type, which the caller then treats as moved; it is called once per id, in
    ///   id order, and must not unwind.
    pub unsafe fn push_row(
        &mut self,
        entity: Entity,
        tick: u32,
        mut value: impl FnMut(ComponentId) -> *const u8,
    ) -> Result<usize, StorageError> {
        self.try_reserve(1)?;
        let row = self.len();
        for i in 0..self.columns.len() {
            let size = self.columns[i].data.item_layout().size();
            // SAFETY:
            // - `value(id)` is a valid value of `id`'s type, moved to us (caller); it lies
            //   outside the table, so it does not overlap the slot.
            // - `i < columns.len()` and one more row was reserved above.
            unsafe {
                let src = value(self.ids[i]);
                std::ptr::copy_nonoverlapping(src, self.data_slot(i, row), size);
            }
        }
        // SAFETY: reserved above; every column's slot at `row` was written.
        Ok(unsafe { self.commit_row(entity, tick) })
    }

    /// Removes `row`, dropping its components, and moves the last row into its place; returns
    /// the entity moved into `row`, if any.
    ///
    /// If a component's `Drop` panics, the row is still removed from every column (the other
    /// components are dropped) before the panic continues.
    ///
    /// # Panics
    /// When `row >= len`.
    pub fn swap_remove_and_drop(&mut self, row: usize) -> Option<Entity> {
        let len = self.len();
        assert!(row < len, "row {row} out of bounds (table of {len} rows)");
        let swapped_in = (row + 1 < len).then(|| self.entities()[len - 1]);
        if !self.needs_drop {
            for column in self.columns.iter_mut() {
                // SAFETY: `row < len` in every column. No column's type has a drop fn, so the
                // value at `row` needs no drop: forgetting it is dropping it.
                unsafe {
                    column.swap_remove_ticks(row);
                    column.data.swap_remove_forget_unchecked(row);
                }
            }
            // SAFETY: `row < len`; the column holds `Entity`s.
            unsafe { self.entities.swap_remove_copy::<Entity>(row) };
            return swapped_in;
        }

        /// Removes `row` from columns `next..`; if a component's drop panics, its own `Drop`
        /// (run while unwinding) carries on with the columns after it.
        struct Finish<'a> {
            table: &'a mut Table,
            row: usize,
            next: usize,
            entity_removed: bool,
        }
        impl Finish<'_> {
            fn run(&mut self) {
                while self.next < self.table.columns.len() {
                    let column = &mut self.table.columns[self.next];
                    self.next += 1;
                    // SAFETY: `row < len` in every column not yet visited (`next` moves first,
                    // so a column whose drop panicked is not visited twice).
                    unsafe {
                        column.swap_remove_ticks(self.row);
                        column.data.swap_remove_and_drop_unchecked(self.row);
                    }
                }
                if !self.entity_removed {
                    self.entity_removed = true;
                    // SAFETY: `row < len`, and the entity is removed once; the column holds
                    // `Entity`s.
                    unsafe { self.table.entities.swap_remove_copy::<Entity>(self.row) };
                }
            }
        }
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                self.run();
            }
        }
        Finish { table: self, row, next: 0, entity_removed: false }.run();
        swapped_in
    }

    /// Removes every row whose bit is set in `marks` (row `r` is bit `r % 64` of word
    /// `r / 64`), dropping its values, and fills the holes left below the new length with the
    /// rows above it that stay, in order: one move per such hole, and none at all when the
    /// marked rows are the last ones (or every one). `moved(entity, row)` is told each entity
    /// that moved and its new row. Returns how many rows were removed.
    ///
    /// What removing many rows at once wants: [`World::despawn_batch`](crate::World::despawn_batch)
    /// of a whole table's worth of entities frees them without a single row move.
    ///
    /// If a value's `Drop` panics, the other marked values are still dropped and the rows still
    /// removed and compacted (while unwinding) before the panic continues (a second panicking
    /// `Drop` during that unwinding aborts the process, as for a `Vec`). `moved` is called once
    /// the table is whole again, so if it panics, the table is consistent and the entities it
    /// was not told about are those after it.
    ///
    /// # Panics
    /// When `marks` does not have exactly `len.div_ceil(64)` words, or marks a row `>= len`.
    pub fn remove_marked(&mut self, marks: &[u64], moved: impl FnMut(Entity, usize)) -> usize {
        let len = self.len();
        assert_eq!(marks.len(), len.div_ceil(64), "one bit per row");
        assert!(
            len.is_multiple_of(64) || marks.last().is_none_or(|&w| w >> (len % 64) == 0),
            "a marked row past the end"
        );
        let count: usize = marks.iter().map(|w| w.count_ones() as usize).sum();
        let mut sweep = Sweep { table: self, marks, moved, col: 0, row: 0, compacted: false };
        sweep.run();
        count
    }

    /// Moves `row` into `dst`, in one step that cannot be left half done:
    /// - components both tables have move across, with their ticks;
    /// - each component `dst` lacks is handed to `taken(id, ptr)`, which takes ownership of the
    ///   value behind `ptr` and must move it out (read it, to keep or drop) before it returns:
    ///   the slot is reused at once, when the last row moves into `row`'s place;
    /// - each component this table lacks is read from `missing(id)`, added at `tick`;
    /// - then the last row moves into `row`'s place.
    ///
    /// On error nothing changed and neither callback was called.
    ///
    /// # Safety
    /// - `row < len`.
    /// - `dst` was built from the same registry as `self`, and is not `self`.
    /// - `taken` and `missing` must not unwind; `ptr` is valid only during its `taken` call
    ///   (a pointer kept past it points to another row's value, or to no value);
    ///   `missing(id)` returns a pointer to a valid value of `id`'s type, which the caller then
    ///   treats as moved.
    pub unsafe fn move_row(
        &mut self,
        row: usize,
        dst: &mut Table,
        tick: u32,
        mut taken: impl FnMut(ComponentId, *mut u8),
        mut missing: impl FnMut(ComponentId) -> *const u8,
    ) -> Result<MovedRow, StorageError> {
        debug_assert!(row < self.len());
        dst.try_reserve(1)?;
        let map = ColumnMap::new(self, dst);
        let src_ids = self.ids.clone();
        // SAFETY:
        // - `row < len`, `dst` is another table of the same registry (caller); `map` was just
        //   made for this pair; one row was reserved in `dst`.
        // - `taken` takes ownership, moving the value out during the call, and does not unwind
        //   (caller).
        // - `fill` writes `missing(id)`'s value (valid for `id`'s type, moved, caller) into the
        //   slot of each column `dst` has and `self` lacks, and does not unwind.
        Ok(unsafe {
            self.move_row_mapped(
                row,
                dst,
                &map,
                tick,
                |col, ptr| taken(src_ids[col], ptr),
                |dst, new_row| {
                    for &d in map.dst_new.iter() {
                        let d = d as usize;
                        let src = missing(dst.ids[d]);
                        let size = dst.columns[d].data.item_layout().size();
                        let slot = dst.data_slot(d, new_row);
                        std::ptr::copy_nonoverlapping(src, slot, size);
                    }
                },
            )
        })
    }

    /// [`Table::move_row`] with the column map computed beforehand (once per graph edge) and
    /// room reserved by the caller, so it cannot fail and searches nothing:
    /// - columns both tables have move across with their ticks;
    /// - each source column `dst` lacks hands its value to `taken(col, ptr)`;
    /// - `fill(dst, new_row)` writes the values of the columns `self` lacks
    ///   (`map.dst_new`) with [`Table::data_slot`]; they get `tick` as added and changed tick;
    /// - the last row moves into `row`'s place.
    ///
    /// # Safety
    /// - `row < len`.
    /// - `dst` is not `self`, was built from the same registry, and `map` is
    ///   `ColumnMap::new(self, dst)`.
    /// - `dst.try_reserve(1)` succeeded since `dst`'s length last changed.
    /// - `taken(col, ptr)` takes ownership of the value behind `ptr` (of source column `col`'s
    ///   type), moves it out before it returns (the slot is reused right after) and must not
    ///   unwind.
    /// - `fill` writes a valid value of each `map.dst_new` column's type into its slot at
    ///   `new_row`, which `dst` then owns, and must not unwind.
    pub(crate) unsafe fn move_row_mapped(
        &mut self,
        row: usize,
        dst: &mut Table,
        map: &ColumnMap,
        tick: u32,
        mut taken: impl FnMut(usize, *mut u8),
        fill: impl FnOnce(&mut Table, usize),
    ) -> MovedRow {
        let len = self.len();
        debug_assert!(row < len);
        debug_assert_eq!(map.src_to_dst.len(), self.columns.len());
        let last = len - 1;
        let new_row = dst.len();
        debug_assert!(new_row < dst.cap, "room was reserved");
        let entity = self.entities()[row];
        let swapped_in = (row < last).then(|| self.entities()[last]);
        for (i, (column, &d)) in self.columns.iter_mut().zip(map.src_to_dst.iter()).enumerate() {
            let size = column.data.item_layout().size();
            // SAFETY: `row < last + 1 = len <= capacity`, so both slots are inside the buffer.
            let (src, tail) = unsafe {
                (column.data.get_unchecked(row).as_ptr(), column.data.get_unchecked(last).as_ptr())
            };
            if d == ColumnMap::NONE {
                // The value's ownership passes to `taken`, which moves it out before returning
                // (caller's contract): the slot is overwritten just below.
                taken(i, src);
            } else {
                // SAFETY: `row < len` (caller).
                let (added, changed) = unsafe { column.ticks(row) };
                // SAFETY: `d` is an index into `dst.columns` (made by `ColumnMap::new`).
                let target = unsafe { dst.columns.get_unchecked_mut(d as usize) };
                // SAFETY:
                // - `src` is the live value at `row`; the slot at `new_row < dst.cap` is inside
                //   the target's buffer, in another table, so they do not overlap; the same id in
                //   the same registry is the same type, so the sizes agree.
                // - `new_row < dst.cap` for the tick columns too.
                unsafe {
                    copy_item(src, target.data.get_unchecked(new_row).as_ptr(), size);
                    target.write_ticks(new_row, added, changed);
                }
            }
            if row < last {
                // SAFETY: `row < last < len`: two distinct live slots; the value at `row` was
                // moved out above, the one at `last` moves (not copies) over it.
                unsafe { copy_item(tail, src, size) };
            }
            // SAFETY:
            // - `last < len`: the data column now holds `[0, last)` live values (the slot at
            //   `last` was moved into `row`, or was `row`'s, moved out).
            // - `row < len` for the ticks.
            unsafe {
                column.data.set_len(last);
                column.swap_remove_ticks(row);
            }
        }
        fill(dst, new_row);
        for &d in map.dst_new.iter() {
            // SAFETY: `d` indexes `dst.columns`; `new_row < dst.cap`.
            unsafe { dst.columns.get_unchecked_mut(d as usize).write_ticks(new_row, tick, tick) };
        }
        // SAFETY: `row < len`; the column holds `Entity`s.
        unsafe { self.entities.swap_remove_copy::<Entity>(row) };
        // SAFETY:
        // - `new_row < dst.cap`: room was reserved (caller).
        // - every `dst` column's slot at `new_row` was written: the shared ones moved above, the
        //   new ones by `fill` (caller).
        unsafe { dst.commit_row_ticks_written(entity, new_row) };
        MovedRow { new_row, swapped_in }
    }

    /// Moves the last `n` rows to the end of `dst`, in order, one copy per column instead of
    /// one per row and column: what a batch whose entities are a table's last rows does (see
    /// [`World::insert_batch`](crate::World::insert_batch)). With the column map computed
    /// beforehand and room reserved by the caller, it cannot fail:
    /// - columns both tables have move across with their ticks;
    /// - each source column `dst` lacks hands its first moved value to `taken(col, ptr)`
    ///   (the `n` values follow it, one item size apart);
    /// - `fill(dst, first)` writes rows `first..first + n` of the columns `self` lacks
    ///   (`map.dst_new`) with [`Table::data_slot`]; they get `tick` as added and changed tick.
    ///
    /// Returns `first`, the moved rows' first index in `dst`.
    ///
    /// # Safety
    /// - `n <= len`.
    /// - `dst` is not `self`, was built from the same registry, and `map` is
    ///   `ColumnMap::new(self, dst)`.
    /// - `dst.try_reserve(n)` succeeded since `dst`'s length last changed.
    /// - `taken(col, ptr)` takes ownership of the `n` values from `ptr` on (of source column
    ///   `col`'s type) and must not unwind.
    /// - `fill` writes a valid value of each `map.dst_new` column's type into each of its slots
    ///   `first..first + n`, which `dst` then owns, and must not unwind.
    pub(crate) unsafe fn move_tail_mapped(
        &mut self,
        n: usize,
        dst: &mut Table,
        map: &ColumnMap,
        tick: u32,
        mut taken: impl FnMut(usize, *mut u8),
        fill: impl FnOnce(&mut Table, usize),
    ) -> usize {
        let len = self.len();
        debug_assert!(n <= len);
        debug_assert_eq!(map.src_to_dst.len(), self.columns.len());
        let start = len - n;
        let first = dst.len();
        debug_assert!(n <= dst.cap - first, "room was reserved");
        for (i, (column, &d)) in self.columns.iter_mut().zip(map.src_to_dst.iter()).enumerate() {
            let size = column.data.item_layout().size();
            // SAFETY: `start <= len <= capacity`: inside the buffer, or one past its end when
            // `n == 0`.
            let src = unsafe { column.data.get_unchecked(start).as_ptr() };
            if d == ColumnMap::NONE {
                // The values' ownership passes to `taken` (caller's contract).
                taken(i, src);
            } else {
                // SAFETY: `d` is an index into `dst.columns` (made by `ColumnMap::new`).
                let target = unsafe { dst.columns.get_unchecked_mut(d as usize) };
                // SAFETY:
                // - rows `start..len` are live in the source's data and tick columns; slots
                //   `first..first + n` are inside the target's buffers (`first + n <= dst.cap`,
                //   caller), in another table, so the ranges do not overlap.
                // - the same id in the same registry is the same type: the sizes agree, and
                //   tick columns hold `u32`s on both sides.
                // - the source values are moved, not copied: its length drops below them next.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src,
                        target.data.get_unchecked(first).as_ptr(),
                        n * size,
                    );
                    std::ptr::copy_nonoverlapping(
                        tick_slot(&column.added, start),
                        tick_slot(&target.added, first),
                        n,
                    );
                    std::ptr::copy_nonoverlapping(
                        tick_slot(&column.changed, start),
                        tick_slot(&target.changed, first),
                        n,
                    );
                }
            }
            // SAFETY: `start <= len`; rows `start..len` were moved out (or handed to `taken`).
            unsafe { column.set_len(start) };
        }
        fill(dst, first);
        for &d in map.dst_new.iter() {
            // SAFETY: `d` indexes `dst.columns`; `first + n <= dst.cap`.
            unsafe { dst.columns.get_unchecked_mut(d as usize).fill_ticks(first, n, tick) };
        }
        // SAFETY:
        // - the entity columns hold `Entity`s; rows `start..len` are live in the source and
        //   slots `first..first + n` inside the target's buffer (`first + n <= dst.cap`).
        // - every target column's slots `first..first + n` were written (moved above or by
        //   `fill`, caller), so `[0, first + n)` is initialised in all of them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.entities.get_unchecked(start).cast::<Entity>().as_ptr(),
                dst.entities.get_unchecked(first).cast::<Entity>().as_ptr(),
                n,
            );
            self.entities.set_len(start);
            for column in dst.columns.iter_mut() {
                column.set_len(first + n);
            }
            dst.entities.set_len(first + n);
        }
        first
    }

    /// Appends `entity` at `row == len` once every column's value and ticks at `row` are
    /// written.
    ///
    /// # Safety
    /// - `row == len < cap`; every column's data and tick slots at `row` hold valid values.
    #[inline]
    unsafe fn commit_row_ticks_written(&mut self, entity: Entity, row: usize) {
        debug_assert!(row == self.len() && row < self.cap);
        for column in self.columns.iter_mut() {
            // SAFETY: `[0, row + 1)` is initialised in all three columns (caller).
            unsafe { column.set_len(row + 1) };
        }
        // SAFETY:
        // - `row < cap <= capacity` of the entity column; its slots are aligned for `Entity`.
        // - after the write `[0, row + 1)` is initialised.
        unsafe {
            self.entities.get_unchecked(row).cast::<Entity>().as_ptr().write(entity);
            self.entities.set_len(row + 1);
        }
    }

    /// Bytes `(reserved, committed, used)` over all the table's columns.
    pub fn memory(&self) -> (usize, usize, usize) {
        let mut total = self.entities.memory();
        for c in self.columns.iter() {
            for col in [&c.data, &c.added, &c.changed] {
                let (r, m, u) = col.memory();
                total = (total.0 + r, total.1 + m, total.2 + u);
            }
        }
        total
    }

    /// Drops every row.
    ///
    /// If a component's `Drop` panics, every column is still emptied (each value dropped once)
    /// before the panic continues.
    pub fn clear(&mut self) {
        // No user code runs here: the entities and ticks need no drop.
        self.entities.clear();
        for column in self.columns.iter_mut() {
            column.added.clear();
            column.changed.clear();
        }
        // Each column drops all its values even if one panics; the other columns follow.
        for_each_finishing(self.columns.iter_mut(), |column| column.data.clear());
    }
}

/// The next row at or after `from` whose bit in `marks` is `set`, if any below `len`.
#[inline]
fn next_row(marks: &[u64], from: usize, set: bool, len: usize) -> Option<usize> {
    let flip = if set { 0 } else { u64::MAX };
    let mut word = from / 64;
    let mut bits = (*marks.get(word)? ^ flip) & (u64::MAX << (from % 64));
    loop {
        if bits != 0 {
            let row = word * 64 + bits.trailing_zeros() as usize;
            return (row < len).then_some(row);
        }
        word += 1;
        bits = *marks.get(word)? ^ flip;
    }
}

/// [`Table::remove_marked`]'s work, resumable: dropping the marked values column by column
/// (`col`, and `row`, the next row to look at), then compacting. Its `Drop` finishes the work,
/// so a panicking value `Drop` leaves no value undropped or row half removed.
struct Sweep<'a, F: FnMut(Entity, usize)> {
    table: &'a mut Table,
    marks: &'a [u64],
    moved: F,
    col: usize,
    row: usize,
    compacted: bool,
}

impl<F: FnMut(Entity, usize)> Sweep<'_, F> {
    fn run(&mut self) {
        let len = self.table.len();
        while self.col < self.table.columns.len() {
            let data = &self.table.columns[self.col].data;
            if let Some(drop) = data.drop_fn() {
                while let Some(row) = next_row(self.marks, self.row, true, len) {
                    // The cursor moves first: a value whose drop panics is not dropped again.
                    self.row = row + 1;
                    // SAFETY: `row < len`: a live value of the column's type, dropped once (the
                    // cursor passes each marked row once), and never read again: the row is
                    // removed or overwritten below.
                    unsafe { drop(data.get_unchecked(row).as_ptr()) };
                }
            }
            self.col += 1;
            self.row = 0;
        }
        if !self.compacted {
            self.compacted = true;
            self.compact(len);
        }
    }

    /// Moves the unmarked rows at or above the new length into the marked rows below it (whose
    /// values are dropped), then sets every column's length. Runs no user code.
    fn compact(&mut self, len: usize) {
        let count: usize = self.marks.iter().map(|w| w.count_ones() as usize).sum();
        let new_len = len - count;
        let table = &mut *self.table;
        let (mut hole, mut keep) = (0, new_len);
        while let Some(h) = next_row(self.marks, hole, true, new_len) {
            // As many rows stay at or above `new_len` as are marked below it.
            let k = next_row(self.marks, keep, false, len).expect("a row that stays for each hole");
            (hole, keep) = (h + 1, k + 1);
            for column in table.columns.iter_mut() {
                let size = column.data.item_layout().size();
                // SAFETY:
                // - `h < new_len <= k < len`: two distinct slots of the column; the value at `h`
                //   was dropped above, the one at `k` moves (not copies) into it, as its length
                //   drops below `k` next.
                // - the tick columns hold `u32`s; both rows are below their length.
                unsafe {
                    copy_item(
                        column.data.get_unchecked(k).as_ptr(),
                        column.data.get_unchecked(h).as_ptr(),
                        size,
                    );
                    let (added, changed) = column.ticks(k);
                    column.write_ticks(h, added, changed);
                }
            }
            let entity = table.entities()[k];
            // SAFETY: `h < len`, in the entity column of `Entity`s.
            unsafe { table.entities.get_unchecked(h).cast::<Entity>().as_ptr().write(entity) };
        }
        for column in table.columns.iter_mut() {
            // SAFETY: `[0, new_len)` holds live values and ticks: the rows that stayed below it,
            // and the ones moved into its holes; every removed value was dropped or moved out.
            unsafe { column.set_len(new_len) };
        }
        // SAFETY: as above, for the entity column.
        unsafe { table.entities.set_len(new_len) };
        // Only now, with the table whole, is the caller told: `moved` is the caller's code, and
        // if it unwinds, nothing is left half done (the guard sees the work finished).
        let mut hole = 0;
        while let Some(h) = next_row(self.marks, hole, true, new_len) {
            hole = h + 1;
            (self.moved)(table.entities()[h], h);
        }
    }
}

impl<F: FnMut(Entity, usize)> Drop for Sweep<'_, F> {
    fn drop(&mut self) {
        self.run();
    }
}

#[cfg(test)]
mod tests;
