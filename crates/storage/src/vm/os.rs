//! [`OsPages`] and [`OsPagesWith`]: pages from the operating system (`mmap`, `mprotect`,
//! `madvise`), through the `region` crate.

use std::io;
use std::ptr::NonNull;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{HUGE_PAGES_FROM, PageSource};

/// Pages from the operating system, through the `region` crate: [`OsPagesWith::DEFAULT`], that is
/// 4 KiB pages with commits prefaulted in one call past [`PREFAULT_FROM`](super::PREFAULT_FROM),
/// no huge pages (see [`OsPagesWith`] and the [`vm`](crate::vm) module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct OsPages;

/// Pages from the operating system with each fill optimisation switchable: for benchmarks that
/// compare them, for tests of the fallbacks, and for callers with other needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsPagesWith {
    /// Back reservations with transparent huge pages past [`HUGE_PAGES_FROM`] committed bytes,
    /// where the kernel offers them (THP not `never`; see [Huge pages](crate::vm#huge-pages)).
    pub huge_pages: bool,
    /// Prefault commits (see [`PageSource::prefault`]) with one `madvise(MADV_POPULATE_WRITE)`
    /// (Linux 5.14) instead of one page fault per page when each page is first written.
    pub populate: bool,
}

impl OsPagesWith {
    /// What [`OsPages`] does: prefaulted commits on 4 KiB pages.
    pub const DEFAULT: Self = Self { huge_pages: false, populate: true };
    /// Huge pages past [`HUGE_PAGES_FROM`] and prefaulted commits (see
    /// [Huge pages](crate::vm#huge-pages) for when they pay).
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
// - `remap` moves the committed prefix's pages (contents and protection with them) to the start
//   of a fresh reservation with `mremap(MREMAP_FIXED)`, which replaces only pages of that fresh
//   reservation, then unmaps the old rest; on failure it releases only the fresh reservation.
unsafe impl PageSource for OsPagesWith {
    fn page_size(&self) -> usize {
        region::page::size()
    }

    fn huge_page_size(&self) -> Option<usize> {
        if self.huge_pages { *OS_HUGE_PAGE_SIZE } else { None }
    }

    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error> {
        take_mapping_budget()?;
        let result = reserve_aligned(len, self.reserve_alignment(len));
        if result.is_err() {
            return_mapping_budget();
        }
        result
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
        unsafe { unmap(ptr, len) };
        return_mapping_budget();
    }

