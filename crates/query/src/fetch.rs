//! The traits every query term implements: [`WorldQuery`] (matching, access, fetch setup),
//! [`QueryData`] (what a matched entity yields) and [`QueryFilter`] (whether it is yielded).
//!
//! The safety model of fetches is on [`WorldQuery`]'s docs.

use folio_archetype::{
    Archetype, Component, ComponentId, ComponentSparseSet, Entity, StorageType, Table, World,
};
use smallvec::SmallVec;

use crate::access::{FilteredAccess, QueryError, TypeKey};

/// How a query's terms are stored, which decides how it iterates.
#[derive(Clone, Debug, Default)]
pub struct StorageSummary {
    /// Some term (data or filter) names a sparse-set component.
    pub any_sparse: bool,
    /// Some term requires a table component (`&T`, `&mut T`, `With<T>`, `Added<T>`, ...).
    pub required_table: bool,
    /// The sparse-set components every matched entity must have.
    pub required_sparse: SmallVec<[ComponentId; 4]>,
    /// Some required term names a component that is not registered yet: nothing matches.
    pub unresolved_required: bool,
    /// Some term, required or not, names a table-stored component.
    pub named_table: bool,
    /// Some term, required or not, names a component that is not registered yet.
    pub named_unresolved: bool,
    /// Every sparse-set component any term names, required or not (may repeat).
    pub named_sparse: SmallVec<[ComponentId; 4]>,
    /// Every registered component any term names, required or not (may repeat): a query
    /// that names a disabling marker ([`Disabled`](folio_archetype::Disabled)) sees the
    /// entities that have it.
    pub named: SmallVec<[ComponentId; 4]>,
}

impl StorageSummary {
    /// Adds what an inner summary (of an optional term or an `Or` alternative) names, without
    /// its requirements: an optional term requires nothing of the entities it is asked about.
    pub fn merge_named(&mut self, inner: &StorageSummary) {
        self.any_sparse |= inner.any_sparse;
        self.named_table |= inner.named_table;
        self.named_unresolved |= inner.named_unresolved;
        self.named_sparse.extend_from_slice(&inner.named_sparse);
        self.named.extend_from_slice(&inner.named);
    }

    /// The one sparse-set component a query may iterate densely: the query requires it, and
    /// names no other component (table-stored, sparse or unregistered) in any term. Every row
    /// of that set then has everything the fetches read; whether every entity in it also
    /// passes the archetype-level filters is checked per archetype (see `Matches`).
    pub fn dense_sparse_candidate(&self) -> Option<ComponentId> {
        let &first = self.required_sparse.first()?;
        let only_one = self.required_sparse.iter().all(|&id| id == first)
            && self.named_sparse.iter().all(|&id| id == first);
        (only_one && !self.required_table && !self.named_table && !self.named_unresolved)
            .then_some(first)
    }
}

/// One component named by a query term: its type, and its id and storage once registered.
///
/// A query state can be built from a `&World` before its components are registered; the term
/// resolves when the component first shows up (no archetype can hold it before that).
#[derive(Clone, Copy, Debug)]
pub struct ComponentTerm {
    /// The component type.
    pub key: TypeKey,
    /// Its id and storage, once registered.
    pub resolved: Option<(ComponentId, StorageType)>,
}

impl ComponentTerm {
    /// The term for `T`, resolved if `T` is registered in `world`.
    pub fn new<T: Component>(world: &World) -> Self {
        let mut term = Self { key: TypeKey::of::<T>(), resolved: None };
        term.refresh(world);
        term
    }

    /// Resolves the term if its component is now registered; whether that changed anything.
    pub fn refresh(&mut self, world: &World) -> bool {
        if self.resolved.is_some() {
            return false;
        }
        let components = world.components();
        self.resolved =
            components.id_of(self.key.id).map(|id| (id, components.info(id).storage_type()));
        self.resolved.is_some()
    }

    /// The component id, if registered.
    #[inline]
    pub fn id(&self) -> Option<ComponentId> {
        self.resolved.map(|(id, _)| id)
    }

