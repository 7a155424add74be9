//! One-shot measurements of the world workloads criterion handles badly, for folio's `World`
//! side by side with bevy_ecs, hecs and shipyard (and a plain `Vec` where it is the floor):
//!
//! - `spawn_hitch`: 2,000,000 (Transform, Velocity) spawned one at a time, each spawn timed:
//!   the slowest, p99.99, p99 and median spawn, and how many took over 1 ms.
//! - `insert_10m`: 10,000,000 40-byte `Transform`s spawned one at a time, nothing reserved: the
//!   time, and the memory above the 400 MB payload (resident-set growth from
//!   `/proc/self/statm`, and the peak, `VmHWM` from `/proc/self/status`, minus the RSS before).
//! - `despawn_10m`: the same world, then every entity despawned in one seeded random order (the
//!   same entities in the same order for every library). folio three times: one
//!   `World::despawn` at a time (`folio`, the peers' way), the whole shuffled list through
//!   `World::despawn_batch` (`folio_batch`: a batch this large marks each table's rows and
//!   sweeps the table once), and one at a time in a world whose columns take transparent huge
//!   pages (`folio_huge`, `OsPagesWith::HUGE`: fewer TLB misses per random despawn).
//! - `many_archetypes`: the build of `folio_benches::many`'s world (20,000 marker combinations
//!   x 5 entities, each spawned with `Data` and given its markers one `insert` at a time): the
//!   time, the archetypes made, and the live heap bytes per archetype.
//!
//! Every (workload, library) case runs in a fresh process: the binary re-executes itself as
//! `world_report case <workload> <library> <scale>`, so each library starts from a clean heap
//! and a small RSS, and memory is measured the same way for all of them. Each case runs `--reps`
//! times (default 3); the parent prints one JSON object per run on stdout (for
//! `scripts/perf-report`, which takes the medians) and its progress on stderr.
//!
//! `many_archetypes` counts live heap bytes with a counting `#[global_allocator]` (a wrapper of
//! `System`, switched on only in that workload's child process, so the other workloads pay
//! nothing for it). folio keeps columns of up to 16 KiB in heap blocks, which the allocator
//! counts; a column only moves into its own virtual reservation past that, and those committed
//! pages are not heap, so they are added from `World::memory_stats` (tables whose reserved bytes
//! exceed their committed bytes hold a reservation; their committed bytes are added whole, an
//! upper bound). The output names that figure (`reservation_mb`) so it can be checked.
//!
//! Run with `cargo run --profile bench -p folio-benches --bin world_report -- [--reps N]
//! [--only WORKLOAD] [--small]`; `--small` divides the 10,000,000 and 2,000,000 entities by 10
//! (for checking the pipeline, not for figures).

#![allow(dead_code)] // The components are payload: written, never read back.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::Instant;

use shipyard::{AllStoragesViewMut, EntitiesViewMut, ViewMut};

// ----- counting allocator -----

/// Wraps `System`; while `COUNTING` is set, keeps the number of live heap bytes in `LIVE`.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method forwards to `System` with the same arguments, and only adds bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller.
        unsafe { System.dealloc(ptr, layout) };
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

use folio_benches::many;
use folio_benches::{Transform, shuffled_ids};

// ----- workload types -----

#[derive(Clone, Copy, Debug, Default, bevy_ecs::component::Component, shipyard::Component)]
struct Velocity([f32; 3]);

impl Velocity {
    #[inline]
    fn from_index(i: usize) -> Self {
        Self([i as f32, 0.5, -0.5])
    }
}

// ----- workload sizes -----

/// Spawns of `spawn_hitch` at full size.
const HITCH_N: usize = 2_000_000;
/// Entities of `insert_10m` and `despawn_10m` at full size.
const TEN_MILLION: usize = folio_benches::TEN_MILLION;

/// The workloads and, for each, its contenders.
const WORKLOADS: [(&str, &[&str]); 4] = [
    ("spawn_hitch", &["vec", "folio", "bevy", "hecs", "shipyard"]),
    ("insert_10m", &["vec", "folio", "bevy", "hecs", "shipyard"]),
    ("despawn_10m", &["folio", "folio_batch", "folio_huge", "bevy", "hecs", "shipyard"]),
    ("many_archetypes", &["folio", "bevy", "hecs", "shipyard"]),
];

