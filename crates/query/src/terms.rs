//! Two more [`QueryData`] terms: [`Ref<T>`], a shared borrow that knows whether the value was
//! added or changed since the query last ran, and [`Has<T>`], whether the entity has `T`
//! (reading nothing).

use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

use folio_archetype::{
    Archetype, Component, ComponentId, ComponentSparseSet, Entity, Table, World, is_newer,
};

use crate::access::{FilteredAccess, QueryError, TypeKey};
use crate::fetch::{
    ComponentTerm, QueryData, ReadOnlyQueryData, StorageSummary, WorldQuery, no_column_arguments,
    required_component_term,
};

/// A shared borrow of a component, with the ticks it was added and last changed at: as `&T`,
/// plus [`Ref::is_added`] and [`Ref::is_changed`] per item, where the `Added<T>` and
/// `Changed<T>` filters would drop the others.
pub struct Ref<'w, T> {
    value: &'w T,
    added: u32,
    changed: u32,
    last_run: u32,
    this_run: u32,
}

impl<'w, T> Ref<'w, T> {
    /// Whether the value was added since the query last ran.
    #[inline]
    pub fn is_added(&self) -> bool {
        is_newer(self.added, self.last_run, self.this_run)
    }

    /// Whether the value was added or changed since the query last ran.
    #[inline]
    pub fn is_changed(&self) -> bool {
        is_newer(self.changed, self.last_run, self.this_run)
    }

    /// The tick the value was last changed at.
    #[inline]
    pub fn last_changed(&self) -> u32 {
        self.changed
    }

    /// The borrow, for the world's lifetime.
    #[inline]
    pub fn into_inner(self) -> &'w T {
        self.value
    }
}

impl<T> Deref for Ref<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> Clone for Ref<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Ref<'_, T> {}

impl<T: std::fmt::Debug> std::fmt::Debug for Ref<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Ref").field(&self.value).finish()
    }
}

/// Where one component's values and both tick columns are, for [`Ref`].
#[derive(Clone, Copy)]
pub struct RefFetch<'w> {
    /// The first value, added and changed tick: of the table column (table storage, after
    /// `set_table`), or of the sparse set (sparse-set storage, from `init_fetch` on).
    values: NonNull<u8>,
    added: NonNull<u32>,
    changed: NonNull<u32>,
    /// The component's sparse set (sparse-set storage, row-by-entity fetching).
    sparse: Option<&'w ComponentSparseSet>,
    last_run: u32,
    this_run: u32,
}

impl<'w> RefFetch<'w> {
    /// Points at the set's (or table column's) first value and ticks.
    #[inline(always)]
    fn point(&mut self, values: NonNull<u8>, added: &'w [u32], changed: NonNull<u32>) {
        self.values = values;
        self.added = NonNull::from(added).cast();
        self.changed = changed;
    }

    /// The item at row (or dense index) `row` of what the fetch points at.
    ///
    /// # Safety
    /// - The fetch points at a table column or sparse set of `T`s with more than `row` items,
    ///   which the query may read for `'w`.
    #[inline(always)]
    unsafe fn item<T>(&self, row: usize) -> Ref<'w, T> {
        // SAFETY: `row` is in bounds of the value and both tick columns (caller); no one
        // writes `T` or its ticks while the query reads them (its access).
        unsafe {
            Ref {
                value: &*self.values.as_ptr().cast::<T>().add(row),
                added: self.added.as_ptr().add(row).read(),
                changed: self.changed.as_ptr().add(row).read(),
                last_run: self.last_run,
                this_run: self.this_run,
            }
        }
    }
}

// SAFETY:
// - `update_access` records a read of `T` (its ticks are written only with `T`) and requires
//   it (`with`).
// - `matches` requires `T`, the only component read; `summarize` reports it.
unsafe impl<T: Component> WorldQuery for Ref<'_, T> {
    type State = ComponentTerm;
    type Fetch<'w> = RefFetch<'w>;

    required_component_term!(T, add_read);

    unsafe fn init_fetch<'w>(
        world: &'w World,
        state: &ComponentTerm,
        last_run: u32,
        this_run: u32,
    ) -> RefFetch<'w> {
        let sparse = state.sparse_set(world);
        let mut fetch = RefFetch {
            values: NonNull::dangling(),
            added: NonNull::dangling(),
            changed: NonNull::dangling(),
            sparse,
            last_run,
            this_run,
        };
        // A sparse-set component stays where it is for `'w`: point at its set once, and
        // `fetch` only looks up each entity's dense index.
        if let Some(set) = sparse {
            fetch.point(set.column().as_ptr(), set.added_ticks(), set.changed_ticks_ptr());
        }
        fetch
    }

    #[inline(always)]
    unsafe fn set_table<'w>(fetch: &mut RefFetch<'w>, state: &ComponentTerm, table: &'w Table) {
        if fetch.sparse.is_some() {
            return;
        }
        if let Some(column) = state.id().and_then(|id| table.column(id)) {
            fetch.point(column.data().as_ptr(), column.added_ticks(), column.changed_ticks_ptr());
        }
    }

    #[inline(always)]
    unsafe fn set_sparse_set<'w>(
        fetch: &mut RefFetch<'w>,
        _: &ComponentTerm,
        _: ComponentId,
        set: &'w ComponentSparseSet,
    ) {
        fetch.point(set.column().as_ptr(), set.added_ticks(), set.changed_ticks_ptr());
    }

    #[inline(always)]
    unsafe fn set_archetype<'w>(
        fetch: &mut RefFetch<'w>,
        state: &ComponentTerm,
        _: &'w Archetype,
        table: &'w Table,
    ) {
        // SAFETY: forwarded from the caller (a no-op for sparse-set storage).
        unsafe { Self::set_table(fetch, state, table) };
    }
}

