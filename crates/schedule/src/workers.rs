//! [`Workers`]: how the workers of one parallel segment claim and finish its systems.
//!
//! The executor ([`Schedule::run`](crate::Schedule::run)) runs a segment's systems on rayon;
//! this module holds everything the workers share and every atomic they touch, and knows
//! nothing of rayon: the executor passes a closure that runs a node and one that starts another
//! worker. So the loom tests (`workers/tests.rs`, built with `--cfg folio_loom`, where
//! [`crate::sync`] hands out loom's atomics and mutexes) drive this very code on loom's threads,
//! and the ordinary build runs the same tests on OS threads (and under miri).
//!
//! # Protocol
//! A worker claims a ready node (first the segment's roots, in order, in chunks taken through
//! an atomic cursor; then nodes made ready by a finishing predecessor, from `ready`), runs it,
//! and makes ready each successor it was the last predecessor of. A worker stops when nothing
//! is ready; a worker that makes nodes ready keeps going, so every ready node is claimed by
//! someone, and wakes more workers (up to `max_workers`) when there is more ready work than
//! itself. So a run costs a few task spawns per segment instead of one per system, and systems
//! still run in parallel as soon as their predecessors are done.
//!
//! # Why the orderings suffice
//! - A node's system may read what its predecessors wrote: the last predecessor to finish sees
//!   every other predecessor's `fetch_sub` (AcqRel on one counter forms a release sequence) and
//!   hands the node over through `ready`'s mutex, or runs it itself.
//! - Roots have no predecessor in the segment; what came before the segment reaches the workers
//!   through the spawn (rayon's, or a thread's), so the root cursor can be Relaxed: it only has
//!   to hand each root out once.
//! - `active` is approximate (it only decides whether to wake another worker); `abort` is a
//!   hint that stops further launches; what the panic left is read under `failure`'s mutex.

use std::ops::Range;

use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering};

/// The most roots a worker claims at once. The bound keeps a worker that the OS deschedules
/// (the caller works beside the pool's threads, so there can be more workers than cores) from
/// holding more than a few microseconds of small systems while the others wait.
const MAX_ROOT_CHUNK: usize = 16;

/// Runs the node at a segment position; `Err` carries a panic's message.
pub(crate) type RunNode<'a> = dyn Fn(usize) -> Result<(), String> + Sync + 'a;

/// What the workers of one parallel segment share (see the [module docs](self)). Nodes are
/// positions in the segment, `0..predecessors.len()`.
pub(crate) struct Workers<'a> {
    /// Per node: predecessors not finished yet.
    pending: Vec<AtomicUsize>,
    /// Per node: the nodes that wait for it.
    successors: &'a [Vec<usize>],
    /// The nodes with no predecessor, in topological order.
    roots: Vec<usize>,
    /// The next root to claim (an index into `roots`).
    next_root: AtomicUsize,
    /// Nodes made ready during the run, not claimed yet.
    ready: Mutex<Vec<usize>>,
    /// Workers running (approximate: used only to decide whether to wake another).
    active: AtomicUsize,
    max_workers: usize,
    /// Set by the first failure: no further node starts.
    abort: AtomicBool,
    /// The failure earliest in the segment: `(node, message)`.
    failure: Mutex<Option<(usize, String)>>,
}

impl<'a> Workers<'a> {
    /// The shared state for a segment whose node `k` waits for `predecessors[k]` others and is
    /// waited for by `successors[k]`, run by at most `max_workers` workers, the caller included
    /// (it counts as active from the start).
    pub(crate) fn new(
        predecessors: &[usize],
        successors: &'a [Vec<usize>],
        max_workers: usize,
    ) -> Self {
        debug_assert_eq!(predecessors.len(), successors.len());
        Self {
            pending: predecessors.iter().map(|&p| AtomicUsize::new(p)).collect(),
            successors,
            roots: (0..predecessors.len()).filter(|&k| predecessors[k] == 0).collect(),
            next_root: AtomicUsize::new(0),
            ready: Mutex::new(Vec::new()),
            active: AtomicUsize::new(1),
            max_workers: max_workers.max(1),
            abort: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }

    /// The number of nodes ready at the start.
    pub(crate) fn roots(&self) -> usize {
        self.roots.len()
    }

    /// Starts workers (through `spawn`, each of which must call [`Self::work`]) for `available`
    /// ready nodes beyond the one the caller takes, while fewer than `max_workers` are active.
    pub(crate) fn wake(&self, available: usize, spawn: &mut impl FnMut()) {
        for _ in 1..available {
            if self.active.load(Ordering::Relaxed) >= self.max_workers {
                return;
            }
            self.active.fetch_add(1, Ordering::Relaxed);
            spawn();
        }
    }

    /// A chunk of the roots not claimed yet (indices into `roots`), if any are left.
    ///
    /// Guided self-scheduling: a chunk is the unclaimed roots divided by twice the number of
    /// workers, at least one and at most [`MAX_ROOT_CHUNK`]. Claiming one root at a time made
    /// every claim an atomic on a cache line that all workers write, which cost about 90 ns per
    /// system (empty_systems/1000 on 2 threads took 4x as long as on one); chunks shrink as the
    /// roots run out, so the last claims stay small and no worker is left holding much work
    /// while the others idle.
    fn claim_roots(&self) -> Option<Range<usize>> {
        let mut start = self.next_root.load(Ordering::Relaxed);
        loop {
            let left = self.roots.len().checked_sub(start).filter(|&left| left > 0)?;
            let chunk = left.div_ceil(2 * self.max_workers).min(MAX_ROOT_CHUNK);
            match self.next_root.compare_exchange_weak(
                start,
                start + chunk,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(start..start + chunk),
                Err(now) => start = now,
            }
        }
    }

    /// The next ready node, if any: from the worker's chunk of roots, a new chunk, or `ready`.
    fn claim(&self, chunk: &mut Range<usize>) -> Option<usize> {
        if let Some(r) = chunk.next().or_else(|| {
            *chunk = self.claim_roots()?;
            chunk.next()
        }) {
            return Some(self.roots[r]);
        }
        self.ready.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Runs ready nodes with `run` until none is left (or a node failed), starting more workers
    /// through `spawn` when it makes more nodes ready than it can take itself.
    pub(crate) fn work(&self, run: &RunNode<'_>, spawn: &mut impl FnMut()) {
        let mut chunk = 0..0;
        while let Some(k) = self.claim(&mut chunk) {
            if self.abort.load(Ordering::Acquire) {
                break;
            }
            if let Err(message) = run(k) {
                self.abort.store(true, Ordering::Release);
                let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
                if slot.as_ref().is_none_or(|(first, _)| k < *first) {
                    *slot = Some((k, message));
                }
                break;
            }
            let mut made_ready = 0;
            for &s in &self.successors[k] {
                if self.pending[s].fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.ready.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                    made_ready += 1;
                }
            }
            self.wake(made_ready, spawn);
        }
        self.active.fetch_sub(1, Ordering::Relaxed);
    }

    /// Workers still counted as active: 0 once every worker, the caller's included, returned
    /// from [`Self::work`].
    #[cfg(test)]
    fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// The failure earliest in the segment, once every worker is done: `(node, message)`.
    pub(crate) fn into_failure(self) -> Option<(usize, String)> {
        self.failure.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests;
