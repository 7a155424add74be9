//! Inserting and removing one entity's components: along a planned table-row move, a sparse-set
//! edge, or the general path, and the row moves between tables under them.

use folio_storage::{Entity, EntityLocation, StorageError};

use super::World;
use super::rows::{fix_table_row, move_parts, table_index, two_mut, unlink_archetype_row};
use crate::archetype::{ArchetypeId, Edge, find_edge};
use crate::bundle::{Bundle, ComponentIds};
use crate::component::{ComponentId, Components, StorageType};
use crate::error::EntityError;
use crate::hooks::HookFlags;
use crate::table::{ColumnMap, MovedRow, TableId};
use crate::try_alloc::small_vec;
use crate::unwind::for_each_finishing;

impl World {
    /// Adds the components of `bundle` to `entity`, replacing (and dropping) any it already has.
    ///
    /// On error nothing changed and the bundle is dropped. If a replaced value's `Drop` panics,
    /// the insert is still complete (every new value in, every old one dropped once) before the
    /// panic continues.
    ///
    /// # Errors
    /// [`EntityError::NoSuchEntity`] when `entity` is not alive; [`EntityError::Component`] for
    /// a bundle that repeats a component type; [`EntityError::Storage`] when memory runs out,
    /// for the move or for the reserved entities flushed first (which then stay reserved).
    pub fn insert<B: Bundle>(&mut self, entity: Entity, bundle: B) -> Result<(), EntityError> {
        if self.bundle_has_hooks::<B>(HookFlags::INSERTS) {
            return self.insert_hooked::<B>(entity, |w| w.insert_raw(entity, bundle));
        }
        self.insert_raw(entity, bundle)
    }

    /// [`World::insert`] without hooks.
    ///
    /// Always inlined into the public operation, which was this body before hooks: out of
    /// line, the call costs the hookless path about 30 instructions (world_profile).
    #[inline(always)]
    pub(crate) fn insert_raw<B: Bundle>(
        &mut self,
        entity: Entity,
        bundle: B,
    ) -> Result<(), EntityError> {
        self.try_flush()?;
        let loc = self.entities.location(entity).ok_or(EntityError::NoSuchEntity(entity))?;
        let b = self.bundle_id::<B>()?;
        let tick = self.change_tick();
        self.insert_located(entity, loc, b, bundle, tick)
    }

    /// [`World::insert`] once the entity's location `loc` and the bundle's index `b` are known.
    ///
    /// Always inlined: out of line, `loc` is passed through memory and its fields, stored one
    /// by one, are read back as one wider load, which stalls on store forwarding (criterion
    /// add_remove 439 -> 556 µs when the compiler chose not to inline it).
    #[inline(always)]
    pub(super) fn insert_located<B: Bundle>(
        &mut self,
        entity: Entity,
        loc: EntityLocation,
        b: usize,
        bundle: B,
        tick: u32,
    ) -> Result<(), EntityError> {
        let from = ArchetypeId(loc.archetype_id);
        let edge = self.insert_edge(from, b)?;
        if edge.plan == Edge::SPARSE {
            return self.insert_sparse(entity, loc, edge, bundle, tick);
        }
        if edge.plan != Edge::NO_PLAN {
            return self.insert_planned(entity, loc, edge, bundle, tick);
        }
        let to = edge.to;
        // SAFETY: the pointers are `B`'s components in `B`'s order, which `bundles[b]` lists.
        bundle.get_components(|ptrs| unsafe { self.insert_values(entity, loc, to, b, ptrs, tick) })
    }

