//! rollback: a two-player game whose remote inputs arrive late, kept in step by rollback.
//!
//! Each frame the game saves the world into a `SnapshotRing` (incremental: only what the last
//! frames wrote is copied), then simulates the frame with a `Schedule` of systems. Player 0's
//! inputs are local; player 1's arrive over a simulated network 0 to 8 frames late, so the
//! game predicts them (the last input it received repeats). When a late input differs from its
//! prediction, the game restores the world as it was before that frame (up to 8 frames back),
//! and simulates the frames since again with the input corrected.
//!
//! The simulation is deterministic: the per-frame checksums of the rollback run equal those of
//! a run that knew every input in time, on one thread and on several (the schedule runs its
//! systems on the rayon pool it is called from). The example prints the checksums, and what
//! each save and restore cost; it exits non-zero on a mismatch.
//!
//! Run it with `cargo run --release --example rollback`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use folio::prelude::*;

/// Frames simulated (kept small: the example also runs in debug builds).
const FRAMES: u64 = 120;
/// Drifting debris: the bulk of the world, written by movement every frame only where it is
/// near a player (the rest drifts slowly, see `drift`).
const DEBRIS: i64 = 3_000;
/// The latest a remote input arrives, in frames: how far a rollback may go back.
const MAX_DELAY: u64 = 8;

/// A player: its index (0 local, 1 remote).
#[derive(Clone, Copy, Debug)]
struct Player(usize);
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pos(i64, i64);
#[derive(Clone, Copy, Debug, PartialEq)]
struct Vel(i64, i64);
#[derive(Clone, Copy, Debug, PartialEq)]
struct Health(i32);
/// A shot: who fired it and the frames it has left.
#[derive(Clone, Copy, Debug)]
struct Shot {
    owner: usize,
    ttl: u32,
}
/// Debris: moves one step every `period` frames.
#[derive(Clone, Copy, Debug)]
struct Drift {
    period: u64,
}

/// The inputs the frame being simulated runs with (confirmed or predicted).
#[derive(Clone, Copy, Debug, Default)]
struct FrameInput {
    frame: u64,
    buttons: [Buttons; 2],
}

/// One player's input for one frame: a direction and whether it fires.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Buttons {
    dx: i8,
    dy: i8,
    fire: bool,
}

/// What player `player` really pressed on frame `frame`: a fixed pseudo-random sequence, so
/// that both runs see the same game.
fn real_input(player: usize, frame: u64) -> Buttons {
    let h = hash(frame.wrapping_mul(2).wrapping_add(player as u64));
    // Inputs change every few frames, as a player's hands do: most predictions are right.
    let held = hash(h % 5 + frame / 6 * 17 + player as u64);
    Buttons {
        dx: (held % 3) as i8 - 1,
        dy: ((held >> 8) % 3) as i8 - 1,
        fire: (held >> 16).is_multiple_of(4) && frame.is_multiple_of(3),
    }
}

/// How many frames late the remote player's input for `frame` arrives.
fn delay(frame: u64) -> u64 {
    hash(frame ^ 0xdead_beef) % (MAX_DELAY + 1)
}

