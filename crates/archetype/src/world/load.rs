//! [`World::load`] and [`World::load_saved`]: a checked [`SavedWorld`] into this world, in one
//! of three [`LoadMode`]s.

use folio_storage::{EntitiesState, EntitiesStateError, Entity, EntityLocation};
use serde::Deserializer;

use super::World;
use crate::archetype::ArchetypeId;
use crate::bundle::ComponentIds;
use crate::component::{Component, ComponentId, StorageType};
use crate::error::{ComponentError, EntityError};
use crate::hooks::HookFlags;
use crate::save::read::{StagedColumn, StagedGroup};
use crate::save::{EntityMap, LoadError, SaveRegistry, SavedWorld};
use crate::try_alloc::{small_vec, vec_with_capacity};

/// How a load turns saved ids into ids of the target world (see the [`save`](crate::save)
/// module's docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadMode {
    /// Into a world with no entity (alive or reserved): every entity at its saved id and
    /// generation, and the entity allocator restored (freelist order, generations, retired
    /// slots, pending reservations), so ids handed out afterwards are the saved world's.
    Restore,
    /// Every entity at its saved id, in a world that may hold others; the allocator keeps its
    /// own state otherwise. Each saved id must be free in the target.
    KeepIds,
    /// Every entity at a new id; components and resources registered with entities are
    /// mapped to the new ids.
    Remap,
}

impl World {
    /// Reads a save written by [`World::save`] and loads it: a restore
    /// ([`LoadMode::Restore`]) into a world with no entity, alive or reserved; new ids
    /// ([`LoadMode::Remap`]) otherwise. Returns the ids the saved entities got.
    ///
    /// # Errors
    /// As [`SaveRegistry::read`] and [`World::load_saved`]. The world is unchanged on error,
    /// but for memory refused part way (see [`World::load_saved`]).
    pub fn load<'de, D: Deserializer<'de>>(
        &mut self,
        registry: &SaveRegistry,
        deserializer: D,
    ) -> Result<EntityMap, LoadError> {
        let saved = registry.read(deserializer)?;
        let mode = if self.entity_count_with_reserved() == 0 {
            LoadMode::Restore
        } else {
            LoadMode::Remap
        };
        self.load_saved(saved, mode)
    }

