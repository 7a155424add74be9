//! `Added` and `Changed` over many ticks, for table and sparse-set storage and in every
//! iteration mode: which writes mark a change and which do not, structural changes, two states
//! with their own last runs, and the tick wrap.

use folio_query::*;

/// A component stored as the test registers it: `V<0>` in tables, `V<1>` in a sparse set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct V<const N: usize>(u32);
/// A table component that moves entities between tables when inserted or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Anchor;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Other(u32);

fn sorted(mut v: Vec<Entity>) -> Vec<Entity> {
    v.sort();
    v
}

fn ids<F: QueryFilter>(q: &mut QueryState<Entity, F>, world: &World) -> Vec<Entity> {
    sorted(q.iter(world).collect())
}

/// The whole change-detection story for one storage type. `anchored` puts every entity's `V`
/// beside a table component, so a sparse `V` is iterated by archetype rather than by set.
fn story<const N: usize>(storage: StorageType) {
    let mut world = World::new();
    world.register_component::<V<N>>(storage).unwrap();
    let e0 = world.spawn((V::<N>(0), Anchor));
    let e1 = world.spawn((V::<N>(1), Anchor));
    let e2 = world.spawn((V::<N>(2),));
    let e3 = world.spawn((V::<N>(3),));
    let mut changed = world.query_filtered::<Entity, Changed<V<N>>>();
    let mut added = world.query_filtered::<Entity, Added<V<N>>>();
    let mut anchored = world.query_filtered::<Entity, (Changed<V<N>>, With<Anchor>)>();
    let mut loose = world.query_filtered::<Entity, (Without<Anchor>, Or<(Changed<V<N>>,)>)>();
    let mut writer = world.query::<(Entity, &mut V<N>)>();
    let sparse = storage == StorageType::SparseSet;
    let (mode, anchored_mode) = if sparse {
        (IterMode::Sparse, IterMode::Archetypes)
    } else {
        (IterMode::Tables, IterMode::Tables)
    };
    assert_eq!(changed.matches().mode(), mode);
    assert_eq!(added.matches().mode(), mode);
    assert_eq!(anchored.matches().mode(), anchored_mode);
    assert_eq!(writer.matches().mode(), mode);
    let all = sorted(vec![e0, e1, e2, e3]);

    // A state's first run sees everything; the next sees nothing new.
    assert_eq!(ids(&mut changed, &world), all);
    assert_eq!(ids(&mut added, &world), all);
    assert_eq!(ids(&mut anchored, &world), [e0, e1]);
    assert_eq!(ids(&mut loose, &world), [e2, e3]);
    assert_eq!(ids(&mut changed, &world), []);
    assert_eq!(ids(&mut added, &world), []);
    assert_eq!(ids(&mut anchored, &world), []);
    assert!(changed.is_empty(&world));

    // Reading through `Deref` marks nothing; writing through `DerefMut` does; a write that
    // bypasses change detection does not.
    let mut this_run = 0;
    for (e, mut v) in writer.iter_mut(&mut world) {
        let before = v.last_changed();
        if e == e1 {
            v.0 += 10;
            this_run = v.last_changed();
            assert_ne!(this_run, before);
        } else if e == e2 {
            v.bypass_change_detection().0 += 10;
            assert_eq!(v.last_changed(), before);
        } else {
            assert!(v.0 < 4);
            assert_eq!(v.last_changed(), before);
        }
    }
    assert_eq!(writer.last_run(), Some(this_run), "writes are stamped with the run's tick");
    assert_eq!(world.get::<V<N>>(e1), Some(&V(11)));
    assert_eq!(world.get::<V<N>>(e2), Some(&V(12)));
    assert_eq!(changed.get(&world, e1), Ok(e1), "`get` sees the change without running");
    assert_eq!(changed.get(&world, e0), Err(QueryError::DoesNotMatch(e0)));
    assert_eq!(changed.single(&world), Ok(e1));
    assert_eq!(ids(&mut changed, &world), [e1]);
    assert_eq!(ids(&mut added, &world), []);
    assert_eq!(ids(&mut anchored, &world), [e1]);
    assert_eq!(ids(&mut loose, &world), []);

    // `set_changed` marks without writing; `into_inner` marks; a `Mut` that is only read
    // marks nothing, also through `get_mut` and `get_many_mut` of a query.
    for (e, mut v) in writer.iter_mut(&mut world) {
        if e == e0 {
            v.set_changed();
        }
    }
    assert_eq!(ids(&mut changed, &world), [e0]);
    writer.get_mut(&mut world, e3).unwrap().1.into_inner().0 += 10;
    let [(_, a), (_, b)] = writer.get_many_mut(&mut world, [e0, e2]).unwrap();
    assert_eq!((a.0, b.0), (0, 12));
    assert_eq!(ids(&mut changed, &world), [e3]);
    assert_eq!(ids(&mut loose, &world), [e3]);
    let [(_, mut a), (_, _b)] = writer.get_many_mut(&mut world, [e0, e2]).unwrap();
    a.0 += 100;
    assert_eq!(ids(&mut changed, &world), [e0]);

    // `World::get_mut` marks.
    world.get_mut::<V<N>>(e2).unwrap().0 += 1;
    assert_eq!(ids(&mut changed, &world), [e2]);
    assert_eq!(ids(&mut anchored, &world), [e0]);
    assert_eq!(ids(&mut loose, &world), [e2]);

    // `insert` over an existing value replaces it: changed, not added.
    world.insert(e1, (V::<N>(50),)).unwrap();
    assert_eq!(ids(&mut changed, &world), [e1]);
    assert_eq!(ids(&mut added, &world), []);
    assert_eq!(world.get::<V<N>>(e1), Some(&V(50)));

    // Remove and add again: added (and changed) anew.
    assert_eq!(world.remove::<(V<N>,)>(e1), Some((V(50),)));
    assert_eq!(ids(&mut changed, &world), []);
    world.insert(e1, (V::<N>(60),)).unwrap();
    assert_eq!(ids(&mut changed, &world), [e1]);
    assert_eq!(ids(&mut added, &world), [e1]);
    assert_eq!(ids(&mut anchored, &world), [e1]);

    // Moving an entity between tables keeps its ticks, and so does the one swapped into the
    // row it left: no change is reported for either.
    world.insert(e2, (Anchor,)).unwrap();
    world.remove::<(Anchor,)>(e0).unwrap();
    world.insert(e3, (Other(3),)).unwrap();
    assert_eq!(ids(&mut changed, &world), []);
    assert_eq!(ids(&mut added, &world), []);
    assert_eq!(ids(&mut anchored, &world), []);
    assert_eq!(ids(&mut loose, &world), []);
    world.check_invariants();

    // Spawned after a run: added and changed at the next.
    let e4 = world.spawn((V::<N>(4), Other(4)));
    let e5 = world.spawn((Other(5),));
    world.insert(e5, (V::<N>(5),)).unwrap();
    assert_eq!(ids(&mut changed, &world), sorted(vec![e4, e5]));
    assert_eq!(ids(&mut added, &world), sorted(vec![e4, e5]));

    // Two states, each counting from its own last run.
    let mut late = world.query_filtered::<Entity, Changed<V<N>>>();
    assert_eq!(ids(&mut late, &world).len(), 6);
    world.get_mut::<V<N>>(e0).unwrap().0 += 1;
    assert_eq!(ids(&mut changed, &world), [e0]);
    world.get_mut::<V<N>>(e4).unwrap().0 += 1;
    for (e, mut v) in writer.iter_mut(&mut world) {
        if e == e5 {
            v.0 += 1;
        }
    }
    assert_eq!(ids(&mut changed, &world), sorted(vec![e4, e5]));
    assert_eq!(ids(&mut late, &world), sorted(vec![e0, e4, e5]));
    assert_eq!(ids(&mut late, &world), []);
    assert_eq!(ids(&mut changed, &world), []);

    // A despawned entity is gone from every filter.
    world.get_mut::<V<N>>(e4).unwrap().0 += 1;
    world.despawn(e4).unwrap();
    assert_eq!(ids(&mut changed, &world), []);
    world.check_invariants();
}

