//! [`QueryState`]: a query's resolved terms, validated access, and the cache of the tables and
//! archetypes it matches, kept up to date incrementally as the world makes new archetypes.

use std::cell::Cell;

use folio_archetype::{ArchetypeId, Entity, MAX_CHANGE_AGE, TableId, World, WorldId};
use smallvec::SmallVec;

use crate::access::{FilteredAccess, QueryError};
use crate::combinations::{QueryCombinationIter, for_each_combination};
use crate::fetch::{ArchetypeFilter, QueryData, QueryFilter, ReadOnlyQueryData, StorageSummary};
use crate::iter::QueryIter;
use crate::many::{QueryManyIter, for_each_many};
use crate::par::QueryParIter;

thread_local! {
    /// The world and tick of the system running on this thread, if any ([`with_system_tick`]).
    static SYSTEM_TICK: Cell<Option<(WorldId, u32)>> = const { Cell::new(None) };
}

/// Runs `f` as a system run of `world` at `tick`: a [`QueryState`] run through a shared
/// `&World` of that world inside `f` (a system taking `&World` that keeps its own query
/// state) takes `tick` as its tick instead of a new one from the world's counter, as the
/// system's own `Query` parameters do. folio-schedule runs every system whose parameters give
/// it the world (`&World`) inside this; a hand-written system that hands its code the world
/// should do the same.
///
/// Why: a parallel segment's systems take their ticks in the schedule's order before any of
/// them runs, so a tick taken from the counter during the segment is newer than every one of
/// them. A query state that remembered such a tick would never see the writes of the systems
/// ordered after its own in that segment, in this run or in the next.
///
/// Calls nest (the inner tick applies inside the inner call), and the previous tick is back
/// when `f` returns or unwinds.
pub fn with_system_tick<R>(world: WorldId, tick: u32, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<(WorldId, u32)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SYSTEM_TICK.set(self.0);
        }
    }
    let _restore = Restore(SYSTEM_TICK.replace(Some((world, tick))));
    f()
}

/// The tick of the system running on this thread, if it runs on `world`.
#[inline]
fn system_tick(world: &World) -> Option<u32> {
    SYSTEM_TICK.get().and_then(|(id, tick)| (id == world.id()).then_some(tick))
}

/// How a query walks the world, chosen from where its components are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IterMode {
    /// Every term is table-stored: walk the matching tables as contiguous columns.
    Tables,
    /// Some term is sparse-set stored and a table component is required: walk the matching
    /// archetypes, looking sparse components up by entity.
    Archetypes,
    /// Only sparse-set components are required: walk the smallest required set and keep the
    /// entities whose archetype matches. A query that names one sparse-set component and
    /// nothing else (`&mut Health`, `(Entity, &Health)`, `Changed<Health>`...) walks that
    /// set's dense arrays like a table's columns, with no lookup per entity
    /// ([`Matches::is_dense_sparse`]).
    Sparse,
}

/// What a query matched so far.
#[derive(Clone, Debug)]
pub struct Matches {
    pub(crate) mode: IterMode,
    pub(crate) tables: Vec<TableId>,
    table_bits: Vec<u64>,
    pub(crate) archetypes: Vec<ArchetypeId>,
    archetype_bits: Vec<u64>,
    /// The sparse-set components every match has (the candidates to drive `Sparse` mode).
    pub(crate) required_sparse: SmallVec<[folio_archetype::ComponentId; 4]>,
    /// No archetype can match (a required component is not registered yet).
    pub(crate) none: bool,
    /// `Sparse` mode, dense: the query names only this sparse-set component, and every
    /// archetype that has it matches, so every entity of its set is a match and the set's
    /// dense arrays are walked like a table's columns (no lookup per entity).
    pub(crate) dense_set: Option<folio_archetype::ComponentId>,
}

fn set_bit(bits: &mut Vec<u64>, index: usize) -> bool {
    let (word, bit) = (index / 64, index % 64);
    if bits.len() <= word {
        bits.resize(word + 1, 0);
    }
    let was = bits[word] & (1 << bit) != 0;
    bits[word] |= 1 << bit;
    !was
}

fn get_bit(bits: &[u64], index: usize) -> bool {
    bits.get(index / 64).is_some_and(|w| w & (1 << (index % 64)) != 0)
}

impl Matches {
    fn new(summary: &StorageSummary) -> Self {
        let mode = if !summary.any_sparse {
            IterMode::Tables
        } else if !summary.required_table && !summary.required_sparse.is_empty() {
            IterMode::Sparse
        } else {
            IterMode::Archetypes
        };
        Self {
            mode,
            tables: Vec::new(),
            table_bits: Vec::new(),
            archetypes: Vec::new(),
            archetype_bits: Vec::new(),
            required_sparse: summary.required_sparse.clone(),
            none: summary.unresolved_required,
            dense_set: match mode {
                IterMode::Sparse => summary.dense_sparse_candidate(),
                _ => None,
            },
        }
    }