    /// [`World::insert`] along an edge with a move plan: one row move, the bundle written in
    /// place. Always inlined, for the reason [`World::insert_located`] is (the batch paths
    /// call it too, and the compiler stopped inlining it: add_remove 4% slower).
    #[inline(always)]
    fn insert_planned<B: Bundle>(
        &mut self,
        entity: Entity,
        loc: EntityLocation,
        edge: Edge,
        bundle: B,
        tick: u32,
    ) -> Result<(), EntityError> {
        let from = ArchetypeId(loc.archetype_id);
        let (plan, src, dst) =
            move_parts(&self.move_plans, &mut self.tables, &self.archetypes, from, edge);
        // On error the bundle is dropped here, unmoved, and nothing changed.
        dst.try_reserve(1)?;
        self.archetypes[edge.to.index()].try_reserve(1)?;
        // SAFETY:
        // - `loc` is the live entity's location, so `table_row < len`.
        // - `dst` is the edge's target table, another table of this world, and `plan.map` was
        //   made for this pair of tables by `push_move_plan`; one row was reserved in `dst`.
        // - the target has every source component (insert only adds), so `taken` is never
        //   called (and would only leak).
        // - `fill` writes the bundle's values: bundle component `i` goes to column
        //   `bundle_cols[i]` of `dst`, the column of its type, and those are exactly the columns
        //   the source lacks (every bundle component is new, checked when the plan was made).
        //   Typed writes do not unwind.
        let moved = unsafe {
            src.move_row_mapped(
                loc.table_row as usize,
                dst,
                &plan.map,
                tick,
                |_, _| debug_assert!(false, "insert removes nothing"),
                |dst, new_row| {
                    bundle.write_components(&mut |i| {
                        dst.data_slot(plan.bundle_cols[i] as usize, new_row)
                    })
                },
            )
        };
        self.finish_move(entity, loc, edge.to, moved);
        Ok(())
    }

    /// [`World::insert`] along an [`Edge::SPARSE`] edge: each value pushed into its set, the
    /// entity moved to the target archetype's list; the table row stays.
    fn insert_sparse<B: Bundle>(
        &mut self,
        entity: Entity,
        loc: EntityLocation,
        edge: Edge,
        bundle: B,
        tick: u32,
    ) -> Result<(), EntityError> {
        let ids = self.bundles[edge.bundle as usize].ids();
        // Reserve everything first, so nothing moves unless everything can. On error the
        // bundle is dropped here, unmoved, and nothing changed.
        for &c in ids {
            let set = self.sparse_sets[c.index()].as_mut().expect("made with archetype");
            set.try_reserve(1)?;
            set.try_reserve_entity(entity)?;
        }
        self.archetypes[edge.to.index()].try_reserve(1)?;
        let sets = &mut self.sparse_sets;
        bundle.get_components(|ptrs| {
            for (&c, &ptr) in ids.iter().zip(ptrs) {
                let set = sets[c.index()].as_mut().expect("made with archetype");
                // SAFETY: the bundle's value of `c`'s type (its ids are in the bundle's
                // order), moved in once; the entity is not in the set (the edge says every
                // component is new) and room was reserved, so the insert cannot fail.
                unsafe { set.insert(entity, ptr, tick) }.expect("room was reserved");
            }
        });
        self.move_archetype(entity, loc, edge.to);
        Ok(())
    }

    /// Moves `entity` (at `loc`) into archetype `to`'s list, keeping its table row.
    ///
    /// Always inlined: out of line, `loc` (just written field by field by the caller) is
    /// passed through memory and read back as one 16-byte copy, which stalls on store
    /// forwarding (world_profile add_remove 5% slower).
    #[inline(always)]
    fn move_archetype(&mut self, entity: Entity, mut loc: EntityLocation, to: ArchetypeId) {
        unlink_archetype_row(&mut self.entities, &mut self.archetypes, loc);
        loc.archetype_row = self.archetypes[to.index()].push(entity, loc.table_row);
        loc.archetype_id = to.0;
        self.entities.set_location(entity, loc);
    }

    /// Records a row move between tables done for `entity` (at `loc` before): fixes the
    /// entity swapped into its old row, moves it to archetype `to`, and stores its location.
    fn finish_move(
        &mut self,
        entity: Entity,
        mut loc: EntityLocation,
        to: ArchetypeId,
        moved: MovedRow,
    ) {
        if let Some(swapped) = moved.swapped_in {
            fix_table_row(&mut self.entities, &mut self.archetypes, swapped, loc.table_row);
        }
        loc.table_row = moved.new_row as u32;
        self.move_archetype(entity, loc, to);
    }

