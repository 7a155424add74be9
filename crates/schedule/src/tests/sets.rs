//! Typed system sets: exact identity (type and value), nesting that carries ordering and run
//! conditions down to the systems of nested sets (transitively), nesting cycles, the fixed
//! order set conditions run in, and a schedule of nested sets giving the same world on any
//! number of threads.

use std::sync::Mutex;

use super::*;
use crate::{ErasedSet, ScheduleError};

#[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
enum Nest {
    Outer,
    Middle,
    Inner,
    /// Configured as a parent, with nothing nested in it that has systems.
    Empty,
    EmptyChild,
}
impl SystemSet for Nest {}

/// A second set type whose values hash like `Nest`'s first variants.
#[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
enum Other {
    Outer,
}
impl SystemSet for Other {}

#[test]
fn sets_are_equal_only_by_type_and_value() {
    assert_eq!(ErasedSet::new(Nest::Outer), ErasedSet::new(Nest::Outer));
    assert_ne!(ErasedSet::new(Nest::Outer), ErasedSet::new(Nest::Middle));
    // Same discriminant, same hash input: still a different set.
    assert_ne!(ErasedSet::new(Nest::Outer), ErasedSet::new(Other::Outer));
    assert_eq!(format!("{:?}", ErasedSet::new(Other::Outer)), "Outer");
    assert_eq!(ErasedSet::new(Other::Outer).downcast_ref::<Other>(), Some(&Other::Outer));
    assert_eq!(ErasedSet::new(Other::Outer).downcast_ref::<Nest>(), None);

    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((first.in_set(Nest::Outer), second.after(Other::Outer)));
    let err = schedule.run(&mut world).unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownLabel(_)), "{err}");
    assert!(world.resource::<Log>().unwrap().0.is_empty());
}

#[test]
fn nested_sets_inherit_ordering_transitively() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut schedule = Schedule::new();
    // `first` is in Inner, so in Middle and Outer: after `second` (Outer's constraint) and after
    // `third` (which is ordered before Outer).
    schedule
        .add_systems((first.in_set(Nest::Inner), second, third.before(Nest::Outer)))
        .configure_set(Nest::Outer, SetConfig::new().after(second))
        .configure_set(Nest::Inner, SetConfig::new().in_set(Nest::Middle))
        .configure_set(Nest::Middle, SetConfig::new().in_set(Nest::Outer));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["second", "third", "first"]);

    // A set ordered after its own parent orders its systems after themselves.
    let mut schedule = Schedule::new();
    schedule
        .add_systems(first.in_set(Nest::Inner))
        .configure_set(Nest::Inner, SetConfig::new().in_set(Nest::Outer).after(Nest::Outer));
    let err = schedule.run(&mut world).unwrap_err();
    assert!(matches!(err, ScheduleError::Cycle(_)), "{err}");

    // A parent with no system of its own is known through its children; one whose children
    // have none is not.
    let mut schedule = Schedule::new();
    schedule
        .add_systems(first.in_set(Nest::Inner))
        .configure_set(Nest::Inner, SetConfig::new().in_set(Nest::Outer))
        .configure_set(Nest::Outer, SetConfig::new())
        .configure_set(Nest::EmptyChild, SetConfig::new().in_set(Nest::Empty))
        .configure_set(Nest::Empty, SetConfig::new());
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::UnknownLabel(what) = &err else { panic!("{err}") };
    assert!(what.contains("EmptyChild"), "{err}");
}

#[test]
fn nested_sets_inherit_run_conditions_transitively() {
    struct Enabled(bool);
    let mut world = World::new();
    world.insert_resource(Log::default());
    world.insert_resource(Enabled(false));
    let inner_looks = Arc::new(AtomicUsize::new(0));
    let looks = inner_looks.clone();
    let mut schedule = Schedule::new();
    schedule
        .add_systems((first.in_set(Nest::Inner), second.in_set(Nest::Middle), third))
        .configure_set(Nest::Outer, SetConfig::new().run_if(|e: Res<Enabled>| e.0))
        .configure_set(Nest::Middle, SetConfig::new().in_set(Nest::Outer))
        .configure_set(
            Nest::Inner,
            SetConfig::new().in_set(Nest::Middle).run_if(move || {
                looks.fetch_add(1, Ordering::Relaxed);
                true
            }),
        );
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["third"]);
    // Inner's own condition looked while its grandparent said no.
    assert_eq!(inner_looks.load(Ordering::Relaxed), 1);
    world.resource_mut::<Enabled>().unwrap().0 = true;
    world.resource_mut::<Log>().unwrap().0.clear();
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Log>().unwrap().0, ["first", "second", "third"]);
    assert_eq!(inner_looks.load(Ordering::Relaxed), 2);
}

#[test]
fn a_nesting_cycle_is_an_error_naming_the_sets() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    // A set in itself.
    let mut schedule = Schedule::new();
    schedule
        .add_systems(first.in_set(Nest::Outer))
        .configure_set(Nest::Outer, SetConfig::new().in_set(Nest::Outer));
    let err = schedule.run(&mut world).unwrap_err();
    assert_eq!(err, ScheduleError::SetCycle(vec!["Outer".into(), "Outer".into()]));
    // Three sets around, one of them of another type.
    let mut schedule = Schedule::new();
    schedule
        .add_systems((first.in_set(Nest::Inner), second))
        .configure_set(Nest::Inner, SetConfig::new().in_set(Nest::Middle))
        .configure_set(Nest::Middle, SetConfig::new().in_set(Other::Outer))
        .configure_set(Other::Outer, SetConfig::new().in_set(Nest::Inner));
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::SetCycle(sets) = &err else { panic!("{err}") };
    assert_eq!(sets.len(), 4, "{err}");
    for set in ["Inner", "Middle", "Outer"] {
        assert!(sets.iter().any(|s| s == set), "{err}");
    }
    assert!(err.to_string().contains("nested in a cycle"), "{err}");
    assert!(schedule.order(&mut world).is_err());
    assert!(world.resource::<Log>().unwrap().0.is_empty(), "nothing ran");
}

