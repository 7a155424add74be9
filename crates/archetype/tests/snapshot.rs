//! World snapshots for rollback: round trips of every storage kind and resources, ids and the
//! allocator (freelist order, generations, pending reservations), iteration order, ticks that
//! keep their age, drops counted across snapshot, restore and the drop of both, a panicking
//! `Clone` mid-restore, hooks that do not fire, and the typed errors.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

use folio_archetype::{
    ComponentHooks, DeferredWorld, Entity, Snapshot, SnapshotError, StorageType, World,
};

/// Keeps the sizes small under miri, which is slow.
const N: usize = if cfg!(miri) { 12 } else { 300 };

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pos(f64, f64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Vel(f64, f64);
/// Zero-sized.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Player;
/// Over-aligned.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(align(256))]
struct Aligned(u64);
/// Owns heap memory, cloned.
#[derive(Debug, Clone, PartialEq)]
struct Name(String);
/// Kept in a sparse set, plain data.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stunned(u8);
/// Kept in a sparse set, owns heap memory.
#[derive(Debug, Clone, PartialEq)]
struct Tag(String);
/// A component first used after the snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Late(u32);
#[derive(Debug, Clone, PartialEq)]
struct Score(u64);
#[derive(Debug, Clone, PartialEq)]
struct Log(Vec<String>);

/// Every live value of a counted type is one `+1` here; each clone adds one, each drop takes
/// one away, so 0 at the end means every value was dropped exactly once.
struct Live(Arc<AtomicIsize>);

/// A counted value; holds a `String` so that a double drop is a double free miri reports.
#[derive(Debug)]
struct Counted {
    live: Arc<AtomicIsize>,
    text: String,
}

impl Counted {
    fn new(live: &Live, text: &str) -> Self {
        live.0.fetch_add(1, Ordering::Relaxed);
        Self { live: Arc::clone(&live.0), text: text.to_owned() }
    }
}

impl Clone for Counted {
    fn clone(&self) -> Self {
        if PANIC_ON_CLONE.load(Ordering::Relaxed) && self.text == "boom" {
            panic!("Counted::clone fails on purpose");
        }
        self.live.fetch_add(1, Ordering::Relaxed);
        Self { live: Arc::clone(&self.live), text: self.text.clone() }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

static PANIC_ON_CLONE: AtomicBool = AtomicBool::new(false);

/// A world with every type registered for snapshots and `Stunned`, `Tag` sparse.
fn registered_world() -> World {
    let mut world = World::new();
    world.register_component::<Stunned>(StorageType::SparseSet).unwrap();
    world.register_component::<Tag>(StorageType::SparseSet).unwrap();
    world.register_snapshot_copy::<Pos>();
    world.register_snapshot_copy::<Vel>();
    world.register_snapshot_copy::<Player>();
    world.register_snapshot_copy::<Aligned>();
    world.register_snapshot::<Name>();
    world.register_snapshot_copy::<Stunned>();
    world.register_snapshot::<Tag>();
    world.register_snapshot_copy::<Late>();
    world.register_snapshot::<Counted>();
    world.register_snapshot_resource::<Score>();
    world.register_snapshot_resource::<Log>();
    world.register_snapshot_resource::<u32>();
    world
}

/// A world of every storage kind: `N` entities over several archetypes, some despawned (so
/// the freelist has an order), and two resources.
fn populated_world() -> (World, Vec<Entity>) {
    let mut world = registered_world();
    let mut alive = Vec::new();
    for i in 0..N {
        let f = i as f64;
        let e = match i % 4 {
            0 => world.spawn((Pos(f, -f), Vel(1.0, 0.5))),
            1 => world.spawn((Pos(f, f), Name(format!("n{i}")), Player)),
            2 => world.spawn((Aligned(i as u64), Vel(f, 0.0))),
            _ => world.spawn((Pos(0.0, f),)),
        };
        if i % 3 == 0 {
            world.insert(e, (Stunned(i as u8),)).unwrap();
        }
        if i % 5 == 0 {
            world.insert(e, (Tag(format!("t{i}")),)).unwrap();
        }
        alive.push(e);
        if i % 6 == 0 {
            // In the table of no components: one with only a sparse-set component, one bare.
            alive.push(world.spawn((Stunned(9),)));
            alive.push(world.spawn(()));
        }
    }
    for i in (0..alive.len()).step_by(7) {
        world.despawn(alive[i]).unwrap();
    }
    alive.retain(|&e| world.contains(e));
    world.insert_resource(Score(7));
    world.insert_resource(Log(vec!["start".into()]));
    (world, alive)
}

/// Everything observable about the world, in iteration order: each archetype's entities with
/// their values, the allocator's state, the resources.
fn dump(world: &World) -> String {
    let mut out = String::new();
    for archetype in world.archetypes() {
        for row in world.archetype_entities(archetype.id()).iter() {
            let e = row.entity;
            out += &format!(
                "{:?} {e:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}\n",
                archetype.id(),
                world.get::<Pos>(e),
                world.get::<Vel>(e),
                world.get::<Player>(e),
                world.get::<Aligned>(e),
                world.get::<Name>(e),
                world.get::<Stunned>(e),
                world.get::<Tag>(e),
                world.get::<Late>(e),
            );
        }
    }
    out += &format!("{:?}\n", world.entities().state());
    out += &format!("{:?} {:?}\n", world.resource::<Score>(), world.resource::<Log>());
    out
}

/// Changes the world in every way: values, despawns, spawns into new archetypes and of a new
/// component, sparse inserts and removals, resources replaced, added and removed.
fn churn(world: &mut World, alive: &[Entity]) {
    for (i, &e) in alive.iter().enumerate() {
        match i % 5 {
            0 => world.despawn(e).unwrap(),
            1 => {
                if let Some(p) = world.get_mut::<Pos>(e) {
                    p.0 += 100.0;
                }
            }
            2 => {
                world.insert(e, (Late(i as u32), Stunned(1))).unwrap();
            }
            3 => {
                world.remove::<(Stunned,)>(e);
                world.insert(e, (Name("renamed".into()),)).unwrap();
            }
            _ => {}
        }
    }
    for i in 0..N {
        world.spawn((Late(i as u32), Pos(1.0, 1.0), Tag("new".into())));
    }
    world.resource_mut::<Score>().unwrap().0 = 99;
    world.remove_resource::<Log>();
    world.insert_resource(42u32);
}

#[test]
fn restore_puts_back_every_storage_kind_ids_order_and_resources() {
    let (mut world, alive) = populated_world();
    let before = dump(&world);
    let snapshot = world.snapshot().unwrap();
    assert_eq!(snapshot.entity_count(), world.len());
    let spawned_then: Vec<Entity> = (0..5).map(|_| world.spawn((Pos(0.0, 0.0),))).collect();

    churn(&mut world, &alive);
    world.register_snapshot_resource::<u32>();
    let archetypes = world.archetypes().len();
    world.restore(&snapshot).unwrap();
    world.check_invariants();
    assert_eq!(dump(&world), before);
    assert!(world.resource::<u32>().is_none(), "a resource added since is removed");
    assert_eq!(world.archetypes().len(), archetypes, "archetypes made since stay, empty");
    // The allocator is back: the next spawns get the ids they got after the snapshot.
    let spawned_again: Vec<Entity> = (0..5).map(|_| world.spawn((Pos(0.0, 0.0),))).collect();
    assert_eq!(spawned_again, spawned_then);
}

#[test]
fn one_snapshot_restores_twice() {
    let (mut world, alive) = populated_world();
    let before = dump(&world);
    let snapshot = world.snapshot().unwrap();
    churn(&mut world, &alive);
    world.restore(&snapshot).unwrap();
    churn(&mut world, &alive);
    world.restore(&snapshot).unwrap();
    world.check_invariants();
    assert_eq!(dump(&world), before);
    // And restoring right away changes nothing.
    world.restore(&snapshot).unwrap();
    assert_eq!(dump(&world), before);
}

#[test]
fn empty_world_round_trips() {
    let mut world = registered_world();
    let snapshot = world.snapshot().unwrap();
    let before = dump(&world);
    let (mut other, _) = populated_world();
    // Fill this world, then go back to empty.
    for i in 0..N {
        world.spawn((Pos(i as f64, 0.0), Tag("x".into())));
    }
    world.insert_resource(Score(1));
    world.restore(&snapshot).unwrap();
    world.check_invariants();
    assert!(world.is_empty());
    assert_eq!(dump(&world), before);
    assert_eq!(world.spawn((Pos(0.0, 0.0),)).index(), 0);
    // A populated world restored to itself after being cleared.
    let snapshot = other.snapshot().unwrap();
    let before = dump(&other);
    other.clear();
    other.restore(&snapshot).unwrap();
    assert_eq!(dump(&other), before);
}

#[test]
fn every_value_drops_exactly_once() {
    let live = Live(Arc::new(AtomicIsize::new(0)));
    {
        let mut world = registered_world();
        world.register_component::<Counted>(StorageType::Table).unwrap();
        let mut entities: Vec<Entity> = (0..N)
            .map(|i| world.spawn((Counted::new(&live, &format!("c{i}")), Pos(0.0, 0.0))))
            .collect();
        // Some in a sparse-sharing archetype too.
        for &e in entities.iter().step_by(3) {
            world.insert(e, (Tag("t".into()),)).unwrap();
        }
        let snapshot = world.snapshot().unwrap();
        assert_eq!(live.0.load(Ordering::Relaxed), 2 * N as isize, "the snapshot cloned each");
        for e in entities.drain(..N / 2) {
            world.despawn(e).unwrap();
        }
        for i in 0..N {
            world.spawn((Counted::new(&live, &format!("d{i}")),));
        }
        world.restore(&snapshot).unwrap();
        assert_eq!(live.0.load(Ordering::Relaxed), 2 * N as isize);
        world.restore(&snapshot).unwrap();
        assert_eq!(live.0.load(Ordering::Relaxed), 2 * N as isize);
        drop(snapshot);
        assert_eq!(live.0.load(Ordering::Relaxed), N as isize);
        world.check_invariants();
    }
    assert_eq!(live.0.load(Ordering::Relaxed), 0, "every value dropped once");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_clone_leaves_the_world_unchanged() {
    let live = Live(Arc::new(AtomicIsize::new(0)));
    let mut world = registered_world();
    for i in 0..N {
        let text = if i == N / 2 { "boom" } else { "ok" };
        world.spawn((Counted::new(&live, text), Pos(i as f64, 0.0)));
    }
    let snapshot = world.snapshot().unwrap();
    for i in 0..N {
        world.spawn((Counted::new(&live, "later"), Vel(i as f64, 0.0)));
    }
    let before = dump(&world);
    let count = live.0.load(Ordering::Relaxed);
    PANIC_ON_CLONE.store(true, Ordering::Relaxed);
    let result = catch_unwind(AssertUnwindSafe(|| world.restore(&snapshot)));
    PANIC_ON_CLONE.store(false, Ordering::Relaxed);
    assert!(result.is_err(), "the clone panicked");
    world.check_invariants();
    assert_eq!(dump(&world), before, "the world is as it was");
    assert_eq!(live.0.load(Ordering::Relaxed), count, "the staged clones were dropped");
    // It restores once the clone works.
    world.restore(&snapshot).unwrap();
    assert_eq!(world.len(), N);
    drop(snapshot);
    drop(world);
    assert_eq!(live.0.load(Ordering::Relaxed), 0);
}

#[test]
fn unregistered_types_are_named_and_nothing_changes() {
    #[derive(Debug)]
    struct Unsnapshotted;
    struct Secret;
    let mut world = registered_world();
    let e = world.spawn((Pos(1.0, 2.0), Unsnapshotted));
    let err = world.snapshot().unwrap_err();
    assert!(matches!(err, SnapshotError::NotRegistered { kind: "component", .. }), "{err:?}");
    assert!(err.to_string().contains("Unsnapshotted"), "{err}");
    world.despawn(e).unwrap();
    // A table of an unregistered type with no rows copies nothing: no error.
    world.snapshot().unwrap();
    world.insert_resource(Secret);
    let err = world.snapshot().unwrap_err();
    assert!(err.to_string().contains("Secret"), "{err}");
    assert!(matches!(err, SnapshotError::NotRegistered { kind: "resource", .. }));
    // An unregistered sparse-set type.
    world.remove_resource::<Secret>();
    world.register_component::<Unsnapshotted>(StorageType::Table).ok();
    #[derive(Debug)]
    struct SparseSecret;
    world.register_component::<SparseSecret>(StorageType::SparseSet).unwrap();
    world.spawn((SparseSecret,));
    let err = world.snapshot().unwrap_err();
    assert!(err.to_string().contains("SparseSecret"), "{err}");
}

#[test]
fn a_snapshot_restores_only_its_own_world() {
    let (world, _) = populated_world();
    let snapshot = world.snapshot().unwrap();
    let (mut other, _) = populated_world();
    let before = dump(&other);
    let err = other.restore(&snapshot).unwrap_err();
    assert!(matches!(err, SnapshotError::WrongWorld { .. }), "{err:?}");
    assert_eq!(dump(&other), before);
}

#[test]
fn pending_reservations_come_back() {
    let (mut world, _) = populated_world();
    let reserved: Vec<Entity> = (0..3).map(|_| world.reserve_entity()).collect();
    let snapshot = world.snapshot().unwrap();
    world.flush();
    for _ in 0..4 {
        world.spawn((Pos(0.0, 0.0),));
    }
    world.restore(&snapshot).unwrap();
    assert_eq!(world.entities().reserved_len(), 3);
    assert!(reserved.iter().all(|&e| !world.contains(e)));
    world.flush();
    assert!(reserved.iter().all(|&e| world.contains(e)));
    world.check_invariants();
}

#[test]
fn a_table_shared_since_the_snapshot_lists_its_rows() {
    let mut world = registered_world();
    let plain: Vec<Entity> =
        (0..N).map(|i| world.spawn((Pos(i as f64, 0.0), Vel(0.0, 0.0)))).collect();
    let before = dump(&world);
    let snapshot = world.snapshot().unwrap();
    // `(Pos, Vel, Stunned)` shares `(Pos, Vel)`'s table: the first archetype starts a list.
    world.insert(plain[1], (Stunned(3),)).unwrap();
    world.despawn(plain[0]).unwrap();
    assert!(world.archetypes().iter().any(|a| a.is_listed()));
    world.restore(&snapshot).unwrap();
    world.check_invariants();
    assert_eq!(dump(&world), before);
}

#[test]
fn many_new_archetypes_stay_empty_after_a_restore() {
    #[derive(Clone, Copy, Debug)]
    struct K<const I: usize>;
    let (mut world, alive) = populated_world();
    macro_rules! register { ($($i:literal)*) => { $( world.register_snapshot_copy::<K<$i>>(); )* } }
    register!(0 1 2 3 4 5 6 7);
    let before = dump(&world);
    let snapshot = world.snapshot().unwrap();
    let archetypes = world.archetypes().len();
    for (i, &e) in alive.iter().enumerate() {
        match i % 8 {
            0 => world.insert(e, (K::<0>,)).unwrap(),
            1 => world.insert(e, (K::<1>, K::<2>)).unwrap(),
            2 => world.insert(e, (K::<3>,)).unwrap(),
            3 => world.insert(e, (K::<4>, K::<5>)).unwrap(),
            4 => world.despawn(e).unwrap(),
            5 => world.insert(e, (K::<6>,)).unwrap(),
            6 => world.insert(e, (K::<7>, Tag("k".into()))).unwrap(),
            _ => {}
        }
    }
    assert!(world.archetypes().len() > archetypes);
    let grown = world.archetypes().len();
    world.restore(&snapshot).unwrap();
    world.check_invariants();
    assert_eq!(dump(&world), before);
    assert_eq!(world.archetypes().len(), grown);
    assert!(world.archetypes()[archetypes..].iter().all(|a| a.is_empty()));
}

#[test]
fn restored_ticks_keep_their_age() {
    let (mut world, alive) = populated_world();
    let e = *alive.iter().find(|&&e| world.has::<Pos>(e)).unwrap();
    world.increment_change_tick();
    world.get_mut::<Pos>(e).unwrap().0 = 5.0;
    world.increment_change_tick();
    let age_of = |world: &World| {
        let table = &world.tables()[world.table_id_of(e).unwrap().index()];
        let row = world.entities().location(e).unwrap().table_row as usize;
        let id = world.components().id::<Pos>().unwrap();
        let column = table.column(id).unwrap();
        let now = world.change_tick();
        (now.wrapping_sub(column.added_ticks()[row]), now.wrapping_sub(column.changed_ticks()[row]))
    };
    let score_age = |world: &World| {
        let ticks = world.resource_ticks::<Score>().unwrap();
        world.change_tick().wrapping_sub(ticks.changed)
    };
    // Taking it advances the world's tick by one: the ages are those it keeps.
    let snapshot = world.snapshot().unwrap();
    let ages = (age_of(&world), score_age(&world));
    let tick = world.change_tick();
    assert_eq!(snapshot.change_tick(), tick);
    // Restored at once: the ticks are the same ticks.
    world.restore(&snapshot).unwrap();
    assert_eq!(world.change_tick(), tick);
    assert_eq!((age_of(&world), score_age(&world)), ages);
    for _ in 0..10 {
        world.increment_change_tick();
        world.get_mut::<Pos>(e).unwrap().1 += 1.0;
        world.resource_mut::<Score>().unwrap().0 += 1;
    }
    world.restore(&snapshot).unwrap();
    assert_eq!(world.change_tick(), tick.wrapping_add(10), "the world's tick never goes back");
    assert_eq!((age_of(&world), score_age(&world)), ages, "every tick is as old as it was");
}

#[test]
fn restore_runs_no_hooks_and_logs_no_removals() {
    static CALLS: AtomicIsize = AtomicIsize::new(0);
    fn count(_: &mut DeferredWorld<'_>, _: Entity) {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }
    let (mut world, alive) = populated_world();
    let hooks = ComponentHooks::new().on_add(count).on_remove(count).on_replace(count);
    world.set_hooks::<Pos>(hooks);
    world.track_removals::<Pos>();
    let snapshot = world.snapshot().unwrap();
    let e = *alive.iter().find(|&&e| world.has::<Pos>(e)).unwrap();
    world.despawn(e).unwrap();
    world.spawn((Pos(0.0, 0.0),));
    let calls = CALLS.load(Ordering::Relaxed);
    assert!(calls > 0);
    let removed: Vec<Entity> = world.removed::<Pos>().collect();
    assert_eq!(removed, [e]);
    // The restore brings `e`'s `Pos` back and takes the new entity's away: no hook runs,
    // and the removal log is left as it was.
    world.restore(&snapshot).unwrap();
    assert_eq!(CALLS.load(Ordering::Relaxed), calls);
    assert!(world.has::<Pos>(e));
    assert_eq!(world.removed::<Pos>().collect::<Vec<_>>(), removed);
    // The hooks stay set: the next despawn runs them.
    world.despawn(e).unwrap();
    assert!(CALLS.load(Ordering::Relaxed) > calls);
}

#[test]
fn snapshot_into_reuses_a_ring_and_an_unfilled_snapshot_is_refused() {
    struct Secret;
    let (mut world, alive) = populated_world();
    let mut ring = [Snapshot::new(), Snapshot::new()];
    let err = world.restore(&ring[0]).unwrap_err();
    assert!(matches!(err, SnapshotError::Incomplete), "{err:?}");
    world.snapshot_into(&mut ring[0]).unwrap();
    let before = dump(&world);
    churn(&mut world, &alive);
    world.snapshot_into(&mut ring[1]).unwrap();
    let after = dump(&world);
    for _ in 0..2 {
        world.restore(&ring[0]).unwrap();
        assert_eq!(dump(&world), before);
        world.restore(&ring[1]).unwrap();
        assert_eq!(dump(&world), after);
    }
    // Refilled with a smaller world: it holds that one now.
    world.restore(&ring[0]).unwrap();
    world.snapshot_into(&mut ring[1]).unwrap();
    churn(&mut world, &alive);
    world.restore(&ring[1]).unwrap();
    world.check_invariants();
    assert_eq!(dump(&world), before);
    // An unregistered type is found before anything is copied: the snapshot keeps its world.
    world.insert_resource(Secret);
    assert!(world.snapshot_into(&mut ring[1]).is_err());
    world.remove_resource::<Secret>();
    churn(&mut world, &alive);
    world.restore(&ring[1]).unwrap();
    assert_eq!(dump(&world), before);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_drop_of_a_replaced_value_leaves_the_world_restored() {
    /// Its drop panics when `fail` is set: the value replaced by a restore.
    struct Fragile {
        live: Arc<AtomicIsize>,
        fail: bool,
    }
    impl Clone for Fragile {
        fn clone(&self) -> Self {
            self.live.fetch_add(1, Ordering::Relaxed);
            Self { live: Arc::clone(&self.live), fail: self.fail }
        }
    }
    impl Drop for Fragile {
        fn drop(&mut self) {
            self.live.fetch_sub(1, Ordering::Relaxed);
            if self.fail {
                self.fail = false;
                panic!("Fragile::drop fails on purpose");
            }
        }
    }
    let live = Arc::new(AtomicIsize::new(0));
    let fragile = |fail| {
        live.fetch_add(1, Ordering::Relaxed);
        Fragile { live: Arc::clone(&live), fail }
    };
    let mut world = registered_world();
    world.register_snapshot::<Fragile>();
    let entities: Vec<Entity> =
        (0..N).map(|i| world.spawn((fragile(false), Pos(i as f64, 0.0)))).collect();
    let snapshot = world.snapshot().unwrap();
    let before = dump(&world);
    for (i, &e) in entities.iter().enumerate() {
        world.insert(e, (fragile(i == N / 2),)).unwrap();
    }
    assert_eq!(live.load(Ordering::Relaxed), 2 * N as isize);
    let result = catch_unwind(AssertUnwindSafe(|| world.restore(&snapshot)));
    assert!(result.is_err(), "the replaced value's drop panicked");
    world.check_invariants();
    assert_eq!(dump(&world), before, "the world was restored before the drops ran");
    assert_eq!(live.load(Ordering::Relaxed), 2 * N as isize, "every replaced value dropped");
    drop(world);
    drop(snapshot);
    assert_eq!(live.load(Ordering::Relaxed), 0);
}

#[test]
fn a_hierarchy_is_restored_on_both_sides_even_when_it_was_first_used_after_the_snapshot() {
    use folio_archetype::{ChildOf, Children};
    let mut world = World::new();
    let root = world.spawn(());
    let snapshot_before_any_hierarchy = world.snapshot().unwrap();
    let a = world.spawn((ChildOf(root),));
    let b = world.spawn((ChildOf(root),));
    let c = world.spawn((ChildOf(a),));
    let snapshot = world.snapshot().unwrap();

    // Reparent, detach and despawn, then roll back.
    world.set_parent(c, b).unwrap();
    world.remove_parent(a).unwrap();
    world.despawn(b).unwrap();
    world.check_invariants();
    world.restore(&snapshot).unwrap();
    world.check_invariants();
    assert_eq!(world.children(root), &[a, b]);
    assert_eq!(world.parent(c), Some(a));
    assert_eq!(world.source_index::<ChildOf>(b), Some(1));
    // The links follow the restored lists: a later removal is still O(1) and exact.
    world.remove_parent(a).unwrap();
    assert_eq!(world.children(root), &[b]);
    world.check_invariants();

    // Back to before the hierarchy was first used: its hooks and bookkeeping stay registered.
    world.restore(&snapshot_before_any_hierarchy).unwrap();
    world.check_invariants();
    assert!(world.get::<Children>(root).is_none());
    let d = world.spawn((ChildOf(root),));
    assert_eq!(world.children(root), &[d]);
    world.check_invariants();
}
