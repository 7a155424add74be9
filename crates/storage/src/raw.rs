//! The non-generic core under [`VirtualVec`](crate::VirtualVec) and [`Column`](crate::Column):
//! a buffer of items of one `Layout` that grows without ever moving once it lives in a
//! reservation.
//!
//! `RawBuf` only manages capacity; its owner tracks the length and drops items.
//!
//! The design is documented where rustdoc renders it: the growth policy (heap phase, the one
//! move into a reservation, commit steps, alignment past a page) and the buffer's safety model
//! in the [crate docs](crate#growth-policy), the colouring and reuse of column reservations
//! (the spare list here) on [`Column`](crate::Column#reservations-colouring-and-reuse).

use std::alloc::{self, Layout};
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::StorageError;
use crate::vm::{
    DEFAULT_RESERVE_BYTES, FIRST_RESERVE_BYTES, HeapPages, PageSource, RESERVE_GROWTH, Reservation,
    default_source,
};

/// Columns up to this many bytes live on the heap; past it they move once into a reservation.
///
/// 16 KiB is four pages: below it a reservation would waste most of its first page and cost two
/// OS mappings per column (Linux allows 65,530 in all); above it one 16 KiB copy is paid once,
/// in a few microseconds, and never again.
pub const SMALL_COLUMN_BYTES: usize = 16 << 10;

/// The largest single commit step; it bounds the committed-but-unused bytes of a buffer.
///
/// Chosen by the `commit_step` benchmark (docs/PERFORMANCE.md): for 10M 40-byte pushes, 64 KiB
/// steps took 1.12x the time of 1 MiB steps and 256 KiB 1.05x, while 4 MiB was no faster
/// (0.98x, within noise) and wastes up to 4 MiB; 1 MiB is the fastest step under the 1 MB bar.
pub const COMMIT_STEP_MAX: usize = 1 << 20;

/// The largest commit step of a column (a table's, a sparse set's, the entity metas').
///
/// Past [`PREFAULT_FROM`](crate::vm::PREFAULT_FROM) a commit is prefaulted in one system call,
/// and the push that makes it pays for every page of it: with 1 MiB steps that was ~500 µs
/// on the project's VMs, and a spawn that committed a step was 2.5x–5x a `Vec` push's slowest
/// (spawn_hitch, docs/PERFORMANCE.md). 128 KiB steps make it ~80 µs, below the `Vec`'s own
/// slowest push (~180 µs there): spawn_hitch's slowest spawn went to 1.0x–1.7x the `Vec`'s,
/// for 2.5 % more time on a 10M fill (eight times the `mprotect` calls; each step is still
/// prefaulted in one call). A `VirtualVec`, which has no frame to stall, keeps
/// [`COMMIT_STEP_MAX`].
pub const COLUMN_COMMIT_STEP: usize = 128 << 10;

/// The most committed bytes a reservation keeps when it goes to the spare list (the rest is
/// decommitted first): one commit step, so a reused column wastes no more than a fresh one.
pub(crate) const SPARE_KEEP_BYTES: usize = COMMIT_STEP_MAX;

/// The most reservations on the spare list.
pub(crate) const SPARE_MAX: usize = 64;

/// The most committed bytes over all reservations on the spare list.
pub(crate) const SPARE_TOTAL_BYTES: usize = 16 << 20;

/// Dropped column reservations kept for reuse (see
/// [`Column`](crate::Column#reservations-colouring-and-reuse)), with their committed bytes.
static SPARE: Mutex<Spare> = Mutex::new(Spare { list: Vec::new(), committed: 0 });

struct Spare {
    list: Vec<Reservation>,
    /// The sum of `committed_bytes` over `list`.
    committed: usize,
}

