//! Spawning: `spawn`, `spawn_reserved`, reserved entities and their flush, and `spawn_batch`
//! (values, ticks, drops, a panicking iterator), with the bundles a spawn refuses.

use super::*;

#[test]
fn spawn_get_despawn() {
    let mut world = World::new();
    let a = world.spawn((Pos(1.0, 2.0), Vel(0.5, 0.0)));
    let b = world.spawn((Pos(3.0, 4.0), Name("b".into())));
    assert_eq!(world.len(), 2);
    assert_eq!(world.get::<Pos>(a), Some(&Pos(1.0, 2.0)));
    assert_eq!(world.get::<Vel>(b), None);
    assert_eq!(world.get::<Name>(b).unwrap().0, "b");
    world.get_mut::<Pos>(a).unwrap().0 = 10.0;
    assert_eq!(world.get::<Pos>(a).unwrap().0, 10.0);
    world.despawn(a).unwrap();
    assert!(!world.contains(a));
    assert_eq!(world.get::<Pos>(a), None);
    assert!(matches!(world.despawn(a), Err(EntityError::NoSuchEntity(e)) if e == a));
    assert!(matches!(world.insert(a, (Tag,)), Err(EntityError::NoSuchEntity(_))));
    assert!(world.remove::<(Pos,)>(a).is_none());
    assert_eq!(world.len(), 1);
    world.check_invariants();
}

/// `spawn_reserved` writes a reserved entity's row in place in its new table and takes it
/// out of the empty archetype (fixing the entity that takes its place there); bundles it
/// cannot place that way, and entities that have components already, get an ordinary insert.
#[test]
fn spawn_reserved_places_reserved_entities_in_place() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = sparse_world();
    // An entity with only a sparse-set component shares the empty table, so the empty
    // archetype keeps a list.
    let sparse_only = world.spawn((Sparse(1),));
    let es: Vec<Entity> = (0..6).map(|_| world.reserve_entity()).collect();
    world.flush();
    assert_eq!(world.len(), 7);
    let tick = world.change_tick();
    world.spawn_reserved(es[0], (Pos(0.0, 0.0), Vel(1.0, 1.0))).unwrap();
    world.check_invariants();
    world.spawn_reserved(es[3], (Pos(3.0, 0.0), Tracked::new(&drops))).unwrap();
    world.spawn_reserved(es[1], (Pos(1.0, 0.0), Sparse(11))).unwrap(); // has a sparse one
    world.spawn_reserved(es[2], (Tag,)).unwrap(); // zero-sized
    world.spawn_reserved(es[4], (PageAligned(4),)).unwrap();
    world.check_invariants();
    // Has components already: an insert, which replaces.
    world.spawn_reserved(es[0], (Vel(2.0, 2.0),)).unwrap();
    world.check_invariants();
    assert_eq!(world.get::<Vel>(es[0]), Some(&Vel(2.0, 2.0)));
    assert_eq!(world.get::<Pos>(es[0]), Some(&Pos(0.0, 0.0)));
    assert_eq!(world.get::<Pos>(es[3]), Some(&Pos(3.0, 0.0)));
    assert_eq!(world.get::<Sparse>(es[1]), Some(&Sparse(11)));
    assert_eq!(world.get::<PageAligned>(es[4]), Some(&PageAligned(4)));
    assert_eq!(world.get::<Tag>(es[2]), Some(&Tag));
    assert_eq!(world.entity(es[5]).unwrap().archetype().id(), ArchetypeId::EMPTY);
    assert_eq!(world.get::<Sparse>(sparse_only), Some(&Sparse(1)));
    let loc = world.entities().location(es[3]).unwrap();
    let table = &world.tables()[world.table_id_of(es[3]).unwrap().index()];
    let pos = table.column(world.components().id::<Pos>().unwrap()).unwrap();
    assert_eq!(pos.added_ticks()[loc.table_row as usize], tick, "added at the world's tick");
    // Same archetype as a spawned entity's, and the same in every respect.
    let spawned = world.spawn((Pos(9.0, 0.0), Vel(9.0, 9.0)));
    let archetype_of = |w: &World, e| w.entities().location(e).unwrap().archetype_id;
    assert_eq!(archetype_of(&world, spawned), archetype_of(&world, es[0]));

    // A refused bundle or a stale entity changes nothing, and the bundle is dropped.
    let err = world.spawn_reserved(es[5], (Tracked::new(&drops), Tracked::new(&drops)));
    assert!(matches!(err, Err(EntityError::Component(_))), "{err:?}");
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    world.despawn(es[2]).unwrap();
    let err = world.spawn_reserved(es[2], (Tracked::new(&drops),));
    assert!(matches!(err, Err(EntityError::NoSuchEntity(e)) if e == es[2]), "{err:?}");
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    world.check_invariants();
    assert!(world.contains(es[5]), "the refused entity stays, empty");
    world.clear();
    assert_eq!(drops.load(Ordering::SeqCst), 4, "the stored value dropped once");
}

