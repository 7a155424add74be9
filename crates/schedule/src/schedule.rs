//! [`Schedule`]: the type, its systems and their configuration, and the entry points of a run;
//! the plan, the run loop, the pool tasks and the choice of thread are in the submodules.
//!
//! What a run promises (order, determinism, the parallel threshold, panics) is on
//! [`Schedule`]'s own page. What follows is the executor's safety model, which is internal.
//!
//! # Safety model
//! During a segment every running system holds a shared `&World` and writes only what its
//! [`SystemAccess`] declares; the DAG orders every conflicting pair, so two systems that run at
//! the same time never touch the same data mutably. Each system's state lives in a
//! [`NodeCell`], which exactly one worker uses per run (a node is claimed once: as a root of its
//! segment, or by the worker that saw its last predecessor finish).

use std::any::TypeId;
use std::cell::UnsafeCell;
use std::time::Duration;

use folio_query::{World, WorldId};

use crate::access::SystemAccess;
use crate::commands::CommandStats;
use crate::config::{Dependency, ErasedSet, IntoSystemConfigs, SetConfig, SystemConfig, SystemSet};
use crate::error::ScheduleError;
use crate::event::{EventAging, register_updater};
use crate::param::EventUpdater;
use crate::system::{BoxedCondition, BoxedSystem};

mod plan;
mod pool;
mod run;
mod stats;
mod threshold;

pub(crate) use pool::run_on_pool;
use stats::{Clock, NodeTimes, RunTimes, trace_span};
pub use stats::{ScheduleStats, SystemStats};
pub(crate) use threshold::SegmentRuns;

/// One system in the schedule, with its run conditions.
struct Node {
    system: BoxedSystem,
    conditions: Vec<BoxedCondition>,
    label: TypeId,
    sets: Vec<ErasedSet>,
    before: Vec<Dependency>,
    after: Vec<Dependency>,
    /// The node it was chained after, if any (a node, not a label: see
    /// [`IntoSystemConfigs::chain`]), and whether that link asks for an automatic sync point.
    after_node: Option<(usize, bool)>,
    /// The system's access merged with its conditions'.
    access: SystemAccess,
    sync_point: bool,
    /// What its runs took, for [`Schedule::stats`].
    times: NodeTimes,
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
    /// An exclusive system.
    Exclusive(usize),
    /// A sync point: the commands of the systems before `upto` in the order (those not applied
    /// yet) are applied. `node` is the [`ApplyDeferred`](crate::ApplyDeferred) it was
    /// configured as; `None` for an automatic one.
    Sync { upto: usize, node: Option<usize> },
}

/// How [`Schedule::order`] names an [automatic sync point](Schedule#automatic-sync-points).
pub const AUTO_SYNC_NAME: &str = "apply_deferred (automatic)";

/// The default of [`Schedule::set_min_parallel_work`].
pub const MIN_PARALLEL_WORK: Duration = Duration::from_micros(40);

struct Plan {
    /// Node indices in topological order (automatic sync points are not nodes: they are
    /// only in `segments`).
    order: Vec<usize>,
    /// Each node's first tick, as an offset: the ticks the nodes before it in `order` take
    /// ([`Node::ticks_taken`]).
    tick_offset: Vec<u32>,
    segments: Vec<Segment>,
    /// The nodes whose runs can fail without panicking (systems that return `Result`), in
    /// `order`: asked for their failure after every run. Empty for most schedules.
    fallible: Vec<usize>,
    /// Per node, the configured sets (indices into [`Schedule`]'s `sets`) it is in, directly or
    /// through nesting, ascending: its system runs only if every one of them allows it.
    node_sets: Vec<Vec<usize>>,
}

