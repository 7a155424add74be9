//! The tests of [`VirtualPool`]: hole reuse, stable values, iteration, drops, and a property
//! test against a `HashMap` model.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::test_util::{Align64, Counter, MIRI, Tracked, expect_panic};

#[test]
fn insert_remove_reuses_holes_lifo() {
    let mut p = VirtualPool::new();
    let a = p.insert("a");
    let b = p.insert("b");
    let c = p.insert("c");
    assert_eq!((a, b, c), (0, 1, 2));
    assert_eq!(p.remove(b), Some("b"));
    assert_eq!(p.remove(b), None);
    assert_eq!(p.remove(a), Some("a"));
    assert_eq!(p.len(), 1);
    assert_eq!(p.insert("d"), a, "the most recent hole is filled first");
    assert_eq!(p.insert("e"), b);
    assert_eq!(p.insert("f"), 3);
    assert_eq!(p.get(c), Some(&"c"));
    assert_eq!(p.get(99), None);
}

#[test]
fn values_never_move_in_a_pool_of_fixed_capacity() {
    let mut p = VirtualPool::with_max_capacity(1 << 20);
    let first = p.insert(1u64);
    let addr = p.get(first).unwrap() as *const u64;
    let n = if MIRI { 2000 } else { 200_000 };
    for i in 0..n {
        let k = p.insert(i);
        if i % 3 == 0 {
            p.remove(k);
        }
    }
    assert_eq!(p.get(first).unwrap() as *const u64, addr);
}

#[test]
fn iteration_skips_holes() {
    let mut p = VirtualPool::new();
    for i in 0..1000u32 {
        p.insert(i);
    }
    for i in (0..1000).filter(|i| i % 7 != 0) {
        p.remove(i);
    }
    let live: Vec<usize> = p.iter().map(|(i, _)| i).collect();
    assert_eq!(live, (0..1000).filter(|i| i % 7 == 0).collect::<Vec<_>>());
    for (_, v) in p.iter_mut() {
        *v += 1;
    }
    assert!(p.iter().all(|(i, &v)| v as usize == i + 1));
}

#[test]
fn drops_only_live_slots_once() {
    let drops = Counter::default();
    let mut p = VirtualPool::new();
    for i in 0..100 {
        p.insert(Tracked::new(i, &drops));
    }
    for i in 0..50 {
        drop(p.remove(i * 2));
    }
    assert_eq!(drops.get(), 50);
    p.clear();
    assert_eq!(drops.get(), 100);
    for i in 0..10 {
        p.insert(Tracked::new(i, &drops));
    }
    drop(p);
    assert_eq!(drops.get(), 110);
}

#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
#[test]
fn a_panicking_drop_still_drops_the_rest_once() {
    let drops = Counter::default();
    let mut p = VirtualPool::new();
    for i in 0..200 {
        let t = if i == 70 { Tracked::panicking(i, &drops) } else { Tracked::new(i, &drops) };
        p.insert(t);
    }
    expect_panic(|| p.clear());
    assert_eq!(drops.get(), 200);
    assert!(p.is_empty());
    assert_eq!(p.iter().count(), 0);
}

#[test]
fn zst_and_over_aligned_values() {
    let mut z = VirtualPool::new();
    let k = z.insert(());
    z.insert(());
    assert_eq!(z.remove(k), Some(()));
    assert_eq!(z.len(), 1);
    let mut a = VirtualPool::new();
    for i in 0..100 {
        a.insert(Align64(i));
    }
    a.remove(5);
    assert!(
        a.iter().all(|(i, v)| v.0 == i as u64 && (v as *const Align64 as usize).is_multiple_of(64))
    );
}

#[test]
fn capacity_exhaustion_gives_the_value_back() {
    let mut p = VirtualPool::with_max_capacity(512);
    for i in 0..512 {
        p.insert(i);
    }
    let (value, err) = p.try_insert(512).unwrap_err();
    assert_eq!(value, 512);
    assert!(matches!(err, StorageError::CapacityExceeded { .. }), "{err}");
    p.remove(3);
    assert_eq!(p.insert(512), 3);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if MIRI { 4 } else { 256 }))]
    #[test]
    fn behaves_like_a_hashmap(ops in proptest::collection::vec((0u8..3, any::<u16>()), 0..if MIRI { 60 } else { 2000 })) {
        let mut model: HashMap<usize, u16> = HashMap::new();
        let mut pool = VirtualPool::new();
        for (kind, x) in ops {
            match kind {
                0 => {
                    let k = pool.insert(x);
                    prop_assert!(model.insert(k, x).is_none(), "index {} handed out twice", k);
                }
                1 => {
                    let k = x as usize % (pool.slot_count() + 1);
                    prop_assert_eq!(pool.remove(k), model.remove(&k));
                }
                _ => {
                    let k = x as usize % (pool.slot_count() + 1);
                    prop_assert_eq!(pool.get(k), model.get(&k));
                }
            }
            prop_assert_eq!(pool.len(), model.len());
        }
        let mut seen: Vec<(usize, u16)> = pool.iter().map(|(k, &v)| (k, v)).collect();
        let mut expected: Vec<(usize, u16)> = model.into_iter().collect();
        seen.sort();
        expected.sort();
        prop_assert_eq!(seen, expected);
    }
}
