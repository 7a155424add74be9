//! `ParamSet`: members that conflict are usable one at a time; each is still checked against
//! the system's other parameters; the set is ordered by the union of its members' accesses;
//! what members defer (commands) or register (event agers) and their change ticks work as for
//! a parameter of their own.

// The systems spell their sets out in their signatures, as a game's do.
#![allow(clippy::type_complexity)]

use crate::prelude::*;
use crate::{IntoSystem, ScheduleError, System};

#[derive(Debug, Clone, Copy, PartialEq)]
struct A(u64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct B(u64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct C(u64);
#[derive(Debug, Default, PartialEq)]
struct Score(u64);
struct Ping;

/// A schedule that runs every segment on the calling thread: it never touches rayon's pool, so
/// these tests also run under miri's Stacked Borrows (which crossbeam's epoch list, inside
/// rayon, does not pass). The parallel case has a test of its own.
fn serial() -> Schedule {
    let mut schedule = Schedule::new();
    schedule.set_min_parallel_work(std::time::Duration::MAX);
    schedule
}

fn add_err<M>(system: impl IntoSystemConfigs<M>) -> ScheduleError {
    Schedule::new().try_add_systems(system).err().expect("the system should be rejected")
}

#[test]
fn members_that_conflict_are_used_one_at_a_time() {
    // Each entity with `B` copies its `A` into every other entity: a read of `A` through one
    // member, then writes of `A` through the other.
    fn spread(mut set: ParamSet<(Query<&A, With<B>>, Query<&mut A>)>) {
        let total: u64 = set.p0().iter().map(|a| a.0).sum();
        for mut a in set.p1().iter_mut() {
            a.0 += total;
        }
    }
    let mut world = World::new();
    let source = world.spawn((A(5), B(0)));
    let plain = world.spawn((A(1),));
    let mut schedule = serial();
    schedule.add_systems(spread);
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<A>(source), Some(&A(10)));
    assert_eq!(world.get::<A>(plain), Some(&A(6)));
    // The members can be taken again, in any order, in one run.
    fn twice(mut set: ParamSet<(Query<&mut A>, Query<&A>)>) {
        for mut a in set.p0().iter_mut() {
            a.0 *= 2;
        }
        let seen: u64 = set.p1().iter().map(|a| a.0).sum();
        for mut a in set.p0().iter_mut() {
            a.0 = seen;
        }
    }
    let mut schedule = serial();
    schedule.add_systems(twice);
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<A>(plain), Some(&A(32)));
}

#[test]
fn a_member_conflicting_with_another_parameter_is_rejected_naming_both() {
    fn before(_: Query<&A>, _: ParamSet<(Query<&mut A>, Query<&B>)>) {}
    let err = add_err(before);
    let text = err.to_string();
    assert!(matches!(&err, ScheduleError::ConflictingParams { .. }), "{text}");
    assert!(text.contains("`before`") && text.contains("`Query<&A>` and `ParamSet<"), "{text}");
    assert!(text.contains("through a ParamSet"), "the message suggests the fix: {text}");

    // A parameter after the set is checked against every member.
    fn after(_: ParamSet<(Query<&B>, Res<Score>)>, _: ResMut<Score>) {}
    assert!(matches!(add_err(after), ScheduleError::ConflictingParams { .. }));
    fn after_query(_: ParamSet<(Query<&B>, Query<&mut A>)>, _: Query<&A>) {}
    assert!(matches!(add_err(after_query), ScheduleError::ConflictingParams { .. }));
    // `&World` beside a set that writes, and a set member reading the world beside a writer.
    fn world_beside(_: &World, _: ParamSet<(Query<&mut A>,)>) {}
    assert!(matches!(add_err(world_beside), ScheduleError::ConflictingParams { .. }));
    fn writer_beside(_: ResMut<Score>, _: ParamSet<(&World, Query<&B>)>) {}
    assert!(matches!(add_err(writer_beside), ScheduleError::ConflictingParams { .. }));
    fn res_beside(_: Res<Score>, _: ParamSet<(ResMut<Score>,)>) {}
    assert!(matches!(add_err(res_beside), ScheduleError::ConflictingParams { .. }));

    // Disjoint parameters beside a set are fine.
    fn fine(_: Query<&B>, _: ParamSet<(Query<&mut A>, Query<&A>)>, _: Res<Score>) {}
    assert!(Schedule::new().try_add_systems(fine).is_ok());
}

