//! `iter_mut` (which hands out `Mut`s) takes the world by `&mut`: a shared borrow will not do.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    world.spawn((A(0),));
    let mut q = world.query::<&mut A>();
    let shared = &world;
    for mut a in q.iter_mut(shared) {
        a.0 += 1;
    }
}