// SAFETY: items are shared references and copied ticks, which may alias; they borrow for `'w`.
unsafe impl<'a, T: Component> QueryData for Ref<'a, T> {
    type Item<'w> = Ref<'w, T>;
    type ReadOnly = Self;

    #[inline(always)]
    unsafe fn fetch<'w>(
        fetch: &mut Self::Fetch<'w>,
        entity: Entity,
        table_row: usize,
    ) -> Self::Item<'w> {
        let Some(set) = fetch.sparse else {
            // SAFETY: `set_archetype` pointed the fetch at the entity's table column, where it
            // lives at `table_row < len` (caller).
            return unsafe { fetch.item(table_row) };
        };
        let dense = set.dense_index(entity);
        debug_assert!(dense.is_some(), "{entity} matched but is not in the sparse set");
        // SAFETY: the archetype matched, so the entity has the component (caller).
        let dense = unsafe { dense.unwrap_unchecked() };
        // SAFETY: the fetch points at the set (`init_fetch`; `set_table` leaves it there), and
        // `dense < len` of its value and tick columns.
        unsafe { fetch.item(dense) }
    }

    #[inline(always)]
    unsafe fn fetch_table<'w>(fetch: &mut Self::Fetch<'w>, table_row: usize) -> Self::Item<'w> {
        // SAFETY: dense iteration: the fetch points at the table column (or set) and
        // `table_row < len` (caller).
        unsafe { fetch.item(table_row) }
    }

    fn shrink<'wlong: 'wshort, 'wshort>(item: Ref<'wlong, T>) -> Ref<'wshort, T> {
        item
    }

    // Three pointers a row: the plain loop (no column arguments).
    no_column_arguments!();
}

// SAFETY: `update_access` records only a read.
unsafe impl<T: Component> ReadOnlyQueryData for Ref<'_, T> {}

/// Whether the entity has component `T`: `true` or `false` per item, matching every entity
/// (unlike `With<T>`) and reading nothing, so it conflicts with no other access.
pub struct Has<T>(PhantomData<fn() -> T>);

/// Whether the current table or archetype has the component.
#[derive(Clone, Copy)]
pub struct HasFetch {
    has: bool,
}

// SAFETY:
// - reads no component's data (whether an archetype has one is the archetype's, which no
//   query writes), so `update_access` records nothing;
// - matches every archetype; `summarize` reports `T` as named, not required: a sparse-set
//   `T` then keeps the query off the `Tables` path, where archetypes that differ in `T` share
//   a table.
unsafe impl<T: Component> WorldQuery for Has<T> {
    const READS_TICKS: bool = false;
    type State = ComponentTerm;
    type Fetch<'w> = HasFetch;

    fn init_state(world: &World) -> ComponentTerm {
        ComponentTerm::new::<T>(world)
    }

    fn refresh_state(state: &mut ComponentTerm, world: &World) -> bool {
        state.refresh(world)
    }

    fn update_access(_: &mut FilteredAccess) -> Result<(), QueryError> {
        Ok(())
    }

    fn summarize(state: &ComponentTerm, summary: &mut StorageSummary) {
        state.summarize(summary, false);
    }

    fn matches(_: &ComponentTerm, _: &impl Fn(ComponentId) -> bool) -> bool {
        true
    }

    unsafe fn init_fetch(_: &World, _: &ComponentTerm, _: u32, _: u32) -> HasFetch {
        HasFetch { has: false }
    }

    #[inline(always)]
    unsafe fn set_table(fetch: &mut HasFetch, state: &ComponentTerm, table: &Table) {
        // The `Tables` path only runs when `T` is table-stored (or unregistered).
        fetch.has = state.id().is_some_and(|id| table.column_index(id).is_some());
    }

    #[inline(always)]
    unsafe fn set_sparse_set(
        fetch: &mut HasFetch,
        state: &ComponentTerm,
        id: ComponentId,
        _: &ComponentSparseSet,
    ) {
        // The set's entities have `id` and no other component this query names.
        fetch.has = state.id() == Some(id);
    }

    #[inline(always)]
    unsafe fn set_archetype<'w>(
        fetch: &mut HasFetch,
        state: &ComponentTerm,
        archetype: &'w Archetype,
        _: &'w Table,
    ) {
        fetch.has = state.is_in(&|id| archetype.contains(id));
    }
}

// SAFETY: yields copies of a flag.
unsafe impl<T: Component> QueryData for Has<T> {
    type Item<'w> = bool;
    type ReadOnly = Self;

    #[inline(always)]
    unsafe fn fetch<'w>(fetch: &mut Self::Fetch<'w>, _: Entity, _: usize) -> Self::Item<'w> {
        fetch.has
    }

    #[inline(always)]
    unsafe fn fetch_table<'w>(fetch: &mut Self::Fetch<'w>, _: usize) -> Self::Item<'w> {
        fetch.has
    }

    fn shrink<'wlong: 'wshort, 'wshort>(item: bool) -> bool {
        item
    }

    // No column: nothing for the no-alias loop to take, and nothing to rebase.
    const NOALIAS_ROWS: bool = true;
    type ColA<'w> = ();
    type ColB<'w> = ();

    #[inline(always)]
    unsafe fn columns<'w>(
        _: &Self::Fetch<'w>,
        _: usize,
        _: usize,
    ) -> (Self::ColA<'w>, Self::ColB<'w>) {
        ((), ())
    }

    #[inline(always)]
    unsafe fn rebase<'w>(_: &mut Self::Fetch<'w>, _: &mut Self::ColA<'w>, _: &mut Self::ColB<'w>) {}
}

// SAFETY: reads nothing.
unsafe impl<T: Component> ReadOnlyQueryData for Has<T> {}