    /// # Safety
    /// - `ptrs` are bundle `b`'s values in its order; each is moved into the world or dropped.
    /// - `loc` is `entity`'s current location and `to` the insert edge's target.
    unsafe fn insert_values(
        &mut self,
        entity: Entity,
        loc: EntityLocation,
        to: ArchetypeId,
        b: usize,
        ptrs: &[*mut u8],
        tick: u32,
    ) -> Result<(), EntityError> {
        let from = ArchetypeId(loc.archetype_id);
        let old_table = self.archetypes[loc.archetype_id as usize].table_id();
        let new_table = self.archetypes[to.index()].table_id();
        // Reserve everything first, so nothing moves unless everything can: the copies of id
        // lists this path keeps (made fallibly: a bundle has up to 16 ids, inline up to 8),
        // the column map, the row, the sparse slots and the target's list entry.
        let from_arch = &self.archetypes[from.index()];
        let to_sparse = self.archetypes[to.index()].sparse_components();
        let bundle_ids = self.bundles[b].ids();
        let prepared = small_vec(bundle_ids.len(), bundle_ids.iter().copied()).and_then(|ids| {
            let new = to_sparse.iter().copied().filter(|&c| !from_arch.contains(c));
            Ok((ids, small_vec(to_sparse.len(), new)?, self.general_move_map(loc, new_table)?))
        });
        let (ids, new_sparse, map): (ComponentIds, ComponentIds, _) = match prepared {
            Ok(prepared) => prepared,
            Err(e) => {
                // SAFETY: nothing was moved; drop each value once.
                unsafe { drop_values(&self.components, self.bundles[b].ids(), ptrs) };
                return Err(e.into());
            }
        };
        let position = |id: ComponentId| ids.iter().position(|&c| c == id).unwrap();
        let mut loc = loc;
        if from != to {
            let reserved = (if new_table != old_table {
                self.tables[new_table.index()].try_reserve(1)
            } else {
                Ok(())
            })
            .and_then(|()| self.archetypes[to.index()].try_reserve(1))
            .and_then(|()| {
                new_sparse.iter().try_for_each(|c| {
                    let set = self.sparse_sets[c.index()].as_mut().expect("made with archetype");
                    set.try_reserve(1).and_then(|()| set.try_reserve_entity(entity))
                })
            });
            if let Err(e) = reserved {
                // SAFETY: nothing was moved; drop each value once.
                unsafe { drop_values(&self.components, &ids, ptrs) };
                return Err(e.into());
            }
            if let Some(map) = &map {
                // SAFETY:
                // - `loc` is the entity's location; `new_table` differs and has room for a row.
                // - `map` was made above for this pair of tables.
                // - the target has every source component (insert only adds), so `taken` is
                //   never called; `missing(id)` is the bundle's value for `id`, moved once.
                unsafe {
                    self.move_table_row(
                        &mut loc,
                        new_table,
                        map,
                        tick,
                        |_, _| unreachable!("insert removes nothing"),
                        |id| ptrs[position(id)],
                    );
                }
            }
            for &c in &new_sparse {
                let set = self.sparse_sets[c.index()].as_mut().expect("made with archetype");
                // SAFETY: a value of `c`'s type, moved in once; room was reserved.
                unsafe { set.insert(entity, ptrs[position(c)], tick) }.expect("room was reserved");
            }
            self.move_archetype(entity, loc, to);
        }
        // Components the entity had already: replace in place, last, as dropping the old
        // values runs user code. The entity is consistent whatever happens here, and if an old
        // value's `Drop` panics, the rest of the loop still moves the bundle's values in (none
        // leaks, every old value is dropped once) before the panic continues.
        let had = &self.archetypes[from.index()];
        let (components, sets) = (&self.components, &mut self.sparse_sets);
        let (table, row) = (&mut self.tables[new_table.index()], loc.table_row as usize);
        for_each_finishing(ids.iter().zip(ptrs), |(&c, &ptr)| {
            if !had.contains(c) {
                return;
            }
            match components.info(c).storage_type() {
                StorageType::Table => {
                    let column = table.column_mut(c).expect("the archetype has it");
                    column.changed_ticks_mut()[row] = tick;
                    // SAFETY:
                    // - the entity's row in `new_table` is `row` and live: it is in archetype
                    //   `to`, which has every component of `from`.
                    // - `ptr` is bundle `b`'s value for `c`, of `c`'s type, owned here
                    //   (caller) and moved in once: `for_each_finishing` visits it once.
                    unsafe { column.data_mut().replace_unchecked(row, ptr) };
                }
                StorageType::SparseSet => {
                    let set = sets[c.index()].as_mut().expect("made with archetype");
                    // SAFETY:
                    // - `ptr` as above; the set holds the entity (a component of `from`), so
                    //   this replaces in place, which allocates nothing and cannot fail.
                    unsafe { set.insert(entity, ptr, tick) }.expect("replacing cannot fail");
                }
            }
        });
        Ok(())
    }