fn hash(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

fn steer(input: Res<FrameInput>, mut players: Query<(&Player, &mut Vel)>) {
    for (player, mut v) in players.iter_mut() {
        let b = input.buttons[player.0];
        *v = Vel(i64::from(b.dx) * 3, i64::from(b.dy) * 3);
    }
}

fn fire(input: Res<FrameInput>, players: Query<(&Player, &Pos)>, mut commands: Commands) {
    for (player, p) in players.iter() {
        if input.buttons[player.0].fire {
            let dir = if player.0 == 0 { 1 } else { -1 };
            commands.spawn((*p, Vel(8 * dir, 0), Shot { owner: player.0, ttl: 40 }));
        }
    }
}

/// Players and shots move every frame.
fn movement(mut bodies: Query<(&mut Pos, &Vel), Without<Drift>>) {
    bodies.par_iter_mut().for_each(|(mut p, v)| {
        p.0 += v.0;
        p.1 += v.1;
    });
}

/// Debris moves on its own period: a frame writes a small part of it, as most frames of a game
/// touch a small part of the world.
fn drift(input: Res<FrameInput>, mut debris: Query<(&mut Pos, &Vel, &Drift)>) {
    let frame = input.frame;
    debris.par_iter_mut().for_each(|(mut p, v, d)| {
        if frame.is_multiple_of(d.period) {
            p.0 += v.0;
            p.1 += v.1;
        }
    });
}

/// Shots age out, or hit the other player.
fn shots(
    mut shots: Query<(Entity, &mut Shot, &Pos)>,
    mut players: Query<(&Player, &Pos, &mut Health), Without<Shot>>,
    mut commands: Commands,
) {
    for (e, mut shot, p) in shots.iter_mut() {
        shot.ttl -= 1;
        let mut spent = shot.ttl == 0;
        for (player, q, mut health) in players.iter_mut() {
            if player.0 != shot.owner && (p.0 - q.0).abs() < 6 && (p.1 - q.1).abs() < 6 {
                health.0 -= 1;
                spent = true;
            }
        }
        if spent {
            commands.despawn(e);
        }
    }
}

fn schedule() -> Schedule {
    let mut schedule = Schedule::new();
    schedule.add_systems((
        steer,
        fire.after(steer),
        movement.after(steer),
        drift,
        shots.after(movement),
    ));
    schedule
}

fn world() -> World {
    let mut world = World::new();
    world.register_snapshot_copy::<Player>();
    world.register_snapshot_copy::<Pos>();
    world.register_snapshot_copy::<Vel>();
    world.register_snapshot_copy::<Health>();
    world.register_snapshot_copy::<Shot>();
    world.register_snapshot_copy::<Drift>();
    world.register_snapshot_resource::<FrameInput>();
    world.insert_resource(FrameInput::default());
    world.spawn((Player(0), Pos(-100, 0), Vel(0, 0), Health(20)));
    world.spawn((Player(1), Pos(100, 0), Vel(0, 0), Health(20)));
    world.spawn_batch((0..DEBRIS).map(|i| {
        (
            Pos(i % 200 - 100, i / 200 - 8),
            Vel(i % 3 - 1, i % 5 - 2),
            Drift { period: 10 + (i as u64 % 50) },
        )
    }));
    world
}

/// Simulates one frame with `buttons`, and fingerprints the world after it: every entity's id
/// and values in iteration order.
fn step(world: &mut World, schedule: &mut Schedule, frame: u64, buttons: [Buttons; 2]) -> u64 {
    *world.resource_mut::<FrameInput>().unwrap() = FrameInput { frame, buttons };
    schedule.run(world).unwrap();
    let mut q = world.query::<(Entity, &Pos, Option<&Health>)>();
    let mut h = 0u64;
    for (e, p, health) in q.iter(world) {
        for x in [e.to_bits(), p.0 as u64, p.1 as u64, health.map_or(0, |h| h.0 as u64)] {
            h = h.rotate_left(5) ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    h
}

/// The checksums of a run that knows every input in time: no prediction, no rollback.
fn reference_run() -> Vec<u64> {
    let (mut world, mut schedule) = (world(), schedule());
    (0..FRAMES)
        .map(|f| step(&mut world, &mut schedule, f, [real_input(0, f), real_input(1, f)]))
        .collect()
}

/// What the rollback run measured.
#[derive(Default)]
struct Costs {
    saves: u32,
    incremental: u32,
    save_time: Duration,
    save_bytes: usize,
    whole_bytes: usize,
    restores: u32,
    restore_time: Duration,
    resimulated: u64,
}

/// The rollback run: remote inputs arrive late and are predicted until they do.
fn rollback_run(log: bool) -> (Vec<u64>, Costs) {
    let (mut world, mut schedule) = (world(), schedule());
    // Frames `f - 7 ..= f` are kept: a late input for frame `g >= f - 8` restores the state
    // saved before `g` (at most 7 saves back from the newest, the state before `f - 1`).
    let mut ring = SnapshotRing::new(MAX_DELAY as usize);
    let mut costs = Costs::default();
    let mut sums = vec![0; FRAMES as usize];
    // Player 1's inputs as known: `Some` once arrived.
    let mut remote: Vec<Option<Buttons>> = vec![None; FRAMES as usize];
    // The inputs each frame was last simulated with.
    let mut used: Vec<[Buttons; 2]> = vec![[Buttons::default(); 2]; FRAMES as usize];

    let predicted = |remote: &[Option<Buttons>], frame: u64| {
        // The last input received for a frame up to this one repeats.
        (0..=frame).rev().find_map(|g| remote[g as usize]).unwrap_or_default()
    };
    let save = |ring: &mut SnapshotRing, world: &World, costs: &mut Costs| {
        let start = Instant::now();
        ring.save(world).expect("every type is registered");
        costs.save_time += start.elapsed();
        let snapshot = ring.get(0).expect("just saved");
        costs.saves += 1;
        costs.incremental += u32::from(snapshot.is_incremental());
        costs.save_bytes += snapshot.filled_bytes();
        costs.whole_bytes = snapshot.copied_bytes();
        snapshot.filled_bytes()
    };

    // One frame past the last, to receive the inputs still on the way.
    for frame in 0..FRAMES + MAX_DELAY + 1 {
        // Inputs arriving now; the earliest frame simulated with a wrong prediction.
        let mut wrong = None;
        for g in frame.saturating_sub(MAX_DELAY)..=frame.min(FRAMES - 1) {
            if g + delay(g) == frame {
                let real = real_input(1, g);
                remote[g as usize] = Some(real);
                // An input for this frame arrived in time: nothing was predicted.
                if g < frame && used[g as usize][1] != real && wrong.is_none_or(|w| g < w) {
                    wrong = Some(g);
                }
            }
        }
        let now = frame.min(FRAMES);
        if let Some(g) = wrong {
            // Back to the state before frame `g`: the newest frame saved is `now - 1`'s.
            let start = Instant::now();
            ring.restore(&mut world, (now - 1 - g) as usize).expect("within the ring");
            let took = start.elapsed();
            costs.restores += 1;
            costs.restore_time += took;
            costs.resimulated += now - g;
            if log {
                println!(
                    "  frame {frame:3}: input for frame {g} arrived {} late and differs: rolled back {} frames (restore {took:.1?})",
                    frame - g,
                    now - g
                );
            }
            for h in g..now {
                if h > g {
                    save(&mut ring, &world, &mut costs);
                }
                let buttons = [real_input(0, h), predicted(&remote, h)];
                used[h as usize] = buttons;
                sums[h as usize] = step(&mut world, &mut schedule, h, buttons);
            }
        }
        if frame < FRAMES {
            let bytes = save(&mut ring, &world, &mut costs);
            let buttons = [real_input(0, frame), predicted(&remote, frame)];
            used[frame as usize] = buttons;
            sums[frame as usize] = step(&mut world, &mut schedule, frame, buttons);
            if log && frame % 20 == 0 {
                println!("  frame {frame:3}: saved {bytes} bytes");
            }
        }
    }
    world.check_invariants();
    (sums, costs)
}

fn main() -> ExitCode {
    let reference = reference_run();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4);
    let mut ok = true;
    let mut runs = Vec::new();
    for n in [1, threads] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(n).build().expect("a thread pool");
        println!("rollback run on {n} thread(s):");
        let (sums, costs) = pool.install(|| rollback_run(n == 1));
        let per = |d: Duration, k: u32| d / k.max(1);
        println!(
            "  {} saves ({} incremental): {:.1?} each, {} bytes each on average (a whole copy: {} bytes)",
            costs.saves,
            costs.incremental,
            per(costs.save_time, costs.saves),
            costs.save_bytes / costs.saves.max(1) as usize,
            costs.whole_bytes,
        );
        println!(
            "  {} rollbacks: {:.1?} per restore, {} frames simulated again",
            costs.restores,
            per(costs.restore_time, costs.restores),
            costs.resimulated
        );
        runs.push((n, sums));
    }
    println!(
        "frame  reference         {}",
        runs.iter().map(|(n, _)| format!("{n} thread(s)      ")).collect::<String>()
    );
    for f in 0..FRAMES as usize {
        let same = runs.iter().all(|(_, sums)| sums[f] == reference[f]);
        ok &= same;
        let cols: String = runs.iter().map(|(_, sums)| format!("{:016x}  ", sums[f])).collect();
        println!("{f:5}  {:016x}  {cols}{}", reference[f], if same { "" } else { "MISMATCH" });
    }
    if ok {
        println!("every frame matches the run without rollback");
        ExitCode::SUCCESS
    } else {
        println!("checksums differ from the run without rollback");
        ExitCode::FAILURE
    }
}
