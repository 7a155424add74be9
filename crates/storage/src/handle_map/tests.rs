//! The tests of [`HandleMap`]: its operations one by one, and a property test against a
//! `HashMap` model.

use super::*;
use crate::vm::{FaultyPages, default_source};
use proptest::prelude::*;
use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

/// A small map, so tests stay cheap under miri (whose heap "reservations" are real memory).
fn small<T>(tag: u16) -> HandleMap<T> {
    HandleMap::with_source(tag, 1024, default_source())
}

impl<T> HandleMap<T> {
    /// Asserts every invariant written on the fields.
    fn check_invariants(&self) {
        assert_eq!(self.items.len(), self.dense_to_sparse.len());
        for (i, &index) in self.dense_to_sparse.iter().enumerate() {
            match self.slots[index as usize] {
                Slot::Occupied { dense, .. } => assert_eq!(dense as usize, i),
                other => panic!("slot {index} of dense {i} is {other:?}"),
            }
        }
        let free = self.slots.iter().filter(|s| matches!(s, Slot::Free { .. })).count();
        let occupied = self.slots.iter().filter(|s| matches!(s, Slot::Occupied { .. })).count();
        assert_eq!(occupied, self.items.len());
        let (mut at, mut last, mut seen) = (self.free_head, NIL, 0);
        while at != NIL {
            let Slot::Free { next, .. } = self.slots[at as usize] else {
                panic!("freelist reaches non-free slot {at}")
            };
            (last, at, seen) = (at, next, seen + 1);
            assert!(seen <= free, "freelist has a cycle");
        }
        assert_eq!(seen, free);
        assert_eq!(last, self.free_tail);
    }
}

#[test]
fn handle_is_eight_bytes_and_round_trips() {
    assert_eq!(size_of::<Handle>(), 8);
    assert_eq!(size_of::<Option<Handle>>(), 8);
    assert!(size_of::<Slot>() <= 8);
    let h = Handle { tag: 0xBEEF, generation: NonZeroU16::new(0x1234).unwrap(), index: 7 };
    assert_eq!(h.to_bits(), 0xBEEF_1234_0000_0007);
    assert_eq!(Handle::from_bits(h.to_bits()), Some(h));
    assert_eq!(Handle::from_bits(0xBEEF_0000_0000_0007), None);
    assert_eq!((h.index(), h.generation().get(), h.type_tag()), (7, 0x1234, 0xBEEF));
    let mut hs: Vec<Handle> =
        [0x0001_0001_0000_0009u64, 0x0000_0002_0000_0001, 0x0000_0001_0000_0005]
            .into_iter()
            .map(|b| Handle::from_bits(b).unwrap())
            .collect();
    hs.sort();
    let bits: Vec<u64> = hs.iter().map(|h| h.to_bits()).collect();
    assert!(bits.is_sorted(), "handles order like their bits: {bits:x?}");
}

#[test]
fn insert_get_remove() {
    let mut map = small(0);
    assert!(map.is_empty());
    let a = map.insert(10);
    let b = map.insert(20);
    let c = map.insert(30);
    assert_eq!((map.len(), map.get(a), map.get(b), map[c]), (3, Some(&10), Some(&20), 30));
    *map.get_mut(b).unwrap() += 1;
    map[c] += 2;
    assert_eq!(map.values(), [10, 21, 32]);
    assert_eq!(map.remove(a), Some(10));
    // `c` was swapped into the hole and must still resolve.
    assert_eq!(map.values(), [32, 21]);
    assert_eq!((map.get(b), map.get(c), map.get(a)), (Some(&21), Some(&32), None));
    assert_eq!(map.handle_at(0), Some(c));
    assert_eq!(map.handle_at(2), None);
    let collected: Vec<(Handle, i32)> = map.iter().map(|(h, v)| (h, *v)).collect();
    assert_eq!(collected, [(c, 32), (b, 21)]);
    for (_, v) in map.iter_mut() {
        *v *= 10;
    }
    map.values_mut()[0] += 1;
    assert_eq!((map[b], map[c]), (210, 321));
    assert_eq!(format!("{map:?}").matches("Handle").count(), 2);
    map.check_invariants();
}

