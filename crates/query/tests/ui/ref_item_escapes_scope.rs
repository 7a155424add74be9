//! A `&T` item cannot outlive the world it points into.
use folio_query::*;

struct A(u32);

fn main() {
    let a: &A;
    {
        let mut world = World::new();
        world.spawn((A(0),));
        let mut q = world.query::<&A>();
        a = q.iter(&world).next().unwrap();
    }
    println!("{}", a.0);
}
