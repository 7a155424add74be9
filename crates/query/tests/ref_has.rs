//! `Ref<T>` and `Mut<T>` (per-item added/changed) against the `Added<T>` / `Changed<T>`
//! filters, and `Has<T>` against `World::get`, over seeded random edits, for table and
//! sparse-set storage and in every iteration mode (`for` loops, `for_each`, `par_iter`,
//! `get`); then `Mut`'s own change-detection methods.

use std::collections::BTreeSet;
use std::sync::Mutex;

use folio_query::*;

/// `V<0>` is registered as a table component, `V<1>` as a sparse-set one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct V<const N: usize>(u32);
/// Table-stored: moves entities between tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Anchor;
/// Sparse-set stored: splits archetypes that share a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tag;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

type Seen = (BTreeSet<Entity>, BTreeSet<Entity>);

/// What a run of a `Ref` query saw: the entities it reported added, and changed.
fn seen_through_ref<'a, I: IntoIterator<Item = (Entity, Ref<'a, V<N>>)>, const N: usize>(
    items: I,
) -> Seen {
    let (mut added, mut changed) = (BTreeSet::new(), BTreeSet::new());
    for (e, r) in items {
        if r.is_added() {
            added.insert(e);
        }
        if r.is_changed() {
            changed.insert(e);
        }
        assert!(!r.is_added() || r.is_changed(), "added implies changed");
    }
    (added, changed)
}

/// What a run of a `Mut` query saw, read before any write (a `Mut` only reads here).
fn seen_through_mut<'a, I: IntoIterator<Item = (Entity, Mut<'a, V<N>>)>, const N: usize>(
    items: I,
) -> Seen {
    let (mut added, mut changed) = (BTreeSet::new(), BTreeSet::new());
    for (e, m) in items {
        if m.is_added() {
            added.insert(e);
        }
        if m.is_changed() {
            changed.insert(e);
        }
        assert!(!m.is_added() || m.is_changed(), "added implies changed");
        assert!(!m.is_added() || m.added_tick() == m.last_changed(), "added, then unchanged");
    }
    (added, changed)
}

