//! Inserts and removes: rows moved between tables along the archetype graph's cached edges,
//! sparse-set moves that keep the table row, and the entity lists of archetypes sharing a table.

use super::*;

#[test]
fn insert_and_remove_move_rows_and_values() {
    let mut world = World::new();
    let e = world.spawn((Pos(1.0, 1.0),));
    let other = world.spawn((Pos(2.0, 2.0),));
    world.insert(e, (Vel(3.0, 3.0), Name("e".into()))).unwrap();
    assert_eq!(world.get::<Pos>(e), Some(&Pos(1.0, 1.0)));
    assert_eq!(world.get::<Vel>(e), Some(&Vel(3.0, 3.0)));
    assert_eq!(world.get::<Pos>(other), Some(&Pos(2.0, 2.0)));
    world.check_invariants();
    // Replacing a component it has.
    world.insert(e, (Name("renamed".into()),)).unwrap();
    assert_eq!(world.get::<Name>(e).unwrap().0, "renamed");
    let (vel, name) = world.remove::<(Vel, Name)>(e).unwrap();
    assert_eq!((vel, name.0.as_str()), (Vel(3.0, 3.0), "renamed"));
    assert!(world.get::<Vel>(e).is_none());
    assert_eq!(world.get::<Pos>(e), Some(&Pos(1.0, 1.0)));
    // Removing what it lacks changes nothing.
    assert!(matches!(world.try_remove::<(Pos, Vel)>(e), Err(EntityError::MissingComponent { .. })));
    assert_eq!(world.get::<Pos>(e), Some(&Pos(1.0, 1.0)));
    world.check_invariants();
}

#[test]
fn archetype_edges_are_cached() {
    let mut world = World::new();
    let es: Vec<Entity> = (0..100).map(|_| world.spawn((Pos(0.0, 0.0),))).collect();
    let before = world.edge_stats();
    for &e in &es {
        world.insert(e, (Vel(1.0, 1.0),)).unwrap();
    }
    for &e in &es {
        world.remove::<(Vel,)>(e).unwrap();
    }
    let after = world.edge_stats();
    assert_eq!(after.misses - before.misses, 2, "one insert edge and one remove edge built");
    assert_eq!(after.hits - before.hits, 198, "every other transition used the cache");
    world.check_invariants();
}

#[test]
fn sparse_set_components_change_the_archetype_not_the_table() {
    let mut world = sparse_world();
    let e = world.spawn((Pos(1.0, 2.0),));
    let f = world.spawn((Pos(5.0, 6.0),));
    let table_before = world.table_id_of(e).unwrap();
    let tables_before = world.tables().len();
    world.insert(e, (Sparse(7),)).unwrap();
    let loc = world.entities().location(e).unwrap();
    assert_eq!(world.table_id_of(e), Some(table_before), "the table row did not move");
    assert_eq!(world.tables().len(), tables_before);
    assert_ne!(loc.archetype_id, world.entities().location(f).unwrap().archetype_id);
    assert_eq!(world.get::<Sparse>(e), Some(&Sparse(7)));
    world.insert(e, (Sparse(8),)).unwrap();
    assert_eq!(world.get::<Sparse>(e), Some(&Sparse(8)));
    world.check_invariants();
    assert_eq!(world.remove::<(Sparse,)>(e), Some((Sparse(8),)));
    assert_eq!(world.table_id_of(e), Some(table_before));
    // A sparse-only entity lives in the empty table; a despawned one has none.
    let only_sparse = world.spawn((Sparse(3),));
    assert_eq!(world.table_id_of(only_sparse), Some(TableId::EMPTY));
    world.despawn(only_sparse).unwrap();
    assert_eq!(world.table_id_of(only_sparse), None);
    let g = world.spawn((Sparse(1), Vel(0.0, 0.0)));
    world.despawn(f).unwrap();
    assert_eq!(world.get::<Sparse>(g), Some(&Sparse(1)));
    world.despawn(g).unwrap();
    world.check_invariants();
    assert_eq!(world.sparse_set(world.components().id::<Sparse>().unwrap()).unwrap().len(), 0);
}