#[test]
fn stale_after_remove() {
    let mut map = small(0);
    let a = map.insert("a");
    map.remove(a);
    let b = map.insert("b");
    // The slot is reused with the next generation; the old handle stays dead.
    assert_eq!((b.index(), b.generation().get()), (a.index(), a.generation().get() + 1));
    assert!(!map.contains(a));
    assert_eq!(map.get(a), None);
    assert_eq!(map.get_mut(a), None);
    assert_eq!(map.remove(a), None);
    assert_eq!(map.len(), 1);
    assert_eq!(map[b], "b");
    map.check_invariants();
}

#[test]
#[should_panic(expected = "is stale")]
fn indexing_with_a_stale_handle_panics() {
    let mut map = small(0);
    let a = map.insert(1);
    map.remove(a);
    map.insert(2);
    let _ = map[a];
}

#[test]
fn stale_after_clear() {
    let mut map = small(0);
    let hs: Vec<Handle> = (0..5).map(|i| map.insert(i)).collect();
    map.remove(hs[1]);
    map.clear();
    map.check_invariants();
    assert!(map.is_empty());
    assert!(hs.iter().all(|&h| !map.contains(h)));
    let new: Vec<Handle> = (0..5).map(|i| map.insert(i)).collect();
    assert_eq!(map.slot_count(), 5, "clear reuses the slots");
    for (&old, &new) in hs.iter().zip(&new) {
        assert_eq!(map.get(old), None);
        assert_ne!(old, new);
    }
    map.check_invariants();
}

#[test]
fn wrong_type_tag_is_rejected() {
    let mut apples = HandleMap::with_type_tag(1);
    let mut oranges = small(2);
    let apple = apples.insert("apple");
    let orange = oranges.insert("orange");
    assert_eq!((apple.index(), apple.generation()), (orange.index(), orange.generation()));
    assert_eq!(apples.type_tag(), 1);
    assert_eq!((apples.get(orange), oranges.get(apple)), (None, None));
    assert_eq!((apples.remove(orange), oranges.get_mut(apple)), (None, None));
    let forged = Handle::from_bits(apple.to_bits() ^ (3 << 48)).unwrap();
    assert!(!apples.contains(forged));
    assert_eq!(apples.get(apple), Some(&"apple"));
    assert!(apples.miss_reason(orange).contains("type tag 2"));
}

#[test]
fn reset_forgets_slots_and_generations() {
    let mut map = small(0);
    let a = map.insert(1);
    map.insert(2);
    map.remove(a);
    map.reset();
    map.check_invariants();
    assert_eq!((map.len(), map.slot_count()), (0, 0));
    let b = map.insert(3);
    // Documented: generations restart, so an old handle can alias a new value.
    assert_eq!(b, a);
    assert_eq!(map.get(a), Some(&3));
}

/// Insertion order of values 0..n scrambled by a fixed permutation.
fn scrambled(n: u32) -> impl Iterator<Item = u32> {
    (0..n).map(move |i| (i * 7 + 3) % n)
}

#[test]
fn defragment_in_steps_keeps_handles() {
    let n = 40;
    let mut map = small(0);
    let handles: Vec<(Handle, u32)> = scrambled(n).map(|v| (map.insert(v), v)).collect();
    let inversions: usize = (0..n as usize)
        .map(|i| (i + 1..n as usize).filter(|&j| map.values()[i] > map.values()[j]).count())
        .sum();
    let mut total = 0;
    loop {
        let swaps = map.defragment(u32::cmp, 5);
        assert!(swaps <= 5);
        map.check_invariants();
        for &(h, v) in &handles {
            assert_eq!(map.get(h), Some(&v));
        }
        if swaps == 0 {
            break;
        }
        total += swaps;
    }
    assert_eq!(total, inversions, "each swap removes exactly one inversion");
    assert!(map.values().is_sorted());
}

