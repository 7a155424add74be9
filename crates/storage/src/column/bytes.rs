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