// ----- helpers -----

/// `items` in the seeded shuffled order every library despawns in.
fn shuffled<T: Copy>(items: Vec<T>) -> Vec<T> {
    shuffled_ids(items.len()).into_iter().map(|i| items[i as usize]).collect()
}

fn page_size() -> usize {
    // SAFETY: getpagesize has no preconditions.
    let p = unsafe { getpagesize() };
    if p > 0 { p as usize } else { 4096 }
}

unsafe extern "C" {
    /// glibc's page size query.
    fn getpagesize() -> i32;
}

/// Resident bytes, from `/proc/self/statm`.
fn rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * page_size()
}

/// Peak resident bytes (`VmHWM`).
fn peak_rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    for line in s.lines() {
        if let Some(rest) = line.strip_prefix("VmHWM:") {
            let kb: usize = rest.trim().trim_end_matches("kB").trim().parse().unwrap();
            return kb * 1024;
        }
    }
    0
}

/// Calls `f(i)` for `i` in `0..n`, timing each call; returns the nanoseconds of each.
fn time_each(n: usize, mut f: impl FnMut(usize)) -> Vec<u64> {
    let mut times = vec![0u64; n];
    // Touch the buffer so its page faults fall outside the timed calls.
    for t in times.iter_mut() {
        *t = black_box(1);
    }
    for (i, slot) in times.iter_mut().enumerate() {
        let t0 = Instant::now();
        f(i);
        *slot = t0.elapsed().as_nanos() as u64;
    }
    times
}

