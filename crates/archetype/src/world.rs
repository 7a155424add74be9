//! [`World`]: entities, their components in tables and sparse sets, and resources.
//!
//! Every entity lives in one archetype (its exact component set) and has one row in that
//! archetype's table; its location `(archetype, archetype row, table, table row)` is kept by the
//! storage layer's [`Entities`]. Structural changes follow the archetype graph's cached edges.
//!
//! # Consistency
//! Every operation either completes or changes nothing: memory for the destination (table rows,
//! sparse-set slots) is reserved before anything moves, so a refused commit returns
//! [`EntityError::Storage`] with the world as it was. User code (component `Drop`s) runs only
//! after the bookkeeping is done, or under guards that finish the bookkeeping while unwinding, so
//! a panicking `Drop` never leaves a half-moved entity. [`World::check_invariants`] verifies that.
//!
//! # Safety model
//! Column pointers are only read as the type the registry records for their component id; the
//! bundle's pointers are moved into storage (or dropped) exactly once.

use std::any::TypeId;
use std::collections::hash_map::Entry;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use ahash::AHashMap;
use folio_storage::{ComponentSparseSet, Entities, Entity, EntityLocation, StorageConfig};
use smallvec::SmallVec;

use crate::archetype::{Archetype, ArchetypeEntities, ArchetypeId, Edge, find_edge};
use crate::bundle::{Bundle, BundleInfo, ComponentIds, MAX_BUNDLE_LEN};
use crate::component::{Component, ComponentId, Components, StorageType};
use crate::error::{ComponentError, EntityError};
use crate::hooks::{HookFlags, Hooks};
use crate::removed::{Removals, RemovedLog};
use crate::resource::{Resource, ResourceTicks};
use crate::table::{ColumnMap, MovedRow, Table, TableId};
use crate::tick::clamp_tick;
use crate::unwind::for_each_finishing;

/// How often the archetype graph's cached edges were used, and how often one had to be built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EdgeStats {
    /// Transitions answered by a cached edge.
    pub hits: u64,
    /// Transitions that computed a new edge.
    pub misses: u64,
}

/// Memory of one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableMemory {
    /// The table.
    pub table: TableId,
    /// Its rows.
    pub rows: usize,
    /// Address space reserved.
    pub reserved: usize,
    /// Memory committed.
    pub committed: usize,
    /// Bytes holding live rows.
    pub used: usize,
}

/// Memory of the whole world's component storage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Per table.
    pub tables: Vec<TableMemory>,
    /// Address space reserved, tables and sparse sets.
    pub reserved: usize,
    /// Memory committed.
    pub committed: usize,
    /// Bytes holding live components.
    pub used: usize,
}

/// A world's identity, unique within the process: what a query state checks before it trusts
/// the archetype and component ids it cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WorldId(u64);

impl WorldId {
    fn next() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// The ECS world.
pub struct World {
    id: WorldId,
    entities: Entities,
    components: Components,
    tables: Vec<Table>,
    /// Sorted table-component set → table.
    table_index: AHashMap<ComponentIds, TableId>,
    archetypes: Vec<Archetype>,
    /// By table index, for every table that has an archetype: the archetype while it is the
    /// table's only one (and so keeps no entity list), `None` once the table is shared.
    table_owner: Vec<Option<ArchetypeId>>,
    /// Sorted full component set → archetype.
    archetype_index: AHashMap<ComponentIds, ArchetypeId>,
    /// By component index; `Some` for sparse-set components once used.
    sparse_sets: Vec<Option<ComponentSparseSet>>,
    bundles: Vec<BundleInfo>,
    bundle_index: AHashMap<TypeId, usize>,
    /// The bundle looked up last, so a run of spawns or inserts of one bundle type skips the
    /// hash look-up.
    last_bundle: Option<(TypeId, usize)>,
    /// By bundle index: how the bundle spawns, once it has spawned.
    spawn_plans: Vec<Option<SpawnPlan>>,
    /// The row-move plans of the graph edges that have one ([`Edge::plan`] indexes this).
    move_plans: Vec<MovePlan>,
    resources: AHashMap<TypeId, Resource>,
    /// The tick that writes made now are stamped with (see [`World::increment_change_tick`]).
    change_tick: AtomicU32,
    edge_stats: EdgeStats,
    /// Where every column of this world takes its pages from.
    storage: StorageConfig,
    /// The logs of the components whose removals are tracked ([`World::track_removals`]).
    removals: Removals,
    /// Component hooks and the structural work they deferred ([`World::set_hooks`]).
    pub(crate) hooks: Hooks,
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for World {
    /// Drops every resource, each once even if one's `Drop` panics: the others are dropped
    /// while unwinding (a hash map's own drop stops at the first panic and leaks the rest).
    /// The components go next, as the fields drop.
    fn drop(&mut self) {
        for_each_finishing(self.resources.drain().map(|(_, resource)| resource), drop);
    }
}

impl World {
    /// An empty world.
    pub fn new() -> Self {
        Self::with_storage(StorageConfig::new())
    }

    /// An empty world whose columns (tables, sparse sets, entity metas) take their pages from
    /// `storage`'s page source and reserve `storage.reserve_bytes()` each: how a test hands a
    /// world a fault-injecting source or small reservations, or a program caps its address
    /// space. Every refused reservation or commit is an [`EntityError::Storage`] with the world
    /// unchanged.
    pub fn with_storage(storage: StorageConfig) -> Self {
        let components = Components::new();
        let mut world = Self {
            id: WorldId::next(),
            entities: Entities::with_config(&storage),
            tables: vec![Table::with_config(&components, &[], &storage)],
            components,
            table_index: AHashMap::default(),
            archetypes: Vec::new(),
            table_owner: Vec::new(),
            archetype_index: AHashMap::default(),
            sparse_sets: Vec::new(),
            bundles: Vec::new(),
            bundle_index: AHashMap::default(),
            last_bundle: None,
            spawn_plans: Vec::new(),
            move_plans: Vec::new(),
            resources: AHashMap::default(),
            change_tick: AtomicU32::new(1),
            edge_stats: EdgeStats::default(),
            storage,
            removals: Removals::default(),
            hooks: Hooks::default(),
        };
        world.table_index.insert(ComponentIds::new(), TableId::EMPTY);
        let empty = world.archetype_for(ComponentIds::new());
        debug_assert_eq!(empty, ArchetypeId::EMPTY);
        world
    }

    /// This world's identity.
    #[inline]
    pub fn id(&self) -> WorldId {
        self.id
    }

    // ----- registry -----

    /// The component registry.
    #[inline]
    pub fn components(&self) -> &Components {
        &self.components
    }

    /// Registers `T` with `storage`; an error if it was registered with another storage type.
    pub fn register_component<T: Component>(
        &mut self,
        storage: StorageType,
    ) -> Result<ComponentId, ComponentError> {
        let id = self.components.register_with::<T>(storage)?;
        self.removals.resolve_pending(&self.components);
        Ok(id)
    }

    #[inline]
    fn bundle_id<B: Bundle>(&mut self) -> Result<usize, ComponentError> {
        match self.last_bundle {
            Some((t, b)) if t == TypeId::of::<B>() => Ok(b),
            _ => self.bundle_id_slow::<B>(),
        }
    }

    fn bundle_id_slow<B: Bundle>(&mut self) -> Result<usize, ComponentError> {
        let b = match self.bundle_index.get(&TypeId::of::<B>()) {
            Some(&b) => b,
            None => {
                let info = BundleInfo::new::<B>(&mut self.components);
                // Also on error: a bundle that repeats a type registers the types before it.
                self.removals.resolve_pending(&self.components);
                self.bundles.push(info?);
                self.bundle_index.insert(TypeId::of::<B>(), self.bundles.len() - 1);
                self.bundles.len() - 1
            }
        };
        self.last_bundle = Some((TypeId::of::<B>(), b));
        Ok(b)
    }

