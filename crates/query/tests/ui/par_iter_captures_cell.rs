//! The closure of `par_iter_mut` runs on many threads at once: it cannot capture a `Cell`.
use std::cell::Cell;

use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    world.spawn((A(0),));
    let mut q = world.query::<&mut A>();
    let seen = Cell::new(0);
    q.par_iter_mut(&mut world).for_each(|mut a| {
        a.0 += 1;
        seen.set(seen.get() + 1);
    });
}
