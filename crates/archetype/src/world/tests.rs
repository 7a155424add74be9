use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use folio_storage::{Entity, StorageConfig};
use proptest::prelude::*;

use super::*;
use crate::archetype::{Archetype, ArchetypeId, Edge};
use crate::bundle::Bundle;
use crate::component::StorageType;
use crate::error::{ComponentError, EntityError};
use crate::table::TableId;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pos(f32, f32);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Vel(f32, f32);
#[derive(Debug, Clone, PartialEq)]
struct Name(String);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Tag;
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sparse(u32);
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(align(4096))]
struct PageAligned(u64);

/// Counts drops; panics on drop when `panic` is set (and not already unwinding).
#[derive(Debug)]
struct Tracked {
    drops: Arc<AtomicUsize>,
    panic: bool,
}

impl Tracked {
    fn new(drops: &Arc<AtomicUsize>) -> Self {
        Self { drops: drops.clone(), panic: false }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.panic && !std::thread::panicking() {
            panic!("Tracked panics on drop");
        }
    }
}

fn sparse_world() -> World {
    let mut world = World::new();
    world.register_component::<Sparse>(StorageType::SparseSet).unwrap();
    world
}

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
fn despawn_batch_despawns_as_one_by_one() {
    // Long batches (every entity prefetched ahead), short ones (the look-ahead never fills),
    // repeats, stale and unknown ids, a reserved entity, tables and sparse sets, drops counted.
    let drops = Arc::new(AtomicUsize::new(0));
    let make = |world: &mut World| -> Vec<Entity> {
        (0..300u32)
            .map(|i| match i % 3 {
                0 => world.spawn((Pos(i as f32, 0.0), Tracked::new(&drops))),
                1 => world.spawn((Sparse(i), Tracked::new(&drops))),
                _ => world.spawn((Pos(i as f32, 1.0), Vel(0.0, 0.0), PageAligned(u64::from(i)))),
            })
            .collect()
    };
    let mut batched = sparse_world();
    let mut single = sparse_world();
    let es = make(&mut batched);
    assert_eq!(es, make(&mut single));
    let gone = batched.spawn((Tag,));
    batched.despawn(gone).unwrap();
    let never = Entity::from_bits(1 << 32 | 1_000_000).unwrap();
    let reserved = batched.reserve_entity();

    // 200 distinct entities in a scattered order, then 20 of them again.
    let mut picks: Vec<Entity> = (0..200).map(|k| es[(k * 7919) % es.len()]).collect();
    picks.extend_from_within(..20);
    picks.extend([gone, never, reserved, es[5], es[5]]);
    let before = drops.load(Ordering::SeqCst);
    let despawned = batched.despawn_batch(picks.iter().copied());
    let mut expected = 0;
    for &e in &picks {
        if e != reserved && single.despawn(e).is_ok() {
            expected += 1;
        }
    }
    assert_eq!(despawned, expected + 1, "the reserved entity is flushed, then despawned");
    assert!(!batched.contains(reserved));
    assert_eq!(batched.len(), single.len());
    for &e in &es {
        assert_eq!(batched.contains(e), single.contains(e));
        assert_eq!(batched.get::<Pos>(e), single.get::<Pos>(e));
        assert_eq!(batched.get::<Sparse>(e), single.get::<Sparse>(e));
        assert_eq!(batched.get::<PageAligned>(e), single.get::<PageAligned>(e));
    }
    let both = drops.load(Ordering::SeqCst) - before;
    assert_eq!(both % 2, 0, "each world dropped the same values");
    batched.check_invariants();

    // Short batches and an empty one.
    let rest: Vec<Entity> = es.iter().copied().filter(|&e| batched.contains(e)).collect();
    assert_eq!(batched.despawn_batch([]), 0);
    assert_eq!(batched.despawn_batch(rest[..3].iter().copied()), 3);
    assert_eq!(batched.despawn_batch(rest[3..12].iter().copied()), 9);
    assert_eq!(batched.despawn_batch(rest[12..].iter().copied()), rest.len() - 12);
    assert!(batched.is_empty());
    batched.check_invariants();
    drop((batched, single));
    assert_eq!(drops.load(Ordering::SeqCst), 400, "every value dropped once");
}

#[test]
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
fn resources() {
    let mut world = World::new();
    assert!(world.resource::<u32>().is_none());
    assert_eq!(world.insert_resource(5u32), None);
    assert_eq!(world.insert_resource(6u32), Some(5));
    *world.resource_mut::<u32>().unwrap() += 1;
    assert_eq!(world.resource::<u32>(), Some(&7));
    assert!(world.contains_resource::<u32>());
    assert_eq!(world.remove_resource::<u32>(), Some(7));
    assert!(!world.contains_resource::<u32>());
}

