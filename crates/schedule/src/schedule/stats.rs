//! Profiling a [`Schedule`]: the per-system timings it keeps ([`Schedule::stats`]), and the
//! `tracing` spans of the `trace` feature ([`trace_span!`]).
//!
//! Each node keeps its own counters ([`NodeTimes`], a field of the node), written only by the
//! thread that runs the node, through the `&mut Node` it holds while it does (see the
//! [executor's safety model](super)): no atomics, no lock, nothing shared between workers.
//! [`Schedule::stats`] reads them outside a run, when no task holds a node; the end of a
//! parallel segment (its pool tasks joined) orders every write before that read.
//!
//! What is timed, and what a timing costs, is on [`Schedule::stats`].

use std::fmt;
use std::time::{Duration, Instant};

use super::Schedule;

/// Opens a `tracing` span named `$kind`, with the field `name = $name` (a `&str`) if given,
/// entered until the end of the enclosing block, with the `trace` feature; nothing (not even
/// the evaluation of `$name`) without it.
macro_rules! trace_span {
    ($kind:literal) => {
        #[cfg(feature = "trace")]
        let _span = tracing::info_span!($kind).entered();
    };
    ($kind:literal, $name:expr) => {
        #[cfg(feature = "trace")]
        let _span = tracing::info_span!($kind, name = $name).entered();
    };
}
pub(super) use trace_span;

/// A clock that reads the time only while the schedule collects stats
/// ([`Schedule::set_stats`]): `None` otherwise, and then every [`NodeTimes`] method that
/// takes it does nothing.
pub(super) struct Clock(Option<Instant>);

impl Clock {
    /// Starts now, if `on` and the target has a clock: wasm32-unknown-unknown (the web) has
    /// none that std can read, so there the stats stay empty.
    #[inline(always)]
    pub(super) fn start(on: bool) -> Self {
        const HAS_CLOCK: bool = !cfg!(all(target_arch = "wasm32", target_os = "unknown"));
        Self((on && HAS_CLOCK).then(Instant::now))
    }

    /// The time since the start or the last lap, and a new lap from now on; `None` when off.
    #[inline(always)]
    fn lap(&mut self) -> Option<Duration> {
        let last = self.0.as_mut()?;
        let now = Instant::now();
        let took = now.saturating_duration_since(*last);
        *last = now;
        Some(took)
    }
}

/// What one node's runs took since the last [`Schedule::reset_stats`]. Its invariant: written
/// only by the thread that holds the node (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NodeTimes {
    runs: u64,
    skipped: u64,
    total: Duration,
    max: Duration,
    conditions: Duration,
    commands: Duration,
}

impl NodeTimes {
    /// The node's run conditions have run, since `clock`'s start: counts their time (only for
    /// a node with conditions, which `has_conditions` says; the others read no clock here).
    #[inline(always)]
    pub(super) fn conditions_ran(&mut self, clock: &mut Clock, has_conditions: bool) {
        if has_conditions && let Some(took) = clock.lap() {
            self.conditions += took;
        }
    }

    /// The system did not run this time (a set or one of its conditions said no), counted if
    /// `on`.
    #[inline(always)]
    pub(super) fn skipped(&mut self, on: bool) {
        if on {
            self.skipped += 1;
        }
    }

    /// The system's run is over: a run, timed since `clock`'s last lap, if it `ran`; a skip
    /// if its parameters refused the run.
    #[inline(always)]
    pub(super) fn system_ran(&mut self, clock: &mut Clock, ran: bool) {
        let Some(took) = clock.lap() else { return };
        if ran {
            self.runs += 1;
            self.total += took;
            self.max = self.max.max(took);
        } else {
            self.skipped += 1;
        }
    }

    /// The system's command buffers were applied, since `clock`'s last lap.
    #[inline(always)]
    pub(super) fn commands_applied(&mut self, clock: &mut Clock) {
        if let Some(took) = clock.lap() {
            self.commands += took;
        }
    }
}

