//! cargo-fuzz target: decodes the input into an operation sequence and runs it through the
//! model driver the property test uses (`tests/support/ops_model.rs`), which panics on any
//! divergence between the world and the model.
//!
//! ```sh
//! cargo +nightly fuzz run world_ops -- -max_total_time=60
//! ```
//!
//! Every ten seconds it prints how many inputs and operations it ran in this process.

#![no_main]

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/ops_model.rs"]
#[allow(dead_code, unused_imports)] // the seeded-sequence entry points serve the property test
mod ops_model;

static INPUTS: AtomicU64 = AtomicU64::new(0);
static OPS: AtomicU64 = AtomicU64::new(0);
static LAST_REPORT: Mutex<Option<Instant>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let ops = ops_model::ops_from_bytes(data);
    ops_model::run_ops(&ops);
    let inputs = INPUTS.fetch_add(1, Ordering::Relaxed) + 1;
    let total = OPS.fetch_add(ops.len() as u64, Ordering::Relaxed) + ops.len() as u64;
    let mut last = LAST_REPORT.lock().unwrap();
    let now = Instant::now();
    if last.is_none_or(|t| now.duration_since(t).as_secs() >= 10) {
        *last = Some(now);
        eprintln!("world_ops: {inputs} inputs, {total} operations");
    }
});
