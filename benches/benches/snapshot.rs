//! World snapshots for rollback: one snapshot plus one restore of 100,000 entities ×
//! (Position, Velocity, Health), all `Copy`, side by side with what bounds it and what a peer
//! offers:
//!
//! - `folio`: [`World::snapshot_into`](folio_archetype::World::snapshot_into) a warm snapshot
//!   (its buffers reused, as a rollback ring reuses them), then
//!   [`World::restore`](folio_archetype::World::restore) from it. Each copies every column's used
//!   bytes (data, added and changed ticks, the entity column) and the entity metas.
//! - `memcpy`: a plain `copy_from_slice` of the same number of bytes
//!   ([`Snapshot::copied_bytes`](folio_archetype::Snapshot::copied_bytes)) out of one warm buffer
//!   into another and back: the floor of any snapshot of those bytes.
//! - `hecs`: hecs has no snapshot; the closest is cloning every entity's components out through
//!   a query into reused vectors, then clearing the world and spawning them back at their ids
//!   with `spawn_column_batch_at`, its fastest bulk path (a restore must also undo spawns and
//!   despawns, so it cannot only write values back).
//! - `hecs_in_place`: for reference, the values cloned out and written back into the same
//!   entities through `query_mut`, which only undoes value changes (no spawn, despawn or
//!   structural change), so it is no restore.
//!
//!
//! The `snapshot_incremental` group takes one snapshot per frame of the same world after a
//! frame that wrote 1% of the rows' `Position` (every 100th row, through a query's
//! `&mut Position`, the normal write path; the write is not timed, only the snapshot):
//!
//! - `full`: [`World::snapshot_into`](folio_archetype::World::snapshot_into) a warm snapshot
//!   told to copy the whole world ([`Snapshot::copy_whole_next`](folio_archetype::Snapshot)).
//! - `incremental`: the same call into the snapshot of the frame before, which copies only the
//!   rows written since (and scans the changed ticks to find them).
//! - `ring_8`: [`SnapshotRing::save`](folio_archetype::SnapshotRing) into a ring of 8 frames:
//!   each slot is refilled with what changed in the last 8 frames (8% of the rows).
//!
//! Sample sizes and times come from `folio_benches::criterion()` and the command line.
#![allow(missing_docs)] // `criterion_group!` / `criterion_main!` generate undocumented items.
#![allow(dead_code)] // The components are payload: copied by the benches, never read back.

use std::hint::black_box;

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use folio_query::WorldQueryExt;

/// Entities in the world.
const N: usize = 100_000;

#[derive(Clone, Copy)]
struct Position([f32; 3]);

#[derive(Clone, Copy)]
struct Velocity([f32; 3]);

#[derive(Clone, Copy)]
struct Health(u32);

fn bundle(i: usize) -> (Position, Velocity, Health) {
    let f = i as f32;
    (Position([f, 0.0, -f]), Velocity([1.0, 0.5, 0.0]), Health(i as u32))
}

