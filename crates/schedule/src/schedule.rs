//! [`Schedule`]: systems, their order, and the executor that runs them in parallel.
//!
//! # Order and determinism
//! The schedule builds a DAG over its systems: an edge for every explicit `before`/`after`
//! (directly or through sets), and an edge between every pair of *conflicting* systems (one
//! writes what the other touches, or both may reserve entity ids: `Commands` and `&World`
//! systems), in the order they were added unless an explicit constraint
//! already orders them. Systems that do not conflict commute, so running ready systems in any
//! order on any number of threads gives the same world, bit for bit. Change ticks follow one
//! fixed topological order: a parallel segment's systems take the next ticks in that order, an
//! exclusive system takes the next tick when it starts (and any it takes itself), so every
//! write is newer than what every earlier system saw, and change detection is deterministic.
//! A system with run conditions takes two ticks: its conditions run at the first, the system
//! at the second, so its own writes are newer than what its conditions saw.
//!
//! # Execution
//! The topological order is cut into segments at exclusive systems (`fn(&mut World)`) and sync
//! points. A segment's systems run on rayon as soon as their predecessors finish; an exclusive
//! system runs alone between segments. Commands are applied in the topological order at sync
//! points and at the end of the run; then the event queues and removal logs are aged (the ones
//! the systems use, by default; see [`Schedule::set_event_aging`]).
//!
//! A segment whose work is less than [`Schedule::set_min_parallel_work`] (40 µs by default)
//! runs on the calling thread, in topological order: waking a second thread costs more than
//! such a segment's work (on the 2-core test machine, 50 empty systems took 0.6 µs on one
//! thread and 20 µs on two). The work is what the segment takes on the calling thread: its
//! first run uses the pool, its second is timed on the calling thread; from then on a small
//! segment stays there (timed every run, so one whose work grows goes to the pool).
//!
//! A larger segment runs where it has run faster. Its time runs until the next segment starts,
//! so it includes applying its systems' commands at the next sync point or at the end of the
//! run: threads do not always pay. Waking a sleeping pool thread can cost tens of microseconds
//! on a virtual machine, and commands applied after a run on the pool find the systems' writes
//! in another core's cache (frame_churn on the 2-core Intel VM: 250 µs a frame on the pool,
//! 220 µs on one thread). The way it runs is timed every run (a moving average, a new run
//! weighing a quarter); every 64 runs it runs the other way for 4 runs, of which the last
//! counts (the first pays for waking the pool's threads, which back-to-back runs on the pool
//! do not). It changes ways only when the other was faster by a tenth, so where the two are
//! close the choice does not follow the noise. The choice changes only where systems run,
//! never what they compute: the result is the same either way.
//!
//! # Panics
//! A system that panics stops the launch of further systems; the ones already running finish,
//! the commands of the systems that completed are applied, the panicking system's commands are
//! thrown away, and [`Schedule::run`] returns [`ScheduleError::SystemPanicked`]. The world stays
//! consistent: a running system can only write component values and resources, never structure.
//! Which of the other systems ran before the panic stopped the launches depends on timing, so
//! after a panic (only then) the world can differ between thread counts.
//!
//! A system that returns `Result<(), E>` and returns `Err` stops nothing: the run completes
//! as if it had returned `Ok` (its commands are applied), and then [`Schedule::run`] returns
//! [`ScheduleError::SystemFailed`] for the first such system in the topological order (so the
//! same one on any number of threads), counting the others. Only systems that can fail are
//! asked, so a schedule without them pays nothing. A panic in the same run is what the run
//! returns.
//!
//! A command that panics when it is applied throws away the rest of its buffer (entities it
//! reserved are not left behind); the other buffers are still applied. At a sync point, no
//! system after it runs, and the run returns the panic. However a run ends, the events are
//! aged, so an event lives two runs even across failures.
//!
//! # Safety model
//! During a segment every running system holds a shared `&World` and writes only what its
//! [`SystemAccess`] declares; the DAG orders every conflicting pair, so two systems that run at
//! the same time never touch the same data mutably. Each system's state lives in a
//! [`NodeCell`], which exactly one worker uses per run (a node is claimed once: as a root of its
//! segment, or by the worker that saw its last predecessor finish).

use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use std::{mem, ptr};

use ahash::AHashMap;
use folio_query::{World, WorldId};