#[test]
fn defragment_unlimited_is_a_stable_sort() {
    let mut map = small(0);
    // (key, insertion order): equal keys must keep insertion order.
    let handles: Vec<Handle> = scrambled(30).map(|v| map.insert((v % 4, v))).collect();
    let mut expected: Vec<(u32, u32)> = map.values().to_vec();
    expected.sort_by_key(|&(k, _)| k);
    assert!(map.defragment(|a, b| a.0.cmp(&b.0), 0) > 0);
    assert_eq!(map.values(), expected);
    assert_eq!(map.defragment(|a, b| a.0.cmp(&b.0), 0), 0);
    for (&h, v) in handles.iter().zip(scrambled(30)) {
        assert_eq!(map[h], (v % 4, v));
    }
    map.check_invariants();
}

struct Counted(u32, Rc<Cell<usize>>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.set(self.1.get() + 1);
    }
}

#[test]
fn every_value_is_dropped_exactly_once() {
    let drops = Rc::new(Cell::new(0));
    let mut map = small(0);
    let hs: Vec<Handle> = scrambled(10).map(|v| map.insert(Counted(v, drops.clone()))).collect();
    drop(map.remove(hs[3]));
    drop(map.remove(hs[7]));
    assert_eq!(drops.get(), 2);
    assert!(map.remove(hs[3]).is_none());
    map.defragment(|a, b| a.0.cmp(&b.0), 0);
    assert_eq!(drops.get(), 2, "defragment moves values, it drops none");
    map.clear();
    assert_eq!(drops.get(), 10);
    for v in 0..5 {
        map.insert(Counted(v, drops.clone()));
    }
    map.reset();
    assert_eq!(drops.get(), 15);
    for v in 0..3 {
        map.insert(Counted(v, drops.clone()));
    }
    drop(map);
    assert_eq!(drops.get(), 18);
}

#[test]
fn generation_overflow_retires_the_slot() {
    let mut map = small(0);
    let a = map.insert('a');
    map.remove(a);
    // Fast-forward free slot 0 to the last generation.
    let Slot::Free { next, .. } = map.slots[0] else { panic!("slot 0 is free") };
    map.slots[0] = Slot::Free { next, generation: NonZeroU16::MAX };
    let last = map.insert('b');
    assert_eq!((last.index(), last.generation()), (0, NonZeroU16::MAX));
    map.remove(last);
    assert_eq!(map.slots[0], Slot::Retired);
    map.check_invariants();
    let c = map.insert('c');
    assert_eq!(c.index(), 1, "a retired slot is never handed out again");
    assert_eq!((map.get(last), map.get(a)), (None, None));
    // `clear` retires a live slot at the last generation too.
    map.slots[1] = Slot::Occupied { dense: 0, generation: NonZeroU16::MAX };
    map.clear();
    assert_eq!(map.slots[1], Slot::Retired);
    map.check_invariants();
    assert_eq!(map.insert('d').index(), 2);
    // A reset makes retired slots usable again.
    map.reset();
    assert_eq!(map.insert('e').index(), 0);
}

#[test]
fn exhausted_index_space_is_an_error() {
    let mut map = HandleMap::with_source(0, 2, default_source());
    let a = map.insert(1);
    map.insert(2);
    let err = map.try_insert(3).unwrap_err();
    assert_eq!(err.value, 3);
    assert!(matches!(err.error, StorageError::CapacityExceeded { .. }), "{err}");
    assert_eq!(map.len(), 2);
    map.remove(a);
    map.try_insert(3).unwrap();
    map.check_invariants();

    // Retired slots use up the index space as well.
    let mut map = HandleMap::with_source(0, 1, default_source());
    map.insert(1);
    map.slots[0] = Slot::Occupied { dense: 0, generation: NonZeroU16::MAX };
    map.clear();
    assert!(map.try_insert(2).is_err());
}