#[test]
fn duplicate_components_in_a_bundle_are_rejected() {
    let mut world = World::new();
    let err = world.try_spawn((Pos(0.0, 0.0), Pos(1.0, 1.0))).unwrap_err();
    assert!(matches!(err, EntityError::Component(ComponentError::DuplicateComponent { .. })));
    assert!(err.to_string().contains("Pos"), "{err}");
    assert!(world.is_empty());
    let e = world.spawn((Tag,));
    assert!(world.insert(e, (Vel(0.0, 0.0), Vel(1.0, 1.0))).is_err());
    assert!(world.get::<Vel>(e).is_none());
    world.check_invariants();
}

#[test]
fn an_empty_entity_is_spawned_alive_and_takes_components_later() {
    let mut world = World::new();
    let a = world.spawn_empty();
    let b = world.spawn(());
    let batch = world.spawn_batch((0..3).map(|_| ()));
    assert_eq!(world.len(), 5);
    assert!(world.contains(a) && world.contains(b) && batch.iter().all(|&e| world.contains(e)));
    assert_eq!(world.table_id_of(a), world.table_id_of(b));
    world.insert(a, (Pos(1.0, 2.0),)).unwrap();
    assert_eq!(world.get::<Pos>(a), Some(&Pos(1.0, 2.0)));
    world.insert(b, ()).unwrap();
    world.remove::<()>(b).unwrap();
    world.insert_batch(batch.iter().map(|&e| (e, ()))).unwrap();
    world.remove_batch::<()>(batch.iter().copied()).unwrap();
    world.check_invariants();
    world.despawn(b).unwrap();
    world.despawn_batch(batch.iter().copied());
    assert_eq!(world.len(), 1);
    world.check_invariants();
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_tuple_is_never_a_component() {
    let mut world = World::new();
    let err = world.try_spawn((Pos(0.0, 0.0), (Vel(1.0, 1.0), Tag))).unwrap_err();
    let EntityError::Component(ComponentError::TupleComponent { name, bundle }) = &err else {
        panic!("{err}");
    };
    assert!(name.contains("Vel") && name.starts_with('('), "{name}");
    assert!(bundle.is_some_and(|b| b.contains("Pos")), "{bundle:?}");
    assert!(err.to_string().contains("never a component"), "{err}");
    assert!(world.is_empty());
    assert_eq!(world.components().len(), 0, "nothing of the bundle was registered");
    let e = world.spawn((Tag,));
    let err = world.insert(e, (Pos(0.0, 0.0), (Vel(1.0, 1.0),))).unwrap_err();
    assert!(matches!(err, EntityError::Component(ComponentError::TupleComponent { .. })));
    assert!(world.get::<Pos>(e).is_none());
    let err = world.register_component::<(Pos, Vel)>(StorageType::SparseSet).unwrap_err();
    assert!(matches!(err, ComponentError::TupleComponent { bundle: None, .. }), "{err}");
    let unit = world.register_component::<()>(StorageType::Table).unwrap_err();
    assert!(matches!(unit, ComponentError::TupleComponent { .. }), "{unit}");
    world.check_invariants();
    let spawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.spawn((Pos(0.0, 0.0), (Vel(1.0, 1.0), Tag)));
    }));
    let message = spawn.unwrap_err();
    let message = message.downcast_ref::<String>().expect("a formatted message");
    assert!(message.contains("never a component"), "{message}");
    assert_eq!(world.len(), 1);
}

