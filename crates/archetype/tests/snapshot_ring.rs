//! Incremental snapshots and the snapshot ring: a model test over random operations (values
//! written, spawns, despawns, inserts and removals of table and sparse components, reservations,
//! resources, ticks, saves and rollbacks of up to the whole ring) checking that every restore
//! puts back exactly the world as it was saved (ids, allocator, iteration order, values, change
//! ticks by age) and equals a restore of a whole snapshot taken at the same moment; what an
//! incremental fill copies; and the ring's typed errors.

use std::collections::VecDeque;

use folio_archetype::{
    ComponentId, Entity, Snapshot, SnapshotError, SnapshotRing, StorageType, World,
};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pos(f64, f64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Vel(f64);
/// Zero-sized.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Player;
/// Over-aligned.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(align(64))]
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
#[derive(Debug, Clone, PartialEq)]
struct Score(u64);

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
    world.register_snapshot_resource::<Score>();
    world
}

/// Everything observable about the world: each archetype's entities in iteration order with
/// their values, each table's rows with every column's added and changed tick (as ages, so
/// that a restore, which keeps ages, compares equal), each sparse set's dense order and tick
/// ages, the allocator's state and the resources with their tick ages. `extra_age` is added to
/// every age (a snapshot taken `extra_age` ticks before another holds ticks that much younger).
fn dump(world: &World, extra_age: u32) -> String {
    use std::fmt::Write;
    let now = world.change_tick();
    let age = |t: u32| now.wrapping_sub(t).wrapping_add(extra_age);
    let mut out = String::new();
    for archetype in world.archetypes() {
        for row in world.archetype_entities(archetype.id()).iter() {
            let e = row.entity;
            writeln!(
                out,
                "{:?} {e:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                archetype.id(),
                world.get::<Pos>(e),
                world.get::<Vel>(e),
                world.get::<Player>(e),
                world.get::<Aligned>(e),
                world.get::<Name>(e),
                world.get::<Stunned>(e),
                world.get::<Tag>(e),
            )
            .unwrap();
        }
    }
    // Tables made since a snapshot stay, empty, after its restore: only rows are compared.
    for (i, table) in world.tables().iter().enumerate().filter(|(_, t)| !t.is_empty()) {
        write!(out, "table {i} {:?}:", table.entities()).unwrap();
        for &id in table.component_ids() {
            let column = table.column(id).unwrap();
            let added: Vec<u32> = column.added_ticks().iter().map(|&t| age(t)).collect();
            let changed: Vec<u32> = column.changed_ticks().iter().map(|&t| age(t)).collect();
            write!(out, " {id:?} {added:?} {changed:?}").unwrap();
        }
        out.push('\n');
    }
    for id in [sparse_id::<Stunned>(world), sparse_id::<Tag>(world)] {
        if let Some(set) = world.sparse_set(id).filter(|s| !s.is_empty()) {
            let added: Vec<u32> = set.added_ticks().iter().map(|&t| age(t)).collect();
            let changed: Vec<u32> = set.changed_ticks().iter().map(|&t| age(t)).collect();
            writeln!(out, "set {id:?} {:?} {added:?} {changed:?}", set.entities()).unwrap();
        }
    }
    writeln!(out, "{:?}", world.entities().state()).unwrap();
    let score = world.resource_ticks::<Score>().map(|t| (age(t.added), age(t.changed)));
    writeln!(out, "{:?} {score:?}", world.resource::<Score>()).unwrap();
    out
}

fn sparse_id<T: 'static + Send + Sync>(world: &World) -> ComponentId {
    world.components().id::<T>().unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Spawn(u8),
    Despawn(usize),
    /// Writes a table-stored value (through `get_mut`) of one entity.
    Write(usize),
    /// Writes the `Pos` of every `n`-th entity.
    WriteEvery(usize),
    InsertVel(usize),
    RemoveVel(usize),
    InsertSparse(usize),
    RemoveSparse(usize),
    Rename(usize),
    Reserve,
    Flush,
    Score(u64),
    RemoveScore,
    Tick,
    /// Clamps old ticks: the ring's slots are refilled whole after it.
    CheckTicks,
    Save,
    Rollback(usize),
    /// Checks the newest frame against a whole snapshot taken at the same moment.
    CompareWhole,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => any::<u8>().prop_map(Op::Spawn),
        2 => any::<usize>().prop_map(Op::Despawn),
        6 => any::<usize>().prop_map(Op::Write),
        2 => (2usize..20).prop_map(Op::WriteEvery),
        1 => any::<usize>().prop_map(Op::InsertVel),
        1 => any::<usize>().prop_map(Op::RemoveVel),
        1 => any::<usize>().prop_map(Op::InsertSparse),
        1 => any::<usize>().prop_map(Op::RemoveSparse),
        1 => any::<usize>().prop_map(Op::Rename),
        1 => Just(Op::Reserve),
        1 => Just(Op::Flush),
        1 => any::<u64>().prop_map(Op::Score),
        1 => Just(Op::RemoveScore),
        2 => Just(Op::Tick),
        1 => Just(Op::CheckTicks),
        6 => Just(Op::Save),
        3 => (0usize..5).prop_map(Op::Rollback),
        1 => Just(Op::CompareWhole),
    ]
}

