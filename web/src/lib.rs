//! folio's arena on a web page: the simulation of the `arena` example, web-sized, compiled to
//! wasm32 and drawn to a `<canvas>` every frame.
//!
//! The module is a plain `extern "C"` wasm module (no JavaScript glue generated at build time):
//! `web/main.js` instantiates it, calls `demo_new` once and then, every animation
//! frame, `demo_step` and `demo_render`, and copies the framebuffer that `demo_render` returns a
//! pointer to out of the module's memory into the canvas. `scripts/web-demo` builds it and serves
//! the page; CI's web test opens it in headless Chromium and checks that its checksum after N
//! frames equals what the `arena-checksum` binary (this crate, built natively) prints.
//!
//! [`Demo`] is the same simulation as a Rust type, for the native binary and the tests.

use folio::prelude::*;

#[path = "../../examples/arena/sim.rs"]
#[allow(dead_code, reason = "the arena example reads parts of the score that the page does not")]
mod sim;

use sim::{Arena, Burning, Clock, Health, MAX_HP, Position, RADIUS, Spawner, TEAMS, Team};

/// The page's target population: the arena at a size that runs at 60 frames per second on one
/// thread of a laptop's browser.
pub const ENTITIES: usize = 3_000;

/// The page's random seed.
pub const SEED: u64 = 1;

/// The framebuffer's width and height, in pixels.
pub const SIDE: usize = 480;

/// The address space (on the web: heap memory, as wasm32 has no virtual memory to reserve) that
/// each of the world's containers takes: 1 MiB holds 131,072 of the largest component here,
/// forty times the population, where the default would allocate 16 MiB per column.
pub const RESERVE_BYTES: usize = 1 << 20;

/// The arena, its schedule and a framebuffer to draw it into.
pub struct Demo {
    world: World,
    schedule: Schedule,
    frame: u32,
    /// `SIDE * SIDE` pixels, each RGBA in memory order (as `ImageData` wants them).
    pixels: Vec<u32>,
}

impl Demo {
    /// An arena for `entities` agents, seeded with `seed`, before its first frame.
    pub fn new(entities: usize, seed: u64) -> Self {
        let storage = StorageConfig::new().with_reserve_bytes(RESERVE_BYTES);
        Self {
            world: sim::new_world(storage, entities, seed),
            schedule: sim::new_schedule(),
            frame: 0,
            pixels: vec![0; SIDE * SIDE],
        }
    }

    /// Runs one frame.
    pub fn step(&mut self) -> Result<(), ScheduleError> {
        sim::run_frame(&mut self.world, &mut self.schedule, self.frame)?;
        self.frame += 1;
        Ok(())
    }

    /// How many frames have run.
    pub fn frame(&self) -> u32 {
        self.frame
    }

    /// The agents alive.
    pub fn population(&mut self) -> usize {
        self.world.query::<&Team>().iter(&self.world).count()
    }

    /// The checksum the `arena` example prints: every agent's id, position and health.
    pub fn checksum(&self) -> u64 {
        sim::checksum(&self.world)
    }

    /// Draws the arena as it is now and returns the framebuffer: `SIDE * SIDE` pixels, rows top
    /// to bottom, each `u32` holding R, G, B, A in memory order.
    pub fn render(&mut self) -> &[u32] {
        let world = &self.world;
        let arena = world.resource::<Arena>().expect("inserted");
        let frame = world.resource::<Clock>().expect("inserted").frame;
        let scale = SIDE as f32 / arena.size;
        let mut canvas = Canvas { pixels: &mut self.pixels };
        canvas.pixels.fill(rgba(BACKGROUND, 1.0));
        let pit = if sim::pits_lit(frame) { PIT_LIT } else { PIT_OUT };
        for p in &arena.pits {
            canvas.disc(p.x * scale, p.y * scale, arena.pit_radius * scale, rgba(pit, 0.25));
        }
        let r = (RADIUS * scale).max(1.5);
        let mut agents = world.query::<(Entity, &Position, &Team, &Health)>();
        for (entity, position, team, health) in agents.iter(world) {
            let (x, y) = (position.0.x * scale, position.0.y * scale);
            if world.has::<Burning>(entity) {
                canvas.disc(x, y, r + 1.0, rgba(FIRE, 1.0));
            }
            let strength = 0.35 + 0.65 * (health.hp.max(0.0) / MAX_HP);
            canvas.disc(x, y, r, rgba(TEAM_COLOURS[team.0 as usize % TEAMS], strength));
        }
        let mut spawners = world.query::<(&Position, &Spawner)>();
        for (position, spawner) in spawners.iter(world) {
            let (x, y) = (position.0.x * scale, position.0.y * scale);
            canvas.disc(x, y, 5.0, rgba(0xffffff, 1.0));
            canvas.disc(x, y, 3.5, rgba(TEAM_COLOURS[spawner.team as usize % TEAMS], 1.0));
        }
        &self.pixels
    }
}

const BACKGROUND: u32 = 0x161b22;
const PIT_LIT: u32 = 0xff7b00;
const PIT_OUT: u32 = 0x6e7681;
const FIRE: u32 = 0xff9d00;
/// The example's team colours, as 0xRRGGBB.
const TEAM_COLOURS: [u32; TEAMS] = [0xff5a5f, 0x4aa3ff, 0x4cd97b, 0xffd23f];

