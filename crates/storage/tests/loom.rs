//! Loom model checks of [`Entities::reserve`]: the one place in folio-storage where threads
//! share a hand-rolled atomic (`reserved`, through `src/sync.rs`).
//!
//! Only built with `--cfg folio_loom` (loom's atomics panic outside a model, so this build runs
//! nothing else):
//! `RUSTFLAGS="--cfg folio_loom" cargo test -p folio-storage --release --test loom`.
//!
//! Every test lets loom try every interleaving of the threads' atomic operations (with the
//! default preemption bound: `LOOM_MAX_PREEMPTIONS` unset), then checks what `&self` promises:
//! each reservation is a distinct id, nothing is alive before `flush`, `reserved_len` never
//! reports more than can exist, and `flush` makes every reserved id alive exactly once.
#![cfg(folio_loom)]

use std::collections::HashSet;
use std::sync::Arc;

use folio_storage::{Entities, Entity, EntityLocation, StorageError};
use loom::thread;

fn loc(index: u32) -> EntityLocation {
    EntityLocation { archetype_id: 0, archetype_row: index, table_row: index }
}

/// An allocator with `live` live entities and the first `freed` of them freed again, so
/// reservations come from the freelist first and then from new indices.
fn entities(max: u32, live: usize, freed: usize) -> (Entities, Vec<Entity>) {
    let mut entities = Entities::with_max_entities(max);
    let all: Vec<Entity> = (0..live).map(|_| entities.alloc()).collect();
    for &e in &all[..freed] {
        entities.free(e);
    }
    let alive = all[freed..].to_vec();
    (entities, alive)
}

/// Flushes `entities`, checking that it materialises exactly `reserved` (each once) and places
/// each one.
fn flush_exactly(entities: &mut Entities, reserved: &[Entity]) {
    let mut flushed = HashSet::new();
    entities.flush(|e, location| {
        assert!(flushed.insert(e), "{e} flushed twice");
        *location = loc(e.index());
    });
    let want: HashSet<Entity> = reserved.iter().copied().collect();
    assert_eq!(flushed, want, "flush materialises exactly the reserved ids");
    assert_eq!(entities.reserved_len(), 0);
    for &e in reserved {
        assert!(entities.is_alive(e));
        assert_eq!(entities.location(e), Some(loc(e.index())));
    }
}

#[test]
fn concurrent_reservations_are_distinct_and_flush_once() {
    loom::model(|| {
        // Two free indices and room for new ones: the four reservations take both kinds.
        let (entities, alive) = entities(64, 3, 2);
        let entities = Arc::new(entities);
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let entities = Arc::clone(&entities);
                thread::spawn(move || {
                    let ids = [entities.reserve(), entities.reserve()];
                    // Reserved, not alive, until the flush.
                    assert!(ids.iter().all(|&e| !entities.is_alive(e)));
                    ids
                })
            })
            .collect();
        // What else `&self` allows meanwhile: reads of the pending count and of live entities.
        let pending = entities.reserved_len();
        assert!(pending <= 4, "reserved_len {pending} counts more than was reserved");
        assert!(alive.iter().all(|&e| entities.is_alive(e)));
        let reserved: Vec<Entity> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        let mut entities = Arc::into_inner(entities).expect("the threads are done");

        let distinct: HashSet<Entity> = reserved.iter().copied().collect();
        assert_eq!(distinct.len(), 4, "reserved ids are distinct: {reserved:?}");
        assert_eq!(entities.reserved_len(), 4);
        assert!(distinct.iter().all(|e| !alive.contains(e)));
        flush_exactly(&mut entities, &reserved);
        assert_eq!(entities.len(), alive.len() + 4);
    });
}

#[test]
fn reservations_racing_at_capacity_refuse_exactly_the_excess() {
    loom::model(|| {
        // Room for two more ids (one free index, one new) and three threads asking for one each:
        // the refused reservation undoes its increment while the others may be in flight.
        let (entities, alive) = entities(4, 3, 1);
        assert_eq!(alive.len(), 2);
        let entities = Arc::new(entities);
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let entities = Arc::clone(&entities);
                thread::spawn(move || entities.try_reserve())
            })
            .collect();
        let pending = entities.reserved_len();
        assert!(pending <= 2, "reserved_len {pending} exceeds what can exist");
        let results: Vec<Result<Entity, StorageError>> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        let mut entities = Arc::into_inner(entities).expect("the threads are done");

        let reserved: Vec<Entity> =
            results.iter().filter_map(|r| r.as_ref().ok()).copied().collect();
        assert_eq!(reserved.len(), 2, "exactly the room is handed out: {results:?}");
        assert!(
            results
                .iter()
                .filter_map(|r| r.as_ref().err())
                .all(|e| matches!(e, StorageError::CapacityExceeded { capacity: 4, .. })),
            "{results:?}"
        );
        assert_ne!(reserved[0], reserved[1]);
        assert_eq!(entities.reserved_len(), 2);
        flush_exactly(&mut entities, &reserved);
        assert_eq!(entities.len(), 4);
        // Full now, and the refusals left the counter where it belongs.
        assert!(entities.try_reserve().is_err());
        assert_eq!(entities.reserved_len(), 0);
    });
}

#[test]
fn front_reserved_never_names_a_refused_reservation() {
    loom::model(|| {
        // Full: no free index and no room for a new one, so every reservation is refused. A
        // refused `try_reserve` raises the counter for an instant before it undoes it, and
        // `front_reserved` (a `&self` read) must not take that for a pending reservation.
        let (entities, alive) = entities(2, 2, 0);
        let entities = Arc::new(entities);
        let handle = {
            let entities = Arc::clone(&entities);
            thread::spawn(move || entities.try_reserve())
        };
        let front = entities.front_reserved();
        assert_eq!(front, None, "front_reserved names {front:?}, which nobody reserved");
        assert!(handle.join().unwrap().is_err());
        assert!(alive.iter().all(|&e| entities.is_alive(e)));
    });
}
