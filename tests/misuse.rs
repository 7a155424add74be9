//! The misuse catalogue: one test per way of using folio wrongly, each proving the documented
//! behaviour (a typed error, `None`, a skipped-and-counted command, or a panic with a clear
//! message) and that nothing was lost on the way: the other entities' values are intact, every
//! component is dropped exactly once, and `World::check_invariants` holds afterwards.
//!
//! Under miri, the tests that run a `Schedule` start rayon's pool and need the flags given in
//! `crates/query/tests/parallel.rs` (`-Zmiri-tree-borrows -Zmiri-ignore-leaks
//! -Zmiri-disable-isolation`); the others also pass with `-Zmiri-strict-provenance` and leak
//! checking on.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use folio::archetype::ComponentError;
use folio::prelude::*;
use folio::query::QueryData;
use folio::storage::StorageError;

/// Counts the drops of the [`Tracked`] values it made.
#[derive(Clone, Default)]
struct Drops(Arc<AtomicUsize>);

impl Drops {
    fn make(&self, id: u32) -> Tracked {
        Tracked { id, drops: self.0.clone(), panic: false }
    }

    /// A value whose `Drop` panics (unless the thread is already unwinding).
    fn panicking(&self, id: u32) -> Tracked {
        Tracked { id, drops: self.0.clone(), panic: true }
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A component that counts its drops, and panics in `Drop` when asked to.
#[derive(Debug)]
struct Tracked {
    id: u32,
    drops: Arc<AtomicUsize>,
    panic: bool,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.panic && !std::thread::panicking() {
            panic!("Tracked {} panics on drop", self.id);
        }
    }
}

/// A second tracked component type (another column).
#[derive(Debug)]
struct Other(Tracked);

/// A tracked component kept in a sparse set.
#[derive(Debug)]
struct InSet(Tracked);

/// A plain value, to check that the other entities keep theirs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Val(u32);

/// A component that no misuse touches, added to make a row move between tables.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Extra(u32);

fn world() -> World {
    let mut world = World::new();
    world.register_component::<InSet>(StorageType::SparseSet).unwrap();
    world
}

/// Runs `f`, which must panic, and returns the panic message.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        String::from("<non-string panic>")
    }
}

/// A world with a live entity `keep`, a despawned entity `stale`, and `reused`, which took
/// `stale`'s index (so `stale` differs from a live entity only in its generation).
struct StaleWorld {
    world: World,
    drops: Drops,
    keep: Entity,
    stale: Entity,
    reused: Entity,
}

impl StaleWorld {
    fn new() -> Self {
        let drops = Drops::default();
        let mut world = world();
        let keep = world.spawn((Val(1), drops.make(1), InSet(drops.make(11))));
        let stale = world.spawn((Val(2), drops.make(2), InSet(drops.make(12))));
        world.despawn(stale).unwrap();
        let reused = world.spawn((Val(3), drops.make(3), InSet(drops.make(13))));
        assert_eq!(reused.index(), stale.index(), "the freed index is reused");
        assert_ne!(reused, stale);
        assert_eq!(drops.count(), 2);
        Self { world, drops, keep, stale, reused }
    }

    /// The stale id and one that was never handed out.
    fn bad_ids(&self) -> [Entity; 2] {
        [self.stale, Entity::PLACEHOLDER]
    }

    /// Nothing changed: both live entities keep their values and `extra_drops` more values
    /// were dropped (the bundles handed to the failed calls); after the world is dropped, every
    /// value was dropped exactly once.
    fn check_untouched(self, extra_drops: usize) {
        let Self { mut world, drops, keep, reused, .. } = self;
        world.check_invariants();
        assert_eq!(world.len(), 2);
        assert_eq!(drops.count(), 2 + extra_drops);
        for (e, v) in [(keep, 1), (reused, 3)] {
            assert_eq!(world.get::<Val>(e), Some(&Val(v)));
            assert_eq!(world.get::<Tracked>(e).map(|t| t.id), Some(v));
            assert_eq!(world.get::<InSet>(e).map(|t| t.0.id), Some(10 + v));
            assert!(!world.has::<Extra>(e));
        }
        let mut q = world.query::<(Entity, &Val)>();
        let mut seen: Vec<(Entity, u32)> = q.iter(&world).map(|(e, v)| (e, v.0)).collect();
        seen.sort();
        let mut want = vec![(keep, 1), (reused, 3)];
        want.sort();
        assert_eq!(seen, want);
        world.get_mut::<Val>(reused).unwrap().0 = 4;
        drop(world);
        assert_eq!(drops.count(), 6 + extra_drops, "every value dropped exactly once");
    }
}

// ----- stale entities: World -----

#[test]
fn stale_entity_world_despawn() {
    let mut s = StaleWorld::new();
    for e in s.bad_ids() {
        assert!(matches!(s.world.despawn(e), Err(EntityError::NoSuchEntity(x)) if x == e));
    }
    s.check_untouched(0);
}

#[test]
fn stale_entity_world_insert() {
    let mut s = StaleWorld::new();
    for e in s.bad_ids() {
        // A bundle that would move the row, one that would replace, and a sparse one: each is
        // refused and dropped.
        let err = s.world.insert(e, (Extra(9), s.drops.make(90))).unwrap_err();
        assert!(matches!(err, EntityError::NoSuchEntity(x) if x == e), "{err}");
        assert!(err.to_string().contains("does not exist"), "{err}");
        let err = s.world.insert(e, (Val(9),)).unwrap_err();
        assert!(matches!(err, EntityError::NoSuchEntity(x) if x == e), "{err}");
        let err = s.world.insert(e, (InSet(s.drops.make(91)),)).unwrap_err();
        assert!(matches!(err, EntityError::NoSuchEntity(x) if x == e), "{err}");
    }
    s.check_untouched(4);
}

