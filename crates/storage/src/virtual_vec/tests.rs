//! The tests of [`VirtualVec`]: stable addresses, commit steps, huge pages, drops, layouts,
//! shrinking, refused commits, and a property test against `Vec`.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::test_util::{Align64, Align4096, Align8192, Big, Counter, MIRI, Tracked, expect_panic};
#[cfg(all(unix, not(target_family = "wasm")))]
use crate::vm::OsPagesWith;
use crate::vm::{FaultyPages, HUGE_PAGES_FROM, HeapPages, default_source};

#[test]
fn push_get_pop_swap_remove() {
    let mut v = VirtualVec::new();
    for i in 0..1000u32 {
        v.push(i);
    }
    assert_eq!(v.len(), 1000);
    assert_eq!(v[999], 999);
    assert_eq!(v.pop(), Some(999));
    assert_eq!(v.swap_remove(0), 0);
    assert_eq!(v[0], 998);
    assert_eq!(v.len(), 998);
    assert_eq!(v.iter().copied().max(), Some(998));
    v.as_mut_slice()[1] = 7;
    assert_eq!(v.get(1), Some(&7));
    assert_eq!(v.get(5000), None);
}

#[test]
fn addresses_never_change_on_push_with_a_fixed_capacity() {
    let n: u64 = if MIRI { 3000 } else { 1_000_000 };
    let mut v = VirtualVec::with_max_capacity(n as usize);
    v.push(0u64);
    let first = v.as_ptr();
    let mut tenth = None;
    for i in 1..n {
        v.push(i);
        if i == 10 {
            tenth = Some(&v[10] as *const u64);
        }
        if i % 4096 == 0 {
            assert_eq!(v.as_ptr(), first);
        }
    }
    assert_eq!(v.as_ptr(), first);
    assert_eq!(&v[10] as *const u64, tenth.unwrap());
}

#[test]
fn commit_grows_in_steps_with_bounded_waste() {
    // 24 MB, or what the default reservation holds where it is smaller (wasm).
    let n: usize = if MIRI { 5000 } else { 3_000_000.min(crate::vm::DEFAULT_RESERVE_BYTES / 8) };
    let mut v = VirtualVec::new();
    // Past the huge page threshold commits are whole huge pages (2 MiB) instead.
    let huge = default_source().huge_page_size().unwrap_or(0);
    for i in 0..n {
        v.push(i as u64);
        let used = v.len() * 8;
        let waste = v.committed_bytes() - used;
        let bound = if v.committed_bytes() > HUGE_PAGES_FROM { huge } else { 0 };
        assert!(waste <= bound.max(crate::COMMIT_STEP_MAX) + 4096, "waste {waste} at {i}");
    }
}

#[test]
fn a_near_empty_array_commits_one_page() {
    let mut v = VirtualVec::new();
    v.push(1u8);
    assert_eq!(v.committed_bytes(), 4096);
    let mut w = VirtualVec::with_source(1 << 16, Arc::new(HeapPages::new()));
    w.push(1u8);
    assert_eq!(w.committed_bytes(), 4096);
}

#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "miri cannot mmap, and this fills 24 MB")]
fn large_arrays_commit_whole_huge_pages_and_shrink_back() {
    let source: Arc<dyn crate::vm::PageSource> = Arc::new(OsPagesWith::HUGE);
    let Some(huge) = source.huge_page_size() else { return };
    let n = 3_000_000usize;
    let mut v = VirtualVec::with_source(1 << 24, source);
    v.push(0u64);
    let first = v.as_ptr();
    assert!(first.addr().is_multiple_of(huge), "a large reservation starts on a huge page");
    for i in 1..n {
        v.push(i as u64);
        let committed = v.committed_bytes();
        if committed > HUGE_PAGES_FROM {
            assert!(committed.is_multiple_of(huge), "{committed} at {i}");
        }
    }
    assert_eq!(v.as_ptr(), first);
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    // Past the threshold, shrinking keeps the huge page that holds the last element.
    v.truncate(HUGE_PAGES_FROM / 8 + 1);
    v.shrink_to_fit().unwrap();
    assert_eq!(v.committed_bytes(), HUGE_PAGES_FROM + huge);
    // Below it, whole small pages.
    v.truncate(10);
    v.shrink_to_fit().unwrap();
    assert_eq!(v.committed_bytes(), 4096);
    assert_eq!(v.as_slice(), &(0..10).collect::<Vec<_>>()[..]);
    v.extend(10..n as u64);
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
}

