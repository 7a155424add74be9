//! Systems read components from many threads at once: a `Cell` component (not `Sync`) cannot be
//! queried.
use std::cell::Cell;

use folio_schedule::prelude::*;

struct Counter(Cell<u32>);

fn bump(counters: Query<&Counter>) {
    for c in counters.iter() {
        c.0.set(c.0.get() + 1);
    }
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(bump);
}
