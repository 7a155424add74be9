//! folio's [`World`](folio_archetype::World) side by side with bevy_ecs, hecs and shipyard on two
//! workloads of the public ecs_bench_suite:
//!
//! - `simple_insert`: spawn 10,000 entities of (Transform 4x4 f32, Position, Rotation, Velocity)
//!   into a fresh world. As in ecs_bench_suite, world creation, the spawns and the world's drop
//!   are all inside the timed routine, and each library uses its batch API (`spawn_batch`,
//!   shipyard's `bulk_add_entity`).
//! - `simple_insert_loop`: the same, but one `spawn` call per entity (shipyard through one
//!   borrowed set of views, its fast path), the pattern of game code spawning entities one by one.
//! - `add_remove`: a world of 10,000 entities with `A(f32)` is built untimed; the timed routine
//!   inserts `B(f32)` into all of them, then removes `B` from all of them, leaving the world as it
//!   found it. shipyard uses one borrowed `ViewMut<B>` for the whole pass, as ecs_bench_suite does.
//!   `folio_batch` does the same passes with one `World::insert_batch` and one
//!   `World::remove_batch` (the removed values returned in a `Vec`): the entities are their
//!   archetype's rows in order, so each pass moves as one block.
//! - `add_remove_sparse`: the same with `B` stored in a sparse set, where folio and bevy let a
//!   game put a component it adds and removes often (bevy's own benches have this variant as
//!   `add_remove_sparse_set`). shipyard stores everything in sparse sets, so its entry is the
//!   same code as in `add_remove`; hecs has no sparse storage and is left out.
//!
//! - `lookup_100k`: 100,000 live entities with `Val(i64)`, spawned untimed; the timed routine
//!   looks every one up by its id, in one seeded shuffled order (the same for every library), and
//!   sums the values. folio through `QueryState::get` and `World::get`; bevy through
//!   `World::get` and `Query::get` (a `Query` made once per pass from a `QueryState`); hecs
//!   through `World::get`, `World::query_one` and `World::query_one_mut` (no borrow checks);
//!   shipyard through `View::get` on one borrowed view per pass.
//!
//! The component types derive both bevy's and shipyard's `Component`; folio and hecs need no
//! derive. Sample sizes and times come from `folio_benches::criterion()` and the command line.
#![allow(missing_docs)] // `criterion_group!` / `criterion_main!` generate undocumented items.
#![allow(dead_code)] // The components are payload: written by the benches, never read back.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use folio_query::WorldQueryExt;
use shipyard::{AddComponent, EntitiesViewMut, Get, Remove, View, ViewMut};

/// Entities per workload.
const N: usize = 10_000;