#[test]
fn a_member_that_conflicts_with_itself_is_rejected() {
    fn inner(_: ParamSet<((Query<&mut A>, Query<&A>), Query<&B>)>) {}
    let err = add_err(inner);
    assert!(matches!(&err, ScheduleError::ConflictingParams { .. }), "{err}");
    fn bad_query(_: ParamSet<(Query<(&mut A, &A)>,)>) {}
    assert!(matches!(add_err(bad_query), ScheduleError::Query { .. }));
}

#[test]
fn the_set_is_ordered_like_the_union_of_its_members() {
    fn set(_: ParamSet<(Query<&mut A>, Res<Score>)>) {}
    fn reads_a(_: Query<&A>) {}
    fn writes_score(_: ResMut<Score>) {}
    fn reads_b(_: Query<&B>, _: Res<Score>) {}
    let set = IntoSystem::into_system(set);
    let access = set.access();
    assert!(access.conflicts_with(IntoSystem::into_system(reads_a).access()));
    assert!(access.conflicts_with(IntoSystem::into_system(writes_score).access()));
    assert!(!access.conflicts_with(IntoSystem::into_system(reads_b).access()));
    // Commands inside a set order it with the other systems that reserve entity ids.
    fn spawner(_: ParamSet<(Commands, Query<&B>)>) {}
    fn other_spawner(_: Commands) {}
    let spawner = IntoSystem::into_system(spawner);
    assert!(spawner.access().conflicts_with(IntoSystem::into_system(other_spawner).access()));
}

#[test]
fn resources_read_and_written_through_one_set() {
    fn bump(mut set: ParamSet<(Res<Score>, ResMut<Score>)>) {
        let seen = set.p0().0;
        set.p1().0 = seen + 1;
    }
    let mut world = World::new();
    world.insert_resource(Score(1));
    let mut schedule = serial();
    schedule.add_systems(bump);
    schedule.run(&mut world).unwrap();
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Score>(), Some(&Score(3)));
}

#[test]
fn commands_in_a_set_are_applied_and_its_events_age() {
    fn spawn_and_ping(mut set: ParamSet<(Commands, EventWriter<Ping>, Query<&A>)>) {
        let count = set.p2().iter().count() as u64;
        set.p0().spawn((A(count),));
        set.p1().send(Ping);
    }
    let mut system = IntoSystem::into_system(spawn_and_ping);
    let mut world = World::new();
    system.initialize(&mut world).unwrap();
    assert_eq!(system.event_updaters().len(), 1, "the member's ager reaches the system");

    let mut world = World::new();
    let mut schedule = serial();
    schedule.add_systems(spawn_and_ping);
    for _ in 0..5 {
        schedule.run(&mut world).unwrap();
    }
    let mut counts: Vec<u64> = world.query::<&A>().iter(&world).map(|a| a.0).collect();
    counts.sort_unstable();
    assert_eq!(counts, [0, 1, 2, 3, 4], "each run's spawn was applied before the next run");
    // Aged at the end of every run (by the member's ager, which the set handed to the
    // system): only the last run's event is left, where without ageing all five would be.
    assert_eq!(world.resource::<Events<Ping>>().unwrap().len(), 1);
}

#[test]
fn change_detection_in_a_member_counts_from_the_systems_last_run() {
    #[derive(Default)]
    struct Seen(Vec<usize>);
    fn watch(mut set: ParamSet<(Query<(), Changed<A>>, Query<&mut A>)>, mut seen: ResMut<Seen>) {
        let changed = set.p0().iter().count();
        seen.0.push(changed);
        if changed == 0 {
            // Reading through the writing member changes nothing.
            assert_eq!(set.p1().iter_mut().count(), 2);
        }
    }
    let mut world = World::new();
    world.insert_resource(Seen::default());
    let first = world.spawn((A(1),));
    world.spawn((A(2),));
    let mut schedule = serial();
    schedule.add_systems(watch);
    schedule.run(&mut world).unwrap();
    schedule.run(&mut world).unwrap();
    world.get_mut::<A>(first).unwrap().0 = 10;
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Seen>().unwrap().0, [2, 0, 1]);
}

