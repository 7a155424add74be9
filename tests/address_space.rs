//! The address-space policy (docs/GUIDE.md, "Targets and memory"): columns start with a small
//! reservation and grow into larger ones, keeping every value and the iteration order; many
//! worlds live side by side in one process and give their address space back; and a world
//! keeps working under an address-space limit (`prlimit --as`, in a child process).
//!
//! `ten_thousand_worlds_of_five_thousand_entities_live_at_once` spawns 50,000,000 entities:
//! release builds only (CI runs it in its release-only step).

use folio::prelude::*;
use folio::storage::vm::FIRST_RESERVE_BYTES;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Position([f32; 3]);

#[derive(Clone, Copy, Debug, PartialEq)]
struct Velocity(u64);

/// A component that needs dropping: a heap value moved with its column.
#[derive(Clone, Debug, PartialEq)]
struct Name(String);

fn position(i: u64) -> Position {
    Position([i as f32, (i * 2) as f32, (i % 7) as f32])
}

/// The world's `(entity, position, velocity, name)` in query order.
fn rows(world: &World) -> Vec<(Entity, Position, Velocity, Name)> {
    let mut query = world.query::<(Entity, &Position, &Velocity, &Name)>();
    query.iter(world).map(|(e, p, v, n)| (e, *p, *v, n.clone())).collect()
}

/// A world whose columns grow past their first reservation (moving, several times) keeps every
/// value, and iterates its rows in the order it did before the moves.
#[test]
fn a_world_whose_columns_grow_past_their_first_reservation_keeps_values_and_order() {
    let mut world = World::new();
    let first = if cfg!(miri) { 500 } else { 10_000 };
    let more = if cfg!(miri) { 3_000 } else { 400_000 };
    let mut spawned = Vec::new();
    for i in 0..first {
        spawned.push(world.spawn((position(i), Velocity(i), Name(i.to_string()))));
    }
    // Swap-removes make the order differ from the spawn order.
    for &e in spawned.iter().step_by(7) {
        world.despawn(e).unwrap();
    }
    let before = rows(&world);
    let reserved_before = world.memory_stats().reserved;
    for i in first..first + more {
        world.spawn((position(i), Velocity(i), Name(i.to_string())));
    }
    let after = rows(&world);
    assert_eq!(&after[..before.len()], &before[..], "the rows before the moves, in order");
    for (e, p, v, n) in &after {
        assert_eq!((*p, n.0.parse::<u64>().unwrap()), (position(v.0), v.0), "{e}");
    }
    assert_eq!(after.len(), before.len() + more as usize);
    let stats = world.memory_stats();
    if !cfg!(miri) {
        // 400,000 12-byte positions outgrow a 1 MiB first reservation twice.
        assert!(stats.reserved > reserved_before + 4 * FIRST_RESERVE_BYTES, "{stats:?}");
    }
    assert_eq!((stats.smaller_reservations, stats.heap_page_columns), (0, 0));
    assert!(stats.used <= stats.committed && stats.committed <= stats.reserved);
    world.check_invariants();
}

/// This process's address space (`VmSize`), in bytes.
#[cfg(target_os = "linux")]
fn vm_size() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmSize:")).expect("a VmSize line");
    let kib: usize = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("kB");
    kib << 10
}

/// Makes 10,000 worlds of 5,000 entities each, checks a sample of them, and returns them with
/// the number of their columns on heap pages.
fn ten_thousand_worlds() -> (Vec<World>, usize) {
    let mut worlds = Vec::with_capacity(10_000);
    for w in 0..10_000u64 {
        let mut world = World::new();
        world.spawn_batch((0..5_000).map(|i| (position(i), Velocity(w))));
        worlds.push(world);
    }
    for (w, world) in worlds.iter().enumerate().step_by(97) {
        let mut query = world.query::<(&Position, &Velocity)>();
        assert_eq!(query.iter(world).count(), 5_000);
        assert!(
            query
                .iter(world)
                .enumerate()
                .all(|(i, (p, v))| { *p == position(i as u64) && v.0 == w as u64 })
        );
        world.check_invariants();
    }
    let on_heap_pages = worlds.iter().map(|w| w.memory_stats().heap_page_columns).sum();
    (worlds, on_heap_pages)
}

