//! Observers: lifecycle events from every structural path, game events (global, watched,
//! propagating), removal, deferred work, depth limit, panics and bad input.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use folio_storage::Entity;

use super::*;
use crate::component::StorageType;
use crate::hooks::{ComponentHooks, DeferredWorld, HookFlags};
use crate::observer::{
    Event, MAX_EVENT_DEPTH, ObservedBy, Observer, ObserverError, OnAdd, OnInsert, OnRemove,
    OnReplace, Propagation, Trigger,
};
use crate::relationship::ChildOf;

#[derive(Debug, Clone, Copy, PartialEq)]
struct A(i32);
#[derive(Debug, Clone, Copy, PartialEq)]
struct B(i32);
/// A sparse-set component.
#[derive(Debug, Clone, Copy, PartialEq)]
struct S(i32);
/// Never observed.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Plain(i32);

/// A shared log the observers write to.
type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::default()
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// The value of `A`, `B` or `S` at `e`, as an observer reads it.
fn value(w: &World, e: Entity) -> String {
    let a = w.get::<A>(e).map(|v| v.0);
    let b = w.get::<B>(e).map(|v| v.0);
    let s = w.get::<S>(e).map(|v| v.0);
    format!("{a:?}/{b:?}/{s:?}")
}

/// Adds one logging observer per lifecycle event, each watching `A`, `B` and `S`.
fn observe_all(world: &mut World, log: &Log) {
    fn one<E: Event>(world: &mut World, log: &Log, name: &'static str) {
        let log = log.clone();
        let observer = Observer::new(move |t: &mut Trigger<E>, w: &mut DeferredWorld| {
            let c = t.component().expect("a lifecycle event names its component");
            let c = w.components().info(c).name().rsplit("::").next();
            let line = format!("{name} {} {:?} {}", c.unwrap(), t.entity(), value(w, t.entity()));
            log.lock().unwrap().push(line);
        });
        world.add_observer(observer.component::<A>().component::<B>().component::<S>()).unwrap();
    }
    one::<OnAdd>(world, log, "add");
    one::<OnInsert>(world, log, "insert");
    one::<OnReplace>(world, log, "replace");
    one::<OnRemove>(world, log, "remove");
}

fn world_with_log() -> (World, Log) {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    let log = log();
    observe_all(&mut world, &log);
    (world, log)
}

#[test]
fn spawn_runs_add_then_insert_per_component_with_values_in_place() {
    let (mut world, log) = world_with_log();
    let e = world.spawn((A(1), B(2)));
    assert_eq!(
        take(&log),
        [
            format!("add A {e:?} Some(1)/Some(2)/None"),
            format!("add B {e:?} Some(1)/Some(2)/None"),
            format!("insert A {e:?} Some(1)/Some(2)/None"),
            format!("insert B {e:?} Some(1)/Some(2)/None"),
        ]
    );
    // Components nobody observes fire nothing.
    world.spawn((Plain(0),));
    assert!(take(&log).is_empty());
}

#[test]
fn insert_replaces_and_adds_remove_and_despawn_see_the_values() {
    let (mut world, log) = world_with_log();
    let e = world.spawn((A(1),));
    take(&log);
    world.insert(e, (A(10), S(3))).unwrap();
    assert_eq!(
        take(&log),
        [
            format!("replace A {e:?} Some(1)/None/None"),
            format!("add S {e:?} Some(10)/None/Some(3)"),
            format!("insert A {e:?} Some(10)/None/Some(3)"),
            format!("insert S {e:?} Some(10)/None/Some(3)"),
        ]
    );
    assert_eq!(world.remove::<(S,)>(e), Some((S(3),)));
    assert_eq!(
        take(&log),
        [
            format!("replace S {e:?} Some(10)/None/Some(3)"),
            format!("remove S {e:?} Some(10)/None/Some(3)")
        ]
    );
    world.despawn(e).unwrap();
    assert_eq!(
        take(&log),
        [
            format!("replace A {e:?} Some(10)/None/None"),
            format!("remove A {e:?} Some(10)/None/None")
        ]
    );
    world.check_invariants();
}