    /// The sparse set to walk densely, if the query qualifies (see `dense_set`).
    #[inline]
    pub(crate) fn dense_sparse_set<'w>(
        &self,
        world: &'w World,
    ) -> Option<(folio_archetype::ComponentId, &'w folio_archetype::ComponentSparseSet)> {
        let id = self.dense_set.filter(|_| !self.none)?;
        world.sparse_set(id).map(|set| (id, set))
    }

    /// Whether `Sparse` mode walks one set densely (see `dense_set`).
    #[inline]
    pub fn is_dense_sparse(&self) -> bool {
        self.mode == IterMode::Sparse && self.dense_set.is_some() && !self.none
    }

    /// Whether archetype `id` matches.
    #[inline]
    pub fn contains_archetype(&self, id: ArchetypeId) -> bool {
        get_bit(&self.archetype_bits, id.index())
    }

    /// The iteration mode.
    #[inline]
    pub fn mode(&self) -> IterMode {
        self.mode
    }

    /// The matched tables (filled in `Tables` mode only).
    #[inline]
    pub fn tables(&self) -> &[TableId] {
        &self.tables
    }

    /// The matched archetypes.
    #[inline]
    pub fn archetypes(&self) -> &[ArchetypeId] {
        &self.archetypes
    }

    /// How many entities the matched archetypes hold: the query's length when its filter is
    /// archetypal, an upper bound otherwise.
    pub fn entity_count(&self, world: &World) -> usize {
        match self.mode {
            IterMode::Tables => self.tables.iter().map(|t| world.tables()[t.index()].len()).sum(),
            _ => self.archetypes.iter().map(|a| world.archetypes()[a.index()].len()).sum(),
        }
    }
}

/// A typed query over a world: data `D` of the entities that pass filter `F`.
///
/// Build it once (it validates its access and caches what it matches), then run it each frame:
/// new archetypes are matched incrementally, never the whole list again. It remembers the tick it
/// last ran at, so [`Changed`](crate::Changed) and [`Added`](crate::Added) mean "since this query
/// last ran".
pub struct QueryState<D: QueryData, F: QueryFilter = ()> {
    world_id: WorldId,
    data: D::State,
    filter: F::State,
    access: FilteredAccess,
    matches: Matches,
    /// Archetypes `[0, archetype_generation)` have been matched.
    archetype_generation: usize,
    /// The tick of the last run, `None` before the first.
    last_run: Option<u32>,
}

impl<D: QueryData, F: QueryFilter> std::fmt::Debug for QueryState<D, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryState")
            .field("data", &std::any::type_name::<D>())
            .field("filter", &std::any::type_name::<F>())
            .field("mode", &self.matches.mode)
            .field("archetypes", &self.matches.archetypes.len())
            .finish()
    }
}

impl<D: QueryData, F: QueryFilter> QueryState<D, F> {
    /// The query over `world`.
    ///
    /// # Panics
    /// When the query's access conflicts with itself (`(&mut T, &T)`); [`Self::try_new`] returns
    /// that as an error.
    pub fn new(world: &World) -> Self {
        Self::try_new(world)
            .unwrap_or_else(|e| panic!("query {}: {e}", std::any::type_name::<(D, F)>()))
    }

    /// The query over `world`, or [`QueryError::Conflict`] if it would hand out a `&mut` to a
    /// component alongside another reference to it.
    pub fn try_new(world: &World) -> Result<Self, QueryError> {
        let access = Self::component_access()?;
        let data = D::init_state(world);
        let filter = F::init_state(world);
        let matches = Matches::new(&summarize::<D, F>(&data, &filter));
        let mut state = Self {
            world_id: world.id(),
            data,
            filter,
            access,
            matches,
            archetype_generation: 0,
            last_run: None,
        };
        state.update_archetypes(world);
        Ok(state)
    }

    /// The access `D` and `F` need, or the conflict that makes them unusable.
    ///
    /// The data and the filter are checked each on its own: a filter only reads (ticks, or
    /// nothing), and it reads a row before the data's item for that row exists, so
    /// `Query<&mut T, Changed<T>>` is fine. The filter's reads are then merged in, so that
    /// conflicts between systems still count them.
    pub fn component_access() -> Result<FilteredAccess, QueryError> {
        let mut access = FilteredAccess::default();
        D::update_access(&mut access)?;
        let mut filter = FilteredAccess::default();
        F::update_access(&mut filter)?;
        for &key in filter.reads.iter() {
            if !access.writes.contains(key.id) {
                access.add_read(key)?;
            }
        }
        for &key in filter.with.iter() {
            access.with.insert(key);
        }
        for &key in filter.without.iter() {
            access.without.insert(key);
        }
        Ok(access)
    }

