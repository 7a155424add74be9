//! `par_iter` and `par_iter_mut`: every matched entity is visited exactly once, whatever the
//! pool size, batch size and iteration mode, on a world of many tables of uneven sizes.
//!
//! Under miri these need `MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks
//! -Zmiri-disable-isolation"`: rayon's crossbeam-epoch casts integers to pointers (so no
//! `-Zmiri-strict-provenance`), breaks Stacked Borrows in its intrusive list (crossbeam issue
//! 545; it is clean under Tree Borrows), and its pool threads' thread-locals outlive the test.
//! Run the rest of the crate with `-- --skip par_` under the stricter flags.

use std::sync::atomic::{AtomicU32, Ordering};

use folio_query::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct A(u32);
/// Sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct S(u32);
#[derive(Debug, Clone, Copy)]
struct M0;
#[derive(Debug, Clone, Copy)]
struct M1;
#[derive(Debug, Clone, Copy)]
struct M2;
#[derive(Debug, Clone, Copy)]
struct M3(#[allow(dead_code)] u64);

/// What one entity was spawned with.
#[derive(Clone, Copy)]
struct Ent {
    /// Position in the list.
    i: usize,
    e: Entity,
    a: bool,
    s: bool,
}

/// Tables of sizes from 1 to a few thousand (one emptied again), each split into archetypes
/// with and without the sparse `S`, plus entities with `S` only.
fn build() -> (World, Vec<Ent>) {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    let sizes: &[usize] = if cfg!(miri) {
        &[1, 3, 6, 2]
    } else {
        &[1, 2, 3, 63, 64, 65, 127, 300, 1000, 5, 4097, 0, 31, 700, 1, 129]
    };
    let mut ents = Vec::new();
    for (k, &size) in sizes.iter().enumerate() {
        for i in 0..size.max(1) {
            let e = world.spawn((A(0),));
            let (a, s) = (k % 5 != 4, i % 3 != 1);
            if !a {
                world.remove::<(A,)>(e).unwrap();
            }
            if s {
                world.insert(e, (S(0),)).unwrap();
            }
            if k & 1 != 0 {
                world.insert(e, (M0,)).unwrap();
            }
            if k & 2 != 0 {
                world.insert(e, (M1,)).unwrap();
            }
            if k & 4 != 0 {
                world.insert(e, (M2,)).unwrap();
            }
            if k & 8 != 0 {
                world.insert(e, (M3(k as u64),)).unwrap();
            }
            ents.push(Ent { i: ents.len(), e, a, s });
        }
        if size == 0 {
            // A table that exists but is empty again.
            let e = ents.pop().unwrap().e;
            world.despawn(e).unwrap();
        }
    }
    world.check_invariants();
    (world, ents)
}

fn pools() -> Vec<rayon::ThreadPool> {
    let threads: &[usize] = if cfg!(miri) { &[1, 2] } else { &[1, 2, 4] };
    threads
        .iter()
        .map(|&n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap())
        .collect()
}

fn batches() -> &'static [Option<usize>] {
    if cfg!(miri) {
        &[None, Some(1), Some(4)]
    } else {
        &[None, Some(1), Some(7), Some(64), Some(1 << 20)]
    }
}