    /// Puts a save read by [`SaveRegistry::read`] into this world, in `mode`: spawns its
    /// entities with their components (each saved archetype's columns moved into the target
    /// archetype's table as blocks, stamped with the current change tick), maps the ids held
    /// by components registered with entities (for [`LoadMode::Remap`]), runs each loaded
    /// entity's `on_add` and `on_insert` hooks as a spawn does, and inserts the save's
    /// resources (replacing any of the same type). Returns the ids the saved entities got.
    ///
    /// Everything that can be checked is checked, and room for every row reserved, before the
    /// world changes. A hook that spawns or despawns during a restore changes the ids the
    /// restored world hands out next.
    ///
    /// # Errors
    /// [`LoadError::NotEmpty`] for a restore into a world with entities;
    /// [`LoadError::IdNotFree`] when a saved id is alive, reserved, retired or stale in the
    /// target ([`LoadMode::KeepIds`]); [`LoadError::Entities`] when the saved allocator state
    /// does not fit this world's allocator; the world is unchanged then (its entities and
    /// values; archetypes and tables made for the save stay, empty). One case comes late: a
    /// restore whose hooks or observers reserved ids while the loaded entities were spawned
    /// is refused with [`LoadError::Entities`] after those hooks ran; the loaded entities are
    /// then cleared again, with their removal hooks and observers.
    /// [`LoadError::World`] when memory runs out before any entity is placed: the allocator
    /// is put back, so the world is as it was (but for the flush of reserved entities that a
    /// load with [`LoadMode::KeepIds`] or [`LoadMode::Remap`] makes first, as every
    /// structural change does, and for the room reserved).
    pub fn load_saved(
        &mut self,
        saved: SavedWorld,
        mode: LoadMode,
    ) -> Result<EntityMap, LoadError> {
        let SavedWorld { entities: mut state, mut groups, resources } = saved;
        // A load may put back an allocator state no archetype records: snapshots taken
        // before are refilled whole.
        self.snapshot_epoch += 1;
        if mode != LoadMode::Restore {
            // Before `before`: an undo puts back the allocator as it was after this flush.
            self.try_flush()?;
        }
        let before = self.entities.state();
        self.check_target(&state, mode)?;

        // The archetype of each saved one, made if new; then room for every row.
        let mut targets: Vec<(ArchetypeId, ComponentIds)> = vec_with_capacity(groups.len())?;
        for group in &groups {
            let mut ids: ComponentIds = small_vec(group.columns.len(), std::iter::empty())?;
            for column in &group.columns {
                ids.push((column.id)(self).map_err(EntityError::from)?);
            }
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            self.register_builtin_relationships(&sorted);
            targets.push((self.archetype_for(sorted)?, ids));
        }
        let rows = groups.iter().map(|g| g.entities.len());
        self.reserve_rows(rows.zip(targets.iter().map(|t| t.0)))?;
        let mut mapped = Vec::new();
        let mut placed_ids: Vec<Vec<Entity>> = vec_with_capacity(groups.len())?;

        // The ids: every saved entity alive in the allocator, not yet placed. Each group's
        // `entities` then holds the ids its entities get.
        let mut map =
            EntityMap::with_indices(state.generations.len()).map_err(EntityError::from)?;
        let (reserved, takeable) = (state.reserved, state.takeable);
        let allocated = match mode {
            LoadMode::Restore => {
                // Reservations are made pending after the entities are placed.
                (state.reserved, state.takeable) = (0, state.free.len());
                self.entities.try_restore_state(&state).map_err(|e| match e {
                    EntitiesStateError::Storage(e) => LoadError::World(EntityError::Storage(e)),
                    e => LoadError::Entities(e),
                })?;
                groups.iter().flat_map(|g| &g.entities).for_each(|&e| map.insert(e, e));
                Ok(())
            }
            LoadMode::KeepIds => groups.iter().flat_map(|g| &g.entities).try_for_each(|&e| {
                self.entities.try_alloc_exact(e).map_err(LoadError::IdNotFree)?;
                map.insert(e, e);
                Ok(())
            }),
            LoadMode::Remap => groups.iter_mut().flat_map(|g| &mut g.entities).try_for_each(|e| {
                let new = self.entities.try_alloc().map_err(EntityError::from)?;
                map.insert(*e, new);
                *e = new;
                Ok(())
            }),
        };
        let allocated = allocated.and_then(|()| self.reserve_sparse_entries(&groups, &targets));
        if let Err(e) = allocated {
            // No entity is placed yet: the allocator as it was is the world as it was.
            self.restore_allocator(&before);
            return Err(e);
        }

        // Nothing fails from here: every row, entry and id is in place.
        let tick = self.change_tick();
        for (group, (archetype, ids)) in groups.into_iter().zip(&targets) {
            let StagedGroup { entities, columns } = group;
            for column in &columns {
                if let Some(map_fn) = column.map.filter(|_| mode == LoadMode::Remap) {
                    mapped.push((map_fn, placed_ids.len()));
                }
            }
            self.place_loaded(*archetype, ids, columns, &entities, tick);
            placed_ids.push(entities);
        }
        for (map_fn, group) in mapped {
            for &entity in &placed_ids[group] {
                map_fn(self, entity, &map);
            }
        }
        for ((archetype, _), entities) in targets.iter().zip(&placed_ids) {
            if self.archetypes[archetype.index()].hook_flags() & HookFlags::SPAWN != 0 {
                entities.iter().for_each(|&entity| self.after_spawn(entity));
            }
        }

        if mode == LoadMode::Restore
            && let Err(e) = self.entities.try_set_reserved(reserved, takeable)
        {
            // Checked above; a hook that reserved ids during the load is the one way here.
            self.undo_load(&map, mode, &before);
            return Err(LoadError::Entities(e));
        }
        let mapping = (mode == LoadMode::Remap).then_some(&map);
        for resource in resources {
            resource.commit(self, mapping);
        }
        Ok(map)
    }

