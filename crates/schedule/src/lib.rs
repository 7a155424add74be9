//! folio's schedule layer: systems written as plain functions, commands, events, and a
//! deterministic parallel executor on rayon.
//!
//! A system is any function (or closure) whose parameters are [`SystemParam`]s: [`Query`],
//! [`Res`], [`ResMut`], `Option<Res<R>>`, [`Single`], [`Local`], [`Commands`], [`EventReader`],
//! [`EventWriter`], `&World`, up to 16 of them; `fn(&mut World)` is an exclusive system. A
//! [`Schedule`] orders them: explicit `before`/`after`, typed (and nested) sets, run conditions (with the
//! common ones ready: [`resource_changed`], [`run_once`], [`on_event`], ...), sync points
//! (also [automatic ones](Schedule#automatic-sync-points), after systems with commands),
//! and, between systems whose access conflicts, the order they were added. It runs the rest in
//! parallel, with a result that does not depend on the number of threads.
//!
//! The rules a run follows are on [`Schedule`]'s page: [its order](Schedule#order),
//! [why the result is deterministic](Schedule#determinism),
//! [when a segment stays on the calling thread](Schedule#the-parallel-threshold), and what
//! [a panic](Schedule#when-a-system-panics) or
//! [a failing system](Schedule#when-a-system-returns-err) does to a run. [`Commands`] and
//! [`ParamSet`] state their own. A system can also run outside a schedule, once or registered
//! in the world: [`RunSystemOnce`].
//!
//! Profiling: [`Schedule::stats`] gives each system's runs and times once
//! [`Schedule::set_stats`] turns them on; the `trace` cargo feature (off by default) opens a
//! `tracing` span per schedule run, system run, run condition and system's commands applied.
//!
//! ```
//! use folio_schedule::prelude::*;
//!
//! #[derive(Debug, PartialEq)]
//! struct Position(f32);
//! struct Velocity(f32);
//! struct Dt(f32);
//! struct Stopped(Entity);
//!
//! fn integrate(mut query: Query<(&mut Position, &Velocity)>, dt: Res<Dt>) {
//!     for (mut p, v) in query.iter_mut() {
//!         p.0 += v.0 * dt.0;
//!     }
//! }
//!
//! fn stop_far(query: Query<(Entity, &Position)>, mut commands: Commands, mut out: EventWriter<Stopped>) {
//!     for (e, p) in query.iter() {
//!         if p.0 > 1.5 {
//!             commands.entity(e).remove::<(Velocity,)>();
//!             out.send(Stopped(e));
//!         }
//!     }
//! }
//!
//! fn report(mut stopped: EventReader<Stopped>, mut count: Local<usize>) {
//!     *count += stopped.read().count();
//! }
//!
//! let mut world = World::new();
//! world.insert_resource(Dt(1.0));
//! let e = world.spawn((Position(0.0), Velocity(1.0)));
//! let mut schedule = Schedule::new();
//! schedule.add_systems((integrate, stop_far.after(integrate), report.after(stop_far)));
//! for _ in 0..3 {
//!     schedule.run(&mut world).unwrap();
//! }
//! assert_eq!(world.get::<Position>(e), Some(&Position(2.0)));
//! assert!(world.get::<Velocity>(e).is_none());
//! ```
#![warn(unsafe_op_in_unsafe_fn)]

mod access;
mod commands;
mod condition;
mod config;
mod custom_param;
mod error;
mod event;
mod one_shot;
mod param;
mod param_set;
mod pending;
mod removed;
mod schedule;
mod single;
mod sync;
mod system;
mod workers;

pub use access::SystemAccess;
pub use commands::{CommandQueue, CommandStats, Commands, EntityCommands};
pub use condition::{
    Combined, IsCombined, IsNot, Not, and, any_with_component, not, on_event, or, resource_added,
    resource_changed, resource_exists, resource_removed, run_once,
};
pub use config::{
    ApplyDeferred, ErasedSet, IntoLabel, IntoSystemConfig, IntoSystemConfigs, Label, SetConfig,
    SystemConfig, SystemConfigs, SystemSet,
};
pub use error::ScheduleError;
pub use event::{EventAging, EventCursor, EventReader, EventWriter, Events, age_all_events};
pub use folio_query::*;
pub use one_shot::{RunSystemOnce, SystemId};
pub use param::{
    EventUpdater, Local, Query, Res, ResMut, SystemMeta, SystemParam, SystemParamItem,
};
pub use param_set::{MemberGetter, ParamSet, ParamSetMember, ParamSetMembers, ParamSetState};
pub use removed::{RemovedComponents, RemovedCursor};
pub use schedule::{
    AUTO_SYNC_NAME, CHECK_TICKS_EVERY, MIN_PARALLEL_WORK, Schedule, ScheduleStats, SystemStats,
};
pub use single::{ParamInvalid, Single};
pub use system::{
    BoxedCondition, BoxedSystem, ExclusiveSystem, FallibleSystem, FunctionSystem, IntoSystem,
    System, SystemParamFunction,
};

/// Everything a game needs, in one `use`.
pub mod prelude {
    pub use crate::{
        Added, Allow, ApplyDeferred, Changed, ChildOf, Children, Commands, ComponentHooks,
        DeferredWorld, Disabled, Entity, Event, EventAging, EventReader, EventWriter, Events, Has,
        IntoSystemConfig, IntoSystemConfigs, Local, Mut, Observer, ObserverId, OnAdd, OnInsert,
        OnRemove, OnReplace, Or, ParamSet, Propagation, Query, QueryState, Ref, Relationship,
        RelationshipError, RelationshipTarget, RemovedComponents, Res, ResMut, RunSystemOnce,
        Schedule, ScheduleError, SetConfig, Single, Sources, StorageType, SystemId, SystemSet,
        Trigger, With, Without, World, WorldQueryExt, age_all_events, and, any_with_component, not,
        on_event, or, resource_added, resource_changed, resource_exists, resource_removed,
        run_once, system_param,
    };
}

#[cfg(test)]
mod hook_tests;
#[cfg(test)]
mod relationship_tests;
#[cfg(test)]
mod tests;
