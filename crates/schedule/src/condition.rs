//! Common run conditions: systems returning `bool` to pass to
//! [`run_if`](crate::IntoSystemConfig::run_if), as in
//! `schedule.add_systems(save.run_if(resource_changed::<Settings>))`.
//!
//! Each is an ordinary system with its own state, so "changed" and "added" mean "since this
//! condition was last evaluated", and a condition evaluated for the first time sees every
//! existing resource as added and changed.

use folio_query::{Component, Entity, With};

use crate::event::EventReader;
use crate::param::{Local, Query, Res};

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

#[cfg(test)]
mod tests;
