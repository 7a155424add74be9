//! Panics: panicking hooks and deferred closures, panicking `Drop`s and iterators around hooked
//! operations, and every value dropped once through them.

use super::deferred::{Fifo, Nested, nested_added};
use super::*;

// ----- panics -----

fn defer_seven(w: &mut DeferredWorld<'_>, _: Entity) {
    w.defer(|world| push_order(world, 7));
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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

// ----- panics outside the hooks -----

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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
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
