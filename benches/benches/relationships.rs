//! The built-in hierarchy (`ChildOf` ↔ `Children`) side by side with bevy_ecs's, the one peer
//! that keeps both sides of a relationship for the user (hecs and shipyard have none):
//!
//! - `spawn_children`: a fresh world, 1,000 parents, then 100,000 children spawned one at a
//!   time with `(Payload, ChildOf(parent))`, parent `i % 1000`; world creation, the spawns and
//!   the drop all timed. `*_batch` spawns the children with `spawn_batch`.
//! - `despawn_child`: a parent with 10,000 children (built untimed); the timed routine
//!   despawns 1,000 of them, one at a time, in a seeded random order: each despawn takes the
//!   child out of its parent's `Children`. `*_plain` despawns 1,000 of 10,000 entities that
//!   have no parent, the same way: the bar is the child despawn at most 2x the plain one
//!   (bevy finds the child in its parent's list by a scan).
//! - `despawn_recursive`: a tree of 100,000 nodes (each with 10 children, breadth-first,
//!   built untimed), despawned from its root with one call.
//!
//! Sample sizes and times come from `folio_benches::criterion()` and the command line.
#![allow(missing_docs)] // `criterion_group!` / `criterion_main!` generate undocumented items.
#![allow(dead_code)] // The payload is written by the benches, never read back.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use folio_benches::SplitMix64;

/// Parents of `spawn_children`.
const PARENTS: usize = 1_000;
/// Children of `spawn_children`.
const CHILDREN: usize = 100_000;
/// Children of the one parent of `despawn_child`, and entities of its plain form.
const SIBLINGS: usize = 10_000;
/// Despawns per timed routine of `despawn_child`.
const DESPAWNS: usize = 1_000;
/// Nodes of `despawn_recursive`'s tree, and each inner node's children.
const TREE: usize = 100_000;
const FANOUT: usize = 10;

#[derive(Clone, Copy, bevy_ecs::component::Component)]
struct Payload([f32; 4]);

fn payload(i: usize) -> Payload {
    Payload([i as f32, 0.0, 1.0, 2.0])
}

/// Which `DESPAWNS` of `SIBLINGS` spawned entities to despawn, by spawn position: the same
/// seeded choice for every library.
fn doomed() -> Vec<usize> {
    let mut order: Vec<usize> = (0..SIBLINGS).collect();
    SplitMix64::new(0x5eed).shuffle(&mut order);
    order.truncate(DESPAWNS);
    order
}

fn spawn_children(c: &mut Criterion) {
    let mut group = c.benchmark_group("spawn_children");
    group.bench_function("folio", |b| {
        b.iter(|| {
            let mut world = folio_archetype::World::new();
            let parents: Vec<_> = (0..PARENTS).map(|i| world.spawn((payload(i),))).collect();
            for i in 0..CHILDREN {
                world.spawn((payload(i), folio_archetype::ChildOf(parents[i % PARENTS])));
            }
            black_box(&world);
        })
    });
    group.bench_function("folio_batch", |b| {
        b.iter(|| {
            let mut world = folio_archetype::World::new();
            let parents: Vec<_> = (0..PARENTS).map(|i| world.spawn((payload(i),))).collect();
            world.spawn_batch(
                (0..CHILDREN).map(|i| (payload(i), folio_archetype::ChildOf(parents[i % PARENTS]))),
            );
            black_box(&world);
        })
    });
    group.bench_function("bevy", |b| {
        b.iter(|| {
            let mut world = bevy_ecs::world::World::new();
            let parents: Vec<_> = (0..PARENTS).map(|i| world.spawn(payload(i)).id()).collect();
            for i in 0..CHILDREN {
                world.spawn((payload(i), bevy_ecs::hierarchy::ChildOf(parents[i % PARENTS])));
            }
            black_box(&world);
        })
    });
    group.bench_function("bevy_batch", |b| {
        b.iter(|| {
            let mut world = bevy_ecs::world::World::new();
            let parents: Vec<_> = (0..PARENTS).map(|i| world.spawn(payload(i)).id()).collect();
            world
                .spawn_batch(
                    (0..CHILDREN)
                        .map(|i| (payload(i), bevy_ecs::hierarchy::ChildOf(parents[i % PARENTS]))),
                )
                .for_each(drop);
            black_box(&world);
        })
    });
    group.finish();
}

