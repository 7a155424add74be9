//! transforms: a scene graph of 100,000 nodes whose world transforms follow their parents,
//! recomputed only where something moved.
//!
//! Each node has a `Local` transform (relative to its parent) and a `Global` one (in the
//! world); the tree is the built-in `ChildOf` / `Children` hierarchy. `propagate` does not walk
//! the whole tree each frame: it starts from the nodes whose `Local` or `ChildOf` changed
//! (change detection), whose `ChildOf` was removed, or that were enabled again, drops those
//! below another such node, and recomputes each remaining subtree from its parent's `Global`.
//! A frame that moves 1% of the nodes recomputes their subtrees, not the scene.
//!
//! Two observers count the nodes spawned and despawned (closures with captured counters,
//! run on `OnAdd` / `OnRemove` of `Node`), and the counts are checked against the scene.
//!
//! Each frame is checked against a full recomputation of the scene (bit for bit: both use
//! the same arithmetic), through re-parenting, a disabled subtree that its parent moves while
//! it is disabled, and a subtree despawned and replaced.
//!
//! Run it with `cargo run --release --example transforms` (`-- --nodes N --frames N` for
//! another size).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use folio::prelude::*;

/// Root nodes of the scene, and children per inner node.
const ROOTS: usize = 100;
const FANOUT: usize = 4;
/// Nodes in the scene and frames simulated, unless `--nodes N` / `--frames N` say otherwise.
const NODES: usize = 100_000;
const FRAMES: u32 = 60;
/// The smallest scene and run that reach every scripted event below.
const MIN_NODES: usize = 2_000;
const MIN_FRAMES: u32 = 51;

/// A 2D transform: translation, rotation (radians) and uniform scale.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Transform {
    x: f32,
    y: f32,
    angle: f32,
    scale: f32,
}

impl Transform {
    /// `self` (a parent's world transform) applied to `local` (its child's, relative to it).
    fn compose(&self, local: &Transform) -> Transform {
        let (sin, cos) = self.angle.sin_cos();
        let (lx, ly) = (local.x * self.scale, local.y * self.scale);
        Transform {
            x: self.x + lx * cos - ly * sin,
            y: self.y + lx * sin + ly * cos,
            angle: self.angle + local.angle,
            scale: self.scale * local.scale,
        }
    }
}

/// Relative to the parent (to the world, for a root).
#[derive(Clone, Copy, Debug)]
struct Local(Transform);

/// In the world: written by `propagate` only.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Global(Transform);

/// The node's index at creation, which the animation and the checks key on.
#[derive(Clone, Copy, Debug)]
struct Node(usize);

/// What `propagate` did on the last frame.
#[derive(Default)]
struct PropagateStats {
    /// Nodes whose change started a recomputation (after dropping those below another).
    dirty_roots: usize,
    /// Nodes whose `Global` was recomputed.
    recomputed: usize,
}

/// The frame counter the animation keys on.
struct Frame(u32);

/// Moves 1% of the nodes a little each frame: a tenth of a radian and a step along x.
fn animate(frame: Res<Frame>, mut nodes: Query<(&Node, &mut Local)>) {
    let f = frame.0 as usize;
    for (node, mut local) in nodes.iter_mut() {
        if (node.0 + f * 7_919).is_multiple_of(100) {
            local.0.angle += 0.1;
            local.0.x += 0.25;
        }
    }
}

/// The nodes whose own transform or parent changed since `propagate` last ran.
type Moved = Or<(Changed<Local>, Changed<ChildOf>)>;

