//! The tests of [`Entity`] and [`Entities`]: allocation, reuse, locations, reservations, and a
//! property test against a model allocator.

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;
use crate::config::StorageConfig;

impl Entities {
    /// Test hook: gives the live `entity` the generation `generation` and returns its new id.
    fn set_generation(&mut self, entity: Entity, generation: NonZeroU32) -> Entity {
        assert!(self.is_alive(entity));
        self.metas[entity.index as usize].generation = generation;
        Entity { index: entity.index, generation }
    }
}

fn gen_of(g: u32) -> NonZeroU32 {
    NonZeroU32::new(g).unwrap()
}

fn small() -> Entities {
    Entities::with_max_entities(1 << 14)
}

fn loc(n: u32) -> EntityLocation {
    EntityLocation { archetype_id: n, archetype_row: n + 1, table_row: n + 3 }
}

#[test]
fn entity_sizes() {
    assert_eq!(size_of::<Entity>(), 8);
    assert_eq!(size_of::<Option<Entity>>(), 8);
    assert_eq!(size_of::<EntityMeta>(), 16);
    assert_eq!(size_of::<EntityLocation>(), 12);
}

#[test]
fn entity_bits_round_trip_and_format() {
    let e = Entity { index: 12, generation: gen_of(3) };
    assert_eq!(e.to_bits(), (3 << 32) | 12);
    assert_eq!(Entity::from_bits(e.to_bits()), Some(e));
    assert_eq!(Entity::from_bits(12), None);
    let max = Entity { index: u32::MAX, generation: gen_of(u32::MAX) };
    assert_eq!(Entity::from_bits(u64::MAX), Some(max));
    assert_eq!(format!("{e:?}"), "12v3");
    assert_eq!(e.to_string(), "12v3");
    assert_eq!(Entity::from_bits(Entity::PLACEHOLDER.to_bits()), Some(Entity::PLACEHOLDER));
}

#[test]
fn set_block_locations_numbers_the_rows_and_keeps_generations() {
    let mut entities = small();
    let es: Vec<Entity> = (0..6).map(|_| entities.alloc()).collect();
    entities.free(es[1]);
    let again = entities.alloc();
    assert_eq!(again.index(), 1);
    let block = [es[4], again, es[0]];
    entities.set_block_locations(&block, 7, 10);
    for (row, &e) in (10..).zip(&block) {
        assert!(entities.is_alive(e));
        let expected = EntityLocation { archetype_id: 7, archetype_row: row, table_row: row };
        assert_eq!(entities.location(e), Some(expected));
    }
    assert!(!entities.is_alive(es[1]), "the stale id stays dead");
    assert_eq!(entities.location(es[2]), Some(EntityLocation::INVALID), "others untouched");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn set_block_archetype_keeps_table_rows() {
    let mut entities = small();
    let es: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
    for (i, &e) in es.iter().enumerate() {
        entities.set_location(e, loc(i as u32));
    }
    entities.set_block_archetype([es[3], es[1]], 9, 20);
    assert_eq!(
        entities.location(es[3]),
        Some(EntityLocation { archetype_id: 9, archetype_row: 20, table_row: loc(3).table_row })
    );
    assert_eq!(
        entities.location(es[1]),
        Some(EntityLocation { archetype_id: 9, archetype_row: 21, table_row: loc(1).table_row })
    );
    assert_eq!(entities.location(es[0]), Some(loc(0)));
    entities.free(es[2]);
    let dead = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        entities.set_block_archetype([es[2]], 9, 0);
    }));
    assert!(dead.is_err(), "a dead entity is refused");
}

#[test]
#[should_panic(expected = "is not alive")]
fn set_block_locations_refuses_a_dead_entity() {
    let mut entities = small();
    let a = entities.alloc();
    let b = entities.alloc();
    entities.free(b);
    entities.set_block_locations(&[a, b], 0, 0);
}

#[test]
fn new_uses_default_reservation() {
    let mut entities = Entities::default();
    let e = entities.alloc();
    assert_eq!((e.index(), e.generation().get()), (0, 1));
    assert!(entities.is_alive(e));
    assert!(entities.max_entities() <= u32::MAX as usize);
    assert!(format!("{entities:?}").contains("len: 1"));
}

