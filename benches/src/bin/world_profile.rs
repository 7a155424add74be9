//! A fixed amount of folio `World` work per workload, for profilers: `perf stat`, `perf record`
//! and `valgrind --tool=callgrind` count the same work on every run (criterion's adaptive
//! iteration counts would not), so instruction counts compare before and after a change.
//!
//! `cargo run --profile bench -p folio-benches --bin world_profile -- <workload> [iterations]`,
//! with workload one of `simple_insert` (fresh world + `spawn_batch` of 10,000 4-component
//! bundles), `insert_loop` (the same with one `spawn` each), `add_remove` (insert then remove `B`
//! on 10,000 entities with `A`), `add_remove_sparse` (the same with `B` in a sparse set),
//! `add_remove_batch` and `add_remove_sparse_batch` (both with `insert_batch`/`remove_batch`),
//! `spawn_1m` (1,000,000 one-component spawns) and `despawn_1m` (1,000,000 spawned, then despawned
//! in a seeded random order), `commands_spawn` and `commands_spawn_batch` (10,000 `(Position,
//! Velocity)` entities through a command buffer, one `spawn` command each or one `spawn_batch`,
//! applied to a fresh world), `spawn_despawn` (`N` `(Position, Velocity)` spawned and despawned one
//! at a time in one world) and its forms with component hooks: `spawn_despawn_hooked` (`Position`
//! has an `on_add` and an `on_remove` hook that count in a resource) and
//! `spawn_despawn_hooks_elsewhere` (the same hooks on a component these entities do not have: the
//! cost of the hooked path for entities without hooks).
//!
//! `--small-reserve` anywhere on the line gives each world 64 MiB reservations instead of the
//! default (terabytes of address space), which valgrind cannot map:
//! `valgrind --tool=callgrind target/release/world_profile add_remove_sparse 10 --small-reserve`.
#![allow(dead_code)] // The components are payload: written, never read back.

use std::hint::black_box;

use folio_archetype::{StorageConfig, StorageType, World};

const N: usize = 10_000;

#[derive(Clone, Copy)]
struct Transform([[f32; 4]; 4]);
#[derive(Clone, Copy)]
struct Position([f32; 3]);
#[derive(Clone, Copy)]
struct Rotation([f32; 3]);
#[derive(Clone, Copy)]
struct Velocity([f32; 3]);
#[derive(Clone, Copy)]
struct A(f32);
#[derive(Clone, Copy)]
struct B(f32);
#[derive(Clone, Copy)]
struct Small([f32; 10]);

fn bundle() -> (Transform, Position, Rotation, Velocity) {
    (
        Transform([[1.0; 4]; 4]),
        Position([1.0, 0.0, 0.0]),
        Rotation([0.0, 1.0, 0.0]),
        Velocity([0.0, 0.0, 1.0]),
    )
}

/// A world as the workloads use it: the default, or with small reservations under
/// `--small-reserve` (for valgrind).
fn new_world() -> World {
    if std::env::args().any(|a| a == "--small-reserve") {
        World::with_storage(StorageConfig::new().with_reserve_bytes(64 << 20))
    } else {
        World::new()
    }
}

/// Inserts then removes `B`, stored as `storage`, on `N` entities with `A`, `iters` times.
fn add_remove(storage: StorageType, iters: usize) {
    let mut world = new_world();
    world.register_component::<B>(storage).unwrap();
    let entities: Vec<_> = (0..N).map(|_| world.spawn((A(0.0),))).collect();
    for _ in 0..iters {
        for &e in &entities {
            world.insert(e, (B(0.0),)).unwrap();
        }
        for &e in &entities {
            black_box(world.remove::<(B,)>(e));
        }
    }
}

/// `N` `(Position, Velocity)` entities spawned through a command buffer (one `spawn` command
/// each, or one `spawn_batch`) into a fresh world, `iters` times.
fn commands_spawn(iters: usize, batch: bool) {
    use folio_schedule::{CommandQueue, CommandStats, Commands};
    let mut queue = CommandQueue::default();
    let mut stats = CommandStats::default();
    for _ in 0..iters {
        let mut world = new_world();
        let mut commands = Commands::new(&mut queue, &world);
        if batch {
            commands.spawn_batch((0..N).map(|i| (Position([i as f32; 3]), Velocity([1.0; 3]))));
        } else {
            for i in 0..N {
                black_box(commands.spawn((Position([i as f32; 3]), Velocity([1.0; 3]))));
            }
        }
        queue.apply(&mut world, &mut stats);
        world.flush();
        assert_eq!(world.len(), N);
    }
}

