//! The `frame_churn` workload, shared by the criterion bench (`benches/schedule.rs`) and the
//! `churn_report` and `churn_phases` binaries so that all of them measure the same frame: `N`
//! entities with ([`Position`], [`Velocity`]); each frame integrates all, despawns `K` picked at
//! random from the list of live entities and spawns `K` new. One seeded SplitMix64 per world
//! picks the same list positions for every library, and the world keeps `N` entities, so every
//! frame does the same work.
//!
//! Each library's frame comes in the forms of [`Form`]:
//! - [`Form::Plain`]: the world's own per-entity API on the calling thread: a `for` loop over a
//!   query's `iter_mut`, then `despawn` and `spawn` one entity at a time (shipyard: `World::run`
//!   of the integrate system, `World::delete_entity`, `World::add_entity`). hecs has only this
//!   form.
//! - [`Form::Schedule`]: what a game writes with a scheduler: an `integrate` system and a
//!   `churn` system that records its despawns and spawns as `Commands` (shipyard, which has no
//!   command buffer: a churn system on `AllStoragesViewMut`). folio's `Schedule` and shipyard's
//!   workload run on a rayon pool of that many threads; bevy's `Schedule` runs on its
//!   single-threaded executor for 1 thread and on its multi-threaded executor with a 2-thread
//!   compute pool for 2.

use crate::{SEED, SplitMix64};

/// Entities of the world.
pub const N: usize = 100_000;
/// Despawned and spawned per frame (1%).
pub const K: usize = N / 100;

/// Where an entity is.
#[derive(Clone, Copy, Debug, bevy_ecs::component::Component, shipyard::Component)]
pub struct Position(pub [f32; 3]);

/// How fast it moves.
#[derive(Clone, Copy, Debug, bevy_ecs::component::Component, shipyard::Component)]
pub struct Velocity(pub [f32; 3]);

/// The position of the `i`-th entity spawned.
pub fn pos(i: usize) -> Position {
    Position([i as f32, 0.0, 0.0])
}

/// The velocity of the `i`-th entity spawned.
pub fn vel(i: usize) -> Velocity {
    Velocity([1.0, (i % 7) as f32, 0.5])
}

/// The integration every library runs per entity.
#[inline(always)]
fn integrate(p: &mut Position, v: &Velocity) {
    for k in 0..3 {
        p.0[k] += v.0[k];
    }
}

/// The churn's state: the live entities (in the order they were spawned, with `swap_remove`
/// holes filled) and the seeded generator that picks which die, the same list positions for
/// every library.
#[derive(bevy_ecs::resource::Resource, shipyard::Unique)]
pub struct Churn<Id: Send + Sync + 'static> {
    /// The live entities.
    pub live: Vec<Id>,
    rng: SplitMix64,
    spawned: usize,
}

impl<Id: Send + Sync + Copy + 'static> Churn<Id> {
    /// The state for a world whose live entities are `live`.
    pub fn new(live: Vec<Id>) -> Self {
        Self { spawned: live.len(), live, rng: SplitMix64::new(SEED) }
    }

    /// Picks one live entity at random and drops it from the list.
    pub fn pick(&mut self) -> Id {
        let i = self.rng.below(self.live.len() as u64) as usize;
        self.live.swap_remove(i)
    }

    /// The index of the next new entity.
    pub fn next_index(&mut self) -> usize {
        self.spawned += 1;
        self.spawned
    }

    /// One frame's structural changes on `world` (a world or a command buffer): `K` despawns
    /// through `despawn`, then `K` spawns through `spawn`, whose entities join the live list.
    #[inline]
    pub fn churn<W: ?Sized>(
        &mut self,
        world: &mut W,
        despawn: impl Fn(&mut W, Id),
        spawn: impl Fn(&mut W, usize) -> Id,
    ) {
        for _ in 0..K {
            let e = self.pick();
            despawn(world, e);
        }
        for _ in 0..K {
            let i = self.next_index();
            let e = spawn(world, i);
            self.live.push(e);
        }
    }
}

/// The libraries of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lib {
    /// folio.
    Folio,
    /// bevy_ecs.
    Bevy,
    /// hecs.
    Hecs,
    /// shipyard.
    Shipyard,
}

