//! Removal tracking: which structural changes log an entity, in what order, for how long.

use std::panic::{AssertUnwindSafe, catch_unwind};

use folio_storage::Entity;

use super::*;
use crate::component::{Component, StorageType};

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pos(f32);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Vel(f32);
/// Registered as a sparse-set component by the tests that use it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stun;

fn removed<T: Component>(world: &World) -> Vec<Entity> {
    world.removed::<T>().collect()
}

#[test]
fn nothing_is_logged_for_untracked_components() {
    let mut world = World::new();
    world.track_removals::<Vel>();
    let e = world.spawn((Pos(0.0), Vel(0.0)));
    world.remove::<(Pos,)>(e).unwrap();
    world.despawn(e).unwrap();
    assert!(world.removed_log::<Pos>().is_none());
    assert_eq!(removed::<Pos>(&world), []);
    assert_eq!(removed::<Vel>(&world), [e], "the despawn took its Vel");
}

#[test]
fn every_way_of_losing_a_component_is_logged_in_order() {
    let mut world = World::new();
    world.register_component::<Stun>(StorageType::SparseSet).unwrap();
    world.track_removals::<Pos>();
    world.track_removals::<Stun>();
    let e: Vec<Entity> = (0..8).map(|i| world.spawn((Pos(i as f32), Stun))).collect();

    world.remove::<(Pos,)>(e[0]).unwrap(); // table component, row move
    world.remove::<(Stun,)>(e[1]).unwrap(); // sparse-set component, no row move
    world.despawn(e[2]).unwrap(); // both
    // A batch of one archetype's last rows in order (the block move), then a scattered one.
    let tail = world.remove_batch::<(Pos,)>([e[6], e[7]]).unwrap();
    assert_eq!(tail, [(Pos(6.0),), (Pos(7.0),)]);
    world.remove_batch::<(Stun,)>([e[4], e[3]]).unwrap();
    assert_eq!(world.despawn_batch([e[5], e[5]]), 1, "the repeat is skipped");

    assert_eq!(removed::<Pos>(&world), [e[0], e[2], e[6], e[7], e[5]]);
    assert_eq!(removed::<Stun>(&world), [e[1], e[2], e[4], e[3], e[5]]);

    // What is left goes with `clear`: e[0], e[6], e[7] still have a Stun, e[1], e[3], e[4] a
    // Pos.
    world.update_removals();
    world.update_removals();
    assert_eq!(removed::<Pos>(&world), []);
    world.clear();
    let mut pos = removed::<Pos>(&world);
    pos.sort();
    assert_eq!(pos, [e[1], e[3], e[4]]);
    let mut stun = removed::<Stun>(&world);
    stun.sort();
    assert_eq!(stun, [e[0], e[6], e[7]]);
}

#[test]
fn a_large_despawn_batch_logs_the_swept_entities_too() {
    let mut world = World::new();
    world.register_component::<Stun>(StorageType::SparseSet).unwrap();
    world.track_removals::<Pos>();
    // Table-only entities go through the sweep, the ones with a sparse-set component one at
    // a time after it. A dead id pads the batch to the size that sweeps (cheap under miri).
    let swept: Vec<Entity> = (0..40).map(|i| world.spawn((Pos(i as f32),))).collect();
    let one_by_one: Vec<Entity> = (0..3).map(|_| world.spawn((Pos(0.0), Stun))).collect();
    let dead = world.spawn((Vel(0.0),));
    world.despawn(dead).unwrap();
    let mut all: Vec<Entity> = swept.iter().chain(&one_by_one).rev().copied().collect();
    let want = all.clone();
    all.resize(BULK_DESPAWN_FROM, dead);
    assert_eq!(world.despawn_batch(all), want.len());
    let mut logged = removed::<Pos>(&world);
    logged.sort();
    let mut want = want;
    want.sort();
    assert_eq!(logged, want);
    assert_eq!(removed::<Vel>(&world), [], "Vel is not tracked");
}