#[test]
fn alloc_free_is_alive() {
    let mut entities = small();
    assert!(entities.is_empty());
    let a = entities.alloc();
    let b = entities.alloc();
    assert_ne!(a, b);
    assert_eq!((a.index(), b.index()), (0, 1));
    assert!(entities.is_alive(a) && entities.is_alive(b));
    assert_eq!(entities.len(), 2);
    assert_eq!(entities.free(a), Some(EntityLocation::INVALID));
    assert!(!entities.is_alive(a));
    assert!(entities.is_alive(b));
    assert_eq!(entities.len(), 1);
    assert!(!entities.is_alive(Entity::PLACEHOLDER));
    // Never allocated.
    assert!(!entities.is_alive(Entity { index: 7, generation: NonZeroU32::MIN }));
    assert_eq!(entities.free(Entity { index: 7, generation: NonZeroU32::MIN }), None);
}

#[test]
fn stale_entity_is_detected_after_free_and_reuse() {
    let mut entities = small();
    let a = entities.alloc();
    entities.set_location(a, loc(1));
    assert_eq!(entities.free(a), Some(loc(1)));
    assert_eq!(entities.free(a), None, "double free");
    assert_eq!(entities.location(a), None);
    // The next generation of the freed slot, fabricated, is not alive either.
    let next = Entity::from_bits(a.to_bits() + (1 << 32)).unwrap();
    assert!(!entities.is_alive(next));
    assert_eq!(entities.free(next), None);
    let b = entities.alloc();
    assert_eq!(b, next);
    assert!(entities.is_alive(b));
    assert!(!entities.is_alive(a));
    assert_eq!(entities.location(b), Some(EntityLocation::INVALID));
    assert_eq!(entities.free(a), None);
    assert!(entities.is_alive(b));
}

#[test]
fn generation_bumps_on_free() {
    let mut entities = small();
    let mut e = entities.alloc();
    for g in 1..5 {
        assert_eq!(e.generation().get(), g);
        entities.free(e);
        e = entities.alloc();
        assert_eq!(e.index(), 0);
    }
    assert_eq!(e.generation().get(), 5);
}

#[test]
fn freelist_is_fifo() {
    let mut entities = small();
    let es: Vec<Entity> = (0..6).map(|_| entities.alloc()).collect();
    for i in [3, 0, 5, 1] {
        entities.free(es[i]);
    }
    let reused: Vec<u32> = (0..4).map(|_| entities.alloc().index()).collect();
    assert_eq!(reused, [3, 0, 5, 1]);
    assert_eq!(entities.alloc().index(), 6);
}

#[test]
fn clear_frees_everything_and_bumps_generations() {
    let mut entities = small();
    let es: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
    entities.free(es[2]);
    entities.clear();
    assert!(entities.is_empty());
    assert!(es.iter().all(|&e| !entities.is_alive(e)));
    // Index 2 was free before the clear, so it comes first; then the rest in index order.
    let again: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
    let got: Vec<(u32, u32)> = again.iter().map(|e| (e.index(), e.generation().get())).collect();
    assert_eq!(got, [(2, 2), (0, 2), (1, 2), (3, 2)]);
}

#[test]
fn clear_keeps_pending_reservations_and_frees_after_them() {
    let mut entities = small();
    let es: Vec<Entity> = (0..3).map(|_| entities.alloc()).collect();
    entities.free(es[1]);
    // One reservation takes the free index 1, the next a new index 3.
    let reserved = [entities.reserve(), entities.reserve()];
    assert_eq!(reserved.map(|e| (e.index(), e.generation().get())), [(1, 2), (3, 1)]);
    entities.clear();
    assert!(entities.is_empty() && !entities.is_alive(es[0]) && !entities.is_alive(es[2]));
    assert_eq!(entities.flush_front(loc(0)).unwrap(), reserved[0]);
    assert_eq!(entities.flush_front(loc(1)).unwrap(), reserved[1]);
    assert!(reserved.iter().all(|&e| entities.is_alive(e)) && entities.len() == 2);
    // The indices the clear freed come back once nothing is pending, in index order.
    let again: Vec<(u32, u32)> =
        (0..3).map(|_| entities.alloc()).map(|e| (e.index(), e.generation().get())).collect();
    assert_eq!(again, [(0, 2), (2, 2), (4, 1)]);
}

