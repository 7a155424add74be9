//! folio's main demo: a swarm arena, written the way a game would use folio.
//!
//! Four teams of spawners emit agents over time (through `Commands`) until the arena holds the
//! target population. Agents steer toward the centre, move, bounce off the walls and collide
//! through a uniform spatial grid (a resource rebuilt every frame by a system): team mates push
//! each other apart, enemies damage each other. Fire pits set agents `Burning` — a tag toggled
//! every few frames, so it is stored in a sparse set and toggling it moves no table rows.
//! Deaths are found through `Changed<Health>` (only agents hurt this frame are checked), become
//! despawn commands and `Died` events, and an event reader keeps the score.
//!
//! ```sh
//! cargo run --release --example arena -- --entities 20000 --frames 600 --seed 1 --out arena.svg
//! ```
//!
//! It shows a live progress line while it runs, prints a summary at the end and draws the final
//! world as an SVG picture.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::ops::{Add, AddAssign, Mul, Sub};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use folio::prelude::*;

const TEAMS: usize = 4;
const SPAWNERS_PER_TEAM: usize = 3;
/// Agent radius; two agents touch at twice this distance (also the grid's cell size).
const RADIUS: f32 = 1.5;
const CONTACT: f32 = 2.0 * RADIUS;
/// Arena area per agent of the target population, in square units.
const AREA_PER_AGENT: f32 = 60.0;
const MAX_SPEED: f32 = 2.5;
const STEER: f32 = 0.03;
const MAX_HP: f32 = 20.0;
/// Damage one enemy in contact deals per frame.
const BITE: f32 = 1.0;
const BURN_FRAMES: u16 = 45;
const BURN_DAMAGE: f32 = 0.4;
/// Fire pits burn for `PIT_ON` frames of every `PIT_CYCLE`.
const PIT_CYCLE: u32 = 240;
const PIT_ON: u32 = 160;

// ----- components -----

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Vec2 {
    x: f32,
    y: f32,
}

/// Where an entity is.
struct Position(Vec2);
/// How far it moves per frame.
struct Velocity(Vec2);
/// An agent's team (spawners carry theirs in `Spawner`).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Team(u8);
/// Hit points, and who dealt the last damage (`None`: fire).
struct Health {
    hp: f32,
    last_hit: Option<u8>,
}
/// Emits agents of its team while the arena is below its target population.
struct Spawner {
    team: u8,
    per_frame: u32,
    emitted: u64,
    rng: Rng,
}
/// On fire: a sparse-set component, inserted and removed every few frames.
struct Burning {
    frames_left: u16,
}

// ----- events and resources -----

/// Sent when an agent dies.
struct Died {
    team: u8,
    killer: Option<u8>,
    at: Vec2,
}

/// The arena's fixed settings.
struct Arena {
    size: f32,
    target: usize,
    pits: Vec<Vec2>,
    pit_radius: f32,
}

/// The frame number, set by the game loop.
struct Clock {
    frame: u32,
}

/// Head counts, taken at the start of each frame.
#[derive(Default)]
struct Census {
    agents: usize,
    per_team: [usize; TEAMS],
    burning: usize,
}

/// What happened so far.
#[derive(Default)]
struct Score {
    died: u64,
    deaths: [u64; TEAMS],
    kills: [u64; TEAMS],
    burned: u64,
    ignitions: u64,
    /// Where agents died in the last frames, for the picture.
    recent_deaths: Vec<(u32, Vec2)>,
}

/// A uniform grid over the arena: agents bucketed by cell (a counting sort, every frame).
struct Grid {
    cols: usize,
    starts: Vec<u32>,
    items: Vec<GridItem>,
    scratch: Vec<(u32, GridItem)>,
}

#[derive(Clone, Copy)]
struct GridItem {
    entity: Entity,
    pos: Vec2,
    team: u8,
}

// ----- systems -----

/// Counts agents and burning agents: what the spawners and the progress line look at.
fn census(agents: Query<&Team>, burning: Query<&Burning>, mut census: ResMut<Census>) {
    census.per_team = [0; TEAMS];
    for team in agents.iter() {
        census.per_team[team.0 as usize] += 1;
    }
    census.agents = census.per_team.iter().sum();
    census.burning = burning.iter().count();
}

/// Run condition: some team is below its share of the target population.
fn below_target(census: Res<Census>, arena: Res<Arena>) -> bool {
    census.per_team.iter().any(|&n| n < arena.target.div_ceil(TEAMS))
}

