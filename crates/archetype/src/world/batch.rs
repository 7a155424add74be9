//! `insert_batch` and `remove_batch`: every entity checked and room reserved first, then the
//! batch moved as one block, last row first, or one entity at a time.

use folio_storage::{Entity, EntityLocation, StorageError};
use smallvec::SmallVec;

use super::World;
use super::rows::{move_parts, two_mut};
use crate::archetype::{ArchetypeId, Edge};
use crate::bundle::Bundle;
use crate::error::EntityError;
use crate::hooks::HookFlags;
use crate::table::TableId;
use crate::try_alloc::{collect, reserve, small_vec, vec_with_capacity};

impl World {
    /// Adds each bundle to its entity, as [`World::insert`] would one at a time, with every
    /// entity checked and room reserved first and the bundle type resolved once.
    ///
    /// A batch whose entities are the last rows of one archetype's table, in row order (all of
    /// an archetype's entities as they were spawned, or as a query met them), moves as one
    /// block: one copy per column instead of one row move per entity. Other batches of one
    /// archetype in increasing row order are moved last row first, so no row is swapped into a
    /// hole; any other batch takes the entities in the order given. An entity listed twice ends
    /// with its later bundle.
    ///
    /// On an entity that is not alive, or when the room cannot be reserved, nothing changed:
    /// the error says why, and the bundles taken from `batch` are dropped. If a replaced
    /// value's `Drop` panics, the entity being worked on gets its whole bundle (as with
    /// [`World::insert`]), the panic continues, and the bundles of the entities not yet worked
    /// on are dropped: those after it in the batch, or, for a batch taken last row first,
    /// those before it.
    pub fn insert_batch<B, I>(&mut self, batch: I) -> Result<(), EntityError>
    where
        B: Bundle,
        I: IntoIterator<Item = (Entity, B)>,
    {
        self.try_flush()?;
        let b = self.bundle_id::<B>()?;
        // Grown fallibly: a refused block drops the bundles taken so far and the rest.
        let batch: Vec<(Entity, B)> = collect(batch.into_iter())?;
        // On an error the bundles are dropped here.
        let run = self.check_batch(batch.iter().map(|&(e, _)| e), None)?;
        if self.hooks.any_in(self.bundles[b].ids(), HookFlags::INSERTS) {
            return self.insert_batch_hooked(batch, b);
        }
        let tick = self.change_tick();
        if let Some(from) = run.archetype {
            let edge = self.insert_edge(from, b)?;
            if edge.to != from {
                self.reserve_batch_targets(&[(from, edge, batch.len())])?;
                self.reserve_bundle_sets(b, batch.iter().map(|&(e, _)| e), batch.len())?;
                if run.tail && self.is_block_move(from, edge) {
                    self.insert_tail(batch, from, edge, tick);
                    return Ok(());
                }
                if run.tail && self.is_list_block_move(from, edge) {
                    self.insert_sparse_tail(batch, b, from, edge, tick);
                    return Ok(());
                }
                // Last row first: each move takes the last row among those left in the table
                // (or one behind it), so no row (or few) is swapped into a hole.
                for (entity, bundle) in batch.into_iter().rev() {
                    let loc = self.entities.location(entity).expect("checked alive");
                    self.insert_located(entity, loc, b, bundle, tick)?;
                }
                return Ok(());
            }
        }
        let targets =
            self.batch_targets(batch.iter().map(|&(e, _)| e), |w, from| w.insert_edge(from, b))?;
        self.reserve_batch_targets(&targets)?;
        self.reserve_bundle_sets(b, batch.iter().map(|&(e, _)| e), batch.len())?;
        for (entity, bundle) in batch {
            let loc = self.entities.location(entity).expect("checked alive");
            self.insert_located(entity, loc, b, bundle, tick)?;
        }
        Ok(())
    }

