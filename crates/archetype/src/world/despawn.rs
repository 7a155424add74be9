//! Despawning: `despawn`, `despawn_batch` (one at a time with a look-ahead, or by marking
//! and sweeping whole tables) and `clear`, with the guards that finish the bookkeeping when a
//! `Drop` panics.

use folio_storage::{ComponentSparseSet, Entities, Entity};

use super::rows::{fix_table_row, table_index, unlink_row};
use super::{World, or_panic};
use crate::archetype::{Archetype, ArchetypeId};
use crate::component::ComponentId;
use crate::error::EntityError;
use crate::hooks::HookFlags;
use crate::table::Table;
use crate::try_alloc::vec_with_capacity;
use crate::unwind::for_each_finishing;

impl World {
    /// Despawns `entity`, dropping its components.
    ///
    /// If a component's `Drop` panics, the entity is still gone and every other component is
    /// still dropped before the panic continues.
    ///
    /// Reserved entities stay pending unless `entity` is one of them: a despawn needs no flush,
    /// so a buffer of despawns followed by spawns of reserved entities places each of those
    /// straight into its table ([`World::spawn_reserved`]).
    ///
    /// # Errors
    /// [`EntityError::NoSuchEntity`] when `entity` is not alive (nor reserved);
    /// [`EntityError::Storage`] when it is not alive, reservations are pending, and memory to
    /// flush them (to see whether `entity` is one) was refused: nothing changed then.
    pub fn despawn(&mut self, entity: Entity) -> Result<(), EntityError> {
        if self.entity_has_hooks(entity, HookFlags::REMOVAL) {
            return self.despawn_with_hooks(entity);
        }
        self.despawn_raw(entity)
    }

    /// [`World::despawn`] without hooks.
    ///
    /// Always inlined into the public operation, which was this body before hooks: out of
    /// line, the call costs the hookless path about 30 instructions (world_profile).
    #[inline(always)]
    pub(crate) fn despawn_raw(&mut self, entity: Entity) -> Result<(), EntityError> {
        if self.removals.any() {
            self.reserve_removal_of(entity)?;
        }
        let loc = match self.entities.free(entity) {
            Some(loc) => loc,
            None if self.entities.has_reserved() => {
                self.flush_reserved()?;
                self.entities.free(entity).ok_or(EntityError::NoSuchEntity(entity))?
            }
            None => return Err(EntityError::NoSuchEntity(entity)),
        };
        // A despawn at a random row misses the cache in every column, the archetype's list and
        // the moved entity's meta; start all those loads now so they overlap.
        let archetype = &self.archetypes[loc.archetype_id as usize];
        self.removals.record(entity, archetype.components());
        let table_index = archetype.table_id().index();
        let table = &self.tables[table_index];
        table.prefetch_row(loc.table_row as usize);
        let tail = table.entities();
        if let Some(&last) = tail.last() {
            self.entities.prefetch(last);
        }
        // The entity that moves into a hole a few despawns from now (when they are in this
        // table too, as a burst of despawns mostly is): its meta is a miss of its own, and the
        // `prefetch(last)` above comes too late to hide it.
        if let Some(&later) = tail.len().checked_sub(TAIL_META_AHEAD + 1).map(|i| &tail[i]) {
            self.entities.prefetch(later);
        }
        archetype.prefetch(loc.archetype_row);
        let table = &mut self.tables[table_index];
        unlink_row(&mut self.entities, &mut self.archetypes, table, entity, loc);
        let sparse = self.archetypes[loc.archetype_id as usize].sparse_components();
        let mut sparse_guard =
            SparseRemover { sets: &mut self.sparse_sets, ids: sparse, entity, next: 0 };
        table.swap_remove_and_drop(loc.table_row as usize);
        sparse_guard.run();
        Ok(())
    }

    /// Makes room in the removal logs for `entity`'s despawn, before anything changes, so that
    /// recording it cannot allocate. Nothing to do for an entity that is not alive.
    ///
    /// # Errors
    /// [`StorageError::Alloc`](folio_storage::StorageError::Alloc) when the heap refuses.
    #[cold]
    #[inline(never)]
    pub(super) fn reserve_removal_of(&mut self, entity: Entity) -> Result<(), EntityError> {
        if let Some(loc) = self.entities.location(entity) {
            let archetype = &self.archetypes[loc.archetype_id as usize];
            self.removals.try_reserve(archetype.components(), 1)?;
        }
        Ok(())
    }

