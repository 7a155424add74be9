//! The items `for_each_combination_mut` hands to its closure live for that call only: kept
//! past it, two combinations sharing an entity would give two live `Mut`s of one value.
use folio_query::*;

struct A(u32);

fn main() {
    let mut world = World::new();
    world.spawn((A(0),));
    world.spawn((A(1),));
    world.spawn((A(2),));
    let mut q = world.query::<&mut A>();
    let mut kept = Vec::new();
    q.for_each_combination_mut::<2>(&mut world, |[a, _b]| kept.push(a));
    for mut a in kept {
        a.0 += 1;
    }
}
