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

/// What the loom tests of [`Workers`](crate::workers::Workers) and
/// [`Pending`](crate::pending::Pending) run on: loom's cell and model checker under
/// `--cfg folio_loom`; otherwise a std cell with loom's closure-based access, and many runs on
/// OS threads (a few under miri, whose seeds, `-Zmiri-many-seeds` in CI, vary the schedule
/// instead).
#[cfg(test)]
pub(crate) mod model {
    #[cfg(folio_loom)]
    pub(crate) use loom::cell::UnsafeCell;

    /// Every interleaving of `f`'s threads, within `preemption_bound` unless
    /// `LOOM_MAX_PREEMPTIONS` says otherwise (`None`: all of them); `_runs` is for the other
    /// builds.
    #[cfg(folio_loom)]
    pub(crate) fn check(
        preemption_bound: Option<usize>,
        _runs: Runs,
        f: impl Fn() + Sync + Send + 'static,
    ) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = preemption_bound;
        }
        builder.check(f);
    }

    /// std's `UnsafeCell` with loom's closure-based access.
    #[cfg(not(folio_loom))]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(folio_loom))]
    impl<T> UnsafeCell<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// `f` on OS threads, `runs.threads` times (`runs.miri` under miri, where each run is slow).
    #[cfg(not(folio_loom))]
    pub(crate) fn check(
        _preemption_bound: Option<usize>,
        runs: Runs,
        f: impl Fn() + Sync + Send + 'static,
    ) {
        for _ in 0..if cfg!(miri) { runs.miri } else { runs.threads } {
            f();
        }
    }

    /// How many times a model runs outside loom: on OS threads, and under miri (loom's build
    /// reads neither).
    #[derive(Clone, Copy)]
    #[cfg_attr(folio_loom, allow(dead_code))]
    pub(crate) struct Runs {
        pub(crate) threads: usize,
        pub(crate) miri: usize,
    }
}
