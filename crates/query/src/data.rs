//! The [`QueryData`] terms: `&T`, `&mut T` (yielding [`Mut`]), `Option<D>`, [`Entity`] and
//! tuples of up to 16 of them (those in `tuples`).

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::slice;

use folio_archetype::{
    Archetype, Component, ComponentId, ComponentSparseSet, Entity, Table, World, is_newer,
};

use crate::access::{FilteredAccess, QueryError, TypeKey};
use crate::fetch::{
    ComponentTerm, QueryData, ReadOnlyQueryData, StorageSummary, WorldQuery, no_column_arguments,
    required_component_term,
};

mod tuples;

pub(crate) use tuples::all_tuples;

/// Where one component's values are for the current table or archetype.
pub struct ColumnFetch<'w> {
    /// The first value of the table column (table storage, after `set_table`) or of the
    /// sparse set (sparse-set storage, from `new` on), or dangling.
    values: NonNull<u8>,
    /// The first changed tick of the same column or set, or dangling.
    changed: NonNull<u32>,
    /// The component's sparse set (sparse-set storage).
    sparse: Option<&'w ComponentSparseSet>,
}

impl Clone for ColumnFetch<'_> {
    fn clone(&self) -> Self {
        Self { values: self.values, changed: self.changed, sparse: self.sparse }
    }
}

impl<'w> ColumnFetch<'w> {
    #[inline]
    fn new(world: &'w World, term: &ComponentTerm) -> Self {
        let mut fetch = Self {
            values: NonNull::dangling(),
            changed: NonNull::dangling(),
            sparse: term.sparse_set(world),
        };
        // A sparse-set component stays in its set for `'w` (the world is borrowed): point at
        // the set once, and `locate` only looks up each entity's dense index.
        if let Some(set) = fetch.sparse {
            fetch.set_sparse_set(set);
        }
        fetch
    }

    /// Points at `table`'s column for `term` (table storage only; a no-op otherwise), and
    /// returns that column's added ticks.
    #[inline(always)]
    fn set_table(&mut self, term: &ComponentTerm, table: &'w Table) -> Option<&'w [u32]> {
        if self.sparse.is_some() {
            return None;
        }
        let column = term.id().and_then(|id| table.column(id))?;
        self.values = column.data().as_ptr();
        self.changed = column.changed_ticks_ptr();
        Some(column.added_ticks())
    }

    /// Points at sparse set `set`'s dense value and changed-tick columns.
    #[inline(always)]
    fn set_sparse_set(&mut self, set: &'w ComponentSparseSet) {
        self.values = set.column().as_ptr();
        self.changed = set.changed_ticks_ptr();
    }

    /// The value and changed tick of `entity` at `table_row`.
    ///
    /// # Safety
    /// - The fetch was set to the entity's table (table storage) and the entity has the
    ///   component; `size` is the component's size.
    #[inline]
    unsafe fn locate(&self, entity: Entity, table_row: usize, size: usize) -> (*mut u8, *mut u32) {
        // SAFETY: forwarded from the caller.
        let (row, values, changed) = unsafe { self.locate_row(entity, table_row) };
        // SAFETY: `row < len` of the value column (items of `size` bytes) and of the tick
        // column `locate_row` returned.
        unsafe { (values.as_ptr().add(row * size), changed.as_ptr().add(row)) }
    }

    /// Where `entity` (at `table_row`) is: its row in the table column or its dense index in
    /// the sparse set, with that column's (or set's) first value and first changed tick.
    ///
    /// # Safety
    /// - As for [`ColumnFetch::locate`].
    #[inline(always)]
    unsafe fn locate_row(
        &self,
        entity: Entity,
        table_row: usize,
    ) -> (usize, NonNull<u8>, NonNull<u32>) {
        match self.sparse {
            None => (table_row, self.values, self.changed),
            Some(set) => {
                let dense = set.dense_index(entity);
                debug_assert!(dense.is_some(), "{entity} matched but is not in the sparse set");
                // SAFETY: the archetype matched, so the entity has the component (caller).
                let dense = unsafe { dense.unwrap_unchecked() };
                // `new` pointed the fetch at this set's columns.
                (dense, self.values, self.changed)
            }
        }
    }
}

// SAFETY:
// - `update_access` records a read of `T` and requires it (`with`).
// - `matches` requires `T`, the only component read.
unsafe impl<T: Component> WorldQuery for &T {
    const READS_TICKS: bool = false;
    type State = ComponentTerm;
    type Fetch<'w> = ColumnFetch<'w>;

