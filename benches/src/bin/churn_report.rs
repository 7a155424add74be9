//! Per-frame distribution of `frame_churn`: 100,000 (Position, Velocity); each frame integrates
//! all, despawns 1% picked at random from the list of live entities (one seeded SplitMix64 for
//! every library, so all pick the same list positions) and spawns 1% new. Every library runs in
//! each form it has (`folio_benches::churn`: `plain`, the world's per-entity API;
//! `schedule_1thread` and `schedule_2threads`, a schedule of an `integrate` system and a churn
//! system with `Commands`), each run in a world built untimed, for `--frames` frames (default
//! 300), each frame timed on its own.
//!
//! The runs go one after the other, in an order rotated by one each round (`--rounds N`,
//! default 3), so no library always runs first or after the same neighbour. The median and the
//! p99 frame are taken over all frames of all rounds; each round's own median is kept too, so
//! the spread between rounds shows how much of a figure is the machine.
//!
//! Output: one JSON object per line on stdout, one per (library, form), for
//! `scripts/perf-report`; a readable table on stderr. Run with
//! `cargo run --profile bench -p folio-benches --bin churn_report [-- --rounds N] [--frames N]`.

use std::time::Instant;

use folio_benches::churn::{Form, Frame, K, Lib, N};

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name} N")))
}

/// Builds `lib`'s world in `form` and times each of `frames` frames, in nanoseconds.
fn run(lib: Lib, form: Form, frames: usize) -> Vec<u64> {
    let mut frame = Frame::new(lib, form).expect("a form the library has");
    let times = frame.run(|step| {
        (0..frames)
            .map(|_| {
                let t = Instant::now();
                step();
                t.elapsed().as_nanos() as u64
            })
            .collect()
    });
    assert_eq!(frame.len(), N, "{} ({}) lost entities", lib.name(), form.name());
    times
}

/// The `p`-quantile of `sorted` (nearest rank).
fn percentile(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = arg(&args, "--rounds", 3);
    let frames = arg(&args, "--frames", 300);
    folio_benches::init_bevy_pool(2);

    let cases: Vec<(Lib, Form)> = Form::ALL
        .iter()
        .flat_map(|&form| Lib::ALL.iter().map(move |&lib| (lib, form)))
        .filter(|&(lib, form)| lib.has(form))
        .collect();
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); cases.len()];
    let mut round_medians: Vec<Vec<u64>> = vec![Vec::new(); cases.len()];
    for round in 0..rounds {
        for k in 0..cases.len() {
            let which = (k + round) % cases.len();
            let (lib, form) = cases[which];
            let mut times = run(lib, form, frames);
            samples[which].extend_from_slice(&times);
            times.sort_unstable();
            round_medians[which].push(percentile(&times, 0.5));
        }
        eprintln!("churn_report: round {} of {rounds} done", round + 1);
    }

    eprintln!(
        "frame_churn: {N} entities, {K} despawned + {K} spawned per frame, {frames} frames x \
         {rounds} rounds"
    );
    eprintln!(
        "{:<9} {:<18} {:>12} {:>12} {:>12}",
        "library", "form", "median ms", "p99 ms", "p99/median"
    );
    for (i, &(lib, form)) in cases.iter().enumerate() {
        let s = &mut samples[i];
        s.sort_unstable();
        let (median, p99, max) = (percentile(s, 0.5), percentile(s, 0.99), s[s.len() - 1]);
        eprintln!(
            "{:<9} {:<18} {:>12.3} {:>12.3} {:>12.2}",
            lib.name(),
            form.name(),
            median as f64 / 1e6,
            p99 as f64 / 1e6,
            p99 as f64 / median as f64
        );
        let per_round: Vec<String> = round_medians[i].iter().map(u64::to_string).collect();
        println!(
            "{{\"workload\":\"frame_churn\",\"lib\":\"{}\",\"form\":\"{}\",\"threads\":{},\
             \"entities\":{N},\"churn\":{K},\"frames\":{frames},\"rounds\":{rounds},\
             \"median_ns\":{median},\"p99_ns\":{p99},\"max_ns\":{max},\
             \"round_medians_ns\":[{}]}}",
            lib.name(),
            form.name(),
            form.threads(),
            per_round.join(",")
        );
    }
}