#[test]
fn set_conditions_run_in_the_order_the_sets_were_first_configured() {
    #[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
    struct Named(&'static str);
    impl SystemSet for Named {}
    let seen = Arc::new(Mutex::new(Vec::new()));
    let looking = |name: &'static str| {
        let seen = seen.clone();
        move || {
            seen.lock().unwrap().push(name);
            true
        }
    };
    let mut schedule = Schedule::new();
    let names = ["zeta", "alpha", "mu", "beta", "omega", "kappa"];
    for name in names {
        schedule.configure_set(Named(name), SetConfig::new().run_if(looking(name)));
    }
    // A set of another type, and a parent configured after its child.
    schedule
        .configure_set(Nest::Inner, SetConfig::new().in_set(Nest::Outer).run_if(looking("inner")))
        .configure_set(Nest::Outer, SetConfig::new().run_if(looking("outer")))
        // Configuring a set again replaces its configuration and keeps its place.
        .configure_set(Named("alpha"), SetConfig::new().run_if(looking("alpha again")));
    let mut systems = Vec::new();
    for name in names {
        systems.push(first.in_set(Named(name)));
    }
    for system in systems {
        schedule.add_systems(system);
    }
    schedule.add_systems(second.in_set(Nest::Inner));
    let mut world = World::new();
    world.insert_resource(Log::default());
    let expected =
        ["zeta", "alpha again", "mu", "beta", "omega", "kappa", "inner", "outer"].as_slice();
    for run in 1..=3 {
        schedule.run(&mut world).unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), expected.len() * run);
        assert_eq!(&seen[seen.len() - expected.len()..], expected, "run {run}");
    }
}

/// The world after a few runs of a schedule whose order and gating come from nested sets, in a
/// canonical form.
fn run_nested_sets(threads: usize, min_parallel_work: Duration) -> Vec<(u64, u64, u64)> {
    #[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
    enum Frame {
        Simulation,
        Movement,
        Growth,
        Cleanup,
    }
    impl SystemSet for Frame {}
    struct Tick(u64);
    fn total(mut total: ResMut<u64>, q: Query<&A>) {
        *total = total.rotate_left(5) ^ q.iter().fold(0, |s, a| s ^ a.0);
    }
    fn grow(mut q: Query<(&mut C, &A)>) {
        q.par_iter_mut().for_each(|(mut c, a)| c.0 = c.0.wrapping_mul(3) ^ a.0);
    }
    fn step(mut q: Query<(&mut A, &B)>) {
        q.par_iter_mut().for_each(|(mut a, b)| a.0 = a.0.wrapping_mul(31) ^ b.0);
    }
    fn wrap(mut q: Query<&mut B>) {
        for mut b in q.iter_mut() {
            b.0 = b.0.wrapping_add(1) % 17;
        }
    }
    fn count(mut tick: ResMut<Tick>) {
        tick.0 += 1;
    }
    let mut world = World::new();
    for i in 0..if cfg!(miri) { 16 } else { 1_000u64 } {
        let e = world.spawn((A(i), B(i * 7 % 13)));
        if i % 3 == 0 {
            world.insert(e, (C(i),)).unwrap();
        }
    }
    world.insert_resource(Tick(0));
    world.insert_resource(0u64);
    let mut schedule = Schedule::new();
    schedule.set_min_parallel_work(min_parallel_work);
    schedule
        .configure_set(Frame::Simulation, SetConfig::new().run_if(|t: Res<Tick>| t.0 % 3 != 2))
        .configure_set(Frame::Movement, SetConfig::new().in_set(Frame::Simulation))
        .configure_set(
            Frame::Growth,
            SetConfig::new()
                .in_set(Frame::Simulation)
                .after(Frame::Movement)
                .run_if(|t: Res<Tick>| t.0.is_multiple_of(2)),
        )
        .configure_set(Frame::Cleanup, SetConfig::new().after(Frame::Simulation))
        .add_systems((
            total.in_set(Frame::Cleanup),
            grow.in_set(Frame::Growth),
            step.in_set(Frame::Movement),
            wrap.in_set(Frame::Movement),
            count,
        ));
    pool(threads).install(|| {
        for _ in 0..if cfg!(miri) { 3 } else { 7 } {
            schedule.run(&mut world).unwrap();
        }
    });
    let mut out: Vec<(u64, u64, u64)> = world
        .query::<(&A, &B, Option<&C>)>()
        .iter(&world)
        .map(|(a, b, c)| (a.0, b.0, c.map_or(u64::MAX, |c| c.0)))
        .collect();
    out.sort_unstable();
    out.push((*world.resource::<u64>().unwrap(), world.resource::<Tick>().unwrap().0, 0));
    out
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_schedule_of_nested_sets_gives_the_same_world_on_1_and_4_threads() {
    let one = run_nested_sets(1, Duration::ZERO);
    for work in [Duration::ZERO, crate::MIN_PARALLEL_WORK, Duration::MAX] {
        assert_eq!(run_nested_sets(4, work), one, "4 threads, min parallel work {work:?}");
    }
}