    required_component_term!(T, add_read);

    unsafe fn init_fetch<'w>(
        world: &'w World,
        state: &ComponentTerm,
        _: u32,
        _: u32,
    ) -> ColumnFetch<'w> {
        ColumnFetch::new(world, state)
    }

    #[inline(always)]
    unsafe fn set_table<'w>(fetch: &mut ColumnFetch<'w>, state: &ComponentTerm, table: &'w Table) {
        fetch.set_table(state, table);
    }

    #[inline(always)]
    unsafe fn set_sparse_set<'w>(
        fetch: &mut ColumnFetch<'w>,
        _: &ComponentTerm,
        _: ComponentId,
        set: &'w ComponentSparseSet,
    ) {
        fetch.set_sparse_set(set);
    }

    #[inline(always)]
    unsafe fn set_archetype<'w>(
        fetch: &mut ColumnFetch<'w>,
        state: &ComponentTerm,
        _: &'w Archetype,
        table: &'w Table,
    ) {
        fetch.set_table(state, table);
    }
}

// SAFETY: items are shared references, which may alias; they borrow for `'w`.
unsafe impl<T: Component> QueryData for &T {
    type Item<'w> = &'w T;
    type ReadOnly = Self;

    #[inline(always)]
    unsafe fn fetch<'w>(
        fetch: &mut Self::Fetch<'w>,
        entity: Entity,
        table_row: usize,
    ) -> Self::Item<'w> {
        // SAFETY: forwarded from the caller: the entity has a `T` there.
        let (value, _) = unsafe { fetch.locate(entity, table_row, size_of::<T>()) };
        // SAFETY: a live `T`; the query's access allows reading it for `'w`.
        unsafe { &*value.cast::<T>() }
    }

    #[inline(always)]
    unsafe fn fetch_table<'w>(fetch: &mut Self::Fetch<'w>, table_row: usize) -> Self::Item<'w> {
        // SAFETY:
        // - dense iteration: `values` is the table column's start and `table_row < len`.
        // - a live `T`; the query's access allows reading it for `'w`.
        unsafe { &*fetch.values.as_ptr().cast::<T>().add(table_row) }
    }

    fn shrink<'wlong: 'wshort, 'wshort>(item: &'wlong T) -> &'wshort T {
        item
    }

    const NOALIAS_ROWS: bool = true;
    type ColA<'w> = &'w [T];
    type ColB<'w> = ();

    #[inline(always)]
    unsafe fn columns<'w>(
        fetch: &Self::Fetch<'w>,
        start: usize,
        end: usize,
    ) -> (Self::ColA<'w>, Self::ColB<'w>) {
        // SAFETY: the fetch points at a column (or set) of at least `end` live `T`s, which the
        // query may read for `'w` (caller).
        let values = unsafe {
            slice::from_raw_parts(fetch.values.as_ptr().cast::<T>().add(start), end - start)
        };
        (values, ())
    }

    #[inline(always)]
    unsafe fn rebase<'w>(fetch: &mut Self::Fetch<'w>, a: &mut Self::ColA<'w>, _: &mut ()) {
        fetch.values = NonNull::from(*a).cast();
    }
}

// SAFETY: `update_access` records only a read.
unsafe impl<T: Component> ReadOnlyQueryData for &T {}

/// A mutable borrow of a component that marks it changed when written through.
///
/// Reading (`Deref`) marks nothing; the first `DerefMut` stamps the component's changed tick
/// with the tick of the query run, so `Changed<T>` sees real writes only. Like [`Ref`], it
/// also tells whether the value was added or changed since the query last ran.
///
/// [`Ref`]: crate::Ref
pub struct Mut<'w, T: ?Sized> {
    value: &'w mut T,
    changed: &'w mut u32,
    /// The tick the value was added at (read when the item was made; nothing here changes it).
    added: u32,
    last_run: u32,
    this_run: u32,
    /// Whether `changed` already holds `this_run`: only the first write stamps it. Once the
    /// item is inlined into a loop this flag is a constant, and a body that writes through
    /// the item three times (`for k in 0..3 { p.0[k] += v.0[k] }`) stores the tick once
    /// instead of three times (the compiler cannot tell the tick from the value apart).
    stamped: bool,
}

