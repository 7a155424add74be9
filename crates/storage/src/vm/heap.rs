//! [`HeapPages`]: pages from the global allocator, the page source miri runs on.

use std::alloc::{self, Layout};
use std::io;
use std::ptr::NonNull;

use super::PageSource;

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
