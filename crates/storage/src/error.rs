//! The storage layer's error type: every OS failure and every exhausted reservation is one of
//! these, never a silent abort.

use std::collections::TryReserveError;
use std::fmt;
use std::io;

/// What went wrong in the storage layer.
#[derive(Debug)]
#[non_exhaustive]
pub enum StorageError {
    /// The OS refused to reserve `bytes` of address space.
    Reserve {
        /// The size of the refused reservation.
        bytes: usize,
        /// The OS's own error.
        source: io::Error,
    },
    /// The OS refused to commit `bytes` at `offset` inside a reservation.
    Commit {
        /// Offset of the range inside its reservation.
        offset: usize,
        /// Size of the refused range.
        bytes: usize,
        /// The OS's own error.
        source: io::Error,
    },
    /// The OS refused to decommit a range. The range counts as decommitted anyway (it held no
    /// live items) and is committed again before any use.
    Decommit {
        /// Offset of the range inside its reservation.
        offset: usize,
        /// Size of the range.
        bytes: usize,
        /// The OS's own error.
        source: io::Error,
    },
    /// A container is full: its reservation has room for `capacity` items and `requested` were
    /// asked for.
    CapacityExceeded {
        /// The most items the reservation can hold.
        capacity: usize,
        /// The item count that was asked for.
        requested: usize,
    },
    /// The heap allocator refused a block: to grow a bookkeeping list (an archetype's entity
    /// list, a sparse set's entities or pages, a removal log, the entity freelist, the
    /// archetype graph's lists and indices, a batch's lists) by `additional` items, or a small
    /// block of its own (the box a column's reservation lives in). Nothing changed.
    ///
    /// Which operations give this error and which still allocate infallibly is listed in
    /// docs/RELIABILITY.md, "Out of memory".
    Alloc {
        /// The item count the list was asked to grow by.
        additional: usize,
        /// The allocator's own error.
        source: TryReserveError,
    },
}

impl StorageError {
    /// The error of a refused `try_reserve(additional)` on a heap collection.
    #[cold]
    pub fn alloc(additional: usize, source: TryReserveError) -> Self {
        Self::Alloc { additional, source }
    }

    /// The OS's error code, if the OS refused a reservation, commit or decommit (`None` for
    /// other errors, and for refusals that did not come from the OS).
    pub fn os_error(&self) -> Option<i32> {
        match self {
            Self::Reserve { source, .. }
            | Self::Commit { source, .. }
            | Self::Decommit { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reserve { bytes, source } => {
                write!(f, "could not reserve {bytes} bytes of address space: {source}")
            }
            Self::Commit { offset, bytes, source } => {
                write!(f, "could not commit {bytes} bytes at offset {offset}: {source}")
            }
            Self::Decommit { offset, bytes, source } => {
                write!(f, "could not decommit {bytes} bytes at offset {offset}: {source}")
            }
            Self::CapacityExceeded { capacity, requested } => {
                write!(f, "reservation exhausted: room for {capacity} items, {requested} requested")
            }
            Self::Alloc { additional, source } => {
                write!(f, "could not grow a list by {additional} items: {source}")
            }
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Reserve { source, .. }
            | Self::Commit { source, .. }
            | Self::Decommit { source, .. } => Some(source),
            Self::Alloc { source, .. } => Some(source),
            _ => None,
        }
    }
}