impl<'w, T: ?Sized> Mut<'w, T> {
    /// Whether the value was added since the query last ran.
    #[inline]
    pub fn is_added(&self) -> bool {
        is_newer(self.added, self.last_run, self.this_run)
    }

    /// Whether the value was added or changed since the query last ran, this item's own
    /// writes included.
    #[inline]
    pub fn is_changed(&self) -> bool {
        is_newer(*self.changed, self.last_run, self.this_run)
    }

    /// Marks the value changed without writing it.
    #[inline]
    pub fn set_changed(&mut self) {
        *self.changed = self.this_run;
        self.stamped = true;
    }

    /// Writes `value` and marks a change only if it differs from the current value; returns
    /// whether it did. For values set every frame that `Changed<T>` readers should only see
    /// when they really change.
    #[inline]
    pub fn set_if_neq(&mut self, value: T) -> bool
    where
        T: Sized + PartialEq,
    {
        if *self.value == value {
            return false;
        }
        *self.deref_mut() = value;
        true
    }

    /// The value, mutably, without marking it changed (for writes no one should react to).
    #[inline]
    pub fn bypass_change_detection(&mut self) -> &mut T {
        self.value
    }

    /// A `Mut` of a part of the value (a field, say), sharing this one's change tick: writes
    /// through it mark the whole component changed. `f` itself marks nothing.
    #[inline]
    pub fn map_unchanged<U: ?Sized>(self, f: impl FnOnce(&mut T) -> &mut U) -> Mut<'w, U> {
        let Self { value, changed, added, last_run, this_run, stamped } = self;
        Mut { value: f(value), changed, added, last_run, this_run, stamped }
    }

    /// A shorter `Mut` of the same value, for passing to a function that takes one by value
    /// while keeping this one.
    #[inline]
    pub fn reborrow(&mut self) -> Mut<'_, T> {
        Mut {
            value: self.value,
            changed: self.changed,
            added: self.added,
            last_run: self.last_run,
            this_run: self.this_run,
            stamped: self.stamped,
        }
    }

    /// The borrow, marked changed.
    #[inline]
    pub fn into_inner(self) -> &'w mut T {
        *self.changed = self.this_run;
        self.value
    }

    /// The tick the value was last changed at.
    #[inline]
    pub fn last_changed(&self) -> u32 {
        *self.changed
    }

    /// The tick the value was added at.
    #[inline]
    pub fn added_tick(&self) -> u32 {
        self.added
    }
}

impl<T: ?Sized> Deref for Mut<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T: ?Sized> DerefMut for Mut<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        if !self.stamped {
            *self.changed = self.this_run;
            self.stamped = true;
        }
        self.value
    }
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for Mut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Mut").field(&self.value).finish()
    }
}

/// Where one component's values are, plus its added ticks and the run's ticks.
pub struct WriteFetch<'w, T> {
    column: ColumnFetch<'w>,
    /// The first added tick of the table column or sparse set `column` points at (for a
    /// sparse-set component, from `init_fetch` on), or dangling.
    added: NonNull<u32>,
    last_run: u32,
    this_run: u32,
    _marker: PhantomData<fn() -> T>,
}

impl<T> Clone for WriteFetch<'_, T> {
    fn clone(&self) -> Self {
        Self {
            column: self.column.clone(),
            added: self.added,
            last_run: self.last_run,
            this_run: self.this_run,
            _marker: PhantomData,
        }
    }
}

// SAFETY:
// - `update_access` records a write of `T` and requires it (`with`).
// - `matches` requires `T`, the only component touched.
unsafe impl<T: Component> WorldQuery for &mut T {
    type State = ComponentTerm;
    type Fetch<'w> = WriteFetch<'w, T>;

    required_component_term!(T, add_write);

