//! Events read through an `EventReader` borrow the queue for one run: they cannot be kept in a
//! `static`.
use std::sync::Mutex;

use folio_schedule::prelude::*;

struct Hit(u32);

static LAST: Mutex<Option<&'static Hit>> = Mutex::new(None);

fn remember(mut hits: EventReader<Hit>) {
    *LAST.lock().unwrap() = hits.read().last();
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(remember);
}