    /// Removes the components of `B` from each entity and returns them, in the entities'
    /// order: [`World::try_remove`] for a batch, with every entity checked and room reserved
    /// first. Moves as one block, or last row first, as [`World::insert_batch`] does.
    ///
    /// On an entity that is not alive, lacks a component of `B` or is listed twice, or when
    /// the room cannot be reserved, nothing changed and the error says why.
    pub fn remove_batch<B: Bundle>(
        &mut self,
        entities: impl IntoIterator<Item = Entity>,
    ) -> Result<Vec<B>, EntityError> {
        self.try_flush()?;
        let b = self.bundle_id::<B>()?;
        let entities: Vec<Entity> = collect(entities.into_iter())?;
        if self.hooks.any_in(self.bundles[b].ids(), HookFlags::REMOVAL) {
            // Every entity checked before any hook runs; the hooks change no structure, so the
            // check holds for the removal after them.
            self.check_remove_batch(&entities, b)?;
            self.run_removal_hooks_batch(&entities, b);
            let removed = self.remove_batch_raw(&entities, b);
            self.apply_deferred();
            return removed;
        }
        self.remove_batch_raw(&entities, b)
    }

    /// [`World::remove_batch`] without hooks, once the entities are collected and the bundle's
    /// index `b` is known.
    fn remove_batch_raw<B: Bundle>(
        &mut self,
        entities: &[Entity],
        b: usize,
    ) -> Result<Vec<B>, EntityError> {
        if self.removals.any() {
            // Room in the removal logs first: recording must not allocate once entities moved.
            self.removals.try_reserve(self.bundles[b].ids(), entities.len())?;
        }
        let removed = self.remove_batch_of(entities, b)?;
        if self.removals.any() {
            for &entity in entities {
                self.removals.record(entity, self.bundles[b].ids());
            }
        }
        Ok(removed)
    }

    /// [`World::remove_batch`] once the entities are collected and the bundle's index `b` is
    /// known.
    fn remove_batch_of<B: Bundle>(
        &mut self,
        entities: &[Entity],
        b: usize,
    ) -> Result<Vec<B>, EntityError> {
        let run = self.check_batch(entities.iter().copied(), Some(b))?;
        if self.bundles[b].ids().is_empty() {
            // `()`: nothing to take, nowhere to move.
            // SAFETY: the empty bundle reads no component pointer.
            let nothing = || unsafe { B::from_components(&mut || unreachable!()) };
            return Ok(entities.iter().map(|_| nothing()).collect());
        }
        if let Some(from) = run.archetype {
            let edge = self.remove_edge(from, b)?;
            self.reserve_batch_targets(&[(from, edge, run.len)])?;
            // The values handed back, made before anything moves.
            let mut removed = vec_with_capacity(run.len)?;
            if run.tail && self.is_block_move(from, edge) {
                self.remove_tail(&mut removed, run.len, from, edge);
                return Ok(removed);
            }
            if run.tail && self.is_list_block_move(from, edge) {
                self.remove_sparse_tail(&mut removed, run.len, b, from, edge);
                return Ok(removed);
            }
            for &entity in entities.iter().rev() {
                let loc = self.entities.location(entity).expect("checked alive");
                removed.push(self.remove_located(entity, loc, b).expect("checked and reserved"));
            }
            removed.reverse();
            return Ok(removed);
        }
        if let Some(twice) = first_repeat(entities.iter().copied())? {
            return Err(EntityError::ListedTwice(twice));
        }
        let targets =
            self.batch_targets(entities.iter().copied(), |w, from| w.remove_edge(from, b))?;
        self.reserve_batch_targets(&targets)?;
        let mut removed = vec_with_capacity(run.len)?;
        for &entity in entities {
            let loc = self.entities.location(entity).expect("checked alive");
            removed.push(self.remove_located(entity, loc, b).expect("checked and reserved"));
        }
        Ok(removed)
    }

