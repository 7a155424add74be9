//! A component must be `Send + Sync`: an `Rc` (which is neither) cannot be spawned.
use std::rc::Rc;

use folio_schedule::prelude::*;

fn main() {
    let mut world = World::new();
    world.spawn((Rc::new(5u32),));
}
