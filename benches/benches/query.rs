//! folio's queries (`folio-query`) side by side with bevy_ecs, hecs and shipyard on the three
//! iteration workloads of the public ecs_bench_suite (issue 4), each against a hand-written loop
//! over plain `Vec`s of the same data where that is the physical limit:
//!
//! - `simple_iter`: 10,000 entities of (Transform 4x4 f32, Position, Rotation, Velocity);
//!   `pos += vel` over (&Velocity, &mut Position). folio twice: a `for` loop over
//!   `QueryState::iter_mut` (external iteration, `next`) and `QueryState::for_each_mut`
//!   (internal iteration, `fold`). bevy through a `QueryState` and `iter_mut`; hecs through
//!   `World::query_mut`; shipyard through `World::run` with `(&View, &mut ViewMut).iter()`; each
//!   peer also with `Iterator::for_each` on the same iterator (`(for_each)`), which bevy and
//!   shipyard run through their own `fold`.
//! - `frag_iter`: 26 component types A..Z, 20 entities of each, every one also with `Data(f32)`;
//!   `Data *= 2` over all (`&mut Data`). The plain limit is 26 `Vec`s of 20. folio three times:
//!   `iter_mut` and `for_each_mut` with `Data` in the 26 tables (the default storage), and
//!   `iter_mut` and `for_each_mut` with `Data` registered as a sparse-set component, which is
//!   how shipyard stores every component: the query names only `Data`, so it walks `Data`'s set
//!   densely. The peers in a `for` loop and with `for_each`, as in `simple_iter`.
//! - `heavy_compute`: 1,000 entities of (Matrix4, Position, Rotation, Velocity); in parallel,
//!   invert each matrix 100 times (one `invert` function, `#[inline(never)]`, called the same way
//!   by every contender), then transform the position by it. folio through
//!   `QueryState::par_iter_mut` on a rayon pool of 1 thread and of 2 threads; bevy's
//!   `par_iter_mut` on its `ComputeTaskPool` built with 2 threads (the pool can be set only once
//!   per process); hecs has no parallel query, so its `iter_batched(64)` batches go through
//!   rayon's `par_bridge` (ecs_bench_suite's form); shipyard's `par_iter` on the 2-thread rayon
//!   pool; and the plain limit as rayon's `par_iter_mut` over zipped `Vec`s, on 2 threads.
//! - `many_archetypes`: the worlds of `folio_benches::many` (20,000 combinations of 16 marker
//!   components, 5 entities each, every entity with `Data(u64)`); one pass bumps `Data` on all
//!   100,000 entities. The worlds are built once, before the group's benches, and kept. folio
//!   through `iter_mut` and `for_each_mut`, bevy through `iter_mut` and `for_each`, hecs through
//!   `query_mut`, shipyard through `(&mut ViewMut<Data>).iter()` (one sparse set: no
//!   archetypes at all).
//!
//! Worlds and queries are built outside the timed routine; every routine leaves the world in a
//! state its next run can repeat (positions grow, data saturates at infinity, which costs the
//! same) and its results stay in memory that is read after the bench (`black_box`). The routine
//! each contender runs per entity is one shared function (`integrate`, `double`, `heavy`), so the
//! only difference is how each library gets to the data.
//!
//! Run with `cargo bench -p folio-benches --bench query`; `scripts/perf-report` runs it with the
//! other benches and writes the tables of docs/PERFORMANCE.md.
#![allow(missing_docs)] // `criterion_group!` / `criterion_main!` generate undocumented items.
#![allow(dead_code)] // The components are payload: written by the benches, never read back.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use folio_benches::many::{self, bump};
use folio_benches::pool;
use folio_query::WorldQueryExt;
use rayon::prelude::*;
use shipyard::{IntoIter, View, ViewMut};