#[test]
fn hooks_of_a_kind_run_before_its_observers() {
    let mut world = World::new();
    let log = log();
    world.set_hooks::<A>(ComponentHooks::new().on_add(|w, e| w.get_mut::<A>(e).unwrap().0 += 100));
    let l = log.clone();
    world
        .add_observer(
            Observer::new(move |t: &mut Trigger<OnAdd>, w: &mut DeferredWorld| {
                l.lock().unwrap().push(format!("{}", w.get::<A>(t.entity()).unwrap().0));
            })
            .component::<A>(),
        )
        .unwrap();
    world.spawn((A(1),));
    assert_eq!(take(&log), ["101"]);
}

#[test]
fn batches_and_clear_fire_each_event_once() {
    let (mut world, log) = world_with_log();
    let es = world.spawn_batch((0..5).map(|i| (A(i), B(i))));
    let es2 = world.spawn_batch((0..5).map(|i| (A(i), B(i))));
    let lines = take(&log);
    // 10 entities × 2 components × (add, insert)
    assert_eq!(lines.iter().filter(|l| l.starts_with("add ")).count(), 20, "{lines:?}");
    assert_eq!(lines.len(), 40, "{lines:?}");
    world.insert_batch(es.iter().map(|&e| (e, (A(7),)))).unwrap();
    let lines = take(&log);
    assert_eq!(lines.iter().filter(|l| l.starts_with("replace A")).count(), 5);
    assert_eq!(lines.iter().filter(|l| l.starts_with("insert A")).count(), 5);
    assert_eq!(lines.len(), 10);
    world.remove_batch::<(B,)>(es.iter().copied()).unwrap();
    let lines = take(&log);
    assert_eq!(lines.len(), 10, "{lines:?}");
    assert_eq!(world.despawn_batch(es.iter().copied().chain(es.iter().copied())), 5);
    let lines = take(&log);
    assert_eq!(lines.len(), 10, "{lines:?}"); // A only: replace + remove
    world.clear();
    let lines = take(&log);
    assert_eq!(lines.len(), 20, "{lines:?}"); // es2: A and B, replace + remove
    assert!(es2.iter().all(|&e| !world.contains(e)));
    world.check_invariants();
}

#[test]
fn observers_keep_captured_state() {
    let mut world = World::new();
    let total = Arc::new(Mutex::new(0));
    let seen = total.clone();
    let mut calls = 0;
    world
        .add_observer(
            Observer::new(move |t: &mut Trigger<OnInsert>, w: &mut DeferredWorld| {
                calls += 1;
                *seen.lock().unwrap() = calls * 1000 + w.get::<A>(t.entity()).unwrap().0;
            })
            .component::<A>(),
        )
        .unwrap();
    let e = world.spawn((A(1),));
    world.insert(e, (A(2),)).unwrap();
    assert_eq!(*total.lock().unwrap(), 2002);
}

struct Ping(u32);
impl Event for Ping {}

#[test]
fn trigger_runs_global_observers_and_watchers_of_the_target() {
    let mut world = World::new();
    let log = log();
    let a = world.spawn((A(1),));
    let b = world.spawn((A(2),));
    let l = log.clone();
    world.observe(move |t: &mut Trigger<Ping>, _: &mut DeferredWorld| {
        l.lock().unwrap().push(format!("global {} {:?}", t.event().0, t.target()));
    });
    let l = log.clone();
    world
        .add_observer(
            Observer::new(move |t: &mut Trigger<Ping>, _: &mut DeferredWorld| {
                l.lock().unwrap().push(format!("watch {} {:?}", t.event().0, t.target()));
                t.event_mut().0 += 1;
            })
            .watch(a),
        )
        .unwrap();
    world.trigger(Ping(1));
    assert_eq!(take(&log), ["global 1 None"]);
    world.trigger_targets(Ping(1), [b, a, b]);
    assert_eq!(
        take(&log),
        [
            format!("global 1 Some({b:?})"),
            format!("global 1 Some({a:?})"),
            format!("watch 1 Some({a:?})"),
            format!("global 2 Some({b:?})"),
        ]
    );
    assert_eq!(world.get::<ObservedBy>(a).map(|o| o.observers().len()), Some(1));
}

