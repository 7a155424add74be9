//! folio's storage layer: memory that never moves.
//!
//! Everything above it (tables, sparse sets, the entity allocator) stands on **virtual arrays**:
//! containers that reserve address space up front and commit physical pages only as they fill.
//! They never reallocate, so growth never copies and never stalls a frame, and a pointer to an
//! element stays valid while the element lives.
//!
//! - [`vm`]: the [`PageSource`](vm::PageSource) interface (OS pages through `region`, heap pages
//!   for miri, a fault injector for tests) and [`Reservation`](vm::Reservation).
//! - [`VirtualVec`]: a `Vec` that never moves its elements.
//! - [`VirtualPool`]: stable slots with an intrusive freelist and a validity bitset.
//! - [`Column`]: the type-erased dense array that tables are made of.
//! - [`StorageConfig`]: the page source and reservation size a world's containers share.
//! - [`SparseSet`] and [`ComponentSparseSet`]: paged sparse arrays over dense data.
//! - [`Entity`] and [`Entities`]: generational ids, their allocator and locations.
//! - [`HandleMap`]: generational handles over dense data.
//!
//! # Safety model
//! Each module documents its own invariants; the rule they share is that a committed page is
//! never moved or unmapped while a container that owns it is alive.
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

pub use column::{Column, DropFn, copy_item, drop_fn_of, prefetch};
pub use config::StorageConfig;
pub use entity::{Entities, Entity, EntityLocation};
pub use error::StorageError;
pub use handle_map::{Handle, HandleMap};
pub use pool::VirtualPool;
pub use raw::{COLUMN_COMMIT_STEP, COMMIT_STEP_MAX, SMALL_COLUMN_BYTES};
pub use sparse_set::{ComponentSparseSet, PAGE_LEN, SparseSet};
pub use virtual_vec::{PushError, VirtualVec};
