//! parallel_schedule: how a `Schedule` orders systems and what it runs in parallel.
//!
//! Teaches explicit ordering (`before`, `after`, `chain`), typed sets (`SystemSet`) ordered as a
//! whole with `configure_set`, run conditions on a system (`run_if`) and on a set, and the rule behind
//! parallelism: systems whose access does not conflict may run at the same time; conflicting
//! ones run in the order they were added, so the result never depends on the thread count.
//!
//! Run it with `cargo run --example parallel_schedule`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use folio::prelude::*;

/// The stages of a frame. A set is a value of the game's own type, so a misspelled set is a
/// compile error, not a silently misordered schedule.
#[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
enum Stage {
    Input,
    Logic,
    Physics,
    Debug,
}
impl SystemSet for Stage {}

struct Position(f32);
struct Velocity(f32);
struct Intent(f32);
struct Player;
#[derive(Default)]
struct Input {
    axis: f32,
}
struct Settings {
    debug: bool,
}
#[derive(Default)]
struct Frames {
    run: u32,
    debug_drawn: u32,
    saved: u32,
}
/// Counts the systems running at once, for the demonstration.
#[derive(Default)]
struct Overlap {
    running: AtomicUsize,
    most: AtomicUsize,
}

impl Overlap {
    fn busy(&self) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

fn read_input(mut input: ResMut<Input>, mut frames: ResMut<Frames>) {
    frames.run += 1;
    input.axis = if frames.run.is_multiple_of(2) { 1.0 } else { -1.0 };
}
// These two write `Intent` of disjoint entities (`With<Player>` / `Without<Player>`): no
// conflict, so they may run at the same time.
fn player_control(
    input: Res<Input>,
    mut intents: Query<&mut Intent, With<Player>>,
    o: Res<Overlap>,
) {
    intents.iter_mut().for_each(|mut i| i.0 = input.axis);
    o.busy();
}
fn ai_think(mut intents: Query<(&Position, &mut Intent), Without<Player>>, o: Res<Overlap>) {
    intents.iter_mut().for_each(|(p, mut i)| i.0 = -p.0.signum());
    o.busy();
}
fn apply_intent(mut bodies: Query<(&Intent, &mut Velocity)>) {
    bodies.iter_mut().for_each(|(i, mut v)| v.0 = i.0 * 2.0);
}
fn integrate(mut bodies: Query<(&mut Position, &Velocity)>) {
    bodies.iter_mut().for_each(|(mut p, v)| p.0 += v.0);
}
fn draw_debug(mut frames: ResMut<Frames>) {
    frames.debug_drawn += 1;
}
fn autosave(mut frames: ResMut<Frames>) {
    frames.saved += 1;
}

fn debug_on(settings: Res<Settings>) -> bool {
    settings.debug
}
fn every_third_frame(frames: Res<Frames>) -> bool {
    frames.run.is_multiple_of(3)
}

fn main() {
    let mut world = World::new();
    world.insert_resource(Input::default());
    world.insert_resource(Settings { debug: true });
    world.insert_resource(Frames::default());
    world.insert_resource(Overlap::default());
    let player = world.spawn((Player, Position(0.0), Velocity(0.0), Intent(0.0)));
    let enemy = world.spawn((Position(10.0), Velocity(0.0), Intent(0.0)));

    let mut schedule = Schedule::new();
    schedule
        .configure_set(Stage::Logic, SetConfig::new().after(Stage::Input))
        .configure_set(Stage::Physics, SetConfig::new().after(Stage::Logic))
        .configure_set(Stage::Debug, SetConfig::new().after(Stage::Physics).run_if(debug_on))
        // Added out of order on purpose: the sets put them right.
        .add_systems((
            draw_debug.in_set(Stage::Debug),
            (apply_intent, integrate).chain().all_in_set(Stage::Physics),
            (player_control, ai_think).all_in_set(Stage::Logic),
            read_input.in_set(Stage::Input),
            autosave.after(integrate).run_if(every_third_frame),
        ));

    let order = schedule.order(&mut world).expect("no cycle");
    println!("run order: {}", order.join(" -> "));
    let at = |name: &str| order.iter().position(|n| n == name).expect("scheduled");
    assert!(at("read_input") < at("player_control") && at("read_input") < at("ai_think"));
    assert!(at("ai_think") < at("apply_intent") && at("player_control") < at("apply_intent"));
    assert!(at("apply_intent") < at("integrate") && at("integrate") < at("draw_debug"));

    for frame in 1..=6 {
        world.resource_mut::<Settings>().expect("inserted").debug = frame <= 4;
        schedule.run(&mut world).expect("no system panics");
    }
    let frames = world.resource::<Frames>().expect("inserted");
    println!(
        "6 frames: debug overlay drawn {} times (debug off for the last 2), autosaved {} times (every 3rd)",
        frames.debug_drawn, frames.saved
    );
    assert_eq!((frames.run, frames.debug_drawn, frames.saved), (6, 4, 2));
    assert_eq!(world.get::<Position>(player).map(|p| p.0), Some(0.0)); // -2 +2 -2 +2 -2 +2
    assert_eq!(world.get::<Position>(enemy).map(|p| p.0), Some(-2.0)); // heads left while at x >= 0: 10, 8, .., 0, -2

    let most = world.resource::<Overlap>().expect("inserted").most.load(Ordering::SeqCst);
    println!(
        "player_control and ai_think ran side by side: {} (most systems at once: {most}, {} rayon threads)",
        if most > 1 { "yes" } else { "no, one thread" },
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("ok: sets, chains and run conditions held");
}