/// Whether two sources are the same object.
fn same_source(a: &Arc<dyn PageSource>, b: &Arc<dyn PageSource>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// Takes a spare reservation of `reserved` bytes from `source`: the one with the fewest
/// committed bytes that still covers `needed`, else the one with the most. Only the default
/// source's reservations are kept (a test's fault-injecting source must see every commit).
fn take_spare(source: &Arc<dyn PageSource>, reserved: usize, needed: usize) -> Option<Reservation> {
    if !same_source(source, &default_source()) {
        return None;
    }
    let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
    let fits = |r: &Reservation| r.reserved_bytes() == reserved;
    let mut best: Option<usize> = None;
    for (i, r) in spare.list.iter().enumerate() {
        if !fits(r) {
            continue;
        }
        best = Some(match best {
            None => i,
            Some(b) => {
                let (have, cand) = (spare.list[b].committed_bytes(), r.committed_bytes());
                let better = match (cand >= needed, have >= needed) {
                    (true, true) => cand < have,
                    (true, false) => true,
                    (false, true) => false,
                    (false, false) => cand > have,
                };
                if better { i } else { b }
            }
        });
    }
    let r = spare.list.swap_remove(best?);
    spare.committed -= r.committed_bytes();
    Some(r)
}

/// Offers a dropped column's reservation from `source` to the spare list; releases it if the
/// list is full or the source is not the default one.
fn give_spare(mut reservation: Reservation, source: &Arc<dyn PageSource>, first: usize) {
    // Only a reservation of the size a new column asks for first is ever taken back; a grown
    // one would hold its address space for nothing.
    if !same_source(source, &default_source())
        || !same_source(reservation.source(), source)
        || reservation.reserved_bytes() != first
    {
        return;
    }
    if reservation.committed_bytes() > SPARE_KEEP_BYTES
        && reservation.decommit_to(SPARE_KEEP_BYTES).is_err()
    {
        return;
    }
    let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
    let committed = reservation.committed_bytes();
    // A list the heap has no room for (it grows up to `SPARE_MAX`) releases the reservation.
    if spare.list.len() < SPARE_MAX
        && spare.committed + committed <= SPARE_TOTAL_BYTES
        && spare.list.try_reserve(1).is_ok()
    {
        spare.committed += committed;
        spare.list.push(reservation);
    }
}

/// The heap page source a buffer falls back to when its OS reservation is refused.
fn heap_source() -> Arc<dyn PageSource> {
    static HEAP: std::sync::LazyLock<Arc<dyn PageSource>> =
        std::sync::LazyLock::new(|| Arc::new(HeapPages::new()));
    Arc::clone(&HEAP)
}

/// What a buffer's reservation fell back to when the one it asked for was refused (see
/// [`vm`](crate::vm), "Address-space policy").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fallback {
    /// The reservation is the one the policy asked for.
    #[default]
    None,
    /// A reservation was refused, and a smaller one (just what the items needed then) was
    /// taken instead; the buffer moves again when it outgrows it.
    Smaller,
    /// The page source refused even that: the items live in heap pages
    /// ([`HeapPages`](crate::vm::HeapPages)), which grow by reallocation (copying).
    HeapPages,
}

/// A heap block for one `T`, not yet written, or [`StorageError::Alloc`] when the heap
/// refuses it (where `Box::new` would abort).
fn try_box_uninit<T>() -> Result<Box<MaybeUninit<T>>, StorageError> {
    let mut block: Vec<MaybeUninit<T>> = Vec::new();
    block.try_reserve_exact(1).map_err(|e| StorageError::alloc(1, e))?;
    block.push(MaybeUninit::uninit());
    // Length 1 of capacity 1: no reallocation.
    let block = Box::into_raw(block.into_boxed_slice());
    // SAFETY:
    // - the slice's block was allocated by the global allocator with the layout of one
    //   `MaybeUninit<T>` (an array of one `T` has `T`'s size and alignment), which is what the
    //   box frees it with; its only owner is this box.
    Ok(unsafe { Box::from_raw(block.cast::<MaybeUninit<T>>()) })
}

/// The cache-line offset of the next coloured reservation (a counter, spread over a page).
fn next_colour(page_size: usize, align: usize) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // 37 is odd, so consecutive columns land on distinct lines of a 64-line page.
    let lines = page_size / 64;
    ((n * 37) % lines.max(1) * 64) & !(align - 1)
}

pub(crate) struct RawBuf {
    /// Start of the items; valid for `cap` items (see the crate's
    /// [safety model](crate#safety-model)).
    ptr: NonNull<u8>,
    /// How many items fit in the memory behind `ptr`.
    cap: usize,
    /// Layout of one item; its size is a multiple of its alignment.
    item: Layout,
    backing: Backing,
    /// Heap blocks grow up to this many bytes before moving into a reservation.
    small_limit: usize,
    /// The size of the reservation made on the move.
    max_bytes: usize,
    /// The largest commit step: [`COMMIT_STEP_MAX`], or [`COLUMN_COMMIT_STEP`] for a column.
    step_max: usize,
    source: Arc<dyn PageSource>,
    /// A column buffer: its reservation is coloured and reused (see
    /// [`Column`](crate::Column#reservations-colouring-and-reuse)).
    column: bool,
    /// While reserved: where the items start in the reservation (a multiple of the item
    /// alignment, below one page). 0 otherwise.
    offset: usize,
    /// Whether the reservation starts small and grows (moving) as the items need, instead of
    /// covering `max_bytes` from the start (see [`vm`](crate::vm), "Address-space policy").
    growing: bool,
    /// What the reservation fell back to, if it was refused.
    fallback: Fallback,
}