    /// Removes the components of `B` from `entity` and returns them; `None` (and nothing
    /// changed) if the entity is not alive or lacks any of them.
    pub fn remove<B: Bundle>(&mut self, entity: Entity) -> Option<B> {
        self.try_remove(entity).ok()
    }

    /// Removes the components of `B` from `entity` and returns them, or says why not.
    ///
    /// # Errors
    /// [`EntityError::NoSuchEntity`] when `entity` is not alive;
    /// [`EntityError::MissingComponent`] when it lacks a component of `B`;
    /// [`EntityError::Component`] for a bundle that repeats a component type;
    /// [`EntityError::Storage`] when memory runs out, for the move or for the reserved entities
    /// flushed first (which then stay reserved). On error nothing changed but that flush, when
    /// it succeeded.
    pub fn try_remove<B: Bundle>(&mut self, entity: Entity) -> Result<B, EntityError> {
        if self.entity_has_hooks(entity, HookFlags::REMOVAL) {
            return self.try_remove_with_hooks(entity);
        }
        self.try_remove_raw(entity)
    }

    /// [`World::try_remove`] without hooks.
    ///
    /// Always inlined into the public operation, which was this body before hooks: out of
    /// line, the call costs the hookless path about 30 instructions (world_profile).
    #[inline(always)]
    pub(crate) fn try_remove_raw<B: Bundle>(&mut self, entity: Entity) -> Result<B, EntityError> {
        self.try_flush()?;
        let loc = self.entities.location(entity).ok_or(EntityError::NoSuchEntity(entity))?;
        let b = self.bundle_id::<B>()?;
        if self.removals.any() {
            // Room in the removal logs first: recording must not allocate once the entity moved.
            self.removals.try_reserve(self.bundles[b].ids(), 1)?;
        }
        let removed = self.remove_located(entity, loc, b)?;
        self.removals.record(entity, self.bundles[b].ids());
        Ok(removed)
    }

