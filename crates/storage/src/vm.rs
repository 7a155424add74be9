//! Virtual memory: reserve address space, commit pages as they fill, decommit them in place.
//!
//! A [`PageSource`] is the small interface to whatever hands out pages. Three implement it:
//! - [`OsPages`], on the `region` crate: a reservation is an `mmap` with `PROT_NONE` (no memory
//!   and no commit charge), commit is `mprotect(READ_WRITE)`, decommit maps fresh `PROT_NONE`
//!   pages over the range with `MAP_FIXED` (the kernel drops the pages and their commit charge;
//!   re-committed pages read as zero), release is `munmap`. Commits past [`PREFAULT_FROM`] are
//!   prefaulted with `madvise(MADV_POPULATE_WRITE)` (see "Prefaulted commits" below).
//! - [`HeapPages`], which allocates the whole range from the global allocator up front. Miri
//!   cannot run `mprotect`, so under `cfg(miri)` it is the default; it also serves as a portable
//!   fallback in tests.
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
//! # Safety model
//! A `Reservation`'s bytes `[0, committed)` are readable and writable for as long as it lives and
//! are never moved; bytes past `committed` must not be touched. The `PageSource` trait is `unsafe`
//! to implement because containers rely on exactly that.

use std::alloc::{self, Layout};
use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use crate::error::StorageError;

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
}

/// Pages from the operating system, through the `region` crate: [`OsPagesWith::DEFAULT`], that is
/// 4 KiB pages with commits prefaulted in one call past [`PREFAULT_FROM`], no huge pages (see
/// [`OsPagesWith`] and the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct OsPages;

/// Pages from the operating system with each fill optimisation switchable: for benchmarks that
/// compare them, for tests of the fallbacks, and for callers with other needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsPagesWith {
    /// Back reservations with transparent huge pages past [`HUGE_PAGES_FROM`] committed bytes,
    /// where the kernel offers them (THP not `never`; see the module docs).
    pub huge_pages: bool,
    /// Prefault commits (see [`PageSource::prefault`]) with one `madvise(MADV_POPULATE_WRITE)`
    /// (Linux 5.14) instead of one page fault per page when each page is first written.
    pub populate: bool,
}

impl OsPagesWith {
    /// What [`OsPages`] does: prefaulted commits on 4 KiB pages.
    pub const DEFAULT: Self = Self { huge_pages: false, populate: true };
    /// Huge pages past [`HUGE_PAGES_FROM`] and prefaulted commits (see the module docs for when
    /// they pay).
    pub const HUGE: Self = Self { huge_pages: true, populate: true };
    /// Neither: 4 KiB pages faulted in one at a time on first touch (folio before issue 2's
    /// huge page work).
    pub const PLAIN: Self = Self { huge_pages: false, populate: false };
}

impl Default for OsPagesWith {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Committed bytes from which a reservation prefaults its commits (see the module docs): 1 MiB,
/// the largest commit step, so small arrays keep pages resident only once touched.
pub const PREFAULT_FROM: usize = 1 << 20;

/// The most bytes of one commit that are prefaulted: one huge page, or two 1 MiB commit steps.
/// A larger commit (an explicit `try_reserve`) has its first `PREFAULT_MAX` bytes prefaulted and
/// the rest faulted in on first touch, so reserving ahead never makes memory resident in bulk.
pub const PREFAULT_MAX: usize = 2 << 20;

/// The transparent huge page size, if this kernel can give huge pages to an `madvise`d mapping:
/// `/sys/kernel/mm/transparent_hugepage/hpage_pmd_size` (2 MiB on x86-64), unless THP is
/// `never` or the size is not a usable multiple of the page size. Read once.
static OS_HUGE_PAGE_SIZE: LazyLock<Option<usize>> = LazyLock::new(|| {
    const THP: &str = "/sys/kernel/mm/transparent_hugepage";
    if !cfg!(target_os = "linux") || cfg!(miri) {
        return None;
    }
    let enabled = std::fs::read_to_string(format!("{THP}/enabled")).ok()?;
    if enabled.contains("[never]") {
        return None;
    }
    let size: usize =
        std::fs::read_to_string(format!("{THP}/hpage_pmd_size")).ok()?.trim().parse().ok()?;
    let page = region::page::size();
    // Larger huge pages (512 MiB with 64 KiB base pages on arm64) would make the commit granule,
    // and so the waste per array, far too large.
    (size.is_power_of_two() && size > page && size <= MAX_HUGE_PAGE_SIZE).then_some(size)
});

/// Huge pages larger than this are not used: they would set the commit granule.
const MAX_HUGE_PAGE_SIZE: usize = 4 << 20;

// SAFETY:
// - `reserve` maps fresh anonymous `PROT_NONE` memory, page aligned, owned by nobody else; when it
//   over-reserves to align the start, it unmaps only the parts outside the returned range.
// - `commit` makes the range read-write; anonymous pages read as zero on first touch, and
//   `decommit` replaces the range with fresh anonymous pages, which read as zero again. Huge pages
//   (`advise_huge_pages`) are anonymous pages too and read as zero on first touch;
//   `MADV_HUGEPAGE` changes no contents and no protection, and `MADV_POPULATE_WRITE` only faults
//   in pages of the range as a write would, without writing.
// - every call passes exactly the given range (or a prefix of it) to the kernel.
unsafe impl PageSource for OsPagesWith {
    fn page_size(&self) -> usize {
        region::page::size()
    }

