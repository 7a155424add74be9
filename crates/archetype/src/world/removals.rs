//! Removal tracking: which components' removals are logged, and reading and aging the logs.

use std::any::TypeId;

use folio_storage::Entity;

use super::World;
use crate::component::Component;
use crate::removed::RemovedLog;

impl World {
    /// Starts logging the entities that lose a `T`: by [`World::remove`] (and `try_remove`,
    /// `remove_batch`), [`World::despawn`] (and `despawn_batch`) or [`World::clear`]. Until
    /// then, removals of `T` are not recorded. Tracking a type not registered yet registers
    /// nothing (its storage type stays free to choose) and takes effect once an entity can
    /// have it. Tracking costs structural changes one compare while nothing is tracked, and a
    /// look-up per component of the entity while something is.
    ///
    /// The log is double-buffered like events: [`World::update_removals`] ages it, and an entry
    /// stays readable until the second update after it was logged. A schedule whose systems
    /// read removals (`RemovedComponents<T>`) updates the logs once per run.
    pub fn track_removals<T: Component>(&mut self) {
        match self.components.id::<T>() {
            Some(id) => self.removals.track(id),
            None => self.removals.track_later(TypeId::of::<T>()),
        }
    }

    /// The removal log of `T`: `None` unless [`World::track_removals`] was called for it and
    /// it is registered.
    pub fn removed_log<T: Component>(&self) -> Option<&RemovedLog> {
        self.components.id::<T>().and_then(|id| self.removals.log(id))
    }

    /// The entities that lost a `T` and are still in its log, oldest first (none unless its
    /// removals are tracked). An entity may appear more than once, and may be alive again
    /// with a new `T` by now.
    pub fn removed<T: Component>(&self) -> impl Iterator<Item = Entity> + '_ {
        self.removed_log::<T>().into_iter().flat_map(|log| log.read_from(0).0.copied())
    }

    /// Ages every removal log: entries logged before the previous update are dropped.
    pub fn update_removals(&mut self) {
        self.removals.update_all();
    }

    /// Ages the removal log of `T` only (see [`World::update_removals`]).
    pub fn update_removals_of<T: Component>(&mut self) {
        if let Some(log) = self.components.id::<T>().and_then(|id| self.removals.log_mut(id)) {
            log.update();
        }
    }
}
