//! hierarchy: a parent–child scene graph with the built-in `ChildOf` / `Children`.
//!
//! A child holds `ChildOf(parent)`; the parent's `Children` list is not written by any system:
//! folio keeps it, through inserts, re-parenting, removals and despawns, from a `World` call
//! or a command alike. Despawning a parent despawns its subtree. A system propagates local
//! offsets down the tree into world positions, walking it parents-first.
//!
//! Run it with `cargo run --example hierarchy`.

use folio::prelude::*;

/// Offset from the parent (from the origin for a root).
#[derive(Clone, Copy, Debug)]
struct Local(f32, f32);

/// Position in the world, written by `propagate`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Global(f32, f32);

/// Dropped into a subtree to despawn it from a system.
struct Doomed;

/// World positions, parents before children: every root's is its offset, then the hierarchy
/// is walked parents-first, each child placed from its parent.
fn propagate(world: &mut World) {
    let mut roots = world.query_filtered::<(&Local, &mut Global), Without<ChildOf>>();
    for (&Local(x, y), mut global) in roots.iter_mut(world) {
        *global = Global(x, y);
    }
    let order: Vec<(Entity, Option<Entity>)> = world.iter_hierarchy().collect();
    for (e, parent) in order {
        let Some(parent) = parent else { continue }; // a root: placed above
        let base = *world.get::<Global>(parent).expect("every node has a Global");
        let Some(&Local(x, y)) = world.get::<Local>(e) else { continue };
        *world.get_mut::<Global>(e).expect("every node has a Global") =
            Global(base.0 + x, base.1 + y);
    }
}

/// Despawns every node marked `Doomed`, through commands: their subtrees go with them.
fn reap(doomed: Query<Entity, With<Doomed>>, mut commands: Commands) {
    for e in doomed.iter() {
        commands.despawn(e);
    }
}

fn node(world: &mut World, parent: Option<Entity>, x: f32, y: f32) -> Entity {
    let e = world.spawn((Local(x, y), Global::default()));
    if let Some(parent) = parent {
        world.set_parent(e, parent).unwrap();
    }
    e
}

fn children(world: &World, e: Entity) -> Vec<Entity> {
    world.children(e).to_vec()
}

fn main() {
    let mut world = World::new();

    // ship ─┬─ turret ── barrel
    //       └─ engine
    // station ── dock
    let ship = node(&mut world, None, 10.0, 0.0);
    let turret = node(&mut world, Some(ship), 0.0, 2.0);
    let barrel = node(&mut world, Some(turret), 1.0, 0.0);
    let engine = node(&mut world, Some(ship), -3.0, 0.0);
    let station = node(&mut world, None, 100.0, 100.0);
    let dock = node(&mut world, Some(station), 0.0, -5.0);
    assert_eq!(children(&world, ship), [turret, engine]);
    assert_eq!(children(&world, turret), [barrel]);
    println!("ok: folio built every Children list ({} nodes)", world.len());

    let mut frame = Schedule::new();
    frame.add_systems((propagate, reap.before(propagate)));
    frame.run(&mut world).unwrap();
    assert_eq!(world.get::<Global>(barrel), Some(&Global(11.0, 2.0)));
    assert_eq!(world.get::<Global>(dock), Some(&Global(100.0, 95.0)));
    println!(
        "ok: world positions propagate down the tree: barrel at {:?}",
        world.get::<Global>(barrel).unwrap()
    );

    // Re-parent the turret onto the station: one insert, and both lists follow.
    world.insert(turret, (ChildOf(station),)).unwrap();
    assert_eq!(children(&world, ship), [engine]);
    assert_eq!(children(&world, station), [dock, turret]);
    frame.run(&mut world).unwrap();
    assert_eq!(world.get::<Global>(barrel), Some(&Global(101.0, 102.0)));
    println!("ok: re-parenting moved the turret and its barrel to the station");

    // The station cannot hang from its own grandchild: a typed error, nothing changed.
    let err = world.set_parent(station, barrel).unwrap_err();
    assert!(matches!(err, RelationshipError::Cycle { .. }), "{err}");
    assert_eq!(world.iter_ancestors(barrel).collect::<Vec<_>>(), [turret, station]);
    println!("ok: refused a cycle: {err}");

    // Detach the dock: removing `ChildOf` makes it a root.
    assert_eq!(world.remove_parent(dock), Some(station));
    assert_eq!(children(&world, station), [turret]);
    frame.run(&mut world).unwrap();
    assert_eq!(world.get::<Global>(dock), Some(&Global(0.0, -5.0)));
    println!("ok: a detached node is a root");

    // Despawn the station from a system, through a command: its subtree (turret, barrel) goes
    // with it, the dock (detached) and the ship's subtree stay.
    world.insert(station, (Doomed,)).unwrap();
    frame.run(&mut world).unwrap();
    for gone in [station, turret, barrel] {
        assert!(!world.contains(gone), "{gone:?} went with its ancestor");
    }
    for kept in [ship, engine, dock] {
        assert!(world.contains(kept), "{kept:?} is not in the doomed subtree");
    }
    assert_eq!(world.len(), 3);
    assert_eq!(world.deferred_len(), 0);
    println!("ok: one despawn took a subtree of 3; {} nodes left", world.len());

    // And a direct despawn of a root with a grandchild.
    let child = node(&mut world, Some(engine), 0.0, 1.0);
    world.despawn(ship).unwrap();
    assert!(!world.contains(engine) && !world.contains(child));
    assert_eq!(world.len(), 1);
    world.check_invariants();
    println!("ok: despawning the ship took the engine and its child; the dock is alone");
}