struct Click;
impl Event for Click {
    const PROPAGATE: Propagation = Propagation::along::<ChildOf>();
}

/// root <- mid <- leaf, each watched by an observer that logs the click.
fn clickable_tree(log: &Log, stop_at_mid: bool) -> (World, [Entity; 3]) {
    let mut world = World::new();
    let root = world.spawn((A(0),));
    let mid = world.spawn((A(1), ChildOf(root)));
    let leaf = world.spawn((A(2), ChildOf(mid)));
    for (name, e) in [("root", root), ("mid", mid), ("leaf", leaf)] {
        let l = log.clone();
        let observer = Observer::new(move |t: &mut Trigger<Click>, _: &mut DeferredWorld| {
            assert_eq!(t.target(), Some(e));
            l.lock().unwrap().push(format!("{name} from {:?}", t.original_target()));
            if stop_at_mid && name == "mid" {
                t.stop_propagation();
            }
        });
        world.add_observer(observer.watch(e)).unwrap();
    }
    (world, [root, mid, leaf])
}

#[test]
fn events_propagate_up_the_relationship_until_stopped() {
    let log = log();
    let (mut world, [_, mid, leaf]) = clickable_tree(&log, false);
    world.trigger_targets(Click, [leaf]);
    let from = format!("from Some({leaf:?})");
    assert_eq!(take(&log), [format!("leaf {from}"), format!("mid {from}"), format!("root {from}")]);
    world.trigger_targets(Click, [mid]);
    assert_eq!(take(&log).len(), 2);

    let (mut world, [_, _, leaf]) = clickable_tree(&log, true);
    take(&log);
    world.trigger_targets(Click, [leaf]);
    let from = format!("from Some({leaf:?})");
    assert_eq!(take(&log), [format!("leaf {from}"), format!("mid {from}")]);
}

#[test]
fn global_observers_see_every_hop() {
    let log = log();
    let (mut world, [root, mid, leaf]) = clickable_tree(&log, false);
    let l = log.clone();
    world.observe(move |t: &mut Trigger<Click>, _: &mut DeferredWorld| {
        l.lock().unwrap().push(format!("global at {:?}", t.entity()));
    });
    world.trigger_targets(Click, [leaf]);
    let lines = take(&log);
    let globals: Vec<_> = lines.iter().filter(|l| l.starts_with("global")).cloned().collect();
    assert_eq!(globals, [leaf, mid, root].map(|e| format!("global at {e:?}")));
}

#[test]
fn a_relationship_target_despawned_by_an_observer_ends_propagation_cleanly() {
    let log = log();
    let (mut world, [root, mid, leaf]) = clickable_tree(&log, false);
    // The leaf's second observer despawns the mid node (deferred), and clicks again.
    let mut once = true;
    world
        .add_observer(
            Observer::new(move |t: &mut Trigger<Click>, w: &mut DeferredWorld| {
                if std::mem::take(&mut once) {
                    w.despawn(mid);
                    w.trigger_targets(Click, [t.entity()]);
                }
            })
            .watch(leaf),
        )
        .unwrap();
    world.trigger_targets(Click, [leaf]);
    // The first click went all the way up. The despawn of `mid` ran next, queuing the leaf's
    // (a linked child's) despawn after the second click: that click reached the leaf, and
    // stopped at its dead parent.
    let from = format!("from Some({leaf:?})");
    let expect = ["leaf", "mid", "root", "leaf"].map(|name| format!("{name} {from}"));
    assert_eq!(take(&log), expect);
    assert!(!world.contains(mid) && !world.contains(leaf) && world.contains(root));
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
    // The watchers of despawned entities went with them.
    assert_eq!(world.observer_count(), 1);
    world.trigger_targets(Click, [root]);
    assert_eq!(take(&log), [format!("root from Some({root:?})")]);
}

