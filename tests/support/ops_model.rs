//! A model-based driver for random operations on the whole framework, shared by the property
//! test (`tests/model_ops.rs`, seeded sequences) and the cargo-fuzz target
//! (`fuzz/fuzz_targets/world_ops.rs`, sequences decoded from fuzz bytes).
//!
//! An operation sequence ([`Op`]) is decoded from a byte [`Source`]: a seeded [`Rng`] or the
//! fuzzer's bytes ([`ByteSource`]), through the one decoder [`decode_op`]. The [`Driver`]
//! applies each operation to a [`World`] (directly, through query states, and through a
//! [`Schedule`] whose systems mutate components in parallel and apply pre-planned
//! [`Commands`]), applies the same operation to a plain model (a `BTreeMap` from entity to the
//! values of its components), and after every step checks that the two agree:
//! - every live entity has exactly the model's components, with the model's values (each value
//!   carries a unique id, so a value swapped between entities is caught), intact (the big
//!   components' bytes) and aligned; dead entities are dead, their getters `None`;
//! - `len()`, nine long-lived query states (table, sparse, mixed, `Option`, `With`,
//!   `Without`, `Or`, `Changed`) against a brute-force filter over the model, and
//!   `QueryState::get` on one live or dead entity a step and on one never made;
//! - the hierarchy (`ChildOf` / `Children`, set, replaced and removed directly, checked and
//!   raw, and through commands): each handle's parent, children and `Children` component
//!   against a model of the graph, where despawning a parent despawns its subtree;
//! - the lifecycle events: observers of `OnAdd`, `OnInsert`, `OnReplace` and `OnRemove` on
//!   four kinds check that each event fired exactly once, in a valid order, and that the kinds
//!   they say each entity has (with the values' identities) are the model's;
//! - `check_invariants()` (which checks both sides of every relationship);
//! - every value made is dropped exactly once: a thread-local tracker records each value by id
//!   (a second drop is an error at once; the live count must equal the model's), and counts the
//!   zero-sized components' drops;
//! - `memory_stats()`: used <= committed <= reserved per table and in total, per-table rows, and
//!   used bytes equal to what the live rows and components hold.
//!
//! A divergence panics with the step and the operation; the callers print the seed or input.
//! Values are made and dropped only on the driver's thread (systems change data in place), as
//! the tracker is thread-local.
//!
//! The parts: `ops_model/kinds.rs` (components, bundle shapes, the drop tracker),
//! `ops_model/hierarchy.rs` (the model of the hierarchy), `ops_model/lifecycle.rs` (the
//! lifecycle observers and their check),
//! `ops_model/ops.rs` (operations and their decoding), `ops_model/shape_ops.rs` (operations
//! generic over a shape or kind), and here the systems, the driver and its checks.

use std::collections::BTreeMap;
use std::mem::{align_of, size_of};

use folio::prelude::*;

#[path = "ops_model/hierarchy.rs"]
mod hierarchy;
#[path = "ops_model/kinds.rs"]
mod kinds;
#[path = "ops_model/lifecycle.rs"]
mod lifecycle;
#[path = "ops_model/ops.rs"]
mod ops;
#[path = "ops_model/shape_ops.rs"]
mod shape_ops;

use hierarchy::{Bad, HierarchyModel};
use kinds::*;
use ops::{Cmd, CmdTarget, Target};
pub(crate) use ops::{Op, Rng, ops_from_bytes, seeded_ops};
use shape_ops::*;

/// Runs `ops` on a new world, checking it against the model after every one; panics on the
/// first divergence. Returns the number of operations run.
pub(crate) fn run_ops(ops: &[Op]) -> usize {
    let mut driver = Driver::new();
    for op in ops {
        driver.step(op);
    }
    driver.finish();
    ops.len()
}

// ----- systems -----

type CmdFn = Box<dyn FnOnce(&mut Commands<'_, '_>, &mut Vec<Entity>) + Send + Sync>;

/// The commands [`apply_plan`] issues in the next run, made by the driver (so the values are
/// made on its thread), and the entities its spawns reserved.
#[derive(Default)]
struct CommandPlan {
    cmds: Vec<CmdFn>,
    spawned: Vec<Entity>,
}

fn sys_a(mut q: Query<&mut A>) {
    for mut a in q.iter_mut() {
        a.data = a.data.wrapping_mul(3).wrapping_add(1);
    }
}

fn sys_s(mut q: Query<(&mut S, Option<&B>)>) {
    for (mut s, b) in q.iter_mut() {
        s.data = s.data.wrapping_add(b.map_or(1, |b| b.data));
    }
}

fn sys_al(mut q: Query<&mut Al, Without<Z>>) {
    q.par_iter_mut().batch_size(1).for_each(|mut al| al.data ^= 0x55);
}

