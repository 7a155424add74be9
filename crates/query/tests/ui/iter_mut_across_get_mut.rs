//! A mutable query iterator cannot be held across `world.get_mut`, which could hand out a
//! second `&mut` to a component the iterator is about to yield.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    let e = world.spawn((A(0),));
    let mut q = world.query::<&mut A>();
    let mut iter = q.iter_mut(&mut world);
    world.get_mut::<A>(e).unwrap().0 = 1;
    if let Some(mut a) = iter.next() {
        a.0 += 1;
    }
}