#[test]
fn a_target_despawned_before_a_queued_event_stops_it_at_the_global_observers() {
    let mut world = World::new();
    let log = log();
    let parent = world.spawn((A(0),));
    let child = world.spawn((A(1),));
    world.set_parent(child, parent).unwrap();
    let l = log.clone();
    world.observe(move |t: &mut Trigger<Click>, w: &mut DeferredWorld| {
        l.lock().unwrap().push(format!("{:?} alive {}", t.entity(), w.contains(t.entity())));
    });
    // Unlink the child without despawning it, then click it: the walk stops at the child.
    world.remove::<(ChildOf,)>(child).unwrap();
    world.trigger_targets(Click, [child]);
    assert_eq!(take(&log), [format!("{child:?} alive true")]);
    world.despawn(child).unwrap();
    world.trigger_targets(Click, [child]);
    assert_eq!(take(&log), [format!("{child:?} alive false")]);
    world.check_invariants();
}

#[test]
fn observers_write_through_deferred_access() {
    let mut world = World::new();
    let made = Arc::new(Mutex::new(None));
    let m = made.clone();
    world
        .add_observer(
            Observer::new(move |t: &mut Trigger<OnAdd>, w: &mut DeferredWorld| {
                let e = t.entity();
                w.get_mut::<A>(e).unwrap().0 += 1; // components change at once
                let spawned = w.spawn((B(5),)); // structure changes later
                assert!(w.get::<B>(spawned).is_none());
                w.insert(e, (B(6),));
                w.remove::<(A,)>(e);
                *m.lock().unwrap() = Some(spawned);
            })
            .component::<A>(),
        )
        .unwrap();
    let e = world.spawn((A(1),));
    let spawned = made.lock().unwrap().unwrap();
    assert_eq!(world.get::<B>(spawned), Some(&B(5)));
    assert_eq!(world.get::<B>(e), Some(&B(6)));
    assert!(world.get::<A>(e).is_none());
    world.check_invariants();
}

#[test]
fn events_triggered_by_observers_run_after_them_in_order() {
    let mut world = World::new();
    let log = log();
    let l = log.clone();
    world.observe(move |t: &mut Trigger<Ping>, w: &mut DeferredWorld| {
        let n = t.event().0;
        l.lock().unwrap().push(format!("start {n}"));
        if n < 3 {
            w.trigger(Ping(n * 10));
            w.trigger(Ping(n * 10 + 1));
        }
        l.lock().unwrap().push(format!("end {n}"));
    });
    world.trigger(Ping(1));
    let expect = ["start 1", "end 1", "start 10", "end 10", "start 11", "end 11"];
    assert_eq!(take(&log), expect);
}

#[test]
fn remove_observer_stops_it_and_clears_the_flags() {
    let mut world = World::new();
    let log = log();
    let l = log.clone();
    let id = world
        .add_observer(
            Observer::new(move |_: &mut Trigger<OnAdd>, _: &mut DeferredWorld| {
                l.lock().unwrap().push("add".into());
            })
            .component::<A>(),
        )
        .unwrap();
    assert!(world.hooks.any(HookFlags::ADD));
    world.spawn((A(1),));
    assert!(world.remove_observer(id));
    assert!(!world.remove_observer(id), "a stale id names nothing");
    assert!(!world.hooks.any(HookFlags::ADD));
    let e = world.spawn((A(1),));
    assert_eq!(take(&log), ["add"]);
    assert!(!world.entity_has_hooks(e, HookFlags::SPAWN));
    // A new observer in the old slot has a new id.
    let again = world.observe(|_: &mut Trigger<Ping>, _: &mut DeferredWorld| {});
    assert_ne!(again, id);
    assert_eq!(world.observer_count(), 1);
}

