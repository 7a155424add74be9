//! The `_unchecked` entry points a scheduler uses: two states whose accesses are disjoint
//! (`With<B>` / `Without<B>`) iterate and write the same component at the same time through one
//! shared `&World`, with ticks the caller hands out.

use folio_query::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct A(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct B;
/// Sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct S;

#[test]
fn disjoint_states_write_one_component_at_once() {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    let n = if cfg!(miri) { 20 } else { 200 };
    let mut with_b = Vec::new();
    let mut without_b = Vec::new();
    for i in 0..n {
        let e = world.spawn((A(i),));
        if i % 3 == 0 {
            world.insert(e, (B,)).unwrap();
            with_b.push(e);
        } else {
            without_b.push(e);
        }
        if i % 4 == 0 {
            world.insert(e, (S,)).unwrap();
        }
    }
    let mut left = world.query_filtered::<(Entity, &mut A), With<B>>();
    let mut right = world.query_filtered::<(Entity, &mut A, Option<&S>), Without<B>>();
    assert!(left.access().conflict(right.access()).is_none());
    let plain = world.query::<&mut A>();
    assert!(plain.access().conflict(left.access()).is_some());
    left.update_archetypes(&world);
    right.update_archetypes(&world);
    let w = &world;
    let (last, this) = (w.change_tick().wrapping_sub(1), w.increment_change_tick());
    // SAFETY: the two states' accesses are disjoint (checked above): no entity matches both,
    // so their items never alias; both states were updated for `w`.
    let (l, r) =
        unsafe { (left.iter_unchecked(w, last, this), right.iter_unchecked(w, last, this)) };
    let mut seen = (Vec::new(), Vec::new());
    // Interleave the two iterators, keeping every item alive until the end.
    let mut items = Vec::new();
    let mut r = r.map(|(e, a, _)| (e, a, false));
    let mut l = l.map(|(e, a)| (e, a, true));
    loop {
        match (l.next(), r.next()) {
            (None, None) => break,
            (x, y) => items.extend(x.into_iter().chain(y)),
        }
    }
    for (e, a, is_left) in &mut items {
        a.0 += 1000;
        if *is_left { seen.0.push(*e) } else { seen.1.push(*e) }
    }
    let _ = items;
    seen.0.sort();
    seen.1.sort();
    assert_eq!(seen, (with_b.clone(), without_b.clone()));
    // SAFETY: nothing else borrows the world; one item at a time.
    let one = unsafe { left.get_unchecked(w, with_b[0], last, this) }.unwrap();
    assert_eq!(one.1.0, 1000);
    // SAFETY: distinct entities, nothing else borrows the world.
    let [x, y] =
        unsafe { right.get_many_unchecked(w, [without_b[0], without_b[1]], last, this) }.unwrap();
    assert_eq!((x.1.0, y.1.0), (1001, 1002));
    let _ = (one, x, y);
    for e in with_b.iter().chain(&without_b) {
        assert!(world.get::<A>(*e).unwrap().0 >= 1000);
    }
    // The writes are stamped with the tick handed in.
    let mut changed = world.query_filtered::<Entity, Changed<A>>();
    changed.set_last_run(this.wrapping_sub(1));
    assert_eq!(changed.iter(&world).count(), n as usize);
}