    /// Whether the component is sparse-set stored.
    #[inline]
    pub fn is_sparse(&self) -> bool {
        matches!(self.resolved, Some((_, StorageType::SparseSet)))
    }

    /// The component's sparse set in `world`, if it is sparse-set stored and has one.
    #[inline]
    pub fn sparse_set<'w>(&self, world: &'w World) -> Option<&'w ComponentSparseSet> {
        match self.resolved {
            Some((id, StorageType::SparseSet)) => world.sparse_set(id),
            _ => None,
        }
    }

    /// Records this term in `summary`: `required` for terms every match must have.
    pub fn summarize(&self, summary: &mut StorageSummary, required: bool) {
        if let Some((id, _)) = self.resolved {
            summary.named.push(id);
        }
        match self.resolved {
            None => {
                summary.unresolved_required |= required;
                summary.named_unresolved = true;
            }
            Some((id, StorageType::SparseSet)) => {
                summary.any_sparse = true;
                summary.named_sparse.push(id);
                if required {
                    summary.required_sparse.push(id);
                }
            }
            Some((_, StorageType::Table)) => {
                summary.required_table |= required;
                summary.named_table = true;
            }
        }
    }

    /// Whether a component set (given by its membership test) has this component.
    #[inline]
    pub fn is_in(&self, contains: &impl Fn(ComponentId) -> bool) -> bool {
        self.id().is_some_and(contains)
    }
}

/// The [`WorldQuery`] methods of a term over one component `$t` that every match must have
/// (`&T`, `&mut T`, `Ref<T>`, `Added<T>`, `Changed<T>`): its state is a [`ComponentTerm`],
/// its access `access.$add(T)` (`add_read` or `add_write`) and `with T`.
macro_rules! required_component_term {
    ($t:ty, $add:ident) => {
        fn init_state(world: &World) -> ComponentTerm {
            ComponentTerm::new::<$t>(world)
        }

        fn refresh_state(state: &mut ComponentTerm, world: &World) -> bool {
            state.refresh(world)
        }

        fn update_access(access: &mut FilteredAccess) -> Result<(), QueryError> {
            access.$add(TypeKey::of::<$t>())?;
            access.with.insert(TypeKey::of::<$t>());
            Ok(())
        }

        fn summarize(state: &ComponentTerm, summary: &mut StorageSummary) {
            state.summarize(summary, true);
        }

        fn matches(state: &ComponentTerm, contains: &impl Fn(ComponentId) -> bool) -> bool {
            state.is_in(contains)
        }
    };
}
pub(crate) use required_component_term;

/// The [`QueryData`] column methods of a term that takes the plain loop (`NOALIAS_ROWS` false):
/// no column arguments, nothing to rebase.
macro_rules! no_column_arguments {
    () => {
        const NOALIAS_ROWS: bool = false;
        type ColA<'w> = ();
        type ColB<'w> = ();

        unsafe fn columns<'w>(
            _: &Self::Fetch<'w>,
            _: usize,
            _: usize,
        ) -> (Self::ColA<'w>, Self::ColB<'w>) {
            ((), ())
        }

        unsafe fn rebase<'w>(
            _: &mut Self::Fetch<'w>,
            _: &mut Self::ColA<'w>,
            _: &mut Self::ColB<'w>,
        ) {
        }
    };
}
pub(crate) use no_column_arguments;

