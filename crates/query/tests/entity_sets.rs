//! `iter_combinations` and `for_each_combination_mut`: every set of `K` distinct matching
//! entities once, checked against brute force over table, sparse-set and mixed storage, with
//! filters (archetypal and per-row), and with writes to both members of a pair.

use std::collections::BTreeSet;

use folio_query::*;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Mass(f32);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Vel(f32);
/// Sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Frozen;
#[derive(Debug, Clone, Copy, PartialEq)]
struct Planet;

fn world() -> (World, Vec<Entity>) {
    let mut world = World::new();
    world.register_component::<Frozen>(StorageType::SparseSet).unwrap();
    let mut all = Vec::new();
    for i in 0..12 {
        let m = Mass(i as f32);
        let e = match i % 4 {
            0 => world.spawn((m, Vel(0.0))),
            1 => world.spawn((m, Vel(0.0), Frozen)),
            2 => world.spawn((m, Planet)),
            _ => world.spawn((m, Vel(0.0), Planet)),
        };
        all.push(e);
    }
    (world, all)
}

/// Every `k`-subset of `items`, as sorted vectors.
fn subsets(items: &[Entity], k: usize) -> BTreeSet<Vec<Entity>> {
    let mut out = BTreeSet::new();
    let n = items.len();
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize == k {
            let mut s: Vec<Entity> =
                (0..n).filter(|&i| mask & (1 << i) != 0).map(|i| items[i]).collect();
            s.sort();
            out.insert(s);
        }
    }
    out
}

fn sorted<const K: usize>(set: [Entity; K]) -> Vec<Entity> {
    let mut v = set.to_vec();
    v.sort();
    v
}

/// Each combination once (no set twice, no entity twice in one), and all of them.
fn check<const K: usize>(got: Vec<[Entity; K]>, matching: &[Entity]) {
    let n = got.len();
    let sets: BTreeSet<Vec<Entity>> = got.into_iter().map(sorted).collect();
    assert_eq!(sets.len(), n, "a set came twice");
    assert!(sets.iter().all(|s| s.windows(2).all(|w| w[0] != w[1])), "an entity twice");
    assert_eq!(sets, subsets(matching, K));
}

#[test]
fn every_pair_and_triple_once_over_tables_and_sparse_sets() {
    let (mut world, all) = world();
    let has = |world: &World, e: Entity, planet: bool, frozen: bool| {
        (!planet || world.has::<Planet>(e)) && (!frozen || world.has::<Frozen>(e))
    };
    let with_vel: Vec<Entity> = all.iter().copied().filter(|&e| world.has::<Vel>(e)).collect();

    // Tables mode, every entity.
    let mut q = world.query::<(Entity, &Mass)>();
    let pairs: Vec<[Entity; 2]> =
        q.iter_combinations::<2>(&world).map(|p| p.map(|(e, _)| e)).collect();
    check(pairs, &all);
    let it = q.iter_combinations::<3>(&world);
    assert_eq!(it.size_hint(), (220, Some(220)), "12 choose 3");
    check(it.map(|t| t.map(|(e, _)| e)).collect(), &all);
    assert_eq!(q.iter_combinations::<13>(&world).count(), 0, "more than there are");

    // An archetypal filter.
    let mut planets = world.query_filtered::<Entity, With<Planet>>();
    let want: Vec<Entity> = all.iter().copied().filter(|&e| has(&world, e, true, false)).collect();
    check(planets.iter_combinations::<2>(&world).collect(), &want);

    // Archetypes mode (a sparse-set component with a table one), and the dense sparse walk.
    let mut frozen = world.query::<(Entity, &Vel, &Frozen)>();
    let want: Vec<Entity> = all.iter().copied().filter(|&e| has(&world, e, false, true)).collect();
    check(frozen.iter_combinations::<2>(&world).map(|p| p.map(|(e, ..)| e)).collect(), &want);
    let mut frozen_only = world.query::<(Entity, &Frozen)>();
    check(frozen_only.iter_combinations::<2>(&world).map(|p| p.map(|(e, _)| e)).collect(), &want);

    // A per-row filter: only the entities whose `Vel` changed since the query last ran.
    let mut changed = world.query_filtered::<Entity, Changed<Vel>>();
    check(changed.iter_combinations::<2>(&world).collect(), &with_vel); // first run: all
    assert_eq!(changed.iter_combinations::<2>(&world).count(), 0);
    for &e in &with_vel[..3] {
        world.get_mut::<Vel>(e).unwrap().0 = 1.0;
    }
    check(changed.iter_combinations::<2>(&world).collect(), &with_vel[..3]);
}