#[test]
#[should_panic(expected = "HandleMap::insert (type tag 9): reservation exhausted")]
fn insert_panics_when_full() {
    let mut map = HandleMap::with_source(9, 1, default_source());
    map.insert(1);
    map.insert(2);
}

#[test]
fn failed_commit_leaves_the_map_unchanged() {
    // Three arrays commit on the first insert; fail each in turn.
    for k in 1..=3 {
        let mut map = HandleMap::with_source(0, 64, FaultyPages::failing_commit(k));
        let err = map.try_insert(5).unwrap_err();
        assert!(matches!(err.error, StorageError::Commit { .. }), "{err}");
        assert_eq!((map.len(), map.slot_count()), (0, 0));
        map.check_invariants();
        let h = map.insert(6);
        assert_eq!(map[h], 6);
        map.check_invariants();
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(i32),
    Remove(usize),
    Get(usize),
    Set(usize, i32),
    Defragment(usize),
    Clear,
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<i32>().prop_map(Op::Insert),
        4 => any::<usize>().prop_map(Op::Remove),
        3 => any::<usize>().prop_map(Op::Get),
        2 => (any::<usize>(), any::<i32>()).prop_map(|(i, v)| Op::Set(i, v)),
        1 => (0..8usize).prop_map(Op::Defragment),
        1 => Just(Op::Clear),
        1 => Just(Op::Reset),
    ]
}

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if cfg!(miri) {
        config.cases = 4;
        config.failure_persistence = None;
    }
    config
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn behaves_like_a_hash_map(ops in prop::collection::vec(op(), 0..200)) {
        let mut map = HandleMap::with_source(3, 256, default_source());
        let mut model: HashMap<Handle, i32> = HashMap::new();
        // Every handle handed out since the last reset, live or stale.
        let mut seen: Vec<Handle> = Vec::new();
        let pick = |seen: &[Handle], i: usize| (!seen.is_empty()).then(|| seen[i % seen.len()]);
        for op in ops {
            match op {
                Op::Insert(v) => {
                    let h = map.insert(v);
                    prop_assert!(model.insert(h, v).is_none(), "handle {:?} reused", h);
                    seen.push(h);
                }
                Op::Remove(i) => if let Some(h) = pick(&seen, i) {
                    prop_assert_eq!(map.remove(h), model.remove(&h));
                },
                Op::Get(i) => if let Some(h) = pick(&seen, i) {
                    prop_assert_eq!(map.get(h), model.get(&h));
                    prop_assert_eq!(map.contains(h), model.contains_key(&h));
                    let other_tag = Handle::from_bits(h.to_bits() ^ (1 << 48)).unwrap();
                    prop_assert_eq!(map.get(other_tag), None);
                },
                Op::Set(i, v) => if let Some(h) = pick(&seen, i) {
                    if let Some(slot) = map.get_mut(h) {
                        *slot = v;
                    }
                    if let Some(slot) = model.get_mut(&h) {
                        *slot = v;
                    }
                },
                Op::Defragment(max) => {
                    let swaps = map.defragment(i32::cmp, max);
                    prop_assert!(max == 0 || swaps <= max);
                    if max == 0 {
                        prop_assert!(map.values().is_sorted());
                    }
                }
                Op::Clear => {
                    map.clear();
                    model.clear();
                }
                Op::Reset => {
                    map.reset();
                    model.clear();
                    seen.clear();
                }
            }
            map.check_invariants();
            prop_assert_eq!(map.len(), model.len());
        }
        for &h in &seen {
            prop_assert_eq!(map.get(h), model.get(&h));
        }
        let mut listed: Vec<(Handle, i32)> = map.iter().map(|(h, v)| (h, *v)).collect();
        let mut expected: Vec<(Handle, i32)> = model.into_iter().collect();
        listed.sort();
        expected.sort();
        prop_assert_eq!(listed, expected);
    }
}