/// The part of a query term that matches archetypes and prepares fetches.
///
/// # Safety
/// - [`WorldQuery::update_access`] records every component the fetch reads (as a read) and
///   writes (as a write), so a query state that validated its access hands out no aliasing
///   references.
/// - [`WorldQuery::matches`] holds for an archetype only if every component the fetch reads
///   for every row is present (or the fetch checks presence itself, as `Option` does).
/// - [`WorldQuery::summarize`] reports every resolved sparse-set component the term names
///   (`any_sparse`): the `Tables` path walks every row of a matched table, which is only right
///   when no term depends on a sparse-set component (archetypes that differ only in those share
///   the table). It also reports every component the term names at all, required or not
///   (`named_table`, `named_sparse`, `named_unresolved`): the dense sparse-set path is taken
///   only for queries that name one sparse-set component and nothing else.
///
/// # Safety model
/// A fetch holds raw pointers into one table's columns (or one sparse set), set by
/// [`WorldQuery::set_table`] / [`WorldQuery::set_archetype`], and turns a row into an item. It
/// never makes a slice over a whole column: a query that writes a component and filters on its
/// ticks (`(&mut T, Changed<T>)`) reads ticks through the same raw pointer it writes through, so
/// no shared reference ever overlaps a write. Which rows are live, and that no two live items
/// alias, is the iterator's side of the contract (see
/// [`QueryIter`](crate::QueryIter#safety-model)).
///
/// The one place slices are made is [`QueryData::fold_rows`], for long runs of a dense loop
/// whose filter reads nothing per row: each term's columns over exactly the rows about to be
/// visited (`&[T]` for a read, `&mut [T]` and `&mut [u32]` ticks for a write), none of which has
/// an item yet, passed as separate arguments to an out-of-line loop, whose items are then all
/// derived from those slices. Items handed out before (earlier rows) or kept after (the loop's
/// rows) never overlap a slice made for other rows.
pub unsafe trait WorldQuery {
    /// Resolved component ids and anything else computed once per query state.
    type State: Send + Sync + 'static;
    /// Raw pointers into the current table (or sparse sets), valid for `'w`.
    type Fetch<'w>: Clone;

    /// Whether the fetch reads the `last_run`/`this_run` ticks [`WorldQuery::init_fetch`] is
    /// given (to compare change ticks, or to stamp them on a write). When no term of a query
    /// does, a lookup ([`QueryState::get`](crate::QueryState::get)) skips reading the ticks:
    /// `&T`, `Entity`, `With<T>`, `Without<T>` and `Has<T>` say `false`. The default, `true`,
    /// is always correct.
    const READS_TICKS: bool = true;

    /// The state for `world`.
    fn init_state(world: &World) -> Self::State;

    /// Resolves components registered since; whether anything changed.
    fn refresh_state(state: &mut Self::State, world: &World) -> bool;

    /// Records the term's reads, writes and `with`/`without` constraints.
    fn update_access(access: &mut FilteredAccess) -> Result<(), QueryError>;

    /// Records how the term's components are stored.
    fn summarize(state: &Self::State, summary: &mut StorageSummary);

    /// Whether an archetype with the components `contains` says yes to matches the term.
    fn matches(state: &Self::State, contains: &impl Fn(ComponentId) -> bool) -> bool;

    /// A fetch with no table set yet.
    ///
    /// # Safety
    /// - `state` was built for `world`; the caller holds the access `update_access` describes
    ///   for `'w`.
    unsafe fn init_fetch<'w>(
        world: &'w World,
        state: &Self::State,
        last_run: u32,
        this_run: u32,
    ) -> Self::Fetch<'w>;

    /// Points the fetch at `table`, for dense iteration (every term table-stored).
    ///
    /// # Safety
    /// - `table` belongs to the fetch's world, matches the term, and every component the term
    ///   names is table-stored.
    unsafe fn set_table<'w>(fetch: &mut Self::Fetch<'w>, state: &Self::State, table: &'w Table);

    /// Points the fetch at sparse set `set`, the storage of component `id`, for dense iteration:
    /// row `i` is the set's dense index `i` (its `i`-th entity, value and ticks).
    ///
    /// # Safety
    /// - `set` belongs to the fetch's world and stores `id`; the query names no component but
    ///   `id` (`StorageSummary::dense_sparse_candidate`), and every entity in the set belongs
    ///   to an archetype the query matches.
    unsafe fn set_sparse_set<'w>(
        fetch: &mut Self::Fetch<'w>,
        state: &Self::State,
        id: ComponentId,
        set: &'w ComponentSparseSet,
    );

    /// Points the fetch at `archetype`, whose table is `table`, for row-by-entity fetching.
    ///
    /// # Safety
    /// - `archetype` and `table` belong to the fetch's world, `table` is the archetype's, and the
    ///   archetype matches the term.
    unsafe fn set_archetype<'w>(
        fetch: &mut Self::Fetch<'w>,
        state: &Self::State,
        archetype: &'w Archetype,
        table: &'w Table,
    );
}

