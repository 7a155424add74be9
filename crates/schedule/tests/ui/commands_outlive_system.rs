//! `Commands` write to the system's own buffer, applied after the system: they cannot be
//! handed to a thread that could outlive it.
use folio_schedule::prelude::*;

struct A(u32);

fn spawn_later(mut commands: Commands) {
    std::thread::spawn(move || {
        commands.spawn((A(1),));
    });
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(spawn_later);
}