    /// Despawns every entity `entities` yields, as [`World::despawn`] would one at a time; ids
    /// that are stale or unknown by their turn (despawned earlier, even earlier in the same
    /// batch) are skipped. Returns how many were despawned.
    ///
    /// A batch of [`BULK_DESPAWN_FROM`] or more entities (by its iterator's size hint) first
    /// marks the rows of the entities in table-only archetypes (no sparse-set components, not
    /// sharing their table), then sweeps each such table once: the marked values are dropped
    /// and the rows that stay move down into the holes, so despawning a table's every entity,
    /// or its last rows, moves no row at all. The other entities, and every entity of a smaller
    /// batch, are despawned one at a time in order, each with the metas and rows of the ones
    /// after it asked for ahead of time (the look-ahead of [`World::prefetch_entity`] and
    /// [`World::prefetch_entity_row`]), so their cache misses overlap. 10M `(Transform,)`
    /// entities despawned in a random order (world_report): 5.3 s one at a time, 1.65–1.73 s
    /// one at a time with the look-ahead (hecs: 1.9–2.0 s); see docs/PERFORMANCE.md for the
    /// sweep.
    ///
    /// A sweep costs a bitmap of one bit per row of each table it touches, and a scan of it per
    /// column whose type has a `Drop`, however few of the table's rows are marked. An iterator
    /// whose size hint's lower bound is under the threshold (say, after a `filter`) never
    /// sweeps; collect it into a `Vec` first to make it.
    ///
    /// If a component's `Drop` panics, the entity being despawned is still gone and every
    /// other component of it dropped (as with `despawn`); in a sweep, every marked entity is
    /// still despawned and each of their values dropped once (a second panicking `Drop` during
    /// that unwinding aborts the process, as for a `Vec`). The panic then continues, and the
    /// entities not yet reached stay alive. If the iterator itself panics, the entities marked
    /// so far are still despawned.
    ///
    /// While some component has a removal hook, the batch is collected first, every hook runs
    /// before anything is despawned, and a panicking `Drop` leaves no entity of the batch alive
    /// (see [`crate::hooks`]).
    ///
    /// # Panics
    /// When reserved entities are pending and the OS refuses memory to flush them first (before
    /// anything changes: they stay reserved), and as above when a `Drop` or the iterator panics.
    #[track_caller]
    pub fn despawn_batch(&mut self, entities: impl IntoIterator<Item = Entity>) -> usize {
        or_panic(self.try_flush(), "World::despawn_batch");
        let entities = entities.into_iter();
        if self.hooks.any(HookFlags::REMOVAL) {
            return self.despawn_batch_hooked(entities);
        }
        self.despawn_batch_raw(entities)
    }

    /// [`World::despawn_batch`] without hooks, reserved entities flushed.
    pub(super) fn despawn_batch_raw(&mut self, entities: impl Iterator<Item = Entity>) -> usize {
        if entities.size_hint().0 >= BULK_DESPAWN_FROM {
            return self.despawn_swept(entities);
        }
        self.despawn_each(entities)
    }

    /// [`World::despawn_batch`] of a large batch: mark, sweep, then the rest one at a time.
    fn despawn_swept(&mut self, entities: impl Iterator<Item = Entity>) -> usize {
        // Without room for the table slots (the heap refused), one at a time: that needs none.
        let Ok(mut slot_of_table) = vec_with_capacity(self.tables.len()) else {
            return self.despawn_each(entities);
        };
        slot_of_table.resize(self.tables.len(), u32::MAX);
        let mut rest = Vec::new();
        let removals = &mut self.removals;
        // Made before the first entity is freed: if the caller's iterator panics, its `Drop`
        // still sweeps the rows of the entities freed so far.
        let mut sweep = SweepTables {
            tables: &mut self.tables,
            archetypes: &mut self.archetypes,
            entities: &mut self.entities,
            swept: Vec::new(),
            next: 0,
        };
        let mut ring = Lookahead::new(entities);
        while let Some(entity) = ring.next(|e| sweep.entities.prefetch(e)) {
            let Some(loc) = sweep.entities.location(entity) else { continue };
            let archetype = &sweep.archetypes[loc.archetype_id as usize];
            // An entity whose removal the logs have no room for goes the one-at-a-time way,
            // which reports it (and skips it, alive).
            if archetype.is_listed()
                || !archetype.sparse_components().is_empty()
                || (removals.any() && removals.try_reserve(archetype.components(), 1).is_err())
                || !try_make_sweep(sweep.tables, &mut sweep.swept, &mut slot_of_table, archetype)
            {
                // Never aborts: an entity the list has no room for is skipped, alive (the heap
                // refused even a list of ids, so nothing could be despawned one at a time).
                if rest.try_reserve(1).is_ok() {
                    rest.push(entity);
                }
                continue;
            }
            removals.record(entity, archetype.components());
            let table = archetype.table_id().index();
            let (_, marks, count) = &mut sweep.swept[slot_of_table[table] as usize];
            let row = loc.table_row as usize;
            marks[row / 64] |= 1 << (row % 64);
            *count += 1;
            // Dead from here on, so a repeat of it is skipped; its row goes in the sweep.
            sweep.entities.free(entity);
        }
        let mut despawned = sweep.swept.iter().map(|s| s.2).sum::<usize>();
        sweep.run();
        drop(sweep);
        despawned += self.despawn_each(rest.into_iter());
        despawned
    }

