//! The model-based random-operations test of the whole framework (see
//! `tests/support/ops_model.rs` for the operations and the checks made after each one).
//!
//! `model_ops` runs seeded sequences (10,000 of 50 to 170 operations, over a million
//! operations, by default; three of 20 under miri) on all cores and prints how many it ran. On a
//! divergence it shrinks the failing sequence and panics with the seed and the shrunk
//! operations. Environment:
//! - `FOLIO_MODEL_CASES=n`: run `n` sequences instead.
//! - `FOLIO_MODEL_SEED=s`: run only seed `s` (and print its operations).
//! - `FOLIO_MODEL_THREADS=n`: on `n` threads.
//! - `FOLIO_MODEL_INPUT=path`: run only the fuzz input at `path` (a crash the fuzz target
//!   saved, say), print its operations, and shrink them if they fail.
//!
//! `fuzz_decoder` feeds random bytes through the fuzz target's decoder, so `cargo test` runs
//! that path too.

#[path = "support/ops_model.rs"]
mod ops_model;

use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use ops_model::{Op, Rng, ops_from_bytes, run_ops, seeded_ops};

/// Sequences per run by default.
const CASES: u64 = if cfg!(miri) { 3 } else { 10_000 };

/// The operations of sequence `seed` (cut to 20 under miri).
fn sequence(seed: u64) -> Vec<Op> {
    let mut ops = seeded_ops(seed);
    if cfg!(miri) {
        ops.truncate(20);
    }
    ops
}

fn env(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(value.parse().unwrap_or_else(|_| panic!("{name}={value} is not a number")))
}

/// The panic message of running `ops`, if they fail.
fn failure(ops: &[Op]) -> Option<String> {
    catch_unwind(AssertUnwindSafe(|| run_ops(ops))).err().map(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default()
    })
}

/// Drops operations from a failing sequence while it still fails.
fn shrink(mut ops: Vec<Op>) -> Vec<Op> {
    let mut i = ops.len();
    while i > 0 {
        i -= 1;
        let mut fewer = ops.clone();
        fewer.remove(i);
        if failure(&fewer).is_some() {
            ops = fewer;
        }
    }
    ops
}

fn quiet_panics() {
    // The shrinking panics many times on this thread: keep those quiet.
    let me = std::thread::current().id();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != me {
            hook(info);
        }
    }));
}

/// Shrinks failing `ops` and panics with them; `what` names the sequence.
fn report_ops(what: &str, ops: Vec<Op>) -> ! {
    quiet_panics();
    let message = failure(&ops).unwrap_or_else(|| "(passed when run again)".into());
    let shrunk = shrink(ops);
    let again = failure(&shrunk).unwrap_or_default();
    drop(std::panic::take_hook()); // back to the default hook, for the panic below
    panic!("{what} diverged: {message}\nshrunk to {} ops ({again}):\n{shrunk:#?}", shrunk.len());
}

fn report(seed: u64) -> ! {
    report_ops(&format!("seed {seed} (rerun with FOLIO_MODEL_SEED={seed})"), sequence(seed))
}

#[test]
fn model_ops() {
    if let Ok(path) = std::env::var("FOLIO_MODEL_INPUT") {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let ops = ops_from_bytes(&bytes);
        println!("{path}: {ops:#?}");
        if failure(&ops).is_some() {
            report_ops(&path, ops);
        }
        return;
    }
    if let Some(seed) = env("FOLIO_MODEL_SEED") {
        let ops = sequence(seed);
        println!("seed {seed}: {ops:#?}");
        if failure(&ops).is_some() {
            report(seed);
        }
        return;
    }
    let cases = env("FOLIO_MODEL_CASES").unwrap_or(CASES);
    let threads = env("FOLIO_MODEL_THREADS").map_or_else(
        || if cfg!(miri) { 1 } else { std::thread::available_parallelism().map_or(1, |n| n.get()) },
        |n| n.max(1) as usize,
    );
    let start = Instant::now();
    let next = AtomicU64::new(0);
    let ops = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let failing = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    while !failed.load(Ordering::Relaxed) {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= cases {
                            break;
                        }
                        let seq = sequence(seed);
                        if failure(&seq).is_some() {
                            failed.store(true, Ordering::Relaxed);
                            return Some(seed);
                        }
                        ops.fetch_add(seq.len() as u64, Ordering::Relaxed);
                    }
                    None
                })
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().expect("workers catch panics")).min()
    });
    if let Some(seed) = failing {
        report(seed);
    }
    let ops = ops.into_inner();
    // Straight to stderr, past the test harness's capture, so every run shows it.
    let summary = format!(
        "model_ops: {cases} sequences, {ops} operations, {:.1} s on {threads} threads\n",
        start.elapsed().as_secs_f64()
    );
    std::io::stderr().write_all(summary.as_bytes()).expect("stderr");
    if cases >= CASES && !cfg!(miri) {
        assert!(ops >= 1_000_000, "the default run covers a million operations");
    }
}

#[test]
fn fuzz_decoder() {
    let mut rng = Rng::new(0xF0_110);
    let (inputs, max_len) = if cfg!(miri) { (1, 80) } else { (200, 600) };
    for _ in 0..inputs {
        let len = rng.below(max_len) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let ops = ops_from_bytes(&bytes);
        if let Some(message) = failure(&ops) {
            panic!("fuzz input {bytes:?} diverged: {message}\n{ops:#?}");
        }
    }
}
