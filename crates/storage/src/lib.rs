//! folio's storage layer: memory that grows without copying.
//!
//! Everything above it (tables, sparse sets, the entity allocator) stands on **virtual arrays**:
//! containers that reserve address space and commit physical pages only as they fill. They
//! never reallocate: when one outgrows its reservation its pages move into a larger one
//! (`mremap` on Linux: no byte is copied), so growth never copies and never stalls a frame. A
//! pointer to an element stays valid until the container grows (never, with a fixed
//! reservation); see [`vm`], "Address-space policy".
//!
//! - [`vm`]: the [`PageSource`](vm::PageSource) interface (OS pages through `region`, heap pages
//!   for miri, a fault injector for tests) and [`Reservation`](vm::Reservation).
//! - [`VirtualVec`]: a `Vec` on reserved address space, whose growth copies nothing on Linux.
//! - [`VirtualPool`]: stable slots with an intrusive freelist and a validity bitset.
//! - [`Column`]: the type-erased dense array that tables are made of.
//! - [`StorageConfig`]: the page source and reservation size a world's containers share.
//! - [`SparseSet`] and [`ComponentSparseSet`]: paged sparse arrays over dense data.
//! - [`Entity`] and [`Entities`]: generational ids, their allocator and locations, and the
//!   allocator's state as plain data ([`EntitiesState`]) for saves and snapshots.
//! - [`HandleMap`]: generational handles over dense data.
//!
//! # Growth policy
//! [`VirtualVec`] and [`Column`] stand on one non-generic buffer of items of one `Layout`, which
//! grows in place inside a reservation and, when it outgrows that, moves into a larger one
//! (see [`vm`], "Address-space policy", for when addresses change):
//! - Up to a size limit the items live in an ordinary heap block that doubles (so a near-empty
//!   table column costs a few bytes, not a page and an OS mapping). A `VirtualVec` has no heap
//!   phase (its limit is 0); columns use [`SMALL_COLUMN_BYTES`].
//! - Past it the items move into a reservation of address space: a growing one (the default:
//!   1 MiB, then four times larger each time the items outgrow it, moved without copying; see
//!   [`vm`], "Address-space policy"), or one for the container's whole maximum capacity (a
//!   fixed one: [`VirtualVec::with_max_capacity`], [`StorageConfig::with_reserve_bytes`]), in
//!   which nothing moves again. Inside a reservation, growth commits pages in place.
//! - Commits double the committed size, from one page up to steps of [`COMMIT_STEP_MAX`] (a
//!   `VirtualVec`) or [`COLUMN_COMMIT_STEP`] (a column); so a buffer's committed bytes exceed
//!   what it needs by less than one step (≤ 1 MiB), and growing to 400 MB takes about 400
//!   `mprotect` calls (3,200 for a column, whose steps are small to keep each push short).
//! - **Alignment past a page.** A reservation starts on a page, so items aligned more strictly
//!   start at the first multiple of their alignment in it; the reservation (a column's or a
//!   `VirtualVec`'s) is larger by the alignment less one page, so the capacity is unchanged.
//!
//! A column's reservation is also coloured and reused: see [`Column`].
//!
//! # Safety model
//! Each container documents its own invariants (the "Safety model" sections of [`VirtualVec`],
//! [`VirtualPool`], [`Column`] and [`ComponentSparseSet`], and of [`vm`] for reservations); the
//! rule they share is that a committed page is never unmapped while a container that owns it is
//! alive, and moves only inside a call that takes the container by `&mut` (a growth).
//!
//! The buffer under [`VirtualVec`] and [`Column`] is valid for reads and writes of its capacity
//! in items: either a heap block of `capacity * size` bytes, or the committed prefix of the
//! reservation. For zero-sized items and before the first growth, its pointer is dangling but
//! aligned.
#![warn(unsafe_op_in_unsafe_fn)]

mod column;
mod config;
mod entity;
mod error;
mod handle_map;
mod pool;
mod raw;
mod sparse_set;
mod sync;
mod virtual_vec;
pub mod vm;

#[cfg(test)]
mod test_util;

pub use column::{Column, ColumnBytes, DropFn, copy_item, drop_fn_of, prefetch, try_copy_into};
pub use config::StorageConfig;
pub use entity::{
    Entities, EntitiesSnapshot, EntitiesState, EntitiesStateError, Entity, EntityIdError,
    EntityLocation,
};
pub use error::StorageError;
pub use handle_map::{Handle, HandleMap};
pub use pool::VirtualPool;
pub use raw::{COLUMN_COMMIT_STEP, COMMIT_STEP_MAX, Fallback, SMALL_COLUMN_BYTES};
pub use sparse_set::{ComponentSparseSet, PAGE_LEN, SparseMembership, SparseSet};
pub use virtual_vec::{PushError, VirtualVec};