/// What the runs of a whole schedule took since the last [`Schedule::reset_stats`].
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RunTimes {
    runs: u64,
    total: Duration,
    max: Duration,
}

impl RunTimes {
    /// A run that started at `clock`'s start is over.
    pub(super) fn ran(&mut self, mut clock: Clock) {
        if let Some(took) = clock.lap() {
            self.runs += 1;
            self.total += took;
            self.max = self.max.max(took);
        }
    }
}

/// A system's timings in [`ScheduleStats`]: its runs since the stats were last reset
/// ([`Schedule::reset_stats`]) while the schedule collected stats ([`Schedule::set_stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SystemStats {
    /// The system's name, as in [`Schedule::order`] and in errors.
    pub name: String,
    /// The runs of the system itself: those its sets, its run conditions and its parameters
    /// allowed, and that did not panic.
    pub runs: u64,
    /// The runs of the schedule in which it did not run: a set or run condition said no, or
    /// a parameter could not be built (a [`Single`](crate::Single) without its one match).
    pub skipped: u64,
    /// The time of its runs, in all (the system's function, its parameters fetched; not its
    /// conditions or its commands).
    pub total: Duration,
    /// Its longest run.
    pub max: Duration,
    /// The time of its own run conditions, in all (run whether or not the system then ran;
    /// not its sets' conditions).
    pub conditions: Duration,
    /// The time of applying its command buffers, in all (at sync points and at the ends of
    /// runs); zero for a system without a parameter that buffers (`Commands`).
    pub commands: Duration,
}

impl SystemStats {
    /// The mean time of a run (zero before the first).
    pub fn mean(&self) -> Duration {
        mean(self.total, self.runs)
    }
}

/// `total / runs`, zero for no run.
fn mean(total: Duration, runs: u64) -> Duration {
    match u32::try_from(runs) {
        Ok(0) => Duration::ZERO,
        Ok(runs) => total / runs,
        Err(_) => Duration::from_secs_f64(total.as_secs_f64() / runs as f64),
    }
}

/// A schedule's timings, from [`Schedule::stats`]; its [`Display`](fmt::Display) prints them as
/// a table, one system a line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleStats {
    /// The runs of the schedule ([`Schedule::run`]) counted.
    pub runs: u64,
    /// Their time in all, from the start of each run to its end (set conditions, event aging,
    /// everything).
    pub total: Duration,
    /// The longest of them.
    pub max: Duration,
    /// Per system, in the order the schedule runs them (the order it was added in, before
    /// the first run); sync points left out.
    pub systems: Vec<SystemStats>,
}

impl fmt::Display for ScheduleStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "schedule: {} runs, {:.1?} in all, {:.1?} mean, {:.1?} max",
            self.runs,
            self.total,
            mean(self.total, self.runs),
            self.max
        )?;
        let width = self.systems.iter().map(|s| s.name.len()).max().unwrap_or(0).max(6);
        write!(
            f,
            "{:<width$} {:>8} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "system", "runs", "skipped", "total", "mean", "max", "conditions", "commands"
        )?;
        for s in &self.systems {
            write!(
                f,
                "\n{:<width$} {:>8} {:>8} {:>10.1?} {:>10.1?} {:>10.1?} {:>10.1?} {:>10.1?}",
                s.name,
                s.runs,
                s.skipped,
                s.total,
                s.mean(),
                s.max,
                s.conditions,
                s.commands
            )?;
        }
        Ok(())
    }
}

