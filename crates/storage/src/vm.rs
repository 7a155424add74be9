//! Virtual memory: reserve address space, commit pages as they fill, decommit them in place.
//!
//! A [`PageSource`] is the small interface to whatever hands out pages. Three implement it:
//! - [`OsPages`], on the `region` crate: a reservation is an `mmap` with `PROT_NONE` (no memory
//!   and no commit charge), commit is `mprotect(READ_WRITE)`, decommit maps fresh `PROT_NONE`
//!   pages over the range with `MAP_FIXED` (the kernel drops the pages and their commit charge;
//!   re-committed pages read as zero), release is `munmap`.
//! - [`HeapPages`], which allocates the whole range from the global allocator up front. Miri
//!   cannot run `mprotect`, so under `cfg(miri)` it is the default; it also serves as a portable
//!   fallback in tests.
//! - [`FaultyPages`], which wraps another source and fails the k-th commit, so tests can prove that
//!   a failed commit leaves every container unchanged.
//!
//! A [`Reservation`] owns one reserved range and tracks its committed prefix.
//!
//! # Safety model
//! A `Reservation`'s bytes `[0, committed)` are readable and writable for as long as it lives and
//! are never moved; bytes past `committed` must not be touched. The `PageSource` trait is `unsafe`
//! to implement because containers rely on exactly that.

use std::alloc::{self, Layout};
use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
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

    /// Reserves `len` bytes of address space without committing them.
    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error>;

    /// Commits `[ptr, ptr + len)` for reading and writing.
    ///
    /// # Safety
    /// - The range lies inside one range returned by `reserve` and not yet released.
    /// - `ptr` and `len` are multiples of the page size.
    unsafe fn commit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error>;

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

/// Pages from the operating system, through the `region` crate.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsPages;

// SAFETY:
// - `reserve` maps fresh anonymous `PROT_NONE` memory, page aligned, owned by nobody else.
// - `commit` makes the range read-write; anonymous pages read as zero on first touch, and
//   `decommit` replaces the range with fresh anonymous pages, which read as zero again.
// - every call passes exactly the given range to the kernel.
unsafe impl PageSource for OsPages {
    fn page_size(&self) -> usize {
        region::page::size()
    }

    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error> {
        let allocation = region::alloc(len, region::Protection::NONE).map_err(region_to_io)?;
        let ptr = allocation.as_ptr::<u8>().cast_mut();
        // The reservation outlives this `Allocation`: it is unmapped by `release`.
        std::mem::forget(allocation);
        NonNull::new(ptr).ok_or_else(|| io::Error::other("mmap returned null"))
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, len: usize) -> Result<(), io::Error> {
        // SAFETY:
        // - the caller guarantees the range is inside a live reservation of ours, so changing its
        //   protection affects no other memory.
        unsafe {
            region::protect(ptr.as_ptr(), len, region::Protection::READ_WRITE).map_err(region_to_io)
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
        let result = unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
        debug_assert_eq!(result, 0, "munmap failed: {}", io::Error::last_os_error());
    }
}

fn region_to_io(error: region::Error) -> io::Error {
    match error {
        region::Error::SystemCall(error) => error,
        other => io::Error::other(other.to_string()),
    }
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

/// A source that fails the k-th commit (counting from 1) and forwards everything else.
///
/// For tests: it proves that a container is unchanged when the OS refuses memory.
#[derive(Debug)]
pub struct FaultyPages {
    inner: Arc<dyn PageSource>,
    commits: AtomicUsize,
    fail_at: AtomicUsize,
}

impl FaultyPages {
    /// Wraps `inner`, failing its `fail_at`-th commit (0 never fails).
    pub fn new(inner: Arc<dyn PageSource>, fail_at: usize) -> Self {
        Self { inner, commits: AtomicUsize::new(0), fail_at: AtomicUsize::new(fail_at) }
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
}

// SAFETY:
// - every call is forwarded to `inner`, which upholds the contract, except failed commits, which
//   change nothing.
unsafe impl PageSource for FaultyPages {
    fn page_size(&self) -> usize {
        self.inner.page_size()
    }

    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error> {
        self.inner.reserve(len)
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

/// One reserved range of address space with a committed prefix.
pub struct Reservation {
    /// Page-aligned start of the range; valid for `reserved` bytes until drop.
    base: NonNull<u8>,
    /// Size of the range, a multiple of the page size.
    reserved: usize,
    /// `[0, committed)` is readable and writable; a multiple of the page size, `<= reserved`.
    committed: usize,
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
        Ok(Self { base, reserved, committed: 0, source })
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
        let target =
            round_up(bytes, self.page_size()).map_or(self.reserved, |t| t.min(self.reserved));
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
        self.committed = target;
        Ok(())
    }

    /// Decommits whole pages above `bytes`, which must not be used again until recommitted.
    ///
    /// On error the range counts as decommitted all the same: a failed `mmap(MAP_FIXED)` may
    /// already have dropped the old pages, so the range is never touched again without a
    /// successful commit first.
    pub fn decommit_to(&mut self, bytes: usize) -> Result<(), StorageError> {
        let keep = round_up(bytes, self.page_size()).unwrap_or(usize::MAX);
        if keep >= self.committed {
            return Ok(());
        }
        let len = self.committed - keep;
        // SAFETY:
        // - `keep..committed` lies inside our live reservation, page aligned at both ends.
        // - `&mut self` and the caller's promise mean nothing uses those bytes any more.
        let result = unsafe { self.source.decommit(self.ptr_at(keep), len) };
        self.committed = keep;
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
}