#[test]
fn change_detection_in_tables() {
    story::<0>(StorageType::Table);
}

#[test]
fn change_detection_in_sparse_sets() {
    story::<1>(StorageType::SparseSet);
}

/// Writers and readers of several components in one query: each `Mut` marks only its own
/// component, and a filter on one component is not fooled by writes to another.
#[test]
fn each_mut_marks_only_its_own_component() {
    let mut world = World::new();
    world.register_component::<V<1>>(StorageType::SparseSet).unwrap();
    let es: Vec<Entity> = (0..6).map(|i| world.spawn((V::<0>(i), V::<1>(i), Other(i)))).collect();
    let mut c0 = world.query_filtered::<Entity, Changed<V<0>>>();
    let mut c1 = world.query_filtered::<Entity, Changed<V<1>>>();
    let mut both = world.query_filtered::<Entity, (Changed<V<0>>, Changed<V<1>>)>();
    let mut either = world.query_filtered::<Entity, Or<(Changed<V<0>>, Changed<V<1>>)>>();
    let mut other_by_v0 = world.query_filtered::<(Entity, &mut Other), Changed<V<0>>>();
    assert_eq!(ids(&mut c0, &world).len(), 6);
    assert_eq!(ids(&mut c1, &world).len(), 6);
    assert_eq!(ids(&mut both, &world).len(), 6);
    assert_eq!(ids(&mut either, &world).len(), 6);
    assert_eq!(other_by_v0.iter_mut(&mut world).count(), 6);

    let mut w = world.query::<(Entity, &mut V<0>, &mut V<1>, &Other)>();
    assert_eq!(w.matches().mode(), IterMode::Archetypes);
    for (e, mut a, mut b, _) in w.iter_mut(&mut world) {
        let i = es.iter().position(|&x| x == e).unwrap();
        if i % 2 == 0 {
            a.0 += 1;
        }
        if i % 3 == 0 {
            b.0 += 1;
        }
    }
    assert_eq!(ids(&mut c0, &world), [es[0], es[2], es[4]]);
    assert_eq!(ids(&mut c1, &world), [es[0], es[3]]);
    assert_eq!(ids(&mut both, &world), [es[0]]);
    assert_eq!(ids(&mut either, &world), [es[0], es[2], es[3], es[4]]);
    // Writing `Other` where `V<0>` changed does not mark `V<0>`.
    for (_, mut o) in other_by_v0.iter_mut(&mut world) {
        o.0 += 100;
    }
    assert_eq!(ids(&mut c0, &world), []);
    let mut other = world.query_filtered::<Entity, Changed<Other>>();
    assert_eq!(ids(&mut other, &world).len(), 6);
    assert_eq!(other_by_v0.iter_mut(&mut world).count(), 0);
    assert_eq!(es.iter().filter(|&&e| world.get::<Other>(e).unwrap().0 >= 100).count(), 3);
}