    /// [`World::try_remove`] once the entity's location `loc` and the bundle's index `b` are
    /// known. Always inlined, as [`World::insert_located`] is.
    #[inline(always)]
    pub(super) fn remove_located<B: Bundle>(
        &mut self,
        entity: Entity,
        loc: EntityLocation,
        b: usize,
    ) -> Result<B, EntityError> {
        let from = ArchetypeId(loc.archetype_id);
        // A remove edge exists only from archetypes that have every component of the bundle.
        let edge = match find_edge(&self.archetypes[from.index()].remove_edges, b as u32) {
            Some(edge) => {
                self.edge_stats.hits += 1;
                edge
            }
            None => {
                if self.bundles[b].ids().is_empty() {
                    // `()`: nothing to take, nowhere to move (no edge is made, so this check
                    // costs the other bundles nothing once their edge exists).
                    // SAFETY: the empty bundle reads no component pointer.
                    return Ok(unsafe { B::from_components(&mut || unreachable!()) });
                }
                let from_arch = &self.archetypes[from.index()];
                if let Some(&missing) =
                    self.bundles[b].ids().iter().find(|&&c| !from_arch.contains(c))
                {
                    let component = self.components.info(missing).name();
                    return Err(EntityError::MissingComponent { entity, component });
                }
                self.remove_edge(from, b)?
            }
        };
        if edge.plan == Edge::SPARSE {
            self.archetypes[edge.to.index()].try_reserve(1)?;
            return Ok(self.remove_sparse(entity, loc, edge));
        }
        if edge.plan != Edge::NO_PLAN {
            return self.remove_planned(entity, loc, edge);
        }
        let to = edge.to;
        let old_table = self.archetypes[loc.archetype_id as usize].table_id();
        let new_table = self.archetypes[to.index()].table_id();
        if new_table != old_table {
            self.tables[new_table.index()].try_reserve(1)?;
        }
        self.archetypes[to.index()].try_reserve(1)?;
        let map = self.general_move_map(loc, new_table)?;
        // Read the bundle out first: from here on, its values belong to it.
        let bundle_ids = self.bundles[b].ids();
        let mut next = 0;
        let read = || {
            let c = bundle_ids[next];
            next += 1;
            self.component_ptr(entity, loc, c).expect("the archetype has it").as_ptr()
        };
        // SAFETY:
        // - each pointer is the entity's live value of the next bundle component's type;
        //   the storage forgets (never drops) them below, so ownership passes to the bundle.
        let bundle = unsafe { B::from_components(&mut { read }) };
        let mut loc = loc;
        if let Some(map) = &map {
            // SAFETY:
            // - `loc` is the entity's location; `new_table` differs and has room for a row.
            // - `map` was made above for this pair of tables.
            // - `taken` forgets values the bundle now owns; the target has no component the
            //   source lacks (remove only removes), so `missing` is never called.
            unsafe {
                self.move_table_row(
                    &mut loc,
                    new_table,
                    map,
                    self.change_tick(),
                    |_, _| {},
                    |_| unreachable!("remove adds nothing"),
                );
            }
        }
        for &c in self.bundles[b].ids() {
            if let Some(set) = self.sparse_sets.get_mut(c.index()).and_then(Option::as_mut) {
                // SAFETY: the bundle took the value.
                unsafe { set.remove_forget(entity) };
            }
        }
        self.move_archetype(entity, loc, to);
        Ok(bundle)
    }

    /// [`World::try_remove`] along an edge with a move plan: the bundle read out of the row, then
    /// one row move that leaves its values behind. Always inlined, as
    /// [`World::insert_planned`] is.
    #[inline(always)]
    fn remove_planned<B: Bundle>(
        &mut self,
        entity: Entity,
        loc: EntityLocation,
        edge: Edge,
    ) -> Result<B, EntityError> {
        let from = ArchetypeId(loc.archetype_id);
        let (plan, src, dst) =
            move_parts(&self.move_plans, &mut self.tables, &self.archetypes, from, edge);
        dst.try_reserve(1)?;
        self.archetypes[edge.to.index()].try_reserve(1)?;
        let row = loc.table_row as usize;
        let mut next = 0;
        let mut read = || {
            let col = plan.bundle_cols[next] as usize;
            next += 1;
            // SAFETY: `col` is a column of `src` (the plan was made for this table) and
            // `row < len <= cap`.
            unsafe { src.data_slot(col, row) }
        };
        // SAFETY:
        // - bundle component `k` lives in column `bundle_cols[k]` of the entity's table, of its
        //   type, and `row` is live; the move below forgets these values, so ownership passes
        //   to the bundle.
        let bundle = unsafe { B::from_components(&mut read) };
        // SAFETY:
        // - `row < len`; `dst` is the edge's target, another table of this world, and
        //   `plan.map` was made for this pair; one row was reserved in `dst`.
        // - `taken` forgets the values the bundle took (they are exactly the columns `dst`
        //   lacks) and does not unwind.
        // - `dst` has no column the source lacks (remove only removes), so `fill` has nothing
        //   to write.
        let moved = unsafe { src.move_row_mapped(row, dst, &plan.map, 0, |_, _| {}, |_, _| {}) };
        self.finish_move(entity, loc, edge.to, moved);
        Ok(bundle)
    }

