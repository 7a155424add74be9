//! `insert_batch` and `remove_batch`: block moves, last-row-first moves, mixed and sparse-set
//! batches, bad entities, and a panicking `Drop` mid-batch.

use super::*;

/// The entities of `e`'s table, in row order.
fn table_entities(world: &World, e: Entity) -> Vec<Entity> {
    world.tables()[world.table_id_of(e).unwrap().index()].entities().to_vec()
}

#[test]
fn a_batch_of_an_archetypes_last_rows_moves_as_one_block() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    let stay: Vec<Entity> = (0..5).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    let es: Vec<Entity> = (0..40).map(|i| world.spawn((Pos(i as f32, 1.0),))).collect();
    world.increment_change_tick();
    let inserted_at = world.change_tick();
    world
        .insert_batch(
            es.iter().enumerate().map(|(i, &e)| (e, (Vel(i as f32, 2.0), Tracked::new(&drops)))),
        )
        .unwrap();
    world.check_invariants();
    // A block keeps the rows in order (the one-at-a-time fallback would reverse them).
    assert_eq!(table_entities(&world, es[0]), es);
    let vel = world.components().id::<Vel>().unwrap();
    let pos = world.components().id::<Pos>().unwrap();
    for (i, &e) in es.iter().enumerate() {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 1.0)));
        assert_eq!(world.get::<Vel>(e), Some(&Vel(i as f32, 2.0)));
        let table = &world.tables()[world.table_id_of(e).unwrap().index()];
        let row = world.entities().location(e).unwrap().table_row as usize;
        assert_eq!(table.column(vel).unwrap().added_ticks()[row], inserted_at);
        assert_eq!(table.column(vel).unwrap().changed_ticks()[row], inserted_at);
        assert_eq!(table.column(pos).unwrap().added_ticks()[row], inserted_at - 1);
    }
    for (i, &e) in stay.iter().enumerate() {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)));
        assert!(!world.has::<Vel>(e));
    }
    assert_eq!(drops.load(Ordering::SeqCst), 0, "moved, not dropped");

    let removed = world.remove_batch::<(Tracked, Vel)>(es.iter().copied()).unwrap();
    world.check_invariants();
    assert_eq!(table_entities(&world, es[0]), [stay.clone(), es.clone()].concat());
    for (i, (tracked, v)) in removed.into_iter().enumerate() {
        assert_eq!(v, Vel(i as f32, 2.0), "the values come back in the entities' order");
        drop(tracked);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 40, "each removed value dropped once, by its owner");
    for (i, &e) in es.iter().enumerate() {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 1.0)));
        assert!(!world.has::<Vel>(e));
    }
    world.insert_batch(es.iter().map(|&e| (e, (Tracked::new(&drops),)))).unwrap();
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 80);
}

#[test]
fn other_batches_of_one_archetype_move_last_row_first() {
    let mut world = World::new();
    let es: Vec<Entity> = (0..30).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    // Every third entity, in row order but not the table's tail.
    let picked: Vec<Entity> = es.iter().copied().step_by(3).collect();
    world.insert_batch(picked.iter().map(|&e| (e, (Vel(1.0, 0.0),)))).unwrap();
    world.check_invariants();
    let mut reversed = picked.clone();
    reversed.reverse();
    assert_eq!(table_entities(&world, picked[0]), reversed, "moved last row first");
    for (i, &e) in es.iter().enumerate() {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)));
        assert_eq!(world.has::<Vel>(e), i % 3 == 0);
    }
    // In row order now: the reversed list.
    let removed = world.remove_batch::<(Vel,)>(reversed.iter().copied()).unwrap();
    assert_eq!(removed.len(), 10);
    world.check_invariants();
    assert!(es.iter().all(|&e| !world.has::<Vel>(e)));
    for (i, &e) in es.iter().enumerate() {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)));
    }
}

