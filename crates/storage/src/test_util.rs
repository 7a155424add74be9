//! Values for tests: drop counting, drops that panic, over-aligned types.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A shared drop counter (`Send + Sync`, as components must be).
#[derive(Debug, Clone, Default)]
pub(crate) struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Counts its drops in a shared counter; panics on drop when `panic_on_drop` is set.
#[derive(Debug)]
pub(crate) struct Tracked {
    pub(crate) value: u64,
    pub(crate) drops: Counter,
    pub(crate) panic_on_drop: bool,
}

impl Tracked {
    pub(crate) fn new(value: u64, drops: &Counter) -> Self {
        Self { value, drops: drops.clone(), panic_on_drop: false }
    }

    pub(crate) fn panicking(value: u64, drops: &Counter) -> Self {
        Self { value, drops: drops.clone(), panic_on_drop: true }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.0.fetch_add(1, Ordering::SeqCst);
        if self.panic_on_drop && !std::thread::panicking() {
            panic!("Tracked({}) panics on drop", self.value);
        }
    }
}

/// A 64-byte aligned value.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[repr(align(64))]
pub(crate) struct Align64(pub(crate) u64);

/// A page-aligned value, larger than nothing but its alignment.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[repr(align(4096))]
pub(crate) struct Align4096(pub(crate) u64);

/// A value aligned past a page (two 4 KiB pages).
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(align(8192))]
pub(crate) struct Align8192(pub(crate) u64);

/// A value larger than a page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Big(pub(crate) [u64; 700]);

/// Runs `f`, expecting it to panic.
pub(crate) fn expect_panic(f: impl FnOnce()) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    assert!(result.is_err(), "expected a panic");
}

/// Is this run under miri (which is slow: keep loops short)?
pub(crate) const MIRI: bool = cfg!(miri);