/// Run condition: the fire pits burn for part of every cycle.
fn pits_active(clock: Res<Clock>) -> bool {
    pits_lit(clock.frame)
}

/// Run condition: every 120 frames.
fn every_120_frames(clock: Res<Clock>) -> bool {
    clock.frame.is_multiple_of(120)
}

/// Each spawner emits a few agents toward the centre, with its own random stream, while its
/// team is below its share of the target population.
fn spawn_agents(
    mut spawners: Query<(&Position, &mut Spawner)>,
    census: Res<Census>,
    arena: Res<Arena>,
    mut commands: Commands,
) {
    let share = arena.target.div_ceil(TEAMS);
    let room = census.per_team.map(|n| share.saturating_sub(n));
    let centre = Vec2 { x: arena.size / 2.0, y: arena.size / 2.0 };
    for (position, mut spawner) in spawners.iter_mut() {
        let spawner = &mut *spawner;
        let quota = room[spawner.team as usize].div_ceil(SPAWNERS_PER_TEAM);
        for _ in 0..(spawner.per_frame as usize).min(quota) {
            let offset = Vec2 { x: spawner.rng.range(-4.0, 4.0), y: spawner.rng.range(-4.0, 4.0) };
            let at = position.0 + offset;
            let heading = (centre - at).angle() + spawner.rng.range(-0.6, 0.6);
            let speed = spawner.rng.range(1.0, 2.2);
            let velocity = Vec2 { x: heading.cos() * speed, y: heading.sin() * speed };
            commands.spawn((
                Position(at),
                Velocity(velocity),
                Health { hp: MAX_HP, last_hit: None },
                Team(spawner.team),
            ));
            spawner.emitted += 1;
        }
    }
}

/// Spawners pick a new drift direction now and then.
fn wander_spawners(mut spawners: Query<(&mut Velocity, &mut Spawner)>) {
    for (mut velocity, mut spawner) in spawners.iter_mut() {
        let angle = spawner.rng.range(0.0, std::f32::consts::TAU);
        velocity.0 = Vec2 { x: angle.cos() * 0.4, y: angle.sin() * 0.4 };
    }
}

/// Agents accelerate a little toward the centre, up to a top speed.
fn steer(mut agents: Query<(&Position, &mut Velocity), With<Team>>, arena: Res<Arena>) {
    let centre = Vec2 { x: arena.size / 2.0, y: arena.size / 2.0 };
    agents.par_iter_mut().for_each(|(position, mut velocity)| {
        let to_centre = centre - position.0;
        let len = to_centre.length().max(1.0);
        velocity.0 = (velocity.0 + to_centre * (STEER / len)).clamp_length(MAX_SPEED);
    });
}

/// Everything that has a velocity moves.
fn movement(mut bodies: Query<(&mut Position, &Velocity)>) {
    bodies.par_iter_mut().for_each(|(mut position, velocity)| position.0 += velocity.0);
}

/// Bodies that left the arena are reflected back in.
fn bounce_walls(mut bodies: Query<(&mut Position, &mut Velocity)>, arena: Res<Arena>) {
    let (lo, hi) = (RADIUS, arena.size - RADIUS);
    bodies.par_iter_mut().for_each(|(mut position, mut velocity)| {
        let p = position.0;
        if p.x < lo || p.x > hi {
            position.0.x = if p.x < lo { 2.0 * lo - p.x } else { 2.0 * hi - p.x }.clamp(lo, hi);
            velocity.0.x = -velocity.0.x;
        }
        if p.y < lo || p.y > hi {
            position.0.y = if p.y < lo { 2.0 * lo - p.y } else { 2.0 * hi - p.y }.clamp(lo, hi);
            velocity.0.y = -velocity.0.y;
        }
    });
}

/// Buckets every agent into the grid.
fn rebuild_grid(mut grid: ResMut<Grid>, agents: Query<(Entity, &Position, &Team)>) {
    let grid = &mut *grid;
    grid.scratch.clear();
    grid.starts.fill(0);
    for (entity, position, team) in agents.iter() {
        let cell = grid.cell_of(position.0) as u32;
        grid.starts[cell as usize + 1] += 1;
        grid.scratch.push((cell, GridItem { entity, pos: position.0, team: team.0 }));
    }
    for i in 1..grid.starts.len() {
        grid.starts[i] += grid.starts[i - 1];
    }
    let mut fill = grid.starts.clone();
    grid.items.clear();
    grid.items.resize(grid.scratch.len(), GridItem::NONE);
    for &(cell, item) in &grid.scratch {
        grid.items[fill[cell as usize] as usize] = item;
        fill[cell as usize] += 1;
    }
}

