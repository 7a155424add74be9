//! A [`Schedule`]'s run loop: set conditions, segments and exclusive systems in order, the
//! commands applied at sync points and at the end, event aging, and the failures reported.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use folio_query::World;

use super::threshold::SegmentTiming;
use super::{Clock, Node, Plan, Schedule, Segment, run_on_pool, trace_span};
use crate::error::ScheduleError;
use crate::event::{EventAging, EventRegistry};
use crate::workers::Workers;

/// Whether this target can run threads: not wasm32 without the `atomics` feature (the web's
/// wasm32-unknown-unknown, WASI's wasm32-wasip1), where every segment runs on the calling thread.
pub(super) const THREADS: bool =
    !cfg!(all(target_family = "wasm", not(target_feature = "atomics")));

impl Schedule {
    pub(super) fn run_plan(
        &mut self,
        world: &mut World,
        plan: &mut Plan,
    ) -> Result<(), ScheduleError> {
        // Set conditions, once per run, in the order the sets were first configured (a fixed
        // order: they may have effects), every one of them every run.
        let mut set_allowed: Vec<bool> = Vec::with_capacity(self.sets.len());
        for s in 0..self.sets.len() {
            let (set, config) = &mut self.sets[s];
            let mut allowed = true;
            for condition in &mut config.conditions {
                trace_span!("condition", tracing::field::debug(&*set));
                let tick = world.increment_change_tick();
                let ran = catch_unwind(AssertUnwindSafe(|| condition.run_exclusive(world, tick)));
                match ran {
                    Ok(ok) => allowed &= ok,
                    Err(payload) => {
                        let system = format!("run condition of set `{set:?}`");
                        // No system runs; the events still age, as at the end of every run.
                        self.age_events(world);
                        return Err(ScheduleError::SystemPanicked {
                            system,
                            message: panic_message(payload),
                        });
                    }
                }
            }
            set_allowed.push(allowed);
        }
        let allowed: Vec<bool> =
            plan.node_sets.iter().map(|sets| sets.iter().all(|&s| set_allowed[s])).collect();
        let mut applied_upto = 0;
        let mut failure: Option<(usize, String)> = None;
        // A command that panicked at a sync point: the systems after it do not run.
        let mut sync_failure: Option<ScheduleError> = None;
        let (order, tick_offset) = (&plan.order, &plan.tick_offset);
        // The parallel segment being timed: until the next segment that is not a sync point,
        // so its time includes applying its systems' commands.
        let mut timing: Option<SegmentTiming> = None;
        for s in 0..plan.segments.len() {
            let sync_point = matches!(plan.segments[s], Segment::Sync { .. });
            if !sync_point && let Some(timing) = timing.take() {
                timing.finish(&mut plan.segments);
            }
            match &mut plan.segments[s] {
                Segment::Parallel { nodes, predecessors, successors, runs } => {
                    // The segment is a contiguous slice of the order: its nodes take the next
                    // ticks (one or two each, `Node::ticks_taken`), in that order, whatever the
                    // world's tick is now (an exclusive system before may have taken ticks of
                    // its own).
                    let first = tick_offset[nodes[0]];
                    let seg_base = world.change_tick();
                    let last = nodes[nodes.len() - 1];
                    let span =
                        tick_offset[last].wrapping_sub(first) + self.node(last).ticks_taken();
                    for _ in 0..span {
                        world.increment_change_tick_mut();
                    }
                    let ticks =
                        |i: usize| seg_base.wrapping_add(tick_offset[i].wrapping_sub(first));
                    let (on_pool, probe) = self.segment_on_pool(runs);
                    // Without threads there is no choice to time (and wasm32-unknown-unknown
                    // has no clock: `Instant::now` panics there).
                    timing = THREADS.then(|| SegmentTiming {
                        segment: s,
                        on_pool,
                        probe,
                        started: Instant::now(),
                    });
                    failure = self.run_parallel(
                        world,
                        nodes,
                        predecessors,
                        successors,
                        &allowed,
                        ticks,
                        on_pool,
                    );
                }
                Segment::Sync { upto, .. } => {
                    let upto = *upto;
                    let applied = self.apply_commands(world, &order[applied_upto..upto]);
                    applied_upto = upto;
                    if let Err(error) = applied {
                        sync_failure = Some(error);
                        break;
                    }
                    continue;
                }
                Segment::Exclusive(i) => {
                    let i = *i;
                    let tick = world.increment_change_tick_mut();
                    for _ in 1..self.node(i).ticks_taken() {
                        world.increment_change_tick_mut();
                    }
                    let timed = self.collect_stats;
                    failure = run_exclusive_node(self.node_mut(i), world, tick, allowed[i], timed)
                        .err()
                        .map(|message| (i, message));
                }
            }
            if failure.is_some() {
                break;
            }
        }
        if let Some((i, _)) = &failure {
            let node = self.node_mut(*i);
            // A thrown-away command whose `Drop` panics (a component of a buffered spawn) must
            // not unwind out of the run: the run's panic is the system's, reported below, and
            // the other buffers and the aging of events are still to come.
            let _ = catch_unwind(AssertUnwindSafe(|| {
                node.system.discard_deferred(world);
                for condition in &mut node.conditions {
                    condition.discard_deferred(world);
                }
            }));
        }
        let applied = self.apply_commands(world, &order[applied_upto..]);
        if let Some(timing) = timing {
            timing.finish(&mut plan.segments);
        }
        self.age_events(world);
        // Taken also when a panic is what the run reports: a failure must not be reported by
        // a later run.
        let failed = self.take_failures(&plan.fallible);
        if let Some((i, message)) = failure {
            return Err(ScheduleError::SystemPanicked {
                system: self.node(i).system.name().to_owned(),
                message,
            });
        }
        if let Some(error) = sync_failure {
            return Err(error);
        }
        applied?;
        failed.map_or(Ok(()), Err)
    }

