//! commands: structural changes from inside systems.
//!
//! While systems run they share the world, so they cannot spawn, despawn, insert or remove
//! directly; they queue `Commands`, applied in schedule order at a sync point (an
//! `ApplyDeferred`, or the one a schedule puts between a system with commands and a system
//! ordered after it) or at the end of the run. `spawn` still hands back the new `Entity` at once — its id is
//! reserved — so it can be stored and used in other commands right away. A command whose
//! entity is gone by the time it is applied is skipped and counted in
//! `Schedule::command_stats()`, never a panic.
//!
//! Run it with `cargo run --example commands`.

use folio::prelude::*;

struct Gun;
struct Bullet {
    speed: f32,
}
/// On the gun: the last bullet it fired.
struct LastShot(Entity);
struct Tracer;
/// The bullets fired this run, written at once (a resource, not a command).
#[derive(Default)]
struct Fired(Vec<Entity>);
#[derive(Default)]
struct Checks {
    exists_before_sync: Vec<bool>,
    exists_after_sync: Vec<bool>,
}

/// Fires one bullet per gun: the id is usable before the bullet exists — kept in a resource
/// and put in another command.
fn fire(guns: Query<Entity, With<Gun>>, mut commands: Commands, mut fired: ResMut<Fired>) {
    for gun in guns.iter() {
        let bullet = commands.spawn((Bullet { speed: 30.0 },));
        commands.entity(gun).insert((LastShot(bullet),));
        fired.0.push(bullet);
    }
}

/// Runs before the sync point: the bullet's id is reserved, the bullet not made yet.
fn look_early(bullets: Query<&Bullet>, fired: Res<Fired>, mut checks: ResMut<Checks>) {
    for &bullet in &fired.0 {
        checks.exists_before_sync.push(bullets.get(bullet).is_ok());
    }
}

/// Runs after the sync point: the bullet exists.
fn look_late(bullets: Query<&Bullet>, fired: Res<Fired>, mut checks: ResMut<Checks>) {
    for &bullet in &fired.0 {
        checks.exists_after_sync.push(bullets.get(bullet).is_ok());
    }
}

/// Despawns every bullet it sees...
fn cleanup(bullets: Query<Entity, With<Bullet>>, mut commands: Commands) {
    for bullet in bullets.iter() {
        commands.despawn(bullet);
    }
}

/// ...and a later system, in the same run, tags the same bullets: those commands find their
/// entity gone and are skipped.
fn add_tracers(bullets: Query<Entity, With<Bullet>>, mut commands: Commands) {
    for bullet in bullets.iter() {
        commands.entity(bullet).insert((Tracer,));
    }
}

fn main() {
    let mut world = World::new();
    world.insert_resource(Checks::default());
    world.insert_resource(Fired::default());
    world.spawn((Gun,));
    let mut schedule = Schedule::new();
    // `look_early` runs after `fire` but before its commands are applied: no automatic sync
    // point between them.
    schedule.add_systems(
        ((fire, look_early).chain_ignore_deferred(), ApplyDeferred, look_late).chain(),
    );
    schedule.run(&mut world).expect("no system panics");

    let checks = world.resource::<Checks>().expect("inserted");
    println!(
        "bullet exists before the sync point: {:?}, after it: {:?}",
        checks.exists_before_sync, checks.exists_after_sync
    );
    assert_eq!(
        (checks.exists_before_sync.as_slice(), checks.exists_after_sync.as_slice()),
        (&[false][..], &[true][..])
    );
    let mut shots = world.query::<&LastShot>();
    let bullet = shots.iter(&world).next().expect("the gun fired").0;
    assert_eq!(world.resource::<Fired>().expect("inserted").0, [bullet]);
    assert_eq!(world.get::<Bullet>(bullet).map(|b| b.speed), Some(30.0));
    println!("spawned {bullet}; stats: {:?}", schedule.command_stats());
    assert_eq!(schedule.command_stats().skipped, 0);

    let mut teardown = Schedule::new();
    // Both buffers are applied at the end of the run, so the tracers' commands find the
    // bullets gone.
    teardown.add_systems((cleanup, add_tracers).chain_ignore_deferred());
    teardown.run(&mut world).expect("no system panics");
    let stats = teardown.command_stats();
    println!(
        "teardown: {} applied, {} skipped: {:?}",
        stats.applied, stats.skipped, stats.recent_skips
    );
    assert!(!world.contains(bullet));
    assert_eq!((stats.applied, stats.skipped), (1, 1));
    world.check_invariants();
    println!("ok: ids at once, changes at the sync point, commands on gone entities skipped");
}