    /// What the query reads and writes.
    #[inline]
    pub fn access(&self) -> &FilteredAccess {
        &self.access
    }

    /// What it matched so far.
    #[inline]
    pub fn matches(&self) -> &Matches {
        &self.matches
    }

    /// The tick the query last ran at.
    #[inline]
    pub fn last_run(&self) -> Option<u32> {
        self.last_run
    }

    /// Sets the tick the query counts as its last run (the scheduler keeps one per system).
    #[inline]
    pub fn set_last_run(&mut self, tick: u32) {
        self.last_run = Some(tick);
    }

    /// Matches the archetypes `world` made since the last update.
    ///
    /// # Panics
    /// When `world` is not the world the state was built for.
    pub fn update_archetypes(&mut self, world: &World) {
        self.validate_world(world).unwrap_or_else(|e| panic!("{e}"));
        let archetypes = world.archetypes();
        if archetypes.len() == self.archetype_generation {
            return;
        }
        // A component registered since may resolve a term, which can change the mode: then
        // match everything again (rare: once per newly seen component).
        let refreshed =
            D::refresh_state(&mut self.data, world) | F::refresh_state(&mut self.filter, world);
        if refreshed {
            self.matches = Matches::new(&summarize::<D, F>(&self.data, &self.filter));
            self.archetype_generation = 0;
        }
        if self.matches.none {
            self.archetype_generation = archetypes.len();
            return;
        }
        for archetype in &archetypes[self.archetype_generation..] {
            let contains = |id| archetype.contains(id);
            let matched = D::matches(&self.data, &contains) && F::matches(&self.filter, &contains);
            if let Some(id) = self.matches.dense_set {
                // An archetype with the set's component that the query rejects (`Without<C>`,
                // say): the set holds non-matching entities, so it cannot be walked blindly.
                if !matched && archetype.contains(id) {
                    self.matches.dense_set = None;
                }
            }
            if matched {
                let m = &mut self.matches;
                set_bit(&mut m.archetype_bits, archetype.id().index());
                m.archetypes.push(archetype.id());
                if m.mode == IterMode::Tables
                    && set_bit(&mut m.table_bits, archetype.table_id().index())
                {
                    m.tables.push(archetype.table_id());
                }
            }
        }
        self.archetype_generation = archetypes.len();
    }

    /// `Ok` if `world` is the world the state was built for.
    #[inline]
    pub fn validate_world(&self, world: &World) -> Result<(), QueryError> {
        if world.id() == self.world_id { Ok(()) } else { Err(QueryError::WorldMismatch) }
    }

    /// Takes a tick for a run: `(last_run, this_run)`, and remembers `this_run`. Inside a
    /// system run on `world`, the tick is the system's ([`with_system_tick`]).
    #[inline]
    fn begin_run(&mut self, world: &World) -> (u32, u32) {
        let this_run = system_tick(world).unwrap_or_else(|| world.increment_change_tick());
        self.begin_run_at(this_run)
    }

    /// [`Self::begin_run`] on an exclusively borrowed world: no atomic increment.
    #[inline]
    fn begin_run_mut(&mut self, world: &mut World) -> (u32, u32) {
        self.begin_run_at(world.increment_change_tick_mut())
    }

    #[inline]
    fn begin_run_at(&mut self, this_run: u32) -> (u32, u32) {
        let last_run = self.last_run_for(this_run);
        self.last_run = Some(this_run);
        (last_run, this_run)
    }

    /// The ticks for a look that does not count as a run (`get`, `single`, `is_empty`).
    fn peek_ticks(&self, world: &World) -> (u32, u32) {
        let this_run = system_tick(world).unwrap_or_else(|| world.change_tick());
        (self.last_run_for(this_run), this_run)
    }

    fn last_run_for(&self, this_run: u32) -> u32 {
        match self.last_run {
            // Clamp a query that slept through most of the tick range, so old changes don't
            // read as new after the wrap.
            Some(last) if this_run.wrapping_sub(last) <= MAX_CHANGE_AGE => last,
            // Before the first run, everything counts as added and changed.
            _ => this_run.wrapping_sub(MAX_CHANGE_AGE),
        }
    }

    /// The matching entities' items, read-only. Counts as a run of the query.
    #[inline(always)]
    pub fn iter<'w, 's>(&'s mut self, world: &'w World) -> QueryIter<'w, 's, D::ReadOnly, F> {
        self.update_archetypes(world);
        let (last_run, this_run) = self.begin_run(world);
        // SAFETY:
        // - the state was updated for `world` above.
        // - `D::ReadOnly` only reads, and `&World` keeps anyone from writing for `'w`.
        unsafe {
            QueryIter::new(world, &self.data, &self.filter, &self.matches, last_run, this_run)
        }
    }

