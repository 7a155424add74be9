//! A component holding a raw pointer is not `Send`: `Commands` cannot spawn it either.
use folio_schedule::prelude::*;

struct Handle(*mut u8);

fn spawner(mut commands: Commands) {
    commands.spawn((Handle(std::ptr::null_mut()),));
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(spawner);
}
