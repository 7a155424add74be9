//! Virtual memory: reserve address space, commit pages as they fill, decommit them in place.
//!
//! A [`PageSource`] is the small interface to whatever hands out pages. Three implement it:
//! - [`OsPages`], on the `region` crate (Unix only; see
//!   [Targets without virtual memory](self#targets-without-virtual-memory)): a reservation is an `mmap` with `PROT_NONE` (no memory
//!   and no commit charge), commit is `mprotect(READ_WRITE)`, decommit maps fresh `PROT_NONE`
//!   pages over the range with `MAP_FIXED` (the kernel drops the pages and their commit charge;
//!   re-committed pages read as zero), release is `munmap`. Commits past [`PREFAULT_FROM`] are
//!   prefaulted with `madvise(MADV_POPULATE_WRITE)` (see "Prefaulted commits" below).
//! - [`HeapPages`], which allocates the whole range from the global allocator when it is
//!   reserved, and grows it by reallocation. Miri cannot run `mprotect`, so under `cfg(miri)` it
//!   is the default; it is also where a container goes when the OS refuses its reservations
//!   (see "Address-space policy" below).
//! - [`FaultyPages`], which wraps another source and fails the k-th commit, so tests can prove that
//!   a failed commit leaves every container unchanged.
//!
//! - [`OsPagesWith`], the same with each fill optimisation switchable: prefaulted commits, and
//!   transparent huge pages ([`OsPagesWith::HUGE`], opt-in, see "Huge pages" below);
//!   [`OsPagesWith::PLAIN`] is the behaviour before either.
//!
//! A [`Reservation`] owns one reserved range and tracks its committed prefix.
//!
//! # Huge pages
//! Filling 400 MB one 4 KiB page at a time takes ~98,000 page faults, and those faults are most of
//! the time of a large fill (docs/PERFORMANCE.md). A 2 MiB transparent huge page takes one fault
//! for 512 small ones. The kernel backs a 2 MiB block of a mapping with a huge page on its first
//! touch only if the mapping asked for them (`MADV_HUGEPAGE`, as THP is usually in `madvise`
//! mode) and the whole aligned block lies in one read-write mapping. So a [`Reservation`] whose
//! source has huge pages ([`PageSource::huge_page_size`]: [`OsPagesWith::HUGE`] on Linux with THP
//! not `never`) and whose start is aligned to them (the source aligns reservations over
//! [`HUGE_PAGES_FROM`]):
//! - commits exactly as before (whole pages) up to [`HUGE_PAGES_FROM`] committed bytes: a small or
//!   near-empty array never holds a 2 MiB page;
//! - on its first commit past that, advises the whole range `MADV_HUGEPAGE`, and from then on
//!   rounds every commit up to whole huge pages, so each new block is fully committed before it
//!   is first touched and is faulted in as one huge page. Past the threshold the committed bytes
//!   exceed what was asked for by less than one huge page (2 MiB), and — as a huge page is
//!   resident as a whole once touched — so may the resident memory (< 2 MiB per array; below the
//!   threshold resident memory follows the touched 4 KiB pages as before);
//! - decommits to a huge page boundary while it stays past the threshold (so no huge page is
//!   split), and advises the decommitted range again, so that it merges back with the rest of the
//!   reservation into one mapping and gets huge pages when it is committed again.
//!
//! # Prefaulted commits
//! A commit step of 1 MiB is 256 pages, each taking a page fault on its first write. A
//! [`Reservation`] that has [`PREFAULT_FROM`] (1 MiB) committed asks its source to prefault every
//! further commit ([`PageSource::prefault`]); [`OsPages`] does it with one
//! `madvise(MADV_POPULATE_WRITE)` (Linux 5.14): one system call instead of 256 trips through the
//! fault handler, measured at ~0.8x the CPU time of a 400 MB fill (docs/PERFORMANCE.md). The price:
//! prefaulted pages are resident at once instead of on first touch, so past 1 MiB the resident
//! memory of an array is its committed bytes, which exceed what it holds by less than one commit
//! step (1 MiB; one huge page with huge pages): at most 100 % at 1 MiB, 0.14 % at 400 MB. Below
//! 1 MiB (near-empty and small arrays) nothing changes: pages become resident when touched. The
//! cost of faulting a step lands on the one push that commits it (one push in 26,000 for 40-byte
//! items). At most [`PREFAULT_MAX`] bytes of a commit are prefaulted, so a large explicit reserve
//! does not make memory resident in bulk. A refused prefault is ignored (the pages fault in on
//! first touch, as before).
//!
//! Huge pages are **opt-in** ([`OsPages`] does not use them), because what they are worth
//! depends on where the physical memory comes from, as measured on the project's VMs
//! (docs/PERFORMANCE.md): a 400 MB fill took a quarter of the CPU time of 4 KiB pages when the huge
//! pages reused memory freed just before, but twice as much when they did not — the hypervisor
//! takes back free 2 MiB blocks (virtio free page reporting), so every fresh huge page is faulted
//! in again by the host, while 4 KiB allocations are served from recently used fragments. On bare
//! metal or without free page reporting, huge pages are the faster choice for large arrays.
//!
//! Huge pages are a hint: when `madvise` is refused the reservation silently goes on with small
//! pages and page-granular commits, and when the kernel has no free huge page at fault time it
//! falls back to small pages itself. Nothing about contents changes: a huge page reads as zero
//! when first touched, like a small one.
//!
//! # Address-space policy
//! Address space is not free: x86-64 gives a process 128 TiB, `ulimit -v` (`RLIMIT_AS`) counts
//! every reserved byte as if it were memory, and each reservation costs kernel mappings (Linux
//! allows 65,530 per process). So containers reserve what they need, with room to grow, and
//! move when they outgrow it:
//!
//! - **Growing reservations (the default).** A column (and a [`VirtualVec::new`]) leaves its
//!   heap block for a reservation of [`FIRST_RESERVE_BYTES`] (1 MiB, or twice what it needs if
//!   more). When its items outgrow it, it moves into one [`RESERVE_GROWTH`] (4) times larger
//!   ([`Reservation::grow_to`], [`PageSource::remap`]), up to its limit
//!   ([`DEFAULT_RESERVE_BYTES`], or [`StorageConfig::with_max_reserve_bytes`]). So reserved
//!   address space is at most four times the committed memory (plus the first 1 MiB), and a
//!   column that reaches 16 GiB moves seven times.
//! - **Moving copies no data on Linux.** [`OsPages`] moves a reservation with
//!   `mremap(MREMAP_FIXED)`: the committed pages keep their physical memory and only the page
//!   tables move. Reservations of 2 MiB and more start on a 2 MiB boundary, so the kernel moves
//!   one page-table entry per 2 MiB instead of one per 4 KiB page: moving a 400 MB column
//!   touches 200 entries. [`HeapPages`] (miri, wasm, the fallback) reallocates, which copies.
//! - **Fixed reservations, on request.** [`StorageConfig::with_reserve_bytes`] (and
//!   [`VirtualVec::with_max_capacity`]) reserve the whole limit when the container leaves its
//!   heap block, as folio did before: its items never move again, at the price of the whole
//!   limit in address space per container.
//! - **Falling back instead of failing.** When a source refuses a reservation (a low
//!   `ulimit -v`, a full address space, or [`OsPages`]' mapping budget: at most a quarter of
//!   `vm.max_map_count` reservations live at once, see [`mapping_budget`]), the container
//!   takes a reservation of just what it needs now ([`Fallback::Smaller`]), and if that is
//!   refused too, or the kernel refuses to commit pages in a fresh reservation, heap pages
//!   ([`Fallback::HeapPages`]). Each container reports what it fell back to
//!   ([`Column::fallback`]; `World::memory_stats` counts them). Only when the heap refuses too
//!   is the operation refused, with a typed [`StorageError`](crate::StorageError).
//!
//! **When an address changes.** A container's items move only when it grows: a push (or a
//! reserve) that leaves the heap block, or outgrows a growing reservation. Between such calls,
//! and for as long as nothing is pushed, every address is stable; a container with a fixed
//! reservation never moves after leaving its heap block, unless that reservation was refused
//! and it fell back to a smaller one ([`Fallback::Smaller`]), which grows like a growing one.
//! (Items aligned past a page are copied when their reservation grows, as a moved range keeps
//! their offset only modulo a page.) The callers that keep raw pointers into a column across a
//! call hold no `&mut` to it meanwhile (queries and their parallel iteration borrow the world; `Entities::reserve`
//! reads only a counter and the freelist, never the metas; snapshots copy under `&World`), so
//! none of them sees a move.
//!
//! [`VirtualVec::new`]: crate::VirtualVec::new
//! [`VirtualVec::with_max_capacity`]: crate::VirtualVec::with_max_capacity
//! [`StorageConfig::with_max_reserve_bytes`]: crate::StorageConfig::with_max_reserve_bytes
//! [`StorageConfig::with_reserve_bytes`]: crate::StorageConfig::with_reserve_bytes
//! [`Fallback::Smaller`]: crate::Fallback::Smaller
//! [`Fallback::HeapPages`]: crate::Fallback::HeapPages
//! [`Column::fallback`]: crate::Column::fallback
//!
//! # Targets without virtual memory
//! [`OsPages`] exists on the targets that can reserve address space without memory: Unix, except
//! wasm. On every other target — wasm32 (the web, and WASI runtimes) above all, where a module
//! has one linear memory that only grows and has no page protection — the crate builds without
//! `region` and `libc`, and [`default_source`] is [`HeapPages`]: the same [`PageSource`]
//! interface, so every container, world, query and schedule works unchanged. What differs is
//! the cost model, not the contract:
//! - a reservation is a heap block, so it costs the memory it spans: a growing container's
//!   first one is [`FIRST_RESERVE_BYTES`], and each growth reallocates it [`RESERVE_GROWTH`]
//!   times larger, up to [`DEFAULT_RESERVE_BYTES`] (256 MiB on wasm; a container that needs
//!   more gets [`StorageError::CapacityExceeded`](crate::StorageError::CapacityExceeded), and a
//!   world that needs bigger columns says so with
//!   [`StorageConfig::with_max_reserve_bytes`]);
//! - a growth copies, so the items of a growing column move, as a `Vec`'s do (a fixed
//!   reservation, [`StorageConfig::with_reserve_bytes`], is allocated whole and never moves);
//! - decommitted pages are zeroed, not given back: linear memory never shrinks.
//!
//! Nothing unsound is possible either way: a column grows only through `&mut`, so no borrow of
//! an item outlives a growth.
//!
//! # Safety model
//! A `Reservation`'s bytes `[0, committed)` are readable and writable for as long as it lives;
//! bytes past `committed` must not be touched. They move only in [`Reservation::grow_to`]
//! (which takes `&mut self`), keeping their contents; every pointer into the old range is
//! invalid after it. The `PageSource` trait is `unsafe` to implement because containers rely on
//! exactly that.