#[test]
fn zst_and_page_aligned_components() {
    let mut world = World::new();
    let es: Vec<Entity> = (0..50).map(|i| world.spawn((Tag, PageAligned(i)))).collect();
    for (i, &e) in es.iter().enumerate() {
        let value = world.get::<PageAligned>(e).unwrap();
        assert_eq!(value.0, i as u64);
        assert_eq!(value as *const PageAligned as usize % 4096, 0);
        assert!(world.has::<Tag>(e));
    }
    world.remove::<(Tag,)>(es[3]).unwrap();
    assert_eq!(world.get::<PageAligned>(es[3]).unwrap().0, 3);
    world.check_invariants();
}

#[test]
fn reserved_entities_appear_on_flush() {
    let mut world = World::new();
    let e = world.reserve_entity();
    assert!(!world.contains(e));
    world.flush();
    assert!(world.contains(e));
    world.insert(e, (Pos(1.0, 1.0),)).unwrap();
    let f = world.reserve_entity();
    let g = world.spawn((Vel(0.0, 0.0),)); // flushes `f` first
    assert!(world.contains(f) && world.contains(g));
    world.check_invariants();
}

#[test]
fn spawn_batch_clear_and_memory_stats() {
    let mut world = World::new();
    let es = world.spawn_batch((0..1000).map(|i| (Pos(i as f32, 0.0), Vel(1.0, 0.0))));
    assert_eq!(es.len(), 1000);
    assert_eq!(world.get::<Pos>(es[999]), Some(&Pos(999.0, 0.0)));
    let stats = world.memory_stats();
    assert!(stats.used >= 1000 * (size_of::<Pos>() + size_of::<Vel>()));
    assert!(stats.committed >= stats.used && stats.reserved >= stats.committed);
    assert_eq!(stats.tables.iter().map(|t| t.rows).sum::<usize>(), 1000);
    world.clear();
    assert!(world.is_empty());
    assert!(es.iter().all(|&e| !world.contains(e)));
    assert_eq!(world.memory_stats().used, 0);
    world.check_invariants();
}

#[test]
fn spawn_batch_writes_values_ticks_and_drops_each_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    let first = world.spawn((Pos(-1.0, 0.0),));
    world.despawn(first).unwrap(); // a freed index for the batch to reuse
    world.increment_change_tick();
    let tick = world.change_tick();
    let es = world.spawn_batch((0..300).map(|i| (Tracked::new(&drops), Pos(i as f32, 1.0))));
    assert_eq!(es.len(), 300);
    assert_eq!(es[0].index(), first.index(), "the freed index is reused first");
    world.check_invariants();
    for (i, &e) in es.iter().enumerate() {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 1.0)));
        assert!(world.get::<Tracked>(e).is_some());
    }
    let table = &world.tables()[world.table_id_of(es[7]).unwrap().index()];
    for column in table.columns() {
        assert!(column.added_ticks().iter().all(|&t| t == tick));
        assert!(column.changed_ticks().iter().all(|&t| t == tick));
    }
    assert_eq!(table.entities(), &es[..]);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    for &e in es.iter().step_by(2) {
        world.despawn(e).unwrap();
    }
    assert_eq!(drops.load(Ordering::SeqCst), 150);
    world.check_invariants();
    // A second batch of the same bundle lands in the same table, after the survivors.
    let more = world.spawn_batch((0..10).map(|i| (Tracked::new(&drops), Pos(i as f32, 2.0))));
    assert_eq!(world.get::<Pos>(more[9]), Some(&Pos(9.0, 2.0)));
    assert_eq!(world.get::<Pos>(es[1]), Some(&Pos(1.0, 1.0)));
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 310);
}

