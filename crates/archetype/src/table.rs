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

use folio_storage::{Column, Entity, StorageError};

use crate::bundle::ComponentIds;
use crate::component::{ComponentId, Components};

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
    fn new(components: &Components, id: ComponentId) -> Self {
        let info = components.info(id);
        Self {
            // SAFETY: the registry records the layout and drop fn of one `Component` type,
            // which is `Send + Sync`.
            data: unsafe { Column::new(info.layout(), info.drop_fn()) },
            added: Column::of::<u32>(),
            changed: Column::of::<u32>(),
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

    /// # Safety
    /// - `try_reserve(1)` succeeded since the last push.
    /// - `src` points to a valid value of the column's component type, which the caller treats as
    ///   moved.
    unsafe fn push_unchecked(&mut self, src: *const u8, added: u32, changed: u32) {
        // SAFETY:
        // - room for one more item in each column was reserved (caller).
        // - `src` is a value of the data column's type; the ticks are `u32`s on the stack.
        unsafe {
            self.data.push_unchecked(src);
            self.added.push_unchecked((&added as *const u32).cast());
            self.changed.push_unchecked((&changed as *const u32).cast());
        }
    }

    fn ticks(&self, row: usize) -> (u32, u32) {
        (self.added_ticks()[row], self.changed_ticks()[row])
    }

    /// Swap-removes the ticks of `row`.
    ///
    /// # Safety
    /// - `row < len`.
    unsafe fn swap_remove_ticks(&mut self, row: usize) {
        // SAFETY: `row < len` (caller); `u32`s need no drop.
        unsafe {
            self.added.swap_remove_and_drop_unchecked(row);
            self.changed.swap_remove_and_drop_unchecked(row);
        }
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
}

impl Table {
    /// An empty table for the sorted, distinct component ids `ids`, all registered in
    /// `components` with table storage.
    pub fn new(components: &Components, ids: &[ComponentId]) -> Self {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids must be sorted and distinct");
        Self {
            ids: ids.into(),
            columns: ids.iter().map(|&id| TableColumn::new(components, id)).collect(),
            entities: Column::of::<Entity>(),
        }
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
    pub fn try_reserve(&mut self, additional: usize) -> Result<(), StorageError> {
        self.entities.try_reserve(additional)?;
        self.columns.iter_mut().try_for_each(|c| c.try_reserve(additional))
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
        for (id, column) in self.ids.iter().zip(self.columns.iter_mut()) {
            // SAFETY:
            // - one more item was reserved in every column above.
            // - `value(id)` is a valid value of `id`'s type, moved to us (caller).
            unsafe { column.push_unchecked(value(*id), tick, tick) };
        }
        // SAFETY: reserved above; `entity` is an `Entity` on the stack.
        unsafe { self.entities.push_unchecked((&entity as *const Entity).cast()) };
        Ok(row)
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
                    // SAFETY: `row < len`, and the entity is removed once; `Entity` needs no drop.
                    unsafe { self.table.entities.swap_remove_and_drop_unchecked(self.row) };
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

    /// Moves `row` into `dst`, in one step that cannot be left half done:
    /// - components both tables have move across, with their ticks;
    /// - each component `dst` lacks is handed to `taken(id, ptr)`, which takes ownership of the
    ///   value behind `ptr` (moves it out, or keeps it to drop once the move is over);
    /// - each component this table lacks is read from `missing(id)`, added at `tick`;
    /// - then the last row moves into `row`'s place.
    ///
    /// On error nothing changed and neither callback was called.
    ///
    /// # Safety
    /// - `row < len`.
    /// - `dst` was built from the same registry as `self`, and is not `self`.
    /// - `taken` and `missing` must not unwind; `missing(id)` returns a pointer to a valid value
    ///   of `id`'s type, which the caller then treats as moved.
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
        let len = self.len();
        let new_row = dst.len();
        let entity = self.entities()[row];
        let swapped_in = (row + 1 < len).then(|| self.entities()[len - 1]);
        for (id, column) in self.ids.iter().zip(self.columns.iter_mut()) {
            let (added, changed) = column.ticks(row);
            match dst.column_index(*id) {
                Some(d) => {
                    let target = &mut dst.columns[d];
                    // SAFETY:
                    // - `row < len`; the same id in the same registry is the same type.
                    // - room for one item was reserved in every `dst` column, so the push
                    //   inside cannot fail.
                    let moved = unsafe { column.data.swap_remove_into(row, &mut target.data) };
                    debug_assert!(moved.is_ok(), "room was reserved");
                    // SAFETY: reserved above; the ticks are `u32`s on the stack.
                    unsafe {
                        target.added.push_unchecked((&added as *const u32).cast());
                        target.changed.push_unchecked((&changed as *const u32).cast());
                    }
                }
                None => {
                    // SAFETY: `row < len`, so the pointer is to a live value.
                    let ptr = unsafe { column.data.get_unchecked(row) }.as_ptr();
                    taken(*id, ptr);
                    // SAFETY: `row < len`; the value now belongs to `taken`.
                    unsafe { column.data.swap_remove_forget_unchecked(row) };
                }
            }
            // SAFETY: `row < len`.
            unsafe { column.swap_remove_ticks(row) };
        }
        for (id, column) in dst.ids.iter().zip(dst.columns.iter_mut()) {
            if column.data.len() == new_row {
                // SAFETY:
                // - room was reserved; this column was not pushed above (its length is the old
                //   row count), so it is one this table lacks.
                // - `missing(id)` is a valid value of `id`'s type, moved to us (caller).
                unsafe { column.push_unchecked(missing(*id), tick, tick) };
            }
        }
        // SAFETY: `row < len`; `Entity` needs no drop. Reserved in `dst`; `entity` is on the stack.
        unsafe {
            self.entities.swap_remove_and_drop_unchecked(row);
            dst.entities.push_unchecked((&entity as *const Entity).cast());
        }
        Ok(MovedRow { new_row, swapped_in })
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
    pub fn clear(&mut self) {
        for column in self.columns.iter_mut() {
            column.data.clear();
            column.added.clear();
            column.changed.clear();
        }
        self.entities.clear();
    }
}

#[cfg(test)]
mod tests;