#[test]
fn stale_entity_world_remove_and_try_remove() {
    let mut s = StaleWorld::new();
    for e in s.bad_ids() {
        assert!(s.world.remove::<(Val,)>(e).is_none());
        assert!(s.world.remove::<(Tracked, InSet)>(e).is_none());
        let err = s.world.try_remove::<(Val, Tracked)>(e).unwrap_err();
        assert!(matches!(err, EntityError::NoSuchEntity(x) if x == e), "{err}");
        let err = s.world.try_remove::<(InSet,)>(e).unwrap_err();
        assert!(matches!(err, EntityError::NoSuchEntity(x) if x == e), "{err}");
    }
    s.check_untouched(0);
}

#[test]
fn stale_entity_world_get_and_get_mut() {
    let mut s = StaleWorld::new();
    for e in s.bad_ids() {
        assert!(s.world.get::<Val>(e).is_none());
        assert!(s.world.get::<Tracked>(e).is_none());
        assert!(s.world.get::<InSet>(e).is_none());
        assert!(s.world.get_mut::<Val>(e).is_none());
        assert!(s.world.get_mut::<InSet>(e).is_none());
        // A component type the world has never seen.
        assert!(s.world.get::<Extra>(e).is_none());
        assert!(s.world.get_mut::<Extra>(e).is_none());
    }
    s.check_untouched(0);
}

#[test]
fn stale_entity_world_has_and_contains() {
    let s = StaleWorld::new();
    for e in s.bad_ids() {
        assert!(!s.world.contains(e));
        assert!(!s.world.has::<Val>(e));
        assert!(!s.world.has::<InSet>(e));
        assert!(!s.world.has::<Extra>(e));
        assert!(s.world.entities().location(e).is_none());
    }
    assert!(s.world.contains(s.reused) && s.world.contains(s.keep));
    s.check_untouched(0);
}

#[test]
fn stale_entity_world_entity_views() {
    let mut s = StaleWorld::new();
    for e in s.bad_ids() {
        let err = s.world.entity(e).unwrap_err();
        assert!(matches!(err, EntityError::NoSuchEntity(x) if x == e), "{err}");
        let err = s.world.entity_mut(e).unwrap_err();
        assert!(matches!(err, EntityError::NoSuchEntity(x) if x == e), "{err}");
    }
    // The entity that reused a stale id's index is reachable through its own id only.
    assert_eq!(s.world.entity(s.reused).unwrap().id(), s.reused);
    s.check_untouched(0);
}

// ----- stale entities: queries -----

