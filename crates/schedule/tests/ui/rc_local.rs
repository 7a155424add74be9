//! A `Local` lives in the system, which may run on any thread: an `Rc` `Local` is refused.
use std::rc::Rc;

use folio_schedule::prelude::*;

fn count(_seen: Local<Rc<u32>>) {}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(count);
}