fn snapshot(c: &mut Criterion) {
    let mut group = c.benchmark_group("snapshot");

    let mut world = folio_archetype::World::new();
    world.register_snapshot_copy::<Position>();
    world.register_snapshot_copy::<Velocity>();
    world.register_snapshot_copy::<Health>();
    world.spawn_batch((0..N).map(bundle));
    let mut snap = world.snapshot().expect("registered");
    let bytes = snap.copied_bytes();
    group.bench_function("folio", |b| {
        b.iter(|| {
            world.snapshot_into(&mut snap).unwrap();
            world.restore(black_box(&snap)).unwrap();
        })
    });

    let mut a = vec![1u8; bytes];
    let mut b_buf = vec![2u8; bytes];
    group.bench_function("memcpy", |b| {
        b.iter(|| {
            b_buf.copy_from_slice(black_box(&a));
            a.copy_from_slice(black_box(&b_buf));
        })
    });
    drop((a, b_buf));

    let mut hecs_world = hecs::World::new();
    hecs_world.spawn_batch((0..N).map(bundle)).for_each(drop);
    let (mut ids, mut ps, mut vs, mut hs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    group.bench_function("hecs", |b| {
        b.iter(|| {
            ids.clear();
            ps.clear();
            vs.clear();
            hs.clear();
            for (e, p, v, h) in
                hecs_world.query_mut::<(hecs::Entity, &Position, &Velocity, &Health)>().into_iter()
            {
                ids.push(e);
                ps.push(*p);
                vs.push(*v);
                hs.push(*h);
            }
            hecs_world.clear();
            let mut ty = hecs::ColumnBatchType::new();
            ty.add::<Position>().add::<Velocity>().add::<Health>();
            let batch = ty.into_batch(ids.len() as u32);
            let mut wp = batch.writer::<Position>().unwrap();
            ps.iter().for_each(|&p| assert!(wp.push(p).is_ok()));
            let mut wv = batch.writer::<Velocity>().unwrap();
            vs.iter().for_each(|&v| assert!(wv.push(v).is_ok()));
            let mut wh = batch.writer::<Health>().unwrap();
            hs.iter().for_each(|&h| assert!(wh.push(h).is_ok()));
            drop((wp, wv, wh));
            hecs_world.spawn_column_batch_at(&ids, batch.build().unwrap());
        })
    });
    assert_eq!(hecs_world.len() as usize, N);

    let mut saved = Vec::new();
    group.bench_function("hecs_in_place", |b| {
        b.iter(|| {
            saved.clear();
            saved.extend(
                hecs_world
                    .query_mut::<(&Position, &Velocity, &Health)>()
                    .into_iter()
                    .map(|(p, v, h)| (*p, *v, *h)),
            );
            for ((p, v, h), s) in hecs_world
                .query_mut::<(&mut Position, &mut Velocity, &mut Health)>()
                .into_iter()
                .zip(black_box(&saved))
            {
                (*p, *v, *h) = *s;
            }
        })
    });
    group.finish();
    println!("snapshot: {N} entities, {bytes} bytes copied each way");
}

/// A world of `N` entities with every type registered for snapshots.
fn snapshot_world() -> folio_archetype::World {
    let mut world = folio_archetype::World::new();
    world.register_snapshot_copy::<Position>();
    world.register_snapshot_copy::<Velocity>();
    world.register_snapshot_copy::<Health>();
    world.spawn_batch((0..N).map(bundle));
    world
}

/// One frame's writes: every 100th row's `Position`, through a query's `&mut Position` (the
/// other rows are visited and not written, so not marked changed).
fn write_one_percent(
    world: &mut folio_archetype::World,
    query: &mut folio_query::QueryState<&'static mut Position>,
    frame: usize,
) {
    for (i, mut p) in query.iter_mut(world).enumerate() {
        if i % 100 == frame % 100 {
            p.0[1] += 1.0;
        }
    }
}

fn snapshot_incremental(c: &mut Criterion) {
    let mut group = c.benchmark_group("snapshot_incremental");
    let mut world = snapshot_world();
    let mut query = world.query::<&mut Position>();
    let mut snap = world.snapshot().expect("registered");
    let mut frame = 0;
    // Times `take` only, after a frame of writes.
    let mut timed = |iters: u64, take: &mut dyn FnMut(&mut folio_archetype::World)| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            frame += 1;
            write_one_percent(&mut world, &mut query, frame);
            let start = Instant::now();
            take(&mut world);
            total += start.elapsed();
        }
        total
    };
    group.bench_function("full", |b| {
        b.iter_custom(|iters| {
            timed(iters, &mut |world| {
                snap.copy_whole_next();
                world.snapshot_into(black_box(&mut snap)).unwrap();
            })
        })
    });
    let full_bytes = snap.filled_bytes();
    group.bench_function("incremental", |b| {
        b.iter_custom(|iters| {
            timed(iters, &mut |world| world.snapshot_into(black_box(&mut snap)).unwrap())
        })
    });
    assert!(snap.is_incremental());
    let incremental_bytes = snap.filled_bytes();
    let mut ring = folio_archetype::SnapshotRing::new(8);
    group.bench_function("ring_8", |b| {
        b.iter_custom(|iters| timed(iters, &mut |world| ring.save(black_box(world)).unwrap()))
    });
    let ring_bytes = ring.get(0).map_or(0, |s| s.filled_bytes());
    group.finish();
    println!(
        "snapshot_incremental: {N} entities, 1% written per frame; bytes copied: full \
         {full_bytes}, incremental {incremental_bytes}, ring of 8 {ring_bytes}"
    );
}

criterion_group! {
    name = benches;
    config = folio_benches::criterion();
    targets = snapshot, snapshot_incremental
}
criterion_main!(benches);
