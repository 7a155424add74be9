//! One-shot report of the world workloads criterion handles badly: `spawn_hitch`, `insert_10m`,
//! `remove_10m` and `many_archetypes`, for folio's `World` side by side with bevy_ecs, hecs and
//! shipyard (and a plain `Vec` where it is the floor).
//!
//! Run with `cargo run --release -p folio-benches --bin world_report [-- --reps N]`.
//!
//! Every (workload, library) case runs in a fresh process: the binary re-executes itself as
//! `world_report case <workload> <library>`, the child prints one line of `key=value` pairs and
//! the parent turns them into markdown tables. So each library starts from a clean heap and a
//! small RSS, and memory is measured the same way for all of them: resident-set growth read from
//! `/proc/self/statm` before and after the workload (plus the peak, `VmHWM` from
//! `/proc/self/status`, minus the RSS before). Each case runs `--reps` times (default 3) and the
//! tables give the median over the runs (for the hitch, the median and the worst of the runs).
//!
//! `many_archetypes` counts live heap bytes with a counting `#[global_allocator]` (a wrapper of
//! `System`, switched on only in that workload's child process, so the other workloads pay
//! nothing for it). folio keeps columns of up to 16 KiB in heap blocks, which the allocator
//! counts; a column only moves into its own virtual reservation past that, and those committed
//! pages are not heap, so they are added from `World::memory_stats` (tables whose reserved bytes
//! exceed their committed bytes hold a reservation; their committed bytes are added whole, an
//! upper bound that double-counts their heap columns). In this workload no table gets near
//! 16 KiB, and the report prints that figure so it can be checked.
//!
//! Orders are drawn from a seeded SplitMix64 written inline, so every library despawns the same
//! entities in the same order. `remove_10m` runs folio twice: one `World::despawn` at a time
//! (`folio`, the peers' way) and the whole shuffled list through `World::despawn_batch`
//! (`folio_batch`, what a game's buffered despawns get: a batch this large marks each table's
//! rows and sweeps the table once), and one at a time again in a world whose columns and metas
//! take transparent huge pages (`folio_huge`, `OsPagesWith::HUGE`: fewer TLB misses per random
//! despawn); the bar is checked for each.

#![allow(dead_code)] // The components are payload: written, never read back.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
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

// ----- workload types -----

/// The 40-byte transform of the seed workloads.
#[derive(Clone, Copy, Debug, Default, bevy_ecs::component::Component, shipyard::Component)]
#[repr(C)]
struct Transform {
    position: [f32; 3],
    orientation: [f32; 4],
    scale: [f32; 3],
}

const _: () = assert!(size_of::<Transform>() == 40);

impl Transform {
    #[inline]
    fn from_index(i: usize) -> Self {
        let f = i as f32;
        Self { position: [f, f + 1.0, f + 2.0], orientation: [0.0, 0.0, 0.0, 1.0], scale: [1.0; 3] }
    }
}

#[derive(Clone, Copy, Debug, Default, bevy_ecs::component::Component, shipyard::Component)]
struct Velocity([f32; 3]);

impl Velocity {
    #[inline]
    fn from_index(i: usize) -> Self {
        Self([i as f32, 0.5, -0.5])
    }
}

#[derive(Clone, Copy, Debug, bevy_ecs::component::Component, shipyard::Component)]
struct Data(u64);

macro_rules! markers {
    ($($m:ident),*) => {
        $(
            #[derive(Clone, Copy, Debug, bevy_ecs::component::Component, shipyard::Component)]
            struct $m;
        )*
    };
}
markers!(M0, M1, M2, M3, M4, M5, M6, M7, M8, M9, M10, M11, M12, M13, M14, M15);