/// A set of systems and the order they run in.
///
/// Systems are added with [`Schedule::add_systems`] and ordered with `before`/`after`, typed
/// sets ([`SystemSet`], [`Schedule::configure_set`], nested with [`SetConfig::in_set`]), run conditions and sync points
/// ([`ApplyDeferred`](crate::ApplyDeferred)); [`Schedule::run`] runs each of them once. The
/// sections below are what a run promises.
///
/// # Order
/// The schedule builds a DAG over its systems: an edge for every explicit `before`/`after`
/// (directly or through sets), and an edge between every pair of *conflicting* systems (one
/// writes what the other touches, or both may reserve entity ids: [`Commands`](crate::Commands)
/// and `&World` systems), in the order they were added unless an explicit constraint already
/// orders them. A system in a set is in every set that set is nested in, and follows all their
/// constraints. A cycle among the explicit constraints, a label that names no system, or sets
/// nested in a cycle is an error ([`ScheduleError::Cycle`], [`ScheduleError::UnknownLabel`],
/// [`ScheduleError::SetCycle`]).
///
/// Set run conditions run once per run, before any system, in the order the sets were first
/// configured; a system runs only if every set it is in (through nesting too) and its own
/// conditions allow it.
///
/// # Determinism
/// Systems that do not conflict commute, so running ready systems in any order on any number
/// of threads gives the same world, bit for bit. Change ticks follow one fixed topological
/// order: a parallel segment's systems take the next ticks in that order, an exclusive system
/// takes the next tick when it starts (and any it takes itself), so every write is newer than
/// what every earlier system saw, and change detection is deterministic. A system with run
/// conditions takes two ticks: its conditions run at the first, the system at the second, so
/// its own writes are newer than what its conditions saw.
///
/// # Execution
/// The topological order is cut into segments at exclusive systems (`fn(&mut World)`) and sync
/// points (explicit and [automatic](#automatic-sync-points)). A segment's systems run on rayon
/// as soon as their predecessors finish; an exclusive system runs alone between segments.
/// Commands are applied in the topological order at sync points and at the end of the run;
/// then the event queues and removal logs are aged (the ones the systems use, by default; see
/// [`Schedule::set_event_aging`]).
///
/// # Automatic sync points
/// A system ordered after a system with [`Commands`](crate::Commands) (by `before`/`after`,
/// [`chain`](IntoSystemConfigs::chain) or the sets they are in) sees what those commands did:
/// the schedule puts a sync point between the two, as if an
/// [`ApplyDeferred`](crate::ApplyDeferred) were chained between them. Only explicit orderings
/// ask for one; the edges the schedule adds between conflicting systems do not. An ordering
/// that ignores the commands (below) passes them on: a system sees the commands of every
/// system before it on a path of orderings, unless every ordering of the path ignores them. None is added
/// where a sync point already lies between the two (an `ApplyDeferred` ordered between them,
/// or placed between them by the order the systems were added in: a sync point conflicts with
/// every system). The points are as few as the ordering allows: each system gets a depth, the
/// most points needed on a path of orderings to it, and every system at one depth shares one
/// point, placed as late as it can be; the result is part of the plan, the same on any number
/// of threads. [`Schedule::order`] lists them as [`AUTO_SYNC_NAME`].
///
/// A sync point has a cost: it ends a parallel segment, so the systems on either side of it
/// can no longer run at the same time, and applying commands needs the world to itself. Where
/// the later system does not need the earlier one's commands, order them with
/// [`after_ignore_deferred`](crate::IntoSystemConfig::after_ignore_deferred),
/// [`before_ignore_deferred`](crate::IntoSystemConfig::before_ignore_deferred),
/// [`chain_ignore_deferred`](IntoSystemConfigs::chain_ignore_deferred) or their
/// [`SetConfig`] forms; [`Schedule::set_auto_sync`]`(false)` turns the points off for the
/// whole schedule (commands are then applied only at `ApplyDeferred` and at the end of the
/// run).
///
/// ```
/// use folio_schedule::prelude::*;
///
/// struct Enemy;
///
/// fn spawn_enemy(mut commands: Commands) {
///     commands.spawn((Enemy,));
/// }
/// fn count(enemies: Query<&Enemy>, mut seen: ResMut<Vec<usize>>) {
///     seen.push(enemies.iter().count());
/// }
///
/// let mut world = World::new();
/// world.insert_resource(Vec::<usize>::new());
/// let mut schedule = Schedule::new();
/// schedule.add_systems((spawn_enemy, count.after(spawn_enemy)));
/// schedule.run(&mut world).unwrap();
/// assert_eq!(world.resource::<Vec<usize>>().unwrap(), &[1]); // the spawn was applied between
/// assert_eq!(
///     schedule.order(&mut world).unwrap(),
///     ["spawn_enemy", folio_schedule::AUTO_SYNC_NAME, "count"]
/// );
///
/// // Without the point, `count` runs before the spawn is applied (at the end of the run).
/// let mut world = World::new();
/// world.insert_resource(Vec::<usize>::new());
/// let mut schedule = Schedule::new();
/// schedule.add_systems((spawn_enemy, count.after_ignore_deferred(spawn_enemy)));
/// schedule.run(&mut world).unwrap();
/// assert_eq!(world.resource::<Vec<usize>>().unwrap(), &[0]);
/// ```
///
/// # The parallel threshold
/// A segment whose work is less than [`Schedule::set_min_parallel_work`] (40 µs by default,
/// [`MIN_PARALLEL_WORK`]) runs on the calling thread, in topological order: waking a second
/// thread costs more than such a segment's work (on the 2-core test machine, 50 empty systems
/// took 0.6 µs on one thread and 20 µs on two). The work is what the segment takes on the
/// calling thread: its first run uses the pool, its second is timed on the calling thread;
/// from then on a small segment stays there (timed every run, so one whose work grows goes to
/// the pool).
///
/// A larger segment runs where it has run faster. Its time runs until the next segment starts,
/// so it includes applying its systems' commands at the next sync point or at the end of the
/// run: threads do not always pay. Waking a sleeping pool thread can cost tens of microseconds
/// on a virtual machine, and commands applied after a run on the pool find the systems' writes
/// in another core's cache (frame_churn on a 2-core machine has run about 15 % slower on the
/// pool than on one thread). The way it runs is timed every run (a moving average, a new run
/// weighing a quarter); every 64 runs it runs the other way for 4 runs, of which the last
/// counts (the first pays for waking the pool's threads, which back-to-back runs on the pool
/// do not). It changes ways only when the other was faster by a tenth, so where the two are
/// close the choice does not follow the noise. The choice changes only where systems run,
/// never what they compute: the result is the same either way.
///
/// # When a system panics
/// A system that panics stops the launch of further systems; the ones already running finish,
/// the commands of the systems that completed are applied, the panicking system's commands are
/// thrown away, and [`Schedule::run`] returns [`ScheduleError::SystemPanicked`]. The world stays
/// consistent: a running system can only write component values and resources, never structure.
/// Which of the other systems ran before the panic stopped the launches depends on timing, so
/// after a panic (only then) the world can differ between thread counts.
///
/// # When a system returns `Err`
/// A system that returns `Result<(), E>` and returns `Err` stops nothing: the run completes
/// as if it had returned `Ok` (its commands are applied), and then [`Schedule::run`] returns
/// [`ScheduleError::SystemFailed`] for the first such system in the topological order (so the
/// same one on any number of threads), counting the others. Only systems that can fail are
/// asked, so a schedule without them pays nothing. A panic in the same run is what the run
/// returns.
///
/// # When a command panics
/// A command that panics when it is applied throws away the rest of its buffer (entities it
/// reserved are not left behind); the other buffers are still applied. At a sync point, no
/// system after it runs, and the run returns the panic. However a run ends, the events are
/// aged, so an event lives two runs even across failures.
pub struct Schedule {
    nodes: Vec<NodeCell>,
    /// The configured sets, in the order each was first configured (the order their
    /// conditions run in).
    sets: Vec<(ErasedSet, SetConfig)>,
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
    /// Whether runs time their systems ([`Schedule::set_stats`]).
    collect_stats: bool,
    /// What the runs took, for [`Schedule::stats`] (the systems' times are on their nodes).
    run_times: RunTimes,
    /// Below this, a segment runs on the calling thread (see
    /// [the parallel threshold](Schedule#the-parallel-threshold)).
    min_parallel_work: Duration,
    /// The world and its tick when this schedule last had its stored ticks clamped
    /// ([`CHECK_TICKS_EVERY`]).
    ticks_checked: Option<(WorldId, u32)>,
    /// Whether the plan has [automatic sync points](Schedule#automatic-sync-points).
    auto_sync: bool,
}

