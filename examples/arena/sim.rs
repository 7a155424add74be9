//! The arena's simulation: its components, resources, events and systems, the schedule that
//! runs them, the setup and the checksum. Shared by the `arena` example (which draws the result
//! as an SVG picture) and by the web demo (`web/`, which draws every frame to a canvas), so that
//! both run the same world: the web page's checksum after N frames equals the native one.
//!
//! Deterministic across targets as well as thread counts: the only floating-point operations are
//! IEEE ones that every target rounds alike (`+ - * /`, `sqrt`, `floor`); angles go through
//! [`sin_cos`] here instead of the platform's `sin` and `cos`, whose last bits differ between
//! libm implementations (glibc's natively, a Rust port of musl's on wasm).

use std::ops::{Add, AddAssign, Mul, Sub};

use folio::prelude::*;

pub(crate) const TEAMS: usize = 4;
const SPAWNERS_PER_TEAM: usize = 3;
/// Agent radius; two agents touch at twice this distance (also the grid's cell size).
pub(crate) const RADIUS: f32 = 1.5;
const CONTACT: f32 = 2.0 * RADIUS;
/// Arena area per agent of the target population, in square units.
const AREA_PER_AGENT: f32 = 60.0;
const MAX_SPEED: f32 = 2.5;
const STEER: f32 = 0.03;
pub(crate) const MAX_HP: f32 = 20.0;
/// Damage one enemy in contact deals per frame.
const BITE: f32 = 1.0;
const BURN_FRAMES: u16 = 45;
const BURN_DAMAGE: f32 = 0.4;
/// Fire pits burn for `PIT_ON` frames of every `PIT_CYCLE`.
const PIT_CYCLE: u32 = 240;
const PIT_ON: u32 = 160;

// ----- components -----

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Vec2 {
    pub(crate) x: f32,
    pub(crate) y: f32,
}

/// Where an entity is.
pub(crate) struct Position(pub(crate) Vec2);
/// How far it moves per frame.
pub(crate) struct Velocity(pub(crate) Vec2);
/// An agent's team (spawners carry theirs in `Spawner`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Team(pub(crate) u8);
/// Hit points, and who dealt the last damage (`None`: fire).
pub(crate) struct Health {
    pub(crate) hp: f32,
    pub(crate) last_hit: Option<u8>,
}
/// Emits agents of its team while the arena is below its target population.
pub(crate) struct Spawner {
    pub(crate) team: u8,
    per_frame: u32,
    pub(crate) emitted: u64,
    rng: Rng,
}
/// On fire: a sparse-set component, inserted and removed every few frames.
pub(crate) struct Burning {
    pub(crate) frames_left: u16,
}

// ----- events and resources -----

/// Sent when an agent dies.
struct Died {
    team: u8,
    killer: Option<u8>,
    at: Vec2,
}

/// The arena's fixed settings.
pub(crate) struct Arena {
    pub(crate) size: f32,
    pub(crate) target: usize,
    pub(crate) pits: Vec<Vec2>,
    pub(crate) pit_radius: f32,
}

