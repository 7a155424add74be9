//! Order: explicit constraints, sets and chains over the order systems were added, conflicts
//! that order a pair and disjoint access that lets it overlap, parameters that conflict, labels
//! that name nothing, cycles, exclusive systems, and run conditions.

use super::*;
use crate::{ScheduleError, SystemAccess};

/// The sets of the tests below.
#[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
enum Set {
    Early,
    Late,
    Physics,
    /// In no system: a label that names nothing.
    Render,
    Ghost,
    Nowhere,
    Alone,
    A,
    C,
    S,
    Gated,
}
impl SystemSet for Set {}

#[test]
#[cfg_attr(miri, ignore = "timing: miri's thread scheduler need not overlap the sleeps")]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
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
    sets.add_systems((third.in_set(Set::Late), first.in_set(Set::Early), second));
    sets.configure_set(Set::Late, SetConfig::new().after(Set::Early).after(second));
    world.resource_mut::<Log>().unwrap().0.clear();
    sets.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["first", "second", "third"]);
}

#[test]
fn a_label_that_names_nothing_is_an_error() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut typo = Schedule::new();
    typo.add_systems((first.in_set(Set::Physics), second.after(Set::Render)));
    let err = typo.run(&mut world).unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownLabel(_)) && err.to_string().contains("Render"));
    let mut missing = Schedule::new();
    missing.add_systems(second.after(third));
    assert!(missing.run(&mut world).unwrap_err().to_string().contains("third"));
    let mut ghost = Schedule::new();
    ghost.add_systems(first);
    ghost.configure_set(Set::Ghost, SetConfig::new().after(Set::Nowhere));
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
fn self_ordering_is_a_cycle() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    let cycle_of = |mut schedule: Schedule, world: &mut World| {
        let err = schedule.run(world).unwrap_err();
        let ScheduleError::Cycle(names) = &err else { panic!("{err}") };
        assert!(names.iter().any(|n| n.contains("first")), "{err}");
    };
    // A system ordered after itself.
    let mut schedule = Schedule::new();
    schedule.add_systems(first.after(first));
    cycle_of(schedule, &mut world);
    // A one-member set ordered after itself.
    let mut schedule = Schedule::new();
    schedule.add_systems(first.in_set(Set::Alone));
    schedule.configure_set(Set::Alone, SetConfig::new().after(Set::Alone));
    cycle_of(schedule, &mut world);
    // A system in two sets, one ordered before the other.
    let mut schedule = Schedule::new();
    schedule.add_systems((first.in_set(Set::A).in_set(Set::C), second.in_set(Set::C)));
    schedule.configure_set(Set::A, SetConfig::new().before(Set::C));
    cycle_of(schedule, &mut world);
    // A system ordered before a set it is in.
    let mut schedule = Schedule::new();
    schedule.add_systems((first.in_set(Set::S).before(Set::S), second.in_set(Set::S)));
    cycle_of(schedule, &mut world);
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
    schedule.add_systems((first.run_if(enabled), second.in_set(Set::Gated), third));
    schedule.configure_set(Set::Gated, SetConfig::new().run_if(|e: Res<Enabled>| e.0));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["third"]);
    world.resource_mut::<Enabled>().unwrap().0 = true;
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["third", "first", "second", "third"]);
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
    schedule.configure_set(Set::S, SetConfig::new().run_if(writes));
    schedule.add_systems(first.in_set(Set::S));
    let mut world = World::new();
    world.insert_resource(Log::default());
    world.insert_resource(0u32);
    assert!(matches!(schedule.run(&mut world), Err(ScheduleError::ConditionNotReadOnly { .. })));
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_set_condition_is_an_error_not_an_unwind() {
    let mut schedule = Schedule::new();
    schedule.add_systems(first.in_set(Set::S));
    schedule.configure_set(Set::S, SetConfig::new().run_if(|| -> bool { panic!("no") }));
    let mut world = World::new();
    world.insert_resource(Log::default());
    let err = schedule.run(&mut world).unwrap_err();
    assert!(matches!(err, ScheduleError::SystemPanicked { .. }), "{err}");
    assert!(world.resource::<Log>().unwrap().0.is_empty());
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
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
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
