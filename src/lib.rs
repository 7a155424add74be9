//! folio: an entity-component-system framework for games and simulations, built on virtual
//! arrays — columns that reserve address space up front and commit pages as they fill, so they
//! never reallocate, never copy on growth and never stall a frame.
//!
//! The four layers, each re-exported here:
//! - [`storage`]: virtual memory, `VirtualVec`, `VirtualPool`, type-erased columns, sparse
//!   sets, the entity allocator, `HandleMap`.
//! - [`archetype`]: the component registry, tables, the archetype graph and the [`World`].
//! - [`query`]: typed queries with filters, change detection and parallel iteration.
//! - [`schedule`]: systems as plain functions, commands, events, and a deterministic parallel
//!   executor.
//!
//! `use folio::prelude::*;` brings in what a game needs:
//!
//! ```
//! use folio::prelude::*;
//!
//! #[derive(Debug, PartialEq)]
//! struct Position { x: f32, y: f32 }
//! struct Velocity { x: f32, y: f32 }
//! struct Health(i32);
//! struct Burning; // toggled often: a sparse-set component, so toggling moves no table rows
//! struct Died(Entity);
//! struct Dt(f32);
//!
//! fn movement(mut bodies: Query<(&mut Position, &Velocity)>, dt: Res<Dt>) {
//!     for (mut p, v) in bodies.iter_mut() {
//!         p.x += v.x * dt.0;
//!         p.y += v.y * dt.0;
//!     }
//! }
//!
//! fn burn(mut burning: Query<&mut Health, With<Burning>>) {
//!     burning.par_iter_mut().for_each(|mut h| h.0 -= 10);
//! }
//!
//! fn die(units: Query<(Entity, &Health)>, mut commands: Commands, mut died: EventWriter<Died>) {
//!     for (e, h) in units.iter() {
//!         if h.0 <= 0 {
//!             commands.despawn(e);
//!             died.send(Died(e));
//!         }
//!     }
//! }
//!
//! fn tally(mut died: EventReader<Died>, mut deaths: ResMut<u32>) {
//!     *deaths += died.read().count() as u32;
//! }
//!
//! let mut world = World::new();
//! world.register_component::<Burning>(StorageType::SparseSet).unwrap();
//! world.insert_resource(Dt(0.5));
//! world.insert_resource(0u32);
//! let runner = world.spawn((Position { x: 0.0, y: 0.0 }, Velocity { x: 2.0, y: 0.0 }, Health(100)));
//! let torch = world.spawn((Position { x: 5.0, y: 5.0 }, Health(15), Burning));
//!
//! let mut schedule = Schedule::new();
//! schedule.add_systems((movement, burn, die.after(burn), tally.after(die)));
//! for _ in 0..2 {
//!     schedule.run(&mut world).unwrap();
//! }
//! assert_eq!(world.get::<Position>(runner), Some(&Position { x: 2.0, y: 0.0 }));
//! assert!(!world.contains(torch));
//! assert_eq!(world.resource::<u32>(), Some(&1));
//! ```

#[doc(inline)]
pub use folio_archetype as archetype;
#[doc(inline)]
pub use folio_query as query;
#[doc(inline)]
pub use folio_schedule as schedule;
#[doc(inline)]
pub use folio_storage as storage;

pub use folio_schedule::{Schedule, World};

#[doc = include_str!("../docs/GUIDE.md")]
pub mod guide {}

/// Everything a game needs, in one `use`.
pub mod prelude {
    pub use folio_schedule::prelude::*;
    pub use folio_schedule::{
        Bundle, Component, EntityError, EntityRef, EntityWorldMut, FromWorld, IntoSystem, Local,
        QueryData, QueryError, QueryFilter, ReadOnlyQueryData, ScheduleError, Snapshot,
        SnapshotError, SnapshotRing, StorageConfig, SystemParam,
    };
    /// Save games (the `serde` feature).
    #[cfg(feature = "serde")]
    pub use folio_schedule::{EntityMap, LoadMode, MapEntities, SaveRegistry};
}

/// The README's example, run as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