    unsafe fn init_fetch<'w>(
        world: &'w World,
        state: &ComponentTerm,
        last_run: u32,
        this_run: u32,
    ) -> WriteFetch<'w, T> {
        let column = ColumnFetch::new(world, state);
        // A sparse-set component stays in its set for `'w`: its added ticks are found once.
        let added = column
            .sparse
            .map_or(NonNull::dangling(), |set| NonNull::from(set.added_ticks()).cast());
        WriteFetch { column, added, last_run, this_run, _marker: PhantomData }
    }

    #[inline(always)]
    unsafe fn set_table<'w>(
        fetch: &mut WriteFetch<'w, T>,
        state: &ComponentTerm,
        table: &'w Table,
    ) {
        if let Some(added) = fetch.column.set_table(state, table) {
            fetch.added = NonNull::from(added).cast();
        }
    }

    #[inline(always)]
    unsafe fn set_sparse_set<'w>(
        fetch: &mut WriteFetch<'w, T>,
        _: &ComponentTerm,
        _: ComponentId,
        set: &'w ComponentSparseSet,
    ) {
        fetch.column.set_sparse_set(set);
        fetch.added = NonNull::from(set.added_ticks()).cast();
    }

    #[inline(always)]
    unsafe fn set_archetype<'w>(
        fetch: &mut WriteFetch<'w, T>,
        state: &ComponentTerm,
        _: &'w Archetype,
        table: &'w Table,
    ) {
        // SAFETY: forwarded from the caller (a no-op for sparse-set storage).
        unsafe { Self::set_table(fetch, state, table) };
    }
}

// SAFETY: each row's item borrows that row's value and tick only, so items of different rows
// never alias; the caller guarantees one live item per entity and exclusive access to `T`.
unsafe impl<'a, T: Component> QueryData for &'a mut T {
    type Item<'w> = Mut<'w, T>;
    type ReadOnly = &'a T;

    #[inline(always)]
    unsafe fn fetch<'w>(
        fetch: &mut Self::Fetch<'w>,
        entity: Entity,
        table_row: usize,
    ) -> Self::Item<'w> {
        // SAFETY: forwarded from the caller: the entity has a `T` there.
        let (row, values, changed) = unsafe { fetch.column.locate_row(entity, table_row) };
        // SAFETY: a live `T` and its ticks at `row` of the column (or set) the three pointers
        // start, with the columns' provenance; `fetch.added` points at the same table column's
        // or set's added ticks (`set_table`, `init_fetch`). The query has exclusive access to
        // `T` (no one else writes its ticks) and yields one item per entity (caller).
        unsafe {
            Mut {
                value: &mut *values.as_ptr().cast::<T>().add(row),
                changed: &mut *changed.as_ptr().add(row),
                added: fetch.added.as_ptr().add(row).read(),
                last_run: fetch.last_run,
                this_run: fetch.this_run,
                stamped: false,
            }
        }
    }

    #[inline(always)]
    unsafe fn fetch_table<'w>(fetch: &mut Self::Fetch<'w>, table_row: usize) -> Self::Item<'w> {
        // SAFETY:
        // - dense iteration: the three pointers are the columns' starts (or, rebased, the
        //   starts of the no-alias loop's rows) and `table_row < len`.
        // - a live `T` and its ticks; exclusive access, one item per row (caller).
        unsafe {
            Mut {
                value: &mut *fetch.column.values.as_ptr().cast::<T>().add(table_row),
                changed: &mut *fetch.column.changed.as_ptr().add(table_row),
                added: fetch.added.as_ptr().add(table_row).read(),
                last_run: fetch.last_run,
                this_run: fetch.this_run,
                stamped: false,
            }
        }
    }

    fn shrink<'wlong: 'wshort, 'wshort>(item: Mut<'wlong, T>) -> Mut<'wshort, T> {
        item
    }

    const NOALIAS_ROWS: bool = true;
    type ColA<'w> = &'w mut [T];
    type ColB<'w> = &'w mut [u32];

    #[inline(always)]
    unsafe fn columns<'w>(
        fetch: &Self::Fetch<'w>,
        start: usize,
        end: usize,
    ) -> (Self::ColA<'w>, Self::ColB<'w>) {
        let len = end - start;
        // SAFETY: the fetch points at a column (or set) of at least `end` live `T`s and their
        // changed ticks; the query has exclusive access to both, and no item of these rows is
        // alive (caller).
        unsafe {
            (
                slice::from_raw_parts_mut(fetch.column.values.as_ptr().cast::<T>().add(start), len),
                slice::from_raw_parts_mut(fetch.column.changed.as_ptr().add(start), len),
            )
        }
    }

    #[inline(always)]
    unsafe fn rebase<'w>(
        fetch: &mut Self::Fetch<'w>,
        a: &mut Self::ColA<'w>,
        b: &mut Self::ColB<'w>,
    ) {
        // SAFETY: `b` starts `start` ticks into the column `fetch.column.changed` starts
        // (`columns`, for this fetch: caller), so both pointers are in one allocation; the
        // added ticks (a column of the same length) move by the same `start`, in bounds.
        unsafe {
            let start = b.as_ptr().offset_from(fetch.column.changed.as_ptr());
            fetch.added = fetch.added.offset(start);
        }
        fetch.column.values = NonNull::from(&mut **a).cast();
        fetch.column.changed = NonNull::from(&mut **b).cast();
    }
}