#[test]
fn mixed_batches_take_entities_in_order_and_the_later_bundle_wins() {
    let mut world = sparse_world();
    let a = world.spawn((Pos(0.0, 0.0),));
    let b = world.spawn((Vel(0.0, 0.0),));
    let c = world.spawn((Pos(2.0, 0.0), Sparse(1)));
    let batch = [
        (b, (Sparse(10), Tag)),
        (a, (Sparse(20), Tag)),
        (b, (Sparse(30), Tag)),
        (c, (Sparse(40), Tag)),
    ];
    world.insert_batch(batch).unwrap();
    world.check_invariants();
    assert_eq!(world.get::<Sparse>(a), Some(&Sparse(20)));
    assert_eq!(world.get::<Sparse>(b), Some(&Sparse(30)), "listed twice: the later bundle");
    assert_eq!(world.get::<Sparse>(c), Some(&Sparse(40)), "replaced in place");
    assert!(world.has::<Tag>(a) && world.has::<Tag>(b) && world.has::<Tag>(c));
    assert_eq!(world.get::<Pos>(c), Some(&Pos(2.0, 0.0)));
    let removed = world.remove_batch::<(Tag, Sparse)>([c, a, b]).unwrap();
    assert_eq!(removed, vec![(Tag, Sparse(40)), (Tag, Sparse(20)), (Tag, Sparse(30))]);
    world.check_invariants();
    assert!(!world.has::<Sparse>(a) && !world.has::<Tag>(b));
    assert_eq!(world.get::<Vel>(b), Some(&Vel(0.0, 0.0)));
}

#[test]
fn sparse_set_batches_move_no_table_rows() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = sparse_world();
    world.register_component::<Tracked>(StorageType::SparseSet).unwrap();
    let stay: Vec<Entity> = (0..3).map(|i| world.spawn((Pos(i as f32, 1.0),))).collect();
    let es: Vec<Entity> = (0..25).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    // {Pos, Sparse} joins {Pos}'s table: from now on both keep lists.
    let other = world.spawn((Pos(9.0, 9.0), Sparse(99)));
    let table = world.table_id_of(es[0]);
    let list = |world: &World, e: Entity| -> Vec<Entity> {
        let loc = world.entities().location(e).unwrap();
        world.archetype_entities(ArchetypeId(loc.archetype_id)).iter().map(|x| x.entity).collect()
    };
    // The last entries of {Pos}'s list, in order: one block, kept in order.
    world.insert_batch(es.iter().map(|&e| (e, (Sparse(e.index()), Tracked::new(&drops))))).unwrap();
    world.check_invariants();
    assert_eq!(list(&world, es[0]), es, "a block keeps the list order");
    for &e in &es {
        assert_eq!(world.get::<Sparse>(e), Some(&Sparse(e.index())));
        assert_eq!(world.table_id_of(e), table);
    }
    let removed = world.remove_batch::<(Sparse, Tracked)>(es.iter().copied()).unwrap();
    assert!(removed.iter().zip(&es).all(|((s, _), e)| s.0 == e.index()), "in the entities' order");
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(removed);
    assert_eq!(drops.load(Ordering::SeqCst), 25, "each removed value dropped once, by its owner");
    world.check_invariants();
    assert!(es.iter().all(|&e| !world.has::<Sparse>(e)));
    assert_eq!(list(&world, es[0])[3..], es[..], "moved back as a block");
    // Not the list's tail: one at a time, last entry first.
    let odd: Vec<Entity> = es.iter().copied().skip(1).step_by(2).collect();
    world.insert_batch(odd.iter().map(|&e| (e, (Sparse(7), Tracked::new(&drops))))).unwrap();
    world.check_invariants();
    for (i, &e) in es.iter().enumerate() {
        assert_eq!(world.get::<Sparse>(e).is_some(), i % 2 == 1);
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)));
    }
    assert_eq!(world.get::<Sparse>(other), Some(&Sparse(99)));
    assert!(stay.iter().all(|&e| !world.has::<Sparse>(e)));
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 25 + 12);
}

