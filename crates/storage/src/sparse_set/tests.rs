//! The tests of the sparse sets: lookups, paging, stale entities, drops, change ticks, a
//! property test against a `HashMap` model, and exhausted reservations.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::test_util::{Align64, Counter, MIRI, Tracked};

fn e(index: u32, generation: u32) -> Entity {
    Entity::from_bits(((generation as u64) << 32) | index as u64).unwrap()
}

#[test]
fn insert_get_remove_swap_removes() {
    let mut s = SparseSet::new();
    assert_eq!(s.insert(e(5, 1), "five"), None);
    assert_eq!(s.insert(e(70_000, 1), "far"), None);
    assert_eq!(s.insert(e(2, 1), "two"), None);
    assert_eq!(s.insert(e(5, 1), "FIVE"), Some("five"));
    assert_eq!(s.len(), 3);
    assert_eq!(s.get(e(5, 1)), Some(&"FIVE"));
    assert_eq!(s.remove(e(5, 1)), Some("FIVE"));
    assert_eq!(s.entities(), &[e(2, 1), e(70_000, 1)]);
    assert_eq!(s.values(), &["two", "far"]);
    assert_eq!(s.get(e(70_000, 1)), Some(&"far"));
    *s.get_mut(e(2, 1)).unwrap() = "deux";
    assert_eq!(s.iter().collect::<Vec<_>>(), [(e(2, 1), &"deux"), (e(70_000, 1), &"far")]);
}

#[test]
fn sparse_pages_are_allocated_on_demand() {
    let mut s = SparseSet::new();
    s.insert(e(3_000_000, 1), 1u8);
    assert_eq!(s.as_erased().sparse_pages(), 1);
    s.insert(e(3_000_001, 1), 2u8);
    assert_eq!(s.as_erased().sparse_pages(), 1);
    s.insert(e(0, 1), 3u8);
    assert_eq!(s.as_erased().sparse_pages(), 2);
}

#[test]
fn memory_counts_the_entity_list_and_the_sparse_pages() {
    let mut s = SparseSet::new();
    s.insert(e(0, 1), 1u32);
    let (reserved, committed, used) = s.as_erased().memory();
    assert_eq!(used, 12, "one value and its two ticks");
    // Far-apart indices: one more page each, counted as committed (not as used).
    s.insert(e(3_000_000, 1), 2u32);
    s.insert(e(6_000_000, 1), 3u32);
    assert_eq!(s.as_erased().sparse_pages(), 3);
    let (reserved2, committed2, used2) = s.as_erased().memory();
    assert_eq!(used2, 36);
    let page = PAGE_LEN * size_of::<u32>();
    assert!(committed2 >= committed + 2 * page, "{committed} -> {committed2}");
    assert!(reserved2 >= reserved + 2 * page);
    assert!(used2 <= committed2 && committed2 <= reserved2);
    // The page table (one slot per page up to the highest index) and the entity list count.
    let slots = 6_000_000 / PAGE_LEN + 1;
    assert!(committed2 >= 3 * page + slots * size_of::<usize>() + 3 * size_of::<Entity>());
}

#[test]
fn stale_entities_are_not_found_and_get_replaced() {
    let drops = Counter::default();
    let mut s = SparseSet::new();
    s.insert(e(1, 1), Tracked::new(1, &drops));
    assert!(s.get(e(1, 2)).is_none());
    assert!(s.remove(e(1, 2)).is_none());
    assert!(!s.contains(e(1, 2)));
    // A newer generation at the same index replaces the stale value, dropping it.
    assert!(s.insert(e(1, 2), Tracked::new(2, &drops)).is_none());
    assert_eq!(drops.get(), 1);
    assert!(!s.contains(e(1, 1)));
    assert_eq!(s.get(e(1, 2)).unwrap().value, 2);
    assert_eq!(s.len(), 1);
}

#[test]
fn drops_each_value_once() {
    let drops = Counter::default();
    let mut s = SparseSet::new();
    for i in 0..50 {
        s.insert(e(i, 1), Tracked::new(i as u64, &drops));
    }
    let mut erased = ComponentSparseSet::of::<Tracked>();
    for i in 0..10 {
        let t = std::mem::ManuallyDrop::new(Tracked::new(i, &drops));
        // SAFETY: the set holds `Tracked`; `t` is a local; `ManuallyDrop` hands ownership over.
        unsafe { erased.insert(e(i as u32, 1), (&*t as *const Tracked).cast(), 0).unwrap() };
    }
    assert!(erased.remove_and_drop(e(3, 1)));
    assert!(!erased.remove_and_drop(e(3, 1)));
    assert_eq!(drops.get(), 1, "the removed value was dropped");
    drop(erased);
    assert_eq!(drops.get(), 10, "the erased set dropped its other 9");
    drop(s.remove(e(7, 1)));
    s.clear();
    assert_eq!(drops.get(), 10 + 50);
    s.insert(e(1, 1), Tracked::new(1, &drops));
    drop(s);
    assert_eq!(drops.get(), 61);
}