    /// Checks a batch's entities: each alive and, with `needs` a bundle's index, having each
    /// of its components. Says whether they share one archetype in strictly increasing
    /// archetype rows (so none is listed twice) and whether they are its last rows. (The state
    /// is in locals, which stay in registers: in a struct it went through memory, a tenth of
    /// add_remove's batch time.)
    pub(super) fn check_batch(
        &self,
        entities: impl Iterator<Item = Entity>,
        needs: Option<usize>,
    ) -> Result<BatchRun, EntityError> {
        // Archetype and archetype row as one number: strictly increasing keys whose first and
        // last archetypes agree are one archetype's rows in increasing order.
        let (mut first, mut last, mut ordered, mut n) = (0u64, 0u64, true, 0usize);
        let mut checked = u32::MAX;
        for entity in entities {
            let loc = self.entities.location(entity).ok_or(EntityError::NoSuchEntity(entity))?;
            if let Some(b) = needs.filter(|_| loc.archetype_id != checked) {
                self.check_has_bundle(entity, loc, b)?;
                checked = loc.archetype_id;
            }
            let key = (u64::from(loc.archetype_id) << 32) | u64::from(loc.archetype_row);
            ordered &= n == 0 || key > last;
            if n == 0 {
                first = key;
            }
            last = key;
            n += 1;
        }
        let (archetype, first_row, last_row) = (first >> 32, first as u32, last as u32);
        if n == 0 || !ordered || last >> 32 != archetype {
            return Ok(BatchRun { len: n, archetype: None, tail: false });
        }
        let archetype = ArchetypeId(archetype as u32);
        let len = self.archetypes[archetype.index()].len();
        let tail = last_row as usize + 1 == len && (last_row - first_row) as usize + 1 == n;
        Ok(BatchRun { len: n, archetype: Some(archetype), tail })
    }

    /// Whether `entity`, at `loc`, has every component of bundle `b`; the error names one it
    /// lacks.
    #[cold]
    pub(super) fn check_has_bundle(
        &self,
        entity: Entity,
        loc: EntityLocation,
        b: usize,
    ) -> Result<(), EntityError> {
        let archetype = &self.archetypes[loc.archetype_id as usize];
        match self.bundles[b].ids().iter().find(|&&c| !archetype.contains(c)) {
            Some(&c) => {
                let component = self.components.info(c).name();
                Err(EntityError::MissingComponent { entity, component })
            }
            None => Ok(()),
        }
    }

    /// For a batch's entities (all alive), each archetype they leave with the graph edge they
    /// take from it (`edge(world, from)`) and how many take it. (A pass of its own: counting
    /// while checking slowed the block path's check by a tenth.)
    pub(super) fn batch_targets(
        &mut self,
        entities: impl Iterator<Item = Entity>,
        mut edge: impl FnMut(&mut Self, ArchetypeId) -> Result<Edge, StorageError>,
    ) -> Result<Vec<(ArchetypeId, Edge, usize)>, StorageError> {
        let mut targets: Vec<(ArchetypeId, Edge, usize)> = Vec::new();
        let mut last = usize::MAX;
        for entity in entities {
            let from = ArchetypeId(self.entities.location(entity).expect("checked").archetype_id);
            if last < targets.len() && targets[last].0 == from {
                targets[last].2 += 1;
                continue;
            }
            last = match targets.iter().position(|t| t.0 == from) {
                Some(t) => t,
                None => {
                    let e = edge(self, from)?;
                    reserve(&mut targets, 1)?;
                    targets.push((from, e, 0));
                    targets.len() - 1
                }
            };
            targets[last].2 += 1;
        }
        Ok(targets)
    }

    /// Reserves what moving `count` entities from `from` along `edge` needs, for each
    /// `(from, edge, count)`: rows in the target table when it is another one, and entries in
    /// the target archetype's list. (Sparse sets are the caller's to reserve.)
    pub(super) fn reserve_batch_targets(
        &mut self,
        targets: &[(ArchetypeId, Edge, usize)],
    ) -> Result<(), EntityError> {
        // Summed per target first: several sources may move into one table (archetypes that
        // differ only in sparse-set components) or one archetype, and a reservation is of room
        // beyond the current length, not on top of an earlier one.
        // At most one entry per target (its room made fallibly: past 4 entries a `SmallVec`
        // spills with an allocation that aborts when refused).
        let n = targets.len();
        let mut tables: SmallVec<[(TableId, usize); 4]> = small_vec(n, std::iter::empty())?;
        let mut lists: SmallVec<[(ArchetypeId, usize); 4]> = small_vec(n, std::iter::empty())?;
        fn add<K: PartialEq>(sums: &mut SmallVec<[(K, usize); 4]>, key: K, count: usize) {
            match sums.iter_mut().find(|(k, _)| *k == key) {
                Some((_, sum)) => *sum += count,
                None => sums.push((key, count)),
            }
        }
        for &(from, edge, count) in targets {
            let table = self.archetypes[edge.to.index()].table_id();
            if table != self.archetypes[from.index()].table_id() {
                add(&mut tables, table, count);
            }
            if edge.to != from {
                add(&mut lists, edge.to, count);
            }
        }
        for (table, count) in tables {
            self.tables[table.index()].try_reserve(count)?;
        }
        for (archetype, count) in lists {
            self.archetypes[archetype.index()].try_reserve(count)?;
        }
        Ok(())
    }

