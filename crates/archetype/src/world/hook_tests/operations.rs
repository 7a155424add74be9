//! Which hooks each structural operation runs, in what order, and what they see: spawning,
//! inserting, removing, despawning, the batches and `clear`.

use super::*;

// ----- spawning -----

#[test]
fn spawn_runs_on_add_then_on_insert_once_with_the_value_in_place() {
    let mut world = logged_world();
    let a = world.spawn((A(1),));
    assert_eq!(take_log(&mut world), [(Add, "A", a, Some(1)), (Insert, "A", a, Some(1))]);
    let s = world.try_spawn((S(2),)).unwrap();
    assert_eq!(take_log(&mut world), [(Add, "S", s, Some(2)), (Insert, "S", s, Some(2))]);

    // Several hooked components: every on_add before any on_insert; the unhooked one runs none.
    let e = world.spawn((A(3), B(4), S(5), Plain(6)));
    let all: &[(&str, i32)] = &[("A", 3), ("B", 4), ("S", 5)];
    assert_phases(&take_log(&mut world), e, &[(Add, all), (Insert, all)]);

    world.spawn((Plain(7),));
    assert_eq!(take_log(&mut world), []);
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

#[test]
fn spawn_batch_runs_the_spawn_hooks_once_per_entity() {
    let mut world = logged_world();
    // Table-only: the batch is written straight into its table.
    let es = world.spawn_batch((0..4).map(|i| (A(i), B(10 + i))));
    let log = take_log(&mut world);
    assert_eq!(log.len(), 4 * 4, "{log:?}");
    for (i, &e) in (0..).zip(&es) {
        let both: &[(&str, i32)] = &[("A", i), ("B", 10 + i)];
        assert_phases(&calls_on(&log, e), e, &[(Add, both), (Insert, both)]);
    }

    // With a sparse-set component: spawned one at a time.
    let es = world.spawn_batch((0..3).map(|i| (A(i), S(20 + i))));
    let log = take_log(&mut world);
    assert_eq!(log.len(), 3 * 4, "{log:?}");
    for (i, &e) in (0..).zip(&es) {
        let both: &[(&str, i32)] = &[("A", i), ("S", 20 + i)];
        assert_phases(&calls_on(&log, e), e, &[(Add, both), (Insert, both)]);
    }

    let plain = world.spawn_batch((0..3).map(|i| (Plain(i),)));
    assert_eq!(plain.len(), 3);
    assert_eq!(take_log(&mut world), []);
    assert_eq!(world.spawn_batch(std::iter::empty::<(A,)>()), []);
    assert_eq!(take_log(&mut world), []);
    world.check_invariants();
}

#[test]
fn spawn_reserved_runs_the_spawn_hooks() {
    let mut world = logged_world();
    let r0 = world.reserve_entity();
    let r1 = world.reserve_entity();
    // Not the oldest pending reservation: the reservations are flushed, then r1 filled.
    world.spawn_reserved(r1, (A(1), B(2))).unwrap();
    let both: &[(&str, i32)] = &[("A", 1), ("B", 2)];
    assert_phases(&take_log(&mut world), r1, &[(Add, both), (Insert, both)]);
    // r0 is alive now, empty: it leaves the empty archetype.
    world.spawn_reserved(r0, (A(3),)).unwrap();
    assert_phases(&take_log(&mut world), r0, &[(Add, &[("A", 3)]), (Insert, &[("A", 3)])]);
    // The oldest pending reservation: made alive straight in its table's row.
    let r2 = world.reserve_entity();
    world.spawn_reserved(r2, (A(4), B(5))).unwrap();
    let both: &[(&str, i32)] = &[("A", 4), ("B", 5)];
    assert_phases(&take_log(&mut world), r2, &[(Add, both), (Insert, both)]);
    // A sparse-set component.
    let r3 = world.reserve_entity();
    world.spawn_reserved(r3, (S(6), Plain(0))).unwrap();
    assert_phases(&take_log(&mut world), r3, &[(Add, &[("S", 6)]), (Insert, &[("S", 6)])]);

    // An entity with components already gets an ordinary insert: the replaced value's hooks.
    world.spawn_reserved(r2, (A(7),)).unwrap();
    assert_phases(&take_log(&mut world), r2, &[(Replace, &[("A", 4)]), (Insert, &[("A", 7)])]);
    assert_eq!(world.get::<A>(r2), Some(&A(7)));

    // A dead entity: nothing.
    world.despawn(r3).unwrap();
    take_log(&mut world);
    assert!(
        matches!(world.spawn_reserved(r3, (A(8),)), Err(EntityError::NoSuchEntity(e)) if e == r3)
    );
    assert_eq!(take_log(&mut world), []);
    assert_eq!(world.get::<B>(r1), Some(&B(2)));
    world.check_invariants();
}

// ----- inserting -----

#[test]
fn insert_of_a_new_component_runs_on_add_and_on_insert() {
    let mut world = logged_world();
    let e = world.spawn((Plain(0),));
    world.insert(e, (A(1),)).unwrap();
    assert_phases(&take_log(&mut world), e, &[(Add, &[("A", 1)]), (Insert, &[("A", 1)])]);
    world.insert(e, (S(2),)).unwrap();
    assert_phases(&take_log(&mut world), e, &[(Add, &[("S", 2)]), (Insert, &[("S", 2)])]);
    world.insert(e, (Plain(3),)).unwrap();
    assert_eq!(take_log(&mut world), []);
    world.check_invariants();
}

#[test]
fn insert_replacing_a_value_runs_on_replace_with_the_old_then_on_insert_with_the_new() {
    let mut world = logged_world();
    let e = world.spawn((A(1), S(10)));
    take_log(&mut world);
    world.insert(e, (A(2),)).unwrap();
    assert_eq!(take_log(&mut world), [(Replace, "A", e, Some(1)), (Insert, "A", e, Some(2))]);
    world.insert(e, (S(11),)).unwrap();
    assert_eq!(take_log(&mut world), [(Replace, "S", e, Some(10)), (Insert, "S", e, Some(11))]);

    // One replaced and one new: on_replace (old value) first, on_add of the new one only, then
    // on_insert of both.
    world.insert(e, (A(3), B(4))).unwrap();
    assert_phases(
        &take_log(&mut world),
        e,
        &[(Replace, &[("A", 2)]), (Add, &[("B", 4)]), (Insert, &[("A", 3), ("B", 4)])],
    );
    assert_eq!(world.get::<A>(e), Some(&A(3)));
    assert_eq!(world.get::<B>(e), Some(&B(4)));
    assert_eq!(world.get::<S>(e), Some(&S(11)));

    // A bundle that repeats a component: an error and no hook.
    assert!(matches!(world.insert(e, (A(5), A(6))), Err(EntityError::Component(_))));
    assert_eq!(take_log(&mut world), []);
    assert_eq!(world.get::<A>(e), Some(&A(3)));

    // A dead entity: an error and no hook.
    world.despawn(e).unwrap();
    take_log(&mut world);
    assert!(matches!(world.insert(e, (A(5),)), Err(EntityError::NoSuchEntity(x)) if x == e));
    assert_eq!(take_log(&mut world), []);
    world.check_invariants();
}

// ----- removing -----

#[test]
fn remove_runs_on_replace_then_on_remove_while_the_value_is_readable() {
    let mut world = logged_world();
    let e = world.spawn((A(1), B(2), S(3), Plain(4)));
    take_log(&mut world);

    assert_eq!(world.remove::<(A,)>(e), Some((A(1),)));
    assert_eq!(take_log(&mut world), [(Replace, "A", e, Some(1)), (Remove, "A", e, Some(1))]);
    assert!(!world.has::<A>(e));

    let both: &[(&str, i32)] = &[("B", 2), ("S", 3)];
    assert_eq!(world.try_remove::<(B, S)>(e).unwrap(), (B(2), S(3)));
    assert_phases(&take_log(&mut world), e, &[(Replace, both), (Remove, both)]);
    assert!(!world.has::<B>(e) && !world.has::<S>(e));
    assert_eq!(world.get::<Plain>(e), Some(&Plain(4)));
    world.check_invariants();
}

#[test]
fn a_failing_remove_runs_no_hook() {
    let mut world = logged_world();
    let e = world.spawn((B(2), Plain(0)));
    take_log(&mut world);

    // Lacks the component, or one of the bundle's (the other one hooked and present).
    let missing = world.try_remove::<(A,)>(e);
    assert!(matches!(missing, Err(EntityError::MissingComponent { entity, .. }) if entity == e));
    let missing = world.try_remove::<(A, B)>(e);
    assert!(matches!(missing, Err(EntityError::MissingComponent { entity, .. }) if entity == e));
    assert_eq!(world.remove::<(S,)>(e), None);
    // A bundle that repeats a component.
    assert!(matches!(world.try_remove::<(B, B)>(e), Err(EntityError::Component(_))));
    assert_eq!(take_log(&mut world), []);
    assert_eq!(world.get::<B>(e), Some(&B(2)));

    // A stale entity.
    world.despawn(e).unwrap();
    take_log(&mut world);
    assert!(matches!(world.try_remove::<(B,)>(e), Err(EntityError::NoSuchEntity(x)) if x == e));
    assert_eq!(world.remove::<(B,)>(e), None);
    assert_eq!(take_log(&mut world), []);
    world.check_invariants();
}

// ----- despawning -----

/// Whose `on_remove` reads every other component of its entity.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Whole(i32);

fn whole_reads_the_rest(w: &mut DeferredWorld<'_>, e: Entity) {
    let count = w.entity(e).expect("alive during its removal hooks").components().count();
    let seen: Vec<Call> = vec![
        (Remove, "Whole saw Whole", e, w.get::<Whole>(e).map(|v| v.0)),
        (Remove, "Whole saw A", e, w.get::<A>(e).map(|v| v.0)),
        (Remove, "Whole saw B", e, w.get::<B>(e).map(|v| v.0)),
        (Remove, "Whole saw S", e, w.get::<S>(e).map(|v| v.0)),
        (Remove, "Whole saw Plain", e, w.get::<Plain>(e).map(|v| v.0)),
        (Remove, "Whole saw this many components", e, Some(count as i32)),
    ];
    w.resource_mut::<Log>().unwrap().0.extend(seen);
}

#[test]
fn despawn_runs_the_removal_hooks_of_every_component_while_the_entity_is_whole() {
    let mut world = logged_world();
    world.set_hooks::<Whole>(ComponentHooks::new().on_remove(whole_reads_the_rest));
    let e = world.spawn((Whole(0), A(1), B(2), S(3), Plain(4)));
    take_log(&mut world);
    world.despawn(e).unwrap();
    assert!(!world.contains(e));
    let log = take_log(&mut world);
    let mut whole: Vec<Call> = log.iter().filter(|c| c.1.starts_with("Whole")).copied().collect();
    whole.sort();
    assert_eq!(
        whole,
        [
            (Remove, "Whole saw A", e, Some(1)),
            (Remove, "Whole saw B", e, Some(2)),
            (Remove, "Whole saw Plain", e, Some(4)),
            (Remove, "Whole saw S", e, Some(3)),
            (Remove, "Whole saw Whole", e, Some(0)),
            (Remove, "Whole saw this many components", e, Some(5)),
        ]
    );
    let rest: Vec<Call> = log.iter().filter(|c| !c.1.starts_with("Whole")).copied().collect();
    let all: &[(&str, i32)] = &[("A", 1), ("B", 2), ("S", 3)];
    assert_phases(&rest, e, &[(Replace, all), (Remove, all)]);
    // The on_remove of Whole runs among the on_remove hooks, after every on_replace.
    let first_whole = log.iter().position(|c| c.1.starts_with("Whole")).unwrap();
    let last_replace = log.iter().rposition(|c| c.0 == Replace).unwrap();
    assert!(first_whole > last_replace, "{log:?}");

    // A stale entity: an error, no hook.
    assert!(matches!(world.despawn(e), Err(EntityError::NoSuchEntity(x)) if x == e));
    assert_eq!(take_log(&mut world), []);
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

#[test]
fn despawn_batch_runs_the_hooks_once_per_despawned_entity_and_skips_stale_ids() {
    let mut world = logged_world();
    let e: Vec<Entity> = (0..4).map(|i| world.spawn((A(i),))).collect();
    let s = world.spawn((S(10), Plain(0)));
    let plain = world.spawn((Plain(1),));
    let kept = world.spawn((A(20),));
    world.despawn(e[3]).unwrap();
    take_log(&mut world);

    let despawned = world.despawn_batch([e[0], e[3], e[1], e[1], plain, s, e[2]]);
    assert_eq!(despawned, 5, "e0, e1, plain, s, e2");
    let log = take_log(&mut world);
    for (&x, v) in [e[0], e[1], e[2]].iter().zip(0..) {
        assert_phases(&calls_on(&log, x), x, &[(Replace, &[("A", v)]), (Remove, &[("A", v)])]);
    }
    assert_phases(&calls_on(&log, s), s, &[(Replace, &[("S", 10)]), (Remove, &[("S", 10)])]);
    assert_eq!(log.len(), 8, "no call for the stale ids, the repeat or the plain entity: {log:?}");
    assert_eq!(world.len(), 1);
    assert_eq!(world.get::<A>(kept), Some(&A(20)));
    world.check_invariants();
}

/// How many of the entities named by [`Partners`] were alive when each removal hook ran.
#[derive(Default)]
struct SeenAlive(Vec<usize>);

/// The other entities of a batch, on each of them.
struct Partners(Vec<Entity>);

fn count_partners_alive(w: &mut DeferredWorld<'_>, e: Entity) {
    let alive = w.get::<Partners>(e).unwrap().0.iter().filter(|&&p| w.contains(p)).count();
    w.resource_mut::<SeenAlive>().unwrap().0.push(alive);
}

#[test]
fn a_despawn_batch_runs_every_removal_hook_while_the_whole_batch_is_alive() {
    let mut world = World::new();
    world.insert_resource(SeenAlive::default());
    world.set_hooks::<Partners>(ComponentHooks::new().on_remove(count_partners_alive));
    let group: Vec<Entity> = (0..4).map(|_| world.spawn((Plain(0),))).collect();
    for &e in &group {
        world.insert(e, (Partners(group.clone()),)).unwrap();
    }
    // A batch large enough to sweep (padded with a dead id, cheap under miri): the hooks
    // first, then the sweep.
    let others: Vec<Entity> = (0..8).map(|_| world.spawn((Plain(1),))).collect();
    let dead = world.spawn((Plain(2),));
    world.despawn(dead).unwrap();
    let mut batch = group.clone();
    batch.extend(&others);
    batch.push(group[0]); // listed twice: one hook call, one despawn
    batch.resize(BULK_DESPAWN_FROM, dead);
    assert_eq!(world.despawn_batch(batch), group.len() + others.len());
    // Each hook saw all four of the group alive, the earlier ones in the batch included.
    assert_eq!(world.resource::<SeenAlive>().unwrap().0, [4; 4]);
    assert!(world.is_empty());
    world.check_invariants();
}

#[test]
fn a_large_despawn_batch_runs_the_hooks_once_per_despawned_entity() {
    let mut world = logged_world();
    // Table-only entities would go through the sweep without hooks, the sparse-set ones one at
    // a time. A dead id pads the batch to the size that sweeps (cheap under miri).
    let table: Vec<Entity> = (0..40).map(|i| world.spawn((A(i), Plain(i)))).collect();
    let sparse: Vec<Entity> = (0..3).map(|i| world.spawn((A(100 + i), S(200 + i)))).collect();
    let plain: Vec<Entity> = (0..5).map(|i| world.spawn((Plain(i),))).collect();
    let kept = world.spawn((A(-1),));
    let dead = world.spawn((Plain(-1),));
    world.despawn(dead).unwrap();
    take_log(&mut world);

    let mut batch: Vec<Entity> = table.iter().chain(&sparse).chain(&plain).rev().copied().collect();
    let want = batch.len();
    batch.push(table[0]); // a repeat, skipped
    batch.resize(BULK_DESPAWN_FROM, dead);
    assert_eq!(world.despawn_batch(batch), want);

    let log = take_log(&mut world);
    assert_eq!(log.len(), 2 * 40 + 4 * 3, "{log:?}");
    for (&e, i) in table.iter().zip(0..) {
        assert_phases(&calls_on(&log, e), e, &[(Replace, &[("A", i)]), (Remove, &[("A", i)])]);
    }
    for (&e, i) in sparse.iter().zip(0..) {
        let both: &[(&str, i32)] = &[("A", 100 + i), ("S", 200 + i)];
        assert_phases(&calls_on(&log, e), e, &[(Replace, both), (Remove, both)]);
    }
    assert_eq!(world.len(), 1);
    assert_eq!(world.get::<A>(kept), Some(&A(-1)));
    world.check_invariants();
}

// ----- batches -----

#[test]
fn insert_batch_runs_the_hooks_per_entity() {
    let mut world = logged_world();
    let e: Vec<Entity> = (0..4).map(|i| world.spawn((Plain(i),))).collect();
    take_log(&mut world);

    // Every entity of an archetype in row order: the batch that would move as one block.
    world.insert_batch((0..).zip(&e).map(|(i, &x)| (x, (A(i),)))).unwrap();
    let log = take_log(&mut world);
    assert_eq!(log.len(), 8, "{log:?}");
    for (&x, i) in e.iter().zip(0..) {
        assert_phases(&calls_on(&log, x), x, &[(Add, &[("A", i)]), (Insert, &[("A", i)])]);
    }

    // Replacing, with an entity listed twice: it ends with its later bundle.
    world.insert_batch([(e[0], (A(10),)), (e[1], (A(11),)), (e[0], (A(20),))]).unwrap();
    let log = take_log(&mut world);
    assert_eq!(
        calls_on(&log, e[0]),
        [
            (Replace, "A", e[0], Some(0)),
            (Insert, "A", e[0], Some(10)),
            (Replace, "A", e[0], Some(10)),
            (Insert, "A", e[0], Some(20)),
        ]
    );
    assert_eq!(
        calls_on(&log, e[1]),
        [(Replace, "A", e[1], Some(1)), (Insert, "A", e[1], Some(11))]
    );
    assert_eq!(log.len(), 6, "{log:?}");
    assert_eq!(world.get::<A>(e[0]), Some(&A(20)));

    // Sparse-set components, new to some and replaced in others.
    world.insert(e[2], (S(30),)).unwrap();
    take_log(&mut world);
    world.insert_batch([(e[2], (S(32),)), (e[3], (S(33),))]).unwrap();
    let log = take_log(&mut world);
    assert_phases(&calls_on(&log, e[2]), e[2], &[(Replace, &[("S", 30)]), (Insert, &[("S", 32)])]);
    assert_phases(&calls_on(&log, e[3]), e[3], &[(Add, &[("S", 33)]), (Insert, &[("S", 33)])]);
    assert_eq!(log.len(), 4);

    // A dead entity: an error, no hook, nothing changed.
    world.despawn(e[3]).unwrap();
    take_log(&mut world);
    let failed = world.insert_batch([(e[2], (A(40), B(41))), (e[3], (A(42), B(43)))]);
    assert!(matches!(failed, Err(EntityError::NoSuchEntity(x)) if x == e[3]));
    assert_eq!(take_log(&mut world), []);
    assert_eq!(world.get::<A>(e[2]), Some(&A(2)));
    assert!(!world.has::<B>(e[2]));
    world.check_invariants();
}

#[test]
fn remove_batch_runs_the_hooks_per_entity() {
    let mut world = logged_world();
    let e: Vec<Entity> = (0..4).map(|i| world.spawn((A(i), S(10 + i)))).collect();
    take_log(&mut world);

    // An archetype's last rows in order: the block move.
    assert_eq!(world.remove_batch::<(A,)>([e[2], e[3]]).unwrap(), [(A(2),), (A(3),)]);
    let log = take_log(&mut world);
    assert_eq!(log.len(), 4, "{log:?}");
    for (&x, v) in [e[2], e[3]].iter().zip(2..) {
        assert_phases(&calls_on(&log, x), x, &[(Replace, &[("A", v)]), (Remove, &[("A", v)])]);
    }
    assert!(!world.has::<A>(e[2]) && !world.has::<A>(e[3]));

    // Sparse-set components, scattered order.
    assert_eq!(world.remove_batch::<(S,)>([e[3], e[0]]).unwrap(), [(S(13),), (S(10),)]);
    let log = take_log(&mut world);
    assert_eq!(log.len(), 4, "{log:?}");
    for (&x, v) in [e[3], e[0]].iter().zip([13, 10]) {
        assert_phases(&calls_on(&log, x), x, &[(Replace, &[("S", v)]), (Remove, &[("S", v)])]);
    }
    world.check_invariants();
}

#[test]
fn a_failing_remove_batch_runs_no_hook_and_changes_nothing() {
    let mut world = logged_world();
    let e: Vec<Entity> = (0..4).map(|i| world.spawn((A(i),))).collect();
    let plain = world.spawn((Plain(9),));
    let dead = world.spawn((A(-1),));
    world.despawn(dead).unwrap();
    take_log(&mut world);

    let missing = world.remove_batch::<(A,)>([e[0], plain, e[1]]);
    assert!(
        matches!(missing, Err(EntityError::MissingComponent { entity, .. }) if entity == plain)
    );
    let twice = world.remove_batch::<(A,)>([e[0], e[1], e[0]]);
    assert!(matches!(twice, Err(EntityError::ListedTwice(x)) if x == e[0]));
    // Twice in a row, in row order otherwise.
    let twice = world.remove_batch::<(A,)>([e[2], e[3], e[3]]);
    assert!(matches!(twice, Err(EntityError::ListedTwice(x)) if x == e[3]));
    let stale = world.remove_batch::<(A,)>([e[0], dead]);
    assert!(matches!(stale, Err(EntityError::NoSuchEntity(x)) if x == dead));

    assert_eq!(take_log(&mut world), []);
    for (&x, i) in e.iter().zip(0..) {
        assert_eq!(world.get::<A>(x), Some(&A(i)));
    }
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

// ----- clear -----

#[test]
fn clear_runs_the_removal_hooks_of_every_hooked_entity() {
    let mut world = logged_world();
    let a = world.spawn((A(1),));
    let ab = world.spawn((A(2), B(3), Plain(0)));
    let s = world.spawn((S(4), Plain(0)));
    let plain = world.spawn((Plain(5),));
    take_log(&mut world);

    world.clear();
    let log = take_log(&mut world);
    assert_phases(&calls_on(&log, a), a, &[(Replace, &[("A", 1)]), (Remove, &[("A", 1)])]);
    let both: &[(&str, i32)] = &[("A", 2), ("B", 3)];
    assert_phases(&calls_on(&log, ab), ab, &[(Replace, both), (Remove, both)]);
    assert_phases(&calls_on(&log, s), s, &[(Replace, &[("S", 4)]), (Remove, &[("S", 4)])]);
    assert_eq!(calls_on(&log, plain), []);
    assert_eq!(log.len(), 8, "{log:?}");
    assert!(world.is_empty());
    assert!(!world.contains(a) && !world.contains(plain));
    world.check_invariants();

    // The hooks stay.
    let again = world.spawn((A(6),));
    assert_eq!(take_log(&mut world), [(Add, "A", again, Some(6)), (Insert, "A", again, Some(6))]);
    world.check_invariants();
}