#[test]
fn a_watched_entity_despawned_removes_its_observers_after_its_removal_events() {
    let mut world = World::new();
    let log = log();
    let e = world.spawn((A(1),));
    let other = world.spawn((A(2),));
    let l = log.clone();
    world
        .add_observer(
            Observer::new(move |t: &mut Trigger<OnRemove>, _: &mut DeferredWorld| {
                l.lock().unwrap().push(format!("{:?}", t.entity()));
            })
            .component::<A>()
            .watch(e),
        )
        .unwrap();
    let both = world
        .add_observer(
            Observer::new(|_: &mut Trigger<Ping>, _: &mut DeferredWorld| {}).watch(e).watch(other),
        )
        .unwrap();
    world.despawn(other).unwrap(); // not watched by the first: fires nothing
    assert!(take(&log).is_empty());
    assert_eq!(world.observer_count(), 2, "the Ping observer still watches e");
    world.despawn(e).unwrap();
    assert_eq!(take(&log), [format!("{e:?}")]);
    assert_eq!(world.observer_count(), 0);
    assert!(!world.remove_observer(both));
    world.check_invariants();
}

#[test]
fn bad_observers_are_refused_and_change_nothing() {
    let mut world = World::new();
    let add = Observer::new(|_: &mut Trigger<OnAdd>, _: &mut DeferredWorld| {});
    let err = world.add_observer(add).unwrap_err();
    assert!(
        matches!(err, ObserverError::NoComponents { event } if event == std::any::type_name::<OnAdd>())
    );
    let ping = Observer::new(|_: &mut Trigger<Ping>, _: &mut DeferredWorld| {}).component::<A>();
    assert!(matches!(
        world.add_observer(ping).unwrap_err(),
        ObserverError::ComponentsOnGameEvent { .. }
    ));
    let dead = world.spawn((A(1),));
    world.despawn(dead).unwrap();
    let ping = Observer::new(|_: &mut Trigger<Ping>, _: &mut DeferredWorld| {}).watch(dead);
    let err = world.add_observer(ping).unwrap_err();
    assert!(matches!(err, ObserverError::NoSuchEntity(e) if e == dead));
    assert!(err.to_string().contains("not alive"));
    assert_eq!(world.observer_count(), 0);
}

#[test]
#[should_panic(expected = "World::observe: an observer of folio_archetype::observer::OnRemove")]
fn observe_refuses_a_lifecycle_event() {
    World::new().observe(|_: &mut Trigger<OnRemove>, _: &mut DeferredWorld| {});
}

#[test]
#[should_panic(expected = "Trigger::entity: this")]
fn entity_of_an_untargeted_event_panics() {
    let mut world = World::new();
    world.observe(|t: &mut Trigger<Ping>, _: &mut DeferredWorld| {
        t.entity();
    });
    world.trigger(Ping(0));
}