#[test]
fn batches_with_bad_entities_change_nothing_and_drop_each_bundle_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    let es: Vec<Entity> = (0..10).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    let dead = world.spawn((Pos(9.0, 9.0),));
    world.despawn(dead).unwrap();
    // A dead entity in the middle of a block-shaped batch: nothing moves.
    let batch: Vec<(Entity, (Tracked,))> = es[..5]
        .iter()
        .chain([&dead])
        .chain(&es[5..])
        .map(|&e| (e, (Tracked::new(&drops),)))
        .collect();
    assert!(matches!(world.insert_batch(batch), Err(EntityError::NoSuchEntity(e)) if e == dead));
    assert_eq!(drops.load(Ordering::SeqCst), 11, "every bundle dropped, once");
    assert!(es.iter().all(|&e| !world.has::<Tracked>(e)));
    world.check_invariants();

    world.insert_batch(es[..6].iter().map(|&e| (e, (Vel(1.0, 1.0),)))).unwrap();
    let before: Vec<_> = es.iter().map(|&e| world.entities().location(e)).collect();
    let missing = world.remove_batch::<(Vel,)>(es.iter().copied());
    assert!(
        matches!(missing, Err(EntityError::MissingComponent { entity, .. }) if entity == es[6])
    );
    let twice = world.remove_batch::<(Vel,)>([es[0], es[1], es[0]]);
    assert!(matches!(twice, Err(EntityError::ListedTwice(e)) if e == es[0]));
    let stale = world.remove_batch::<(Vel,)>([es[0], dead]);
    assert!(matches!(stale, Err(EntityError::NoSuchEntity(e)) if e == dead));
    let after: Vec<_> = es.iter().map(|&e| world.entities().location(e)).collect();
    assert_eq!(before, after, "nothing moved");
    assert!(es[..6].iter().all(|&e| world.get::<Vel>(e) == Some(&Vel(1.0, 1.0))));
    assert!(world.insert_batch(std::iter::empty::<(Entity, (Vel,))>()).is_ok());
    assert_eq!(world.remove_batch::<(Vel,)>([]).unwrap(), vec![]);
    world.check_invariants();
}

#[test]
fn block_batches_of_zst_and_page_aligned_components() {
    let mut world = World::new();
    let es: Vec<Entity> = (0..50).map(|i| world.spawn((PageAligned(i),))).collect();
    world.insert_batch(es.iter().map(|&e| (e, (Tag,)))).unwrap();
    assert_eq!(table_entities(&world, es[0]), es, "a block");
    world.insert_batch(es.iter().map(|&e| (e, (Pos(1.0, 2.0),)))).unwrap();
    for (i, &e) in es.iter().enumerate() {
        let value = world.get::<PageAligned>(e).unwrap();
        assert_eq!(value.0, i as u64);
        assert_eq!(value as *const PageAligned as usize % 4096, 0);
        assert!(world.has::<Tag>(e));
    }
    let removed = world.remove_batch::<(PageAligned, Tag)>(es.iter().copied()).unwrap();
    assert!(removed.iter().enumerate().all(|(i, (p, _))| p.0 == i as u64));
    for &e in &es {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(1.0, 2.0)));
        assert!(!world.has::<PageAligned>(e));
    }
    world.check_invariants();
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_drop_mid_insert_batch_leaves_the_world_consistent() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    let es: Vec<Entity> = (0..6).map(|_| world.spawn((Tracked::new(&drops),))).collect();
    world.get_mut::<Tracked>(es[2]).unwrap().panic = true;
    // Every entity has the component already: each insert replaces (and drops) the old value.
    let batch: Vec<(Entity, (Tracked,))> =
        es.iter().map(|&e| (e, (Tracked::new(&drops),))).collect();
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.insert_batch(batch)));
    assert!(result.is_err());
    world.check_invariants();
    // Entities 0..=2 were replaced (2's old value panicked while dropping); the bundles for
    // 3..6 were dropped unused.
    assert_eq!(drops.load(Ordering::SeqCst), 6);
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 12, "every value dropped exactly once");
}
