//! The [`QueryFilter`] terms: [`With`], [`Without`], [`Allow`], [`Added`], [`Changed`], [`Or`],
//! and tuples (all must pass).

use std::marker::PhantomData;
use std::ptr::NonNull;

use folio_archetype::{
    Archetype, Component, ComponentId, ComponentSparseSet, Entity, Table, World, is_newer,
};

use crate::access::{FilteredAccess, QueryError, TypeKey};
use crate::data::all_tuples;
use crate::fetch::{
    ArchetypeFilter, ComponentTerm, QueryFilter, StorageSummary, WorldQuery,
    required_component_term,
};

/// Matches entities that have a `T` (without borrowing it).
pub struct With<T>(PhantomData<fn() -> T>);

/// Matches entities that have no `T`.
pub struct Without<T>(PhantomData<fn() -> T>);

// SAFETY: reads nothing; `matches` requires `T`.
unsafe impl<T: Component> WorldQuery for With<T> {
    const READS_TICKS: bool = false;
    type State = ComponentTerm;
    type Fetch<'w> = ();

    fn init_state(world: &World) -> ComponentTerm {
        ComponentTerm::new::<T>(world)
    }

    fn refresh_state(state: &mut ComponentTerm, world: &World) -> bool {
        state.refresh(world)
    }

    fn update_access(access: &mut FilteredAccess) -> Result<(), QueryError> {
        access.with.insert(TypeKey::of::<T>());
        Ok(())
    }

    fn summarize(state: &ComponentTerm, summary: &mut StorageSummary) {
        state.summarize(summary, true);
    }

    fn matches(state: &ComponentTerm, contains: &impl Fn(ComponentId) -> bool) -> bool {
        state.is_in(contains)
    }

    unsafe fn init_fetch(_: &World, _: &ComponentTerm, _: u32, _: u32) {}

    #[inline(always)]
    unsafe fn set_table(_: &mut (), _: &ComponentTerm, _: &Table) {}

    #[inline(always)]
    unsafe fn set_sparse_set(
        _: &mut (),
        _: &ComponentTerm,
        _: ComponentId,
        _: &ComponentSparseSet,
    ) {
    }

    #[inline(always)]
    unsafe fn set_archetype<'w>(_: &mut (), _: &ComponentTerm, _: &'w Archetype, _: &'w Table) {}
}

// SAFETY: reads nothing.
unsafe impl<T: Component> QueryFilter for With<T> {
    const IS_ARCHETYPAL: bool = true;

    #[inline(always)]
    unsafe fn filter_fetch(_: &mut (), _: Entity, _: usize) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn filter_fetch_table(_: &mut (), _: usize) -> bool {
        true
    }
}

impl<T: Component> ArchetypeFilter for With<T> {}

// SAFETY: reads nothing; an entity without `T` is never fetched for `T`.
unsafe impl<T: Component> WorldQuery for Without<T> {
    const READS_TICKS: bool = false;
    type State = ComponentTerm;
    type Fetch<'w> = ();

    fn init_state(world: &World) -> ComponentTerm {
        ComponentTerm::new::<T>(world)
    }

    fn refresh_state(state: &mut ComponentTerm, world: &World) -> bool {
        state.refresh(world)
    }

    fn update_access(access: &mut FilteredAccess) -> Result<(), QueryError> {
        access.without.insert(TypeKey::of::<T>());
        Ok(())
    }

    fn summarize(state: &ComponentTerm, summary: &mut StorageSummary) {
        state.summarize(summary, false);
    }

    fn matches(state: &ComponentTerm, contains: &impl Fn(ComponentId) -> bool) -> bool {
        !state.is_in(contains)
    }

    unsafe fn init_fetch(_: &World, _: &ComponentTerm, _: u32, _: u32) {}

    #[inline(always)]
    unsafe fn set_table(_: &mut (), _: &ComponentTerm, _: &Table) {}