/// The model of one saved frame: the world's dump, and the live and reserved entities.
#[derive(Clone)]
struct Frame {
    dump: String,
    alive: Vec<Entity>,
    reserved: Vec<Entity>,
}

const RING: usize = 4;

struct Model {
    world: World,
    ring: SnapshotRing,
    alive: Vec<Entity>,
    reserved: Vec<Entity>,
    frames: VecDeque<Frame>,
    incremental_saves: usize,
}

impl Model {
    fn new() -> Self {
        let mut world = registered_world();
        let alive = (0..if cfg!(miri) { 10u8 } else { 40 }).map(|i| spawn(&mut world, i)).collect();
        Self {
            world,
            ring: SnapshotRing::new(RING),
            alive,
            reserved: Vec::new(),
            frames: VecDeque::new(),
            incremental_saves: 0,
        }
    }

    fn pick(&self, i: usize) -> Option<Entity> {
        (!self.alive.is_empty()).then(|| self.alive[i % self.alive.len()])
    }

    fn frame(&self) -> Frame {
        Frame {
            dump: dump(&self.world, 0),
            alive: self.alive.clone(),
            reserved: self.reserved.clone(),
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Spawn(kind) => self.alive.push(spawn(&mut self.world, kind)),
            Op::Despawn(i) => {
                if let Some(e) = self.pick(i) {
                    self.world.despawn(e).unwrap();
                    self.alive.retain(|&a| a != e);
                }
            }
            Op::Write(i) => {
                if let Some(e) = self.pick(i) {
                    if let Some(p) = self.world.get_mut::<Pos>(e) {
                        p.0 += 1.0;
                    } else if let Some(a) = self.world.get_mut::<Aligned>(e) {
                        a.0 += 1;
                    } else if let Some(n) = self.world.get_mut::<Name>(e) {
                        n.0.push('+');
                    }
                }
            }
            Op::WriteEvery(n) => {
                for &e in self.alive.iter().step_by(n) {
                    if let Some(p) = self.world.get_mut::<Pos>(e) {
                        p.1 -= 0.5;
                    }
                }
            }
            Op::InsertVel(i) => {
                if let Some(e) = self.pick(i) {
                    self.world.insert(e, (Vel(i as f64),)).unwrap();
                }
            }
            Op::RemoveVel(i) => {
                if let Some(e) = self.pick(i) {
                    self.world.remove::<(Vel,)>(e);
                }
            }
            Op::InsertSparse(i) => {
                if let Some(e) = self.pick(i) {
                    self.world.insert(e, (Stunned(i as u8), Tag(format!("t{i}")))).unwrap();
                }
            }
            Op::RemoveSparse(i) => {
                if let Some(e) = self.pick(i) {
                    self.world.remove::<(Stunned,)>(e);
                }
            }
            Op::Rename(i) => {
                if let Some(e) = self.pick(i) {
                    self.world.insert(e, (Name(format!("r{i}")),)).unwrap();
                }
            }
            Op::Reserve => {
                let e = self.world.reserve_entity();
                self.reserved.push(e);
            }
            Op::Flush => {
                self.world.flush();
            }
            Op::Score(s) => {
                self.world.insert_resource(Score(s));
            }
            Op::RemoveScore => {
                self.world.remove_resource::<Score>();
            }
            Op::Tick => {
                self.world.increment_change_tick();
            }
            Op::CheckTicks => self.world.check_change_ticks(),
            Op::Save => {
                self.ring.save(&self.world).unwrap();
                let newest = self.ring.get(0).unwrap();
                self.incremental_saves += usize::from(newest.is_incremental());
                if self.frames.len() == RING {
                    self.frames.pop_front();
                }
                self.frames.push_back(self.frame());
            }
            Op::Rollback(back) => {
                if back >= self.frames.len() {
                    let err = self.ring.restore(&mut self.world, back).unwrap_err();
                    assert!(matches!(err, SnapshotError::NotInRing { .. }), "{err}");
                    return;
                }
                self.ring.restore(&mut self.world, back).unwrap();
                self.world.check_invariants();
                self.frames.truncate(self.frames.len() - back);
                let frame = self.frames.back().unwrap().clone();
                assert_eq!(dump(&self.world, 0), frame.dump, "rollback {back} frames");
                self.alive = frame.alive;
                self.reserved = frame.reserved;
            }
            Op::CompareWhole => {
                // A whole snapshot one tick before the ring's save: its ticks are one tick
                // younger, nothing else differs.
                let whole = self.world.snapshot().unwrap();
                self.apply(&Op::Save);
                self.world.restore(&whole).unwrap();
                let from_whole = dump(&self.world, 1);
                self.ring.restore(&mut self.world, 0).unwrap();
                assert_eq!(dump(&self.world, 0), self.frames.back().unwrap().dump);
                assert_eq!(from_whole, self.frames.back().unwrap().dump);
            }
        }
        // Reserved entities become live (bare) once a structural change flushes them.
        let world = &self.world;
        let (flushed, still): (Vec<Entity>, Vec<Entity>) =
            self.reserved.iter().partition(|&&e| world.table_id_of(e).is_some());
        self.alive.extend(flushed);
        self.reserved = still;
    }
}

