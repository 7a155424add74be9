//! [`Archetype`]: every entity with exactly one set of components, and the graph between sets.
//! The design (shared tables, entity lists, cached edges) is on [`Archetype`]'s docs.

use folio_storage::{Entity, StorageError};

use crate::Table;
use crate::version::Version;

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
///
/// An archetype names its full, sorted component set (sparse-set components included), the
/// [`Table`](crate::Table) that holds its table-stored components, and its entities with their
/// table rows. Archetypes that differ only in sparse-set components share a table, so adding or
/// removing a sparse-set component moves no table data.
///
/// **Entity lists only where they say something.** An archetype that is its table's only one
/// (every archetype without sparse-set components, until an archetype with the same table
/// components and some sparse-set ones appears) keeps no list of its own: its entities are the
/// table's, row for row, and an entity's archetype row is its table row. Only archetypes that
/// share a table keep a list ([`ArchetypeEntities::Listed`]); an archetype switches to a list
/// once, when a second archetype joins its table, and never back. So a despawn or a table move
/// of an entity in an unshared table touches no archetype list and no second entity meta
/// (callgrind, random despawns from 100,000 entities: 482 -> 448 instructions each).
///
/// Each archetype caches **graph edges**: "insert bundle B → archetype" and "remove bundle B →
/// archetype", keyed by the world's index of the bundle, so a repeated transition costs a short
/// linear scan instead of a sort, merge and search. An edge whose move is a pure table-row move
/// also names a precomputed move plan (column maps), so the move searches
/// nothing either.
#[derive(Debug)]
pub struct Archetype {
    id: ArchetypeId,
    table_id: TableId,
    /// Sorted, distinct: every component of the archetype.
    components: ComponentIds,
    /// Sorted, distinct: the sparse-set ones among them.
    sparse: ComponentIds,
    /// Whether the archetype shares its table with another archetype and so keeps `entities`.
    /// While false, `entities` is empty and the archetype's entities are its table's, each at
    /// the archetype row equal to its table row.
    listed: bool,
    /// The number of entities, in both modes (`entities.len()` while `listed`).
    len: u32,
    /// While `listed`: the entities with their table rows, in archetype-row order.
    entities: Vec<ArchetypeEntity>,
    /// Cached "insert bundle" transitions; at most one per bundle.
    pub(crate) insert_edges: Vec<Edge>,
    /// Cached "remove bundle" transitions; at most one per bundle, and only for bundles whose
    /// every component the archetype has.
    pub(crate) remove_edges: Vec<Edge>,
    /// The union of its components' hook kinds (`crate::hooks::HookFlags`), kept by the world
    /// as hooks are set: an operation on an entity whose archetype has none skips the look-ups.
    hook_flags: u8,
    /// Whether it holds a disabling marker (see [`Archetype::is_disabled`]).
    disabled: bool,
    /// Names the archetype's entities as they are (which, in which rows), as
    /// [`Table`](crate::Table)'s version names its rows.
    version: Version,
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
            listed: false,
            len: 0,
            entities: Vec::new(),
            insert_edges: Vec::new(),
            remove_edges: Vec::new(),
            hook_flags: 0,
            disabled: false,
            version: Version::new(),
        }
    }

    /// Whether the archetype holds a disabling marker ([`Disabled`](crate::Disabled) or one
    /// registered with [`World::register_disabling_component`](crate::World)): queries that
    /// do not name the marker skip it.
    #[inline]
    pub fn is_disabled(&self) -> bool {
        self.disabled
    }

    /// Marks the archetype as holding a disabling marker (at its creation).
    pub(crate) fn set_disabled(&mut self, disabled: bool) {
        self.disabled = disabled;
    }

    /// The union of its components' hook kinds.
    #[inline]
    pub(crate) fn hook_flags(&self) -> u8 {
        self.hook_flags
    }

    pub(crate) fn set_hook_flags(&mut self, flags: u8) {
        self.hook_flags = flags;
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

    /// The entities with their table rows; `table` is this archetype's table (see
    /// [`Archetype::table_id`]).
    #[inline]
    pub fn entities<'a>(&'a self, table: &'a Table) -> ArchetypeEntities<'a> {
        if self.listed {
            ArchetypeEntities::Listed(&self.entities)
        } else {
            debug_assert_eq!(table.len(), self.len as usize, "not this archetype's table");
            ArchetypeEntities::Table(table.entities())
        }
    }

    /// Whether the archetype shares its table with another archetype, and so keeps its own
    /// entity list (see [`Archetype`]).
    #[inline]
    pub fn is_listed(&self) -> bool {
        self.listed
    }

    /// The number of entities.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether it has no entities.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Starts loading archetype row `row` into the cache (a hint; `row` is unchecked). Nothing
    /// to load for an unlisted archetype.
    #[inline]
    pub(crate) fn prefetch(&self, row: u32) {
        if self.listed {
            folio_storage::prefetch(self.entities.as_ptr().wrapping_add(row as usize));
        }
    }

    /// Makes room for `additional` more entities; on error nothing changes.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses to grow the list.
    #[inline]
    pub(crate) fn try_reserve(&mut self, additional: usize) -> Result<(), StorageError> {
        if self.listed && additional > self.entities.capacity() - self.entities.len() {
            return self.grow(additional);
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, additional: usize) -> Result<(), StorageError> {
        self.entities.try_reserve(additional).map_err(|e| StorageError::alloc(additional, e))
    }

    /// The archetype row the next entity pushed at table row `table_row` gets.
    #[inline]
    pub(crate) fn next_row(&self, table_row: u32) -> u32 {
        if self.listed { self.entities.len() as u32 } else { table_row }
    }

    /// Marks a change of the entities: a fresh [`Archetype::version`].
    #[inline]
    fn touch(&mut self) {
        self.version.touch();
    }

    /// The version of the archetype's entities: it changes whenever one joins, leaves or
    /// changes rows, and a restore puts back the one the snapshot recorded.
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version.get()
    }

    /// Restores a version a snapshot recorded ([`Archetype::version`]); `None`: a fresh one.
    pub(crate) fn set_version(&mut self, version: Option<u64>) {
        self.version.set(version);
    }

    /// Appends an entity living at table row `table_row`; returns its archetype row. Unlisted,
    /// the entity must be the table's last row (it was just pushed to the table).
    #[inline]
    pub(crate) fn push(&mut self, entity: Entity, table_row: u32) -> u32 {
        self.touch();
        self.len += 1;
        if self.listed {
            self.entities.push(ArchetypeEntity { entity, table_row });
            (self.entities.len() - 1) as u32
        } else {
            debug_assert_eq!(table_row + 1, self.len, "unlisted: the table's last row");
            table_row
        }
    }

    /// Records that a block of `n` entities joined the end of an unlisted archetype's table
    /// (a batch moved them as one block with `Table::move_tail_mapped`).
    #[inline]
    pub(crate) fn extend_unlisted(&mut self, n: usize) {
        debug_assert!(!self.listed);
        self.touch();
        self.len += n as u32;
    }

    /// Records that the last `n` entities of an unlisted archetype's table left it as one block.
    #[inline]
    pub(crate) fn truncate_unlisted(&mut self, n: usize) {
        debug_assert!(!self.listed && n <= self.len as usize);
        self.touch();
        self.len -= n as u32;
    }

    /// Moves the last `n` entries of `src`'s list to the end of this one's, in order (a batch
    /// moving them between two archetypes of one table); returns the archetype row of the
    /// first. Both keep lists.
    pub(crate) fn take_tail_of(&mut self, src: &mut Archetype, n: usize) -> u32 {
        debug_assert!(self.listed && src.listed && n <= src.entities.len());
        self.touch();
        src.touch();
        let first = self.entities.len() as u32;
        let start = src.entities.len() - n;
        self.entities.extend_from_slice(&src.entities[start..]);
        src.entities.truncate(start);
        src.len -= n as u32;
        self.len += n as u32;
        first
    }

    /// The list's entries (empty while the archetype keeps no list).
    #[inline]
    pub(crate) fn listed_entities(&self) -> &[ArchetypeEntity] {
        &self.entities
    }

    /// Swap-removes archetype row `row`; returns the entity moved into it, if any. Unlisted,
    /// the table's swap-remove moves the entities (and the caller fixes the moved one's row
    /// with [`Archetype::set_table_row`]), so nothing moves here.
    #[inline]
    pub(crate) fn swap_remove(&mut self, row: u32) -> Option<Entity> {
        self.touch();
        self.len -= 1;
        if !self.listed {
            return None;
        }
        self.entities.swap_remove(row as usize);
        self.entities.get(row as usize).map(|e| e.entity)
    }

    /// Records that the entity at archetype row `row` now lives at table row `table_row`;
    /// returns the entity's archetype row afterwards (unlisted, the two rows are one).
    #[inline]
    pub(crate) fn set_table_row(&mut self, row: u32, table_row: u32) -> u32 {
        if self.listed {
            self.touch();
            self.entities[row as usize].table_row = table_row;
            row
        } else {
            table_row
        }
    }

    /// The list this archetype keeps once it shares its table: `table_entities` are the
    /// entities of its table, which it has had alone until now (so archetype row == table row
    /// for each). Made apart from [`Self::set_list`] so that a refused allocation changes
    /// nothing.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses the list.
    pub(crate) fn try_make_list(
        &self,
        table_entities: &[Entity],
    ) -> Result<Vec<ArchetypeEntity>, StorageError> {
        debug_assert!(!self.listed && table_entities.len() == self.len as usize);
        let mut list = Vec::new();
        list.try_reserve_exact(table_entities.len())
            .map_err(|e| StorageError::alloc(table_entities.len(), e))?;
        list.extend(
            (0u32..)
                .zip(table_entities)
                .map(|(row, &entity)| ArchetypeEntity { entity, table_row: row }),
        );
        Ok(list)
    }

    /// Starts keeping `list`, made by [`Self::try_make_list`].
    pub(crate) fn set_list(&mut self, list: Vec<ArchetypeEntity>) {
        debug_assert!(!self.listed && list.len() == self.len as usize);
        self.touch();
        self.entities = list;
        self.listed = true;
    }

    /// Marks a new archetype as sharing its table from the start.
    pub(crate) fn set_listed(&mut self) {
        debug_assert!(self.len == 0);
        self.touch();
        self.listed = true;
    }

    /// The entity count and, while it keeps one, a copy of the list, into `out` (reusing its
    /// buffer): what a snapshot keeps.
    pub(crate) fn snapshot_entities_into(
        &self,
        out: &mut (u32, Option<Vec<ArchetypeEntity>>),
    ) -> Result<(), StorageError> {
        out.0 = self.len;
        if !self.listed {
            out.1 = None;
            return Ok(());
        }
        let list = out.1.get_or_insert_with(Vec::new);
        list.clear();
        list.try_reserve_exact(self.entities.len())
            .map_err(|e| StorageError::alloc(self.entities.len(), e))?;
        list.extend_from_slice(&self.entities);
        Ok(())
    }

    /// Makes room for [`Self::restore_entities`] of `len` entities.
    pub(crate) fn try_reserve_restore(&mut self, len: usize) -> Result<(), StorageError> {
        self.try_reserve(len.saturating_sub(self.entities.len()))
    }

    /// Puts back the entities a snapshot recorded (`len` and the list when it kept one); an
    /// archetype that keeps a list now but did not then (it started sharing its table since)
    /// lists `table_entities`, the restored table's rows, row for row. An archetype keeps a
    /// list from the moment it shares its table, so one without a list now had none then (an
    /// archetype made since the snapshot is given an empty list and `len` 0).
    /// Room was made by [`Self::try_reserve_restore`]: nothing allocates.
    pub(crate) fn restore_entities(
        &mut self,
        len: u32,
        list: Option<&[ArchetypeEntity]>,
        table_entities: &[Entity],
    ) {
        debug_assert!(
            self.listed || list.is_none_or(|l| l.is_empty()),
            "an archetype never stops keeping a list"
        );
        self.len = len;
        if !self.listed {
            return;
        }
        self.entities.clear();
        match list {
            Some(list) => self.entities.extend_from_slice(list),
            None => self.entities.extend(
                (0u32..)
                    .zip(table_entities)
                    .map(|(row, &entity)| ArchetypeEntity { entity, table_row: row }),
            ),
        }
        debug_assert_eq!(self.entities.len(), len as usize);
    }

    pub(crate) fn clear_entities(&mut self) {
        self.touch();
        self.entities.clear();
        self.len = 0;
    }
}

