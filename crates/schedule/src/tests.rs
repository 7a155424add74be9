//! The executor's promises: conflicting systems never overlap, independent ones do, order and
//! cycles, determinism across thread counts, commands, events, run conditions, panics.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::prelude::*;
use crate::schedule::SegmentRuns;
use crate::{
    EntityError, IntoSystem, QueryError, ScheduleError, System, SystemAccess, age_all_events,
};

#[derive(Debug, Clone, Copy, PartialEq)]
struct A(u64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct B(u64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct C(u64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Flag;

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
}

/// Counts how many systems of a group run at once, and the most ever seen.
#[derive(Default)]
struct Overlap {
    running: AtomicUsize,
    max: AtomicUsize,
}

impl Overlap {
    fn enter(&self) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn conflicting_systems_never_overlap() {
    let writers = Arc::new(Overlap::default());
    let mut schedule = Schedule::new();
    for _ in 0..4 {
        let o = writers.clone();
        schedule.add_systems(move |mut q: Query<&mut A>| {
            o.enter();
            q.iter_mut().for_each(|mut a| a.0 += 1);
        });
    }
    let o = writers.clone();
    schedule.add_systems(move |q: Query<&A>| {
        o.enter();
        assert!(q.iter().count() > 0);
    });
    let mut world = World::new();
    world.spawn((A(0),));
    pool(4).install(|| schedule.run(&mut world)).unwrap();
    assert_eq!(writers.max.load(Ordering::SeqCst), 1);
    let mut q = world.query::<&A>();
    assert_eq!(q.single(&world).unwrap(), &A(4));
}

#[test]
#[cfg_attr(miri, ignore = "timing: miri's thread scheduler need not overlap the sleeps")]
fn independent_systems_overlap_when_given_work() {
    let group = Arc::new(Overlap::default());
    // The two writers of A alone: disjoint by `With<B>` / `Without<B>`.
    let writers_of_a = Arc::new(Overlap::default());
    let mut schedule = Schedule::new();
    let (g1, g2, g3) = (group.clone(), group.clone(), group.clone());
    let (a1, a3) = (writers_of_a.clone(), writers_of_a.clone());
    schedule.add_systems((
        move |mut q: Query<&mut A, With<B>>| {
            std::thread::scope(|s| {
                s.spawn(|| g1.enter());
                a1.enter();
            });
            q.iter_mut().for_each(|mut a| a.0 += 1);
        },
        move |mut q: Query<&mut B>| {
            g2.enter();
            q.iter_mut().for_each(|mut b| b.0 += 1);
        },
        // Writes A too, but only where B is absent: disjoint from the first system.
        move |mut q: Query<&mut C>, mut other: Query<&mut A, Without<B>>| {
            std::thread::scope(|s| {
                s.spawn(|| g3.enter());
                a3.enter();
            });
            q.iter_mut().for_each(|mut c| c.0 += 1);
            other.iter_mut().for_each(|mut a| a.0 += 10);
        },
    ));
    let mut world = World::new();
    let both = world.spawn((A(0), B(0), C(0)));
    let lone = world.spawn((A(0), C(0)));
    pool(3).install(|| schedule.run(&mut world)).unwrap();
    assert!(group.max.load(Ordering::SeqCst) >= 2, "no two independent systems overlapped");
    assert_eq!(writers_of_a.max.load(Ordering::SeqCst), 2, "the two writers of A did not overlap");
    assert_eq!((world.get::<A>(both), world.get::<A>(lone)), (Some(&A(1)), Some(&A(10))));
}

#[test]
fn without_filters_make_writers_disjoint_and_with_does_not() {
    let mut with_b = SystemAccess::default();
    let mut without_b = SystemAccess::default();
    let q1 = QueryState::<&mut A, With<B>>::component_access().unwrap();
    let q2 = QueryState::<&mut A, Without<B>>::component_access().unwrap();
    with_b.add_query("s1", q1.clone(), "q1".into()).unwrap();
    without_b.add_query("s2", q2, "q2".into()).unwrap();
    assert!(!with_b.conflicts_with(&without_b));
    let mut also_with_b = SystemAccess::default();
    also_with_b.add_query("s3", q1, "q3".into()).unwrap();
    assert!(with_b.conflicts_with(&also_with_b));
}

#[test]
fn a_system_whose_params_conflict_is_rejected_naming_them() {
    fn bad(_: Query<&mut A>, _: Query<&A>) {}
    let mut schedule = Schedule::new();
    let err = schedule.try_add_systems(bad).err().unwrap();
    let text = err.to_string();
    assert!(matches!(err, ScheduleError::ConflictingParams { .. }), "{text}");
    assert!(text.contains("`bad`") && text.contains("`Query<&mut A>` and `Query<&A>`"), "{text}");
    assert!(schedule.is_empty());
    fn bad_res(_: Res<u32>, _: ResMut<u32>) {}
    assert!(schedule.try_add_systems(bad_res).is_err());
    fn bad_query(_: Query<(&mut A, &A)>) {}
    assert!(matches!(schedule.try_add_systems(bad_query), Err(ScheduleError::Query { .. })));
    fn fine(_: Query<&mut A, With<B>>, _: Query<&A, Without<B>>, _: Res<u32>, _: Res<u32>) {}
    assert!(schedule.try_add_systems(fine).is_ok());
}

#[derive(Default)]
struct Log(Vec<&'static str>);

fn first(mut log: ResMut<Log>) {
    log.0.push("first");
}
fn second(mut log: ResMut<Log>) {
    log.0.push("second");
}
fn third(mut log: ResMut<Log>) {
    log.0.push("third");
}

#[test]
fn explicit_order_overrides_insertion_order() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((third.after(second), second.after(first), first));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["first", "second", "third"]);

    let mut chained = Schedule::new();
    chained.add_systems((third, first, second).chain());
    world.resource_mut::<Log>().unwrap().0.clear();
    chained.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["third", "first", "second"]);

    let mut sets = Schedule::new();
    sets.add_systems((third.in_set("late"), first.in_set("early"), second));
    sets.configure_set("late", SetConfig::new().after("early").after(second));
    world.resource_mut::<Log>().unwrap().0.clear();
    sets.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["first", "second", "third"]);
}

#[test]
fn a_label_that_names_nothing_is_an_error() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut typo = Schedule::new();
    typo.add_systems((first.in_set("physics"), second.after("phyiscs")));
    let err = typo.run(&mut world).unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownLabel(_)) && err.to_string().contains("phyiscs"));
    let mut missing = Schedule::new();
    missing.add_systems(second.after(third));
    assert!(missing.run(&mut world).unwrap_err().to_string().contains("third"));
    let mut ghost = Schedule::new();
    ghost.add_systems(first);
    ghost.configure_set("ghost", SetConfig::new().after("nowhere"));
    assert!(matches!(ghost.run(&mut world), Err(ScheduleError::UnknownLabel(_))));
    assert!(world.resource::<Log>().unwrap().0.is_empty());
    fn world_then_resmut(_: &World, _: ResMut<Log>) {}
    let err = Schedule::new().try_add_systems(world_then_resmut).err().unwrap();
    assert!(err.to_string().contains("`&World` and `ResMut<"), "{err}");
}

