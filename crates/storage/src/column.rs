//! [`Column`]: the type-erased dense array that tables and sparse sets keep components in, with
//! the helpers its users copy, drop and prefetch items with.
//!
//! Its design (the small-column policy, the colouring and reuse of its reservation) and its
//! safety model are on [`Column`]'s own docs.

use std::alloc::Layout;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::StorageError;
use crate::raw::{Fallback, RawBuf, SMALL_COLUMN_BYTES};
use crate::vm::{DEFAULT_RESERVE_BYTES, PageSource, default_source};

mod bytes;

pub use bytes::{ColumnBytes, try_copy_into};

/// Drops a value in place, given a pointer to it.
pub type DropFn = unsafe fn(*mut u8);

/// A type-erased, growable, dense array of one component type.
///
/// `Column` is `Send` and `Sync` whatever it holds, so the constructors that name its type
/// ([`Column::new`], which is `unsafe`, and [`Column::of`]) require that type to be
/// `Send + Sync` (the component registry above guarantees it with its `T: Send + Sync + 'static`
/// bound).
///
/// A column knows its items only by `Layout` and drop function. It follows the small-column
/// policy of the crate's [growth policy](crate#growth-policy): up to [`SMALL_COLUMN_BYTES`] it
/// lives in a heap block (so thousands of near-empty archetypes stay cheap and far from Linux's
/// limit of 65,530 mappings), then moves into its own reservation: a growing one (made with
/// [`Column::new`], [`Column::of`] or [`Column::growing`]: it moves again, without copying on
/// Linux, each time it outgrows it) or a fixed one ([`Column::with_source`]: it never moves
/// again). See [`vm`](crate::vm), "Address-space policy".
///
/// # Reservations: colouring and reuse
/// A column's reservation gets two things a [`VirtualVec`](crate::VirtualVec)'s does not (its
/// layout is one that tests and users may rely on):
/// - **Colouring.** Reservations are page-aligned (2 MiB aligned from 2 MiB on), so row `i` of
///   every column of one item size would share an L1 set (and trip 4K-aliasing between loads and stores);
///   a table of a dozen columns thrashes the 8-way L1 on every row it touches. Each column's
///   items therefore start at a different cache-line offset inside the first page of its
///   reservation (a multiple of the item alignment, below one page; the reservation is one page
///   larger, so the capacity is unchanged).
/// - **Reuse.** A dropped column hands its reservation, with up to one commit step
///   ([`COMMIT_STEP_MAX`](crate::COMMIT_STEP_MAX)) still committed, to a small process-wide
///   list (at most 64 reservations and 16 MiB committed in all) instead of unmapping it, if
///   it is of the size a new column asks for first (a grown one is released); the next column
///   that needs a reservation of that size and source takes one back, so a
///   fresh world reuses warm pages instead of faulting in zeroed ones (what `malloc` does for
///   the peers' vectors). Only reservations of the default source ([`default_source`]) are
///   kept, so a fault-injecting source sees every commit. Its committed prefix holds stale
///   bytes, which a column never reads before writing.
///
/// # Safety model
/// Items `[0, len)` are initialised values of the column's type; `len <= buf.capacity()`. The
/// caller of each `unsafe` method promises that pointers it passes point to values of that type.
/// Removal keeps the column consistent even if an item's `Drop` panics: a scope guard finishes the
/// swap-remove during unwinding, so no value is dropped twice or left half-moved.
pub struct Column {
    buf: RawBuf,
    /// Items `[0, len)` are initialised.
    len: usize,
    /// `None` for types that need no drop.
    drop: Option<DropFn>,
}

// SAFETY: a `Column` owns its items, and every constructor requires their type to be
// `Send + Sync` (`of` by its bound, `new` and `with_source` by their safety contracts).
unsafe impl Send for Column {}
// SAFETY: as above; `&Column` hands out only shared pointers.
unsafe impl Sync for Column {}

impl Column {
    /// An empty column of items with `layout`, dropped with `drop`.
    ///
    /// # Safety
    /// - `layout` and `drop` describe one `Send + Sync` type (the column's type): `drop`, if
    ///   any, drops a value with that layout.
    pub unsafe fn new(layout: Layout, drop: Option<DropFn>) -> Self {
        // SAFETY: forwarded from the caller.
        let mut column =
            unsafe { Self::with_source(layout, drop, DEFAULT_RESERVE_BYTES, default_source()) };
        column.buf.set_growing(true);
        column
    }

