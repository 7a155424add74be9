//! 20,000 archetypes of 5 entities each: they must work without approaching the OS mapping
//! limit (near-empty columns stay on the heap), and stay cheap.

use folio_archetype::{Entity, World};

#[derive(Debug, Clone, Copy, PartialEq)]
struct Data(u64);

macro_rules! markers {
    ($($m:ident),*) => {
        $(#[derive(Debug, Clone, Copy)] struct $m;)*
        const INSERT: &[fn(&mut World, Entity)] = &[$(|w, e| w.insert(e, ($m,)).unwrap()),*];
    };
}
markers!(M0, M1, M2, M3, M4, M5, M6, M7, M8, M9, M10, M11, M12, M13, M14, M15);

/// Live OS mappings of this process.
fn mappings() -> Option<usize> {
    std::fs::read_to_string("/proc/self/maps").ok().map(|s| s.lines().count())
}

#[test]
#[cfg_attr(miri, ignore = "too slow under miri; the storage it uses is covered there")]
fn twenty_thousand_archetypes() {
    const ARCHETYPES: u32 = 20_000;
    let before = mappings();
    let mut world = World::new();
    let mut entities = Vec::new();
    // Spread the combinations over all 16 bits (a multiplier coprime to 2^16 visits distinct
    // values), so the sets differ in many markers, not just the low ones.
    for k in 1..=ARCHETYPES {
        let combo = k.wrapping_mul(40_503) & 0xFFFF;
        for _ in 0..5 {
            let e = world.spawn((Data(combo as u64),));
            for (bit, insert) in INSERT.iter().enumerate() {
                if combo & (1 << bit) != 0 {
                    insert(&mut world, e);
                }
            }
            entities.push((e, combo));
        }
    }
    let full = world.archetypes().iter().filter(|a| a.len() == 5).count();
    assert!(full >= ARCHETYPES as usize, "{full} archetypes with 5 entities");
    for &(e, combo) in entities.iter().step_by(97) {
        assert_eq!(world.get::<Data>(e), Some(&Data(combo as u64)));
    }
    world.check_invariants();
    let stats = world.memory_stats();
    let per_archetype = stats.committed / world.archetypes().len();
    assert!(per_archetype < 4096, "{per_archetype} bytes committed per near-empty archetype");
    if let (Some(before), Some(after)) = (before, mappings()) {
        assert!(after - before.min(after) < 1000, "{before} -> {after} mappings");
    }
    println!(
        "{} archetypes, {} tables, {} committed bytes ({} per archetype)",
        world.archetypes().len(),
        world.tables().len(),
        stats.committed,
        per_archetype
    );
}