/// An optional term's fetch: the inner fetch, and whether the current table or archetype has
/// the inner term's components.
pub struct OptionFetch<'w, D: WorldQuery> {
    inner: D::Fetch<'w>,
    matches: bool,
}

impl<D: WorldQuery> Clone for OptionFetch<'_, D> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), matches: self.matches }
    }
}

// SAFETY:
// - `update_access` records the inner term's reads and writes (not its `with`: an optional term
//   requires nothing).
// - the inner fetch is only used for archetypes the inner term matches.
unsafe impl<D: QueryData> WorldQuery for Option<D> {
    const READS_TICKS: bool = D::READS_TICKS;
    type State = D::State;
    type Fetch<'w> = OptionFetch<'w, D>;

    fn init_state(world: &World) -> D::State {
        D::init_state(world)
    }

    fn refresh_state(state: &mut D::State, world: &World) -> bool {
        D::refresh_state(state, world)
    }

    fn update_access(access: &mut FilteredAccess) -> Result<(), QueryError> {
        let mut inner = FilteredAccess::default();
        D::update_access(&mut inner)?;
        for &key in inner.reads.iter() {
            access.add_read(key)?;
        }
        for &key in inner.writes.iter() {
            access.add_write(key)?;
        }
        Ok(())
    }

    fn summarize(state: &D::State, summary: &mut StorageSummary) {
        let mut inner = StorageSummary::default();
        D::summarize(state, &mut inner);
        summary.merge_named(&inner);
    }

    fn matches(_: &D::State, _: &impl Fn(ComponentId) -> bool) -> bool {
        true
    }

    unsafe fn init_fetch<'w>(
        world: &'w World,
        state: &D::State,
        last_run: u32,
        this_run: u32,
    ) -> OptionFetch<'w, D> {
        OptionFetch {
            // SAFETY: forwarded from the caller.
            inner: unsafe { D::init_fetch(world, state, last_run, this_run) },
            matches: false,
        }
    }

    #[inline(always)]
    unsafe fn set_table<'w>(fetch: &mut OptionFetch<'w, D>, state: &D::State, table: &'w Table) {
        fetch.matches = D::matches(state, &|id| table.column_index(id).is_some());
        if fetch.matches {
            // SAFETY: the table matches the inner term (checked above); the rest is the caller's.
            unsafe { D::set_table(&mut fetch.inner, state, table) };
        }
    }

    #[inline(always)]
    unsafe fn set_sparse_set<'w>(
        fetch: &mut OptionFetch<'w, D>,
        state: &D::State,
        id: ComponentId,
        set: &'w ComponentSparseSet,
    ) {
        // The set's entities have `id`, and no other component this query names.
        fetch.matches = D::matches(state, &|c| c == id);
        if fetch.matches {
            // SAFETY: the set's entities match the inner term (checked above); the rest is
            // the caller's.
            unsafe { D::set_sparse_set(&mut fetch.inner, state, id, set) };
        }
    }

    #[inline(always)]
    unsafe fn set_archetype<'w>(
        fetch: &mut OptionFetch<'w, D>,
        state: &D::State,
        archetype: &'w Archetype,
        table: &'w Table,
    ) {
        fetch.matches = D::matches(state, &|id| archetype.contains(id));
        if fetch.matches {
            // SAFETY: the archetype matches the inner term (checked above).
            unsafe { D::set_archetype(&mut fetch.inner, state, archetype, table) };
        }
    }
}

// SAFETY: as the inner term's: `Some` only where the inner term matched.
unsafe impl<D: QueryData> QueryData for Option<D> {
    type Item<'w> = Option<D::Item<'w>>;
    type ReadOnly = Option<D::ReadOnly>;