use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::{Arc, LazyLock};

mod faulty;
mod heap;
#[cfg(all(unix, not(target_family = "wasm")))]
mod os;
mod reservation;

pub use faulty::FaultyPages;
pub use heap::HeapPages;
#[cfg(all(unix, not(target_family = "wasm")))]
pub use os::{OsPages, OsPagesWith, mapping_budget};
pub use reservation::{HUGE_PAGES_FROM, PREFAULT_FROM, PREFAULT_MAX, Reservation};

/// Something that hands out reserved address ranges and commits pages inside them.
///
/// # Safety
/// An implementation must guarantee that:
/// - `reserve(len)` returns a page-aligned pointer to `len` bytes that belong to nobody else until
///   `release` is called on it;
/// - after `commit(ptr, len)` returns `Ok`, those bytes are readable and writable, and hold zeros
///   if they were never committed before or were decommitted since;
/// - `decommit` and `release` never affect bytes outside the given range.
/// - `page_size` is a power of two and never changes.
pub unsafe trait PageSource: Send + Sync + fmt::Debug {
    /// The page size: every pointer and length passed in is a multiple of it.
    fn page_size(&self) -> usize;

    /// The size of the huge pages this source can back a reservation with, if any.
    ///
    /// A source that returns `Some(size)` (a power of two, a multiple of the page size) should
    /// return `size`-aligned ranges from `reserve` for lengths over [`HUGE_PAGES_FROM`] and
    /// accept [`PageSource::advise_huge_pages`]; a [`Reservation`] checks the alignment itself and
    /// uses huge pages only where both hold. The default is `None`.
    fn huge_page_size(&self) -> Option<usize> {
        None
    }

