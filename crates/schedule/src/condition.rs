//! Common run conditions: systems returning `bool` to pass to
//! [`run_if`](crate::IntoSystemConfig::run_if), as in
//! `schedule.add_systems(save.run_if(resource_changed::<Settings>))`.
//!
//! Each is an ordinary system with its own state, so "changed" and "added" mean "since this
//! condition was last evaluated", and a condition evaluated for the first time sees every
//! existing resource as added and changed.

use folio_query::{Component, Entity, With, World};

use crate::access::SystemAccess;
use crate::commands::CommandStats;
use crate::error::ScheduleError;
use crate::event::EventReader;
use crate::param::{EventUpdater, Local, Query, Res};
use crate::system::{IntoSystem, System, forward_to_inner};

/// Whether resource `R` exists.
pub fn resource_exists<R: Send + Sync + 'static>(res: Option<Res<R>>) -> bool {
    res.is_some()
}

/// Whether resource `R` was inserted since the condition was last evaluated.
pub fn resource_added<R: Send + Sync + 'static>(res: Option<Res<R>>) -> bool {
    res.is_some_and(|r| r.is_added())
}

/// Whether resource `R` was inserted, replaced or written since the condition was last
/// evaluated (false while it does not exist).
pub fn resource_changed<R: Send + Sync + 'static>(res: Option<Res<R>>) -> bool {
    res.is_some_and(|r| r.is_changed())
}

/// Whether resource `R` existed when the condition was last evaluated and does not now.
pub fn resource_removed<R: Send + Sync + 'static>(
    res: Option<Res<R>>,
    mut existed: Local<bool>,
) -> bool {
    let exists = res.is_some();
    let removed = *existed && !exists;
    *existed = exists;
    removed
}

/// True the first time it is evaluated, false after.
pub fn run_once(mut has_run: Local<bool>) -> bool {
    !std::mem::replace(&mut *has_run, true)
}

/// Whether an event of type `E` was sent that this condition has not seen yet.
pub fn on_event<E: Send + Sync + 'static>(mut reader: EventReader<E>) -> bool {
    // Read them all, so each event makes the condition true once.
    reader.read().count() > 0
}

/// Whether any entity has component `T`.
pub fn any_with_component<T: Component>(query: Query<Entity, With<T>>) -> bool {
    !query.is_empty()
}

/// The condition that holds when `condition` does not: `run_if(not(resource_exists::<Paused>))`.
#[track_caller]
pub fn not<M>(condition: impl IntoSystem<bool, M>) -> Not<impl System<Out = bool>> {
    let inner = condition.into_system();
    Not { name: format!("not({})", inner.name()), inner }
}

/// A run condition negated (see [`not`]): the same system, access and state, with its answer
/// turned around.
pub struct Not<S> {
    inner: S,
    name: String,
}

/// Marks [`IntoSystem`] for [`Not`].
pub struct IsNot;

// Not offered as a hint when something else fails to be a system.
#[diagnostic::do_not_recommend]
impl<S: System<Out = bool>> IntoSystem<bool, IsNot> for Not<S> {
    type System = Self;

    fn into_system(self) -> Self {
        self
    }
}

// SAFETY: the inner system's access, and its run: everything forwards to it.
unsafe impl<S: System<Out = bool>> System for Not<S> {
    type Out = bool;

    forward_to_inner!();

    fn name(&self) -> &str {
        &self.name
    }

    unsafe fn run_unsafe(&mut self, world: &World, this_run: u32) -> bool {
        // SAFETY: forwarded from the caller; the access is the inner system's.
        !unsafe { self.inner.run_unsafe(world, this_run) }
    }

    fn run_exclusive(&mut self, world: &mut World, this_run: u32) -> bool {
        !self.inner.run_exclusive(world, this_run)
    }
}

/// The condition that holds when `a` or `b` does: `run_if(or(on_event::<Click>,
/// resource_changed::<Settings>))`. Both are evaluated every time, without short-circuiting,
/// so each keeps what it has seen ("changed since last evaluated", the events it has read)
/// up to date whichever answers.
#[track_caller]
pub fn or<MA, MB>(
    a: impl IntoSystem<bool, MA>,
    b: impl IntoSystem<bool, MB>,
) -> Combined<impl System<Out = bool>, impl System<Out = bool>> {
    Combined::new(a.into_system(), b.into_system(), false)
}

