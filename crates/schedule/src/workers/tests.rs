//! The claim protocol of [`Workers`], driven as the executor drives it, on small segment graphs.
//!
//! The same tests run in two builds:
//! - normally (and under miri, whose seeds vary the thread schedule): many runs on OS threads;
//! - with `--cfg folio_loom`, where [`crate::sync`] hands out loom's atomics and mutexes and
//!   `model` is loom's model checker: every interleaving within the preemption bound
//!   (`LOOM_MAX_PREEMPTIONS`, 3 by default here). Run it with
//!   `RUSTFLAGS="--cfg folio_loom" cargo test -p folio-schedule --release --lib workers::`.
//!
//! Each node's output lives in a cell that the node writes once and that its successors read
//! when they run; loom (and miri) report a data race if a successor could run without seeing
//! its predecessors' writes, so the checks cover the memory orderings, not only the counts:
//! - every node runs exactly once, and only after all its predecessors ran;
//! - every worker stops, and `active` returns to zero;
//! - after a failure, no successor of a failed node runs, and the failure reported is the
//!   earliest failed node in the segment.

use std::sync::Arc;

use super::{RunNode, Workers};
use crate::sync::model::{Runs, UnsafeCell};
use crate::sync::{Mutex, thread};

/// Every interleaving within 3 preemptions under loom (4 takes minutes); otherwise 300 runs on
/// OS threads, 2 under miri.
fn model(f: impl Fn() + Sync + Send + 'static) {
    crate::sync::model::check(Some(3), Runs { threads: 300, miri: 2 }, f);
}

/// What a node left in its output cell.
const NOT_RUN: u8 = 0;
const RAN: u8 = 1;
const FAILED: u8 = 2;

/// A node's output: written by the node, read by its successors.
struct Output(UnsafeCell<u8>);

// SAFETY: a node's cell is written only by the worker running the node (each node is claimed
// once) and read by its successors after that, which is what the tests check: loom and miri
// report any access that is not ordered after the write.
unsafe impl Sync for Output {}

/// One run of a segment: the shared state, the nodes' outputs and the started workers.
struct Run {
    workers: Workers<'static>,
    predecessors_of: Vec<Vec<usize>>,
    failing: &'static [usize],
    outputs: Vec<Output>,
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
}

impl Run {
    fn run_node(&self, k: usize) -> Result<(), String> {
        for &p in &self.predecessors_of[k] {
            // SAFETY: `p` finished before `k` was claimed; a missing happens-before edge is the
            // data race this test looks for, and loom or miri would report it here.
            let seen = self.outputs[p].0.with(|v| unsafe { *v });
            assert_eq!(seen, RAN, "node {k} runs before its predecessor {p} finished");
        }
        let failed = self.failing.contains(&k);
        self.outputs[k].0.with_mut(|v| {
            // SAFETY: only the worker that claimed `k` touches its cell now (successors read
            // it only after `k` finishes); a second claim would be reported as a race.
            let v = unsafe { &mut *v };
            assert_eq!(*v, NOT_RUN, "node {k} runs twice");
            *v = if failed { FAILED } else { RAN };
        });
        if failed { Err(format!("node {k} failed")) } else { Ok(()) }
    }
}

/// A worker, as the executor's pool tasks (`Helpers::work`) are: it runs nodes and starts more
/// workers.
fn work(run: &Arc<Run>) {
    let run_node: &RunNode<'_> = &|k| run.run_node(k);
    run.workers.work(run_node, &mut || spawn_worker(run));
}

fn spawn_worker(run: &Arc<Run>) {
    let worker = Arc::clone(run);
    let handle = thread::spawn(move || work(&worker));
    run.threads.lock().unwrap().push(handle);
}