    /// The matching entities' items, mutably. Counts as a run of the query.
    ///
    /// Always inlined, as are the other constructors of [`QueryIter`]: an iterator returned
    /// from a call is written through a pointer to the caller's stack slot, and once that
    /// slot's address has escaped the optimiser assumes every write through an item may
    /// change the iterator, so a `for` loop reloaded its column pointers from the stack every
    /// row (100,000-row `(&mut Position, &Velocity)` loop: 197 -> 172 us).
    #[inline(always)]
    pub fn iter_mut<'w, 's>(&'s mut self, world: &'w mut World) -> QueryIter<'w, 's, D, F> {
        self.update_archetypes(world);
        let (last_run, this_run) = self.begin_run_mut(world);
        let world = &*world;
        // SAFETY:
        // - the state was updated for `world` above.
        // - `&mut World` gives this query exclusive access for `'w`; its own access was
        //   validated at creation, and the iterator yields each entity once.
        unsafe {
            QueryIter::new(world, &self.data, &self.filter, &self.matches, last_run, this_run)
        }
    }

    /// The items, with the caller vouching for access.
    ///
    /// # Safety
    /// - [`Self::update_archetypes`] was called with `world` since it last made an archetype.
    /// - For `'w`, nothing else reads what this query writes, nor writes what it reads or
    ///   writes (the scheduler proves this from [`Self::access`]).
    #[inline(always)]
    pub unsafe fn iter_unchecked<'w, 's>(
        &'s self,
        world: &'w World,
        last_run: u32,
        this_run: u32,
    ) -> QueryIter<'w, 's, D, F> {
        debug_assert!(self.validate_world(world).is_ok());
        // SAFETY: forwarded from the caller.
        unsafe {
            QueryIter::new(world, &self.data, &self.filter, &self.matches, last_run, this_run)
        }
    }

    /// The items, read-only, with the caller vouching for access (for a shared `Query`).
    ///
    /// # Safety
    /// - As for [`Self::iter_unchecked`], for reads only.
    #[inline(always)]
    pub unsafe fn iter_readonly_unchecked<'w, 's>(
        &'s self,
        world: &'w World,
        last_run: u32,
        this_run: u32,
    ) -> QueryIter<'w, 's, D::ReadOnly, F> {
        debug_assert!(self.validate_world(world).is_ok());
        // SAFETY: forwarded from the caller; `D::ReadOnly` shares `D`'s state.
        unsafe {
            QueryIter::new(world, &self.data, &self.filter, &self.matches, last_run, this_run)
        }
    }

    /// A parallel read-only iterator, with the caller vouching for access.
    ///
    /// # Safety
    /// - As for [`Self::iter_unchecked`], for reads only.
    pub unsafe fn par_iter_readonly_unchecked<'w, 's>(
        &'s self,
        world: &'w World,
        last_run: u32,
        this_run: u32,
    ) -> QueryParIter<'w, 's, D::ReadOnly, F> {
        // SAFETY: forwarded from the caller.
        unsafe {
            QueryParIter::new(world, &self.data, &self.filter, &self.matches, last_run, this_run)
        }
    }