    /// The checks on the target world a load makes before it changes anything: a restore
    /// needs a world with no entity and room for the saved indices; a load at the saved ids
    /// needs each of them free.
    fn check_target(&self, state: &EntitiesState, mode: LoadMode) -> Result<(), LoadError> {
        match mode {
            LoadMode::Restore => {
                let entities = self.entity_count_with_reserved();
                if entities != 0 {
                    return Err(LoadError::NotEmpty { entities });
                }
                let needs = state
                    .generations
                    .len()
                    .saturating_add(state.reserved.saturating_sub(state.takeable));
                let max = self.entities.max_entities();
                if needs > max {
                    let e = EntitiesStateError::TooManyIndices { indices: needs, max };
                    return Err(LoadError::Entities(e));
                }
            }
            LoadMode::KeepIds => {
                for &index in &state.alive {
                    let e = entity_at(index, state.generations[index as usize].get());
                    self.entities.check_alloc_exact(e).map_err(LoadError::IdNotFree)?;
                }
            }
            LoadMode::Remap => {}
        }
        Ok(())
    }

    /// Reserves, for each `(rows, archetype)`, the rows in the archetype's table and list and
    /// the entries in its sparse sets (summed over the saved archetypes that land in one).
    fn reserve_rows(
        &mut self,
        counts: impl Iterator<Item = (usize, ArchetypeId)>,
    ) -> Result<(), EntityError> {
        let mut per_archetype: Vec<usize> = vec_with_capacity(self.archetypes.len())?;
        per_archetype.resize(self.archetypes.len(), 0);
        for (rows, archetype) in counts {
            per_archetype[archetype.index()] += rows;
        }
        let mut per_table: Vec<usize> = vec_with_capacity(self.tables.len())?;
        per_table.resize(self.tables.len(), 0);
        for (a, &rows) in per_archetype.iter().enumerate().filter(|(_, rows)| **rows > 0) {
            let arch = &mut self.archetypes[a];
            arch.try_reserve(rows)?;
            per_table[arch.table_id().index()] += rows;
            for c in arch.sparse_components() {
                let set = self.sparse_sets[c.index()].as_mut().expect("made with the archetype");
                set.try_reserve(rows)?;
            }
        }
        for (t, &rows) in per_table.iter().enumerate().filter(|(_, rows)| **rows > 0) {
            self.tables[t].try_reserve(rows)?;
        }
        Ok(())
    }

    /// Reserves, in each sparse set of each target archetype, the page of each new id.
    fn reserve_sparse_entries(
        &mut self,
        groups: &[StagedGroup],
        targets: &[(ArchetypeId, ComponentIds)],
    ) -> Result<(), LoadError> {
        for (group, (archetype, _)) in groups.iter().zip(targets) {
            let arch = &self.archetypes[archetype.index()];
            for c in arch.sparse_components() {
                let set = self.sparse_sets[c.index()].as_mut().expect("made with the archetype");
                for &entity in &group.entities {
                    set.try_reserve_entity(entity).map_err(EntityError::from)?;
                }
            }
        }
        Ok(())
    }