#[test]
fn spawn_batch_without_a_size_hint_and_with_sparse_components() {
    let mut world = sparse_world();
    let mut i = 0;
    let es = world.spawn_batch(std::iter::from_fn(|| {
        i += 1;
        (i <= 50).then_some((Pos(i as f32, 0.0), Sparse(i)))
    }));
    assert_eq!(es.len(), 50);
    assert_eq!(world.get::<Sparse>(es[49]), Some(&Sparse(50)));
    assert_eq!(world.get::<Pos>(es[0]), Some(&Pos(1.0, 0.0)));
    let es = world.spawn_batch((0..1000).filter(|i| i % 3 == 0).map(|i| (Vel(i as f32, 0.0),)));
    assert_eq!(es.len(), 334);
    assert_eq!(world.get::<Vel>(es[333]), Some(&Vel(999.0, 0.0)));
    world.check_invariants();
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_iterator_mid_batch_leaves_the_world_consistent() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    let before = world.spawn((Tracked::new(&drops), Pos(0.5, 0.5)));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.spawn_batch((0..100).map(|i| {
            assert!(i != 60, "the iterator panics");
            (Tracked::new(&drops), Pos(i as f32, 0.0))
        }))
    }));
    assert!(result.is_err());
    assert_eq!(world.len(), 61, "the 60 entities spawned before the panic, and the first");
    world.check_invariants();
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    assert_eq!(world.get::<Pos>(before), Some(&Pos(0.5, 0.5)));
    let archetype =
        &world.archetypes()[world.entities().location(before).unwrap().archetype_id as usize];
    let mut xs: Vec<f32> = world
        .archetype_entities(archetype.id())
        .iter()
        .map(|ae| world.get::<Pos>(ae.entity).unwrap().0)
        .collect();
    xs.sort_by(f32::total_cmp);
    let mut expected: Vec<f32> = (0..60).map(|i| i as f32).chain([0.5]).collect();
    expected.sort_by(f32::total_cmp);
    assert_eq!(xs, expected);
    // The world goes on working.
    world.spawn_batch((0..5).map(|_| (Tracked::new(&drops), Pos(7.0, 7.0))));
    world.check_invariants();
    world.clear();
    assert_eq!(drops.load(Ordering::SeqCst), 66);
}

#[test]
fn storage_type_conflicts_are_errors() {
    let mut world = World::new();
    world.spawn((Pos(0.0, 0.0),));
    assert!(world.register_component::<Pos>(StorageType::SparseSet).is_err());
}

#[test]
fn the_oldest_reservation_spawns_straight_into_its_table() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = sparse_world();
    let freed_before = world.spawn((Pos(0.0, 0.0),));
    let other = world.spawn((Pos(5.0, 5.0), Vel(5.0, 5.0)));
    world.despawn(freed_before).unwrap();
    let r: Vec<Entity> = (0..3).map(|_| world.reserve_entity()).collect();
    assert_eq!(r[0].index(), freed_before.index(), "a reservation takes a free index first");
    // A despawn flushes nothing: the reservations stay pending, and the freed index waits.
    world.despawn(other).unwrap();
    assert!(r.iter().all(|&e| !world.contains(e)));
    let empty = |w: &World| w.archetypes()[ArchetypeId::EMPTY.index()].len();
    world.spawn_reserved(r[0], (Pos(1.0, 0.0), Tracked::new(&drops))).unwrap();
    assert_eq!(world.get::<Pos>(r[0]), Some(&Pos(1.0, 0.0)));
    assert_eq!(empty(&world), 0, "never placed in the empty archetype");
    assert!(!world.contains(r[1]) && !world.contains(r[2]), "the others are still pending");
    assert_eq!(world.len(), 1);
    world.check_invariants();
    // Out of order: r[2] is not the oldest, so everything pending is flushed first and r[2]
    // leaves the empty archetype as before; r[1] stays, empty.
    world.spawn_reserved(r[2], (Vel(3.0, 3.0),)).unwrap();
    assert_eq!(world.get::<Vel>(r[2]), Some(&Vel(3.0, 3.0)));
    assert!(world.contains(r[1]));
    assert_eq!(world.entity(r[1]).unwrap().archetype().id(), ArchetypeId::EMPTY);
    assert_eq!(empty(&world), 1);
    world.check_invariants();
    // `other`'s index joined the freelist with that flush.
    assert_eq!(world.spawn((Pos(9.0, 9.0),)).index(), other.index());
    // A reserved entity can be despawned: it is flushed for it.
    let pending = world.reserve_entity();
    world.despawn(pending).unwrap();
    assert!(!world.contains(pending));
    // A refused bundle leaves the oldest reservation alive and empty, as on the other path.
    let refused = world.reserve_entity();
    let err = world.spawn_reserved(refused, (Tracked::new(&drops), Tracked::new(&drops)));
    assert!(matches!(err, Err(EntityError::Component(_))), "{err:?}");
    assert!(world.contains(refused));
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    world.check_invariants();
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 3, "r[0]'s value dropped with the world");
}