enum Backing {
    /// No memory: nothing allocated yet, or zero-sized items.
    None,
    /// A heap block of `cap * item.size()` bytes, allocated with the item's alignment.
    Heap,
    /// A reservation whose committed prefix holds the items. Boxed: most columns never leave
    /// the heap, and inline the reservation made every column (three per table component)
    /// 56 bytes larger, which near-empty tables felt (many_archetypes).
    Reserved(Box<Reservation>),
}

impl RawBuf {
    pub(crate) fn new(
        item: Layout,
        small_limit: usize,
        max_bytes: usize,
        source: Arc<dyn PageSource>,
    ) -> Self {
        let item = item.pad_to_align();
        let cap = if item.size() == 0 { usize::MAX } else { 0 };
        Self {
            ptr: dangling(item.align()),
            cap,
            item,
            backing: Backing::None,
            small_limit,
            max_bytes,
            step_max: COMMIT_STEP_MAX,
            source,
            column: false,
            offset: 0,
            growing: false,
            fallback: Fallback::None,
        }
    }

    /// Makes the reservation start small and grow geometrically, moving, instead of covering
    /// the maximum capacity from the start.
    pub(crate) fn set_growing(&mut self, growing: bool) {
        self.growing = growing;
    }

    /// Whether the reservation grows (and so may move).
    pub(crate) fn is_growing(&self) -> bool {
        self.growing
    }

    /// What the reservation fell back to.
    pub(crate) fn fallback(&self) -> Fallback {
        self.fallback
    }

    /// A column's buffer: like [`RawBuf::new`], with a coloured, reusable reservation.
    pub(crate) fn new_column(
        item: Layout,
        small_limit: usize,
        max_bytes: usize,
        source: Arc<dyn PageSource>,
    ) -> Self {
        let mut buf = Self::new(item, small_limit, max_bytes, source);
        buf.column = true;
        buf.step_max = COLUMN_COMMIT_STEP;
        buf
    }

    /// A growing buffer of up to [`DEFAULT_RESERVE_BYTES`] on the default source.
    pub(crate) fn with_defaults(item: Layout, small_limit: usize) -> Self {
        let mut buf = Self::new(item, small_limit, DEFAULT_RESERVE_BYTES, default_source());
        buf.growing = true;
        buf
    }

    /// Sets the largest commit step (rounded up to a page when used).
    pub(crate) fn set_step_max(&mut self, step_max: usize) {
        self.step_max = step_max;
    }

    #[inline]
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    #[inline]
    pub(crate) fn item(&self) -> Layout {
        self.item
    }

    /// The most items this buffer can ever hold.
    pub(crate) fn max_capacity(&self) -> usize {
        match self.item.size() {
            // Zero-sized items never need memory: their capacity is the limit from the start.
            0 => self.cap,
            size => self.max_bytes / size,
        }
    }

    /// Caps the number of zero-sized items at `max_len` (`max_bytes` bounds nothing for them);
    /// a no-op for other items.
    pub(crate) fn limit_zero_sized(&mut self, max_len: usize) {
        if self.item.size() == 0 {
            self.cap = max_len;
        }
    }

    /// Whether the items live in a reservation (and so never move again).
    pub(crate) fn is_reserved(&self) -> bool {
        matches!(self.backing, Backing::Reserved(_))
    }

    /// `(reserved, committed)` bytes.
    pub(crate) fn bytes(&self) -> (usize, usize) {
        match &self.backing {
            Backing::None => (0, 0),
            Backing::Heap => (self.cap * self.item.size(), self.cap * self.item.size()),
            Backing::Reserved(r) => (r.reserved_bytes(), r.committed_bytes()),
        }
    }

