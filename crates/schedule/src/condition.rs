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

#[cfg(test)]
mod tests;