/// Recomputes the `Global` of every node whose transform may have moved: the subtrees below
/// the nodes whose `Local` or parent changed, whose parent was removed, or that were enabled
/// again (their parent may have moved while they were disabled and skipped).
fn propagate(
    changed: Query<Entity, Moved>,
    mut unparented: RemovedComponents<ChildOf>,
    mut enabled: RemovedComponents<Disabled>,
    parents: Query<&ChildOf>,
    children: Query<&Children>,
    mut nodes: Query<(&Local, &mut Global)>,
    mut stats: ResMut<PropagateStats>,
) {
    let mut dirty: Vec<Entity> = changed.iter().collect();
    dirty.extend(unparented.read());
    dirty.extend(enabled.read());
    dirty.sort_unstable();
    dirty.dedup();
    // A node below another dirty one is recomputed with that one's subtree.
    let is_dirty = |e: Entity| dirty.binary_search(&e).is_ok();
    let below_dirty = |mut e: Entity| {
        while let Ok(parent) = parents.get(e) {
            e = parent.parent();
            if is_dirty(e) {
                return true;
            }
        }
        false
    };
    let starts: Vec<Entity> = dirty.iter().copied().filter(|&e| !below_dirty(e)).collect();

    let mut recomputed = 0;
    let mut stack = Vec::new();
    for &start in &starts {
        let base = match parents.get(start) {
            Ok(parent) => match nodes.get(parent.parent()) {
                Ok((_, global)) => global.0,
                // The parent is disabled: so is this subtree, recomputed when enabled.
                Err(_) => continue,
            },
            Err(_) => Transform { scale: 1.0, ..Transform::default() },
        };
        stack.push((start, base));
        while let Some((e, base)) = stack.pop() {
            // Despawned since it was marked, or disabled: nothing to place.
            let Ok((local, mut global)) = nodes.get_mut(e) else { continue };
            let world = base.compose(&local.0);
            global.0 = world;
            recomputed += 1;
            if let Ok(kids) = children.get(e) {
                stack.extend(kids.iter().map(|&c| (c, world)));
            }
        }
    }
    *stats = PropagateStats { dirty_roots: starts.len(), recomputed };
}

/// Every enabled node's world transform computed from scratch, parents first.
fn recompute_all(world: &World) -> Vec<(Entity, Transform)> {
    let identity = Transform { scale: 1.0, ..Transform::default() };
    let mut placed: HashMap<Entity, Transform> = HashMap::new();
    let mut out = Vec::new();
    for (e, parent) in world.iter_hierarchy() {
        if world.get::<Disabled>(e).is_some() {
            continue;
        }
        let base = match parent {
            Some(p) => match placed.get(&p) {
                Some(&t) => t,
                None => continue, // below a disabled node
            },
            None => identity,
        };
        let local = world.get::<Local>(e).expect("every node has a Local").0;
        let t = base.compose(&local);
        placed.insert(e, t);
        out.push((e, t));
    }
    out
}

/// Checks every enabled node's `Global` against [`recompute_all`] and returns a checksum of
/// them.
fn check(world: &World) -> u64 {
    let expected = recompute_all(world);
    let mut sum = 0u64;
    for (e, t) in &expected {
        let got = world.get::<Global>(*e).expect("every node has a Global").0;
        assert_eq!(got, *t, "{e:?}: incremental propagation differs from a full one");
        sum = sum.wrapping_mul(31).wrapping_add(u64::from(t.x.to_bits() ^ t.y.to_bits()));
    }
    sum
}

fn spawn_node(world: &mut World, i: usize, parent: Option<Entity>) -> Entity {
    let local = Transform {
        x: (i % 17) as f32 * 0.5,
        y: (i % 5) as f32 - 2.0,
        angle: (i % 7) as f32 * 0.05,
        scale: if i.is_multiple_of(3) { 0.9 } else { 1.0 },
    };
    match parent {
        Some(p) => world.spawn((Node(i), Local(local), Global::default(), ChildOf(p))),
        None => world.spawn((Node(i), Local(local), Global::default())),
    }
}

/// `--nodes N` and `--frames N` from the command line, with the defaults above.
fn args() -> (usize, u32) {
    let (mut nodes, mut frames) = (NODES, FRAMES);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--nodes" => nodes = value.parse().expect("--nodes takes a number"),
            "--frames" => frames = value.parse().expect("--frames takes a number"),
            _ => panic!("unknown argument {flag}: expected --nodes N or --frames N"),
        }
    }
    assert!(
        nodes >= MIN_NODES && frames >= MIN_FRAMES,
        "at least {MIN_NODES} nodes, {MIN_FRAMES} frames"
    );
    (nodes, frames)
}