    fn huge_page_size(&self) -> Option<usize> {
        if self.huge_pages { *OS_HUGE_PAGE_SIZE } else { None }
    }

    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error> {
        let align = match self.huge_page_size() {
            Some(huge) if len > HUGE_PAGES_FROM => huge,
            _ => return reserve_os(len),
        };
        // Over-reserve by one huge page less one page, so an aligned start lies inside, and give
        // back the ends: address space only, so this costs one `mmap` and up to two `munmap`s.
        let slack = align - self.page_size();
        let Some(padded) = len.checked_add(slack) else { return reserve_os(len) };
        let raw = reserve_os(padded)?;
        let head = raw.as_ptr().addr().next_multiple_of(align) - raw.as_ptr().addr();
        let tail = slack - head;
        // SAFETY:
        // - `raw..raw + padded` is a fresh mapping of ours; `head <= slack < padded`, so the
        //   aligned start is inside it, as is `start + len + tail == raw + padded`.
        // - the head and tail are page multiples (both `raw` and `align` are page aligned), and
        //   unmapping them touches nothing outside the mapping we just made.
        let start = unsafe {
            let start = raw.add(head);
            if head > 0 {
                unmap(raw, head);
            }
            if tail > 0 {
                unmap(start.add(len), tail);
            }
            start
        };
        Ok(start)
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        // SAFETY:
        // - the caller guarantees the range is inside a live reservation of ours, so changing its
        //   protection affects no other memory.
        unsafe {
            region::protect(ptr.as_ptr(), len, region::Protection::READ_WRITE).map_err(region_to_io)
        }
    }

    unsafe fn prefault(&self, ptr: NonNull<u8>, len: usize) {
        if self.populate {
            // SAFETY:
            // - the caller guarantees the range is committed (read-write) in a live reservation
            //   of ours; populating it writes nothing.
            unsafe { populate(ptr, len) };
        }
    }

    unsafe fn advise_huge_pages(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        if self.huge_page_size().is_none() {
            return Err(io::ErrorKind::Unsupported.into());
        }
        #[cfg(target_os = "linux")]
        {
            // SAFETY:
            // - the caller guarantees the range is inside a live reservation of ours;
            //   `MADV_HUGEPAGE` only sets a flag on its mappings and changes no byte.
            let result = unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE) };
            if result == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (ptr, len);
            Err(io::ErrorKind::Unsupported.into())
        }
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        // `alloc_at` maps with MAP_FIXED over the range: the old pages and their commit charge go.
        let allocation =
            region::alloc_at(ptr.as_ptr(), len, region::Protection::NONE).map_err(region_to_io)?;
        // The new mapping is part of the reservation and is unmapped by `release`.
        std::mem::forget(allocation);
        Ok(())
    }

    unsafe fn release(&self, ptr: NonNull<u8>, len: usize) {
        // SAFETY:
        // - the caller guarantees `ptr..ptr + len` is exactly one reservation of ours, unused from
        //   now on, so unmapping it frees nothing that anyone else owns.
        unsafe { unmap(ptr, len) }
    }
}

// SAFETY:
// - every call is forwarded to `OsPagesWith::DEFAULT`, which upholds the contract.
unsafe impl PageSource for OsPages {
    fn page_size(&self) -> usize {
        OsPagesWith::DEFAULT.page_size()
    }

    fn huge_page_size(&self) -> Option<usize> {
        OsPagesWith::DEFAULT.huge_page_size()
    }

    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error> {
        OsPagesWith::DEFAULT.reserve(len)
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `OsPagesWith`.
        unsafe { OsPagesWith::DEFAULT.commit(ptr, len) }
    }

    unsafe fn advise_huge_pages(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `OsPagesWith`.
        unsafe { OsPagesWith::DEFAULT.advise_huge_pages(ptr, len) }
    }

    unsafe fn prefault(&self, ptr: NonNull<u8>, len: usize) {
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `OsPagesWith`.
        unsafe { OsPagesWith::DEFAULT.prefault(ptr, len) }
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `OsPagesWith`.
        unsafe { OsPagesWith::DEFAULT.decommit(ptr, len) }
    }

    unsafe fn release(&self, ptr: NonNull<u8>, len: usize) {
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `OsPagesWith`.
        unsafe { OsPagesWith::DEFAULT.release(ptr, len) }
    }
}

/// A fresh `PROT_NONE` mapping of `len` bytes.
fn reserve_os(len: usize) -> Result<NonNull<u8>, io::Error> {
    let allocation = region::alloc(len, region::Protection::NONE).map_err(region_to_io)?;
    let ptr = allocation.as_ptr::<u8>().cast_mut();
    // The reservation outlives this `Allocation`: it is unmapped by `release`.
    std::mem::forget(allocation);
    NonNull::new(ptr).ok_or_else(|| io::Error::other("mmap returned null"))
}

