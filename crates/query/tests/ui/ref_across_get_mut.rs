//! An item of `iter(&world)` cannot be held across `world.get_mut`.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    let e = world.spawn((A(0),));
    let mut q = world.query::<&A>();
    let item = q.iter(&world).next().unwrap();
    world.get_mut::<A>(e).unwrap().0 = 1;
    println!("{}", item.0);
}