#[test]
fn a_pair_can_write_both_of_its_members() {
    // Equal and opposite: each pair moves mass from the heavier body to the lighter one.
    let (mut world, all) = world();
    let mut q = world.query::<(Entity, &mut Mass)>();
    let mut seen = Vec::new();
    q.for_each_combination_mut::<2>(&mut world, |[(a, mut ma), (b, mut mb)]| {
        seen.push([a, b]);
        let t = (ma.0 - mb.0) / 4.0;
        ma.0 -= t;
        mb.0 += t;
    });
    check(seen, &all);
    let total: f32 = world.query::<&Mass>().iter(&world).map(|m| m.0).sum();
    assert_eq!(total, (0..12).sum::<i32>() as f32, "what one loses the other gains");
    // The writes were stamped with the first run's tick: a second run sees nothing new, and
    // reading through `Mut` marks nothing.
    let mut changed = world.query_filtered::<Entity, Changed<Mass>>();
    changed.iter(&world).count();
    q.for_each_combination_mut::<2>(&mut world, |[(_, ma), (_, mb)]| {
        assert!(!ma.is_changed() && !mb.is_changed(), "nothing written since the last run");
    });
    assert_eq!(changed.iter(&world).count(), 0, "reads mark nothing");
    // Triples over a sparse-set component, read through `Mut` too.
    let mut frozen = world.query::<(Entity, &mut Vel, &Frozen)>();
    let mut triples = 0;
    frozen.for_each_combination_mut::<3>(
        &mut world,
        |[(_, mut a, _), (_, mut b, _), (_, c, _)]| {
            a.0 += 1.0;
            b.0 += c.0;
            triples += 1;
        },
    );
    assert_eq!(triples, 1, "three frozen bodies");
}

#[test]
fn iter_many_yields_the_listed_entities_that_match_in_list_order() {
    let (mut world, all) = world();
    let gone = all[4];
    world.despawn(gone).unwrap();
    let list = [all[3], all[0], gone, all[2], all[3], all[1]];
    // All have Mass: every live one, repeats included, in the list's order.
    let mut masses = world.query::<(Entity, &Mass)>();
    let got: Vec<Entity> = masses.iter_many(&world, list).map(|(e, _)| e).collect();
    assert_eq!(got, [all[3], all[0], all[2], all[3], all[1]]);
    // A filter drops the others: Planet is on i % 4 in {2, 3}.
    let mut planets = world.query_filtered::<&Mass, With<Planet>>();
    let got: Vec<f32> = planets.iter_many(&world, list).map(|m| m.0).collect();
    assert_eq!(got, [3.0, 2.0, 3.0]);
    // A sparse-set component, looked up per entity (Frozen is on i % 4 == 1).
    let mut frozen = world.query::<(Entity, &Frozen)>();
    let got: Vec<Entity> = frozen.iter_many(&world, list).map(|(e, _)| e).collect();
    assert_eq!(got, [all[1]]);
    // Not a run: a change filter answers as `get` does.
    let mut changed = world.query_filtered::<Entity, Changed<Mass>>();
    assert_eq!(changed.iter_many(&world, list).count(), 5, "never ran: all changed");
    assert_eq!(changed.iter_many(&world, list).count(), 5, "still never ran");
    changed.iter(&world).count();
    assert_eq!(changed.iter_many(&world, list).count(), 0);
}

#[test]
fn for_each_many_mut_writes_the_listed_entities_that_match_in_list_order() {
    let (mut world, all) = world();
    let gone = all[4];
    world.despawn(gone).unwrap();
    // all[3] twice: two calls, each seeing the first's write.
    let list = [all[3], all[0], gone, all[2], all[3], all[1], all[5]];
    let mut masses = world.query::<(Entity, &mut Mass)>();
    let mut seen = Vec::new();
    masses.for_each_many_mut(&mut world, list, |(e, mut m)| {
        seen.push((e, m.0));
        m.0 += 100.0;
    });
    assert_eq!(
        seen,
        [
            (all[3], 3.0),
            (all[0], 0.0),
            (all[2], 2.0),
            (all[3], 103.0),
            (all[1], 1.0),
            (all[5], 5.0),
        ]
    );
    let mass = |w: &World, i: usize| w.get::<Mass>(all[i]).unwrap().0;
    assert_eq!(
        [0, 1, 2, 3, 5, 6].map(|i| mass(&world, i)),
        [100.0, 101.0, 102.0, 203.0, 105.0, 6.0]
    );
    // A filter, and a sparse-set component in the data: Frozen is on i % 4 == 1, so only
    // all[1] and all[5] match; both are written, through a table column and a set lookup.
    let mut frozen = world.query_filtered::<(&mut Mass, &Frozen), With<Vel>>();
    let mut calls = 0;
    frozen.for_each_many_mut(&mut world, list, |(mut m, _)| {
        calls += 1;
        m.0 = -1.0;
    });
    assert_eq!(calls, 2);
    assert_eq!([1, 5].map(|i| mass(&world, i)), [-1.0, -1.0]);
    assert_eq!(mass(&world, 3), 203.0);
    // The writes are changes: a change filter run after sees exactly the written entities.
    let mut changed = world.query_filtered::<Entity, Changed<Mass>>();
    changed.iter(&world).count();
    let mut masses = world.query::<&mut Mass>();
    masses.for_each_many_mut(&mut world, [all[7], all[8]], |mut m| m.0 += 1.0);
    let got: BTreeSet<Entity> = changed.iter(&world).collect();
    assert_eq!(got, BTreeSet::from([all[7], all[8]]));
}
