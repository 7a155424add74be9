//! A resource must be `Send + Sync`: an `Rc` cannot be inserted.
use std::rc::Rc;

use folio_schedule::prelude::*;

fn main() {
    let mut world = World::new();
    world.insert_resource(Rc::new(5u32));
}