impl Schedule {
    /// What its runs took: per system, its runs, skips and times (in all, mean, longest), its
    /// run conditions' and its commands' times; and the schedule's runs. Counted since the
    /// schedule was made or [`Schedule::reset_stats`], while it collects them
    /// ([`Schedule::set_stats`], off by default). Printing the result prints a table.
    ///
    /// Each system times its own runs on the thread that runs it, so the times are right in
    /// parallel segments too, and a system's time is its own, not the time it waited for a
    /// thread. Timing a system reads the clock twice (three times with run conditions), and
    /// once more for its commands if it has any parameter that buffers them: about 20 ns a read on bare metal, up to 150 ns in a virtual
    /// machine, which is more than the executor's own cost of an empty system, hence off by
    /// default.
    ///
    /// ```
    /// use std::time::Duration;
    /// use folio_schedule::prelude::*;
    ///
    /// struct Paused(bool);
    ///
    /// fn physics() {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// fn ai(mut commands: Commands) {
    ///     commands.spawn((1u32,));
    /// }
    /// fn not_paused(paused: Res<Paused>) -> bool {
    ///     !paused.0
    /// }
    ///
    /// let mut world = World::new();
    /// world.insert_resource(Paused(false));
    /// let mut schedule = Schedule::new();
    /// schedule.add_systems((physics, ai.run_if(not_paused))).set_stats(true);
    /// for frame in 0..4 {
    ///     world.resource_mut::<Paused>().unwrap().0 = frame == 3;
    ///     schedule.run(&mut world).unwrap();
    /// }
    ///
    /// let stats = schedule.stats();
    /// println!("{stats}");
    /// // Prints, for example:
    /// // schedule: 4 runs, 4.4ms in all, 1.1ms mean, 1.1ms max
    /// // system       runs  skipped      total       mean        max conditions   commands
    /// // physics         4        0      4.3ms      1.1ms      1.1ms      0.0ns      1.5µs
    /// // ai              3        1    504.0ns    168.0ns    251.0ns    766.0ns     10.2µs
    /// assert_eq!(stats.runs, 4);
    /// let physics = stats.systems.iter().find(|s| s.name == "physics").unwrap();
    /// assert_eq!((physics.runs, physics.skipped), (4, 0));
    /// assert!(physics.max >= Duration::from_millis(1));
    /// let ai = stats.systems.iter().find(|s| s.name == "ai").unwrap();
    /// assert_eq!((ai.runs, ai.skipped), (3, 1));
    ///
    /// schedule.reset_stats();
    /// assert_eq!(schedule.stats().systems[0].runs, 0);
    /// ```
    pub fn stats(&self) -> ScheduleStats {
        let order: Vec<usize> = match &self.plan {
            Some(plan) => plan.order.clone(),
            None => (0..self.nodes.len()).collect(),
        };
        let systems = order
            .into_iter()
            .map(|i| self.node(i))
            .filter(|node| !node.sync_point)
            .map(|node| {
                let t = node.times;
                SystemStats {
                    name: node.system.name().to_owned(),
                    runs: t.runs,
                    skipped: t.skipped,
                    total: t.total,
                    max: t.max,
                    conditions: t.conditions,
                    commands: t.commands,
                }
            })
            .collect();
        let RunTimes { runs, total, max } = self.run_times;
        ScheduleStats { runs, total, max, systems }
    }

    /// Sets every count and time of [`Schedule::stats`] back to zero.
    pub fn reset_stats(&mut self) {
        for cell in &mut self.nodes {
            cell.0.get_mut().times = NodeTimes::default();
        }
        self.run_times = RunTimes::default();
    }

    /// Whether runs collect [`Schedule::stats`] (off by default). Off, a run reads no clock for
    /// them and the stats stay as they were.
    ///
    /// Off by default because of what the clock costs: on the 2-core virtual machine of
    /// folio's benchmarks a clock read takes about 140 ns, and the `empty_systems` bench took
    /// 6.9 µs a run for 50 systems with stats on against 0.8 to 1.3 µs without (150 µs against
    /// 32 µs for 1,000), while `frame_churn` (100,000 entities) did not change beyond noise.
    pub fn set_stats(&mut self, on: bool) -> &mut Self {
        self.collect_stats = on;
        self
    }

    /// See [`Schedule::set_stats`].
    pub fn collects_stats(&self) -> bool {
        self.collect_stats
    }
}