#[test]
fn cycles_are_errors_naming_the_systems() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((first.after(third), second.after(first), third.after(second)));
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::Cycle(names) = &err else { panic!("{err}") };
    assert!(names.len() >= 3, "{err}");
    let text = err.to_string();
    assert!(text.contains("first") && text.contains("second") && text.contains("third"), "{text}");
    assert!(world.resource::<Log>().unwrap().0.is_empty(), "nothing ran");
}

#[test]
fn run_conditions_gate_systems_and_sets() {
    #[derive(Default)]
    struct Enabled(bool);
    fn enabled(flag: Res<Enabled>) -> bool {
        flag.0
    }
    let mut world = World::new();
    world.insert_resource(Log::default());
    world.insert_resource(Enabled(false));
    let mut schedule = Schedule::new();
    schedule.add_systems((first.run_if(enabled), second.in_set("gated"), third));
    schedule.configure_set("gated", SetConfig::new().run_if(|e: Res<Enabled>| e.0));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["third"]);
    world.resource_mut::<Enabled>().unwrap().0 = true;
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["third", "first", "second", "third"]);
}

#[test]
fn commands_apply_in_order_and_skip_gone_entities() {
    #[derive(Default)]
    struct Spawned(Vec<Entity>);
    fn spawner(mut commands: Commands, mut spawned: ResMut<Spawned>) {
        let e = commands.spawn((A(1),));
        commands.insert(e, (B(2),));
        let doomed = commands.spawn((A(9),));
        commands.despawn(doomed);
        commands.insert(doomed, (B(9),)); // skipped: despawned earlier in the buffer
        commands.despawn(doomed); // skipped too
        commands.insert_resource(7u32);
        commands.add(|world: &mut World| {
            world.insert_resource(String::from("custom"));
        });
        spawned.0.extend([e, doomed]);
    }
    fn remover(q: Query<Entity, With<B>>, mut commands: Commands) {
        for e in q.iter() {
            commands.entity(e).remove::<(B,)>().insert((C(3),));
        }
    }
    let mut world = World::new();
    world.insert_resource(Spawned::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((spawner, remover));
    schedule.run(&mut world).unwrap();
    let [e, doomed] = world.resource::<Spawned>().unwrap().0[..] else { panic!() };
    assert_eq!(world.get::<A>(e), Some(&A(1)));
    assert_eq!(world.get::<B>(e), Some(&B(2)), "remover ran before the spawn was applied");
    assert!(!world.contains(doomed));
    assert_eq!(world.resource::<u32>(), Some(&7));
    assert_eq!(world.resource::<String>().map(String::as_str), Some("custom"));
    let stats = schedule.command_stats();
    assert_eq!(stats.skipped, 2, "{stats:?}");
    assert!(stats.recent_skips.iter().all(|s| s.contains("skipped")), "{stats:?}");
    // The next run sees B and swaps it for C.
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<B>(e), None);
    assert_eq!(world.get::<C>(e), Some(&C(3)));
    world.check_invariants();
}

#[test]
fn sync_points_apply_commands_mid_schedule() {
    fn spawn_one(mut commands: Commands) {
        commands.spawn((Flag,));
    }
    fn count(q: Query<&Flag>, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
    }
    let mut world = World::new();
    world.insert_resource(Vec::<usize>::new());
    let mut schedule = Schedule::new();
    schedule.add_systems((spawn_one, count, ApplyDeferred, count.after(ApplyDeferred)));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Vec<usize>>().unwrap(), &[0, 1]);
}

#[test]
fn events_live_for_two_runs_and_each_reader_sees_each_once() {
    #[derive(Debug, PartialEq)]
    struct Hit(u32);
    #[derive(Default)]
    struct Sent(u32);
    fn send(mut out: EventWriter<Hit>, mut n: Local<u32>, mut sent: ResMut<Sent>) {
        *n += 1;
        out.send(Hit(*n));
        sent.0 += 1;
    }
    fn read_after(mut hits: EventReader<Hit>, mut log: ResMut<Vec<u32>>) {
        log.extend(hits.read().map(|h| h.0));
    }
    fn read_before(mut hits: EventReader<Hit>, mut log: ResMut<Vec<(u32, u32)>>) {
        let seen: Vec<u32> = hits.read().map(|h| h.0).collect();
        log.extend(seen.into_iter().map(|h| (h, 0)));
    }
    let mut world = World::new();
    world.insert_resource(Vec::<u32>::new());
    world.insert_resource(Vec::<(u32, u32)>::new());
    world.insert_resource(Sent::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((read_before, send, read_after));
    for _ in 0..3 {
        schedule.run(&mut world).unwrap();
    }
    // The reader after the writer sees each event in the run it was sent.
    assert_eq!(world.resource::<Vec<u32>>().unwrap(), &[1, 2, 3]);
    // The reader before it sees each one run later, still exactly once.
    let before: Vec<u32> =
        world.resource::<Vec<(u32, u32)>>().unwrap().iter().map(|p| p.0).collect();
    assert_eq!(before, [1, 2]);
    // After two more runs without sending, the queue is empty.
    let mut quiet = Schedule::new();
    quiet.add_systems(read_after);
    // Run 3's event is still readable in the next run; run 2's aged out at the end of run 3.
    assert_eq!(world.resource::<Events<Hit>>().unwrap().len(), 1);
    quiet.run(&mut world).unwrap();
    // A new reader (its own cursor) still finds run 3's event, and only that one.
    assert_eq!(world.resource::<Vec<u32>>().unwrap(), &[1, 2, 3, 3]);
    assert!(world.resource::<Events<Hit>>().unwrap().is_empty());
    quiet.run(&mut world).unwrap();
    assert_eq!(world.resource::<Vec<u32>>().unwrap(), &[1, 2, 3, 3]);
}

#[test]
fn a_panicking_system_is_reported_and_the_world_stays_usable() {
    let finished = Arc::new(AtomicBool::new(false));
    let f = finished.clone();
    fn boom(_: Query<&A>) {
        panic!("boom at frame 1");
    }
    fn spawner(mut commands: Commands) {
        commands.spawn((C(1),));
    }
    let mut schedule = Schedule::new();
    schedule.add_systems((
        spawner,
        move |mut q: Query<&mut B>| {
            std::thread::sleep(Duration::from_millis(30));
            q.iter_mut().for_each(|mut b| b.0 += 1);
            f.store(true, Ordering::SeqCst);
        },
        boom,
        |mut q: Query<&mut A>| q.iter_mut().for_each(|mut a| a.0 += 1),
    ));
    let mut world = World::new();
    let e = world.spawn((A(0), B(0)));
    let err = pool(2).install(|| schedule.run(&mut world)).unwrap_err();
    let ScheduleError::SystemPanicked { system, message } = &err else { panic!("{err}") };
    assert!(system.contains("boom") && message.contains("boom at frame 1"), "{err}");
    assert!(finished.load(Ordering::SeqCst), "the running system finished");
    assert_eq!(world.get::<A>(e), Some(&A(0)), "the system after the panic did not run");
    world.check_invariants();
    let mut cs = world.query::<&C>();
    assert_eq!(cs.iter(&world).count(), 1, "the completed system's commands were applied");
    // The world and the schedule stay usable.
    world.spawn((A(5),));
    assert!(schedule.run(&mut world).is_err());
    world.check_invariants();
}

#[test]
fn exclusive_systems_run_alone_and_see_earlier_commands_later() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((
        first,
        |world: &mut World| {
            world.resource_mut::<Log>().unwrap().0.push("exclusive");
            world.spawn((A(1),));
        },
        second,
    ));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["first", "exclusive", "second"]);
    assert_eq!(world.len(), 1);
}

