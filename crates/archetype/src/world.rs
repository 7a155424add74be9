//! [`World`]: the struct, its fields and what they keep true, and its construction. What the
//! world promises its users (where entities live, every operation complete or undone) is on
//! [`World`]'s own docs. Each kind of operation adds an `impl World` block in a submodule:
//! `access`, `graph`, `spawn`, `spawn_at`, `despawn`, `insert_remove`, `batch`, `resources`,
//! `ticks`, `removals`, `invariants`, `hooked` and, with the `serde` feature, `save` and
//! `load`, with the row bookkeeping they share in `rows`.
//!
//! # Safety model
//! Column pointers are only read as the type the registry records for their component id; the
//! bundle's pointers are moved into storage (or dropped) exactly once.

use std::any::TypeId;
use std::sync::atomic::{AtomicU32, Ordering};

use ahash::AHashMap;
use folio_storage::{ComponentSparseSet, Entities, StorageConfig};
use smallvec::SmallVec;

use crate::archetype::{Archetype, ArchetypeId};
use crate::bundle::{BundleInfo, ComponentIds};
use crate::component::Components;
use crate::hooks::Hooks;
use crate::removed::Removals;
use crate::resource::Resource;
use crate::snapshot::SnapshotRegistry;
use crate::table::{ColumnMap, Table, TableId};
use crate::type_map::TypeIdMap;
use crate::unwind::for_each_finishing;
pub use disabling::Disabled;

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

/// Memory of the whole world's storage: its tables, sparse sets and entity allocator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Per table.
    pub tables: Vec<TableMemory>,
    /// Address space reserved: tables, sparse sets and the entity allocator's metas. A column
    /// still in its heap block counts its block; one on heap pages
    /// ([`heap_page_columns`](Self::heap_page_columns)) its heap pages.
    pub reserved: usize,
    /// Memory committed: tables, sparse sets and the entity allocator's metas.
    pub committed: usize,
    /// Bytes holding live components.
    pub used: usize,
    /// Columns (the entity allocator's metas among them) whose reservation was refused and
    /// that took a smaller one instead ([`Fallback::Smaller`](folio_storage::Fallback)).
    pub smaller_reservations: usize,
    /// Columns (the entity allocator's metas among them) on heap pages, because the OS refused
    /// their reservations ([`Fallback::HeapPages`](folio_storage::Fallback)): they grow by
    /// reallocating, which copies their values.
    pub heap_page_columns: usize,
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

