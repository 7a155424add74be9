//! Per-frame distribution of `frame_churn` (issue 5): 100,000 (Position, Velocity); each frame
//! integrates all, despawns 1% picked at random from the list of live entities (one seeded
//! SplitMix64 for every library, so all pick the same list positions) and spawns 1% new; 300
//! frames. Each frame is timed on its own; the report gives the median and the p99 frame per
//! library over all frames of all rounds, and the ratios the bars need.
//!
//! - `folio`: a `Schedule` of `integrate` (`Query<(&mut Position, &Velocity)>`) and `churn`
//!   (`ResMut<Churn>` + `Commands`), what a game writes; commands are applied at the end of
//!   `Schedule::run`.
//! - `folio_exclusive`: the same with `churn` as an exclusive `fn(&mut World)` system.
//! - `bevy`: a `Schedule` (multi-threaded executor, compute pool of 2 threads) of the same two
//!   systems with `Commands`.
//! - `shipyard`: a workload of `integrate` and a churn system on `AllStoragesViewMut`.
//! - `hecs`: plain loops (`query_mut`, `World::despawn`, `World::spawn`).
//!
//! The libraries run one after the other, in a rotated order each round (`--rounds N`, default
//! 3), each in a world built untimed. Each round also gives its own median frame per library;
//! the spread of folio's per-round ratio to the fastest peer shows how much of a figure is the
//! machine (on a shared VM it has moved by a third between rounds). Run with
//! `cargo run --profile bench -p folio-benches --bin churn_report [-- --rounds N]`.

use std::hint::black_box;
use std::time::Instant;

use folio_benches::churn::{Churn, K, N, Position, Velocity, pos, vel};

const FRAMES: usize = 300;

fn folio_integrate(mut q: folio_schedule::Query<(&mut Position, &Velocity)>) {
    for (mut p, v) in q.iter_mut() {
        for k in 0..3 {
            p.0[k] += v.0[k];
        }
    }
}

fn folio_churn(
    mut churn: folio_schedule::ResMut<Churn<folio_schedule::Entity>>,
    mut commands: folio_schedule::Commands,
) {
    for _ in 0..K {
        let e = churn.pick();
        commands.despawn(e);
    }
    for _ in 0..K {
        let i = churn.next_index();
        let e = commands.spawn((pos(i), vel(i)));
        churn.live.push(e);
    }
}

fn folio_churn_exclusive(world: &mut folio_schedule::World) {
    let mut churn = world.remove_resource::<Churn<folio_schedule::Entity>>().unwrap();
    for _ in 0..K {
        let e = churn.pick();
        world.despawn(e).unwrap();
    }
    for _ in 0..K {
        let i = churn.next_index();
        churn.live.push(world.spawn((pos(i), vel(i))));
    }
    world.insert_resource(churn);
}

fn bevy_integrate(mut q: bevy_ecs::system::Query<(&mut Position, &Velocity)>) {
    for (mut p, v) in q.iter_mut() {
        for k in 0..3 {
            p.0[k] += v.0[k];
        }
    }
}

fn bevy_churn(
    mut churn: bevy_ecs::system::ResMut<Churn<bevy_ecs::entity::Entity>>,
    mut commands: bevy_ecs::system::Commands,
) {
    for _ in 0..K {
        let e = churn.pick();
        commands.entity(e).despawn();
    }
    for _ in 0..K {
        let i = churn.next_index();
        let e = commands.spawn((pos(i), vel(i))).id();
        churn.live.push(e);
    }
}

fn shipyard_integrate(mut p: shipyard::ViewMut<Position>, v: shipyard::View<Velocity>) {
    use shipyard::IntoIter;
    for (p, v) in (&mut p, &v).iter() {
        for k in 0..3 {
            p.0[k] += v.0[k];
        }
    }
}

fn shipyard_churn(mut all: shipyard::AllStoragesViewMut) {
    let mut churn = all.remove_unique::<Churn<shipyard::EntityId>>().unwrap();
    for _ in 0..K {
        let e = churn.pick();
        all.delete_entity(e);
    }
    for _ in 0..K {
        let i = churn.next_index();
        churn.live.push(all.add_entity((pos(i), vel(i))));
    }
    all.add_unique(churn);
}

/// Times each of `FRAMES` calls of `frame`, in nanoseconds.
fn time_frames(mut frame: impl FnMut()) -> Vec<u64> {
    (0..FRAMES)
        .map(|_| {
            let t = Instant::now();
            frame();
            t.elapsed().as_nanos() as u64
        })
        .collect()
}