/// One seeded story for `V<N>` stored as `storage`; `extra` picks the other terms (and so the
/// iteration mode) through `Has`.
fn lockstep<const N: usize>(storage: StorageType, seed: u64) {
    let mut world = World::new();
    world.register_component::<V<N>>(storage).unwrap();
    world.register_component::<Tag>(StorageType::SparseSet).unwrap();
    let mut rng = Rng(seed);
    let mut live: Vec<Entity> = Vec::new();
    let mut refs = world.query::<(Entity, Ref<V<N>>)>();
    let mut refs_has = world.query::<(Entity, Ref<V<N>>, Has<Anchor>, Has<Tag>)>();
    let mut muts = world.query::<(Entity, &mut V<N>)>();
    let mut muts_has = world.query::<(Entity, &mut V<N>, Has<Tag>)>();
    let mut added = world.query_filtered::<Entity, Added<V<N>>>();
    let mut changed = world.query_filtered::<Entity, Changed<V<N>>>();
    // Every entity, with whether it has each component.
    let mut flags = world.query::<(Entity, Has<V<N>>, Has<Anchor>, Has<Tag>)>();
    let steps = if cfg!(miri) { 30 } else { 300 };
    for step in 0..steps {
        for _ in 0..rng.below(6) {
            let v = V::<N>(rng.below(100) as u32);
            let e = match rng.below(4) {
                0 => world.spawn((v,)),
                1 => world.spawn((v, Anchor)),
                2 => world.spawn((v, Tag)),
                _ => world.spawn((Anchor,)),
            };
            live.push(e);
        }
        for _ in 0..rng.below(8) {
            if live.is_empty() {
                break;
            }
            let i = rng.below(live.len());
            let e = live[i];
            match rng.below(7) {
                0 => {
                    world.despawn(live.swap_remove(i)).unwrap();
                }
                1 => {
                    if let Some(v) = world.get_mut::<V<N>>(e) {
                        v.0 += 1;
                    }
                }
                2 => world.insert(e, (V::<N>(7),)).unwrap(),
                3 => {
                    world.remove::<(V<N>,)>(e);
                }
                4 => world.insert(e, (Anchor,)).unwrap(),
                5 => {
                    world.remove::<(Tag,)>(e);
                }
                _ => world.insert(e, (Tag,)).unwrap(),
            }
        }
        // Writes through a query too, to some entities (odd values only).
        let mut writer = world.query::<&mut V<N>>();
        for mut v in writer.iter_mut(&mut world) {
            if v.0 % 5 == 1 {
                v.0 += 1;
            }
        }

        let through_ref = match step % 3 {
            0 => seen_through_ref(refs.iter(&world)),
            1 => {
                let mut items = Vec::new();
                refs.iter(&world).for_each(|item| items.push(item));
                seen_through_ref(items)
            }
            _ => {
                let items = Mutex::new(Vec::new());
                refs.par_iter(&world)
                    .batch_size(3)
                    .for_each(|item| items.lock().unwrap().push(item));
                seen_through_ref(items.into_inner().unwrap())
            }
        };
        let mut with_has = Vec::new();
        for (e, r, anchor, tag) in refs_has.iter(&world) {
            assert_eq!(anchor, world.get::<Anchor>(e).is_some(), "Has<Anchor> of {e}");
            assert_eq!(tag, world.get::<Tag>(e).is_some(), "Has<Tag> of {e}");
            with_has.push((e, r));
        }
        let through_filters = (
            added.iter(&world).collect::<BTreeSet<_>>(),
            changed.iter(&world).collect::<BTreeSet<_>>(),
        );
        assert_eq!(through_ref, through_filters, "step {step}");
        assert_eq!(seen_through_ref(with_has), through_filters, "step {step}, with Has");
        // `Mut` sees the same, in every mode (the `for_each` one through the no-alias loop).
        let through_mut = match step % 3 {
            0 => seen_through_mut(muts.iter_mut(&mut world)),
            1 => {
                let mut items = Vec::new();
                muts.for_each_mut(&mut world, |item| items.push(item));
                seen_through_mut(items)
            }
            _ => {
                let items = Mutex::new(Vec::new());
                muts.par_iter_mut(&mut world)
                    .batch_size(3)
                    .for_each(|item| items.lock().unwrap().push(item));
                seen_through_mut(items.into_inner().unwrap())
            }
        };
        assert_eq!(through_mut, through_filters, "step {step}, through Mut");
        let through_mut_has = if step % 2 == 0 {
            seen_through_mut(muts_has.iter_mut(&mut world).map(|(e, m, _)| (e, m)))
        } else {
            let mut items = Vec::new();
            muts_has.for_each_mut(&mut world, |(e, m, _)| items.push((e, m)));
            seen_through_mut(items)
        };
        assert_eq!(through_mut_has, through_filters, "step {step}, through Mut with Has");

        // `Has` matches every entity, and agrees with `get`.
        let mut count = 0;
        for (e, v, anchor, tag) in flags.iter(&world) {
            count += 1;
            assert_eq!(v, world.get::<V<N>>(e).is_some());
            assert_eq!(anchor, world.get::<Anchor>(e).is_some());
            assert_eq!(tag, world.get::<Tag>(e).is_some());
        }
        assert_eq!(count, live.len());
        // A lookup sees the same ticks as iteration (nothing written since the runs above).
        if let Some((e, r)) = live.first().and_then(|&e| refs.get(&world, e).ok()) {
            assert!(!r.is_changed(), "{e} unchanged since the last run");
        }
        if let Some(&e) = live.first()
            && let Ok((_, m)) = muts.get_mut(&mut world, e)
        {
            assert!(!m.is_changed() && !m.is_added(), "{e} unchanged since the last run");
        }
    }
}

#[test]
fn ref_agrees_with_the_filters_for_table_storage() {
    lockstep::<0>(StorageType::Table, 0x9E37_79B9_7F4A_7C15);
}

#[test]
fn ref_agrees_with_the_filters_for_sparse_set_storage() {
    lockstep::<1>(StorageType::SparseSet, 0xD1B5_4A32_D192_ED03);
}