    #[inline(always)]
    unsafe fn set_sparse_set(
        _: &mut (),
        _: &ComponentTerm,
        _: ComponentId,
        _: &ComponentSparseSet,
    ) {
    }

    #[inline(always)]
    unsafe fn set_archetype<'w>(_: &mut (), _: &ComponentTerm, _: &'w Archetype, _: &'w Table) {}
}

// SAFETY: reads nothing.
unsafe impl<T: Component> QueryFilter for Without<T> {
    const IS_ARCHETYPAL: bool = true;

    #[inline(always)]
    unsafe fn filter_fetch(_: &mut (), _: Entity, _: usize) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn filter_fetch_table(_: &mut (), _: usize) -> bool {
        true
    }
}

impl<T: Component> ArchetypeFilter for Without<T> {}

/// Matches every entity, and lets the query see the entities that have the disabling marker
/// `T` ([`Disabled`](folio_archetype::Disabled), or one registered with
/// `World::register_disabling_component`), which queries skip unless they name it. Reads
/// nothing; `With<Disabled>` instead sees only the disabled ones.
///
/// ```
/// use folio_query::{Allow, Disabled, World, WorldQueryExt};
///
/// struct Health(u32);
///
/// let mut world = World::new();
/// world.spawn((Health(10),));
/// world.spawn((Health(20), Disabled));
/// assert_eq!(world.query::<&Health>().iter(&world).count(), 1);
/// assert_eq!(world.query_filtered::<&Health, Allow<Disabled>>().iter(&world).count(), 2);
/// ```
pub struct Allow<T>(PhantomData<fn() -> T>);

// SAFETY: reads nothing; matches every archetype (the state names `T` only so that a query
// with it sees the archetypes that hold the marker).
unsafe impl<T: Component> WorldQuery for Allow<T> {
    const READS_TICKS: bool = false;
    type State = ComponentTerm;
    type Fetch<'w> = ();

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

    unsafe fn init_fetch(_: &World, _: &ComponentTerm, _: u32, _: u32) {}

    #[inline(always)]
    unsafe fn set_table(_: &mut (), _: &ComponentTerm, _: &Table) {}

    #[inline(always)]
    unsafe fn set_sparse_set(
        _: &mut (),
        _: &ComponentTerm,
        _: ComponentId,
        _: &ComponentSparseSet,
    ) {
    }

    #[inline(always)]
    unsafe fn set_archetype<'w>(_: &mut (), _: &ComponentTerm, _: &'w Archetype, _: &'w Table) {}
}

// SAFETY: reads nothing.
unsafe impl<T: Component> QueryFilter for Allow<T> {
    const IS_ARCHETYPAL: bool = true;

    #[inline(always)]
    unsafe fn filter_fetch(_: &mut (), _: Entity, _: usize) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn filter_fetch_table(_: &mut (), _: usize) -> bool {
        true
    }
}

impl<T: Component> ArchetypeFilter for Allow<T> {}

/// Where one component's ticks are for the current table or archetype.
pub struct TickFetch<'w> {
    /// The table's added or changed tick column (table storage), or dangling.
    ticks: NonNull<u32>,
    /// The component's sparse set (sparse-set storage).
    sparse: Option<&'w ComponentSparseSet>,
    last_run: u32,
    this_run: u32,
}

impl Clone for TickFetch<'_> {
    fn clone(&self) -> Self {
        Self {
            ticks: self.ticks,
            sparse: self.sparse,
            last_run: self.last_run,
            this_run: self.this_run,
        }
    }
}

/// Which tick a tick filter compares.
trait TickKind {
    const ADDED: bool;
}

