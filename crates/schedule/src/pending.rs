//! [`Pending`]: the count of a parallel segment's pool tasks, which the calling thread waits on
//! before the stack frame they borrow ends.
//!
//! The protocol, in full:
//! - a task is counted ([`Pending::add`]) before it is started, by the owner or by a task that
//!   is itself still counted, so the count cannot reach 0 while a task is still to come;
//! - a finished task (or one that could not be started) is uncounted by [`Pending::done`], a
//!   Release decrement that is its last access to the shared state; the one that takes the
//!   count to 0 then wakes the owner through a handle it cloned before;
//! - the owner waits ([`Pending::wait`]) until an Acquire load sees 0, so everything every task
//!   did happens before the owner goes on (and frees what the tasks borrowed).
//!
//! The loom tests (`pending/tests.rs`, built with `--cfg folio_loom`, where [`crate::sync`]
//! hands out loom's atomics and threads) check this very code over every interleaving: a
//! missing wake-up shows as a deadlock, a missing happens-before edge as a data race on what
//! the tasks wrote.

use crate::sync::{AtomicUsize, Ordering, Thread, thread};

/// The tasks counted and not yet done, and the thread that waits for them.
pub(crate) struct Pending {
    count: AtomicUsize,
    /// The thread that waits for `count` to reach 0.
    owner: Thread,
}

impl Pending {
    /// No task counted; the calling thread is the one that will wait.
    pub(crate) fn new() -> Self {
        Self { count: AtomicUsize::new(0), owner: thread::current() }
    }

    /// Counts a task about to be started. The caller is the owner, before it waits, or a task
    /// still counted itself: increments and decrements of one atomic are totally ordered, and
    /// each task's own decrement comes after the increments it made.
    pub(crate) fn add(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Uncounts one task: one that finished, or one counted that could not be started. The
    /// last one wakes the owner.
    ///
    /// # Safety
    /// - `this` points to a live `Pending` whose count includes the task being uncounted; it
    ///   stays alive until the count reaches 0, and may be gone as soon as the decrement here
    ///   is made (the owner frees it once [`Pending::wait`] returns). Nothing here touches it
    ///   after the decrement, and no reference to it is a function argument live across the
    ///   decrement (which would be a protected reference to freed memory).
    pub(crate) unsafe fn done(this: *const Self) {
        // SAFETY: alive, as the count still includes this task (the caller's contract); the
        // clone's `&self` ends with the call.
        let owner = unsafe { (*this).owner.clone() };
        // SAFETY: still alive; the reference covers only the atomic, all of it inside an
        // `UnsafeCell`, so the owner freeing the `Pending` after the decrement invalidates no
        // protected reference.
        let count = unsafe { &(*this).count };
        // Release: with the owner's Acquire load, all this task did happens before the owner
        // goes on.
        if count.fetch_sub(1, Ordering::Release) == 1 {
            // Through the clone: the `Pending` may be gone from here on.
            owner.unpark();
        }
    }

    /// Returns once the count is 0. Between looks it calls `idle`, which must return at the
    /// latest once the owner was unparked after the call began (as `thread::park` does); it
    /// may return sooner (spurious wake-ups, a timeout, other work done).
    pub(crate) fn wait(&self, mut idle: impl FnMut()) {
        // Acquire: pairs with every task's Release decrement (one release sequence on the
        // counter), so all they did happens before the caller goes on.
        while self.count.load(Ordering::Acquire) != 0 {
            idle();
        }
    }
}

#[cfg(test)]
mod tests;