fn spawn(world: &mut World, kind: u8) -> Entity {
    let f = f64::from(kind);
    match kind % 5 {
        0 => world.spawn((Pos(f, -f), Vel(1.0))),
        1 => world.spawn((Pos(f, f), Name(format!("n{kind}")), Player)),
        2 => world.spawn((Aligned(u64::from(kind)), Vel(f))),
        3 => world.spawn((Pos(0.0, f), Stunned(kind))),
        _ => world.spawn((Tag(format!("s{kind}")),)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 1 } else { 96 },
        ..ProptestConfig::default()
    })]

    #[test]
    fn ring_restores_exactly_what_was_saved(ops in prop::collection::vec(op(), 1..if cfg!(miri) { 16 } else { 160 })) {
        let mut model = Model::new();
        for op in &ops {
            model.apply(op);
        }
        // Every frame still held restores to what was saved, newest first: restoring one
        // frame back drops the newest.
        while let Some(frame) = model.frames.pop_back() {
            model.ring.restore(&mut model.world, 0).unwrap();
            prop_assert_eq!(dump(&model.world, 0), frame.dump);
            let Some(previous) = model.frames.back() else { break };
            model.ring.restore(&mut model.world, 1).unwrap();
            prop_assert_eq!(dump(&model.world, 0), previous.dump.clone());
        }
        prop_assert!(model.ring.is_empty() || model.ring.len() == 1);
    }
}

/// Saves, rolls back and re-simulates many times: the incremental path must be taken (this
/// is what keeps the model test meaningful).
#[test]
fn saves_after_rollbacks_stay_incremental() {
    let mut model = Model::new();
    for round in 0..if cfg!(miri) { 3 } else { 20 } {
        for i in 0..6 {
            model.apply(&Op::Write(round * 7 + i));
            model.apply(&Op::Save);
        }
        model.apply(&Op::Rollback(round % RING));
        model.apply(&Op::Spawn(round as u8));
    }
    assert!(
        model.incremental_saves > 80 * if cfg!(miri) { 3 } else { 20 } / 100,
        "{}",
        model.incremental_saves
    );
}

