//! Component hooks under a schedule: structural changes made by commands run the hooks when
//! the buffers are applied, and the work hooks defer lands before the run returns.

use std::collections::HashSet;

use crate::prelude::*;

/// A unit that the `Units` index follows.
struct Unit(u32);
/// An entity that a unit's despawn despawns too.
struct Shadow(Entity);
/// Marks a unit's owner when the unit is added.
struct Owns;

/// The live units, kept by the hooks alone.
#[derive(Default)]
struct Units(HashSet<Entity>);

fn index_add(world: &mut DeferredWorld, e: Entity) {
    world.resource_mut::<Units>().unwrap().0.insert(e);
}

fn index_remove(world: &mut DeferredWorld, e: Entity) {
    assert!(world.get::<Unit>(e).is_some(), "on_remove sees the value");
    world.resource_mut::<Units>().unwrap().0.remove(&e);
    if let Some(&Shadow(shadow)) = world.get::<Shadow>(e) {
        world.defer(move |w: &mut World| {
            w.despawn(shadow).unwrap();
        });
    }
}

fn spawn_units(mut commands: Commands) {
    for i in 0..10 {
        let shadow = commands.spawn((Owns,));
        commands.spawn((Unit(i), Shadow(shadow)));
    }
}

fn kill_even(units: Query<(Entity, &Unit)>, mut commands: Commands) {
    for (e, u) in units.iter() {
        if u.0 % 2 == 0 {
            commands.despawn(e);
        }
    }
}

#[test]
fn commands_run_hooks_and_their_deferred_work_lands_within_the_run() {
    let mut world = World::new();
    world.insert_resource(Units::default());
    world.set_hooks::<Unit>(ComponentHooks::new().on_add(index_add).on_remove(index_remove));

    let mut spawn = Schedule::new();
    spawn.add_systems(spawn_units);
    spawn.run(&mut world).unwrap();
    let units: HashSet<Entity> =
        world.query::<(Entity, &Unit)>().iter(&world).map(|(e, _)| e).collect();
    assert_eq!(units.len(), 10);
    assert_eq!(world.resource::<Units>().unwrap().0, units, "on_add ran for each command spawn");
    assert_eq!(world.len(), 20);

    let mut kill = Schedule::new();
    kill.add_systems(kill_even);
    kill.run(&mut world).unwrap();
    let left: HashSet<Entity> =
        world.query::<(Entity, &Unit)>().iter(&world).map(|(e, _)| e).collect();
    assert_eq!(left.len(), 5);
    assert_eq!(world.resource::<Units>().unwrap().0, left, "on_remove ran for each despawn");
    // Each despawned unit's shadow went with it, through the hook's deferred despawn.
    assert_eq!(world.len(), 10);
    assert_eq!(world.query::<&Owns>().iter(&world).count(), 5);
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

/// A game event a system sends through its commands.
struct Alarm(u32);
impl Event for Alarm {}

/// The alarms observers counted, and the entities they marked.
#[derive(Default)]
struct Alarms {
    total: u32,
    marked: Vec<Entity>,
}

fn raise_alarms(units: Query<Entity, With<Unit>>, mut commands: Commands) {
    commands.trigger(Alarm(1));
    commands.trigger_targets(Alarm(10), units.iter().collect::<Vec<_>>());
}

#[test]
fn commands_trigger_observers_when_applied() {
    let mut world = World::new();
    world.insert_resource(Alarms::default());
    world.observe(|t: &mut Trigger<Alarm>, w: &mut DeferredWorld| {
        let alarms = w.resource_mut::<Alarms>().unwrap();
        alarms.total += t.event().0;
        if let Some(e) = t.target() {
            alarms.marked.push(e);
            w.insert(e, (Owns,));
        }
    });
    let a = world.spawn((Unit(1),));
    let b = world.spawn((Unit(2),));
    let mut schedule = Schedule::new();
    schedule.add_systems(raise_alarms);
    schedule.run(&mut world).unwrap();
    let alarms = world.resource::<Alarms>().unwrap();
    assert_eq!(alarms.total, 21);
    assert_eq!(alarms.marked.iter().copied().collect::<HashSet<_>>(), HashSet::from([a, b]));
    assert!(world.has::<Owns>(a) && world.has::<Owns>(b));
}