/// A schedule calls [`World::check_change_ticks`] at the end of a run once this many ticks
/// have passed since its last call on that world (and at its first run on a world). A stored
/// tick must be clamped within 2^32 - [`MAX_CHANGE_AGE`](folio_query::MAX_CHANGE_AGE) = 2^30
/// ticks of growing older than `MAX_CHANGE_AGE`, or it reads as new again; checking every
/// 2^28 leaves three quarters of that margin to one run's own ticks. A check reads every
/// stored tick once: about a microsecond per thousand entities of two components; at 200
/// systems and 60 runs a second it comes about every six hours.
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
            sets: Vec::new(),
            plan: None,
            world: None,
            event_updaters: Vec::new(),
            event_aging: EventAging::Used,
            world_updaters: (Vec::new(), 0),
            stats: CommandStats::default(),
            collect_stats: false,
            run_times: RunTimes::default(),
            min_parallel_work: MIN_PARALLEL_WORK,
            ticks_checked: None,
            auto_sync: true,
        }
    }
}

impl Schedule {
    /// An empty schedule.
    pub fn new() -> Self {
        Self::default()
    }

    /// Segments whose work (their time on the calling thread) is under `work` run on the
    /// calling thread (see [the parallel threshold](Schedule#the-parallel-threshold));
    /// [`MIN_PARALLEL_WORK`] by default. `Duration::ZERO` always uses the pool, `Duration::MAX`
    /// never does (not even on the first run, whose work is unknown and which otherwise uses
    /// the pool). Either way the results are the same.
    pub fn set_min_parallel_work(&mut self, work: Duration) -> &mut Self {
        self.min_parallel_work = work;
        self
    }

    /// See [`Schedule::set_min_parallel_work`].
    pub fn min_parallel_work(&self) -> Duration {
        self.min_parallel_work
    }

