//! An exclusive system has the world to itself: `&mut World` cannot be combined with other
//! parameters (a `Query` would alias it).
use folio_schedule::prelude::*;

struct A(u32);

fn exclusive(world: &mut World, q: Query<&A>) {
    world.spawn((A(q.iter().count() as u32),));
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(exclusive);
}
