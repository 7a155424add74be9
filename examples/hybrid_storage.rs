//! hybrid_storage: why a tag you toggle often belongs in a sparse set.
//!
//! A table component lives in its entity's table row, next to the entity's other components.
//! Adding or removing one changes the set of table components, so the whole row moves to
//! another table (every component copied) and the table's last row is swapped into the hole.
//! A sparse-set component lives beside the tables, keyed by entity: adding or removing it
//! changes the entity's archetype but not its table, so the row — and every component's
//! address — stays where it is. Register such a tag once with `StorageType::SparseSet`.
//!
//! Run it with `cargo run --example hybrid_storage`.

use std::time::Instant;

use folio::prelude::*;

struct Position(f32, f32);
struct Health(i32);
/// Toggled every few frames: a sparse-set component.
struct Stunned;
/// The same kind of tag, left in table storage (the default), for comparison.
struct Poisoned;

fn main() {
    let mut world = World::new();
    world.register_component::<Stunned>(StorageType::SparseSet).expect("first registration");
    let units: Vec<Entity> =
        (0..4_000).map(|i| world.spawn((Position(i as f32, 0.0), Health(100)))).collect();
    let (e, last) = (units[10], units[units.len() - 1]);
    let before = world.entities().location(e).expect("alive");
    let before_table = world.table_id_of(e).expect("alive").index();
    let address = world.get::<Position>(e).expect("has one") as *const Position;

    // Sparse-set tag: a new archetype, the same table row, the same address.
    world.insert(e, (Stunned,)).expect("alive");
    let stunned = world.entities().location(e).expect("alive");
    let stunned_table = world.table_id_of(e).expect("alive").index();
    println!(
        "insert Stunned (sparse set): archetype {} -> {}, table {} row {} -> table {} row {}",
        before.archetype_id,
        stunned.archetype_id,
        before_table,
        before.table_row,
        stunned_table,
        stunned.table_row
    );
    assert_ne!(stunned.archetype_id, before.archetype_id);
    assert_eq!((stunned_table, stunned.table_row), (before_table, before.table_row));
    assert_eq!(world.get::<Position>(e).expect("has one") as *const Position, address);
    let mut stunned_units = world.query_filtered::<Entity, With<Stunned>>();
    assert_eq!(stunned_units.iter(&world).collect::<Vec<_>>(), [e]);
    world.remove::<(Stunned,)>(e).expect("was stunned");
    assert_eq!(world.entities().location(e).expect("alive").archetype_id, before.archetype_id);

    // Table tag: the row moves to another table, and the last row fills the hole.
    let last_row = world.entities().location(last).expect("alive").table_row;
    world.insert(e, (Poisoned,)).expect("alive");
    let poisoned = world.entities().location(e).expect("alive");
    let poisoned_table = world.table_id_of(e).expect("alive").index();
    let last_now = world.entities().location(last).expect("alive").table_row;
    println!(
        "insert Poisoned (table):     table {} row {} -> table {} row {}; the last entity's row {} -> {}",
        before_table, before.table_row, poisoned_table, poisoned.table_row, last_row, last_now
    );
    assert_ne!(poisoned_table, before_table);
    assert_ne!(world.get::<Position>(e).expect("has one") as *const Position, address);
    assert_eq!(last_now, before.table_row, "the last row was swapped into the hole");
    let moved = world.get::<Position>(e).expect("has one");
    assert_eq!((moved.0, moved.1, world.get::<Health>(e).map(|h| h.0)), (10.0, 0.0, Some(100)));
    world.remove::<(Poisoned,)>(e).expect("was poisoned");

    // What that costs when a system toggles the tag on every unit, 10 times.
    let toggle = |world: &mut World, sparse: bool| {
        let start = Instant::now();
        for _ in 0..10 {
            for &u in &units {
                if sparse {
                    world.insert(u, (Stunned,)).expect("alive");
                } else {
                    world.insert(u, (Poisoned,)).expect("alive");
                }
            }
            for &u in &units {
                if sparse {
                    world.remove::<(Stunned,)>(u).expect("tagged");
                } else {
                    world.remove::<(Poisoned,)>(u).expect("tagged");
                }
            }
        }
        start.elapsed()
    };
    let (sparse, table) = (toggle(&mut world, true), toggle(&mut world, false));
    println!(
        "toggling a tag on {} units 10 times: sparse set {sparse:.1?}, table {table:.1?} (rows copied each time)",
        units.len()
    );
    world.check_invariants();
    println!("ok: the sparse-set tag left the row in place; the table tag moved it");
}
