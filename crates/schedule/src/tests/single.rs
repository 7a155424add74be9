//! `Single` and `Option<Single>`: the one matching entity's item; a system whose `Single`
//! matches no entity or several is skipped for the run, without an error; access checked as a
//! `Query`'s. Also: conflict messages that name both parameters.

use super::*;
use crate::{IntoSystem, ScheduleError, System};

#[derive(Debug, PartialEq)]
struct Player;
#[derive(Debug, PartialEq)]
struct Health(u32);
#[derive(Default)]
struct Runs(u32);
#[derive(Default)]
struct Seen(Vec<Option<u32>>);
struct Spawned;

fn heal(
    mut player: Single<&mut Health, With<Player>>,
    mut runs: ResMut<Runs>,
    mut commands: Commands,
) {
    player.0 += 1;
    runs.0 += 1;
    commands.spawn((Spawned,));
}

fn spawned(world: &mut World) -> usize {
    world.query::<&Spawned>().iter(world).count()
}

#[test]
fn single_runs_on_one_match_and_is_skipped_on_zero_or_several() {
    let mut world = World::new();
    world.insert_resource(Runs::default());
    let mut schedule = Schedule::new();
    schedule.add_systems(heal);

    // None: skipped, no effect, no error.
    assert_eq!(schedule.run(&mut world), Ok(()));
    assert_eq!(world.resource::<Runs>().unwrap().0, 0);
    assert_eq!(spawned(&mut world), 0);

    // One: runs, and a filtered-out entity does not count.
    let p = world.spawn((Player, Health(1)));
    let npc = world.spawn((Health(10),));
    assert_eq!(schedule.run(&mut world), Ok(()));
    assert_eq!(world.get::<Health>(p), Some(&Health(2)));
    assert_eq!(world.get::<Health>(npc), Some(&Health(10)));
    assert_eq!(world.resource::<Runs>().unwrap().0, 1);
    assert_eq!(spawned(&mut world), 1);

    // Two: skipped, neither touched, no commands.
    let q = world.spawn((Player, Health(5)));
    assert_eq!(schedule.run(&mut world), Ok(()));
    assert_eq!(world.get::<Health>(p), Some(&Health(2)));
    assert_eq!(world.get::<Health>(q), Some(&Health(5)));
    assert_eq!(world.resource::<Runs>().unwrap().0, 1);
    assert_eq!(spawned(&mut world), 1);

    // One again: runs again.
    world.despawn(q).unwrap();
    assert_eq!(schedule.run(&mut world), Ok(()));
    assert_eq!(world.get::<Health>(p), Some(&Health(3)));
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_skipped_single_does_not_stop_the_other_systems_on_a_pool() {
    fn count(query: Query<&Health>, mut seen: ResMut<Seen>) {
        seen.0.push(Some(query.iter().count() as u32));
    }
    fn fallible(_: Single<&Player>) -> Result<(), String> {
        Err("ran".to_owned())
    }
    let mut world = World::new();
    world.insert_resource(Runs::default());
    world.insert_resource(Seen::default());
    world.spawn((Health(1),));
    let mut schedule = Schedule::new();
    schedule.add_systems((heal, count, fallible));
    // No player: `heal` and the fallible system are skipped (no `SystemFailed`).
    pool(4).install(|| assert_eq!(schedule.run(&mut world), Ok(())));
    assert_eq!(world.resource::<Seen>().unwrap().0, [Some(1)]);
    assert_eq!(world.resource::<Runs>().unwrap().0, 0);
    world.spawn((Player, Health(1)));
    let err = pool(4).install(|| schedule.run(&mut world)).unwrap_err();
    assert!(matches!(err, ScheduleError::SystemFailed { .. }), "{err}");
    assert_eq!(world.resource::<Runs>().unwrap().0, 1);
}

#[test]
fn option_single_is_none_on_zero_and_skipped_on_several() {
    fn look(player: Option<Single<&Health, With<Player>>>, mut seen: ResMut<Seen>) {
        seen.0.push(player.map(|h| h.0));
    }
    let mut world = World::new();
    world.insert_resource(Seen::default());
    let mut schedule = Schedule::new();
    schedule.add_systems(look);
    schedule.run(&mut world).unwrap();
    world.spawn((Player, Health(7)));
    schedule.run(&mut world).unwrap();
    world.spawn((Player, Health(8)));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Seen>().unwrap().0, [None, Some(7)]);
}