/// Entities in `simple_iter`.
const SIMPLE: usize = 10_000;
/// Entities per type in `frag_iter`.
const FRAG: usize = 20;
/// Entities in `heavy_compute`.
const HEAVY: usize = 1_000;
/// Inversions per entity in `heavy_compute`.
const INVERSIONS: usize = 100;

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Transform([[f32; 4]; 4]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Matrix4([[f32; 4]; 4]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Position([f32; 3]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Rotation([f32; 3]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Velocity([f32; 3]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Data(f32);

fn identity() -> [[f32; 4]; 4] {
    let mut m = [[0.0; 4]; 4];
    for (i, row) in m.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    m
}

/// A rotation of 1.2 rad about x (ecs_bench_suite's matrix): invertible, and not the identity.
fn rotation_x() -> [[f32; 4]; 4] {
    let (s, c) = 1.2f32.sin_cos();
    [[1.0, 0.0, 0.0, 0.0], [0.0, c, s, 0.0], [0.0, -s, c, 0.0], [0.0, 0.0, 0.0, 1.0]]
}

fn simple_bundle() -> (Transform, Position, Rotation, Velocity) {
    (
        Transform(identity()),
        Position([1.0, 0.0, 0.0]),
        Rotation([0.0, 1.0, 0.0]),
        Velocity([0.0, 0.0, 1.0]),
    )
}

fn heavy_bundle() -> (Matrix4, Position, Rotation, Velocity) {
    (
        Matrix4(rotation_x()),
        Position([1.0, 0.0, 0.0]),
        Rotation([0.0, 1.0, 0.0]),
        Velocity([0.0, 0.0, 1.0]),
    )
}

/// `simple_iter`'s work for one entity.
#[inline(always)]
fn integrate(p: &mut Position, v: &Velocity) {
    p.0[0] += v.0[0];
    p.0[1] += v.0[1];
    p.0[2] += v.0[2];
}

/// `frag_iter`'s work for one entity.
#[inline(always)]
fn double(d: &mut Data) {
    d.0 *= 2.0;
}

/// The inverse of `m` by cofactors (`m` itself if singular, which the benches never hit).
#[inline(never)]
fn invert(m: &[[f32; 4]; 4]) -> [[f32; 4]; 4] {
    let a = |r: usize, c: usize| m[r][c];
    let s0 = a(0, 0) * a(1, 1) - a(1, 0) * a(0, 1);
    let s1 = a(0, 0) * a(1, 2) - a(1, 0) * a(0, 2);
    let s2 = a(0, 0) * a(1, 3) - a(1, 0) * a(0, 3);
    let s3 = a(0, 1) * a(1, 2) - a(1, 1) * a(0, 2);
    let s4 = a(0, 1) * a(1, 3) - a(1, 1) * a(0, 3);
    let s5 = a(0, 2) * a(1, 3) - a(1, 2) * a(0, 3);
    let c5 = a(2, 2) * a(3, 3) - a(3, 2) * a(2, 3);
    let c4 = a(2, 1) * a(3, 3) - a(3, 1) * a(2, 3);
    let c3 = a(2, 1) * a(3, 2) - a(3, 1) * a(2, 2);
    let c2 = a(2, 0) * a(3, 3) - a(3, 0) * a(2, 3);
    let c1 = a(2, 0) * a(3, 2) - a(3, 0) * a(2, 2);
    let c0 = a(2, 0) * a(3, 1) - a(3, 0) * a(2, 1);
    let det = s0 * c5 - s1 * c4 + s2 * c3 + s3 * c2 - s4 * c1 + s5 * c0;
    if det == 0.0 {
        return *m;
    }
    let inv = 1.0 / det;
    [
        [
            (a(1, 1) * c5 - a(1, 2) * c4 + a(1, 3) * c3) * inv,
            (-a(0, 1) * c5 + a(0, 2) * c4 - a(0, 3) * c3) * inv,
            (a(3, 1) * s5 - a(3, 2) * s4 + a(3, 3) * s3) * inv,
            (-a(2, 1) * s5 + a(2, 2) * s4 - a(2, 3) * s3) * inv,
        ],
        [
            (-a(1, 0) * c5 + a(1, 2) * c2 - a(1, 3) * c1) * inv,
            (a(0, 0) * c5 - a(0, 2) * c2 + a(0, 3) * c1) * inv,
            (-a(3, 0) * s5 + a(3, 2) * s2 - a(3, 3) * s1) * inv,
            (a(2, 0) * s5 - a(2, 2) * s2 + a(2, 3) * s1) * inv,
        ],
        [
            (a(1, 0) * c4 - a(1, 1) * c2 + a(1, 3) * c0) * inv,
            (-a(0, 0) * c4 + a(0, 1) * c2 - a(0, 3) * c0) * inv,
            (a(3, 0) * s4 - a(3, 1) * s2 + a(3, 3) * s0) * inv,
            (-a(2, 0) * s4 + a(2, 1) * s2 - a(2, 3) * s0) * inv,
        ],
        [
            (-a(1, 0) * c3 + a(1, 1) * c1 - a(1, 2) * c0) * inv,
            (a(0, 0) * c3 - a(0, 1) * c1 + a(0, 2) * c0) * inv,
            (-a(3, 0) * s3 + a(3, 1) * s1 - a(3, 2) * s0) * inv,
            (a(2, 0) * s3 - a(2, 1) * s1 + a(2, 2) * s0) * inv,
        ],
    ]
}

/// `heavy_compute`'s work for one entity: invert 100 times, then move the position by it.
#[inline(always)]
fn heavy(p: &mut Position, m: &mut Matrix4) {
    for _ in 0..INVERSIONS {
        m.0 = invert(&m.0);
    }
    let v = p.0;
    for (i, out) in p.0.iter_mut().enumerate() {
        *out = m.0[i][0] * v[0] + m.0[i][1] * v[1] + m.0[i][2] * v[2] + m.0[i][3];
    }
}

fn simple_iter(c: &mut Criterion) {
    let mut group = c.benchmark_group("simple_iter");
    group.bench_function("folio (iter_mut)", |b| {
        let mut world = folio_archetype::World::new();
        world.spawn_batch((0..SIMPLE).map(|_| simple_bundle()));
        let mut query = world.query::<(&Velocity, &mut Position)>();
        b.iter(|| {
            for (v, mut p) in query.iter_mut(&mut world) {
                integrate(&mut p, v);
            }
        });
        black_box(&mut world);
    });
    group.bench_function("folio (for_each_mut)", |b| {
        let mut world = folio_archetype::World::new();
        world.spawn_batch((0..SIMPLE).map(|_| simple_bundle()));
        let mut query = world.query::<(&Velocity, &mut Position)>();
        b.iter(|| query.for_each_mut(&mut world, |(v, mut p)| integrate(&mut p, v)));
        black_box(&mut world);
    });
    group.bench_function("bevy", |b| {
        let mut world = bevy_ecs::world::World::new();
        world.spawn_batch((0..SIMPLE).map(|_| simple_bundle()));
        let mut query = world.query::<(&Velocity, &mut Position)>();
        b.iter(|| {
            for (v, mut p) in query.iter_mut(&mut world) {
                integrate(&mut p, v);
            }
        });
        black_box(&mut world);
    });
    group.bench_function("bevy (for_each)", |b| {
        let mut world = bevy_ecs::world::World::new();
        world.spawn_batch((0..SIMPLE).map(|_| simple_bundle()));
        let mut query = world.query::<(&Velocity, &mut Position)>();
        b.iter(|| query.iter_mut(&mut world).for_each(|(v, mut p)| integrate(&mut p, v)));
        black_box(&mut world);
    });
    group.bench_function("hecs", |b| {
        let mut world = hecs::World::new();
        world.spawn_batch((0..SIMPLE).map(|_| simple_bundle()));
        b.iter(|| {
            for (v, p) in world.query_mut::<(&Velocity, &mut Position)>() {
                integrate(p, v);
            }
        });
        black_box(&mut world);
    });
    group.bench_function("hecs (for_each)", |b| {
        let mut world = hecs::World::new();
        world.spawn_batch((0..SIMPLE).map(|_| simple_bundle()));
        b.iter(|| {
            world
                .query_mut::<(&Velocity, &mut Position)>()
                .into_iter()
                .for_each(|(v, p)| integrate(p, v))
        });
        black_box(&mut world);
    });
    group.bench_function("shipyard", |b| {
        let mut world = shipyard::World::new();
        world.bulk_add_entity((0..SIMPLE).map(|_| simple_bundle()));
        b.iter(|| {
            world.run(|v: View<Velocity>, mut p: ViewMut<Position>| {
                for (v, p) in (&v, &mut p).iter() {
                    integrate(p, v);
                }
            })
        });
        black_box(&mut world);
    });
    group.bench_function("shipyard (for_each)", |b| {
        let mut world = shipyard::World::new();
        world.bulk_add_entity((0..SIMPLE).map(|_| simple_bundle()));
        b.iter(|| {
            world.run(|v: View<Velocity>, mut p: ViewMut<Position>| {
                (&v, &mut p).iter().for_each(|(v, p)| integrate(p, v))
            })
        });
        black_box(&mut world);
    });
    group.bench_function("plain Vec", |b| {
        let (_, mut pos, _, vel): (Vec<Transform>, Vec<Position>, Vec<Rotation>, Vec<Velocity>) =
            (0..SIMPLE).map(|_| simple_bundle()).collect();
        b.iter(|| {
            for (p, v) in black_box(&mut pos[..]).iter_mut().zip(black_box(&vel[..])) {
                integrate(p, v);
            }
        });
        black_box(&mut pos);
    });
    group.finish();
}

/// Calls `$m!(T)` for each of the 26 fragment types, which are declared here.
macro_rules! fragments {
    ($m:ident) => {
        $m!(A);
        $m!(B);
        $m!(C);
        $m!(D);
        $m!(E);
        $m!(F);
        $m!(G);
        $m!(H);
        $m!(I);
        $m!(J);
        $m!(K);
        $m!(L);
        $m!(M);
        $m!(N);
        $m!(O);
        $m!(P);
        $m!(Q);
        $m!(R);
        $m!(S);
        $m!(T);
        $m!(U);
        $m!(V);
        $m!(W);
        $m!(X);
        $m!(Y);
        $m!(Z);
    };
}

macro_rules! declare {
    ($t:ident) => {
        #[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
        struct $t(f32);
    };
}
fragments!(declare);

fn frag_iter(c: &mut Criterion) {
    let mut group = c.benchmark_group("frag_iter");
    group.bench_function("folio (iter_mut)", |b| {
        let mut world = folio_archetype::World::new();
        macro_rules! spawn {
            ($t:ident) => {
                world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        let mut query = world.query::<&mut Data>();
        b.iter(|| {
            for mut d in query.iter_mut(&mut world) {
                double(&mut d);
            }
        });
        black_box(&mut world);
    });
    group.bench_function("folio (for_each_mut)", |b| {
        let mut world = folio_archetype::World::new();
        macro_rules! spawn {
            ($t:ident) => {
                world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        let mut query = world.query::<&mut Data>();
        b.iter(|| query.for_each_mut(&mut world, |mut d| double(&mut d)));
        black_box(&mut world);
    });
    group.bench_function("folio (iter_mut, Data sparse)", |b| {
        let mut world = folio_archetype::World::new();
        world
            .register_component::<Data>(folio_archetype::StorageType::SparseSet)
            .expect("registered once");
        macro_rules! spawn {
            ($t:ident) => {
                world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        let mut query = world.query::<&mut Data>();
        assert!(query.matches().is_dense_sparse());
        b.iter(|| {
            for mut d in query.iter_mut(&mut world) {
                double(&mut d);
            }
        });
        black_box(&mut world);
    });
    group.bench_function("folio (for_each_mut, Data sparse)", |b| {
        let mut world = folio_archetype::World::new();
        world
            .register_component::<Data>(folio_archetype::StorageType::SparseSet)
            .expect("registered once");
        macro_rules! spawn {
            ($t:ident) => {
                world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        let mut query = world.query::<&mut Data>();
        assert!(query.matches().is_dense_sparse());
        b.iter(|| query.for_each_mut(&mut world, |mut d| double(&mut d)));
        black_box(&mut world);
    });
    group.bench_function("bevy", |b| {
        let mut world = bevy_ecs::world::World::new();
        macro_rules! spawn {
            ($t:ident) => {
                world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        let mut query = world.query::<&mut Data>();
        b.iter(|| {
            for mut d in query.iter_mut(&mut world) {
                double(&mut d);
            }
        });
        black_box(&mut world);
    });
    group.bench_function("bevy (for_each)", |b| {
        let mut world = bevy_ecs::world::World::new();
        macro_rules! spawn {
            ($t:ident) => {
                world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        let mut query = world.query::<&mut Data>();
        b.iter(|| query.iter_mut(&mut world).for_each(|mut d| double(&mut d)));
        black_box(&mut world);
    });
    group.bench_function("hecs", |b| {
        let mut world = hecs::World::new();
        macro_rules! spawn {
            ($t:ident) => {
                world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        b.iter(|| {
            for d in world.query_mut::<&mut Data>() {
                double(d);
            }
        });
        black_box(&mut world);
    });
    group.bench_function("hecs (for_each)", |b| {
        let mut world = hecs::World::new();
        macro_rules! spawn {
            ($t:ident) => {
                world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        b.iter(|| world.query_mut::<&mut Data>().into_iter().for_each(double));
        black_box(&mut world);
    });
    group.bench_function("shipyard", |b| {
        let mut world = shipyard::World::new();
        macro_rules! spawn {
            ($t:ident) => {
                world.bulk_add_entity((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        b.iter(|| {
            world.run(|mut data: ViewMut<Data>| {
                for d in (&mut data).iter() {
                    double(d);
                }
            })
        });
        black_box(&mut world);
    });
    group.bench_function("shipyard (for_each)", |b| {
        let mut world = shipyard::World::new();
        macro_rules! spawn {
            ($t:ident) => {
                world.bulk_add_entity((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
            };
        }
        fragments!(spawn);
        b.iter(|| world.run(|mut data: ViewMut<Data>| (&mut data).iter().for_each(double)));
        black_box(&mut world);
    });
    group.bench_function("plain Vec", |b| {
        let mut columns: Vec<Vec<Data>> = (0..26).map(|_| vec![Data(1.0); FRAG]).collect();
        b.iter(|| {
            for column in black_box(&mut columns[..]) {
                for d in column {
                    double(d);
                }
            }
        });
        black_box(&mut columns);
    });
    group.finish();
}

fn heavy_compute(c: &mut Criterion) {
    let mut group = c.benchmark_group("heavy_compute");
    for threads in [1, 2] {
        group.bench_function(format!("folio ({threads} thread{})", ["", "s"][threads - 1]), |b| {
            let mut world = folio_archetype::World::new();
            world.spawn_batch((0..HEAVY).map(|_| heavy_bundle()));
            let mut query = world.query::<(&mut Position, &mut Matrix4)>();
            let pool = pool(threads);
            b.iter(|| {
                pool.install(|| {
                    query.par_iter_mut(&mut world).for_each(|(mut p, mut m)| heavy(&mut p, &mut m))
                })
            });
            black_box(&mut world);
        });
    }
    group.bench_function("bevy (2 threads)", |b| {
        // bevy's `par_iter_mut` runs on its global compute pool, sized once per process.
        folio_benches::init_bevy_pool(2);
        let mut world = bevy_ecs::world::World::new();
        world.spawn_batch((0..HEAVY).map(|_| heavy_bundle()));
        let mut query = world.query::<(&mut Position, &mut Matrix4)>();
        b.iter(|| query.par_iter_mut(&mut world).for_each(|(mut p, mut m)| heavy(&mut p, &mut m)));
        black_box(&mut world);
    });
    group.bench_function("hecs (2 threads)", |b| {
        let mut world = hecs::World::new();
        world.spawn_batch((0..HEAVY).map(|_| heavy_bundle()));
        let pool = pool(2);
        b.iter(|| {
            pool.install(|| {
                world
                    .query::<(&mut Position, &mut Matrix4)>()
                    .iter_batched(64)
                    .par_bridge()
                    .for_each(|batch| {
                        for (p, m) in batch {
                            heavy(p, m);
                        }
                    })
            })
        });
        black_box(&mut world);
    });
    group.bench_function("shipyard (2 threads)", |b| {
        let mut world = shipyard::World::new();
        world.bulk_add_entity((0..HEAVY).map(|_| heavy_bundle()));
        let pool = pool(2);
        b.iter(|| {
            pool.install(|| {
                world.run(|mut p: ViewMut<Position>, mut m: ViewMut<Matrix4>| {
                    (&mut p, &mut m).par_iter().for_each(|(p, m)| heavy(p, m));
                })
            })
        });
        black_box(&mut world);
    });
    group.bench_function("plain Vec (2 threads)", |b| {
        let (mut mat, mut pos, _, _): (Vec<Matrix4>, Vec<Position>, Vec<Rotation>, Vec<Velocity>) =
            (0..HEAVY).map(|_| heavy_bundle()).collect();
        let pool = pool(2);
        b.iter(|| {
            pool.install(|| {
                pos.par_iter_mut().zip(mat.par_iter_mut()).for_each(|(p, m)| heavy(p, m));
            })
        });
        black_box((&mut pos, &mut mat));
    });
    group.finish();
}

fn many_archetypes(c: &mut Criterion) {
    // Each world is built on its first use, once (it takes seconds), and kept for the library's
    // benches; a filter that leaves the group out builds none.
    let mut group = c.benchmark_group("many_archetypes");
    let folio_world = || {
        let world = many::folio_world();
        let query = world.query::<&mut many::Data>();
        (world, query)
    };
    let mut folio = None;
    group.bench_function("folio (iter_mut)", |b| {
        let (world, query) = folio.get_or_insert_with(folio_world);
        b.iter(|| {
            for mut d in query.iter_mut(world) {
                bump(&mut d);
            }
        })
    });
    group.bench_function("folio (for_each_mut)", |b| {
        let (world, query) = folio.get_or_insert_with(folio_world);
        b.iter(|| query.for_each_mut(world, |mut d| bump(&mut d)))
    });
    drop(folio);

    let bevy_world = || {
        let mut world = many::bevy_world();
        let query = world.query::<&mut many::Data>();
        (world, query)
    };
    let mut bevy = None;
    group.bench_function("bevy", |b| {
        let (world, query) = bevy.get_or_insert_with(bevy_world);
        b.iter(|| {
            for mut d in query.iter_mut(world) {
                bump(&mut d);
            }
        })
    });
    group.bench_function("bevy (for_each)", |b| {
        let (world, query) = bevy.get_or_insert_with(bevy_world);
        b.iter(|| query.iter_mut(world).for_each(|mut d| bump(&mut d)))
    });
    drop(bevy);

    let mut hecs = None;
    group.bench_function("hecs", |b| {
        let world = hecs.get_or_insert_with(many::hecs_world);
        b.iter(|| {
            for d in world.query_mut::<&mut many::Data>() {
                bump(d);
            }
        })
    });
    drop(hecs);

    let mut shipyard = None;
    group.bench_function("shipyard", |b| {
        let world = shipyard.get_or_insert_with(many::shipyard_world);
        b.iter(|| {
            world.run(|mut data: ViewMut<many::Data>| {
                for d in (&mut data).iter() {
                    bump(d);
                }
            })
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = folio_benches::criterion();
    targets = simple_iter, frag_iter, heavy_compute, many_archetypes
}
criterion_main!(benches);