use crate::access::SystemAccess;
use crate::commands::CommandStats;
use crate::config::{IntoSystemConfigs, Label, SetConfig, SystemConfig};
use crate::error::ScheduleError;
use crate::event::{EventAging, EventRegistry, register_updater};
use crate::param::EventUpdater;
use crate::pending::Pending;
use crate::system::{BoxedCondition, BoxedSystem};
use crate::workers::{RunNode, Workers};

/// One system in the schedule, with its run conditions.
struct Node {
    system: BoxedSystem,
    conditions: Vec<BoxedCondition>,
    label: TypeId,
    sets: Vec<&'static str>,
    before: Vec<Label>,
    after: Vec<Label>,
    /// The node it was chained after, if any (a node, not a label: see
    /// [`IntoSystemConfigs::chain`]).
    after_node: Option<usize>,
    /// The system's access merged with its conditions'.
    access: SystemAccess,
    sync_point: bool,
}

impl Node {
    /// How many ticks a run of the node takes: one for its conditions, if it has any, and one
    /// for its system, so that what the system writes is newer than what its conditions saw.
    fn ticks_taken(&self) -> u32 {
        if self.conditions.is_empty() { 1 } else { 2 }
    }

    /// The tick the system runs at, when its conditions run at `tick`.
    fn system_tick(&self, tick: u32) -> u32 {
        tick.wrapping_add(self.ticks_taken() - 1)
    }
}

/// A node's state, used by one task at a time.
struct NodeCell(UnsafeCell<Node>);

// SAFETY: `Node` is `Send` and `Sync` (systems and conditions are `Send + Sync`, the rest is
// plain data), so sharing `&Node` (`Schedule::node`, outside a run) is fine; and during a run
// the executor hands each cell to one worker (see the module's safety model), so no two threads
// use one cell's `&mut Node` at once.
unsafe impl Sync for NodeCell {}

/// A part of the topological order.
enum Segment {
    /// Systems that may run in parallel: `nodes` in topological order, with, per node, the
    /// number of predecessors inside the segment and the successors inside it; and how its
    /// last run went.
    Parallel {
        nodes: Vec<usize>,
        predecessors: Vec<usize>,
        successors: Vec<Vec<usize>>,
        runs: SegmentRuns,
    },
    /// An exclusive system or a sync point.
    Exclusive(usize),
}

/// What the executor knows of a parallel segment's cost: its runs each way, timed from its
/// start to the start of the next segment (or the end of the run), commands applied. The way
/// it runs is a moving average of its runs ([`blend`]), so that one slow run does not flip the
/// choice; the other way is the last run of its latest probe.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentRuns {
    /// Runs on the calling thread: the segment's work.
    serial: Option<Duration>,
    /// Runs on the pool.
    pool: Option<Duration>,
    /// Runs the way the timings favour since the last probe ended.
    since_probe: u32,
    /// The probe under way: whether it runs on the pool, and how many runs it has left.
    probe: Option<(bool, u32)>,
    /// Whether the timings favour the pool (for a segment over the threshold). It changes
    /// only when the other way was faster by a tenth: where the two are close, the choice
    /// stays put instead of following the noise.
    pool_favoured: bool,
}

impl Default for SegmentRuns {
    fn default() -> Self {
        Self { serial: None, pool: None, since_probe: 0, probe: None, pool_favoured: true }
    }
}

impl SegmentRuns {
    /// Where the segment runs next: whether on the pool, and whether that run is part of a
    /// probe of the way its timings do not favour (see [`Schedule::segment_on_pool`], which
    /// handles the thresholds `ZERO` and `MAX`). Its first run is on the pool (its work is
    /// unknown), its second on this thread to measure the work; then work under `min` stays on
    /// this thread (timed each run), and work over it runs the way the timings favour, and the
    /// other way for [`PROBE_RUNS`] runs after every [`PROBE_EVERY`].
    pub(crate) fn next_run(&mut self, min: Duration) -> (bool, bool) {
        match self.serial {
            None => (self.pool.is_none(), false),
            Some(work) if work < min => (false, false),
            Some(_) => {
                if self.probe.is_none() && self.since_probe >= PROBE_EVERY {
                    self.probe = Some((!self.pool_favoured, PROBE_RUNS));
                }
                match self.probe {
                    Some((on_pool, _)) => (on_pool, true),
                    None => (self.pool_favoured, false),
                }
            }
        }
    }