#[test]
fn single_with_a_change_filter_sees_changes_since_its_last_real_run() {
    fn changed(player: Single<(Entity, &Health), Changed<Health>>, mut seen: ResMut<Seen>) {
        seen.0.push(Some(player.1.0));
    }
    let mut world = World::new();
    world.insert_resource(Seen::default());
    let p = world.spawn((Player, Health(1)));
    let mut schedule = Schedule::new();
    schedule.add_systems(changed);
    schedule.run(&mut world).unwrap(); // added: changed
    schedule.run(&mut world).unwrap(); // nothing changed: skipped
    world.get_mut::<Health>(p).unwrap().0 = 4;
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Seen>().unwrap().0, [Some(1), Some(4)]);
}

#[test]
fn single_run_on_its_own_reports_invalid_param() {
    let mut world = World::new();
    world.insert_resource(Runs::default());
    let mut system = IntoSystem::into_system(heal);
    let err = system.run(&mut world).unwrap_err();
    let text = err.to_string();
    assert!(matches!(&err, ScheduleError::InvalidParam { .. }), "{text}");
    assert!(text.contains("`Single<&mut Health, With<Player>>` matched no entity"), "{text}");
    world.spawn((Player, Health(1)));
    assert_eq!(system.run(&mut world), Ok(()));
    assert_eq!(spawned(&mut world), 1);
}

#[test]
fn single_access_is_checked_like_a_query() {
    fn bad(_: Single<&mut Health>, _: Query<&Health>) {}
    let err = Schedule::new().try_add_systems(bad).err().unwrap();
    let text = err.to_string();
    assert!(matches!(&err, ScheduleError::ConflictingParams { .. }), "{text}");
    assert!(
        text.contains("`Single<&mut Health>` and `Query<&Health>` conflict on `Health`"),
        "{text}"
    );
    fn fine(_: Single<&mut Health, With<Player>>, _: Query<&Health, Without<Player>>) {}
    assert!(Schedule::new().try_add_systems(fine).is_ok());
    // Two systems writing through a `Single` are ordered like two query writers.
    let a = IntoSystem::into_system(heal);
    let b = IntoSystem::into_system(|_: Single<&Health>| {});
    assert!(a.access().conflicts_with(b.access()));
}

#[test]
fn conflicting_params_name_both_and_what_they_share() {
    struct Score;
    let message = |err: ScheduleError| {
        assert!(matches!(&err, ScheduleError::ConflictingParams { .. }), "{err}");
        err.to_string()
    };
    let add = |s: crate::BoxedSystem| s.validate().unwrap_err();

    fn res_then_mut(_: Res<Score>, _: ResMut<Score>) {}
    let text = message(add(Box::new(IntoSystem::into_system(res_then_mut))));
    assert!(text.contains("`Res<Score>` and `ResMut<Score>` conflict on `Score`"), "{text}");

    fn mut_then_res(_: ResMut<Score>, _: Option<Res<Score>>) {}
    let text = message(add(Box::new(IntoSystem::into_system(mut_then_res))));
    assert!(
        text.contains("`ResMut<Score>` and `Option<Res<Score>>` conflict on `Score`"),
        "{text}"
    );

    fn world_then_writer(_: &World, _: ResMut<Score>) {}
    let text = message(add(Box::new(IntoSystem::into_system(world_then_writer))));
    assert!(text.contains("`&World` and `ResMut<Score>` conflict on `the world`"), "{text}");

    fn writer_then_world(_: Query<&mut Health>, _: Local<u8>, _: &World) {}
    let text = message(add(Box::new(IntoSystem::into_system(writer_then_world))));
    assert!(text.contains("`Query<&mut Health>` and `&World` conflict on `the world`"), "{text}");

    fn set_then_res(_: ParamSet<(Query<&Health>, ResMut<Score>)>, _: Res<Score>) {}
    let text = message(add(Box::new(IntoSystem::into_system(set_then_res))));
    assert!(
        text.contains(
            "`ParamSet<(Query<&Health>, ResMut<Score>)>` and `Res<Score>` conflict on `Score`"
        ),
        "{text}"
    );

    fn query_then_set(_: Query<&Health>, _: Res<Score>, _: ParamSet<(ResMut<Score>,)>) {}
    let text = message(add(Box::new(IntoSystem::into_system(query_then_set))));
    assert!(text.contains("`Res<Score>` and `ParamSet<(ResMut<Score>,)>`"), "{text}");
}