    /// Bundle `b`'s spawn plan, made on its first spawn.
    #[inline]
    fn spawn_plan(&mut self, b: usize) -> &SpawnPlan {
        if self.spawn_plans.get(b).is_none_or(Option::is_none) {
            self.make_spawn_plan(b);
        }
        self.spawn_plans[b].as_ref().expect("made above")
    }

    #[cold]
    fn make_spawn_plan(&mut self, b: usize) {
        let archetype = self.insert_edge(ArchetypeId::EMPTY, b).to;
        let arch = &self.archetypes[archetype.index()];
        let table = arch.table_id();
        let columns = if arch.sparse_components().is_empty() {
            let t = &self.tables[table.index()];
            let columns =
                self.bundles[b].ids().iter().map(|&c| t.column_index(c).map(|i| i as u32));
            columns.collect::<Option<Box<[u32]>>>()
        } else {
            None
        };
        if self.spawn_plans.len() <= b {
            self.spawn_plans.resize_with(b + 1, || None);
        }
        self.spawn_plans[b] = Some(SpawnPlan { archetype, table, columns });
    }

    // ----- archetypes and tables -----

    /// The archetypes, by id.
    #[inline]
    pub fn archetypes(&self) -> &[Archetype] {
        &self.archetypes
    }

    /// The entities of archetype `id` with their table rows.
    ///
    /// # Panics
    /// When `id` is not an archetype of this world.
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

    /// The archetype with exactly `components` (sorted, distinct), made if new.
    fn archetype_for(&mut self, components: ComponentIds) -> ArchetypeId {
        if let Some(&id) = self.archetype_index.get(&components) {
            return id;
        }
        // A component tracked before it was registered is registered by now, if an entity
        // can have it (resolved at its registration already; this keeps it so whatever
        // registers it).
        self.removals.resolve_pending(&self.components);
        let (mut table_ids, mut sparse) = (ComponentIds::new(), ComponentIds::new());
        for &c in &components {
            match self.components.info(c).storage_type() {
                StorageType::Table => table_ids.push(c),
                StorageType::SparseSet => sparse.push(c),
            }
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
                self.tables.push(Table::with_config(&self.components, &table_ids, &self.storage));
                self.table_index.insert(table_ids, t);
                t
            }
        };
        let id = ArchetypeId(u32::try_from(self.archetypes.len()).expect("too many archetypes"));
        let mut archetype = Archetype::new(id, table_id, components.clone(), sparse);
        archetype.set_hook_flags(self.hooks.flags_of(&components));
        // Tables are made in order, each right before its first archetype (the empty table
        // before the empty archetype), so a table without an owner entry has no archetype yet.
        match self.table_owner.get_mut(table_id.index()) {
            None => {
                debug_assert_eq!(self.table_owner.len(), table_id.index());
                self.table_owner.push(Some(id));
            }
            Some(owner) => {
                // The table becomes shared: its first archetype starts a list, and so does
                // every archetype that joins it.
                if let Some(first) = owner.take() {
                    let table = &self.tables[table_id.index()];
                    self.archetypes[first.index()].list(table.entities());
                }
                archetype.set_listed();
            }
        }
        self.archetypes.push(archetype);
        self.archetype_index.insert(components, id);
        id
    }

    /// The edge from `from` by inserting bundle `b`: cached, or made now.
    #[inline]
    fn insert_edge(&mut self, from: ArchetypeId, b: usize) -> Edge {
        match find_edge(&self.archetypes[from.index()].insert_edges, b as u32) {
            Some(edge) => {
                self.edge_stats.hits += 1;
                edge
            }
            None => self.make_insert_edge(from, b),
        }
    }

    #[cold]
    fn make_insert_edge(&mut self, from: ArchetypeId, b: usize) -> Edge {
        self.edge_stats.misses += 1;
        let mut set: ComponentIds = self.archetypes[from.index()].components().into();
        for &c in self.bundles[b].sorted_ids() {
            if let Err(pos) = set.binary_search(&c) {
                set.insert(pos, c);
            }
        }
        let to = self.archetype_for(set);
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
            self.push_move_plan(old, new, bundle_cols.collect())
        } else if storage == Some(StorageType::SparseSet) {
            Edge::SPARSE
        } else {
            Edge::NO_PLAN
        };
        let edge = Edge { bundle: b as u32, to, plan };
        self.archetypes[from.index()].insert_edges.push(edge);
        edge
    }

    /// The edge from `from` by removing bundle `b`, cached or made now. The caller checked that
    /// `from` has every component of `b`.
    #[inline]
    fn remove_edge(&mut self, from: ArchetypeId, b: usize) -> Edge {
        match find_edge(&self.archetypes[from.index()].remove_edges, b as u32) {
            Some(edge) => {
                self.edge_stats.hits += 1;
                edge
            }
            None => self.make_remove_edge(from, b),
        }
    }