#[test]
fn reserved_ids_of_freed_slots_carry_their_bumped_generations() {
    // The freelist keeps each slot's next generation beside its index, so `reserve` reads
    // no meta: what it hands out must still be what the flush makes alive, for slots freed
    // one by one, by `clear`, and while reservations were pending.
    let mut entities = small();
    let es: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
    entities.free(es[1]);
    let freed_twice = entities.alloc();
    assert_eq!((freed_twice.index(), freed_twice.generation().get()), (1, 2));
    entities.free(freed_twice);
    entities.clear();
    let reserved: Vec<Entity> = (0..5).map(|_| entities.reserve()).collect();
    let got: Vec<(u32, u32)> = reserved.iter().map(|e| (e.index(), e.generation().get())).collect();
    assert_eq!(got, [(1, 3), (0, 2), (2, 2), (3, 2), (4, 1)]);
    entities.free(reserved[0]); // not alive yet: refused, nothing changes
    let mut flushed = Vec::new();
    entities.flush_front(loc(0)).unwrap();
    entities.free(reserved[0]); // freed while four reservations are pending
    entities.flush(|e, _| flushed.push(e));
    assert_eq!(flushed, reserved[1..]);
    let again = entities.reserve();
    assert_eq!((again.index(), again.generation().get()), (1, 4));
    entities.flush(|e, _| assert_eq!(e, again));
    assert!(entities.is_alive(again) && !entities.is_alive(reserved[0]));
}

#[test]
fn generation_overflow_retires_the_slot() {
    let mut entities = small();
    let e = entities.alloc();
    let e = entities.set_generation(e, gen_of(u32::MAX - 1));
    entities.free(e);
    let last = entities.alloc();
    assert_eq!((last.index(), last.generation().get()), (0, u32::MAX));
    assert_eq!(entities.free(last), Some(EntityLocation::INVALID));
    assert!(!entities.is_alive(last));
    assert_eq!(entities.resolve_index(0), None);
    // The slot is never handed out again, neither by alloc nor by reserve.
    let fresh: Vec<Entity> = (0..3).map(|_| entities.alloc()).collect();
    assert!(fresh.iter().all(|e| e.index() != 0));
    for &e in &fresh {
        entities.free(e);
    }
    entities.clear();
    let reserved: Vec<Entity> = (0..5).map(|_| entities.reserve()).collect();
    assert!(reserved.iter().all(|e| e.index() != 0));
    entities.flush(|_, _| {});
    assert!(!entities.is_alive(last));
    for g in [1, u32::MAX - 1, u32::MAX] {
        assert!(!entities.is_alive(Entity { index: 0, generation: gen_of(g) }));
    }
}

#[test]
fn capacity_exhaustion() {
    let mut entities = Entities::with_max_entities(3);
    let es: Vec<Entity> = (0..3).map(|_| entities.alloc()).collect();
    assert!(matches!(
        entities.try_alloc(),
        Err(StorageError::CapacityExceeded { capacity: 3, requested: 4 })
    ));
    assert!(entities.try_reserve().is_err());
    assert_eq!(entities.reserved_len(), 0);
    entities.free(es[1]);
    let r = entities.reserve();
    assert_eq!(r.index(), 1);
    assert!(entities.try_reserve().is_err());
    assert_eq!(entities.reserved_len(), 1);
    entities.flush(|_, _| {});
    assert!(entities.is_alive(r));
    assert_eq!(entities.len(), 3);
}

#[test]
#[should_panic(expected = "Entities::alloc: cannot make another entity")]
fn alloc_panics_when_full() {
    let mut entities = Entities::with_max_entities(1);
    entities.alloc();
    entities.alloc();
}

#[test]
#[should_panic(expected = "flush reserved entities first")]
fn alloc_with_pending_reservations_panics() {
    let mut entities = small();
    entities.reserve();
    entities.alloc();
}