#[test]
fn stale_entity_query_state_get_get_mut_get_many_mut() {
    let mut s = StaleWorld::new();
    let mut q = s.world.query::<(&mut Val, &InSet)>();
    let mut opt = s.world.query::<(Entity, Option<&Tracked>)>();
    for e in s.bad_ids() {
        assert_eq!(q.get(&s.world, e).unwrap_err(), QueryError::NoSuchEntity(e));
        assert_eq!(q.get_mut(&mut s.world, e).unwrap_err(), QueryError::NoSuchEntity(e));
        assert_eq!(opt.get(&s.world, e).unwrap_err(), QueryError::NoSuchEntity(e));
        let err = q.get_many_mut(&mut s.world, [s.keep, e]).unwrap_err();
        assert_eq!(err, QueryError::NoSuchEntity(e));
        let err = q.get_many_mut(&mut s.world, [e, s.reused]).unwrap_err();
        assert_eq!(err, QueryError::NoSuchEntity(e));
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
    // The live entity at the stale one's index is still reachable.
    assert_eq!(q.get(&s.world, s.reused).unwrap().0, &Val(3));
    s.check_untouched(0);
}

#[test]
fn stale_entity_query_param_in_a_system() {
    let mut s = StaleWorld::new();
    let [stale, placeholder] = s.bad_ids();
    let (keep, reused) = (s.keep, s.reused);
    let ran = Arc::new(AtomicBool::new(false));
    let done = ran.clone();
    let mut schedule = Schedule::new();
    schedule.add_systems(move |mut q: Query<(&mut Val, &InSet)>| {
        for e in [stale, placeholder] {
            assert_eq!(q.get(e).unwrap_err(), QueryError::NoSuchEntity(e));
            assert_eq!(q.get_mut(e).unwrap_err(), QueryError::NoSuchEntity(e));
            assert_eq!(q.get_many_mut([keep, e]).unwrap_err(), QueryError::NoSuchEntity(e));
            assert!(!q.contains(e));
        }
        assert!(q.contains(reused));
        done.store(true, Ordering::SeqCst);
    });
    schedule.run(&mut s.world).unwrap();
    assert!(ran.load(Ordering::SeqCst));
    s.check_untouched(0);
}

// ----- stale entities: commands -----

#[test]
fn stale_entity_commands_despawn_insert_remove_and_entity() {
    let mut s = StaleWorld::new();
    let [stale, placeholder] = s.bad_ids();
    let drops = s.drops.clone();
    let mut schedule = Schedule::new();
    schedule.add_systems(move |mut c: Commands| {
        for e in [stale, placeholder] {
            c.despawn(e);
            c.insert(e, (Extra(9), drops.make(90)));
            c.insert(e, (InSet(drops.make(91)),));
            c.remove::<(Val,)>(e);
            c.remove::<(Tracked, InSet)>(e);
            assert_eq!(c.entity(e).id(), e);
            c.entity(e).insert((drops.make(92),)).remove::<(Val,)>().despawn();
        }
    });
    schedule.run(&mut s.world).unwrap();
    let stats = schedule.command_stats();
    assert_eq!((stats.applied, stats.skipped), (0, 16), "{stats:?}");
    assert!(
        stats.recent_skips.iter().all(|m| m.contains("skipped") && m.contains("does not exist")),
        "{stats:?}"
    );
    assert!(stats.recent_skips.iter().any(|m| m.starts_with("insert on ")), "{stats:?}");
    // Each refused insert dropped its bundle once: 3 tracked values per bad id.
    s.check_untouched(6);
}

// ----- bundles -----

#[test]
fn duplicate_component_in_a_bundle() {
    let drops = Drops::default();
    let mut world = world();
    let keep = world.spawn((Val(1), drops.make(1)));
    let is_duplicate = |err: &EntityError| {
        matches!(err, EntityError::Component(ComponentError::DuplicateComponent { name, .. })
            if name.contains("Tracked"))
    };
    // try_spawn: a typed error naming the type; both values dropped, nothing spawned.
    let err = world.try_spawn((drops.make(2), Val(2), drops.make(3))).unwrap_err();
    assert!(is_duplicate(&err), "{err}");
    assert!(err.to_string().contains("more than once"), "{err}");
    assert_eq!(drops.count(), 2);
    // spawn and spawn_batch: a panic with the same message.
    let message = panic_message(|| {
        world.spawn((drops.make(4), drops.make(5)));
    });
    assert!(message.contains("World::spawn") && message.contains("more than once"), "{message}");
    let message = panic_message(|| {
        world.spawn_batch((0..3).map(|i| (Val(i), Val(i))));
    });
    assert!(message.contains("more than once"), "{message}");
    assert_eq!(drops.count(), 4);
    // insert and try_remove: typed errors, the entity unchanged.
    let err = world.insert(keep, (drops.make(6), Extra(0), drops.make(7))).unwrap_err();
    assert!(is_duplicate(&err), "{err}");
    assert_eq!(drops.count(), 6);
    let err = world.try_remove::<(Tracked, Tracked)>(keep).unwrap_err();
    assert!(is_duplicate(&err), "{err}");
    assert!(world.remove::<(Val, Val)>(keep).is_none());
    // Commands: skipped and counted, and the reserved entity of a refused spawn is not left
    // behind empty.
    let d = drops.clone();
    let mut schedule = Schedule::new();
    schedule.add_systems(move |mut c: Commands| {
        c.spawn((d.make(8), d.make(9)));
        c.insert(keep, (d.make(10), d.make(11)));
        c.remove::<(Val, Val)>(keep);
    });
    schedule.run(&mut world).unwrap();
    let stats = schedule.command_stats();
    assert_eq!((stats.applied, stats.skipped), (0, 3), "{stats:?}");
    assert!(stats.recent_skips.iter().all(|m| m.contains("more than once")), "{stats:?}");
    assert_eq!(drops.count(), 10);
    assert_eq!(world.len(), 1, "no entity left behind by the refused spawn");
    world.check_invariants();
    assert_eq!(world.get::<Val>(keep), Some(&Val(1)));
    assert_eq!(world.get::<Tracked>(keep).map(|t| t.id), Some(1));
    assert!(!world.has::<Extra>(keep));
    drop(world);
    assert_eq!(drops.count(), 11);
}

// ----- access -----

#[test]
fn conflicting_access_inside_one_query() {
    let mut world = world();
    let e = world.spawn((Val(1), Extra(2)));
    fn conflict<D: QueryData>(world: &World) -> QueryError {
        world.try_query::<D, ()>().map(|_| ()).unwrap_err()
    }
    for err in [
        conflict::<(&mut Val, &Val)>(&world),
        conflict::<(&Val, &mut Val)>(&world),
        conflict::<(&mut Val, &mut Val)>(&world),
        conflict::<(&mut Val, Option<&Val>)>(&world),
        conflict::<(Entity, &Extra, Option<&mut Val>, &mut Val)>(&world),
    ] {
        assert!(matches!(err, QueryError::Conflict { component } if component.contains("Val")));
        assert!(err.to_string().contains("conflicting access"), "{err}");
    }
    let message = panic_message(|| {
        world.query::<(&mut Val, &Val)>();
    });
    assert!(message.contains("conflicting access") && message.contains("Val"), "{message}");
    // Disjoint and shared access is fine.
    assert!(world.try_query::<(&Val, &Val, Option<&Val>), ()>().is_ok());
    let mut q = world.query::<(&mut Val, &Extra)>();
    q.get_mut(&mut world, e).unwrap().0.0 = 5;
    assert_eq!(world.get::<Val>(e), Some(&Val(5)));
    world.check_invariants();
}

#[test]
fn conflicting_access_inside_one_system() {
    fn two_queries(_: Query<&mut Val>, _: Query<&Val>) {}
    fn resources(_: Res<u32>, _: ResMut<u32>) {}
    fn one_query(_: Query<(&mut Val, &Val)>) {}
    let mut schedule = Schedule::new();
    let err = schedule.try_add_systems(two_queries).map(|_| ()).unwrap_err();
    assert!(matches!(&err, ScheduleError::ConflictingParams { on, .. } if on.contains("Val")));
    assert!(err.to_string().contains("two_queries"), "{err}");
    let err = schedule.try_add_systems(resources).map(|_| ()).unwrap_err();
    assert!(matches!(&err, ScheduleError::ConflictingParams { on, .. } if on.contains("u32")));
    let err = schedule.try_add_systems(one_query).map(|_| ()).unwrap_err();
    assert!(matches!(&err, ScheduleError::Query { error: QueryError::Conflict { .. }, .. }));
    assert!(schedule.is_empty(), "nothing was added");
    let message = panic_message(|| {
        schedule.add_systems(two_queries);
    });
    assert!(message.contains("Schedule::add_systems") && message.contains("conflict"), "{message}");
    // The schedule still works.
    let mut world = world();
    let e = world.spawn((Val(1),));
    schedule.add_systems(|mut q: Query<&mut Val>| q.iter_mut().for_each(|mut v| v.0 += 1));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<Val>(e), Some(&Val(2)));
}

