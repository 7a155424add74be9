//! [`Table`]: the rows of every entity that has one combination of table-stored components (its
//! layout is on [`Table`]'s docs).
//!
//! # Safety model
//! Every column (entities, data, ticks) has exactly `len` items, outside of a method's body. Each
//! data column holds values of the component type its id names in the registry the table was
//! built from. A panicking component `Drop` during removal cannot break the first fact: a guard
//! finishes the removal in every remaining column.

use std::ptr::NonNull;

use folio_storage::{Column, Entity, StorageConfig, StorageError, copy_item};

use crate::bundle::ComponentIds;
use crate::component::{ComponentId, Components};
use crate::try_alloc::{box_slice, small_vec};
use crate::unwind::for_each_finishing;
use crate::version::Version;

mod moves;
mod snapshot;

pub(crate) use moves::ColumnMap;
pub use moves::MovedRow;
pub(crate) use snapshot::{ChangedSince, TableRestore};

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

/// The rows of all entities with one set of table-stored components.
///
/// A table holds one [`Column`] per component (sorted by [`ComponentId`]), an entity column, and
/// per component two tick columns (the tick it was added at and last changed at). Rows are dense:
/// removal swap-removes, so iteration is a linear walk over column slices. Every column follows
/// the storage layer's small-column policy: a near-empty table costs a few heap bytes, a large one
/// lives in reservations that grow (moving without copying) as it fills.
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
    /// Names the table's rows as they are (which entity in which row, and how many). Two equal
    /// versions mean the same rows (values aside, which their changed ticks track): what lets
    /// a snapshot refresh only the rows written since.
    version: Version,
}

impl Table {
    /// An empty table for the sorted, distinct component ids `ids`, all registered in
    /// `components` with table storage.
    pub fn new(components: &Components, ids: &[ComponentId]) -> Self {
        Self::with_config(components, ids, &StorageConfig::new())
    }

    /// An empty table like [`Table::new`], whose columns take their pages from `config`.
    ///
    /// # Panics
    /// When the heap refuses the table's column list ([`Table::try_with_config`] says so
    /// instead).
    pub fn with_config(
        components: &Components,
        ids: &[ComponentId],
        config: &StorageConfig,
    ) -> Self {
        Self::try_with_config(components, ids, config)
            .unwrap_or_else(|e| panic!("Table::with_config: {e}"))
    }

    /// An empty table like [`Table::with_config`], or the typed error when the heap refuses
    /// its column list.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses; nothing was made.
    pub fn try_with_config(
        components: &Components,
        ids: &[ComponentId],
        config: &StorageConfig,
    ) -> Result<Self, StorageError> {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids must be sorted and distinct");
        Ok(Self {
            ids: small_vec(ids.len(), ids.iter().copied())?,
            columns: box_slice(ids.iter().map(|&id| TableColumn::new(components, id, config)))?,
            entities: config.column_of::<Entity>(),
            cap: 0,
            version: Version::new(),
            needs_drop: ids.iter().any(|&id| components.info(id).drop_fn().is_some()),
        }
        .with_capacity_recorded())
    }

    fn with_capacity_recorded(mut self) -> Self {
        self.cap = self.capacity_now();
        self
    }

    /// The smallest capacity over every column.
    fn capacity_now(&self) -> usize {
        self.columns.iter().fold(self.entities.capacity(), |cap, c| cap.min(c.capacity()))
    }

    /// Marks a change of the rows: a fresh [`Table::version`].
    #[inline]
    fn touch(&mut self) {
        self.version.touch();
    }

    /// The version of the table's rows: it changes whenever a row is added, removed or moved
    /// (never when a value is written in place; the changed ticks say that), and a restore
    /// puts back the one the snapshot recorded.
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version.get()
    }

    /// Restores a version a snapshot recorded ([`Table::version`]); `None`: a fresh one.
    pub(crate) fn set_version(&mut self, version: Option<u64>) {
        self.version.set(version);
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
        let ids = self.ids.as_slice();
        // Most tables have a handful of columns: a scan is fewer instructions and branches
        // than a binary search there (every `get` and every archetype a query visits pays it).
        if ids.len() <= 8 {
            return ids.iter().position(|&c| c == id);
        }
        ids.binary_search(&id).ok()
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
        self.touch();
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

    /// Where a batch of rows is written before [`Table::commit_rows`]: the first item of the
    /// `col`th column (in column order). Row `r` of that column is `r` items of the column's
    /// type on from it. (One column at a time: a list of every column's would spill to the
    /// heap past 8 columns.)
    ///
    /// The pointer stays valid until the table is next reserved, cleared or shrunk; the slots
    /// from `len` to `len + spare_rows()` may be written through it.
    ///
    /// # Panics
    /// When `col` is not a column index.
    pub(crate) fn row_base(&mut self, col: usize) -> *mut u8 {
        // SAFETY: row 0 is at most the capacity, so the pointer is the buffer's start.
        unsafe { self.columns[col].data.get_unchecked(0) }.as_ptr()
    }

    /// The entity column's first slot, as [`Table::row_base`] gives a column's.
    pub(crate) fn entity_base(&mut self) -> *mut Entity {
        // SAFETY: row 0 is at most the capacity, so the pointer is the buffer's start.
        unsafe { self.entities.get_unchecked(0) }.cast::<Entity>().as_ptr()
    }

    /// Appends rows `len..len + n`, whose values and entities were written through
    /// [`Table::row_base`] and [`Table::entity_base`]: each component's added and changed ticks become `tick`, written as
    /// one fill per tick column instead of two stores per row and component.
    ///
    /// # Safety
    /// - `n <= spare_rows()`.
    /// - For every column, the slots of those rows hold valid values of the column's type,
    ///   which the table now owns, and the entity column's slots hold their entities.
    pub(crate) unsafe fn commit_rows(&mut self, n: usize, tick: u32) {
        self.touch();
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
    #[track_caller]
    pub fn swap_remove_and_drop(&mut self, row: usize) -> Option<Entity> {
        let len = self.len();
        assert!(row < len, "row {row} out of bounds (table of {len} rows)");
        self.touch();
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
    #[track_caller]
    pub fn remove_marked(&mut self, marks: &[u64], moved: impl FnMut(Entity, usize)) -> usize {
        let len = self.len();
        assert_eq!(marks.len(), len.div_ceil(64), "one bit per row");
        assert!(
            len.is_multiple_of(64) || marks.last().is_none_or(|&w| w >> (len % 64) == 0),
            "a marked row past the end"
        );
        let count: usize = marks.iter().map(|w| w.count_ones() as usize).sum();
        self.touch();
        let mut sweep = Sweep { table: self, marks, moved, col: 0, row: 0, compacted: false };
        sweep.run();
        count
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

    /// Every column: the entity column, then each component's values and tick columns.
    pub fn all_columns(&self) -> impl Iterator<Item = &Column> {
        std::iter::once(&self.entities)
            .chain(self.columns.iter().flat_map(|c| [&c.data, &c.added, &c.changed]))
    }

    /// Drops every row.
    ///
    /// If a component's `Drop` panics, every column is still emptied (each value dropped once)
    /// before the panic continues.
    pub fn clear(&mut self) {
        self.touch();
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
