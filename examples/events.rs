//! events: systems talking to each other without sharing components.
//!
//! An `EventWriter<E>` sends, an `EventReader<E>` reads; each reader has its own cursor, so
//! every reader sees every event exactly once. Events are double-buffered: one sent during a
//! schedule run can be read in that run (by a reader ordered after the writer) or in the next
//! one (by a reader ordered before it); after that it is dropped, and a reader that did not run
//! in time counts it as missed.
//!
//! Run it with `cargo run --example events`.

use folio::prelude::*;

struct Health(i32);
struct Enemy;
/// Sent by `attack`, read by `apply_damage` and `audit`.
struct Damage {
    target: Entity,
    amount: i32,
}
/// Sent by `apply_damage` when a unit dies.
struct Killed(Entity);

#[derive(Default)]
struct Log {
    damage_applied: usize,
    killed: Vec<Entity>,
    /// Per run, the damage events `audit` saw.
    audited: Vec<usize>,
    slow_read: usize,
    slow_missed: u64,
}

/// Every enemy takes 40 damage a frame.
fn attack(enemies: Query<Entity, With<Enemy>>, mut damage: EventWriter<Damage>) {
    damage.send_batch(enemies.iter().map(|target| Damage { target, amount: 40 }));
}

/// Reads this run's damage (it runs after `attack`), and reports deaths as events.
fn apply_damage(
    mut damage: EventReader<Damage>,
    mut units: Query<&mut Health>,
    mut killed: EventWriter<Killed>,
    mut commands: Commands,
    mut log: ResMut<Log>,
) {
    for hit in damage.read() {
        let Ok(mut health) = units.get_mut(hit.target) else { continue };
        let was_alive = health.0 > 0;
        health.0 -= hit.amount;
        log.damage_applied += 1;
        if was_alive && health.0 <= 0 {
            killed.send(Killed(hit.target));
            commands.despawn(hit.target);
        }
    }
}

fn record_kills(mut killed: EventReader<Killed>, mut log: ResMut<Log>) {
    log.killed.extend(killed.read().map(|k| k.0));
}

/// Ordered before `attack`: it sees the events of the previous run.
fn audit(mut damage: EventReader<Damage>, mut log: ResMut<Log>) {
    let seen = damage.read().count();
    log.audited.push(seen);
}

/// Runs every third frame only: events older than one run are gone by then.
fn slow_reader(mut damage: EventReader<Damage>, mut log: ResMut<Log>) {
    log.slow_read += damage.read().count();
    log.slow_missed = damage.missed();
}

fn every_third(log: Res<Log>) -> bool {
    log.audited.len() % 3 == 1
}

fn main() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    let grunt = world.spawn((Enemy, Health(50)));
    let brute = world.spawn((Enemy, Health(150)));
    let mut schedule = Schedule::new();
    schedule.add_systems((
        audit.before(attack),
        attack,
        apply_damage.after(attack),
        record_kills.after(apply_damage),
        slow_reader.after(attack).run_if(every_third),
    ));
    for _ in 0..6 {
        schedule.run(&mut world).expect("no system panics");
    }

    let log = world.resource::<Log>().expect("inserted");
    println!("damage events applied: {}", log.damage_applied);
    println!(
        "killed (in order): grunt={} brute={}",
        log.killed[0] == grunt,
        log.killed[1] == brute
    );
    println!("audit, reading before the writer, saw per run: {:?}", log.audited);
    println!("slow reader (every 3rd run) read {} and missed {}", log.slow_read, log.slow_missed);
    // grunt dies in run 2 (50 -> 10 -> -30), brute in run 4 (150 -> ... -> -10).
    assert_eq!(log.killed, [grunt, brute]);
    assert!(!world.contains(grunt) && !world.contains(brute));
    assert_eq!(log.damage_applied, 2 + 2 + 1 + 1);
    // One run late: nothing in run 1, then what `attack` sent the run before.
    assert_eq!(log.audited, [0, 2, 2, 1, 1, 0]);
    // Runs 1 and 4 read: run 1's events, then run 3's and run 4's; run 2's were missed.
    assert_eq!((log.slow_read, log.slow_missed), (2 + 1 + 1, 2));
    println!(
        "ok: each reader saw each event once, late readers one run late, slow ones missed some"
    );
}
