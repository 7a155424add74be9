//! Items of `get_many_mut` borrow the world until they are dropped.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    let a = world.spawn((A(0),));
    let b = world.spawn((A(1),));
    let mut q = world.query::<&mut A>();
    let [mut x, _y] = q.get_many_mut(&mut world, [a, b]).unwrap();
    world.spawn((A(2),));
    x.0 += 1;
}
