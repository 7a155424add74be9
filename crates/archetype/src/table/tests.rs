//! Tables: pushing, swap-removing, clearing, moving rows between tables and sweeping marked
//! rows, with values, ticks and entities checked and every value dropped once, panicking
//! `Drop`s included.

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// Counts drops; panics on drop when `value` is negative (and not already unwinding).
#[derive(Debug)]
struct Tracked(i64, Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
        if self.0 < 0 && !std::thread::panicking() {
            panic!("Tracked({}) panics on drop", self.0);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pos(f32);

#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(align(64))]
struct Aligned(u64);

struct Marker;

fn entity(i: u32) -> Entity {
    Entity::from_bits((1u64 << 32) | i as u64).unwrap()
}

fn values<T>(table: &Table, id: ComponentId) -> &[T] {
    // SAFETY: the tests only read columns as the type they registered for `id`.
    unsafe { table.column(id).unwrap().data().as_slice::<T>() }
}

/// Pushes a row of (Tracked, Pos) in id order.
fn push(table: &mut Table, e: Entity, t: Tracked, p: Pos) -> usize {
    let t = ManuallyDrop::new(t);
    let p = ManuallyDrop::new(p);
    let ids = table.component_ids().to_vec();
    let mut i = 0;
    // SAFETY: ids[0] is Tracked and ids[1] is Pos (registered in that order); both are moved.
    unsafe {
        table
            .push_row(e, 1, |id| {
                i += 1;
                if id == ids[0] {
                    (&*t as *const Tracked).cast()
                } else {
                    (&*p as *const Pos).cast()
                }
            })
            .unwrap()
    }
}

fn setup() -> (Components, ComponentId, ComponentId) {
    let mut c = Components::new();
    let t = c.register::<Tracked>();
    let p = c.register::<Pos>();
    (c, t, p)
}

#[test]
fn push_read_and_swap_remove() {
    let (c, t, p) = setup();
    let drops = Arc::new(AtomicUsize::new(0));
    let mut table = Table::new(&c, &[t, p]);
    for i in 0..10 {
        assert_eq!(
            push(&mut table, entity(i), Tracked(i as i64, drops.clone()), Pos(i as f32)),
            i as usize
        );
    }
    assert_eq!(table.len(), 10);
    assert_eq!(values::<Pos>(&table, p)[3], Pos(3.0));
    assert_eq!(table.swap_remove_and_drop(3), Some(entity(9)));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(table.entities()[3], entity(9));
    assert_eq!(values::<Pos>(&table, p)[3], Pos(9.0));
    assert_eq!(values::<Tracked>(&table, t)[3].0, 9);
    assert_eq!(table.swap_remove_and_drop(8), None, "the last row moves nothing");
    assert_eq!(table.column(p).unwrap().added_ticks(), &[1; 8]);
    drop(table);
    assert_eq!(drops.load(Ordering::SeqCst), 10);
}

#[test]
fn a_table_without_drop_fns_swap_removes_values_ticks_and_entities() {
    let mut c = Components::new();
    let p = c.register::<Pos>();
    let a = c.register::<Aligned>();
    let mut table = Table::new(&c, &[p, a]);
    assert!(!table.needs_drop, "Pos and Aligned have no drop fn: the fast path is taken");
    assert!(Table::new(&c, &[]).entities().is_empty());
    for i in 0..6u32 {
        let (pv, av) = (Pos(i as f32), Aligned(u64::from(i) * 10));
        // SAFETY: `p` is read as a `Pos`, `a` as an `Aligned`; both are `Copy`, so reading
        // them again is a move of a copy.
        let row = unsafe {
            table.push_row(entity(i), 100 + i, |id| {
                if id == p { (&raw const pv).cast() } else { (&raw const av).cast() }
            })
        };
        assert_eq!(row.unwrap(), i as usize);
    }
    assert_eq!(table.swap_remove_and_drop(1), Some(entity(5)));
    assert_eq!(table.swap_remove_and_drop(4), None, "the last row moves nothing");
    assert_eq!(table.swap_remove_and_drop(0), Some(entity(3)));
    assert_eq!(table.entities(), &[entity(3), entity(5), entity(2)]);
    assert_eq!(values::<Pos>(&table, p), &[Pos(3.0), Pos(5.0), Pos(2.0)]);
    assert_eq!(values::<Aligned>(&table, a), &[Aligned(30), Aligned(50), Aligned(20)]);
    for id in [p, a] {
        let column = table.column(id).unwrap();
        assert_eq!(column.data().len(), 3);
        assert_eq!(column.added_ticks(), &[103, 105, 102]);
        assert_eq!(column.changed_ticks(), &[103, 105, 102]);
    }
    let aligned = table.column(a).unwrap().data().as_ptr();
    assert_eq!(aligned.as_ptr().addr() % 64, 0, "Aligned's column stays aligned");
    while !table.is_empty() {
        table.swap_remove_and_drop(0);
    }
    assert!(table.columns().iter().all(|c| c.data().is_empty() && c.changed_ticks().is_empty()));
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_drop_still_removes_the_row_everywhere() {
    let (c, t, p) = setup();
    let drops = Arc::new(AtomicUsize::new(0));
    let mut table = Table::new(&c, &[t, p]);
    for i in 0..4 {
        let v = if i == 1 { -1 } else { i };
        push(&mut table, entity(i as u32), Tracked(v, drops.clone()), Pos(i as f32));
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        table.swap_remove_and_drop(1);
    }));
    assert!(result.is_err());
    assert_eq!(table.len(), 3);
    for column in table.columns() {
        assert_eq!(column.data().len(), 3);
        assert_eq!(column.added_ticks().len(), 3);
        assert_eq!(column.changed_ticks().len(), 3);
    }
    assert_eq!(table.entities(), &[entity(0), entity(3), entity(2)]);
    assert_eq!(values::<Pos>(&table, p), &[Pos(0.0), Pos(3.0), Pos(2.0)]);
    drop(table);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_drop_during_clear_still_empties_every_column() {
    let (c, t, p) = setup();
    let drops = Arc::new(AtomicUsize::new(0));
    let mut table = Table::new(&c, &[t, p]);
    for i in 0..4 {
        let v = if i == 1 { -1 } else { i };
        push(&mut table, entity(i as u32), Tracked(v, drops.clone()), Pos(i as f32));
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| table.clear()));
    assert!(result.is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 4, "every value dropped once");
    assert_eq!(table.len(), 0);
    for column in table.columns() {
        assert_eq!(column.data().len(), 0);
        assert_eq!(column.added_ticks().len(), 0);
        assert_eq!(column.changed_ticks().len(), 0);
    }
    push(&mut table, entity(7), Tracked(7, drops.clone()), Pos(7.0));
    assert_eq!(values::<Pos>(&table, p), &[Pos(7.0)]);
    drop(table);
    assert_eq!(drops.load(Ordering::SeqCst), 5);
}

#[test]
fn move_row_moves_shared_takes_dropped_and_adds_missing() {
    let mut c = Components::new();
    let t = c.register::<Tracked>();
    let p = c.register::<Pos>();
    let m = c.register::<Marker>();
    let a = c.register::<Aligned>();
    let drops = Arc::new(AtomicUsize::new(0));
    let mut src = Table::new(&c, &[t, p]);
    let mut dst = Table::new(&c, &[p, m, a]);
    for i in 0..3 {
        push(&mut src, entity(i), Tracked(i as i64, drops.clone()), Pos(i as f32));
    }
    let aligned = Aligned(42);
    let mut taken = Vec::new();
    // SAFETY: row 0 < len; same registry; `missing` gives a valid Marker / Aligned (both Copy,
    // so reading them out leaves nothing to drop twice); `taken` moves the Tracked out.
    let moved = unsafe {
        src.move_row(
            0,
            &mut dst,
            7,
            |id, ptr| {
                assert_eq!(id, t);
                taken.push(ptr.cast::<Tracked>().read());
            },
            |id| {
                if id == a {
                    (&aligned as *const Aligned).cast()
                } else {
                    std::ptr::NonNull::<Marker>::dangling().as_ptr().cast()
                }
            },
        )
    }
    .unwrap();
    assert_eq!(moved, MovedRow { new_row: 0, swapped_in: Some(entity(2)) });
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].0, 0);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "nothing was dropped by the move");
    drop(taken);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(dst.entities(), &[entity(0)]);
    assert_eq!(values::<Pos>(&dst, p), &[Pos(0.0)]);
    assert_eq!(values::<Aligned>(&dst, a), &[Aligned(42)]);
    assert_eq!(dst.column(p).unwrap().added_ticks(), &[1], "ticks move with the component");
    assert_eq!(dst.column(a).unwrap().added_ticks(), &[7]);
    assert_eq!(src.entities(), &[entity(2), entity(1)]);
    assert_eq!(values::<Pos>(&src, p), &[Pos(2.0), Pos(1.0)]);
    for table in [&src, &dst] {
        for column in table.columns() {
            assert_eq!(column.data().len(), table.len());
        }
    }
    drop(src);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}