/// Runs `$body` with `$m` bound to the marker number `$bit`.
macro_rules! with_marker {
    ($bit:expr, |$m:ident| $body:expr) => {
        match $bit {
            0 => {
                let $m = M0;
                $body
            }
            1 => {
                let $m = M1;
                $body
            }
            2 => {
                let $m = M2;
                $body
            }
            3 => {
                let $m = M3;
                $body
            }
            4 => {
                let $m = M4;
                $body
            }
            5 => {
                let $m = M5;
                $body
            }
            6 => {
                let $m = M6;
                $body
            }
            7 => {
                let $m = M7;
                $body
            }
            8 => {
                let $m = M8;
                $body
            }
            9 => {
                let $m = M9;
                $body
            }
            10 => {
                let $m = M10;
                $body
            }
            11 => {
                let $m = M11;
                $body
            }
            12 => {
                let $m = M12;
                $body
            }
            13 => {
                let $m = M13;
                $body
            }
            14 => {
                let $m = M14;
                $body
            }
            15 => {
                let $m = M15;
                $body
            }
            _ => unreachable!(),
        }
    };
}

// ----- workload sizes -----

const HITCH_N: usize = 2_000_000;
const TEN_MILLION: usize = 10_000_000;
const PAYLOAD_10M: usize = TEN_MILLION * size_of::<Transform>();
const ARCH_COMBOS: u64 = 20_000;
const ARCH_PER_COMBO: usize = 5;
const SEED: u64 = 0x5EED_F011_0000_0002;

const LIBS: [&str; 4] = ["folio", "bevy", "hecs", "shipyard"];
const PEERS: [&str; 3] = ["bevy", "hecs", "shipyard"];

// ----- helpers -----

/// SplitMix64: a seeded, reproducible source for the shuffles.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fisher–Yates shuffle.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
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

fn emit(out: Out) {
    let line: Vec<String> = out.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("{}", line.join(" "));
}

// ----- spawn_hitch -----

