//! Change ticks: what `Added`/`Changed` in the query layer are built on.

use folio_storage::Entity;

use super::*;
use crate::component::{Component, StorageType};
use crate::resource::ResourceTicks;
use crate::{MAX_CHANGE_AGE, is_newer};

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pos(f32);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Flag(u32);

fn world() -> World {
    let mut world = World::new();
    world.register_component::<Flag>(StorageType::SparseSet).unwrap();
    world
}

/// `(added, changed)` of `entity`'s `T`, wherever it is stored.
fn ticks<T: Component>(world: &World, entity: Entity) -> (u32, u32) {
    let c = world.components().id::<T>().unwrap();
    let loc = world.entities().location(entity).unwrap();
    match world.components().info(c).storage_type() {
        StorageType::Table => {
            let table = world.table_id_of(entity).unwrap().index();
            let column = world.tables()[table].column(c).unwrap();
            let row = loc.table_row as usize;
            (column.added_ticks()[row], column.changed_ticks()[row])
        }
        StorageType::SparseSet => {
            let set = world.sparse_set(c).unwrap();
            let dense = set.dense_index(entity).unwrap();
            (set.added_ticks()[dense], set.changed_ticks()[dense])
        }
    }
}

#[test]
fn increment_hands_out_the_current_tick_and_advances() {
    let world = World::new();
    let t = world.change_tick();
    assert_eq!(world.increment_change_tick(), t);
    assert_eq!(world.change_tick(), t + 1);
}

#[test]
fn spawn_insert_and_get_mut_stamp_ticks_in_tables_and_sparse_sets() {
    let mut world = world();
    let t0 = world.change_tick();
    let e = world.spawn((Pos(0.0), Flag(0)));
    assert_eq!(ticks::<Pos>(&world, e), (t0, t0));
    assert_eq!(ticks::<Flag>(&world, e), (t0, t0));

    world.increment_change_tick();
    let t1 = world.change_tick();
    world.get_mut::<Pos>(e).unwrap().0 = 1.0;
    world.get_mut::<Flag>(e).unwrap().0 = 1;
    assert_eq!(ticks::<Pos>(&world, e), (t0, t1));
    assert_eq!(ticks::<Flag>(&world, e), (t0, t1));

    // Re-inserting a component the entity has replaces it: changed, not added.
    world.increment_change_tick();
    let t2 = world.change_tick();
    world.insert(e, (Pos(2.0), Flag(2))).unwrap();
    assert_eq!(ticks::<Pos>(&world, e), (t0, t2));
    assert_eq!(ticks::<Flag>(&world, e), (t0, t2));

    // Removing and adding again is a new value: added anew.
    world.remove::<(Flag,)>(e).unwrap();
    world.increment_change_tick();
    let t3 = world.change_tick();
    world.insert(e, (Flag(3),)).unwrap();
    assert_eq!(ticks::<Flag>(&world, e), (t3, t3));
    world.check_invariants();
}

#[test]
fn sparse_ticks_follow_their_values_through_swap_removes() {
    let mut world = world();
    let entities: Vec<Entity> = (0..5)
        .map(|i| {
            world.increment_change_tick();
            world.spawn((Flag(i),))
        })
        .collect();
    let stamped: Vec<_> = entities.iter().map(|&e| ticks::<Flag>(&world, e)).collect();
    world.despawn(entities[1]).unwrap();
    world.remove::<(Flag,)>(entities[3]).unwrap();
    for i in [0, 2, 4] {
        assert_eq!(ticks::<Flag>(&world, entities[i]), stamped[i]);
        assert_eq!(world.get::<Flag>(entities[i]), Some(&Flag(i as u32)));
    }
    world.check_invariants();
}

#[test]
fn newer_than_holds_across_the_wrap() {
    assert!(is_newer(5, 4, 6));
    assert!(!is_newer(4, 4, 6));
    assert!(!is_newer(3, 4, 6));
    // `this_run` has wrapped past zero; `last_run` and `tick` are just before it.
    let last = u32::MAX - 10;
    assert!(is_newer(u32::MAX - 2, last, 3));
    assert!(is_newer(1, last, 3));
    assert!(!is_newer(u32::MAX - 20, last, 3));
}

#[test]
fn check_change_ticks_clamps_old_ticks() {
    let mut world = world();
    let e = world.spawn((Pos(0.0), Flag(0)));
    let born = world.change_tick();
    // Age the world by more than MAX_CHANGE_AGE without touching `e`.
    world.change_tick.store(born.wrapping_add(MAX_CHANGE_AGE).wrapping_add(100), Ordering::Relaxed);
    world.check_change_ticks();
    let now = world.change_tick();
    let floor = now.wrapping_sub(MAX_CHANGE_AGE);
    assert_eq!(ticks::<Pos>(&world, e), (floor, floor));
    assert_eq!(ticks::<Flag>(&world, e), (floor, floor));
    // A query that last ran at the floor sees no change; one made just now does not either.
    assert!(!is_newer(floor, floor, now));
    let fresh = world.spawn((Pos(1.0),));
    assert_eq!(ticks::<Pos>(&world, fresh), (now, now));
}

#[test]
fn check_change_ticks_clamps_resource_ticks() {
    let mut world = world();
    world.insert_resource(String::from("old"));
    let born = world.change_tick();
    world.change_tick.store(born.wrapping_add(MAX_CHANGE_AGE).wrapping_add(100), Ordering::Relaxed);
    world.check_change_ticks();
    let floor = world.change_tick().wrapping_sub(MAX_CHANGE_AGE);
    assert_eq!(
        world.resource_ticks::<String>(),
        Some(ResourceTicks { added: floor, changed: floor })
    );
    assert_eq!(world.resource::<String>().map(String::as_str), Some("old"));
}