    #[inline(always)]
    unsafe fn fetch<'w>(
        fetch: &mut Self::Fetch<'w>,
        entity: Entity,
        table_row: usize,
    ) -> Self::Item<'w> {
        // SAFETY: the current archetype matches the inner term; the rest is the caller's.
        fetch.matches.then(|| unsafe { D::fetch(&mut fetch.inner, entity, table_row) })
    }

    #[inline(always)]
    unsafe fn fetch_table<'w>(fetch: &mut Self::Fetch<'w>, table_row: usize) -> Self::Item<'w> {
        // SAFETY: the current table matches the inner term; the rest is the caller's.
        fetch.matches.then(|| unsafe { D::fetch_table(&mut fetch.inner, table_row) })
    }

    fn shrink<'wlong: 'wshort, 'wshort>(item: Self::Item<'wlong>) -> Self::Item<'wshort> {
        item.map(D::shrink)
    }

    // Whether the inner term is there changes per table: the plain loop.
    no_column_arguments!();
}

// SAFETY: the inner term only reads.
unsafe impl<D: ReadOnlyQueryData> ReadOnlyQueryData for Option<D> {}

/// The entity's id.
#[derive(Clone)]
pub struct EntityFetch {
    entities: NonNull<Entity>,
}

// SAFETY: reads no component; matches every archetype.
unsafe impl WorldQuery for Entity {
    const READS_TICKS: bool = false;
    type State = ();
    type Fetch<'w> = EntityFetch;

    fn init_state(_: &World) {}

    fn refresh_state(_: &mut (), _: &World) -> bool {
        false
    }

    fn update_access(_: &mut FilteredAccess) -> Result<(), QueryError> {
        Ok(())
    }

    fn summarize(_: &(), _: &mut StorageSummary) {}

    fn matches(_: &(), _: &impl Fn(ComponentId) -> bool) -> bool {
        true
    }

    unsafe fn init_fetch(_: &World, _: &(), _: u32, _: u32) -> EntityFetch {
        EntityFetch { entities: NonNull::dangling() }
    }

    #[inline(always)]
    unsafe fn set_table(fetch: &mut EntityFetch, _: &(), table: &Table) {
        fetch.entities = NonNull::from(table.entities()).cast();
    }

    #[inline(always)]
    unsafe fn set_sparse_set(
        fetch: &mut EntityFetch,
        _: &(),
        _: ComponentId,
        set: &ComponentSparseSet,
    ) {
        fetch.entities = NonNull::from(set.entities()).cast();
    }

    #[inline(always)]
    unsafe fn set_archetype<'w>(_: &mut EntityFetch, _: &(), _: &'w Archetype, _: &'w Table) {}
}

// SAFETY: yields copies.
unsafe impl QueryData for Entity {
    type Item<'w> = Entity;
    type ReadOnly = Self;

    #[inline(always)]
    unsafe fn fetch<'w>(_: &mut Self::Fetch<'w>, entity: Entity, _: usize) -> Self::Item<'w> {
        entity
    }

    #[inline(always)]
    unsafe fn fetch_table<'w>(fetch: &mut Self::Fetch<'w>, table_row: usize) -> Self::Item<'w> {
        // SAFETY: dense iteration: the table's (or the sparse set's) entity column,
        // `table_row < len`.
        unsafe { *fetch.entities.as_ptr().add(table_row) }
    }

    fn shrink<'wlong: 'wshort, 'wshort>(item: Entity) -> Entity {
        item
    }

    const NOALIAS_ROWS: bool = true;
    type ColA<'w> = &'w [Entity];
    type ColB<'w> = ();

    #[inline(always)]
    unsafe fn columns<'w>(
        fetch: &Self::Fetch<'w>,
        start: usize,
        end: usize,
    ) -> (Self::ColA<'w>, Self::ColB<'w>) {
        // SAFETY: the fetch points at an entity column of at least `end` ids, which no one
        // writes while the query runs (caller).
        (unsafe { slice::from_raw_parts(fetch.entities.as_ptr().add(start), end - start) }, ())
    }

    #[inline(always)]
    unsafe fn rebase<'w>(fetch: &mut Self::Fetch<'w>, a: &mut Self::ColA<'w>, _: &mut ()) {
        fetch.entities = NonNull::from(*a).cast();
    }
}

// SAFETY: reads nothing.
unsafe impl ReadOnlyQueryData for Entity {}