type Out = Vec<(&'static str, f64)>;

// ----- spawn_hitch -----

fn case_hitch(lib: &str, n: usize) -> Out {
    let t0 = Instant::now();
    let mut times = match lib {
        "vec" => {
            let mut v = Vec::new();
            let t = time_each(n, |i| v.push((Transform::from_index(i), Velocity::from_index(i))));
            black_box(&v);
            t
        }
        "folio" => {
            let mut w = folio_archetype::World::new();
            time_each(n, |i| {
                black_box(w.spawn((Transform::from_index(i), Velocity::from_index(i))));
            })
        }
        "bevy" => {
            let mut w = bevy_ecs::world::World::new();
            time_each(n, |i| {
                black_box(w.spawn((Transform::from_index(i), Velocity::from_index(i))).id());
            })
        }
        "hecs" => {
            let mut w = hecs::World::new();
            time_each(n, |i| {
                black_box(w.spawn((Transform::from_index(i), Velocity::from_index(i))));
            })
        }
        "shipyard" => {
            let w = shipyard::World::new();
            let (mut e, mut t, mut v) =
                w.borrow::<(EntitiesViewMut, ViewMut<Transform>, ViewMut<Velocity>)>().unwrap();
            time_each(n, |i| {
                black_box(e.add_entity(
                    (&mut t, &mut v),
                    (Transform::from_index(i), Velocity::from_index(i)),
                ));
            })
        }
        _ => panic!("unknown library {lib}"),
    };
    let wall = t0.elapsed().as_secs_f64();
    let total: u64 = times.iter().sum();
    let over_1ms = times.iter().filter(|&&t| t > 1_000_000).count();
    times.sort_unstable();
    let q = |p: f64| times[((p * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1];
    vec![
        ("max_ns", times[times.len() - 1] as f64),
        ("p9999_ns", q(0.9999) as f64),
        ("p99_ns", q(0.99) as f64),
        ("p50_ns", q(0.5) as f64),
        ("sum_ms", total as f64 / 1e6),
        ("wall_ms", wall * 1e3),
        ("over_1ms", over_1ms as f64),
    ]
}

// ----- insert_10m -----

fn case_insert(lib: &str, n: usize) -> Out {
    let payload = (n * size_of::<Transform>()) as f64;
    let mut extra = Vec::new();
    let (secs, before, after) = match lib {
        "vec" => {
            let mut v = Vec::new();
            let before = rss();
            let t0 = Instant::now();
            for i in 0..n {
                v.push(Transform::from_index(i));
            }
            let secs = t0.elapsed().as_secs_f64();
            black_box(&v);
            (secs, before, rss())
        }
        "folio" => {
            let mut w = folio_archetype::World::new();
            let before = rss();
            let t0 = Instant::now();
            for i in 0..n {
                black_box(w.spawn((Transform::from_index(i),)));
            }
            let secs = t0.elapsed().as_secs_f64();
            let after = rss();
            let stats = w.memory_stats();
            extra.push(("committed_above_mb", (stats.committed as f64 - payload) / 1e6));
            extra.push(("reserved_gb", stats.reserved as f64 / 1e9));
            (secs, before, after)
        }
        "bevy" => {
            let mut w = bevy_ecs::world::World::new();
            let before = rss();
            let t0 = Instant::now();
            for i in 0..n {
                black_box(w.spawn((Transform::from_index(i),)).id());
            }
            (t0.elapsed().as_secs_f64(), before, rss())
        }
        "hecs" => {
            let mut w = hecs::World::new();
            let before = rss();
            let t0 = Instant::now();
            for i in 0..n {
                black_box(w.spawn((Transform::from_index(i),)));
            }
            (t0.elapsed().as_secs_f64(), before, rss())
        }
        "shipyard" => {
            let w = shipyard::World::new();
            let (mut e, mut t) = w.borrow::<(EntitiesViewMut, ViewMut<Transform>)>().unwrap();
            let before = rss();
            let t0 = Instant::now();
            for i in 0..n {
                black_box(e.add_entity(&mut t, Transform::from_index(i)));
            }
            (t0.elapsed().as_secs_f64(), before, rss())
        }
        _ => panic!("unknown library {lib}"),
    };
    let peak = peak_rss();
    let mut out = vec![
        ("time_ms", secs * 1e3),
        ("rss_above_mb", (after as f64 - before as f64 - payload) / 1e6),
        ("peak_above_mb", (peak as f64 - before as f64 - payload) / 1e6),
    ];
    out.extend(extra);
    out
}

// ----- despawn_10m -----

/// A world whose columns and metas take transparent huge pages past 8 MiB
/// (`OsPagesWith::HUGE`).
fn huge_world() -> folio_archetype::World {
    let source = std::sync::Arc::new(folio_storage::vm::OsPagesWith::HUGE);
    folio_archetype::World::with_storage(folio_storage::StorageConfig::new().with_source(source))
}

fn case_despawn(lib: &str, n: usize) -> Out {
    let secs = match lib {
        "folio" | "folio_huge" => {
            let mut w =
                if lib == "folio_huge" { huge_world() } else { folio_archetype::World::new() };
            let es = (0..n).map(|i| w.spawn((Transform::from_index(i),))).collect();
            let es: Vec<_> = shuffled(es);
            let t0 = Instant::now();
            for e in es {
                w.despawn(e).unwrap();
            }
            let secs = t0.elapsed().as_secs_f64();
            assert!(w.is_empty());
            secs
        }
        "folio_batch" => {
            let mut w = folio_archetype::World::new();
            let es = (0..n).map(|i| w.spawn((Transform::from_index(i),))).collect();
            let es: Vec<_> = shuffled(es);
            let t0 = Instant::now();
            assert_eq!(w.despawn_batch(es), n);
            let secs = t0.elapsed().as_secs_f64();
            assert!(w.is_empty());
            secs
        }
        "bevy" => {
            let mut w = bevy_ecs::world::World::new();
            let es = (0..n).map(|i| w.spawn((Transform::from_index(i),)).id()).collect();
            let es: Vec<_> = shuffled(es);
            let t0 = Instant::now();
            for e in es {
                assert!(w.despawn(e));
            }
            t0.elapsed().as_secs_f64()
        }
        "hecs" => {
            let mut w = hecs::World::new();
            let es = (0..n).map(|i| w.spawn((Transform::from_index(i),))).collect();
            let es: Vec<_> = shuffled(es);
            let t0 = Instant::now();
            for e in es {
                w.despawn(e).unwrap();
            }
            t0.elapsed().as_secs_f64()
        }
        "shipyard" => {
            let w = shipyard::World::new();
            let es = {
                let (mut e, mut t) = w.borrow::<(EntitiesViewMut, ViewMut<Transform>)>().unwrap();
                (0..n).map(|i| e.add_entity(&mut t, Transform::from_index(i))).collect()
            };
            let es: Vec<_> = shuffled(es);
            let mut all = w.borrow::<AllStoragesViewMut>().unwrap();
            let t0 = Instant::now();
            for e in es {
                assert!(all.delete_entity(e));
            }
            t0.elapsed().as_secs_f64()
        }
        _ => panic!("unknown library {lib}"),
    };
    vec![("time_ms", secs * 1e3)]
}

// ----- many_archetypes -----

fn case_arch(lib: &str) -> Out {
    let heap0 = LIVE.load(Ordering::Relaxed);
    let rss0 = rss();
    let t0 = Instant::now();
    // Each arm builds the world and returns (archetype count, reservation bytes beyond the heap,
    // the world), the world boxed so it is measured before it drops.
    let (archetypes, reservation, world): (usize, usize, Box<dyn std::any::Any>) = match lib {
        "folio" => {
            let w = many::folio_world();
            let stats = w.memory_stats();
            let reservation: usize =
                stats.tables.iter().filter(|t| t.reserved > t.committed).map(|t| t.committed).sum();
            (w.archetypes().len(), reservation, Box::new(w))
        }
        "bevy" => {
            let w = many::bevy_world();
            (w.archetypes().len(), 0, Box::new(w))
        }
        "hecs" => {
            let w = many::hecs_world();
            let n = w.archetypes().len();
            (n, 0, Box::new(w))
        }
        // shipyard has no archetypes: one sparse set per component.
        "shipyard" => (0, 0, Box::new(many::shipyard_world())),
        _ => panic!("unknown library {lib}"),
    };
    let secs = t0.elapsed().as_secs_f64();
    let heap = (LIVE.load(Ordering::Relaxed) - heap0) as f64;
    let rss_growth = rss() as f64 - rss0 as f64;
    let total = heap + reservation as f64;
    black_box(&world);
    vec![
        ("time_ms", secs * 1e3),
        ("archetypes", archetypes as f64),
        ("heap_mb", heap / 1e6),
        ("reservation_mb", reservation as f64 / 1e6),
        ("rss_mb", rss_growth / 1e6),
        ("bytes_per_archetype", if archetypes > 0 { total / archetypes as f64 } else { -1.0 }),
        ("bytes_per_combo", total / many::COMBOS as f64),
    ]
}

// ----- the parent -----

/// Runs one case in a fresh process; its `key=value` pairs, or `None` if it failed.
fn run_case(workload: &str, lib: &str, scale: usize) -> Option<Vec<(String, String)>> {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe).args(["case", workload, lib, &scale.to_string()]).output().unwrap();
    if !out.status.success() {
        eprintln!(
            "case {workload} {lib} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last()?;
    eprintln!("  {workload} {lib}: {line}");
    Some(
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("case") {
        let (workload, lib) = (args[2].as_str(), args[3].as_str());
        let scale: usize = args[4].parse().expect("a scale divisor");
        let (ten_m, hitch_n) = (TEN_MILLION / scale, HITCH_N / scale);
        let out = match workload {
            "spawn_hitch" => case_hitch(lib, hitch_n),
            "insert_10m" => case_insert(lib, ten_m),
            "despawn_10m" => case_despawn(lib, ten_m),
            "many_archetypes" => {
                COUNTING.store(true, Ordering::Relaxed);
                case_arch(lib)
            }
            _ => panic!("unknown workload {workload}"),
        };
        let line: Vec<String> = out.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("{}", line.join(" "));
        return;
    }
    let reps: usize = arg(&args, "--reps").map_or(3, |s| s.parse().expect("--reps N"));
    let only = arg(&args, "--only");
    let scale = if args.iter().any(|a| a == "--small") { 10 } else { 1 };
    for (workload, libs) in WORKLOADS {
        if only.is_some_and(|o| o != workload) {
            continue;
        }
        let entities = match workload {
            "spawn_hitch" => HITCH_N / scale,
            "many_archetypes" => many::COMBOS as usize * many::PER_COMBO,
            _ => TEN_MILLION / scale,
        };
        for rep in 0..reps {
            // Rotate the order of the libraries each repetition.
            for k in 0..libs.len() {
                let lib = libs[(k + rep) % libs.len()];
                let Some(values) = run_case(workload, lib, scale) else { continue };
                let fields: Vec<String> =
                    values.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                println!(
                    "{{\"workload\":\"{workload}\",\"lib\":\"{lib}\",\"rep\":{rep},\
                     \"entities\":{entities},{}}}",
                    fields.join(",")
                );
            }
        }
    }
}
