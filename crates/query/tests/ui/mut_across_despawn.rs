//! A `Mut` from `iter_mut` cannot be held across a structural change of the world.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    let e = world.spawn((A(0),));
    let mut q = world.query::<&mut A>();
    let mut item = q.iter_mut(&mut world).next().unwrap();
    world.despawn(e).unwrap();
    item.0 += 1;
}