impl Lib {
    /// All four, folio first.
    pub const ALL: [Lib; 4] = [Lib::Folio, Lib::Bevy, Lib::Hecs, Lib::Shipyard];

    /// Whether the library has `form` (hecs has no scheduler).
    pub fn has(self, form: Form) -> bool {
        self != Lib::Hecs || form == Form::Plain
    }

    /// The library's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Lib::Folio => "folio",
            Lib::Bevy => "bevy",
            Lib::Hecs => "hecs",
            Lib::Shipyard => "shipyard",
        }
    }
}

/// How a frame is written; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The world's per-entity API, on the calling thread.
    Plain,
    /// A schedule of `integrate` and a churn system with commands, on this many threads (1 or 2).
    Schedule(usize),
}

impl Form {
    /// The forms of the report: plain, then the schedule on 1 and on 2 threads.
    pub const ALL: [Form; 3] = [Form::Plain, Form::Schedule(1), Form::Schedule(2)];

    /// The form's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Form::Plain => "plain",
            Form::Schedule(1) => "schedule_1thread",
            Form::Schedule(_) => "schedule_2threads",
        }
    }

    /// The threads the form runs on.
    pub fn threads(self) -> usize {
        match self {
            Form::Plain => 1,
            Form::Schedule(threads) => threads,
        }
    }
}

/// A world with its frame.
trait Churner: Send {
    /// Runs one frame.
    fn frame(&mut self);
    /// The entities alive.
    fn len(&mut self) -> usize;
}

/// One library's world, built and ready to run frames in one form.
pub struct Frame {
    inner: Box<dyn Churner>,
    pool: Option<&'static rayon::ThreadPool>,
}

impl Frame {
    /// `lib`'s world of `N` entities and its frame in `form`; `None` for a form the library does
    /// not have (hecs has no scheduler). Schedules are initialized here, outside any timing.
    pub fn new(lib: Lib, form: Form) -> Option<Frame> {
        if !lib.has(form) {
            return None;
        }
        let inner: Box<dyn Churner> = match (lib, form) {
            (Lib::Folio, Form::Plain) => Box::new(folio::Plain::new()),
            (Lib::Folio, Form::Schedule(_)) => Box::new(folio::Scheduled::new()),
            (Lib::Bevy, Form::Plain) => Box::new(bevy::Plain::new()),
            (Lib::Bevy, Form::Schedule(threads)) => Box::new(bevy::Scheduled::new(threads)),
            (Lib::Hecs, Form::Plain) => Box::new(hecs_plain::Plain::new()),
            (Lib::Hecs, Form::Schedule(_)) => unreachable!("hecs has no scheduler"),
            (Lib::Shipyard, Form::Plain) => Box::new(shipyard_forms::Plain::new()),
            (Lib::Shipyard, Form::Schedule(_)) => Box::new(shipyard_forms::Scheduled::new()),
        };
        let pool = match (lib, form) {
            (Lib::Folio | Lib::Shipyard, Form::Schedule(threads)) => Some(crate::pool(threads)),
            _ => None,
        };
        Some(Frame { inner, pool })
    }

    /// Calls `f` with a function that runs one frame, on the form's thread pool (the calling
    /// thread for the plain forms and bevy, whose executor has its own pool).
    pub fn run<R: Send>(&mut self, f: impl FnOnce(&mut dyn FnMut()) -> R + Send) -> R {
        let inner = &mut self.inner;
        let mut step = move || inner.frame();
        match self.pool {
            Some(pool) => pool.install(|| f(&mut step)),
            None => f(&mut step),
        }
    }

    /// The entities alive: `N` after any number of frames.
    pub fn len(&mut self) -> usize {
        self.inner.len()
    }

    /// Whether the world is empty (never, after `new`).
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }
}

mod folio {
    use super::{Churn, Churner, N, Position, Velocity, integrate, pos, vel};
    use folio_schedule::{Commands, Entity, Query, QueryState, ResMut, Schedule, World};
    use folio_schedule::{IntoSystemConfigs, WorldQueryExt};