#[test]
fn get_many_mut_with_duplicates() {
    let drops = Drops::default();
    let mut world = world();
    let a = world.spawn((Val(1), drops.make(1)));
    let b = world.spawn((Val(2), drops.make(2), InSet(drops.make(12))));
    let c = world.spawn((Val(3), drops.make(3)));
    let mut q = world.query::<(&mut Val, &mut Tracked)>();
    let err = q.get_many_mut(&mut world, [a, b, a]).unwrap_err();
    assert_eq!(err, QueryError::DuplicateEntity(a));
    assert!(err.to_string().contains("twice"), "{err}");
    assert_eq!(q.get_many_mut(&mut world, [c, c]).unwrap_err(), QueryError::DuplicateEntity(c));
    // A duplicate is refused even where one of the entities would not match.
    let mut sparse = world.query::<&mut InSet>();
    assert_eq!(
        sparse.get_many_mut(&mut world, [b, b]).unwrap_err(),
        QueryError::DuplicateEntity(b)
    );
    // Distinct entities work, and nothing was written by the refused calls.
    let [(mut va, _), (mut vc, _)] = q.get_many_mut(&mut world, [a, c]).unwrap();
    std::mem::swap(&mut va.0, &mut vc.0);
    let mut schedule = Schedule::new();
    schedule.add_systems(move |mut q: Query<&mut Val>| {
        assert_eq!(q.get_many_mut([b, a, b]).unwrap_err(), QueryError::DuplicateEntity(b));
        q.get_many_mut([b]).unwrap()[0].0 += 10;
    });
    schedule.run(&mut world).unwrap();
    let vals: Vec<u32> = [a, b, c].iter().map(|&e| world.get::<Val>(e).unwrap().0).collect();
    assert_eq!(vals, [3, 12, 1]);
    world.check_invariants();
    drop(world);
    assert_eq!(drops.count(), 4);
}

// ----- memory -----