    /// Records a run that took `took`, on the pool or not, part of a probe or not.
    pub(crate) fn record(&mut self, on_pool: bool, probe: bool, took: Duration) {
        let time = if on_pool { &mut self.pool } else { &mut self.serial };
        if !probe {
            *time = Some(blend(*time, took));
            self.since_probe = self.since_probe.saturating_add(1);
            self.reconsider();
            return;
        }
        // A probe's run replaces what was known of that way (an old run, maybe the segment's
        // cold first one); its last run, past the wake-up of the first, is what stays.
        *time = Some(took);
        self.reconsider();
        if let Some((_, left)) = &mut self.probe {
            *left -= 1;
            if *left == 0 {
                self.probe = None;
                self.since_probe = 0;
            }
        }
    }

    /// Takes a new timing into account: the other way becomes favoured if it was faster by
    /// more than a tenth.
    fn reconsider(&mut self) {
        if let (Some(pool), Some(serial)) = (self.pool, self.serial) {
            let (now, other) = if self.pool_favoured { (pool, serial) } else { (serial, pool) };
            if other * 10 < now * 9 {
                self.pool_favoured = !self.pool_favoured;
            }
        }
    }
}

/// A parallel segment's run being timed, until the next segment starts.
struct SegmentTiming {
    /// Its index in the plan's segments.
    segment: usize,
    /// Whether it ran on the pool.
    on_pool: bool,
    /// Whether the run is part of a probe.
    probe: bool,
    started: Instant,
}

impl SegmentTiming {
    /// Records the time since the segment started as its latest run that way.
    fn finish(self, segments: &mut [Segment]) {
        let Segment::Parallel { runs, .. } = &mut segments[self.segment] else {
            unreachable!("only parallel segments are timed")
        };
        runs.record(self.on_pool, self.probe, self.started.elapsed());
    }
}

/// A moving average of a segment's run times: the first run as it is, then each new run
/// weighing a quarter.
fn blend(average: Option<Duration>, run: Duration) -> Duration {
    average.map_or(run, |average| (average * 3 + run) / 4)
}

/// A segment runs the way its timings do not favour for [`PROBE_RUNS`] runs once every this
/// many, to see whether that has changed (the pool began or ceased to pay).
const PROBE_EVERY: u32 = 64;

/// The runs of a probe. More than one: the pool's first run after a while on the calling
/// thread pays for waking its sleeping threads, which back-to-back runs on the pool do not.
const PROBE_RUNS: u32 = 4;

/// The default of [`Schedule::set_min_parallel_work`].
pub const MIN_PARALLEL_WORK: Duration = Duration::from_micros(40);

struct Plan {
    /// Node indices in topological order.
    order: Vec<usize>,
    /// Each node's position in `order`.
    position: Vec<usize>,
    /// Each node's first tick, as an offset: the ticks the nodes before it in `order` take
    /// ([`Node::ticks_taken`]).
    tick_offset: Vec<u32>,
    segments: Vec<Segment>,
    /// The nodes whose runs can fail without panicking (systems that return `Result`), in
    /// `order`: asked for their failure after every run. Empty for most schedules.
    fallible: Vec<usize>,
}

/// A set of systems and the order they run in (see the module docs).
pub struct Schedule {
    nodes: Vec<NodeCell>,
    sets: AHashMap<&'static str, SetConfig>,
    plan: Option<Plan>,
    world: Option<WorldId>,
    /// The agers of the event types its systems use, sorted by type and deduplicated.
    event_updaters: Vec<EventUpdater>,
    /// Which event queues and removal logs a run ages.
    event_aging: EventAging,
    /// For [`EventAging::All`]: the world registry's agers (with ours) as of the registry's
    /// version `.1`, refreshed when the registry grows.
    world_updaters: (Vec<EventUpdater>, u64),
    stats: CommandStats,
    /// Below this, a segment runs on the calling thread (see the module docs).
    min_parallel_work: Duration,
    /// The world and its tick when this schedule last had its stored ticks clamped
    /// ([`CHECK_TICKS_EVERY`]).
    ticks_checked: Option<(WorldId, u32)>,
}

/// A schedule calls [`World::check_change_ticks`] at the end of a run once this many ticks
/// have passed since its last call on that world (and at its first run on a world). A stored
/// tick must be clamped within 2^32 - [`MAX_CHANGE_AGE`](folio_query::MAX_CHANGE_AGE) = 2^30
/// ticks of growing older than `MAX_CHANGE_AGE`, or it reads as new again; checking every
/// 2^28 leaves three quarters of that margin to one run's own ticks. A check reads every
/// stored tick once: 107 µs for 100,000 entities of two components (median of 50, measured
/// once on the 2-core Intel VM; no bench keeps it); at 200 systems and 60 runs a second it
/// comes about every six hours.
pub const CHECK_TICKS_EVERY: u32 = 1 << 28;