macro_rules! tick_filter {
    ($(#[$doc:meta])* $name:ident, $added:expr) => {
        $(#[$doc])*
        pub struct $name<T>(PhantomData<fn() -> T>);

        impl<T> TickKind for $name<T> {
            const ADDED: bool = $added;
        }

        // SAFETY:
        // - `update_access` records a read of `T` (its ticks) and requires it.
        // - `matches` requires `T`.
        unsafe impl<T: Component> WorldQuery for $name<T> {
            type State = ComponentTerm;
            type Fetch<'w> = TickFetch<'w>;

            required_component_term!(T, add_read);

            unsafe fn init_fetch<'w>(
                world: &'w World,
                state: &ComponentTerm,
                last_run: u32,
                this_run: u32,
            ) -> TickFetch<'w> {
                let sparse = state.sparse_set(world);
                TickFetch { ticks: NonNull::dangling(), sparse, last_run, this_run }
            }

            #[inline(always)]
            unsafe fn set_table<'w>(fetch: &mut TickFetch<'w>, state: &ComponentTerm, table: &'w Table) {
                if fetch.sparse.is_some() {
                    return;
                }
                if let Some(column) = state.id().and_then(|id| table.column(id)) {
                    fetch.ticks = if Self::ADDED {
                        NonNull::from(column.added_ticks()).cast()
                    } else {
                        column.changed_ticks_ptr()
                    };
                }
            }

            #[inline(always)]
            unsafe fn set_sparse_set<'w>(
                fetch: &mut TickFetch<'w>,
                _: &ComponentTerm,
                _: ComponentId,
                set: &'w ComponentSparseSet,
            ) {
                fetch.ticks = if Self::ADDED {
                    NonNull::from(set.added_ticks()).cast()
                } else {
                    set.changed_ticks_ptr()
                };
            }

            #[inline(always)]
            unsafe fn set_archetype<'w>(
                fetch: &mut TickFetch<'w>,
                state: &ComponentTerm,
                _: &'w Archetype,
                table: &'w Table,
            ) {
                // SAFETY: forwarded from the caller.
                unsafe { Self::set_table(fetch, state, table) };
            }
        }

        // SAFETY: reads the ticks of `T` only, through raw pointers (no slice is held while a
        // `Mut` of the same query writes a changed tick).
        unsafe impl<T: Component> QueryFilter for $name<T> {
            const IS_ARCHETYPAL: bool = false;

            #[inline(always)]
            unsafe fn filter_fetch(fetch: &mut TickFetch<'_>, entity: Entity, table_row: usize) -> bool {
                let tick = match fetch.sparse {
                    // SAFETY: `table_row < len` of the current table's tick column (caller).
                    None => unsafe { fetch.ticks.as_ptr().add(table_row).read() },
                    Some(set) => {
                        let dense = set.dense_index(entity);
                        debug_assert!(dense.is_some());
                        // SAFETY: the archetype matched, so the entity is in the set.
                        let dense = unsafe { dense.unwrap_unchecked() };
                        if Self::ADDED {
                            set.added_ticks()[dense]
                        } else {
                            // SAFETY: `dense < len` of the tick column.
                            unsafe { set.changed_ticks_ptr().as_ptr().add(dense).read() }
                        }
                    }
                };
                is_newer(tick, fetch.last_run, fetch.this_run)
            }

            #[inline(always)]
            unsafe fn filter_fetch_table(fetch: &mut TickFetch<'_>, table_row: usize) -> bool {
                // SAFETY: dense iteration: the table's tick column, `table_row < len`.
                let tick = unsafe { fetch.ticks.as_ptr().add(table_row).read() };
                is_newer(tick, fetch.last_run, fetch.this_run)
            }
        }
    };
}

tick_filter!(
    /// Matches entities whose `T` was added since the query last ran.
    Added,
    true
);
tick_filter!(
    /// Matches entities whose `T` was added or written through a `Mut` (or `get_mut`, or
    /// replaced by `insert`) since the query last ran.
    Changed,
    false
);

/// Matches entities that pass any of the filters in the tuple `F`.
pub struct Or<F>(PhantomData<fn() -> F>);