    #[cold]
    fn make_remove_edge(&mut self, from: ArchetypeId, b: usize) -> Edge {
        self.edge_stats.misses += 1;
        let bundle = self.bundles[b].sorted_ids();
        let set: ComponentIds = self.archetypes[from.index()]
            .components()
            .iter()
            .copied()
            .filter(|c| bundle.binary_search(c).is_err())
            .collect();
        let to = self.archetype_for(set);
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
            self.push_move_plan(old, new, bundle_cols.collect())
        } else if storage == Some(StorageType::SparseSet) {
            Edge::SPARSE
        } else {
            Edge::NO_PLAN
        };
        let edge = Edge { bundle: b as u32, to, plan };
        self.archetypes[from.index()].remove_edges.push(edge);
        edge
    }

    /// The storage type every component of `ids` has, if they all have the same one (`None`
    /// for a mix or no components).
    fn uniform_storage(&self, ids: &[ComponentId]) -> Option<StorageType> {
        let (&first, rest) = ids.split_first()?;
        let storage = self.components.info(first).storage_type();
        rest.iter().all(|&c| self.components.info(c).storage_type() == storage).then_some(storage)
    }

    fn push_move_plan(&mut self, from: TableId, to: TableId, bundle_cols: Box<[u32]>) -> u32 {
        let map = ColumnMap::new(&self.tables[from.index()], &self.tables[to.index()]);
        self.move_plans.push(MovePlan { map, bundle_cols });
        u32::try_from(self.move_plans.len() - 1)
            .ok()
            .filter(|&plan| plan < Edge::SPARSE)
            .expect("too many move plans")
    }

    // ----- entities -----

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

    /// Hands out an entity id through `&self` (usable from parallel systems); it is spawned,
    /// with no components, at the next [`World::flush`]. Every mutating method flushes first,
    /// except [`World::despawn`] (which needs no flush) and [`World::spawn_reserved`] of the
    /// oldest pending reservation (which spawns just that one, straight into its table).
    #[inline]
    pub fn reserve_entity(&self) -> Entity {
        self.entities.reserve()
    }

    /// Places every reserved entity into the empty archetype.
    ///
    /// # Panics
    /// When the OS refuses memory for them (the empty table's rows or the entity metas);
    /// [`World::try_flush`] returns that as an error. Nothing changed then: the entities stay
    /// reserved and a later flush places them.
    #[inline]
    pub fn flush(&mut self) {
        if let Err(e) = self.try_flush() {
            panic!("World::flush: cannot place the reserved entities: {e}");
        }
    }

    /// Places every reserved entity into the empty archetype, or says why it cannot.
    ///
    /// # Errors
    /// [`EntityError::Storage`] when the OS refuses memory for the empty table's rows or the
    /// entity metas. Nothing changed then: every reservation is still pending (not alive, not
    /// counted by [`World::len`]) and a later flush places them.
    #[inline]
    pub fn try_flush(&mut self) -> Result<(), EntityError> {
        if self.entities.has_reserved() {
            return self.flush_reserved();
        }
        Ok(())
    }

    /// [`World::try_flush`] once some reservation may be pending.
    #[inline(never)]
    fn flush_reserved(&mut self) -> Result<(), EntityError> {
        let pending = self.entities.reserved_len();
        if pending == 0 {
            return Ok(());
        }
        let table = &mut self.tables[TableId::EMPTY.index()];
        // Every row first, then (inside `try_flush`) every meta: once an entity is alive
        // nothing can fail, so a refused commit leaves every reservation pending, never an
        // entity that is alive but in no table.
        table.try_reserve(pending)?;
        let archetype = &mut self.archetypes[ArchetypeId::EMPTY.index()];
        self.entities.try_flush(|entity, location| {
            // SAFETY: the empty table has no components, so `value` is never called.
            let row = match unsafe { table.push_row(entity, 0, |_| unreachable!()) } {
                Ok(row) => row,
                Err(e) => unreachable!("the rows of every reserved entity were reserved: {e}"),
            };
            let archetype_row = archetype.push(entity, row as u32);
            *location = EntityLocation {
                archetype_id: ArchetypeId::EMPTY.0,
                archetype_row,
                table_row: row as u32,
            };
        })?;
        Ok(())
    }

    /// Spawns an entity with the components of `bundle`.
    ///
    /// # Panics
    /// When the bundle repeats a component type, or memory runs out; [`World::try_spawn`]
    /// returns those as errors.
    pub fn spawn<B: Bundle>(&mut self, bundle: B) -> Entity {
        self.try_spawn(bundle).unwrap_or_else(|e| panic!("World::spawn: {e}"))
    }

    /// Spawns an entity with the components of `bundle`, or says why it could not (and drops
    /// the bundle).
    ///
    /// # Errors
    /// [`EntityError::Component`] for a bundle that repeats a component type;
    /// [`EntityError::Storage`] when memory runs out, for the entity or for the reserved
    /// entities flushed first (which then stay reserved). On error nothing changed but that
    /// flush, when it succeeded.
    pub fn try_spawn<B: Bundle>(&mut self, bundle: B) -> Result<Entity, EntityError> {
        let entity = self.spawn_raw(bundle)?;
        if self.entity_has_hooks(entity, HookFlags::SPAWN) {
            self.after_spawn(entity);
        }
        Ok(entity)
    }

    /// [`World::try_spawn`] without hooks.
    ///
    /// Always inlined into the public operation, which was this body before hooks: out of
    /// line, the call costs the hookless path about 30 instructions (world_profile).
    #[inline(always)]
    fn spawn_raw<B: Bundle>(&mut self, bundle: B) -> Result<Entity, EntityError> {
        self.try_flush()?;
        let b = self.bundle_id::<B>()?;
        let tick = self.change_tick();
        if self.has_table_only_plan(b) {
            return self.spawn_table_only(b, bundle, tick, |entities, location| {
                Ok(entities.try_alloc_at(location)?)
            });
        }
        let archetype = self.spawn_plan(b).archetype;
        // Room first, then the id: a refused reservation hands out (and burns) no id. On error
        // the bundle is dropped here, unmoved.
        self.reserve_new(archetype)?;
        let entity = self.entities.try_alloc()?;
        // SAFETY:
        // - the pointers are `B`'s components in `B`'s order, which `bundles[b]` lists.
        // - room for a row in the archetype's table and an entry in each of its sparse sets
        //   was reserved above.
        Ok(bundle
            .get_components(|ptrs| unsafe { self.place_new(entity, archetype, b, ptrs, tick) }))
    }

    /// Reserves what one new entity of `archetype` takes: a row in its table and an entry in
    /// each of its sparse sets.
    fn reserve_new(&mut self, archetype: ArchetypeId) -> Result<(), EntityError> {
        let arch = &self.archetypes[archetype.index()];
        self.tables[arch.table_id().index()].try_reserve(1)?;
        for c in arch.sparse_components() {
            let set = self.sparse_sets[c.index()].as_mut().expect("made with the archetype");
            set.try_reserve(1)?;
        }
        Ok(())
    }

    /// Gives `entity`, reserved with [`World::reserve_entity`] and given no components since,
    /// the components of `bundle`: what [`World::insert`] does, but without moving a row. The
    /// entity leaves the empty archetype and its row is written in place in its new table, as
    /// a spawn's is. An entity that has components already gets an ordinary insert. How
    /// `Commands::spawn` makes its entities.
    ///
    /// An entity that is the oldest pending reservation (as each is, when a buffer spawns its
    /// reserved entities in order) is not flushed into the empty archetype first: it becomes
    /// alive in its table's row.
    ///
    /// On error nothing changed and the bundle is dropped: the entity stays, empty (alive in
    /// the empty archetype, or still reserved when memory to flush the reserved entities was
    /// refused; a later flush places it).
    pub fn spawn_reserved<B: Bundle>(
        &mut self,
        entity: Entity,
        bundle: B,
    ) -> Result<(), EntityError> {
        if self.bundle_has_hooks::<B>(HookFlags::INSERTS) {
            return self.insert_hooked::<B>(entity, |w| w.spawn_reserved_raw(entity, bundle));
        }
        self.spawn_reserved_raw(entity, bundle)
    }

    /// [`World::spawn_reserved`] without hooks.
    ///
    /// Always inlined into the public operation, as the other `*_raw` bodies are (out of line:
    /// about 30 instructions a command spawn, world_profile commands_spawn).
    #[inline(always)]
    fn spawn_reserved_raw<B: Bundle>(
        &mut self,
        entity: Entity,
        bundle: B,
    ) -> Result<(), EntityError> {
        if self.entities.front_reserved() == Some(entity)
            && let Ok(b) = self.bundle_id::<B>()
            && self.has_table_only_plan(b)
        {
            let tick = self.change_tick();
            let spawned = self.spawn_table_only(b, bundle, tick, |entities, location| {
                let front = entities.flush_front(location)?;
                debug_assert_eq!(front, entity);
                Ok(front)
            });
            if spawned.is_err() {
                // As on the other path: the entity stays, empty. If even that flush is refused,
                // nothing changed and it stays reserved; the first error is the one to report.
                let _ = self.try_flush();
            }
            return spawned.map(drop);
        }
        self.try_flush()?;
        let loc = self.entities.location(entity).ok_or(EntityError::NoSuchEntity(entity))?;
        let b = self.bundle_id::<B>()?;
        let plan = self.spawn_plan(b);
        let (archetype, table) = (plan.archetype, plan.table);
        let table_only = self.spawn_plans[b].as_ref().is_some_and(|p| p.columns.is_some());
        if loc.archetype_id != ArchetypeId::EMPTY.0 || !table_only {
            return self.insert_raw(entity, bundle);
        }
        let tick = self.change_tick();
        let plan = self.spawn_plans[b].as_ref().expect("checked above");
        // A bundle has a component, so a table-only plan's table has a column: not the empty one.
        debug_assert_ne!(table, TableId::EMPTY);
        let (empty, target) = two_mut(&mut self.tables, TableId::EMPTY.index(), table.index());
        spawn_in(
            &mut self.entities,
            target,
            &mut self.archetypes[archetype.index()],
            plan,
            bundle,
            tick,
            |entities, location| {
                entities.set_location(entity, location);
                Ok(entity)
            },
        )?;
        // The entity's row is written in its new table; take it out of the empty one. The
        // empty table has no columns, so the swap-remove moves only an entity id.
        unlink_row(&mut self.entities, &mut self.archetypes, empty, entity, loc);
        empty.swap_remove_and_drop(loc.table_row as usize);
        Ok(())
    }

    /// Whether bundle `b` spawns along a table-only plan (making the plan if needed).
    #[inline]
    fn has_table_only_plan(&mut self, b: usize) -> bool {
        self.spawn_plan(b).columns.is_some()
    }

    /// Spawns `bundle` (of bundle id `b`, whose plan [`World::has_table_only_plan`] says is
    /// table-only): its values written in place in a new row of the table, which `place`
    /// makes the new entity's.
    ///
    /// Always inlined: it sits under the `*_raw` bodies, which are inlined into a cold hooked
    /// path as well as into their public operation, and with two call sites the compiler made
    /// it a call (world_profile commands_spawn 10 % more instructions).
    #[inline(always)]
    fn spawn_table_only<B: Bundle>(
        &mut self,
        b: usize,
        bundle: B,
        tick: u32,
        place: impl FnOnce(&mut Entities, EntityLocation) -> Result<Entity, EntityError>,
    ) -> Result<Entity, EntityError> {
        let plan = self.spawn_plans[b].as_ref().expect("made by has_table_only_plan");
        spawn_in(
            &mut self.entities,
            &mut self.tables[plan.table.index()],
            &mut self.archetypes[plan.archetype.index()],
            plan,
            bundle,
            tick,
            place,
        )
    }

    /// Spawns one entity per bundle, resolving the archetype and reserving rows for the whole
    /// batch once (as many as the iterator's lower size bound).
    ///
    /// Each entity is complete before the iterator is asked for the next bundle, so an iterator
    /// that panics leaves the entities spawned so far in a consistent world.
    ///
    /// # Panics
    /// As [`World::spawn`].
    pub fn spawn_batch<B: Bundle, I: IntoIterator<Item = B>>(&mut self, iter: I) -> Vec<Entity> {
        let iter = iter.into_iter();
        let (lower, _) = iter.size_hint();
        self.try_flush().unwrap_or_else(|e| panic!("World::spawn: {e}"));
        let b = self.bundle_id::<B>().unwrap_or_else(|e| panic!("World::spawn: {e}"));
        if self.hooks.any_in(self.bundles[b].ids(), HookFlags::SPAWN) {
            return self.spawn_batch_hooked(iter);
        }
        let tick = self.change_tick();
        let plan = self.spawn_plan(b);
        let (archetype, table) = (plan.archetype, plan.table);
        let Self { entities, tables, archetypes, spawn_plans, .. } = self;
        let (table, archetype) = (&mut tables[table.index()], &mut archetypes[archetype.index()]);
        // Failed reservations are not fatal: each spawn reserves (and reports) for itself.
        let _ = table.try_reserve(lower);
        let _ = entities.try_reserve_new(lower);
        let mut spawned = Vec::with_capacity(lower);
        match spawn_plans[b].as_ref().filter(|p| p.columns.is_some()) {
            Some(plan) => spawn_rows(entities, table, archetype, plan, iter, tick, &mut spawned)
                .unwrap_or_else(|e| panic!("World::spawn: {e}")),
            // (No hook to run: a bundle with spawn hooks took the hooked path above.)
            None => spawned.extend(iter.map(|bundle| self.spawn(bundle))),
        }
        spawned
    }

    /// Writes a new entity's components into `archetype`.
    ///
    /// # Safety
    /// - `ptrs` are bundle `b`'s component values in its order; they are moved here.
    /// - [`World::reserve_new`] of `archetype` succeeded since the lengths of its table and sets
    ///   last changed, so nothing here can fail.
    unsafe fn place_new(
        &mut self,
        entity: Entity,
        archetype: ArchetypeId,
        b: usize,
        ptrs: &[*mut u8],
        tick: u32,
    ) -> Entity {
        let arch = &self.archetypes[archetype.index()];
        let table_id = arch.table_id();
        let bundle = &self.bundles[b];
        let position = |id: ComponentId| bundle.ids().iter().position(|&c| c == id).unwrap();
        // SAFETY:
        // - the table's ids are the bundle's table components; each pointer is a value of the
        //   id's type, moved in once. The closure cannot unwind (the ids are in the bundle).
        // - room was reserved (caller), so this cannot fail.
        let table_row = unsafe {
            self.tables[table_id.index()].push_row(entity, tick, |id| ptrs[position(id)])
        }
        .expect("room was reserved");
        for &c in arch.sparse_components() {
            let set = self.sparse_sets[c.index()].as_mut().expect("made with the archetype");
            // SAFETY: the pointer is a value of `c`'s type, moved in once; room was reserved
            // (caller).
            unsafe { set.insert(entity, ptrs[position(c)], tick) }.expect("room was reserved");
        }
        let archetype_row = self.archetypes[archetype.index()].push(entity, table_row as u32);
        self.entities.set_location(
            entity,
            EntityLocation {
                archetype_id: archetype.0,
                archetype_row,
                table_row: table_row as u32,
            },
        );
        entity
    }

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
    pub fn despawn_batch(&mut self, entities: impl IntoIterator<Item = Entity>) -> usize {
        self.try_flush().unwrap_or_else(|e| panic!("World::despawn_batch: {e}"));
        let entities = entities.into_iter();
        if self.hooks.any(HookFlags::REMOVAL) {
            return self.despawn_batch_hooked(entities);
        }
        self.despawn_batch_raw(entities)
    }

    /// [`World::despawn_batch`] without hooks, reserved entities flushed.
    fn despawn_batch_raw(&mut self, entities: impl Iterator<Item = Entity>) -> usize {
        if entities.size_hint().0 >= BULK_DESPAWN_FROM {
            return self.despawn_swept(entities);
        }
        self.despawn_each(entities)
    }

    /// [`World::despawn_batch`] of a large batch: mark, sweep, then the rest one at a time.
    fn despawn_swept(&mut self, entities: impl Iterator<Item = Entity>) -> usize {
        let mut slot_of_table = vec![u32::MAX; self.tables.len()];
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
            if archetype.is_listed() || !archetype.sparse_components().is_empty() {
                rest.push(entity);
                continue;
            }
            removals.record(entity, archetype.components());
            let table = archetype.table_id().index();
            if slot_of_table[table] == u32::MAX {
                slot_of_table[table] = sweep.swept.len() as u32;
                let words = sweep.tables[table].len().div_ceil(64);
                sweep.swept.push((archetype.id(), vec![0; words], 0));
            }
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
    fn insert_located<B: Bundle>(
        &mut self,
        entity: Entity,
        loc: EntityLocation,
        b: usize,
        bundle: B,
        tick: u32,
    ) -> Result<(), EntityError> {
        let from = ArchetypeId(loc.archetype_id);
        let edge = self.insert_edge(from, b);
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
        self.archetypes[edge.to.index()].reserve(1);
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
            self.sparse_sets[c.index()].as_mut().expect("made with archetype").try_reserve(1)?;
        }
        self.archetypes[edge.to.index()].reserve(1);
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
        // A copy (at most 16 ids, inline up to 8), so `self` can be borrowed mutably below.
        let ids: ComponentIds = self.bundles[b].ids().into();
        let position = |id: ComponentId| ids.iter().position(|&c| c == id).unwrap();
        let old_table = self.archetypes[loc.archetype_id as usize].table_id();
        let new_table = self.archetypes[to.index()].table_id();
        let mut loc = loc;
        if from != to {
            // Reserve everything first, so nothing moves unless everything can.
            let from_arch = &self.archetypes[from.index()];
            let new_sparse: ComponentIds = self.archetypes[to.index()]
                .sparse_components()
                .iter()
                .copied()
                .filter(|&c| !from_arch.contains(c))
                .collect();
            let reserved = (if new_table != old_table {
                self.tables[new_table.index()].try_reserve(1)
            } else {
                Ok(())
            })
            .and_then(|()| {
                new_sparse.iter().try_for_each(|c| {
                    self.sparse_sets[c.index()]
                        .as_mut()
                        .expect("made with archetype")
                        .try_reserve(1)
                })
            });
            if let Err(e) = reserved {
                // SAFETY: nothing was moved; drop each value once.
                unsafe { drop_values(&self.components, &ids, ptrs) };
                return Err(e.into());
            }
            if new_table != old_table {
                // SAFETY:
                // - `loc` is the entity's location; `new_table` differs and has room for a row.
                // - the target has every source component (insert only adds), so `taken` is
                //   never called; `missing(id)` is the bundle's value for `id`, moved once.
                unsafe {
                    self.move_table_row(
                        &mut loc,
                        new_table,
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
        let batch: Vec<(Entity, B)> = batch.into_iter().collect();
        // On an error the bundles are dropped here.
        let run = self.check_batch(batch.iter().map(|&(e, _)| e), None)?;
        if self.hooks.any_in(self.bundles[b].ids(), HookFlags::INSERTS) {
            return self.insert_batch_hooked(batch, b);
        }
        let tick = self.change_tick();
        if let Some(from) = run.archetype {
            let edge = self.insert_edge(from, b);
            if edge.to != from {
                self.reserve_batch_targets(&[(from, edge, batch.len())])?;
                self.reserve_bundle_sets(b, batch.len())?;
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
            self.batch_targets(batch.iter().map(|&(e, _)| e), |w, from| w.insert_edge(from, b));
        self.reserve_batch_targets(&targets)?;
        self.reserve_bundle_sets(b, batch.len())?;
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
        let entities: Vec<Entity> = entities.into_iter().collect();
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
        if let Some(from) = run.archetype {
            let edge = self.remove_edge(from, b);
            self.reserve_batch_targets(&[(from, edge, run.len)])?;
            if run.tail && self.is_block_move(from, edge) {
                return Ok(self.remove_tail(run.len, from, edge));
            }
            if run.tail && self.is_list_block_move(from, edge) {
                return Ok(self.remove_sparse_tail(run.len, b, from, edge));
            }
            let mut removed = Vec::with_capacity(run.len);
            for &entity in entities.iter().rev() {
                let loc = self.entities.location(entity).expect("checked alive");
                removed.push(self.remove_located(entity, loc, b).expect("checked and reserved"));
            }
            removed.reverse();
            return Ok(removed);
        }
        if let Some(twice) = first_repeat(entities.iter().copied()) {
            return Err(EntityError::ListedTwice(twice));
        }
        let targets =
            self.batch_targets(entities.iter().copied(), |w, from| w.remove_edge(from, b));
        self.reserve_batch_targets(&targets)?;
        let mut removed = Vec::with_capacity(run.len);
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
    fn check_batch(
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
    fn check_has_bundle(
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
    fn batch_targets(
        &mut self,
        entities: impl Iterator<Item = Entity>,
        mut edge: impl FnMut(&mut Self, ArchetypeId) -> Edge,
    ) -> Vec<(ArchetypeId, Edge, usize)> {
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
                    let e = edge(self, from);
                    targets.push((from, e, 0));
                    targets.len() - 1
                }
            };
            targets[last].2 += 1;
        }
        targets
    }

    /// Reserves what moving `count` entities from `from` along `edge` needs, for each
    /// `(from, edge, count)`: rows in the target table when it is another one, and entries in
    /// the target archetype's list. (Sparse sets are the caller's to reserve.)
    fn reserve_batch_targets(
        &mut self,
        targets: &[(ArchetypeId, Edge, usize)],
    ) -> Result<(), EntityError> {
        // Summed per target first: several sources may move into one table (archetypes that
        // differ only in sparse-set components) or one archetype, and a reservation is of room
        // beyond the current length, not on top of an earlier one.
        let mut tables: SmallVec<[(TableId, usize); 4]> = SmallVec::new();
        let mut lists: SmallVec<[(ArchetypeId, usize); 4]> = SmallVec::new();
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
            self.archetypes[archetype.index()].reserve(count);
        }
        Ok(())
    }

    /// Reserves `count` more entries in the sparse set of each of bundle `b`'s sparse-set
    /// components.
    fn reserve_bundle_sets(&mut self, b: usize, count: usize) -> Result<(), EntityError> {
        for &c in self.bundles[b].ids() {
            if let Some(set) = self.sparse_sets.get_mut(c.index()).and_then(Option::as_mut) {
                set.try_reserve(count)?;
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
        n: usize,
        b: usize,
        from: ArchetypeId,
        edge: Edge,
    ) -> Vec<B> {
        let (ids, sets) = (self.bundles[b].ids(), &mut self.sparse_sets);
        let list = self.archetypes[from.index()].listed_entities();
        let tail = &list[list.len() - n..];
        let mut removed: Vec<B> = Vec::with_capacity(n);
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
            // - `i < n`, the vector's capacity; each slot is written once, and the length is
            //   set once all `n` are.
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
        removed
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
    /// order, along an edge that [`World::is_block_move`] allows, with room reserved.
    fn remove_tail<B: Bundle>(&mut self, n: usize, from: ArchetypeId, edge: Edge) -> Vec<B> {
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
        let mut removed: Vec<B> = Vec::with_capacity(n);
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
            // - `i < n`, the vector's capacity; slots are written in order, and its length is
            //   set once all `n` are (nothing in between unwinds). Written in place, not pushed:
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
        removed
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
        let removed = self.remove_located(entity, loc, b)?;
        self.removals.record(entity, self.bundles[b].ids());
        Ok(removed)
    }

    /// [`World::try_remove`] once the entity's location `loc` and the bundle's index `b` are
    /// known. Always inlined, as [`World::insert_located`] is.
    #[inline(always)]
    fn remove_located<B: Bundle>(
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
                let from_arch = &self.archetypes[from.index()];
                if let Some(&missing) =
                    self.bundles[b].ids().iter().find(|&&c| !from_arch.contains(c))
                {
                    let component = self.components.info(missing).name();
                    return Err(EntityError::MissingComponent { entity, component });
                }
                self.remove_edge(from, b)
            }
        };
        if edge.plan == Edge::SPARSE {
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
        if new_table != old_table {
            // SAFETY:
            // - `loc` is the entity's location; `new_table` differs and has room for a row.
            // - `taken` forgets values the bundle now owns; the target has no component the
            //   source lacks (remove only removes), so `missing` is never called.
            unsafe {
                self.move_table_row(
                    &mut loc,
                    new_table,
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
        self.archetypes[edge.to.index()].reserve(1);
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

    /// Moves the row at `loc` into table `to` (see [`Table::move_row`]), fixes the location of
    /// the entity swapped into the old row, and updates `loc`'s row (its archetype, which names
    /// the table, is the caller's to update).
    ///
    /// # Safety
    /// - `loc` is a live entity's location, `to` is another table of this world with room for
    ///   one more row (reserved by the caller, so the move cannot fail).
    /// - `taken` and `missing` uphold [`Table::move_row`]'s contract.
    unsafe fn move_table_row(
        &mut self,
        loc: &mut EntityLocation,
        to: TableId,
        tick: u32,
        taken: impl FnMut(ComponentId, *mut u8),
        missing: impl FnMut(ComponentId) -> *const u8,
    ) {
        let from_table = table_index(&self.archetypes, *loc);
        let (src, dst) = two_mut(&mut self.tables, from_table, to.index());
        // SAFETY:
        // - `table_row < len` as `loc` is live; both tables come from this registry and differ.
        // - the callbacks are the caller's, under the same contract.
        let moved = unsafe { src.move_row(loc.table_row as usize, dst, tick, taken, missing) }
            .expect("room was reserved");
        if let Some(swapped) = moved.swapped_in {
            fix_table_row(&mut self.entities, &mut self.archetypes, swapped, loc.table_row);
        }
        // The row is in `to` now; `loc` names that table once the caller moves it to the
        // archetype of `to` (its archetype id still names the old one until then).
        loc.table_row = moved.new_row as u32;
    }

    /// A pointer to `entity`'s component `c`, given its location.
    fn component_ptr(
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

    /// Despawns every entity and drops every component; keeps archetypes, tables and memory.
    ///
    /// If a component's `Drop` panics, every other component is still dropped, and the world
    /// is empty and consistent, before the panic continues.
    ///
    /// # Panics
    /// When reserved entities are pending and the OS refuses memory to flush them first (before
    /// anything changes: they stay reserved), and as above when a `Drop` panics.
    pub fn clear(&mut self) {
        self.try_flush().unwrap_or_else(|e| panic!("World::clear: {e}"));
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
    }

    // ----- removal tracking -----

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

    // ----- ticks -----

    /// The current change tick: what writes made now (spawns, inserts, `get_mut`) are stamped
    /// with.
    #[inline]
    pub fn change_tick(&self) -> u32 {
        self.change_tick.load(Ordering::Relaxed)
    }

    /// Hands out the current tick for one run of a query or system and advances the world's
    /// tick past it, so every write made after the run is newer than every write made during
    /// it. Takes `&self` (an atomic), so parallel systems can each take their own tick.
    ///
    /// Ticks wrap around after 2^32 increments; [`World::check_change_ticks`] keeps old ticks
    /// comparable across the wrap.
    #[inline]
    pub fn increment_change_tick(&self) -> u32 {
        self.change_tick.fetch_add(1, Ordering::Relaxed)
    }

    /// [`World::increment_change_tick`] through `&mut self`: the same tick, without an atomic
    /// read-modify-write (a `lock xadd` costs a query over a few hundred rows about a sixth of
    /// its time). What a query run on a `&mut World` (`iter_mut`, `for_each_mut`) uses.
    #[inline]
    pub fn increment_change_tick_mut(&mut self) -> u32 {
        let tick = self.change_tick.get_mut();
        let this = *tick;
        *tick = this.wrapping_add(1);
        this
    }

    /// Clamps every stored tick (components' and resources') older than [`MAX_CHANGE_AGE`] to
    /// exactly that age, so that `Added`/`Changed` comparisons stay right after the tick counter
    /// wraps. Cheap enough to run once every few million ticks (a game would call it, say, once
    /// a minute); a tick that is left unclamped for more than 2^32 - [`MAX_CHANGE_AGE`]
    /// increments may read as new.
    ///
    /// [`MAX_CHANGE_AGE`]: crate::MAX_CHANGE_AGE
    pub fn check_change_ticks(&mut self) {
        let now = self.change_tick();
        let clamp = |ticks: &mut [u32]| ticks.iter_mut().for_each(|t| clamp_tick(t, now));
        for table in &mut self.tables {
            for column in table.columns_mut() {
                let (added, changed) = column.ticks_mut();
                clamp(added);
                clamp(changed);
            }
        }
        for set in self.sparse_sets.iter_mut().flatten() {
            let (added, changed) = set.ticks_mut();
            clamp(added);
            clamp(changed);
        }
        for resource in self.resources.values_mut() {
            resource.ticks_mut().clamp(now);
        }
    }

    // ----- resources -----

    /// Inserts a resource, returning the one it replaces. A new resource is added and changed
    /// at the current [`change_tick`](World::change_tick); a replaced one keeps its added tick
    /// and is changed now.
    pub fn insert_resource<R: Send + Sync + 'static>(&mut self, value: R) -> Option<R> {
        let tick = self.change_tick();
        match self.resources.entry(TypeId::of::<R>()) {
            Entry::Occupied(mut slot) => {
                let resource = slot.get_mut();
                resource.ticks_mut().changed = tick;
                // SAFETY: keyed by `R`'s `TypeId`, so the cell holds an `R`.
                Some(unsafe { resource.replace(value) })
            }
            Entry::Vacant(slot) => {
                slot.insert(Resource::new(value, tick));
                None
            }
        }
    }

    /// The resource of type `R`.
    pub fn resource<R: Send + Sync + 'static>(&self) -> Option<&R> {
        // SAFETY: keyed by `R`'s `TypeId`, so the pointer is to a live `R`, borrowed via `&self`.
        self.resources.get(&TypeId::of::<R>()).map(|r| unsafe { r.value_ptr::<R>().as_ref() })
    }

    /// The resource of type `R`, mutably; marks it changed at the current
    /// [`change_tick`](World::change_tick), as [`World::get_mut`] does a component.
    pub fn resource_mut<R: Send + Sync + 'static>(&mut self) -> Option<&mut R> {
        let tick = self.change_tick();
        let resource = self.resources.get_mut(&TypeId::of::<R>())?;
        resource.ticks_mut().changed = tick;
        // SAFETY: as in `resource`; `&mut self` makes the borrow unique.
        Some(unsafe { resource.value_ptr::<R>().as_mut() })
    }

    /// A pointer to the resource of type `R`, for a scheduler that hands `&mut R` to one system
    /// while others share the world. It carries the resource's own provenance (the box's raw
    /// pointer, never derived from a reference), so writing through it is allowed while no
    /// other reference to the resource is live.
    pub fn resource_ptr<R: Send + Sync + 'static>(&self) -> Option<NonNull<R>> {
        // SAFETY: keyed by `R`'s `TypeId`, so the cell holds an `R`.
        self.resources.get(&TypeId::of::<R>()).map(|r| unsafe { r.value_ptr::<R>() })
    }

    /// The ticks resource `R` was added and last changed at.
    pub fn resource_ticks<R: Send + Sync + 'static>(&self) -> Option<ResourceTicks> {
        self.resources.get(&TypeId::of::<R>()).map(Resource::ticks)
    }

    /// A pointer to resource `R`'s ticks, with the same provenance as
    /// [`World::resource_ptr`]'s: how a scheduler lets the system it hands `&mut R` to stamp
    /// the changed tick through a shared world.
    pub fn resource_ticks_ptr<R: Send + Sync + 'static>(&self) -> Option<NonNull<ResourceTicks>> {
        self.resources.get(&TypeId::of::<R>()).map(Resource::ticks_ptr)
    }

    /// Removes and returns the resource of type `R`.
    pub fn remove_resource<R: Send + Sync + 'static>(&mut self) -> Option<R> {
        let old = self.resources.remove(&TypeId::of::<R>())?;
        // SAFETY: keyed by `R`'s `TypeId`, so the cell holds an `R`.
        Some(unsafe { old.into_inner::<R>() })
    }

    /// Runs `f` with the world and resource `R` both borrowed mutably, then puts `R` back:
    /// what an exclusive system uses to, say, spawn from a level description kept as a
    /// resource. `None` (and `f` not called) if there is no `R`.
    ///
    /// While `f` runs, `R` is out of the world (`resource::<R>()` is `None`). Afterwards it is
    /// back with its added tick, changed at the world's [`change_tick`](World::change_tick)
    /// then (as [`World::resource_mut`] marks it). An `R` that `f` inserted meanwhile is
    /// replaced by it and dropped, as [`World::insert_resource`] replaces. If `f` panics, `R`
    /// is put back the same way before the panic continues, so it is never lost.
    pub fn resource_scope<R: Send + Sync + 'static, U>(
        &mut self,
        f: impl FnOnce(&mut World, &mut R) -> U,
    ) -> Option<U> {
        let mut resource = self.resources.remove(&TypeId::of::<R>())?;
        // SAFETY: keyed by `R`'s `TypeId`, so the cell holds an `R`; the cell is owned here, out
        // of the world, until it goes back below, so this is the only reference to the value,
        // and the last use of it is inside `f`.
        let value = unsafe { resource.value_ptr::<R>().as_mut() };
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self, value)));
        let now = self.change_tick();
        let ticks = resource.ticks_mut();
        ticks.changed = now;
        // `f` may have run the world's tick far on, past what `check_change_ticks` kept up.
        ticks.clamp(now);
        // Whatever `f` inserted is dropped only once `R` is back (its `Drop` may panic).
        let inserted = self.resources.insert(TypeId::of::<R>(), resource);
        drop(inserted);
        Some(out.unwrap_or_else(|payload| std::panic::resume_unwind(payload)))
    }

    /// Whether a resource of type `R` exists.
    pub fn contains_resource<R: Send + Sync + 'static>(&self) -> bool {
        self.resources.contains_key(&TypeId::of::<R>())
    }

    // ----- memory and invariants -----

    /// Reserved / committed / used bytes per table and in total (tables and sparse sets).
    pub fn memory_stats(&self) -> MemoryStats {
        let mut stats = MemoryStats::default();
        for (i, table) in self.tables.iter().enumerate() {
            let (reserved, committed, used) = table.memory();
            stats.tables.push(TableMemory {
                table: TableId(i as u32),
                rows: table.len(),
                reserved,
                committed,
                used,
            });
            stats.reserved += reserved;
            stats.committed += committed;
            stats.used += used;
        }
        for set in self.sparse_sets.iter().flatten() {
            let (reserved, committed, used) = set.memory();
            stats.reserved += reserved;
            stats.committed += committed;
            stats.used += used;
        }
        stats
    }

    /// Checks every entity location, table length, sparse-set entry and archetype membership;
    /// panics with a description of the first broken one. A test and debugging aid: O(entities).
    pub fn check_invariants(&self) {
        let mut total = 0;
        for archetype in &self.archetypes {
            let table = &self.tables[archetype.table_id().index()];
            if !archetype.is_listed() {
                let owner = self.table_owner[archetype.table_id().index()];
                assert_eq!(owner, Some(archetype.id()), "unlisted archetype shares its table");
                assert_eq!(archetype.len(), table.len(), "unlisted archetype vs its table");
            }
            for (row, ae) in archetype.entities(table).iter().enumerate() {
                let loc = self.entities.location(ae.entity).unwrap_or_else(|| {
                    panic!("{} in archetype {:?} is dead", ae.entity, archetype.id())
                });
                assert_eq!(loc.archetype_id, archetype.id().0, "{}: archetype", ae.entity);
                assert_eq!(loc.archetype_row as usize, row, "{}: archetype row", ae.entity);
                assert_eq!(loc.table_row, ae.table_row, "{}: table row", ae.entity);
                assert_eq!(table.entities()[ae.table_row as usize], ae.entity, "table entity");
                for &c in archetype.sparse_components() {
                    assert!(self.sparse_set(c).is_some_and(|s| s.contains(ae.entity)), "sparse");
                }
            }
            total += archetype.len();
        }
        assert_eq!(total, self.entities.len(), "archetype entities vs live entities");
        for table in &self.tables {
            for column in table.columns() {
                assert_eq!(column.data().len(), table.len(), "column length");
                assert_eq!(column.added_ticks().len(), table.len(), "added ticks length");
                assert_eq!(column.changed_ticks().len(), table.len(), "changed ticks length");
            }
        }
        let table_rows: usize = self.tables.iter().map(Table::len).sum();
        assert_eq!(table_rows, self.entities.len(), "table rows vs live entities");
        for (t, table) in self.tables.iter().enumerate() {
            for (row, &e) in table.entities().iter().enumerate() {
                let loc = self.entities.location(e).unwrap_or_else(|| {
                    panic!("{e} in row {row} of table {t} is dead");
                });
                let table_of_loc = table_index(&self.archetypes, loc);
                assert_eq!((table_of_loc, loc.table_row as usize), (t, row), "{e}: row");
            }
        }
        for (c, set) in self.sparse_sets.iter().enumerate() {
            let Some(set) = set else { continue };
            assert_eq!(set.column().len(), set.len(), "sparse values length");
            assert_eq!(set.added_ticks().len(), set.len(), "sparse added ticks length");
            assert_eq!(set.changed_ticks().len(), set.len(), "sparse changed ticks length");
            for (dense, &e) in set.entities().iter().enumerate() {
                let loc = self.entities.location(e);
                let loc = loc.unwrap_or_else(|| panic!("sparse set {c} holds dead {e}"));
                assert_eq!(set.dense_index(e), Some(dense), "sparse set {c}: {e}'s mapping");
                let archetype = &self.archetypes[loc.archetype_id as usize];
                assert!(
                    archetype.sparse_components().contains(&ComponentId::new(c as u32)),
                    "sparse set {c} holds {e}, whose archetype lacks the component"
                );
            }
        }
    }
}

