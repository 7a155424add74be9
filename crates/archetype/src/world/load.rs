//! [`World::load`] and [`World::load_saved`]: a checked [`SavedWorld`] into this world, in one
//! of three [`LoadMode`]s.

use folio_storage::{EntitiesState, EntitiesStateError, Entity, EntityLocation};
use serde::Deserializer;

use super::World;
use crate::archetype::ArchetypeId;
use crate::error::EntityError;
use crate::save::{EntityMap, LoadError, SaveRegistry, SavedWorld};
use crate::table::TableId;

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
    /// entities, inserts their components (as inserts do, running hooks, stamped with the
    /// current change tick) and inserts its resources (replacing any of the same type).
    /// Returns the ids the saved entities got.
    ///
    /// Everything that can be checked is checked before the world changes. Hooks run on the
    /// load's inserts as on any; a hook that spawns or despawns during a restore changes the
    /// ids the restored world hands out next.
    ///
    /// # Errors
    /// [`LoadError::NotEmpty`] for a restore into a world with entities;
    /// [`LoadError::IdNotFree`] when a saved id is alive, reserved, retired or stale in the
    /// target ([`LoadMode::KeepIds`]); [`LoadError::Entities`] when the saved allocator state
    /// does not fit this world's allocator; the world is unchanged then.
    /// [`LoadError::World`] when memory runs out part way: what the load spawned is despawned
    /// again and the allocator put back, so the world is as it was (but for the flush of
    /// reserved entities that a load with [`LoadMode::KeepIds`] or [`LoadMode::Remap`] makes
    /// first, as every structural change does).
    pub fn load_saved(
        &mut self,
        saved: SavedWorld,
        mode: LoadMode,
    ) -> Result<EntityMap, LoadError> {
        let SavedWorld { entities: state, columns, resources } = saved;
        // A load may put back an allocator state no archetype records: snapshots taken
        // before are refilled whole.
        self.snapshot_epoch += 1;
        let saved_ids: Vec<Entity> = state
            .alive
            .iter()
            .map(|&index| entity_at(index, state.generations[index as usize].get()))
            .collect();

        if mode != LoadMode::Restore {
            // Before `before`: an undo puts back the allocator as it was after this flush.
            self.try_flush()?;
        }
        let before = self.entities.state();
        let mut map = EntityMap::new();
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
                // Reservations are made pending after the inserts below, which would flush them.
                let placing =
                    EntitiesState { takeable: state.free.len(), reserved: 0, ..state.clone() };
                self.restore_entities(&placing)?;
                saved_ids.iter().for_each(|&e| map.insert(e, e));
            }
            LoadMode::KeepIds => {
                for &e in &saved_ids {
                    self.entities.check_alloc_exact(e).map_err(LoadError::IdNotFree)?;
                }
                for &e in &saved_ids {
                    if let Err(error) = self.try_spawn_at(e, ()) {
                        self.undo_load(&map, mode, &before);
                        return Err(error.into());
                    }
                    map.insert(e, e);
                }
            }
            LoadMode::Remap => {
                for &e in &saved_ids {
                    match self.try_spawn(()) {
                        Ok(new) => map.insert(e, new),
                        Err(error) => {
                            self.undo_load(&map, mode, &before);
                            return Err(error.into());
                        }
                    }
                }
            }
        }

        let mapping = (mode == LoadMode::Remap).then_some(&map);
        for (_, column) in columns {
            let mut targets = column.entities.iter().map(|&e| map.get(e).expect("checked rows"));
            if let Err(error) = column.values.commit(self, &mut targets, mapping) {
                self.undo_load(&map, mode, &before);
                return Err(LoadError::World(error));
            }
        }
        if mode == LoadMode::Restore
            && let Err(e) = self.entities.try_set_reserved(state.reserved, state.takeable)
        {
            // Checked above; a hook that reserved ids during the inserts is the one way here.
            self.undo_load(&map, mode, &before);
            return Err(LoadError::Entities(e));
        }
        for resource in resources {
            resource.commit(self, mapping);
        }
        Ok(map)
    }

    /// Alive plus reserved-but-unflushed entities.
    fn entity_count_with_reserved(&self) -> usize {
        self.entities.len() + self.entities.reserved_len()
    }

    /// Restores the allocator from `state` and places every alive entity, in `state.alive`'s
    /// order, in the empty archetype. The world has no entity. On error nothing changed.
    fn restore_entities(&mut self, state: &EntitiesState) -> Result<(), LoadError> {
        let n = state.alive.len();
        // Room first: once the allocator is restored nothing may fail.
        self.tables[TableId::EMPTY.index()].try_reserve(n).map_err(EntityError::from)?;
        self.archetypes[ArchetypeId::EMPTY.index()].try_reserve(n).map_err(EntityError::from)?;
        self.entities.try_restore_state(state).map_err(|e| match e {
            EntitiesStateError::Storage(e) => LoadError::World(EntityError::Storage(e)),
            e => LoadError::Entities(e),
        })?;
        let tick = self.change_tick();
        let table = &mut self.tables[TableId::EMPTY.index()];
        let archetype = &mut self.archetypes[ArchetypeId::EMPTY.index()];
        for &index in &state.alive {
            let entity = entity_at(index, state.generations[index as usize].get());
            // SAFETY: the empty table has no components, so `value` is never called.
            let row = match unsafe { table.push_row(entity, tick, |_| unreachable!()) } {
                Ok(row) => row,
                Err(e) => unreachable!("the rows were reserved above: {e}"),
            };
            let archetype_row = archetype.push(entity, row as u32);
            self.entities.set_location(
                entity,
                EntityLocation {
                    archetype_id: ArchetypeId::EMPTY.0,
                    archetype_row,
                    table_row: row as u32,
                },
            );
        }
        Ok(())
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
        if same_alive && let Err(e) = self.entities.try_restore_state(before) {
            unreachable!("the allocator had room for its own earlier state: {e}");
        }
    }
}

/// The id of `index` at `generation` (never 0: the saved state was checked).
fn entity_at(index: u32, generation: u32) -> Entity {
    Entity::from_bits(u64::from(generation) << 32 | u64::from(index))
        .expect("a non-zero generation")
}