    /// The first of `fallible`'s systems (in their order) whose run returned `Err`, with how
    /// many others did; every one's failure is taken.
    fn take_failures(&mut self, fallible: &[usize]) -> Option<ScheduleError> {
        let mut first: Option<ScheduleError> = None;
        for &i in fallible {
            let system = &mut self.node_mut(i).system;
            if let Some(error) = system.take_failure() {
                match &mut first {
                    None => {
                        let system = system.name().to_owned();
                        first = Some(ScheduleError::SystemFailed { system, error, others: 0 });
                    }
                    Some(ScheduleError::SystemFailed { others, .. }) => *others += 1,
                    Some(_) => unreachable!("only failures are kept"),
                }
            }
        }
        first
    }

    /// Ages the event queues and removal logs [`Schedule::set_event_aging`] chose, each once:
    /// the end of every run, also one that failed.
    fn age_events(&mut self, world: &mut World) {
        let updaters = match self.event_aging {
            EventAging::Never => return,
            EventAging::Used => &self.event_updaters,
            EventAging::All => {
                let (registered, version) =
                    world.resource::<EventRegistry>().map_or((&[][..], 0), EventRegistry::updaters);
                if version != self.world_updaters.1 {
                    // Ours are registered at `initialize`, but the registry is a resource
                    // that may have been removed since: keep them in the list either way.
                    let mut all = self.event_updaters.clone();
                    all.extend_from_slice(registered);
                    all.sort_by_key(|(id, _)| *id);
                    all.dedup_by_key(|(id, _)| *id);
                    self.world_updaters = (all, version);
                }
                if self.world_updaters.1 == 0 {
                    &self.event_updaters
                } else {
                    &self.world_updaters.0
                }
            }
        };
        for (_, update) in updaters {
            update(world);
        }
    }

