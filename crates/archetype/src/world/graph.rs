//! The archetype graph: component and bundle registration, and the archetypes, tables, spawn
//! plans and cached insert/remove edges, each made on first use.

use std::any::TypeId;

use folio_storage::{ComponentSparseSet, StorageError};

use super::{MovePlan, SpawnPlan, World};
use crate::archetype::{Archetype, ArchetypeId, Edge, find_edge};
use crate::bundle::{Bundle, BundleInfo, ComponentIds};
use crate::component::{Component, ComponentId, StorageType};
use crate::error::ComponentError;
use crate::table::{ColumnMap, Table, TableId};
use crate::try_alloc::{box_slice, reserve, reserve_map, small_vec};

impl World {
    /// Registers `T` with `storage`; an error if it was registered with another storage type.
    pub fn register_component<T: Component>(
        &mut self,
        storage: StorageType,
    ) -> Result<ComponentId, ComponentError> {
        if storage == StorageType::SparseSet && self.is_disabling_type(TypeId::of::<T>()) {
            // A disabling marker decides the table (see `register_disabling_component`).
            return Err(ComponentError::StorageConflict {
                name: std::any::type_name::<T>(),
                registered: StorageType::Table,
                requested: storage,
            });
        }
        self.components.try_reserve(1).map_err(ComponentError::from_alloc)?;
        let id = self.components.register_with::<T>(storage)?;
        self.removals.resolve_pending(&self.components);
        Ok(id)
    }

    #[inline]
    pub(super) fn bundle_id<B: Bundle>(&mut self) -> Result<usize, ComponentError> {
        match self.last_bundle {
            Some((t, b)) if t == TypeId::of::<B>() => Ok(b),
            _ => self.bundle_id_slow::<B>(),
        }
    }

    fn bundle_id_slow<B: Bundle>(&mut self) -> Result<usize, ComponentError> {
        let b = match self.bundle_index.get(&TypeId::of::<B>()) {
            Some(&b) => b,
            None => {
                // Room first, so that a refused allocation registers nothing (a bundle of up
                // to eight components: its id lists stay inline).
                self.components
                    .try_reserve(crate::MAX_BUNDLE_LEN)
                    .map_err(ComponentError::from_alloc)?;
                reserve(&mut self.bundles, 1).map_err(ComponentError::from_alloc)?;
                reserve_map(&mut self.bundle_index, 1).map_err(ComponentError::from_alloc)?;
                let info = BundleInfo::new::<B>(&mut self.components);
                // Also on error: a bundle that repeats a type registers the types before it.
                self.removals.resolve_pending(&self.components);
                self.bundles.push(info?);
                let b = self.bundles.len() - 1;
                self.bundle_index.insert(TypeId::of::<B>(), b);
                // A bundle naming the built-in hierarchy installs its hooks before it is used.
                let ids = self.bundles[b].ids().to_vec();
                self.register_builtin_relationships(&ids);
                b
            }
        };
        self.last_bundle = Some((TypeId::of::<B>(), b));
        Ok(b)
    }

    /// Bundle `b`'s spawn plan, made on its first spawn.
    ///
    /// # Errors
    /// When the heap refuses the bookkeeping of a new archetype (see `World::archetype_for`).
    #[inline]
    pub(super) fn spawn_plan(&mut self, b: usize) -> Result<&SpawnPlan, StorageError> {
        if self.spawn_plans.get(b).is_none_or(Option::is_none) {
            self.make_spawn_plan(b)?;
        }
        Ok(self.spawn_plans[b].as_ref().expect("made above"))
    }

    #[cold]
    fn make_spawn_plan(&mut self, b: usize) -> Result<(), StorageError> {
        let archetype = self.insert_edge(ArchetypeId::EMPTY, b)?.to;
        let arch = &self.archetypes[archetype.index()];
        let table = arch.table_id();
        let columns = if arch.sparse_components().is_empty() {
            let t = &self.tables[table.index()];
            let ids = self.bundles[b].ids();
            let columns = ids.iter().map(|&c| t.column_index(c).map_or(u32::MAX, |i| i as u32));
            Some(box_slice(columns)?).filter(|c| !c.contains(&u32::MAX))
        } else {
            None
        };
        if self.spawn_plans.len() <= b {
            let more = b + 1 - self.spawn_plans.len();
            reserve(&mut self.spawn_plans, more)?;
            self.spawn_plans.resize_with(b + 1, || None);
        }
        self.spawn_plans[b] = Some(SpawnPlan { archetype, table, columns });
        Ok(())
    }

