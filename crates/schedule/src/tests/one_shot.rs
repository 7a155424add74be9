//! One-shot systems: `run_system_once` runs any system once (output returned, commands
//! applied, failures typed); registered systems keep their state between runs, by id.

use super::*;
use crate::ScheduleError;

#[derive(Debug, Default, PartialEq)]
struct Score(u32);
struct Spawned;

fn spawned(world: &mut World) -> usize {
    world.query::<&Spawned>().iter(world).count()
}

#[test]
fn run_system_once_returns_the_output_and_applies_commands() {
    let mut world = World::new();
    world.insert_resource(Score(1));
    let out = world.run_system_once(|mut score: ResMut<Score>, mut commands: Commands| {
        score.0 += 1;
        commands.spawn((Spawned,));
        score.0 * 10
    });
    assert_eq!(out, Ok(20));
    assert_eq!(spawned(&mut world), 1);
    fn fails(score: Res<Score>) -> Result<u32, String> {
        Err(format!("score {}", score.0))
    }
    assert_eq!(world.run_system_once(fails), Ok(Err("score 2".to_owned())));
    // An exclusive system too.
    assert_eq!(
        world.run_system_once(|world: &mut World| world.resource::<Score>().unwrap().0),
        Ok(2)
    );
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn run_system_once_returns_typed_errors() {
    let mut world = World::new();
    fn conflict(_: Res<Score>, _: ResMut<Score>) {}
    let err = world.run_system_once(conflict).unwrap_err();
    assert!(matches!(&err, ScheduleError::ConflictingParams { .. }), "{err}");
    assert!(err.to_string().contains("`Res<Score>` and `ResMut<Score>`"), "{err}");

    // A missing resource panics in the system: caught.
    let err = world.run_system_once(|_: Res<Score>| {}).unwrap_err();
    assert!(matches!(&err, ScheduleError::SystemPanicked { .. }), "{err}");
    assert!(err.to_string().contains("Score"), "{err}");

    // A panic: caught, its commands thrown away.
    let err = world
        .run_system_once(|mut commands: Commands| {
            commands.spawn((Spawned,));
            panic!("boom");
        })
        .unwrap_err();
    assert!(err.to_string().contains("panicked: boom"), "{err}");
    assert_eq!(spawned(&mut world), 0);

    // A `Single` without its match: it does not run.
    let err = world.run_system_once(|_: Single<&Spawned>| {}).unwrap_err();
    assert!(matches!(&err, ScheduleError::InvalidParam { .. }), "{err}");
}

#[test]
fn registered_systems_keep_locals_and_change_ticks() {
    let mut world = World::new();
    let e = world.spawn((Score(0),));
    let counter = world.register_system(|mut runs: Local<u32>| {
        *runs += 1;
        *runs
    });
    let changes =
        world.register_system(|changed: Query<&Score, Changed<Score>>| changed.iter().count());
    assert_eq!(world.run_system(counter), Ok(1));
    assert_eq!(world.run_system(counter), Ok(2));
    assert_eq!(world.run_system(changes), Ok(1));
    assert_eq!(world.run_system(changes), Ok(0));
    world.get_mut::<Score>(e).unwrap().0 = 3;
    assert_eq!(world.run_system(changes), Ok(1));
    assert_eq!(world.run_system(counter), Ok(3));
    assert_ne!(counter, world.register_system(|| 0u32));
}

#[test]
fn unregistered_and_foreign_ids_are_unknown() {
    let mut world = World::new();
    let id = world.register_system(|| 7);
    assert_eq!(world.run_system(id), Ok(7));
    world.unregister_system(id).unwrap();
    let unknown =
        |r: Result<_, ScheduleError>| matches!(r, Err(ScheduleError::UnknownSystem { .. }));
    assert!(unknown(world.run_system(id)));
    assert!(unknown(world.unregister_system(id).map(|()| 0)));
    // The slot is reused under a new generation: the stale id still names nothing.
    let again = world.register_system(|| 8);
    assert_ne!(id, again);
    assert!(unknown(world.run_system(id)));
    assert_eq!(world.run_system(again), Ok(8));
    let err = world.run_system(id).unwrap_err();
    assert!(err.to_string().contains("no registered system has id"), "{err}");
    // Another world's id names nothing here.
    let mut other = World::new();
    assert!(unknown(other.run_system(again)));
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_registered_system_that_panics_is_kept_and_reports_it() {
    let mut world = World::new();
    let id = world.register_system(|mut runs: Local<u32>| {
        *runs += 1;
        assert!(*runs != 2, "second run");
        *runs
    });
    assert_eq!(world.run_system(id), Ok(1));
    let err = world.run_system(id).unwrap_err();
    assert!(matches!(&err, ScheduleError::SystemPanicked { .. }), "{err}");
    assert_eq!(world.run_system(id), Ok(3));
}

#[test]
fn a_registered_system_cannot_run_itself() {
    struct Me(SystemId<Result<(), ScheduleError>>);
    let mut world = World::new();
    let id = world.register_system(|world: &mut World| {
        let me = world.resource::<Me>().unwrap().0;
        world.run_system(me).map(|_| ())
    });
    world.insert_resource(Me(id));
    let inner = world.run_system(id).unwrap().unwrap_err();
    assert!(matches!(inner, ScheduleError::SystemAlreadyRunning { .. }), "{inner}");
    // Still registered afterwards.
    assert!(world.run_system(id).is_ok());
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn commands_run_registered_systems() {
    #[derive(Default)]
    struct Ids(Vec<SystemId>);
    let mut world = World::new();
    world.insert_resource(Score(0));
    let add = world.register_system(|mut score: ResMut<Score>, mut commands: Commands| {
        score.0 += 1;
        commands.spawn((Spawned,));
    });
    world.insert_resource(Ids(vec![add, add]));
    fn trigger(ids: Res<Ids>, mut commands: Commands) {
        for &id in &ids.0 {
            commands.run_system(id);
        }
    }
    let mut schedule = Schedule::new();
    schedule.add_systems(trigger);
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Score>(), Some(&Score(2)));
    assert_eq!(spawned(&mut world), 2);

    // An unknown id: the command's panic is the run's error.
    world.unregister_system(add).unwrap();
    let err = schedule.run(&mut world).unwrap_err();
    assert!(err.to_string().contains("no registered system has id"), "{err}");
}
