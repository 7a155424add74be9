//! [`HeapPages`]: pages from the global allocator, the page source miri runs on.

use std::alloc::{self, Layout};
use std::io;
use std::ptr::NonNull;

use super::PageSource;

/// Pages from the global allocator: the whole range is allocated (zeroed) when it is reserved,
/// and a reservation grows by reallocation ([`PageSource::remap`]: the bytes are copied).
///
/// Used under miri, which cannot run `mprotect`, wherever a test wants no OS mappings, and as
/// the fallback of a container whose OS reservation is refused (see [`vm`](super),
/// "Address-space policy"). Its "reservations" cost real memory, so containers on it reserve
/// small and grow geometrically.
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
// - `remap` reallocates the block (keeping its bytes, zeroing the new tail); on failure the old
//   block is untouched.
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

    unsafe fn remap(
        &self,
        ptr: NonNull<u8>,
        old_len: usize,
        _committed: usize,
        new_len: usize,
    ) -> Result<NonNull<u8>, io::Error> {
        let old = Layout::from_size_align(old_len.max(1), self.page_size)
            .expect("the layout was valid when the block was reserved");
        // A size that overflows once rounded up to the alignment is refused, not reallocated.
        Layout::from_size_align(new_len, self.page_size)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY:
        // - the caller guarantees `ptr` came from `reserve(old_len)` (or a `remap` to it), which
        //   allocated it with `old`; `new_len > old_len > 0` and rounds up without overflow.
        let new = unsafe { alloc::realloc(ptr.as_ptr(), old, new_len) };
        let new = NonNull::new(new).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        // SAFETY:
        // - `realloc` kept the first `old_len` bytes (zeros past the committed prefix, as
        //   `reserve` and `decommit` leave them); the new `old_len..new_len` is ours and
        //   uninitialised: zero it, so that it reads as zero once committed.
        unsafe { new.add(old_len).write_bytes(0, new_len - old_len) };
        Ok(new)
    }

    unsafe fn release(&self, ptr: NonNull<u8>, len: usize) {
        let layout = Layout::from_size_align(len.max(1), self.page_size)
            .expect("the layout was valid when the block was reserved");
        // SAFETY:
        // - the caller guarantees `ptr` came from `reserve(len)`, which allocated it with `layout`.
        unsafe { alloc::dealloc(ptr.as_ptr(), layout) }
    }
}
