//! Systems that return `Err`: the run completes, and the first failure in the schedule's order
//! is reported, on any number of threads.

use super::*;
use crate::{EntityError, IntoSystem, QueryError, ScheduleError, System};

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
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