fn run_folio(exclusive: bool) -> Vec<u64> {
    let mut world = folio_schedule::World::new();
    let live = world.spawn_batch((0..N).map(|i| (pos(i), vel(i))));
    world.insert_resource(Churn::new(live));
    let mut schedule = folio_schedule::Schedule::new();
    if exclusive {
        schedule.add_systems((folio_integrate, folio_churn_exclusive));
    } else {
        schedule.add_systems((folio_integrate, folio_churn));
    }
    schedule.initialize(&mut world).unwrap();
    let times = time_frames(|| schedule.run(black_box(&mut world)).unwrap());
    assert_eq!(world.len(), N);
    times
}

fn run_bevy() -> Vec<u64> {
    let mut world = bevy_ecs::world::World::new();
    let live: Vec<_> = world.spawn_batch((0..N).map(|i| (pos(i), vel(i)))).collect();
    world.insert_resource(Churn::new(live));
    let mut schedule = bevy_ecs::schedule::Schedule::default();
    schedule.set_executor(bevy_ecs::schedule::MultiThreadedExecutor::new());
    schedule.add_systems((bevy_integrate, bevy_churn));
    schedule.initialize(&mut world).unwrap();
    let times = time_frames(|| schedule.run(black_box(&mut world)));
    assert_eq!(world.query::<&Position>().iter(&world).count(), N);
    times
}

fn run_hecs() -> Vec<u64> {
    let mut world = hecs::World::new();
    let live: Vec<_> = world.spawn_batch((0..N).map(|i| (pos(i), vel(i)))).collect();
    let mut churn = Churn::new(live);
    let times = time_frames(|| {
        let world = black_box(&mut world);
        for (p, v) in world.query_mut::<(&mut Position, &Velocity)>() {
            for k in 0..3 {
                p.0[k] += v.0[k];
            }
        }
        for _ in 0..K {
            let e = churn.pick();
            world.despawn(e).unwrap();
        }
        for _ in 0..K {
            let i = churn.next_index();
            churn.live.push(world.spawn((pos(i), vel(i))));
        }
    });
    assert_eq!(world.len() as usize, N);
    times
}

fn run_shipyard() -> Vec<u64> {
    let mut world = shipyard::World::new();
    let live: Vec<_> = world.bulk_add_entity((0..N).map(|i| (pos(i), vel(i)))).collect();
    world.add_unique(Churn::new(live));
    let (workload, _) = shipyard::Workload::new("churn")
        .with_system(shipyard_integrate)
        .with_system(shipyard_churn)
        .build()
        .unwrap();
    time_frames(|| workload.run_with_world(black_box(&world)).unwrap())
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .map_or(3, |r| r.parse().expect("--rounds N"));
    bevy_tasks::ComputeTaskPool::get_or_init(|| {
        bevy_tasks::TaskPoolBuilder::new().num_threads(2).build()
    });
    let names = ["folio", "folio_exclusive", "bevy", "hecs", "shipyard"];
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); names.len()];
    // Per round, each library's median frame.
    let mut round_medians: Vec<Vec<u64>> = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let mut medians = vec![0; names.len()];
        for k in 0..names.len() {
            let which = (k + round) % names.len();
            let times = match names[which] {
                "folio" => run_folio(false),
                "folio_exclusive" => run_folio(true),
                "bevy" => run_bevy(),
                "hecs" => run_hecs(),
                _ => run_shipyard(),
            };
            let mut sorted = times.clone();
            sorted.sort_unstable();
            medians[which] = percentile(&sorted, 0.5);
            samples[which].extend(times);
        }
        round_medians.push(medians);
    }
    let stats: Vec<(u64, u64, u64)> = samples
        .iter_mut()
        .map(|s| {
            s.sort_unstable();
            (percentile(s, 0.5), percentile(s, 0.99), *s.last().unwrap())
        })
        .collect();
    let fastest_peer = stats[2..].iter().map(|s| s.0).min().unwrap();
    println!(
        "frame_churn: {N} entities, {K} despawned + {K} spawned per frame, {FRAMES} frames x \
         {rounds} rounds\n"
    );
    println!(
        "| library | median frame (ms) | p99 frame (ms) | max (ms) | p99 / median | median / fastest peer |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (name, &(median, p99, max)) in names.iter().zip(&stats) {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.2} | {:.2} |",
            median as f64 / 1e6,
            p99 as f64 / 1e6,
            max as f64 / 1e6,
            p99 as f64 / median as f64,
            median as f64 / fastest_peer as f64
        );
    }
    println!("\nPer round, median frame / the round's fastest peer median:\n");
    println!("| round | {} |", names.join(" | "));
    println!("| --- |{}", " ---: |".repeat(names.len()));
    for (round, medians) in round_medians.iter().enumerate() {
        let fastest = medians[2..].iter().copied().min().unwrap();
        let ratios: Vec<String> =
            medians.iter().map(|&m| format!("{:.2}", m as f64 / fastest as f64)).collect();
        println!("| {round} | {} |", ratios.join(" | "));
    }
}