    /// Places `entities` (alive, not yet placed) in `archetype`, whose components are `ids`
    /// (in the order of `columns`), with the values of `columns`: each table column's values
    /// moved in as one block, each sparse value inserted.
    ///
    /// Room for the rows, list entries and sparse entries was reserved.
    fn place_loaded(
        &mut self,
        archetype: ArchetypeId,
        ids: &[ComponentId],
        columns: Vec<StagedColumn>,
        entities: &[Entity],
        tick: u32,
    ) {
        let n = entities.len();
        let arch = &self.archetypes[archetype.index()];
        let table = &mut self.tables[arch.table_id().index()];
        assert!(table.spare_rows() >= n, "room for the loaded rows was reserved");
        let start = table.len();
        // SAFETY: the rows `start..start + n` are inside the entity column's buffer (room was
        // reserved, checked above); the slots are past the length, so nothing is overwritten.
        unsafe {
            std::ptr::copy_nonoverlapping(entities.as_ptr(), table.entity_base().add(start), n);
        }
        let mut sparse = Vec::new();
        for (column, &id) in columns.into_iter().zip(ids) {
            match table.column_index(id) {
                Some(col) => {
                    let size = self.components.info(id).layout().size();
                    debug_assert_eq!(column.values.len(), n);
                    // SAFETY:
                    // - the column holds values of `id`'s type, which `column.values` holds
                    //   (`id` was made from the same registered type), `n` of them (checked
                    //   when read: one per entity).
                    // - rows `start..start + n` are inside the column's buffer (reserved)
                    //   and past its length: the slots hold no value.
                    unsafe { column.values.write_to(table.row_base(col).add(start * size)) };
                }
                None => sparse.push((id, column.values)),
            }
        }
        // SAFETY: every column of the table is one of the archetype's table components, each
        // of which a saved column wrote above (the archetype is exactly the saved one's); the
        // entity slots were written too, and `n <= spare_rows()`.
        unsafe { table.commit_rows(n, tick) };
        for (id, values) in sparse {
            let set = self.sparse_sets[id.index()].as_mut().expect("made with the archetype");
            // SAFETY: the set holds `id`'s type, the values' type; its entries and the
            // entities' pages were reserved; one value per entity.
            unsafe { values.insert_into(set, entities, tick) };
        }
        let arch = &mut self.archetypes[archetype.index()];
        if arch.is_listed() {
            for (row, &entity) in (start as u32..).zip(entities) {
                let archetype_row = arch.push(entity, row);
                let location =
                    EntityLocation { archetype_id: archetype.0, archetype_row, table_row: row };
                self.entities.set_location(entity, location);
            }
        } else {
            // The archetype has its table to itself: archetype rows are table rows.
            arch.extend_unlisted(n);
            self.entities.set_block_locations(entities, archetype.0, start as u32);
        }
    }

    /// The id of component `T` in this world, registered with table storage if it is new (as
    /// an insert registers it): how a load finds the column a saved one goes to.
    pub(crate) fn component_id_for_load<T: Component>(
        &mut self,
    ) -> Result<ComponentId, ComponentError> {
        if let Some(id) = self.components.id::<T>() {
            return Ok(id);
        }
        self.components.try_reserve(1).map_err(ComponentError::from_alloc)?;
        let id = self.components.register_with::<T>(StorageType::Table)?;
        self.removals.resolve_pending(&self.components);
        Ok(id)
    }

    /// Puts back the allocator state `before`, taken while the entities alive then were
    /// alive: the entities a failed load made alive and did not place are free again.
    fn restore_allocator(&mut self, before: &EntitiesState) {
        if let Err(e) = self.entities.try_restore_state(before) {
            unreachable!("the allocator had room for its own earlier state: {e}");
        }
    }

    /// Alive plus reserved-but-unflushed entities.
    fn entity_count_with_reserved(&self) -> usize {
        self.entities.len() + self.entities.reserved_len()
    }

    /// Despawns what a failed load spawned, then puts back the allocator the world had
    /// (`before`: generations, freelist order), so the ids it hands out next are the ones it
    /// would have. The entities that were alive before keep their places.
    fn undo_load(&mut self, map: &EntityMap, mode: LoadMode, before: &EntitiesState) {
        match mode {
            // The world had no entity: clearing despawns exactly the loaded ones.
            LoadMode::Restore => self.clear(),
            LoadMode::KeepIds | LoadMode::Remap => {
                self.despawn_batch(map.iter().map(|(_, new)| new));
            }
        }
        // Unless a hook spawned or despawned during the load (then the live set differs from
        // `before`'s, and the allocator keeps its own state).
        let same_alive = self.entities.len() == before.alive.len()
            && self.entities.reserved_len() == 0
            && before.alive.iter().all(|&index| {
                let generation = before.generations[index as usize].get();
                self.entities.is_alive(entity_at(index, generation))
            });
        if same_alive {
            self.restore_allocator(before);
        }
    }
}

/// The id of `index` at `generation` (never 0: the saved state was checked).
fn entity_at(index: u32, generation: u32) -> Entity {
    Entity::from_bits(u64::from(generation) << 32 | u64::from(index))
        .expect("a non-zero generation")
}