#[test]
fn the_iteration_modes_are_the_ones_meant() {
    let mut world = World::new();
    world.register_component::<V<1>>(StorageType::SparseSet).unwrap();
    world.register_component::<Tag>(StorageType::SparseSet).unwrap();
    world.spawn((V::<0>(0), V::<1>(0), Anchor, Tag));
    let mode = |m: &Matches| m.mode();
    assert_eq!(mode(world.query::<(Entity, Ref<V<0>>)>().matches()), IterMode::Tables);
    assert_eq!(mode(world.query::<(Entity, Has<Anchor>)>().matches()), IterMode::Tables);
    // A sparse `Has` keeps the query off the table path (archetypes differ in it, not tables).
    assert_eq!(mode(world.query::<(Entity, Has<Tag>)>().matches()), IterMode::Archetypes);
    assert_eq!(mode(world.query::<(Entity, Ref<V<1>>)>().matches()), IterMode::Sparse);
    let dense = world.query::<(Entity, Ref<V<1>>, Has<V<1>>)>();
    assert!(dense.matches().is_dense_sparse());
}

#[test]
fn has_of_a_sparse_component_tells_apart_entities_that_share_a_table() {
    let mut world = World::new();
    world.register_component::<Tag>(StorageType::SparseSet).unwrap();
    let plain = world.spawn((V::<0>(1),));
    let tagged = world.spawn((V::<0>(2), Tag));
    let mut q = world.query::<(Entity, Has<Tag>)>();
    let mut got: Vec<_> = q.iter(&world).collect();
    got.sort();
    let mut want = vec![(plain, false), (tagged, true)];
    want.sort();
    assert_eq!(got, want);
    // Unregistered: false for everyone, and true once it shows up.
    #[derive(Debug)]
    struct Later;
    let mut later = world.query::<Has<Later>>();
    assert_eq!(later.iter(&world).filter(|&h| h).count(), 0);
    world.insert(plain, (Later,)).unwrap();
    assert_eq!(later.iter(&world).filter(|&h| h).count(), 1);
}

