//! [`VirtualVec`]: a `Vec` on a reservation of address space, whose elements move only when it
//! outgrows its reservation, and never with a fixed one.

use std::alloc::Layout;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::error::StorageError;
use crate::raw::RawBuf;
use crate::vm::PageSource;

/// A dense, growable array on a reservation of address space.
///
/// The first push reserves address space (no memory, no commit charge) and commits its first
/// page; later pushes commit pages in place (see the crate's
/// [growth policy](crate#growth-policy) for the step policy and its worst-case waste of one 1 MiB
/// step). Past [`PREFAULT_FROM`](crate::vm::PREFAULT_FROM) (1 MiB) each commit is prefaulted in
/// one call instead of one page fault per page, so those pages are resident from the commit on
/// (see [`vm`](crate::vm), "Prefaulted commits"). With
/// [`OsPagesWith::HUGE`](crate::vm::OsPagesWith::HUGE) as the source, commits past 8 MiB are whole
/// 2 MiB huge pages (opt-in; see [`vm`](crate::vm), "Huge pages", for when they pay).
///
/// How much it reserves, and so when its elements move (see [`vm`](crate::vm), "Address-space
/// policy"):
/// - [`VirtualVec::new`] reserves 1 MiB, and moves into a reservation four times larger when it
///   outgrows it (on Linux the pages move, no element is copied): a pointer to an element stays
///   valid until the next push or reserve that grows the reservation.
/// - [`VirtualVec::with_max_capacity`] and [`VirtualVec::with_source`] reserve room for all
///   `max_len` elements on the first push: nothing ever moves, so a pointer to an element stays
///   valid until that element is removed, and no push stalls on a reallocation.
///
/// # Safety model
/// Elements `[0, len)` are initialised; `len <= buf.capacity()`. Every method keeps both facts,
/// also when an element's `Drop` panics (the length is lowered before elements are dropped).
pub struct VirtualVec<T> {
    buf: RawBuf,
    /// Elements `[0, len)` are initialised.
    len: usize,
    _marker: PhantomData<T>,
}

// SAFETY: a `VirtualVec<T>` owns its `T`s like a `Vec<T>` does.
unsafe impl<T: Send> Send for VirtualVec<T> {}
// SAFETY: `&VirtualVec<T>` gives out only `&T`.
unsafe impl<T: Sync> Sync for VirtualVec<T> {}

/// A failed [`VirtualVec::try_push`]: the value comes back with the reason.
#[derive(Debug)]
pub struct PushError<T> {
    /// The value that was not pushed.
    pub value: T,
    /// Why it was not pushed.
    pub error: StorageError,
}

impl<T> fmt::Display for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "push failed: {}", self.error)
    }
}

impl<T: fmt::Debug> std::error::Error for PushError<T> {}

impl<T> VirtualVec<T> {
    /// An empty array with a growing reservation: 1 MiB of address space on its first push
    /// ([`FIRST_RESERVE_BYTES`](crate::vm::FIRST_RESERVE_BYTES)), moving into larger ones as it
    /// fills, up to [`DEFAULT_RESERVE_BYTES`](crate::vm::DEFAULT_RESERVE_BYTES).
    pub fn new() -> Self {
        Self::from_buf(RawBuf::with_defaults(Layout::new::<T>(), 0))
    }

    /// An empty array that can hold at most `max_len` elements, reserved whole on the first
    /// push: its elements never move.
    pub fn with_max_capacity(max_len: usize) -> Self {
        Self::with_source(max_len, crate::vm::default_source())
    }

    /// An empty array of at most `max_len` elements whose pages come from `source`.
    pub fn with_source(max_len: usize, source: Arc<dyn PageSource>) -> Self {
        let bytes = max_len.saturating_mul(size_of::<T>());
        let mut buf = RawBuf::new(Layout::new::<T>(), 0, bytes, source);
        // Zero-sized elements take no bytes, so the byte limit alone would not bound them.
        buf.limit_zero_sized(max_len);
        Self::from_buf(buf)
    }

    /// An empty array of at most `max_len` elements that commits at most `step_bytes` at a time
    /// (instead of [`COMMIT_STEP_MAX`](crate::COMMIT_STEP_MAX)): a smaller step wastes less
    /// committed memory and makes more `mprotect` calls. Used to choose the default by benchmark.
    pub fn with_commit_step(max_len: usize, step_bytes: usize) -> Self {
        let mut v = Self::with_max_capacity(max_len);
        v.buf.set_step_max(step_bytes);
        v
    }

