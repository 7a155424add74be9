//! Where a parallel segment runs, on the pool or on the calling thread: its timings each way,
//! and the probes that check the choice (see
//! [the parallel threshold](Schedule#the-parallel-threshold)).

use std::time::{Duration, Instant};

use super::{Schedule, Segment};

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
pub(super) struct SegmentTiming {
    /// Its index in the plan's segments.
    pub(super) segment: usize,
    /// Whether it ran on the pool.
    pub(super) on_pool: bool,
    /// Whether the run is part of a probe.
    pub(super) probe: bool,
    pub(super) started: Instant,
}

impl SegmentTiming {
    /// Records the time since the segment started as its latest run that way.
    pub(super) fn finish(self, segments: &mut [Segment]) {
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

impl Schedule {
    /// Whether a parallel segment runs on the pool this time (see
    /// [the parallel threshold](Schedule#the-parallel-threshold)), and whether the run is part
    /// of a probe ([`SegmentRuns::next_run`]); `min_parallel_work` `ZERO` always uses the pool,
    /// `MAX` never.
    pub(super) fn segment_on_pool(&self, runs: &mut SegmentRuns) -> (bool, bool) {
        let min = self.min_parallel_work;
        if min == Duration::ZERO || min == Duration::MAX {
            return (min == Duration::ZERO, false);
        }
        runs.next_run(min)
    }
}
