//! Finishing a loop of user code when one step panics.
//!
//! Dropping components runs user code, which may panic. Where a loop drops the values of many
//! columns, sets or tables, stopping at the first panic would leave the rest full while the
//! entities that own them are already gone. [`for_each_finishing`] runs the remaining steps
//! while unwinding instead, as `Vec`'s own drop does, so the storage ends up consistent and
//! every value is dropped once. A second panic during those steps aborts the process, as any
//! panic in a drop during unwinding does.

/// Calls `f` on every item of `items`; if a call panics, `f` is still called on every item
/// after it (while unwinding) before the panic continues.
pub(crate) fn for_each_finishing<I: Iterator, F: FnMut(I::Item)>(items: I, f: F) {
    /// Runs the rest of the loop when dropped, also during unwinding.
    struct Finish<I: Iterator, F: FnMut(I::Item)> {
        items: I,
        f: F,
    }

    impl<I: Iterator, F: FnMut(I::Item)> Finish<I, F> {
        fn run(&mut self) {
            for item in self.items.by_ref() {
                (self.f)(item);
            }
        }
    }

    impl<I: Iterator, F: FnMut(I::Item)> Drop for Finish<I, F> {
        fn drop(&mut self) {
            self.run();
        }
    }

    Finish { items, f }.run();
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use super::*;

    #[test]
    #[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
    fn every_step_runs_once_even_after_a_panic() {
        let mut seen = Vec::new();
        let result = catch_unwind(AssertUnwindSafe(|| {
            for_each_finishing(0..5, |i| {
                seen.push(i);
                if i == 1 {
                    panic!("step 1 fails");
                }
            })
        }));
        assert!(result.is_err());
        assert_eq!(seen, [0, 1, 2, 3, 4]);
        let mut all = Vec::new();
        for_each_finishing(0..3, |i| all.push(i));
        assert_eq!(all, [0, 1, 2]);
    }
}