/// Entities of `lookup_100k`.
const LOOKUP: usize = 100_000;

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Transform([[f32; 4]; 4]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Position([f32; 3]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Rotation([f32; 3]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Velocity([f32; 3]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct A(f32);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct B(f32);

/// `B` for the sparse-set variant: bevy fixes a component's storage in its derive.
#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
#[component(storage = "SparseSet")]
struct SparseB(f32);

/// `lookup_100k`'s component.
#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Val(i64);

fn identity() -> Transform {
    let mut m = [[0.0; 4]; 4];
    for (i, row) in m.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    Transform(m)
}

fn bundle() -> (Transform, Position, Rotation, Velocity) {
    (identity(), Position([1.0, 0.0, 0.0]), Rotation([0.0, 1.0, 0.0]), Velocity([0.0, 0.0, 1.0]))
}

fn simple_insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("simple_insert");
    group.bench_function("folio", |b| {
        b.iter(|| {
            let mut world = folio_archetype::World::new();
            black_box(world.spawn_batch((0..N).map(|_| bundle())));
        })
    });
    group.bench_function("bevy", |b| {
        b.iter(|| {
            let mut world = bevy_ecs::world::World::new();
            world.spawn_batch((0..N).map(|_| bundle())).for_each(|e| {
                black_box(e);
            });
        })
    });
    group.bench_function("hecs", |b| {
        b.iter(|| {
            let mut world = hecs::World::new();
            world.spawn_batch((0..N).map(|_| bundle())).for_each(|e| {
                black_box(e);
            });
        })
    });
    group.bench_function("shipyard", |b| {
        b.iter(|| {
            let mut world = shipyard::World::new();
            world.bulk_add_entity((0..N).map(|_| bundle())).for_each(|e| {
                black_box(e);
            });
        })
    });
    group.finish();
}

fn simple_insert_loop(c: &mut Criterion) {
    let mut group = c.benchmark_group("simple_insert_loop");
    group.bench_function("folio", |b| {
        b.iter(|| {
            let mut world = folio_archetype::World::new();
            for _ in 0..N {
                black_box(world.spawn(bundle()));
            }
        })
    });
    group.bench_function("bevy", |b| {
        b.iter(|| {
            let mut world = bevy_ecs::world::World::new();
            for _ in 0..N {
                black_box(world.spawn(bundle()).id());
            }
        })
    });
    group.bench_function("hecs", |b| {
        b.iter(|| {
            let mut world = hecs::World::new();
            for _ in 0..N {
                black_box(world.spawn(bundle()));
            }
        })
    });
    group.bench_function("shipyard", |b| {
        b.iter(|| {
            let world = shipyard::World::new();
            let (mut entities, mut t, mut p, mut r, mut v) = world
                .borrow::<(
                    EntitiesViewMut,
                    ViewMut<Transform>,
                    ViewMut<Position>,
                    ViewMut<Rotation>,
                    ViewMut<Velocity>,
                )>()
                .unwrap();
            for _ in 0..N {
                black_box(entities.add_entity((&mut t, &mut p, &mut r, &mut v), bundle()));
            }
        })
    });
    group.finish();
}

fn add_remove(c: &mut Criterion) {
    add_remove_group(c, "add_remove", B, folio_archetype::StorageType::Table, true);
}

fn add_remove_sparse(c: &mut Criterion) {
    add_remove_group(
        c,
        "add_remove_sparse",
        SparseB,
        folio_archetype::StorageType::SparseSet,
        false,
    );
}

/// One add_remove group: `make(0.0)` (a component type whose bevy storage is fixed by its
/// derive) inserted into and removed from every entity, folio storing it as `storage`; hecs,
/// which has only table storage, runs when `with_hecs`.
fn add_remove_group<T>(
    c: &mut Criterion,
    name: &str,
    make: fn(f32) -> T,
    storage: folio_archetype::StorageType,
    with_hecs: bool,
) where
    T: bevy_ecs::component::Component + shipyard::Component + Send + Sync + 'static,
{
    let mut group = c.benchmark_group(name);
    group.bench_function("folio", |b| {
        let mut world = folio_archetype::World::new();
        world.register_component::<T>(storage).unwrap();
        let entities: Vec<_> = (0..N).map(|_| world.spawn((A(0.0),))).collect();
        b.iter(|| {
            for &e in &entities {
                world.insert(e, (make(0.0),)).unwrap();
            }
            for &e in &entities {
                black_box(world.remove::<(T,)>(e));
            }
        })
    });
    group.bench_function("folio_batch", |b| {
        let mut world = folio_archetype::World::new();
        world.register_component::<T>(storage).unwrap();
        let entities: Vec<_> = (0..N).map(|_| world.spawn((A(0.0),))).collect();
        b.iter(|| {
            world.insert_batch(entities.iter().map(|&e| (e, (make(0.0),)))).unwrap();
            black_box(world.remove_batch::<(T,)>(entities.iter().copied()).unwrap());
        })
    });
    group.bench_function("bevy", |b| {
        let mut world = bevy_ecs::world::World::new();
        let entities: Vec<_> = (0..N).map(|_| world.spawn(A(0.0)).id()).collect();
        b.iter(|| {
            for &e in &entities {
                world.entity_mut(e).insert(make(0.0));
            }
            for &e in &entities {
                world.entity_mut(e).remove::<T>();
            }
        })
    });
    if with_hecs {
        group.bench_function("hecs", |b| {
            let mut world = hecs::World::new();
            let entities: Vec<_> = (0..N).map(|_| world.spawn((A(0.0),))).collect();
            b.iter(|| {
                for &e in &entities {
                    world.insert_one(e, make(0.0)).unwrap();
                }
                for &e in &entities {
                    black_box(world.remove_one::<T>(e).unwrap());
                }
            })
        });
    }
    group.bench_function("shipyard", |b| {
        let mut world = shipyard::World::new();
        let entities: Vec<_> = (0..N).map(|_| world.add_entity((A(0.0),))).collect();
        b.iter(|| {
            let mut vb = world.borrow::<ViewMut<T>>().unwrap();
            for &e in &entities {
                vb.add_component_unchecked(e, make(0.0));
            }
            for &e in &entities {
                black_box(vb.remove(e));
            }
        })
    });
    group.finish();
}

/// `ids` (a library's entities, in spawn order) in the seeded shuffled order of `lookup_100k`.
fn lookup_order<E: Copy>(ids: &[E]) -> Vec<E> {
    folio_benches::shuffled_ids(ids.len()).into_iter().map(|i| ids[i as usize]).collect()
}

fn lookup_100k(c: &mut Criterion) {
    let mut group = c.benchmark_group("lookup_100k");
    let values = || (0..LOOKUP).map(|i| (Val(i as i64),));

    let mut world = folio_archetype::World::new();
    let ids = lookup_order(&world.spawn_batch(values()));
    let mut query = world.query::<&Val>();
    group.bench_function("folio (QueryState::get)", |b| {
        b.iter(|| ids.iter().map(|&e| query.get(&world, e).unwrap().0).sum::<i64>())
    });
    group.bench_function("folio (World::get)", |b| {
        b.iter(|| ids.iter().map(|&e| world.get::<Val>(e).unwrap().0).sum::<i64>())
    });
    drop(world);

    let mut world = bevy_ecs::world::World::new();
    let ids = lookup_order(&world.spawn_batch(values()).collect::<Vec<_>>());
    let mut state = world.query::<&Val>();
    group.bench_function("bevy (World::get)", |b| {
        b.iter(|| ids.iter().map(|&e| world.get::<Val>(e).unwrap().0).sum::<i64>())
    });
    group.bench_function("bevy (Query::get)", |b| {
        b.iter(|| {
            let query = state.query(&world);
            ids.iter().map(|&e| query.get(e).unwrap().0).sum::<i64>()
        })
    });
    drop(world);

    let mut world = hecs::World::new();
    let ids = lookup_order(&world.spawn_batch(values()).collect::<Vec<_>>());
    group.bench_function("hecs (World::get)", |b| {
        b.iter(|| ids.iter().map(|&e| world.get::<&Val>(e).unwrap().0).sum::<i64>())
    });
    group.bench_function("hecs (query_one)", |b| {
        b.iter(|| {
            ids.iter()
                .map(|&e| {
                    let mut one = world.query_one::<&Val>(e);
                    one.get().unwrap().0
                })
                .sum::<i64>()
        })
    });
    group.bench_function("hecs (query_one_mut)", |b| {
        b.iter(|| ids.iter().map(|&e| world.query_one_mut::<&Val>(e).unwrap().0).sum::<i64>())
    });
    drop(world);

    let mut world = shipyard::World::new();
    let ids = lookup_order(&world.bulk_add_entity(values()).collect::<Vec<_>>());
    group.bench_function("shipyard (View::get)", |b| {
        b.iter(|| {
            let view = world.borrow::<View<Val>>().unwrap();
            ids.iter().map(|&e| (&view).get(e).unwrap().0).sum::<i64>()
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = folio_benches::criterion();
    targets = simple_insert, simple_insert_loop, add_remove, add_remove_sparse, lookup_100k
}
criterion_main!(benches);
