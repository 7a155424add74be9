//! The tests of [`Column`]: pushes, moves and drops (panicking ones too), layouts, the heap
//! phase, reservations and their reuse, and refused commits.

use std::mem::MaybeUninit;

use super::*;
use crate::StorageConfig;
use crate::test_util::{Align64, Align4096, Align8192, Big, Counter, MIRI, Tracked, expect_panic};
use crate::vm::FaultyPages;

fn push<T>(column: &mut Column, value: T) {
    let value = MaybeUninit::new(value);
    // SAFETY: the column holds `T`s; the value is moved in and `MaybeUninit` never drops it.
    unsafe { column.try_push(value.as_ptr().cast()).unwrap() };
}

fn take<T>(column: &mut Column, row: usize) -> T {
    let mut out = MaybeUninit::<T>::uninit();
    assert!(row < column.len());
    // SAFETY: `row < len`; `out` is a disjoint local for one `T`, which we now own.
    unsafe {
        column.swap_remove_unchecked(row, out.as_mut_ptr().cast());
        out.assume_init()
    }
}

/// A `u64` column of at most `max_bytes` from `source`.
fn u64_column(max_bytes: usize, source: std::sync::Arc<dyn crate::vm::PageSource>) -> Column {
    // SAFETY: the layout is `u64`'s and a `u64` needs no drop; `u64` is `Send + Sync`.
    unsafe { Column::with_source(std::alloc::Layout::new::<u64>(), None, max_bytes, source) }
}

fn values<T: Copy>(column: &Column) -> Vec<T> {
    // SAFETY: the tests only read columns of the type they pushed.
    unsafe { column.as_slice::<T>().to_vec() }
}

#[test]
fn push_read_swap_remove() {
    let mut c = Column::of::<u32>();
    for i in 0..100u32 {
        push(&mut c, i);
    }
    assert_eq!(c.len(), 100);
    assert_eq!(take::<u32>(&mut c, 10), 10);
    assert_eq!(values::<u32>(&c)[10], 99);
    // SAFETY: row 0 < len.
    unsafe { c.swap_remove_and_drop_unchecked(0) };
    assert_eq!(values::<u32>(&c)[0], 98);
    assert_eq!(c.len(), 98);
    // SAFETY: the column holds u32s.
    let read = unsafe { *c.get(1).unwrap().cast::<u32>().as_ptr() };
    assert_eq!(read, 1);
    assert!(c.get(98).is_none());
}

#[test]
fn small_columns_live_on_the_heap_then_move_once() {
    // A fixed reservation: the items move once, out of the heap block, and never again.
    let mut c = StorageConfig::new().with_reserve_bytes(64 << 20).column_of::<u64>();
    push(&mut c, 0u64);
    assert!(!c.is_reserved());
    let (reserved, committed, used) = c.memory();
    assert_eq!(used, 8);
    assert!(committed < 4096 && reserved == committed);
    let small_items = crate::SMALL_COLUMN_BYTES / 8;
    for i in 1..small_items as u64 {
        push(&mut c, i);
    }
    assert!(!c.is_reserved());
    push(&mut c, small_items as u64);
    assert!(c.is_reserved());
    let moved_to = c.as_ptr();
    let n = if MIRI { small_items * 2 } else { 500_000 };
    for i in small_items + 1..n {
        push(&mut c, i as u64);
    }
    assert_eq!(c.as_ptr(), moved_to, "a fixed reservation never moves");
    assert!(values::<u64>(&c).iter().enumerate().all(|(i, &v)| v == i as u64));
}

#[test]
fn moving_rows_between_columns_moves_each_value_once() {
    let drops = Counter::default();
    let mut a = Column::of::<Tracked>();
    let mut b = Column::of::<Tracked>();
    for i in 0..10 {
        push(&mut a, Tracked::new(i, &drops));
    }
    // SAFETY: rows are in bounds and both columns hold `Tracked`.
    unsafe {
        a.swap_remove_into(2, &mut b).unwrap();
        a.swap_remove_into(0, &mut b).unwrap();
    }
    assert_eq!(drops.get(), 0);
    assert_eq!((a.len(), b.len()), (8, 2));
    // SAFETY: both hold `Tracked`.
    let moved: Vec<u64> = unsafe { b.as_slice::<Tracked>() }.iter().map(|t| t.value).collect();
    assert_eq!(moved, [2, 0]);
    drop(a);
    assert_eq!(drops.get(), 8);
    drop(b);
    assert_eq!(drops.get(), 10);
}

