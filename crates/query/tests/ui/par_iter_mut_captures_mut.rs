//! The closure of `par_iter_mut` runs on many threads at once: it cannot write to a captured
//! variable of the caller.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    world.spawn((A(0),));
    let mut q = world.query::<&mut A>();
    let mut total = 0;
    q.par_iter_mut(&mut world).for_each(|a| total += a.0);
    println!("{total}");
}