    /// [`World::despawn_batch`] one entity at a time, with the look-ahead.
    fn despawn_each(&mut self, entities: impl Iterator<Item = Entity>) -> usize {
        let mut ring = Lookahead::new(entities);
        let mut despawned = 0;
        while let Some(entity) = ring.next(|e| self.prefetch_entity(e)) {
            if let Some(later) = ring.peek(BATCH_ROW_AHEAD - 1) {
                self.prefetch_entity_row(later);
            }
            if let Some(next) = ring.peek(0) {
                self.prefetch_filler(next);
            }
            despawned += usize::from(self.despawn_raw(entity).is_ok());
        }
        despawned
    }

    /// Starts loading the metas of the entities that may fill `entity`'s row when it is
    /// despawned right after the despawn running now: the last two rows of its table. A
    /// swap-remove moves the last row into the hole and updates that entity's meta, a miss of
    /// its own that a look-ahead further than one entity cannot see. A hint that changes
    /// nothing. In [`World::despawn_batch`], 10M despawns in a random order: 2.7-2.8 s without
    /// it, 1.65-1.73 s with it. (Applying commands, 1,000 among 100,000, gained nothing
    /// measurable from it: the fillers' metas were mostly cached.)
    #[inline]
    fn prefetch_filler(&self, entity: Entity) {
        if let Some(loc) = self.entities.location(entity) {
            let last = self.tables[table_index(&self.archetypes, loc)].entities();
            for &filler in last.iter().rev().take(2) {
                self.entities.prefetch(filler);
            }
        }
    }

    /// Despawns every entity and drops every component; keeps archetypes, tables and memory.
    ///
    /// If a component's `Drop` panics, every other component is still dropped, and the world
    /// is empty and consistent, before the panic continues.
    ///
    /// # Panics
    /// When memory is refused (see [`World::try_clear`], which says so instead), and as above
    /// when a `Drop` panics.
    #[track_caller]
    pub fn clear(&mut self) {
        or_panic(self.try_clear(), "World::clear");
    }

    /// [`World::clear`], or the typed error when the memory it needs is refused: to flush the
    /// reserved entities first, or (while removals are tracked) room in the removal logs for
    /// an entry per entity and tracked component. Both are had before anything changes, and
    /// before any hook runs; the rest of a clear allocates nothing.
    ///
    /// # Errors
    /// [`EntityError::Storage`] when memory is refused; nothing changed then (reserved
    /// entities stay reserved).
    pub fn try_clear(&mut self) -> Result<(), EntityError> {
        self.try_flush()?;
        // The allocator is reset with no archetype left to record it: snapshots taken before
        // are refilled whole.
        self.snapshot_epoch += 1;
        if self.removals.any() {
            let Self { archetypes, removals, .. } = self;
            removals.try_reserve_by(|index| {
                let has = |a: &&Archetype| {
                    a.components().binary_search_by_key(&index, |c| c.index()).is_ok()
                };
                archetypes.iter().filter(has).map(Archetype::len).sum()
            })?;
        }
        if self.hooks.any(HookFlags::REMOVAL) {
            self.run_removal_hooks_all();
        }
        if self.removals.any() {
            let Self { archetypes, tables, removals, .. } = self;
            for archetype in archetypes.iter() {
                for entry in archetype.entities(&tables[archetype.table_id().index()]).iter() {
                    removals.record(entry.entity, archetype.components());
                }
            }
        }
        self.entities.clear();
        for archetype in &mut self.archetypes {
            archetype.clear_entities();
        }
        // Dropping the values runs user code: a panic in one set or table must not leave the
        // others holding rows of entities that are already gone.
        let Self { sparse_sets, tables, .. } = self;
        let sets = sparse_sets.len();
        for_each_finishing(0..sets + tables.len(), |i| match sparse_sets.get_mut(i) {
            Some(set) => set.as_mut().map_or((), ComponentSparseSet::clear),
            None => tables[i - sets].clear(),
        });
        if !self.hooks.deferred.is_empty() {
            self.apply_deferred();
        }
        Ok(())
    }
}

/// The size (by the iterator's size hint) from which [`World::despawn_batch`] marks and sweeps
/// tables instead of despawning one entity at a time.
pub const BULK_DESPAWN_FROM: usize = 4096;

