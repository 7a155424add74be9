//! A second `iter_mut` (of another state) needs the world while an item of the first lives.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    world.spawn((A(0),));
    let mut q1 = world.query::<&mut A>();
    let mut q2 = world.query::<&mut A>();
    let mut first = q1.iter_mut(&mut world).next().unwrap();
    let mut second = q2.iter_mut(&mut world).next().unwrap();
    first.0 += 1;
    second.0 += 1;
}