#[test]
fn changed_in_systems_means_since_that_system_last_ran() {
    fn bump_even(mut q: Query<(&mut A, &B)>) {
        for (mut a, b) in q.iter_mut() {
            if b.0 % 2 == 0 {
                a.0 += 1;
            }
        }
    }
    fn watch(q: Query<&B, Changed<A>>, mut seen: ResMut<Vec<u64>>) {
        let mut changed: Vec<u64> = q.iter().map(|b| b.0).collect();
        changed.sort();
        seen.extend(changed);
    }
    let mut world = World::new();
    world.insert_resource(Vec::<u64>::new());
    for i in 0..4 {
        world.spawn((A(0), B(i)));
    }
    let mut schedule = Schedule::new();
    schedule.add_systems((watch, bump_even));
    schedule.run(&mut world).unwrap(); // watch: all four are new
    schedule.run(&mut world).unwrap(); // watch: the two bumped last run
    assert_eq!(world.resource::<Vec<u64>>().unwrap(), &[0, 1, 2, 3, 0, 2]);
}

/// One entity of the canonical world: `(id ^ A, B, C, A, has Flag)`.
type Row = (u64, Option<u64>, Option<u64>, Option<u64>, bool);

/// A seeded world and a schedule of 29 systems with mixed conflicts (change detection, events,
/// a `&World` system with a query state of its own and an exclusive system among them); the
/// world afterwards, in a canonical form, with what those systems saw.
fn simulate(threads: usize, min_parallel_work: Duration) -> Vec<Row> {
    #[derive(Clone, Copy)]
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
    }
    let mut world = World::new();
    world.register_component::<Flag>(StorageType::SparseSet).unwrap();
    let mut rng = Rng(42);
    let entities = if cfg!(miri) { 24 } else { 2_000u64 };
    for i in 0..entities {
        let r = rng.next();
        let e = world.spawn((A(i),));
        if r & 1 != 0 {
            world.insert(e, (B(r % 1000),)).unwrap();
        }
        if r & 2 != 0 {
            world.insert(e, (C(r % 777),)).unwrap();
        }
        if r & 4 != 0 {
            world.insert(e, (Flag,)).unwrap();
        }
    }
    world.insert_resource(0u64);
    let mut schedule = Schedule::new();
    schedule.set_min_parallel_work(min_parallel_work);
    for k in 0..6u64 {
        schedule.add_systems((
            move |mut q: Query<(&mut A, &B)>| {
                for (mut a, b) in q.iter_mut() {
                    a.0 = a.0.wrapping_mul(31).wrapping_add(b.0 + k);
                }
            },
            move |mut q: Query<(&mut B, Option<&C>), With<Flag>>| {
                q.par_iter_mut().for_each(|(mut b, c)| {
                    b.0 = b.0.wrapping_mul(17) ^ c.map_or(k, |c| c.0);
                });
            },
            move |mut q: Query<&mut C, Without<Flag>>, mut total: ResMut<u64>| {
                for mut c in q.iter_mut() {
                    c.0 = c.0.rotate_left(3) ^ k;
                    *total = total.wrapping_add(c.0);
                }
            },
            move |q: Query<(Entity, &A, &C)>, mut commands: Commands| {
                for (e, a, c) in q.iter() {
                    if (a.0 ^ c.0) % 97 == k {
                        if a.0 % 2 == 0 {
                            commands.despawn(e);
                        } else {
                            commands.spawn((A(a.0 / 3), B(c.0)));
                            commands.entity(e).insert((Flag,));
                        }
                    }
                }
            },
        ));
    }
    /// What the watching systems saw: a running hash and a count each.
    #[derive(Default)]
    struct Seen {
        changed_a: (u64, u64),
        events: (u64, u64),
    }
    struct Noted(u64);
    fn fold(log: &mut (u64, u64), value: u64) {
        log.0 = log.0.wrapping_mul(1_000_003) ^ value;
        log.1 += 1;
    }
    world.insert_resource(Seen::default());
    let by_world = Arc::new(AtomicUsize::new(0));
    let counted = by_world.clone();
    let mut changed_b: Option<QueryState<Entity, Changed<B>>> = None;
    schedule.add_systems((
        |q: Query<(Entity, &A), Changed<A>>, mut seen: ResMut<Seen>| {
            let mut changed: Vec<(Entity, u64)> = q.iter().map(|(e, a)| (e, a.0)).collect();
            changed.sort_unstable();
            for (e, a) in changed {
                fold(&mut seen.changed_a, e.to_bits() ^ a);
            }
        },
        |q: Query<&C, Changed<C>>, mut notes: EventWriter<Noted>| {
            let mut fives: Vec<u64> = q.iter().map(|c| c.0).filter(|c| c % 5 == 0).collect();
            fives.sort_unstable();
            notes.send_batch(fives.into_iter().map(Noted));
        },
        |mut notes: EventReader<Noted>, mut seen: ResMut<Seen>| {
            for note in notes.read() {
                fold(&mut seen.events, note.0);
            }
        },
        move |world: &World| {
            let state = changed_b.get_or_insert_with(|| world.query_filtered());
            counted.fetch_add(state.iter(world).count(), Ordering::Relaxed);
        },
        |world: &mut World| {
            let len = world.len() as u64;
            let total = world.resource_mut::<u64>().unwrap();
            *total = total.rotate_left(7) ^ len;
        },
    ));
    pool(threads).install(|| {
        for _ in 0..if cfg!(miri) { 2 } else { 5 } {
            schedule.run(&mut world).unwrap();
        }
    });
    let mut out: Vec<_> = world
        .query::<(Entity, &A, Option<&B>, Option<&C>, Option<&Flag>)>()
        .iter(&world)
        .map(|(e, a, b, c, f)| {
            (e.to_bits() ^ a.0, b.map(|b| b.0), c.map(|c| c.0), Some(a.0), f.is_some())
        })
        .collect();
    out.sort_unstable();
    out.push((*world.resource::<u64>().unwrap(), None, None, Some(world.len() as u64), false));
    let seen = world.resource::<Seen>().unwrap();
    let (changed_a, events) = (seen.changed_a, seen.events);
    out.push((changed_a.0, Some(changed_a.1), Some(events.0), Some(events.1), false));
    out.push((by_world.load(Ordering::Relaxed) as u64, None, None, None, true));
    out
}

#[test]
fn the_world_is_bit_identical_on_1_2_and_8_threads() {
    // Always on the pool, the adaptive default, and never on the pool.
    let one = simulate(1, Duration::ZERO);
    assert!(one.len() > if cfg!(miri) { 20 } else { 1_000 });
    // The watchers saw something: changes of A, events, changes of B through `&World`.
    let [.., (_, Some(changed_a), _, Some(events), _), (by_world, ..)] = one[..] else {
        panic!("the watchers' rows")
    };
    assert!(changed_a > 0 && events > 0 && by_world > 0, "{changed_a} {events} {by_world}");
    for work in [Duration::ZERO, crate::MIN_PARALLEL_WORK, Duration::MAX] {
        assert_eq!(simulate(2, work), one, "2 threads, min parallel work {work:?}");
        if !cfg!(miri) {
            assert_eq!(simulate(8, work), one, "8 threads, min parallel work {work:?}");
        }
    }
}

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

