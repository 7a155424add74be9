//! The pool tasks of a parallel segment: [`run_on_pool`] starts them on rayon, and waits for
//! every one of them before its frame, which they borrow, ends.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Mutex;
use std::time::Duration;
use std::{mem, ptr};

use crate::pending::Pending;
use crate::workers::{RunNode, Workers};

/// Runs a segment's nodes: on this thread, and on pool tasks that `workers` wakes for the ready
/// nodes beyond this thread's. Returns once every task is done; a panic of this thread's, or one
/// that escaped a task, resumes here after that.
pub(crate) fn run_on_pool(workers: &Workers<'_>, run_node: &RunNode<'_>) {
    let helpers = Helpers::new(workers, run_node);
    // As a rayon scope does: a panic here is caught, the tasks (which borrow this frame) are
    // waited for, and only then does the panic go on.
    let worked = catch_unwind(AssertUnwindSafe(|| {
        workers.wake(workers.roots(), &mut || helpers.spawn());
        helpers.work();
    }));
    helpers.wait();
    if let Err(payload) = worked {
        resume_unwind(payload);
    }
    if let Some(payload) = helpers.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
        resume_unwind(payload);
    }
}

/// The pool tasks of one parallel segment: the workers beside the calling thread, and the
/// count the calling thread waits on before its frame (which they borrow) ends.
///
/// Why not `rayon::in_place_scope`: a scope task finishes inside rayon's
/// `ScopeBase::execute_job_closure`, whose closure argument holds a `&Scope`; the task sets
/// the scope's latch before that call returns, so the scope's owner can free the `Scope`
/// while a reference to it is still protected as a live function argument. Miri (Tree
/// Borrows, a seed that lets a spawned task finish last) reports that as undefined
/// behavior, and it is in rayon's code, not in anything folio can change. Here a task
/// touches the segment's state only through a raw pointer, and its last access is
/// [`Pending::done`] (loom-checked, with its own tests), after which it touches only what it
/// owns.
struct Helpers<'s> {
    workers: &'s Workers<'s>,
    run_node: &'s RunNode<'s>,
    /// Tasks started and not yet finished.
    pending: Pending,
    /// The first panic that escaped a task: a bug in the executor itself, as a node's panic
    /// is caught by the node. The caller resumes it once every task is done.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// A [`Helpers`] as a task carries it, its lifetime erased so that `rayon::spawn` takes the
/// task ([`Helpers::run_task`] states what keeps it alive).
struct HelpersPtr(*const Helpers<'static>);

// SAFETY: a task uses the pointee only through `&Helpers`, from its own thread while the owner
// and other tasks use it too; that is sound because `Helpers` is `Sync` (checked below):
// `Workers` is built to be shared by its workers, the `RunNode` is `Sync`, `Pending` holds an
// atomic and a `Thread` (which is `Sync`), and `panic` is a mutex.
unsafe impl Send for HelpersPtr {}

const _: () = {
    const fn assert_sync<T: Sync>() {}
    assert_sync::<Helpers<'static>>();
};

/// How long a pool thread waiting for its segment's tasks parks when it found no other job to
/// run: it is not in rayon's sleep, so rayon wakes no one for it and it must look again itself.
const OWNER_PARK: Duration = Duration::from_micros(50);

impl<'s> Helpers<'s> {
    fn new(workers: &'s Workers<'s>, run_node: &'s RunNode<'s>) -> Self {
        Self { workers, run_node, pending: Pending::new(), panic: Mutex::new(None) }
    }

    /// Works on the segment on this thread; more workers start as tasks on the pool.
    fn work(&self) {
        self.workers.work(self.run_node, &mut || self.spawn());
    }

    /// Starts another worker as a task on the pool.
    fn spawn(&self) {
        // Counted before the task exists. The caller is the owner (which waits only after
        // its own work) or a running task (counted until it ends).
        self.pending.add();
        let task = HelpersPtr(ptr::from_ref(self).cast());
        let spawned = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `task` points to this `Helpers`, whose `pending` now counts the task;
            // its owner keeps it, and all it borrows, alive until `pending` is 0 (`wait`).
            rayon::spawn(move || unsafe { Self::run_task(task) });
        }));
        if let Err(payload) = spawned {
            // No task exists to count (rayon could not start its pool): uncount it, or the
            // owner would wait for it forever.
            // SAFETY: `self.pending` is alive (borrowed here) and counts the task.
            unsafe { Pending::done(&self.pending) };
            resume_unwind(payload);
        }
    }

    /// A pool task: works on the segment, then counts itself finished.
    ///
    /// # Safety
    /// `task` points to a live `Helpers` whose `pending` counts this task; the `Helpers`, and
    /// everything it borrows, stays alive until `pending` reaches 0.
    unsafe fn run_task(task: HelpersPtr) {
        let helpers = task.0;
        let extra_panic = {
            // SAFETY: the caller's contract: alive, as `pending` still counts this task.
            // The reference is a local, not a function argument, and its last use is in this
            // block, before the decrement.
            let helpers = unsafe { &*helpers };
            let mut extra_panic = None;
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| helpers.work())) {
                let mut slot = helpers.panic.lock().unwrap_or_else(|e| e.into_inner());
                if slot.is_none() {
                    *slot = Some(payload);
                } else {
                    // Dropped only after the decrement: a panicking `Drop` here must not keep
                    // this task counted.
                    extra_panic = Some(payload);
                }
            }
            extra_panic
        };
        // SAFETY: still alive and counting this task (the caller's contract); the place is
        // computed without a reference to the `Helpers`, and `done` is this task's last
        // access to it.
        unsafe { Pending::done(ptr::addr_of!((*helpers).pending)) };
        if let Some(payload) = extra_panic {
            // A payload whose `Drop` panics again is forgotten rather than let abort the pool.
            if let Err(again) = catch_unwind(AssertUnwindSafe(|| drop(payload))) {
                mem::forget(again);
            }
        }
    }

    /// Waits until every task is done. On a pool thread it runs other jobs (tasks of this
    /// segment among them) while it waits, and when there is none it parks for
    /// [`OWNER_PARK`] at a time, so a task pushed onto another thread's deque later still
    /// finds it; off the pool it parks until the last task wakes it.
    fn wait(&self) {
        self.pending.wait(|| match rayon::yield_now() {
            Some(rayon::Yield::Executed) => {}
            Some(rayon::Yield::Idle) => std::thread::park_timeout(OWNER_PARK),
            None => std::thread::park(),
        });
    }
}