    /// Reserves `count` more entries in the sparse set of each of bundle `b`'s sparse-set
    /// components, and the sparse page of each of `entities` (the `count` entities the batch
    /// inserts into them), so that no insert of the batch can fail.
    pub(super) fn reserve_bundle_sets(
        &mut self,
        b: usize,
        entities: impl Iterator<Item = Entity> + Clone,
        count: usize,
    ) -> Result<(), EntityError> {
        for &c in self.bundles[b].ids() {
            if let Some(set) = self.sparse_sets.get_mut(c.index()).and_then(Option::as_mut) {
                set.try_reserve(count)?;
                for entity in entities.clone() {
                    set.try_reserve_entity(entity)?;
                }
            }
        }
        Ok(())
    }

    /// Whether a batch along `edge` from `from` can move as one block: a pure table move
    /// between two archetypes that are their tables' only ones.
    fn is_block_move(&self, from: ArchetypeId, edge: Edge) -> bool {
        edge.plan != Edge::SPARSE
            && edge.plan != Edge::NO_PLAN
            && !self.archetypes[from.index()].is_listed()
            && !self.archetypes[edge.to.index()].is_listed()
    }

    /// Whether a batch along `edge` from `from` can move as one block of archetype-list
    /// entries: a sparse-set edge between two archetypes of one table (so both keep lists).
    fn is_list_block_move(&self, from: ArchetypeId, edge: Edge) -> bool {
        edge.plan == Edge::SPARSE
            && self.archetypes[from.index()].is_listed()
            && self.archetypes[edge.to.index()].is_listed()
    }

    /// [`World::insert_batch`] of a batch that is the last entries of `from`'s list in order,
    /// along a sparse-set edge ([`World::is_list_block_move`]), with room reserved: each value
    /// pushed into its set, then the entries moved to the target's list as one block.
    fn insert_sparse_tail<B: Bundle>(
        &mut self,
        batch: Vec<(Entity, B)>,
        b: usize,
        from: ArchetypeId,
        edge: Edge,
        tick: u32,
    ) {
        let n = batch.len();
        let (ids, sets) = (self.bundles[b].ids(), &mut self.sparse_sets);
        for (entity, bundle) in batch {
            bundle.get_components(|ptrs| {
                for (&c, &ptr) in ids.iter().zip(ptrs) {
                    let set = sets[c.index()].as_mut().expect("made with archetype");
                    // SAFETY: the bundle's value of `c`'s type (its ids are in the bundle's
                    // order), moved in once; the entity is not in the set (the edge says every
                    // component is new) and room was reserved, so the insert cannot fail.
                    unsafe { set.insert(entity, ptr, tick) }.expect("room was reserved");
                }
            });
        }
        self.move_list_tail(from, edge.to, n);
    }