/// Whether a run that ends at tick `now` on `world` should clamp the world's stored ticks,
/// given the last check (`checked`).
pub(crate) fn tick_check_due(checked: Option<(WorldId, u32)>, world: WorldId, now: u32) -> bool {
    match checked {
        Some((id, at)) if id == world => now.wrapping_sub(at) >= CHECK_TICKS_EVERY,
        _ => true,
    }
}

impl Default for Schedule {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            sets: AHashMap::default(),
            plan: None,
            world: None,
            event_updaters: Vec::new(),
            event_aging: EventAging::Used,
            world_updaters: (Vec::new(), 0),
            stats: CommandStats::default(),
            min_parallel_work: MIN_PARALLEL_WORK,
            ticks_checked: None,
        }
    }
}

impl Schedule {
    /// An empty schedule.
    pub fn new() -> Self {
        Self::default()
    }

    /// Segments whose work (their time on the calling thread) is under `work` run on the
    /// calling thread (see the module docs); [`MIN_PARALLEL_WORK`] by default. `Duration::ZERO` always uses the pool,
    /// `Duration::MAX` never does (not even on the first run, whose work is unknown and which
    /// otherwise uses the pool; see the module docs). Either way the results are the same.
    pub fn set_min_parallel_work(&mut self, work: Duration) -> &mut Self {
        self.min_parallel_work = work;
        self
    }

    /// See [`Schedule::set_min_parallel_work`].
    pub fn min_parallel_work(&self) -> Duration {
        self.min_parallel_work
    }

    /// Which event queues and removal logs each run ages at its end: the ones its systems use
    /// ([`EventAging::Used`], the default), every one in the world ([`EventAging::All`]) or
    /// none ([`EventAging::Never`]). With several schedules per frame, give the one that runs
    /// once per frame `All` and the others `Never`: an event then lives two frames, however
    /// often the others run.
    pub fn set_event_aging(&mut self, aging: EventAging) -> &mut Self {
        self.event_aging = aging;
        self
    }

    /// See [`Schedule::set_event_aging`].
    pub fn event_aging(&self) -> EventAging {
        self.event_aging
    }

    /// Adds systems.
    ///
    /// # Panics
    /// When a system's own parameters conflict (the message names them); see
    /// [`Schedule::try_add_systems`].
    pub fn add_systems<M>(&mut self, systems: impl IntoSystemConfigs<M>) -> &mut Self {
        self.try_add_systems(systems).unwrap_or_else(|e| panic!("Schedule::add_systems: {e}"))
    }

    /// Adds systems, or says which system's parameters conflict (nothing is added then).
    pub fn try_add_systems<M>(
        &mut self,
        systems: impl IntoSystemConfigs<M>,
    ) -> Result<&mut Self, ScheduleError> {
        let configs = systems.into_configs().0;
        for config in &configs {
            check_params(config)?;
        }
        for config in configs {
            let SystemConfig {
                system,
                label,
                sets,
                before,
                after,
                conditions,
                sync_point,
                after_previous,
                ..
            } = config;
            let mut access = system.access().clone();
            for condition in &conditions {
                access.extend(condition.access());
            }
            // The configs are added in their list's order, so the one before this one in its
            // list is the node added just before it.
            let after_node = after_previous.then(|| self.nodes.len() - 1);
            let node = Node {
                system,
                conditions,
                label,
                sets,
                before,
                after,
                after_node,
                access,
                sync_point,
            };
            self.nodes.push(NodeCell(UnsafeCell::new(node)));
        }
        self.plan = None;
        self.world = None;
        Ok(self)
    }

    /// Sets the ordering and run conditions of the named set.
    pub fn configure_set(&mut self, set: &'static str, config: SetConfig) -> &mut Self {
        self.sets.insert(set, config);
        self.plan = None;
        self.world = None;
        self
    }

    /// The number of systems (sync points included).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there is no system.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Commands applied and skipped over every run so far.
    pub fn command_stats(&self) -> &CommandStats {
        &self.stats
    }

    /// The system names in the order the schedule runs them (builds the plan if needed).
    pub fn order(&mut self, world: &mut World) -> Result<Vec<String>, ScheduleError> {
        self.initialize(world)?;
        let plan = self.plan.as_ref().expect("built by initialize");
        Ok(plan.order.iter().map(|&i| self.node(i).system.name().to_owned()).collect())
    }