#[test]
fn empty_table_and_memory() {
    let c = Components::new();
    let mut empty = Table::new(&c, &[]);
    // SAFETY: no components, so `value` is never called.
    unsafe { empty.push_row(entity(0), 0, |_| unreachable!()).unwrap() };
    assert_eq!(empty.len(), 1);
    let (reserved, committed, used) = empty.memory();
    assert_eq!(used, size_of::<Entity>());
    assert!(committed >= used && reserved >= committed);
    assert!(committed < 4096, "a one-row table stays on the heap: {committed} bytes");
    empty.clear();
    assert!(empty.is_empty());
}

#[test]
fn swap_remove_in_a_table_without_components_removes_one_row() {
    let c = Components::new();
    let mut empty = Table::new(&c, &[]);
    for i in 0..3 {
        // SAFETY: no components, so `value` is never called.
        unsafe { empty.push_row(entity(i), 0, |_| unreachable!()).unwrap() };
    }
    assert_eq!(empty.swap_remove_and_drop(0), Some(entity(2)));
    assert_eq!(empty.entities(), &[entity(2), entity(1)]);
}

/// A table of `n` rows of (Tracked(i), Pos(i)) for entity `i`, each added at tick `i`.
fn numbered(n: usize, drops: &Arc<AtomicUsize>) -> (Table, ComponentId, ComponentId) {
    let (c, t, p) = setup();
    let mut table = Table::new(&c, &[t, p]);
    for i in 0..n {
        let row =
            push(&mut table, entity(i as u32), Tracked(i as i64, drops.clone()), Pos(i as f32));
        table.column_mut(p).unwrap().ticks_mut().0[row] = i as u32;
    }
    (table, t, p)
}

