//! The items `for_each_many_mut` hands to its closure live for that call only: kept past it,
//! an entity listed twice would give two live `Mut`s of one value.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    let e = world.spawn((A(0),));
    let mut q = world.query::<&mut A>();
    let mut kept = Vec::new();
    q.for_each_many_mut(&mut world, [e, e], |a| kept.push(a));
    for mut a in kept {
        a.0 += 1;
    }
}