#[test]
fn reservation_exhausted() {
    use folio::storage::{Entities, PushError, VirtualVec};
    // The entity allocator: a typed error, the live ids kept.
    let mut entities = Entities::with_max_entities(2);
    let kept = [entities.alloc(), entities.alloc()];
    let err = entities.try_alloc().unwrap_err();
    assert!(matches!(err, StorageError::CapacityExceeded { capacity: 2, requested: 3 }), "{err}");
    assert!(err.to_string().contains("reservation exhausted"), "{err}");
    assert!(entities.try_reserve().is_err());
    assert!(kept.iter().all(|&e| entities.is_alive(e)));
    // A virtual array: a typed error that hands the value back; the elements are kept and
    // each is dropped once.
    let drops = Drops::default();
    let mut vec = VirtualVec::with_max_capacity(3);
    for i in 0..3 {
        vec.push(drops.make(i));
    }
    let PushError { value, error } = vec.try_push(drops.make(3)).unwrap_err();
    assert!(matches!(error, StorageError::CapacityExceeded { capacity: 3, .. }), "{error}");
    assert_eq!(value.id, 3);
    drop(value);
    assert!(vec.try_reserve(1).is_err());
    assert_eq!(vec.iter().map(|t| t.id).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(drops.count(), 1);
    drop(vec);
    assert_eq!(drops.count(), 4);
}

/// A component aligned beyond a page: its column's reservation starts on a page, so the items
/// start at the first multiple of 8 KiB in it.
#[repr(align(8192))]
struct OverAligned(Tracked);

/// The same, stored in a sparse set.
#[repr(align(8192))]
struct OverAlignedInSet(Tracked);

#[test]
fn components_aligned_beyond_a_page_live_in_reservations_aligned() {
    let drops = Drops::default();
    let mut world = world();
    world.register_component::<OverAlignedInSet>(StorageType::SparseSet).unwrap();
    let aligned = |p: *const u8| p.addr().is_multiple_of(8192);
    // Two 8 KiB items fit in a column's heap phase (16 KiB); the third moves the column into a
    // reservation, and 100 commit it several times.
    let spawned: Vec<Entity> =
        (0..100).map(|i| world.spawn((OverAligned(drops.make(i)), Val(i)))).collect();
    // Inserts move rows into a new table, whose column also leaves the heap; the sparse set's
    // values move into their own reservation.
    let keep = world.spawn((Val(1000),));
    for (i, &e) in spawned.iter().enumerate().step_by(3) {
        world.insert(e, (Other(drops.make(200 + i as u32)),)).unwrap();
        world.insert(e, (OverAlignedInSet(drops.make(400 + i as u32)),)).unwrap();
    }
    world.insert(keep, (OverAligned(drops.make(999)),)).unwrap();
    for (i, &e) in spawned.iter().enumerate() {
        let value = world.get::<OverAligned>(e).unwrap();
        assert_eq!(value.0.id, i as u32);
        assert!(aligned((value as *const OverAligned).cast()), "row of {e:?}");
        assert_eq!(world.get::<Val>(e), Some(&Val(i as u32)));
        if i % 3 == 0 {
            let in_set = world.get::<OverAlignedInSet>(e).unwrap();
            assert_eq!(in_set.0.id, 400 + i as u32);
            assert!(aligned((in_set as *const OverAlignedInSet).cast()), "set value of {e:?}");
        }
    }
    assert_eq!(world.get::<OverAligned>(keep).unwrap().0.id, 999);
    // Removing moves rows back; despawning swap-removes across the reservation.
    let taken = world.remove::<(OverAligned,)>(spawned[3]).unwrap();
    assert_eq!(taken.0.0.id, 3);
    drop(taken);
    for &e in spawned.iter().skip(50) {
        world.despawn(e).unwrap();
    }
    world.check_invariants();
    // The removed value, then the 50 despawned `OverAligned`s and the 17 `Other`s and 17
    // `OverAlignedInSet`s among them (every third entity from 51 on).
    assert_eq!(drops.count(), 1 + 50 + 17 + 17);
    drop(world);
    assert_eq!(drops.count(), 100 + 1 + 34 + 34, "each value dropped once");
}

// ----- panicking drops -----

/// A world of three tables and a sparse set, with a value whose `Drop` panics on `bad`; returns
/// the world, the drop counter, `bad`, and the other entities with their `Val`s.
fn world_with_a_panicking_value() -> (World, Drops, Entity, Vec<(Entity, u32)>) {
    let drops = Drops::default();
    let mut world = world();
    let mut others = Vec::new();
    for i in 0..4 {
        others.push((world.spawn((Val(i), drops.make(i), Other(drops.make(100 + i)))), i));
    }
    let bad =
        world.spawn((Val(50), drops.panicking(50), Other(drops.make(150)), InSet(drops.make(250))));
    for i in 4..8 {
        let e = world.spawn((
            Val(i),
            drops.make(i),
            Other(drops.make(100 + i)),
            InSet(drops.make(200 + i)),
        ));
        others.push((e, i));
    }
    for i in 8..10 {
        others.push((world.spawn((Val(i), Extra(i), InSet(drops.make(200 + i)))), i));
    }
    (world, drops, bad, others)
}

fn check_others(world: &World, others: &[(Entity, u32)]) {
    world.check_invariants();
    for &(e, i) in others {
        assert_eq!(world.get::<Val>(e), Some(&Val(i)), "{e}");
        if let Some(t) = world.get::<Tracked>(e) {
            assert_eq!(t.id, i);
        }
        if let Some(o) = world.get::<Other>(e) {
            assert_eq!(o.0.id, 100 + i);
        }
        if let Some(s) = world.get::<InSet>(e) {
            assert_eq!(s.0.id, 200 + i);
        }
    }
}

/// Tracked values made by [`world_with_a_panicking_value`].
const MADE: usize = 4 * 2 + 3 + 4 * 3 + 2;

#[test]
fn panicking_drop_during_despawn() {
    let (mut world, drops, bad, others) = world_with_a_panicking_value();
    let message = panic_message(|| world.despawn(bad).unwrap());
    assert!(message.contains("Tracked 50 panics on drop"), "{message}");
    // The entity is gone, all three of its values were dropped, the rest is intact.
    assert!(!world.contains(bad));
    assert_eq!(drops.count(), 3);
    assert!(matches!(world.despawn(bad), Err(EntityError::NoSuchEntity(_))));
    check_others(&world, &others);
    assert_eq!(world.len(), others.len());
    drop(world);
    assert_eq!(drops.count(), MADE);
}

#[test]
fn panicking_drop_during_remove() {
    let (mut world, drops, bad, others) = world_with_a_panicking_value();
    // `World::remove` hands the values out: the world is done before the caller drops them.
    let removed = world.remove::<(Tracked, InSet)>(bad).unwrap();
    check_others(&world, &others);
    assert!(!world.has::<Tracked>(bad) && !world.has::<InSet>(bad));
    assert_eq!(world.get::<Other>(bad).map(|o| o.0.id), Some(150));
    let message = panic_message(|| drop(removed));
    assert!(message.contains("Tracked 50"), "{message}");
    assert_eq!(drops.count(), 2);
    world.check_invariants();
    // `Commands::remove` drops what it removes: the panic is reported, the remove is done, the
    // rest of that buffer is thrown away (its bundles dropped, its spawn not left behind).
    world.insert(bad, (drops.panicking(51),)).unwrap();
    let (d, keep) = (drops.clone(), others[0].0);
    let mut schedule = Schedule::new();
    schedule.add_systems(move |mut c: Commands| {
        c.remove::<(Tracked,)>(bad);
        c.spawn((Val(99), d.make(99)));
        c.insert(keep, (Val(98), d.make(98)));
    });
    let len = world.len();
    let err = schedule.run(&mut world).unwrap_err();
    assert!(
        matches!(&err, ScheduleError::SystemPanicked { message, .. } if message.contains("Tracked 51"))
    );
    assert!(!world.has::<Tracked>(bad));
    assert_eq!(world.len(), len, "the thrown-away spawn left nothing behind");
    assert_eq!(drops.count(), 5);
    check_others(&world, &others);
    drop(world);
    drop(schedule);
    assert_eq!(drops.count(), MADE + 3);
}

#[test]
fn panicking_drop_during_an_insert_that_moves_the_row() {
    let (mut world, drops, bad, others) = world_with_a_panicking_value();
    // `bad` has Tracked (panicking) and Other; the bundle replaces both and adds Extra, which
    // moves the row to another table. The old Tracked's drop panics.
    let message = panic_message(|| {
        world.insert(bad, (drops.make(60), Other(drops.make(160)), Extra(60))).unwrap();
    });
    assert!(message.contains("Tracked 50"), "{message}");
    check_others(&world, &others);
    // The insert is complete: every new value is in, every old one dropped once.
    assert_eq!(world.get::<Tracked>(bad).map(|t| t.id), Some(60));
    assert_eq!(world.get::<Other>(bad).map(|o| o.0.id), Some(160));
    assert_eq!(world.get::<Extra>(bad), Some(&Extra(60)));
    assert_eq!(world.get::<InSet>(bad).map(|s| s.0.id), Some(250));
    assert_eq!(drops.count(), 2, "the old Tracked and the old Other");
    drop(world);
    assert_eq!(drops.count(), MADE + 2);
}

#[test]
fn panicking_drop_during_an_insert_that_replaces_in_place() {
    let (mut world, drops, bad, others) = world_with_a_panicking_value();
    // Same archetype: a sparse value, then the panicking table value, then another table
    // value are replaced in place.
    let message = panic_message(|| {
        world
            .insert(bad, (InSet(drops.make(270)), drops.make(70), Other(drops.make(170))))
            .unwrap();
    });
    assert!(message.contains("Tracked 50"), "{message}");
    check_others(&world, &others);
    assert_eq!(world.get::<InSet>(bad).map(|s| s.0.id), Some(270));
    assert_eq!(world.get::<Tracked>(bad).map(|t| t.id), Some(70));
    assert_eq!(world.get::<Other>(bad).map(|o| o.0.id), Some(170));
    assert_eq!(drops.count(), 3, "the three old values");
    drop(world);
    assert_eq!(drops.count(), MADE + 3);
}

#[test]
fn panicking_drop_during_world_drop() {
    let (mut world, drops, _, _) = world_with_a_panicking_value();
    world.insert_resource(Other(drops.make(300)));
    let message = panic_message(|| drop(world));
    assert!(message.contains("Tracked 50"), "{message}");
    assert_eq!(drops.count(), MADE + 1, "every value and resource dropped exactly once");
}

#[test]
fn panicking_drop_during_world_clear() {
    let (mut world, drops, bad, others) = world_with_a_panicking_value();
    let mut q = world.query::<(Entity, &Val)>();
    let message = panic_message(|| world.clear());
    assert!(message.contains("Tracked 50"), "{message}");
    // Every entity is gone and every value dropped once; no table keeps a row.
    world.check_invariants();
    assert!(world.is_empty());
    assert!(!world.contains(bad) && others.iter().all(|&(e, _)| !world.contains(e)));
    assert_eq!(drops.count(), MADE);
    assert_eq!(world.tables().iter().map(|t| t.len()).sum::<usize>(), 0);
    assert_eq!(q.iter(&world).count(), 0);
    // The world is usable again.
    let e = world.spawn((Val(1), drops.make(1), InSet(drops.make(2))));
    assert_eq!(q.iter(&world).map(|(e, v)| (e, v.0)).collect::<Vec<_>>(), [(e, 1)]);
    world.check_invariants();
    drop(world);
    assert_eq!(drops.count(), MADE + 2);
}

// ----- systems and commands -----

#[test]
fn a_system_that_panics() {
    let drops = Drops::default();
    let mut world = world();
    let es: Vec<Entity> = (0..4).map(|i| world.spawn((Val(i), drops.make(i)))).collect();
    let (d, first) = (drops.clone(), es[0]);
    let fired = Arc::new(AtomicBool::new(false));
    let fire = fired.clone();
    let mut schedule = Schedule::new();
    schedule.add_systems((
        // Completes (systems with commands keep their order): its commands are applied.
        {
            let d = d.clone();
            move |mut c: Commands| {
                c.spawn((Val(10), d.make(10)));
            }
        },
        // Writes some values, queues commands, then panics (once): its commands are dropped.
        move |mut q: Query<&mut Val>, mut c: Commands| {
            c.spawn((Val(20), d.make(20)));
            c.despawn(first);
            for mut v in q.iter_mut().take(2) {
                v.0 += 100;
            }
            if !fire.swap(true, Ordering::SeqCst) {
                panic!("system failed mid-frame");
            }
        },
    ));
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::SystemPanicked { message, .. } = &err else { panic!("{err}") };
    assert!(message.contains("system failed mid-frame"), "{err}");
    world.check_invariants();
    assert!(world.contains(first), "the panicking system's despawn was thrown away");
    assert_eq!(world.len(), 5, "the other system's spawn applied, the panicking one's not");
    assert_eq!(drops.count(), 1, "the thrown-away spawn's bundle was dropped once");
    let vals: Vec<u32> = world.query::<&Val>().iter(&world).map(|v| v.0).collect();
    assert_eq!(vals.iter().filter(|&&v| v >= 100).count(), 2, "writes before the panic stay");
    // The schedule runs again.
    schedule.run(&mut world).unwrap();
    assert!(!world.contains(first));
    world.check_invariants();
    drop(world);
    drop(schedule);
    assert_eq!(drops.count(), 4 + 1 + 2 + 1);
    let _ = es;
}

#[test]
fn a_system_that_needs_a_missing_resource() {
    struct Settings;
    fn reads(_: Res<Settings>) {}
    fn optional(settings: Option<Res<Settings>>, mut seen: ResMut<Vec<bool>>) {
        seen.push(settings.is_some());
    }
    let mut world = world();
    world.insert_resource(Vec::<bool>::new());
    let mut schedule = Schedule::new();
    schedule.add_systems((optional, reads.after(optional)));
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::SystemPanicked { system, message } = &err else { panic!("{err}") };
    assert!(system.contains("reads"), "{err}");
    assert!(message.contains("needs resource") && message.contains("Settings"), "{err}");
    assert_eq!(world.resource::<Vec<bool>>().unwrap(), &[false]);
    world.insert_resource(Settings);
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Vec<bool>>().unwrap(), &[false, true]);
}