    fn node(&self, i: usize) -> &Node {
        // SAFETY: called only outside a run (through `&self`/`&mut self` of the schedule), when
        // no task holds a node.
        unsafe { &*self.nodes[i].0.get() }
    }

    fn node_mut(&mut self, i: usize) -> &mut Node {
        self.nodes[i].0.get_mut()
    }

    /// Initializes every system for `world` and builds the plan (once per world and change).
    pub fn initialize(&mut self, world: &mut World) -> Result<(), ScheduleError> {
        if self.world == Some(world.id()) && self.plan.is_some() {
            return Ok(());
        }
        let mut updaters: Vec<EventUpdater> = Vec::new();
        for i in 0..self.nodes.len() {
            let node = self.node_mut(i);
            node.system.initialize(world)?;
            for condition in &mut node.conditions {
                condition.initialize(world)?;
                updaters.extend_from_slice(condition.event_updaters());
            }
            updaters.extend_from_slice(node.system.event_updaters());
        }
        for config in self.sets.values_mut() {
            for condition in &mut config.conditions {
                check_condition(condition.as_ref())?;
                condition.initialize(world)?;
                updaters.extend_from_slice(condition.event_updaters());
            }
        }
        updaters.sort_by_key(|(id, _)| *id);
        updaters.dedup_by_key(|(id, _)| *id);
        // A parameter written outside this crate may list agers without registering them.
        for &updater in &updaters {
            register_updater(world, updater);
        }
        self.event_updaters = updaters;
        self.world_updaters = (Vec::new(), 0);
        self.plan = Some(self.build_plan()?);
        self.world = Some(world.id());
        Ok(())
    }

    #[allow(clippy::needless_range_loop)] // `edges` is written at other indices in the loop
    fn build_plan(&self) -> Result<Plan, ScheduleError> {
        let n = self.nodes.len();
        let matches = |label: &Label| -> Vec<usize> {
            (0..n)
                .filter(|&i| match label {
                    Label::System(id, _) => self.node(i).label == *id,
                    Label::Set(set) => self.node(i).sets.contains(set),
                })
                .collect()
        };
        // A label that names nothing is a typo, not a constraint to drop silently.
        let mut labels: Vec<&Label> =
            self.sets.values().flat_map(|c| c.before.iter().chain(&c.after)).collect();
        for i in 0..n {
            labels.extend(self.node(i).before.iter().chain(&self.node(i).after));
        }
        for name in self.sets.keys() {
            if matches(&Label::Set(name)).is_empty() {
                return Err(ScheduleError::UnknownLabel(format!(
                    "set `{name}` (configured, but no system is in it)"
                )));
            }
        }
        for label in labels {
            if matches(label).is_empty() {
                let what = match label {
                    Label::System(_, name) => {
                        format!("system `{}`", crate::param::short_type_name(name))
                    }
                    Label::Set(set) => format!("set `{set}`"),
                };
                return Err(ScheduleError::UnknownLabel(what));
            }
        }
        // Explicit edges, from the systems' and their sets' constraints.
        let mut edges = vec![Vec::new(); n];
        for i in 0..n {
            let node = self.node(i);
            let set_configs = node.sets.iter().filter_map(|s| self.sets.get(s));
            let befores = node.before.iter().chain(set_configs.clone().flat_map(|c| &c.before));
            let afters = node.after.iter().chain(set_configs.flat_map(|c| &c.after));
            for label in befores {
                edges[i].extend(matches(label).into_iter().filter(|&j| j != i));
            }
            for label in afters {
                for j in matches(label).into_iter().filter(|&j| j != i) {
                    edges[j].push(i);
                }
            }
            if let Some(j) = node.after_node {
                edges[j].push(i);
            }
        }
        for list in &mut edges {
            list.sort_unstable();
            list.dedup();
        }
        if let Some(cycle) = find_cycle(&edges) {
            let names = cycle.iter().map(|&i| self.node(i).system.name().to_owned()).collect();
            return Err(ScheduleError::Cycle(names));
        }
        // Reachability over the explicit edges, then conflict edges in insertion order where
        // nothing orders the pair yet (an added edge never closes a cycle: its head does not
        // reach its tail).
        let mut reach = Reach::new(n);
        for (from, list) in edges.iter().enumerate() {
            for &to in list {
                reach.add_edge(from, to);
            }
        }
        for i in 0..n {
            for j in i + 1..n {
                if reach.reaches(i, j) || reach.reaches(j, i) {
                    continue;
                }
                if self.node(i).access.conflicts_with(&self.node(j).access) {
                    edges[i].push(j);
                    reach.add_edge(i, j);
                }
            }
        }
        let order = topological_order(&edges);
        let mut position = vec![0; n];
        let mut tick_offset = vec![0; n];
        let mut ticks = 0u32;
        for (p, &i) in order.iter().enumerate() {
            position[i] = p;
            tick_offset[i] = ticks;
            ticks = ticks.wrapping_add(self.node(i).ticks_taken());
        }
        let mut segments = Vec::new();
        let mut current: Vec<usize> = Vec::new();
        let flush = |current: &mut Vec<usize>, segments: &mut Vec<Segment>| {
            if current.is_empty() {
                return;
            }
            let nodes = std::mem::take(current);
            let local: AHashMap<usize, usize> =
                nodes.iter().enumerate().map(|(k, &i)| (i, k)).collect();
            let mut predecessors = vec![0; nodes.len()];
            let mut successors = vec![Vec::new(); nodes.len()];
            for (k, &i) in nodes.iter().enumerate() {
                for &j in &edges[i] {
                    if let Some(&kj) = local.get(&j) {
                        successors[k].push(kj);
                        predecessors[kj] += 1;
                    }
                }
            }
            segments.push(Segment::Parallel {
                nodes,
                predecessors,
                successors,
                runs: SegmentRuns::default(),
            });
        };
        for &i in &order {
            if self.node(i).access.exclusive {
                flush(&mut current, &mut segments);
                segments.push(Segment::Exclusive(i));
            } else {
                current.push(i);
            }
        }
        flush(&mut current, &mut segments);
        let fallible = order.iter().copied().filter(|&i| self.node(i).system.can_fail()).collect();
        Ok(Plan { order, position, tick_offset, segments, fallible })
    }