macro_rules! tuple_filter {
    ($(($name:ident, $state:ident, $fetch:ident)),*) => {
        // SAFETY: all must pass; each element's own contract covers its reads.
        #[allow(non_snake_case, unused_variables, unused_unsafe, clippy::unused_unit)]
        unsafe impl<$($name: QueryFilter),*> QueryFilter for ($($name,)*) {
            const IS_ARCHETYPAL: bool = true $(&& $name::IS_ARCHETYPAL)*;

            #[inline(always)]
            unsafe fn filter_fetch(fetch: &mut Self::Fetch<'_>, entity: Entity, table_row: usize) -> bool {
                let ($($fetch,)*) = fetch;
                // SAFETY: forwarded from the caller.
                true $(&& unsafe { $name::filter_fetch($fetch, entity, table_row) })*
            }

            #[inline(always)]
            unsafe fn filter_fetch_table(fetch: &mut Self::Fetch<'_>, table_row: usize) -> bool {
                let ($($fetch,)*) = fetch;
                // SAFETY: forwarded from the caller.
                true $(&& unsafe { $name::filter_fetch_table($fetch, table_row) })*
            }
        }

        impl<$($name: ArchetypeFilter),*> ArchetypeFilter for ($($name,)*) {}
    };
}

tuple_filter!();
all_tuples!(tuple_filter;
    (F0, s0, f0), (F1, s1, f1), (F2, s2, f2), (F3, s3, f3), (F4, s4, f4), (F5, s5, f5),
    (F6, s6, f6), (F7, s7, f7), (F8, s8, f8), (F9, s9, f9), (F10, s10, f10), (F11, s11, f11),
    (F12, s12, f12), (F13, s13, f13), (F14, s14, f14), (F15, s15, f15)
);

/// One alternative of an [`Or`]: its fetch, and whether the current table or archetype matches
/// it (an alternative that does not match is never asked about a row).
pub struct OrFetch<'w, F: WorldQuery> {
    fetch: F::Fetch<'w>,
    matches: bool,
}

impl<F: WorldQuery> Clone for OrFetch<'_, F> {
    fn clone(&self) -> Self {
        Self { fetch: self.fetch.clone(), matches: self.matches }
    }
}

