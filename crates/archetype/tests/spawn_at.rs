//! `World::spawn_at` / `try_spawn_at`: spawning at a given id keeps allocation deterministic,
//! and an id that is not free is a typed error that changes nothing.

use folio_archetype::{Entity, EntityError, EntityIdError, StorageType, World};

fn id(index: u32, generation: u32) -> Entity {
    Entity::from_bits(u64::from(generation) << 32 | u64::from(index)).unwrap()
}

#[derive(Debug, PartialEq)]
struct Pos(i32);
#[derive(Debug, PartialEq)]
struct Marker(u8);

#[test]
fn spawn_at_a_never_used_index_frees_the_gap_in_index_order() {
    let mut world = World::new();
    world.spawn_at(id(3, 5), (Pos(3),));
    assert_eq!(world.get::<Pos>(id(3, 5)), Some(&Pos(3)));
    let next: Vec<Entity> = (0..4).map(|_| world.spawn((Pos(0),))).collect();
    assert_eq!(next, [id(0, 1), id(1, 1), id(2, 1), id(4, 1)]);
    world.check_invariants();
}

#[test]
fn spawn_at_a_free_slot_keeps_the_other_free_slots_in_order() {
    let mut world = World::new();
    let made: Vec<Entity> = (0..5).map(|i| world.spawn((Pos(i),))).collect();
    for &e in &made[..4] {
        world.despawn(e).unwrap();
    }
    world.spawn_at(id(1, 7), (Pos(10),));
    let next: Vec<Entity> = (0..4).map(|_| world.spawn((Pos(0),))).collect();
    assert_eq!(next, [id(0, 2), id(2, 2), id(3, 2), id(5, 1)]);
    assert_eq!(world.get::<Pos>(id(1, 7)), Some(&Pos(10)));
    world.check_invariants();
}

#[test]
fn spawn_at_with_sparse_components() {
    let mut world = World::new();
    world.register_component::<Marker>(StorageType::SparseSet).unwrap();
    world.spawn_at(id(700, 2), (Pos(1), Marker(9)));
    assert_eq!(world.get::<Marker>(id(700, 2)), Some(&Marker(9)));
    world.despawn(id(700, 2)).unwrap();
    world.check_invariants();
}

#[test]
fn an_id_that_is_not_free_is_a_typed_error_and_changes_nothing() {
    let mut world = World::new();
    let a = world.spawn((Pos(1),));
    let b = world.spawn((Pos(2),));
    world.despawn(b).unwrap();
    let before = world.entities().state();
    let err = world.try_spawn_at(a, (Pos(9),)).unwrap_err();
    assert!(matches!(err, EntityError::IdNotFree(EntityIdError::Alive(e)) if e == a), "{err}");
    assert!(err.to_string().contains("alive"), "{err}");
    // The slot of `b` hands out generation 2 next: generation 1 was alive once already.
    let err = world.try_spawn_at(b, (Pos(9),)).unwrap_err();
    assert!(matches!(err, EntityError::IdNotFree(EntityIdError::Stale { .. })), "{err}");
    assert_eq!(world.entities().state(), before);
    assert_eq!(world.get::<Pos>(a), Some(&Pos(1)));
    // A reserved id is flushed first, and so alive.
    let reserved = world.reserve_entity();
    let err = world.try_spawn_at(reserved, (Pos(9),)).unwrap_err();
    assert!(matches!(err, EntityError::IdNotFree(EntityIdError::Alive(_))), "{err}");
    world.check_invariants();
}

#[test]
fn a_slot_spawned_at_the_last_generation_retires_on_despawn() {
    let mut world = World::new();
    let last = id(0, u32::MAX);
    world.spawn_at(last, (Pos(1),));
    world.despawn(last).unwrap();
    let err = world.try_spawn_at(last, ()).unwrap_err();
    assert!(matches!(err, EntityError::IdNotFree(EntityIdError::Retired(_))), "{err}");
    assert_eq!(world.spawn(()), id(1, 1));
    world.check_invariants();
}

#[test]
#[should_panic(expected = "World::spawn_at")]
fn spawn_at_a_live_id_panics_with_the_reason() {
    let mut world = World::new();
    let a = world.spawn(());
    world.spawn_at(a, ());
}