    fn from_buf(buf: RawBuf) -> Self {
        Self { buf, len: 0, _marker: PhantomData }
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many elements fit in the pages committed so far.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The most elements this array can ever hold.
    pub fn max_capacity(&self) -> usize {
        self.buf.max_capacity()
    }

    /// Bytes of address space reserved.
    pub fn reserved_bytes(&self) -> usize {
        self.buf.bytes().0
    }

    /// Bytes of memory committed.
    pub fn committed_bytes(&self) -> usize {
        self.buf.bytes().1
    }

    /// Appends `value`.
    ///
    /// # Panics
    /// When the reservation is full or the OS refuses to commit memory; [`Self::try_push`] returns
    /// the error instead.
    #[inline]
    #[track_caller]
    pub fn push(&mut self, value: T) {
        if let Err(e) = self.try_push(value) {
            panic!("VirtualVec::push: {}", e.error);
        }
    }

    /// Appends `value`, or gives it back with the reason it did not fit.
    #[inline]
    pub fn try_push(&mut self, value: T) -> Result<(), PushError<T>> {
        if let Err(error) = self.buf.reserve(self.len, 1) {
            return Err(PushError { value, error });
        }
        // SAFETY:
        // - `reserve` made room: `len < capacity`, so the slot is inside committed memory.
        unsafe { self.as_mut_ptr().add(self.len).write(value) };
        self.len += 1;
        Ok(())
    }

    /// Makes room for `additional` more elements, committing pages now; on error nothing changes.
    pub fn try_reserve(&mut self, additional: usize) -> Result<(), StorageError> {
        self.buf.reserve(self.len, additional)
    }

    /// Removes and returns the last element.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY:
        // - the slot at the old `len - 1` was initialised and is now outside `[0, len)`, so it is
        //   read exactly once.
        Some(unsafe { self.as_ptr().add(self.len).read() })
    }

    /// Removes the element at `index`, moving the last element into its place.
    ///
    /// # Panics
    /// When `index >= len`.
    #[inline]
    #[track_caller]
    pub fn swap_remove(&mut self, index: usize) -> T {
        let len = self.len;
        assert!(index < len, "swap_remove index {index} out of bounds (len {len})");
        // SAFETY:
        // - `index < len` and `len - 1 < len`: both slots are initialised.
        // - the value at `index` is read out, then the last value is moved over it and `len` is
        //   lowered, so every value is owned exactly once afterwards.
        unsafe {
            let base = self.as_mut_ptr();
            let value = base.add(index).read();
            base.add(index).copy_from(base.add(len - 1), 1);
            self.len = len - 1;
            value
        }
    }

    /// Drops all elements (each exactly once, even if one of their `Drop`s panics); keeps the
    /// committed pages.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Drops the elements past `len`.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        let tail = std::ptr::slice_from_raw_parts_mut(
            // SAFETY: `len < self.len <= capacity`, so the offset is inside the buffer.
            unsafe { self.as_mut_ptr().add(len) },
            self.len - len,
        );
        self.len = len;
        // SAFETY:
        // - the tail was initialised and is now outside `[0, len)`, so nothing else drops it.
        // - a panicking element drop still drops the rest of the slice (drop glue continues).
        unsafe { std::ptr::drop_in_place(tail) };
    }

    /// Decommits the whole pages past the last element. Elements do not move.
    pub fn shrink_to_fit(&mut self) -> Result<(), StorageError> {
        self.buf.shrink_to(self.len)
    }

    /// A raw pointer to the first element (dangling when nothing was ever pushed).
    #[inline]
    pub fn as_ptr(&self) -> *const T {
        self.buf.ptr().as_ptr().cast()
    }

    /// A raw mutable pointer to the first element.
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.buf.ptr().as_ptr().cast()
    }

    /// The elements as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY:
        // - `[0, len)` is initialised and the pointer is aligned and non-null (dangling if empty).
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }

    /// The elements as a mutable slice.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY:
        // - as in `as_slice`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr(), self.len) }
    }
}

impl<T> Drop for VirtualVec<T> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<T> Default for VirtualVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Deref for VirtualVec<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> DerefMut for VirtualVec<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T> Extend<T> for VirtualVec<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let iter = iter.into_iter();
        let (lower, _) = iter.size_hint();
        // A failed up-front reservation is not fatal: `push` reports a real shortage itself.
        let _ = self.try_reserve(lower);
        for value in iter {
            self.push(value);
        }
    }
}

impl<T> FromIterator<T> for VirtualVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v = Self::new();
        v.extend(iter);
        v
    }
}

impl<'a, T> IntoIterator for &'a VirtualVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T> IntoIterator for &'a mut VirtualVec<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl<T: fmt::Debug> fmt::Debug for VirtualVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests;