fn despawn_child(c: &mut Criterion) {
    let doomed = doomed();
    let mut group = c.benchmark_group("despawn_child");
    group.bench_function("folio", |b| {
        b.iter_batched(
            || {
                let mut world = folio_archetype::World::new();
                let parent = world.spawn((payload(0),));
                let children: Vec<_> = (0..SIBLINGS)
                    .map(|i| world.spawn((payload(i), folio_archetype::ChildOf(parent))))
                    .collect();
                (world, parent, children)
            },
            |(mut world, parent, children)| {
                for &i in &doomed {
                    world.despawn(children[i]).unwrap();
                }
                assert_eq!(world.children(parent).len(), SIBLINGS - DESPAWNS);
                world
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("folio_plain", |b| {
        b.iter_batched(
            || {
                let mut world = folio_archetype::World::new();
                let entities: Vec<_> = (0..SIBLINGS).map(|i| world.spawn((payload(i),))).collect();
                (world, entities)
            },
            |(mut world, entities)| {
                for &i in &doomed {
                    world.despawn(entities[i]).unwrap();
                }
                world
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("bevy", |b| {
        b.iter_batched(
            || {
                let mut world = bevy_ecs::world::World::new();
                let parent = world.spawn(payload(0)).id();
                let children: Vec<_> = (0..SIBLINGS)
                    .map(|i| world.spawn((payload(i), bevy_ecs::hierarchy::ChildOf(parent))).id())
                    .collect();
                (world, parent, children)
            },
            |(mut world, parent, children)| {
                for &i in &doomed {
                    assert!(world.despawn(children[i]));
                }
                let left = world.get::<bevy_ecs::hierarchy::Children>(parent).unwrap().len();
                assert_eq!(left, SIBLINGS - DESPAWNS);
                world
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("bevy_plain", |b| {
        b.iter_batched(
            || {
                let mut world = bevy_ecs::world::World::new();
                let entities: Vec<_> =
                    (0..SIBLINGS).map(|i| world.spawn(payload(i)).id()).collect();
                (world, entities)
            },
            |(mut world, entities)| {
                for &i in &doomed {
                    assert!(world.despawn(entities[i]));
                }
                world
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// The parent of node `i > 0` of the breadth-first tree.
fn tree_parent(i: usize) -> usize {
    (i - 1) / FANOUT
}

fn despawn_recursive(c: &mut Criterion) {
    let mut group = c.benchmark_group("despawn_recursive");
    group.sample_size(20);
    group.bench_function("folio", |b| {
        b.iter_batched(
            || {
                let mut world = folio_archetype::World::new();
                let mut nodes = vec![world.spawn((payload(0),))];
                for i in 1..TREE {
                    let parent = folio_archetype::ChildOf(nodes[tree_parent(i)]);
                    nodes.push(world.spawn((payload(i), parent)));
                }
                (world, nodes[0])
            },
            |(mut world, root)| {
                assert_eq!(world.despawn_recursive(root).unwrap(), TREE);
                assert!(world.is_empty());
                world
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("bevy", |b| {
        b.iter_batched(
            || {
                let mut world = bevy_ecs::world::World::new();
                let mut nodes = vec![world.spawn(payload(0)).id()];
                for i in 1..TREE {
                    let parent = bevy_ecs::hierarchy::ChildOf(nodes[tree_parent(i)]);
                    nodes.push(world.spawn((payload(i), parent)).id());
                }
                (world, nodes[0])
            },
            |(mut world, root)| {
                assert!(world.despawn(root));
                world.flush();
                assert_eq!(world.query::<&Payload>().iter(&world).count(), 0);
                world
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = folio_benches::criterion();
    targets = spawn_children, despawn_child, despawn_recursive
}
criterion_main!(benches);