#[test]
fn resource_ticks_follow_inserts_replacements_and_mutable_borrows() {
    use crate::ResourceTicks;
    let mut world = World::new();
    assert_eq!(world.resource_ticks::<u32>(), None);
    let t0 = world.increment_change_tick_mut() + 1;
    world.insert_resource(1u32);
    assert_eq!(world.resource_ticks::<u32>(), Some(ResourceTicks { added: t0, changed: t0 }));
    // A replacement keeps the added tick and is a change.
    let t1 = world.increment_change_tick_mut() + 1;
    assert_eq!(world.insert_resource(2u32), Some(1));
    assert_eq!(world.resource_ticks::<u32>(), Some(ResourceTicks { added: t0, changed: t1 }));
    let ticks = world.resource_ticks::<u32>().unwrap();
    assert!(!ticks.is_added(t0, t1 + 1) && ticks.is_changed(t0, t1 + 1));
    assert!(!ticks.is_changed(t1, t1 + 1));
    // Reading marks nothing; a mutable borrow does.
    let t2 = world.increment_change_tick_mut() + 1;
    assert_eq!(world.resource::<u32>(), Some(&2));
    assert_eq!(world.resource_ticks::<u32>().unwrap().changed, t1);
    *world.resource_mut::<u32>().unwrap() += 1;
    assert_eq!(world.resource_ticks::<u32>(), Some(ResourceTicks { added: t0, changed: t2 }));
    // Removed and inserted again: added anew.
    world.increment_change_tick_mut();
    let t3 = world.change_tick();
    assert_eq!(world.remove_resource::<u32>(), Some(3));
    assert_eq!(world.resource_ticks::<u32>(), None);
    world.insert_resource(4u32);
    assert_eq!(world.resource_ticks::<u32>(), Some(ResourceTicks { added: t3, changed: t3 }));
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

#[test]
fn storage_type_conflicts_are_errors() {
    let mut world = World::new();
    world.spawn((Pos(0.0, 0.0),));
    assert!(world.register_component::<Pos>(StorageType::SparseSet).is_err());
}

#[test]
fn a_large_despawn_batch_sweeps_table_only_archetypes_and_despawns_the_rest_one_by_one() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = sparse_world();
    let plain: Vec<Entity> =
        (0..600).map(|i| world.spawn((Pos(i as f32, 0.0), Tracked::new(&drops)))).collect();
    let other: Vec<Entity> = (0..300).map(|i| world.spawn((Vel(i as f32, 0.0),))).collect();
    let sparse: Vec<Entity> =
        (0..50).map(|i| world.spawn((Pos(i as f32, 1.0), Sparse(i)))).collect();
    let dead = world.spawn((Pos(0.0, 0.0),));
    world.despawn(dead).unwrap();
    // Every third plain entity (holes all over the table), all of `other` (a whole table:
    // nothing moves), every other sparse-set one (despawned one at a time), a dead id and
    // repeats, padded with the dead id up to the size that sweeps.
    let mut batch: Vec<Entity> = plain.iter().copied().step_by(3).collect();
    batch.extend(&other);
    batch.extend(sparse.iter().step_by(2));
    batch.extend([dead, plain[0], other[5]]);
    batch.resize(BULK_DESPAWN_FROM, dead);
    let despawned = world.despawn_batch(batch.iter().copied());
    assert_eq!(despawned, 200 + 300 + 25);
    world.check_invariants();
    assert_eq!(drops.load(Ordering::SeqCst), 200, "each despawned value dropped once");
    for (i, &e) in plain.iter().enumerate() {
        assert_eq!(world.contains(e), i % 3 != 0);
        if i % 3 != 0 {
            assert_eq!(world.get::<Pos>(e), Some(&Pos(i as f32, 0.0)), "moved with its row");
        }
    }
    assert!(other.iter().all(|&e| !world.contains(e)));
    for (i, &e) in sparse.iter().enumerate() {
        assert_eq!(world.get::<Sparse>(e).is_some(), i % 2 == 1);
    }
    assert_eq!(world.len(), 400 + 25);
    // The freed ids are handed out again, and the world works on.
    let again = world.spawn((Pos(9.0, 9.0),));
    assert_eq!(world.get::<Pos>(again), Some(&Pos(9.0, 9.0)));
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 600);
}