    /// Whether an ordering constraint after a system with [`Commands`](crate::Commands) puts a
    /// sync point between them (see [automatic sync points](Schedule#automatic-sync-points));
    /// on by default. Off, commands are applied only at [`ApplyDeferred`](crate::ApplyDeferred)
    /// and at the end of the run.
    pub fn set_auto_sync(&mut self, on: bool) -> &mut Self {
        if self.auto_sync != on {
            self.auto_sync = on;
            self.plan = None;
        }
        self
    }

    /// See [`Schedule::set_auto_sync`].
    pub fn auto_sync(&self) -> bool {
        self.auto_sync
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
    #[track_caller]
    pub fn add_systems<M>(&mut self, systems: impl IntoSystemConfigs<M>) -> &mut Self {
        match self.try_add_systems(systems) {
            Ok(schedule) => schedule,
            Err(e) => panic!("Schedule::add_systems: {e}"),
        }
    }

    /// Adds systems, or says which system's parameters conflict (nothing is added then).
    #[track_caller]
    pub fn try_add_systems<M>(
        &mut self,
        systems: impl IntoSystemConfigs<M>,
    ) -> Result<&mut Self, ScheduleError> {
        let mut configs = systems.into_configs().0;
        // Closures are named by the place they were added at, which the systems of one call
        // share: number them.
        let count = configs.len();
        for (i, config) in configs.iter_mut().enumerate() {
            config.system.note_position(i + 1, count);
        }
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
                previous_auto_sync,
            } = config;
            let mut access = system.access().clone();
            for condition in &conditions {
                access.extend(condition.access());
            }
            // The configs are added in their list's order, so the one before this one in its
            // list is the node added just before it.
            let after_node = after_previous.then(|| (self.nodes.len() - 1, previous_auto_sync));
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
                times: NodeTimes::default(),
            };
            self.nodes.push(NodeCell(UnsafeCell::new(node)));
        }
        self.plan = None;
        self.world = None;
        Ok(self)
    }

    /// Sets the ordering, run conditions and parent sets of `set` (replacing an earlier
    /// configuration of it).
    ///
    /// A system in `set` follows its `before`/`after` and its run conditions; so does every
    /// system in a set nested in it ([`SetConfig::in_set`]), transitively. A configured set no
    /// system is in (directly or through a nested set) is
    /// [`ScheduleError::UnknownLabel`] when the schedule is built, as a nesting cycle is
    /// [`ScheduleError::SetCycle`].
    ///
    /// Set conditions run once per run, before any system, in the order the sets were first
    /// configured (not the order of their types or hashes), each condition of each set every
    /// run, also when a parent set said no, so each keeps its own state current.
    pub fn configure_set(&mut self, set: impl SystemSet, config: SetConfig) -> &mut Self {
        let set = ErasedSet::new(set);
        match self.sets.iter_mut().find(|(s, _)| *s == set) {
            Some((_, old)) => *old = config,
            None => self.sets.push((set, config)),
        }
        self.plan = None;
        self.world = None;
        self
    }

    /// The number of systems ([`ApplyDeferred`](crate::ApplyDeferred) sync points included;
    /// [automatic](Schedule#automatic-sync-points) ones are not systems).
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

    /// The system names in the order the schedule runs them (builds the plan if needed). A
    /// sync point is `apply_deferred`, an [automatic](Schedule#automatic-sync-points) one
    /// [`AUTO_SYNC_NAME`].
    pub fn order(&mut self, world: &mut World) -> Result<Vec<String>, ScheduleError> {
        self.initialize(world)?;
        let plan = self.plan.as_ref().expect("built by initialize");
        let mut names = Vec::with_capacity(plan.order.len());
        for segment in &plan.segments {
            match segment {
                Segment::Parallel { nodes, .. } => {
                    names.extend(nodes.iter().map(|&i| self.node(i).system.name().to_owned()));
                }
                Segment::Exclusive(i) | Segment::Sync { node: Some(i), .. } => {
                    names.push(self.node(*i).system.name().to_owned());
                }
                Segment::Sync { node: None, .. } => names.push(AUTO_SYNC_NAME.to_owned()),
            }
        }
        Ok(names)
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
        for (_, config) in &mut self.sets {
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

    /// Runs every system once (see [`Schedule`] for the [order](Schedule#order), the
    /// [commands](Schedule#execution) and [panics](Schedule#when-a-system-panics)). Every
    /// [`CHECK_TICKS_EVERY`] ticks (and at its first run on a world) it ends with
    /// [`World::check_change_ticks`], so change detection stays right however long the game
    /// runs.
    pub fn run(&mut self, world: &mut World) -> Result<(), ScheduleError> {
        trace_span!("schedule");
        let clock = Clock::start(self.collect_stats);
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
        self.run_times.ran(clock);
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
        for (_, config) in &mut self.sets {
            for condition in &mut config.conditions {
                condition.check_change_tick(now);
            }
        }
    }
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