#[test]
fn an_incremental_fill_copies_only_the_rows_written_since() {
    let mut world = registered_world();
    let n = if cfg!(miri) { 200 } else { 10_000 };
    let entities: Vec<Entity> =
        (0..n).map(|i| world.spawn((Pos(i as f64, 0.0), Vel(0.0)))).collect();
    let mut snapshot = Snapshot::new();
    world.snapshot_into(&mut snapshot).unwrap();
    assert!(!snapshot.is_incremental());
    let whole = snapshot.filled_bytes();
    assert_eq!(whole, snapshot.copied_bytes());
    // Nothing written: nothing copied.
    world.snapshot_into(&mut snapshot).unwrap();
    assert!(snapshot.is_incremental());
    assert_eq!(snapshot.filled_bytes(), 0);
    // 1% of the rows written: 1% of their column's bytes and ticks.
    for &e in entities.iter().step_by(100) {
        world.get_mut::<Pos>(e).unwrap().0 += 1.0;
    }
    world.snapshot_into(&mut snapshot).unwrap();
    let rows = n / 100;
    assert_eq!(snapshot.filled_bytes(), rows * (size_of::<Pos>() + 8));
    // The copy is whole: restoring it after more writes puts the values back.
    let before: Vec<Pos> = entities.iter().map(|&e| *world.get::<Pos>(e).unwrap()).collect();
    for &e in &entities {
        world.get_mut::<Pos>(e).unwrap().1 = -1.0;
    }
    world.restore(&snapshot).unwrap();
    let after: Vec<Pos> = entities.iter().map(|&e| *world.get::<Pos>(e).unwrap()).collect();
    assert_eq!(before, after);
    // A restore (not through a ring) makes the snapshot a base no more: the next fill is whole.
    world.snapshot_into(&mut snapshot).unwrap();
    assert!(!snapshot.is_incremental());
    // A spawn copies the allocator and that table again, not the others.
    world.spawn((Name("x".into()),));
    world.snapshot_into(&mut snapshot).unwrap();
    assert!(snapshot.is_incremental());
    assert!(snapshot.filled_bytes() < whole);
}

#[test]
fn ring_errors_are_typed_and_change_nothing() {
    let mut world = registered_world();
    let e = world.spawn((Pos(1.0, 1.0),));
    let mut ring = SnapshotRing::new(2);
    assert!(ring.is_empty());
    let err = ring.restore(&mut world, 0).unwrap_err();
    assert!(matches!(err, SnapshotError::NotInRing { frames_back: 0, held: 0 }), "{err}");
    ring.save(&world).unwrap();
    let mut other = registered_world();
    let err = ring.save(&other).unwrap_err();
    assert!(matches!(err, SnapshotError::WrongWorld { .. }), "{err}");
    let err = ring.restore(&mut other, 0).unwrap_err();
    assert!(matches!(err, SnapshotError::WrongWorld { .. }), "{err}");
    assert_eq!(ring.len(), 1);
    // An unregistered type: nothing saved, the held frame kept.
    world.spawn((7u16,));
    let err = ring.save(&world).unwrap_err();
    assert!(matches!(err, SnapshotError::NotRegistered { .. }), "{err}");
    assert_eq!(ring.len(), 1);
    ring.restore(&mut world, 0).unwrap();
    assert_eq!(world.len(), 1);
    assert_eq!(world.get::<Pos>(e), Some(&Pos(1.0, 1.0)));
    let message = SnapshotError::NotInRing { frames_back: 3, held: 2 }.to_string();
    assert!(message.contains("holds 2 frames"), "{message}");
}

#[test]
#[should_panic(expected = "at least one frame")]
fn a_ring_of_no_frames_is_a_programmer_error() {
    SnapshotRing::new(0);
}

/// Values that own heap memory and `Drop`: refreshed in place by `clone_from`, every value
/// dropped once across saves, rollbacks and the drop of ring and world (miri checks).
#[test]
fn cloned_columns_refresh_and_drop_once() {
    let mut world = registered_world();
    let entities: Vec<Entity> = (0..8).map(|i| world.spawn((Name(format!("n{i}")),))).collect();
    let mut ring = SnapshotRing::new(3);
    for frame in 0..6 {
        ring.save(&world).unwrap();
        world.get_mut::<Name>(entities[frame % 8]).unwrap().0.push_str("-changed");
    }
    assert!(ring.get(0).unwrap().is_incremental());
    ring.restore(&mut world, 1).unwrap();
    // Saved before frame 4's write: frames 0..=3 wrote entities 0..=3.
    let names: Vec<String> =
        entities.iter().map(|&e| world.get::<Name>(e).unwrap().0.clone()).collect();
    assert_eq!(names[..5], ["n0-changed", "n1-changed", "n2-changed", "n3-changed", "n4"]);
    world.get_mut::<Name>(entities[7]).unwrap().0.push('!');
    ring.save(&world).unwrap();
    ring.restore(&mut world, 1).unwrap();
    assert_eq!(world.get::<Name>(entities[7]).unwrap().0, "n7");
    drop(ring);
    drop(world);
}