#[test]
fn a_panicking_drop_mid_sweep_still_despawns_every_marked_entity() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    let es: Vec<Entity> = (0..500).map(|_| world.spawn((Tracked::new(&drops),))).collect();
    world.get_mut::<Tracked>(es[10]).unwrap().panic = true;
    let batch: Vec<Entity> = es.iter().copied().filter(|e| e.index() % 2 == 0).collect();
    let more: Vec<Entity> = (0..200).map(|i| world.spawn((Pos(i as f32, 0.0),))).collect();
    let mut all: Vec<Entity> = batch.iter().chain(&more).copied().collect();
    all.resize(BULK_DESPAWN_FROM, batch[0]);
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.despawn_batch(all)));
    assert!(result.is_err());
    world.check_invariants();
    assert_eq!(drops.load(Ordering::SeqCst), 250, "every marked value dropped once");
    assert!(batch.iter().all(|&e| !world.contains(e)));
    assert!(more.iter().all(|&e| !world.contains(e)), "the other table was swept too");
    assert_eq!(world.len(), 250);
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 500);
}

#[test]
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

// ----- insert_batch / remove_batch -----

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

/// 64 bytes: a 64 KiB reservation holds 1,024 of them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Wide(u32, [u8; 60]);

#[test]
fn batch_reservations_add_up_over_sources_that_share_a_target_table() {
    let mut world = World::with_storage(StorageConfig::new().with_reserve_bytes(64 << 10));
    world.register_component::<Sparse>(StorageType::SparseSet).unwrap();
    for _ in 0..1000 {
        world.spawn((Pos(0.0, 0.0), Wide(0, [0; 60])));
    }
    // {Pos} and {Pos, Sparse} both go to the (Pos, Wide) table, which has room for 24 more.
    let a: Vec<Entity> = (0..20).map(|_| world.spawn((Pos(1.0, 0.0),))).collect();
    let b: Vec<Entity> = (0..20).map(|i| world.spawn((Pos(2.0, 0.0), Sparse(i)))).collect();
    let batch: Vec<Entity> = a.iter().chain(&b).copied().collect();
    let result = world.insert_batch(batch.iter().map(|&e| (e, (Wide(1, [1; 60]),))));
    assert!(matches!(result, Err(EntityError::Storage(_))));
    assert!(batch.iter().all(|&e| !world.has::<Wide>(e)), "nothing changed");
    world.check_invariants();
    // The same the other way: 40 rows out of the (Pos, Wide) table into full ones is fine,
    // and a batch that fits goes through.
    world.insert_batch(batch[..20].iter().map(|&e| (e, (Wide(2, [2; 60]),)))).unwrap();
    let removed = world.remove_batch::<(Wide,)>(batch[..20].iter().copied()).unwrap();
    assert_eq!(removed.len(), 20);
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

#[test]
fn a_refused_spawn_or_insert_drops_every_value_of_its_bundle_even_when_one_drop_panics() {
    /// 64 bytes, sparse-set stored: 1,024 fill a 64 KiB reservation.
    #[derive(Debug)]
    struct Full(#[allow(dead_code)] [u8; 64]);
    /// A second tracked component type, dropped after the panicking one.
    #[derive(Debug)]
    struct Also(#[allow(dead_code)] Tracked);
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::with_storage(StorageConfig::new().with_reserve_bytes(64 << 10));
    world.register_component::<Full>(StorageType::SparseSet).unwrap();
    while world.try_spawn((Full([0; 64]),)).is_ok() {}
    let e = world.spawn((Pos(0.0, 0.0),));
    let len = world.len();
    let bundle = || {
        (Tracked { drops: drops.clone(), panic: true }, Full([1; 64]), Also(Tracked::new(&drops)))
    };
    // A spawn into an archetype with a sparse-set component whose set is full: refused, and
    // its values dropped, the second one too although the first one's `Drop` panics.
    let spawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = world.try_spawn(bundle());
    }));
    assert!(spawn.is_err(), "the first value's drop panics");
    assert_eq!(drops.load(Ordering::SeqCst), 2, "both tracked values of the spawn dropped");
    assert_eq!(world.len(), len);
    world.check_invariants();
    // The same for an insert of a bundle of both storage types (the general path).
    let insert = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = world.insert(e, bundle());
    }));
    assert!(insert.is_err(), "the first value's drop panics");
    assert_eq!(drops.load(Ordering::SeqCst), 4, "both tracked values of the insert dropped");
    assert_eq!(world.get::<Pos>(e), Some(&Pos(0.0, 0.0)));
    assert!(!world.has::<Tracked>(e) && !world.has::<Also>(e));
    world.check_invariants();
}

// ----- model test -----