#[test]
fn a_command_on_a_despawned_entity() {
    let drops = Drops::default();
    let mut world = world();
    let doomed = world.spawn((Val(1), drops.make(1), InSet(drops.make(11))));
    let keep = world.spawn((Val(2), drops.make(2)));
    let d = drops.clone();
    let mut schedule = Schedule::new();
    schedule.add_systems((
        // Despawns `doomed` through its commands...
        move |mut c: Commands| c.despawn(doomed),
        // ...and the next one (systems with commands keep their order), which saw it alive,
        // sends commands that find it gone.
        move |q: Query<Entity, With<Val>>, mut c: Commands| {
            assert!(q.contains(doomed));
            c.insert(doomed, (Extra(1), d.make(90)));
            c.insert(doomed, (InSet(d.make(91)),));
            c.remove::<(Val,)>(doomed);
            c.entity(doomed).insert((d.make(92),)).remove::<(Tracked,)>().despawn();
            c.insert(keep, (Extra(2),));
        },
    ));
    schedule.run(&mut world).unwrap();
    let stats = schedule.command_stats();
    assert_eq!((stats.applied, stats.skipped), (2, 6), "{stats:?}");
    assert!(stats.recent_skips.iter().all(|m| m.contains(&doomed.to_string())), "{stats:?}");
    assert!(!world.contains(doomed));
    assert_eq!(world.get::<Extra>(keep), Some(&Extra(2)));
    assert_eq!(drops.count(), 2 + 3, "doomed's values and the three refused bundles");
    world.check_invariants();
    drop(world);
    assert_eq!(drops.count(), 6);
}