#[test]
fn an_exclusive_system_that_takes_ticks_itself_stays_visible() {
    fn excl(world: &mut World) {
        let mut q = world.query::<&mut A>();
        for _ in 0..3 {
            for mut a in q.iter_mut(world) {
                a.0 += 1;
            }
        }
    }
    fn watch(q: Query<&A, Changed<A>>, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
    }
    let mut world = World::new();
    world.insert_resource(Vec::<usize>::new());
    world.spawn((A(0),));
    let mut schedule = Schedule::new();
    schedule.add_systems((excl, watch.after(excl)));
    for _ in 0..4 {
        schedule.run(&mut world).unwrap();
    }
    assert_eq!(world.resource::<Vec<usize>>().unwrap(), &[1, 1, 1, 1]);
}

#[test]
fn a_writer_may_filter_on_its_own_changes() {
    fn halve_changed(mut q: Query<&mut A, Changed<A>>, mut count: ResMut<usize>) {
        for mut a in q.iter_mut() {
            a.0 /= 2;
            *count += 1;
        }
    }
    let mut world = World::new();
    world.insert_resource(0usize);
    let e = world.spawn((A(64),));
    world.spawn((A(8),));
    let mut schedule = Schedule::new();
    schedule.add_systems(halve_changed);
    schedule.run(&mut world).unwrap();
    schedule.run(&mut world).unwrap(); // its own writes are not news to it
    assert_eq!(world.resource::<usize>(), Some(&2));
    world.get_mut::<A>(e).unwrap().0 = 100;
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<usize>(), Some(&3));
    assert_eq!(world.get::<A>(e), Some(&A(50)));
}

#[test]
fn run_conditions_must_only_read() {
    fn spawns(mut c: Commands) -> bool {
        c.spawn((A(7),));
        true
    }
    fn writes(mut r: ResMut<u32>) -> bool {
        *r += 1;
        true
    }
    let mut schedule = Schedule::new();
    let err = schedule.try_add_systems(first.run_if(spawns)).err().unwrap();
    assert!(matches!(err, ScheduleError::ConditionNotReadOnly { .. }), "{err}");
    assert!(err.to_string().contains("spawns"), "{err}");
    assert!(schedule.try_add_systems(first.run_if(writes)).is_err());
    schedule.configure_set("s", SetConfig::new().run_if(writes));
    schedule.add_systems(first.in_set("s"));
    let mut world = World::new();
    world.insert_resource(Log::default());
    world.insert_resource(0u32);
    assert!(matches!(schedule.run(&mut world), Err(ScheduleError::ConditionNotReadOnly { .. })));
}

#[test]
fn events_read_only_by_a_condition_still_age() {
    struct Ping;
    fn pinged(mut pings: EventReader<Ping>) -> bool {
        pings.read().count() > 0
    }
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut schedule = Schedule::new();
    schedule.add_systems(first.run_if(pinged));
    for _ in 0..10 {
        schedule.run(&mut world).unwrap();
        world.resource_mut::<Events<Ping>>().unwrap().send(Ping);
    }
    assert_eq!(world.resource::<Log>().unwrap().0.len(), 9);
    assert!(world.resource::<Events<Ping>>().unwrap().len() <= 2);
}

#[test]
fn a_panicking_set_condition_is_an_error_not_an_unwind() {
    let mut schedule = Schedule::new();
    schedule.add_systems(first.in_set("s"));
    schedule.configure_set("s", SetConfig::new().run_if(|| -> bool { panic!("no") }));
    let mut world = World::new();
    world.insert_resource(Log::default());
    let err = schedule.run(&mut world).unwrap_err();
    assert!(matches!(err, ScheduleError::SystemPanicked { .. }), "{err}");
    assert!(world.resource::<Log>().unwrap().0.is_empty());
}

#[test]
fn a_panicking_command_leaves_no_half_made_entity_and_later_buffers_apply() {
    fn bad(mut c: Commands) {
        c.spawn((A(1),));
        c.add(|_: &mut World| panic!("command failed"));
        c.spawn((A(2),)); // thrown away with the rest of the buffer
    }
    fn good(mut c: Commands) {
        c.spawn((B(3),));
    }
    let mut world = World::new();
    let mut schedule = Schedule::new();
    schedule.add_systems((bad, good));
    let err = schedule.run(&mut world).unwrap_err();
    assert!(err.to_string().contains("command failed"), "{err}");
    world.check_invariants();
    assert_eq!(world.query::<&A>().iter(&world).map(|a| a.0).collect::<Vec<_>>(), [1]);
    assert_eq!(world.query::<&B>().iter(&world).count(), 1, "the next buffer still applied");
    assert_eq!(world.len(), 2, "no empty entity left behind");
}

#[test]
fn a_reader_survives_its_queue_being_replaced() {
    struct Note(u32);
    fn read(mut notes: EventReader<Note>, mut seen: ResMut<Vec<u32>>) {
        assert!(notes.len() <= 2);
        seen.extend(notes.read().map(|n| n.0));
    }
    let mut world = World::new();
    world.insert_resource(Vec::<u32>::new());
    let mut schedule = Schedule::new();
    schedule.add_systems(read);
    world.insert_resource(Events::<Note>::default());
    for i in 0..3 {
        world.resource_mut::<Events<Note>>().unwrap().send(Note(i));
        schedule.run(&mut world).unwrap();
    }
    let mut fresh = Events::<Note>::default();
    fresh.send(Note(99));
    world.insert_resource(fresh);
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Vec<u32>>().unwrap(), &[0, 1, 2, 99]);
}

/// Eight independent nodes, run by the calling thread (outside the pool) and up to two pool
/// tasks; `run` sees which thread runs each node.
fn run_eight_on_pool(run: &crate::workers::RunNode<'_>) -> std::thread::Result<()> {
    let predecessors = [0; 8];
    let successors = vec![Vec::new(); 8];
    let workers = crate::workers::Workers::new(&predecessors, &successors, 3);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::schedule::run_on_pool(&workers, run);
    }))
}

#[test]
fn a_panic_escaping_a_pool_task_resumes_on_the_caller_once_every_task_is_done() {
    // A node's panic is caught by the node (`run_node_shared`); one that escapes the worker
    // loop is an executor bug, and must reach the caller rather than abort the process or
    // vanish, and only once no task runs any more.
    let (entered, left) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let run = |_k: usize| -> Result<(), String> {
        if rayon::current_thread_index().is_some() {
            entered.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            left.fetch_add(1, Ordering::SeqCst);
            panic!("escaped a task");
        }
        // The caller holds its first node until a task ran one, so a task surely panics.
        while entered.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        Ok(())
    };
    let payload = run_eight_on_pool(&run).unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"escaped a task"));
    let (entered, left) = (entered.load(Ordering::SeqCst), left.load(Ordering::SeqCst));
    assert!(entered >= 1);
    assert_eq!(entered, left, "a task was still in a node when the panic reached the caller");
}