fn case_hitch(lib: &str) -> Out {
    let t0 = Instant::now();
    let mut times = match lib {
        "vec" => {
            let mut v = Vec::new();
            let t =
                time_each(HITCH_N, |i| v.push((Transform::from_index(i), Velocity::from_index(i))));
            black_box(&v);
            t
        }
        "folio" => {
            let mut w = folio_archetype::World::new();
            time_each(HITCH_N, |i| {
                black_box(w.spawn((Transform::from_index(i), Velocity::from_index(i))));
            })
        }
        "bevy" => {
            let mut w = bevy_ecs::world::World::new();
            time_each(HITCH_N, |i| {
                black_box(w.spawn((Transform::from_index(i), Velocity::from_index(i))).id());
            })
        }
        "hecs" => {
            let mut w = hecs::World::new();
            time_each(HITCH_N, |i| {
                black_box(w.spawn((Transform::from_index(i), Velocity::from_index(i))));
            })
        }
        "shipyard" => {
            let w = shipyard::World::new();
            let (mut e, mut t, mut v) =
                w.borrow::<(EntitiesViewMut, ViewMut<Transform>, ViewMut<Velocity>)>().unwrap();
            time_each(HITCH_N, |i| {
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

fn case_insert(lib: &str) -> Out {
    let mut extra = Vec::new();
    let (secs, before, after) = match lib {
        "vec" => {
            let mut v = Vec::new();
            let before = rss();
            let t0 = Instant::now();
            for i in 0..TEN_MILLION {
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
            for i in 0..TEN_MILLION {
                black_box(w.spawn((Transform::from_index(i),)));
            }
            let secs = t0.elapsed().as_secs_f64();
            let after = rss();
            let stats = w.memory_stats();
            extra.push(("committed_above_mb", (stats.committed as f64 - PAYLOAD_10M as f64) / 1e6));
            extra.push(("reserved_gb", stats.reserved as f64 / 1e9));
            (secs, before, after)
        }
        "bevy" => {
            let mut w = bevy_ecs::world::World::new();
            let before = rss();
            let t0 = Instant::now();
            for i in 0..TEN_MILLION {
                black_box(w.spawn((Transform::from_index(i),)).id());
            }
            (t0.elapsed().as_secs_f64(), before, rss())
        }
        "hecs" => {
            let mut w = hecs::World::new();
            let before = rss();
            let t0 = Instant::now();
            for i in 0..TEN_MILLION {
                black_box(w.spawn((Transform::from_index(i),)));
            }
            (t0.elapsed().as_secs_f64(), before, rss())
        }
        "shipyard" => {
            let w = shipyard::World::new();
            let (mut e, mut t) = w.borrow::<(EntitiesViewMut, ViewMut<Transform>)>().unwrap();
            let before = rss();
            let t0 = Instant::now();
            for i in 0..TEN_MILLION {
                black_box(e.add_entity(&mut t, Transform::from_index(i)));
            }
            (t0.elapsed().as_secs_f64(), before, rss())
        }
        _ => panic!("unknown library {lib}"),
    };
    let peak = peak_rss();
    let mut out = vec![
        ("time_ms", secs * 1e3),
        ("rss_above_mb", (after as f64 - before as f64 - PAYLOAD_10M as f64) / 1e6),
        ("peak_above_mb", (peak as f64 - before as f64 - PAYLOAD_10M as f64) / 1e6),
    ];
    out.extend(extra);
    out
}

// ----- remove_10m -----

fn shuffled<T>(mut v: Vec<T>) -> Vec<T> {
    SplitMix64(SEED).shuffle(&mut v);
    v
}

/// A world whose columns and metas take transparent huge pages past 8 MiB
/// (`OsPagesWith::HUGE`).
fn huge_world() -> folio_archetype::World {
    let source = std::sync::Arc::new(folio_storage::vm::OsPagesWith::HUGE);
    folio_archetype::World::with_storage(folio_storage::StorageConfig::new().with_source(source))
}

fn case_remove(lib: &str) -> Out {
    let secs = match lib {
        "folio" | "folio_huge" => {
            let mut w =
                if lib == "folio_huge" { huge_world() } else { folio_archetype::World::new() };
            let es = (0..TEN_MILLION).map(|i| w.spawn((Transform::from_index(i),))).collect();
            let es = shuffled(es);
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
            let es = (0..TEN_MILLION).map(|i| w.spawn((Transform::from_index(i),))).collect();
            let es: Vec<_> = shuffled(es);
            let t0 = Instant::now();
            assert_eq!(w.despawn_batch(es), TEN_MILLION);
            let secs = t0.elapsed().as_secs_f64();
            assert!(w.is_empty());
            secs
        }
        "bevy" => {
            let mut w = bevy_ecs::world::World::new();
            let es = (0..TEN_MILLION).map(|i| w.spawn((Transform::from_index(i),)).id()).collect();
            let es = shuffled(es);
            let t0 = Instant::now();
            for e in es {
                assert!(w.despawn(e));
            }
            t0.elapsed().as_secs_f64()
        }
        "hecs" => {
            let mut w = hecs::World::new();
            let es = (0..TEN_MILLION).map(|i| w.spawn((Transform::from_index(i),))).collect();
            let es = shuffled(es);
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
                (0..TEN_MILLION).map(|i| e.add_entity(&mut t, Transform::from_index(i))).collect()
            };
            let es = shuffled(es);
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

fn combo(k: u64) -> u64 {
    (k * 40503) & 0xFFFF
}

fn case_arch(lib: &str) -> Out {
    let heap0 = LIVE.load(Ordering::Relaxed);
    let rss0 = rss();
    let t0 = Instant::now();
    // Each arm builds the world and returns (archetype count, reservation bytes beyond the heap,
    // the world), the world boxed so it is measured before it drops.
    let (archetypes, reservation, world): (usize, usize, Box<dyn std::any::Any>) = match lib {
        "folio" => {
            let mut w = folio_archetype::World::new();
            for k in 1..=ARCH_COMBOS {
                let c = combo(k);
                for _ in 0..ARCH_PER_COMBO {
                    let e = w.spawn((Data(k),));
                    for bit in 0..16 {
                        if c >> bit & 1 == 1 {
                            with_marker!(bit, |m| w.insert(e, (m,)).unwrap());
                        }
                    }
                }
            }
            let stats = w.memory_stats();
            let reservation: usize =
                stats.tables.iter().filter(|t| t.reserved > t.committed).map(|t| t.committed).sum();
            (w.archetypes().len(), reservation, Box::new(w))
        }
        "bevy" => {
            let mut w = bevy_ecs::world::World::new();
            for k in 1..=ARCH_COMBOS {
                let c = combo(k);
                for _ in 0..ARCH_PER_COMBO {
                    let mut e = w.spawn((Data(k),));
                    for bit in 0..16 {
                        if c >> bit & 1 == 1 {
                            with_marker!(bit, |m| e.insert(m));
                        }
                    }
                }
            }
            (w.archetypes().len(), 0, Box::new(w))
        }
        "hecs" => {
            let mut w = hecs::World::new();
            for k in 1..=ARCH_COMBOS {
                let c = combo(k);
                for _ in 0..ARCH_PER_COMBO {
                    let e = w.spawn((Data(k),));
                    for bit in 0..16 {
                        if c >> bit & 1 == 1 {
                            with_marker!(bit, |m| w.insert_one(e, m).unwrap());
                        }
                    }
                }
            }
            let n = w.archetypes().len();
            (n, 0, Box::new(w))
        }
        "shipyard" => {
            let mut w = shipyard::World::new();
            for k in 1..=ARCH_COMBOS {
                let c = combo(k);
                for _ in 0..ARCH_PER_COMBO {
                    let e = w.add_entity((Data(k),));
                    for bit in 0..16 {
                        if c >> bit & 1 == 1 {
                            with_marker!(bit, |m| w.add_component(e, (m,)));
                        }
                    }
                }
            }
            (0, 0, Box::new(w))
        }
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
        ("bytes_per_archetype", if archetypes > 0 { total / archetypes as f64 } else { f64::NAN }),
        ("bytes_per_combo", total / ARCH_COMBOS as f64),
    ]
}

// ----- the parent -----

type Results = BTreeMap<String, f64>;

fn run_case(workload: &str, lib: &str) -> Option<Results> {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe).args(["case", workload, lib]).output().unwrap();
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
            .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
            .collect(),
    )
}

/// Runs the case `reps` times; returns, per key, all the values.
fn run_reps(workload: &str, lib: &str, reps: usize) -> BTreeMap<String, Vec<f64>> {
    let mut all: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for _ in 0..reps {
        if let Some(r) = run_case(workload, lib) {
            for (k, v) in r {
                all.entry(k).or_default().push(v);
            }
        }
    }
    all
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 }
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

fn med(r: &BTreeMap<String, BTreeMap<String, Vec<f64>>>, lib: &str, key: &str) -> f64 {
    r.get(lib).and_then(|m| m.get(key)).map_or(f64::NAN, |v| median(v))
}

fn worst(r: &BTreeMap<String, BTreeMap<String, Vec<f64>>>, lib: &str, key: &str) -> f64 {
    r.get(lib).and_then(|m| m.get(key)).map_or(f64::NAN, |v| max(v))
}

/// The peer with the smallest median of `key`, and that median.
fn best_peer(r: &BTreeMap<String, BTreeMap<String, Vec<f64>>>, key: &str) -> (&'static str, f64) {
    PEERS
        .iter()
        .map(|&p| (p, med(r, p, key)))
        .filter(|(_, v)| v.is_finite())
        .min_by(|a, b| a.1.partial_cmp(&b.1).unwrap())
        .unwrap_or(("none", f64::NAN))
}

fn verdict(ok: bool) -> &'static str {
    if ok { "**met**" } else { "**NOT met**" }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("case") {
        let (workload, lib) = (args[2].as_str(), args[3].as_str());
        let out = match workload {
            "hitch" => case_hitch(lib),
            "insert" => case_insert(lib),
            "remove" => case_remove(lib),
            "arch" => {
                COUNTING.store(true, Ordering::Relaxed);
                case_arch(lib)
            }
            _ => panic!("unknown workload {workload}"),
        };
        emit(out);
        return;
    }
    let reps: usize = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .map_or(3, |s| s.parse().unwrap());

    let mut all: BTreeMap<&str, BTreeMap<String, BTreeMap<String, Vec<f64>>>> = BTreeMap::new();
    for (workload, libs) in [
        ("hitch", &["vec", "folio", "bevy", "hecs", "shipyard"][..]),
        ("insert", &["vec", "folio", "bevy", "hecs", "shipyard"][..]),
        ("remove", &["folio", "folio_huge", "folio_batch", "bevy", "hecs", "shipyard"][..]),
        ("arch", &LIBS[..]),
    ] {
        for &lib in libs {
            eprintln!("running {workload} {lib} x{reps}");
            all.entry(workload).or_default().insert(lib.to_string(), run_reps(workload, lib, reps));
        }
    }

    println!("# world_report ({reps} runs per case, each in a fresh process; medians)\n");

    // spawn_hitch
    let r = &all["hitch"];
    println!("## spawn_hitch: 2,000,000 (Transform, Velocity) spawned one at a time\n");
    println!(
        "| contender | slowest spawn, median of runs (µs) | slowest, worst run (µs) | p99.99 (µs) | p99 (ns) | median (ns) | spawns > 1 ms (worst run) | sum of spawn times (ms) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for lib in ["vec", "folio", "bevy", "hecs", "shipyard"] {
        let name = if lib == "vec" { "Vec::push (floor)" } else { lib };
        println!(
            "| {name} | {:.1} | {:.1} | {:.2} | {:.0} | {:.0} | {:.0} | {:.1} |",
            med(r, lib, "max_ns") / 1e3,
            worst(r, lib, "max_ns") / 1e3,
            med(r, lib, "p9999_ns") / 1e3,
            med(r, lib, "p99_ns"),
            med(r, lib, "p50_ns"),
            worst(r, lib, "over_1ms"),
            med(r, lib, "sum_ms"),
        );
    }
    let (bp, bmax) = best_peer(r, "max_ns");
    let fmax = med(r, "folio", "max_ns");
    let fworst = worst(r, "folio", "max_ns");
    let vmax = med(r, "vec", "max_ns");
    println!();
    println!("- folio slowest / fastest peer's slowest ({bp}): {:.2}", fmax / bmax);
    println!(
        "- bar: no folio spawn over 1 ms (worst run's slowest {:.1} µs): {}",
        fworst / 1e3,
        verdict(fworst <= 1e6)
    );
    println!(
        "- bar: folio's slowest ≤ 2x Vec's slowest: {:.1} µs / {:.1} µs = {:.2}x: {}",
        fmax / 1e3,
        vmax / 1e3,
        fmax / vmax,
        verdict(fmax <= 2.0 * vmax)
    );
    println!();

    // insert_10m
    let r = &all["insert"];
    println!(
        "## insert_10m: 10,000,000 40-byte Transforms spawned one at a time, bundle (Transform,)\n"
    );
    println!(
        "| contender | time (ms) | / fastest peer | RSS growth above 400 MB payload (MB) | peak RSS above payload (MB) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    let (tp, tbest) = best_peer(r, "time_ms");
    for lib in ["vec", "folio", "bevy", "hecs", "shipyard"] {
        let name = if lib == "vec" { "Vec::push (reference)" } else { lib };
        println!(
            "| {name} | {:.0} | {:.2} | {:.1} | {:.1} |",
            med(r, lib, "time_ms"),
            med(r, lib, "time_ms") / tbest,
            med(r, lib, "rss_above_mb"),
            med(r, lib, "peak_above_mb"),
        );
    }
    let (mp, mbest) = best_peer(r, "rss_above_mb");
    let ft = med(r, "folio", "time_ms");
    let fm = med(r, "folio", "rss_above_mb");
    println!();
    println!(
        "- folio `memory_stats().committed - payload`: {:.2} MB (reserved address space {:.1} GB)",
        med(r, "folio", "committed_above_mb"),
        med(r, "folio", "reserved_gb")
    );
    println!(
        "- bar: folio time ≤ 0.5x fastest peer ({tp}): {:.0} / {:.0} ms = {:.2}x: {}",
        ft,
        tbest,
        ft / tbest,
        verdict(ft <= 0.5 * tbest)
    );
    println!(
        "- bar: folio memory above payload ≤ 0.7x leanest peer ({mp}): {:.1} / {:.1} MB = {:.2}x: {}",
        fm,
        mbest,
        fm / mbest,
        verdict(fm <= 0.7 * mbest)
    );
    println!();

    // remove_10m
    let r = &all["remove"];
    println!("## remove_10m: 10,000,000 (Transform,) despawned in one seeded random order\n");
    println!("| contender | time (ms) | / fastest peer |");
    println!("| --- | ---: | ---: |");
    let (rp, rbest) = best_peer(r, "time_ms");
    for lib in ["folio", "folio_huge", "folio_batch", "bevy", "hecs", "shipyard"] {
        let name = match lib {
            "folio_batch" => "folio (`despawn_batch`)",
            "folio_huge" => "folio (huge pages)",
            _ => lib,
        };
        println!(
            "| {name} | {:.0} | {:.2} |",
            med(r, lib, "time_ms"),
            med(r, lib, "time_ms") / rbest
        );
    }
    println!();
    for (lib, how) in [
        ("folio", "one `despawn` at a time"),
        ("folio_huge", "one `despawn` at a time, huge pages"),
        ("folio_batch", "`despawn_batch`"),
    ] {
        let fr = med(r, lib, "time_ms");
        println!(
            "- bar: folio ({how}) ≤ 0.5x fastest peer ({rp}): {:.0} / {:.0} ms = {:.2}x: {}",
            fr,
            rbest,
            fr / rbest,
            verdict(fr <= 0.5 * rbest)
        );
    }
    println!();

    // many_archetypes
    let r = &all["arch"];
    println!(
        "## many_archetypes: 20,000 marker combinations x 5 entities, built by spawn (Data,) + insert each marker\n"
    );
    println!(
        "| contender | build (ms) | archetypes at the end | live heap growth (MB) | folio reservation commits (MB) | RSS growth (MB) | bytes per archetype | bytes per combination |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for lib in LIBS {
        println!(
            "| {lib} | {:.0} | {:.0} | {:.2} | {:.2} | {:.1} | {:.0} | {:.0} |",
            med(r, lib, "time_ms"),
            med(r, lib, "archetypes"),
            med(r, lib, "heap_mb"),
            med(r, lib, "reservation_mb"),
            med(r, lib, "rss_mb"),
            med(r, lib, "bytes_per_archetype"),
            med(r, lib, "bytes_per_combo"),
        );
    }
    let fa = med(r, "folio", "bytes_per_archetype");
    let ba = med(r, "bevy", "bytes_per_archetype");
    let (ap, abest) = best_peer(r, "time_ms");
    println!();
    println!("- build time folio / fastest peer ({ap}): {:.2}", med(r, "folio", "time_ms") / abest);
    println!(
        "- bar: folio memory per near-empty archetype within 2x of bevy's: {:.0} / {:.0} B = {:.2}x: {}",
        fa,
        ba,
        fa / ba,
        verdict(fa <= 2.0 * ba)
    );
}