#[test]
fn an_index_freed_while_reserved_comes_back_after_the_reservations() {
    let mut entities = small();
    let a = entities.alloc();
    let b = entities.alloc();
    entities.free(a);
    // `r1` takes the free index of `a`; `r2` a new one.
    let (r1, r2) = (entities.reserve(), entities.reserve());
    assert_eq!(r1.index(), a.index());
    assert_eq!(entities.free(b), Some(EntityLocation::INVALID));
    assert!(!entities.is_alive(b));
    // A reservation made now still gets a new index: `b`'s waits for the flush.
    let r3 = entities.reserve();
    assert_eq!((r2.index(), r3.index()), (2, 3));
    assert_eq!(entities.front_reserved(), Some(r1));
    assert_eq!(entities.flush_front(loc(7)).unwrap(), r1);
    assert_eq!(entities.location(r1), Some(loc(7)));
    assert_eq!(entities.front_reserved(), Some(r2));
    let mut seen = Vec::new();
    entities.flush(|e, l| {
        *l = loc(e.index());
        seen.push(e);
    });
    assert_eq!(seen, [r2, r3]);
    assert_eq!(entities.front_reserved(), None);
    let c = entities.alloc();
    assert_eq!(c.index(), b.index(), "b's index joined the freelist with the flush");
    assert_eq!(entities.len(), 4);
}

#[test]
#[should_panic(expected = "nothing is reserved")]
fn flush_front_without_reservations_panics() {
    small().flush_front(EntityLocation::INVALID).unwrap();
}

#[test]
fn locations_set_and_get() {
    let mut entities = small();
    let a = entities.alloc();
    let b = entities.alloc();
    assert_eq!(entities.location(a), Some(EntityLocation::INVALID));
    entities.set_location(a, loc(10));
    entities.set_location(b, loc(20));
    assert_eq!(entities.location(a), Some(loc(10)));
    assert_eq!(entities.location(b), Some(loc(20)));
    assert_eq!(entities.free(a), Some(loc(10)));
    assert_eq!(entities.location(a), None);
    // A reused slot starts with no location.
    let c = entities.alloc();
    assert_eq!(c.index(), a.index());
    assert_eq!(entities.location(c), Some(EntityLocation::INVALID));
}

#[test]
fn location_mut_changes_one_field_of_a_live_entity_only() {
    let mut entities = small();
    let a = entities.alloc();
    let b = entities.alloc();
    entities.set_location(a, loc(10));
    entities.set_location(b, loc(20));
    entities.location_mut(a).unwrap().table_row = 99;
    assert_eq!(entities.location(a), Some(EntityLocation { table_row: 99, ..loc(10) }));
    assert_eq!(entities.location(b), Some(loc(20)));
    entities.free(a);
    assert!(entities.location_mut(a).is_none(), "freed");
    let c = entities.alloc();
    assert_eq!(c.index(), a.index());
    assert!(entities.location_mut(a).is_none(), "stale: the slot holds another generation");
    assert_eq!(entities.location_mut(c).copied(), Some(EntityLocation::INVALID));
    let never = Entity::from_bits((7u64 << 32) | 1_000).unwrap();
    assert!(entities.location_mut(never).is_none(), "never made");
}

#[test]
#[should_panic(expected = "is not alive")]
fn set_location_of_stale_entity_panics() {
    let mut entities = small();
    let a = entities.alloc();
    entities.free(a);
    entities.alloc();
    entities.set_location(a, loc(1));
}

#[test]
fn resolve_index_finds_the_live_entity() {
    let mut entities = small();
    let a = entities.alloc();
    assert_eq!(entities.resolve_index(0), Some(a));
    assert_eq!(entities.resolve_index(1), None);
    assert_eq!(entities.resolve_index(u32::MAX), None);
    entities.free(a);
    assert_eq!(entities.resolve_index(0), None);
    let b = entities.alloc();
    assert_eq!(entities.resolve_index(0), Some(b));
}