    /// An empty column for values of type `T`.
    pub fn of<T: Send + Sync>() -> Self {
        // SAFETY: the layout and the drop fn are both `T`'s, and `T` is `Send + Sync`.
        unsafe { Self::new(Layout::new::<T>(), drop_fn_of::<T>()) }
    }

    /// An empty column whose reservation is `max_bytes` large and comes from `source`: a fixed
    /// reservation, made whole when the column leaves its heap block, so the items never move
    /// again (unless it is refused: see [`Column::fallback`]). [`Column::growing`] makes it
    /// start small and grow instead.
    ///
    /// # Safety
    /// - As for [`Column::new`].
    pub unsafe fn with_source(
        layout: Layout,
        drop: Option<DropFn>,
        max_bytes: usize,
        source: Arc<dyn PageSource>,
    ) -> Self {
        Self {
            buf: RawBuf::new_column(layout, SMALL_COLUMN_BYTES, max_bytes, source),
            len: 0,
            drop,
        }
    }

    /// The layout of one item (its size is a multiple of its alignment).
    #[inline]
    pub fn item_layout(&self) -> Layout {
        self.buf.item()
    }

    /// The function that drops one item in place; `None` for types that need no drop.
    #[inline]
    pub fn drop_fn(&self) -> Option<DropFn> {
        self.drop
    }

    /// The number of items.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no items.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many items fit without committing more memory.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The most items this column can ever hold (its reservation's size over the item size).
    #[inline]
    pub fn max_capacity(&self) -> usize {
        self.buf.max_capacity()
    }

    /// This column, with a growing reservation (see [`vm`](crate::vm), "Address-space
    /// policy"): it starts at [`FIRST_RESERVE_BYTES`](crate::vm::FIRST_RESERVE_BYTES) and
    /// moves into one [`RESERVE_GROWTH`](crate::vm::RESERVE_GROWTH) times larger whenever it
    /// outgrows it, up to `max_bytes`. Only before the first push.
    ///
    /// # Panics
    /// When the column already holds memory.
    #[track_caller]
    pub fn growing(mut self) -> Self {
        assert!(
            self.buf.bytes() == (0, 0),
            "Column::growing: call it on a new column, before the first push"
        );
        self.buf.set_growing(true);
        self
    }

    /// Whether the reservation grows, moving the items when it does (see [`Column::growing`]).
    pub fn is_growing(&self) -> bool {
        self.buf.is_growing()
    }

    /// Whether the items live in a reservation (page-granular commits; see
    /// [`Column::is_growing`] for whether it can still move).
    pub fn is_reserved(&self) -> bool {
        self.buf.is_reserved()
    }

    /// What the column's reservation fell back to when the page source refused the one the
    /// policy asked for: [`Fallback::None`] normally.
    pub fn fallback(&self) -> Fallback {
        self.buf.fallback()
    }

    /// `(reserved, committed, used)` bytes.
    pub fn memory(&self) -> (usize, usize, usize) {
        let (reserved, committed) = self.buf.bytes();
        (reserved, committed, self.len * self.buf.item().size())
    }

    /// Makes room for `additional` more items; on error nothing changes.
    #[inline]
    pub fn try_reserve(&mut self, additional: usize) -> Result<(), StorageError> {
        self.buf.reserve(self.len, additional)
    }

    /// Moves the value at `src` into a new last item.
    ///
    /// On error the value still belongs to the caller and the column is unchanged.
    ///
    /// # Safety
    /// - `src` points to a valid value of the column's type, readable for its size, that does
    ///   not live in this column (growing may move or free the column's memory first).
    /// - On `Ok`, the caller treats the value at `src` as moved out (does not drop or use it).
    #[inline]
    pub unsafe fn try_push(&mut self, src: *const u8) -> Result<(), StorageError> {
        self.buf.reserve(self.len, 1)?;
        // SAFETY:
        // - `reserve` made room, so `len < capacity`.
        // - `src` is valid for the item's size (the caller's promise).
        unsafe { self.write_unchecked(self.len, src) };
        self.len += 1;
        Ok(())
    }

    /// Moves the value at `src` into a new last item without checking capacity.
    ///
    /// # Safety
    /// - `len < capacity()` (call [`Column::try_reserve`] first).
    /// - `src` points to a valid value of the column's type, not inside this column, and the
    ///   caller treats it as moved.
    #[inline]
    pub unsafe fn push_unchecked(&mut self, src: *const u8) {
        debug_assert!(self.len < self.capacity());
        // SAFETY:
        // - `len < capacity`, by the caller.
        // - `src` is valid for the item's size, by the caller.
        unsafe { self.write_unchecked(self.len, src) };
        self.len += 1;
    }

