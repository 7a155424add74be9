//! Storage benchmarks of issue 2: `insert_10m`, `remove_10m` and `handle_map`.
//!
//! `insert_10m` runs `VirtualVec::new` (`OsPages`: 4 KiB pages, commits past 1 MiB prefaulted) next
//! to `VirtualVec` with huge pages (`OsPagesWith::HUGE`), `VirtualVec` as it was before
//! (`OsPagesWith::PLAIN`), `Vec::new` and `Vec::with_capacity`.
//!
//! Every group takes 10 samples with short measurement times, so the whole file runs in a few
//! minutes on a 2-core machine; the 10M groups use flat sampling (one iteration per sample),
//! because a single iteration already takes a sizeable fraction of a second. Drops are never
//! timed. `scripts/bench-table` prints the results as markdown tables with the ratios that
//! matter (the world-level `insert_10m` and `despawn_10m` of `scripts/perf-report` are measured
//! by `world_report`).
#![allow(missing_docs)] // `criterion_group!` / `criterion_main!` generate undocumented items.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, SamplingMode, criterion_group, criterion_main};
use folio_benches::{SplitMix64, SwapRemoveVec, TEN_MILLION, Transform, shuffled_ids};
use folio_storage::vm::{DEFAULT_RESERVE_BYTES, OsPagesWith};
use folio_storage::{HandleMap, VirtualPool, VirtualVec};

/// Items in the `handle_map` group.
const HANDLE_MAP_LEN: usize = 100_000;

fn insert_10m(c: &mut Criterion) {
    let mut group = c.benchmark_group("insert_10m");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    group.bench_function("VirtualVec::new", |b| {
        b.iter_with_large_drop(|| {
            let mut v = VirtualVec::new();
            for i in 0..TEN_MILLION {
                v.push(Transform::from_index(i));
            }
            v
        })
    });
    // The default reservation and step on other page sources: huge pages, and `VirtualVec` as it
    // was before prefaulting.
    for (name, source) in [
        ("VirtualVec (huge pages)", OsPagesWith::HUGE),
        ("VirtualVec (before: not prefaulted)", OsPagesWith::PLAIN),
    ] {
        group.bench_function(name, |b| {
            b.iter_with_large_drop(|| {
                let max_len = DEFAULT_RESERVE_BYTES / size_of::<Transform>();
                let mut v = VirtualVec::with_source(max_len, Arc::new(source));
                for i in 0..TEN_MILLION {
                    v.push(Transform::from_index(i));
                }
                v
            })
        });
    }
    group.bench_function("Vec::new", |b| {
        b.iter_with_large_drop(|| {
            let mut v = Vec::new();
            for i in 0..TEN_MILLION {
                v.push(Transform::from_index(i));
            }
            v
        })
    });
    group.bench_function("Vec::with_capacity", |b| {
        b.iter_with_large_drop(|| {
            let mut v = Vec::with_capacity(TEN_MILLION);
            for i in 0..TEN_MILLION {
                v.push(Transform::from_index(i));
            }
            v
        })
    });
    group.finish();
}

fn remove_10m(c: &mut Criterion) {
    let order = shuffled_ids(TEN_MILLION);
    let mut group = c.benchmark_group("remove_10m");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    group.bench_function("VirtualPool (freelist)", |b| {
        b.iter_batched(
            || {
                let mut pool = VirtualPool::new();
                for i in 0..TEN_MILLION {
                    pool.insert(Transform::from_index(i));
                }
                pool
            },
            |mut pool| {
                let mut sum = 0.0f32;
                for &id in &order {
                    sum += pool.remove(id as usize).map_or(0.0, |t| t.position[0]);
                }
                black_box(sum);
                pool
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("Vec (swap_remove)", |b| {
        b.iter_batched(
            || {
                let mut dense = Vec::with_capacity(TEN_MILLION);
                for i in 0..TEN_MILLION {
                    dense.push(Transform::from_index(i));
                }
                SwapRemoveVec::from_values(dense)
            },
            |mut v| {
                let mut sum = 0.0f32;
                for &id in &order {
                    sum += v.remove(id).map_or(0.0, |t| t.position[0]);
                }
                black_box(sum);
                v
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn filled_map() -> HandleMap<Transform> {
    let mut map = HandleMap::new();
    for i in 0..HANDLE_MAP_LEN {
        map.insert(Transform::from_index(i));
    }
    map
}

fn handle_map(c: &mut Criterion) {
    let mut group = c.benchmark_group("handle_map");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("create", |b| b.iter_with_large_drop(filled_map));

    let map = filled_map();
    group.bench_function("iterate", |b| {
        b.iter(|| map.iter().map(|(_, t)| t.position[0]).sum::<f32>())
    });
    group.bench_function("iterate_values", |b| {
        b.iter(|| map.values().iter().map(|t| t.position[0]).sum::<f32>())
    });

    let mut handles: Vec<_> = map.iter().map(|(handle, _)| handle).collect();
    SplitMix64::new(folio_benches::SEED).shuffle(&mut handles);
    group.bench_function("lookup", |b| {
        b.iter(|| handles.iter().map(|&h| map.get(h).map_or(0.0, |t| t.position[0])).sum::<f32>())
    });
    drop(map);

    group.bench_function("clear", |b| {
        b.iter_batched(
            filled_map,
            |mut map| {
                map.clear();
                map
            },
            BatchSize::NumIterations(32),
        )
    });
    group.finish();
}

criterion_group!(storage, insert_10m, remove_10m, handle_map);
criterion_main!(storage);
