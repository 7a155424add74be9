//! folio's storage demo: what virtual arrays do that `Vec` cannot.
//!
//! Pushes a million 40-byte transforms into a `VirtualVec` with a fixed reservation and shows
//! that the first element never moved, how little memory was committed past the payload, and how emptied pages go back to the OS
//! in place; then churns a `VirtualPool` and an `Entities` allocator.
//!
//! Run it with `cargo run --release --example storage_demo`.

use std::time::Instant;

use folio::storage::{Entities, VirtualPool, VirtualVec};

#[derive(Clone, Copy, Debug, Default)]
#[allow(dead_code)]
struct Transform {
    position: [f32; 3],
    orientation: [f32; 4],
    scale: [f32; 3],
}

fn main() {
    const N: usize = 1_000_000;
    // A fixed reservation, for all N at once: nothing ever moves. (`VirtualVec::new` reserves
    // 1 MiB and moves into larger reservations as it fills, copying nothing on Linux.)
    let mut transforms = VirtualVec::with_max_capacity(N);
    transforms.push(Transform::default());
    let first = transforms.as_ptr();
    let start = Instant::now();
    let mut slowest = std::time::Duration::ZERO;
    for i in 1..N {
        let t = Instant::now();
        transforms.push(Transform { position: [i as f32, 0.0, 0.0], ..Transform::default() });
        slowest = slowest.max(t.elapsed());
    }
    let payload = N * size_of::<Transform>();
    assert_eq!(transforms.as_ptr(), first, "a fixed reservation never moves its elements");
    // Commits grow a step (1 MiB) at a time, so less than one step is held above the payload.
    assert!(transforms.committed_bytes() - payload < 1 << 20);
    println!("VirtualVec: {N} transforms pushed in {:.1?}", start.elapsed());
    println!("  first element moved: {}", transforms.as_ptr() != first);
    println!("  slowest single push: {slowest:.1?}");
    println!(
        "  reserved {} MiB of address space, committed {:.1} MiB for a {:.1} MiB payload \
         ({} KiB above it)",
        transforms.reserved_bytes() >> 20,
        transforms.committed_bytes() as f64 / (1 << 20) as f64,
        payload as f64 / (1 << 20) as f64,
        (transforms.committed_bytes() - payload) >> 10,
    );
    transforms.truncate(1000);
    transforms.shrink_to_fit().expect("decommit");
    assert!(transforms.committed_bytes() < 1 << 20, "emptied pages went back to the OS");
    assert_eq!(transforms.as_ptr(), first);
    println!(
        "  after truncating to 1,000 and shrink_to_fit: {} KiB committed, first element still at \
         the same address: {}",
        transforms.committed_bytes() >> 10,
        transforms.as_ptr() == first
    );

    let mut pool = VirtualPool::new();
    let ids: Vec<usize> = (0..N).map(|i| pool.insert(i as u64)).collect();
    for id in ids.iter().step_by(2) {
        pool.remove(*id);
    }
    let sum: u64 = pool.iter().map(|(_, v)| *v).sum();
    assert_eq!(pool.len(), N / 2);
    assert_eq!(sum, (1..N as u64).step_by(2).sum::<u64>(), "the odd values stayed");
    println!(
        "VirtualPool: {} live of {} slots after removing every other one; sum {sum}",
        pool.len(),
        pool.slot_count()
    );

    let mut entities = Entities::new();
    let a = entities.alloc();
    entities.free(a);
    let b = entities.alloc();
    println!(
        "Entities: {a} freed, then {b} allocated; {a} alive: {}, {b} alive: {}",
        entities.is_alive(a),
        entities.is_alive(b)
    );
    assert!(!entities.is_alive(a) && entities.is_alive(b), "a freed id is stale once reused");
    assert_eq!((a.index(), b.generation().get()), (b.index(), a.generation().get() + 1));
    println!(
        "ok: no element moved, at most one commit step above the payload, ids are generational"
    );
}