    /// Makes room for `len + additional` items; on error nothing changes.
    #[inline]
    pub(crate) fn reserve(&mut self, len: usize, additional: usize) -> Result<(), StorageError> {
        if additional <= self.cap.wrapping_sub(len) {
            return Ok(());
        }
        self.grow(len, additional)
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, len: usize, additional: usize) -> Result<(), StorageError> {
        let size = self.item.size();
        let exceeded = || StorageError::CapacityExceeded {
            capacity: self.max_capacity(),
            requested: len.saturating_add(additional),
        };
        if size == 0 {
            // A zero-sized buffer's capacity is already its limit.
            return Err(exceeded());
        }
        let needed = len.checked_add(additional).ok_or_else(exceeded)?;
        let needed_bytes = needed.checked_mul(size).ok_or_else(exceeded)?;
        if needed_bytes > self.max_bytes {
            return Err(exceeded());
        }
        match &mut self.backing {
            Backing::Reserved(reservation) => {
                let old_offset = self.offset;
                let committed = reservation.committed_bytes();
                let step = committed
                    .clamp(reservation.page_size(), self.step_max.max(reservation.page_size()));
                let mut target = committed
                    .saturating_add(step)
                    .max(needed_bytes + old_offset)
                    .min(self.max_bytes + old_offset);
                if target > reservation.reserved_bytes() {
                    if needed_bytes + old_offset <= reservation.reserved_bytes() {
                        // Fill the reservation before moving out of it.
                        target = reservation.reserved_bytes();
                    } else {
                        self.grow_reservation(len, needed_bytes + old_offset, target)?;
                        // A move by copy (items aligned past a page, or onto heap pages) may put
                        // the items at another offset: the target follows them. `target` is at
                        // least `needed_bytes + old_offset`, and the move made room for
                        // `needed_bytes` from the new offset on.
                        target = target - old_offset + self.offset;
                    }
                }
                // Read again: the move above may have changed it.
                let offset = self.offset;
                let Backing::Reserved(reservation) = &mut self.backing else { unreachable!() };
                let target = target.min(reservation.reserved_bytes());
                debug_assert!(target >= needed_bytes + offset, "room for the items asked for");
                reservation.commit_to(target)?;
                self.cap = items_in(reservation, offset, self.max_bytes, size);
                Ok(())
            }
            _ if needed_bytes <= self.small_limit => self.grow_heap(needed_bytes),
            _ => self.move_to_reservation(len, needed_bytes),
        }
    }

    /// The most bytes a reservation of this buffer ever needs: room for `max_bytes` of items
    /// after the colour and the alignment slack, in whole pages. `None` on overflow.
    fn full_reserve_bytes(&self, page_size: usize) -> Option<usize> {
        let align_slack = self.item.align().saturating_sub(page_size);
        let colour_room = if self.column { page_size } else { 0 };
        self.max_bytes.checked_add(colour_room + align_slack)?.checked_next_multiple_of(page_size)
    }

    /// The size of the first reservation of a growing buffer that needs `needed` bytes (its
    /// items' offset included): [`FIRST_RESERVE_BYTES`], or twice `needed` if that is more, in
    /// whole pages; a column's one page more for its colour. At most `full`.
    fn first_reserve_bytes(&self, needed: usize, page_size: usize, full: usize) -> usize {
        let colour_room = if self.column { page_size } else { 0 };
        needed
            .saturating_mul(2)
            .max(FIRST_RESERVE_BYTES)
            .saturating_add(colour_room)
            .checked_next_multiple_of(page_size)
            .unwrap_or(full)
            .min(full)
    }

    /// The size of the reservations a column of this buffer's kind takes from (and gives to)
    /// the spare list: the whole capacity, or for a growing buffer the usual first size.
    fn spare_size(&self) -> usize {
        let page_size = self.source.page_size();
        let full = self.full_reserve_bytes(page_size).unwrap_or(usize::MAX);
        if self.growing && self.item.align() <= page_size {
            self.first_reserve_bytes(0, page_size, full)
        } else {
            full
        }
    }