/// The panic message of `f`.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("panics");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn an_observer_triggering_itself_without_end_hits_the_depth_limit() {
    let mut world = World::new();
    let runs = Arc::new(Mutex::new(0u32));
    let r = runs.clone();
    world.observe(move |t: &mut Trigger<Ping>, w: &mut DeferredWorld| {
        *r.lock().unwrap() += 1;
        w.trigger(Ping(t.event().0 + 1));
    });
    let message = panic_message(|| world.trigger(Ping(0)));
    assert!(
        message.contains("1025 events deep") && message.contains("MAX_EVENT_DEPTH"),
        "{message}"
    );
    assert_eq!(*runs.lock().unwrap(), MAX_EVENT_DEPTH);
    // Consistent, and usable: the depth is back to 0, the observer is in place.
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
    *runs.lock().unwrap() = 0;
    let message = panic_message(|| world.trigger(Ping(0)));
    assert!(message.contains("1025 events deep"), "{message}");
    assert_eq!(*runs.lock().unwrap(), MAX_EVENT_DEPTH);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_lifecycle_loop_through_deferred_spawns_hits_the_depth_limit() {
    let mut world = World::new();
    world
        .add_observer(
            Observer::new(|_: &mut Trigger<OnAdd>, w: &mut DeferredWorld| {
                w.spawn((A(0),));
            })
            .component::<A>(),
        )
        .unwrap();
    let message = panic_message(|| {
        world.spawn((A(0),));
    });
    assert!(message.contains("OnAdd is 1025 events deep"), "{message}");
    // Every spawn that ran is complete (its OnAdd ran at the previous depth).
    assert_eq!(world.len(), MAX_EVENT_DEPTH as usize + 1);
    world.check_invariants();
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_observer_leaves_the_world_whole_and_runs_again() {
    let mut world = World::new();
    let runs = Arc::new(Mutex::new(0));
    let r = runs.clone();
    world
        .add_observer(
            Observer::new(move |_: &mut Trigger<OnRemove>, _: &mut DeferredWorld| {
                *r.lock().unwrap() += 1;
                panic!("observer failed");
            })
            .component::<A>(),
        )
        .unwrap();
    let e = world.spawn((A(1), B(2)));
    assert_eq!(panic_message(|| drop(world.despawn(e))), "observer failed");
    // As for a hook: a removal stopped by a panic leaves the entity whole.
    assert_eq!(world.get::<A>(e), Some(&A(1)));
    world.check_invariants();
    assert_eq!(panic_message(|| drop(world.despawn(e))), "observer failed");
    assert_eq!(*runs.lock().unwrap(), 2);
}

#[test]
fn observers_do_not_change_hookless_entities_paths() {
    let mut world = World::new();
    world
        .add_observer(
            Observer::new(|_: &mut Trigger<OnRemove>, _: &mut DeferredWorld| {}).component::<A>(),
        )
        .unwrap();
    let plain = world.spawn((Plain(1),));
    let hooked = world.spawn((A(1),));
    assert!(!world.entity_has_hooks(plain, HookFlags::REMOVAL));
    assert!(world.entity_has_hooks(hooked, HookFlags::REMOVAL));
    assert!(!world.entity_has_hooks(hooked, HookFlags::SPAWN));
}

#[test]
fn a_restore_that_despawns_a_watched_entity_stops_watching_it() {
    let mut world = World::new();
    world.register_snapshot_copy::<A>();
    world.register_snapshot::<ObservedBy>();
    let log = log();
    let kept = world.spawn((A(1),));
    let snapshot = world.snapshot().unwrap();
    let gone = world.spawn((A(2),));
    let watcher = |log: &Log, name: &'static str| {
        let l = log.clone();
        Observer::new(move |t: &mut Trigger<Ping>, _: &mut DeferredWorld| {
            l.lock().unwrap().push(format!("{name} {:?}", t.target()));
        })
    };
    // One observer watches only the entity the restore despawns, one watches both.
    world.add_observer(watcher(&log, "only").watch(gone)).unwrap();
    world.add_observer(watcher(&log, "both").watch(kept).watch(gone)).unwrap();
    assert_eq!(world.observers.len(), 2);

    world.restore(&snapshot).unwrap();
    assert!(!world.contains(gone) && world.contains(kept));
    // The observer left watching nothing went, as after a despawn; the other watches `kept`.
    assert_eq!(world.observers.len(), 1);
    assert_eq!(world.observers.watched().map(|(_, e)| e).collect::<Vec<_>>(), [kept]);
    world.trigger_targets(Ping(1), [kept]);
    assert_eq!(take(&log), [format!("both Some({kept:?})")]);
    world.check_invariants();
}
