//! World tests: the shared fixtures, the model test against a `HashMap`, the tests `.ci/run`
//! names by their full path, and the topic modules with the rest.

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

// The tests by topic. The tests that stay in this file below are those `.ci/run` names by their
// full path (`world::tests::...`), so their path must not change, and the model test.
mod access;
mod batch;
mod despawn;
mod insert_remove;
mod spawn;

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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