    fn world() -> (World, Vec<Entity>) {
        let mut world = World::new();
        let live = world.spawn_batch((0..N).map(|i| (pos(i), vel(i))));
        (world, live)
    }

    pub(super) struct Plain {
        world: World,
        query: QueryState<(&'static mut Position, &'static Velocity)>,
        churn: Churn<Entity>,
    }

    impl Plain {
        pub(super) fn new() -> Self {
            let (world, live) = world();
            let query = world.query();
            Self { world, query, churn: Churn::new(live) }
        }
    }

    impl Churner for Plain {
        fn frame(&mut self) {
            let world = std::hint::black_box(&mut self.world);
            for (mut p, v) in self.query.iter_mut(world) {
                integrate(&mut p, v);
            }
            self.churn.churn(world, |w, e| w.despawn(e).unwrap(), |w, i| w.spawn((pos(i), vel(i))));
        }

        fn len(&mut self) -> usize {
            self.world.len()
        }
    }

    fn integrate_system(mut q: Query<(&mut Position, &Velocity)>) {
        for (mut p, v) in q.iter_mut() {
            integrate(&mut p, v);
        }
    }

    fn churn_system(mut churn: ResMut<Churn<Entity>>, mut commands: Commands) {
        churn.churn(&mut commands, |c, e| c.despawn(e), |c, i| c.spawn((pos(i), vel(i))));
    }

    pub(super) struct Scheduled {
        world: World,
        schedule: Schedule,
    }

    impl Scheduled {
        pub(super) fn new() -> Self {
            Self::with((integrate_system, churn_system))
        }

        fn with<M>(systems: impl IntoSystemConfigs<M>) -> Self {
            let (mut world, live) = world();
            world.insert_resource(Churn::new(live));
            let mut schedule = Schedule::new();
            schedule.add_systems(systems);
            schedule.initialize(&mut world).unwrap();
            Self { world, schedule }
        }
    }

    impl Churner for Scheduled {
        fn frame(&mut self) {
            self.schedule.run(std::hint::black_box(&mut self.world)).unwrap();
        }

        fn len(&mut self) -> usize {
            self.world.len()
        }
    }
}

mod bevy {
    use super::{Churn, Churner, N, Position, Velocity, integrate, pos, vel};
    use bevy_ecs::entity::Entity;
    use bevy_ecs::query::QueryState;
    use bevy_ecs::schedule::{MultiThreadedExecutor, Schedule, SingleThreadedExecutor};
    use bevy_ecs::system::{Commands, Query, ResMut};
    use bevy_ecs::world::World;

    fn world() -> (World, Vec<Entity>) {
        let mut world = World::new();
        let live = world.spawn_batch((0..N).map(|i| (pos(i), vel(i)))).collect();
        (world, live)
    }

    pub(super) struct Plain {
        world: World,
        query: QueryState<(&'static mut Position, &'static Velocity)>,
        churn: Churn<Entity>,
    }

    impl Plain {
        pub(super) fn new() -> Self {
            let (mut world, live) = world();
            let query = world.query();
            Self { world, query, churn: Churn::new(live) }
        }
    }

    impl Churner for Plain {
        fn frame(&mut self) {
            let world = std::hint::black_box(&mut self.world);
            for (mut p, v) in self.query.iter_mut(world) {
                integrate(&mut p, v);
            }
            self.churn.churn(
                world,
                |w, e| assert!(w.despawn(e)),
                |w, i| w.spawn((pos(i), vel(i))).id(),
            );
        }

        fn len(&mut self) -> usize {
            self.world.query::<&Position>().iter(&self.world).count()
        }
    }

    fn integrate_system(mut q: Query<(&mut Position, &Velocity)>) {
        for (mut p, v) in q.iter_mut() {
            integrate(&mut p, v);
        }
    }

    fn churn_system(mut churn: ResMut<Churn<Entity>>, mut commands: Commands) {
        churn.churn(
            &mut commands,
            |c, e| c.entity(e).despawn(),
            |c, i| c.spawn((pos(i), vel(i))).id(),
        );
    }

    pub(super) struct Scheduled {
        world: World,
        schedule: Schedule,
    }

