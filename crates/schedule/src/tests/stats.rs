//! `Schedule::stats`: runs and skips counted per system, times taken on the thread that ran
//! the system (parallel segments too), exclusive systems and commands timed, reset and off.

use super::*;
use crate::{ScheduleStats, SystemStats};

#[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
struct Gated;
impl SystemSet for Gated {}

struct Open(bool);

fn sleeper() {
    std::thread::sleep(Duration::from_millis(2));
}
fn always() {}
fn sometimes() {}
fn gated() {}
fn spawner(mut commands: Commands) {
    commands.spawn((A(1),));
}
fn exclusive(world: &mut World) {
    world.spawn((B(1),));
}
fn open(open: Res<Open>) -> bool {
    open.0
}

/// A schedule that collects stats.
fn timed() -> Schedule {
    let mut schedule = Schedule::new();
    schedule.set_stats(true);
    schedule
}

fn system<'a>(stats: &'a ScheduleStats, name: &str) -> &'a SystemStats {
    stats.systems.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no {name}: {stats}"))
}

#[test]
fn runs_and_skips_are_counted_per_system() {
    let mut world = World::new();
    world.insert_resource(Open(true));
    let mut schedule = timed();
    schedule
        .add_systems((always, sometimes.run_if(open), gated.in_set(Gated)))
        .configure_set(Gated, SetConfig::new().run_if(open));
    for run in 0..3 {
        world.resource_mut::<Open>().unwrap().0 = run != 1;
        schedule.run(&mut world).unwrap();
    }
    let stats = schedule.stats();
    assert_eq!(stats.runs, 3);
    assert!(stats.max <= stats.total);
    let names: Vec<&str> = stats.systems.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, schedule.order(&mut world).unwrap());
    assert_eq!(names, ["always", "sometimes", "gated"]);
    let always = system(&stats, "always");
    assert_eq!((always.runs, always.skipped), (3, 0));
    assert_eq!(always.conditions, Duration::ZERO);
    assert!(always.max >= always.mean() && always.max <= always.total);
    // Its own condition said no once: not a run, and the condition's time is counted apart.
    let sometimes = system(&stats, "sometimes");
    assert_eq!((sometimes.runs, sometimes.skipped), (2, 1));
    assert!(sometimes.conditions > Duration::ZERO);
    // Its set's condition said no once.
    let gated = system(&stats, "gated");
    assert_eq!((gated.runs, gated.skipped), (2, 1));
}

#[test]
fn a_system_that_sleeps_shows_its_sleep() {
    let mut world = World::new();
    let mut schedule = timed();
    schedule.add_systems((sleeper, always));
    for _ in 0..3 {
        schedule.run(&mut world).unwrap();
    }
    let stats = schedule.stats();
    let sleeper = system(&stats, "sleeper");
    assert_eq!(sleeper.runs, 3);
    assert!(sleeper.max >= Duration::from_millis(2), "{stats}");
    assert!(sleeper.total >= Duration::from_millis(6), "{stats}");
    assert!(sleeper.max >= sleeper.total / 3 && sleeper.max <= sleeper.total);
    assert!(stats.total >= sleeper.total);
    // The other system's time is its own, not the sleeper's (miri is too slow to tell).
    if !cfg!(miri) {
        assert!(system(&stats, "always").max < Duration::from_millis(2), "{stats}");
    }
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_parallel_segment_times_each_system_on_its_own_thread() {
    let sleepers = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    let mut schedule = timed();
    schedule.set_min_parallel_work(Duration::ZERO);
    for _ in 0..4 {
        let sleepers = sleepers.clone();
        schedule.add_systems(move || {
            sleepers.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(2));
        });
    }
    schedule.add_systems(always);
    pool(4).install(|| {
        for _ in 0..2 {
            schedule.run(&mut world).unwrap();
        }
    });
    assert_eq!(sleepers.load(Ordering::Relaxed), 8);
    let stats = schedule.stats();
    assert_eq!(stats.systems.len(), 5);
    for s in &stats.systems[..4] {
        assert_eq!((s.runs, s.skipped), (2, 0), "{stats}");
        assert!(s.max >= Duration::from_millis(2), "{stats}");
    }
    assert_eq!(system(&stats, "always").runs, 2);
}

#[test]
fn exclusive_systems_and_commands_are_timed_and_sync_points_left_out() {
    let mut world = World::new();
    let mut schedule = timed();
    schedule.add_systems((spawner, ApplyDeferred.after(spawner), exclusive.after(spawner)));
    schedule.run(&mut world).unwrap();
    schedule.run(&mut world).unwrap();
    let stats = schedule.stats();
    let names: Vec<&str> = stats.systems.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["spawner", "exclusive"]);
    let spawner = system(&stats, "spawner");
    assert_eq!(spawner.runs, 2);
    assert!(spawner.commands > Duration::ZERO);
    let exclusive = system(&stats, "exclusive");
    assert_eq!(exclusive.runs, 2);
    assert!(exclusive.total > Duration::ZERO);
}

#[test]
fn off_by_default_and_reset_leave_no_counts() {
    let mut world = World::new();
    let mut schedule = Schedule::new();
    assert!(!schedule.collects_stats());
    schedule.add_systems((always, spawner));
    schedule.run(&mut world).unwrap();
    // Off: every system, nothing counted.
    let zero = schedule.stats();
    assert_eq!(zero.runs, 0);
    assert_eq!(zero.systems.len(), 2);
    let nothing =
        |s: &SystemStats| *s == SystemStats { name: s.name.clone(), ..Default::default() };
    assert!(zero.systems.iter().all(nothing), "{zero}");

    schedule.set_stats(true);
    schedule.run(&mut world).unwrap();
    assert_eq!(schedule.stats().runs, 1);
    assert_eq!(schedule.stats().systems[0].runs, 1);
    schedule.reset_stats();
    assert_eq!(schedule.stats(), zero);

    schedule.set_stats(false);
    schedule.run(&mut world).unwrap();
    assert_eq!(schedule.stats(), zero);
}

#[test]
fn a_system_skipped_by_its_parameters_is_not_a_run() {
    let mut world = World::new();
    let mut schedule = timed();
    schedule.add_systems(|_: Single<&A>| {});
    schedule.run(&mut world).unwrap();
    world.spawn((A(0),));
    schedule.run(&mut world).unwrap();
    let stats = schedule.stats();
    assert_eq!((stats.systems[0].runs, stats.systems[0].skipped), (1, 1));
}

#[test]
fn the_table_has_a_line_per_system() {
    let mut world = World::new();
    let mut schedule = timed();
    schedule.add_systems((always, sleeper));
    schedule.run(&mut world).unwrap();
    let table = schedule.stats().to_string();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[0].starts_with("schedule: 1 runs"), "{table}");
    assert!(lines[1].starts_with("system ") && lines[1].contains("commands"), "{table}");
    assert!(lines[2].starts_with("always ") && lines[3].starts_with("sleeper "), "{table}");
    assert!(lines[3].contains("ms"), "{table}");
}