    /// [`World::remove_batch`] of `n` entities that are the last entries of `from`'s list in
    /// order, along a sparse-set edge ([`World::is_list_block_move`]): the values read out of
    /// their sets, newest entry first (each removal from a set filled in this order is then
    /// its last entry, not a swap), then the entries moved to the target's list as one block.
    fn remove_sparse_tail<B: Bundle>(
        &mut self,
        removed: &mut Vec<B>,
        n: usize,
        b: usize,
        from: ArchetypeId,
        edge: Edge,
    ) {
        debug_assert!(removed.is_empty() && removed.capacity() >= n, "room made by the caller");
        let (ids, sets) = (self.bundles[b].ids(), &mut self.sparse_sets);
        let list = self.archetypes[from.index()].listed_entities();
        let tail = &list[list.len() - n..];
        let out = removed.as_mut_ptr();
        for (i, entry) in tail.iter().enumerate().rev() {
            let entity = entry.entity;
            let mut next = 0;
            let mut read = || {
                let set = sets[ids[next].index()].as_ref().expect("made with archetype");
                next += 1;
                set.get(entity).expect("checked: the archetype has it").as_ptr()
            };
            // SAFETY:
            // - each pointer is the entity's live value of the next bundle component's type
            //   (the ids are in the bundle's order); the sets forget (never drop) them below, so
            //   ownership passes to the bundle.
            // - `i < n <= capacity` (the caller made the room; the vector is empty); each slot
            //   is written once, and the length is set once all `n` are.
            unsafe { out.add(i).write(B::from_components(&mut read)) };
            for &c in ids {
                let set = sets[c.index()].as_mut().expect("made with archetype");
                // SAFETY: the bundle took the value.
                unsafe { set.remove_forget(entity) };
            }
        }
        // SAFETY: the first `n` slots were written above.
        unsafe { removed.set_len(n) };
        self.move_list_tail(from, edge.to, n);
    }

    /// Moves the last `n` entries of `from`'s list to the end of `to`'s (two archetypes of one
    /// table), and records each entity's new archetype and archetype row.
    fn move_list_tail(&mut self, from: ArchetypeId, to: ArchetypeId, n: usize) {
        let (src, dst) = two_mut(&mut self.archetypes, from.index(), to.index());
        let first = dst.take_tail_of(src, n);
        let moved = dst.listed_entities()[first as usize..].iter().map(|e| e.entity);
        self.entities.set_block_archetype(moved, to.0, first);
    }

    /// [`World::insert_batch`] of a batch that is the last rows of `from`'s table in row order,
    /// along an edge that [`World::is_block_move`] allows, with room reserved.
    fn insert_tail<B: Bundle>(
        &mut self,
        batch: Vec<(Entity, B)>,
        from: ArchetypeId,
        edge: Edge,
        tick: u32,
    ) {
        let n = batch.len();
        let (plan, src, dst) =
            move_parts(&self.move_plans, &mut self.tables, &self.archetypes, from, edge);
        // SAFETY:
        // - `n` entities are the source table's last rows (`check_batch`), so `n <= len`.
        // - `dst` is the edge's target table, another table of this world, and `plan.map` was
        //   made for this pair by `push_move_plan`; `n` rows were reserved in it.
        // - the target has every source component (insert only adds), so `taken` is never
        //   called.
        // - `fill` writes each entity's bundle into its new row: bundle component `k` goes to
        //   column `bundle_cols[k]`, the column of its type, and those are exactly the columns
        //   the source lacks (every bundle component is new: the edge leaves the archetype).
        //   The rows keep their order, so entity `i`'s row is `first + i`. Typed writes and a
        //   `Vec`'s iteration do not unwind.
        let first = unsafe {
            src.move_tail_mapped(
                n,
                dst,
                &plan.map,
                tick,
                |_, _| debug_assert!(false, "insert removes nothing"),
                |dst, first| {
                    for (i, (_, bundle)) in batch.into_iter().enumerate() {
                        bundle.write_components(&mut |k| {
                            dst.data_slot(plan.bundle_cols[k] as usize, first + i)
                        });
                    }
                },
            )
        };
        self.finish_tail_move(from, edge.to, first, n);
    }

