//! [`ColumnBytes`]: a copy of a column's used bytes, and the [`Column`] methods that take one,
//! put one back, and move every item into another column. What a world snapshot is made of.
//!
//! # Safety model
//! Copying bytes out of a column is always sound: the bytes are kept as `MaybeUninit<u8>`
//! (padding may be uninitialised) and never read as values. Writing them back is `unsafe`: only
//! the column they were copied from, or one of the same type, may take them, and only for a type
//! whose bytes are a value wherever they are (`Copy`, no drop).

use std::mem::MaybeUninit;
use std::ptr;

use super::Column;
use crate::error::StorageError;

/// The used bytes of a column (`len` items, `len * item size` bytes), copied out with
/// [`Column::copy_bytes_into`] and written back with [`Column::restore_bytes_unchecked`].
#[derive(Clone, Debug, Default)]
pub struct ColumnBytes {
    /// `len * item size` bytes as copied; padding bytes may be uninitialised.
    bytes: Vec<MaybeUninit<u8>>,
    /// The items copied.
    len: usize,
}

impl ColumnBytes {
    /// The number of items copied.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item was copied.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of bytes copied (`len` times the item size).
    #[inline]
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }
}

/// Makes `out` a copy of `src`, reusing its allocation, without aborting when the heap refuses
/// (then `out` is empty).
///
/// # Errors
/// [`StorageError::Alloc`] when the heap refuses room for `src`.
pub fn try_copy_into<T: Copy>(src: &[T], out: &mut Vec<T>) -> Result<(), StorageError> {
    out.clear();
    out.try_reserve_exact(src.len()).map_err(|e| StorageError::alloc(src.len(), e))?;
    out.extend_from_slice(src);
    Ok(())
}

impl Column {
    /// Copies the used bytes (items `[0, len)`) into `out`, reusing its allocation: one
    /// `memcpy`. On error `out` is empty and the column unchanged.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses `out`'s buffer.
    pub fn copy_bytes_into(&self, out: &mut ColumnBytes) -> Result<(), StorageError> {
        let n = self.len * self.item_layout().size();
        out.bytes.clear();
        out.len = 0;
        out.bytes.try_reserve_exact(n).map_err(|e| StorageError::alloc(n, e))?;
        // SAFETY:
        // - the source is items `[0, len)`: `n` bytes inside the column's buffer (valid for
        //   reads of its capacity), or a dangling aligned pointer with `n == 0`.
        // - the destination has room for `n` bytes (reserved above) and is a separate heap
        //   block, so the two do not overlap; bytes are copied untyped, so uninitialised
        //   padding is copied as it is, into `MaybeUninit<u8>`s.
        unsafe {
            ptr::copy_nonoverlapping(
                self.as_ptr().as_ptr().cast::<MaybeUninit<u8>>(),
                out.bytes.as_mut_ptr(),
                n,
            );
        }
        // SAFETY: `n <= capacity`, and `MaybeUninit<u8>`s need no initialisation.
        unsafe { out.bytes.set_len(n) };
        out.len = self.len;
        Ok(())
    }

    /// Copies the items at `rows` into the same rows of `out`, which holds a copy of this
    /// column of the same length (from [`Column::copy_bytes_into`], the other rows possibly
    /// older): how a snapshot refreshes only the rows written since it was taken.
    ///
    /// # Panics
    /// When `out` does not hold as many items as the column, of its size, or a row is out of
    /// bounds: `out` must be a copy of this column, taken while it had its current length.
    #[track_caller]
    pub fn copy_rows_into(&self, out: &mut ColumnBytes, rows: &[u32]) {
        let size = self.item_layout().size();
        assert!(
            out.len == self.len && out.bytes.len() == self.len * size,
            "copy_rows_into: `out` is not a copy of this column at its current length; copy \
             the whole column with `copy_bytes_into` first"
        );
        let src = self.as_ptr().as_ptr().cast::<MaybeUninit<u8>>();
        let dst = out.bytes.as_mut_ptr();
        for &row in rows {
            let row = row as usize;
            assert!(row < self.len, "copy_rows_into: row {row} out of {} rows", self.len);
            // SAFETY:
            // - `row < len`: the source is item `row`, `size` bytes inside the column's
            //   buffer; the destination is the same `size` bytes of `out`'s `len * size`.
            // - `out` is its own heap block, apart from the column's buffer; bytes are copied
            //   untyped into `MaybeUninit<u8>`s, padding as it is.
            unsafe { ptr::copy_nonoverlapping(src.add(row * size), dst.add(row * size), size) };
        }
    }

    /// [`Column::copy_bytes_into`] a new [`ColumnBytes`].
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses the buffer.
    pub fn copy_bytes(&self) -> Result<ColumnBytes, StorageError> {
        let mut out = ColumnBytes::default();
        self.copy_bytes_into(&mut out)?;
        Ok(out)
    }