/// Conflicts with [`sys_a`] (both write `A`), so it runs after it.
fn sys_a2(mut q: Query<(&mut A, &SAl)>) {
    for (mut a, sal) in q.iter_mut() {
        a.data = a.data.rotate_left(5) ^ sal.data;
    }
}

fn sys_big(mut q: Query<&mut Big, With<SZ>>) {
    for mut big in q.iter_mut() {
        big.data = big.data.wrapping_add(7);
    }
}

fn sys_sbig(mut q: Query<&mut SBig>) {
    q.par_iter_mut().batch_size(1).for_each(|mut b| b.data = !b.data);
}

fn apply_plan(mut plan: ResMut<CommandPlan>, mut commands: Commands) {
    let plan = &mut *plan;
    for cmd in plan.cmds.drain(..) {
        cmd(&mut commands, &mut plan.spawned);
    }
}

// ----- the driver -----

/// The model's record of one component value.
#[derive(Clone, Copy, Debug)]
struct Slot {
    val: Val,
    /// The step that last wrote it.
    changed: u64,
}

type Components = [Option<Slot>; KINDS];

/// An entity never made by any world of the driver.
const NEVER: Entity = match Entity::from_bits((7 << 32) | 0x00AB_CDEF) {
    Some(e) => e,
    None => unreachable!(),
};

type Vals = Vec<(usize, Val)>;