#[derive(Debug, Clone)]
enum Op {
    Spawn(u8, u32),
    Despawn(usize),
    Insert(usize, u8, u32),
    Remove(usize, u8),
    Get(usize),
    /// Reserve `1 + k % 3` entities and give all but a third one the bundle of `m` through
    /// `spawn_reserved` (the third stays empty).
    SpawnReserved(u8, u32, u8),
    /// Despawn `n % 24` known entities (repeats possible) picked from `i` on, in one batch.
    DespawnBatch(usize, u8),
    /// Despawn `BULK_DESPAWN_FROM` picks of known entities from `i` on, a stride `1 + s % 7`
    /// apart (repeats and dead ones included), in one batch: the sweep path.
    DespawnMany(usize, u8),
    /// `insert_batch` of the bundle `m` selects (value `v + k` for the `k`-th pick) into
    /// `n % 24` entities: with `tail`, the last rows of known entity `i`'s archetype in row
    /// order (the block path), otherwise picks as in `DespawnBatch`.
    InsertBatch(usize, u8, u8, u32, bool),
    /// `remove_batch` of the bundle `m % 3` selects, from entities picked as in `InsertBatch`.
    RemoveBatch(usize, u8, u8, bool),
}

/// The entities a batch op picks: `n % 24` of them, see [`Op::InsertBatch`].
fn batch_picks(world: &World, known: &[Entity], i: usize, n: u8, tail: bool) -> Vec<Entity> {
    let n = usize::from(n) % 24;
    let first = known[i % known.len()];
    if tail {
        let Some(loc) = world.entities().location(first) else { return vec![first] };
        let list = world.archetype_entities(ArchetypeId(loc.archetype_id));
        let take = n.min(list.len());
        return list.range(list.len() - take, list.len()).map(|e| e.entity).collect();
    }
    (0..n)
        .map(|k| {
            let k = k - usize::from(k % 3 == 2);
            known[(i % known.len() + k * 31) % known.len()]
        })
        .collect()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<u8>(), any::<u32>()).prop_map(|(m, v)| Op::Spawn(m, v)),
        1 => any::<usize>().prop_map(Op::Despawn),
        3 => (any::<usize>(), any::<u8>(), any::<u32>()).prop_map(|(e, m, v)| Op::Insert(e, m, v)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(e, m)| Op::Remove(e, m)),
        2 => any::<usize>().prop_map(Op::Get),
        2 => (any::<u8>(), any::<u32>(), any::<u8>()).prop_map(|(m, v, k)| Op::SpawnReserved(m, v, k)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, n)| Op::DespawnBatch(i, n)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, s)| Op::DespawnMany(i, s)),
        1 => (any::<usize>(), any::<u8>(), any::<u8>(), any::<u32>(), any::<bool>())
            .prop_map(|(i, n, m, v, t)| Op::InsertBatch(i, n, m, v, t)),
        1 => (any::<usize>(), any::<u8>(), any::<u8>(), any::<bool>())
            .prop_map(|(i, n, m, t)| Op::RemoveBatch(i, n, m, t)),
    ]
}

#[derive(Debug, Clone, PartialEq)]
struct A(u32);
#[derive(Debug, Clone, PartialEq)]
struct B(String);
#[derive(Debug, Clone, PartialEq)]
struct S(u32);

/// Which of A (table), B (table, needs drop) and S (sparse) the bits of `m` select.
type Model = HashMap<Entity, Values>;

/// An entity's A, B and S in the model.
type Values = (Option<u32>, Option<String>, Option<u32>);

fn apply_insert(world: &mut World, e: Entity, m: u8, v: u32) -> Result<(), EntityError> {
    apply_bundle(world, e, m, v, false)
}

/// Adds the bundle `m` selects, with `insert` or (`reserved`) with `spawn_reserved`.
fn apply_bundle(
    world: &mut World,
    e: Entity,
    m: u8,
    v: u32,
    reserved: bool,
) -> Result<(), EntityError> {
    fn put<T: Bundle>(
        world: &mut World,
        e: Entity,
        bundle: T,
        reserved: bool,
    ) -> Result<(), EntityError> {
        if reserved { world.spawn_reserved(e, bundle) } else { world.insert(e, bundle) }
    }
    match m % 7 {
        0 => put(world, e, (A(v),), reserved),
        1 => put(world, e, (B(v.to_string()),), reserved),
        2 => put(world, e, (S(v),), reserved),
        3 => put(world, e, (A(v), B(v.to_string())), reserved),
        4 => put(world, e, (S(v), A(v)), reserved),
        5 => put(world, e, (B(v.to_string()), S(v)), reserved),
        _ => put(world, e, (A(v), B(v.to_string()), S(v)), reserved),
    }
}

