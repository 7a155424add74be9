//! Work hooks defer: run before the operation returns, in order, nested; what a hook may change
//! in place; and hooks that reserve entities for their deferred work.

use super::*;

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
pub(super) struct Fifo;
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Nested;

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

pub(super) fn nested_added(w: &mut DeferredWorld<'_>, _: Entity) {
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