/// The ECS world: entities, their components in tables and sparse sets, and resources.
///
/// Every entity lives in one archetype (its exact component set) and has one row in that
/// archetype's table; its location (archetype, archetype row and table row: the archetype names
/// the table) is kept by the storage layer's [`Entities`]. Structural changes follow the
/// archetype graph's cached edges (see [`Archetype`]).
///
/// # Consistency
/// Every operation either completes or changes nothing: memory for the destination (table rows,
/// sparse-set slots) is reserved before anything moves, so a refused commit returns
/// [`EntityError::Storage`] with the world as it was. User code (component `Drop`s) runs only
/// after the bookkeeping is done, or under guards that finish the bookkeeping while unwinding, so
/// a panicking `Drop` never leaves a half-moved entity. [`World::check_invariants`] verifies that.
/// Component hooks run inside the structural operations: when, in what order, and what a panic
/// leaves is in the [`hooks`](crate::hooks) module's docs.
///
/// [`EntityError::Storage`]: crate::EntityError::Storage
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
    bundle_index: TypeIdMap<usize>,
    /// The bundle looked up last, so a run of spawns or inserts of one bundle type skips the
    /// hash look-up.
    last_bundle: Option<(TypeId, usize)>,
    /// By bundle index: how the bundle spawns, once it has spawned.
    spawn_plans: Vec<Option<SpawnPlan>>,
    /// The row-move plans of the graph edges that have one ([`Edge::plan`] indexes this).
    move_plans: Vec<MovePlan>,
    resources: TypeIdMap<Resource>,
    /// The tick that writes made now are stamped with (see [`World::increment_change_tick`]).
    change_tick: AtomicU32,
    /// The tick of the last [`World::check_change_ticks`] (the first tick before any), and how
    /// many ticks the world had handed out then: with them, [`World::absolute_tick`] counts
    /// ticks in 64 bits, across the 32-bit counter's wraps.
    checked_at: u32,
    checked_total: u64,
    edge_stats: EdgeStats,
    /// Where every column of this world takes its pages from.
    storage: StorageConfig,
    /// The logs of the components whose removals are tracked ([`World::track_removals`]).
    removals: Removals,
    /// Component hooks and the structural work they deferred ([`World::set_hooks`]).
    pub(crate) hooks: Hooks,
    /// The disabling markers ([`Disabled`]'s and [`World::register_disabling_component`]'s),
    /// by type: queries skip the archetypes that hold one unless they name it.
    disabling: SmallVec<[TypeId; 2]>,
    /// The types snapshots may copy ([`World::register_snapshot`]).
    snapshots: SnapshotRegistry,
    /// How far the table ticks' frame has moved from a snapshot's: a restore writes each
    /// table tick a snapshot kept plus this (see the `world::snapshot` module docs).
    tick_shift: u32,
    /// Bumped by whatever changes the world in a way a snapshot's base cannot follow (a
    /// restore, [`World::check_change_ticks`], a load, [`World::clear`]): a snapshot of an
    /// older epoch is refilled whole.
    snapshot_epoch: u64,
    /// The registered relationships and their links ([`crate::relationship`]).
    pub(crate) relationships: crate::relationship::Relationships,
    /// The observers ([`crate::observer`]).
    pub(crate) observers: crate::observer::Observers,
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
    ///
    /// [`EntityError::Storage`]: crate::EntityError::Storage
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
            bundle_index: TypeIdMap::default(),
            last_bundle: None,
            spawn_plans: Vec::new(),
            move_plans: Vec::new(),
            resources: TypeIdMap::default(),
            change_tick: AtomicU32::new(1),
            checked_at: 1,
            checked_total: 1,
            edge_stats: EdgeStats::default(),
            storage,
            removals: Removals::default(),
            hooks: Hooks::default(),
            disabling: smallvec::smallvec![TypeId::of::<Disabled>()],
            snapshots: SnapshotRegistry::default(),
            tick_shift: 0,
            snapshot_epoch: 0,
            relationships: Default::default(),
            observers: Default::default(),
        };
        world.table_index.insert(ComponentIds::new(), TableId::EMPTY);
        let empty =
            world.archetype_for(ComponentIds::new()).expect("the first archetype keeps no list");
        debug_assert_eq!(empty, ArchetypeId::EMPTY);
        world
    }

    /// This world's identity.
    #[inline]
    pub fn id(&self) -> WorldId {
        self.id
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

const _: () = {
    const fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<World>();
};

mod access;
mod batch;
mod despawn;
mod disabling;
mod graph;
#[cfg(test)]
mod hook_tests;
mod hooked;
mod insert_remove;
mod invariants;
#[cfg(feature = "serde")]
mod load;
mod observe;
#[cfg(test)]
mod observer_tests;
#[cfg(test)]
mod removal_tests;
mod removals;
#[cfg(test)]
mod resource_tests;
mod resources;
mod rows;
#[cfg(feature = "serde")]
mod save;
mod snapshot;
mod spawn;
mod spawn_at;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tick_tests;
mod ticks;

pub use despawn::{BATCH_META_AHEAD, BATCH_ROW_AHEAD, BULK_DESPAWN_FROM};
#[cfg(feature = "serde")]
pub use load::LoadMode;
#[cfg(feature = "serde")]
pub use save::WorldSave;

/// `result`'s value, or a panic `"{what}: {error}"` at the caller's caller: what the panicking
/// forms of the world's fallible operations share, so the message points at the user's line.
#[track_caller]
pub(crate) fn or_panic<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> T {
    match result {
        Ok(value) => value,
        Err(e) => panic!("{what}: {e}"),
    }
}
