//! The wait protocol of [`Pending`], driven as the executor drives it: an owner that counts
//! tasks, starts them on other threads and waits; tasks that read the owner's state, write
//! their own output, may count and start more tasks, and then call [`Pending::done`].
//!
//! The same tests run in two builds:
//! - normally (and under miri, whose seeds vary the thread schedule): many runs on OS threads;
//! - with `--cfg folio_loom`, where [`crate::sync`] hands out loom's atomics and threads and
//!   `run` explores every interleaving with loom (these models are small enough to run
//!   without a preemption bound). Run it with
//!   `RUSTFLAGS="--cfg folio_loom" cargo test -p folio-schedule --release --lib pending::`.
//!
//! The owner waits with `thread::park` and reads the tasks' outputs *before* joining any
//! thread (a join would order the tasks' writes before the reads by itself and hide a missing
//! edge), and never locks the mutex of thread handles before those reads. What the checks catch:
//! - a lost wake-up (the owner parked for good while the count reaches 0): loom reports a
//!   deadlock, the OS-thread build hangs;
//! - the owner going on before a task's writes are visible, or freeing the state a task still
//!   reads: a data race on the cells, reported by loom and by miri;
//! - the owner going on while a task has not finished: the output it reads is not written.

use std::sync::Arc;

use super::Pending;
use crate::sync::model::{Runs, UnsafeCell};
use crate::sync::{Mutex, thread};

/// What the owner shares with its tasks for one run.
struct Segment {
    pending: Pending,
    /// Stands for the owner's frame that the tasks borrow: they read it, and the owner
    /// overwrites it (as freeing or reusing the frame would) once `wait` returns.
    frame: UnsafeCell<u32>,
    /// One per task, written by that task alone.
    outputs: Vec<UnsafeCell<u32>>,
    /// The tasks' threads, joined at the end (only after the owner's checks: a join orders
    /// the joined thread's writes before it, which would hide a missing edge).
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
}

// SAFETY: `frame` is written by the owner only after `wait` returns, and each output by its own
// task only, read by the owner after `wait`: that ordering is what these tests check, and loom
// or miri report any access that it does not cover.
unsafe impl Sync for Segment {}

const FRAME: u32 = 7;
const FREED: u32 = 0;

impl Segment {
    fn new(tasks: usize) -> Arc<Self> {
        Arc::new(Self {
            pending: Pending::new(),
            frame: UnsafeCell::new(FRAME),
            outputs: (0..tasks).map(|_| UnsafeCell::new(0)).collect(),
            threads: Mutex::new(Vec::new()),
        })
    }

    /// Task `k`'s work: reads the owner's frame, writes its output.
    fn work(&self, k: usize) {
        // SAFETY: the owner writes `frame` only after `wait`, which this task's `done` (not yet
        // called) holds back; loom and miri check exactly that.
        let frame = self.frame.with(|f| unsafe { *f });
        assert_eq!(frame, FRAME, "task {k} saw its owner's frame gone");
        // SAFETY: only task `k` writes this output; the owner reads it after `wait`.
        self.outputs[k].with_mut(|o| unsafe { *o = 1 + k as u32 });
    }

    /// The owner's end: waits (parking), frees the frame, checks every task's output.
    fn wait_and_check(&self) {
        self.pending.wait(thread::park);
        // SAFETY: every task is done (the count is 0), and did all its reads before.
        self.frame.with_mut(|f| unsafe { *f = FREED });
        for (k, output) in self.outputs.iter().enumerate() {
            // SAFETY: task `k` wrote its output before its `done`, which `wait` saw.
            let value = output.with(|o| unsafe { *o });
            assert_eq!(value, 1 + k as u32, "the owner went on before task {k} was done");
        }
    }
}

/// Counts and starts task `k` on a new thread, as `Helpers::spawn` does; `then` runs in the
/// task after its work and before its `done` (it may start more tasks).
fn spawn(segment: &Arc<Segment>, k: usize, then: impl FnOnce(&Arc<Segment>) + Send + 'static) {
    segment.pending.add();
    let task = Arc::clone(segment);
    let handle = thread::spawn(move || {
        task.work(k);
        then(&task);
        // SAFETY: `pending` is alive (this task holds the `Arc`) and counts this task.
        unsafe { Pending::done(&task.pending) };
    });
    segment.threads.lock().unwrap().push(handle);
}

/// Joins every task started, those started by tasks too (each records the ones it starts
/// before it is done).
fn join_all(segment: &Segment) {
    loop {
        let next = segment.threads.lock().unwrap().pop();
        match next {
            Some(handle) => handle.join().unwrap(),
            None => break,
        }
    }
}

/// One model: a segment of `tasks` outputs whose owner runs `start` (counting and starting
/// tasks), then waits, checks, and joins every task. Under loom every interleaving (no
/// preemption bound: these are small); otherwise 500 runs on OS threads, 4 under miri.
fn run(tasks: usize, start: fn(&Arc<Segment>)) {
    crate::sync::model::check(None, Runs { threads: 500, miri: 4 }, move || {
        let segment = Segment::new(tasks);
        start(&segment);
        segment.wait_and_check();
        join_all(&segment);
    });
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn the_owner_goes_on_only_after_every_task_is_done() {
    run(2, |segment| {
        spawn(segment, 0, |_| {});
        spawn(segment, 1, |_| {});
    });
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_task_started_by_a_task_is_waited_for_too() {
    // The second task is counted by the first while the first is still counted itself.
    run(2, |segment| spawn(segment, 0, |segment| spawn(segment, 1, |_| {})));
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_task_that_could_not_start_is_uncounted_and_the_wait_still_ends() {
    run(1, |segment| {
        spawn(segment, 0, |_| {});
        // A second task counted, whose start failed: `Helpers::spawn` uncounts it.
        segment.pending.add();
        // SAFETY: `pending` is alive and counts the task that never started.
        unsafe { Pending::done(&segment.pending) };
    });
}

/// Outside loom only: loom's threads exist only inside a model.
#[cfg(not(folio_loom))]
#[test]
fn with_no_task_the_wait_returns_at_once() {
    let pending = Pending::new();
    let mut looks = 0;
    pending.wait(|| looks += 1);
    assert_eq!(looks, 0);
}