/// `insert_batch` of the bundle `m` selects, value `v + k` into the `k`-th of `picks`.
fn apply_insert_batch(
    world: &mut World,
    picks: &[Entity],
    m: u8,
    v: u32,
) -> Result<(), EntityError> {
    let value = |k: usize| v.wrapping_add(k as u32);
    let each = picks.iter().enumerate();
    match m % 7 {
        0 => world.insert_batch(each.map(|(k, &e)| (e, (A(value(k)),)))),
        1 => world.insert_batch(each.map(|(k, &e)| (e, (B(value(k).to_string()),)))),
        2 => world.insert_batch(each.map(|(k, &e)| (e, (S(value(k)),)))),
        3 => world.insert_batch(each.map(|(k, &e)| (e, (A(value(k)), B(value(k).to_string()))))),
        4 => world.insert_batch(each.map(|(k, &e)| (e, (S(value(k)), A(value(k)))))),
        5 => world.insert_batch(each.map(|(k, &e)| (e, (B(value(k).to_string()), S(value(k)))))),
        _ => world.insert_batch(
            each.map(|(k, &e)| (e, (A(value(k)), B(value(k).to_string()), S(value(k))))),
        ),
    }
}

fn mask(m: u8) -> (bool, bool, bool) {
    match m % 7 {
        0 => (true, false, false),
        1 => (false, true, false),
        2 => (false, false, true),
        3 => (true, true, false),
        4 => (true, false, true),
        5 => (false, true, true),
        _ => (true, true, true),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 16 }))]
    #[test]
    fn world_matches_a_hashmap_model(
        ops in proptest::collection::vec(op(), if cfg!(miri) { 40 } else { 10_000 }),
        s_sparse in any::<bool>(),
    ) {
        // With S in a sparse set, most archetypes share tables (and keep lists); with S in
        // tables none do, and batches of an archetype's last rows take the block path.
        let mut world = World::new();
        let storage = if s_sparse { StorageType::SparseSet } else { StorageType::Table };
        world.register_component::<S>(storage).unwrap();
        let mut model: Model = HashMap::new();
        let mut known: Vec<Entity> = Vec::new();
        for op in ops {
            match op {
                Op::Spawn(m, v) => {
                    let e = world.spawn((A(v),));
                    model.insert(e, (Some(v), None, None));
                    known.push(e);
                    let (_, b, s) = mask(m);
                    if b || s {
                        apply_insert(&mut world, e, m, v).unwrap();
                        let entry = model.get_mut(&e).unwrap();
                        let (a, b, s) = mask(m);
                        if a { entry.0 = Some(v); }
                        if b { entry.1 = Some(v.to_string()); }
                        if s { entry.2 = Some(v); }
                    }
                }
                Op::Despawn(i) if !known.is_empty() => {
                    let e = known[i % known.len()];
                    prop_assert_eq!(world.despawn(e).is_ok(), model.remove(&e).is_some());
                }
                Op::DespawnBatch(i, n) if !known.is_empty() => {
                    // Every third pick repeats the one before: a repeat is skipped.
                    let picks: Vec<Entity> = (0..usize::from(n) % 24)
                        .map(|k| {
                            let k = k - usize::from(k % 3 == 2);
                            known[(i % known.len() + k * 31) % known.len()]
                        })
                        .collect();
                    let expected = picks.iter().filter(|e| model.remove(e).is_some()).count();
                    prop_assert_eq!(world.despawn_batch(picks), expected);
                }
                Op::DespawnMany(i, stride) if !known.is_empty() => {
                    let stride = 1 + usize::from(stride % 7);
                    let picks: Vec<Entity> = (0..BULK_DESPAWN_FROM)
                        .map(|k| known[(i % known.len() + k * stride) % known.len()])
                        .collect();
                    let expected = picks.iter().filter(|e| model.remove(e).is_some()).count();
                    prop_assert_eq!(world.despawn_batch(picks), expected);
                }
                Op::Insert(i, m, v) if !known.is_empty() => {
                    let e = known[i % known.len()];
                    let result = apply_insert(&mut world, e, m, v);
                    match model.get_mut(&e) {
                        Some(entry) => {
                            prop_assert!(result.is_ok());
                            let (a, b, s) = mask(m);
                            if a { entry.0 = Some(v); }
                            if b { entry.1 = Some(v.to_string()); }
                            if s { entry.2 = Some(v); }
                        }
                        None => prop_assert!(matches!(result, Err(EntityError::NoSuchEntity(_)))),
                    }
                }
                Op::Remove(i, m) if !known.is_empty() => {
                    let e = known[i % known.len()];
                    let entry = model.get_mut(&e);
                    match m % 3 {
                        0 => {
                            let expected = entry.and_then(|en| en.0.take()).map(|v| (A(v),));
                            prop_assert_eq!(world.remove::<(A,)>(e), expected);
                        }
                        1 => {
                            let got = world.remove::<(B, S)>(e);
                            let expected = match entry {
                                Some(en) if en.1.is_some() && en.2.is_some() => {
                                    Some((B(en.1.take().unwrap()), S(en.2.take().unwrap())))
                                }
                                _ => None,
                            };
                            prop_assert_eq!(got, expected);
                        }
                        _ => {
                            let expected = entry.and_then(|en| en.2.take()).map(|v| (S(v),));
                            prop_assert_eq!(world.remove::<(S,)>(e), expected);
                        }
                    }
                }
                Op::SpawnReserved(m, v, k) => {
                    let es: Vec<Entity> = (0..1 + k % 3).map(|_| world.reserve_entity()).collect();
                    for (j, &e) in es.iter().enumerate() {
                        known.push(e);
                        let entry = model.entry(e).or_insert((None, None, None));
                        if j == 2 {
                            continue; // stays reserved until the flush below, then empty
                        }
                        apply_bundle(&mut world, e, m, v, true).unwrap();
                        let (a, b, s) = mask(m);
                        if a { entry.0 = Some(v); }
                        if b { entry.1 = Some(v.to_string()); }
                        if s { entry.2 = Some(v); }
                    }
                    // A table-only bundle spawns the oldest reservation alone, so the third
                    // may still be reserved: flush it (a sparse bundle flushed it already).
                    world.flush();
                }
                Op::InsertBatch(i, n, m, v, tail) if !known.is_empty() => {
                    let picks = batch_picks(&world, &known, i, n, tail);
                    let result = apply_insert_batch(&mut world, &picks, m, v);
                    match picks.iter().find(|e| !model.contains_key(e)) {
                        Some(&dead) => {
                            prop_assert!(matches!(result, Err(EntityError::NoSuchEntity(e)) if e == dead));
                        }
                        None => {
                            prop_assert!(result.is_ok());
                            let (a, b, s) = mask(m);
                            for (k, e) in picks.iter().enumerate() {
                                let value = v.wrapping_add(k as u32);
                                let entry = model.get_mut(e).unwrap();
                                if a { entry.0 = Some(value); }
                                if b { entry.1 = Some(value.to_string()); }
                                if s { entry.2 = Some(value); }
                            }
                        }
                    }
                }
                Op::RemoveBatch(i, n, m, tail) if !known.is_empty() => {
                    let picks = batch_picks(&world, &known, i, n, tail);
                    // Which entity the check stops at, if any: dead, or lacking a component.
                    let (a, b, s) = [(true, false, false), (false, true, true), (false, false, true)][usize::from(m % 3)];
                    let bad = picks.iter().find_map(|e| match model.get(e) {
                        None => Some((*e, true)),
                        Some(en) if (a && en.0.is_none()) || (b && en.1.is_none()) || (s && en.2.is_none()) => Some((*e, false)),
                        Some(_) => None,
                    });
                    let twice = picks.iter().enumerate().find(|&(k, e)| picks[..k].contains(e)).map(|(_, &e)| e);
                    let result: Result<Vec<Values>, EntityError> = match m % 3 {
                        0 => world.remove_batch::<(A,)>(picks.iter().copied()).map(|v| v.into_iter().map(|(x,)| (Some(x.0), None, None)).collect()),
                        1 => world.remove_batch::<(B, S)>(picks.iter().copied()).map(|v| v.into_iter().map(|(x, y)| (None, Some(x.0), Some(y.0))).collect()),
                        _ => world.remove_batch::<(S,)>(picks.iter().copied()).map(|v| v.into_iter().map(|(y,)| (None, None, Some(y.0))).collect()),
                    };
                    match (bad, twice) {
                        (Some((e, true)), _) => prop_assert!(matches!(result, Err(EntityError::NoSuchEntity(x)) if x == e)),
                        (Some((e, false)), _) => {
                            let missing = matches!(result, Err(EntityError::MissingComponent { entity, .. }) if entity == e);
                            prop_assert!(missing);
                        }
                        (None, Some(e)) => prop_assert!(matches!(result, Err(EntityError::ListedTwice(x)) if x == e)),
                        (None, None) => {
                            let got = result.unwrap();
                            prop_assert_eq!(got.len(), picks.len());
                            for (e, value) in picks.iter().zip(got) {
                                let entry = model.get_mut(e).unwrap();
                                let expected = (
                                    if a { entry.0.take() } else { None },
                                    if b { entry.1.take() } else { None },
                                    if s { entry.2.take() } else { None },
                                );
                                prop_assert_eq!(value, expected);
                            }
                        }
                    }
                }
                Op::Get(i) if !known.is_empty() => {
                    let e = known[i % known.len()];
                    let expected = model.get(&e);
                    prop_assert_eq!(world.contains(e), expected.is_some());
                    prop_assert_eq!(world.get::<A>(e).map(|a| a.0), expected.and_then(|m| m.0));
                    prop_assert_eq!(world.get::<B>(e).map(|b| b.0.clone()), expected.and_then(|m| m.1.clone()));
                    prop_assert_eq!(world.get::<S>(e).map(|s| s.0), expected.and_then(|m| m.2));
                }
                _ => {}
            }
            prop_assert_eq!(world.len(), model.len());
        }
        world.check_invariants();
        for (&e, (a, b, s)) in &model {
            prop_assert_eq!(world.get::<A>(e).map(|x| x.0), *a);
            prop_assert_eq!(world.get::<B>(e).map(|x| x.0.clone()), b.clone());
            prop_assert_eq!(world.get::<S>(e).map(|x| x.0), *s);
        }
    }
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

