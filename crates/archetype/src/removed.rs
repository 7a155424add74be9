//! Removal logs: for each component someone asked to track ([`World::track_removals`]), the
//! entities that lost it (by `remove`, `remove_batch`, `despawn`, `despawn_batch` or `clear`),
//! double-buffered like events so readers with their own cursors see each one for two update
//! periods.
//!
//! [`World::track_removals`]: crate::World::track_removals

use std::any::TypeId;

use folio_storage::{Entity, StorageError};

use crate::component::{ComponentId, Components};
use crate::double_buffer::DoubleBuffer;

/// The entities that lost one component, in the order they lost it: entries with ids, read
/// from a reader's cursor on ([`DoubleBuffer::read_from`], [`BufferCursor`]), aged by
/// [`DoubleBuffer::update`].
///
/// [`BufferCursor`]: crate::BufferCursor
pub type RemovedLog = DoubleBuffer<Entity>;

/// The world's removal logs, by component index.
#[derive(Debug, Default)]
pub(crate) struct Removals {
    logs: Vec<Option<RemovedLog>>,
    /// How many components are tracked: while 0, every structural change checks only this.
    tracked: usize,
    /// Types asked to be tracked before they were registered.
    pending: Vec<TypeId>,
}

impl Removals {
    /// Starts logging removals of `id` (nothing if it is already tracked).
    pub(crate) fn track(&mut self, id: ComponentId) {
        if self.logs.len() <= id.index() {
            self.logs.resize_with(id.index() + 1, || None);
        }
        let log = &mut self.logs[id.index()];
        if log.is_none() {
            *log = Some(RemovedLog::default());
            self.tracked += 1;
        }
    }

    /// Tracks type `type_id` once it is registered ([`Removals::resolve_pending`]).
    pub(crate) fn track_later(&mut self, type_id: TypeId) {
        if !self.pending.contains(&type_id) {
            self.pending.push(type_id);
        }
    }

    /// Starts tracking the pending types registered by now. Called right after every
    /// registration (`World::register_component`, a new bundle), so a tracked type has its log
    /// as soon as it is registered, and before an archetype is made, so no entity can have a
    /// component of a pending type.
    #[inline]
    pub(crate) fn resolve_pending(&mut self, components: &Components) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.retain(|&type_id| match components.id_of(type_id) {
            Some(id) => {
                self.track(id);
                false
            }
            None => true,
        });
        self.pending = pending;
    }

    /// Whether any component is tracked.
    #[inline(always)]
    pub(crate) fn any(&self) -> bool {
        self.tracked != 0
    }

    /// The log of `id`, if it is tracked.
    pub(crate) fn log(&self, id: ComponentId) -> Option<&RemovedLog> {
        self.logs.get(id.index()).and_then(Option::as_ref)
    }

    /// The log of `id`, mutably, if it is tracked.
    pub(crate) fn log_mut(&mut self, id: ComponentId) -> Option<&mut RemovedLog> {
        self.logs.get_mut(id.index()).and_then(Option::as_mut)
    }

    /// Makes room for `additional` entries in the log of each of `ids` that is tracked, so
    /// that the [`Self::record`]s of an operation cannot allocate: called before the operation
    /// changes anything, when [`Self::any`].
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses; the logs keep their entries.
    #[cold]
    #[inline(never)]
    pub(crate) fn try_reserve(
        &mut self,
        ids: &[ComponentId],
        additional: usize,
    ) -> Result<(), StorageError> {
        for &id in ids {
            if let Some(log) = self.log_mut(id) {
                log.try_reserve(additional).map_err(|e| StorageError::alloc(additional, e))?;
            }
        }
        Ok(())
    }

    /// Makes room for `count(index)` more entries in the log of each tracked component, by
    /// component index: [`Self::try_reserve`] for operations whose counts differ by component
    /// (`World::try_clear`).
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses; the logs keep their entries.
    #[cold]
    pub(crate) fn try_reserve_by(
        &mut self,
        mut count: impl FnMut(usize) -> usize,
    ) -> Result<(), StorageError> {
        for (index, log) in self.logs.iter_mut().enumerate() {
            if let Some(log) = log {
                let additional = count(index);
                log.try_reserve(additional).map_err(|e| StorageError::alloc(additional, e))?;
            }
        }
        Ok(())
    }

    /// Logs that `entity` lost each of `ids` that is tracked; the room was made
    /// ([`Self::try_reserve`]), so this never allocates.
    #[inline]
    pub(crate) fn record(&mut self, entity: Entity, ids: &[ComponentId]) {
        if !self.any() {
            return;
        }
        self.record_slow(entity, ids);
    }

    #[inline(never)]
    fn record_slow(&mut self, entity: Entity, ids: &[ComponentId]) {
        for &id in ids {
            if let Some(log) = self.log_mut(id) {
                log.push(entity);
            }
        }
    }

    /// Ages every log (see [`RemovedLog::update`]).
    pub(crate) fn update_all(&mut self) {
        for log in self.logs.iter_mut().flatten() {
            log.update();
        }
    }
}