    /// Runs every system once (see the module docs for order, commands and panics). Every
    /// [`CHECK_TICKS_EVERY`] ticks (and at its first run on a world) it ends with
    /// [`World::check_change_ticks`], so change detection stays right however long the game
    /// runs.
    pub fn run(&mut self, world: &mut World) -> Result<(), ScheduleError> {
        self.initialize(world)?;
        world.flush();
        let mut plan = self.plan.take().expect("built by initialize");
        let result = self.run_plan(world, &mut plan);
        self.plan = Some(plan);
        let now = world.change_tick();
        if tick_check_due(self.ticks_checked, world.id(), now) {
            world.check_change_ticks();
            self.check_change_ticks(now);
            self.ticks_checked = Some((world.id(), now));
        }
        result
    }

    /// Clamps the last-run tick of every system and run condition (see
    /// [`System::check_change_tick`](crate::System::check_change_tick)): one that has not run
    /// for 2^32 ticks would otherwise read its last run as recent and miss every change since.
    fn check_change_ticks(&mut self, now: u32) {
        for cell in &mut self.nodes {
            let node = cell.0.get_mut();
            node.system.check_change_tick(now);
            for condition in &mut node.conditions {
                condition.check_change_tick(now);
            }
        }
        for config in self.sets.values_mut() {
            for condition in &mut config.conditions {
                condition.check_change_tick(now);
            }
        }
    }