/// `check_invariants` is what the panic-safety tests lean on, so it must notice each kind of
/// breakage it claims to check.
#[test]
#[cfg_attr(miri, ignore = "catches panics it provokes on purpose; nothing unsafe runs")]
fn check_invariants_notices_broken_worlds() {
    fn broken(corrupt: impl FnOnce(&mut World, Entity, Entity)) -> bool {
        let mut world = sparse_world();
        let a = world.spawn((Pos(0.0, 0.0), Sparse(1)));
        let b = world.spawn((Pos(1.0, 1.0), Vel(0.0, 0.0)));
        world.check_invariants();
        corrupt(&mut world, a, b);
        let world = std::panic::AssertUnwindSafe(world);
        std::panic::catch_unwind(|| world.check_invariants()).is_err()
    }
    // A wrong table row in an entity's location.
    assert!(broken(|w, a, _| {
        let mut loc = w.entities.location(a).unwrap();
        loc.table_row += 1;
        w.entities.set_location(a, loc);
    }));
    // A wrong archetype in an entity's location.
    assert!(broken(|w, a, b| {
        let other = w.entities.location(b).unwrap();
        let mut loc = w.entities.location(a).unwrap();
        loc.archetype_id = other.archetype_id;
        w.entities.set_location(a, loc);
    }));
    // A sparse-set value left behind for an entity whose archetype lacks the component.
    assert!(broken(|w, _, b| {
        let id = w.components.id::<Sparse>().unwrap();
        let set = w.sparse_sets[id.index()].as_mut().unwrap();
        let value = std::mem::ManuallyDrop::new(Sparse(9));
        // SAFETY:
        // - the pointer is a `Sparse`, the set's type, moved in once (`ManuallyDrop`).
        unsafe { set.insert(b, (&raw const value).cast_mut().cast(), 0) }.unwrap();
    }));
    // An archetype row that is not the table row in an archetype without a list.
    assert!(broken(|w, _, b| {
        let mut loc = w.entities.location(b).unwrap();
        assert!(!w.archetypes[loc.archetype_id as usize].is_listed());
        loc.archetype_row += 1;
        w.entities.set_location(b, loc);
    }));
    // An entity freed behind the world's back.
    assert!(broken(|w, _, b| {
        w.entities.free(b);
    }));
}