    /// # Safety
    /// - `row < capacity` and the slot holds no live value (or its value was moved out).
    /// - `src` is valid for reads of one item.
    #[inline]
    unsafe fn write_unchecked(&mut self, row: usize, src: *const u8) {
        let size = self.buf.item().size();
        // SAFETY:
        // - `row < capacity`, so `row * size` bytes in is inside the buffer.
        // - `src` lies in memory the column does not own (a caller's value), so they don't overlap.
        unsafe { copy_item(src, self.row_ptr(row), size) }
    }

    /// Sets the number of items, for a caller that wrote (or moved out) the items in between
    /// through [`Column::get_unchecked`].
    ///
    /// # Safety
    /// - `len <= capacity()`.
    /// - Items `[0, len)` are initialised values of the column's type; items in
    ///   `[len, old len)` were moved out or dropped by the caller (the column forgets them).
    #[inline]
    pub unsafe fn set_len(&mut self, len: usize) {
        debug_assert!(len <= self.capacity());
        self.len = len;
    }

    /// Drops the item at `row` and writes the value at `src` in its place.
    ///
    /// # Safety
    /// - `row < len`.
    /// - `src` points to a valid value of the column's type, not inside this column, and the
    ///   caller treats it as moved.
    pub unsafe fn replace_unchecked(&mut self, row: usize, src: *const u8) {
        debug_assert!(row < self.len);
        let dst = self.row_ptr(row);
        // Copy the new value in even if the old one's drop panics, so the slot always holds a
        // live value and nothing is dropped twice.
        struct WriteOnUnwind {
            dst: *mut u8,
            src: *const u8,
            size: usize,
        }
        impl Drop for WriteOnUnwind {
            fn drop(&mut self) {
                // SAFETY:
                // - `dst` is the slot at `row < len` and `src` the caller's value (disjoint).
                unsafe { std::ptr::copy_nonoverlapping(self.src, self.dst, self.size) }
            }
        }
        let guard = WriteOnUnwind { dst, src, size: self.buf.item().size() };
        if let Some(drop) = self.drop {
            // SAFETY:
            // - the slot at `row < len` holds a live value of the column's type; the guard
            //   overwrites it right after, so it is dropped exactly once.
            unsafe { drop(dst) };
        }
        std::mem::drop(guard);
    }

    /// Removes the item at `row`, dropping it, and moves the last item into its place.
    ///
    /// # Safety
    /// - `row < len`.
    pub unsafe fn swap_remove_and_drop_unchecked(&mut self, row: usize) {
        debug_assert!(row < self.len);
        let guard = SwapRemoveGuard::new(self, row);
        if let Some(drop) = guard.column.drop {
            // SAFETY:
            // - the slot at `row < len` is live; the guard fills it with the last item (or drops
            //   the length past it) when it goes out of scope, even during unwinding.
            unsafe { drop(guard.column.row_ptr(row)) };
        }
    }

    /// Removes the item at `row`, moving it to `dst`, and moves the last item into its place.
    ///
    /// # Safety
    /// - `row < len`.
    /// - `dst` is valid for writes of one item and does not overlap the column; the caller takes
    ///   ownership of the value written there.
    pub unsafe fn swap_remove_unchecked(&mut self, row: usize, dst: *mut u8) {
        debug_assert!(row < self.len);
        let size = self.buf.item().size();
        let guard = SwapRemoveGuard::new(self, row);
        // SAFETY:
        // - `row < len`: the source is a live item; `dst` is writable and disjoint (caller).
        unsafe { copy_item(guard.column.row_ptr(row), dst, size) };
    }

    /// Removes the item at `row` of a column of `Copy` items (change ticks, entity ids) by
    /// copying the last item over it: a typed copy, without the guard and the item-size
    /// multiply of [`Column::swap_remove_forget_unchecked`].
    ///
    /// # Safety
    /// - The column holds `T`s, and `row < len`.
    #[inline]
    pub unsafe fn swap_remove_copy<T: Copy>(&mut self, row: usize) {
        debug_assert_eq!(Layout::new::<T>().pad_to_align(), self.item_layout());
        debug_assert!(row < self.len);
        let last = self.len - 1;
        // SAFETY: the column holds `T`s (caller), so its buffer is aligned for them and item
        // `i` is `T` number `i`; `row <= last < len`, so both are live (a copy onto itself is a
        // no-op). `T: Copy` has no drop, so lowering the length past the last one is its
        // removal.
        unsafe {
            let items = self.buf.ptr().as_ptr().cast::<T>();
            items.add(row).write(items.add(last).read());
        }
        self.len = last;
    }

