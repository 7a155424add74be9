//! [`Reservation`]: one reserved range with a committed prefix, and the thresholds of its huge
//! page and prefault policy ([`HUGE_PAGES_FROM`], [`PREFAULT_FROM`], [`PREFAULT_MAX`]).

use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use super::{PageSource, round_up};
use crate::error::StorageError;

/// Committed bytes from which a reservation prefaults its commits (see
/// [Prefaulted commits](crate::vm#prefaulted-commits)): 1 MiB, the largest commit step, so small
/// arrays keep pages resident only once touched.
pub const PREFAULT_FROM: usize = 1 << 20;

/// The most bytes of one commit that are prefaulted: one huge page, or two 1 MiB commit steps.
/// A larger commit (an explicit `try_reserve`) has its first `PREFAULT_MAX` bytes prefaulted and
/// the rest faulted in on first touch, so reserving ahead never makes memory resident in bulk.
pub const PREFAULT_MAX: usize = 2 << 20;

/// Committed bytes past which a reservation whose source has huge pages uses them (see
/// [Huge pages](crate::vm#huge-pages)): 8 MiB, so an array smaller than that never holds a huge
/// page, and one larger holds less than one huge page (2 MiB, 25 % at the threshold and falling)
/// beyond what it asked for. Measured in docs/PERFORMANCE.md ("Storage (issue 2)").
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
        let huge_page = huge_page_for(&*source, base, reserved);
        Ok(Self { base, reserved, committed: 0, huge_page, advised: false, source })
    }

    /// Moves the reservation into a larger one of at least `bytes` (rounded up to whole pages),
    /// keeping the committed prefix's contents ([`PageSource::remap`]: [`OsPages`] moves the
    /// pages without copying a byte, [`HeapPages`] reallocates). The start changes: every
    /// pointer into the old range is invalid afterwards. On error nothing changes.
    ///
    /// [`OsPages`]: super::OsPages
    /// [`HeapPages`]: super::HeapPages
    pub fn grow_to(&mut self, bytes: usize) -> Result<(), StorageError> {
        let page = self.page_size();
        let reserved = round_up(bytes, page).ok_or_else(|| StorageError::Reserve {
            bytes,
            source: io::Error::new(io::ErrorKind::InvalidInput, "size overflows usize"),
        })?;
        if reserved <= self.reserved {
            return Ok(());
        }
        // SAFETY:
        // - `base` and `reserved` are what `reserve` (or an earlier `remap`) returned and was
        //   given; `[0, committed)` is committed; all three lengths are page multiples and
        //   `committed <= self.reserved < reserved`.
        // - `&mut self`: nothing uses the range meanwhile; on `Ok` the old range is dropped
        //   from `self` at once, so it is never used again.
        let base = unsafe { self.source.remap(self.base, self.reserved, self.committed, reserved) }
            .map_err(|source| StorageError::Reserve { bytes: reserved, source })?;
        self.base = base;
        self.reserved = reserved;
        // The huge page advice moved with the committed pages, not to the new rest: the next
        // commit past the threshold advises the whole range again.
        self.advised = false;
        self.huge_page = huge_page_for(&*self.source, base, reserved);
        Ok(())
    }

    /// The source the pages come from.
    pub fn source(&self) -> &Arc<dyn PageSource> {
        &self.source
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

/// The huge page size a reservation of `reserved` bytes at `base` from `source` can use.
fn huge_page_for(source: &dyn PageSource, base: NonNull<u8>, reserved: usize) -> Option<usize> {
    source.huge_page_size().filter(|&huge| {
        huge.is_power_of_two()
            && huge > source.page_size()
            && reserved > HUGE_PAGES_FROM
            && base.as_ptr().addr().is_multiple_of(huge)
    })
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