#[test]
fn has_conflicts_with_nothing_and_ref_is_a_read() {
    let mut world = World::new();
    let e = world.spawn((V::<0>(1),));
    let mut q = world.query::<(&mut V<0>, Has<V<0>>)>();
    for (mut v, has) in q.iter_mut(&mut world) {
        assert!(has);
        v.0 = 5;
    }
    assert_eq!(world.get::<V<0>>(e), Some(&V(5)));
    assert!(world.try_query::<(&mut V<0>, Ref<V<0>>), ()>().is_err());
    assert!(world.try_query::<(Ref<V<0>>, &V<0>), ()>().is_ok());
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pos {
    x: f32,
    y: f32,
}

/// The entities a `Changed<Pos>` query sees now.
fn changed_pos(world: &mut World, changed: &mut QueryState<Entity, Changed<Pos>>) -> Vec<Entity> {
    changed.iter(world).collect()
}

#[test]
fn mut_marks_only_real_changes() {
    let mut world = World::new();
    let e = world.spawn((Pos { x: 1.0, y: 2.0 },));
    let mut q = world.query::<&mut Pos>();
    let mut changed = world.query_filtered::<Entity, Changed<Pos>>();
    assert_eq!(changed_pos(&mut world, &mut changed), [e], "spawned: changed once");

    // Each `iter_mut` is a run of `q` (a lookup, `get_mut` or `single_mut`, is not). First
    // run: the value was added since (it never ran); second: nothing happened since.
    let m = q.iter_mut(&mut world).next().unwrap();
    assert!(m.is_added() && m.is_changed());
    let mut m = q.iter_mut(&mut world).next().unwrap();
    assert!(!m.is_added() && !m.is_changed());

    // `set_if_neq` with the same value marks nothing; with another it writes and marks.
    assert!(!m.set_if_neq(Pos { x: 1.0, y: 2.0 }));
    assert!(!m.is_changed());
    assert!(changed_pos(&mut world, &mut changed).is_empty());
    let mut m = q.iter_mut(&mut world).next().unwrap();
    assert!(m.set_if_neq(Pos { x: 3.0, y: 2.0 }));
    assert!(m.is_changed(), "its own write counts");
    assert_eq!(changed_pos(&mut world, &mut changed), [e]);
    assert_eq!(world.get::<Pos>(e), Some(&Pos { x: 3.0, y: 2.0 }));

    // `map_unchanged` marks nothing by itself; a write through the field's `Mut` marks the
    // whole component.
    let m = q.iter_mut(&mut world).next().unwrap();
    let y = m.map_unchanged(|p| &mut p.y);
    assert_eq!(*y, 2.0);
    assert!(changed_pos(&mut world, &mut changed).is_empty());
    let mut y = q.iter_mut(&mut world).next().unwrap().map_unchanged(|p| &mut p.y);
    *y = 5.0;
    assert!(y.is_changed());
    assert_eq!(changed_pos(&mut world, &mut changed), [e]);
    assert_eq!(world.get::<Pos>(e), Some(&Pos { x: 3.0, y: 5.0 }));

    // A reborrow passed on by value marks the original's component.
    fn nudge(mut p: Mut<Pos>) {
        p.x += 1.0;
    }
    let mut m = q.iter_mut(&mut world).next().unwrap();
    nudge(m.reborrow());
    assert!(m.is_changed());
    assert_eq!(m.x, 4.0);
    assert_eq!(changed_pos(&mut world, &mut changed), [e]);

    // `bypass_change_detection` writes without marking.
    q.iter_mut(&mut world).next().unwrap().bypass_change_detection().x = 9.0;
    assert!(changed_pos(&mut world, &mut changed).is_empty());
    assert_eq!(world.get::<Pos>(e).unwrap().x, 9.0);
}

#[test]
fn mut_of_a_sparse_set_component_knows_its_ticks() {
    let mut world = World::new();
    world.register_component::<Pos>(StorageType::SparseSet).unwrap();
    let old = world.spawn((Pos { x: 0.0, y: 0.0 },));
    let mut q = world.query::<(Entity, &mut Pos)>();
    q.iter_mut(&mut world).for_each(drop);
    let new = world.spawn((Pos { x: 1.0, y: 1.0 }, Tag));
    // Row-by-entity (`get_mut`, not a run) and iteration both read the set's added ticks.
    assert!(q.get_mut(&mut world, new).unwrap().1.is_added());
    assert!(!q.get_mut(&mut world, old).unwrap().1.is_added());
    let mut added: Vec<_> = Vec::new();
    q.for_each_mut(&mut world, |(e, m)| added.push((e, m.is_added())));
    added.sort();
    let mut want = vec![(old, false), (new, true)];
    want.sort();
    assert_eq!(added, want);
    // The run above counts: nothing is added since.
    assert!(!q.get_mut(&mut world, new).unwrap().1.is_added());
}

#[test]
fn mut_knows_its_ticks_in_runs_long_enough_for_the_no_alias_loop() {
    // Runs of 64 rows or more go through the no-alias loop, which rebases the fetch onto the
    // run's rows: batches of 100 start at rows 100, 200, ... of one table.
    let mut world = World::new();
    let old: Vec<Entity> = (0..150).map(|i| world.spawn((V::<0>(i),))).collect();
    let mut q = world.query::<(Entity, &mut V<0>)>();
    q.for_each_mut(&mut world, drop);
    let new: BTreeSet<Entity> = (0..250).map(|i| world.spawn((V::<0>(i),))).collect();
    let items = Mutex::new(Vec::new());
    q.par_iter_mut(&mut world).batch_size(100).for_each(|(e, m)| {
        items.lock().unwrap().push((e, m.is_added(), m.is_changed()));
    });
    let items = items.into_inner().unwrap();
    assert_eq!(items.len(), 400);
    for (e, added, changed) in items {
        assert_eq!(added, new.contains(&e), "{e}");
        assert_eq!(changed, added, "{e}: nothing changed but what was added");
    }
    // Mark every third old entity changed, then read it back through the whole-table run.
    let mut q_old = world.query::<&mut V<0>>();
    for &e in old.iter().step_by(3) {
        q_old.get_mut(&mut world, e).unwrap().set_changed();
    }
    let mut seen = Vec::new();
    q.for_each_mut(&mut world, |(e, m)| seen.push((e, m.is_added(), m.is_changed())));
    for (e, added, changed) in seen {
        assert!(!added, "{e}");
        let marked = old.iter().step_by(3).any(|&o| o == e);
        assert_eq!(changed, marked, "{e}");
    }
}
