//! The parallel threshold: a segment too small for threads runs on the calling thread, and a
//! larger one where it has run faster.

use super::*;
use crate::schedule::SegmentRuns;

/// Which threads a schedule's systems ran on, per run.
fn threads_per_run(schedule: &mut Schedule, world: &mut World, runs: usize) -> Vec<usize> {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| pool(2));
    let seen = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    world.insert_resource(SeenThreads(seen.clone()));
    (0..runs)
        .map(|_| {
            seen.lock().unwrap().clear();
            pool.install(|| schedule.run(world)).unwrap();
            seen.lock().unwrap().len()
        })
        .collect()
}

struct SeenThreads(Arc<std::sync::Mutex<std::collections::HashSet<std::thread::ThreadId>>>);

fn note_thread(seen: Res<SeenThreads>) {
    seen.0.lock().unwrap().insert(std::thread::current().id());
    // Long enough that the other worker, once woken, claims some of the other systems.
    let until = std::time::Instant::now() + Duration::from_millis(1);
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

fn note_thread_quickly(seen: Res<SeenThreads>) {
    seen.0.lock().unwrap().insert(std::thread::current().id());
}

#[test]
#[cfg_attr(miri, ignore = "timing: decides by measured run times")]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_segment_too_small_for_threads_runs_on_the_calling_thread() {
    let mut world = World::new();
    // Eight quick readers: the first run uses the pool (unknown work), the second measures
    // the work on one thread, far under the threshold, so the segment stays there.
    let mut quick = Schedule::new();
    quick.set_min_parallel_work(Duration::from_millis(50));
    for _ in 0..8 {
        quick.add_systems(note_thread_quickly);
    }
    let runs = threads_per_run(&mut quick, &mut world, 4);
    assert!(runs[1..].iter().all(|&n| n == 1), "after the first run, one thread: {runs:?}");
    // Eight systems of 1 ms each: 8 ms of work, well over a 100 µs threshold, run on the
    // pool, where they take about half as long, and use both threads. (On a loaded machine
    // the pool may lose a run or two to this thread; its probe within 70 runs brings it back.)
    let mut heavy = Schedule::new();
    heavy.set_min_parallel_work(Duration::from_micros(100));
    for _ in 0..8 {
        heavy.add_systems(note_thread);
    }
    let runs = threads_per_run(&mut heavy, &mut world, 70);
    assert!(runs.contains(&2), "some run used both threads: {runs:?}");
    assert_eq!(runs[1], 1, "the second run measures the work on one thread: {runs:?}");
    // `Duration::MAX`: never the pool, not even on the first run; `ZERO`: always.
    heavy.set_min_parallel_work(Duration::MAX);
    assert_eq!(threads_per_run(&mut heavy, &mut world, 2), [1, 1]);
    let mut never = Schedule::new();
    never.set_min_parallel_work(Duration::MAX);
    for _ in 0..8 {
        never.add_systems(note_thread);
    }
    assert_eq!(threads_per_run(&mut never, &mut world, 2), [1, 1]);
    quick.set_min_parallel_work(Duration::ZERO);
    assert_eq!(quick.min_parallel_work(), Duration::ZERO);
    let mut both = Schedule::new();
    both.set_min_parallel_work(Duration::ZERO);
    for _ in 0..8 {
        both.add_systems(note_thread);
    }
    let runs = threads_per_run(&mut both, &mut world, 3);
    assert!(runs.contains(&2), "the pool on some run: {runs:?}");
}

/// Runs a segment's choice of thread ([`SegmentRuns`]) for `runs` runs against made-up
/// timings: `cost(run, on_pool, first_of_probe)` is what a run takes. Returns where each ran
/// (`true`: the pool).
fn choices(
    runs: usize,
    min: Duration,
    mut cost: impl FnMut(usize, bool, bool) -> Duration,
) -> Vec<bool> {
    let mut segment = SegmentRuns::default();
    let mut was_probe = false;
    (0..runs)
        .map(|run| {
            let (on_pool, probe) = segment.next_run(min);
            let first_of_probe = probe && !was_probe;
            was_probe = probe;
            segment.record(on_pool, probe, cost(run, on_pool, first_of_probe));
            on_pool
        })
        .collect()
}

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_segment_runs_where_it_has_run_faster() {
    let min = crate::MIN_PARALLEL_WORK;
    // 2 ms on this thread, 4 ms on the pool: the first run is on the pool (work unknown), the
    // second here; then here, but for the four runs of a probe of the pool every 64.
    let pool_slower = choices(140, min, |_, on_pool, _| if on_pool { 4 * MS } else { 2 * MS });
    let pool_runs: Vec<usize> = (0..140).filter(|&r| pool_slower[r]).collect();
    assert_eq!(pool_runs, [0, 64, 65, 66, 67, 132, 133, 134, 135]);

    // The pool pays from run 100 on (1 ms there): the next probe finds it, and it stays.
    let pays_later = choices(200, min, |run, on_pool, _| match (on_pool, run >= 100) {
        (false, _) => 2 * MS,
        (true, false) => 4 * MS,
        (true, true) => MS,
    });
    assert!(!pays_later[68..132].contains(&true), "here until the probe: {pays_later:?}");
    assert!(pays_later[132..].iter().all(|&p| p), "the pool from the probe on: {pays_later:?}");

    // The pool's first run after a while here pays for waking its threads (5 ms), the next
    // ones do not (1 ms): a probe times its last run, so the pool wins it. The segment's first
    // run is such a cold one too, so the runs before the first probe stay here.
    let cold_first = choices(140, min, |run, on_pool, first_of_probe| match on_pool {
        false => 2 * MS,
        true if run == 0 || first_of_probe => 5 * MS,
        true => MS,
    });
    assert!(!cold_first[1..64].contains(&true), "{cold_first:?}");
    assert!(cold_first[64..132].iter().all(|&p| p), "the pool from the probe: {cold_first:?}");
    // And there it stays: the probe of this thread (runs 132 to 135, 2 ms) does not beat the
    // pool's 1 ms.
    assert!(!cold_first[132..136].contains(&true), "{cold_first:?}");
    assert!(cold_first[136..].iter().all(|&p| p), "{cold_first:?}");

    // Within a tenth of each other, the choice does not move: 2 ms here, 1.9 ms on the pool
    // after a first 4 ms run, and no switch to the pool at the probe.
    let close = choices(140, min, |run, on_pool, _| match (on_pool, run) {
        (true, 0) => 4 * MS,
        (true, _) => MS * 19 / 10,
        (false, _) => 2 * MS,
    });
    assert!(!close[68..132].contains(&true), "{close:?}");

    // Work under the threshold stays on this thread from the second run on, unprobed.
    let small = choices(140, min, |_, on_pool, _| if on_pool { MS } else { min / 2 });
    assert!(small[0] && !small[1..].contains(&true), "{small:?}");
}