#[test]
fn replace_drops_the_old_value() {
    let drops = Counter::default();
    let mut c = Column::of::<Tracked>();
    push(&mut c, Tracked::new(1, &drops));
    let new = MaybeUninit::new(Tracked::new(2, &drops));
    // SAFETY: row 0 < len; the new value is moved in.
    unsafe { c.replace_unchecked(0, new.as_ptr().cast()) };
    assert_eq!(drops.get(), 1);
    // SAFETY: the column holds `Tracked`.
    assert_eq!(unsafe { c.as_slice::<Tracked>() }[0].value, 2);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn panicking_drops_keep_the_column_consistent() {
    let drops = Counter::default();
    let mut c = Column::of::<Tracked>();
    for i in 0..6 {
        let t =
            if i == 1 || i == 4 { Tracked::panicking(i, &drops) } else { Tracked::new(i, &drops) };
        push(&mut c, t);
    }
    // SAFETY: row 1 < len.
    expect_panic(|| unsafe { c.swap_remove_and_drop_unchecked(1) });
    assert_eq!(c.len(), 5);
    assert_eq!(drops.get(), 1);
    // SAFETY: the column holds `Tracked`.
    let order: Vec<u64> = unsafe { c.as_slice::<Tracked>() }.iter().map(|t| t.value).collect();
    assert_eq!(order, [0, 5, 2, 3, 4]);
    expect_panic(|| c.clear());
    assert_eq!(drops.get(), 6, "every value dropped exactly once");
    assert!(c.is_empty());

    let replaced = Counter::default();
    push(&mut c, Tracked::panicking(9, &replaced));
    let new = MaybeUninit::new(Tracked::new(10, &replaced));
    // SAFETY: row 0 < len; the new value is moved in even though the old drop panics.
    expect_panic(|| unsafe { c.replace_unchecked(0, new.as_ptr().cast()) });
    // SAFETY: the column holds `Tracked`.
    assert_eq!(unsafe { c.as_slice::<Tracked>() }[0].value, 10);
    drop(c);
    assert_eq!(replaced.get(), 2);
}

#[test]
fn zst_over_aligned_and_big_items() {
    let mut z = Column::of::<()>();
    for _ in 0..1000 {
        push(&mut z, ());
    }
    assert_eq!(z.len(), 1000);
    assert_eq!(z.memory().1, 0);
    take::<()>(&mut z, 5);
    assert_eq!(z.len(), 999);

    let mut a = Column::of::<Align64>();
    let n = if MIRI { 300 } else { 1000 };
    for i in 0..n {
        push(&mut a, Align64(i));
    }
    assert!(a.is_reserved());
    assert_eq!(a.as_ptr().as_ptr() as usize % 64, 0);
    assert!(values::<Align64>(&a).iter().enumerate().all(|(i, v)| v.0 == i as u64));

    let mut p = Column::of::<Align4096>();
    for i in 0..8 {
        push(&mut p, Align4096(i));
    }
    assert!(p.is_reserved(), "past 4 pages it moved into a page-aligned reservation");
    assert!((0..8).all(|r| (p.get(r).unwrap().as_ptr() as usize).is_multiple_of(4096)));
    assert_eq!(values::<Align4096>(&p)[7], Align4096(7));

    // Past a page: the reservation starts on a page, the items on the next multiple of 8 KiB;
    // the slack is reserved on top, so exactly the configured bytes hold items.
    let config = StorageConfig::new().with_reserve_bytes(64 * 8192);
    let mut q = config.column_of::<Align8192>();
    for i in 0..64 {
        push(&mut q, Align8192(i));
    }
    assert!(q.is_reserved());
    assert!((0..64).all(|r| (q.get(r).unwrap().as_ptr() as usize).is_multiple_of(8192)));
    assert_eq!(values::<Align8192>(&q), (0..64).map(Align8192).collect::<Vec<_>>());
    assert_eq!(q.max_capacity(), 64);
    let extra = MaybeUninit::new(Align8192(64));
    // SAFETY: the column holds `Align8192`s; on error the value stays ours (it needs no drop).
    let err = unsafe { q.try_push(extra.as_ptr().cast()) }.unwrap_err();
    assert!(matches!(err, StorageError::CapacityExceeded { .. }), "{err}");
    assert_eq!(take::<Align8192>(&mut q, 0), Align8192(0));
    assert_eq!(values::<Align8192>(&q)[0], Align8192(63));

    let mut big = Column::of::<Big>();
    for i in 0..10 {
        push(&mut big, Big([i; 700]));
    }
    assert_eq!(take::<Big>(&mut big, 0).0[0], 0);
    assert_eq!(values::<Big>(&big)[0].0[699], 9);
}

#[test]
fn commit_failure_leaves_the_column_unchanged() {
    let source = FaultyPages::failing_commit(0);
    let mut c = u64_column(1 << 20, source.clone());
    let heap_items = crate::SMALL_COLUMN_BYTES / 8;
    for i in 0..heap_items as u64 {
        push(&mut c, i);
    }
    source.fail_commit_after(1);
    let value = 7u64;
    // SAFETY: the column holds u64s; on error the value stays ours.
    let err = unsafe { c.try_push((&value as *const u64).cast()) }.unwrap_err();
    assert!(matches!(err, StorageError::Commit { .. }), "{err}");
    assert!(!c.is_reserved());
    assert_eq!(c.len(), heap_items);
    assert!(values::<u64>(&c).iter().enumerate().all(|(i, &v)| v == i as u64));
    push(&mut c, 7u64);
    assert!(c.is_reserved());
    assert_eq!(values::<u64>(&c)[heap_items], 7);
}

#[test]
fn capacity_exhaustion_is_an_error() {
    let mut c = u64_column(64 << 10, crate::vm::default_source());
    for i in 0..8192u64 {
        push(&mut c, i);
    }
    let value = 1u64;
    // SAFETY: the column holds u64s.
    let err = unsafe { c.try_push((&value as *const u64).cast()) }.unwrap_err();
    assert!(matches!(err, StorageError::CapacityExceeded { capacity: 8192, .. }), "{err}");
    assert_eq!(c.len(), 8192);
}

#[test]
fn the_heap_phase_respects_a_small_maximum() {
    let mut c = u64_column(100, crate::vm::default_source());
    for i in 0..12u64 {
        push(&mut c, i);
    }
    let value = 12u64;
    // SAFETY: the column holds u64s; `value` is a local, not in the column.
    let err = unsafe { c.try_push((&value as *const u64).cast()) }.unwrap_err();
    assert!(matches!(err, StorageError::CapacityExceeded { capacity: 12, .. }), "{err}");
    assert!(c.memory().1 <= 100);
}

/// A reservation size so close to `usize::MAX` that the column's (one page larger, page
/// rounded) reservation cannot be sized: leaving the heap is an error, not a wrapped size. (The
/// rounding wrapped to 0 in release builds, so the column moved its 16 KiB heap block into a
/// one-page reservation: a write past the mapping, from the safe `StorageConfig::column_of`.)
#[test]
fn a_reservation_size_that_overflows_when_rounded_is_an_error() {
    let page = crate::vm::default_source().page_size();
    let config = StorageConfig::new().with_reserve_bytes(usize::MAX - page - 100);
    let mut c = config.column_of::<u64>();
    let heap_items = crate::SMALL_COLUMN_BYTES / 8;
    for i in 0..heap_items as u64 {
        push(&mut c, i);
    }
    let value = 7u64;
    // SAFETY: the column holds u64s; `value` is a local, not in the column, and stays ours.
    let err = unsafe { c.try_push((&value as *const u64).cast()) }.unwrap_err();
    assert!(matches!(err, StorageError::CapacityExceeded { .. }), "{err}");
    assert!(!c.is_reserved());
    assert_eq!(c.len(), heap_items);
    assert!(values::<u64>(&c).iter().enumerate().all(|(i, &v)| v == i as u64));
}

#[test]
fn shrinking_never_raises_capacity_past_the_maximum() {
    let mut c = u64_column(20_000, crate::vm::default_source());
    while c.len() < 2500 {
        let n = c.len() as u64;
        push(&mut c, n);
    }
    c.shrink_to_fit().unwrap();
    assert!(c.capacity() <= 2500);
    let value = 1u64;
    // SAFETY: the column holds u64s; `value` is a local, not in the column.
    assert!(unsafe { c.try_push((&value as *const u64).cast()) }.is_err());
}

#[test]
fn a_dropped_columns_reservation_is_reused_warm() {
    use crate::raw::{RawBuf, SMALL_COLUMN_BYTES};
    // A maximum no other test uses, so no other column can take this reservation.
    let max_bytes = (3 << 20) + 8 * 4096;
    let layout = std::alloc::Layout::new::<u64>();
    let mut a =
        RawBuf::new_column(layout, SMALL_COLUMN_BYTES, max_bytes, crate::vm::default_source());
    a.reserve(0, 10_000).unwrap();
    assert!(a.is_reserved());
    let (reserved, committed) = a.bytes();
    assert!(committed >= 80_000 && reserved > max_bytes);
    let page = a.ptr().as_ptr() as usize & !4095;
    drop(a);
    let mut b =
        RawBuf::new_column(layout, SMALL_COLUMN_BYTES, max_bytes, crate::vm::default_source());
    b.reserve(0, 5_000).unwrap();
    assert_eq!(b.ptr().as_ptr() as usize & !4095, page, "the spare reservation came back");
    assert_eq!(b.bytes(), (reserved, committed), "with its pages still committed");
    assert_eq!(b.max_capacity(), max_bytes / 8, "colouring costs no capacity");
}

#[test]
fn coloured_columns_keep_alignment_and_values() {
    let mut pages = Column::of::<Align4096>();
    let mut lines = Column::of::<Align64>();
    for i in 0..8u64 {
        push(&mut pages, Align4096(i));
    }
    for i in 0..1000u64 {
        push(&mut lines, Align64(i));
    }
    assert!(pages.is_reserved() && lines.is_reserved());
    assert_eq!(pages.as_ptr().as_ptr() as usize % 4096, 0);
    assert_eq!(lines.as_ptr().as_ptr() as usize % 64, 0);
    // SAFETY: the columns hold the types pushed.
    let (p, l) = unsafe { (pages.as_slice::<Align4096>(), lines.as_slice::<Align64>()) };
    assert!(p.iter().enumerate().all(|(i, v)| v.0 == i as u64));
    assert!(l.iter().enumerate().all(|(i, v)| v.0 == i as u64));
}

#[test]
fn copy_item_copies_padding_bytes_without_reading_them_as_integers() {
    // 16 bytes, 7 of them padding (uninitialised): the copy must not treat them as `u8`s.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Padded(u8, u64);
    let src = Padded(3, 9);
    let mut dst = MaybeUninit::<Padded>::uninit();
    // SAFETY: one `Padded` each side; distinct locals.
    let copied = unsafe {
        copy_item((&src as *const Padded).cast(), dst.as_mut_ptr().cast(), size_of::<Padded>());
        dst.assume_init()
    };
    assert_eq!(copied, src);
}

#[test]
fn copy_item_copies_exactly_size_bytes_for_every_size() {
    for size in 0..=80 {
        let src: Vec<u8> = (0..size as u8).map(|b| b.wrapping_mul(7).wrapping_add(1)).collect();
        // One guard byte on each side of the destination.
        let mut dst = vec![0xAAu8; size + 2];
        // SAFETY: `src` has `size` bytes, `dst[1..]` has `size + 1`; distinct allocations.
        unsafe { copy_item(src.as_ptr(), dst.as_mut_ptr().add(1), size) };
        assert_eq!(&dst[1..=size], &src[..], "size {size}");
        assert_eq!((dst[0], dst[size + 1]), (0xAA, 0xAA), "size {size}: a guard byte changed");
    }
}

/// Tables hold three columns per component (values and two tick columns), so a column's own
/// size is most of a near-empty table's memory (many_archetypes): the rarely used reservation
/// is boxed. 120 bytes on 64-bit targets today; this guards against it growing back.
#[test]
#[cfg(target_pointer_width = "64")]
fn a_column_stays_small() {
    assert!(size_of::<Column>() <= 120, "Column is {} bytes", size_of::<Column>());
}

#[test]
fn a_column_commits_in_small_steps() {
    use crate::raw::COLUMN_COMMIT_STEP;
    // Each step is prefaulted by the push that commits it: small steps keep that push short.
    if MIRI {
        return; // OS pages: miri has no mprotect.
    }
    let mut c = u64_column(64 << 20, crate::vm::default_source());
    let mut last = 0;
    let mut steps = Vec::new();
    for i in 0..(1u64 << 19) {
        push(&mut c, i);
        let (_, committed, used) = c.memory();
        assert!(committed - used <= COLUMN_COMMIT_STEP + 4096, "{committed} for {used}");
        if committed != last {
            steps.push(committed - last);
            last = committed;
        }
    }
    assert!(steps.iter().all(|&s| s <= COLUMN_COMMIT_STEP + 4096), "{steps:?}");
    assert!(steps.iter().filter(|&&s| s == COLUMN_COMMIT_STEP).count() >= 20, "{steps:?}");
    assert_eq!(values::<u64>(&c)[12_345], 12_345);
}

/// A growing column (the default) keeps its address until it outgrows its reservation, then
/// moves into a larger one, keeping every value in order; past the first move it never
/// copies through the heap (its fallback stays `None`).
#[test]
fn a_growing_column_moves_only_when_it_outgrows_its_reservation_and_keeps_every_value() {
    let mut c = Column::of::<u64>();
    assert!(c.is_growing());
    let n = if MIRI { 40_000 } else { 3_000_000 };
    let (mut ptr, mut reserved, mut moves) = (c.as_ptr(), 0, 0);
    for i in 0..n as u64 {
        push(&mut c, i);
        let now = c.memory().0;
        if !c.is_reserved() {
            ptr = c.as_ptr(); // the heap block doubles, as a `Vec`'s does
            continue;
        }
        if now != reserved {
            if reserved != 0 {
                moves += 1;
                assert!(now >= reserved * crate::vm::RESERVE_GROWTH, "geometric growth");
            }
            reserved = now;
            ptr = c.as_ptr();
        }
        assert_eq!(c.as_ptr(), ptr, "moved at push {i} without a larger reservation");
    }
    assert!(moves >= 2, "the column moved {moves} times");
    assert_eq!(c.fallback(), crate::Fallback::None);
    assert!(values::<u64>(&c).iter().enumerate().all(|(i, &v)| v == i as u64));
    let (reserved, committed, used) = c.memory();
    assert!(used <= committed && committed <= reserved);
    assert!(reserved <= used * 2 * crate::vm::RESERVE_GROWTH, "reserved {reserved} for {used}");
}

/// Values that need dropping, zero-sized ones and over-aligned ones survive a move: nothing is
/// dropped by a move, and each value is dropped once at the end.
#[test]
fn drops_zsts_and_over_aligned_items_survive_a_move() {
    let drops = Counter::default();
    let mut c = Column::of::<Tracked>();
    let n = if MIRI { 6_000 } else { 200_000 };
    for i in 0..n {
        push(&mut c, Tracked::new(i, &drops));
    }
    assert!(c.memory().0 > crate::vm::FIRST_RESERVE_BYTES * 2, "it moved at least once");
    assert_eq!(drops.get(), 0, "a move drops nothing");
    // SAFETY: the column holds `Tracked`s.
    let tracked = unsafe { c.as_slice::<Tracked>() };
    assert!(tracked.iter().enumerate().all(|(i, t)| t.value == i as u64));
    drop(c);
    assert_eq!(drops.get(), n as usize);

    let mut z = Column::of::<()>();
    let zsts = if MIRI { 1_000 } else { 100_000 };
    for _ in 0..zsts {
        push(&mut z, ());
    }
    assert_eq!((z.len(), z.memory().0), (zsts, 0), "zero-sized items reserve nothing");

    let mut a = Column::of::<Align64>();
    let mut p = Column::of::<Align4096>();
    // Enough for both to outgrow their first reservation (and, natively, `p` to pass 64 MiB).
    let (n_a, n_p) = if MIRI { (2_500, 300) } else { (20_000, 20_000) };
    for i in 0..n_a.max(n_p) {
        if i < n_a {
            push(&mut a, Align64(i));
        }
        if i < n_p {
            push(&mut p, Align4096(i));
        }
    }
    let p_past = if MIRI { crate::vm::FIRST_RESERVE_BYTES * 2 } else { 64 << 20 };
    assert!(a.memory().0 > crate::vm::FIRST_RESERVE_BYTES * 2 && p.memory().0 > p_past);
    assert!(a.as_ptr().as_ptr().addr().is_multiple_of(64));
    assert!(p.as_ptr().as_ptr().addr().is_multiple_of(4096));
    assert!(values::<Align64>(&a).iter().enumerate().all(|(i, v)| v.0 == i as u64));
    assert!(values::<Align4096>(&p).iter().enumerate().all(|(i, v)| v.0 == i as u64));

    // Past a page, a move keeps the offset only modulo a page: such items are copied to the
    // first multiple of their alignment in the new reservation.
    let mut big = Column::of::<Align8192>();
    let n = if MIRI { 16 } else { 2_000 };
    for i in 0..n {
        push(&mut big, Align8192(i));
        assert!(big.as_ptr().as_ptr().addr().is_multiple_of(8192), "after push {i}");
    }
    assert!(big.memory().0 > 4 * crate::vm::FIRST_RESERVE_BYTES || MIRI, "it moved");
    assert!(values::<Align8192>(&big).iter().enumerate().all(|(i, v)| v.0 == i as u64));
}

/// A refused commit right after a move leaves the values, the length and the committed bytes
/// as they were (the items now live in the larger reservation); the next push succeeds.
#[test]
fn a_failed_commit_during_growth_leaves_the_column_unchanged() {
    let source = FaultyPages::failing_commit(0);
    let config = StorageConfig::new().with_source(source.clone());
    let mut c = config.column_of::<u64>();
    let mut i = 0u64;
    // Past the first move, up to a full reservation: the next push moves again.
    while c.memory().0 <= crate::vm::FIRST_RESERVE_BYTES * 2
        || c.len() < c.capacity()
        || c.memory().1 < c.memory().0
    {
        push(&mut c, i);
        i += 1;
    }
    let (len, (reserved, committed, _)) = (c.len(), c.memory());
    source.fail_commit_after(1);
    let value = i;
    // SAFETY: the column holds `u64`s; on error the value stays ours (a `u64`: nothing to drop).
    let result = unsafe { c.try_push((&raw const value).cast()) };
    assert!(matches!(result, Err(StorageError::Commit { .. })), "{result:?}");
    assert_eq!((c.len(), c.memory().1), (len, committed));
    assert!(c.memory().0 > reserved, "the move itself succeeded");
    assert!(values::<u64>(&c).iter().enumerate().all(|(k, &v)| v == k as u64));
    push(&mut c, i);
    assert_eq!(values::<u64>(&c)[i as usize], i);
}

/// A source that refuses reservations over half the first reservation's size: the growing
/// column takes a smaller one, then falls back to heap pages when even that is refused; every
/// value stays, in order. A fixed reservation the source refuses falls back the same way.
#[test]
fn a_refused_reservation_falls_back_to_a_smaller_one_then_to_heap_pages() {
    let limit = crate::vm::FIRST_RESERVE_BYTES / 2;
    let n = limit / 8 * 2;
    for config in [StorageConfig::new(), StorageConfig::new().with_reserve_bytes(1 << 30)] {
        let source = FaultyPages::refusing_reserve_over(limit);
        let mut c = config.with_source(source.clone()).column_of::<u64>();
        for i in 0..n as u64 {
            push(&mut c, i);
            if c.is_reserved() && c.len() * 8 < limit / 2 {
                assert_eq!(c.fallback(), crate::Fallback::Smaller, "{} items", c.len());
            }
        }
        assert_eq!(c.fallback(), crate::Fallback::HeapPages);
        assert!(source.reserves() >= 2);
        assert!(values::<u64>(&c).iter().enumerate().all(|(i, &v)| v == i as u64));
        let (reserved, committed, used) = c.memory();
        assert!(used <= committed && committed <= reserved && reserved <= 2 * used + (64 << 10));
    }
}
