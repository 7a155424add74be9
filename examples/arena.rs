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
use std::path::PathBuf;
use std::time::{Duration, Instant};

use folio::prelude::*;

#[path = "arena/sim.rs"]
mod sim;

use sim::{
    Arena, Burning, Clock, Health, MAX_HP, Position, RADIUS, Score, Spawner, TEAMS, Team, Vec2,
    checksum, pits_lit,
};

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

    let mut world = sim::new_world(StorageConfig::new(), args.entities, args.seed);
    let mut schedule = sim::new_schedule();

    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut last_report: Option<Instant> = None;
    let mut times: Vec<Duration> = Vec::with_capacity(args.frames as usize);
    for frame in 0..args.frames {
        let t = Instant::now();
        if let Err(error) = sim::run_frame(&mut world, &mut schedule, frame) {
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
