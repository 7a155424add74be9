//! Moving rows between tables: the column maps computed once per archetype-graph edge, the
//! single-row and block moves a structural change makes, and [`MovedRow`], what a move reports.

use folio_storage::{Entity, StorageError, copy_item};

use super::{Table, tick_slot};
use crate::component::ComponentId;
use crate::try_alloc::{box_slice, vec_with_capacity};

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
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses one of its two lists.
    pub(crate) fn try_new(src: &Table, dst: &Table) -> Result<Self, StorageError> {
        let src_to_dst = box_slice(
            src.ids.iter().map(|&id| dst.column_index(id).map_or(Self::NONE, |i| i as u32)),
        )?;
        let new = |i: &u32| src.column_index(dst.ids[*i as usize]).is_none();
        let mut dst_new = vec_with_capacity((0..dst.ids.len() as u32).filter(new).count())?;
        dst_new.extend((0..dst.ids.len() as u32).filter(new));
        let dst_new = dst_new.into_boxed_slice();
        Ok(Self { src_to_dst, dst_new })
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

impl Table {
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
        missing: impl FnMut(ComponentId) -> *const u8,
    ) -> Result<MovedRow, StorageError> {
        debug_assert!(row < self.len());
        dst.try_reserve(1)?;
        let map = ColumnMap::try_new(self, dst)?;
        let src_ids: crate::bundle::ComponentIds =
            crate::try_alloc::small_vec(self.ids.len(), self.ids.iter().copied())?;
        // SAFETY: `row < len`, `dst` is another table of the same registry (caller); `map`
        // was just made for this pair; one row was reserved in `dst` since its length last
        // changed; `taken` (given the column's index, handed its component id here) and
        // `missing` are the caller's, under the same contract.
        Ok(unsafe {
            self.move_row_with_map(
                row,
                dst,
                &map,
                tick,
                |col, ptr| taken(src_ids[col], ptr),
                missing,
            )
        })
    }

    /// [`Table::move_row`] with the column map made beforehand and room reserved by the
    /// caller, so it allocates nothing and cannot fail: what a structural change that must not
    /// fail halfway uses once it has made the map (fallibly) and reserved the row.
    ///
    /// # Safety
    /// - `row < len`.
    /// - `dst` is not `self`, was built from the same registry, and `map` is
    ///   `ColumnMap::try_new(self, dst)`.
    /// - `dst.try_reserve(1)` succeeded since `dst`'s length last changed.
    /// - `taken(col, ptr)` is as for [`Table::move_row_mapped`]; `missing(id)` returns a
    ///   pointer to a valid value of `id`'s type for each component `dst` has and `self`
    ///   lacks, which the caller then treats as moved; neither unwinds.
    pub(crate) unsafe fn move_row_with_map(
        &mut self,
        row: usize,
        dst: &mut Table,
        map: &ColumnMap,
        tick: u32,
        taken: impl FnMut(usize, *mut u8),
        mut missing: impl FnMut(ComponentId) -> *const u8,
    ) -> MovedRow {
        // SAFETY:
        // - `row < len`; `dst` and `map` as the caller says; one row was reserved in `dst`.
        // - `taken` is the caller's, under the same contract.
        // - `fill` writes `missing(id)`'s value (valid for `id`'s type, moved, caller) into the
        //   slot of each column `dst` has and `self` lacks, and does not unwind.
        unsafe {
            self.move_row_mapped(row, dst, map, tick, taken, |dst, new_row| {
                for &d in map.dst_new.iter() {
                    let d = d as usize;
                    let src = missing(dst.ids[d]);
                    let size = dst.columns[d].data.item_layout().size();
                    let slot = dst.data_slot(d, new_row);
                    std::ptr::copy_nonoverlapping(src, slot, size);
                }
            })
        }
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
    ///   `ColumnMap::try_new(self, dst)`.
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
        self.touch();
        dst.touch();
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
                // SAFETY: `d` is an index into `dst.columns` (made by `ColumnMap::try_new`).
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
    ///   `ColumnMap::try_new(self, dst)`.
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
        self.touch();
        dst.touch();
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
                // SAFETY: `d` is an index into `dst.columns` (made by `ColumnMap::try_new`).
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
        self.touch();
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
}
