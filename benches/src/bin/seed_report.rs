//! `seed_report`: the `insert_10m` figures that criterion cannot give, as markdown tables.
//!
//! For 10,000,000 [`Transform`] pushes, one at a time, into `VirtualVec::new` (`OsPages`: 4 KiB
//! pages, commits past 1 MiB prefaulted), `VirtualVec` with huge pages past `HUGE_PAGES_FROM`
//! (`OsPagesWith::HUGE`), `VirtualVec` as it was before (`OsPagesWith::PLAIN`), `Vec::new` and
//! `Vec::with_capacity`:
//! - memory above the 400 MB payload: what the container holds (`committed_bytes` for a
//!   `VirtualVec`, `capacity × 40` for a `Vec`) and what the process really gained, from
//!   `/proc/self/statm` (resident set) and `/proc/self/status` (`VmHWM`, the peak, reset through
//!   `/proc/self/clear_refs` before each case);
//! - the minor page faults taken (`/proc/self/stat`) and the process's `AnonHugePages` after the
//!   pushes (`/proc/self/smaps_rollup`);
//! - the total time of the pushes;
//! - in a second pass, the slowest single push, each push timed with `Instant`, and how often the
//!   process was preempted meanwhile.
//!
//! A reference row refills a `Vec` whose pages are already resident: the cost of the writes
//! alone, so the difference to the other rows is what page faults and growth cost.
//!
//! Every case runs in a fresh container that is dropped before the next case starts. With
//! `--rounds N` the whole report is repeated N times, each round starting one case later, so a
//! first-run effect does not always land on the same case.
//!
//! `--only TEXT` keeps the cases whose name contains `TEXT` (to count one case's system calls
//! and faults under `perf stat`).
//!
//! Run: `cargo run --profile bench -p folio-benches --bin seed_report [-- --rounds N]
//! [--only TEXT]`.

use std::fs;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use folio_benches::{TEN_MILLION, Transform};
use folio_storage::vm::{
    DEFAULT_RESERVE_BYTES, HUGE_PAGES_FROM, OsPages, OsPagesWith, PREFAULT_FROM, PageSource,
};
use folio_storage::{COMMIT_STEP_MAX, VirtualVec};

/// Bytes of payload: 10M × 40.
const PAYLOAD: usize = TEN_MILLION * size_of::<Transform>();

/// One container under test.
#[derive(Clone, Copy, PartialEq)]
enum Case {
    VirtualVecNew,
    /// `VirtualVec` with huge pages (`OsPagesWith::HUGE`).
    VirtualVecHuge,
    /// `VirtualVec` as it was before prefaulting (`OsPagesWith::PLAIN`).
    VirtualVecPlain,
    VecNew,
    VecWithCapacity,
    /// `Vec::with_capacity`, filled, cleared and timed while filled again: the pages are already
    /// resident, so this is the cost of the writes alone, without page faults.
    VecRefill,
}

impl Case {
    fn name(self) -> String {
        match self {
            Case::VirtualVecNew => "`VirtualVec::new`".into(),
            Case::VirtualVecHuge => "`VirtualVec` huge pages".into(),
            Case::VirtualVecPlain => "`VirtualVec` before (not prefaulted)".into(),
            Case::VecNew => "`Vec::new`".into(),
            Case::VecWithCapacity => "`Vec::with_capacity`".into(),
            Case::VecRefill => "`Vec` refill, pages resident (reference)".into(),
        }
    }

    /// Bytes that become resident during the pushes if nothing is wasted.
    fn grows_by(self) -> i64 {
        if self == Case::VecRefill { 0 } else { PAYLOAD as i64 }
    }
}

/// A container of either kind, so one loop drives them all.
enum Container {
    Virtual(VirtualVec<Transform>),
    Std(Vec<Transform>),
}

impl Container {
    fn new(case: Case) -> Self {
        match case {
            Case::VirtualVecNew => Self::Virtual(VirtualVec::new()),
            Case::VirtualVecHuge | Case::VirtualVecPlain => {
                let source = if case == Case::VirtualVecPlain {
                    OsPagesWith::PLAIN
                } else {
                    OsPagesWith::HUGE
                };
                let max_len = DEFAULT_RESERVE_BYTES / size_of::<Transform>();
                Self::Virtual(VirtualVec::with_source(max_len, Arc::new(source)))
            }
            Case::VecNew => Self::Std(Vec::new()),
            Case::VecWithCapacity => Self::Std(Vec::with_capacity(TEN_MILLION)),
            Case::VecRefill => {
                let mut v = Vec::with_capacity(TEN_MILLION);
                v.extend((0..TEN_MILLION).map(Transform::from_index));
                v.clear();
                Self::Std(black_box(v))
            }
        }
    }