#[test]
fn a_caller_that_unwinds_waits_for_its_pool_tasks_first() {
    // The tasks borrow the caller's frame: it may not end while one still runs. One task node
    // stays in until the caller has returned (`returned`), or until a deadline far beyond the
    // time an unwind takes; if it sees the caller back first, the caller did not wait.
    const CALLER: u8 = 1;
    const TASK: u8 = 2;
    let runner: Vec<std::sync::atomic::AtomicU8> =
        (0..8).map(|_| std::sync::atomic::AtomicU8::new(0)).collect();
    let (returned, early, long_taken) =
        (AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false));
    let caller_started = AtomicBool::new(false);
    let run = |k: usize| -> Result<(), String> {
        if rayon::current_thread_index().is_some() {
            runner[k].store(TASK, Ordering::SeqCst);
            // Two tasks stopped in their first nodes hold few roots: the caller finds one.
            while !caller_started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            if !long_taken.swap(true, Ordering::SeqCst) {
                let deadline = std::time::Instant::now() + Duration::from_millis(300);
                while std::time::Instant::now() < deadline {
                    if returned.load(Ordering::SeqCst) {
                        early.store(true, Ordering::SeqCst);
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            return Ok(());
        }
        runner[k].store(CALLER, Ordering::SeqCst);
        caller_started.store(true, Ordering::SeqCst);
        while !long_taken.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        panic!("the caller unwinds");
    };
    let payload = run_eight_on_pool(&run).unwrap_err();
    returned.store(true, Ordering::SeqCst);
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the caller unwinds"));
    assert!(!early.load(Ordering::SeqCst), "the caller returned while a task still ran");
    // The caller ran one node (its first) and panicked; the tasks ran every other node but the
    // rest of the caller's chunk of roots (at most two here: 8 roots over 2 x 3 workers).
    let runner: Vec<u8> = runner.iter().map(|r| r.load(Ordering::SeqCst)).collect();
    let first = runner.iter().position(|&r| r == CALLER).expect("the caller ran a node");
    for (k, &r) in runner.iter().enumerate() {
        if k != first && k != first + 1 {
            assert_eq!(r, TASK, "node {k} was not run by a task: {runner:?}");
        }
    }
}

/// Panics when dropped.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("bomb dropped");
    }
}

#[test]
fn a_panicking_drop_in_a_panicked_system_s_thrown_away_commands_is_still_an_error() {
    fn good(mut c: Commands) {
        c.spawn((B(3),));
    }
    fn boom(mut c: Commands) {
        c.spawn((Bomb,));
        c.spawn((A(1),));
        panic!("boom");
    }
    for exclusive_after in [false, true] {
        let mut world = World::new();
        let mut schedule = Schedule::new();
        schedule.add_systems((good, boom).chain());
        if exclusive_after {
            // Cuts the segments after `boom`: the same in a segment of its own.
            schedule.add_systems((|_: &mut World| {}).after(boom));
        }
        let ran =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| schedule.run(&mut world)));
        let Ok(Err(ScheduleError::SystemPanicked { system, message })) = ran else {
            panic!("Schedule::run unwound instead of reporting the system's panic");
        };
        assert!(system.contains("boom") && message == "boom", "{system}: {message}");
        world.check_invariants();
        assert_eq!(world.query::<&B>().iter(&world).count(), 1, "the other buffer applied");
        assert_eq!(world.len(), 1, "no entity of the thrown-away buffer left behind");
        assert_eq!(
            schedule.run(&mut world).map_err(|e| e.to_string()),
            Err(ScheduleError::SystemPanicked { system, message: "boom".into() }.to_string())
        );
    }
}

#[test]
fn a_panicking_drop_in_a_buffer_thrown_away_after_a_command_panicked_is_still_an_error() {
    // The second buffer of a system is thrown away when the first one's command panics.
    fn two(mut first: Commands, mut second: Commands) {
        first.add(|_: &mut World| panic!("a bad command"));
        second.spawn((Bomb,));
    }
    fn good(mut c: Commands) {
        c.spawn((B(3),));
    }
    let mut world = World::new();
    let mut schedule = Schedule::new();
    schedule.add_systems((two, good).chain());
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| schedule.run(&mut world)));
    let Ok(Err(ScheduleError::SystemPanicked { message, .. })) = ran else {
        panic!("Schedule::run unwound instead of reporting the command's panic");
    };
    assert_eq!(message, "a bad command");
    world.check_invariants();
    assert_eq!(world.query::<&B>().iter(&world).count(), 1, "the next buffer applied");
    assert_eq!(world.len(), 1, "no entity of the thrown-away buffer left behind");
}

#[test]
fn a_system_run_on_its_own_that_panics_leaves_none_of_its_commands() {
    let mut world = World::new();
    let mut calls = 0u64;
    let mut system = crate::IntoSystem::into_system(move |mut commands: Commands| {
        calls += 1;
        commands.spawn((A(calls),));
        assert_ne!(calls, 1, "the first run fails");
    });
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::System::run(&mut system, &mut world)
    }));
    assert!(first.is_err());
    world.flush();
    assert_eq!(world.len(), 0, "the failed run's reserved entity is not left behind");
    crate::System::run(&mut system, &mut world).unwrap();
    let spawned: Vec<u64> = world.query::<&A>().iter(&world).map(|a| a.0).collect();
    assert_eq!(spawned, [2], "only the second run's spawn lands");
    assert_eq!(world.len(), 1);
}

struct Ping;

#[test]
fn a_command_panicking_at_a_sync_point_stops_the_run_and_events_still_age() {
    fn send(mut pings: EventWriter<Ping>, mut commands: Commands, mut runs: Local<u32>) {
        *runs += 1;
        if *runs == 1 {
            pings.send(Ping);
            commands.add(|_: &mut World| panic!("a bad command"));
        }
    }
    fn after(mut log: ResMut<Log>) {
        log.0.push("after");
    }
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((send, ApplyDeferred, after).chain());
    let first = schedule.run(&mut world);
    assert!(
        matches!(&first, Err(ScheduleError::SystemPanicked { message, .. }) if message.contains("a bad command")),
        "{first:?}"
    );
    assert!(world.resource::<Log>().unwrap().0.is_empty(), "nothing after the sync point ran");
    assert_eq!(world.resource::<Events<Ping>>().unwrap().len(), 1, "the ping lives on");
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["after"]);
    assert_eq!(
        world.resource::<Events<Ping>>().unwrap().len(),
        0,
        "a ping sent in the first run is gone after the second run's aging"
    );
}

#[test]
fn a_chain_orders_the_systems_it_lists_not_their_types() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut twice = Schedule::new();
    twice.add_systems((first, second, first).chain());
    twice.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["first", "second", "first"]);

    world.resource_mut::<Log>().unwrap().0.clear();
    let mut syncs = Schedule::new();
    syncs.add_systems((first, ApplyDeferred, second, ApplyDeferred, third).chain());
    syncs.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["first", "second", "third"]);
}