    /// Moves the reservation into a larger one that holds at least `target` bytes, keeping the
    /// `len` items (`needed` is the least that must fit, the items' offset included): the
    /// policy's next size ([`RESERVE_GROWTH`] times the current one), else just `target`
    /// ([`Fallback::Smaller`]), else heap pages ([`Fallback::HeapPages`]). The items' address
    /// changes. On error nothing changed.
    #[cold]
    fn grow_reservation(
        &mut self,
        len: usize,
        needed: usize,
        target: usize,
    ) -> Result<(), StorageError> {
        let page_size = self.source.page_size();
        let full = self.full_reserve_bytes(page_size).unwrap_or(usize::MAX);
        let align_slack = self.item.align().saturating_sub(page_size);
        let Backing::Reserved(reservation) = &mut self.backing else {
            unreachable!("only a reserved buffer grows its reservation")
        };
        let on_heap = self.fallback == Fallback::HeapPages;
        // Heap pages are real memory: they double, as a `Vec` does.
        let factor = if on_heap { 2 } else { RESERVE_GROWTH };
        let want = reservation.reserved_bytes().saturating_mul(factor).max(target).min(full);
        if align_slack > 0 {
            // Items aligned past a page: a moved range keeps its offset only modulo a page, so
            // they are copied into a new reservation, at the first multiple of their alignment.
            let source = if on_heap { heap_source() } else { Arc::clone(&self.source) };
            let slack_target = target.saturating_add(align_slack).min(full);
            let want = want.saturating_add(align_slack).min(full);
            let Err(e) = self.move_by_copy(len, needed, want, &source) else { return Ok(()) };
            if slack_target < want && self.move_by_copy(len, needed, slack_target, &source).is_ok()
            {
                self.fallback = self.fallback.max(Fallback::Smaller);
                return Ok(());
            }
            if on_heap {
                return Err(e);
            }
            return self.move_to_heap_pages(len, needed, slack_target.max(needed)).map_err(|_| e);
        }
        let first_error = reservation.grow_to(want).err();
        let result = match first_error {
            None => Ok(()),
            Some(_) if want > target && reservation.grow_to(target).is_ok() => {
                self.fallback = self.fallback.max(Fallback::Smaller);
                Ok(())
            }
            Some(e) if on_heap => Err(e),
            Some(e) => self.move_to_heap_pages(len, needed, target.max(needed)).map_err(|_| e),
        };
        result?;
        let Backing::Reserved(reservation) = &self.backing else { unreachable!() };
        // SAFETY: `offset` is below the committed prefix (it was before the move, and the
        // prefix moved whole).
        self.ptr = unsafe { reservation.as_ptr().add(self.offset) };
        Ok(())
    }

    /// Moves the `len` items of a reserved buffer into heap pages of `bytes` (at least
    /// `needed` committed), copying them. On error nothing changed.
    fn move_to_heap_pages(
        &mut self,
        len: usize,
        needed: usize,
        bytes: usize,
    ) -> Result<(), StorageError> {
        self.move_by_copy(len, needed, bytes, &heap_source())?;
        self.fallback = Fallback::HeapPages;
        Ok(())
    }

    /// Moves the `len` items of a reserved buffer into a new reservation of `bytes` from
    /// `source`, copying them to the first multiple of their alignment from their colour on,
    /// with at least `needed` bytes (the old offset included) committed past that. On error
    /// nothing changed.
    fn move_by_copy(
        &mut self,
        len: usize,
        needed: usize,
        bytes: usize,
        source: &Arc<dyn PageSource>,
    ) -> Result<(), StorageError> {
        let align = self.item.align();
        let mut new = Reservation::new(Arc::clone(source), bytes)?;
        // The colour (below a page) is kept; past a page there is none (the offset is then
        // only the alignment's).
        let colour = if align <= new.page_size() { self.offset } else { 0 };
        let base = new.as_ptr().as_ptr().addr();
        let offset = (base + colour).next_multiple_of(align) - base;
        let items = needed.saturating_sub(self.offset);
        if offset.saturating_add(items) > new.reserved_bytes() {
            return Err(StorageError::CapacityExceeded {
                capacity: self.max_capacity(),
                requested: len,
            });
        }
        new.commit_to((offset + items).max(1))?;
        let Backing::Reserved(old) = &mut self.backing else {
            unreachable!("only a reserved buffer moves by copying")
        };
        // SAFETY:
        // - the old reservation holds `len` initialised items from `self.offset` on, inside its
        //   committed prefix; the new one has `offset + items >= offset + len * size` bytes
        //   committed (`items` covers every item); the two are distinct reservations.
        unsafe {
            std::ptr::copy_nonoverlapping(
                old.as_ptr().add(self.offset).as_ptr(),
                new.as_ptr().add(offset).as_ptr(),
                len * self.item.size(),
            );
        }
        // SAFETY: `offset` lies inside the new reservation's committed prefix (checked above).
        self.ptr = unsafe { new.as_ptr().add(offset) };
        // The old reservation is released (a grown one is never spare).
        **old = new;
        self.offset = offset;
        Ok(())
    }

