//! Sets are typed: a string is not a `SystemSet`, so `in_set("physics")` (where a typo such as
//! "physcis" would silently leave a system unordered) does not compile.
use folio_schedule::prelude::*;

fn step() {}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(step.in_set("physics"));
}