    /// [`World::try_remove`] along an [`Edge::SPARSE`] edge: the bundle read out of its sets,
    /// the entries forgotten, the entity moved to the target archetype's list. Allocates
    /// nothing, so it cannot fail.
    fn remove_sparse<B: Bundle>(&mut self, entity: Entity, loc: EntityLocation, edge: Edge) -> B {
        let ids = self.bundles[edge.bundle as usize].ids();
        let sets = &mut self.sparse_sets;
        let mut next = 0;
        let mut read = || {
            let c = ids[next];
            next += 1;
            let set = sets[c.index()].as_ref().expect("made with archetype");
            set.get(entity).expect("the archetype has it").as_ptr()
        };
        // SAFETY:
        // - each pointer is the entity's live value of the next bundle component's type (the
        //   ids are in the bundle's order); the sets forget (never drop) them below, so
        //   ownership passes to the bundle.
        let bundle = unsafe { B::from_components(&mut read) };
        for &c in ids {
            let set = sets[c.index()].as_mut().expect("made with archetype");
            // SAFETY: the bundle took the value.
            unsafe { set.remove_forget(entity) };
        }
        self.move_archetype(entity, loc, edge.to);
        bundle
    }

    /// Moves the row at `loc` into table `to` along `map` (see [`Table::move_row`]), fixes the
    /// location of the entity swapped into the old row, and updates `loc`'s row (its
    /// archetype, which names the table, is the caller's to update). Allocates nothing.
    ///
    /// # Safety
    /// - `loc` is a live entity's location, `to` is another table of this world with room for
    ///   one more row (reserved by the caller, so the move cannot fail).
    /// - `map` is `ColumnMap::try_new` of `loc`'s table and `to`.
    /// - `taken` and `missing` uphold [`Table::move_row`]'s contract (`taken` gets the source
    ///   column's index).
    unsafe fn move_table_row(
        &mut self,
        loc: &mut EntityLocation,
        to: TableId,
        map: &ColumnMap,
        tick: u32,
        taken: impl FnMut(usize, *mut u8),
        missing: impl FnMut(ComponentId) -> *const u8,
    ) {
        let from_table = table_index(&self.archetypes, *loc);
        let (src, dst) = two_mut(&mut self.tables, from_table, to.index());
        // SAFETY:
        // - `table_row < len` as `loc` is live; both tables come from this registry and differ.
        // - `map` was made for this pair (caller); one row was reserved in `dst` (caller).
        // - the callbacks are the caller's, under the same contract.
        let moved = unsafe {
            src.move_row_with_map(loc.table_row as usize, dst, map, tick, taken, missing)
        };
        if let Some(swapped) = moved.swapped_in {
            fix_table_row(&mut self.entities, &mut self.archetypes, swapped, loc.table_row);
        }
        // The row is in `to` now; `loc` names that table once the caller moves it to the
        // archetype of `to` (its archetype id still names the old one until then).
        loc.table_row = moved.new_row as u32;
    }

    /// The column map of a general-path row move from `loc`'s table to `to` (none when the
    /// row stays in its table), made before the operation changes anything.
    fn general_move_map(
        &self,
        loc: EntityLocation,
        to: TableId,
    ) -> Result<Option<ColumnMap>, StorageError> {
        let from = table_index(&self.archetypes, loc);
        if from == to.index() {
            return Ok(None);
        }
        ColumnMap::try_new(&self.tables[from], &self.tables[to.index()]).map(Some)
    }
}

/// Drops values that were handed over but not stored.
///
/// If a value's `Drop` panics, the values after it are still dropped (while unwinding) before
/// the panic continues, as a tuple's fields are: none leaks.
///
/// # Safety
/// - `ptrs[i]` is a live value of `ids[i]`'s type, owned by the caller and not used again.
unsafe fn drop_values(components: &Components, ids: &[ComponentId], ptrs: &[*mut u8]) {
    for_each_finishing(ids.iter().zip(ptrs), |(&c, &ptr)| {
        if let Some(drop) = components.info(c).drop_fn() {
            // SAFETY: a live value of `c`'s type (caller), dropped once: `for_each_finishing`
            // visits each pair once, also when an earlier drop panicked.
            unsafe { drop(ptr) };
        }
    });
}