#[test]
fn a_world_system_s_own_query_sees_the_writes_ordered_after_it() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut state: Option<QueryState<Entity, Changed<A>>> = None;
    // Ordered before the writer (a `&World` reader conflicts with every writer), in the same
    // segment: each run sees the write of the run before.
    let watcher = move |world: &World| {
        let state = state.get_or_insert_with(|| world.query_filtered());
        log.lock().unwrap().push(state.iter(world).count());
    };
    let writer = |mut q: Query<&mut A>| q.iter_mut().for_each(|mut a| a.0 += 1);
    let mut world = World::new();
    world.spawn((A(0),));
    let mut schedule = Schedule::new();
    schedule.add_systems((watcher, writer));
    for _ in 0..4 {
        schedule.run(&mut world).unwrap();
    }
    assert_eq!(*seen.lock().unwrap(), [1, 1, 1, 1]);
}

#[test]
fn a_schedule_clamps_stored_ticks_at_its_first_run_and_every_so_many_ticks() {
    use crate::schedule::tick_check_due;
    let (a, b) = (World::new(), World::new());
    assert!(tick_check_due(None, a.id(), 5), "the first run on a world checks");
    let checked = Some((a.id(), 5));
    assert!(!tick_check_due(checked, a.id(), 5 + crate::CHECK_TICKS_EVERY - 1));
    assert!(tick_check_due(checked, a.id(), 5 + crate::CHECK_TICKS_EVERY));
    assert!(tick_check_due(checked, b.id(), 6), "another world is checked at once");
    // Across the wrap of the counter.
    let late = Some((a.id(), u32::MAX - 10));
    assert!(!tick_check_due(late, a.id(), 100));
    assert!(tick_check_due(late, a.id(), crate::CHECK_TICKS_EVERY));
}

/// How many ticks `burn` takes in the next run.
struct Burn(u32);
/// Whether `watch_changed` may run.
struct On(bool);

#[test]
#[cfg_attr(debug_assertions, ignore = "takes 2^32 ticks: about 30 s in a debug build")]
fn a_system_kept_off_for_more_than_2_pow_32_ticks_still_sees_what_changed() {
    fn burn(world: &mut World) {
        for _ in 0..world.resource::<Burn>().unwrap().0 {
            world.increment_change_tick_mut();
        }
    }
    fn watch_changed(q: Query<&A, Changed<A>>, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
    }
    let mut world = World::new();
    world.insert_resource(Burn(0));
    world.insert_resource(On(true));
    world.insert_resource(Vec::<usize>::new());
    let e = world.spawn((A(0),));
    let mut schedule = Schedule::new();
    schedule.add_systems((burn, watch_changed.run_if(|on: Res<On>| on.0)).chain());
    schedule.run(&mut world).unwrap();
    // Kept off while the ticks go round once, less a margin (the schedule clamping the stored
    // ticks every `CHECK_TICKS_EVERY` as it goes); then `A` changes and a little more passes.
    world.resource_mut::<On>().unwrap().0 = false;
    world.resource_mut::<Burn>().unwrap().0 = 1 << 28;
    for _ in 0..15 {
        schedule.run(&mut world).unwrap();
    }
    world.resource_mut::<Burn>().unwrap().0 = (1 << 28) - 10_000;
    schedule.run(&mut world).unwrap();
    world.get_mut::<A>(e).unwrap().0 = 1;
    world.resource_mut::<Burn>().unwrap().0 = 20_000;
    schedule.run(&mut world).unwrap();
    // `A` changed after the system last ran, however long ago that was.
    world.resource_mut::<Burn>().unwrap().0 = 0;
    world.resource_mut::<On>().unwrap().0 = true;
    schedule.run(&mut world).unwrap();
    assert_eq!(*world.resource::<Vec<usize>>().unwrap(), [1, 1]);
}

#[test]
fn an_event_queue_removed_after_initialization_is_an_error_that_names_it() {
    struct Shout;
    let mut schedule = Schedule::new();
    schedule.add_systems(|mut reader: EventReader<Shout>| reader.clear());
    let mut world = World::new();
    schedule.run(&mut world).unwrap();
    world.remove_resource::<Events<Shout>>();
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::SystemPanicked { message, .. } = &err else { panic!("{err}") };
    assert!(message.contains("Events<") && message.contains("Shout"), "{err}");
    assert!(message.contains("removed from the world"), "{err}");
    // Put back, the schedule runs again.
    world.insert_resource(Events::<Shout>::default());
    schedule.run(&mut world).unwrap();
}

#[test]
fn a_system_walks_pairs_of_its_query() {
    fn attract(mut bodies: Query<(Entity, &mut A)>, mut pairs: ResMut<Vec<[Entity; 2]>>) {
        assert_eq!(bodies.iter_combinations::<2>().count(), 3);
        bodies.for_each_combination_mut::<2>(|[(a, mut x), (b, mut y)]| {
            pairs.push([a, b]);
            x.0 += 1;
            y.0 += 1;
        });
    }
    let mut world = World::new();
    world.insert_resource(Vec::<[Entity; 2]>::new());
    let es: Vec<Entity> = (0..3).map(|_| world.spawn((A(0),))).collect();
    let mut schedule = Schedule::new();
    schedule.add_systems(attract);
    schedule.run(&mut world).unwrap();
    let mut pairs = world.resource::<Vec<[Entity; 2]>>().unwrap().clone();
    for p in &mut pairs {
        p.sort();
    }
    pairs.sort();
    assert_eq!(pairs, [[es[0], es[1]], [es[0], es[2]], [es[1], es[2]]]);
    // Each body is in two of the three pairs.
    for e in es {
        assert_eq!(world.get::<A>(e), Some(&A(2)));
    }
}

#[test]
fn a_system_writes_the_entities_a_list_names() {
    /// The entities an explosion hit, in the order it hit them (one twice).
    struct Hits(Vec<Entity>);
    fn damage(mut bodies: Query<(Entity, &mut A), Without<B>>, hits: Res<Hits>) {
        let mut order = Vec::new();
        bodies.for_each_many_mut(hits.0.iter().copied(), |(e, mut a)| {
            order.push(e);
            a.0 += 10;
        });
        assert_eq!(order.len(), 3, "the entity with B is filtered out, the repeat is not");
    }
    let mut world = World::new();
    let es: Vec<Entity> = (0..3).map(|_| world.spawn((A(0),))).collect();
    let shielded = world.spawn((A(0), B(0)));
    world.insert_resource(Hits(vec![es[2], shielded, es[0], es[2]]));
    let mut schedule = Schedule::new();
    schedule.add_systems(damage);
    schedule.run(&mut world).unwrap();
    let a = |e| world.get::<A>(e).unwrap().0;
    assert_eq!([a(es[0]), a(es[1]), a(es[2]), a(shielded)], [10, 0, 20, 0]);
}

#[derive(Debug)]
struct Tick(u32);

fn send_tick(mut out: EventWriter<Tick>, mut n: Local<u32>) {
    *n += 1;
    out.send(Tick(*n));
}

/// What the frame schedule's reader saw: the events, and how many it missed.
#[derive(Default)]
struct TickLog(Vec<u32>, u64);

fn read_ticks(mut ticks: EventReader<Tick>, mut log: ResMut<TickLog>) {
    log.0.extend(ticks.read().map(|t| t.0));
    log.1 = ticks.missed();
}