/// Counted by the hooks of `spawn_despawn_hooked`.
#[derive(Default)]
struct HookCalls(u64);

fn count_call(world: &mut folio_archetype::DeferredWorld, _: folio_archetype::Entity) {
    world.resource_mut::<HookCalls>().unwrap().0 += 1;
}

/// Where the hooks go in [`spawn_despawn`].
#[derive(Clone, Copy, PartialEq)]
enum Hooks {
    None,
    OnPosition,
    Elsewhere,
}

/// `N` `(Position, Velocity)` spawned one at a time, then despawned one at a time in spawn
/// order, `iters` times in one world, with `hooks` (an `on_add` and an `on_remove` that count).
fn spawn_despawn(iters: usize, hooks: Hooks) {
    let mut world = new_world();
    world.insert_resource(HookCalls::default());
    let counting = folio_archetype::ComponentHooks::new().on_add(count_call).on_remove(count_call);
    match hooks {
        Hooks::None => {}
        Hooks::OnPosition => drop(world.set_hooks::<Position>(counting)),
        Hooks::Elsewhere => drop(world.set_hooks::<A>(counting)),
    }
    let mut es = Vec::with_capacity(N);
    for _ in 0..iters {
        es.extend((0..N).map(|i| world.spawn((Position([i as f32; 3]), Velocity([1.0; 3])))));
        for e in es.drain(..) {
            world.despawn(e).unwrap();
        }
    }
    let calls = world.resource::<HookCalls>().unwrap().0;
    let want = if hooks == Hooks::OnPosition { 2 * N * iters } else { 0 };
    assert_eq!(calls, want as u64);
}

/// [`add_remove`] with one `insert_batch` and one `remove_batch` per pass.
fn add_remove_batch(storage: StorageType, iters: usize) {
    let mut world = new_world();
    world.register_component::<B>(storage).unwrap();
    let entities: Vec<_> = (0..N).map(|_| world.spawn((A(0.0),))).collect();
    for _ in 0..iters {
        world.insert_batch(entities.iter().map(|&e| (e, (B(0.0),)))).unwrap();
        black_box(world.remove_batch::<(B,)>(entities.iter().copied()).unwrap());
    }
}

fn main() {
    // The workload and the iterations, wherever `--small-reserve` is.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let workload = args.first().map_or("simple_insert", String::as_str);
    let iters: usize = args.get(1).map_or(100, |s| s.parse().unwrap());
    match workload {
        "simple_insert" => {
            for _ in 0..iters {
                let mut world = new_world();
                black_box(world.spawn_batch((0..N).map(|_| bundle())));
            }
        }
        "insert_loop" => {
            for _ in 0..iters {
                let mut world = new_world();
                for _ in 0..N {
                    black_box(world.spawn(bundle()));
                }
            }
        }
        "add_remove" => add_remove(StorageType::Table, iters),
        "add_remove_sparse" => add_remove(StorageType::SparseSet, iters),
        "add_remove_batch" => add_remove_batch(StorageType::Table, iters),
        "add_remove_sparse_batch" => add_remove_batch(StorageType::SparseSet, iters),
        "spawn_1m" => {
            for _ in 0..iters {
                let mut world = new_world();
                for i in 0..1_000_000 {
                    black_box(world.spawn((Small([i as f32; 10]),)));
                }
            }
        }
        "despawn_1m" => {
            let mut world = new_world();
            let mut es: Vec<_> =
                (0..1_000_000).map(|i| world.spawn((Small([i as f32; 10]),))).collect();
            let mut state = 0x9E37_79B9_7F4A_7C15_u64;
            for i in (1..es.len()).rev() {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                es.swap(i, (z % (i as u64 + 1)) as usize);
            }
            for e in es {
                world.despawn(e).unwrap();
            }
        }
        "commands_spawn" => commands_spawn(iters, false),
        "commands_spawn_batch" => commands_spawn(iters, true),
        "spawn_despawn" => spawn_despawn(iters, Hooks::None),
        "spawn_despawn_hooked" => spawn_despawn(iters, Hooks::OnPosition),
        "spawn_despawn_hooks_elsewhere" => spawn_despawn(iters, Hooks::Elsewhere),
        other => panic!("unknown workload {other}"),
    }
}
