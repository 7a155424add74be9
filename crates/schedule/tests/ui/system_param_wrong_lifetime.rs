//! A `system_param!` field must name the lifetime its parameter borrows with: a `Local` lives
//! in the system's state (`'s`), not in the world (`'w`). A wrong one is a compile error, never
//! a reference that outlives what it borrows.
use folio_schedule::prelude::*;

system_param! {
    struct Counter<'w, 's> {
        runs: Local<'w, u32>,
        commands: Commands<'w, 's>,
    }
}

fn count(mut counter: Counter) {
    *counter.runs += 1;
    let _ = &mut counter.commands;
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(count);
}