#[test]
fn a_world_member_beside_a_writing_query() {
    fn census(mut set: ParamSet<(&World, Query<&mut A>)>) {
        let entities = set.p0().len() as u64;
        for mut a in set.p1().iter_mut() {
            a.0 = entities;
        }
    }
    let mut world = World::new();
    let e = world.spawn((A(0),));
    world.spawn((B(0),));
    let mut schedule = serial();
    schedule.add_systems(census);
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<A>(e), Some(&A(2)));
    // It reads the world, so it is ordered with every writer.
    fn writes_b(_: Query<&mut B>) {}
    let census = IntoSystem::into_system(census);
    assert!(census.access().conflicts_with(IntoSystem::into_system(writes_b).access()));
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn sets_run_in_parallel_schedules_deterministically() {
    // A set that writes `A` beside systems that read `A` and write `B`: on 1 and 4 threads the
    // world comes out the same.
    fn set_system(mut set: ParamSet<(Query<&A, With<B>>, Query<&mut A>)>) {
        let sum: u64 = set.p0().iter().map(|a| a.0).sum();
        for mut a in set.p1().iter_mut() {
            a.0 = a.0.wrapping_mul(31).wrapping_add(sum);
        }
    }
    fn read_a_write_b(mut q: Query<(&A, &mut B)>) {
        for (a, mut b) in q.iter_mut() {
            b.0 = b.0.wrapping_add(a.0);
        }
    }
    // Shares nothing with the set: runs beside it on the pool.
    fn bump_c(mut q: Query<&mut C>) {
        for mut c in q.iter_mut() {
            c.0 = c.0.wrapping_mul(7).wrapping_add(1);
        }
    }
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let mut world = World::new();
            for i in 0..if cfg!(miri) { 30 } else { 200 } {
                if i % 3 == 0 {
                    world.spawn((A(i), B(i)));
                } else {
                    world.spawn((A(i), C(i)));
                }
            }
            let mut schedule = Schedule::new();
            schedule.set_min_parallel_work(std::time::Duration::ZERO);
            schedule.add_systems((read_a_write_b, set_system, bump_c, read_a_write_b));
            for _ in 0..4 {
                schedule.run(&mut world).unwrap();
            }
            let mut out: Vec<(u64, Option<u64>, Option<u64>)> = world
                .query::<(&A, Option<&B>, Option<&C>)>()
                .iter(&world)
                .map(|(a, b, c)| (a.0, b.map(|b| b.0), c.map(|c| c.0)))
                .collect();
            out.sort_unstable();
            out
        })
    };
    assert_eq!(run(1), run(4));
}

#[test]
fn every_kind_of_parameter_is_a_member_up_to_eight() {
    // Eight members, among them a nested set and a tuple: each kind of parameter folio has.
    fn everything(
        mut set: ParamSet<(
            Local<u64>,
            Option<Res<Score>>,
            Option<ResMut<Score>>,
            EventReader<Ping>,
            EventWriter<Ping>,
            RemovedComponents<B>,
            ParamSet<(Query<&A>, Query<&mut A>)>,
            (Res<Score>, Query<&B>, Commands),
        )>,
    ) {
        *set.p0() += 1;
        let runs = *set.p0();
        let score = set.p1().map_or(0, |s| s.0);
        if let Some(mut s) = set.p2() {
            s.0 = score + runs;
        }
        let heard = set.p3().read().count() as u64;
        set.p4().send(Ping);
        let removed = set.p5().read().count() as u64;
        let mut inner = set.p6();
        let total: u64 = inner.p0().iter().map(|a| a.0).sum();
        for mut a in inner.p1().iter_mut() {
            a.0 = total + heard * 100 + removed * 1000;
        }
        let (score, bs, mut commands) = set.p7();
        if score.0 == 3 {
            for (i, _) in bs.iter().enumerate() {
                commands.spawn((A(i as u64),));
            }
        }
    }
    let mut world = World::new();
    world.insert_resource(Score(0));
    let a = world.spawn((A(1),));
    let b = world.spawn((B(0),));
    world.spawn((B(0),));
    let mut schedule = serial();
    schedule.add_systems(everything);
    schedule.run(&mut world).unwrap(); // runs 1, score 1; no event yet heard, no spawn
    assert_eq!(world.get::<A>(a), Some(&A(1)));
    assert_eq!(world.query::<&A>().iter(&world).count(), 1);
    world.remove::<(B,)>(b).unwrap();
    // Runs 2, score 3: last run's ping heard, one B removed, and the tuple member's commands
    // spawn one A per entity left with B (one), applied at the end of the run.
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Score>(), Some(&Score(3)));
    assert_eq!(world.get::<A>(a), Some(&A(1 + 100 + 1000)));
    assert_eq!(world.query::<&A>().iter(&world).count(), 2);
    schedule.run(&mut world).unwrap(); // score 6: no spawn
    assert_eq!(world.query::<&A>().iter(&world).count(), 2);
}
