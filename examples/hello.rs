//! hello: the smallest folio program.
//!
//! Teaches the three things every folio program does: spawn entities with components (any
//! `Send + Sync + 'static` type is a component, no derive needed), query them, and write a
//! system — a plain function whose parameters say what it reads and writes — and run it in a
//! `Schedule`.
//!
//! Run it with `cargo run --example hello`.

use folio::prelude::*;

#[derive(Debug, PartialEq)]
struct Position {
    x: f32,
    y: f32,
}

struct Velocity {
    x: f32,
    y: f32,
}

struct Name(&'static str);

/// A system: every entity with a `Position` and a `Velocity` moves by its velocity.
fn movement(mut bodies: Query<(&mut Position, &Velocity)>) {
    for (mut position, velocity) in bodies.iter_mut() {
        position.x += velocity.x;
        position.y += velocity.y;
    }
}

fn main() {
    let mut world = World::new();
    let ball =
        world.spawn((Name("ball"), Position { x: 0.0, y: 0.0 }, Velocity { x: 1.0, y: 2.0 }));
    let wall = world.spawn((Name("wall"), Position { x: 10.0, y: 0.0 }));

    // A query made from the world: every entity that has a `Name` and a `Position`.
    let mut named = world.query::<(&Name, &Position)>();
    for (name, position) in named.iter(&world) {
        println!("spawned {:<4} at ({}, {})", name.0, position.x, position.y);
    }
    assert_eq!(named.iter(&world).count(), 2);

    // The same work as a system, run three frames by a schedule.
    let mut schedule = Schedule::new();
    schedule.add_systems(movement);
    for _ in 0..3 {
        schedule.run(&mut world).expect("the schedule runs");
    }
    for (name, position) in named.iter(&world) {
        println!("after 3 frames, {:<4} is at ({}, {})", name.0, position.x, position.y);
    }
    assert_eq!(world.get::<Position>(ball), Some(&Position { x: 3.0, y: 6.0 }));
    // The wall has no `Velocity`, so `movement`'s query never saw it.
    assert_eq!(world.get::<Position>(wall), Some(&Position { x: 10.0, y: 0.0 }));
    println!("ok: the ball moved, the wall did not");
}