    /// The archetype with exactly `components` (sorted, distinct), made if new.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the new archetype makes its table shared and the heap
    /// refuses the entity list the table's first archetype starts keeping then (a copy of the
    /// table's entity ids, so as large as the table is long), or any of the few blocks a new
    /// archetype adds to the world's lists and indices. Checked before the archetype is made:
    /// no entity's data or location changes (the table and sparse sets of the components may
    /// have been made, empty, as a later success would make them).
    pub(super) fn archetype_for(
        &mut self,
        components: ComponentIds,
    ) -> Result<ArchetypeId, StorageError> {
        if let Some(&id) = self.archetype_index.get(&components) {
            return Ok(id);
        }
        // A component tracked before it was registered is registered by now, if an entity
        // can have it (resolved at its registration already; this keeps it so whatever
        // registers it).
        self.removals.resolve_pending(&self.components);
        // Room in every list and index the archetype joins, first: what is made below cannot
        // be refused (the table, its columns and the sets allocate fallibly themselves).
        reserve(&mut self.archetypes, 1)?;
        reserve_map(&mut self.archetype_index, 1)?;
        reserve(&mut self.table_owner, 1)?;
        reserve(&mut self.tables, 1)?;
        reserve_map(&mut self.table_index, 1)?;
        let storage_of = |c: &&ComponentId| self.components.info(**c).storage_type();
        let n = components.len();
        let table_ids: ComponentIds = small_vec(
            n,
            components.iter().filter(|c| storage_of(c) == StorageType::Table).copied(),
        )?;
        let sparse: ComponentIds = small_vec(
            n,
            components.iter().filter(|c| storage_of(c) == StorageType::SparseSet).copied(),
        )?;
        let key: ComponentIds = small_vec(n, components.iter().copied())?;
        if let Some(last) = sparse.last()
            && self.sparse_sets.len() <= last.index()
        {
            let more = last.index() + 1 - self.sparse_sets.len();
            reserve(&mut self.sparse_sets, more)?;
        }
        for &c in &sparse {
            if self.sparse_sets.len() <= c.index() {
                self.sparse_sets.resize_with(c.index() + 1, || None);
            }
            let info = self.components.info(c);
            self.sparse_sets[c.index()]
                // SAFETY:
                // - the registry records the layout and drop fn of one `Component` type, which
                //   is `Send + Sync`.
                .get_or_insert_with(|| unsafe {
                    ComponentSparseSet::with_config(info.layout(), info.drop_fn(), &self.storage)
                });
        }
        let table_id = match self.table_index.get(&table_ids) {
            Some(&t) => t,
            None => {
                let t = TableId(u32::try_from(self.tables.len()).expect("too many tables"));
                let table = Table::try_with_config(&self.components, &table_ids, &self.storage)?;
                self.tables.push(table);
                self.table_index.insert(table_ids, t);
                t
            }
        };
        let id = ArchetypeId(u32::try_from(self.archetypes.len()).expect("too many archetypes"));
        let mut archetype = Archetype::new(id, table_id, key, sparse);
        archetype.set_hook_flags(self.hooks.flags_of(&components));
        archetype.set_disabled(self.holds_disabling(&components));
        // Tables are made in order, each right before its first archetype (the empty table
        // before the empty archetype), so a table without an owner entry has no archetype yet.
        match self.table_owner.get_mut(table_id.index()) {
            None => {
                debug_assert_eq!(self.table_owner.len(), table_id.index());
                self.table_owner.push(Some(id));
            }
            Some(owner) => {
                // The table becomes shared: its first archetype starts a list, and so does
                // every archetype that joins it. The list is made first, so that a refused
                // allocation leaves the table its first archetype's alone.
                if let Some(first) = *owner {
                    let table = &self.tables[table_id.index()];
                    let list = self.archetypes[first.index()].try_make_list(table.entities())?;
                    self.archetypes[first.index()].set_list(list);
                    self.table_owner[table_id.index()] = None;
                }
                archetype.set_listed();
            }
        }
        self.archetypes.push(archetype);
        self.archetype_index.insert(components, id);
        Ok(id)
    }

    /// The edge from `from` by inserting bundle `b`: cached, or made now.
    #[inline]
    pub(super) fn insert_edge(
        &mut self,
        from: ArchetypeId,
        b: usize,
    ) -> Result<Edge, StorageError> {
        match find_edge(&self.archetypes[from.index()].insert_edges, b as u32) {
            Some(edge) => {
                self.edge_stats.hits += 1;
                Ok(edge)
            }
            None => self.make_insert_edge(from, b),
        }
    }