    /// [`World::remove_batch`] of `n` entities that are the last rows of `from`'s table in row
    /// order, along an edge that [`World::is_block_move`] allows, with room reserved (in
    /// `removed` too, empty, which takes the values).
    fn remove_tail<B: Bundle>(
        &mut self,
        removed: &mut Vec<B>,
        n: usize,
        from: ArchetypeId,
        edge: Edge,
    ) {
        debug_assert!(removed.is_empty() && removed.capacity() >= n, "room made by the caller");
        let (plan, src, dst) =
            move_parts(&self.move_plans, &mut self.tables, &self.archetypes, from, edge);
        let start = src.len() - n;
        // Each bundle component's first value to take and its size: column `bundle_cols[k]`
        // of `src`, from row `start` on.
        let bases: SmallVec<[(*mut u8, usize); 8]> = plan
            .bundle_cols
            .iter()
            .map(|&col| {
                let size = src.columns()[col as usize].data().item_layout().size();
                // SAFETY: `col` is a column of `src` (the plan was made for this table) and
                // `start <= len <= cap`.
                (unsafe { src.data_slot(col as usize, start) }, size)
            })
            .collect();
        let out = removed.as_mut_ptr();
        for i in 0..n {
            let mut next = 0;
            let mut read = || {
                let (base, size) = bases[next];
                next += 1;
                // SAFETY: row `start + i < len` of that column: `i` items past its row `start`.
                unsafe { base.add(i * size) }
            };
            // SAFETY:
            // - bundle component `k` lives in column `bundle_cols[k]`, of its type, and row
            //   `start + i` is live; the move below forgets these values, so ownership passes to
            //   the bundle.
            // - `i < n <= capacity` (the caller made the room; the vector is empty); slots are
            //   written in order, and its length is set once all `n` are (nothing in between
            //   unwinds). Written in place, not pushed:
            //   a push stored the length on every row (add_remove's batch, a sixth of the
            //   removal).
            unsafe { out.add(i).write(B::from_components(&mut read)) };
        }
        // SAFETY: the first `n` slots were written above.
        unsafe { removed.set_len(n) };
        // SAFETY:
        // - `n <= len`: the entities are the table's last rows (`check_batch`).
        // - `dst` is the edge's target, another table of this world, and `plan.map` was made
        //   for this pair; `n` rows were reserved in it.
        // - `taken` forgets the values the bundles took (exactly the columns `dst` lacks).
        // - `dst` has no column the source lacks (remove only removes): nothing to fill.
        let first = unsafe { src.move_tail_mapped(n, dst, &plan.map, 0, |_, _| {}, |_, _| {}) };
        self.finish_tail_move(from, edge.to, first, n);
    }

    /// Records a block move of `n` rows from the end of `from`'s table to rows `first..` of
    /// `to`'s (both archetypes their tables' only ones): each entity's new location, and both
    /// archetypes' lengths.
    fn finish_tail_move(&mut self, from: ArchetypeId, to: ArchetypeId, first: usize, n: usize) {
        let table = &self.tables[self.archetypes[to.index()].table_id().index()];
        self.entities.set_block_locations(&table.entities()[first..first + n], to.0, first as u32);
        self.archetypes[from.index()].truncate_unlisted(n);
        self.archetypes[to.index()].extend_unlisted(n);
    }
}

/// What [`World::check_batch`] learns of a batch's entities.
#[derive(Clone, Copy, Debug)]
pub(super) struct BatchRun {
    /// How many entities (repeats counted).
    len: usize,
    /// The archetype of every entity, when they share one and come in strictly increasing
    /// archetype rows (so no entity is listed twice).
    pub(super) archetype: Option<ArchetypeId>,
    /// Whether, moreover, they are exactly its last rows.
    tail: bool,
}

/// The first entity of `entities` that an earlier one repeats. The entities are alive, so
/// an index names one entity: a bitset over the indices when it is small beside the batch
/// (at most 4 words per entity), a hash set otherwise. (A hash set over 10,000 entities cost
/// more than the removals it guarded.)
///
/// # Errors
/// [`StorageError::Alloc`] when the heap refuses the bitset or the set.
pub(super) fn first_repeat(
    entities: impl Iterator<Item = Entity> + Clone,
) -> Result<Option<Entity>, StorageError> {
    let (mut words, mut n) = (0, 0);
    for e in entities.clone() {
        words = words.max(e.index() as usize / 64 + 1);
        n += 1;
    }
    if words <= 4 * n {
        let mut seen = vec_with_capacity(words)?;
        seen.resize(words, 0u64);
        Ok(entities.into_iter().find(|e| {
            let (word, bit) = (e.index() as usize / 64, 1u64 << (e.index() % 64));
            let repeat = seen[word] & bit != 0;
            seen[word] |= bit;
            repeat
        }))
    } else {
        let mut seen = ahash::AHashSet::default();
        seen.try_reserve(n).map_err(|e| StorageError::alloc(n, e))?;
        Ok(entities.into_iter().find(|&e| !seen.insert(e)))
    }
}