    /// Bytes the container holds for its elements.
    fn held_bytes(&self) -> usize {
        match self {
            Self::Virtual(v) => v.committed_bytes(),
            Self::Std(v) => v.capacity() * size_of::<Transform>(),
        }
    }
}

/// Pushes 10M transforms into `container`, untimed inside; returns it and the total time.
fn push_all(mut container: Container) -> (Container, Duration) {
    let start = Instant::now();
    match &mut container {
        Container::Virtual(v) => {
            for i in 0..TEN_MILLION {
                v.push(Transform::from_index(i));
            }
        }
        Container::Std(v) => {
            for i in 0..TEN_MILLION {
                v.push(Transform::from_index(i));
            }
        }
    }
    let elapsed = start.elapsed();
    (black_box(container), elapsed)
}

/// The slowest pushes of one pass in which every push is timed on its own.
struct Hitches {
    slowest: Duration,
    slowest_index: usize,
    over_100us: usize,
    over_1ms: usize,
    total: Duration,
}

/// Pushes 10M transforms into `container`, timing each push.
fn push_all_timed(container: Container) -> Hitches {
    fn run(mut push: impl FnMut(Transform)) -> Hitches {
        let mut h = Hitches {
            slowest: Duration::ZERO,
            slowest_index: 0,
            over_100us: 0,
            over_1ms: 0,
            total: Duration::ZERO,
        };
        let all = Instant::now();
        for i in 0..TEN_MILLION {
            let value = Transform::from_index(i);
            let start = Instant::now();
            push(value);
            let took = start.elapsed();
            if took > h.slowest {
                h.slowest = took;
                h.slowest_index = i;
            }
            h.over_100us += usize::from(took > Duration::from_micros(100));
            h.over_1ms += usize::from(took > Duration::from_millis(1));
        }
        h.total = all.elapsed();
        h
    }
    match container {
        Container::Virtual(mut v) => run(|t| v.push(t)),
        Container::Std(mut v) => run(|t| v.push(t)),
    }
}

/// Resident bytes, from `/proc/self/statm`.
fn rss_bytes() -> Option<usize> {
    let statm = fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * OsPages.page_size())
}

/// A `kB` field of `/proc/self/status`, in bytes.
fn status_field(field: &str) -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// The peak resident bytes since the last [`reset_peak_rss`] (`VmHWM`).
fn peak_rss_bytes() -> Option<usize> {
    status_field("VmHWM:").map(|kib| (kib as usize) << 10)
}

/// Resets `VmHWM` to the current resident size (Linux ≥ 4.0); false if the kernel refused.
fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// How often the process was preempted so far (`nonvoluntary_ctxt_switches`).
fn involuntary_switches() -> Option<u64> {
    status_field("nonvoluntary_ctxt_switches:")
}

/// The process's anonymous memory in transparent huge pages (`AnonHugePages` of
/// `/proc/self/smaps_rollup`), in bytes.
fn anon_huge_bytes() -> Option<usize> {
    let rollup = fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = rollup.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    let kib: usize = line["AnonHugePages:".len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib << 10)
}

/// Minor page faults so far, field 10 of `/proc/self/stat`.
fn minor_faults() -> Option<u64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(7)?.parse().ok()
}

fn mb(bytes: i64) -> String {
    format!("{:+.3} MB", bytes as f64 / 1e6)
}

fn delta<T: TryInto<i64>>(after: Option<T>, before: Option<T>) -> Option<i64> {
    Some(after?.try_into().ok()? - before?.try_into().ok()?)
}