    /// `entity`'s items, read-only, with the caller vouching for access.
    ///
    /// # Safety
    /// - As for [`Self::iter_unchecked`], for reads only.
    pub unsafe fn get_readonly_unchecked<'w>(
        &self,
        world: &'w World,
        entity: Entity,
        last_run: u32,
        this_run: u32,
    ) -> Result<<D::ReadOnly as QueryData>::Item<'w>, QueryError> {
        // SAFETY: forwarded from the caller.
        unsafe {
            get_in::<D::ReadOnly, F>(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                entity,
                last_run,
                this_run,
            )
        }
    }

    /// Runs `f` on every matching entity's items, read-only. Counts as a run.
    pub fn for_each<'w>(
        &mut self,
        world: &'w World,
        f: impl FnMut(<D::ReadOnly as QueryData>::Item<'w>),
    ) {
        self.iter(world).for_each(f);
    }

    /// Runs `f` on every matching entity's items, mutably. Counts as a run.
    pub fn for_each_mut<'w>(&mut self, world: &'w mut World, f: impl FnMut(D::Item<'w>)) {
        self.iter_mut(world).for_each(f);
    }

    /// A parallel iterator over the items, read-only. Counts as a run.
    pub fn par_iter<'w, 's>(
        &'s mut self,
        world: &'w World,
    ) -> QueryParIter<'w, 's, D::ReadOnly, F> {
        self.update_archetypes(world);
        let (last_run, this_run) = self.begin_run(world);
        // SAFETY: as in `iter`.
        unsafe {
            QueryParIter::new(world, &self.data, &self.filter, &self.matches, last_run, this_run)
        }
    }

    /// A parallel iterator over the items, mutably. Counts as a run.
    pub fn par_iter_mut<'w, 's>(&'s mut self, world: &'w mut World) -> QueryParIter<'w, 's, D, F> {
        self.update_archetypes(world);
        let (last_run, this_run) = self.begin_run_mut(world);
        let world = &*world;
        // SAFETY: as in `iter_mut`: each entity goes to exactly one task.
        unsafe {
            QueryParIter::new(world, &self.data, &self.filter, &self.matches, last_run, this_run)
        }
    }

    /// A parallel iterator, with the caller vouching for access.
    ///
    /// # Safety
    /// - As for [`Self::iter_unchecked`].
    pub unsafe fn par_iter_unchecked<'w, 's>(
        &'s self,
        world: &'w World,
        last_run: u32,
        this_run: u32,
    ) -> QueryParIter<'w, 's, D, F> {
        // SAFETY: forwarded from the caller.
        unsafe {
            QueryParIter::new(world, &self.data, &self.filter, &self.matches, last_run, this_run)
        }
    }

    /// `entity`'s items, read-only.
    pub fn get<'w>(
        &mut self,
        world: &'w World,
        entity: Entity,
    ) -> Result<<D::ReadOnly as QueryData>::Item<'w>, QueryError> {
        self.update_archetypes(world);
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: read-only data through `&World`; the state is up to date.
        unsafe {
            get_in::<D::ReadOnly, F>(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                entity,
                last_run,
                this_run,
            )
        }
    }

    /// `entity`'s items, mutably.
    pub fn get_mut<'w>(
        &mut self,
        world: &'w mut World,
        entity: Entity,
    ) -> Result<D::Item<'w>, QueryError> {
        let world = &*world;
        self.update_archetypes(world);
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: `&mut World` gives exclusive access; one item is handed out.
        unsafe {
            get_in::<D, F>(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                entity,
                last_run,
                this_run,
            )
        }
    }

    /// `entity`'s items, with the caller vouching for access.
    ///
    /// # Safety
    /// - As for [`Self::iter_unchecked`], and no other live item of this query is for `entity`.
    pub unsafe fn get_unchecked<'w>(
        &self,
        world: &'w World,
        entity: Entity,
        last_run: u32,
        this_run: u32,
    ) -> Result<D::Item<'w>, QueryError> {
        // SAFETY: forwarded from the caller.
        unsafe {
            get_in::<D, F>(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                entity,
                last_run,
                this_run,
            )
        }
    }

    /// The read-only items of `N` entities at once (an entity may be named twice: the items
    /// only read); the first entity's error if one does not match. Not a run (ticks as for
    /// `get`).
    pub fn get_many<'w, const N: usize>(
        &mut self,
        world: &'w World,
        entities: [Entity; N],
    ) -> Result<[<D::ReadOnly as QueryData>::Item<'w>; N], QueryError> {
        self.update_archetypes(world);
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: read-only data through `&World`; the state is up to date.
        unsafe { self.get_many_readonly_unchecked(world, entities, last_run, this_run) }
    }

    /// [`Self::get_many`] with the caller vouching for access and ticks: what a system's
    /// `Query` calls.
    ///
    /// # Safety
    /// - As for [`Self::iter_readonly_unchecked`].
    pub unsafe fn get_many_readonly_unchecked<'w, const N: usize>(
        &self,
        world: &'w World,
        entities: [Entity; N],
        last_run: u32,
        this_run: u32,
    ) -> Result<[<D::ReadOnly as QueryData>::Item<'w>; N], QueryError> {
        let mut error = None;
        let items = entities.map(|e| {
            // After the first error the rest are not looked up: the call fails anyway.
            if error.is_some() {
                return None;
            }
            // SAFETY: read-only items (forwarded from the caller), which may alias each other.
            let item = unsafe { self.get_readonly_unchecked(world, e, last_run, this_run) };
            item.map_err(|e| error = Some(e)).ok()
        });
        match error {
            Some(error) => Err(error),
            None => Ok(items.map(|item| item.expect("no entity failed"))),
        }
    }

    /// The items of `N` distinct entities at once, mutably; [`QueryError::DuplicateEntity`] if
    /// one is named twice.
    pub fn get_many_mut<'w, const N: usize>(
        &mut self,
        world: &'w mut World,
        entities: [Entity; N],
    ) -> Result<[D::Item<'w>; N], QueryError> {
        let world = &*world;
        self.update_archetypes(world);
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: the state is up to date; `&mut World` gives exclusive access.
        unsafe {
            get_many_in::<D, F, N>(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                entities,
                last_run,
                this_run,
            )
        }
    }

    /// The items of `N` distinct entities at once, with the caller vouching for access.
    ///
    /// # Safety
    /// - As for [`Self::iter_unchecked`], and no other live item of this query is for any of
    ///   `entities`.
    pub unsafe fn get_many_unchecked<'w, const N: usize>(
        &self,
        world: &'w World,
        entities: [Entity; N],
        last_run: u32,
        this_run: u32,
    ) -> Result<[D::Item<'w>; N], QueryError> {
        // SAFETY: forwarded from the caller.
        unsafe {
            get_many_in::<D, F, N>(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                entities,
                last_run,
                this_run,
            )
        }
    }

    /// The read-only items of the entities `entities` yields, in its order, skipping those the
    /// query does not match (despawned, lacking a component, filtered out): for lists of
    /// entities kept in components. A lookup per entity; not a run (ticks as for `get`).
    pub fn iter_many<'w, 's, I: IntoIterator<Item = Entity>>(
        &'s mut self,
        world: &'w World,
        entities: I,
    ) -> QueryManyIter<'w, 's, D::ReadOnly, F, I::IntoIter> {
        self.update_archetypes(world);
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: read-only through `&World`; the state is up to date.
        unsafe { self.iter_many_unchecked(world, entities, last_run, this_run) }
    }

    /// [`Self::iter_many`] with the caller vouching for access and ticks: what a system's
    /// `Query` calls.
    ///
    /// # Safety
    /// - As for [`Self::iter_readonly_unchecked`].
    pub unsafe fn iter_many_unchecked<'w, 's, I: IntoIterator<Item = Entity>>(
        &'s self,
        world: &'w World,
        entities: I,
        last_run: u32,
        this_run: u32,
    ) -> QueryManyIter<'w, 's, D::ReadOnly, F, I::IntoIter> {
        // SAFETY: forwarded from the caller.
        unsafe { QueryManyIter::new(Lookup::new(self, world, (last_run, this_run)), entities) }
    }

    /// Runs `f` on the mutable items of the entities `entities` yields, in its order, one at
    /// a time, skipping those the query does not match (despawned, lacking a component,
    /// filtered out); an entity listed twice gets two calls. What `iter_many` is for a list
    /// whose items must be written: `f` gets each item for the length of its call. A look-up,
    /// not a run of the query, as `get_mut` is.
    pub fn for_each_many_mut<I: IntoIterator<Item = Entity>>(
        &mut self,
        world: &mut World,
        entities: I,
        f: impl FnMut(D::Item<'_>),
    ) {
        let world = &*world;
        self.update_archetypes(world);
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: `&mut World` gives exclusive access; the state is up to date.
        unsafe { self.for_each_many_unchecked(world, entities, last_run, this_run, f) }
    }

    /// [`Self::for_each_many_mut`] with the caller vouching for access and ticks: what a
    /// system's `Query` calls.
    ///
    /// # Safety
    /// - As for [`Self::iter_unchecked`], and no other item of this query is alive.
    pub unsafe fn for_each_many_unchecked<I: IntoIterator<Item = Entity>>(
        &self,
        world: &World,
        entities: I,
        last_run: u32,
        this_run: u32,
        f: impl FnMut(D::Item<'_>),
    ) {
        // SAFETY: forwarded from the caller.
        unsafe {
            for_each_many::<D, F>(Lookup::new(self, world, (last_run, this_run)), entities, f)
        }
    }

    /// The read-only items of every `K` distinct matching entities, each set once (`[a, b]`
    /// but not `[b, a]`): pairs for collisions or forces between bodies. A run of the query,
    /// as `iter` is. The entities are listed when it starts (their count `n`), and each
    /// combination is looked up as it is reached: `n` choose `K` of them, so mind `n`.
    pub fn iter_combinations<'w, 's, const K: usize>(
        &'s mut self,
        world: &'w World,
    ) -> QueryCombinationIter<'w, 's, D::ReadOnly, F, K> {
        self.update_archetypes(world);
        let (last_run, this_run) = self.begin_run(world);
        // SAFETY: read-only through `&World`; the state is up to date.
        unsafe { self.iter_combinations_unchecked(world, last_run, this_run) }
    }

    /// Runs `f` on the mutable items of every `K` distinct matching entities, each set once,
    /// one set at a time (see [`Self::iter_combinations`]): `f` gets `[D::Item; K]` for the
    /// length of its call, so it can write both bodies of a pair.
    pub fn for_each_combination_mut<const K: usize>(
        &mut self,
        world: &mut World,
        f: impl FnMut([D::Item<'_>; K]),
    ) {
        let (last_run, this_run) = self.begin_run_mut(world);
        let world = &*world;
        self.update_archetypes(world);
        // SAFETY: `&mut World` gives exclusive access; the state is up to date.
        unsafe { self.for_each_combination_unchecked(world, last_run, this_run, f) }
    }

    /// [`Self::iter_combinations`] with the caller vouching for access and ticks: what a
    /// system's `Query` calls.
    ///
    /// # Safety
    /// - As for [`Self::iter_readonly_unchecked`].
    pub unsafe fn iter_combinations_unchecked<'w, 's, const K: usize>(
        &'s self,
        world: &'w World,
        last_run: u32,
        this_run: u32,
    ) -> QueryCombinationIter<'w, 's, D::ReadOnly, F, K> {
        // SAFETY: forwarded from the caller.
        unsafe { QueryCombinationIter::new(Lookup::new(self, world, (last_run, this_run))) }
    }

    /// [`Self::for_each_combination_mut`] with the caller vouching for access and ticks.
    ///
    /// # Safety
    /// - As for [`Self::iter_unchecked`], and no other item of this query is alive.
    pub unsafe fn for_each_combination_unchecked<const K: usize>(
        &self,
        world: &World,
        last_run: u32,
        this_run: u32,
        f: impl FnMut([D::Item<'_>; K]),
    ) {
        // SAFETY: forwarded from the caller.
        unsafe {
            for_each_combination::<D, F, K>(Lookup::new(self, world, (last_run, this_run)), f)
        }
    }

    /// The one matching entity's items; an error unless exactly one matches.
    pub fn single<'w>(
        &mut self,
        world: &'w World,
    ) -> Result<<D::ReadOnly as QueryData>::Item<'w>, QueryError> {
        self.update_archetypes(world);
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: read-only through `&World`; the state is up to date.
        let iter = unsafe {
            QueryIter::<D::ReadOnly, F>::new(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                last_run,
                this_run,
            )
        };
        single_of(iter)
    }

    /// The one matching entity's items, mutably; an error unless exactly one matches.
    pub fn single_mut<'w>(&mut self, world: &'w mut World) -> Result<D::Item<'w>, QueryError> {
        let world = &*world;
        self.update_archetypes(world);
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: exclusive through `&mut World`; the state is up to date.
        let iter = unsafe {
            QueryIter::<D, F>::new(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                last_run,
                this_run,
            )
        };
        single_of(iter)
    }

    /// Whether no entity matches (does not count as a run).
    pub fn is_empty(&mut self, world: &World) -> bool {
        self.update_archetypes(world);
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: read-only through `&World`; the state is up to date.
        let mut iter = unsafe {
            QueryIter::<D::ReadOnly, F>::new(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                last_run,
                this_run,
            )
        };
        iter.next().is_none()
    }
}

impl<D: QueryData, F: ArchetypeFilter> QueryState<D, F> {
    /// How many entities match (known without iterating: the filter is archetypal).
    pub fn count(&mut self, world: &World) -> usize {
        self.update_archetypes(world);
        self.matches.entity_count(world)
    }
}

impl<D: ReadOnlyQueryData, F: QueryFilter> QueryState<D, F> {
    /// `entity`'s items through a shared state (read-only data only; the state must be up to
    /// date, see [`Self::update_archetypes`]).
    pub fn get_readonly<'w>(
        &self,
        world: &'w World,
        entity: Entity,
    ) -> Result<D::Item<'w>, QueryError> {
        self.validate_world(world)?;
        let (last_run, this_run) = self.peek_ticks(world);
        // SAFETY: read-only data through `&World`.
        unsafe {
            get_in::<D, F>(
                world,
                &self.data,
                &self.filter,
                &self.matches,
                entity,
                last_run,
                this_run,
            )
        }
    }
}

