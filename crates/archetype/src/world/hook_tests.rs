//! Component hooks: which structural operations run which hooks, in what order, what a hook
//! sees, the work hooks defer, panicking hooks, and drops.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use folio_storage::Entity;

use super::*;
use crate::component::{Component, StorageType};
use crate::error::EntityError;
use crate::hooks::{ComponentHooks, DeferredWorld};

use Kind::{Add, Insert, Remove, Replace};

#[derive(Debug, Clone, Copy, PartialEq)]
struct A(i32);
#[derive(Debug, Clone, Copy, PartialEq)]
struct B(i32);
/// Registered as a sparse-set component by [`logged_world`].
#[derive(Debug, Clone, Copy, PartialEq)]
struct S(i32);
/// Never hooked.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Plain(i32);

/// Which hook ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Add,
    Insert,
    Replace,
    Remove,
}

/// One hook call: its kind, the component's name, the entity, and the component's value as
/// the hook read it (`None`: not readable).
type Call = (Kind, &'static str, Entity, Option<i32>);

/// The calls of the logging hooks, in order.
#[derive(Default)]
struct Log(Vec<Call>);

/// A component the logging hooks can name and read.
trait Val: Component {
    const NAME: &'static str;
    fn val(&self) -> i32;
}

macro_rules! val {
    ($($t:ident),*) => {$(
        impl Val for $t {
            const NAME: &'static str = stringify!($t);
            fn val(&self) -> i32 {
                self.0
            }
        }
    )*};
}
val!(A, B, S, Plain);

fn record<T: Val>(w: &mut DeferredWorld<'_>, kind: Kind, e: Entity) {
    let value = w.get::<T>(e).map(T::val);
    w.resource_mut::<Log>().expect("the test inserts a Log").0.push((kind, T::NAME, e, value));
}

fn log_add<T: Val>(w: &mut DeferredWorld<'_>, e: Entity) {
    record::<T>(w, Add, e);
}

fn log_insert<T: Val>(w: &mut DeferredWorld<'_>, e: Entity) {
    record::<T>(w, Insert, e);
}

fn log_replace<T: Val>(w: &mut DeferredWorld<'_>, e: Entity) {
    record::<T>(w, Replace, e);
}

fn log_remove<T: Val>(w: &mut DeferredWorld<'_>, e: Entity) {
    record::<T>(w, Remove, e);
}

/// All four hooks of `T`, each logging its call.
fn logging<T: Val>() -> ComponentHooks {
    ComponentHooks::new()
        .on_add(log_add::<T>)
        .on_insert(log_insert::<T>)
        .on_replace(log_replace::<T>)
        .on_remove(log_remove::<T>)
}

/// A world with a [`Log`], `S` a sparse-set component, and logging hooks on `A`, `B` and `S`.
fn logged_world() -> World {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    world.insert_resource(Log::default());
    assert!(world.set_hooks::<A>(logging::<A>()).is_empty());
    assert!(world.set_hooks::<B>(logging::<B>()).is_empty());
    assert!(world.set_hooks::<S>(logging::<S>()).is_empty());
    world
}

/// The calls logged since the last take.
fn take_log(world: &mut World) -> Vec<Call> {
    std::mem::take(&mut world.resource_mut::<Log>().unwrap().0)
}

/// The calls of `log` on `e`, in order.
fn calls_on(log: &[Call], e: Entity) -> Vec<Call> {
    log.iter().filter(|c| c.2 == e).copied().collect()
}

/// Asserts that `log` is, in order, each phase's calls on `e`: all of the phase's kind, in any
/// order among themselves, one per `(component, value read)` listed.
fn assert_phases(log: &[Call], e: Entity, phases: &[(Kind, &[(&'static str, i32)])]) {
    let mut at = 0;
    for &(kind, calls) in phases {
        let got = log
            .get(at..at + calls.len())
            .unwrap_or_else(|| panic!("too few calls for {kind:?} in {log:?}"));
        let mut got: Vec<(&str, Option<i32>)> = got
            .iter()
            .map(|&(k, name, entity, value)| {
                assert_eq!((k, entity), (kind, e), "{name}'s call in {log:?}");
                (name, value)
            })
            .collect();
        got.sort();
        let mut want: Vec<(&str, Option<i32>)> = calls.iter().map(|&(n, v)| (n, Some(v))).collect();
        want.sort();
        assert_eq!(got, want, "the {kind:?} calls in {log:?}");
        at += calls.len();
    }
    assert_eq!(at, log.len(), "unexpected calls in {log:?}");
}

/// Deferred-work order, pushed to by the hooks and closures of a test.
#[derive(Default)]
struct Order(Vec<u32>);

fn push_order(world: &mut World, n: u32) {
    world.resource_mut::<Order>().expect("the test inserts an Order").0.push(n);
}

fn order(world: &World) -> Vec<u32> {
    world.resource::<Order>().unwrap().0.clone()
}

fn boom(_: &mut DeferredWorld<'_>, _: Entity) {
    panic!("a hook panics");
}

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

// ----- deferred work -----

#[derive(Debug, Clone, Copy, PartialEq)]
struct Parent(Entity);
#[derive(Debug, Clone, Copy, PartialEq)]
struct HasChild;
#[derive(Debug, Clone, Copy, PartialEq)]
struct Owns(Entity);

fn parent_added(w: &mut DeferredWorld<'_>, e: Entity) {
    let parent = w.get::<Parent>(e).expect("on_add sees the value").0;
    w.defer(move |world| world.insert(parent, (HasChild,)).unwrap());
}

fn owner_removed(w: &mut DeferredWorld<'_>, e: Entity) {
    let owned = w.get::<Owns>(e).expect("on_remove sees the value").0;
    w.defer(move |world| world.despawn(owned).unwrap());
}

#[test]
fn deferred_structural_work_is_done_before_the_operation_returns() {
    let mut world = World::new();
    world.set_hooks::<Parent>(ComponentHooks::new().on_add(parent_added));
    world.set_hooks::<Owns>(ComponentHooks::new().on_remove(owner_removed));

    let p = world.spawn((Plain(0),));
    world.spawn((Parent(p),));
    assert!(world.has::<HasChild>(p));
    assert_eq!(world.deferred_len(), 0);

    let p2 = world.spawn((Plain(0),));
    let c2 = world.spawn((Plain(1),));
    world.insert(c2, (Parent(p2),)).unwrap();
    assert!(world.has::<HasChild>(p2));
    assert_eq!(world.deferred_len(), 0);

    let owned = world.spawn((Plain(2),));
    let owner = world.spawn((Owns(owned),));
    world.despawn(owner).unwrap();
    assert!(!world.contains(owned));
    assert_eq!(world.deferred_len(), 0);

    let owned = world.spawn((Plain(3),));
    let owner = world.spawn((Owns(owned),));
    assert_eq!(world.remove::<(Owns,)>(owner), Some((Owns(owned),)));
    assert!(!world.contains(owned));
    assert!(world.contains(owner));
    assert_eq!(world.deferred_len(), 0);

    let owned: Vec<Entity> = (0..3).map(|i| world.spawn((Plain(i),))).collect();
    let owners: Vec<Entity> = owned.iter().map(|&o| world.spawn((Owns(o),))).collect();
    assert_eq!(world.despawn_batch(owners), 3);
    assert!(owned.iter().all(|&o| !world.contains(o)));
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

/// `Chain(n)` spawns a `Chain(n - 1)` when added (deferred), down to 0.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Chain(u32);
/// Despawns the next link when removed (deferred).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Link(Option<Entity>);

fn chain_added(w: &mut DeferredWorld<'_>, e: Entity) {
    let n = w.get::<Chain>(e).unwrap().0;
    w.resource_mut::<Order>().unwrap().0.push(n);
    if n > 0 {
        w.defer(move |world| {
            world.spawn((Chain(n - 1),));
        });
    }
}

fn link_removed(w: &mut DeferredWorld<'_>, e: Entity) {
    if let Some(next) = w.get::<Link>(e).unwrap().0 {
        w.defer(move |world| world.despawn(next).unwrap());
    }
}

#[test]
fn work_deferred_by_deferred_work_runs_too() {
    let mut world = World::new();
    world.insert_resource(Order::default());
    world.set_hooks::<Chain>(ComponentHooks::new().on_add(chain_added));
    world.set_hooks::<Link>(ComponentHooks::new().on_remove(link_removed));

    world.spawn((Chain(2),));
    assert_eq!(order(&world), [2, 1, 0]);
    assert_eq!(world.len(), 3);
    assert_eq!(world.deferred_len(), 0);

    let third = world.spawn((Link(None),));
    let second = world.spawn((Link(Some(third)),));
    let first = world.spawn((Link(Some(second)),));
    let other = world.spawn((Link(None),));
    world.despawn(first).unwrap();
    assert!(!world.contains(first) && !world.contains(second) && !world.contains(third));
    assert!(world.contains(other));
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Fifo;
#[derive(Debug, Clone, Copy, PartialEq)]
struct Nested;

fn fifo_added(w: &mut DeferredWorld<'_>, _: Entity) {
    w.defer(|world| {
        push_order(world, 1);
        // Inside deferred work, an operation leaves what its hooks defer (4) to the loop
        // already running, behind what was deferred before it.
        world.spawn((Nested,));
        assert_eq!(order(world), [1]);
        assert_eq!(world.deferred_len(), 3);
    });
    w.defer(|world| push_order(world, 2));
    w.defer(|world| push_order(world, 3));
}

fn nested_added(w: &mut DeferredWorld<'_>, _: Entity) {
    w.defer(|world| push_order(world, 4));
}

#[test]
fn deferred_work_runs_in_the_order_deferred() {
    let mut world = World::new();
    world.insert_resource(Order::default());
    world.set_hooks::<Fifo>(ComponentHooks::new().on_add(fifo_added));
    world.set_hooks::<Nested>(ComponentHooks::new().on_add(nested_added));
    world.spawn((Fifo,));
    assert_eq!(order(&world), [1, 2, 3, 4]);
    assert_eq!(world.deferred_len(), 0);
    world.apply_deferred();
    assert_eq!(order(&world), [1, 2, 3, 4]);
}

// ----- what a hook can change -----

#[derive(Debug, Clone, Copy, PartialEq)]
struct Counter(i32);
struct Hub(Entity);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bump;

fn bump_hub(w: &mut DeferredWorld<'_>, _: Entity) {
    let hub = w.resource::<Hub>().unwrap().0;
    w.get_mut::<Counter>(hub).expect("the hub has a Counter").0 += 1;
}

/// The changed tick of `entity`'s `T`, a table component.
fn changed_tick<T: Component>(world: &World, entity: Entity) -> u32 {
    let c = world.components().id::<T>().unwrap();
    let row = world.entities().location(entity).unwrap().table_row as usize;
    let table = world.table_id_of(entity).unwrap().index();
    world.tables()[table].column(c).unwrap().changed_ticks()[row]
}

#[test]
fn a_hook_changes_another_entitys_component() {
    let mut world = World::new();
    world.set_hooks::<Bump>(ComponentHooks::new().on_add(bump_hub).on_remove(bump_hub));
    let hub = world.spawn((Counter(0),));
    world.insert_resource(Hub(hub));
    let t0 = world.change_tick();
    world.increment_change_tick_mut();
    let t1 = world.change_tick();
    assert_ne!(t0, t1);
    assert_eq!(changed_tick::<Counter>(&world, hub), t0);

    let a = world.spawn((Bump,));
    world.spawn((Bump, Plain(0)));
    world.despawn(a).unwrap();
    assert_eq!(world.get::<Counter>(hub), Some(&Counter(3)));
    assert_eq!(changed_tick::<Counter>(&world, hub), t1, "marked changed");
}

// ----- panics -----

fn defer_seven(w: &mut DeferredWorld<'_>, _: Entity) {
    w.defer(|world| push_order(world, 7));
}

#[test]
fn a_panicking_removal_hook_leaves_the_entity_whole_and_its_deferred_work_queued() {
    let mut world = logged_world();
    world.insert_resource(Order::default());
    world.set_hooks::<A>(ComponentHooks::new().on_replace(defer_seven).on_remove(boom));
    let e = world.spawn((A(1), B(2), S(3)));
    take_log(&mut world);

    assert!(catch_unwind(AssertUnwindSafe(|| world.despawn(e))).is_err());
    assert!(world.contains(e));
    assert_eq!(world.get::<A>(e), Some(&A(1)));
    assert_eq!(world.get::<B>(e), Some(&B(2)));
    assert_eq!(world.get::<S>(e), Some(&S(3)));
    world.check_invariants();
    assert_eq!(world.deferred_len(), 1, "on_replace deferred before on_remove panicked");
    assert_eq!(order(&world), []);
    world.apply_deferred();
    assert_eq!(order(&world), [7]);
    assert_eq!(world.deferred_len(), 0);

    // The same through remove and despawn_batch.
    assert!(catch_unwind(AssertUnwindSafe(|| world.remove::<(A,)>(e))).is_err());
    assert_eq!(world.get::<A>(e), Some(&A(1)));
    assert_eq!(world.deferred_len(), 1);
    // Work deferred before a panic runs with the next hooked operation.
    let other = world.spawn((B(5),));
    assert_eq!(world.deferred_len(), 0);
    assert_eq!(order(&world), [7, 7]);
    let caught = catch_unwind(AssertUnwindSafe(|| world.despawn_batch([other, e])));
    assert!(caught.is_err());
    // A batch runs every removal hook before it despawns anything: none went.
    assert!(world.contains(other), "the batch's hooks run before any despawn");
    assert!(world.contains(e), "the hook's entity keeps its components");
    assert_eq!(world.get::<A>(e), Some(&A(1)));
    world.check_invariants();
    assert_eq!(world.deferred_len(), 1);
    world.spawn((B(6),));
    assert_eq!(world.deferred_len(), 0);
    assert_eq!(order(&world), [7, 7, 7]);

    // With the hooks replaced, the despawn works.
    assert!(!world.set_hooks::<A>(logging::<A>()).is_empty());
    take_log(&mut world);
    world.despawn(e).unwrap();
    assert!(!world.contains(e));
    let all: &[(&str, i32)] = &[("A", 1), ("B", 2), ("S", 3)];
    assert_phases(&take_log(&mut world), e, &[(Replace, all), (Remove, all)]);
    world.check_invariants();
}

fn log_then_boom(w: &mut DeferredWorld<'_>, e: Entity) {
    record::<A>(w, Add, e);
    panic!("a hook panics");
}

#[test]
fn a_panicking_on_add_or_on_insert_hook_leaves_the_operation_complete() {
    let mut world = logged_world();
    world.set_hooks::<A>(ComponentHooks::new().on_add(log_then_boom));
    assert!(catch_unwind(AssertUnwindSafe(|| world.spawn((A(7), Plain(8))))).is_err());
    let log = take_log(&mut world);
    let e = log.iter().find(|c| c.1 == "A").expect("the hook ran").2;
    assert_eq!(log.iter().find(|c| c.1 == "A").unwrap().3, Some(7));
    assert!(world.contains(e));
    assert_eq!(world.get::<A>(e), Some(&A(7)));
    assert_eq!(world.get::<Plain>(e), Some(&Plain(8)));
    assert_eq!(world.len(), 1);
    world.check_invariants();

    world.set_hooks::<A>(ComponentHooks::new().on_insert(boom));
    assert!(catch_unwind(AssertUnwindSafe(|| world.insert(e, (A(9), B(10))))).is_err());
    assert_eq!(world.get::<A>(e), Some(&A(9)));
    assert_eq!(world.get::<B>(e), Some(&B(10)));
    world.check_invariants();
}

fn defer_with_a_panic(w: &mut DeferredWorld<'_>, _: Entity) {
    w.defer(|world| push_order(world, 1));
    w.defer(|_| panic!("deferred work panics"));
    w.defer(|world| push_order(world, 3));
}

#[test]
fn a_panicking_deferred_closure_leaves_the_rest_queued() {
    let mut world = World::new();
    world.insert_resource(Order::default());
    world.set_hooks::<Fifo>(ComponentHooks::new().on_add(defer_with_a_panic));
    world.set_hooks::<Nested>(ComponentHooks::new().on_add(nested_added));
    let e = catch_unwind(AssertUnwindSafe(|| world.spawn((Fifo,))));
    assert!(e.is_err());
    assert_eq!(order(&world), [1]);
    assert_eq!(world.deferred_len(), 1);
    assert_eq!(world.len(), 1, "the spawn is complete");
    world.apply_deferred();
    assert_eq!(order(&world), [1, 3]);
    assert_eq!(world.deferred_len(), 0);
    // Deferred work still runs before operations return (the queue is not stuck "applying").
    world.spawn((Nested,));
    assert_eq!(order(&world), [1, 3, 4]);
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

// ----- drops -----

/// Counts its drops.
struct Counted(Arc<AtomicUsize>, i32);
/// As [`Counted`], registered as a sparse-set component.
struct CountedSparse(Arc<AtomicUsize>, i32);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for CountedSparse {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Val for Counted {
    const NAME: &'static str = "Counted";
    fn val(&self) -> i32 {
        self.1
    }
}

impl Val for CountedSparse {
    const NAME: &'static str = "CountedSparse";
    fn val(&self) -> i32 {
        self.1
    }
}

fn drops_each_value_once<T: Val>(mut world: World, make: impl Fn(&Arc<AtomicUsize>, i32) -> T) {
    let drops = Arc::new(AtomicUsize::new(0));
    let dropped = || drops.load(Ordering::SeqCst);
    world.insert_resource(Log::default());
    world.set_hooks::<T>(logging::<T>());
    let e: Vec<Entity> = (0..6).map(|i| world.spawn((make(&drops, i), Plain(i)))).collect();
    assert_eq!(take_log(&mut world).len(), 6 * 2);

    world.insert(e[0], (make(&drops, 10),)).unwrap();
    assert_eq!(dropped(), 1, "the replaced value");
    assert_eq!(
        take_log(&mut world),
        [(Replace, T::NAME, e[0], Some(0)), (Insert, T::NAME, e[0], Some(10))]
    );

    let removed = world.remove::<(T,)>(e[1]).unwrap();
    assert_eq!(dropped(), 1, "the removed value is returned");
    assert_eq!(removed.0.val(), 1);
    drop(removed);
    assert_eq!(dropped(), 2);

    world.despawn(e[2]).unwrap();
    assert_eq!(dropped(), 3);
    assert_eq!(world.despawn_batch([e[3], e[3]]), 1);
    assert_eq!(dropped(), 4);
    let removed = world.remove_batch::<(T,)>([e[4]]).unwrap();
    assert_eq!(dropped(), 4);
    drop(removed);
    assert_eq!(dropped(), 5);
    // A failed insert drops its bundle, after no hook.
    take_log(&mut world);
    assert!(world.insert(e[2], (make(&drops, 11),)).is_err());
    assert_eq!(dropped(), 6);
    assert_eq!(take_log(&mut world), []);

    world.clear();
    assert_eq!(dropped(), 8, "e0's and e5's");
    let log = take_log(&mut world);
    assert_eq!(log.len(), 4, "{log:?}");
    assert!(log.iter().all(|c| c.3.is_some()), "{log:?}");
    world.check_invariants();
    drop(world);
    assert_eq!(dropped(), 8);
}

#[test]
fn every_value_is_dropped_once_through_the_hooked_operations() {
    drops_each_value_once(World::new(), |d, i| Counted(d.clone(), i));
    let mut world = World::new();
    world.register_component::<CountedSparse>(StorageType::SparseSet).unwrap();
    drops_each_value_once(world, |d, i| CountedSparse(d.clone(), i));
}

#[test]
fn a_panicking_on_replace_hook_drops_the_new_value_once_and_keeps_the_old() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    world.set_hooks::<Counted>(ComponentHooks::new().on_replace(boom));
    let e = world.spawn((Counted(drops.clone(), 0),));
    let caught = catch_unwind(AssertUnwindSafe(|| world.insert(e, (Counted(drops.clone(), 1),))));
    assert!(caught.is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the new value, not inserted");
    assert_eq!(world.get::<Counted>(e).map(|c| c.1), Some(0));
    world.check_invariants();
    // A bundle that repeats a component drops both values, before any hook.
    let twice = (Counted(drops.clone(), 2), Counted(drops.clone(), 3));
    assert!(matches!(world.insert(e, twice), Err(EntityError::Component(_))));
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    world.set_hooks::<Counted>(ComponentHooks::new());
    world.despawn(e).unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}

// ----- setting hooks -----

#[test]
fn set_hooks_returns_the_old_hooks_and_empty_hooks_turn_them_off() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    assert!(world.hooks::<A>().is_empty(), "never registered");
    world.spawn((Plain(0),));
    assert!(world.hooks::<Plain>().is_empty(), "registered, no hooks");
    assert!(ComponentHooks::new().is_empty());
    assert!(!ComponentHooks::new().on_remove(log_remove::<A>).is_empty());

    assert!(world.set_hooks::<A>(logging::<A>()).is_empty());
    assert!(!world.hooks::<A>().is_empty());
    let e = world.spawn((A(1),));
    assert_eq!(take_log(&mut world).len(), 2);

    let old = world.set_hooks::<A>(ComponentHooks::new());
    assert!(!old.is_empty());
    assert!(world.hooks::<A>().is_empty());
    world.insert(e, (A(2),)).unwrap();
    let f = world.spawn((A(3),));
    assert_eq!(world.remove::<(A,)>(e), Some((A(2),)));
    world.insert_batch([(e, (A(4),))]).unwrap();
    world.remove_batch::<(A,)>([e]).unwrap();
    world.despawn(f).unwrap();
    world.spawn_batch([(A(5),), (A(6),)]);
    world.despawn_batch([e]);
    world.clear();
    assert_eq!(take_log(&mut world), [], "no hooks run once turned off");

    // The returned hooks are the ones set: setting them back turns the logging on again, also
    // for an entity spawned while they were off, in an archetype made then.
    let h = world.spawn((A(8), B(8)));
    assert!(world.set_hooks::<A>(old).is_empty());
    let g = world.spawn((A(7),));
    assert_eq!(take_log(&mut world), [(Add, "A", g, Some(7)), (Insert, "A", g, Some(7))]);
    world.despawn(g).unwrap();
    assert_eq!(take_log(&mut world), [(Replace, "A", g, Some(7)), (Remove, "A", g, Some(7))]);
    world.despawn(h).unwrap();
    assert_eq!(take_log(&mut world), [(Replace, "A", h, Some(8)), (Remove, "A", h, Some(8))]);
    world.check_invariants();
}

#[test]
fn a_world_without_hooks_defers_nothing() {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    let e: Vec<Entity> = (0..4).map(|i| world.spawn((A(i), S(i)))).collect();
    world.insert(e[0], (B(0),)).unwrap();
    assert_eq!(world.remove::<(A,)>(e[0]), Some((A(0),)));
    world.insert_batch([(e[1], (B(1),))]).unwrap();
    assert_eq!(world.remove_batch::<(S,)>([e[2], e[3]]).unwrap(), [(S(2),), (S(3),)]);
    assert_eq!(world.despawn_batch([e[1], e[2]]), 2);
    world.despawn(e[3]).unwrap();
    assert_eq!(world.deferred_len(), 0);
    world.apply_deferred();
    assert!(world.hooks::<A>().is_empty() && world.hooks::<S>().is_empty());
    assert_eq!(world.len(), 1);
    assert_eq!(world.get::<B>(e[0]), Some(&B(0)));
    world.clear();
    assert!(world.is_empty());
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

// ----- a model -----

/// Kept in step with component `T` by its hooks: the entities that have one (`on_add`,
/// `on_remove`) and their values (`on_insert`, `on_replace`, `on_remove`).
struct Mirror<T> {
    index: HashSet<Entity>,
    values: HashMap<Entity, i32>,
    _of: PhantomData<fn() -> T>,
}

impl<T> Default for Mirror<T> {
    fn default() -> Self {
        Self { index: HashSet::new(), values: HashMap::new(), _of: PhantomData }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct M(i32);
/// Registered as a sparse-set component.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ms(i32);
val!(M, Ms);

fn value_in_place<T: Val>(w: &DeferredWorld<'_>, e: Entity, hook: &str) -> i32 {
    w.get::<T>(e).unwrap_or_else(|| panic!("{}'s {hook} of {e:?}: no value", T::NAME)).val()
}

fn mirror_add<T: Val>(w: &mut DeferredWorld<'_>, e: Entity) {
    value_in_place::<T>(w, e, "on_add");
    let mirror = w.resource_mut::<Mirror<T>>().unwrap();
    assert!(!mirror.values.contains_key(&e), "on_add before on_insert");
    assert!(mirror.index.insert(e), "{}'s on_add of {e:?}, which has one", T::NAME);
}

fn mirror_insert<T: Val>(w: &mut DeferredWorld<'_>, e: Entity) {
    let value = value_in_place::<T>(w, e, "on_insert");
    let mirror = w.resource_mut::<Mirror<T>>().unwrap();
    assert!(mirror.index.contains(&e), "{}'s on_insert of {e:?} without on_add", T::NAME);
    mirror.values.insert(e, value);
}

fn mirror_replace<T: Val>(w: &mut DeferredWorld<'_>, e: Entity) {
    let value = value_in_place::<T>(w, e, "on_replace");
    let mirror = w.resource_mut::<Mirror<T>>().unwrap();
    assert_eq!(mirror.values.get(&e), Some(&value), "{}'s on_replace of {e:?}", T::NAME);
}

fn mirror_remove<T: Val>(w: &mut DeferredWorld<'_>, e: Entity) {
    let value = value_in_place::<T>(w, e, "on_remove");
    let mirror = w.resource_mut::<Mirror<T>>().unwrap();
    assert!(mirror.index.remove(&e), "{}'s on_remove of {e:?}, which has none", T::NAME);
    assert_eq!(mirror.values.remove(&e), Some(value), "{}'s on_remove of {e:?}", T::NAME);
}

fn mirroring<T: Val>() -> ComponentHooks {
    ComponentHooks::new()
        .on_add(mirror_add::<T>)
        .on_insert(mirror_insert::<T>)
        .on_replace(mirror_replace::<T>)
        .on_remove(mirror_remove::<T>)
}

/// Asserts that `T`'s mirror is exactly the `T`s of the entities of `all`.
fn check_mirror<T: Val>(world: &World, all: &[Entity], step: usize, op: u32) {
    let want: HashMap<Entity, i32> =
        all.iter().filter_map(|&e| world.get::<T>(e).map(|v| (e, v.val()))).collect();
    let mirror = world.resource::<Mirror<T>>().unwrap();
    assert_eq!(mirror.values, want, "{}'s values after step {step} (op {op})", T::NAME);
    let index: HashSet<Entity> = want.keys().copied().collect();
    assert_eq!(mirror.index, index, "{}'s index after step {step} (op {op})", T::NAME);
}

/// A seeded linear congruential generator.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn hooks_keep_an_index_in_step_through_random_operations() {
    let steps = if cfg!(miri) { 200 } else { 2000 };
    let mut world = World::new();
    world.register_component::<Ms>(StorageType::SparseSet).unwrap();
    world.insert_resource(Mirror::<M>::default());
    world.insert_resource(Mirror::<Ms>::default());
    world.set_hooks::<M>(mirroring::<M>());
    world.set_hooks::<Ms>(mirroring::<Ms>());
    let mut rng = Lcg(0x5eed_1234_abcd_0042);
    let mut all: Vec<Entity> = Vec::new();

    for step in 0..steps {
        // A value of its own per step: 1, 2, ...
        let v = i32::try_from(step).unwrap() + 1;
        let op = rng.below(16) as u32;
        let some = |rng: &mut Lcg, all: &[Entity], k: usize| -> Vec<Entity> {
            if all.is_empty() {
                Vec::new()
            } else {
                (0..k).map(|_| all[rng.below(all.len())]).collect()
            }
        };
        let one = some(&mut rng, &all, 1).first().copied();
        match (op, one) {
            (0, _) => all.push(world.spawn((M(v),))),
            (1, _) => all.push(world.spawn((M(v), Ms(-v)))),
            (2, _) => all.push(world.spawn((Plain(v),))),
            (3, _) => all.push(world.spawn((Ms(v), Plain(v)))),
            (4, Some(e)) => {
                let alive = world.contains(e);
                assert_eq!(world.insert(e, (M(v),)).is_ok(), alive);
            }
            (5, Some(e)) => {
                let alive = world.contains(e);
                assert_eq!(world.insert(e, (Ms(v), Plain(v))).is_ok(), alive);
            }
            (6, Some(e)) => {
                let had = world.get::<M>(e).copied();
                assert_eq!(world.remove::<(M,)>(e), had.map(|m| (m,)));
            }
            (7, Some(e)) => {
                let had = world.get::<Ms>(e).copied();
                assert_eq!(world.remove::<(Ms,)>(e), had.map(|m| (m,)));
            }
            (8, Some(e)) => {
                let alive = world.contains(e);
                assert_eq!(world.despawn(e).is_ok(), alive);
            }
            (9, _) => {
                let k = rng.below(6);
                let batch = some(&mut rng, &all, k);
                let mut seen = HashSet::new();
                let want = batch.iter().filter(|&&e| world.contains(e) && seen.insert(e)).count();
                assert_eq!(world.despawn_batch(batch), want);
            }
            (10, _) => {
                let k = rng.below(4);
                let batch = some(&mut rng, &all, k);
                let ok = batch.iter().all(|&e| world.contains(e));
                let result = world.insert_batch(batch.iter().map(|&e| (e, (M(v),))));
                assert_eq!(result.is_ok(), ok, "{result:?}");
            }
            (11, _) => {
                let k = rng.below(4);
                let batch = some(&mut rng, &all, k);
                let mut seen = HashSet::new();
                let ok = batch.iter().all(|&e| world.has::<Ms>(e) && seen.insert(e));
                let want: Vec<i32> = if ok {
                    batch.iter().map(|&e| world.get::<Ms>(e).unwrap().0).collect()
                } else {
                    Vec::new()
                };
                match world.remove_batch::<(Ms,)>(batch.iter().copied()) {
                    Ok(got) => {
                        assert!(ok);
                        assert_eq!(got.iter().map(|m| m.0.0).collect::<Vec<_>>(), want);
                    }
                    Err(e) => assert!(!ok, "{e:?}"),
                }
            }
            (12, _) => {
                let k = rng.below(4);
                all.extend(world.spawn_batch((0..k).map(|i| (M(v * 10 + i as i32),))));
            }
            (13, _) => {
                let e = world.reserve_entity();
                all.push(e);
                if rng.below(2) == 0 {
                    world.spawn_reserved(e, (M(v), Ms(v))).unwrap();
                } else {
                    world.spawn_reserved(e, (Ms(v),)).unwrap();
                }
            }
            (14, Some(e)) => {
                // A removal of both, which fails (changing nothing) when one is missing.
                let had = world.get::<M>(e).copied().zip(world.get::<Ms>(e).copied());
                assert_eq!(world.remove::<(M, Ms)>(e), had);
            }
            (15, _) if rng.below(40) == 0 => world.clear(),
            _ => {}
        }
        check_mirror::<M>(&world, &all, step, op);
        check_mirror::<Ms>(&world, &all, step, op);
        assert_eq!(world.deferred_len(), 0);
        if step % 100 == 0 {
            world.check_invariants();
        }
    }
    world.check_invariants();
}

// ----- hooks that reserve entities -----

/// The entities [`spawn_via_reservation`] reserved.
#[derive(Default)]
struct Reserved(Vec<Entity>);

/// Reserves an entity (a `&World` method) and defers giving it a `Plain`: how a hook spawns an
/// entity whose id it needs at once.
fn spawn_via_reservation(w: &mut DeferredWorld<'_>, _: Entity) {
    let r = w.reserve_entity();
    w.resource_mut::<Reserved>().unwrap().0.push(r);
    w.defer(move |world| world.spawn_reserved(r, (Plain(-1),)).unwrap());
}

fn reserving_world() -> World {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    world.insert_resource(Reserved::default());
    let hooks = ComponentHooks::new()
        .on_add(spawn_via_reservation)
        .on_replace(spawn_via_reservation)
        .on_remove(spawn_via_reservation);
    world.set_hooks::<A>(hooks);
    world.set_hooks::<S>(hooks);
    world
}

/// Asserts every entity reserved so far is alive with its `Plain`, and returns how many.
fn check_reserved(world: &World) -> usize {
    let reserved = &world.resource::<Reserved>().unwrap().0;
    for &r in reserved {
        assert_eq!(world.get::<Plain>(r), Some(&Plain(-1)), "{r:?} of {reserved:?}");
    }
    world.check_invariants();
    reserved.len()
}

#[test]
fn hooks_can_reserve_entities_for_their_deferred_work() {
    let mut world = reserving_world();
    let e: Vec<Entity> = (0..6).map(|i| world.spawn((A(i),))).collect();
    assert_eq!(check_reserved(&world), 6);
    let s = world.spawn((S(0), A(9)));
    assert_eq!(check_reserved(&world), 8);
    world.insert(e[0], (A(10),)).unwrap(); // on_replace
    assert_eq!(check_reserved(&world), 9);
    world.remove::<(A,)>(e[0]).unwrap(); // on_replace, on_remove
    assert_eq!(check_reserved(&world), 11);
    world.despawn(e[1]).unwrap();
    assert_eq!(check_reserved(&world), 13);
    assert_eq!(world.despawn_batch([e[2], s, e[3]]), 3);
    assert_eq!(check_reserved(&world), 13 + 2 + 4 + 2);
    world.remove_batch::<(A,)>([e[4], e[5]]).unwrap();
    assert_eq!(check_reserved(&world), 21 + 4);
    world.insert_batch([(e[4], (A(1),)), (e[5], (A(2),))]).unwrap(); // on_add
    assert_eq!(check_reserved(&world), 25 + 2);
    world.spawn_batch((0..3).map(|i| (A(i), S(i))));
    assert_eq!(check_reserved(&world), 27 + 6);
}

/// `World::clear` flushes the reserved entities before it runs the removal hooks, so an entity
/// a hook reserves is still pending when the entities are cleared: it stays reserved through
/// the clear, and the hook's deferred work spawns it afterwards.
#[test]
fn clear_with_hooks_that_reserve_entities() {
    let mut world = reserving_world();
    let e: Vec<Entity> = (0..3).map(|i| world.spawn((A(i), Plain(i)))).collect();
    let before = check_reserved(&world);
    world.clear();
    assert!(!world.contains(e[0]));
    // Each A's on_replace and on_remove reserved one, spawned once the clear was done; the
    // entities reserved (and spawned) before the clear went with it.
    let reserved = &world.resource::<Reserved>().unwrap().0;
    assert_eq!(reserved.len(), before + 2 * 3);
    assert!(reserved[..before].iter().all(|&r| !world.contains(r)));
    for &r in &reserved[before..] {
        assert_eq!(world.get::<Plain>(r), Some(&Plain(-1)), "{r:?} survived the clear");
    }
    assert_eq!(world.len(), 2 * 3);
    world.check_invariants();
}

// ----- one kind of hook alone -----

/// A world with a [`Log`] and only `hooks` set (on `A`, or on the sparse-set `S` when
/// `sparse`): the operations must take their hooked paths for each kind of hook on its own.
fn world_with_only(hooks: ComponentHooks, sparse: bool) -> World {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    world.insert_resource(Log::default());
    if sparse {
        world.set_hooks::<S>(hooks);
    } else {
        world.set_hooks::<A>(hooks);
    }
    world
}

/// Runs every structural operation on `T` and returns the log, with the entities involved.
fn every_operation<T: Val>(world: &mut World, make: fn(i32) -> T) -> (Vec<Call>, [Entity; 6]) {
    let spawned = world.spawn((make(1), Plain(0)));
    let batch = world.spawn_batch([(make(2),)]);
    let reserved = world.reserve_entity();
    world.spawn_reserved(reserved, (make(3),)).unwrap();
    let bare = world.spawn((Plain(1),));
    world.insert(bare, (make(4),)).unwrap(); // new
    world.insert(bare, (make(5),)).unwrap(); // replacing
    world.insert_batch([(spawned, (make(6),))]).unwrap(); // replacing
    assert!(world.remove::<(T,)>(bare).is_some());
    world.remove_batch::<(T,)>([spawned]).unwrap();
    world.despawn(batch[0]).unwrap();
    let doomed = world.spawn((make(7),));
    assert_eq!(world.despawn_batch([doomed]), 1);
    let cleared = world.spawn((make(8),));
    world.clear();
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
    (take_log(world), [spawned, batch[0], reserved, bare, doomed, cleared])
}

#[test]
fn each_kind_of_hook_runs_on_its_own() {
    for sparse in [false, true] {
        let name = if sparse { "S" } else { "A" };
        let run = |hooks: ComponentHooks| {
            let mut world = world_with_only(hooks, sparse);
            let (log, e) = if sparse {
                every_operation(&mut world, S)
            } else {
                every_operation(&mut world, A)
            };
            let [spawned, batch, reserved, bare, doomed, cleared] = e;
            (log, spawned, batch, reserved, bare, doomed, cleared)
        };

        let (log, spawned, batch, reserved, bare, doomed, cleared) =
            run(ComponentHooks::new().on_add(if sparse { log_add::<S> } else { log_add::<A> }));
        let want: Vec<Call> =
            [(spawned, 1), (batch, 2), (reserved, 3), (bare, 4), (doomed, 7), (cleared, 8)]
                .into_iter()
                .map(|(e, v)| (Add, name, e, Some(v)))
                .collect();
        assert_eq!(log, want, "on_add alone ({name})");

        let (log, spawned, batch, reserved, bare, doomed, cleared) =
            run(ComponentHooks::new().on_insert(if sparse {
                log_insert::<S>
            } else {
                log_insert::<A>
            }));
        let want: Vec<Call> = [
            (spawned, 1),
            (batch, 2),
            (reserved, 3),
            (bare, 4),
            (bare, 5),
            (spawned, 6),
            (doomed, 7),
            (cleared, 8),
        ]
        .into_iter()
        .map(|(e, v)| (Insert, name, e, Some(v)))
        .collect();
        assert_eq!(log, want, "on_insert alone ({name})");

        let (log, spawned, batch, _, bare, doomed, cleared) = run(ComponentHooks::new()
            .on_replace(if sparse { log_replace::<S> } else { log_replace::<A> }));
        let want: Vec<Call> =
            [(bare, 4), (spawned, 1), (bare, 5), (spawned, 6), (batch, 2), (doomed, 7)]
                .into_iter()
                .map(|(e, v)| (Replace, name, e, Some(v)))
                .collect();
        // The clear's calls come last, in the world's order of its entities.
        let (before_clear, rest) = log.split_at(log.len().saturating_sub(2));
        assert_eq!(rest.len(), 2, "on_replace alone ({name}): {log:?}");
        assert_eq!(before_clear, want, "on_replace alone ({name})");
        let mut rest = rest.to_vec();
        rest.sort();
        let mut cleared_want =
            vec![(Replace, name, cleared, Some(8)), (Replace, name, reserved, Some(3))];
        cleared_want.sort();
        assert_eq!(rest, cleared_want, "on_replace alone, clear ({name})");

        let (log, spawned, batch, reserved, bare, doomed, cleared) =
            run(ComponentHooks::new().on_remove(if sparse {
                log_remove::<S>
            } else {
                log_remove::<A>
            }));
        let want: Vec<Call> = [(bare, 5), (spawned, 6), (batch, 2), (doomed, 7)]
            .into_iter()
            .map(|(e, v)| (Remove, name, e, Some(v)))
            .collect();
        assert_eq!(log[..4], want, "on_remove alone ({name})");
        let mut rest = log[4..].to_vec();
        rest.sort();
        let mut cleared_want =
            vec![(Remove, name, cleared, Some(8)), (Remove, name, reserved, Some(3))];
        cleared_want.sort();
        assert_eq!(rest, cleared_want, "on_remove alone, clear ({name})");
    }
}

// ----- panics outside the hooks (review findings) -----

/// Followed by [`Tracked`]'s hooks: the entities holding one, and the `on_remove` calls.
#[derive(Default)]
struct Tracking {
    live: Vec<Entity>,
    removes: usize,
}

struct Tracked(u32);

fn track_add(w: &mut DeferredWorld<'_>, e: Entity) {
    w.resource_mut::<Tracking>().unwrap().live.push(e);
}

fn track_remove(w: &mut DeferredWorld<'_>, e: Entity) {
    let tracking = w.resource_mut::<Tracking>().unwrap();
    tracking.removes += 1;
    tracking.live.retain(|&x| x != e);
}

/// Panics when dropped while it holds `true`.
struct Bomb(bool);

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.0 && !std::thread::panicking() {
            panic!("a Bomb goes off");
        }
    }
}

fn tracking_world() -> World {
    let mut world = World::new();
    world.insert_resource(Tracking::default());
    world.set_hooks::<Tracked>(ComponentHooks::new().on_add(track_add).on_remove(track_remove));
    world
}

/// The entities holding a `Tracked`, as the hooks saw them and as the world has them.
fn tracked(world: &World, candidates: &[Entity]) -> (Vec<Entity>, Vec<Entity>) {
    let mut by_hooks = world.resource::<Tracking>().unwrap().live.clone();
    by_hooks.sort();
    let mut held: Vec<Entity> =
        candidates.iter().copied().filter(|&e| world.get::<Tracked>(e).is_some()).collect();
    held.sort();
    held.dedup();
    (by_hooks, held)
}

#[test]
fn a_spawn_batch_whose_iterator_panics_ran_the_hooks_of_every_entity_it_spawned() {
    let mut world = tracking_world();
    let caught = catch_unwind(AssertUnwindSafe(|| {
        world.spawn_batch((0..4u32).map(|i| {
            assert!(i != 2, "the iterator panics");
            (Tracked(i),)
        }))
    }));
    assert!(caught.is_err());
    world.check_invariants();
    assert_eq!(world.len(), 2);
    let all: Vec<Entity> = world.resource::<Tracking>().unwrap().live.clone();
    let (by_hooks, held) = tracked(&world, &all);
    assert_eq!(by_hooks.len(), 2, "on_add ran for both entities spawned before the panic");
    assert_eq!(by_hooks, held);
    let mut values: Vec<u32> = held.iter().map(|&e| world.get::<Tracked>(e).unwrap().0).collect();
    values.sort_unstable();
    assert_eq!(values, [0, 1], "the bundles before the panicking item");
}

#[test]
fn an_insert_whose_replaced_drop_panics_still_runs_the_new_components_hooks() {
    let mut world = tracking_world();
    let e = world.spawn((Bomb(true),));
    let caught = catch_unwind(AssertUnwindSafe(|| world.insert(e, (Bomb(false), Tracked(1)))));
    assert!(caught.is_err(), "the replaced Bomb went off");
    world.check_invariants();
    assert!(world.get::<Tracked>(e).is_some(), "the insert is complete");
    assert_eq!(world.resource::<Tracking>().unwrap().live, [e], "and its on_add ran");
}

#[test]
fn a_despawn_batch_whose_drop_panics_still_despawns_every_entity_whose_hooks_ran() {
    let mut world = tracking_world();
    let a = world.spawn((Tracked(0), Bomb(true)));
    let b = world.spawn((Tracked(1), Bomb(false)));
    let c = world.spawn((Bomb(true),)); // no hooks, also goes off
    let d = world.spawn((Plain(0),));
    let caught = catch_unwind(AssertUnwindSafe(|| world.despawn_batch([a, b, c, d])));
    assert!(caught.is_err());
    world.check_invariants();
    for e in [a, b, c, d] {
        assert!(!world.contains(e), "{e:?}: every entity of the batch is gone");
    }
    let tracking = world.resource::<Tracking>().unwrap();
    assert_eq!((tracking.live.len(), tracking.removes), (0, 2), "one on_remove each");
    // The same past the sweep threshold.
    let es: Vec<Entity> = (0..3).map(|i| world.spawn((Tracked(i), Bomb(i == 0)))).collect();
    let dead = world.spawn((Plain(1),));
    world.despawn(dead).unwrap();
    let mut batch = es.clone();
    batch.resize(BULK_DESPAWN_FROM, dead);
    assert!(catch_unwind(AssertUnwindSafe(|| world.despawn_batch(batch))).is_err());
    world.check_invariants();
    assert!(world.is_empty());
    assert_eq!(world.resource::<Tracking>().unwrap().removes, 2 + 3);
}

fn despawn_on_add(w: &mut DeferredWorld<'_>, e: Entity) {
    w.defer(move |world| world.despawn(e).unwrap());
}

#[test]
fn a_view_whose_entity_a_hook_despawned_says_so() {
    let mut world = World::new();
    world.set_hooks::<Tracked>(ComponentHooks::new().on_add(despawn_on_add));
    let e = world.spawn((Plain(0),));
    let mut view = world.entity_mut(e).unwrap();
    assert!(!view.is_despawned());
    view.insert((Tracked(1),)).unwrap();
    assert!(view.is_despawned(), "the deferred despawn ran before insert returned");
    assert_eq!(view.get::<Plain>(), None);
    assert!(!view.contains::<Plain>());
    assert!(matches!(view.insert((Plain(2),)), Err(EntityError::NoSuchEntity(x)) if x == e));
    assert!(view.remove::<(Plain,)>().is_none());
    assert!(format!("{view:?}").contains("despawned"));
    assert!(catch_unwind(AssertUnwindSafe(|| view.as_ref().id())).is_err());
    view.despawn(); // nothing left to do
    assert!(!world.contains(e));
    world.check_invariants();
}