#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "miri cannot mmap, and this fills 24 MB")]
fn refused_huge_pages_fall_back_silently() {
    let source = Arc::new(FaultyPages::new(Arc::new(OsPagesWith::HUGE), 0));
    source.refuse_huge_pages(true);
    let mut v = VirtualVec::with_source(1 << 24, source.clone());
    for i in 0..3_000_000u64 {
        v.push(i);
    }
    assert!(v.committed_bytes() - v.len() * 8 <= crate::COMMIT_STEP_MAX);
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    // One refused advice at most (none if the OS has no huge pages at all), never asked again.
    assert!(source.huge_page_advice() <= 1);
    let mut w = VirtualVec::with_source(1 << 30, Arc::new(OsPagesWith::DEFAULT));
    for i in 0..3_000_000u64 {
        w.push(i);
    }
    assert_eq!(w.committed_bytes() % (1 << 20), 0, "1 MiB steps, as without huge pages");
    assert_eq!(w[2_999_999], 2_999_999);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn capacity_exhaustion_is_an_error_and_loses_nothing() {
    let mut v = VirtualVec::with_max_capacity(1024);
    for i in 0..1024u32 {
        v.try_push(i).unwrap();
    }
    let err = v.try_push(5).unwrap_err();
    assert_eq!(err.value, 5);
    assert!(matches!(err.error, StorageError::CapacityExceeded { .. }), "{}", err.error);
    assert_eq!(v.len(), 1024);
    assert_eq!(v[1023], 1023);
    expect_panic(|| v.push(6));
}

#[test]
fn commit_failure_leaves_the_vec_unchanged() {
    let source = FaultyPages::failing_commit(0);
    let mut v = VirtualVec::with_source(1 << 16, source.clone());
    v.push(1u64);
    let page_items = v.capacity();
    for i in 1..page_items {
        v.push(i as u64);
    }
    source.fail_commit_after(1);
    let err = v.try_push(99).unwrap_err();
    assert_eq!(err.value, 99);
    assert!(matches!(err.error, StorageError::Commit { .. }), "{}", err.error);
    assert_eq!(v.len(), page_items);
    assert_eq!(v.capacity(), page_items);
    v.push(99);
    assert_eq!(v[page_items], 99);
}

#[test]
fn heap_source_works_natively_too() {
    let mut v = VirtualVec::with_source(10_000, Arc::new(HeapPages::new()));
    v.extend(0..5000u32);
    assert_eq!(v.iter().sum::<u32>(), (0..5000).sum());
}

#[test]
fn drops_each_element_once() {
    let drops = Counter::default();
    let mut v = VirtualVec::new();
    for i in 0..100 {
        v.push(Tracked::new(i, &drops));
    }
    drop(v.pop());
    drop(v.swap_remove(3));
    assert_eq!(drops.get(), 2);
    v.truncate(90);
    assert_eq!(drops.get(), 10);
    v.clear();
    assert_eq!(drops.get(), 100);
    for i in 0..10 {
        v.push(Tracked::new(i, &drops));
    }
    drop(v);
    assert_eq!(drops.get(), 110);
}

#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
#[test]
fn a_panicking_drop_still_drops_the_rest_once() {
    let drops = Counter::default();
    let mut v = VirtualVec::new();
    for i in 0..10 {
        if i == 4 {
            v.push(Tracked::panicking(i, &drops));
        } else {
            v.push(Tracked::new(i, &drops));
        }
    }
    expect_panic(|| v.clear());
    assert_eq!(drops.get(), 10);
    assert!(v.is_empty());
    v.push(Tracked::new(1, &drops));
    drop(v);
    assert_eq!(drops.get(), 11);
}

#[test]
fn zero_sized_elements_take_no_memory() {
    let mut v = VirtualVec::new();
    for _ in 0..10_000 {
        v.push(());
    }
    assert_eq!(v.len(), 10_000);
    assert_eq!(v.committed_bytes(), 0);
    assert_eq!(v.max_capacity(), usize::MAX);
    assert_eq!(v.pop(), Some(()));
}

#[test]
fn zero_sized_elements_respect_an_explicit_maximum() {
    let mut v = VirtualVec::with_max_capacity(3);
    assert_eq!(v.max_capacity(), 3);
    for _ in 0..3 {
        v.try_push(()).unwrap();
    }
    let refused = v.try_push(()).unwrap_err();
    assert!(matches!(refused.error, StorageError::CapacityExceeded { capacity: 3, .. }));
    assert_eq!(v.len(), 3);
    assert_eq!(v.pop(), Some(()));
    v.try_push(()).unwrap();
    assert_eq!(v.len(), 3);
}

#[test]
fn over_aligned_elements() {
    let mut v = VirtualVec::new();
    for i in 0..200 {
        v.push(Align64(i));
    }
    assert_eq!(v.as_ptr() as usize % 64, 0);
    assert!(v.iter().enumerate().all(|(i, a)| a.0 == i as u64));

    let mut p = VirtualVec::with_max_capacity(64);
    for i in 0..10 {
        p.push(Align4096(i));
    }
    assert!(p.iter().all(|a| (a as *const Align4096 as usize).is_multiple_of(4096)));
    assert_eq!(p[9], Align4096(9));

    // Past a page: every slot of the reservation's capacity, no more, is usable and aligned.
    let mut q = VirtualVec::with_max_capacity(16);
    for i in 0..16 {
        q.push(Align8192(i));
    }
    assert!(q.iter().all(|a| (a as *const Align8192 as usize).is_multiple_of(8192)));
    assert_eq!(q[15], Align8192(15));
    assert_eq!(q.try_push(Align8192(16)).unwrap_err().value, Align8192(16));
}

#[test]
fn elements_larger_than_a_page() {
    let mut v = VirtualVec::with_max_capacity(100);
    for i in 0..20 {
        v.push(Big([i; 700]));
    }
    assert!(v.iter().enumerate().all(|(i, b)| b.0[699] == i as u64));
}

#[test]
fn shrink_to_fit_decommits_whole_pages() {
    let mut v = VirtualVec::new();
    v.extend(0..100_000u64);
    let before = v.committed_bytes();
    v.truncate(10);
    v.shrink_to_fit().unwrap();
    assert!(v.committed_bytes() < before);
    assert_eq!(v.committed_bytes(), 4096);
    assert_eq!(v.as_slice(), &(0..10).collect::<Vec<_>>()[..]);
    v.extend(10..20_000);
    assert_eq!(v[19_999], 19_999);
}

#[derive(Debug, Clone)]
enum Op {
    Push(u16),
    Pop,
    SwapRemove(usize),
    Set(usize, u16),
    Truncate(usize),
    Shrink,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u16>().prop_map(Op::Push),
        1 => Just(Op::Pop),
        1 => any::<usize>().prop_map(Op::SwapRemove),
        1 => (any::<usize>(), any::<u16>()).prop_map(|(i, v)| Op::Set(i, v)),
        1 => any::<usize>().prop_map(Op::Truncate),
        1 => Just(Op::Shrink),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if MIRI { 4 } else { 256 }))]
    #[test]
    fn behaves_like_vec(ops in proptest::collection::vec(op(), 0..if MIRI { 60 } else { 2000 })) {
        let mut model = Vec::new();
        let mut v = VirtualVec::new();
        for op in ops {
            match op {
                Op::Push(x) => { model.push(x); v.push(x); }
                Op::Pop => prop_assert_eq!(model.pop(), v.pop()),
                Op::SwapRemove(i) if !model.is_empty() => {
                    let i = i % model.len();
                    prop_assert_eq!(model.swap_remove(i), v.swap_remove(i));
                }
                Op::Set(i, x) if !model.is_empty() => {
                    let i = i % model.len();
                    model[i] = x;
                    v[i] = x;
                }
                Op::Truncate(n) => {
                    let n = n % (model.len() + 1);
                    model.truncate(n);
                    v.truncate(n);
                }
                Op::Shrink => v.shrink_to_fit().unwrap(),
                _ => {}
            }
            prop_assert_eq!(&model[..], v.as_slice());
        }
    }
}

#[test]
fn shrinking_never_raises_capacity_past_the_maximum() {
    let mut v = VirtualVec::with_max_capacity(100);
    for i in 0..100u64 {
        v.push(i);
    }
    assert!(v.try_push(100).is_err());
    v.shrink_to_fit().unwrap();
    assert!(v.capacity() <= v.max_capacity());
    assert!(v.try_push(100).is_err());
}

/// `VirtualVec::new` starts with a small reservation and moves into larger ones as it fills:
/// every element is kept in order, and reserved address space stays within a factor of what
/// the elements use.
#[test]
fn a_growing_vec_keeps_every_element_across_moves() {
    let n: u64 = if MIRI { 30_000 } else { 2_000_000 };
    let mut v = VirtualVec::new();
    let mut moves = 0;
    let mut at = v.as_ptr();
    for i in 0..n {
        v.push(i);
        if v.as_ptr() != at {
            moves += 1;
            at = v.as_ptr();
        }
    }
    assert!(moves >= 2, "{moves} moves");
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    assert!(v.reserved_bytes() <= v.len() * 8 * crate::vm::RESERVE_GROWTH * 2);
    assert_eq!(v.max_capacity(), crate::vm::DEFAULT_RESERVE_BYTES / 8);
}
