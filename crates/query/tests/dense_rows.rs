//! The dense loop's long-run path: tables and sparse sets of at least `NOALIAS_MIN_ROWS` (64)
//! rows, which `fold`/`for_each` hand to an out-of-line loop taking every column as a reference
//! argument. Values, change ticks, items that outlive the loop, runs that start halfway through
//! a table, and the terms that fall back to the inlined loop (`Option`, tick filters). Small
//! enough to run under miri, where it checks that the column references the loop makes never
//! overlap an item handed out before or kept after it.

use folio_query::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Id(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct A(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct B(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Z;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(align(64))]
struct Al(u32);
/// Sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct S(u32);

/// Rows in the long table (A, B, Z, Al), the other long table (A only) and the set of `S`.
const LONG: u32 = 150;
const OTHER: u32 = 70;
const SPARSE: u32 = 100;

fn build() -> World {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    world.spawn_batch((0..LONG).map(|i| (Id(i), A(i), B(10 * i), Z, Al(i))));
    world.spawn_batch((LONG..LONG + OTHER).map(|i| (Id(i), A(i))));
    // `S` on entities of both tables and on lone ones: the set is walked densely.
    let ids: Vec<Entity> = world.query::<(Entity, &Id)>().iter(&world).map(|(e, _)| e).collect();
    for &e in ids.iter().step_by(3).take(SPARSE as usize / 2) {
        let id = world.get::<Id>(e).unwrap().0;
        world.insert(e, (S(id),)).unwrap();
    }
    let lone = SPARSE - SPARSE / 2;
    world.spawn_batch((0..lone).map(|i| (S(1000 + i),)));
    world.check_invariants();
    world
}

fn sorted<K: Ord>(mut v: Vec<K>) -> Vec<K> {
    v.sort();
    v
}

#[test]
fn writes_through_the_long_run_loop_land_and_mark_changed() {
    let mut world = build();
    let mut writer = world.query::<(Entity, &Id, &mut A, &B)>();
    let mut changed = world.query_filtered::<&Id, Changed<A>>();
    assert_eq!(changed.iter(&world).count(), (LONG + OTHER) as usize, "first run: all");
    let mut seen = 0;
    writer.for_each_mut(&mut world, |(e, id, mut a, b)| {
        assert_eq!(a.0, id.0);
        assert_eq!(b.0, 10 * id.0);
        assert!(e.index() < 10_000);
        if id.0 % 2 == 0 {
            a.0 += 1_000;
        }
        seen += 1;
    });
    assert_eq!(seen, LONG as usize, "only the (A, B) table");
    let want: Vec<Id> = (0..LONG).filter(|i| i % 2 == 0).map(Id).collect();
    assert_eq!(sorted(changed.iter(&world).copied().collect()), want);
    for (id, a) in world.query::<(&Id, &A)>().iter(&world) {
        let even_long = id.0 < LONG && id.0 % 2 == 0;
        assert_eq!(a.0, if even_long { id.0 + 1_000 } else { id.0 });
    }
    // Reading through `Mut` marks nothing.
    let mut reader = world.query::<&mut A>();
    reader.for_each_mut(&mut world, |a| assert!(a.0 < 10_000));
    assert_eq!(changed.iter(&world).count(), 0);
}

#[test]
fn shared_and_repeated_terms_zsts_and_over_aligned_columns() {
    let mut world = build();
    let mut twice = world.query::<(&Id, &Id, &A)>();
    let sum: u64 = twice.iter(&world).fold(0, |s, (x, y, a)| {
        assert_eq!(x, y);
        assert_eq!(a.0, x.0);
        s + u64::from(x.0)
    });
    let n = u64::from(LONG + OTHER);
    assert_eq!(sum, n * (n - 1) / 2);
    let mut aligned = world.query::<(&mut Al, &Z, Entity)>();
    let mut count = 0;
    aligned.for_each_mut(&mut world, |(mut al, z, _)| {
        assert_eq!(&*al as *const Al as usize % 64, 0, "misaligned");
        assert_eq!(*z, Z);
        al.0 += 1;
        count += 1;
    });
    assert_eq!(count, LONG);
    let total: u32 = world.query::<&Al>().iter(&world).map(|a| a.0).sum();
    assert_eq!(total, (0..LONG).map(|i| i + 1).sum::<u32>());
    // The empty tuple: one unit item per row of every table.
    let lone = SPARSE - SPARSE / 2;
    assert_eq!(world.query::<()>().iter(&world).count(), (LONG + OTHER + lone) as usize);
}

#[test]
fn items_from_before_and_after_the_loop_stay_usable() {
    let mut world = build();
    let mut q = world.query::<(&Id, &mut A)>();
    // Ten rows by `next`, then the rest of the same table (and the next) by `fold`: the loop's
    // columns start after the rows already handed out.
    let mut iter = q.iter_mut(&mut world);
    let mut early: Vec<_> = iter.by_ref().take(10).collect();
    let mut late = Vec::new();
    iter.for_each(|item| late.push(item));
    assert_eq!(early.len() + late.len(), (LONG + OTHER) as usize);
    // Write through every item after the loop has returned, the early ones last.
    for (id, a) in late.iter_mut().chain(early.iter_mut()) {
        a.0 = id.0 * 3;
    }
    for (id, a) in world.query::<(&Id, &A)>().iter(&world) {
        assert_eq!(a.0, id.0 * 3);
    }
}

#[test]
fn options_and_tick_filters_take_the_inlined_loop_with_the_same_results() {
    let mut world = build();
    let mut opt = world.query::<(&Id, Option<&mut B>)>();
    let mut with_b = 0;
    opt.for_each_mut(&mut world, |(id, b)| {
        if let Some(mut b) = b {
            assert_eq!(b.0, 10 * id.0);
            b.0 += 1;
            with_b += 1;
        }
    });
    assert_eq!(with_b, LONG);
    let mut changed_b = world.query_filtered::<(&Id, &B), Changed<B>>();
    assert_eq!(changed_b.iter(&world).count(), LONG as usize);
    assert_eq!(changed_b.iter(&world).count(), 0);
    world.query::<&mut B>().for_each_mut(&mut world, |mut b| {
        if b.0 % 20 == 1 {
            b.0 += 1;
        }
    });
    assert_eq!(changed_b.iter(&world).count(), (LONG as usize).div_ceil(2));
}

#[test]
fn a_long_sparse_set_is_walked_densely() {
    let mut world = build();
    let mut q = world.query::<(Entity, &mut S)>();
    assert!(q.matches().is_dense_sparse());
    let mut changed = world.query_filtered::<Entity, Changed<S>>();
    assert_eq!(changed.iter(&world).count(), SPARSE as usize);
    let mut written = Vec::new();
    q.for_each_mut(&mut world, |(e, mut s)| {
        if s.0 >= 1000 {
            s.0 += 1;
            written.push(e);
        }
    });
    assert_eq!(written.len(), (SPARSE - SPARSE / 2) as usize);
    assert_eq!(sorted(changed.iter(&world).collect()), sorted(written.clone()));
    for e in written {
        assert!(world.get::<S>(e).unwrap().0 > 1000);
    }
}

#[test]
fn a_nested_tuple_reads_and_writes_the_rows_of_the_run() {
    let mut world = build();
    // The inner tuple's columns must start where the run starts, as the outer terms' do.
    let mut q = world.query::<(&Id, (&mut A, (&B, Entity)))>();
    let mut iter = q.iter_mut(&mut world);
    let mut early: Vec<_> = iter.by_ref().take(10).collect();
    let mut late = Vec::new();
    iter.for_each(|item| late.push(item));
    assert_eq!(early.len() + late.len(), LONG as usize);
    for (id, (a, (b, e))) in late.iter_mut().chain(early.iter_mut()) {
        assert_eq!(a.0, id.0, "{e}");
        assert_eq!(b.0, 10 * id.0, "{e}");
        a.0 = id.0 * 3;
    }
    for (id, a) in world.query::<(&Id, &A)>().iter(&world) {
        assert_eq!(a.0, if id.0 < LONG { id.0 * 3 } else { id.0 });
    }
}