#[test]
fn reserve_uses_freed_indices_first() {
    let mut entities = small();
    let es: Vec<Entity> = (0..4).map(|_| entities.alloc()).collect();
    entities.free(es[2]);
    entities.free(es[0]);
    let r: Vec<Entity> = (0..3).map(|_| entities.reserve()).collect();
    let got: Vec<(u32, u32)> = r.iter().map(|e| (e.index(), e.generation().get())).collect();
    assert_eq!(got, [(2, 2), (0, 2), (4, 1)]);
    assert_eq!(entities.reserved_len(), 3);
    assert!(r.iter().all(|&e| !entities.is_alive(e)), "reserved ids are not alive yet");
    assert_eq!(entities.len(), 2);
    let mut seen = Vec::new();
    entities.flush(|e, location| {
        seen.push(e);
        *location = loc(e.index());
    });
    assert_eq!(seen, r);
    assert_eq!(entities.reserved_len(), 0);
    assert_eq!(entities.len(), 5);
    for &e in &r {
        assert_eq!(entities.location(e), Some(loc(e.index())));
    }
    // Flushing with nothing pending does nothing.
    entities.flush(|_, _| panic!("nothing is pending"));
    assert_eq!(entities.alloc().index(), 5);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn flush_after_panicking_init_keeps_the_rest_reserved() {
    let mut entities = small();
    let a = entities.alloc();
    entities.free(a);
    let r: Vec<Entity> = (0..3).map(|_| entities.reserve()).collect();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        entities.flush(|e, _| assert_ne!(e, r[1], "boom"));
    }));
    assert!(result.is_err());
    assert!(entities.is_alive(r[0]) && entities.is_alive(r[1]));
    assert!(!entities.is_alive(r[2]));
    assert_eq!(entities.reserved_len(), 1);
    let mut rest = Vec::new();
    entities.flush(|e, _| rest.push(e));
    assert_eq!(rest, [r[2]]);
    assert_eq!(entities.len(), 3);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_refused_meta_commit_fails_the_flush_before_anything_changes() {
    use crate::vm::FaultyPages;
    let source = FaultyPages::failing_commit(0);
    let mut entities = Entities::with_config(&StorageConfig::new().with_source(source.clone()));
    // 1,024 metas fill the column's heap block; the next one moves it into its reservation,
    // which commits.
    let es: Vec<Entity> = (0..1024).map(|_| entities.alloc()).collect();
    entities.free(es[7]);
    entities.free(es[3]);
    let r: Vec<Entity> = (0..3).map(|_| entities.reserve()).collect();
    assert_eq!(r.iter().map(|e| e.index()).collect::<Vec<_>>(), [7, 3, 1024]);
    source.fail_commit_after(1);
    let err = entities.try_flush(|e, _| panic!("{e} was materialised"));
    assert!(matches!(err, Err(StorageError::Commit { .. })), "{err:?}");
    // Nothing changed: the reservations (free-listed indices too) are pending, not alive.
    assert_eq!(entities.reserved_len(), 3);
    assert_eq!(entities.front_reserved(), Some(r[0]));
    assert!(r.iter().all(|&e| !entities.is_alive(e)));
    assert_eq!(entities.len(), 1022);
    // The panicking form says why, and changes nothing either.
    source.fail_commit_after(1);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        entities.flush(|e, _| panic!("{e} was materialised"));
    }));
    let message = panicked.unwrap_err();
    let message = message.downcast_ref::<String>().expect("a formatted message");
    assert!(message.contains("cannot make room for 3 reserved entities"), "{message}");
    assert_eq!((entities.reserved_len(), entities.len()), (3, 1022));
    // With memory back, the same reservations materialise, in order.
    let mut seen = Vec::new();
    entities
        .try_flush(|e, l| {
            seen.push(e);
            *l = loc(e.index());
        })
        .unwrap();
    assert_eq!(seen, r);
    assert_eq!((entities.reserved_len(), entities.len()), (0, 1025));
    assert!(r.iter().all(|&e| entities.location(e) == Some(loc(e.index()))));
    assert_eq!(entities.alloc().index(), 1025);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn an_index_freed_while_reserved_is_released_when_the_last_init_panics() {
    let mut entities = small();
    let a = entities.alloc();
    let r = entities.reserve();
    entities.free(a);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        entities.flush(|_, _| panic!("boom"));
    }));
    assert!(result.is_err());
    assert!(entities.is_alive(r));
    assert_eq!(entities.reserved_len(), 0);
    assert_eq!(entities.alloc().index(), a.index(), "a's index joined the freelist");
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn reserve_from_many_threads() {
    let (threads, per_thread) = if cfg!(miri) { (3, 20) } else { (4, 1000) };
    let mut entities = small();
    let existing: Vec<Entity> = (0..64).map(|_| entities.alloc()).collect();
    let freed: Vec<Entity> = existing.iter().copied().step_by(2).collect();
    for &e in &freed {
        entities.free(e);
    }
    let alive_before: HashSet<Entity> =
        existing.iter().copied().filter(|&e| entities.is_alive(e)).collect();

    let shared = &entities;
    let reserved: Vec<Entity> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| (0..per_thread).map(|_| shared.reserve()).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let total = threads * per_thread;
    let distinct: HashSet<Entity> = reserved.iter().copied().collect();
    assert_eq!(distinct.len(), total, "reserved ids are distinct");
    assert_eq!(entities.reserved_len(), total);
    assert!(reserved.iter().all(|&e| !entities.is_alive(e)));
    // Every freed index is reused (with its bumped generation) before any new one.
    for e in &freed {
        let next = Entity { index: e.index(), generation: gen_of(2) };
        assert!(distinct.contains(&next));
    }
    assert!(distinct.is_disjoint(&alive_before));

    let mut flushed = HashSet::new();
    entities.flush(|e, location| {
        assert!(flushed.insert(e));
        *location = loc(e.index());
    });
    assert_eq!(flushed, distinct);
    assert_eq!(entities.len(), alive_before.len() + total);
    for &e in &reserved {
        assert!(entities.is_alive(e));
        assert_eq!(entities.location(e), Some(loc(e.index())));
    }
    assert!(alive_before.iter().all(|&e| entities.is_alive(e)));
}