/// Faults in `[ptr, ptr + len)` for writing in one call, where the kernel can (Linux 5.14); a hint,
/// so a refusal (an older kernel, no memory just now) is ignored and the pages fault in on first
/// touch instead.
///
/// # Safety
/// The range is page aligned, mapped read-write by us.
unsafe fn populate(ptr: NonNull<u8>, len: usize) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY:
        // - the caller guarantees the range is ours and read-write; `MADV_POPULATE_WRITE` faults
        //   its pages in as a write would, without writing, so every byte keeps its value.
        let _ = unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_POPULATE_WRITE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

fn region_to_io(error: region::Error) -> io::Error {
    match error {
        region::Error::SystemCall(error) => error,
        other => io::Error::other(other.to_string()),
    }
}

/// Unmaps `[ptr, ptr + len)`.
///
/// # Safety
/// The range is page aligned, mapped by us, and never used again.
unsafe fn unmap(ptr: NonNull<u8>, len: usize) {
    // SAFETY:
    // - the caller guarantees the range is ours and unused from now on.
    let result = unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
    debug_assert_eq!(result, 0, "munmap failed: {}", io::Error::last_os_error());
}

/// Pages from the global allocator: the whole range is allocated (zeroed) when it is reserved.
///
/// Used under miri, which cannot run `mprotect`, and wherever a test wants no OS mappings. Its
/// "reservations" cost real memory, so keep them small.
#[derive(Debug, Clone, Copy)]
pub struct HeapPages {
    page_size: usize,
}

impl HeapPages {
    /// A heap source with 4 KiB pages.
    pub const fn new() -> Self {
        Self { page_size: 4096 }
    }
}

impl Default for HeapPages {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY:
// - `reserve` returns a fresh, zeroed, page-aligned heap block owned by nobody else.
// - `commit` is a no-op: the block is already readable and writable; `decommit` zeroes the range,
//   so a later commit reads zeros, as the trait asks.
// - `decommit` writes only inside the given range; `release` frees exactly the reserved block.
unsafe impl PageSource for HeapPages {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error> {
        let layout = Layout::from_size_align(len.max(1), self.page_size)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY:
        // - `layout` has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        NonNull::new(ptr).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))
    }

    unsafe fn commit(&self, _ptr: NonNull<u8>, _len: usize) -> Result<(), io::Error> {
        Ok(())
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        // SAFETY:
        // - the caller guarantees the range is inside a live block of ours.
        unsafe { ptr.as_ptr().write_bytes(0, len) };
        Ok(())
    }

    unsafe fn release(&self, ptr: NonNull<u8>, len: usize) {
        let layout = Layout::from_size_align(len.max(1), self.page_size)
            .expect("the layout was valid when the block was reserved");
        // SAFETY:
        // - the caller guarantees `ptr` came from `reserve(len)`, which allocated it with `layout`.
        unsafe { alloc::dealloc(ptr.as_ptr(), layout) }
    }
}

/// A source that fails the k-th commit (counting from 1) and forwards everything else; it can
/// also refuse huge-page advice.
///
/// For tests: it proves that a container is unchanged when the OS refuses memory, and that a
/// reservation falls back to small pages when `madvise` is refused.
#[derive(Debug)]
pub struct FaultyPages {
    inner: Arc<dyn PageSource>,
    commits: AtomicUsize,
    fail_at: AtomicUsize,
    refuse_huge_pages: AtomicBool,
    huge_advice: AtomicUsize,
}

impl FaultyPages {
    /// Wraps `inner`, failing its `fail_at`-th commit (0 never fails).
    pub fn new(inner: Arc<dyn PageSource>, fail_at: usize) -> Self {
        Self {
            inner,
            commits: AtomicUsize::new(0),
            fail_at: AtomicUsize::new(fail_at),
            refuse_huge_pages: AtomicBool::new(false),
            huge_advice: AtomicUsize::new(0),
        }
    }

    /// Wraps the default source, failing its `fail_at`-th commit.
    pub fn failing_commit(fail_at: usize) -> Arc<Self> {
        Arc::new(Self::new(default_source(), fail_at))
    }

    /// Sets which commit, counted from now, fails next (0: none).
    pub fn fail_commit_after(&self, k: usize) {
        let done = self.commits.load(Ordering::SeqCst);
        self.fail_at.store(if k == 0 { 0 } else { done + k }, Ordering::SeqCst);
    }

    /// How many commits were asked for so far, failed ones included.
    pub fn commits(&self) -> usize {
        self.commits.load(Ordering::SeqCst)
    }

    /// Makes every later [`PageSource::advise_huge_pages`] fail (as a kernel without transparent
    /// huge pages would), or forwards it again.
    pub fn refuse_huge_pages(&self, refuse: bool) {
        self.refuse_huge_pages.store(refuse, Ordering::SeqCst);
    }