    /// Applies the command buffers of the systems in `order`, in that order. A command that
    /// panics (a custom closure, a component's `Drop`) does not stop the others: the rest of
    /// its buffer is thrown away (entities it reserved are not left behind), the following
    /// buffers are applied, and the first panic is returned.
    fn apply_commands(&mut self, world: &mut World, order: &[usize]) -> Result<(), ScheduleError> {
        let mut stats = std::mem::take(&mut self.stats);
        let mut first_panic = None;
        let mut clock = Clock::start(self.collect_stats);
        for &i in order {
            let node = self.node_mut(i);
            let applied = if node.system.has_deferred() {
                let applied = catch_unwind(AssertUnwindSafe(|| {
                    trace_span!("commands", node.system.name());
                    node.system.apply_deferred(world, &mut stats);
                }));
                node.times.commands_applied(&mut clock);
                applied
            } else {
                // No parameter that buffers (`SystemParam::DEFERRED`): no span, no clock read.
                catch_unwind(AssertUnwindSafe(|| node.system.apply_deferred(world, &mut stats)))
            };
            if let Err(payload) = applied {
                // The buffers its panic left (a system may have more than one); a payload whose
                // `Drop` panics here must not unwind out of the run either.
                let _ = catch_unwind(AssertUnwindSafe(|| node.system.discard_deferred(world)));
                first_panic.get_or_insert_with(|| ScheduleError::SystemPanicked {
                    system: format!("commands of `{}`", node.system.name()),
                    message: panic_message(payload),
                });
            }
        }
        self.stats = stats;
        // Entities reserved and not spawned by a buffer (a system's `World::reserve_entity`)
        // exist, empty, from here on, as after any sync point.
        world.flush();
        first_panic.map_or(Ok(()), Err)
    }

    /// Runs one parallel segment, on the pool or (`on_pool` false) on this thread in
    /// topological order; the first panic, if any, as `(node, message)`.
    #[allow(clippy::too_many_arguments)]
    fn run_parallel(
        &mut self,
        world: &mut World,
        nodes: &[usize],
        predecessors: &[usize],
        successors: &[Vec<usize>],
        allowed: &[bool],
        tick: impl Fn(usize) -> u32 + Sync,
        on_pool: bool,
    ) -> Option<(usize, String)> {
        let world = &*world;
        let cells = &self.nodes;
        let timed = self.collect_stats;
        // Asked only for a run on the pool: the first call makes rayon's global pool. Where
        // threads cannot run (wasm32 without atomics: the web, WASI) the pool is never made and
        // every segment runs on this thread, in topological order.
        let threads =
            if THREADS && on_pool && nodes.len() > 1 { rayon::current_num_threads() } else { 1 };
        if threads <= 1 {
            // In topological order on this thread: no task overhead.
            for &i in nodes {
                // SAFETY: this thread runs the segment's nodes one after another, each once, so
                // this is the only access to the cell.
                let node = unsafe { &mut *cells[i].0.get() };
                // SAFETY: the run initialized every node for `world`; nothing else runs now.
                let result =
                    unsafe { run_segment_node(node, world, allowed[i], timed, || tick(i)) };
                if let Err(message) = result {
                    return Some((i, message));
                }
            }
            return None;
        }
        let run_node = |k: usize| -> Result<(), String> {
            let i = nodes[k];
            // SAFETY: node `i` is taken once per run, by the one worker that claimed it (see
            // `Workers`), so this is the only access to the cell.
            let node = unsafe { &mut *cells[i].0.get() };
            // SAFETY: the run initialized every node for `world`; the DAG keeps every system
            // whose access conflicts with this node's from running now.
            unsafe { run_segment_node(node, world, allowed[i], timed, || tick(i)) }
        };
        // Outside the pool, the caller is one more thread beside the pool's.
        let max_workers =
            if rayon::current_thread_index().is_some() { threads } else { threads + 1 };
        let workers = Workers::new(predecessors, successors, max_workers.min(nodes.len()));
        run_on_pool(&workers, &run_node);
        workers.into_failure().map(|(k, message)| (nodes[k], message))
    }
}