/// Four frames of a fixed-step schedule sending one event per step, three steps a frame, and
/// a frame schedule reading them once a frame, each schedule aging as told.
fn fixed_and_frame(fixed_aging: EventAging, frame_aging: EventAging) -> World {
    let mut world = World::new();
    world.insert_resource(TickLog::default());
    let mut fixed = Schedule::new();
    fixed.add_systems(send_tick).set_event_aging(fixed_aging);
    let mut frame = Schedule::new();
    frame.add_systems(read_ticks).set_event_aging(frame_aging);
    for _ in 0..4 {
        for _ in 0..3 {
            fixed.run(&mut world).unwrap();
        }
        frame.run(&mut world).unwrap();
    }
    world
}

#[test]
fn a_fixed_step_schedule_that_ages_nothing_loses_no_event_to_the_frame_schedule() {
    let world = fixed_and_frame(EventAging::Never, EventAging::Used);
    let log = world.resource::<TickLog>().unwrap();
    assert_eq!(log.0, (1..=12).collect::<Vec<_>>());
    assert_eq!(log.1, 0);
    // Aged once a frame, at its end: the last frame's three events are kept for the next.
    assert_eq!(world.resource::<Events<Tick>>().unwrap().len(), 3);

    // Both aging what they use (the default): the fixed step ages the queue at the end of each
    // step, and the frame schedule sees only each frame's last step's event.
    let world = fixed_and_frame(EventAging::Used, EventAging::Used);
    let log = world.resource::<TickLog>().unwrap();
    assert_eq!(log.0, [3, 6, 9, 12]);
    assert_eq!(log.1, 8);
}

#[test]
fn a_frame_schedule_aging_all_ages_types_none_of_its_systems_use() {
    fn idle(mut count: Local<u32>) {
        *count += 1;
    }
    let run = |frame_aging| {
        let mut world = World::new();
        let mut fixed = Schedule::new();
        fixed.add_systems(send_tick).set_event_aging(EventAging::Never);
        let mut frame = Schedule::new();
        frame.add_systems(idle).set_event_aging(frame_aging);
        let mut lens = Vec::new();
        for _ in 0..4 {
            for _ in 0..3 {
                fixed.run(&mut world).unwrap();
            }
            frame.run(&mut world).unwrap();
            lens.push(world.resource::<Events<Tick>>().unwrap().len());
        }
        lens
    };
    // `All`: the end of each frame drops the frame before's three and keeps its own.
    assert_eq!(run(EventAging::All), [3, 3, 3, 3]);
    // `Used`: the frame schedule does not use `Tick`, and nothing ages it.
    assert_eq!(run(EventAging::Used), [3, 6, 9, 12]);
}

#[test]
fn a_schedule_aging_all_ages_its_own_types_once_per_run() {
    #[derive(Default)]
    struct Before(Vec<u32>, u64);
    fn read_before(mut ticks: EventReader<Tick>, mut log: ResMut<Before>) {
        log.0.extend(ticks.read().map(|t| t.0));
        log.1 = ticks.missed();
    }
    let mut world = World::new();
    world.insert_resource(TickLog::default());
    world.insert_resource(Before::default());
    // Another schedule registers a second type in the world: `All` now ages two.
    let mut other = Schedule::new();
    other.add_systems(|_: EventReader<Hit>| {}).set_event_aging(EventAging::Never);
    other.run(&mut world).unwrap();
    world.resource_mut::<Events<Hit>>().unwrap().send(Hit(7));
    let mut schedule = Schedule::new();
    schedule.add_systems((read_before, send_tick, read_ticks)).set_event_aging(EventAging::All);
    assert_eq!(schedule.event_aging(), EventAging::All);
    for _ in 0..3 {
        schedule.run(&mut world).unwrap();
    }
    // Aged twice per run, the reader before the writer would miss every event.
    let before = world.resource::<Before>().unwrap();
    assert_eq!((&before.0[..], before.1), (&[1, 2][..], 0));
    assert_eq!(world.resource::<TickLog>().unwrap().0, [1, 2, 3]);
    // The other schedule's type aged too: gone after two runs.
    assert!(world.resource::<Events<Hit>>().unwrap().is_empty());
}

#[derive(Debug)]
struct Hit(#[allow(dead_code)] u32);

#[test]
fn age_all_events_ages_every_registered_queue_and_removal_log() {
    struct Marker;
    let mut world = World::new();
    let mut schedule = Schedule::new();
    schedule
        .add_systems((send_tick, |mut gone: RemovedComponents<Marker>| gone.clear()))
        .set_event_aging(EventAging::Never);
    assert_eq!(schedule.event_aging(), EventAging::Never);
    let e = world.spawn((Marker,));
    schedule.run(&mut world).unwrap();
    schedule.run(&mut world).unwrap();
    world.despawn(e).unwrap();
    // `Never`: two runs and nothing aged.
    assert_eq!(world.resource::<Events<Tick>>().unwrap().len(), 2);
    assert_eq!(world.removed::<Marker>().collect::<Vec<_>>(), [e]);
    age_all_events(&mut world);
    age_all_events(&mut world);
    assert!(world.resource::<Events<Tick>>().unwrap().is_empty());
    assert_eq!(world.removed::<Marker>().count(), 0);
    // A queue taken out of the world is skipped, the others still aged.
    world.remove_resource::<Events<Tick>>();
    let f = world.spawn((Marker,));
    world.despawn(f).unwrap();
    age_all_events(&mut world);
    age_all_events(&mut world);
    assert_eq!(world.removed::<Marker>().count(), 0);
}

#[test]
fn world_readers_and_command_systems_reserve_ids_in_schedule_order() {
    use std::sync::Mutex;
    // `World::reserve_entity` takes `&self`: a `&World` system can reserve ids, so it keeps
    // its order with every other system that can (`Commands`, `&World`), and the ids are the
    // same on any number of threads.
    let overlap = Arc::new(Overlap::default());
    let ids = Arc::new(Mutex::new(Vec::new()));
    let mut schedule = Schedule::new();
    let (o1, o2, o3) = (overlap.clone(), overlap.clone(), overlap.clone());
    let (i1, i2, i3) = (ids.clone(), ids.clone(), ids.clone());
    schedule.set_min_parallel_work(Duration::ZERO).add_systems((
        move |world: &World| {
            o1.enter();
            i1.lock().unwrap().push(world.reserve_entity());
        },
        move |mut commands: Commands| {
            o2.enter();
            i2.lock().unwrap().push(commands.spawn((A(1),)));
        },
        move |world: &World| {
            o3.enter();
            i3.lock().unwrap().push(world.reserve_entity());
        },
    ));
    let mut world = World::new();
    pool(3).install(|| schedule.run(&mut world)).unwrap();
    assert_eq!(overlap.max.load(Ordering::SeqCst), 1, "two reserving systems overlapped");
    let ids = ids.lock().unwrap();
    let indices: Vec<u32> = ids.iter().map(|e| e.index()).collect();
    assert_eq!(indices, [0, 1, 2], "ids handed out out of schedule order: {ids:?}");
    assert_eq!(world.get::<A>(ids[1]), Some(&A(1)));
}

#[test]
fn a_system_reads_many_entities_at_once_through_its_query() {
    // A spring between two bodies: both read at once (read-only, so one may be named twice),
    // then written one at a time.
    struct Spring(Entity, Entity);
    fn pull(springs: Query<&Spring>, mut bodies: Query<&mut A>) {
        for spring in springs.iter() {
            let [a, b] = bodies.get_many([spring.0, spring.1]).unwrap().map(|a| a.0);
            let mid = (a + b) / 2;
            bodies.get_mut(spring.0).unwrap().0 = mid;
            bodies.get_mut(spring.1).unwrap().0 = mid;
        }
        let any = springs.iter().next().map(|s| s.0).unwrap();
        assert_eq!(bodies.get_many([any, any]).unwrap().map(|a| a.0), [6, 6]);
    }
    let mut world = World::new();
    let x = world.spawn((A(2),));
    let y = world.spawn((A(10),));
    world.spawn((Spring(x, y),));
    let mut schedule = Schedule::new();
    schedule.add_systems(pull);
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<A>(x), Some(&A(6)));
    assert_eq!(world.get::<A>(y), Some(&A(6)));
}