/// A state whose last run is set by hand (as a scheduler does): ticks compare across the `u32`
/// wrap, and a last run older than `MAX_CHANGE_AGE` is clamped instead of reading old changes
/// as new.
#[test]
fn last_runs_compare_across_the_wrap() {
    let mut world = World::new();
    world.register_component::<V<1>>(StorageType::SparseSet).unwrap();
    let e = world.spawn((V::<0>(0), V::<1>(0)));
    let mut c0 = world.query_filtered::<Entity, Changed<V<0>>>();
    let mut c1 = world.query_filtered::<Entity, Added<V<1>>>();
    let now = world.change_tick();
    // Last run "just before the wrap": everything stamped since tick 0 is newer.
    c0.set_last_run(u32::MAX - 5);
    c1.set_last_run(u32::MAX - 5);
    assert_eq!(ids(&mut c0, &world), [e]);
    assert_eq!(ids(&mut c1, &world), [e]);
    assert_eq!(ids(&mut c0, &world), []);
    // A last run a little "in the future" is, seen from now, more than MAX_CHANGE_AGE ago: it
    // is clamped, and the value (stamped at spawn, not that long ago) reads as new.
    c0.set_last_run(now.wrapping_add(10));
    assert_eq!(ids(&mut c0, &world), [e]);
    // A write after the last run is newer; nothing is newer than a last run of "now".
    let stamped = c0.last_run().unwrap();
    c0.set_last_run(stamped);
    world.get_mut::<V<0>>(e).unwrap().0 = 1;
    assert_eq!(ids(&mut c0, &world), [e]);
    c0.set_last_run(world.change_tick());
    assert_eq!(ids(&mut c0, &world), []);
}