/// The heavy one, in parallel: each agent looks at the agents in its 3x3 cells; team mates
/// push it away, enemies bite. Health is written only when hurt, so `Changed<Health>` means
/// "hurt this frame".
fn collide(
    mut agents: Query<(Entity, &Position, &mut Velocity, &mut Health, &Team)>,
    grid: Res<Grid>,
) {
    let grid = &*grid;
    agents.par_iter_mut().for_each(|(me, position, mut velocity, mut health, team)| {
        let mut push = Vec2::default();
        let mut damage = 0.0;
        let mut attacker = None;
        grid.for_each_near(position.0, |other| {
            let d = position.0 - other.pos;
            let dist2 = d.x * d.x + d.y * d.y;
            if other.entity == me || dist2 >= CONTACT * CONTACT {
                return;
            }
            let dist = dist2.sqrt().max(1e-3);
            push += d * ((CONTACT - dist) / dist * 0.25);
            if other.team != team.0 {
                damage += BITE;
                attacker = Some(other.team);
            }
        });
        if push != Vec2::default() {
            velocity.0 = (velocity.0 + push).clamp_length(MAX_SPEED);
        }
        if damage > 0.0 {
            health.hp -= damage;
            health.last_hit = attacker;
        }
    });
}

/// Agents standing in an active fire pit catch fire (looked up through the grid).
fn ignite(grid: Res<Grid>, arena: Res<Arena>, burning: Query<&Burning>, mut commands: Commands) {
    let r2 = arena.pit_radius * arena.pit_radius;
    for &pit in &arena.pits {
        grid.for_each_within(pit, arena.pit_radius, |agent| {
            let d = agent.pos - pit;
            if d.x * d.x + d.y * d.y < r2 && burning.get(agent.entity).is_err() {
                commands.insert(agent.entity, (Burning { frames_left: BURN_FRAMES },));
            }
        });
    }
}

/// Fire hurts, then goes out: the `Burning` tag is removed again.
fn burn(mut burning: Query<(Entity, &mut Burning, &mut Health)>, mut commands: Commands) {
    for (entity, mut fire, mut health) in burning.iter_mut() {
        health.hp -= BURN_DAMAGE;
        health.last_hit = None;
        fire.frames_left -= 1;
        if fire.frames_left == 0 {
            commands.entity(entity).remove::<(Burning,)>();
        }
    }
}

/// Counts the agents that caught fire since this system last ran.
fn count_ignitions(lit: Query<&Team, Added<Burning>>, mut score: ResMut<Score>) {
    score.ignitions += lit.iter().count() as u64;
}

/// Only agents hurt this frame can have died: `Changed<Health>` skips the rest.
fn check_deaths(
    hurt: Query<(Entity, &Health, &Team, &Position), Changed<Health>>,
    mut commands: Commands,
    mut died: EventWriter<Died>,
) {
    for (entity, health, team, position) in hurt.iter() {
        if health.hp <= 0.0 {
            commands.despawn(entity);
            died.send(Died { team: team.0, killer: health.last_hit, at: position.0 });
        }
    }
}

/// Keeps the score from the `Died` events.
fn tally(mut died: EventReader<Died>, mut score: ResMut<Score>, clock: Res<Clock>) {
    let score = &mut *score;
    score.recent_deaths.retain(|&(frame, _)| frame + 20 > clock.frame);
    for death in died.read() {
        score.died += 1;
        score.deaths[death.team as usize] += 1;
        match death.killer {
            Some(team) => score.kills[team as usize] += 1,
            None => score.burned += 1,
        }
        score.recent_deaths.push((clock.frame, death.at));
    }
}

// ----- the game loop -----

