//! [`StorageConfig`]: where a world's containers take their pages from, and how much address
//! space each one reserves.

use std::alloc::Layout;
use std::fmt;
use std::sync::Arc;

use crate::column::{Column, DropFn, drop_fn_of};
use crate::vm::{DEFAULT_RESERVE_BYTES, PageSource, default_source};

/// The page source and the reservation size of a set of containers.
///
/// Every column of a world (table columns, sparse-set values and ticks, the entity metas) is
/// built from one config, so a test can hand a whole world a fault-injecting [`PageSource`] or
/// small reservations, and see each OS failure come back as a
/// [`StorageError`](crate::StorageError) with the world unchanged.
#[derive(Clone)]
pub struct StorageConfig {
    source: Arc<dyn PageSource>,
    /// The most bytes of address space each container reserves.
    reserve_bytes: usize,
    /// Whether each container reserves `reserve_bytes` whole when it leaves the heap, instead
    /// of starting small and growing.
    fixed: bool,
}

impl StorageConfig {
    /// The default: [`default_source`] (OS pages, or heap pages under miri) and growing
    /// reservations of up to [`DEFAULT_RESERVE_BYTES`] per container (see
    /// [`vm`](crate::vm), "Address-space policy").
    pub fn new() -> Self {
        Self { source: default_source(), reserve_bytes: DEFAULT_RESERVE_BYTES, fixed: false }
    }

    /// This config, taking its pages from `source`.
    pub fn with_source(mut self, source: Arc<dyn PageSource>) -> Self {
        self.source = source;
        self
    }

    /// This config, reserving `bytes` of address space per container (rounded up to whole
    /// pages), fixed: each container reserves it whole when it leaves its heap block, and its
    /// items never move again. A container that needs more gets
    /// [`StorageError::CapacityExceeded`](crate::StorageError::CapacityExceeded). If the
    /// reservation is refused, the container falls back all the same (see
    /// [`Column::fallback`](crate::Column::fallback)).
    pub fn with_reserve_bytes(mut self, bytes: usize) -> Self {
        self.reserve_bytes = bytes;
        self.fixed = true;
        self
    }

    /// This config, with growing reservations of up to `bytes` per container (the default's
    /// policy with another limit): a container that needs more gets
    /// [`StorageError::CapacityExceeded`](crate::StorageError::CapacityExceeded).
    pub fn with_max_reserve_bytes(mut self, bytes: usize) -> Self {
        self.reserve_bytes = bytes;
        self.fixed = false;
        self
    }

    /// Whether each container reserves [`Self::reserve_bytes`] whole (set by
    /// [`Self::with_reserve_bytes`]) rather than growing its reservation.
    pub fn fixed_reservations(&self) -> bool {
        self.fixed
    }

    /// The page source.
    pub fn source(&self) -> &Arc<dyn PageSource> {
        &self.source
    }

    /// The address space each container reserves at most (with fixed reservations, exactly).
    pub fn reserve_bytes(&self) -> usize {
        self.reserve_bytes
    }

    /// An empty column of items with `layout`, dropped with `drop`, on this config.
    ///
    /// # Safety
    /// - As for [`Column::new`]: `layout` and `drop` describe one `Send + Sync` type.
    pub unsafe fn column(&self, layout: Layout, drop: Option<DropFn>) -> Column {
        // SAFETY:
        // - `layout` and `drop` describe one `Send + Sync` type (forwarded from the caller).
        let column = unsafe {
            Column::with_source(layout, drop, self.reserve_bytes, Arc::clone(&self.source))
        };
        if self.fixed { column } else { column.growing() }
    }

    /// An empty column of `T`s on this config.
    pub fn column_of<T: Send + Sync>(&self) -> Column {
        // SAFETY:
        // - the layout and the drop fn are both `T`'s, and `T` is `Send + Sync`.
        unsafe { self.column(Layout::new::<T>(), drop_fn_of::<T>()) }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for StorageConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageConfig")
            .field("source", &format_args!("{:p}", Arc::as_ptr(&self.source)))
            .field("reserve_bytes", &self.reserve_bytes)
            .field("fixed", &self.fixed)
            .finish()
    }
}
