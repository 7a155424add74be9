//! `Res` borrows the resource for one run of the system: a thread that could outlive the
//! system cannot take it.
use folio_schedule::prelude::*;

struct Config(u32);

fn log_later(config: Res<Config>) {
    std::thread::spawn(move || println!("{}", config.0));
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(log_later);
}