#[test]
fn entity_views_read_write_and_refuse_dead_entities() {
    let mut world = sparse_world();
    let e = world.spawn((Pos(1.0, 2.0), Sparse(3)));
    let view = world.entity(e).unwrap();
    assert_eq!(view.id(), e);
    assert_eq!(view.get::<Pos>(), Some(&Pos(1.0, 2.0)));
    assert_eq!(view.get::<Sparse>(), Some(&Sparse(3)));
    assert!(view.contains::<Sparse>() && !view.contains::<Vel>());
    assert_eq!(view.get::<Vel>(), None);
    let names: Vec<_> = view.components().map(|c| c.name()).collect();
    assert_eq!(names.len(), 2);
    assert!(
        names.iter().any(|n| n.ends_with("Pos")) && names.iter().any(|n| n.ends_with("Sparse"))
    );
    assert_eq!(view.archetype().len(), 1);
    assert!(format!("{view:?}").contains("Sparse"));

    let tick = world.increment_change_tick();
    let mut view = world.entity_mut(e).unwrap();
    view.get_mut::<Pos>().unwrap().0 = 5.0;
    view.insert((Vel(1.0, 1.0),)).unwrap().insert((Tag,)).unwrap();
    assert_eq!(view.remove::<(Sparse,)>(), Some((Sparse(3),)));
    assert_eq!(view.remove::<(Sparse,)>(), None);
    assert!(view.insert((Pos(0.0, 0.0), Pos(1.0, 1.0))).is_err(), "duplicate component");
    assert_eq!(view.as_ref().get::<Pos>(), Some(&Pos(5.0, 2.0)));
    let loc = world.entities().location(e).unwrap();
    let table = &world.tables()[world.table_id_of(e).unwrap().index()];
    let pos = world.components().id::<Pos>().unwrap();
    assert!(table.column(pos).unwrap().changed_ticks()[loc.table_row as usize] > tick);
    world.check_invariants();

    world.entity_mut(e).unwrap().despawn();
    assert!(!world.contains(e));
    assert!(matches!(world.entity(e), Err(EntityError::NoSuchEntity(x)) if x == e));
    assert!(matches!(world.entity_mut(e), Err(EntityError::NoSuchEntity(x)) if x == e));
    let reused = world.spawn((Pos(0.0, 0.0),));
    assert!(world.entity(e).is_err() && world.entity(reused).is_ok(), "stale id after reuse");
    world.check_invariants();
}

