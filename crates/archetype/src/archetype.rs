//! [`Archetype`]: every entity with exactly one set of components, and the graph between sets.
//!
//! An archetype names its full, sorted component set (sparse-set components included), the
//! [`Table`](crate::Table) that holds its table-stored components, and its entities with their
//! table rows. Archetypes that differ only in sparse-set components share a table, so adding or
//! removing a sparse-set component moves no table data.
//!
//! Each archetype caches **graph edges**: "insert bundle B → archetype" and "remove bundle B →
//! archetype", keyed by the world's index of the bundle, so a repeated transition costs a short
//! linear scan instead of a sort, merge and search. An edge whose move is a pure table-row move
//! also names a precomputed move plan (column maps), so the move searches
//! nothing either.

use folio_storage::Entity;

use crate::bundle::ComponentIds;
use crate::component::ComponentId;
use crate::table::TableId;

/// An archetype's index in the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArchetypeId(pub(crate) u32);

impl ArchetypeId {
    /// The archetype of entities with no components.
    pub const EMPTY: Self = Self(0);

    /// The id as an index.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// An entity of an archetype and its row in the archetype's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchetypeEntity {
    /// The entity.
    pub entity: Entity,
    /// Its row in the archetype's table.
    pub table_row: u32,
}

/// All entities with one exact set of components.
#[derive(Debug)]
pub struct Archetype {
    id: ArchetypeId,
    table_id: TableId,
    /// Sorted, distinct: every component of the archetype.
    components: ComponentIds,
    /// Sorted, distinct: the sparse-set ones among them.
    sparse: ComponentIds,
    entities: Vec<ArchetypeEntity>,
    /// Cached "insert bundle" transitions; at most one per bundle.
    pub(crate) insert_edges: Vec<Edge>,
    /// Cached "remove bundle" transitions; at most one per bundle, and only for bundles whose
    /// every component the archetype has.
    pub(crate) remove_edges: Vec<Edge>,
}

/// A cached transition of the archetype graph.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Edge {
    /// The world's index of the bundle inserted or removed.
    pub(crate) bundle: u32,
    /// The archetype reached.
    pub(crate) to: ArchetypeId,
    /// The world's index of the move plan when the transition moves the entity's row to
    /// another table and touches no sparse set; [`Edge::SPARSE`] when it touches only sparse
    /// sets; [`Edge::NO_PLAN`] otherwise.
    pub(crate) plan: u32,
}

impl Edge {
    /// The edge takes the general path.
    pub(crate) const NO_PLAN: u32 = u32::MAX;
    /// Every bundle component is sparse-set stored and new to the entity (insert) or held by it
    /// (remove): the table row stays where it is, and only the sparse sets and the archetype's
    /// entity list change.
    pub(crate) const SPARSE: u32 = u32::MAX - 1;
}

/// The cached edge for bundle `bundle` among `edges`.
#[inline]
pub(crate) fn find_edge(edges: &[Edge], bundle: u32) -> Option<Edge> {
    edges.iter().find(|e| e.bundle == bundle).copied()
}

impl Archetype {
    pub(crate) fn new(
        id: ArchetypeId,
        table_id: TableId,
        components: ComponentIds,
        sparse: ComponentIds,
    ) -> Self {
        Self {
            id,
            table_id,
            components,
            sparse,
            entities: Vec::new(),
            insert_edges: Vec::new(),
            remove_edges: Vec::new(),
        }
    }

    /// The archetype's id.
    #[inline]
    pub fn id(&self) -> ArchetypeId {
        self.id
    }

    /// The table its table-stored components live in.
    #[inline]
    pub fn table_id(&self) -> TableId {
        self.table_id
    }

    /// Every component, sorted.
    #[inline]
    pub fn components(&self) -> &[ComponentId] {
        &self.components
    }

    /// The sparse-set components, sorted.
    #[inline]
    pub fn sparse_components(&self) -> &[ComponentId] {
        &self.sparse
    }

    /// Whether the archetype has component `id`.
    #[inline]
    pub fn contains(&self, id: ComponentId) -> bool {
        self.components.binary_search(&id).is_ok()
    }

    /// The entities with their table rows.
    #[inline]
    pub fn entities(&self) -> &[ArchetypeEntity] {
        &self.entities
    }

    /// The number of entities.
    #[inline]
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// Whether it has no entities.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Starts loading archetype row `row` into the cache (a hint; `row` is unchecked).
    #[inline]
    pub(crate) fn prefetch(&self, row: u32) {
        folio_storage::prefetch(self.entities.as_ptr().wrapping_add(row as usize));
    }

    /// Makes room for `additional` more entities.
    #[inline]
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.entities.reserve(additional);
    }

    /// Appends an entity; returns its archetype row.
    #[inline]
    pub(crate) fn push(&mut self, entity: Entity, table_row: u32) -> u32 {
        self.entities.push(ArchetypeEntity { entity, table_row });
        (self.entities.len() - 1) as u32
    }

    /// Swap-removes archetype row `row`; returns the entity moved into it, if any.
    #[inline]
    pub(crate) fn swap_remove(&mut self, row: u32) -> Option<Entity> {
        self.entities.swap_remove(row as usize);
        self.entities.get(row as usize).map(|e| e.entity)
    }

    /// Sets the table row recorded for archetype row `row`.
    #[inline]
    pub(crate) fn set_table_row(&mut self, row: u32, table_row: u32) {
        self.entities[row as usize].table_row = table_row;
    }

    pub(crate) fn clear_entities(&mut self) {
        self.entities.clear();
    }
}