fn summarize<D: QueryData, F: QueryFilter>(data: &D::State, filter: &F::State) -> StorageSummary {
    let mut summary = StorageSummary::default();
    D::summarize(data, &mut summary);
    F::summarize(filter, &mut summary);
    summary
}

fn single_of<I: Iterator>(mut iter: I) -> Result<I::Item, QueryError> {
    let first = iter.next().ok_or(QueryError::NoEntities)?;
    if iter.next().is_some() {
        return Err(QueryError::MultipleEntities);
    }
    Ok(first)
}

/// What looking an entity up in a query needs, for one world and one pair of ticks: the
/// entity-list iterators (`iter_many`, `iter_combinations`) keep one.
pub(crate) struct Lookup<'w, 's, D: QueryData, F: QueryFilter> {
    pub(crate) world: &'w World,
    data: &'s D::State,
    filter: &'s F::State,
    pub(crate) matches: &'s Matches,
    last_run: u32,
    this_run: u32,
}

impl<'w, 's, D: QueryData, F: QueryFilter> Lookup<'w, 's, D, F> {
    /// A lookup of `D` (the state's own data, or its read-only form) in `state`'s matches.
    ///
    /// # Safety
    /// - `state` is up to date for `world`; the caller holds, for `'w`, the access that the
    ///   items later made through [`Lookup::get`] need.
    pub(crate) unsafe fn new<S: QueryData<State = D::State>>(
        state: &'s QueryState<S, F>,
        world: &'w World,
        ticks: (u32, u32),
    ) -> Self {
        let (last_run, this_run) = ticks;
        Self {
            world,
            data: &state.data,
            filter: &state.filter,
            matches: &state.matches,
            last_run,
            this_run,
        }
    }