/// Checks that each entity was visited `want(ent)` times (0 or 1) and resets the counters.
fn check_visits(visits: &[AtomicU32], ents: &[Ent], want: impl Fn(&Ent) -> bool, what: &str) {
    let mut n = 0;
    for ent in ents {
        let got = visits[ent.e.index() as usize].swap(0, Ordering::Relaxed);
        assert_eq!(got, u32::from(want(ent)), "{what}: visits of {}", ent.e);
        n += got;
    }
    // (A change filter may rightly match nothing in the small worlds used under miri.)
    assert!(n > 0 || (cfg!(miri) && what.starts_with("Changed")), "{what}: nothing matched");
    assert!(visits.iter().all(|v| v.load(Ordering::Relaxed) == 0), "{what}: stray visits");
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn par_iter_mut_visits_every_entity_once_in_every_mode() {
    let (mut world, ents) = build();
    let max = ents.iter().map(|x| x.e.index()).max().unwrap() as usize + 1;
    let visits: Vec<AtomicU32> = (0..max).map(|_| AtomicU32::new(0)).collect();
    let mut tables = world.query::<(Entity, &mut A)>();
    let mut archetypes = world.query_filtered::<(Entity, &mut A, Option<&mut S>), ()>();
    let mut with_s = world.query_filtered::<(Entity, &mut A), With<S>>();
    let mut sparse = world.query::<(Entity, &mut S)>();
    let mut sparse_checked = world.query_filtered::<(Entity, &mut S), Without<M0>>();
    assert_eq!(tables.matches().mode(), IterMode::Tables);
    assert_eq!(archetypes.matches().mode(), IterMode::Archetypes);
    assert_eq!(with_s.matches().mode(), IterMode::Archetypes);
    assert_eq!(sparse.matches().mode(), IterMode::Sparse);
    assert!(sparse.matches().is_dense_sparse(), "names only S: walks S's set densely");
    assert_eq!(sparse_checked.matches().mode(), IterMode::Sparse);
    assert!(!sparse_checked.matches().is_dense_sparse(), "names M0: checks each archetype");
    // How many times each entity's `A` and `S` were written.
    let (mut writes_a, mut writes_s) = (0u32, 0u32);
    for pool in pools() {
        for &batch in batches() {
            let what = format!("{} threads, batch {batch:?}", pool.current_num_threads());
            let visit = |e: Entity| visits[e.index() as usize].fetch_add(1, Ordering::Relaxed);
            pool.install(|| {
                let it = tables.par_iter_mut(&mut world);
                let it = if let Some(b) = batch { it.batch_size(b) } else { it };
                it.for_each(|(e, mut a)| {
                    visit(e);
                    a.0 += 1;
                });
            });
            check_visits(&visits, &ents, |x| x.a, &format!("tables, {what}"));
            pool.install(|| {
                let it = archetypes.par_iter_mut(&mut world);
                let it = if let Some(b) = batch { it.batch_size(b) } else { it };
                it.for_each(|(e, mut a, s)| {
                    visit(e);
                    a.0 += 1;
                    if let Some(mut s) = s {
                        s.0 += 1;
                    }
                });
            });
            check_visits(&visits, &ents, |x| x.a, &format!("archetypes, {what}"));
            pool.install(|| {
                let it = with_s.par_iter_mut(&mut world);
                let it = if let Some(b) = batch { it.batch_size(b) } else { it };
                it.for_each(|(e, _)| {
                    visit(e);
                });
            });
            check_visits(&visits, &ents, |x| x.a && x.s, &format!("with S, {what}"));
            pool.install(|| {
                let it = sparse.par_iter_mut(&mut world);
                let it = if let Some(b) = batch { it.batch_size(b) } else { it };
                it.for_each(|(e, mut s)| {
                    visit(e);
                    s.0 += 1;
                });
            });
            check_visits(&visits, &ents, |x| x.s, &format!("sparse, {what}"));
            pool.install(|| {
                let it = sparse_checked.par_iter_mut(&mut world);
                let it = if let Some(b) = batch { it.batch_size(b) } else { it };
                it.for_each(|(e, mut s)| {
                    visit(e);
                    s.0 += 1;
                });
            });
            let no_m0 = |x: &Ent| x.s && world.get::<M0>(x.e).is_none();
            check_visits(&visits, &ents, no_m0, &format!("sparse without M0, {what}"));
            writes_a += 2;
            writes_s += 1;
        }
    }
    // Every write landed exactly once per run.
    for x in &ents {
        let a = world.get::<A>(x.e).map(|a| a.0);
        assert_eq!(a, x.a.then_some(writes_a));
        let s = world.get::<S>(x.e).map(|s| s.0);
        // Once a run by `sparse`, once more by `archetypes` (with A), and once more by
        // `sparse_checked` (without M0).
        let runs = 1 + u32::from(x.a) + u32::from(world.get::<M0>(x.e).is_none());
        assert_eq!(s, x.s.then_some(runs * writes_s));
    }
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn par_iter_with_a_changed_filter_sees_exactly_the_written_entities() {
    let (mut world, ents) = build();
    let max = ents.iter().map(|x| x.e.index()).max().unwrap() as usize + 1;
    let visits: Vec<AtomicU32> = (0..max).map(|_| AtomicU32::new(0)).collect();
    let mut changed_a = world.query_filtered::<Entity, Changed<A>>();
    let mut changed_s = world.query_filtered::<Entity, Changed<S>>();
    let mut changed_a_with_s = world.query_filtered::<(Entity, &A), (Changed<A>, With<S>)>();
    assert_eq!(changed_a.matches().mode(), IterMode::Tables);
    assert_eq!(changed_s.matches().mode(), IterMode::Sparse);
    assert_eq!(changed_a_with_s.matches().mode(), IterMode::Archetypes);
    // The first run sees everything; start counting from here.
    assert_eq!(changed_a.iter(&world).count(), ents.iter().filter(|x| x.a).count());
    assert_eq!(changed_s.iter(&world).count(), ents.iter().filter(|x| x.s).count());
    assert!(changed_a_with_s.iter(&world).count() > 0);
    let visit = |e: Entity| visits[e.index() as usize].fetch_add(1, Ordering::Relaxed);
    for (round, pool) in pools().into_iter().enumerate() {
        for (j, &batch) in batches().iter().enumerate() {
            let what = format!("{} threads, batch {batch:?}", pool.current_num_threads());
            // Write a different subset each time, through `get_mut` and through a query.
            let pick = |i: usize| (i + round + j) % 3 == 1;
            for (i, x) in ents.iter().enumerate() {
                if pick(i) && x.a {
                    world.get_mut::<A>(x.e).unwrap().0 += 1;
                }
            }
            let mut writer = world.query::<(Entity, &mut S)>();
            let mut chosen = vec![false; max];
            for x in ents.iter().filter(|x| pick(x.i + 1) && x.s) {
                chosen[x.e.index() as usize] = true;
            }
            for (e, mut s) in writer.iter_mut(&mut world) {
                if chosen[e.index() as usize] {
                    s.0 += 1;
                }
            }
            let picked = |x: &Ent, off: usize| pick(x.i + off);
            pool.install(|| {
                let it = changed_a.par_iter(&world);
                let it = if let Some(b) = batch { it.batch_size(b) } else { it };
                it.for_each(|e| {
                    visit(e);
                });
            });
            check_visits(&visits, &ents, |x| x.a && picked(x, 0), &format!("Changed<A>, {what}"));
            pool.install(|| {
                let it = changed_s.par_iter(&world);
                let it = if let Some(b) = batch { it.batch_size(b) } else { it };
                it.for_each(|e| {
                    visit(e);
                });
            });
            check_visits(&visits, &ents, |x| x.s && picked(x, 1), &format!("Changed<S>, {what}"));
            pool.install(|| {
                let it = changed_a_with_s.par_iter(&world);
                let it = if let Some(b) = batch { it.batch_size(b) } else { it };
                it.for_each(|(e, a)| {
                    assert!(a.0 > 0);
                    visit(e);
                });
            });
            check_visits(
                &visits,
                &ents,
                |x| x.a && x.s && picked(x, 0),
                &format!("Changed<A> With<S>, {what}"),
            );
        }
    }
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn par_iter_reads_agree_with_iter() {
    let (mut world, ents) = build();
    let mut q = world.query::<(Entity, &mut A, Option<&S>)>();
    for (e, mut a, _) in q.iter_mut(&mut world) {
        a.0 = e.index();
    }
    let mut read = world.query::<(Entity, &A)>();
    let want: u64 = read.iter(&world).map(|(_, a)| u64::from(a.0)).sum();
    assert_eq!(want, ents.iter().filter(|x| x.a).map(|x| u64::from(x.e.index())).sum::<u64>());
    for pool in pools() {
        let sum = std::sync::atomic::AtomicU64::new(0);
        pool.install(|| {
            read.par_iter(&world).for_each(|(e, a)| {
                assert_eq!(a.0, e.index());
                sum.fetch_add(u64::from(a.0), Ordering::Relaxed);
            })
        });
        assert_eq!(sum.into_inner(), want);
    }
    // A query that matches nothing, and one over an empty world, run without trouble.
    let mut none = world.query_filtered::<Entity, (With<A>, Without<A>)>();
    none.par_iter(&world).for_each(|_| panic!("matched nothing"));
    let mut empty = World::new();
    let mut q = empty.query::<&mut A>();
    q.par_iter_mut(&mut empty).batch_size(0).for_each(|_| panic!("empty world"));
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn par_iter_mut_of_a_nested_tuple_writes_each_row_of_its_batch() {
    // Batches of 64 rows take the long-run loop; the second starts halfway through the table,
    // and the inner tuple's rows must be that batch's, not the table's first ones.
    let rows = if cfg!(miri) { 130 } else { 1000 };
    let mut world = World::new();
    world.spawn_batch((0..rows).map(|i| (A(i), M3(u64::from(i)))));
    let mut q = world.query::<(Entity, (&mut A, &M3))>();
    for pool in pools() {
        pool.install(|| {
            q.par_iter_mut(&mut world).batch_size(64).for_each(|(_, (mut a, m))| {
                assert_eq!(u64::from(a.0 % rows), m.0, "the row's own values");
                a.0 += rows;
            })
        });
    }
    let runs = pools().len() as u32;
    for (a, m) in world.query::<(&A, &M3)>().iter(&world) {
        assert_eq!(u64::from(a.0), m.0 + u64::from(runs * rows), "written once per run");
    }
}