fn marks_of(len: usize, rows: &[usize]) -> Vec<u64> {
    let mut marks = vec![0u64; len.div_ceil(64)];
    for &r in rows {
        marks[r / 64] |= 1 << (r % 64);
    }
    marks
}

#[test]
fn remove_marked_drops_the_marked_rows_and_fills_the_holes_in_order() {
    let all: Vec<usize> = (0..70).collect();
    let tail: Vec<usize> = (60..70).collect();
    let cases: [&[usize]; 6] =
        [&[], &all, &tail, &[0, 1, 2], &[3, 17, 63, 64, 65, 69], &[0, 10, 20, 30, 40, 50, 60]];
    for rows in cases {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut table, t, p) = numbered(70, &drops);
        let mut moves = Vec::new();
        let removed = table.remove_marked(&marks_of(70, rows), |e, row| moves.push((e, row)));
        assert_eq!(removed, rows.len());
        assert_eq!(drops.load(Ordering::SeqCst), rows.len(), "each marked value dropped once");
        // What stays: the unmarked rows below the new length in place, then the ones above it
        // in order, into the holes.
        let new_len = 70 - rows.len();
        let stay: Vec<usize> = (0..70).filter(|r| !rows.contains(r)).collect();
        let mut expected: Vec<usize> = (0..new_len).collect();
        let mut movers = stay.iter().copied().filter(|&r| r >= new_len);
        for slot in expected.iter_mut() {
            if rows.contains(slot) {
                *slot = movers.next().unwrap();
            }
        }
        assert_eq!(table.len(), new_len);
        let got: Vec<usize> = table.entities().iter().map(|e| e.index() as usize).collect();
        assert_eq!(got, expected);
        for (row, &i) in expected.iter().enumerate() {
            assert_eq!(values::<Tracked>(&table, t)[row].0, i as i64);
            assert_eq!(values::<Pos>(&table, p)[row], Pos(i as f32));
            assert_eq!(table.column(p).unwrap().added_ticks()[row], i as u32, "ticks move along");
        }
        let expected_moves: Vec<(Entity, usize)> = expected
            .iter()
            .enumerate()
            .filter(|&(row, &i)| row != i)
            .map(|(row, &i)| (entity(i as u32), row))
            .collect();
        assert_eq!(moves, expected_moves, "one move per hole below the new length");
        drop(table);
        assert_eq!(drops.load(Ordering::SeqCst), 70);
    }
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn remove_marked_refuses_marks_of_another_length() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut table, _, _) = numbered(70, &drops);
    let short = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        table.remove_marked(&[0], |_, _| {});
    }));
    assert!(short.is_err());
    let past_end = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        table.remove_marked(&marks_of(128, &[100])[..2], |_, _| {});
    }));
    assert!(past_end.is_err());
    assert_eq!(table.len(), 70, "nothing removed");
    assert_eq!(drops.load(Ordering::SeqCst), 0);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_drop_mid_sweep_still_removes_and_compacts_every_marked_row() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (c, t, p) = setup();
    let mut table = Table::new(&c, &[t, p]);
    for i in 0..10 {
        let value = if i == 2 { -2 } else { i };
        push(&mut table, entity(i as u32), Tracked(value, drops.clone()), Pos(i as f32));
    }
    let mut moves = Vec::new();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        table.remove_marked(&marks_of(10, &[1, 2, 5]), |e, row| moves.push((e, row)));
    }));
    assert!(result.is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 3, "the other marked values dropped too");
    assert_eq!(table.len(), 7);
    let got: Vec<u32> = table.entities().iter().map(|e| e.index()).collect();
    assert_eq!(got, [0, 7, 8, 3, 4, 9, 6]);
    assert_eq!(values::<Pos>(&table, p)[1], Pos(7.0));
    assert_eq!(moves.len(), 3);
    drop(table);
    assert_eq!(drops.load(Ordering::SeqCst), 10);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_moved_callback_leaves_the_table_whole() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut table, _, p) = numbered(4, &drops);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        table.remove_marked(&marks_of(4, &[0]), |_, _| panic!("the caller's callback"));
    }));
    assert!(result.is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(table.len(), 3);
    let got: Vec<u32> = table.entities().iter().map(|e| e.index()).collect();
    assert_eq!(got, [3, 1, 2]);
    assert_eq!(values::<Pos>(&table, p), [Pos(3.0), Pos(1.0), Pos(2.0)]);
    drop(table);
    assert_eq!(drops.load(Ordering::SeqCst), 4, "every value dropped exactly once");
}
