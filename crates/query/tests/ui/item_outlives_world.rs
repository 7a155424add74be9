//! A `Mut` from `iter_mut` borrows the world: the world cannot be dropped while it lives.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    world.spawn((A(0),));
    let mut q = world.query::<&mut A>();
    let mut item = q.iter_mut(&mut world).next().unwrap();
    drop(world);
    item.0 += 1;
}
