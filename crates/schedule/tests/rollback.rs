//! Rollback determinism: a simulation run N frames, snapshotted, run M frames, restored and run
//! the same M frames again produces the same checksums, the same ids for its new spawns and the
//! same change-detection results, on one thread and on two.

use folio_schedule::prelude::*;
use folio_schedule::{Schedule, World};

const WARMUP: usize = if cfg!(miri) { 2 } else { 20 };
const FRAMES: usize = if cfg!(miri) { 3 } else { 30 };
const START: u64 = if cfg!(miri) { 8 } else { 400 };

#[derive(Clone, Copy, Debug, PartialEq)]
struct Pos(i64, i64);
#[derive(Clone, Copy, Debug, PartialEq)]
struct Vel(i64, i64);
#[derive(Clone, Copy, Debug, PartialEq)]
struct Health(i32);
/// Cloned, not copied.
#[derive(Clone, Debug, PartialEq)]
struct Name(String);
/// Sparse-set stored, toggled often.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stunned;
#[derive(Clone, Debug)]
struct Rng(u64);
/// What the change-detecting system saw, folded, per frame.
#[derive(Clone, Debug, Default)]
struct Seen(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn movement(mut q: Query<(&mut Pos, &Vel), Without<Stunned>>) {
    q.par_iter_mut().for_each(|(mut p, v)| {
        p.0 += v.0;
        p.1 += v.1;
    });
}

fn bounce(mut q: Query<(&Pos, &mut Vel)>) {
    for (p, mut v) in q.iter_mut() {
        if p.0.abs() > 1000 {
            v.0 = -v.0;
        }
        if p.1.abs() > 1000 {
            v.1 = -v.1;
        }
    }
}

fn life(
    mut commands: Commands,
    mut rng: ResMut<Rng>,
    q: Query<(Entity, &Health, Option<&Stunned>)>,
) {
    for (e, h, stunned) in q.iter() {
        let roll = rng.next() % 16;
        if h.0 <= 0 || roll == 0 {
            commands.despawn(e);
        } else if roll == 1 && stunned.is_none() {
            commands.entity(e).insert((Stunned,));
        } else if roll == 2 && stunned.is_some() {
            commands.entity(e).remove::<(Stunned,)>();
        }
    }
    for _ in 0..rng.next() % 4 {
        let v = (rng.next() % 7) as i64 - 3;
        commands.spawn((Pos(0, 0), Vel(v, -v), Health(5), Name(format!("n{v}"))));
    }
}

fn damage(mut q: Query<&mut Health, Changed<Pos>>) {
    for mut h in q.iter_mut() {
        h.0 -= 1;
    }
}

/// Folds what `Changed<Health>` and `Added<Name>` pass into `Seen`: a rollback that looked
/// like "everything changed" would change it.
fn watch(
    changed: Query<Entity, Changed<Health>>,
    added: Query<Entity, Added<Name>>,
    mut seen: ResMut<Seen>,
) {
    let mut h = seen.0;
    for e in changed.iter().chain(added.iter()) {
        h = h.rotate_left(7) ^ e.to_bits();
    }
    seen.0 = h;
}

fn world() -> World {
    let mut world = World::new();
    world.register_component::<Stunned>(StorageType::SparseSet).unwrap();
    world.register_snapshot_copy::<Pos>();
    world.register_snapshot_copy::<Vel>();
    world.register_snapshot_copy::<Health>();
    world.register_snapshot::<Name>();
    world.register_snapshot_copy::<Stunned>();
    world.register_snapshot_resource::<Rng>();
    world.register_snapshot_resource::<Seen>();
    world.insert_resource(Rng(7));
    world.insert_resource(Seen::default());
    for i in 0..START as i64 {
        world.spawn((Pos(i, -i), Vel(i % 5 - 2, 2 - i % 3), Health(40), Name(format!("e{i}"))));
    }
    world
}

fn schedule() -> Schedule {
    let mut schedule = Schedule::new();
    schedule
        .add_systems((movement, bounce.after(movement), damage.after(bounce), life, watch).chain());
    schedule
}

/// One frame's fingerprint: every entity with its values in iteration order, the ids, and
/// what the change-detecting system saw.
fn checksum(world: &mut World) -> u64 {
    let mut q = world.query::<(Entity, &Pos, &Vel, &Health, &Name, Has<Stunned>)>();
    let mut h = world.resource::<Seen>().unwrap().0;
    for (e, p, v, hp, name, stunned) in q.iter(world) {
        for x in [
            e.to_bits(),
            p.0 as u64,
            p.1 as u64,
            v.0 as u64,
            v.1 as u64,
            hp.0 as u64,
            name.0.len() as u64,
            stunned as u64,
        ] {
            h = h.rotate_left(5) ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    h
}

/// One frame as a rollback loop runs it, the same every time: the schedule, a spawn outside
/// it, and the checksum. Each frame hands out the same number of ticks, so a restored tick's
/// age means what it meant (see `World::restore`).
fn frame(world: &mut World, schedule: &mut Schedule) -> u64 {
    schedule.run(world).unwrap();
    let next = world.spawn(()).to_bits();
    checksum(world) ^ next
}

fn run_rollback(threads: usize) -> (Vec<u64>, Vec<u64>) {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        let mut world = world();
        let mut schedule = schedule();
        for _ in 0..WARMUP {
            frame(&mut world, &mut schedule);
        }
        let snapshot = world.snapshot().unwrap();
        let first: Vec<u64> = (0..FRAMES).map(|_| frame(&mut world, &mut schedule)).collect();
        world.restore(&snapshot).unwrap();
        world.check_invariants();
        let again: Vec<u64> = (0..FRAMES).map(|_| frame(&mut world, &mut schedule)).collect();
        (first, again)
    })
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_restored_world_replays_the_same_frames() {
    let (first, again) = run_rollback(1);
    assert_eq!(first, again);
    let (first2, again2) = run_rollback(2);
    assert_eq!(first2, again2);
    assert_eq!(first, first2, "the thread count changes nothing");
}