fn main() {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return;
        }
        Err(message) => {
            eprintln!("arena: {message}\n\n{USAGE}");
            std::process::exit(2);
        }
    };

    let mut world = World::new();
    world.register_component::<Burning>(StorageType::SparseSet).expect("first registration");
    let arena = setup(&mut world, &args);
    let arena_size = arena.size;
    world.insert_resource(Grid::new(arena_size));
    world.insert_resource(arena);
    world.insert_resource(Clock { frame: 0 });
    world.insert_resource(Census::default());
    world.insert_resource(Score::default());

    // One frame: count heads and spawn; steer, move and bounce (`Phase::Physics`); rebuild the
    // grid; fight, catch fire and burn (`Phase::Combat`); find the dead and keep the score.
    // Systems whose access does not overlap may run at the same time (`wander_spawners` beside
    // `census`, `count_ignitions` beside the physics); four of them also split their own work
    // with `par_iter_mut`. Commands are applied at the end of the frame, in this order: no
    // system needs another's commands within the frame, so the orderings after systems with
    // commands ignore them (`after_ignore_deferred`) and no sync point splits the frame.
    #[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
    enum Phase {
        Physics,
        Combat,
    }
    impl SystemSet for Phase {}
    let mut schedule = Schedule::new();
    schedule
        .configure_set(Phase::Physics, SetConfig::new().after(census))
        .configure_set(Phase::Combat, SetConfig::new().after(rebuild_grid))
        .add_systems((
            census,
            spawn_agents.after(census).run_if(below_target),
            wander_spawners.run_if(every_120_frames),
            (steer, movement, bounce_walls).chain().all_in_set(Phase::Physics),
            rebuild_grid.after(Phase::Physics),
            collide.in_set(Phase::Combat),
            ignite.in_set(Phase::Combat).run_if(pits_active),
            burn.in_set(Phase::Combat),
            count_ignitions,
            check_deaths.after_ignore_deferred(Phase::Combat),
            tally.after_ignore_deferred(check_deaths),
        ));

    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut last_report: Option<Instant> = None;
    let mut times: Vec<Duration> = Vec::with_capacity(args.frames as usize);
    for frame in 0..args.frames {
        world.resource_mut::<Clock>().expect("inserted").frame = frame;
        let t = Instant::now();
        if let Err(error) = schedule.run(&mut world) {
            eprintln!("\narena: frame {frame}: {error}");
            std::process::exit(1);
        }
        times.push(t.elapsed());
        let every = if tty { Duration::from_millis(100) } else { Duration::from_secs(1) };
        if last_report.is_none_or(|r| r.elapsed() >= every) || frame + 1 == args.frames {
            last_report = Some(Instant::now());
            let (p50, p99) = (percentile(&times, 0.50), percentile(&times, 0.99));
            let line = format!(
                "frame {:>5}/{} | entities {:>7} | archetypes {} | frame p50 {:>6.2} ms  p99 {:>6.2} ms | committed {:>6.1} MiB",
                frame + 1,
                args.frames,
                world.len(),
                world.archetypes().len(),
                ms(p50),
                ms(p99),
                mb(world.memory_stats().committed),
            );
            let mut err = std::io::stderr().lock();
            let _ = if tty { write!(err, "\r{line}\x1b[K") } else { writeln!(err, "{line}") };
            let _ = err.flush();
        }
    }
    let total = start.elapsed();
    if tty {
        eprintln!();
    }

    // ----- summary -----
    let spawned: u64 = world.query::<&Spawner>().iter(&world).map(|s| s.emitted).sum();
    let spawners = world.query::<&Spawner>().iter(&world).count();
    let population = world.query::<&Team>().iter(&world).count();
    let burning = world.query::<&Burning>().iter(&world).count();
    let score = world.resource::<Score>().expect("inserted");
    let memory = world.memory_stats();
    let stats = schedule.command_stats();
    assert_eq!(spawned - score.died, population as u64, "every agent spawned is alive or died");
    assert_eq!(world.len(), population + spawners, "agents and spawners are all there is");
    println!(
        "folio arena: {} frames, seed {}, target population {}",
        args.frames, args.seed, args.entities
    );
    println!(
        "  agents:    {spawned} spawned, {} died ({} in fights, {} burned), {population} alive, {burning} burning now",
        score.died,
        score.died - score.burned,
        score.burned
    );
    println!("  ignitions: {} (counted through Added<Burning>)", score.ignitions);
    let teams: Vec<String> = (0..TEAMS)
        .map(|t| format!("{} {} kills / {} deaths", TEAM_NAMES[t], score.kills[t], score.deaths[t]))
        .collect();
    println!("  teams:     {}", teams.join(", "));
    println!(
        "  time:      {:.2} s total; per frame p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} systems, {} rayon threads)",
        total.as_secs_f64(),
        ms(percentile(&times, 0.50)),
        ms(percentile(&times, 0.99)),
        ms(times.iter().copied().max().unwrap_or_default()),
        schedule.len(),
        rayon_threads(),
    );
    println!(
        "  world:     {} entities, {} archetypes, {} tables; {} committed, {} used, {} of address space reserved (no memory)",
        world.len(),
        world.archetypes().len(),
        world.tables().len(),
        size(memory.committed),
        size(memory.used),
        size(memory.reserved),
    );
    println!("  commands:  {} applied, {} skipped", stats.applied, stats.skipped);
    println!(
        "  checksum:  {:016x} (of every agent's id, position and health: the same on 1 thread or 64)",
        checksum(&world)
    );

    let svg = render_svg(&world, args.frames, args.seed);
    if let Err(error) = std::fs::write(&args.out, svg) {
        eprintln!("arena: cannot write {}: {error}", args.out.display());
        std::process::exit(1);
    }
    println!("  picture:   {}", args.out.display());
}

