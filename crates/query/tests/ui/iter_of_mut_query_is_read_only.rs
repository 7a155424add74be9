//! `iter(&world)` of a query for `&mut T` yields `&T`: nothing can be written through it.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    world.spawn((A(0),));
    let mut q = world.query::<(Entity, &mut A)>();
    for (_, a) in q.iter(&world) {
        a.0 += 1;
    }
}
