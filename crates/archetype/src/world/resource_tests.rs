//! Resources: ownership (each dropped once), replacement, and the raw pointer a scheduler uses.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use folio_storage::Entity;

use super::*;

struct Counted(Arc<AtomicUsize>, u32);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn resources_are_dropped_once_and_returned_when_replaced() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    assert!(world.insert_resource(Counted(drops.clone(), 1)).is_none());
    let old = world.insert_resource(Counted(drops.clone(), 2)).unwrap();
    assert_eq!(old.1, 1);
    drop(old);
    assert_eq!(drops.load(Ordering::Relaxed), 1);
    world.resource_mut::<Counted>().unwrap().1 = 3;
    assert_eq!(world.resource::<Counted>().unwrap().1, 3);
    world.insert_resource(String::from("kept until the world drops"));
    let removed = world.remove_resource::<Counted>().unwrap();
    assert_eq!(removed.1, 3);
    assert!(!world.contains_resource::<Counted>());
    drop(removed);
    world.insert_resource(Counted(drops.clone(), 4));
    drop(world);
    assert_eq!(drops.load(Ordering::Relaxed), 3);
}

#[test]
fn the_resource_pointer_writes_through_a_shared_world() {
    let mut world = World::new();
    world.insert_resource(7u64);
    let shared = &world;
    let ptr = shared.resource_ptr::<u64>().unwrap();
    // SAFETY: no reference to the resource is live; the pointer carries the box's provenance.
    unsafe { *ptr.as_ptr() += 1 };
    assert_eq!(world.resource::<u64>(), Some(&8));
    assert!(world.resource_ptr::<u32>().is_none());
}

/// Panics on drop (unless already unwinding), after counting the drop.
struct Panicking<const N: usize>(Arc<AtomicUsize>);

impl<const N: usize> Drop for Panicking<N> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
        if !std::thread::panicking() {
            panic!("resource {N} panics on drop");
        }
    }
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_resource_whose_drop_panics_leaves_no_other_resource_undropped() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    world.insert_resource(Panicking::<0>(drops.clone()));
    world.insert_resource(Panicking::<1>(drops.clone()));
    world.insert_resource(Panicking::<2>(drops.clone()));
    world.insert_resource(Counted(drops.clone(), 3));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(world)));
    assert!(result.is_err(), "the first resource dropped panics");
    assert_eq!(drops.load(Ordering::Relaxed), 4, "every resource dropped once");
}

#[test]
fn resource_scope_lends_the_world_and_the_resource_together() {
    struct Level(Vec<u32>);
    let mut world = World::new();
    assert_eq!(world.resource_scope(|_, _: &mut Level| unreachable!("no Level yet")), None);
    world.insert_resource(Level(vec![1, 2, 3]));
    let added = world.resource_ticks::<Level>().unwrap().added;
    world.increment_change_tick();
    let spawned = world
        .resource_scope(|world, level: &mut Level| {
            assert!(!world.contains_resource::<Level>(), "out of the world while lent");
            let spawned: Vec<Entity> = level.0.iter().map(|&n| world.spawn((n,))).collect();
            level.0.clear();
            world.increment_change_tick();
            spawned
        })
        .unwrap();
    assert_eq!(spawned.len(), 3);
    assert_eq!(world.get::<u32>(spawned[2]), Some(&3));
    assert!(world.resource::<Level>().unwrap().0.is_empty(), "the scope's writes are kept");
    let ticks = world.resource_ticks::<Level>().unwrap();
    assert_eq!(ticks.added, added, "put back, not added again");
    assert_eq!(ticks.changed, world.change_tick(), "changed when it came back");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn resource_scope_puts_the_resource_back_when_f_panics() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    world.insert_resource(Counted(drops.clone(), 1));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.resource_scope(|_, counted: &mut Counted| {
            counted.1 = 2;
            panic!("a system panics mid-scope");
        })
    }));
    assert!(result.is_err());
    assert_eq!(world.resource::<Counted>().unwrap().1, 2, "back, with the write before the panic");
    assert_eq!(drops.load(Ordering::Relaxed), 0, "nothing dropped");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn resource_scope_replaces_what_f_inserted_meanwhile() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut world = World::new();
    world.insert_resource(Counted(drops.clone(), 1));
    world.resource_scope(|world, _: &mut Counted| {
        world.insert_resource(Counted(drops.clone(), 2));
    });
    assert_eq!(world.resource::<Counted>().unwrap().1, 1, "the scoped value goes back");
    assert_eq!(drops.load(Ordering::Relaxed), 1, "the one inserted meanwhile was dropped");

    // Its drop may panic: the scoped value is back first.
    world.insert_resource(Panicking::<9>(drops.clone()));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.resource_scope(|world, _: &mut Panicking<9>| {
            world.insert_resource(Panicking::<9>(drops.clone()));
        })
    }));
    assert!(result.is_err(), "the replaced value's drop panicked");
    assert!(world.contains_resource::<Panicking<9>>(), "the scoped value is back");
    assert_eq!(drops.load(Ordering::Relaxed), 2);
    let scoped = world.remove_resource::<Panicking<9>>();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(scoped)));
    assert!(result.is_err(), "and its drop panics too, once");
    assert_eq!(drops.load(Ordering::Relaxed), 3);
}

#[test]
fn init_resource_makes_a_missing_resource_from_default_or_the_world_and_keeps_an_existing_one() {
    #[derive(Default, Debug, PartialEq)]
    struct Score(u32);
    /// Made from the world: as many slots as there are entities.
    #[derive(Debug, PartialEq)]
    struct Slots(usize);
    impl crate::FromWorld for Slots {
        fn from_world(world: &mut World) -> Self {
            Slots(world.len())
        }
    }
    let mut world = World::new();
    world.init_resource::<Score>();
    assert_eq!(world.resource::<Score>(), Some(&Score(0)));
    world.resource_mut::<Score>().unwrap().0 = 7;
    let changed = world.resource_ticks::<Score>().unwrap().changed;
    world.increment_change_tick_mut();
    world.init_resource::<Score>();
    assert_eq!(world.resource::<Score>(), Some(&Score(7)), "an existing one is kept");
    assert_eq!(world.resource_ticks::<Score>().unwrap().changed, changed, "and not changed");
    world.spawn((1u8,));
    world.spawn((2u8,));
    world.init_resource::<Slots>();
    assert_eq!(world.resource::<Slots>(), Some(&Slots(2)));
}