    /// Reserves `len` bytes of address space without committing them.
    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error>;

    /// Asks for `[ptr, ptr + len)` to be backed by huge pages where whole aligned huge pages are
    /// committed. A hint: it must not change the contents, the protection or the commit state of
    /// any byte; an `Err` means the hint was not taken. The default refuses.
    ///
    /// # Safety
    /// - The range lies inside one range returned by `reserve` and not yet released.
    /// - `ptr` and `len` are multiples of the page size.
    unsafe fn advise_huge_pages(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        let _ = (ptr, len);
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Commits `[ptr, ptr + len)` for reading and writing.
    ///
    /// # Safety
    /// - The range lies inside one range returned by `reserve` and not yet released.
    /// - `ptr` and `len` are multiples of the page size.
    unsafe fn commit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error>;

    /// Makes the committed pages of `[ptr, ptr + len)` resident now rather than on first touch. A
    /// hint: it must not change the contents of any byte; the default does nothing.
    ///
    /// # Safety
    /// - As for [`PageSource::commit`], and the range is committed.
    unsafe fn prefault(&self, ptr: NonNull<u8>, len: usize) {
        let _ = (ptr, len);
    }

    /// Gives the physical pages of `[ptr, ptr + len)` back, keeping the addresses reserved.
    ///
    /// # Safety
    /// - As for [`PageSource::commit`]; in addition nothing reads or writes the range until it is
    ///   committed again.
    unsafe fn decommit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error>;

    /// Releases a whole reservation.
    ///
    /// # Safety
    /// - `ptr` and `len` are exactly what one call to `reserve` returned and was given, and the
    ///   range is not used again.
    unsafe fn release(&self, ptr: NonNull<u8>, len: usize);

    /// Moves a reservation of `old_len` bytes whose first `committed` bytes are committed into
    /// a new, larger reservation of `new_len` bytes, and returns its start.
    ///
    /// On `Ok` the old range is released (as by [`PageSource::release`]) and the new range's
    /// first `committed` bytes are committed and hold what the old range's held; the rest of the
    /// new range is reserved, uncommitted (it reads as zero once committed). On `Err` nothing
    /// changed: the old range is as it was.
    ///
    /// The default reserves the new range, commits its prefix, copies the bytes over and
    /// releases the old range. [`OsPages`] moves the pages instead (`mremap` on Linux: the page
    /// tables move, no byte is copied); [`HeapPages`] reallocates.
    ///
    /// # Safety
    /// - `ptr` and `old_len` are exactly what one call to `reserve` (or `remap`) returned and
    ///   was given, and the range is not used again on `Ok`.
    /// - `[ptr, ptr + committed)` is committed, `committed <= old_len < new_len`, and all three
    ///   are multiples of the page size.
    /// - Nothing reads or writes the range while this runs.
    unsafe fn remap(
        &self,
        ptr: NonNull<u8>,
        old_len: usize,
        committed: usize,
        new_len: usize,
    ) -> Result<NonNull<u8>, io::Error> {
        // SAFETY: forwarded from the caller.
        unsafe { remap_by_copy(self, ptr, old_len, committed, new_len) }
    }
}

/// [`PageSource::remap`] the portable way: reserve, commit, copy, release.
///
/// # Safety
/// As for [`PageSource::remap`].
pub(crate) unsafe fn remap_by_copy<S: PageSource + ?Sized>(
    source: &S,
    ptr: NonNull<u8>,
    old_len: usize,
    committed: usize,
    new_len: usize,
) -> Result<NonNull<u8>, io::Error> {
    let new = source.reserve(new_len)?;
    if committed > 0 {
        // SAFETY:
        // - `[new, new + committed)` lies inside the reservation just made (`committed <
        //   new_len`), page aligned at both ends.
        if let Err(e) = unsafe { source.commit(new, committed) } {
            // SAFETY: the fresh reservation, exactly as `reserve` returned it, never used.
            unsafe { source.release(new, new_len) };
            return Err(e);
        }
        // SAFETY:
        // - the caller guarantees the old prefix is committed and not in use; the new prefix
        //   was just committed; the two reservations are distinct, so they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr(), new.as_ptr(), committed) };
    }
    // SAFETY: the caller's old reservation, exactly as it was reserved, not used again.
    unsafe { source.release(ptr, old_len) };
    Ok(new)
}

/// Whether this build has the OS page source: Unix targets other than wasm (see
/// [Targets without virtual memory](self#targets-without-virtual-memory)).
pub const HAS_OS_PAGES: bool = cfg!(all(unix, not(target_family = "wasm")));

#[cfg(all(unix, not(target_family = "wasm")))]
static DEFAULT_SOURCE: LazyLock<Arc<dyn PageSource>> =
    LazyLock::new(|| if cfg!(miri) { Arc::new(HeapPages::new()) } else { Arc::new(OsPages) });

#[cfg(not(all(unix, not(target_family = "wasm"))))]
static DEFAULT_SOURCE: LazyLock<Arc<dyn PageSource>> = LazyLock::new(|| Arc::new(HeapPages::new()));

/// The source containers use unless told otherwise: `OsPages` on targets with virtual memory,
/// [`HeapPages`] under miri and on targets without it (wasm32; see
/// [Targets without virtual memory](self#targets-without-virtual-memory)).
pub fn default_source() -> Arc<dyn PageSource> {
    Arc::clone(&DEFAULT_SOURCE)
}

/// The most bytes a container reserves when it is not told: 16 GiB of address space on 64-bit
/// targets, 64 MiB under miri and on other 32-bit targets, where address space or interpreter
/// memory is scarce, and 256 MiB on wasm, whose heap page source allocates what it reserves (see
/// [Targets without virtual memory](self#targets-without-virtual-memory)). A growing
/// reservation (the default) starts at [`FIRST_RESERVE_BYTES`] and reaches this only when its
/// items need it; a fixed one
/// ([`StorageConfig::with_reserve_bytes`](crate::StorageConfig::with_reserve_bytes)) reserves
/// its whole size at once.
pub const DEFAULT_RESERVE_BYTES: usize = if cfg!(target_family = "wasm") {
    256 << 20
} else if cfg!(miri) || usize::BITS < 64 {
    64 << 20
} else {
    16 << 30
};

/// The first reservation of a growing container (see "Address-space policy" above): 1 MiB of
/// address space (64 KiB under miri, where heap pages stand in for it), or twice what the
/// container needs when it moves out of its heap block, if that is more.
pub const FIRST_RESERVE_BYTES: usize = if cfg!(miri) { 64 << 10 } else { 1 << 20 };

/// How much larger each reservation of a growing container is than the one before: 4 times, so
/// a column that grows from 1 MiB to 16 GiB moves seven times.
pub const RESERVE_GROWTH: usize = 4;

/// Rounds `n` up to a multiple of `to` (a power of two); `None` on overflow.
#[inline]
pub(crate) fn round_up(n: usize, to: usize) -> Option<usize> {
    debug_assert!(to.is_power_of_two());
    Some(n.checked_add(to - 1)? & !(to - 1))
}

#[cfg(test)]
mod tests;