/// A hash of the final world: the schedule is deterministic, so it depends on the seed and the
/// flags only, never on the thread count.
fn checksum(world: &World) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut agents = world.query::<(Entity, &Position, &Health)>();
    for (entity, position, health) in agents.iter(world) {
        let (x, y, hp) = (position.0.x.to_bits(), position.0.y.to_bits(), health.hp.to_bits());
        for word in [entity.to_bits(), x.into(), y.into(), hp.into()] {
            hash = (hash ^ word).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// Places the spawners and fire pits; returns the arena's settings.
fn setup(world: &mut World, args: &Args) -> Arena {
    let size = (args.entities as f32 * AREA_PER_AGENT).sqrt().max(60.0);
    let mut rng = Rng::new(args.seed);
    let per_frame = args.entities.div_ceil(TEAMS * SPAWNERS_PER_TEAM * 90).max(1) as u32;
    // One team per corner, its spawners scattered around it.
    let corners = [(0.2, 0.2), (0.8, 0.2), (0.8, 0.8), (0.2, 0.8)];
    for (team, &(cx, cy)) in corners.iter().enumerate() {
        for _ in 0..SPAWNERS_PER_TEAM {
            let at = Vec2 {
                x: (cx + rng.range(-0.1, 0.1)) * size,
                y: (cy + rng.range(-0.1, 0.1)) * size,
            };
            world.spawn((
                Position(at),
                Velocity(Vec2::default()),
                Spawner { team: team as u8, per_frame, emitted: 0, rng: Rng::new(rng.next_u64()) },
            ));
        }
    }
    let pits = (0..5)
        .map(|_| Vec2 { x: rng.range(0.25, 0.75) * size, y: rng.range(0.25, 0.75) * size })
        .collect();
    Arena { size, target: args.entities, pits, pit_radius: size * 0.04 }
}

// ----- the picture -----

const TEAM_NAMES: [&str; TEAMS] = ["red", "blue", "green", "gold"];
const TEAM_COLOURS: [&str; TEAMS] = ["#ff5a5f", "#4aa3ff", "#4cd97b", "#ffd23f"];

/// Draws the world as it is: every agent at its position (team colour, brighter the healthier,
/// an orange ring when burning), the spawners, the fire pits and the last deaths.
fn render_svg(world: &World, frame: u32, seed: u64) -> String {
    const SIDE: f32 = 1000.0;
    const TOP: f32 = 56.0;
    const BOTTOM: f32 = 66.0;
    let arena = world.resource::<Arena>().expect("inserted");
    let scale = SIDE / arena.size;
    let r = (RADIUS * scale).max(1.2);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">
<rect width="100%" height="100%" fill="#0d1117"/>
<rect x="0" y="{TOP}" width="{SIDE}" height="{SIDE}" fill="#161b22" stroke="#30363d"/>"##,
        w = SIDE,
        h = SIDE + TOP + BOTTOM,
    );
    let clock = world.resource::<Clock>().expect("inserted").frame;
    let pit_fill = if pits_lit(clock) { "#ff7b00" } else { "#6e7681" };
    for pit in &arena.pits {
        let _ = writeln!(
            out,
            r##"<circle cx="{:.1}" cy="{:.1}" r="{:.1}" fill="{pit_fill}" fill-opacity="0.18" stroke="{pit_fill}" stroke-dasharray="6 4"/>"##,
            pit.x * scale,
            TOP + pit.y * scale,
            arena.pit_radius * scale
        );
    }
    // Agents, grouped by team and health band so each circle is short.
    let mut groups: Vec<Vec<(Vec2, bool)>> = vec![Vec::new(); TEAMS * 4];
    let mut query = world.query::<(Entity, &Position, &Team, &Health)>();
    let mut population = 0;
    for (entity, position, team, health) in query.iter(world) {
        let band = ((health.hp.max(0.0) / MAX_HP) * 3.999) as usize;
        let lit = world.has::<Burning>(entity);
        groups[team.0 as usize * 4 + band].push((position.0, lit));
        population += 1;
    }
    for (g, agents) in groups.iter().enumerate() {
        let (team, band) = (g / 4, g % 4);
        let opacity = 0.35 + 0.65 * (band as f32 + 1.0) / 4.0;
        let _ = writeln!(out, r#"<g fill="{}" fill-opacity="{opacity:.2}">"#, TEAM_COLOURS[team]);
        for &(p, _) in agents {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="{r:.1}"/>"#,
                p.x * scale,
                TOP + p.y * scale
            );
        }
        out.push_str("</g>\n");
    }
    let _ = writeln!(
        out,
        r##"<g fill="none" stroke="#ff9d00" stroke-opacity="0.8" stroke-width="0.8">"##
    );
    for &(p, _) in groups.iter().flatten().filter(|(_, lit)| *lit) {
        let _ = writeln!(
            out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="{:.1}"/>"#,
            p.x * scale,
            TOP + p.y * scale,
            r + 0.8
        );
    }
    out.push_str("</g>\n");
    let score = world.resource::<Score>().expect("inserted");
    let _ = writeln!(out, r##"<g stroke="#ffffff" stroke-opacity="0.55" stroke-width="1">"##);
    for &(_, p) in &score.recent_deaths {
        let (x, y) = (p.x * scale, TOP + p.y * scale);
        let _ = writeln!(out, r#"<path d="M{:.1} {:.1}l4 4m0 -4l-4 4"/>"#, x - 2.0, y - 2.0);
    }
    out.push_str("</g>\n");
    let mut spawners = world.query::<(&Position, &Spawner)>();
    for (position, spawner) in spawners.iter(world) {
        let (x, y) = (position.0.x * scale, TOP + position.0.y * scale);
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="14" height="14" transform="rotate(45 {x:.1} {y:.1})" fill="{}" stroke="#ffffff" stroke-width="2"/>"##,
            x - 7.0,
            y - 7.0,
            TEAM_COLOURS[spawner.team as usize]
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="16" y="36" font-size="22" fill="#e6edf3">folio arena — frame {frame}, population {population}, seed {seed}</text>"##
    );
    let mut x = 16.0;
    for t in 0..TEAMS {
        let _ = writeln!(
            out,
            r##"<circle cx="{:.0}" cy="{:.0}" r="6" fill="{}"/><text x="{:.0}" y="{:.0}" font-size="15" fill="#c9d1d9">{}: {} kills</text>"##,
            x + 6.0,
            TOP + SIDE + 20.0,
            TEAM_COLOURS[t],
            x + 18.0,
            TOP + SIDE + 25.0,
            TEAM_NAMES[t],
            score.kills[t]
        );
        x += 170.0;
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.0}" y="{:.0}" font-size="15" fill="#c9d1d9">◆ spawner  ○ burning  × died (last 20 frames)  ◌ fire pit</text></svg>"##,
        16.0,
        TOP + SIDE + 52.0
    );
    out
}

fn pits_lit(frame: u32) -> bool {
    frame % PIT_CYCLE < PIT_ON
}

// ----- helpers -----

const USAGE: &str = "usage: arena [--entities N] [--frames N] [--seed N] [--out PATH]

  --entities N   target population of agents (default 20000, 1..=2000000)
  --frames N     frames to simulate (default 600, at least 1)
  --seed N       random seed (default 1)
  --out PATH     where to write the SVG picture of the final world
                 (default target/arena.svg, or arena.svg when there is no target/ directory)
  -h, --help     this message";

struct Args {
    entities: usize,
    frames: u32,
    seed: u64,
    out: PathBuf,
}

impl Args {
    /// The arguments, `None` for `--help`, or what is wrong with them.
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
        let default_out =
            if std::path::Path::new("target").is_dir() { "target/arena.svg" } else { "arena.svg" };
        let mut parsed =
            Args { entities: 20_000, frames: 600, seed: 1, out: PathBuf::from(default_out) };
        while let Some(arg) = args.next() {
            if arg == "-h" || arg == "--help" {
                return Ok(None);
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
                None => (arg.clone(), None),
            };
            if !matches!(flag.as_str(), "--entities" | "--frames" | "--seed" | "--out") {
                return Err(format!("unknown argument `{arg}`"));
            }
            let value = match inline.or_else(|| args.next()) {
                Some(value) => value,
                None => return Err(format!("`{flag}` needs a value")),
            };
            let number = |max: u64, min: u64| -> Result<u64, String> {
                match value.replace('_', "").parse::<u64>() {
                    Ok(n) if (min..=max).contains(&n) => Ok(n),
                    _ => Err(format!(
                        "`{flag}` takes a whole number from {min} to {max}, not `{value}`"
                    )),
                }
            };
            match flag.as_str() {
                "--entities" => parsed.entities = number(2_000_000, 1)? as usize,
                "--frames" => parsed.frames = number(1_000_000, 1)? as u32,
                "--seed" => parsed.seed = number(u64::MAX, 0)?,
                _ if value.is_empty() => return Err("`--out` needs a path".to_owned()),
                _ => parsed.out = PathBuf::from(value),
            }
        }
        Ok(Some(parsed))
    }
}

fn percentile(times: &[Duration], q: f64) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A byte count for people: KiB, MiB or GiB.
fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b => format!("{:.1} KiB", b as f64 / 1024.0),
    }
}

fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl GridItem {
    /// Filler for a slot about to be written.
    const NONE: GridItem =
        GridItem { entity: Entity::PLACEHOLDER, pos: Vec2 { x: 0.0, y: 0.0 }, team: 0 };
}

impl Grid {
    fn new(size: f32) -> Self {
        let cols = (size / CONTACT).ceil() as usize + 1;
        Grid { cols, starts: vec![0; cols * cols + 1], items: Vec::new(), scratch: Vec::new() }
    }

    fn cell_xy(&self, p: Vec2) -> (usize, usize) {
        let clamp = |v: f32| ((v / CONTACT).max(0.0) as usize).min(self.cols - 1);
        (clamp(p.x), clamp(p.y))
    }

    fn cell_of(&self, p: Vec2) -> usize {
        let (x, y) = self.cell_xy(p);
        y * self.cols + x
    }

    /// Every agent in the cells within `reach` of `p`.
    fn for_each_within(&self, p: Vec2, reach: f32, mut f: impl FnMut(&GridItem)) {
        let (x0, y0) = self.cell_xy(Vec2 { x: p.x - reach, y: p.y - reach });
        let (x1, y1) = self.cell_xy(Vec2 { x: p.x + reach, y: p.y + reach });
        for y in y0..=y1 {
            let row = y * self.cols;
            let (start, end) = (self.starts[row + x0] as usize, self.starts[row + x1 + 1] as usize);
            self.items[start..end].iter().for_each(&mut f);
        }
    }

