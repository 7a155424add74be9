//! The hierarchy under a schedule: commands that spawn, re-parent and despawn keep both sides
//! of `ChildOf` / `Children` exact, the first of them registering it.

use crate::prelude::*;

#[derive(Default)]
struct Made(Vec<Entity>);

#[test]
fn a_spawn_command_is_the_hierarchys_first_use() {
    let mut world = World::new();
    let root = world.spawn(());
    world.insert_resource(Made::default());
    world
        .run_system_once(move |mut commands: Commands, mut made: ResMut<Made>| {
            let a = commands.spawn((ChildOf(root),));
            let b = commands.spawn((ChildOf(root),));
            made.0.extend([a, b]);
        })
        .unwrap();
    let made = world.resource::<Made>().unwrap().0.clone();
    assert!(world.is_relationship_registered::<ChildOf>());
    assert_eq!(world.children(root), made.as_slice());
    world.check_invariants();
}

#[test]
fn commands_batch_reparent_and_despawn() {
    let mut world = World::new();
    let (p, q) = (world.spawn(()), world.spawn(()));
    world
        .run_system_once(move |mut commands: Commands| {
            commands.spawn_batch((0..5).map(move |_| (ChildOf(p),)));
        })
        .unwrap();
    let kids = world.children(p).to_vec();
    assert_eq!(kids.len(), 5);
    world.check_invariants();
    let (moved, gone, detached) = (kids[0], kids[1], kids[2]);
    world
        .run_system_once(move |mut commands: Commands| {
            commands.entity(moved).insert((ChildOf(q),));
            commands.entity(gone).despawn();
            commands.remove::<(ChildOf,)>(detached);
        })
        .unwrap();
    assert_eq!(world.children(q), [moved]);
    assert_eq!(world.children(p).len(), 2);
    assert!(world.contains(detached) && world.parent(detached).is_none());
    world.check_invariants();
    // Despawning the parent from a system takes its remaining children.
    world.run_system_once(move |mut commands: Commands| commands.despawn(p)).unwrap();
    assert_eq!(world.len(), 3, "q, its child, and the detached one");
    world.check_invariants();
}
