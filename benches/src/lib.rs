//! Shared helpers for folio benchmarks.
//!
//! The criterion benches in `benches/` and the report binaries in `src/bin/` share the workload
//! types and a seeded random source from here, so every run of every bench sees the same data.
//! The random source is a hand-written SplitMix64: the benches need reproducible shuffles, not
//! cryptographic quality, and it keeps the crate free of a `rand` dependency.
//!
//! `scripts/perf-report` runs the benches and the report binaries and writes
//! docs/PERFORMANCE.md from their output.

use std::sync::OnceLock;
use std::time::Duration;

pub mod churn;
pub mod many;

/// The criterion configuration of every bench file: 30 samples, 1 s of warm-up, 3 s of
/// measurement, no plots. It is applied before the command line, so `cargo bench -- --sample-size
/// 50 --measurement-time 5` (what `scripts/perf-report` passes) overrides it; a group that sets
/// its own sizes would not be overridden, so the groups the report runs set none.
pub fn criterion() -> criterion::Criterion {
    criterion::Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
}

/// A rayon pool of `threads` (1 or 2) threads, built once per size and process.
pub fn pool(threads: usize) -> &'static rayon::ThreadPool {
    static POOLS: [OnceLock<rayon::ThreadPool>; 2] = [OnceLock::new(), OnceLock::new()];
    assert!((1..=2).contains(&threads), "pools of 1 or 2 threads");
    POOLS[threads - 1].get_or_init(|| {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a rayon pool")
    })
}

/// bevy's compute task pool with `threads` threads, the size of the other libraries' rayon
/// pools. bevy's multi-threaded executor and `par_iter_mut` run on it; it can be sized only
/// once per process, so every caller asks for the same size.
pub fn init_bevy_pool(threads: usize) {
    let pool = bevy_tasks::ComputeTaskPool::get_or_init(|| {
        bevy_tasks::TaskPoolBuilder::new().num_threads(threads).build()
    });
    assert_eq!(pool.thread_num(), threads, "bevy's compute pool was built with another size");
}

/// Number of elements of the storage benches' `insert_10m` and `remove_10m` and of the world's
/// `insert_10m` and `despawn_10m`.
pub const TEN_MILLION: usize = 10_000_000;

/// The seed every shuffled order is drawn from, so all runs and all contenders see one order.
pub const SEED: u64 = 0x5EED_F011_0000_0002;

/// The 40-byte component of the storage workloads and of the world's `insert_10m`,
/// `despawn_10m` and `spawn_hitch`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, bevy_ecs::component::Component, shipyard::Component,
)]
#[repr(C)]
pub struct Transform {
    /// Where it is.
    pub position: [f32; 3],
    /// Which way it faces, as a quaternion.
    pub orientation: [f32; 4],
    /// How large it is along each axis.
    pub scale: [f32; 3],
}

const _: () = assert!(size_of::<Transform>() == 40);

impl Transform {
    /// A transform whose fields depend on `i`, so pushes write real data, not one repeated value.
    #[inline]
    pub fn from_index(i: usize) -> Self {
        let f = i as f32;
        Self {
            position: [f, f + 1.0, f + 2.0],
            orientation: [0.0, 0.0, 0.0, 1.0],
            scale: [1.0, 1.0, 1.0],
        }
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a tiny, fast, seeded generator.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (Lemire's multiply-shift; the bias is below 2^-32 for the bounds
    /// used here, which is irrelevant for a benchmark order). `bound` must be non-zero.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0, "below(0)");
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// `0..n` as `u32`s in a shuffled order drawn from [`SEED`].
pub fn shuffled_ids(n: usize) -> Vec<u32> {
    let n = u32::try_from(n).expect("ids fit in u32");
    let mut ids: Vec<u32> = (0..n).collect();
    SplitMix64::new(SEED).shuffle(&mut ids);
    ids
}

/// A dense `Vec` that removes by id with `swap_remove`, the way a real sparse-set container does:
/// `id_to_dense` finds an id's element, and after each `swap_remove` the element moved into the
/// hole gets its entry fixed through `dense_to_id`.
#[derive(Debug, Default)]
pub struct SwapRemoveVec<T> {
    /// The values, packed.
    dense: Vec<T>,
    /// `dense_to_id[d]` is the id of `dense[d]`.
    dense_to_id: Vec<u32>,
    /// `id_to_dense[id]` is the position of the id's value, or [`Self::ABSENT`].
    id_to_dense: Vec<u32>,
}

impl<T> SwapRemoveVec<T> {
    /// Marks an id with no value.
    pub const ABSENT: u32 = u32::MAX;

    /// A container holding `values`, the `i`-th under id `i`.
    pub fn from_values(dense: Vec<T>) -> Self {
        let n = u32::try_from(dense.len()).expect("ids fit in u32");
        Self { dense, dense_to_id: (0..n).collect(), id_to_dense: (0..n).collect() }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.dense.len()
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.dense.is_empty()
    }

    /// Removes and returns the value of `id`, moving the last value into its place.
    #[inline]
    pub fn remove(&mut self, id: u32) -> Option<T> {
        let slot = self.id_to_dense.get_mut(id as usize)?;
        let dense = *slot;
        if dense == Self::ABSENT {
            return None;
        }
        *slot = Self::ABSENT;
        let dense = dense as usize;
        let value = self.dense.swap_remove(dense);
        self.dense_to_id.swap_remove(dense);
        if let Some(&moved) = self.dense_to_id.get(dense) {
            self.id_to_dense[moved as usize] = dense as u32;
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_a_permutation() {
        let mut ids = shuffled_ids(1000);
        assert_ne!(ids, (0..1000).collect::<Vec<_>>());
        ids.sort_unstable();
        assert_eq!(ids, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn swap_remove_vec_removes_by_id() {
        let mut v = SwapRemoveVec::from_values((0..100u32).map(|i| i * 10).collect());
        for id in shuffled_ids(100) {
            assert_eq!(v.remove(id), Some(id * 10));
            assert_eq!(v.remove(id), None);
        }
        assert!(v.is_empty());
    }
}