    /// Every agent in the 3x3 cells around `p`.
    fn for_each_near(&self, p: Vec2, f: impl FnMut(&GridItem)) {
        self.for_each_within(p, CONTACT, f);
    }
}

impl Vec2 {
    fn length(self) -> f32 {
        (self.x * self.x + self.y * self.y).sqrt()
    }

    fn angle(self) -> f32 {
        self.y.atan2(self.x)
    }

    fn clamp_length(self, max: f32) -> Vec2 {
        let len = self.length();
        if len > max { self * (max / len) } else { self }
    }
}

impl Add for Vec2 {
    type Output = Vec2;
    fn add(self, o: Vec2) -> Vec2 {
        Vec2 { x: self.x + o.x, y: self.y + o.y }
    }
}

impl AddAssign for Vec2 {
    fn add_assign(&mut self, o: Vec2) {
        *self = *self + o;
    }
}

impl Sub for Vec2 {
    type Output = Vec2;
    fn sub(self, o: Vec2) -> Vec2 {
        Vec2 { x: self.x - o.x, y: self.y - o.y }
    }
}

impl Mul<f32> for Vec2 {
    type Output = Vec2;
    fn mul(self, k: f32) -> Vec2 {
        Vec2 { x: self.x * k, y: self.y * k }
    }
}

/// A small deterministic random stream (SplitMix64).
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    }
}
