//! A closure system runs on the schedule's threads: it cannot capture an `Rc`.
use std::rc::Rc;

use folio_schedule::prelude::*;

struct A(u32);

fn main() {
    let total = Rc::new(std::cell::Cell::new(0));
    let mut schedule = Schedule::new();
    schedule.add_systems(move |q: Query<&A>| {
        total.set(total.get() + q.iter().map(|a| a.0).sum::<u32>());
    });
}