    /// Whether `entity` matches (an item read and dropped at once).
    pub(crate) fn matches(&self, entity: Entity) -> bool {
        // SAFETY: a read-only item, dropped before this returns; `new`'s caller holds at
        // least the reads.
        unsafe { self.get_as::<D::ReadOnly>(entity) }.is_ok()
    }

    /// `entity`'s items.
    ///
    /// # Safety
    /// - As for `get_in`: no other live item of this query is for `entity` unless `D` is
    ///   read-only.
    pub(crate) unsafe fn get(&self, entity: Entity) -> Result<D::Item<'w>, QueryError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.get_as::<D>(entity) }
    }

    /// # Safety
    /// - As for [`Lookup::get`], for data `Q`.
    unsafe fn get_as<Q: QueryData<State = D::State>>(
        &self,
        entity: Entity,
    ) -> Result<Q::Item<'w>, QueryError> {
        // SAFETY: forwarded from the caller; `new`'s caller keeps `matches` up to date.
        unsafe {
            get_in::<Q, F>(
                self.world,
                self.data,
                self.filter,
                self.matches,
                entity,
                self.last_run,
                self.this_run,
            )
        }
    }
}

/// `entity`'s item, if it matches.
///
/// # Safety
/// - `matches` was built for `world` (it may be stale: an archetype made since is simply not
///   matched, and a term that was unresolved then cannot name a component of an older
///   archetype); the caller holds the access `D` and `F` need for
///   `'w`, and no other live item of `D` is for `entity`.
unsafe fn get_in<'w, D: QueryData, F: QueryFilter>(
    world: &'w World,
    data: &D::State,
    filter: &F::State,
    matches: &Matches,
    entity: Entity,
    last_run: u32,
    this_run: u32,
) -> Result<D::Item<'w>, QueryError> {
    let loc = world.entities().location(entity).ok_or(QueryError::NoSuchEntity(entity))?;
    let archetype_id = world.archetypes()[loc.archetype_id as usize].id();
    if !matches.contains_archetype(archetype_id) {
        return Err(QueryError::DoesNotMatch(entity));
    }
    let archetype = &world.archetypes()[archetype_id.index()];
    let table = &world.tables()[archetype.table_id().index()];
    // SAFETY:
    // - the caller holds the access; the archetype matches both terms (checked above).
    // - `entity` lives in `archetype` at `loc.table_row`.
    unsafe {
        let mut data_fetch = D::init_fetch(world, data, last_run, this_run);
        let mut filter_fetch = F::init_fetch(world, filter, last_run, this_run);
        D::set_archetype(&mut data_fetch, data, archetype, table);
        F::set_archetype(&mut filter_fetch, filter, archetype, table);
        if !F::filter_fetch(&mut filter_fetch, entity, loc.table_row as usize) {
            return Err(QueryError::DoesNotMatch(entity));
        }
        Ok(D::fetch(&mut data_fetch, entity, loc.table_row as usize))
    }
}

/// The items of `N` distinct entities.
///
/// # Safety
/// - As for [`get_in`], for every entity.
unsafe fn get_many_in<'w, D: QueryData, F: QueryFilter, const N: usize>(
    world: &'w World,
    data: &D::State,
    filter: &F::State,
    matches: &Matches,
    entities: [Entity; N],
    last_run: u32,
    this_run: u32,
) -> Result<[D::Item<'w>; N], QueryError> {
    for (i, e) in entities.iter().enumerate() {
        if entities[..i].contains(e) {
            return Err(QueryError::DuplicateEntity(*e));
        }
    }
    // Check every entity before handing out any item.
    for &e in &entities {
        // SAFETY: the item made here is dropped at once, before the next one is made.
        drop(unsafe {
            get_in::<D::ReadOnly, F>(world, data, filter, matches, e, last_run, this_run)
        }?);
    }
    Ok(entities.map(|e| {
        // SAFETY: the entities are distinct (checked above), so the items never alias.
        unsafe { get_in::<D, F>(world, data, filter, matches, e, last_run, this_run) }
            .expect("checked above")
    }))
}
