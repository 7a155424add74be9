//! Runs one contender of the `simple_iter` or `frag_iter` query bench a fixed number of times, so
//! that instruction counts can settle close calls on a noisy shared machine:
//!
//! ```text
//! cargo build --profile bench -p folio-benches --bin query_report
//! for n in 0 200; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n \
//!     target/release/query_report simple_iter folio_each $n
//! done
//! # instructions per run = (Ir of /tmp/cg.200 - Ir of /tmp/cg.0) / 200 (`callgrind_annotate`)
//! ```
//!
//! The setup (spawning) is the same in both runs, so the difference is the timed work alone. The
//! workloads and per-entity routines are those of `benches/benches/query.rs`.
#![allow(dead_code)] // The components are payload: written, never read back.

use std::hint::black_box;

use folio_query::WorldQueryExt;
use shipyard::{IntoIter, View, ViewMut};

const SIMPLE: usize = 10_000;
const FRAG: usize = 20;

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Transform([[f32; 4]; 4]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Position([f32; 3]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Rotation([f32; 3]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Velocity([f32; 3]);

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct Data(f32);

fn simple_bundle() -> (Transform, Position, Rotation, Velocity) {
    (
        Transform([[0.0; 4]; 4]),
        Position([1.0, 0.0, 0.0]),
        Rotation([0.0, 1.0, 0.0]),
        Velocity([0.0, 0.0, 1.0]),
    )
}

#[inline(always)]
fn integrate(p: &mut Position, v: &Velocity) {
    p.0[0] += v.0[0];
    p.0[1] += v.0[1];
    p.0[2] += v.0[2];
}

#[inline(always)]
fn double(d: &mut Data) {
    d.0 *= 2.0;
}

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

fn simple_iter(lib: &str, runs: usize) {
    match lib {
        "folio_iter" | "folio_each" => {
            let mut world = folio_archetype::World::new();
            world.spawn_batch((0..SIMPLE).map(|_| simple_bundle()));
            let mut query = world.query::<(&Velocity, &mut Position)>();
            for _ in 0..runs {
                if lib == "folio_iter" {
                    for (v, mut p) in query.iter_mut(&mut world) {
                        integrate(&mut p, v);
                    }
                } else {
                    query.for_each_mut(&mut world, |(v, mut p)| integrate(&mut p, v));
                }
            }
            black_box(&mut world);
        }
        "bevy" => {
            let mut world = bevy_ecs::world::World::new();
            world.spawn_batch((0..SIMPLE).map(|_| simple_bundle()));
            let mut query = world.query::<(&Velocity, &mut Position)>();
            for _ in 0..runs {
                for (v, mut p) in query.iter_mut(&mut world) {
                    integrate(&mut p, v);
                }
            }
            black_box(&mut world);
        }
        "hecs" => {
            let mut world = hecs::World::new();
            world.spawn_batch((0..SIMPLE).map(|_| simple_bundle()));
            for _ in 0..runs {
                for (v, p) in world.query_mut::<(&Velocity, &mut Position)>() {
                    integrate(p, v);
                }
            }
            black_box(&mut world);
        }
        "shipyard" => {
            let mut world = shipyard::World::new();
            world.bulk_add_entity((0..SIMPLE).map(|_| simple_bundle()));
            for _ in 0..runs {
                world.run(|v: View<Velocity>, mut p: ViewMut<Position>| {
                    for (v, p) in (&v, &mut p).iter() {
                        integrate(p, v);
                    }
                });
            }
            black_box(&mut world);
        }
        "plain" => {
            let (_, mut pos, _, vel): (
                Vec<Transform>,
                Vec<Position>,
                Vec<Rotation>,
                Vec<Velocity>,
            ) = (0..SIMPLE).map(|_| simple_bundle()).collect();
            for _ in 0..runs {
                for (p, v) in black_box(&mut pos[..]).iter_mut().zip(black_box(&vel[..])) {
                    integrate(p, v);
                }
            }
            black_box(&mut pos);
        }
        _ => panic!("unknown contender {lib}"),
    }
}

fn frag_iter(lib: &str, runs: usize) {
    match lib {
        "folio_iter" | "folio_each" => {
            let mut world = folio_archetype::World::new();
            macro_rules! spawn {
                ($t:ident) => {
                    world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
                };
            }
            fragments!(spawn);
            let mut query = world.query::<&mut Data>();
            for _ in 0..runs {
                if lib == "folio_iter" {
                    for mut d in query.iter_mut(&mut world) {
                        double(&mut d);
                    }
                } else {
                    query.for_each_mut(&mut world, |mut d| double(&mut d));
                }
            }
            black_box(&mut world);
        }
        "bevy" => {
            let mut world = bevy_ecs::world::World::new();
            macro_rules! spawn {
                ($t:ident) => {
                    world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
                };
            }
            fragments!(spawn);
            let mut query = world.query::<&mut Data>();
            for _ in 0..runs {
                for mut d in query.iter_mut(&mut world) {
                    double(&mut d);
                }
            }
            black_box(&mut world);
        }
        "hecs" => {
            let mut world = hecs::World::new();
            macro_rules! spawn {
                ($t:ident) => {
                    world.spawn_batch((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
                };
            }
            fragments!(spawn);
            for _ in 0..runs {
                for d in world.query_mut::<&mut Data>() {
                    double(d);
                }
            }
            black_box(&mut world);
        }
        "shipyard" => {
            let mut world = shipyard::World::new();
            macro_rules! spawn {
                ($t:ident) => {
                    world.bulk_add_entity((0..FRAG).map(|_| ($t(0.0), Data(1.0))));
                };
            }
            fragments!(spawn);
            for _ in 0..runs {
                world.run(|mut data: ViewMut<Data>| {
                    for d in (&mut data).iter() {
                        double(d);
                    }
                });
            }
            black_box(&mut world);
        }
        "plain" => {
            let mut columns: Vec<Vec<Data>> = (0..26).map(|_| vec![Data(1.0); FRAG]).collect();
            for _ in 0..runs {
                for column in black_box(&mut columns[..]) {
                    for d in column {
                        double(d);
                    }
                }
            }
            black_box(&mut columns);
        }
        _ => panic!("unknown contender {lib}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workload, lib, runs] = &args[..] else {
        eprintln!(
            "usage: query_report <simple_iter|frag_iter> \
             <folio_iter|folio_each|bevy|hecs|shipyard|plain> <runs>"
        );
        std::process::exit(2);
    };
    let runs: usize = runs.parse().expect("runs: a number");
    match workload.as_str() {
        "simple_iter" => simple_iter(lib, runs),
        "frag_iter" => frag_iter(lib, runs),
        _ => panic!("unknown workload {workload}"),
    }
}