    fn run_plan(&mut self, world: &mut World, plan: &mut Plan) -> Result<(), ScheduleError> {
        // Set conditions, once per run, in name order (a fixed order: they may have effects).
        let mut set_allowed: AHashMap<&'static str, bool> = AHashMap::default();
        let mut names: Vec<&'static str> = self.sets.keys().copied().collect();
        names.sort_unstable();
        for name in names {
            let config = self.sets.get_mut(name).expect("listed above");
            let mut allowed = true;
            for condition in &mut config.conditions {
                let tick = world.increment_change_tick();
                let ran = catch_unwind(AssertUnwindSafe(|| condition.run_exclusive(world, tick)));
                match ran {
                    Ok(ok) => allowed &= ok,
                    Err(payload) => {
                        // No system runs; the events still age, as at the end of every run.
                        self.age_events(world);
                        return Err(ScheduleError::SystemPanicked {
                            system: format!("run condition of set `{name}`"),
                            message: panic_message(payload),
                        });
                    }
                }
            }
            set_allowed.insert(name, allowed);
        }
        let allowed: Vec<bool> = (0..self.nodes.len())
            .map(|i| self.node(i).sets.iter().all(|s| set_allowed.get(s).copied().unwrap_or(true)))
            .collect();
        let mut applied_upto = 0;
        let mut failure: Option<(usize, String)> = None;
        // A command that panicked at a sync point: the systems after it do not run.
        let mut sync_failure: Option<ScheduleError> = None;
        let (order, position, tick_offset) = (&plan.order, &plan.position, &plan.tick_offset);
        // The parallel segment being timed: until the next segment that is not a sync point,
        // so its time includes applying its systems' commands.
        let mut timing: Option<SegmentTiming> = None;
        for s in 0..plan.segments.len() {
            let sync_point =
                matches!(plan.segments[s], Segment::Exclusive(i) if self.node(i).sync_point);
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
                    timing =
                        Some(SegmentTiming { segment: s, on_pool, probe, started: Instant::now() });
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
                Segment::Exclusive(i) => {
                    let i = *i;
                    if self.node(i).sync_point {
                        let applied = self.apply_commands(world, &order[applied_upto..position[i]]);
                        applied_upto = position[i];
                        if let Err(error) = applied {
                            sync_failure = Some(error);
                            break;
                        }
                        continue;
                    }
                    if allowed[i] {
                        let tick = world.increment_change_tick_mut();
                        for _ in 1..self.node(i).ticks_taken() {
                            world.increment_change_tick_mut();
                        }
                        failure = run_exclusive_node(self.node_mut(i), world, tick)
                            .err()
                            .map(|message| (i, message));
                    }
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
        for &i in order {
            let node = self.node_mut(i);
            let applied = catch_unwind(AssertUnwindSafe(|| {
                node.system.apply_deferred(world, &mut stats);
            }));
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

    /// Whether a parallel segment runs on the pool this time (see the module docs), and
    /// whether the run is part of a probe ([`SegmentRuns::next_run`]); `min_parallel_work`
    /// `ZERO` always uses the pool, `MAX` never.
    fn segment_on_pool(&self, runs: &mut SegmentRuns) -> (bool, bool) {
        let min = self.min_parallel_work;
        if min == Duration::ZERO || min == Duration::MAX {
            return (min == Duration::ZERO, false);
        }
        runs.next_run(min)
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
        // Asked only for a run on the pool: the first call makes rayon's global pool.
        let threads = if on_pool && nodes.len() > 1 { rayon::current_num_threads() } else { 1 };
        if threads <= 1 {
            // In topological order on this thread: no task overhead.
            for &i in nodes {
                // SAFETY: this thread runs the segment's nodes one after another, each once, so
                // this is the only access to the cell.
                let node = unsafe { &mut *cells[i].0.get() };
                // SAFETY: the run initialized every node for `world`; nothing else runs now.
                let result = unsafe { run_segment_node(node, world, allowed[i], || tick(i)) };
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
            unsafe { run_segment_node(node, world, allowed[i], || tick(i)) }
        };
        // Outside the pool, the caller is one more thread beside the pool's.
        let max_workers =
            if rayon::current_thread_index().is_some() { threads } else { threads + 1 };
        let workers = Workers::new(predecessors, successors, max_workers.min(nodes.len()));
        run_on_pool(&workers, &run_node);
        workers.into_failure().map(|(k, message)| (nodes[k], message))
    }
}

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

/// Runs a node of a parallel segment (unless its set conditions disallowed it, `allowed`
/// false) through the shared world, with its query matches refreshed first, catching a panic.
///
/// # Safety
/// - The node's system and conditions were initialized for `world`.
/// - No system whose access conflicts with the node's runs until this returns.
#[inline(always)]
unsafe fn run_segment_node(
    node: &mut Node,
    world: &World,
    allowed: bool,
    tick: impl FnOnce() -> u32,
) -> Result<(), String> {
    // Refreshing a query's matches reads only the world's archetypes, which no system of a
    // parallel segment can change.
    node.system.update(world);
    for condition in &mut node.conditions {
        condition.update(world);
    }
    if !allowed {
        return Ok(());
    }
    // SAFETY: initialized (the caller's contract) and just updated for `world`; no conflicting
    // system runs now (the caller's contract).
    unsafe { run_node_shared(node, world, tick()) }
}

/// Runs a node's conditions (at `tick`) and system (at [`Node::system_tick`]) through a shared
/// world, catching a panic.
///
/// # Safety
/// - As for [`System::run_unsafe`](crate::System::run_unsafe), for the system and each
///   condition.
unsafe fn run_node_shared(node: &mut Node, world: &World, tick: u32) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| {
        // Every condition runs, also after one said no, so each keeps its own state current
        // (`run_once`, an event reader's cursor, its last-run tick), as a set's conditions do.
        let mut run = true;
        for condition in &mut node.conditions {
            // SAFETY: forwarded from the caller (conditions' access is part of the node's).
            run &= unsafe { condition.run_unsafe(world, tick) };
        }
        if !run {
            return;
        }
        let tick = node.system_tick(tick);
        // SAFETY: forwarded from the caller.
        unsafe { node.system.run_unsafe(world, tick) }
    }))
    .map_err(panic_message)
}

/// Runs a node's conditions (at `tick`) and system (at [`Node::system_tick`]) with the world to
/// themselves, catching a panic.
fn run_exclusive_node(node: &mut Node, world: &mut World, tick: u32) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| {
        // Every condition runs, as in `run_node_shared`.
        let mut run = true;
        for condition in &mut node.conditions {
            run &= condition.run_exclusive(world, tick);
        }
        if run {
            node.system.run_exclusive(world, node.system_tick(tick));
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

/// A system's (and its conditions') check that their parameters do not conflict.
fn check_params(config: &SystemConfig) -> Result<(), ScheduleError> {
    config.system.validate()?;
    config.conditions.iter().try_for_each(|c| check_condition(c.as_ref()))
}

/// A run condition must be valid and read-only: it runs beside other systems' work, and what
/// it would defer (commands) or write would have no place in the schedule's order.
fn check_condition(condition: &dyn crate::System<Out = bool>) -> Result<(), ScheduleError> {
    condition.validate()?;
    let access = condition.access();
    if access.writes_anything() || access.reserves_entities || access.exclusive {
        return Err(ScheduleError::ConditionNotReadOnly { condition: condition.name().to_owned() });
    }
    Ok(())
}

/// Reachability as a bit matrix: `rows[a]` has bit `b` when `a` reaches `b`.
struct Reach {
    words: usize,
    rows: Vec<u64>,
}

impl Reach {
    fn new(n: usize) -> Self {
        let words = n.div_ceil(64).max(1);
        Self { words, rows: vec![0; words * n] }
    }

    fn reaches(&self, a: usize, b: usize) -> bool {
        self.rows[a * self.words + b / 64] & (1 << (b % 64)) != 0
    }

    /// Adds `a -> b`: everything that reaches `a` (and `a`) now reaches `b` and all `b` reaches.
    fn add_edge(&mut self, a: usize, b: usize) {
        let n = self.rows.len() / self.words;
        let mut from_b: Vec<u64> = self.rows[b * self.words..(b + 1) * self.words].to_vec();
        from_b[b / 64] |= 1 << (b % 64);
        for x in 0..n {
            if x == a || self.reaches(x, a) {
                let row = &mut self.rows[x * self.words..(x + 1) * self.words];
                for (w, f) in row.iter_mut().zip(&from_b) {
                    *w |= f;
                }
            }
        }
    }
}

/// A cycle in `edges`, as a list of nodes, if there is one.
fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let n = edges.len();
    let mut mark = vec![Mark::New; n];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    let mut path: Vec<usize> = Vec::new();
    for start in 0..n {
        if mark[start] != Mark::New {
            continue;
        }
        stack.push((start, 0));
        mark[start] = Mark::Active;
        path.push(start);
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&to) = edges[node].get(*next) {
                *next += 1;
                match mark[to] {
                    Mark::New => {
                        mark[to] = Mark::Active;
                        stack.push((to, 0));
                        path.push(to);
                    }
                    Mark::Active => {
                        let from = path.iter().position(|&p| p == to).expect("on the path");
                        let mut cycle = path[from..].to_vec();
                        cycle.push(to);
                        return Some(cycle);
                    }
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                stack.pop();
                path.pop();
            }
        }
    }
    None
}

/// Kahn's algorithm, always taking the ready node added first: one fixed order.
fn topological_order(edges: &[Vec<usize>]) -> Vec<usize> {
    let n = edges.len();
    let mut indegree = vec![0usize; n];
    for list in edges {
        for &to in list {
            indegree[to] += 1;
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &to in &edges[i] {
            indegree[to] -= 1;
            if indegree[to] == 0 {
                ready.insert(to);
            }
        }
    }
    debug_assert_eq!(order.len(), n, "cycles are rejected before");
    order
}