    unsafe fn remap(
        &self,
        ptr: NonNull<u8>,
        old_len: usize,
        committed: usize,
        new_len: usize,
    ) -> Result<NonNull<u8>, io::Error> {
        #[cfg(target_os = "linux")]
        {
            let new = self.reserve(new_len)?;
            if committed > 0 {
                // Move the committed prefix's pages over the start of the new reservation: the
                // kernel moves page table entries (whole page-table pages where both ends are
                // 2 MiB aligned, which `reserve` arranges for ranges of 2 MiB and more) and
                // copies no byte. `MREMAP_FIXED` replaces the `PROT_NONE` pages there.
                // SAFETY:
                // - the caller guarantees `[ptr, ptr + committed)` is a committed prefix of a
                //   live reservation of ours that nothing uses meanwhile; the target is the
                //   start of the reservation just made (`committed < new_len`), owned by us.
                let moved = unsafe {
                    libc::mremap(
                        ptr.as_ptr().cast(),
                        committed,
                        committed,
                        libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                        new.as_ptr().cast::<libc::c_void>(),
                    )
                };
                if moved == libc::MAP_FAILED {
                    // Nothing moved. `EFAULT`: the prefix spans several mappings (huge page
                    // advice or a decommit split it, on kernels that move one mapping at a
                    // time); copy instead. Any other refusal is the caller's to handle.
                    let error = io::Error::last_os_error();
                    // SAFETY: the fresh reservation, exactly as `reserve` returned it, unused.
                    unsafe { self.release(new, new_len) };
                    if error.raw_os_error() == Some(libc::EFAULT) {
                        // SAFETY: forwarded from the caller.
                        return unsafe {
                            super::remap_by_copy(self, ptr, old_len, committed, new_len)
                        };
                    }
                    return Err(error);
                }
            }
            if old_len > committed {
                // SAFETY:
                // - the old reservation's uncommitted rest, ours and unused from now on (its
                //   prefix has moved away).
                unsafe { unmap(ptr.add(committed), old_len - committed) };
            }
            return_mapping_budget();
            Ok(new)
        }
        #[cfg(not(target_os = "linux"))]
        // SAFETY: forwarded from the caller.
        unsafe {
            super::remap_by_copy(self, ptr, old_len, committed, new_len)
        }
    }
}

impl OsPagesWith {
    /// The alignment of a reservation of `len` bytes: the huge page size where this source
    /// uses huge pages and `len` is past [`HUGE_PAGES_FROM`]; else [`MOVE_ALIGN`] (2 MiB) for
    /// ranges of at least that, so a reservation that grows moves whole page-table pages; else a
    /// page.
    fn reserve_alignment(&self, len: usize) -> usize {
        match self.huge_page_size() {
            Some(huge) if len > HUGE_PAGES_FROM => huge.max(MOVE_ALIGN),
            _ if len >= MOVE_ALIGN && self.page_size() < MOVE_ALIGN => MOVE_ALIGN,
            _ => self.page_size(),
        }
    }
}

/// Reservations of this many bytes and more start on a multiple of it: 2 MiB, the span of one
/// page-table page on x86-64 and aarch64 with 4 KiB pages, so `mremap` moves such a range one
/// page-table entry per 2 MiB instead of one per 4 KiB page.
const MOVE_ALIGN: usize = 2 << 20;

/// `len` bytes of fresh `PROT_NONE` mapping starting on a multiple of `align` (a power of two,
/// a multiple of the page size).
fn reserve_aligned(len: usize, align: usize) -> Result<NonNull<u8>, io::Error> {
    let page = region::page::size();
    if align <= page {
        return reserve_os(len);
    }
    // Over-reserve by the alignment less one page, so an aligned start lies inside, and give
    // back the ends: address space only, so this costs one `mmap` and up to two `munmap`s.
    let slack = align - page;
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

/// How many OS reservations are live in this process (every [`OsPagesWith`] counts here).
static LIVE_RESERVATIONS: AtomicUsize = AtomicUsize::new(0);

/// The most OS reservations live at once: a quarter of the kernel's mapping limit
/// (`/proc/sys/vm/max_map_count`, 65,530 by default, so 16,382). A reservation takes two
/// mappings once part of it is committed (its read-write prefix and its `PROT_NONE` rest), so
/// folio's reservations take at most half of the limit and leave the rest to the allocator,
/// thread stacks and libraries. Past it a reservation is refused like one the kernel refuses,
/// and containers fall back to heap pages (see [`vm`](super), "Address-space policy").
static MAPPING_BUDGET: LazyLock<usize> = LazyLock::new(|| {
    let limit = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok());
    match limit {
        Some(limit) => (limit / 4).max(1),
        None if cfg!(target_os = "linux") => 65_530 / 4,
        None => usize::MAX,
    }
});

/// The most OS reservations folio keeps live at once (see [`OsPages`]'s mapping budget in the
/// [`vm`](super) module docs), and how many are live now.
pub fn mapping_budget() -> (usize, usize) {
    (*MAPPING_BUDGET, LIVE_RESERVATIONS.load(Ordering::Relaxed))
}

/// Counts one more live reservation, or refuses it past the budget.
fn take_mapping_budget() -> Result<(), io::Error> {
    let budget = *MAPPING_BUDGET;
    let mut live = LIVE_RESERVATIONS.load(Ordering::Relaxed);
    loop {
        if live >= budget {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("folio's mapping budget of {budget} reservations is spent"),
            ));
        }
        match LIVE_RESERVATIONS.compare_exchange_weak(
            live,
            live + 1,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return Ok(()),
            Err(now) => live = now,
        }
    }
}

fn return_mapping_budget() {
    LIVE_RESERVATIONS.fetch_sub(1, Ordering::Relaxed);
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

    unsafe fn remap(
        &self,
        ptr: NonNull<u8>,
        old_len: usize,
        committed: usize,
        new_len: usize,
    ) -> Result<NonNull<u8>, io::Error> {
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `OsPagesWith`.
        unsafe { OsPagesWith::DEFAULT.remap(ptr, old_len, committed, new_len) }
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