/// `rgb` (0xRRGGBB) blended over the background by `alpha`, as one pixel: R, G, B, A in memory.
fn rgba(rgb: u32, alpha: f32) -> u32 {
    let channel = |shift: u32| {
        let (c, b) = ((rgb >> shift) & 0xff, (BACKGROUND >> shift) & 0xff);
        (b as f32 + (c as f32 - b as f32) * alpha.clamp(0.0, 1.0)) as u32
    };
    u32::from_le_bytes([channel(16) as u8, channel(8) as u8, channel(0) as u8, 0xff])
}

struct Canvas<'a> {
    pixels: &'a mut [u32],
}

impl Canvas<'_> {
    /// Fills the pixels whose centres lie within `r` of `(cx, cy)`, clipped to the canvas.
    fn disc(&mut self, cx: f32, cy: f32, r: f32, pixel: u32) {
        let clip = |v: f32| (v.max(0.0) as usize).min(SIDE - 1);
        let (x0, x1) = (clip(cx - r), clip(cx + r));
        let (y0, y1) = (clip(cy - r), clip(cy + r));
        for y in y0..=y1 {
            let dy = y as f32 + 0.5 - cy;
            for x in x0..=x1 {
                let dx = x as f32 + 0.5 - cx;
                if dx * dx + dy * dy <= r * r {
                    self.pixels[y * SIDE + x] = pixel;
                }
            }
        }
    }
}

/// The functions the page calls: one demo per module instance, kept in a thread local (the page
/// has one thread).
#[cfg(target_arch = "wasm32")]
pub mod exports {
    use std::cell::RefCell;

    use super::{Demo, SIDE};

    thread_local! {
        static DEMO: RefCell<Option<Demo>> = const { RefCell::new(None) };
        static MESSAGE: RefCell<String> = const { RefCell::new(String::new()) };
    }

    fn with_demo<R>(f: impl FnOnce(&mut Demo) -> R) -> R {
        DEMO.with_borrow_mut(|demo| f(demo.as_mut().expect("demo_new is called first")))
    }

    /// Makes the demo: `entities` agents (0: `ENTITIES`), seeded with `seed`.
    #[unsafe(no_mangle)]
    pub extern "C" fn demo_new(entities: u32, seed: u64) {
        let entities = if entities == 0 { super::ENTITIES } else { entities as usize };
        DEMO.set(Some(Demo::new(entities, seed)));
    }

    /// Runs one frame: 1 if it ran, 0 if the schedule failed (`demo_message_*` say why).
    #[unsafe(no_mangle)]
    pub extern "C" fn demo_step() -> u32 {
        match with_demo(Demo::step) {
            Ok(()) => 1,
            Err(error) => {
                MESSAGE.set(error.to_string());
                0
            }
        }
    }

    /// The frames run so far.
    #[unsafe(no_mangle)]
    pub extern "C" fn demo_frame() -> u32 {
        with_demo(|demo| demo.frame())
    }

    /// The agents alive.
    #[unsafe(no_mangle)]
    pub extern "C" fn demo_population() -> u32 {
        with_demo(|demo| demo.population() as u32)
    }

    /// The world's checksum (a JavaScript `BigInt`).
    #[unsafe(no_mangle)]
    pub extern "C" fn demo_checksum() -> u64 {
        with_demo(|demo| demo.checksum())
    }

    /// Draws the world; returns where in the module's memory the `SIDE * SIDE` RGBA pixels are.
    /// They stay there until the next call.
    #[unsafe(no_mangle)]
    pub extern "C" fn demo_render() -> *const u32 {
        with_demo(|demo| demo.render().as_ptr())
    }

    /// The framebuffer's width and height.
    #[unsafe(no_mangle)]
    pub extern "C" fn demo_side() -> u32 {
        SIDE as u32
    }

    /// Where the last error message's UTF-8 bytes are.
    #[unsafe(no_mangle)]
    pub extern "C" fn demo_message_ptr() -> *const u8 {
        MESSAGE.with_borrow(|m| m.as_ptr())
    }

    /// The last error message's length in bytes.
    #[unsafe(no_mangle)]
    pub extern "C" fn demo_message_len() -> u32 {
        MESSAGE.with_borrow(|m| m.len() as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_world_and_another_seed_another() {
        let run = |seed| {
            let mut demo = Demo::new(400, seed);
            for _ in 0..60 {
                demo.step().unwrap();
            }
            (demo.checksum(), demo.population())
        };
        let (a, population) = run(3);
        assert!(population > 100, "the spawners fill the arena: {population} agents");
        assert_eq!(run(3), (a, population));
        assert_ne!(run(4).0, a);
    }

    #[test]
    fn the_picture_shows_every_team() {
        let mut demo = Demo::new(400, 1);
        for _ in 0..30 {
            demo.step().unwrap();
        }
        let pixels = demo.render();
        assert_eq!(pixels.len(), SIDE * SIDE);
        for colour in TEAM_COLOURS {
            let full = rgba(colour, 1.0);
            assert!(pixels.contains(&full), "no pixel of team colour {colour:06x}");
        }
    }

    #[test]
    fn sin_cos_is_within_2e7_of_the_platforms() {
        let mut worst: f32 = 0.0;
        for i in -20_000..=20_000 {
            let angle = i as f32 * 0.001;
            let (sin, cos) = sim::sin_cos(angle);
            worst = worst.max((sin - angle.sin()).abs()).max((cos - angle.cos()).abs());
        }
        assert!(worst < 2e-7 * 4.0, "worst error {worst}");
    }
}