/// An archetype's entities with their table rows ([`Archetype::entities`]).
#[derive(Clone, Copy, Debug)]
pub enum ArchetypeEntities<'a> {
    /// The archetype is its table's only one: these are the table's entities, entity `i` at
    /// table row `i`.
    Table(&'a [Entity]),
    /// The archetype shares its table: each entity with its table row.
    Listed(&'a [ArchetypeEntity]),
}

impl<'a> ArchetypeEntities<'a> {
    /// No entities.
    pub const EMPTY: Self = Self::Listed(&[]);

    /// The number of entities.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Self::Table(e) => e.len(),
            Self::Listed(e) => e.len(),
        }
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entity at archetype row `row`, with its table row.
    #[inline]
    pub fn get(&self, row: usize) -> Option<ArchetypeEntity> {
        match self {
            Self::Table(e) => {
                e.get(row).map(|&entity| ArchetypeEntity { entity, table_row: row as u32 })
            }
            Self::Listed(e) => e.get(row).copied(),
        }
    }

    /// Archetype rows `start..end`, each entity with its table row.
    ///
    /// # Panics
    /// When `start > end` or `end > len`.
    #[inline]
    #[track_caller]
    pub fn range(&self, start: usize, end: usize) -> impl Iterator<Item = ArchetypeEntity> + 'a {
        assert!(start <= end && end <= self.len(), "rows {start}..{end} of {}", self.len());
        let this = *self;
        (start..end).map(move |row| this.get(row).expect("in bounds, checked above"))
    }

    /// Every entity, in archetype-row order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = ArchetypeEntity> + 'a {
        self.range(0, self.len())
    }
}