    #[cold]
    fn make_insert_edge(&mut self, from: ArchetypeId, b: usize) -> Result<Edge, StorageError> {
        self.edge_stats.misses += 1;
        // Room for the edge and its plan first (nothing to undo if refused).
        reserve(&mut self.archetypes[from.index()].insert_edges, 1)?;
        reserve(&mut self.move_plans, 1)?;
        let have = self.archetypes[from.index()].components();
        let bundle = self.bundles[b].sorted_ids();
        let set = small_vec(have.len() + bundle.len(), merge_sorted(have, bundle))?;
        let to = self.archetype_for(set)?;
        // Every bundle component new to the entity and all of one storage type: a planned
        // table-row move plus the bundle's values (no sparse set changes), or a sparse move (the
        // table row stays; only the sets and the archetype lists change).
        let from_arch = &self.archetypes[from.index()];
        let ids = self.bundles[b].ids();
        let all_new = from != to && ids.iter().all(|&c| !from_arch.contains(c));
        let storage = if all_new { self.uniform_storage(ids) } else { None };
        let plan = if storage == Some(StorageType::Table) {
            let (old, new) = (from_arch.table_id(), self.archetypes[to.index()].table_id());
            debug_assert_ne!(old, new, "a new table component changes the table");
            let dst = &self.tables[new.index()];
            let bundle_cols =
                ids.iter().map(|&c| dst.column_index(c).expect("the target has it") as u32);
            let bundle_cols = box_slice(bundle_cols)?;
            self.push_move_plan(old, new, bundle_cols)?
        } else if storage == Some(StorageType::SparseSet) {
            Edge::SPARSE
        } else {
            Edge::NO_PLAN
        };
        let edge = Edge { bundle: b as u32, to, plan };
        self.archetypes[from.index()].insert_edges.push(edge);
        Ok(edge)
    }

    /// The edge from `from` by removing bundle `b`, cached or made now. The caller checked that
    /// `from` has every component of `b`.
    #[inline]
    pub(super) fn remove_edge(
        &mut self,
        from: ArchetypeId,
        b: usize,
    ) -> Result<Edge, StorageError> {
        match find_edge(&self.archetypes[from.index()].remove_edges, b as u32) {
            Some(edge) => {
                self.edge_stats.hits += 1;
                Ok(edge)
            }
            None => self.make_remove_edge(from, b),
        }
    }

    #[cold]
    fn make_remove_edge(&mut self, from: ArchetypeId, b: usize) -> Result<Edge, StorageError> {
        self.edge_stats.misses += 1;
        reserve(&mut self.archetypes[from.index()].remove_edges, 1)?;
        reserve(&mut self.move_plans, 1)?;
        let bundle = self.bundles[b].sorted_ids();
        let have = self.archetypes[from.index()].components();
        let kept = have.iter().copied().filter(|c| bundle.binary_search(c).is_err());
        let set = small_vec(have.len(), kept)?;
        let to = self.archetype_for(set)?;
        // A bundle all of one storage type: a planned table-row move that leaves the bundle's
        // values behind (no sparse set changes), or a sparse move (the table row stays).
        let ids = self.bundles[b].ids();
        let storage = self.uniform_storage(ids);
        let plan = if storage == Some(StorageType::Table) {
            let old = self.archetypes[from.index()].table_id();
            let new = self.archetypes[to.index()].table_id();
            debug_assert_ne!(old, new, "removing a table component changes the table");
            let src = &self.tables[old.index()];
            let bundle_cols =
                ids.iter().map(|&c| src.column_index(c).expect("the source has it") as u32);
            let bundle_cols = box_slice(bundle_cols)?;
            self.push_move_plan(old, new, bundle_cols)?
        } else if storage == Some(StorageType::SparseSet) {
            Edge::SPARSE
        } else {
            Edge::NO_PLAN
        };
        let edge = Edge { bundle: b as u32, to, plan };
        self.archetypes[from.index()].remove_edges.push(edge);
        Ok(edge)
    }

    /// The storage type every component of `ids` has, if they all have the same one (`None`
    /// for a mix or no components).
    fn uniform_storage(&self, ids: &[ComponentId]) -> Option<StorageType> {
        let (&first, rest) = ids.split_first()?;
        let storage = self.components.info(first).storage_type();
        rest.iter().all(|&c| self.components.info(c).storage_type() == storage).then_some(storage)
    }

    /// Adds the move plan between two tables; the caller reserved room in `move_plans`.
    fn push_move_plan(
        &mut self,
        from: TableId,
        to: TableId,
        bundle_cols: Box<[u32]>,
    ) -> Result<u32, StorageError> {
        let map = ColumnMap::try_new(&self.tables[from.index()], &self.tables[to.index()])?;
        self.move_plans.push(MovePlan { map, bundle_cols });
        Ok(u32::try_from(self.move_plans.len() - 1)
            .ok()
            .filter(|&plan| plan < Edge::SPARSE)
            .expect("too many move plans"))
    }
}

/// The union of two sorted, distinct id lists, sorted.
fn merge_sorted<'a>(
    a: &'a [ComponentId],
    b: &'a [ComponentId],
) -> impl Iterator<Item = ComponentId> + 'a {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                (i, j) = (i + 1, j + 1);
                x
            }
            (Some(&x), Some(&y)) if x < y => {
                i += 1;
                x
            }
            (_, Some(&y)) => {
                j += 1;
                y
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (None, None) => return None,
        };
        Some(next)
    })
}
