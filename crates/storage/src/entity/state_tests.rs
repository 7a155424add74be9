//! The tests of [`EntitiesState`] and [`Entities::try_alloc_exact`]: a restored allocator hands
//! out what the original does; bad states and taken ids are typed errors that change nothing.

use std::num::NonZeroU32;

use super::*;

fn id(index: u32, generation: u32) -> Entity {
    Entity { index, generation: NonZeroU32::new(generation).unwrap() }
}

/// An allocator with free, reused, retired and reserved slots.
fn busy() -> Entities {
    let mut entities = Entities::with_max_entities(1 << 12);
    let made: Vec<Entity> = (0..10).map(|_| entities.alloc()).collect();
    for &e in &[made[3], made[7], made[1]] {
        entities.free(e);
    }
    // Index 5 reaches generation u32::MAX and retires.
    entities.free(made[5]);
    entities.try_alloc_exact(id(5, u32::MAX)).unwrap();
    entities.free(id(5, u32::MAX));
    let _ = entities.reserve();
    let _ = entities.reserve();
    entities
}

/// What the allocator hands out next: flushes, then allocations and reservations.
fn next_ids(entities: &mut Entities) -> Vec<Entity> {
    let mut out = Vec::new();
    entities.flush(|e, _| out.push(e));
    out.extend((0..6).map(|_| entities.alloc()));
    out.push(entities.reserve());
    out
}

#[test]
fn a_restored_allocator_hands_out_what_the_original_does() {
    let mut original = busy();
    let state = original.state();
    assert_eq!(state.reserved, 2);
    let mut restored = Entities::with_max_entities(1 << 12);
    restored.alloc();
    restored.try_restore_state(&state).unwrap();
    assert_eq!(restored.state(), state);
    assert_eq!(restored.len(), original.len());
    assert!(!restored.is_alive(id(5, u32::MAX)));
    assert_eq!(next_ids(&mut restored), next_ids(&mut original));
}

#[test]
fn bad_states_are_refused_and_change_nothing() {
    let good = busy().state();
    let mut entities = busy();
    let before = entities.state();
    let mut out_of_range = good.clone();
    out_of_range.alive.push(999);
    let mut twice = good.clone();
    twice.free.push(good.alive[0]);
    let mut unaccounted = good.clone();
    unaccounted.alive.pop();
    let mut takeable = good.clone();
    takeable.takeable = good.free.len() + 1;
    let mut too_many = good.clone();
    too_many.reserved = 1 << 20;
    for (bad, what) in [
        (out_of_range, "IndexOutOfRange"),
        (twice, "ListedTwice"),
        (unaccounted, "Unaccounted"),
        (takeable, "Takeable"),
        (too_many, "TooManyIndices"),
    ] {
        let e = entities.try_restore_state(&bad).unwrap_err();
        assert!(format!("{e:?}").starts_with(what), "{e:?} for {what}");
        assert_eq!(entities.state(), before);
    }
}

#[test]
fn alloc_exact_takes_a_free_slot_out_of_the_freelist_keeping_the_rest_in_order() {
    let mut entities = Entities::with_max_entities(64);
    let made: Vec<Entity> = (0..6).map(|_| entities.alloc()).collect();
    for &e in &made[..4] {
        entities.free(e);
    }
    // Free: 0, 1, 2, 3 (generation 2). Take 2 at a later generation.
    entities.try_alloc_exact(id(2, 9)).unwrap();
    assert!(entities.is_alive(id(2, 9)));
    assert_eq!(entities.alloc(), id(0, 2));
    assert_eq!(entities.alloc(), id(1, 2));
    assert_eq!(entities.alloc(), id(3, 2));
    assert_eq!(entities.alloc(), id(6, 1));
}

#[test]
fn alloc_exact_past_the_end_frees_the_gap_in_index_order() {
    let mut entities = Entities::with_max_entities(64);
    entities.alloc();
    entities.try_alloc_exact(id(4, 3)).unwrap();
    assert_eq!(entities.len(), 2);
    let next: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
    assert_eq!(next, [id(1, 1), id(2, 1), id(3, 1), id(5, 1)]);
}

#[test]
fn alloc_exact_refuses_taken_ids_with_a_typed_error() {
    let mut entities = Entities::with_max_entities(64);
    let a = entities.alloc();
    let b = entities.alloc();
    entities.free(b); // slot 1 now hands out generation 2
    assert!(matches!(entities.try_alloc_exact(a), Err(EntityIdError::Alive(e)) if e == a));
    assert!(matches!(
        entities.try_alloc_exact(b),
        Err(EntityIdError::Stale { next, .. }) if next == id(1, 2)
    ));
    let reserved = entities.reserve(); // slot 1, generation 2
    assert!(matches!(entities.try_alloc_exact(reserved), Err(EntityIdError::Reserved(_))));
    let new_reserved = entities.reserve(); // index 2
    assert!(matches!(entities.try_alloc_exact(new_reserved), Err(EntityIdError::Reserved(_))));
    assert!(matches!(entities.try_alloc_exact(id(9, 1)), Err(EntityIdError::Reserved(_))));
    entities.flush(|_, _| {});
    assert!(matches!(entities.try_alloc_exact(id(64, 1)), Err(EntityIdError::Storage(_))));
    assert_eq!(entities.len(), 3);
}

#[test]
fn alloc_exact_of_a_retired_slot_is_refused() {
    let mut entities = Entities::with_max_entities(64);
    entities.try_alloc_exact(id(0, u32::MAX)).unwrap();
    entities.free(id(0, u32::MAX));
    assert!(matches!(entities.try_alloc_exact(id(0, u32::MAX)), Err(EntityIdError::Retired(_))));
    assert_eq!(entities.alloc(), id(1, 1));
}

#[test]
fn restoring_an_earlier_state_undoes_spawns_and_keeps_the_survivors_locations() {
    let mut entities = Entities::with_max_entities(64);
    let at = |n: u32| EntityLocation { archetype_id: n, archetype_row: n, table_row: n };
    let kept: Vec<Entity> = (0..4).map(|n| entities.try_alloc_at(at(n)).unwrap()).collect();
    entities.free(kept[1]);
    let before = entities.state();
    let mut expected = Entities::with_max_entities(64);
    expected.try_restore_state(&before).unwrap();
    // Spawns past the end and into the freelist, then their undo.
    let spawned: Vec<Entity> = (0..6).map(|_| entities.alloc()).collect();
    for e in spawned {
        entities.free(e);
    }
    entities.try_restore_state(&before).unwrap();
    assert_eq!(entities.state(), before);
    for (n, &e) in kept.iter().enumerate().filter(|&(n, _)| n != 1) {
        assert_eq!(entities.location(e), Some(at(n as u32)));
    }
    assert_eq!(next_ids(&mut entities), next_ids(&mut expected));
}