fn main() {
    let (node_count, frame_count) = args();
    let mut world = World::new();
    world.insert_resource(Frame(0));
    world.insert_resource(PropagateStats::default());
    // Observers with state of their own: how many nodes were ever spawned and despawned.
    let (spawned, despawned) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let counter = |count: &Arc<AtomicUsize>| {
        let count = Arc::clone(count);
        move || {
            count.fetch_add(1, Ordering::Relaxed);
        }
    };
    let on_spawn = counter(&spawned);
    let on_despawn = counter(&despawned);
    world
        .add_observer(
            Observer::new(move |_: &mut Trigger<OnAdd>, _: &mut DeferredWorld| on_spawn())
                .component::<Node>(),
        )
        .expect("a lifecycle observer of one component");
    world
        .add_observer(
            Observer::new(move |_: &mut Trigger<OnRemove>, _: &mut DeferredWorld| on_despawn())
                .component::<Node>(),
        )
        .expect("a lifecycle observer of one component");
    let started = Instant::now();
    let mut nodes = Vec::with_capacity(node_count);
    for i in 0..node_count {
        let parent = (i >= ROOTS).then(|| nodes[(i - ROOTS) / FANOUT]);
        nodes.push(spawn_node(&mut world, i, parent));
    }
    println!("built a scene of {} nodes in {:.1?}", world.len(), started.elapsed());

    let mut schedule = Schedule::new();
    schedule.add_systems((animate, propagate).chain());
    // The first frame places every node: each `Local` and `ChildOf` is new.
    let mut total_recomputed = 0;
    for f in 0..frame_count {
        world.resource_mut::<Frame>().expect("inserted").0 = f;
        let event = match f {
            // Re-parent ten subtrees onto the first roots.
            20 => {
                let mut moved = 0;
                for k in 0..10 {
                    let child = nodes[ROOTS + 1_000 + 37 * k];
                    match world.set_parent(child, nodes[k]) {
                        Ok(()) => moved += 1,
                        Err(e) => println!("  refused: {e}"),
                    }
                }
                format!("re-parented {moved} subtrees")
            }
            // Disable a subtree, then move its parent: the disabled nodes are skipped...
            30 => {
                let n = world.disable_recursive(nodes[ROOTS + 3]).expect("alive");
                world.get_mut::<Local>(nodes[0]).expect("alive").0.x += 10.0;
                format!("disabled a subtree of {n} and moved its root's parent")
            }
            // ...and recomputed when enabled again.
            40 => {
                let n = world.enable_recursive(nodes[ROOTS + 3]).expect("alive");
                format!("enabled the subtree of {n} again")
            }
            // Despawn a subtree and grow a new one in its place.
            50 => {
                let gone = world.despawn_recursive(nodes[ROOTS + 7]).expect("alive");
                let parent = nodes[1];
                let new_root = spawn_node(&mut world, node_count, Some(parent));
                for i in 0..100 {
                    spawn_node(&mut world, node_count + 1 + i, Some(new_root));
                }
                format!("despawned a subtree of {gone}, spawned one of 101")
            }
            _ => String::new(),
        };
        let t = Instant::now();
        schedule.run(&mut world).expect("no system panics");
        let took = t.elapsed();
        let stats = world.resource::<PropagateStats>().expect("inserted");
        let (starts, recomputed) = (stats.dirty_roots, stats.recomputed);
        total_recomputed += recomputed;
        let checksum = check(&world);
        if f < 3 || !event.is_empty() || f == frame_count - 1 {
            println!(
                "frame {f:>2}: {took:>9.1?}, {recomputed:>6} of {} nodes recomputed from {starts:>4} \
                 changes, checksum {checksum:016x} {event}",
                world.len()
            );
        }
    }
    world.check_invariants();
    let (spawned, despawned) = (spawned.load(Ordering::Relaxed), despawned.load(Ordering::Relaxed));
    assert_eq!(spawned - despawned, world.len(), "the observers saw every spawn and despawn");
    println!("ok: the observers counted {spawned} nodes spawned and {despawned} despawned");
    println!(
        "ok: {frame_count} frames, every one equal to a full recomputation; {:.1}% of the node \
         updates a full walk would do",
        100.0 * total_recomputed as f64 / (f64::from(frame_count) * node_count as f64)
    );
}