// ----- awkward component types -----

static ZST_DROPS: AtomicUsize = AtomicUsize::new(0);

/// A zero-sized component with a `Drop`.
struct Zst;

impl Drop for Zst {
    fn drop(&mut self) {
        ZST_DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

/// A page-aligned component (4096 bytes).
#[repr(align(4096))]
struct PageAligned(Tracked);

/// A component larger than two pages.
struct Large([u64; 1100], Tracked);

#[test]
fn zst_page_aligned_and_larger_than_a_page_components() {
    for storage in [StorageType::Table, StorageType::SparseSet] {
        ZST_DROPS.store(0, Ordering::SeqCst);
        let drops = Drops::default();
        let mut world = World::new();
        world.register_component::<Zst>(storage).unwrap();
        world.register_component::<PageAligned>(storage).unwrap();
        world.register_component::<Large>(storage).unwrap();
        let n = if cfg!(miri) { 6 } else { 40 };
        let large = |i: u32| Large([u64::from(i); 1100], drops.make(1000 + i));
        let es: Vec<Entity> = (0..n)
            .map(|i| world.spawn((Zst, PageAligned(drops.make(i)), large(i), Val(i))))
            .collect();
        let check = |world: &World, e: Entity, i: u32| {
            let p = world.get::<PageAligned>(e).unwrap();
            assert_eq!(p as *const PageAligned as usize % 4096, 0);
            assert_eq!(p.0.id, i);
            let l = world.get::<Large>(e).unwrap();
            assert!(l.0.iter().all(|&x| x == u64::from(i)) && l.1.id == 1000 + i);
            assert!(world.has::<Zst>(e));
        };
        // Moves between tables (both ways), a remove, a replace, despawns.
        for &e in es.iter().step_by(3) {
            world.insert(e, (Extra(0),)).unwrap();
        }
        for &e in es.iter().step_by(6) {
            world.remove::<(Extra,)>(e).unwrap();
        }
        let (zst, _) = world.remove::<(Zst, Val)>(es[1]).unwrap();
        drop(zst);
        world.insert(es[1], (Zst, Val(1))).unwrap();
        world.insert(es[2], (Zst,)).unwrap(); // replaces: drops the old one
        world.despawn(es[4]).unwrap();
        world.despawn(es[n as usize - 1]).unwrap();
        assert_eq!(ZST_DROPS.load(Ordering::SeqCst), 4);
        assert_eq!(drops.count(), 4);
        for (i, &e) in es.iter().enumerate() {
            if world.contains(e) {
                check(&world, e, i as u32);
            }
        }
        let mut q = world.query::<(&Zst, &PageAligned, &mut Large)>();
        assert_eq!(q.iter_mut(&mut world).count(), n as usize - 2);
        world.check_invariants();
        world.clear();
        assert_eq!(ZST_DROPS.load(Ordering::SeqCst), n as usize + 2);
        assert_eq!(drops.count(), 2 * n as usize);
        world.spawn((Zst, PageAligned(drops.make(0)), large(0)));
        drop(world);
        assert_eq!(ZST_DROPS.load(Ordering::SeqCst), n as usize + 3, "{storage:?}");
        assert_eq!(drops.count(), 2 * n as usize + 2, "{storage:?}");
    }
}

/// Panics on misuse name the line that misused the API, not a line inside folio.
#[test]
fn misuse_panics_point_at_the_caller_s_line() {
    use std::sync::Mutex;
    static SEEN: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());
    static THIS_TEST: Mutex<Option<std::thread::ThreadId>> = Mutex::new(None);
    *THIS_TEST.lock().unwrap() = Some(std::thread::current().id());
    struct Health(#[allow(dead_code)] u32);
    fn heal(_: ResMut<Health>, _: Res<Health>) {}
    let previous = std::panic::take_hook();
    // Other tests of this binary panic meanwhile: only this thread's panics are recorded.
    std::panic::set_hook(Box::new(|info| {
        if *THIS_TEST.lock().unwrap() == Some(std::thread::current().id()) {
            let location = info.location().expect("a location");
            SEEN.lock().unwrap().push((location.file().to_owned(), location.line()));
        }
    }));
    let mut world = World::new();
    let lines = [line!() + 2, line!() + 5, line!() + 8];
    let spawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.spawn((Health(1), (Health(2),)));
    }));
    let batch = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.spawn_batch([(Health(1), Health(2))]);
    }));
    let add = std::panic::catch_unwind(|| {
        Schedule::new().add_systems(heal);
    });
    assert!(spawn.is_err() && batch.is_err() && add.is_err());
    let mut expected: Vec<(String, u32)> = lines.iter().map(|&l| (file!().to_owned(), l)).collect();
    // Each call below is on the line `line!()` names, and must panic there.
    let mut case = |line: u32, call: &mut dyn FnMut()| {
        expected.push((file!().to_owned(), line));
        let result = catch_unwind(AssertUnwindSafe(call));
        assert!(result.is_err(), "the call on line {line} did not panic");
    };
    use folio::storage::{Entities, EntityLocation, HandleMap, VirtualVec};
    // The world's and the archetype crate's.
    let mut other = World::new();
    other.spawn((Health(1), 1u8, 2u16, 3u32, 4u64));
    other.spawn((1u8,));
    other.spawn((2u16,));
    other.spawn((3u32,));
    let foreign = other.components().id::<u64>().unwrap();
    let foreign_archetype = other.archetypes().last().unwrap().id();
    case(line!(), &mut || _ = world.components().info(foreign));
    case(line!(), &mut || _ = world.archetype_entities(foreign_archetype));
    let only = world.archetypes()[0].id();
    case(line!(), &mut || _ = world.archetype_entities(only).range(0, 1).count());
    // A view whose entity a hook's deferred work despawned.
    struct Doomed;
    fn doom(world: &mut folio::archetype::DeferredWorld<'_>, e: Entity) {
        world.defer(move |world| world.despawn(e).unwrap());
    }
    let mut hooked = World::new();
    hooked.set_hooks::<Doomed>(folio::archetype::ComponentHooks::new().on_add(doom));
    let e = hooked.spawn((Health(0),));
    let mut view = hooked.entity_mut(e).unwrap();
    view.insert((Doomed,)).unwrap();
    case(line!(), &mut || _ = view.archetype());
    case(line!(), &mut || _ = view.as_ref());
    // The storage crate's.
    let mut entities = Entities::with_max_entities(1);
    let dead = entities.alloc();
    entities.free(dead).unwrap();
    let _ = entities.reserve();
    case(line!(), &mut || _ = entities.alloc());
    case(line!(), &mut || _ = entities.try_alloc());
    case(line!(), &mut || _ = entities.next_alloc());
    case(line!(), &mut || _ = entities.reserve());
    entities.flush(|_, _| {});
    case(line!(), &mut || _ = entities.flush_front(EntityLocation::INVALID));
    case(line!(), &mut || entities.set_location(dead, EntityLocation::INVALID));
    case(line!(), &mut || entities.set_block_locations(&[dead], 0, 0));
    case(line!(), &mut || _ = entities.alloc());
    let mut map = HandleMap::new();
    let stale = map.insert(1u32);
    map.remove(stale);
    case(line!(), &mut || _ = map[stale]);
    case(line!(), &mut || map[stale] = 2);
    let mut full = HandleMap::with_max_capacity(0);
    case(line!(), &mut || _ = full.insert(1u32));
    let mut vec = VirtualVec::with_max_capacity(1);
    vec.push(1u32);
    case(line!(), &mut || vec.push(2));
    case(line!(), &mut || _ = vec.swap_remove(1));
    // The schedule crate's: a closure's name names its place; a panic at add names the caller.
    case(line!(), &mut || _ = Schedule::new().add_systems(|_: ResMut<Health>, _: Res<Health>| {}));
    std::panic::set_hook(previous);
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(seen, expected);
}
