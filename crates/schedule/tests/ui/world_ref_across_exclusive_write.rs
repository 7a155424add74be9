//! In an exclusive system, an `Entity` id may be kept across structural changes (it is a plain
//! id, checked on use), but a component borrowed through the world may not.
use folio_schedule::prelude::*;

struct A(u32);

fn respawn(world: &mut World) {
    let first = world.spawn((A(1),));
    let id: Entity = first; // fine: ids are copied out
    let a: &A = world.get::<A>(first).unwrap();
    world.despawn(id).unwrap();
    println!("{}", a.0);
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(respawn);
}
