//! A `&mut` taken from a query item cannot outlive the system (here: kept in a `static`).
use std::sync::Mutex;

use folio_schedule::prelude::*;

struct A(u32);

static KEPT: Mutex<Option<&'static mut A>> = Mutex::new(None);

fn keep_first(mut q: Query<&mut A>) {
    if let Some(a) = q.iter_mut().next() {
        *KEPT.lock().unwrap() = Some(a.into_inner());
    }
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(keep_first);
}