/// An error of a game's own, for the fallible systems below.
#[derive(Debug)]
struct OutOfAmmo(u64);

impl std::fmt::Display for OutOfAmmo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "out of ammo after {} shots", self.0)
    }
}

#[derive(Default)]
struct Shots(u64);

#[test]
fn a_system_returning_err_is_reported_once_the_run_is_complete() {
    fn count(mut shots: ResMut<Shots>) {
        shots.0 += 1;
    }
    fn shoot(
        shots: Res<Shots>,
        mut q: Query<&mut A>,
        mut commands: Commands,
    ) -> Result<(), OutOfAmmo> {
        for mut a in q.iter_mut() {
            a.0 += 1;
        }
        commands.spawn((B(shots.0),));
        if shots.0 % 2 == 1 { Err(OutOfAmmo(shots.0)) } else { Ok(()) }
    }
    fn after(mut q: Query<&mut A>) {
        for mut a in q.iter_mut() {
            a.0 *= 10;
        }
    }
    let mut world = World::new();
    world.insert_resource(Shots::default());
    let e = world.spawn((A(0),));
    let mut schedule = Schedule::new();
    schedule.add_systems((count, shoot.after(count), after.after(shoot)));
    let err = schedule.run(&mut world).unwrap_err();
    assert_eq!(
        err,
        ScheduleError::SystemFailed {
            system: "shoot".to_owned(),
            error: "out of ammo after 1 shots".to_owned(),
            others: 0
        }
    );
    assert_eq!(err.to_string(), "system `shoot` failed: out of ammo after 1 shots");
    // The run went on: the failing system's writes and commands, and the systems after it.
    assert_eq!(world.get::<A>(e), Some(&A(10)));
    assert_eq!(world.query::<&B>().iter(&world).count(), 1);
    // The next run does not fail, and reports nothing left over.
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<A>(e), Some(&A(110)));
}

#[test]
fn the_first_failure_in_schedule_order_is_reported_on_any_thread_count() {
    fn fail_a(mut q: Query<&mut A>) -> Result<(), String> {
        q.iter_mut().for_each(|mut a| a.0 += 1);
        Err("a broke".to_owned())
    }
    fn fail_b(mut q: Query<&mut B>) -> Result<(), String> {
        q.iter_mut().for_each(|mut b| b.0 += 1);
        Err("b broke".to_owned())
    }
    fn fine(mut q: Query<&mut C>) -> Result<(), String> {
        q.iter_mut().for_each(|mut c| c.0 += 1);
        Ok(())
    }
    for threads in [1, 4] {
        pool(threads).install(|| {
            let mut world = World::new();
            world.spawn((A(0), B(0), C(0)));
            let mut schedule = Schedule::new();
            schedule.set_min_parallel_work(Duration::ZERO);
            schedule.add_systems((fine, fail_b, fail_a));
            // Miri interprets every run: a few are enough there to cross pool tasks.
            let runs = if cfg!(miri) { 3 } else { 20 };
            for _ in 0..runs {
                let err = schedule.run(&mut world).unwrap_err();
                assert_eq!(
                    err,
                    ScheduleError::SystemFailed {
                        system: "fail_b".to_owned(),
                        error: "b broke".to_owned(),
                        others: 1
                    },
                    "{threads} threads"
                );
                assert!(err.to_string().ends_with("(and 1 more system(s) in the same run)"));
            }
            let mut q = world.query::<(&A, &B, &C)>();
            let (a, b, c) = q.single(&world).unwrap();
            assert_eq!((a.0, b.0, c.0), (runs, runs, runs), "every system ran every time");
        });
    }
}

#[test]
fn question_marks_exclusive_systems_and_panics_beside_failures() {
    // `?` on folio's own errors.
    fn leader(q: Query<&A, With<Flag>>, mut shots: ResMut<Shots>) -> Result<(), QueryError> {
        shots.0 = q.single()?.0;
        Ok(())
    }
    fn exclusive(world: &mut World) -> Result<(), EntityError> {
        let e = world.spawn((C(1),));
        world.despawn(e)?;
        world.despawn(e)?; // gone: the error
        Ok(())
    }
    let mut world = World::new();
    world.insert_resource(Shots::default());
    let mut schedule = Schedule::new();
    // On the calling thread: the pool is not what this test is about.
    schedule.set_min_parallel_work(Duration::MAX);
    schedule.add_systems((leader, exclusive.after(leader)));
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::SystemFailed { system, others, .. } = &err else { panic!("{err}") };
    assert_eq!((system.as_str(), *others), ("leader", 1), "{err}");
    world.spawn((A(7), Flag));
    let err = schedule.run(&mut world).unwrap_err();
    assert!(
        matches!(&err, ScheduleError::SystemFailed { system, .. } if system == "exclusive"),
        "{err}"
    );
    assert_eq!(world.resource::<Shots>().unwrap().0, 7);

    // A panic in the same run is what the run reports; the failure is not carried over.
    fn fails(mut runs: Local<u32>) -> Result<(), String> {
        *runs += 1;
        if *runs == 1 { Err("failed".to_owned()) } else { Ok(()) }
    }
    fn panics(flag: Option<Res<Shots>>) {
        if flag.is_some() {
            panic!("boom");
        }
    }
    let mut world = World::new();
    world.insert_resource(Shots::default());
    let mut schedule = Schedule::new();
    schedule.set_min_parallel_work(Duration::MAX);
    schedule.add_systems((fails, panics.after(fails)));
    assert!(matches!(schedule.run(&mut world), Err(ScheduleError::SystemPanicked { .. })));
    world.remove_resource::<Shots>();
    schedule.run(&mut world).unwrap(); // the first run's failure is not reported again

    // On its own, a failing system's run is the same error.
    let mut system = IntoSystem::into_system(fails);
    let mut world = World::new();
    assert!(System::run(&mut system, &mut world).is_ok(), "the raw system returns its Result");
    let mut fallible = crate::FallibleSystem::new(IntoSystem::into_system(fails));
    let err = System::run(&mut fallible, &mut world).unwrap_err();
    assert!(matches!(&err, ScheduleError::SystemFailed { system, .. } if system == "fails"));
    System::run(&mut fallible, &mut world).unwrap();
}
