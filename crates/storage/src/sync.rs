//! The atomics behind the allocator's `&self` paths: std's in every normal build, loom's under
//! `--cfg folio_loom`, so the loom tests (`tests/loom.rs`) check the real [`Entities::reserve`]
//! and [`Entities::flush`](crate::Entities::flush) against every interleaving loom can build.
//!
//! The cfg is `folio_loom`, not the customary `loom`: other crates in the graph react to a plain
//! `cfg(loom)` and would need loom themselves. A `folio_loom` build is for the loom tests only:
//! loom's atomics panic outside `loom::model`, so the rest of the test suite cannot run in it.
//!
//! Loom's `AtomicUsize` has no `get_mut` (loom tracks every access, so it hands out `&mut` only
//! inside `with_mut`); [`AtomicUsize::get_mut`] here returns a guard that writes the value back
//! when dropped, so the allocator's code reads the same in both builds.
//!
//! [`Entities::reserve`]: crate::Entities::reserve

#[cfg(not(folio_loom))]
pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(folio_loom)]
pub(crate) use loom::sync::atomic::Ordering;
#[cfg(folio_loom)]
pub(crate) use loom_atomic::AtomicUsize;

#[cfg(folio_loom)]
mod loom_atomic {
    use std::ops::{Deref, DerefMut};

    use loom::sync::atomic::Ordering;

    /// Loom's `AtomicUsize` with std's `get_mut`.
    #[derive(Debug)]
    pub(crate) struct AtomicUsize(loom::sync::atomic::AtomicUsize);

    impl AtomicUsize {
        pub(crate) fn new(value: usize) -> Self {
            Self(loom::sync::atomic::AtomicUsize::new(value))
        }

        pub(crate) fn load(&self, order: Ordering) -> usize {
            self.0.load(order)
        }

        pub(crate) fn fetch_add(&self, value: usize, order: Ordering) -> usize {
            self.0.fetch_add(value, order)
        }

        pub(crate) fn fetch_sub(&self, value: usize, order: Ordering) -> usize {
            self.0.fetch_sub(value, order)
        }

        /// The value, through the exclusive borrow; written back when the guard drops.
        pub(crate) fn get_mut(&mut self) -> GetMut<'_> {
            let value = self.0.with_mut(|v| *v);
            GetMut { atomic: &mut self.0, value }
        }
    }

    /// The value of an exclusively borrowed [`AtomicUsize`].
    pub(crate) struct GetMut<'a> {
        atomic: &'a mut loom::sync::atomic::AtomicUsize,
        value: usize,
    }

    impl Deref for GetMut<'_> {
        type Target = usize;

        fn deref(&self) -> &usize {
            &self.value
        }
    }

    impl DerefMut for GetMut<'_> {
        fn deref_mut(&mut self) -> &mut usize {
            &mut self.value
        }
    }

    impl Drop for GetMut<'_> {
        fn drop(&mut self) {
            let value = self.value;
            self.atomic.with_mut(|v| *v = value);
        }
    }
}