#[derive(Clone, Debug)]
enum Op {
    Alloc,
    Free(usize),
    FreeStale(usize),
    SetLocation(usize, u32),
    Reserve(u8),
    Flush,
    FlushFront(u32),
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Alloc),
        4 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::FreeStale),
        2 => (any::<usize>(), any::<u32>()).prop_map(|(i, l)| Op::SetLocation(i, l)),
        3 => (1u8..6).prop_map(Op::Reserve),
        2 => Just(Op::Flush),
        2 => any::<u32>().prop_map(Op::FlushFront),
        1 => Just(Op::Clear),
    ]
}

/// The model: which ids are live, pending or dead, where each live one is, and the order in
/// which free indices must come back.
#[derive(Default)]
struct Model {
    live: Vec<(Entity, EntityLocation)>,
    pending: Vec<Entity>,
    dead: Vec<Entity>,
    /// Every id ever handed out (allocated or reserved).
    handed_out: HashSet<Entity>,
    free: VecDeque<u32>,
    /// Indices freed while reservations were pending; they join `free` with the flush.
    deferred: Vec<u32>,
    indices: u32,
}

impl Model {
    fn hand_out(&mut self, e: Entity) -> Result<(), TestCaseError> {
        prop_assert!(self.handed_out.insert(e), "{e} handed out twice");
        Ok(())
    }

    /// The id the next alloc / flushed reservation must be, given the FIFO freelist.
    fn next_id(&self, k: usize, generations: &dyn Fn(u32) -> u32) -> (u32, u32) {
        match self.free.get(k) {
            Some(&i) => (i, generations(i)),
            None => (self.indices + (k - self.free.len()) as u32, 1),
        }
    }

    fn flush(&mut self, entities: &mut Entities) -> Result<(), TestCaseError> {
        let mut seen = Vec::new();
        entities.flush(|e, location| {
            *location = loc(e.index());
            seen.push(e);
        });
        prop_assert_eq!(&seen, &self.pending);
        for e in self.pending.drain(..) {
            if self.free.front() == Some(&e.index()) {
                self.free.pop_front();
            } else {
                prop_assert_eq!(e.index(), self.indices);
                self.indices += 1;
            }
            self.live.push((e, loc(e.index())));
        }
        self.free.extend(self.deferred.drain(..));
        Ok(())
    }

    fn flush_front(&mut self, entities: &mut Entities, l: u32) -> Result<(), TestCaseError> {
        let e = self.pending.remove(0);
        prop_assert_eq!(entities.flush_front(loc(l)).unwrap(), e);
        if self.free.front() == Some(&e.index()) {
            self.free.pop_front();
        } else {
            prop_assert_eq!(e.index(), self.indices);
            self.indices += 1;
        }
        self.live.push((e, loc(l)));
        if self.pending.is_empty() {
            self.free.extend(self.deferred.drain(..));
        }
        Ok(())
    }
}

