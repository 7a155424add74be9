//! World snapshots for rollback: [`Snapshot`], [`SnapshotError`], and the registry of the types
//! a snapshot may copy. [`World::snapshot`] and [`World::restore`] are in `world::snapshot`.
//!
//! # Design
//! A snapshot is the world's own storage, copied: each table's entity column and each
//! component column's used bytes (one `memcpy` for a type registered with
//! [`World::register_snapshot_copy`], `Clone` for one registered with
//! [`World::register_snapshot`]), the added/changed tick columns, each sparse set's dense
//! entities, ticks and values, every archetype's entity count (and list, where it keeps one),
//! the entity allocator's metas, freelist and pending reservations ([`EntitiesSnapshot`]), the
//! resources, and the change tick it was taken at. Nothing structural is copied: archetypes,
//! tables, bundles, graph edges and the component registry only grow, so a restore leaves the
//! ones made since in place, empty, and every id a query state or a schedule cached stays
//! valid.
//!
//! # Safety model
//! A column's bytes are written back only into the column of the same table and component
//! they were copied from (tables and components are never renumbered, and a snapshot is
//! restored only into the world it came from: [`SnapshotError::WrongWorld`]), and only for
//! types registered as `Copy`. Cloned values are kept as a typed `Vec<T>` behind a trait
//! object made by the registration of `T`, keyed by `T`'s `TypeId`, so they are moved only
//! into a column the registry says holds `T`.
//!
//! [`World::snapshot`]: crate::World::snapshot
//! [`World::restore`]: crate::World::restore
//! [`World::register_snapshot`]: crate::World::register_snapshot
//! [`World::register_snapshot_copy`]: crate::World::register_snapshot_copy

use std::any::TypeId;
use std::fmt;

use folio_storage::{Column, ColumnBytes, EntitiesSnapshot, SparseMembership, StorageError};

use crate::archetype::ArchetypeEntity;
use crate::resource::{Resource, ResourceTicks};
use crate::type_map::TypeIdMap;
use crate::world::{Disabled, WorldId};

mod ring;
mod values;

pub use ring::SnapshotRing;

pub(crate) use values::{ClonedResource, ClonedValues, StagedValues};