fn or_na(value: Option<String>) -> String {
    value.unwrap_or_else(|| "n/a".into())
}

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`): unlike the wall time,
/// it leaves out the time other processes held the CPU, which matters on a shared machine.
fn on_cpu() -> Option<Duration> {
    let schedstat = fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(schedstat.split_whitespace().next()?.parse().ok()?))
}

/// Pass 1: memory, total time and on-CPU time of each case; returns the total times and adds the
/// on-CPU times to `cpu`.
fn memory_table(order: &[Case], cpu: &mut Vec<(Case, Duration)>) -> Vec<(Case, Duration)> {
    let mut totals = Vec::new();
    println!("Memory and total time (pass 1: pushes not timed one by one)\n");
    println!(
        "| case | total time | on-CPU time | held above payload | RSS growth above payload | \
         peak RSS growth above payload | minor faults | in huge pages |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for &case in order {
        let container = Container::new(case);
        let can_reset = reset_peak_rss();
        let (rss0, faults0, cpu0) = (rss_bytes(), minor_faults(), on_cpu());
        let (container, elapsed) = push_all(container);
        let cpu1 = on_cpu();
        let (rss1, faults1, peak1) = (rss_bytes(), minor_faults(), peak_rss_bytes());
        let on_cpu = cpu1.zip(cpu0).map(|(b, a)| b.saturating_sub(a));
        let huge = anon_huge_bytes().map(|b| format!("{} MiB", b >> 20));
        let held = container.held_bytes() as i64 - PAYLOAD as i64;
        drop(container);
        let rss = delta(rss1, rss0).map(|d| mb(d - case.grows_by()));
        let peak = delta(peak1.filter(|_| can_reset), rss0).map(|d| mb(d - case.grows_by()));
        let faults = delta(faults1, faults0).map(|d| d.to_string());
        println!(
            "| {} | {:.1} ms | {} | {} | {} | {} | {} | {} |",
            case.name(),
            elapsed.as_secs_f64() * 1e3,
            or_na(on_cpu.map(|d| format!("{:.1} ms", d.as_secs_f64() * 1e3))),
            mb(held),
            or_na(rss),
            or_na(peak),
            or_na(faults),
            or_na(huge),
        );
        totals.push((case, elapsed));
        cpu.extend(on_cpu.map(|d| (case, d)));
    }
    totals
}

/// Pass 2: the slowest single push of each case; returns them.
fn hitch_table(order: &[Case]) -> Vec<(Case, Duration)> {
    println!("\nSlowest single push (pass 2: every push timed with `Instant`)\n");
    println!(
        "| case | slowest push | at push # | pushes > 100 µs | pushes > 1 ms | total time (with \
         timing overhead) | times preempted |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut slowest = Vec::new();
    for &case in order {
        let container = Container::new(case);
        let switches0 = involuntary_switches();
        let h = push_all_timed(container);
        let switches = delta(involuntary_switches(), switches0).map(|d| d.to_string());
        println!(
            "| {} | {:.1} µs | {} | {} | {} | {:.1} ms | {} |",
            case.name(),
            h.slowest.as_secs_f64() * 1e6,
            h.slowest_index,
            h.over_100us,
            h.over_1ms,
            h.total.as_secs_f64() * 1e3,
            or_na(switches),
        );
        slowest.push((case, h.slowest));
    }
    let of = |case| slowest.iter().find(|&&(c, _)| c == case).map(|&(_, d)| d);
    if let (Some(vv), Some(cap)) = (of(Case::VirtualVecNew), of(Case::VecWithCapacity)) {
        println!(
            "\nSlowest push, `VirtualVec::new` / `Vec::with_capacity`: {:.2}",
            vv.as_secs_f64() / cap.as_secs_f64()
        );
    }
    slowest
}

/// The median of `values` (the upper one of the middle two for an even count).
fn median(values: &mut [Duration]) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

/// Across rounds: median total and on-CPU time, the median and worst of each round's slowest
/// push, and the `VirtualVec` cases against the `Vec` ones as the median of the per-round ratios
/// (each round runs every case once, so a ratio compares neighbours in time).
fn summary_table(
    cases: &[Case],
    totals: &[(Case, Duration)],
    cpu: &[(Case, Duration)],
    slowest: &[(Case, Duration)],
) {
    let of = |all: &[(Case, Duration)], case| -> Vec<Duration> {
        all.iter().filter(|&&(c, _)| c == case).map(|&(_, d)| d).collect()
    };
    let rounds = of(totals, cases[0]).len();
    println!("### Summary of {rounds} rounds\n");
    println!(
        "| case | median total time | median on-CPU time | median slowest push | worst slowest \
         push | rounds with a push > 1 ms |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for &case in cases {
        let mut total = of(totals, case);
        let mut on_cpu = of(cpu, case);
        let mut hitch = of(slowest, case);
        let over = hitch.iter().filter(|&&d| d > Duration::from_millis(1)).count();
        let worst = hitch.iter().copied().max().unwrap_or_default();
        let cpu_median = if on_cpu.is_empty() {
            "n/a".into()
        } else {
            format!("{:.1} ms", median(&mut on_cpu).as_secs_f64() * 1e3)
        };
        println!(
            "| {} | {:.1} ms | {cpu_median} | {:.1} µs | {:.1} µs | {over} of {rounds} |",
            case.name(),
            median(&mut total).as_secs_f64() * 1e3,
            median(&mut hitch).as_secs_f64() * 1e6,
            worst.as_secs_f64() * 1e6,
        );
    }
    println!(
        "\n| ratio (median of the per-round ratios) | total time | on-CPU time | slowest push |"
    );
    println!("| --- | ---: | ---: | ---: |");
    let ratio = |all: &[(Case, Duration)], a: Case, b: Case| -> String {
        let (xs, ys) = (of(all, a), of(all, b));
        let mut r: Vec<f64> =
            xs.iter().zip(&ys).map(|(x, y)| x.as_secs_f64() / y.as_secs_f64()).collect();
        if r.is_empty() {
            return "n/a".into();
        }
        r.sort_by(f64::total_cmp);
        let list = r.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(", ");
        format!("{:.3} ({list})", r[r.len() / 2])
    };
    for a in [Case::VirtualVecNew, Case::VirtualVecHuge, Case::VirtualVecPlain] {
        for b in [Case::VecNew, Case::VecWithCapacity, Case::VirtualVecPlain] {
            if a == b || !cases.contains(&a) || !cases.contains(&b) {
                continue;
            }
            println!(
                "| {} / {} | {} | {} | {} |",
                a.name(),
                b.name(),
                ratio(totals, a, b),
                ratio(cpu, a, b),
                ratio(slowest, a, b),
            );
        }
    }
}

fn main() {
    let (rounds, only) = parse_args();
    let cases: Vec<Case> = [
        Case::VirtualVecNew,
        Case::VecNew,
        Case::VecWithCapacity,
        Case::VecRefill,
        Case::VirtualVecHuge,
        Case::VirtualVecPlain,
    ]
    .into_iter()
    .filter(|case| only.as_ref().is_none_or(|text| case.name().contains(text.as_str())))
    .collect();
    assert!(!cases.is_empty(), "--only {only:?} matches no case");

    let huge =
        OsPagesWith::HUGE.huge_page_size().map_or("none".into(), |h| format!("{} KiB", h >> 10));
    println!(
        "10,000,000 pushes of a 40-byte Transform; payload {PAYLOAD} bytes; default commit step \
         {} KiB; commits prefaulted past {} MiB; huge pages from the OS: {huge}, used (opt-in) past {} \
         MiB committed.\n",
        COMMIT_STEP_MAX >> 10,
        PREFAULT_FROM >> 20,
        HUGE_PAGES_FROM >> 20,
    );
    let (mut totals, mut cpu, mut slowest) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        // Each round starts one case later, so no case always runs first.
        let mut order = cases.clone();
        order.rotate_left((round - 1) % cases.len());
        if rounds > 1 {
            println!("### Round {round}\n");
        }
        totals.extend(memory_table(&order, &mut cpu));
        slowest.extend(hitch_table(&order));
        println!();
    }
    if rounds > 1 {
        summary_table(&cases, &totals, &cpu, &slowest);
    }
}

/// `--rounds N` (default 1) and `--only TEXT`.
fn parse_args() -> (usize, Option<String>) {
    let mut args = std::env::args().skip(1);
    let (mut rounds, mut only) = (1, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--rounds takes a positive number");
            }
            "--only" => only = Some(args.next().expect("--only takes a text")),
            other => {
                panic!("unknown argument {other:?}; usage: seed_report [--rounds N] [--only TEXT]")
            }
        }
    }
    (rounds, only)
}