    /// How many huge-page advice calls were asked for so far, refused ones included.
    pub fn huge_page_advice(&self) -> usize {
        self.huge_advice.load(Ordering::SeqCst)
    }
}

// SAFETY:
// - every call is forwarded to `inner`, which upholds the contract, except failed commits and
//   refused huge-page advice, which change nothing.
unsafe impl PageSource for FaultyPages {
    fn page_size(&self) -> usize {
        self.inner.page_size()
    }

    fn huge_page_size(&self) -> Option<usize> {
        self.inner.huge_page_size()
    }

    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error> {
        self.inner.reserve(len)
    }

    unsafe fn advise_huge_pages(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        self.huge_advice.fetch_add(1, Ordering::SeqCst);
        if self.refuse_huge_pages.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "injected madvise refusal"));
        }
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `inner`.
        unsafe { self.inner.advise_huge_pages(ptr, len) }
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        let n = self.commits.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_at.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, "injected commit failure"));
        }
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `inner`.
        unsafe { self.inner.commit(ptr, len) }
    }

    unsafe fn prefault(&self, ptr: NonNull<u8>, len: usize) {
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `inner`.
        unsafe { self.inner.prefault(ptr, len) }
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `inner`.
        unsafe { self.inner.decommit(ptr, len) }
    }

    unsafe fn release(&self, ptr: NonNull<u8>, len: usize) {
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `inner`.
        unsafe { self.inner.release(ptr, len) }
    }
}

static DEFAULT_SOURCE: LazyLock<Arc<dyn PageSource>> =
    LazyLock::new(|| if cfg!(miri) { Arc::new(HeapPages::new()) } else { Arc::new(OsPages) });

/// The source containers use unless told otherwise: [`OsPages`], or [`HeapPages`] under miri.
pub fn default_source() -> Arc<dyn PageSource> {
    Arc::clone(&DEFAULT_SOURCE)
}

/// How many bytes a container reserves when it is not told: 16 GiB of address space on 64-bit
/// targets (about 8,000 full-size columns fit in x86-64's 128 TiB user space), 64 MiB under miri
/// and on 32-bit targets, where address space or interpreter memory is scarce.
pub const DEFAULT_RESERVE_BYTES: usize =
    if cfg!(miri) || usize::BITS < 64 { 64 << 20 } else { 16 << 30 };

/// Committed bytes past which a reservation whose source has huge pages uses them (see the
/// module docs): 8 MiB, so an array smaller than that never holds a huge page, and one larger
/// holds less than one huge page (2 MiB, 25 % at the threshold and falling) beyond what it asked
/// for. Measured in docs/PERFORMANCE.md ("Storage (issue 2)").
pub const HUGE_PAGES_FROM: usize = 8 << 20;

/// One reserved range of address space with a committed prefix.
pub struct Reservation {
    /// Page-aligned start of the range; valid for `reserved` bytes until drop.
    base: NonNull<u8>,
    /// Size of the range, a multiple of the page size.
    reserved: usize,
    /// `[0, committed)` is readable and writable; a multiple of the page size, `<= reserved`.
    committed: usize,
    /// The source's huge page size, if `base` is aligned to it, the range is larger than
    /// [`HUGE_PAGES_FROM`], and the advice was not refused.
    huge_page: Option<usize>,
    /// Whether the range was advised `MADV_HUGEPAGE` (done on the first commit past the threshold).
    advised: bool,
    source: Arc<dyn PageSource>,
}

// SAFETY: a `Reservation` owns its range like a `Box<[u8]>`; the source is `Send + Sync`.
unsafe impl Send for Reservation {}
// SAFETY: `&Reservation` gives out only a pointer and counts; all mutation needs `&mut`.
unsafe impl Sync for Reservation {}

impl Reservation {
    /// Reserves at least `bytes` of address space (rounded up to whole pages) from `source`.
    pub fn new(source: Arc<dyn PageSource>, bytes: usize) -> Result<Self, StorageError> {
        let page = source.page_size();
        let reserved = round_up(bytes.max(1), page).ok_or_else(|| StorageError::Reserve {
            bytes,
            source: io::Error::new(io::ErrorKind::InvalidInput, "size overflows usize"),
        })?;
        let base = source
            .reserve(reserved)
            .map_err(|source| StorageError::Reserve { bytes: reserved, source })?;
        let huge_page = source.huge_page_size().filter(|&huge| {
            huge.is_power_of_two()
                && huge > page
                && reserved > HUGE_PAGES_FROM
                && base.as_ptr().addr().is_multiple_of(huge)
        });
        Ok(Self { base, reserved, committed: 0, huge_page, advised: false, source })
    }