/// Drives the world's tick once around the `u32` range (about 4.3 billion increments),
/// calling `check_change_ticks` as a game would, and checks that old values never read as
/// changed while new writes always do, for sleeping and busy states alike.
///
/// The world's tick can only be advanced one increment at a time, which takes minutes in a
/// debug build: run it with `cargo test --release -p folio-query --test change_detection --
/// --ignored`.
#[test]
#[ignore = "4.3 billion tick increments: run in release with --ignored"]
fn changes_are_right_after_the_tick_counter_wraps() {
    let mut world = World::new();
    world.register_component::<V<1>>(StorageType::SparseSet).unwrap();
    let old = world.spawn((V::<0>(0), V::<1>(0)));
    let quiet = world.spawn((V::<0>(0), V::<1>(0)));
    let mut busy = world.query_filtered::<Entity, Or<(Changed<V<0>>, Changed<V<1>>)>>();
    let mut sleeper0 = world.query_filtered::<Entity, Changed<V<0>>>();
    let mut sleeper1 = world.query_filtered::<Entity, Added<V<1>>>();
    let mut deep_sleeper = world.query_filtered::<Entity, Changed<V<1>>>();
    let both = sorted(vec![old, quiet]);
    assert_eq!(ids(&mut busy, &world), both);
    assert_eq!(ids(&mut sleeper0, &world), both);
    assert_eq!(ids(&mut sleeper1, &world), both);
    assert_eq!(ids(&mut deep_sleeper, &world), both);
    // Laps of an eighth of the range; ticks are checked and the busy state runs between laps.
    let lap = 1u32 << 29;
    let mut wrapped = false;
    for lap_no in 1..=9 {
        let before = world.change_tick();
        for _ in 0..lap {
            world.increment_change_tick();
        }
        wrapped |= world.change_tick() < before;
        world.check_change_ticks();
        assert_eq!(ids(&mut busy, &world), [], "lap {lap_no}");
        if lap_no == 7 {
            // 3.5/4 of the range since the sleepers last ran, more than MAX_CHANGE_AGE: their
            // last run is clamped, and so are the old ticks, so nothing old reads as new.
            assert_eq!(ids(&mut sleeper0, &world), [], "a sleeper sees no old change");
            world.get_mut::<V<0>>(old).unwrap().0 = 1;
            assert_eq!(ids(&mut sleeper0, &world), [old]);
            assert_eq!(ids(&mut busy, &world), [old]);
        }
    }
    assert!(wrapped);
    assert_eq!(ids(&mut sleeper0, &world), []);
    assert_eq!(ids(&mut sleeper1, &world), []);
    assert_eq!(ids(&mut deep_sleeper, &world), []);
    let new = world.spawn((V::<0>(1), V::<1>(1)));
    world.get_mut::<V<1>>(old).unwrap().0 = 5;
    assert_eq!(ids(&mut busy, &world), sorted(vec![old, new]));
    assert_eq!(ids(&mut sleeper0, &world), [new]);
    assert_eq!(ids(&mut sleeper1, &world), [new]);
    assert_eq!(ids(&mut deep_sleeper, &world), sorted(vec![old, new]));
    assert_eq!(ids(&mut busy, &world), []);
}

#[test]
fn an_item_stamps_its_tick_on_the_first_write_and_keeps_it() {
    let mut world = World::new();
    let e = world.spawn((V::<0>(0),));
    let mut changed = world.query_filtered::<Entity, Changed<V<0>>>();
    let mut writer = world.query::<&mut V<0>>();
    assert_eq!(ids(&mut changed, &world), vec![e], "added counts as changed");
    assert!(ids(&mut changed, &world).is_empty());

    world.increment_change_tick_mut();
    let tick = world.change_tick();
    for mut v in writer.iter_mut(&mut world) {
        let before = v.last_changed();
        assert_ne!(before, tick);
        let read = v.0; // reading marks nothing
        assert_eq!(v.last_changed(), before);
        for k in 1..4 {
            v.0 = read + k; // three writes through one item
            assert_eq!(v.last_changed(), tick);
        }
    }
    assert_eq!(world.get::<V<0>>(e), Some(&V(3)));
    assert_eq!(ids(&mut changed, &world), vec![e]);

    // `set_changed` alone marks it; `bypass_change_detection` writes without marking.
    world.increment_change_tick_mut();
    for mut v in writer.iter_mut(&mut world) {
        v.bypass_change_detection().0 = 7;
    }
    assert!(ids(&mut changed, &world).is_empty());
    world.increment_change_tick_mut();
    for mut v in writer.iter_mut(&mut world) {
        v.set_changed();
        v.0 += 1;
    }
    assert_eq!(ids(&mut changed, &world), vec![e]);
    assert_eq!(world.get::<V<0>>(e), Some(&V(8)));
}