#[test]
fn zst_and_over_aligned_values() {
    let mut z = SparseSet::new();
    z.insert(e(4, 1), ());
    z.insert(e(9, 1), ());
    assert_eq!(z.remove(e(4, 1)), Some(()));
    assert!(z.contains(e(9, 1)));
    let mut a = SparseSet::new();
    for i in 0..100 {
        a.insert(e(i * 13, 1), Align64(i as u64));
    }
    assert!(a.iter().all(|(ent, v)| v.0 * 13 == ent.index() as u64));
    assert!(a.values().iter().all(|v| (v as *const Align64 as usize).is_multiple_of(64)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if MIRI { 4 } else { 256 }))]
    #[test]
    fn behaves_like_a_hashmap(ops in proptest::collection::vec((0u8..3, 0u32..300, 1u32..4, any::<i32>()), 0..if MIRI { 60 } else { 2000 })) {
        // The model keeps at most one generation per index, as the set does.
        let mut model: HashMap<u32, (Entity, i32)> = HashMap::new();
        let mut set = SparseSet::new();
        for (kind, index, generation, value) in ops {
            let ent = e(index, generation);
            match kind {
                0 => {
                    let old = model.insert(index, (ent, value)).filter(|(o, _)| *o == ent).map(|(_, v)| v);
                    prop_assert_eq!(set.insert(ent, value), old);
                }
                1 => {
                    let expected = match model.get(&index) {
                        Some(&(o, v)) if o == ent => { model.remove(&index); Some(v) }
                        _ => None,
                    };
                    prop_assert_eq!(set.remove(ent), expected);
                }
                _ => {
                    let expected = model.get(&index).filter(|(o, _)| *o == ent).map(|(_, v)| v);
                    prop_assert_eq!(set.get(ent), expected);
                }
            }
            prop_assert_eq!(set.len(), model.len());
        }
        for (ent, v) in set.iter() {
            prop_assert_eq!(model.get(&ent.index()), Some(&(ent, *v)));
        }
    }
}

#[test]
fn ticks_follow_values() {
    // SAFETY: the layout and drop fn are `u64`'s (none), a `Send + Sync` type.
    let mut s = unsafe { ComponentSparseSet::new(Layout::new::<u64>(), None) };
    let put = |s: &mut ComponentSparseSet, entity: Entity, value: u64, tick: u32| {
        // SAFETY: a `u64` on the stack, copied in (it needs no drop).
        unsafe { s.insert(entity, (&value as *const u64).cast(), tick) }.unwrap();
    };
    put(&mut s, e(1, 1), 10, 1);
    put(&mut s, e(2, 1), 20, 2);
    put(&mut s, e(3, 1), 30, 3);
    assert_eq!(s.added_ticks(), &[1, 2, 3]);
    assert_eq!(s.changed_ticks(), &[1, 2, 3]);
    // Replacing the same entity's value: changed only.
    put(&mut s, e(1, 1), 11, 7);
    assert_eq!((s.added_ticks()[0], s.changed_ticks()[0]), (1, 7));
    // A newer generation at the same index is a new value: added too.
    put(&mut s, e(2, 2), 21, 8);
    assert_eq!((s.added_ticks()[1], s.changed_ticks()[1]), (8, 8));
    // Swap-remove moves the last entry's ticks with it.
    assert!(s.remove_and_drop(e(1, 1)));
    assert_eq!(s.entities(), &[e(3, 1), e(2, 2)]);
    assert_eq!(s.added_ticks(), &[3, 8]);
    assert_eq!(s.changed_ticks(), &[3, 8]);
    s.ticks_mut().1[0] = 9;
    assert_eq!(s.changed_ticks(), &[9, 8]);
    s.clear();
    assert!(s.added_ticks().is_empty() && s.changed_ticks().is_empty());
}

#[test]
fn an_exhausted_reservation_fails_the_insert_and_the_set_keeps_working() {
    // One 4 KiB page per column: 512 `u64` values, 1,024 ticks.
    let config = StorageConfig::new().with_reserve_bytes(4096);
    // SAFETY: the layout and drop fn are `u64`'s (none), a `Send + Sync` type.
    let mut s = unsafe { ComponentSparseSet::with_config(Layout::new::<u64>(), None, &config) };
    let put = |s: &mut ComponentSparseSet, index: u32, tick: u32| {
        let value = u64::from(index) * 3;
        // SAFETY: a `u64` on the stack, copied in (it needs no drop).
        unsafe { s.insert(e(index, 1), (&raw const value).cast(), tick) }
    };
    let mut room = 0;
    while put(&mut s, room, room).is_ok() {
        room += 1;
        assert!(s.cap >= s.len() && s.cap <= s.column().capacity(), "cap at {room}");
    }
    assert_eq!(room, 512, "the values' page holds 512");
    let err = put(&mut s, 9_999, 1).unwrap_err();
    assert!(matches!(err, StorageError::CapacityExceeded { .. }), "{err:?}");
    assert_eq!(s.len(), 512, "the failed insert changed nothing");
    assert!(!s.contains(e(9_999, 1)));
    assert_eq!(s.try_reserve(1).map_err(|_| ()), Err(()), "still full");
    // A removal makes room again, without another grow.
    assert!(s.remove_and_drop(e(7, 1)));
    assert_eq!(s.entities()[7], e(511, 1), "the last entry moved into the hole");
    assert_eq!(s.added_ticks()[7], 511);
    put(&mut s, 9_999, 1).unwrap();
    assert_eq!(s.dense_index(e(9_999, 1)), Some(511));
    assert_eq!(s.dense_index(e(511, 1)), Some(7));
    // SAFETY: the column holds `u64`s.
    let values = unsafe { s.column().as_slice::<u64>() };
    for (i, entity) in s.entities().iter().enumerate() {
        assert_eq!(values[i], u64::from(entity.index()) * 3, "value of {entity:?}");
        assert_eq!(s.dense_index(*entity), Some(i));
    }
}