    /// The start of the range.
    #[inline]
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.base
    }

    /// The page size of the source.
    pub fn page_size(&self) -> usize {
        self.source.page_size()
    }

    /// Bytes of address space reserved.
    #[inline]
    pub fn reserved_bytes(&self) -> usize {
        self.reserved
    }

    /// Bytes committed (readable and writable), from the start of the range.
    #[inline]
    pub fn committed_bytes(&self) -> usize {
        self.committed
    }

    /// The huge page size this reservation will use once more than [`HUGE_PAGES_FROM`] bytes are
    /// committed; `None` if it cannot (no huge pages from the source, a small or unaligned range,
    /// or the advice was refused).
    pub fn huge_page_size(&self) -> Option<usize> {
        self.huge_page
    }

    /// Whether the range was advised to use huge pages (it has been committed past
    /// [`HUGE_PAGES_FROM`] and the source took the advice).
    pub fn uses_huge_pages(&self) -> bool {
        self.advised
    }

    /// The granule a commit or decommit ending at `end` is rounded up to: the huge page size past
    /// the threshold (advising the range on first use), else the page size.
    fn granule(&mut self, end: usize) -> usize {
        let page = self.page_size();
        let Some(huge) = self.huge_page else { return page };
        if end <= HUGE_PAGES_FROM {
            return page;
        }
        if !self.advised {
            // SAFETY:
            // - the whole live reservation, page aligned at both ends.
            let advice = unsafe { self.source.advise_huge_pages(self.base, self.reserved) };
            if advice.is_err() {
                // A hint only: go on with small pages, and do not ask again.
                self.huge_page = None;
                return page;
            }
            self.advised = true;
        }
        huge
    }

    /// Commits pages until at least `bytes` are committed. On error nothing changes.
    pub fn commit_to(&mut self, bytes: usize) -> Result<(), StorageError> {
        if bytes <= self.committed {
            return Ok(());
        }
        if bytes > self.reserved {
            return Err(StorageError::CapacityExceeded {
                capacity: self.reserved,
                requested: bytes,
            });
        }
        let page_target = round_up(bytes, self.page_size()).unwrap_or(self.reserved);
        let granule = self.granule(page_target);
        let target = round_up(page_target, granule).map_or(self.reserved, |t| t.min(self.reserved));
        let len = target - self.committed;
        // SAFETY:
        // - `committed..target` lies inside our live reservation (`target <= reserved`).
        // - both ends are multiples of the page size.
        let result = unsafe { self.source.commit(self.ptr_at(self.committed), len) };
        result.map_err(|source| StorageError::Commit {
            offset: self.committed,
            bytes: len,
            source,
        })?;
        if self.committed >= PREFAULT_FROM {
            // SAFETY:
            // - `committed..committed + len.min(PREFAULT_MAX)` was just committed, inside our live
            //   reservation; both ends are page multiples (`PREFAULT_MAX` is one).
            unsafe { self.source.prefault(self.ptr_at(self.committed), len.min(PREFAULT_MAX)) };
        }
        self.committed = target;
        Ok(())
    }

    /// Decommits whole pages above `bytes`, which must not be used again until recommitted.
    /// Past [`HUGE_PAGES_FROM`] in a reservation that uses huge pages, whole huge pages: the one
    /// that holds byte `bytes - 1` stays committed, so no huge page is split.
    ///
    /// On error the range counts as decommitted all the same: a failed `mmap(MAP_FIXED)` may
    /// already have dropped the old pages, so the range is never touched again without a
    /// successful commit first.
    pub fn decommit_to(&mut self, bytes: usize) -> Result<(), StorageError> {
        let page_keep = round_up(bytes, self.page_size()).unwrap_or(usize::MAX);
        let granule = if self.advised { self.granule(page_keep) } else { self.page_size() };
        let keep = round_up(page_keep, granule).unwrap_or(usize::MAX);
        if keep >= self.committed {
            return Ok(());
        }
        let len = self.committed - keep;
        // SAFETY:
        // - `keep..committed` lies inside our live reservation, page aligned at both ends.
        // - `&mut self` and the caller's promise mean nothing uses those bytes any more.
        let result = unsafe { self.source.decommit(self.ptr_at(keep), len) };
        self.committed = keep;
        if self.advised {
            // The fresh mapping does not inherit the advice: give it again, so the range merges
            // back into one mapping with the rest of the reservation and gets huge pages when it
            // is committed again. A hint only, so a refusal is ignored.
            // SAFETY:
            // - `keep..keep + len` lies inside our live reservation, page aligned at both ends.
            let _ = unsafe { self.source.advise_huge_pages(self.ptr_at(keep), len) };
        }
        result.map_err(|source| StorageError::Decommit { offset: keep, bytes: len, source })
    }

    fn ptr_at(&self, offset: usize) -> NonNull<u8> {
        debug_assert!(offset <= self.reserved);
        // SAFETY:
        // - `offset <= reserved`, so the result is inside the reservation or one past its end.
        unsafe { self.base.add(offset) }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY:
        // - `base` and `reserved` are exactly what `reserve` returned and was given.
        // - the reservation is dropped, so nothing uses the range again.
        unsafe { self.source.release(self.base, self.reserved) }
    }
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("base", &self.base)
            .field("reserved", &self.reserved)
            .field("committed", &self.committed)
            .field("huge_page", &self.huge_page)
            .field("advised", &self.advised)
            .finish()
    }
}