const MAX: u32 = 24;

fn check(entities: &Entities, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(entities.len(), model.live.len());
    prop_assert_eq!(entities.reserved_len(), model.pending.len());
    prop_assert_eq!(entities.front_reserved(), model.pending.first().copied());
    for &(e, location) in &model.live {
        prop_assert!(entities.is_alive(e));
        prop_assert_eq!(entities.location(e), Some(location));
        prop_assert_eq!(entities.resolve_index(e.index()), Some(e));
        let next = Entity { index: e.index(), generation: e.generation().saturating_add(1) };
        prop_assert!(!entities.is_alive(next));
    }
    for &e in model.dead.iter().chain(&model.pending) {
        prop_assert!(!entities.is_alive(e));
        prop_assert_eq!(entities.location(e), None);
    }
    Ok(())
}

fn run_model(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut entities = Entities::with_max_entities(MAX);
    let mut model = Model::default();
    // The generation a free index comes back with, read from the allocator's own answer for
    // the dead id it last held (dead ids of an index are pushed in order).
    let next_generation = |model: &Model, index: u32| {
        model.dead.iter().rev().find(|e| e.index() == index).map_or(1, |e| e.generation().get() + 1)
    };
    for op in ops {
        let needs_flush = matches!(op, Op::Alloc | Op::Clear);
        if needs_flush && !model.pending.is_empty() {
            model.flush(&mut entities)?;
        }
        match op {
            Op::Alloc => match entities.try_alloc() {
                Ok(e) => {
                    let gens = |i| next_generation(&model, i);
                    let (index, generation) = model.next_id(0, &gens);
                    prop_assert_eq!((e.index(), e.generation().get()), (index, generation));
                    model.hand_out(e)?;
                    if model.free.pop_front().is_none() {
                        model.indices += 1;
                    }
                    model.live.push((e, EntityLocation::INVALID));
                }
                Err(_) => prop_assert_eq!(model.live.len(), MAX as usize),
            },
            Op::Free(i) if !model.live.is_empty() => {
                let (e, location) = model.live.swap_remove(i % model.live.len());
                prop_assert_eq!(entities.free(e), Some(location));
                if model.pending.is_empty() {
                    model.free.push_back(e.index());
                } else {
                    model.deferred.push(e.index());
                }
                model.dead.push(e);
            }
            Op::FreeStale(i) if !model.dead.is_empty() => {
                let e = model.dead[i % model.dead.len()];
                prop_assert_eq!(entities.free(e), None);
            }
            Op::SetLocation(i, l) if !model.live.is_empty() => {
                let slot = i % model.live.len();
                let location = loc(l % 1000);
                entities.set_location(model.live[slot].0, location);
                model.live[slot].1 = location;
            }
            Op::Reserve(n) => {
                for _ in 0..n {
                    let k = model.pending.len();
                    match entities.try_reserve() {
                        Ok(e) => {
                            let gens = |i| next_generation(&model, i);
                            let (index, generation) = model.next_id(k, &gens);
                            prop_assert_eq!((e.index(), e.generation().get()), (index, generation));
                            model.hand_out(e)?;
                            model.pending.push(e);
                        }
                        Err(_) => {
                            // Refused once the freelist and the new indices are spent;
                            // indices freed meanwhile wait for the flush.
                            let room = model.free.len() + (MAX - model.indices) as usize;
                            prop_assert_eq!(k, room);
                        }
                    }
                }
            }
            Op::Flush => model.flush(&mut entities)?,
            Op::FlushFront(l) if !model.pending.is_empty() => {
                model.flush_front(&mut entities, l % 1000)?;
            }
            Op::Clear => {
                entities.clear();
                let mut live: Vec<Entity> = model.live.drain(..).map(|(e, _)| e).collect();
                live.sort_by_key(|e| e.index());
                model.free.extend(live.iter().map(|e| e.index()));
                model.dead.extend(live);
            }
            _ => {}
        }
        check(&entities, &model)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn model_no_live_id_is_handed_out_twice(
        ops in proptest::collection::vec(op(), 1..if cfg!(miri) { 40 } else { 300 })
    ) {
        run_model(ops)?;
    }
}
