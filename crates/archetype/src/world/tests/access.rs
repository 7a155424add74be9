//! Reading and writing what the world holds: resources and their ticks, entity views, the
//! change tick; and the invariant check that the other tests lean on.

use super::*;

#[test]
fn resources() {
    let mut world = World::new();
    assert!(world.resource::<u32>().is_none());
    assert_eq!(world.insert_resource(5u32), None);
    assert_eq!(world.insert_resource(6u32), Some(5));
    *world.resource_mut::<u32>().unwrap() += 1;
    assert_eq!(world.resource::<u32>(), Some(&7));
    assert!(world.contains_resource::<u32>());
    assert_eq!(world.remove_resource::<u32>(), Some(7));
    assert!(!world.contains_resource::<u32>());
}

#[test]
fn resource_ticks_follow_inserts_replacements_and_mutable_borrows() {
    use crate::ResourceTicks;
    let mut world = World::new();
    assert_eq!(world.resource_ticks::<u32>(), None);
    let t0 = world.increment_change_tick_mut() + 1;
    world.insert_resource(1u32);
    assert_eq!(world.resource_ticks::<u32>(), Some(ResourceTicks { added: t0, changed: t0 }));
    // A replacement keeps the added tick and is a change.
    let t1 = world.increment_change_tick_mut() + 1;
    assert_eq!(world.insert_resource(2u32), Some(1));
    assert_eq!(world.resource_ticks::<u32>(), Some(ResourceTicks { added: t0, changed: t1 }));
    let ticks = world.resource_ticks::<u32>().unwrap();
    assert!(!ticks.is_added(t0, t1 + 1) && ticks.is_changed(t0, t1 + 1));
    assert!(!ticks.is_changed(t1, t1 + 1));
    // Reading marks nothing; a mutable borrow does.
    let t2 = world.increment_change_tick_mut() + 1;
    assert_eq!(world.resource::<u32>(), Some(&2));
    assert_eq!(world.resource_ticks::<u32>().unwrap().changed, t1);
    *world.resource_mut::<u32>().unwrap() += 1;
    assert_eq!(world.resource_ticks::<u32>(), Some(ResourceTicks { added: t0, changed: t2 }));
    // Removed and inserted again: added anew.
    world.increment_change_tick_mut();
    let t3 = world.change_tick();
    assert_eq!(world.remove_resource::<u32>(), Some(3));
    assert_eq!(world.resource_ticks::<u32>(), None);
    world.insert_resource(4u32);
    assert_eq!(world.resource_ticks::<u32>(), Some(ResourceTicks { added: t3, changed: t3 }));
}

/// `check_invariants` is what the panic-safety tests lean on, so it must notice each kind of
/// breakage it claims to check.
#[test]
#[cfg_attr(miri, ignore = "catches panics it provokes on purpose; nothing unsafe runs")]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn check_invariants_notices_broken_worlds() {
    fn broken(corrupt: impl FnOnce(&mut World, Entity, Entity)) -> bool {
        let mut world = sparse_world();
        let a = world.spawn((Pos(0.0, 0.0), Sparse(1)));
        let b = world.spawn((Pos(1.0, 1.0), Vel(0.0, 0.0)));
        world.check_invariants();
        corrupt(&mut world, a, b);
        let world = std::panic::AssertUnwindSafe(world);
        std::panic::catch_unwind(|| world.check_invariants()).is_err()
    }
    // A wrong table row in an entity's location.
    assert!(broken(|w, a, _| {
        let mut loc = w.entities.location(a).unwrap();
        loc.table_row += 1;
        w.entities.set_location(a, loc);
    }));
    // A wrong archetype in an entity's location.
    assert!(broken(|w, a, b| {
        let other = w.entities.location(b).unwrap();
        let mut loc = w.entities.location(a).unwrap();
        loc.archetype_id = other.archetype_id;
        w.entities.set_location(a, loc);
    }));
    // A sparse-set value left behind for an entity whose archetype lacks the component.
    assert!(broken(|w, _, b| {
        let id = w.components.id::<Sparse>().unwrap();
        let set = w.sparse_sets[id.index()].as_mut().unwrap();
        let value = std::mem::ManuallyDrop::new(Sparse(9));
        // SAFETY:
        // - the pointer is a `Sparse`, the set's type, moved in once (`ManuallyDrop`).
        unsafe { set.insert(b, (&raw const value).cast_mut().cast(), 0) }.unwrap();
    }));
    // An archetype row that is not the table row in an archetype without a list.
    assert!(broken(|w, _, b| {
        let mut loc = w.entities.location(b).unwrap();
        assert!(!w.archetypes[loc.archetype_id as usize].is_listed());
        loc.archetype_row += 1;
        w.entities.set_location(b, loc);
    }));
    // An entity freed behind the world's back.
    assert!(broken(|w, _, b| {
        w.entities.free(b);
    }));
}