/// The frame number, set by the game loop.
pub(crate) struct Clock {
    pub(crate) frame: u32,
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
pub(crate) struct Score {
    pub(crate) died: u64,
    pub(crate) deaths: [u64; TEAMS],
    pub(crate) kills: [u64; TEAMS],
    pub(crate) burned: u64,
    pub(crate) ignitions: u64,
    /// Where agents died in the last frames, for the picture.
    pub(crate) recent_deaths: Vec<(u32, Vec2)>,
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
            // Toward the centre, turned by up to 0.6 radians either way.
            let (sin, cos) = sin_cos(spawner.rng.range(-0.6, 0.6));
            let speed = spawner.rng.range(1.0, 2.2);
            let velocity = (centre - at).normalized().rotated(sin, cos) * speed;
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
        let (sin, cos) = sin_cos(angle);
        velocity.0 = Vec2 { x: cos * 0.4, y: sin * 0.4 };
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

/// A hash of the final world: the schedule is deterministic, so it depends on the seed and the
/// flags only, never on the thread count.
pub(crate) fn checksum(world: &World) -> u64 {
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
fn setup(world: &mut World, entities: usize, seed: u64) -> Arena {
    let size = (entities as f32 * AREA_PER_AGENT).sqrt().max(60.0);
    let mut rng = Rng::new(seed);
    let per_frame = entities.div_ceil(TEAMS * SPAWNERS_PER_TEAM * 90).max(1) as u32;
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
    Arena { size, target: entities, pits, pit_radius: size * 0.04 }
}

pub(crate) fn pits_lit(frame: u32) -> bool {
    frame % PIT_CYCLE < PIT_ON
}

impl GridItem {
    /// Filler for a slot about to be written.
    pub(crate) const NONE: GridItem =
        GridItem { entity: Entity::PLACEHOLDER, pos: Vec2 { x: 0.0, y: 0.0 }, team: 0 };
}

impl Grid {
    pub(crate) fn new(size: f32) -> Self {
        let cols = (size / CONTACT).ceil() as usize + 1;
        Grid { cols, starts: vec![0; cols * cols + 1], items: Vec::new(), scratch: Vec::new() }
    }

    pub(crate) fn cell_xy(&self, p: Vec2) -> (usize, usize) {
        let clamp = |v: f32| ((v / CONTACT).max(0.0) as usize).min(self.cols - 1);
        (clamp(p.x), clamp(p.y))
    }

    pub(crate) fn cell_of(&self, p: Vec2) -> usize {
        let (x, y) = self.cell_xy(p);
        y * self.cols + x
    }

    /// Every agent in the cells within `reach` of `p`.
    pub(crate) fn for_each_within(&self, p: Vec2, reach: f32, mut f: impl FnMut(&GridItem)) {
        let (x0, y0) = self.cell_xy(Vec2 { x: p.x - reach, y: p.y - reach });
        let (x1, y1) = self.cell_xy(Vec2 { x: p.x + reach, y: p.y + reach });
        for y in y0..=y1 {
            let row = y * self.cols;
            let (start, end) = (self.starts[row + x0] as usize, self.starts[row + x1 + 1] as usize);
            self.items[start..end].iter().for_each(&mut f);
        }
    }

    /// Every agent in the 3x3 cells around `p`.
    pub(crate) fn for_each_near(&self, p: Vec2, f: impl FnMut(&GridItem)) {
        self.for_each_within(p, CONTACT, f);
    }
}

impl Vec2 {
    pub(crate) fn length(self) -> f32 {
        (self.x * self.x + self.y * self.y).sqrt()
    }

    /// This vector scaled to length 1 (the x axis for a zero vector).
    pub(crate) fn normalized(self) -> Vec2 {
        let len = self.length();
        if len > 0.0 { self * (1.0 / len) } else { Vec2 { x: 1.0, y: 0.0 } }
    }

    /// This vector turned by the angle whose sine and cosine are given.
    pub(crate) fn rotated(self, sin: f32, cos: f32) -> Vec2 {
        Vec2 { x: self.x * cos - self.y * sin, y: self.x * sin + self.y * cos }
    }

    pub(crate) fn clamp_length(self, max: f32) -> Vec2 {
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
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    }
}

/// The sine and cosine of `angle` (radians), from `+ - * /` and `floor` alone, so that every
/// target computes the same bits; within 2e-7 of the true values.
pub(crate) fn sin_cos(angle: f32) -> (f32, f32) {
    use std::f32::consts::{FRAC_PI_2, PI, TAU};
    // Into [-pi, pi), then into [-pi/2, pi/2] by the reflection x -> pi - x, which keeps the
    // sine and flips the cosine's sign.
    let mut x = angle - TAU * ((angle + PI) / TAU).floor();
    let mut cos_sign = 1.0;
    if x > FRAC_PI_2 {
        x = PI - x;
        cos_sign = -1.0;
    } else if x < -FRAC_PI_2 {
        x = -PI - x;
        cos_sign = -1.0;
    }
    // Taylor series to x^11 and x^12: the first omitted terms stay under 1e-7 on [-pi/2, pi/2].
    let x2 = x * x;
    let sin = x
        * (1.0
            - x2 / 6.0
                * (1.0 - x2 / 20.0 * (1.0 - x2 / 42.0 * (1.0 - x2 / 72.0 * (1.0 - x2 / 110.0)))));
    let cos = 1.0
        - x2 / 2.0
            * (1.0
                - x2 / 12.0
                    * (1.0
                        - x2 / 30.0 * (1.0 - x2 / 56.0 * (1.0 - x2 / 90.0 * (1.0 - x2 / 132.0)))));
    (sin, cos_sign * cos)
}

/// The phases of a frame: the physics systems, then the fights.
#[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
enum Phase {
    /// Steer, move and bounce.
    Physics,
    /// Fight, catch fire and burn.
    Combat,
}

impl SystemSet for Phase {}

/// A world of `entities` agents' arena, seeded with `seed`: the spawners and fire pits placed,
/// the resources inserted, no agent yet (the spawners emit them over the first frames).
pub(crate) fn new_world(storage: StorageConfig, entities: usize, seed: u64) -> World {
    let mut world = World::with_storage(storage);
    world.register_component::<Burning>(StorageType::SparseSet).expect("first registration");
    let arena = setup(&mut world, entities, seed);
    world.insert_resource(Grid::new(arena.size));
    world.insert_resource(arena);
    world.insert_resource(Clock { frame: 0 });
    world.insert_resource(Census::default());
    world.insert_resource(Score::default());
    world
}

/// One frame: count heads and spawn; steer, move and bounce (`Phase::Physics`); rebuild the
/// grid; fight, catch fire and burn (`Phase::Combat`); find the dead and keep the score.
/// Systems whose access does not overlap may run at the same time (`wander_spawners` beside
/// `census`, `count_ignitions` beside the physics); four of them also split their own work
/// with `par_iter_mut`. Commands are applied at the end of the frame, in this order: no
/// system needs another's commands within the frame, so the orderings after systems with
/// commands ignore them (`after_ignore_deferred`) and no sync point splits the frame.
pub(crate) fn new_schedule() -> Schedule {
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
    schedule
}

/// Runs frame `frame` of the arena.
pub(crate) fn run_frame(
    world: &mut World,
    schedule: &mut Schedule,
    frame: u32,
) -> Result<(), ScheduleError> {
    world.resource_mut::<Clock>().expect("inserted").frame = frame;
    schedule.run(world)
}