    impl Scheduled {
        pub(super) fn new(threads: usize) -> Self {
            let (mut world, live) = world();
            world.insert_resource(Churn::new(live));
            let mut schedule = Schedule::default();
            if threads == 1 {
                schedule.set_executor(SingleThreadedExecutor::new());
            } else {
                crate::init_bevy_pool(threads);
                schedule.set_executor(MultiThreadedExecutor::new());
            }
            schedule.add_systems((integrate_system, churn_system));
            schedule.initialize(&mut world).unwrap();
            Self { world, schedule }
        }
    }

    impl Churner for Scheduled {
        fn frame(&mut self) {
            self.schedule.run(std::hint::black_box(&mut self.world));
        }

        fn len(&mut self) -> usize {
            self.world.query::<&Position>().iter(&self.world).count()
        }
    }
}

mod hecs_plain {
    use super::{Churn, Churner, N, Position, Velocity, integrate, pos, vel};
    use hecs::{Entity, World};

    pub(super) struct Plain {
        world: World,
        churn: Churn<Entity>,
    }

    impl Plain {
        pub(super) fn new() -> Self {
            let mut world = World::new();
            let live = world.spawn_batch((0..N).map(|i| (pos(i), vel(i)))).collect();
            Self { world, churn: Churn::new(live) }
        }
    }

    impl Churner for Plain {
        fn frame(&mut self) {
            let world = std::hint::black_box(&mut self.world);
            for (p, v) in world.query_mut::<(&mut Position, &Velocity)>() {
                integrate(p, v);
            }
            self.churn.churn(world, |w, e| w.despawn(e).unwrap(), |w, i| w.spawn((pos(i), vel(i))));
        }

        fn len(&mut self) -> usize {
            self.world.len() as usize
        }
    }
}

mod shipyard_forms {
    use super::{Churn, Churner, N, Position, Velocity, integrate, pos, vel};
    use shipyard::scheduler::ScheduledWorkload;
    use shipyard::{AllStoragesViewMut, EntityId, IntoIter, View, ViewMut};
    use shipyard::{Workload, World};

    fn world() -> (World, Vec<EntityId>) {
        let mut world = World::new();
        let live = world.bulk_add_entity((0..N).map(|i| (pos(i), vel(i)))).collect();
        (world, live)
    }

    fn integrate_system(mut p: ViewMut<Position>, v: View<Velocity>) {
        for (p, v) in (&mut p, &v).iter() {
            integrate(p, v);
        }
    }

    fn churn_system(mut all: AllStoragesViewMut) {
        let mut churn = all.remove_unique::<Churn<EntityId>>().unwrap();
        churn.churn(
            &mut *all,
            |a, e| assert!(a.delete_entity(e)),
            |a, i| a.add_entity((pos(i), vel(i))),
        );
        all.add_unique(churn);
    }

    pub(super) struct Plain {
        world: World,
        churn: Churn<EntityId>,
    }

    impl Plain {
        pub(super) fn new() -> Self {
            let (world, live) = world();
            Self { world, churn: Churn::new(live) }
        }
    }

    impl Churner for Plain {
        fn frame(&mut self) {
            let world = std::hint::black_box(&mut self.world);
            world.run(integrate_system);
            self.churn.churn(
                world,
                |w, e| assert!(w.delete_entity(e)),
                |w, i| w.add_entity((pos(i), vel(i))),
            );
        }

        fn len(&mut self) -> usize {
            self.world.run(|v: View<Position>| v.len())
        }
    }

    pub(super) struct Scheduled {
        world: World,
        workload: ScheduledWorkload,
    }

    impl Scheduled {
        pub(super) fn new() -> Self {
            let (world, live) = world();
            world.add_unique(Churn::new(live));
            let (workload, _) = Workload::new("churn")
                .with_system(integrate_system)
                .with_system(churn_system)
                .build()
                .unwrap();
            Self { world, workload }
        }
    }

    impl Churner for Scheduled {
        fn frame(&mut self) {
            self.workload.run_with_world(std::hint::black_box(&self.world)).unwrap();
        }

        fn len(&mut self) -> usize {
            self.world.run(|v: View<Position>| v.len())
        }
    }
}