#[test]
fn increment_change_tick_mut_hands_out_the_same_ticks_as_the_atomic_one() {
    let mut world = World::new();
    let start = world.change_tick();
    assert_eq!(world.increment_change_tick(), start);
    assert_eq!(world.increment_change_tick_mut(), start + 1);
    assert_eq!(world.increment_change_tick(), start + 2);
    assert_eq!(world.change_tick(), start + 3);
    // It wraps as the atomic one does.
    *world.change_tick.get_mut() = u32::MAX;
    assert_eq!(world.increment_change_tick_mut(), u32::MAX);
    assert_eq!(world.change_tick(), 0);
}

#[test]
fn spawn_batch_past_an_exhausted_reservation_keeps_every_row_that_fits() {
    /// 64 bytes: 1,024 fit in a 64 KiB reservation.
    #[derive(Debug, PartialEq)]
    struct Wide(u32, [u8; 60]);
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::with_storage(StorageConfig::new().with_reserve_bytes(64 << 10));
    let before = world.spawn((Tracked::new(&drops), Wide(u32::MAX, [0; 60])));
    let made = AtomicUsize::new(0);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.spawn_batch((0..1500u32).map(|i| {
            made.fetch_add(1, Ordering::SeqCst);
            (Tracked::new(&drops), Wide(i, [i as u8; 60]))
        }))
    }));
    let message = result.unwrap_err();
    let message = message.downcast_ref::<String>().expect("a formatted panic message");
    assert!(message.contains("World::spawn"), "{message}");
    // Every row that fits was spawned, complete; the bundle that did not fit was dropped and
    // the iterator was not run further.
    assert_eq!(world.len(), 1024);
    assert_eq!(made.load(Ordering::SeqCst), 1024);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    world.check_invariants();
    let mut seen: Vec<u32> = Vec::new();
    for archetype in world.archetypes() {
        for ae in world.archetype_entities(archetype.id()).iter() {
            let wide = world.get::<Wide>(ae.entity).unwrap();
            if wide.0 != u32::MAX {
                assert_eq!(wide.1, [wide.0 as u8; 60]);
            }
            seen.push(wide.0);
        }
    }
    seen.sort_unstable();
    let expected: Vec<u32> = (0..1023).chain([u32::MAX]).collect();
    assert_eq!(seen, expected);
    assert_eq!(world.get::<Wide>(before).unwrap().0, u32::MAX);
    // Rows come back after despawns.
    world.despawn(before).unwrap();
    let more = world.spawn_batch((0..1).map(|_| (Tracked::new(&drops), Wide(7, [7; 60]))));
    assert_eq!(world.get::<Wide>(more[0]), Some(&Wide(7, [7; 60])));
    world.check_invariants();
    drop(world);
    assert_eq!(drops.load(Ordering::SeqCst), 1 + 1024 + 1);
}

#[test]
fn a_refused_spawn_with_sparse_components_hands_out_no_entity_id() {
    /// 64 bytes, sparse-set stored: 1,024 fill a 64 KiB reservation.
    #[derive(Debug)]
    struct Full(#[allow(dead_code)] [u8; 64]);
    let world = || {
        let mut world = World::with_storage(StorageConfig::new().with_reserve_bytes(64 << 10));
        world.register_component::<Full>(StorageType::SparseSet).unwrap();
        for _ in 0..1024 {
            world.spawn((Full([0; 64]),));
        }
        world
    };
    // Two worlds alike, each with its sparse set full; in one a spawn into the set is refused.
    let (mut refused, mut clean) = (world(), world());
    assert!(matches!(refused.try_spawn((Full([1; 64]),)), Err(EntityError::Storage(_))));
    refused.check_invariants();
    // Nothing changed, so the next entity of each is the same (`Entities` hands out the ids).
    for _ in 0..2 {
        assert_eq!(refused.spawn((Pos(1.0, 1.0),)), clean.spawn((Pos(1.0, 1.0),)));
    }
    assert_eq!(refused.entities().max_entities(), clean.entities().max_entities());
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