/// Why a world could not be snapshotted or restored. Nothing changed in the world when it
/// could not.
#[derive(Debug)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The world holds a component or resource whose type was not registered for snapshots
    /// ([`World::register_snapshot`](crate::World::register_snapshot),
    /// [`World::register_snapshot_copy`](crate::World::register_snapshot_copy),
    /// [`World::register_snapshot_resource`](crate::World::register_snapshot_resource)).
    NotRegistered {
        /// The type's name.
        name: &'static str,
        /// `"component"` or `"resource"`.
        kind: &'static str,
    },
    /// The snapshot was taken from another world; a snapshot restores only the world it was
    /// taken from.
    WrongWorld {
        /// The world the snapshot was taken from.
        snapshot: WorldId,
        /// The world asked to restore it.
        world: WorldId,
    },
    /// The snapshot is not a whole copy of a world: made by [`Snapshot::new`] and never
    /// filled, or a [`World::snapshot_into`](crate::World::snapshot_into) into it failed.
    Incomplete,
    /// Memory for the copy (or, restoring, for the world's columns) was refused.
    Storage(StorageError),
    /// A [`SnapshotRing`] was asked for a frame it does not hold: `frames_back` is not below
    /// the number of frames saved (and not rolled back over) since it was made or cleared.
    NotInRing {
        /// The frame asked for, counted back from the newest (`0`).
        frames_back: usize,
        /// The frames the ring holds.
        held: usize,
    },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRegistered { name, kind } => write!(
                f,
                "the world holds the {kind} {name}, which is not registered for snapshots; \
                 register it with World::register_snapshot{}",
                if *kind == "resource" { "_resource" } else { " or register_snapshot_copy" }
            ),
            Self::WrongWorld { snapshot, world } => write!(
                f,
                "the snapshot was taken from world {snapshot:?}, not world {world:?}; a \
                 snapshot restores only the world it was taken from"
            ),
            Self::Incomplete => f.write_str(
                "the snapshot holds no whole world (never filled, or its last fill failed)",
            ),
            Self::Storage(e) => e.fmt(f),
            Self::NotInRing { frames_back, held } => write!(
                f,
                "the snapshot ring holds {held} frames; frame {frames_back} back is not one of \
                 them"
            ),
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Storage(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StorageError> for SnapshotError {
    fn from(e: StorageError) -> Self {
        Self::Storage(e)
    }
}

/// A copy of a whole world, taken by [`World::snapshot`](crate::World::snapshot) and put back
/// by [`World::restore`](crate::World::restore) (any number of times). See the module docs
/// of `snapshot` for what it holds; it holds no pointer into the world, so the world may change
/// (and grow new archetypes and tables) freely while a snapshot is kept.
pub struct Snapshot {
    /// The world it is a whole copy of; `None` while it is not one.
    pub(crate) world: Option<WorldId>,
    /// The world's change tick when it was taken.
    pub(crate) tick: u32,
    /// The world's tick shift when it was taken: table ticks are kept minus it (see the
    /// `world::snapshot` module docs), sparse-set and resource ticks as they were.
    pub(crate) shift: u32,
    /// What a later fill may copy relative to (see [`Base`]); `None` while it holds no whole
    /// copy.
    pub(crate) base: Option<Base>,
    /// The bytes the fill that made it copied (all of [`Snapshot::copied_bytes`] for a whole
    /// copy, the rows written since for an incremental one).
    pub(crate) filled_bytes: usize,
    /// Whether that fill was incremental.
    pub(crate) incremental: bool,
    /// By archetype index: each archetype's version when it was taken.
    pub(crate) archetype_versions: Vec<u64>,
    /// Scratch: the rows of one column written since the base (kept to reuse its buffer).
    pub(crate) rows: Vec<u32>,
    pub(crate) entities: EntitiesSnapshot,
    /// By table index, for every table that existed.
    pub(crate) tables: Vec<TableSnapshot>,
    /// By archetype index, for every archetype that existed: its entity count, and its list
    /// while it kept one.
    pub(crate) archetypes: Vec<(u32, Option<Vec<ArchetypeEntity>>)>,
    /// By component index: the sparse sets that existed and held entities.
    pub(crate) sparse_sets: Vec<Option<SparseSnapshot>>,
    pub(crate) resources: Vec<ResourceSnapshot>,
}

impl Default for Snapshot {
    fn default() -> Self {
        Self::new()
    }
}

impl Snapshot {
    /// An empty snapshot to fill with [`World::snapshot_into`](crate::World::snapshot_into)
    /// (which reuses its buffers: a ring of them taken every frame allocates nothing once
    /// warm). Restoring it before it is filled is [`SnapshotError::Incomplete`].
    pub fn new() -> Self {
        Self {
            world: None,
            tick: 0,
            shift: 0,
            base: None,
            filled_bytes: 0,
            incremental: false,
            archetype_versions: Vec::new(),
            rows: Vec::new(),
            entities: EntitiesSnapshot::default(),
            tables: Vec::new(),
            archetypes: Vec::new(),
            sparse_sets: Vec::new(),
            resources: Vec::new(),
        }
    }

    /// The world it was taken from (`None` while it holds no whole copy).
    pub fn world_id(&self) -> Option<WorldId> {
        self.world
    }

    /// The world's change tick when it was taken.
    pub fn change_tick(&self) -> u32 {
        self.tick
    }

    /// The entities alive when it was taken.
    pub fn entity_count(&self) -> usize {
        self.entities.alive()
    }

    /// Makes the next [`World::snapshot_into`](crate::World::snapshot_into) into it copy the
    /// whole world (into the same buffers) rather than what changed since: after writes made
    /// with change detection bypassed, which an incremental fill does not see. It still holds
    /// its copy, and restores as before.
    pub fn copy_whole_next(&mut self) {
        self.base = None;
    }

    /// Whether the fill that made it was incremental: it copied only what changed since the
    /// snapshot it held before (see [`World::snapshot_into`](crate::World::snapshot_into)).
    pub fn is_incremental(&self) -> bool {
        self.world.is_some() && self.incremental
    }

    /// The bytes the fill that made it copied as plain data: [`Snapshot::copied_bytes`] for a
    /// whole copy; for an incremental one, the rows written since the snapshot it held before
    /// (values and ticks), the tables and archetypes whose rows changed, and the entity metas
    /// when an entity was spawned, despawned or moved.
    pub fn filled_bytes(&self) -> usize {
        self.filled_bytes
    }

    /// The bytes copied as plain data (entity metas, entity columns, `Copy` components, ticks):
    /// what a snapshot costs beyond the values it cloned.
    pub fn copied_bytes(&self) -> usize {
        let ticks = |n: usize| 2 * n * size_of::<u32>();
        let tables: usize = self
            .tables
            .iter()
            .map(|t| {
                t.entities.byte_len()
                    + t.columns
                        .iter()
                        .map(|c| match &c.data {
                            ColumnData::Bytes(b) => b.byte_len() + ticks(b.len()),
                            ColumnData::Cloned(v) => ticks(v.len()),
                        })
                        .sum::<usize>()
            })
            .sum();
        self.entities.indices() * 16 + tables
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("world", &self.world)
            .field("tick", &self.tick)
            .field("entities", &self.entities.alive())
            .field("tables", &self.tables.len())
            .field("resources", &self.resources.len())
            .finish()
    }
}

/// One table's rows: its entity column and, while it had rows, every column's values and ticks
/// (in the table's column order).
#[derive(Default)]
pub(crate) struct TableSnapshot {
    /// The table's version when it was taken.
    pub(crate) version: u64,
    pub(crate) entities: ColumnBytes,
    /// Empty when the table had no rows (and for the table of no components).
    pub(crate) columns: Vec<ColumnSnapshot>,
}

/// One column's values and ticks (the ticks minus the world's tick shift).
#[derive(Default)]
pub(crate) struct ColumnSnapshot {
    pub(crate) data: ColumnData,
    pub(crate) added: Vec<u32>,
    pub(crate) changed: Vec<u32>,
}

/// What a snapshot that holds a whole copy of a world knows of how it relates to the world
/// now, so that a later fill copies only what differs: every table row whose changed tick
/// (counted in the world's current tick frame, see the `world::snapshot` module docs) is
/// newer than `since`, and, when `forked`, also every row whose tick in the snapshot is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Base {
    /// The world's snapshot epoch it is valid for: a restore (other than from a
    /// [`SnapshotRing`], which keeps its slots valid), [`World::check_change_ticks`] or a load
    /// starts a new epoch, and a snapshot of another epoch is refilled whole.
    ///
    /// [`World::check_change_ticks`]: crate::World::check_change_ticks
    pub(crate) epoch: u64,
    /// A tick (minus the shift) at which the snapshot's values and the world's were the same
    /// state: every value written in the world since has a newer tick, and, when `forked`,
    /// every value the snapshot holds that the world does not has a newer tick in the
    /// snapshot.
    pub(crate) since: u32,
    /// Whether the snapshot holds values written after `since` on a line of history the
    /// world left (a ring slot rolled back over).
    pub(crate) forked: bool,
}

