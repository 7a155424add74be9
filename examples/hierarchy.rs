//! hierarchy: a parent–child scene graph kept consistent by component hooks.
//!
//! A child holds `Parent(entity)`; the parent's `Children` list is not written by any system.
//! `Parent`'s hooks keep it: `on_insert` adds the child to its new parent's list, `on_replace`
//! takes it out of the old one (on re-parenting, on removal of `Parent`, and on despawn).
//! `Children`'s `on_remove` despawns the children when their parent is despawned, through
//! `DeferredWorld::defer`, so a whole subtree goes with one `despawn`, from a `World` call or a
//! command alike. A system then propagates local offsets down the tree into world positions.
//!
//! Run it with `cargo run --example hierarchy`.

use folio::prelude::*;

/// The entity this one hangs from.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Parent(Entity);

/// The entities that hang from this one, in the order they were attached. Kept by `Parent`'s
/// hooks alone.
#[derive(Debug, Default)]
struct Children(Vec<Entity>);

/// Offset from the parent (from the origin for a root).
#[derive(Clone, Copy, Debug)]
struct Local(f32, f32);

/// Position in the world, written by `propagate`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Global(f32, f32);

/// Dropped into a subtree to despawn it from a system.
struct Doomed;

fn attach(world: &mut DeferredWorld, child: Entity) {
    let Parent(parent) = *world.get::<Parent>(child).expect("on_insert: the value is in place");
    match world.get_mut::<Children>(parent) {
        Some(children) => children.0.push(child),
        // The parent's first child: giving it a `Children` is structural, so it is deferred
        // (and runs before the insert that attached the child returns).
        None => world.defer(move |world: &mut World| {
            // The parent may have gone meanwhile (then so has the child, by its own hook).
            if let Ok(mut parent) = world.entity_mut(parent) {
                match parent.get_mut::<Children>() {
                    Some(children) => children.0.push(child),
                    None => drop(parent.insert((Children(vec![child]),))),
                }
            }
        }),
    }
}

fn detach(world: &mut DeferredWorld, child: Entity) {
    let Parent(parent) = *world.get::<Parent>(child).expect("on_replace: the old value is there");
    if let Some(children) = world.get_mut::<Children>(parent) {
        children.0.retain(|&c| c != child);
    }
}

fn despawn_children(world: &mut DeferredWorld, parent: Entity) {
    let children = world.get::<Children>(parent).expect("on_remove: the value is there").0.clone();
    world.defer(move |world: &mut World| {
        for child in children {
            // A child re-parented or despawned meanwhile is skipped.
            if world.get::<Parent>(child) == Some(&Parent(parent)) {
                let _ = world.despawn(child);
            }
        }
    });
}

/// World positions, parents before children: each root's subtree is walked depth first.
fn propagate(world: &mut World) {
    let roots: Vec<Entity> =
        world.query_filtered::<Entity, (With<Local>, Without<Parent>)>().iter(world).collect();
    let mut stack: Vec<(Entity, Global)> =
        roots.into_iter().map(|e| (e, Global(0.0, 0.0))).collect();
    while let Some((e, base)) = stack.pop() {
        let Some(&Local(x, y)) = world.get::<Local>(e) else { continue };
        let global = Global(base.0 + x, base.1 + y);
        *world.get_mut::<Global>(e).expect("every node has a Global") = global;
        if let Some(children) = world.get::<Children>(e) {
            stack.extend(children.0.iter().map(|&c| (c, global)));
        }
    }
}

/// Despawns every node marked `Doomed`, through commands: the hooks take their subtrees too.
fn reap(doomed: Query<Entity, With<Doomed>>, mut commands: Commands) {
    for e in doomed.iter() {
        commands.despawn(e);
    }
}

fn node(world: &mut World, parent: Option<Entity>, x: f32, y: f32) -> Entity {
    let e = world.spawn((Local(x, y), Global::default()));
    if let Some(parent) = parent {
        world.insert(e, (Parent(parent),)).unwrap();
    }
    e
}

fn children(world: &World, e: Entity) -> Vec<Entity> {
    world.get::<Children>(e).map(|c| c.0.clone()).unwrap_or_default()
}

fn main() {
    let mut world = World::new();
    world.set_hooks::<Parent>(ComponentHooks::new().on_insert(attach).on_replace(detach));
    world.set_hooks::<Children>(ComponentHooks::new().on_remove(despawn_children));

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
    println!("ok: the hooks built every Children list ({} nodes)", world.len());

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
    world.insert(turret, (Parent(station),)).unwrap();
    assert_eq!(children(&world, ship), [engine]);
    assert_eq!(children(&world, station), [dock, turret]);
    frame.run(&mut world).unwrap();
    assert_eq!(world.get::<Global>(barrel), Some(&Global(101.0, 102.0)));
    println!("ok: re-parenting moved the turret and its barrel to the station");

    // Detach the dock: removing `Parent` makes it a root.
    world.remove::<(Parent,)>(dock).unwrap();
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
