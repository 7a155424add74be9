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

// The tests by topic. The model test stays in this file, below: `.ci/run` names it by its full
// path (`world::hook_tests::...`), so its path must not change.
mod deferred;
mod kinds;
mod operations;
mod panics;

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
