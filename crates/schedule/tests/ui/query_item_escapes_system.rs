//! A query item borrows the world for one run of the system: it cannot be kept in a `static`.
use std::sync::Mutex;

use folio_schedule::prelude::*;

struct A(u32);

static KEPT: Mutex<Option<&'static A>> = Mutex::new(None);

fn keep_first(q: Query<&A>) {
    *KEPT.lock().unwrap() = q.iter().next();
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(keep_first);
}