#[test]
fn refused_operations_log_nothing() {
    let mut world = World::new();
    world.track_removals::<Pos>();
    let e = world.spawn((Vel(0.0),));
    let gone = world.spawn((Pos(0.0),));
    world.despawn(gone).unwrap();
    world.update_removals();
    world.update_removals();
    assert!(world.try_remove::<(Pos,)>(e).is_err(), "e has no Pos");
    assert!(world.try_remove::<(Pos,)>(gone).is_err(), "stale");
    assert!(world.despawn(gone).is_err(), "stale");
    assert!(world.remove_batch::<(Pos,)>([e]).is_err());
    assert_eq!(removed::<Pos>(&world), []);
}

#[test]
fn tracking_a_type_before_it_is_registered_leaves_its_storage_free() {
    let mut world = World::new();
    world.track_removals::<Stun>();
    assert!(world.components().id::<Stun>().is_none(), "nothing registered");
    world.register_component::<Stun>(StorageType::SparseSet).unwrap();
    let e = world.spawn((Stun,));
    world.remove::<(Stun,)>(e).unwrap();
    assert_eq!(removed::<Stun>(&world), [e]);
    // Registered through a bundle rather than by hand.
    world.track_removals::<Vel>();
    let f = world.spawn((Vel(1.0),));
    world.despawn(f).unwrap();
    assert_eq!(removed::<Vel>(&world), [f]);
}

#[test]
fn entries_live_for_two_updates_and_readers_keep_cursors() {
    let mut world = World::new();
    world.track_removals::<Pos>();
    let e: Vec<Entity> = (0..4).map(|i| world.spawn((Pos(i as f32),))).collect();
    world.despawn(e[0]).unwrap();
    let log = world.removed_log::<Pos>().unwrap();
    let cursor = log.next_id();
    assert_eq!(cursor, 1);
    world.update_removals();
    world.despawn(e[1]).unwrap();
    let log = world.removed_log::<Pos>().unwrap();
    let (read, missed) = log.read_from(0);
    assert_eq!((read.copied().collect::<Vec<_>>(), missed), (vec![e[0], e[1]], 0));
    let (read, missed) = log.read_from(cursor);
    assert_eq!((read.copied().collect::<Vec<_>>(), missed), (vec![e[1]], 0));
    world.update_removals();
    world.despawn(e[2]).unwrap();
    // e[0] is gone: a reader still at 0 missed it.
    let log = world.removed_log::<Pos>().unwrap();
    let (read, missed) = log.read_from(0);
    assert_eq!((read.copied().collect::<Vec<_>>(), missed), (vec![e[1], e[2]], 1));
    assert_eq!(log.len(), 2);
    // Ageing one type leaves the others.
    world.track_removals::<Vel>();
    let v = world.spawn((Vel(0.0),));
    world.despawn(v).unwrap();
    world.update_removals_of::<Pos>();
    world.update_removals_of::<Pos>();
    assert_eq!(removed::<Pos>(&world), []);
    assert_eq!(removed::<Vel>(&world), [v]);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_despawn_whose_drop_panics_is_still_logged() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("boom");
        }
    }
    let mut world = World::new();
    world.track_removals::<Bomb>();
    world.track_removals::<Pos>();
    let e = world.spawn((Bomb, Pos(1.0)));
    assert!(catch_unwind(AssertUnwindSafe(|| world.despawn(e))).is_err());
    assert!(!world.contains(e));
    assert_eq!(removed::<Bomb>(&world), [e]);
    assert_eq!(removed::<Pos>(&world), [e]);
}

#[test]
fn a_type_tracked_before_registration_has_a_log_once_registered() {
    // By hand.
    let mut world = World::new();
    world.track_removals::<Stun>();
    world.register_component::<Stun>(StorageType::SparseSet).unwrap();
    assert!(world.removed_log::<Stun>().is_some(), "tracked and registered");
    // Through a bundle, with no archetype made for it (the entity lacks it).
    world.track_removals::<Vel>();
    let e = world.spawn((Pos(0.0),));
    assert!(world.try_remove::<(Vel,)>(e).is_err());
    assert!(world.components().id::<Vel>().is_some(), "the bundle registered it");
    assert!(world.removed_log::<Vel>().is_some(), "tracked and registered");
}