/// Rounds `n` up to a multiple of `to` (a power of two); `None` on overflow.
#[inline]
pub(crate) fn round_up(n: usize, to: usize) -> Option<usize> {
    debug_assert!(to.is_power_of_two());
    Some(n.checked_add(to - 1)? & !(to - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources() -> Vec<Arc<dyn PageSource>> {
        if cfg!(miri) {
            vec![Arc::new(HeapPages::new())]
        } else {
            vec![Arc::new(OsPages), Arc::new(HeapPages::new())]
        }
    }

    #[test]
    fn commit_write_decommit_reads_zero() {
        for source in sources() {
            let page = source.page_size();
            let mut r = Reservation::new(source, 8 * page).unwrap();
            assert_eq!(r.reserved_bytes(), 8 * page);
            assert_eq!(r.committed_bytes(), 0);
            r.commit_to(page + 1).unwrap();
            assert_eq!(r.committed_bytes(), 2 * page);
            // SAFETY: two pages are committed.
            unsafe { r.as_ptr().as_ptr().write_bytes(0xAB, 2 * page) };
            r.decommit_to(1).unwrap();
            assert_eq!(r.committed_bytes(), page);
            r.commit_to(2 * page).unwrap();
            // SAFETY: two pages are committed; the second was decommitted and reads as zero.
            let second = unsafe { *r.as_ptr().as_ptr().add(page + 7) };
            assert_eq!(second, 0);
            // SAFETY: as above, the first page kept its contents.
            let first = unsafe { *r.as_ptr().as_ptr().add(7) };
            assert_eq!(first, 0xAB);
        }
    }

    #[test]
    fn commit_past_reservation_is_an_error() {
        for source in sources() {
            let page = source.page_size();
            let mut r = Reservation::new(source, page).unwrap();
            let err = r.commit_to(page + 1).unwrap_err();
            assert!(matches!(err, StorageError::CapacityExceeded { .. }), "{err}");
            assert_eq!(r.committed_bytes(), 0);
        }
    }

    #[test]
    fn injected_commit_failure_changes_nothing() {
        let source = FaultyPages::failing_commit(2);
        let page = source.page_size();
        let mut r = Reservation::new(source.clone(), 4 * page).unwrap();
        r.commit_to(page).unwrap();
        let err = r.commit_to(2 * page).unwrap_err();
        assert!(matches!(err, StorageError::Commit { .. }), "{err}");
        assert_eq!(r.committed_bytes(), page);
        r.commit_to(2 * page).unwrap();
        assert_eq!(r.committed_bytes(), 2 * page);
        assert_eq!(source.commits(), 3);
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri cannot mmap")]
    fn os_refuses_an_impossible_reservation() {
        let err = Reservation::new(Arc::new(OsPages), usize::MAX / 2).unwrap_err();
        assert!(matches!(err, StorageError::Reserve { .. }), "{err}");
        assert!(err.to_string().contains("reserve"));
    }

    /// The kernel's view of the mappings that overlap `[start, end)`, from `/proc/self/smaps`.
    #[derive(Debug)]
    struct Mapping {
        rss_kib: usize,
        anon_huge_kib: usize,
        flags: String,
    }

    fn mappings_in(start: usize, end: usize) -> Vec<Mapping> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut found = Vec::new();
        let mut current: Option<Mapping> = None;
        for line in smaps.lines() {
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            if let Some((lo, hi)) = first.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                found.extend(current.take());
                if lo < end && hi > start {
                    current = Some(Mapping { rss_kib: 0, anon_huge_kib: 0, flags: String::new() });
                }
                continue;
            }
            let Some(m) = current.as_mut() else { continue };
            let number = || words.clone().next().and_then(|w| w.parse().ok()).unwrap_or(0);
            match first {
                "Rss:" => m.rss_kib = number(),
                "AnonHugePages:" => m.anon_huge_kib = number(),
                "VmFlags:" => m.flags = words.collect::<Vec<_>>().join(" "),
                _ => {}
            }
        }
        found.extend(current);
        found
    }

    fn range_of(r: &Reservation) -> (usize, usize) {
        let start = r.as_ptr().as_ptr().addr();
        (start, start + r.reserved_bytes())
    }

    /// Writes `byte` over `[from, to)` of `r`, which must be committed.
    fn fill(r: &mut Reservation, from: usize, to: usize, byte: u8) {
        assert!(to <= r.committed_bytes());
        // SAFETY: `[from, to)` is committed.
        unsafe { r.as_ptr().as_ptr().add(from).write_bytes(byte, to - from) };
    }

    /// The byte at `at`, which must be committed.
    fn byte_at(r: &Reservation, at: usize) -> u8 {
        assert!(at < r.committed_bytes());
        // SAFETY: `at` is committed.
        unsafe { *r.as_ptr().as_ptr().add(at) }
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri cannot mmap")]
    fn large_os_reservations_start_on_a_huge_page() {
        let Some(huge) = OsPagesWith::HUGE.huge_page_size() else {
            eprintln!("no transparent huge pages here: nothing to check");
            return;
        };
        assert!(huge.is_power_of_two() && huge > OsPagesWith::HUGE.page_size());
        for _ in 0..8 {
            let r = Reservation::new(Arc::new(OsPagesWith::HUGE), 64 << 20).unwrap();
            assert!(r.as_ptr().as_ptr().addr().is_multiple_of(huge), "{r:?}");
            assert_eq!(r.huge_page_size(), Some(huge));
            assert!(!r.uses_huge_pages());
        }
        // Small reservations are not aligned on purpose and never use huge pages.
        let small = Reservation::new(Arc::new(OsPagesWith::HUGE), HUGE_PAGES_FROM).unwrap();
        assert_eq!(small.huge_page_size(), None);
        // Nor do reservations from a source without huge pages, `OsPages` included.
        assert_eq!(OsPages.huge_page_size(), None);
        assert_eq!(Reservation::new(Arc::new(OsPages), 64 << 20).unwrap().huge_page_size(), None);
        let none = Reservation::new(Arc::new(OsPagesWith::DEFAULT), 64 << 20).unwrap();
        assert_eq!(none.huge_page_size(), None);
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri cannot mmap")]
    fn huge_commits_round_up_past_the_threshold_and_read_back() {
        let Some(huge) = OsPagesWith::HUGE.huge_page_size() else { return };
        let page = OsPagesWith::HUGE.page_size();
        let mut r = Reservation::new(Arc::new(OsPagesWith::HUGE), 64 << 20).unwrap();
        let (start, end) = range_of(&r);
        // Below the threshold: whole small pages, no advice.
        r.commit_to(1).unwrap();
        assert_eq!(r.committed_bytes(), page);
        r.commit_to(HUGE_PAGES_FROM).unwrap();
        assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM);
        assert!(!r.uses_huge_pages());
        assert!(mappings_in(start, end).iter().all(|m| !m.flags.contains("hg")));
        fill(&mut r, 0, HUGE_PAGES_FROM, 0x11);
        // Past it: whole huge pages, and the range is advised.
        r.commit_to(HUGE_PAGES_FROM + 1).unwrap();
        assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + huge);
        assert!(r.uses_huge_pages());
        r.commit_to(HUGE_PAGES_FROM + 3 * huge - page).unwrap();
        assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + 3 * huge);
        let top = r.committed_bytes();
        assert_eq!(byte_at(&r, top - 1), 0, "fresh huge pages read as zero");
        fill(&mut r, HUGE_PAGES_FROM, top, 0x22);
        // Still two mappings (read-write prefix, reserved rest), both advised. (Fewer if the
        // kernel merged the rest with an identical neighbour.)
        let maps = mappings_in(start, end);
        assert!(maps.len() <= 2, "{maps:?}");
        assert!(maps.iter().all(|m| m.flags.contains("hg")), "{maps:?}");
        // The kernel may fall back to small pages (no free huge page), so this is reported, not
        // asserted; the benchmarks count the faults.
        eprintln!("AnonHugePages in the range: {} KiB", maps[0].anon_huge_kib);
        assert_eq!(byte_at(&r, 0), 0x11);
        assert_eq!(byte_at(&r, HUGE_PAGES_FROM - 1), 0x11);
        assert_eq!(byte_at(&r, HUGE_PAGES_FROM), 0x22);
        assert_eq!(byte_at(&r, top - 1), 0x22);
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri cannot mmap")]
    fn huge_decommit_releases_memory_and_recommits_zeroed() {
        let Some(huge) = OsPagesWith::HUGE.huge_page_size() else { return };
        let page = OsPagesWith::HUGE.page_size();
        let mut r = Reservation::new(Arc::new(OsPagesWith::HUGE), 64 << 20).unwrap();
        let (start, end) = range_of(&r);
        let top = HUGE_PAGES_FROM + 4 * huge;
        r.commit_to(top).unwrap();
        fill(&mut r, 0, top, 0x33);
        let rss = |maps: &[Mapping]| maps.iter().map(|m| m.rss_kib).sum::<usize>();
        assert!(rss(&mappings_in(start, end)) >= top >> 10);

        // Past the threshold a decommit keeps whole huge pages: the one holding the last byte.
        r.decommit_to(HUGE_PAGES_FROM + huge + 1).unwrap();
        assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + 2 * huge);
        let maps = mappings_in(start, end);
        assert!(maps.len() <= 2, "the decommitted range merges back: {maps:?}");
        assert!(maps.iter().all(|m| m.flags.contains("hg")), "{maps:?}");
        assert!(rss(&maps) <= (HUGE_PAGES_FROM + 2 * huge) >> 10, "{maps:?}");

        // Below it, small pages again: `shrink_to_fit` of a nearly empty array frees nearly all.
        r.decommit_to(100).unwrap();
        assert_eq!(r.committed_bytes(), page);
        let maps = mappings_in(start, end);
        assert!(maps.len() <= 2, "{maps:?}");
        assert!(rss(&maps) <= (2 * huge) >> 10, "{maps:?}");
        assert_eq!(byte_at(&r, page - 1), 0x33, "kept bytes keep their contents");

        // Recommitted memory reads as zero, huge pages included, and takes writes.
        r.commit_to(top).unwrap();
        assert_eq!(r.committed_bytes(), top);
        for at in [page, HUGE_PAGES_FROM - 1, HUGE_PAGES_FROM, top - 1] {
            assert_eq!(byte_at(&r, at), 0, "at {at}");
        }
        assert_eq!(byte_at(&r, 0), 0x33);
        fill(&mut r, page, top, 0x44);
        assert_eq!(byte_at(&r, top - 1), 0x44);
        assert!(mappings_in(start, end).len() <= 2);
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri cannot mmap")]
    fn refused_huge_page_advice_falls_back_to_small_pages() {
        let source = Arc::new(FaultyPages::new(Arc::new(OsPagesWith::HUGE), 0));
        if source.huge_page_size().is_none() {
            return;
        }
        source.refuse_huge_pages(true);
        let page = source.page_size();
        let mut r = Reservation::new(source.clone(), 64 << 20).unwrap();
        assert!(r.huge_page_size().is_some());
        r.commit_to(HUGE_PAGES_FROM + 1).unwrap();
        assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + page, "small pages, page granular");
        assert!(!r.uses_huge_pages());
        assert_eq!(r.huge_page_size(), None);
        assert_eq!(source.huge_page_advice(), 1);
        // It is not asked again, and the memory works as before.
        r.commit_to(HUGE_PAGES_FROM + 3 * page).unwrap();
        assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + 3 * page);
        assert_eq!(source.huge_page_advice(), 1);
        fill(&mut r, 0, HUGE_PAGES_FROM + 3 * page, 0x55);
        r.decommit_to(page).unwrap();
        r.commit_to(HUGE_PAGES_FROM + 3 * page).unwrap();
        assert_eq!(byte_at(&r, page), 0);
        assert_eq!(byte_at(&r, 0), 0x55);
        assert_eq!(source.huge_page_advice(), 1);
        let (start, end) = range_of(&r);
        assert!(mappings_in(start, end).iter().all(|m| !m.flags.contains("hg")));
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri cannot mmap")]
    fn without_huge_pages_commits_stay_page_granular() {
        let source: Arc<dyn PageSource> = Arc::new(OsPagesWith::DEFAULT);
        let page = source.page_size();
        let mut r = Reservation::new(source, 64 << 20).unwrap();
        r.commit_to(HUGE_PAGES_FROM + 1).unwrap();
        assert_eq!(r.committed_bytes(), HUGE_PAGES_FROM + page);
        assert!(!r.uses_huge_pages());
    }

    #[test]
    fn sources_without_huge_pages_refuse_the_advice() {
        let heap = HeapPages::new();
        assert_eq!(heap.huge_page_size(), None);
        let mut r = Reservation::new(Arc::new(heap), 4 * heap.page_size()).unwrap();
        r.commit_to(1).unwrap();
        // SAFETY: the range is the first page of a live reservation.
        let advice = unsafe { heap.advise_huge_pages(r.as_ptr(), heap.page_size()) };
        assert!(advice.is_err());
        assert_eq!(OsPagesWith::PLAIN.huge_page_size(), None);
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri cannot mmap")]
    fn commits_past_a_mebibyte_are_resident_at_once_and_read_zero() {
        let resident_kib = |r: &Reservation| {
            let (start, end) = range_of(r);
            mappings_in(start, end).iter().map(|m| m.rss_kib).sum::<usize>()
        };
        let mut r = Reservation::new(Arc::new(OsPages), 64 << 20).unwrap();
        // Up to `PREFAULT_FROM`, committed pages cost nothing until they are touched.
        r.commit_to(PREFAULT_FROM).unwrap();
        assert_eq!(resident_kib(&r), 0);
        fill(&mut r, 0, 4096, 0x66);
        assert_eq!(resident_kib(&r), 4);
        // Past it, a commit is resident at once (up to `PREFAULT_MAX` of it) and reads as zero.
        r.commit_to(PREFAULT_FROM + PREFAULT_MAX + (1 << 20)).unwrap();
        let prefaulted = resident_kib(&r);
        assert!(prefaulted >= 4 + (PREFAULT_MAX >> 10), "prefaulted: {prefaulted} KiB");
        assert!(prefaulted < 4 + ((PREFAULT_MAX + (1 << 20)) >> 10), "at most PREFAULT_MAX");
        let top = r.committed_bytes();
        assert!((4096..top).step_by(4096).all(|at| byte_at(&r, at) == 0));
        fill(&mut r, 4096, top, 0x77);
        r.decommit_to(4096).unwrap();
        assert!(resident_kib(&r) <= 8, "decommitted: {} KiB", resident_kib(&r));
        r.commit_to(top).unwrap();
        assert_eq!(byte_at(&r, 4096), 0);
        assert_eq!(byte_at(&r, top - 1), 0);
        assert_eq!(byte_at(&r, 4095), 0x66);

        // Without prefaulting, only touched pages are resident.
        let mut plain = Reservation::new(Arc::new(OsPagesWith::PLAIN), 64 << 20).unwrap();
        plain.commit_to(PREFAULT_FROM).unwrap();
        plain.commit_to(PREFAULT_FROM + PREFAULT_MAX).unwrap();
        assert_eq!(resident_kib(&plain), 0);
        fill(&mut plain, PREFAULT_FROM, PREFAULT_FROM + 4096, 1);
        assert_eq!(resident_kib(&plain), 4);
    }
}
