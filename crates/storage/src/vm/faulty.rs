//! [`FaultyPages`]: a page source that fails commits and refuses huge-page advice on request,
//! for tests of the error paths.

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{PageSource, default_source};

/// A source that fails the k-th commit (counting from 1) and forwards everything else; it can
/// also refuse huge-page advice, and reservations over a size.
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
    /// Reservations (and remaps) larger than this are refused.
    refuse_reserve_over: AtomicUsize,
    /// Reservations asked for so far, refused ones and remaps included.
    reserves: AtomicUsize,
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
            refuse_reserve_over: AtomicUsize::new(usize::MAX),
            reserves: AtomicUsize::new(0),
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

    /// Refuses every later reservation (and [`PageSource::remap`]) of more than `bytes`, as a
    /// low `ulimit -v` or a full address space would; `usize::MAX` refuses none.
    pub fn refuse_reserve_over(&self, bytes: usize) {
        self.refuse_reserve_over.store(bytes, Ordering::SeqCst);
    }

    /// Wraps the default source, refusing reservations of more than `bytes`.
    pub fn refusing_reserve_over(bytes: usize) -> Arc<Self> {
        let source = Self::new(default_source(), 0);
        source.refuse_reserve_over(bytes);
        Arc::new(source)
    }

    /// How many reservations and remaps were asked for so far, refused ones included.
    pub fn reserves(&self) -> usize {
        self.reserves.load(Ordering::SeqCst)
    }

    fn check_reserve(&self, len: usize) -> Result<(), io::Error> {
        self.reserves.fetch_add(1, Ordering::SeqCst);
        if len > self.refuse_reserve_over.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, "injected reserve refusal"));
        }
        Ok(())
    }

    /// How many huge-page advice calls were asked for so far, refused ones included.
    pub fn huge_page_advice(&self) -> usize {
        self.huge_advice.load(Ordering::SeqCst)
    }
}

// SAFETY:
// - every call is forwarded to `inner`, which upholds the contract, except failed commits,
//   refused reservations and remaps, and refused huge-page advice, which change nothing.
unsafe impl PageSource for FaultyPages {
    fn page_size(&self) -> usize {
        self.inner.page_size()
    }

    fn huge_page_size(&self) -> Option<usize> {
        self.inner.huge_page_size()
    }

    fn reserve(&self, len: usize) -> Result<NonNull<u8>, io::Error> {
        self.check_reserve(len)?;
        self.inner.reserve(len)
    }

    unsafe fn remap(
        &self,
        ptr: NonNull<u8>,
        old_len: usize,
        committed: usize,
        new_len: usize,
    ) -> Result<NonNull<u8>, io::Error> {
        self.check_reserve(new_len)?;
        // SAFETY:
        // - forwarded unchanged: the caller's guarantees hold for `inner`.
        unsafe { self.inner.remap(ptr, old_len, committed, new_len) }
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
