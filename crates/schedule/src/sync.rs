//! The atomics, locks and threads the executor's [`Workers`](crate::workers::Workers) and
//! [`Pending`](crate::pending::Pending) use: std's in every normal build, loom's under
//! `--cfg folio_loom`, so the loom tests (`src/workers/tests.rs`, `src/pending/tests.rs`)
//! check the real claim and wait protocols against every interleaving loom can build.
//!
//! The cfg is `folio_loom`, not the customary `loom`: other crates in the graph react to a plain
//! `cfg(loom)` and would need loom themselves. A `folio_loom` build is for the loom tests only:
//! loom's types panic outside `loom::model`, so the rest of the test suite cannot run in it.

#[cfg(not(folio_loom))]
pub(crate) use std::sync::Mutex;
#[cfg(not(folio_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(folio_loom))]
pub(crate) use std::thread::{self, Thread};

#[cfg(folio_loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(folio_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(folio_loom)]
pub(crate) use loom::thread::{self, Thread};