/// The condition that holds when `a` and `b` both do (both evaluated every time, as in
/// [`or`]): for use inside [`or`] and [`not`]; on a system, `run_if(a).run_if(b)` says the same.
#[track_caller]
pub fn and<MA, MB>(
    a: impl IntoSystem<bool, MA>,
    b: impl IntoSystem<bool, MB>,
) -> Combined<impl System<Out = bool>, impl System<Out = bool>> {
    Combined::new(a.into_system(), b.into_system(), true)
}

/// Two run conditions combined (see [`or`] and [`and`]): both run, each with its own state;
/// the access is both of theirs.
pub struct Combined<A, B> {
    a: A,
    b: B,
    /// `and` when true, `or` when false.
    all: bool,
    name: String,
    access: SystemAccess,
    /// Both conditions' event agers (known once they are initialized).
    updaters: Vec<EventUpdater>,
}

impl<A: System<Out = bool>, B: System<Out = bool>> Combined<A, B> {
    fn new(a: A, b: B, all: bool) -> Self {
        let name = format!("{}({}, {})", if all { "and" } else { "or" }, a.name(), b.name());
        let mut access = a.access().clone();
        access.extend(b.access());
        Self { a, b, all, name, access, updaters: Vec::new() }
    }

    fn answer(&self, a: bool, b: bool) -> bool {
        if self.all { a && b } else { a || b }
    }
}

/// Marks [`IntoSystem`] for [`Combined`].
pub struct IsCombined;

// Not offered as a hint when something else fails to be a system.
#[diagnostic::do_not_recommend]
impl<A: System<Out = bool>, B: System<Out = bool>> IntoSystem<bool, IsCombined> for Combined<A, B> {
    type System = Self;

    fn into_system(self) -> Self {
        self
    }
}

// SAFETY: the access is the union of the two conditions' (`SystemAccess::extend`), and a run
// runs each of them once, within its own access.
unsafe impl<A: System<Out = bool>, B: System<Out = bool>> System for Combined<A, B> {
    type Out = bool;

    fn name(&self) -> &str {
        &self.name
    }

    fn access(&self) -> &SystemAccess {
        &self.access
    }

    fn validate(&self) -> Result<(), ScheduleError> {
        self.a.validate()?;
        self.b.validate()
    }

    fn initialize(&mut self, world: &mut World) -> Result<(), ScheduleError> {
        self.a.initialize(world)?;
        self.b.initialize(world)?;
        self.updaters = self.a.event_updaters().to_vec();
        self.updaters.extend_from_slice(self.b.event_updaters());
        Ok(())
    }

    fn update(&mut self, world: &World) {
        self.a.update(world);
        self.b.update(world);
    }

    unsafe fn run_unsafe(&mut self, world: &World, this_run: u32) -> bool {
        // SAFETY: forwarded from the caller, who holds the union of the two accesses.
        let (a, b) =
            unsafe { (self.a.run_unsafe(world, this_run), self.b.run_unsafe(world, this_run)) };
        self.answer(a, b)
    }

    fn run_exclusive(&mut self, world: &mut World, this_run: u32) -> bool {
        let a = self.a.run_exclusive(world, this_run);
        let b = self.b.run_exclusive(world, this_run);
        self.answer(a, b)
    }

    fn apply_deferred(&mut self, world: &mut World, stats: &mut CommandStats) {
        self.a.apply_deferred(world, stats);
        self.b.apply_deferred(world, stats);
    }

    fn discard_deferred(&mut self, world: &mut World) {
        self.a.discard_deferred(world);
        self.b.discard_deferred(world);
    }

    fn event_updaters(&self) -> &[EventUpdater] {
        &self.updaters
    }

    fn check_change_tick(&mut self, now: u32) {
        self.a.check_change_tick(now);
        self.b.check_change_tick(now);
    }
}

#[cfg(test)]
mod tests;
