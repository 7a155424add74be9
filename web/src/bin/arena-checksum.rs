//! Runs the web demo's arena natively and prints its checksum after N frames: what the page
//! must show after the same frames (CI's web test compares the two).
//!
//! ```sh
//! cargo run --release -p folio-web --bin arena-checksum -- --frames 300
//! ```

use std::process::ExitCode;

use folio_web::{Demo, ENTITIES, SEED};

const USAGE: &str = "usage: arena-checksum [--frames N] [--entities N] [--seed N]";

fn main() -> ExitCode {
    let (mut frames, mut entities, mut seed) = (300u32, ENTITIES, SEED);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (flag.as_str(), value) {
            ("--frames", Some(n)) if n > 0 && n <= u32::MAX as u64 => frames = n as u32,
            ("--entities", Some(n)) if n > 0 && n <= 2_000_000 => entities = n as usize,
            ("--seed", Some(n)) => seed = n,
            _ => {
                eprintln!("arena-checksum: bad argument `{flag}`\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let mut demo = Demo::new(entities, seed);
    for _ in 0..frames {
        if let Err(error) = demo.step() {
            eprintln!("arena-checksum: frame {}: {error}", demo.frame());
            return ExitCode::FAILURE;
        }
    }
    println!("frames {frames} population {} checksum {:016x}", demo.population(), demo.checksum());
    ExitCode::SUCCESS
}