/// Removes `loc`'s archetype row, fixing the location of the entity moved into it (none in an
/// unlisted archetype, whose rows move with the table's).
#[inline]
fn unlink_archetype_row(
    entities: &mut Entities,
    archetypes: &mut [Archetype],
    loc: EntityLocation,
) {
    if let Some(moved) = archetypes[loc.archetype_id as usize].swap_remove(loc.archetype_row) {
        entities.location_mut(moved).expect("archetype entities are alive").archetype_row =
            loc.archetype_row;
    }
}

/// What a row move along `edge` (a table move with a plan) out of archetype `from` works with:
/// the move plan, the source table and the target table.
#[inline(always)]
fn move_parts<'w>(
    move_plans: &'w [MovePlan],
    tables: &'w mut [Table],
    archetypes: &[Archetype],
    from: ArchetypeId,
    edge: Edge,
) -> (&'w MovePlan, &'w mut Table, &'w mut Table) {
    let from_table = archetypes[from.index()].table_id().index();
    let to_table = archetypes[edge.to.index()].table_id().index();
    let (src, dst) = two_mut(tables, from_table, to_table);
    (&move_plans[edge.plan as usize], src, dst)
}

/// The index of the table that `loc`'s archetype keeps its rows in (a location does not hold
/// it: the entity's meta stays 16 bytes, and a structural change reads the archetype anyway).
#[inline(always)]
fn table_index(archetypes: &[Archetype], loc: EntityLocation) -> usize {
    archetypes[loc.archetype_id as usize].table_id().index()
}