    /// Takes a reservation for a buffer that needs `needed` bytes (its items' offset
    /// included): `want` bytes (a spare one, for a column), else just `needed` in whole pages
    /// ([`Fallback::Smaller`]), else heap pages ([`Fallback::HeapPages`]). On refusal all round,
    /// the first error.
    fn take_reservation(
        &mut self,
        want: usize,
        needed: usize,
    ) -> Result<(Reservation, Fallback), StorageError> {
        if self.column
            && let Some(r) = take_spare(&self.source, want, needed)
        {
            return Ok((r, Fallback::None));
        }
        let error = match Reservation::new(Arc::clone(&self.source), want) {
            Ok(r) => return Ok((r, Fallback::None)),
            Err(e) => e,
        };
        let page_size = self.source.page_size();
        let smaller = needed.checked_next_multiple_of(page_size).unwrap_or(usize::MAX);
        if smaller < want
            && let Ok(r) = Reservation::new(Arc::clone(&self.source), smaller)
        {
            return Ok((r, Fallback::Smaller));
        }
        // Heap pages: room for twice what is needed now, as a `Vec` would take.
        let heap = smaller.saturating_mul(2).min(want.max(smaller));
        match Reservation::new(heap_source(), heap) {
            Ok(r) => Ok((r, Fallback::HeapPages)),
            Err(_) => Err(error),
        }
    }

    fn grow_heap(&mut self, needed_bytes: usize) -> Result<(), StorageError> {
        let size = self.item.size();
        let old_bytes = self.cap * size;
        let limit = self.small_limit.min(self.max_bytes);
        let new_bytes = needed_bytes.max(old_bytes * 2).max(32).min(limit);
        let new_bytes = new_bytes.max(needed_bytes) / size * size;
        let new_layout = Layout::from_size_align(new_bytes, self.item.align())
            .expect("heap column size is at most the small limit");
        let ptr = match self.backing {
            // SAFETY:
            // - `new_layout` has a non-zero size (`needed_bytes > 0` as `size > 0`).
            Backing::None => unsafe { alloc::alloc(new_layout) },
            Backing::Heap => {
                let old = Layout::from_size_align(old_bytes, self.item.align())
                    .expect("it was valid when allocated");
                // SAFETY:
                // - `ptr` was allocated by the global allocator with `old`.
                // - `new_bytes` is non-zero and does not overflow when rounded to `align`.
                unsafe { alloc::realloc(self.ptr.as_ptr(), old, new_bytes) }
            }
            Backing::Reserved(_) => unreachable!("reserved buffers grow in place"),
        };
        let ptr = NonNull::new(ptr).ok_or_else(|| StorageError::Commit {
            offset: 0,
            bytes: new_bytes,
            source: std::io::ErrorKind::OutOfMemory.into(),
        })?;
        self.ptr = ptr;
        self.cap = new_bytes / size;
        self.backing = Backing::Heap;
        Ok(())
    }