#[test]
fn spawn_batch_writes_every_column_of_a_sixteen_component_bundle() {
    // Sixteen components of different sizes and alignments (a ZST, a page-aligned one, a
    // heap-owning one), registered in an order unlike the bundle's, so bundle position `i`
    // and table column `columns[i]` differ: each value must land in its own column's row.
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B1(u8);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B2(u16);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B3(u32);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B4(u64);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B5(u128);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B6([u8; 3]);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B7(f64, u8);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B8(i16, i16, i16);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B9([u32; 5]);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B10(u8, u32);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B11(i64);
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct B12(char);
    let mut world = World::new();
    world.register_component::<B12>(StorageType::Table).unwrap();
    world.register_component::<PageAligned>(StorageType::Table).unwrap();
    world.register_component::<B3>(StorageType::Table).unwrap();
    world.register_component::<Name>(StorageType::Table).unwrap();
    world.register_component::<Tag>(StorageType::Table).unwrap();
    let bundle = |i: u32| {
        (
            B1(i as u8),
            B2(i as u16 * 3),
            Tag,
            B3(i * 5),
            PageAligned(u64::from(i) << 33),
            B4(u64::from(i) * 7),
            B5(u128::from(i) << 70),
            B6([i as u8, 1, 2]),
            Name(format!("n{i}")),
            B7(f64::from(i) / 2.0, 9),
            B8(i as i16, -(i as i16), 4),
            B9([i; 5]),
            B10(3, i + 1),
            B11(-i64::from(i)),
            B12(char::from_u32(0x41 + i % 26).unwrap()),
            Pos(i as f32, -(i as f32)),
        )
    };
    // Many room-fulls (a 128 KiB commit step holds 32 page-aligned rows): the first
    // reservation comes from the size hint, the rest from the loop's own (no hint).
    let (first, all) = if cfg!(miri) { (40, 100) } else { (700, 1500) };
    let mut es = world.spawn_batch((0..first).map(bundle));
    let mut i = first;
    es.extend(world.spawn_batch(std::iter::from_fn(|| {
        i += 1;
        (i <= all).then(|| bundle(i - 1))
    })));
    assert_eq!(es.len(), all as usize);
    for (i, &e) in es.iter().enumerate() {
        let i = i as u32;
        let b = bundle(i);
        assert_eq!(world.get::<B1>(e), Some(&b.0));
        assert_eq!(world.get::<B2>(e), Some(&b.1));
        assert_eq!(world.get::<Tag>(e), Some(&Tag));
        assert_eq!(world.get::<B3>(e), Some(&b.3));
        let aligned = world.get::<PageAligned>(e).unwrap();
        assert_eq!(aligned, &b.4);
        assert_eq!((aligned as *const PageAligned as usize) % 4096, 0);
        assert_eq!(world.get::<B4>(e), Some(&b.5));
        assert_eq!(world.get::<B5>(e), Some(&b.6));
        assert_eq!(world.get::<B6>(e), Some(&b.7));
        assert_eq!(world.get::<Name>(e), Some(&b.8));
        assert_eq!(world.get::<B7>(e), Some(&b.9));
        assert_eq!(world.get::<B8>(e), Some(&b.10));
        assert_eq!(world.get::<B9>(e), Some(&b.11));
        assert_eq!(world.get::<B10>(e), Some(&b.12));
        assert_eq!(world.get::<B11>(e), Some(&b.13));
        assert_eq!(world.get::<B12>(e), Some(&b.14));
        assert_eq!(world.get::<Pos>(e), Some(&b.15));
    }
    // Despawning drops every value: under miri a `String` leaked or freed twice fails here.
    assert_eq!(world.despawn_batch(es), all as usize);
    assert!(world.is_empty());
}