/// A world, the same operations on a model, and the checks between them.
#[allow(clippy::type_complexity)] // the query types are what is under test
pub(crate) struct Driver {
    world: World,
    schedule: Schedule,
    model: BTreeMap<Entity, Components>,
    /// The hierarchy of the model's entities.
    tree: HierarchyModel,
    /// What the lifecycle observers saw.
    lifecycles: std::sync::Arc<std::sync::Mutex<lifecycle::Lifecycles>>,
    /// Every entity made in the sequence, live or dead.
    handles: Vec<Entity>,
    next_id: u64,
    step: u64,
    q_a: QueryState<(Entity, &'static A)>,
    q_s: QueryState<(Entity, &'static S, Option<&'static Al>)>,
    q_bz: QueryState<(Entity, &'static B), (With<Z>, Without<SZ>)>,
    q_sz: QueryState<(Entity, &'static SZ)>,
    q_all: QueryState<(Entity, Option<&'static Big>, Option<&'static SBig>)>,
    q_mixed: QueryState<(Entity, &'static Z, &'static SAl)>,
    q_or: QueryState<Entity, Or<(With<Big>, With<SZ>)>>,
    q_changed_a: QueryState<Entity, Changed<A>>,
    q_changed_sal: QueryState<(Entity, &'static SAl), Changed<SAl>>,
    w_a: QueryState<(Entity, &'static mut A, Option<&'static mut SAl>)>,
    w_sbig: QueryState<&'static mut SBig, With<S>>,
}

impl Default for Driver {
    fn default() -> Self {
        Self::new()
    }
}

impl Driver {
    /// A new world and model (resets this thread's drop tracker).
    pub(crate) fn new() -> Self {
        TRACKER.with(|t| *t.borrow_mut() = Tracker::default());
        let mut world = World::new();
        for sparse in [
            world.register_component::<S>(StorageType::SparseSet),
            world.register_component::<SZ>(StorageType::SparseSet),
            world.register_component::<SAl>(StorageType::SparseSet),
            world.register_component::<SBig>(StorageType::SparseSet),
        ] {
            sparse.expect("registered once");
        }
        world.insert_resource(CommandPlan::default());
        let lifecycles = lifecycle::observe_lifecycles(&mut world);
        let mut schedule = Schedule::new();
        // Always on the pool: these systems are tiny, and the adaptive default would run them
        // on one thread after the first run, leaving the parallel executor untested here.
        schedule.set_min_parallel_work(std::time::Duration::ZERO);
        schedule.add_systems((sys_a, sys_s, sys_al, sys_a2, sys_big, sys_sbig, apply_plan));
        Self {
            q_a: world.query(),
            q_s: world.query(),
            q_bz: world.query_filtered(),
            q_sz: world.query(),
            q_all: world.query(),
            q_mixed: world.query(),
            q_or: world.query_filtered(),
            q_changed_a: world.query_filtered(),
            q_changed_sal: world.query_filtered(),
            w_a: world.query(),
            w_sbig: world.query_filtered(),
            world,
            schedule,
            model: BTreeMap::new(),
            tree: HierarchyModel::default(),
            lifecycles,
            handles: Vec::new(),
            next_id: 1,
            step: 0,
        }
    }

    /// Applies `op` to the world and the model, then checks them; panics on a divergence.
    pub(crate) fn step(&mut self, op: &Op) {
        self.step += 1;
        self.apply(op);
        if let Err(message) = self.check() {
            panic!("divergence at step {} ({op:?}): {message}", self.step);
        }
    }

    /// Drops the world and checks that every value made was dropped exactly once.
    pub(crate) fn finish(self) {
        drop(self);
        TRACKER.with(|t| {
            let t = t.borrow();
            assert!(t.errors.is_empty(), "after dropping the world: {:?}", t.errors);
            assert_eq!(t.live, 0, "values leaked by the dropped world");
            assert_eq!(t.zst_live, [0, 0], "zero-sized values leaked by the dropped world");
        });
    }

    fn target(&self, t: Target) -> Entity {
        match t {
            0..=191 if !self.model.is_empty() => {
                *self.model.keys().nth(t as usize % self.model.len()).expect("in range")
            }
            0..=254 if !self.handles.is_empty() => self.handles[t as usize % self.handles.len()],
            _ => NEVER,
        }
    }

    fn write(&mut self, entity: Entity, vals: &[(usize, Val)]) {
        let step = self.step;
        let components = self.model.get_mut(&entity).expect("a live entity");
        for &(kind, val) in vals {
            components[kind] = Some(Slot { val, changed: step });
        }
    }

    fn spawned(&mut self, entity: Entity, vals: &[(usize, Val)]) {
        assert!(!self.model.contains_key(&entity), "{entity:?} handed out while alive");
        self.model.insert(entity, [None; KINDS]);
        self.handles.push(entity);
        self.write(entity, vals);
    }

    /// The shape a remove of `shape` from `entity` means (see [`Op::Remove`]).
    fn remove_shape(&self, entity: Entity, shape: u8) -> usize {
        let has: Vec<usize> = match self.model.get(&entity) {
            Some(c) if shape >= 128 => (0..KINDS).filter(|&k| c[k].is_some()).collect(),
            _ => Vec::new(),
        };
        if has.is_empty() {
            shape as usize % SHAPES
        } else {
            // Shapes 0 to 8 are the single kinds, in kind order.
            let single = has[shape as usize % has.len()];
            debug_assert_eq!(shape_kinds(single), [single]);
            single
        }
    }

    /// Whether the model's `entity` has every kind of `shape`.
    fn has_all(&self, entity: Entity, shape: usize) -> bool {
        self.model.get(&entity).is_some_and(|c| shape_kinds(shape).iter().all(|&k| c[k].is_some()))
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Spawn { shape } => {
                let shape = shape as usize % SHAPES;
                let (entity, vals) = with_shape(
                    shape,
                    SpawnOne { world: &mut self.world, next_id: &mut self.next_id },
                );
                self.spawned(entity, &vals);
            }
            Op::SpawnBatch { shape, n } => {
                let shape = shape as usize % SHAPES;
                self.spawn_batch(shape, n as usize);
            }
            Op::Despawn { target } => {
                let entity = self.target(target);
                let result = self.world.despawn(entity);
                match self.despawn_model(entity) {
                    Some(_) => assert!(result.is_ok(), "despawn of live {entity:?}: {result:?}"),
                    None => assert!(
                        matches!(result, Err(EntityError::NoSuchEntity(e)) if e == entity),
                        "despawn of dead {entity:?}: {result:?}"
                    ),
                }
            }
            Op::Insert { target, shape } => {
                let entity = self.target(target);
                let shape = shape as usize % SHAPES;
                let insert =
                    InsertOne { world: &mut self.world, next_id: &mut self.next_id, entity };
                let (result, vals) = with_shape(shape, insert);
                if self.model.contains_key(&entity) {
                    assert!(result.is_ok(), "insert into live {entity:?}: {result:?}");
                    self.write(entity, &vals);
                } else {
                    assert!(
                        matches!(result, Err(EntityError::NoSuchEntity(e)) if e == entity),
                        "insert into dead {entity:?}: {result:?}"
                    );
                }
            }
            Op::Remove { target, shape } => {
                let entity = self.target(target);
                let shape = self.remove_shape(entity, shape);
                let result = with_shape(shape, RemoveOne { world: &mut self.world, entity });
                match self.model.get_mut(&entity) {
                    None => assert!(
                        matches!(result, Err(EntityError::NoSuchEntity(e)) if e == entity),
                        "remove from dead {entity:?}: {result:?}"
                    ),
                    Some(components) => {
                        let kinds = shape_kinds(shape);
                        if kinds.iter().all(|&k| components[k].is_some()) {
                            let expected: Vals = kinds
                                .iter()
                                .map(|&k| (k, components[k].take().expect("checked").val))
                                .collect();
                            match result {
                                Ok(got) => assert_eq!(got, expected, "removed values"),
                                Err(e) => panic!("remove from {entity:?}: {e:?}"),
                            }
                        } else {
                            assert!(
                                matches!(result, Err(EntityError::MissingComponent { entity: e, .. }) if e == entity),
                                "remove of missing components from {entity:?}: {result:?}"
                            );
                        }
                    }
                }
            }
            Op::GetMut { target, kind, data } => {
                let entity = self.target(target);
                let kind = kind as usize % KINDS;
                let data = u64::from(data);
                let found = with_kind(kind, SetData { world: &mut self.world, entity, data });
                let step = self.step;
                let slot = self.model.get_mut(&entity).and_then(|c| c[kind].as_mut());
                assert_eq!(found, slot.is_some(), "get_mut::<{kind}> of {entity:?}");
                if let Some(slot) = slot {
                    if kind != K_Z && kind != K_SZ {
                        slot.val.data = data;
                    }
                    slot.changed = step;
                }
            }
            Op::QueryWrite { sel, data } => {
                let data = u64::from(data);
                let sel = u32::from(sel % 3);
                for (entity, mut a, sal) in self.w_a.iter_mut(&mut self.world) {
                    if entity.index() % 3 == sel {
                        a.data = data;
                        if let Some(mut sal) = sal {
                            sal.data = data ^ 1;
                        }
                    } else {
                        // Reads only: no change marked.
                        std::hint::black_box((a.data, sal.map(|s| s.data)));
                    }
                }
                let step = self.step;
                for (entity, c) in &mut self.model {
                    if entity.index() % 3 != sel {
                        continue;
                    }
                    if let Some(a) = &mut c[K_A] {
                        *a = Slot { val: Val { data, ..a.val }, changed: step };
                        if let Some(sal) = &mut c[K_SAL] {
                            *sal = Slot { val: Val { data: data ^ 1, ..sal.val }, changed: step };
                        }
                    }
                }
            }
            Op::ParQueryWrite { data } => {
                let data = u64::from(data);
                self.w_sbig.par_iter_mut(&mut self.world).batch_size(1).for_each(|mut b| {
                    b.data ^= data;
                });
                let step = self.step;
                for c in self.model.values_mut() {
                    if c[K_S].is_some()
                        && let Some(b) = &mut c[K_SBIG]
                    {
                        b.val.data ^= data;
                        b.changed = step;
                    }
                }
            }
            Op::RunSchedule { ref cmds } => self.run_schedule(cmds),
            Op::Reserve => {
                let entity = self.world.reserve_entity();
                self.world.flush();
                assert!(self.world.contains(entity), "a flushed reserved entity is alive");
                self.spawned(entity, &[]);
            }
            Op::Clear => {
                self.world.clear();
                self.model.clear();
                self.tree.clear();
            }
            Op::SetParent { child, parent } => {
                let (child, parent) = (self.target(child), self.target(parent));
                let result = self.world.set_parent(child, parent);
                match self.tree.check(child, parent, |e| self.model.contains_key(&e)) {
                    Ok(()) => {
                        assert!(result.is_ok(), "set_parent({child:?}, {parent:?}): {result:?}");
                        self.tree.set(child, parent);
                    }
                    Err(bad) => {
                        let ok = matches!(
                            (&bad, &result),
                            (Bad::DeadChild, Err(RelationshipError::NoSuchSource(_)))
                                | (Bad::DeadParent, Err(RelationshipError::NoSuchTarget { .. }))
                                | (Bad::SelfParent, Err(RelationshipError::SelfRelation { .. }))
                                | (Bad::Cycle, Err(RelationshipError::Cycle { .. }))
                        );
                        assert!(ok, "set_parent({child:?}, {parent:?}): {bad:?} vs {result:?}");
                    }
                }
            }
            Op::InsertChildOf { child, parent } => {
                let (child, parent) = (self.target(child), self.target(parent));
                let result = self.world.insert(child, (ChildOf(parent),));
                self.inserted_child_of(child, parent, result.is_ok());
            }
            Op::RemoveParent { child } => {
                let child = self.target(child);
                let want = self.tree.remove(child);
                assert_eq!(self.world.remove_parent(child), want, "remove_parent({child:?})");
            }
            Op::DespawnRecursive { target } => {
                let entity = self.target(target);
                let result = self.world.despawn_recursive(entity);
                match self.despawn_model(entity) {
                    Some(n) => assert_eq!(result.ok(), Some(n), "despawn_recursive({entity:?})"),
                    None => assert!(
                        matches!(result, Err(EntityError::NoSuchEntity(e)) if e == entity),
                        "despawn_recursive of dead {entity:?}: {result:?}"
                    ),
                }
            }
            Op::SpawnDup => {
                let (a, s, a2) = (A::make(self.id()), S::make(self.id()), A::make(self.id()));
                let result = self.world.try_spawn((a, s, a2));
                assert!(
                    matches!(result, Err(EntityError::Component(_))),
                    "spawn of a repeated component: {result:?}"
                );
            }
            Op::InsertDup { target } => {
                let entity = self.target(target);
                let (s, z, s2) = (S::make(self.id()), Z::make(0), S::make(self.id()));
                let result = self.world.insert(entity, (s, z, s2));
                assert!(result.is_err(), "insert of a repeated component: {result:?}");
            }
            Op::RemoveDup { target } => {
                let entity = self.target(target);
                let result = self.world.try_remove::<(B, B)>(entity);
                assert!(result.is_err(), "remove of a repeated component");
            }
            Op::CheckTicks => self.world.check_change_ticks(),
            Op::Churn { shape, n } => {
                let shape = shape as usize % SHAPES;
                let n = 100 + n as usize % 701;
                let handles = self.handles.len();
                let entities = self.spawn_batch(shape, n);
                // The first kind of each: the rest is checked for the survivors after the step.
                let kind = shape_kinds(shape)[0];
                for &entity in &entities {
                    let want = self.model[&entity][kind].map(|s| s.val);
                    let got = with_kind(kind, Get { world: &self.world, entity });
                    assert_eq!(got, Ok(want), "{entity:?} kind {kind} after spawn_batch");
                }
                let odd = (1..n).step_by(2);
                let even = (0..n).step_by(2).rev();
                for i in odd.chain(even).filter(|i| i % 50 != 0) {
                    let entity = entities[i];
                    assert!(self.world.despawn(entity).is_ok(), "despawn of {entity:?}");
                    self.despawn_model(entity);
                }
                // Keep the survivors and a few dead ones: every handle is checked every step.
                self.handles.truncate(handles);
                self.handles.extend(entities.iter().step_by(25));
            }
        }
    }

    /// `World::spawn_batch` of `n` bundles of `shape`, recorded in the model.
    fn spawn_batch(&mut self, shape: usize, n: usize) -> Vec<Entity> {
        let batch = SpawnBatch { world: &mut self.world, next_id: &mut self.next_id, n };
        let (entities, vals) = with_shape(shape, batch);
        assert_eq!(entities.len(), n, "spawn_batch count");
        for (&entity, vals) in entities.iter().zip(vals) {
            self.spawned(entity, &vals);
        }
        entities
    }

    /// Despawns `entity` and its descendants from the model (despawning a parent despawns
    /// its children); returns how many, or `None` when `entity` is not alive.
    fn despawn_model(&mut self, entity: Entity) -> Option<usize> {
        if !self.model.contains_key(&entity) {
            return None;
        }
        let subtree = self.tree.subtree(entity);
        for &e in &subtree {
            self.model.remove(&e).expect("descendants are alive");
            self.tree.despawned(e);
        }
        Some(subtree.len())
    }

    /// The model of a raw insert of `ChildOf(parent)` into `child` (`ok`: the insert returned
    /// `Ok`): a bad relationship is undone, leaving `child` with no parent.
    fn inserted_child_of(&mut self, child: Entity, parent: Entity, ok: bool) {
        match self.tree.check(child, parent, |e| self.model.contains_key(&e)) {
            Ok(()) => {
                assert!(ok, "insert of ChildOf({parent:?}) into {child:?}");
                self.tree.set(child, parent);
            }
            Err(Bad::DeadChild) => assert!(!ok, "insert of ChildOf into dead {child:?}"),
            Err(_) => {
                assert!(ok, "insert of a bad ChildOf({parent:?}) into {child:?}");
                self.tree.remove(child);
            }
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    fn resolve(&self, target: CmdTarget, spawns: usize) -> Resolved {
        match target {
            CmdTarget::Spawned(k) if spawns > 0 => Resolved::Spawned(k as usize % spawns),
            CmdTarget::Spawned(t) | CmdTarget::World(t) => Resolved::World(self.target(t)),
        }
    }

    fn run_schedule(&mut self, cmds: &[Cmd]) {
        enum Planned {
            Spawn(Vals),
            Despawn(Resolved),
            Insert(Resolved, Vals),
            Remove(Resolved, usize),
            ChildOf(Resolved, Entity),
        }
        // Plan: make the values and resolve world targets now, on this thread.
        let mut fns: Vec<CmdFn> = Vec::new();
        let mut planned = Vec::new();
        let mut spawns = 0;
        for cmd in cmds {
            match *cmd {
                Cmd::Spawn { shape } => {
                    let make = CmdSpawn { next_id: &mut self.next_id };
                    let (f, vals) = with_shape(shape as usize % SHAPES, make);
                    fns.push(f);
                    planned.push(Planned::Spawn(vals));
                    spawns += 1;
                }
                Cmd::Despawn { target } => {
                    let target = self.resolve(target, spawns);
                    fns.push(Box::new(move |c, spawned| c.despawn(target.entity(spawned))));
                    planned.push(Planned::Despawn(target));
                }
                Cmd::Insert { target, shape } => {
                    let target = self.resolve(target, spawns);
                    let make = CmdInsert { next_id: &mut self.next_id, target };
                    let (f, vals) = with_shape(shape as usize % SHAPES, make);
                    fns.push(f);
                    planned.push(Planned::Insert(target, vals));
                }
                Cmd::ChildOf { target, parent } => {
                    let target = self.resolve(target, spawns);
                    let parent = self.target(parent);
                    fns.push(Box::new(move |c, spawned| {
                        c.insert(target.entity(spawned), (ChildOf(parent),));
                    }));
                    planned.push(Planned::ChildOf(target, parent));
                }
                Cmd::Remove { target, shape } => {
                    let target = self.resolve(target, spawns);
                    let shape = shape as usize % SHAPES;
                    fns.push(with_shape(shape, CmdRemove { target }));
                    planned.push(Planned::Remove(target, shape));
                }
            }
        }

        self.world.resource_mut::<CommandPlan>().expect("inserted by new").cmds = fns;
        let before = self.schedule.command_stats().clone();
        self.schedule.run(&mut self.world).expect("the schedule runs");
        let after = self.schedule.command_stats().clone();
        let plan = self.world.resource_mut::<CommandPlan>().expect("inserted by new");
        assert!(plan.cmds.is_empty(), "apply_plan issued every command");
        let spawned = std::mem::take(&mut plan.spawned);
        assert_eq!(spawned.len(), spawns, "spawn commands");

        // The systems, in their schedule order (sys_a2 after sys_a: both write A).
        let step = self.step;
        for c in self.model.values_mut() {
            let set = |c: &mut Components, kind: usize, data: u64| {
                let slot = c[kind].as_mut().expect("present");
                slot.val.data = data;
                slot.changed = step;
            };
            let data = |c: &Components, kind: usize| c[kind].map(|s| s.val.data);
            if let Some(a) = data(c, K_A) {
                set(c, K_A, a.wrapping_mul(3).wrapping_add(1));
            }
            if let Some(s) = data(c, K_S) {
                set(c, K_S, s.wrapping_add(data(c, K_B).unwrap_or(1)));
            }
            if let (Some(al), None) = (data(c, K_AL), c[K_Z]) {
                set(c, K_AL, al ^ 0x55);
            }
            if let (Some(a), Some(sal)) = (data(c, K_A), data(c, K_SAL)) {
                set(c, K_A, a.rotate_left(5) ^ sal);
            }
            if let (Some(big), Some(_)) = (data(c, K_BIG), c[K_SZ]) {
                set(c, K_BIG, big.wrapping_add(7));
            }
            if let Some(b) = data(c, K_SBIG) {
                set(c, K_SBIG, !b);
            }
        }

        // The commands, in order. The first one flushes every reserved entity (empty).
        if !planned.is_empty() {
            for &entity in &spawned {
                self.spawned(entity, &[]);
            }
        }
        let (mut applied, mut skipped) = (0, 0);
        let mut spawn_index = 0;
        for p in planned {
            let ok = match p {
                Planned::Spawn(vals) => {
                    let entity = spawned[spawn_index];
                    spawn_index += 1;
                    let alive = self.model.contains_key(&entity);
                    if alive {
                        self.write(entity, &vals);
                    }
                    alive
                }
                Planned::Despawn(t) => self.despawn_model(t.entity(&spawned)).is_some(),
                Planned::ChildOf(t, parent) => {
                    let child = t.entity(&spawned);
                    let alive = self.model.contains_key(&child);
                    self.inserted_child_of(child, parent, alive);
                    alive
                }
                Planned::Insert(t, vals) => {
                    let entity = t.entity(&spawned);
                    let alive = self.model.contains_key(&entity);
                    if alive {
                        self.write(entity, &vals);
                    }
                    alive
                }
                Planned::Remove(t, shape) => {
                    let entity = t.entity(&spawned);
                    let ok = self.has_all(entity, shape);
                    if ok {
                        let components = self.model.get_mut(&entity).expect("checked");
                        for &k in shape_kinds(shape) {
                            components[k] = None;
                        }
                    }
                    ok
                }
            };
            if ok {
                applied += 1;
            } else {
                skipped += 1;
            }
        }
        assert_eq!(after.applied - before.applied, applied, "commands applied");
        assert_eq!(after.skipped - before.skipped, skipped, "commands skipped");
    }

    /// Compares the world with the model.
    fn check(&mut self) -> Result<(), String> {
        let errors = TRACKER.with(|t| std::mem::take(&mut t.borrow_mut().errors));
        if !errors.is_empty() {
            return Err(format!("drop tracker: {errors:?}"));
        }
        let world = &self.world;
        if world.len() != self.model.len() {
            return Err(format!("len {} vs model {}", world.len(), self.model.len()));
        }
        for &entity in &self.handles {
            match self.model.get(&entity) {
                Some(components) => {
                    if !world.contains(entity) {
                        return Err(format!("{entity:?} is dead, the model has it alive"));
                    }
                    for (kind, slot) in components.iter().enumerate() {
                        let got = with_kind(kind, Get { world, entity })?;
                        if got != slot.map(|s| s.val) {
                            return Err(format!(
                                "{entity:?} kind {kind}: world {got:?}, model {:?}",
                                slot.map(|s| s.val)
                            ));
                        }
                    }
                }
                None => {
                    let alive = world.contains(entity);
                    let got = (world.get::<A>(entity).is_some(), world.get::<S>(entity).is_some());
                    if alive || got != (false, false) {
                        return Err(format!("dead {entity:?}: alive {alive}, get {got:?}"));
                    }
                }
            }
        }
        if world.contains(NEVER) {
            return Err("a never-made entity is alive".into());
        }
        let mut lifecycles = self.lifecycles.lock().unwrap();
        for &entity in &self.handles {
            let vals = self.model.get(&entity).map(|c| c.map(|slot| slot.map(|s| s.val)));
            lifecycles.check(entity, vals.as_ref().map(|v| &v[..]))?;
        }
        drop(lifecycles);
        self.check_queries()?;
        let world = &self.world;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.check_invariants()))
            .map_err(|p| format!("check_invariants: {}", panic_text(&*p)))?;
        self.tree.compare(&self.world, &self.handles)?;
        self.check_drops()?;
        self.check_memory()
    }

    fn check_queries(&mut self) -> Result<(), String> {
        let world = &self.world;
        let model = &self.model;
        let step = self.step;
        let val = |c: &Components, k: usize| c[k].map(|s| s.val);
        fn same<T: PartialEq + std::fmt::Debug + Ord>(
            name: &str,
            mut got: Vec<T>,
            want: Vec<T>,
        ) -> Result<(), String> {
            got.sort();
            if got == want {
                Ok(())
            } else {
                Err(format!("query {name}: world {got:?}, model {want:?}"))
            }
        }
        let pick = |f: &dyn Fn(&Components) -> bool| -> Vec<Entity> {
            model.iter().filter(|(_, c)| f(c)).map(|(&e, _)| e).collect()
        };
        let changed = |c: &Components, k: usize| c[k].is_some_and(|s| s.changed == step);

        // `get` on one entity a step (live or dead, in turn) and on one never made; before the
        // iterations below, which count as runs of the `Changed` state.
        let one = self.handles.get(step as usize % self.handles.len().max(1)).copied();
        for entity in one.into_iter().chain([NEVER]) {
            let c = model.get(&entity);
            let got =
                self.q_s.get(world, entity).ok().map(|(e, s, al)| (e, s.val(), al.map(Al::val)));
            let want = c.and_then(|c| Some((entity, val(c, K_S)?, val(c, K_AL))));
            let got_bz = self.q_bz.get(world, entity).ok().map(|(e, b)| (e, b.val()));
            let want_bz = c
                .filter(|c| c[K_Z].is_some() && c[K_SZ].is_none())
                .and_then(|c| Some((entity, val(c, K_B)?)));
            let got_changed = self.q_changed_a.get(world, entity).ok();
            let want_changed = c.filter(|c| changed(c, K_A)).map(|_| entity);
            if (got, got_bz, got_changed) != (want, want_bz, want_changed) {
                return Err(format!(
                    "QueryState::get of {entity:?}: world {:?}, model {:?}",
                    (got, got_bz, got_changed),
                    (want, want_bz, want_changed)
                ));
            }
        }

        let got = self.q_a.iter(world).map(|(e, a)| (e, a.val())).collect();
        let want = model.iter().filter_map(|(&e, c)| Some((e, val(c, K_A)?))).collect();
        same("(Entity, &A)", got, want)?;

        let got = self.q_s.iter(world).map(|(e, s, al)| (e, s.val(), al.map(Al::val))).collect();
        let want =
            model.iter().filter_map(|(&e, c)| Some((e, val(c, K_S)?, val(c, K_AL)))).collect();
        same("(Entity, &S, Option<&Al>)", got, want)?;

        let got = self.q_bz.iter(world).map(|(e, b)| (e, b.val())).collect();
        let want = model
            .iter()
            .filter(|(_, c)| c[K_Z].is_some() && c[K_SZ].is_none())
            .filter_map(|(&e, c)| Some((e, val(c, K_B)?)))
            .collect();
        same("(Entity, &B), (With<Z>, Without<SZ>)", got, want)?;

        let got = self.q_sz.iter(world).map(|(e, _)| e).collect();
        same("(Entity, &SZ)", got, pick(&|c| c[K_SZ].is_some()))?;

        let mut broken = None;
        let got = self
            .q_all
            .iter(world)
            .map(|(e, big, sbig)| {
                if !big.is_none_or(Big::intact) || !sbig.is_none_or(SBig::intact) {
                    broken = Some(e);
                }
                (e, big.map(Big::val), sbig.map(SBig::val))
            })
            .collect();
        if let Some(e) = broken {
            return Err(format!("{e:?}: a big component's bytes changed (seen by a query)"));
        }
        let want = model.iter().map(|(&e, c)| (e, val(c, K_BIG), val(c, K_SBIG))).collect();
        same("(Entity, Option<&Big>, Option<&SBig>)", got, want)?;

        let got = self
            .q_mixed
            .iter(world)
            .map(|(e, _, sal)| {
                if std::ptr::from_ref(sal).addr() % align_of::<SAl>() != 0 {
                    broken = Some(e);
                }
                (e, sal.val())
            })
            .collect();
        if let Some(e) = broken {
            return Err(format!("{e:?}: a misaligned SAl (seen by a query)"));
        }
        let want = model
            .iter()
            .filter(|(_, c)| c[K_Z].is_some())
            .filter_map(|(&e, c)| Some((e, val(c, K_SAL)?)))
            .collect();
        same("(Entity, &Z, &SAl)", got, want)?;

        let got = self.q_or.iter(world).collect();
        same(
            "Entity, Or<(With<Big>, With<SZ>)>",
            got,
            pick(&|c| c[K_BIG].is_some() || c[K_SZ].is_some()),
        )?;

        let got = self.q_changed_a.iter(world).collect();
        same("Entity, Changed<A>", got, pick(&|c| changed(c, K_A)))?;

        let got = self.q_changed_sal.iter(world).map(|(e, s)| (e, s.val())).collect();
        let want = model
            .iter()
            .filter(|(_, c)| changed(c, K_SAL))
            .filter_map(|(&e, c)| Some((e, val(c, K_SAL)?)))
            .collect();
        same("(Entity, &SAl), Changed<SAl>", got, want)
    }

    fn check_drops(&self) -> Result<(), String> {
        let mut tracked = 0;
        let mut zst = [0i64; 2];
        for c in self.model.values() {
            tracked += (0..KINDS).filter(|&k| TRACKED[k] && c[k].is_some()).count();
            zst[0] += i64::from(c[K_Z].is_some());
            zst[1] += i64::from(c[K_SZ].is_some());
        }
        TRACKER.with(|t| {
            let t = t.borrow();
            if t.live != tracked {
                return Err(format!("{} tracked values live, the model holds {tracked}", t.live));
            }
            if t.zst_live != zst {
                return Err(format!("zero-sized values live {:?}, model {zst:?}", t.zst_live));
            }
            Ok(())
        })
    }

    fn check_memory(&self) -> Result<(), String> {
        let world = &self.world;
        let stats = world.memory_stats();
        let tables = world.tables();
        if stats.tables.len() != tables.len() {
            return Err(format!("memory_stats: {} tables of {}", stats.tables.len(), tables.len()));
        }
        let (mut rows, mut reserved, mut committed, mut used) = (0, 0, 0, 0);
        for (t, table) in stats.tables.iter().zip(tables) {
            if !(t.used <= t.committed && t.committed <= t.reserved) {
                return Err(format!("table memory out of order: {t:?}"));
            }
            if t.rows != table.len() {
                return Err(format!("{t:?}: the table has {} rows", table.len()));
            }
            // A row: its entity, and per component the value and two change ticks.
            let row: usize = size_of::<Entity>()
                + table
                    .component_ids()
                    .iter()
                    .map(|&c| world.components().info(c).layout().size() + 8)
                    .sum::<usize>();
            if t.used != t.rows * row {
                return Err(format!("{t:?}: used should be {} rows x {row} bytes", t.rows));
            }
            rows += t.rows;
            reserved += t.reserved;
            committed += t.committed;
            used += t.used;
        }
        if rows != world.len() {
            return Err(format!("memory_stats: {rows} table rows, {} entities", world.len()));
        }
        if !(stats.used <= stats.committed && stats.committed <= stats.reserved) {
            return Err(format!("memory totals out of order: {stats:?}"));
        }
        if stats.reserved < reserved || stats.committed < committed || stats.used < used {
            return Err(format!("memory totals below the tables' sum: {stats:?}"));
        }
        let want: usize = self.model.len() * size_of::<Entity>()
            + self
                .model
                .values()
                .flat_map(|c| (0..KINDS).filter(|&k| c[k].is_some()))
                .map(|k| KIND_SIZE[k] + 8)
                .sum::<usize>()
            + self.tree.used();
        if stats.used != want {
            return Err(format!(
                "memory_stats used {} bytes, the live values hold {want}",
                stats.used
            ));
        }
        Ok(())
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic)".to_owned()
    }
}