/// An archetype alone on its table keeps no entity list (its entities are the table's, row for
/// row); when an archetype with the same table components and a sparse-set one joins the
/// table, the first starts a list, built from the table, and both keep lists from then on.
#[test]
fn archetypes_keep_entity_lists_only_while_they_share_a_table() {
    let mut world = sparse_world();
    let es: Vec<Entity> = (0..6).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    let plain = ArchetypeId(world.entities().location(es[0]).unwrap().archetype_id);
    assert!(!world.archetypes()[plain.index()].is_listed());
    // Despawn a middle row and move one entity to another table: the last row takes each
    // place, and its archetype row follows its table row.
    world.despawn(es[1]).unwrap();
    world.insert(es[2], (Vel(1.0, 1.0),)).unwrap();
    world.check_invariants();
    let rows = |w: &World, id: ArchetypeId| -> Vec<(Entity, u32)> {
        w.archetype_entities(id).iter().map(|ae| (ae.entity, ae.table_row)).collect()
    };
    assert_eq!(rows(&world, plain), [(es[0], 0), (es[5], 1), (es[4], 2), (es[3], 3)]);
    for (e, row) in rows(&world, plain) {
        let loc = world.entities().location(e).unwrap();
        assert_eq!((loc.archetype_row, loc.table_row), (row, row), "{e}");
    }

    // A sparse-set component puts `es[4]` in a second archetype on the same table.
    world.insert(es[4], (Sparse(4),)).unwrap();
    let shared = ArchetypeId(world.entities().location(es[4]).unwrap().archetype_id);
    assert_ne!(shared, plain);
    assert!(world.archetypes()[plain.index()].is_listed(), "listed once the table is shared");
    assert!(world.archetypes()[shared.index()].is_listed());
    world.check_invariants();
    // `es[4]` left row 2 of `plain`'s list; the last entry, `es[3]`, took its place.
    assert_eq!(rows(&world, plain), [(es[0], 0), (es[5], 1), (es[3], 3)]);
    assert_eq!(rows(&world, shared), [(es[4], 2)]);
    // Rows still move in both lists as the shared table swap-removes.
    world.despawn(es[0]).unwrap();
    world.check_invariants();
    assert_eq!(rows(&world, plain), [(es[3], 0), (es[5], 1)]);
    assert_eq!(rows(&world, shared), [(es[4], 2)]);
    assert_eq!(world.remove::<(Sparse,)>(es[4]), Some((Sparse(4),)));
    assert!(world.archetypes()[plain.index()].is_listed(), "lists are never dropped");
    assert_eq!(rows(&world, plain), [(es[3], 0), (es[5], 1), (es[4], 2)]);
    for (i, e) in [(3, es[3]), (5, es[5]), (4, es[4])] {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)));
    }

    // An archetype with a sparse-set component whose table is new keeps no list either.
    let lone = world.spawn((Name("lone".into()), Sparse(9)));
    let lone_arch = ArchetypeId(world.entities().location(lone).unwrap().archetype_id);
    assert!(!world.archetypes()[lone_arch.index()].is_listed());
    assert_eq!(rows(&world, lone_arch), [(lone, 0)]);
    world.clear();
    world.check_invariants();
    assert!(world.archetypes().iter().all(Archetype::is_empty));
}

#[test]
fn planned_inserts_and_removes_keep_values_ticks_and_drops() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    let es: Vec<Entity> = (0..20).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    let spawned_at = world.change_tick();
    world.increment_change_tick();
    let inserted_at = world.change_tick();
    for &e in es.iter().rev().step_by(3) {
        world.insert(e, (Tracked::new(&drops), Vel(1.0, 2.0))).unwrap();
    }
    world.check_invariants();
    for (i, &e) in es.iter().enumerate() {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)));
        let moved = (19 - i) % 3 == 0;
        assert_eq!(world.get::<Vel>(e).is_some(), moved);
        if moved {
            let loc = world.entities().location(e).unwrap();
            let table = &world.tables()[world.table_id_of(e).unwrap().index()];
            let pos = world.components().id::<Pos>().unwrap();
            let vel = world.components().id::<Vel>().unwrap();
            let row = loc.table_row as usize;
            assert_eq!(table.column(pos).unwrap().added_ticks()[row], spawned_at);
            assert_eq!(table.column(vel).unwrap().added_ticks()[row], inserted_at);
        }
    }
    let mut removed = 0;
    for &e in &es {
        if let Some((tracked, vel)) = world.remove::<(Tracked, Vel)>(e) {
            assert_eq!(vel, Vel(1.0, 2.0));
            drop(tracked);
            removed += 1;
        }
    }
    assert_eq!(removed, 7);
    assert_eq!(drops.load(Ordering::SeqCst), 7, "each removed value dropped once, by its owner");
    assert!(matches!(
        world.try_remove::<(Tracked, Vel)>(es[0]),
        Err(EntityError::MissingComponent { .. })
    ));
    world.check_invariants();
    for (i, &e) in es.iter().enumerate() {
        assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)));
    }
    world.insert(es[4], (Tracked::new(&drops),)).unwrap();
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 8);
}