/// Runs a node of a parallel segment through the shared world, with its query matches
/// refreshed first, catching a panic: its conditions always, its system unless its set
/// conditions disallowed it (`allowed` false) or one of its own conditions says no.
///
/// # Safety
/// - The node's system and conditions were initialized for `world`.
/// - No system whose access conflicts with the node's runs until this returns.
#[inline(always)]
unsafe fn run_segment_node(
    node: &mut Node,
    world: &World,
    allowed: bool,
    timed: bool,
    tick: impl FnOnce() -> u32,
) -> Result<(), String> {
    // Refreshing a query's matches reads only the world's archetypes, which no system of a
    // parallel segment can change.
    node.system.update(world);
    for condition in &mut node.conditions {
        condition.update(world);
    }
    if !allowed && node.conditions.is_empty() {
        node.times.skipped(timed);
        return Ok(());
    }
    // SAFETY: initialized (the caller's contract) and just updated for `world`; no conflicting
    // system runs now (the caller's contract). Two copies, so the untimed one reads no flag.
    unsafe {
        if timed {
            run_node_shared::<true>(node, world, tick(), allowed)
        } else {
            run_node_shared::<false>(node, world, tick(), allowed)
        }
    }
}

/// Runs a node's conditions (at `tick`) and, if they and its sets (`allowed`) all say yes, its
/// system (at [`Node::system_tick`]) through a shared world, catching a panic; timed if
/// `TIMED` ([`Schedule::stats`]).
///
/// # Safety
/// - As for [`System::run_unsafe`](crate::System::run_unsafe), for the system and each
///   condition.
unsafe fn run_node_shared<const TIMED: bool>(
    node: &mut Node,
    world: &World,
    tick: u32,
    allowed: bool,
) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| {
        let mut clock = Clock::start(TIMED);
        // Every condition runs, also after one said no and also when a set said no, so each
        // keeps its own state current (`run_once`, an event reader's cursor, its last-run
        // tick), as a set's conditions do.
        let mut run = allowed;
        for condition in &mut node.conditions {
            trace_span!("condition", condition.name());
            // SAFETY: forwarded from the caller (conditions' access is part of the node's).
            run &= unsafe { condition.run_unsafe(world, tick) };
        }
        node.times.conditions_ran(&mut clock, !node.conditions.is_empty());
        if !run {
            node.times.skipped(TIMED);
            return;
        }
        let tick = node.system_tick(tick);
        trace_span!("system", node.system.name());
        // A system whose parameters refuse this run (a `Single` without its one match) is
        // skipped, as a run condition saying no would.
        // SAFETY: forwarded from the caller.
        let ran = unsafe { node.system.try_run_unsafe(world, tick) }.is_ok();
        node.times.system_ran(&mut clock, ran);
    }))
    .map_err(panic_message)
}

/// Runs a node's conditions (at `tick`) and, if they and its sets (`allowed`) all say yes, its
/// system (at [`Node::system_tick`]) with the world to themselves, catching a panic; timed if
/// `timed`.
fn run_exclusive_node(
    node: &mut Node,
    world: &mut World,
    tick: u32,
    allowed: bool,
    timed: bool,
) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| {
        let mut clock = Clock::start(timed);
        // Every condition runs, as in `run_node_shared`.
        let mut run = allowed;
        for condition in &mut node.conditions {
            trace_span!("condition", condition.name());
            run &= condition.run_exclusive(world, tick);
        }
        node.times.conditions_ran(&mut clock, !node.conditions.is_empty());
        if run {
            trace_span!("system", node.system.name());
            // Skipped if its parameters refuse this run, as in `run_node_shared`.
            let ran = node.system.try_run_exclusive(world, node.system_tick(tick)).is_ok();
            node.times.system_ran(&mut clock, ran);
        } else {
            node.times.skipped(timed);
        }
    }))
    .map_err(panic_message)
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic payload that is not a string)".to_owned())
}