/// Runs the segment `successors` (node `k` waits for every node that lists it) on at most
/// `max_workers` workers, with the nodes in `failing` failing, and checks the promises listed
/// in the module docs.
fn check(successors: Vec<Vec<usize>>, failing: &'static [usize], max_workers: usize) {
    // Loom's threads need `'static` data: the graph is leaked for the model and freed after it
    // (LeakSanitizer runs these tests too).
    let leaked: *mut [Vec<usize>] = Box::into_raw(successors.into_boxed_slice());
    // SAFETY: `leaked` comes from `Box::into_raw` and is freed only below, once the model and
    // every thread it started are done with this borrow.
    let successors: &'static [Vec<usize>] = unsafe { &*leaked };
    model(move || {
        let n = successors.len();
        let mut predecessors_of = vec![Vec::new(); n];
        for (k, list) in successors.iter().enumerate() {
            for &s in list {
                predecessors_of[s].push(k);
            }
        }
        let predecessors: Vec<usize> = predecessors_of.iter().map(Vec::len).collect();
        let run = Arc::new(Run {
            workers: Workers::new(&predecessors, successors, max_workers),
            predecessors_of,
            failing,
            outputs: (0..n).map(|_| Output(UnsafeCell::new(NOT_RUN))).collect(),
            threads: Mutex::new(Vec::new()),
        });
        // The caller's part, as in `Schedule::run_parallel`.
        run.workers.wake(run.workers.roots(), &mut || spawn_worker(&run));
        work(&run);
        // A worker records the workers it starts before it stops, so once the list is empty
        // after every handle taken from it was joined, no worker is left.
        loop {
            let next = run.threads.lock().unwrap().pop();
            match next {
                Some(handle) => handle.join().unwrap(),
                None => break,
            }
        }
        let run = Arc::into_inner(run).expect("every worker is joined");
        assert_eq!(run.workers.active(), 0, "a worker did not sign off");
        // SAFETY: every worker is joined; nothing else holds the cells.
        let outputs: Vec<u8> = run.outputs.iter().map(|o| o.0.with(|v| unsafe { *v })).collect();
        let failure = run.workers.into_failure();
        let failed: Vec<usize> = (0..n).filter(|&k| outputs[k] == FAILED).collect();
        match failed.first() {
            None => {
                assert!(failure.is_none());
                assert!(outputs.iter().all(|&o| o == RAN), "a node never ran: {outputs:?}");
            }
            Some(&first) => {
                let (k, message) = failure.expect("a failed node is reported");
                assert_eq!((k, message), (first, format!("node {first} failed")));
                for &f in &failed {
                    for &s in &successors[f] {
                        assert_eq!(outputs[s], NOT_RUN, "{s} ran after its predecessor failed");
                    }
                }
            }
        }
        if failing.is_empty() {
            assert!(failed.is_empty());
        } else {
            assert!(!failed.is_empty(), "the first failing node claimed runs: {outputs:?}");
        }
    });
    // SAFETY: from `Box::into_raw` above; the model returned, and with it dropped the closure,
    // every `Run` and every thread that borrowed the graph.
    drop(unsafe { Box::from_raw(leaked) });
}

/// A diamond (0 before 1 and 2, both before 3) beside an independent root: hand-over through
/// `ready`, and a worker woken by a node that makes two ready.
#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn diamond_beside_an_independent_root() {
    check(vec![vec![1, 2], vec![3], vec![3], vec![], vec![]], &[], 3);
}

/// Two roots that each make two nodes ready at once: concurrent wakes.
#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn two_roots_each_fan_out() {
    check(vec![vec![2, 3], vec![4, 5], vec![], vec![], vec![], vec![]], &[], 3);
}

/// Five roots claimed in chunks through the cursor, all before one join node whose counter
/// every root lowers.
#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn many_roots_claimed_in_chunks_before_a_join() {
    check(vec![vec![5], vec![5], vec![5], vec![5], vec![5], vec![]], &[], 2);
}

/// Both middle nodes of the diamond fail: the join never runs, the earlier failure is the one
/// reported, and every worker still stops.
#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn failures_stop_successors_and_the_earliest_is_reported() {
    check(vec![vec![1, 2], vec![3], vec![3], vec![], vec![]], &[1, 2], 3);
}

/// A failing root beside others: the abort flag stops further launches.
#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_failing_root_aborts_the_segment() {
    check(vec![vec![2], vec![2], vec![], vec![]], &[0], 2);
}