/// A query term that yields a value per matched entity: `&T`, `&mut T`, `Option<..>`, `Entity`,
/// tuples of them.
///
/// # Safety
/// - The items of two different rows never alias mutably; an item lives no longer than `'w`.
/// - `ReadOnly` matches every archetype `Self` matches, reads no more than `Self` accesses,
///   writes nothing, and summarizes its storage as `Self` does (iteration matches with `Self`
///   and may fetch with `ReadOnly` on the same state).
pub unsafe trait QueryData: WorldQuery {
    /// What one entity yields.
    type Item<'w>;
    /// The read-only form of this query (`&T` for `&mut T`).
    type ReadOnly: ReadOnlyQueryData<State = Self::State>;

    /// The item of `entity` at `table_row`, after `set_archetype`.
    ///
    /// # Safety
    /// - `set_archetype` was called with `entity`'s archetype; `entity` is alive there at
    ///   `table_row`; no other live item of this query is for this entity (for mutable terms).
    unsafe fn fetch<'w>(
        fetch: &mut Self::Fetch<'w>,
        entity: Entity,
        table_row: usize,
    ) -> Self::Item<'w>;

    /// The item at `table_row`, after `set_table` (dense iteration: no entity lookup), or the
    /// item at dense index `table_row` after `set_sparse_set`.
    ///
    /// # Safety
    /// - `set_table` was called and `table_row < table.len()`, or `set_sparse_set` was called
    ///   and `table_row < set.len()`; as for `fetch` otherwise.
    unsafe fn fetch_table<'w>(fetch: &mut Self::Fetch<'w>, table_row: usize) -> Self::Item<'w>;

    /// Shortens an item's lifetime (items are covariant in `'w` for every term here).
    fn shrink<'wlong: 'wshort, 'wshort>(item: Self::Item<'wlong>) -> Self::Item<'wshort>;

    /// Whether [`QueryData::fold_rows`] hands the rows to `fold_rows_noalias` (every term
    /// of the query can give its columns as reference arguments).
    const NOALIAS_ROWS: bool;

    /// The term's first column over some rows, as a function argument (`&[T]`,
    /// `&mut [T]`, or `()` when the term has none).
    type ColA<'w>;
    /// The term's second column (the changed ticks a `&mut T` stamps), or `()`.
    type ColB<'w>;

    /// The term's columns over rows `start..end` of the table (or sparse set) the fetch is
    /// set to. Only called when `NOALIAS_ROWS`.
    ///
    /// # Safety
    /// - The fetch is set (`set_table` or `set_sparse_set`) and `start <= end <= len`.
    /// - No item of those rows is alive, and none is made for them but through the returned
    ///   columns (via [`QueryData::rebase`]) while they live.
    unsafe fn columns<'w>(
        fetch: &Self::Fetch<'w>,
        start: usize,
        end: usize,
    ) -> (Self::ColA<'w>, Self::ColB<'w>);

    /// Points the fetch at the columns `columns` made, so that row `r` of the fetch is row
    /// `start + r` of the table.
    ///
    /// # Safety
    /// - `a` and `b` come from `columns` for this fetch.
    unsafe fn rebase<'w>(
        fetch: &mut Self::Fetch<'w>,
        a: &mut Self::ColA<'w>,
        b: &mut Self::ColB<'w>,
    );

    /// Runs `g` over rows `start..end` of the current table (or sparse set), in order: the
    /// dense loop of `fold` and `for_each`.
    ///
    /// When `NOALIAS_ROWS`, the rows go to an out-of-line function that takes every column as
    /// its own reference argument (see `fold_rows_noalias`): the compiler then knows the
    /// columns do not overlap, and can keep values in registers across writes to other
    /// columns, or combine a row's loads and stores into vector ones. Measured on
    /// `simple_iter` (`pos += vel`, `Position` 12 bytes).
    ///
    /// # Safety
    /// - As for [`QueryData::fetch_table`] for every row of `start..end`, and as for
    ///   [`QueryData::columns`].
    #[inline(always)]
    unsafe fn fold_rows<'w, B, G>(
        fetch: &Self::Fetch<'w>,
        start: usize,
        end: usize,
        acc: B,
        g: &mut G,
    ) -> B
    where
        G: FnMut(B, Self::Item<'w>) -> B,
    {
        if Self::NOALIAS_ROWS {
            // SAFETY: forwarded from the caller.
            return unsafe {
                let (a, b) = Self::columns(fetch, start, end);
                fold_rows_noalias::<Self, B, G>(a, b, fetch, end - start, acc, g)
            };
        }
        // SAFETY: forwarded from the caller.
        unsafe { fold_rows_plain::<Self, B, G>(fetch, start, end, acc, g) }
    }
}