#[test]
fn sparse_inserts_and_removes_keep_values_ticks_and_drops() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = sparse_world();
    world.register_component::<Tracked>(StorageType::SparseSet).unwrap();
    let es: Vec<Entity> = (0..20).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    let tables_before = world.tables().len();
    world.increment_change_tick();
    let inserted_at = world.change_tick();
    // Two passes over the same transition: the second takes only cached edges.
    for pass in 0..2 {
        let before = world.edge_stats();
        for &e in es.iter().rev().step_by(3) {
            world.insert(e, (Tracked::new(&drops), Sparse(e.index()))).unwrap();
        }
        world.check_invariants();
        if pass == 1 {
            assert_eq!(world.edge_stats().misses, before.misses, "every edge was cached");
        }
        // Both directions take the sparse path, not the general one.
        let from = world.entities().location(es[0]).unwrap().archetype_id as usize;
        let to = world.entities().location(es[1]).unwrap().archetype_id as usize;
        assert!(world.archetypes()[from].insert_edges.iter().any(|e| e.plan == Edge::SPARSE));
        let sparse = world.components().id::<Sparse>().unwrap();
        let set = world.sparse_set(sparse).unwrap();
        assert_eq!(set.len(), 7);
        for (i, &e) in es.iter().enumerate() {
            let loc = world.entities().location(e).unwrap();
            assert_eq!(world.tables().len(), tables_before, "no table is made or entered");
            assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)));
            let moved = (19 - i) % 3 == 0;
            assert_eq!(world.get::<Sparse>(e), moved.then_some(&Sparse(e.index())));
            assert_eq!(world.get::<Tracked>(e).is_some(), moved);
            if moved {
                let dense = set.dense_index(e).unwrap();
                assert_eq!(set.added_ticks()[dense], inserted_at);
                assert_eq!(set.changed_ticks()[dense], inserted_at);
                assert!(world.archetypes()[loc.archetype_id as usize].contains(sparse));
            }
        }
        let mut removed = 0;
        for &e in &es {
            if let Some((tracked, value)) = world.remove::<(Tracked, Sparse)>(e) {
                if removed == 0 {
                    let edges = &world.archetypes()[to].remove_edges;
                    assert!(edges.iter().any(|e| e.plan == Edge::SPARSE));
                }
                assert_eq!(value, Sparse(e.index()));
                drop(tracked);
                removed += 1;
            }
        }
        assert_eq!(removed, 7);
        assert_eq!(drops.load(Ordering::SeqCst), 7 * (pass + 1), "each removed value once");
        world.check_invariants();
    }
    assert!(matches!(
        world.try_remove::<(Tracked, Sparse)>(es[0]),
        Err(EntityError::MissingComponent { .. })
    ));
    // Removing one of the two keeps the other in its set.
    world.insert(es[4], (Tracked::new(&drops), Sparse(4))).unwrap();
    assert_eq!(world.remove::<(Sparse,)>(es[4]), Some((Sparse(4),)));
    assert!(world.get::<Tracked>(es[4]).is_some());
    world.check_invariants();
    // A stale entity refuses the bundle and drops it once.
    world.despawn(es[5]).unwrap();
    assert!(matches!(
        world.insert(es[5], (Tracked::new(&drops), Sparse(5))),
        Err(EntityError::NoSuchEntity(e)) if e == es[5]
    ));
    assert_eq!(drops.load(Ordering::SeqCst), 15);
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 16, "the value left in the world dropped with it");
}
