//! [`QueryState`]: a query's resolved terms, validated access, and the cache of the tables and
//! archetypes it matches, kept up to date incrementally as the world makes new archetypes.
//!
//! Building a state and matching archetypes are here; running it is in `iteration` (its
//! iterators, `single`, `is_empty`, `count`) and looking entities up in `get`.

use std::cell::Cell;

use folio_archetype::{ArchetypeId, MAX_CHANGE_AGE, TableId, World, WorldId};
use smallvec::SmallVec;

use crate::access::{FilteredAccess, QueryError};
use crate::fetch::{QueryData, QueryFilter, StorageSummary};

mod get;
mod iteration;

pub(crate) use get::Lookup;

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
    /// Every component the query names: the disabling markers among them do not hide the
    /// entities that have them.
    named: SmallVec<[folio_archetype::ComponentId; 4]>,
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
            named: summary.named.clone(),
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

    /// Whether the query sees the entities of `archetype`, which holds a disabling marker: only
    /// when it names every marker there (`With<Disabled>`, `Has<Disabled>`,
    /// `Allow<Disabled>`, ...).
    fn sees_disabled(&self, archetype: &folio_archetype::Archetype, world: &World) -> bool {
        archetype.components().iter().all(|&id| !world.is_disabling(id) || self.named.contains(&id))
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
    /// `last_run` counted in 64 bits ([`World::absolute_tick`]), so that a state idle for 2^32
    /// ticks or more, whose 32-bit age has wrapped, still knows it is old; `None` when the tick
    /// was set by [`QueryState::set_last_run`], which compares the 32-bit ticks alone.
    last_run_total: Option<u64>,
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
    #[track_caller]
    pub fn new(world: &World) -> Self {
        match Self::try_new(world) {
            Ok(state) => state,
            Err(e) => panic!("query {}: {e}", std::any::type_name::<(D, F)>()),
        }
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
            last_run_total: None,
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
        self.last_run_total = None;
    }

    /// Matches the archetypes `world` made since the last update.
    ///
    /// # Panics
    /// When `world` is not the world the state was built for.
    #[track_caller]
    #[inline]
    pub fn update_archetypes(&mut self, world: &World) {
        // The common case, inline: the right world and no archetype made since. Every lookup
        // (`get`) passes here, so it must cost a couple of compares, not a call.
        if world.id() == self.world_id && world.archetypes().len() == self.archetype_generation {
            return;
        }
        self.match_new_archetypes(world);
    }

    /// The rest of [`Self::update_archetypes`], out of line.
    #[track_caller]
    #[inline(never)]
    fn match_new_archetypes(&mut self, world: &World) {
        if let Err(e) = self.validate_world(world) {
            panic!("{e}");
        }
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
            let matched = D::matches(&self.data, &contains)
                && F::matches(&self.filter, &contains)
                && (!archetype.is_disabled() || self.matches.sees_disabled(archetype, world));
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
        self.begin_run_at(world, this_run)
    }

    /// [`Self::begin_run`] on an exclusively borrowed world: no atomic increment.
    #[inline]
    fn begin_run_mut(&mut self, world: &mut World) -> (u32, u32) {
        let this_run = world.increment_change_tick_mut();
        self.begin_run_at(world, this_run)
    }

    #[inline]
    fn begin_run_at(&mut self, world: &World, this_run: u32) -> (u32, u32) {
        let this_total = world.absolute_tick(this_run);
        let last_run = self.last_run_for(this_run, this_total);
        self.last_run = Some(this_run);
        self.last_run_total = Some(this_total);
        (last_run, this_run)
    }

    /// The ticks for a look that does not count as a run (`get`, `single`, `is_empty`); none
    /// are read (zeros) when no term of the query reads them.
    #[inline]
    fn peek_ticks(&self, world: &World) -> (u32, u32) {
        if !(D::READS_TICKS || F::READS_TICKS) {
            return (0, 0);
        }
        let this_run = system_tick(world).unwrap_or_else(|| world.change_tick());
        (self.last_run_for(this_run, world.absolute_tick(this_run)), this_run)
    }

    /// The last run as `Added`/`Changed` compare against it at `this_run` (`this_total` in 64
    /// bits): clamped to [`MAX_CHANGE_AGE`], as the world clamps its stored ticks, so a query
    /// that slept through most of the tick range, or past a wrap of it, neither reads old
    /// changes as new nor misses new ones.
    #[inline]
    fn last_run_for(&self, this_run: u32, this_total: u64) -> u32 {
        let recent = |last: u32| match self.last_run_total {
            Some(total) => this_total.saturating_sub(total) <= u64::from(MAX_CHANGE_AGE),
            None => this_run.wrapping_sub(last) <= MAX_CHANGE_AGE,
        };
        match self.last_run {
            Some(last) if recent(last) => last,
            // Before the first run, everything counts as added and changed.
            _ => this_run.wrapping_sub(MAX_CHANGE_AGE),
        }
    }
}

fn summarize<D: QueryData, F: QueryFilter>(data: &D::State, filter: &F::State) -> StorageSummary {
    let mut summary = StorageSummary::default();
    D::summarize(data, &mut summary);
    F::summarize(filter, &mut summary);
    summary
}