    /// Replaces the items with the items of `bytes`: one `memcpy`. The current items are
    /// overwritten, not dropped.
    ///
    /// # Safety
    /// - The column's type is plain data: it has no drop fn, and a byte copy of one of its
    ///   values is a value (`Copy` types are).
    /// - `bytes` was copied from a column of that type.
    /// - `bytes.len() <= capacity()` (call [`Column::try_reserve`] first).
    pub unsafe fn restore_bytes_unchecked(&mut self, bytes: &ColumnBytes) {
        debug_assert!(self.drop.is_none(), "plain data has no drop");
        debug_assert!(bytes.len <= self.capacity());
        debug_assert_eq!(bytes.bytes.len(), bytes.len * self.item_layout().size());
        // SAFETY:
        // - the destination is items `[0, bytes.len)`: inside the buffer, as
        //   `bytes.len <= capacity` (caller), which is valid for writes of its capacity.
        // - the source is `bytes`' own heap block, apart from the column's buffer.
        // - the bytes were copied from values of the column's type, and a byte copy of such a
        //   value is a value (caller), so items `[0, bytes.len)` are initialised afterwards.
        unsafe {
            ptr::copy_nonoverlapping(
                bytes.bytes.as_ptr(),
                self.as_ptr().as_ptr().cast::<MaybeUninit<u8>>(),
                bytes.bytes.len(),
            );
        }
        self.len = bytes.len;
    }

    /// Moves every item to the end of `dst`, leaving this column empty: one `memcpy`, nothing
    /// dropped. Where a caller parks values to drop once its bookkeeping is done.
    ///
    /// # Safety
    /// - `dst` holds the same type as this column.
    /// - `dst.capacity() - dst.len() >= self.len()` (call [`Column::try_reserve`] first).
    pub unsafe fn move_all_into_unchecked(&mut self, dst: &mut Column) {
        debug_assert_eq!(self.item_layout(), dst.item_layout());
        debug_assert!(dst.capacity() - dst.len() >= self.len);
        let n = self.len * self.item_layout().size();
        // SAFETY:
        // - the source is items `[0, len)` of this column, inside its buffer.
        // - the destination is `dst`'s slots `[dst.len, dst.len + len)`, inside its buffer
        //   (room was made, caller); two columns never share a buffer (`&mut` to both).
        // - both hold one type (caller), so the moved bytes are values of `dst`'s type.
        unsafe {
            ptr::copy_nonoverlapping(self.as_ptr().as_ptr(), dst.row_ptr(dst.len), n);
        }
        dst.len += self.len;
        // The values now belong to `dst`: forgotten here.
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(align(64))]
    struct Wide(u8, u32);

    fn push<T: Send + Sync>(column: &mut Column, value: T) {
        let value = std::mem::ManuallyDrop::new(value);
        // SAFETY: a `T` for a column of `T`s, treated as moved (never dropped here).
        unsafe { column.try_push((&raw const *value).cast()).unwrap() };
    }

    #[test]
    fn bytes_round_trip_plain_zero_sized_and_over_aligned_items() {
        let mut wide = Column::of::<Wide>();
        let mut unit = Column::of::<()>();
        for i in 0..100u32 {
            push(&mut wide, Wide(i as u8, i));
            push(&mut unit, ());
        }
        let (w, u) = (wide.copy_bytes().unwrap(), unit.copy_bytes().unwrap());
        assert_eq!((w.len(), w.byte_len(), u.len(), u.byte_len()), (100, 6400, 100, 0));
        wide.clear();
        push(&mut wide, Wide(9, 9));
        unit.clear();
        wide.try_reserve(100).unwrap();
        unit.try_reserve(100).unwrap();
        // SAFETY: `Wide` and `()` are `Copy`; the bytes are these columns'; room was made.
        unsafe {
            wide.restore_bytes_unchecked(&w);
            unit.restore_bytes_unchecked(&u);
        }
        assert_eq!(unit.len(), 100);
        // SAFETY: the column holds `Wide`s.
        let items = unsafe { wide.as_slice::<Wide>() };
        assert!(items.iter().enumerate().all(|(i, w)| *w == Wide(i as u8, i as u32)));
        // Reusing the buffer: the same bytes again.
        let mut again = w.clone();
        wide.copy_bytes_into(&mut again).unwrap();
        assert_eq!(again.byte_len(), 6400);
    }

    #[test]
    fn move_all_into_moves_each_value_once() {
        let mut column = Column::of::<String>();
        for i in 0..10 {
            push(&mut column, i.to_string());
        }
        let mut grave = Column::of::<String>();
        push(&mut grave, "first".to_string());
        grave.try_reserve(column.len()).unwrap();
        // SAFETY: both hold `String`s; room was made.
        unsafe { column.move_all_into_unchecked(&mut grave) };
        assert!(column.is_empty());
        // SAFETY: the column holds `String`s.
        let moved = unsafe { grave.as_slice::<String>() };
        assert_eq!(moved.len(), 11);
        assert_eq!(moved[0], "first");
        assert_eq!(moved[10], "9");
        // Both drop here: every `String` once (miri checks there is no double free or leak).
    }
}