    fn move_to_reservation(&mut self, len: usize, needed_bytes: usize) -> Result<(), StorageError> {
        let page_size = self.source.page_size();
        let align = self.item.align();
        // A reservation starts on a page. An item aligned past a page starts at the first
        // multiple of its alignment in it, at most `align - page_size` bytes in: reserve those
        // on top.
        let align_slack = align.saturating_sub(page_size);
        // A multiple of the alignment below one page (so 0 for an alignment past a page).
        let colour = if self.column { next_colour(page_size, align) } else { 0 };
        let too_big =
            || StorageError::CapacityExceeded { capacity: self.max_capacity(), requested: len };
        // The box the reservation will live in, first: refused, nothing was made (`Box::new`
        // after the copy would abort instead).
        let slot = try_box_uninit::<Reservation>()?;
        // The whole capacity (a column's one page more, so the coloured start leaves
        // `max_bytes` for the items). Rounding up is checked too: a wrapped size would make a
        // reservation smaller than the items.
        let full = self.full_reserve_bytes(page_size).ok_or_else(too_big)?;
        let want = if self.growing {
            let first = self.first_reserve_bytes(needed_bytes, page_size, full);
            first.saturating_add(align_slack).min(full)
        } else {
            full
        };
        // What must fit: the items after their colour (and, past a page, their alignment).
        let needed = needed_bytes.saturating_add(colour.max(align_slack));
        let (mut reservation, mut fallback) = self.take_reservation(want, needed)?;
        // The items start at the first multiple of their alignment from the colour on: the
        // colour itself (the start is page aligned) unless the alignment is larger than a page.
        let mut base = reservation.as_ptr().as_ptr().addr();
        let mut offset = (base + colour).next_multiple_of(align) - base;
        debug_assert!(offset <= colour.max(align_slack) && (base + offset).is_multiple_of(align));
        let mut target = (needed_bytes + offset).max(page_size).min(reservation.reserved_bytes());
        if let Err(e) = reservation.commit_to(target) {
            // The kernel refused a commit in a fresh reservation (its mapping limit, or the
            // commit charge): heap pages, unless they are gone too. An injected failure (no OS
            // error code) is reported as it is.
            let heap = (e.os_error().is_some() && fallback != Fallback::HeapPages)
                .then(|| Reservation::new(heap_source(), needed.saturating_mul(2).min(want)))
                .and_then(Result::ok);
            if self.column {
                give_spare(reservation, &self.source, self.spare_size());
            }
            let Some(heap) = heap else { return Err(e) };
            reservation = heap;
            fallback = Fallback::HeapPages;
            base = reservation.as_ptr().as_ptr().addr();
            offset = (base + colour).next_multiple_of(align) - base;
            target = (needed_bytes + offset).max(page_size).min(reservation.reserved_bytes());
            reservation.commit_to(target).map_err(|_| e)?;
        }
        // SAFETY: `offset < needed_bytes + offset <= target` (`needed_bytes > 0`, and the
        // reservation holds at least `needed >= needed_bytes + offset`): inside the committed
        // prefix.
        let new = unsafe { reservation.as_ptr().add(offset) };
        if let Backing::Heap = self.backing {
            // SAFETY:
            // - the heap block holds `len <= cap` initialised items, `len * size` bytes.
            // - the reservation has at least `needed_bytes >= len * size` committed bytes.
            // - the two are different allocations, so they do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.ptr.as_ptr(),
                    new.as_ptr(),
                    len * self.item.size(),
                );
            }
            self.free_heap();
        }
        self.cap = items_in(&reservation, offset, self.max_bytes, self.item.size());
        self.ptr = new;
        self.offset = offset;
        self.fallback = fallback;
        self.backing = Backing::Reserved(Box::write(slot, reservation));
        Ok(())
    }

    /// Decommits whole pages past `len` items (reserved buffers only).
    pub(crate) fn shrink_to(&mut self, len: usize) -> Result<(), StorageError> {
        if let Backing::Reserved(reservation) = &mut self.backing {
            let result = reservation.decommit_to(self.offset + len * self.item.size());
            // Also after a failure, which may have taken the pages (see `decommit_to`).
            self.cap = items_in(reservation, self.offset, self.max_bytes, self.item.size());
            result?;
        }
        Ok(())
    }

    fn free_heap(&mut self) {
        if let Backing::Heap = self.backing {
            let layout = Layout::from_size_align(self.cap * self.item.size(), self.item.align())
                .expect("it was valid when allocated");
            // SAFETY:
            // - `ptr` was allocated by the global allocator with `layout` and is not used again.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
            self.backing = Backing::None;
            self.ptr = dangling(self.item.align());
            self.cap = 0;
        }
    }
}

impl Drop for RawBuf {
    fn drop(&mut self) {
        self.free_heap();
        // A column's reservation goes to the spare list; any other releases itself here.
        if let Backing::Reserved(reservation) = std::mem::replace(&mut self.backing, Backing::None)
            && self.column
        {
            let first = self.spare_size();
            give_spare(*reservation, &self.source, first);
        }
    }
}

/// How many items of `size` bytes fit in `reservation`'s committed prefix past `offset`, up
/// to `max_bytes` of them.
fn items_in(reservation: &Reservation, offset: usize, max_bytes: usize, size: usize) -> usize {
    reservation.committed_bytes().saturating_sub(offset).min(max_bytes) / size
}

fn dangling(align: usize) -> NonNull<u8> {
    NonNull::<u8>::dangling().with_addr(std::num::NonZeroUsize::new(align).expect("align >= 1"))
}