#[test]
fn entity_views_read_write_and_refuse_dead_entities() {
    let mut world = sparse_world();
    let e = world.spawn((Pos(1.0, 2.0), Sparse(3)));
    let view = world.entity(e).unwrap();
    assert_eq!(view.id(), e);
    assert_eq!(view.get::<Pos>(), Some(&Pos(1.0, 2.0)));
    assert_eq!(view.get::<Sparse>(), Some(&Sparse(3)));
    assert!(view.contains::<Sparse>() && !view.contains::<Vel>());
    assert_eq!(view.get::<Vel>(), None);
    let names: Vec<_> = view.components().map(|c| c.name()).collect();
    assert_eq!(names.len(), 2);
    assert!(
        names.iter().any(|n| n.ends_with("Pos")) && names.iter().any(|n| n.ends_with("Sparse"))
    );
    assert_eq!(view.archetype().len(), 1);
    assert!(format!("{view:?}").contains("Sparse"));

    let tick = world.increment_change_tick();
    let mut view = world.entity_mut(e).unwrap();
    view.get_mut::<Pos>().unwrap().0 = 5.0;
    view.insert((Vel(1.0, 1.0),)).unwrap().insert((Tag,)).unwrap();
    assert_eq!(view.remove::<(Sparse,)>(), Some((Sparse(3),)));
    assert_eq!(view.remove::<(Sparse,)>(), None);
    assert!(view.insert((Pos(0.0, 0.0), Pos(1.0, 1.0))).is_err(), "duplicate component");
    assert_eq!(view.as_ref().get::<Pos>(), Some(&Pos(5.0, 2.0)));
    let loc = world.entities().location(e).unwrap();
    let table = &world.tables()[world.table_id_of(e).unwrap().index()];
    let pos = world.components().id::<Pos>().unwrap();
    assert!(table.column(pos).unwrap().changed_ticks()[loc.table_row as usize] > tick);
    world.check_invariants();

    world.entity_mut(e).unwrap().despawn();
    assert!(!world.contains(e));
    assert!(matches!(world.entity(e), Err(EntityError::NoSuchEntity(x)) if x == e));
    assert!(matches!(world.entity_mut(e), Err(EntityError::NoSuchEntity(x)) if x == e));
    let reused = world.spawn((Pos(0.0, 0.0),));
    assert!(world.entity(e).is_err() && world.entity(reused).is_ok(), "stale id after reuse");
    world.check_invariants();
}

#[test]
fn increment_change_tick_mut_hands_out_the_same_ticks_as_the_atomic_one() {
    let mut world = World::new();
    let start = world.change_tick();
    assert_eq!(world.increment_change_tick(), start);
    assert_eq!(world.increment_change_tick_mut(), start + 1);
    assert_eq!(world.increment_change_tick(), start + 2);
    assert_eq!(world.change_tick(), start + 3);
    // It wraps as the atomic one does.
    *world.change_tick.get_mut() = u32::MAX;
    assert_eq!(world.increment_change_tick_mut(), u32::MAX);
    assert_eq!(world.change_tick(), 0);
}
