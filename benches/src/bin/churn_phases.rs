//! Where a `frame_churn` frame's time goes, per phase, for folio and hecs in a long-running
//! world (criterion's case, not `churn_report`'s fresh worlds): after `--warm` frames (default
//! 3,000), `--frames` more (default 1,000) are timed phase by phase and the median of each
//! phase printed.
//!
//! - `folio`: `integrate` (the query loop), `record` (1,000 despawns and 1,000 spawns pushed to
//!   a `CommandQueue`, as the churn system does) and `apply` (the queue applied), all on this
//!   thread.
//! - `folio_direct`: `integrate`, then the churn as `World::despawn` and `World::spawn` calls.
//! - `hecs`: `integrate`, `despawn`, `spawn`.
//! - `--schedule`: the bench's real `Schedule` of the two systems, each stamped with its start
//!   and end (from the start of `Schedule::run`) and its thread; the frame's end is after the
//!   commands are applied. `--min-parallel-us N` sets `Schedule::set_min_parallel_work` (0:
//!   always the pool; `18446744073709551615`: never).
//!
//! `--only folio|folio_direct|hecs` runs one of the first three. Run with
//! `cargo run --profile bench -p folio-benches --bin churn_phases -- [--schedule] [--warm N]
//! [--frames N]`; `perf record` it to see where a phase's time goes.

use std::hint::black_box;
use std::time::Instant;

use folio_benches::churn::{Churn, K, N, Position, Velocity, pos, vel};
use folio_schedule::{CommandQueue, CommandStats, Commands, World, WorldQueryExt};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

fn median(mut v: Vec<u64>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64 / 1e3
}

fn timed(f: impl FnOnce()) -> u64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as u64
}

fn folio(warm: usize, frames: usize, direct: bool) {
    let mut world = World::new();
    let live = world.spawn_batch((0..N).map(|i| (pos(i), vel(i))));
    let mut churn = Churn::new(live);
    let mut query = world.query::<(&mut Position, &Velocity)>();
    let mut queue = CommandQueue::default();
    let mut stats = CommandStats::default();
    let mut phases = [Vec::new(), Vec::new(), Vec::new()];
    for frame in 0..warm + frames {
        let integrate = timed(|| {
            query.update_archetypes(&world);
            for (mut p, v) in query.iter_mut(black_box(&mut world)) {
                for k in 0..3 {
                    p.0[k] += v.0[k];
                }
            }
        });
        let (record, apply);
        if direct {
            record = timed(|| {
                for _ in 0..K {
                    world.despawn(churn.pick()).unwrap();
                }
            });
            apply = timed(|| {
                for _ in 0..K {
                    let i = churn.next_index();
                    churn.live.push(world.spawn((pos(i), vel(i))));
                }
            });
        } else {
            record = timed(|| {
                let mut commands = Commands::new(&mut queue, &world);
                for _ in 0..K {
                    commands.despawn(churn.pick());
                }
                for _ in 0..K {
                    let i = churn.next_index();
                    churn.live.push(commands.spawn((pos(i), vel(i))));
                }
            });
            apply = timed(|| {
                queue.apply(&mut world, &mut stats);
                world.flush();
            });
        }
        world.increment_change_tick();
        if frame >= warm {
            for (v, t) in phases.iter_mut().zip([integrate, record, apply]) {
                v.push(t);
            }
        }
    }
    let [a, b, c] = phases;
    let names = if direct { ("despawn", "spawn") } else { ("record", "apply") };
    println!(
        "folio{}: integrate {:.1} µs, {} {:.1} µs, {} {:.1} µs",
        if direct { "_direct" } else { "" },
        median(a),
        names.0,
        median(b),
        names.1,
        median(c)
    );
}

fn hecs(warm: usize, frames: usize) {
    let mut world = hecs::World::new();
    let live: Vec<_> = world.spawn_batch((0..N).map(|i| (pos(i), vel(i)))).collect();
    let mut churn = Churn::new(live);
    let mut phases = [Vec::new(), Vec::new(), Vec::new()];
    for frame in 0..warm + frames {
        let integrate = timed(|| {
            for (p, v) in black_box(&mut world).query_mut::<(&mut Position, &Velocity)>() {
                for k in 0..3 {
                    p.0[k] += v.0[k];
                }
            }
        });
        let despawn = timed(|| {
            for _ in 0..K {
                world.despawn(churn.pick()).unwrap();
            }
        });
        let spawn = timed(|| {
            for _ in 0..K {
                let i = churn.next_index();
                churn.live.push(world.spawn((pos(i), vel(i))));
            }
        });
        if frame >= warm {
            for (v, t) in phases.iter_mut().zip([integrate, despawn, spawn]) {
                v.push(t);
            }
        }
    }
    let [a, b, c] = phases;
    println!(
        "hecs: integrate {:.1} µs, despawn {:.1} µs, spawn {:.1} µs",
        median(a),
        median(b),
        median(c)
    );
}

