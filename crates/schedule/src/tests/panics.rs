//! Panics: a system's, a command's (at the end or at a sync point), and a `Drop` that panics in
//! the commands thrown away; the world stays consistent and the run reports the panic.

use super::*;
use crate::ScheduleError;

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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

/// Panics when dropped.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("bomb dropped");
    }
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
    // Both buffers are applied at the end of the run (a sync point between them would stop
    // `good` from running at all).
    schedule.add_systems((two, good).chain_ignore_deferred());
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