/// The dense loop without the no-alias arguments: `fetch_table` for each row of `start..end`.
///
/// # Safety
/// - As for [`QueryData::fold_rows`].
#[inline(always)]
pub(crate) unsafe fn fold_rows_plain<'w, D: QueryData + ?Sized, B, G>(
    fetch: &D::Fetch<'w>,
    start: usize,
    end: usize,
    mut acc: B,
    g: &mut G,
) -> B
where
    G: FnMut(B, D::Item<'w>) -> B,
{
    let mut fetch = fetch.clone();
    for r in start..end {
        // SAFETY: forwarded from the caller.
        acc = g(acc, unsafe { D::fetch_table(&mut fetch, r) });
    }
    acc
}

/// The dense loop with one term's columns as reference arguments (see
/// [`QueryData::fold_rows`]). Out of line on purpose: inlined, the arguments' no-alias
/// guarantee would be lost when the compiler's MIR inliner merges the bodies.
///
/// # Safety
/// - `a` and `b` come from `D::columns(fetch, start, end)` with `len = end - start`; as for
///   [`QueryData::fold_rows`].
#[inline(never)]
pub(crate) unsafe fn fold_rows_noalias<'w, D: QueryData + ?Sized, B, G>(
    mut a: D::ColA<'w>,
    mut b: D::ColB<'w>,
    fetch: &D::Fetch<'w>,
    len: usize,
    mut acc: B,
    g: &mut G,
) -> B
where
    G: FnMut(B, D::Item<'w>) -> B,
{
    let mut fetch = fetch.clone();
    // SAFETY: the columns were made by `D::columns` for this fetch (caller).
    unsafe { D::rebase(&mut fetch, &mut a, &mut b) };
    for r in 0..len {
        // SAFETY: rebased: row `r` is row `start + r`, in bounds (caller).
        acc = g(acc, unsafe { D::fetch_table(&mut fetch, r) });
    }
    acc
}

/// A [`QueryData`] that only reads: safe to iterate through a shared `&World`, and many of its
/// items may live at once for the same entity.
///
/// # Safety
/// - `update_access` records no write.
pub unsafe trait ReadOnlyQueryData: QueryData<ReadOnly = Self> {}

/// A query term that decides whether a matched entity is yielded: `With<T>`, `Without<T>`,
/// `Added<T>`, `Changed<T>`, `Or<..>`, tuples.
///
/// # Safety
/// - `filter_fetch` only reads, and only what `update_access` records.
pub unsafe trait QueryFilter: WorldQuery {
    /// Whether the archetype alone decides (no per-row check): then a query's length is known
    /// before it runs.
    const IS_ARCHETYPAL: bool;

    /// Whether `entity` at `table_row` passes, after `set_archetype`.
    ///
    /// # Safety
    /// - As for [`QueryData::fetch`].
    unsafe fn filter_fetch(fetch: &mut Self::Fetch<'_>, entity: Entity, table_row: usize) -> bool;

    /// Whether the row passes, after `set_table` or `set_sparse_set`.
    ///
    /// # Safety
    /// - As for [`QueryData::fetch_table`].
    unsafe fn filter_fetch_table(fetch: &mut Self::Fetch<'_>, table_row: usize) -> bool;
}

/// A filter the archetype alone decides (`With`, `Without`, `Or` and tuples of them): a query
/// with such a filter knows its length before it runs.
pub trait ArchetypeFilter: QueryFilter {}
