//! Despawning: locations after a swap-remove, prefetch hints, every value dropped once, and
//! panicking `Drop`s and iterators in `despawn` and `despawn_batch`.

use super::*;

#[test]
fn despawning_middle_and_last_rows_keeps_locations() {
    let mut world = World::new();
    let es: Vec<Entity> = (0..10).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    world.despawn(es[3]).unwrap();
    world.despawn(es[9]).unwrap();
    world.despawn(es[0]).unwrap();
    world.check_invariants();
    for (i, &e) in es.iter().enumerate() {
        if [0, 3, 9].contains(&i) {
            assert!(!world.contains(e));
        } else {
            assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)));
        }
    }
}

#[test]
fn prefetching_any_entity_changes_nothing() {
    let mut world = sparse_world();
    let live = world.spawn((Pos(1.0, 2.0), Sparse(3)));
    let other = world.spawn((Pos(4.0, 5.0), PageAligned(6)));
    let dead = world.spawn((Tag,));
    world.despawn(dead).unwrap();
    let reserved = world.reserve_entity(); // not yet flushed: no meta
    let never = Entity::from_bits(1 << 32 | 1_000_000).unwrap();
    let placeholder = Entity::PLACEHOLDER;
    for e in [live, other, dead, reserved, never, placeholder] {
        world.prefetch_entity(e);
        world.prefetch_entity_row(e);
    }
    world.flush();
    world.prefetch_entity_row(reserved); // now in the empty table
    assert_eq!(world.get::<Pos>(live), Some(&Pos(1.0, 2.0)));
    assert_eq!(world.get::<Sparse>(live), Some(&Sparse(3)));
    assert_eq!(world.get::<PageAligned>(other), Some(&PageAligned(6)));
    assert!(!world.contains(dead) && !world.contains(never) && world.contains(reserved));
    assert_eq!(world.len(), 3);
    world.check_invariants();
}

#[test]
fn every_value_is_dropped_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = sparse_world();
    let mut es = Vec::new();
    for i in 0..20 {
        let e = world.spawn((Tracked::new(&drops), Pos(i as f32, 0.0)));
        es.push(e);
    }
    for &e in &es[..10] {
        world.insert(e, (Vel(0.0, 0.0),)).unwrap(); // moves the Tracked row
    }
    for &e in &es[..5] {
        world.insert(e, (Tracked::new(&drops),)).unwrap(); // replaces: drops the old one
    }
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    let (t,) = world.remove::<(Tracked,)>(es[6]).unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    drop(t);
    assert_eq!(drops.load(Ordering::SeqCst), 6);
    world.despawn(es[7]).unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 7);
    world.check_invariants();
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 25, "20 spawned + 5 inserted, each dropped once");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_drop_during_despawn_leaves_the_world_consistent() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = sparse_world();
    let keep = world.spawn((Tracked::new(&drops), Pos(0.0, 0.0)));
    let bad =
        world.spawn((Tracked { drops: drops.clone(), panic: true }, Sparse(1), Name("x".into())));
    let last = world.spawn((Tracked::new(&drops), Sparse(2), Name("y".into())));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.despawn(bad)));
    assert!(result.is_err());
    assert!(!world.contains(bad));
    world.check_invariants();
    assert_eq!(world.get::<Sparse>(last), Some(&Sparse(2)));
    assert_eq!(world.get::<Name>(last).unwrap().0, "y");
    assert!(world.contains(keep));
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_drop_stops_despawn_batch_after_that_entity() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    let mut es: Vec<Entity> = (0..40).map(|_| world.spawn((Tracked::new(&drops),))).collect();
    let bad = world.spawn((Tracked { drops: drops.clone(), panic: true }, Pos(0.0, 0.0)));
    es.insert(20, bad);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.despawn_batch(es.iter().copied())
    }));
    assert!(result.is_err());
    assert!(es[..=20].iter().all(|&e| !world.contains(e)), "those before and the bad one");
    assert!(es[21..].iter().all(|&e| world.contains(e)), "those after stay");
    assert_eq!(drops.load(Ordering::SeqCst), 21);
    world.check_invariants();
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 41);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn an_iterator_panicking_mid_sweep_leaves_no_freed_entity_in_a_table() {
    let mut world = World::new();
    let es: Vec<Entity> = (0..500).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // A size hint large enough to sweep; it panics at its 401st id.
        let ids = (0..BULK_DESPAWN_FROM)
            .map(|i| if i == 400 { panic!("the caller's iterator") } else { es[i % 500] });
        world.despawn_batch(ids)
    }));
    assert!(result.is_err());
    world.check_invariants();
    // The ids marked before the panic are despawned (the ring held the next 15, unmarked),
    // the ones not reached stay alive with their values.
    let marked = 400 - (BATCH_META_AHEAD - 1);
    assert_eq!(world.len(), 500 - marked);
    assert!(es[..marked].iter().all(|&e| !world.contains(e)));
    assert!(es[marked..].iter().all(|&e| world.contains(e)));
    for &e in &es[400..] {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(e.index() as f32, 0.0)));
    }
}
