//! A query iterator borrows the world: it cannot be held across `world.spawn`, which may add
//! an archetype or move rows.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    world.spawn((A(0),));
    let mut q = world.query::<&A>();
    let mut iter = q.iter(&world);
    world.spawn((A(1),));
    println!("{:?}", iter.next().map(|a| a.0));
}