/// A server that hosts many matches in one process: 10,000 worlds of 5,000 entities each, all
/// alive at once, with no error (with 16 GiB reservations the address space ran out after 744
/// of them; with fixed 1 MiB ones, the kernel's mapping limit after 2,977: past folio's
/// mapping budget, columns go to heap pages instead). Dropped, every OS reservation is
/// released (up to the 64 kept for reuse), and the heap pages go back to the allocator: a
/// second round of 10,000 worlds reuses that address space instead of adding to it.
#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(debug_assertions, ignore = "2 x 50,000,000 spawns: release builds only")]
fn ten_thousand_worlds_of_five_thousand_entities_live_at_once() {
    use folio::storage::vm::mapping_budget;
    // Stdout's buffer, before the worlds: made later, it could sit on top of their heap blocks.
    println!("10,000 worlds of 5,000 entities, twice");
    let (before, live_before) = (vm_size(), mapping_budget().1);
    let (worlds, on_heap_pages) = ten_thousand_worlds();
    let (peak, live_peak) = (vm_size(), mapping_budget().1);
    println!(
        "round 1: {} MiB of address space, {live_peak} OS reservations, {on_heap_pages} \
         columns on heap pages",
        (peak - before) >> 20
    );
    assert!(on_heap_pages > 0 && live_peak <= mapping_budget().0);
    drop(worlds);
    let (after, live_after) = (vm_size(), mapping_budget().1);
    println!(
        "dropped: {} MiB of address space above the start (the allocator's), {live_after} OS \
         reservations",
        after.saturating_sub(before) >> 20
    );
    // The spare list keeps up to 64 reservations for reuse.
    assert!(live_after <= live_before + 64, "{live_after} reservations left of {live_peak}");
    let (worlds, _) = ten_thousand_worlds();
    let again = vm_size();
    println!("round 2: {} MiB of address space", (again - before) >> 20);
    assert!(
        again < peak + (512 << 20),
        "address space not reused: {} MiB at the first peak, {} MiB at the second",
        peak >> 20,
        again >> 20
    );
    drop(worlds);
    assert!(mapping_budget().1 <= live_before + 64);
}

/// Set in the child process that [`a_forty_thousand_entity_game_fits_under_ulimit_v`] starts.
const AS_CHILD: &str = "FOLIO_ADDRESS_LIMIT_CHILD";

/// 40,000 entities of four components (three table columns that leave their heap blocks, a
/// sparse set) under `prlimit --as` of 1 GiB and 4 GiB: no error, no fallback,
/// and a few MiB of address space reserved (with 16 GiB reservations the game stopped at
/// about 20,000 entities under `ulimit -v` of 4, 16 and 64 GB).
#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "starts a process")]
fn a_forty_thousand_entity_game_fits_under_ulimit_v() {
    if std::env::var_os(AS_CHILD).is_some() {
        return forty_thousand_entities();
    }
    let exe = std::env::current_exe().unwrap();
    for limit in [1u64 << 30, 4 << 30] {
        let out = std::process::Command::new("prlimit")
            .arg(format!("--as={limit}"))
            .arg(&exe)
            .args(["--exact", "a_forty_thousand_entity_game_fits_under_ulimit_v", "--nocapture"])
            .env(AS_CHILD, "1")
            .output()
            .unwrap_or_else(|e| panic!("cannot start prlimit {exe:?}: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child under --as={limit} failed:\n{stdout}\n{stderr}");
        assert!(stdout.contains("40000 entities:"), "the child did not run:\n{stdout}\n{stderr}");
    }
}

fn forty_thousand_entities() {
    struct Burning;
    let mut world = World::new();
    world.register_component::<Burning>(StorageType::SparseSet).unwrap();
    for i in 0..40_000u64 {
        let e = world.spawn((position(i), Velocity(i), Name(format!("agent {i}"))));
        if i % 3 == 0 {
            world.insert(e, (Burning,)).unwrap();
        }
    }
    let stats = world.memory_stats();
    assert_eq!((stats.smaller_reservations, stats.heap_page_columns), (0, 0), "{stats:?}");
    assert!(stats.reserved < 64 << 20, "{stats:?}");
    assert_eq!(rows(&world).len(), 40_000);
    world.check_invariants();
    println!("40000 entities: {} bytes reserved", stats.reserved);
}