fn main() {
    let warm = arg("--warm", 3000);
    let frames = arg("--frames", 1000);
    let args: Vec<String> = std::env::args().collect();
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned();
    if args.iter().any(|a| a == "--schedule") {
        for _ in 0..3 {
            sched::run(warm, frames);
        }
        return;
    }
    for _ in 0..2 {
        if matches!(only.as_deref(), None | Some("folio")) {
            folio(warm, frames, false);
        }
        if matches!(only.as_deref(), None | Some("folio_direct")) {
            folio(warm, frames, true);
        }
        if matches!(only.as_deref(), None | Some("hecs")) {
            hecs(warm, frames);
        }
    }
}

mod sched {
    //! `--schedule`: the real `Schedule` of `frame_churn`, with each system's start and end
    //! stamped (offsets from the frame's start) and the thread it ran on.
    use std::sync::Mutex;
    use std::time::Instant;

    use folio_schedule::{Commands, Entity, ResMut, Schedule, World};

    use super::*;

    /// A system's name, start, end and rayon thread index (`None`: the calling thread).
    type Stamp = (&'static str, Instant, Instant, Option<usize>);

    static STAMPS: Mutex<Vec<Stamp>> = Mutex::new(Vec::new());

    fn stamp(name: &'static str, start: Instant) {
        STAMPS.lock().unwrap().push((name, start, Instant::now(), rayon::current_thread_index()));
    }

    fn integrate(mut q: folio_schedule::Query<(&mut Position, &Velocity)>) {
        let t = Instant::now();
        for (mut p, v) in q.iter_mut() {
            for k in 0..3 {
                p.0[k] += v.0[k];
            }
        }
        stamp("integrate", t);
    }

    fn churn(mut churn: ResMut<Churn<Entity>>, mut commands: Commands) {
        let t = Instant::now();
        for _ in 0..K {
            let e = churn.pick();
            commands.despawn(e);
        }
        for _ in 0..K {
            let i = churn.next_index();
            let e = commands.spawn((pos(i), vel(i)));
            churn.live.push(e);
        }
        stamp("churn", t);
    }

    pub(super) fn run(warm: usize, frames: usize) {
        let mut world = World::new();
        let live = world.spawn_batch((0..N).map(|i| (pos(i), vel(i))));
        world.insert_resource(Churn::new(live));
        let mut schedule = Schedule::new();
        schedule.add_systems((integrate, churn));
        let args: Vec<String> = std::env::args().collect();
        if let Some(i) = args.iter().position(|a| a == "--min-parallel-us") {
            let us: u64 = args[i + 1].parse().unwrap();
            schedule.set_min_parallel_work(std::time::Duration::from_micros(us));
        }
        schedule.initialize(&mut world).unwrap();
        let mut rows: Vec<[f64; 6]> = Vec::new();
        let mut threads = [0usize; 2];
        for frame in 0..warm + frames {
            STAMPS.lock().unwrap().clear();
            let t0 = Instant::now();
            schedule.run(&mut world).unwrap();
            let end = Instant::now();
            if frame < warm {
                continue;
            }
            let stamps = STAMPS.lock().unwrap();
            let us = |t: Instant| t.duration_since(t0).as_nanos() as f64 / 1e3;
            let (_, is, ie, it) = stamps.iter().find(|s| s.0 == "integrate").copied().unwrap();
            let (_, cs, ce, ct) = stamps.iter().find(|s| s.0 == "churn").copied().unwrap();
            threads[usize::from(it == ct)] += 1;
            rows.push([us(is), us(ie), us(cs), us(ce), us(ie.max(ce)), us(end)]);
        }
        let med = |k: usize| {
            let mut v: Vec<f64> = rows.iter().map(|r| r[k]).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "schedule: integrate {:.1}..{:.1} µs, churn {:.1}..{:.1} µs, systems done {:.1} µs, \
             frame {:.1} µs; frames with both on one thread: {} of {}",
            med(0),
            med(1),
            med(2),
            med(3),
            med(4),
            med(5),
            threads[1],
            rows.len()
        );
        let p99 = |k: usize| {
            let mut v: Vec<f64> = rows.iter().map(|r| r[k]).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() * 99 / 100]
        };
        println!(
            "  p99: integrate {:.1}..{:.1} µs, churn {:.1}..{:.1} µs, systems done {:.1} µs, \
             frame {:.1} µs",
            p99(0),
            p99(1),
            p99(2),
            p99(3),
            p99(4),
            p99(5),
        );
    }
}