/// The sweeps of [`World::despawn_batch`]: each table's marked rows removed
/// ([`Table::remove_marked`]), the entities moved into their holes relocated. Its `Drop`
/// finishes the tables not yet swept, so a panicking value `Drop` leaves no entity freed
/// with its row still in a table.
struct SweepTables<'w> {
    tables: &'w mut [Table],
    archetypes: &'w mut [Archetype],
    entities: &'w mut Entities,
    /// For each table to sweep: its only archetype, the marks, how many are marked.
    swept: Vec<(ArchetypeId, Vec<u64>, usize)>,
    /// The next one to sweep.
    next: usize,
}

impl SweepTables<'_> {
    fn run(&mut self) {
        while self.next < self.swept.len() {
            let (archetype, ref marks, count) = self.swept[self.next];
            self.next += 1;
            let archetype = &mut self.archetypes[archetype.index()];
            // The sweep completes even if a drop panics, so the count is right either way.
            archetype.truncate_unlisted(count);
            let table = &mut self.tables[archetype.table_id().index()];
            let (entities, archetypes) = (&mut *self.entities, &mut *self.archetypes);
            table.remove_marked(marks, |entity, row| {
                fix_table_row(entities, archetypes, entity, row as u32);
            });
        }
    }
}

impl Drop for SweepTables<'_> {
    fn drop(&mut self) {
        self.run();
    }
}

/// How many entities ahead of the one it despawns [`World::despawn_batch`] asks for an
/// entity's meta (a hint: it starts the cache miss early).
pub const BATCH_META_AHEAD: usize = 16;

/// How many entities ahead of the one it despawns [`World::despawn_batch`] asks for an
/// entity's row, whose address comes from the meta asked for earlier.
pub const BATCH_ROW_AHEAD: usize = 8;

/// How many rows from a table's end [`World::despawn`] asks for the meta of the entity that
/// will be moved into a hole that many despawns later.
const TAIL_META_AHEAD: usize = 8;

/// The next [`BATCH_META_AHEAD`] entities of an iterator, held in a ring: what
/// [`World::despawn_batch`] looks ahead through, asking for each entity's meta as it joins.
struct Lookahead<I> {
    entities: I,
    ring: [Entity; BATCH_META_AHEAD],
    /// The oldest held entity's slot.
    head: usize,
    /// How many are held.
    ahead: usize,
}

impl<I: Iterator<Item = Entity>> Lookahead<I> {
    fn new(entities: I) -> Self {
        Self { entities, ring: [Entity::PLACEHOLDER; BATCH_META_AHEAD], head: 0, ahead: 0 }
    }

    /// Tops the ring up (`joined(e)` for each entity that joins it), then takes its oldest.
    #[inline]
    fn next(&mut self, mut joined: impl FnMut(Entity)) -> Option<Entity> {
        while self.ahead < BATCH_META_AHEAD {
            let Some(entity) = self.entities.next() else { break };
            joined(entity);
            self.ring[(self.head + self.ahead) % BATCH_META_AHEAD] = entity;
            self.ahead += 1;
        }
        if self.ahead == 0 {
            return None;
        }
        let entity = self.ring[self.head];
        self.head = (self.head + 1) % BATCH_META_AHEAD;
        self.ahead -= 1;
        Some(entity)
    }

    /// The entity `k` places after the one last taken, if the ring holds it.
    #[inline]
    fn peek(&self, k: usize) -> Option<Entity> {
        (k < self.ahead).then(|| self.ring[(self.head + k) % BATCH_META_AHEAD])
    }
}

/// Removes an entity from sparse sets `ids[next..]`; when a value's `Drop` panics, its own
/// `Drop` (run while unwinding) carries on with the rest.
struct SparseRemover<'a> {
    sets: &'a mut [Option<ComponentSparseSet>],
    ids: &'a [ComponentId],
    entity: Entity,
    next: usize,
}

impl SparseRemover<'_> {
    fn run(&mut self) {
        while self.next < self.ids.len() {
            let c = self.ids[self.next];
            self.next += 1;
            if let Some(set) = self.sets[c.index()].as_mut() {
                set.remove_and_drop(self.entity);
            }
        }
    }
}

impl Drop for SparseRemover<'_> {
    fn drop(&mut self) {
        self.run();
    }
}

/// Makes the sweep of `archetype`'s table if it has none yet: its mark bitmap, one bit per
/// table row. Returns false when the heap refuses it (nothing changes then).
fn try_make_sweep(
    tables: &[Table],
    swept: &mut Vec<(ArchetypeId, Vec<u64>, usize)>,
    slot_of_table: &mut [u32],
    archetype: &Archetype,
) -> bool {
    let table = archetype.table_id().index();
    if slot_of_table[table] != u32::MAX {
        return true;
    }
    let words = tables[table].len().div_ceil(64);
    let mut marks = Vec::new();
    if marks.try_reserve_exact(words).is_err() || swept.try_reserve(1).is_err() {
        return false;
    }
    marks.resize(words, 0);
    slot_of_table[table] = swept.len() as u32;
    swept.push((archetype.id(), marks, 0));
    true
}