macro_rules! or_filter {
    ($(($name:ident, $state:ident, $fetch:ident)),+) => {
        // SAFETY:
        // - records every alternative's reads (no `with`/`without`: no single one is required,
        //   which is conservative for conflict checks).
        // - an alternative's fetch is used only for archetypes it matches.
        #[allow(non_snake_case)]
        unsafe impl<$($name: QueryFilter),+> WorldQuery for Or<($($name,)+)> {
            type State = ($($name::State,)+);
            type Fetch<'w> = ($(OrFetch<'w, $name>,)+);
            const READS_TICKS: bool = false $(|| $name::READS_TICKS)+;

            fn init_state(world: &World) -> Self::State {
                ($($name::init_state(world),)+)
            }

            fn refresh_state(state: &mut Self::State, world: &World) -> bool {
                let ($($state,)+) = state;
                false $(| $name::refresh_state($state, world))+
            }

            fn update_access(access: &mut FilteredAccess) -> Result<(), QueryError> {
                $(
                    let mut inner = FilteredAccess::default();
                    $name::update_access(&mut inner)?;
                    for &key in inner.reads.iter() {
                        access.add_read(key)?;
                    }
                )+
                Ok(())
            }

            fn summarize(state: &Self::State, summary: &mut StorageSummary) {
                let ($($state,)+) = state;
                $(
                    let mut inner = StorageSummary::default();
                    $name::summarize($state, &mut inner);
                    summary.merge_named(&inner);
                )+
            }

            fn matches(state: &Self::State, contains: &impl Fn(ComponentId) -> bool) -> bool {
                let ($($state,)+) = state;
                false $(|| $name::matches($state, contains))+
            }

            unsafe fn init_fetch<'w>(
                world: &'w World,
                state: &Self::State,
                last_run: u32,
                this_run: u32,
            ) -> Self::Fetch<'w> {
                let ($($state,)+) = state;
                ($(OrFetch {
                    // SAFETY: forwarded from the caller.
                    fetch: unsafe { $name::init_fetch(world, $state, last_run, this_run) },
                    matches: false,
                },)+)
            }

            #[inline(always)]
            unsafe fn set_table<'w>(fetch: &mut Self::Fetch<'w>, state: &Self::State, table: &'w Table) {
                let ($($state,)+) = state;
                let ($($fetch,)+) = fetch;
                $(
                    $fetch.matches = $name::matches($state, &|id| table.column_index(id).is_some());
                    if $fetch.matches {
                        // SAFETY: the table matches this alternative (checked above).
                        unsafe { $name::set_table(&mut $fetch.fetch, $state, table) };
                    }
                )+
            }

            #[inline(always)]
            unsafe fn set_sparse_set<'w>(
                fetch: &mut Self::Fetch<'w>,
                state: &Self::State,
                id: ComponentId,
                set: &'w ComponentSparseSet,
            ) {
                let ($($state,)+) = state;
                let ($($fetch,)+) = fetch;
                $(
                    $fetch.matches = $name::matches($state, &|c| c == id);
                    if $fetch.matches {
                        // SAFETY: the set's entities match this alternative (checked above).
                        unsafe { $name::set_sparse_set(&mut $fetch.fetch, $state, id, set) };
                    }
                )+
            }

            #[inline(always)]
            unsafe fn set_archetype<'w>(
                fetch: &mut Self::Fetch<'w>,
                state: &Self::State,
                archetype: &'w Archetype,
                table: &'w Table,
            ) {
                let ($($state,)+) = state;
                let ($($fetch,)+) = fetch;
                $(
                    $fetch.matches = $name::matches($state, &|id| archetype.contains(id));
                    if $fetch.matches {
                        // SAFETY: the archetype matches this alternative (checked above).
                        unsafe { $name::set_archetype(&mut $fetch.fetch, $state, archetype, table) };
                    }
                )+
            }
        }

        // SAFETY: each alternative's own contract covers its reads.
        #[allow(non_snake_case)]
        unsafe impl<$($name: QueryFilter),+> QueryFilter for Or<($($name,)+)> {
            const IS_ARCHETYPAL: bool = true $(&& $name::IS_ARCHETYPAL)+;

            #[inline(always)]
            unsafe fn filter_fetch(fetch: &mut Self::Fetch<'_>, entity: Entity, table_row: usize) -> bool {
                let ($($fetch,)+) = fetch;
                // SAFETY: forwarded from the caller, for alternatives that match.
                false $(|| ($fetch.matches && unsafe { $name::filter_fetch(&mut $fetch.fetch, entity, table_row) }))+
            }

            #[inline(always)]
            unsafe fn filter_fetch_table(fetch: &mut Self::Fetch<'_>, table_row: usize) -> bool {
                let ($($fetch,)+) = fetch;
                // SAFETY: forwarded from the caller, for alternatives that match.
                false $(|| ($fetch.matches && unsafe { $name::filter_fetch_table(&mut $fetch.fetch, table_row) }))+
            }
        }

        impl<$($name: ArchetypeFilter),+> ArchetypeFilter for Or<($($name,)+)> {}
    };
}

all_tuples!(or_filter;
    (F0, s0, f0), (F1, s1, f1), (F2, s2, f2), (F3, s3, f3), (F4, s4, f4), (F5, s5, f5),
    (F6, s6, f6), (F7, s7, f7), (F8, s8, f8), (F9, s9, f9), (F10, s10, f10), (F11, s11, f11),
    (F12, s12, f12), (F13, s13, f13), (F14, s14, f14), (F15, s15, f15)
);
