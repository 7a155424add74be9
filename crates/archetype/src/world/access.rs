//! Reading the world: its registry, archetypes, tables and entities, each entity's components
//! (`get`, `get_mut`, `has`), and the cache hints for entities about to change.

use std::ptr::NonNull;

use folio_storage::{ComponentSparseSet, Entities, Entity, EntityLocation};

use super::rows::table_index;
use super::{EdgeStats, World};
use crate::archetype::{Archetype, ArchetypeEntities, ArchetypeId};
use crate::component::{Component, ComponentId, Components, StorageType};
use crate::table::{Table, TableId};

impl World {
    /// The component registry.
    #[inline]
    pub fn components(&self) -> &Components {
        &self.components
    }

    /// The archetypes, by id.
    #[inline]
    pub fn archetypes(&self) -> &[Archetype] {
        &self.archetypes
    }

    /// The entities of archetype `id` with their table rows.
    ///
    /// # Panics
    /// When `id` is not an archetype of this world.
    #[track_caller]
    pub fn archetype_entities(&self, id: ArchetypeId) -> ArchetypeEntities<'_> {
        let archetype = &self.archetypes[id.index()];
        archetype.entities(&self.tables[archetype.table_id().index()])
    }

    /// The tables, by id.
    #[inline]
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// The table holding `entity`'s table components (its archetype's), or `None` when the
    /// entity is not alive. Its row there is its location's `table_row`.
    #[inline]
    pub fn table_id_of(&self, entity: Entity) -> Option<TableId> {
        let loc = self.entities.location(entity)?;
        Some(self.archetypes[loc.archetype_id as usize].table_id())
    }

    /// `id`'s sparse set, if the component is sparse-set stored and was ever used.
    #[inline]
    pub fn sparse_set(&self, id: ComponentId) -> Option<&ComponentSparseSet> {
        self.sparse_sets.get(id.index())?.as_ref()
    }

    /// How the archetype graph's edges were used.
    #[inline]
    pub fn edge_stats(&self) -> EdgeStats {
        self.edge_stats
    }

    /// The number of live entities.
    #[inline]
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// Whether there are no live entities.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Whether `entity` is alive in this world.
    #[inline]
    pub fn contains(&self, entity: Entity) -> bool {
        self.entities.is_alive(entity)
    }

    /// The entity allocator (locations, liveness).
    #[inline]
    pub fn entities(&self) -> &Entities {
        &self.entities
    }

    /// Starts loading `entity`'s meta (its location) into the cache: a hint that changes
    /// nothing, for a caller that knows which entities it will change next (a buffer of
    /// commands). Despawning, inserting into or removing from a random entity among many
    /// begins with a cache miss on its meta; issued a few entities ahead, the miss overlaps
    /// with the work on the entities before it. Stale or unknown ids are fine.
    #[inline]
    pub fn prefetch_entity(&self, entity: Entity) {
        self.entities.prefetch(entity);
    }

    /// Starts loading the rest of what a structural change of `entity` touches: its row in
    /// every column of its table (values, ticks, entity) and its archetype row. This reads the
    /// meta, so call [`World::prefetch_entity`] some entities earlier; a hint that changes
    /// nothing, and does nothing for a stale or unknown id.
    #[inline]
    pub fn prefetch_entity_row(&self, entity: Entity) {
        if let Some(loc) = self.entities.location(entity) {
            let archetype = &self.archetypes[loc.archetype_id as usize];
            self.tables[archetype.table_id().index()].prefetch_row(loc.table_row as usize);
            archetype.prefetch(loc.archetype_row);
        }
    }

    /// A pointer to `entity`'s component `c`, given its location.
    #[inline]
    pub(super) fn component_ptr(
        &self,
        entity: Entity,
        loc: EntityLocation,
        c: ComponentId,
    ) -> Option<NonNull<u8>> {
        match self.components.info(c).storage_type() {
            StorageType::Table => {
                let table = &self.tables[table_index(&self.archetypes, loc)];
                table.column(c)?.data().get(loc.table_row as usize)
            }
            StorageType::SparseSet => self.sparse_set(c)?.get(entity),
        }
    }

    /// `entity`'s `T`.
    #[inline]
    pub fn get<T: Component>(&self, entity: Entity) -> Option<&T> {
        let loc = self.entities.location(entity)?;
        let c = self.components.id::<T>()?;
        let ptr = self.component_ptr(entity, loc, c)?;
        // SAFETY: the pointer is to a live `T` (the registry's type for `c`), borrowed via `&self`.
        Some(unsafe { ptr.cast::<T>().as_ref() })
    }

    /// `entity`'s `T`, mutably; marks it changed at the current tick.
    #[inline]
    pub fn get_mut<T: Component>(&mut self, entity: Entity) -> Option<&mut T> {
        let loc = self.entities.location(entity)?;
        let c = self.components.id::<T>()?;
        let ptr = self.component_ptr(entity, loc, c)?;
        let tick = self.change_tick();
        match self.components.info(c).storage_type() {
            StorageType::Table => {
                let table = &mut self.tables[table_index(&self.archetypes, loc)];
                let column = table.column_mut(c).expect("found above");
                column.changed_ticks_mut()[loc.table_row as usize] = tick;
            }
            StorageType::SparseSet => {
                let set = self.sparse_sets[c.index()].as_mut().expect("found above");
                let dense = set.dense_index(entity).expect("found above");
                set.changed_ticks_mut()[dense] = tick;
            }
        }
        // SAFETY: the pointer is to a live `T`; `&mut self` makes the borrow unique.
        Some(unsafe { ptr.cast::<T>().as_mut() })
    }

    /// Whether `entity` has a `T`.
    pub fn has<T: Component>(&self, entity: Entity) -> bool {
        self.get::<T>(entity).is_some()
    }
}