/// A column's values: bytes for `Copy` types, a typed clone for the rest.
pub(crate) enum ColumnData {
    Bytes(ColumnBytes),
    Cloned(Box<dyn ClonedValues>),
}

impl Default for ColumnData {
    fn default() -> Self {
        Self::Bytes(ColumnBytes::default())
    }
}

/// One sparse set's entities, ticks and values.
#[derive(Default)]
pub(crate) struct SparseSnapshot {
    pub(crate) membership: SparseMembership,
    pub(crate) data: ColumnData,
}

/// One resource: its type, ticks and a clone of its value.
pub(crate) struct ResourceSnapshot {
    pub(crate) type_id: TypeId,
    pub(crate) ticks: ResourceTicks,
    pub(crate) value: Box<dyn ClonedResource>,
}

/// How one registered component type's column values are copied out.
#[derive(Clone, Copy)]
pub(crate) struct ComponentFns {
    /// Copies a column of the type into the second argument: its bytes (reusing the buffer
    /// there), or a `Vec<T>` of clones.
    ///
    /// # Safety
    /// - The column holds values of the type registered with these fns.
    pub(crate) copy: unsafe fn(&Column, &mut ColumnData) -> Result<(), StorageError>,
    /// Copies rows `rows` of a column of the type into the second argument, a copy of that
    /// column at its current length made by `copy` (the other rows possibly older). `false`
    /// when the second argument is not one `copy` of this registration made (the type was
    /// registered again since): then nothing changed and the caller copies the column whole.
    ///
    /// # Safety
    /// - The column holds values of the type registered with these fns; every row in `rows`
    ///   is below its length, and the second argument was made from a column of the same
    ///   length.
    pub(crate) refresh: unsafe fn(&Column, &mut ColumnData, &[u32]) -> bool,
}

/// How one registered resource type is cloned.
#[derive(Clone, Copy)]
pub(crate) struct ResourceFns {
    /// # Safety
    /// - The resource holds a value of the type registered with these fns.
    pub(crate) clone: unsafe fn(&Resource) -> Box<dyn ClonedResource>,
}

/// The types a world's snapshots may copy, by `TypeId`.
pub(crate) struct SnapshotRegistry {
    pub(crate) components: TypeIdMap<ComponentFns>,
    pub(crate) resources: TypeIdMap<ResourceFns>,
}

impl Default for SnapshotRegistry {
    /// A registry that knows [`Disabled`] (a `Copy` marker folio itself defines).
    fn default() -> Self {
        let mut registry =
            Self { components: TypeIdMap::default(), resources: TypeIdMap::default() };
        registry.register_copy::<Disabled>();
        registry
    }
}

impl SnapshotRegistry {
    pub(crate) fn register_clone<T: Clone + Send + Sync + 'static>(&mut self) {
        self.components.insert(TypeId::of::<T>(), values::clone_fns::<T>());
    }

    /// Registers `T` as cloned unless it is registered already (as copied or cloned).
    pub(crate) fn register_clone_if_absent<T: Clone + Send + Sync + 'static>(&mut self) {
        self.components.entry(TypeId::of::<T>()).or_insert(values::clone_fns::<T>());
    }

    pub(crate) fn register_copy<T: Copy + Send + Sync + 'static>(&mut self) {
        self.components.insert(TypeId::of::<T>(), values::COPY_FNS);
    }

    pub(crate) fn register_resource<R: Clone + Send + Sync + 'static>(&mut self) {
        self.resources
            .insert(TypeId::of::<R>(), ResourceFns { clone: values::clone_resource::<R> });
    }
}