    /// Removes the item at `row` without dropping it (its owner took it), and moves the last
    /// item into its place.
    ///
    /// # Safety
    /// - `row < len`.
    /// - The value at `row` was moved out or dropped by the caller.
    pub unsafe fn swap_remove_forget_unchecked(&mut self, row: usize) {
        debug_assert!(row < self.len);
        drop(SwapRemoveGuard::new(self, row));
    }

    /// Removes the item at `row` and pushes it onto `other`, then moves this column's last item
    /// into its place: how a component moves between tables. On error nothing changes.
    ///
    /// # Safety
    /// - `row < len`.
    /// - `other` holds the same type as this column.
    pub unsafe fn swap_remove_into(
        &mut self,
        row: usize,
        other: &mut Column,
    ) -> Result<(), StorageError> {
        debug_assert!(row < self.len);
        debug_assert_eq!(self.item_layout(), other.item_layout());
        other.try_reserve(1)?;
        let size = self.buf.item().size();
        let guard = SwapRemoveGuard::new(self, row);
        // SAFETY:
        // - `other.len < other.capacity` after `try_reserve`; the slot is free.
        // - the source is the live item at `row`; the two columns are distinct (`&mut` both).
        unsafe {
            copy_item(guard.column.row_ptr(row), other.row_ptr(other.len), size);
        }
        other.len += 1;
        Ok(())
    }

    /// Drops every item (each exactly once, even if one's `Drop` panics); keeps the memory.
    pub fn clear(&mut self) {
        let len = self.len;
        self.len = 0;
        if let Some(drop) = self.drop {
            let mut guard = DropRest { column: self, next: 0, end: len, drop };
            while guard.next < guard.end {
                let row = guard.next;
                guard.next += 1;
                // SAFETY:
                // - `row < old len`: a live item; `len` is already 0 and `next` is past it, so
                //   neither the column nor the guard drops it again.
                unsafe { drop(guard.column.row_ptr(row)) };
            }
        }
    }

    /// Decommits the whole pages past the last item (reserved columns only). Items don't move.
    pub fn shrink_to_fit(&mut self) -> Result<(), StorageError> {
        self.buf.shrink_to(self.len)
    }

    /// A pointer to the first item (dangling if there is no memory yet).
    #[inline]
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.buf.ptr()
    }

    /// Starts loading the item at `row` into the cache (see [`prefetch`]); `row` is unchecked.
    #[inline]
    pub fn prefetch_row(&self, row: usize) {
        prefetch(self.buf.ptr().as_ptr().wrapping_add(row.wrapping_mul(self.buf.item().size())));
    }

    /// A pointer to the item at `row`, if `row < len`.
    #[inline]
    pub fn get(&self, row: usize) -> Option<NonNull<u8>> {
        (row < self.len).then(|| {
            // SAFETY: `row < len <= capacity`, so the offset stays inside the buffer.
            unsafe { self.get_unchecked(row) }
        })
    }

    /// A pointer to the item at `row`.
    ///
    /// # Safety
    /// - `row <= capacity` (one past the last slot is allowed for pointer arithmetic).
    #[inline]
    pub unsafe fn get_unchecked(&self, row: usize) -> NonNull<u8> {
        debug_assert!(row <= self.capacity());
        // SAFETY:
        // - `row <= capacity`: the offset is inside the buffer or one past its end, and the item
        //   size is a multiple of its alignment, so the result stays aligned.
        unsafe { self.buf.ptr().add(row * self.buf.item().size()) }
    }

    #[inline]
    fn row_ptr(&self, row: usize) -> *mut u8 {
        debug_assert!(row <= self.capacity());
        // SAFETY: every caller passes `row <= capacity`.
        unsafe { self.get_unchecked(row) }.as_ptr()
    }

    /// The items as a typed slice.
    ///
    /// # Safety
    /// - The column holds values of type `T`.
    #[inline]
    pub unsafe fn as_slice<T>(&self) -> &[T] {
        debug_assert_eq!(Layout::new::<T>().pad_to_align(), self.item_layout());
        // SAFETY:
        // - `[0, len)` holds initialised `T`s (the caller's promise), aligned and contiguous.
        unsafe { std::slice::from_raw_parts(self.buf.ptr().as_ptr().cast::<T>(), self.len) }
    }

    /// The items as a typed mutable slice.
    ///
    /// # Safety
    /// - The column holds values of type `T`.
    #[inline]
    pub unsafe fn as_mut_slice<T>(&mut self) -> &mut [T] {
        debug_assert_eq!(Layout::new::<T>().pad_to_align(), self.item_layout());
        // SAFETY:
        // - as in `as_slice`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.buf.ptr().as_ptr().cast::<T>(), self.len) }
    }
}