/// Takes `entity`, at `loc` in `table`, out of its archetype, and fixes the location of the
/// entity that `table`'s swap-remove of `loc.table_row` is about to move into its place (the
/// caller does that swap-remove next).
///
/// Always inlined: [`World::despawn`]'s body is inlined into three callers, and out of line
/// this call costs each despawn about 30 instructions (world_profile despawn_1m).
#[inline(always)]
fn unlink_row(
    entities: &mut Entities,
    archetypes: &mut [Archetype],
    table: &Table,
    entity: Entity,
    loc: EntityLocation,
) {
    unlink_archetype_row(entities, archetypes, loc);
    if let Some(&moved) = table.entities().last().filter(|&&m| m != entity) {
        fix_table_row(entities, archetypes, moved, loc.table_row);
    }
}

/// Records that `entity`'s table row is now `row` (after a swap-remove moved it), and its
/// archetype row too where the two are one (an unlisted archetype).
#[inline]
fn fix_table_row(entities: &mut Entities, archetypes: &mut [Archetype], entity: Entity, row: u32) {
    let loc = entities.location_mut(entity).expect("table entities are alive");
    loc.table_row = row;
    loc.archetype_row = archetypes[loc.archetype_id as usize].set_table_row(loc.archetype_row, row);
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

/// What [`World::check_batch`] learns of a batch's entities.
#[derive(Clone, Copy, Debug)]
struct BatchRun {
    /// How many entities (repeats counted).
    len: usize,
    /// The archetype of every entity, when they share one and come in strictly increasing
    /// archetype rows (so no entity is listed twice).
    archetype: Option<ArchetypeId>,
    /// Whether, moreover, they are exactly its last rows.
    tail: bool,
}

/// The first entity of `entities` that an earlier one repeats. The entities are alive, so
/// an index names one entity: a bitset over the indices when it is small beside the batch
/// (at most 4 words per entity), a hash set otherwise. (A hash set over 10,000 entities cost
/// more than the removals it guarded.)
fn first_repeat(entities: impl Iterator<Item = Entity> + Clone) -> Option<Entity> {
    let (mut words, mut n) = (0, 0);
    for e in entities.clone() {
        words = words.max(e.index() as usize / 64 + 1);
        n += 1;
    }
    if words <= 4 * n {
        let mut seen = vec![0u64; words];
        entities.into_iter().find(|e| {
            let (word, bit) = (e.index() as usize / 64, 1u64 << (e.index() % 64));
            let repeat = seen[word] & bit != 0;
            seen[word] |= bit;
            repeat
        })
    } else {
        let mut seen = ahash::AHashSet::with_capacity(n);
        entities.into_iter().find(|&e| !seen.insert(e))
    }
}

/// How a bundle spawns.
#[derive(Debug)]
struct SpawnPlan {
    /// The archetype its entities get.
    archetype: ArchetypeId,
    /// That archetype's table.
    table: TableId,
    /// For each bundle component (in the bundle's order), its column in the table; `None` when
    /// the archetype has sparse-set components (they take the general path).
    columns: Option<Box<[u32]>>,
}

/// A graph edge's table-row move, computed once.
#[derive(Debug)]
struct MovePlan {
    /// Source columns to destination columns.
    map: ColumnMap,
    /// For each bundle component (in the bundle's order): for an insert, its column in the
    /// destination table; for a remove, its column in the source table.
    bundle_cols: Box<[u32]>,
}

/// Spawns one entity of a bundle whose archetype has only table components: reserves, then
/// writes the row in place, for the entity `place` gives the new location to (a new one, or
/// one being moved out of the empty archetype). On error (from the reservation or from
/// `place`) nothing changed and the bundle is dropped.
///
/// Always inlined: the bundle is then written from where the caller built it, not copied
/// through the stack first (criterion's simple_insert spent 12 % in that `memmove`).
#[inline(always)]
fn spawn_in<B: Bundle>(
    entities: &mut Entities,
    table: &mut Table,
    archetype: &mut Archetype,
    plan: &SpawnPlan,
    bundle: B,
    tick: u32,
    place: impl FnOnce(&mut Entities, EntityLocation) -> Result<Entity, EntityError>,
) -> Result<Entity, EntityError> {
    let columns = plan.columns.as_deref().expect("a table-only spawn plan");
    table.try_reserve(1)?;
    archetype.reserve(1);
    let table_row = table.len();
    let location = EntityLocation {
        archetype_id: plan.archetype.0,
        archetype_row: archetype.next_row(table_row as u32),
        table_row: table_row as u32,
    };
    let entity = place(entities, location)?;
    // SAFETY:
    // - `data_slot`: `columns[i]` is the table column of bundle component `i` (the plan was
    //   made for this bundle and table), and `table_row == len < cap` after `try_reserve(1)`.
    //   Distinct components have distinct columns, so the slots do not overlap.
    // - `write_components` writes every bundle component, and the archetype has no other
    //   table component, so every column's slot at `len` now holds a value of its type;
    //   `commit_row` takes them. Neither unwinds.
    unsafe {
        bundle.write_components(&mut |i| table.data_slot(columns[i] as usize, table_row));
        table.commit_row(entity, tick);
    }
    archetype.push(entity, table_row as u32);
    Ok(entity)
}

/// `spawn_batch` along a table-only spawn plan: the bundles are written straight into the
/// table's reserved rows, a room-full at a time, and each room-full is committed at once (its
/// ticks filled per column, every column's length set once) instead of row by row.
///
/// If the iterator panics, or an entity or a row cannot be had, the rows written so far are
/// committed first (their entities exist, complete); the failing bundle is dropped.
fn spawn_rows<B: Bundle>(
    entities: &mut Entities,
    table: &mut Table,
    archetype: &mut Archetype,
    plan: &SpawnPlan,
    mut iter: impl Iterator<Item = B>,
    tick: u32,
    spawned: &mut Vec<Entity>,
) -> Result<(), EntityError> {
    /// Commits the rows written so far when dropped, on unwind too.
    struct Rows<'a> {
        table: &'a mut Table,
        written: usize,
        tick: u32,
    }
    impl Drop for Rows<'_> {
        fn drop(&mut self) {
            // SAFETY: `written <= spare_rows()` (the loop stops at the room it took), and each
            // of those rows had every column's value and its entity written before `written`
            // counted it.
            unsafe { self.table.commit_rows(self.written, self.tick) };
        }
    }

    let columns = plan.columns.as_deref().expect("a table-only spawn plan");
    let mut next = iter.next();
    while let Some(first) = next.take() {
        if table.spare_rows() == 0 {
            // Room for what the iterator still promises; if that is refused, for one row, so
            // that a batch past the end of a reservation still spawns every row that fits.
            if table.try_reserve(iter.size_hint().0.saturating_add(1)).is_err() {
                table.try_reserve(1)?;
            }
        }
        let room = table.spare_rows();
        archetype.reserve(room);
        // Not fatal: `try_alloc_at` reserves (and reports) for itself.
        let _ = entities.try_reserve_new(room);
        let start = table.len();
        let (bases, entity_base) = table.row_bases();
        // Each bundle component's column start, in the bundle's order, for the room-full.
        let mut bundle_bases = [std::ptr::null_mut::<u8>(); MAX_BUNDLE_LEN];
        for (slot, &c) in bundle_bases.iter_mut().zip(columns) {
            *slot = bases[c as usize];
        }
        let mut rows = Rows { table, written: 0, tick };
        let mut bundle = first;
        loop {
            let row = start + rows.written;
            let entity = entities.try_alloc_at(EntityLocation {
                archetype_id: plan.archetype.0,
                archetype_row: archetype.next_row(row as u32),
                table_row: row as u32,
            })?;
            // SAFETY:
            // - `row < start + room`, inside every column's buffer; `bases` was taken after the
            //   last reservation and nothing reserves or removes until `rows` commits.
            // - `bundle_bases[i]` is the start of the table column of bundle component `i`
            //   (`columns[i]`: the plan was made for this bundle and table), whose items are of
            //   that component's type, so `row` items on is its slot in `row`; `columns` has
            //   one entry per bundle component, at most `MAX_BUNDLE_LEN`. Distinct components
            //   have distinct columns, so the slots do not overlap, and the archetype has no
            //   other table component, so every column's slot in `row` is written. Typed writes
            //   do not unwind.
            unsafe {
                bundle.write_row(&bundle_bases, row);
                entity_base.add(row).write(entity);
            }
            rows.written += 1;
            archetype.push(entity, row as u32);
            spawned.push(entity);
            if rows.written == room {
                break;
            }
            match iter.next() {
                Some(b) => bundle = b,
                None => return Ok(()),
            }
        }
        drop(rows);
        next = iter.next();
    }
    Ok(())
}

/// Two distinct elements of a slice, mutably.
#[inline(always)]
fn two_mut<T>(items: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    assert_ne!(a, b);
    if a < b {
        let (left, right) = items.split_at_mut(b);
        (&mut left[a], &mut right[0])
    } else {
        let (left, right) = items.split_at_mut(a);
        (&mut right[0], &mut left[b])
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

const _: () = {
    const fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<World>();
};

#[cfg(test)]
mod hook_tests;
mod hooked;
#[cfg(test)]
mod removal_tests;
#[cfg(test)]
mod resource_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tick_tests;