impl Drop for Column {
    fn drop(&mut self) {
        self.clear();
    }
}

impl fmt::Debug for Column {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Column")
            .field("item", &self.item_layout())
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .field("reserved", &self.is_reserved())
            .finish()
    }
}

/// Hints the CPU to start loading the cache line at `ptr` (no effect on other targets). Never
/// dereferences `ptr`: any address is fine, so a caller can prefetch the rows a random access
/// is about to touch and let their cache misses overlap.
#[inline(always)]
pub fn prefetch<T>(ptr: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: `prefetch` only hints the cache; it never faults, whatever the address, and
        // SSE is part of the x86-64 baseline.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(ptr.cast::<i8>())
        };
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = ptr;
}

/// Copies one item of `size` bytes from `src` to `dst`: [`std::ptr::copy_nonoverlapping`],
/// with the common component sizes (up to 16 bytes, and 32 and 64) as fixed-size copies, so
/// moving a small component between rows is a load and a store instead of a call to `memmove`
/// (5 % of the add/remove benchmark's samples).
///
/// # Safety
/// - As [`std::ptr::copy_nonoverlapping`] for `size` bytes.
#[inline(always)]
pub unsafe fn copy_item(src: *const u8, dst: *mut u8, size: usize) {
    /// # Safety
    /// - `src` and `dst` are valid for `N` bytes and do not overlap.
    #[inline(always)]
    unsafe fn fixed<const N: usize>(src: *const u8, dst: *mut u8) {
        // SAFETY: forwarded; `MaybeUninit<[u8; N]>` has alignment 1 and may hold any bytes,
        // uninitialised ones too (a component's padding), which a copy as `[u8; N]` may not.
        unsafe {
            let bytes = src.cast::<std::mem::MaybeUninit<[u8; N]>>().read();
            dst.cast::<std::mem::MaybeUninit<[u8; N]>>().write(bytes);
        }
    }
    // SAFETY: forwarded from the caller, with `size` bytes in every arm.
    unsafe {
        match size {
            0 => {}
            4 => fixed::<4>(src, dst),
            8 => fixed::<8>(src, dst),
            12 => fixed::<12>(src, dst),
            16 => fixed::<16>(src, dst),
            32 => fixed::<32>(src, dst),
            64 => fixed::<64>(src, dst),
            _ => std::ptr::copy_nonoverlapping(src, dst, size),
        }
    }
}

/// The drop function `Column` needs for `T`, or `None` if `T` needs no drop.
pub fn drop_fn_of<T>() -> Option<DropFn> {
    /// # Safety
    /// - `ptr` points to a live, aligned `T` that is not used again.
    unsafe fn drop_ptr<T>(ptr: *mut u8) {
        // SAFETY: the caller's promise, item by item.
        unsafe { ptr.cast::<T>().drop_in_place() }
    }
    std::mem::needs_drop::<T>().then_some(drop_ptr::<T> as DropFn)
}

/// Finishes a swap-remove of `row` when dropped, also during unwinding: moves the last item into
/// the hole and lowers the length, so the column stays dense and nothing is dropped twice.
struct SwapRemoveGuard<'a> {
    column: &'a mut Column,
    row: usize,
}

impl<'a> SwapRemoveGuard<'a> {
    fn new(column: &'a mut Column, row: usize) -> Self {
        Self { column, row }
    }
}

impl Drop for SwapRemoveGuard<'_> {
    fn drop(&mut self) {
        let last = self.column.len - 1;
        if self.row != last {
            let size = self.column.buf.item().size();
            // SAFETY:
            // - `row < last < len`: two distinct slots inside the buffer; the one at `row` was
            //   moved out or dropped, the one at `last` is live and moves (not copies) over it.
            unsafe { copy_item(self.column.row_ptr(last), self.column.row_ptr(self.row), size) };
        }
        self.column.len = last;
    }
}

/// Drops the items `[next, end)` when dropped during unwinding from a panicking item drop.
struct DropRest<'a> {
    column: &'a mut Column,
    next: usize,
    end: usize,
    drop: DropFn,
}

impl Drop for DropRest<'_> {
    fn drop(&mut self) {
        while self.next < self.end {
            let row = self.next;
            self.next += 1;
            // SAFETY:
            // - `row` was a live item not yet dropped (the loop advances `next` before dropping).
            unsafe { (self.drop)(self.column.row_ptr(row)) };
        }
    }
}

#[cfg(test)]
mod tests;
