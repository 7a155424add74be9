//! The tuple terms: a tuple of up to 16 [`QueryData`] terms is one, yielding the tuple of their
//! items; also [`all_tuples`], which the filter tuples are made with too.

use folio_archetype::{Archetype, ComponentId, ComponentSparseSet, Entity, Table, World};

use crate::access::{FilteredAccess, QueryError};
use crate::fetch::{QueryData, ReadOnlyQueryData, StorageSummary, WorldQuery};

macro_rules! tuple_query {
    ($(($name:ident, $state:ident, $fetch:ident, $a:ident, $b:ident)),*) => {
        // SAFETY: every method forwards to each element; access is the union, checked for
        // conflicts as each element adds its own.
        #[allow(non_snake_case, unused_variables, unused_unsafe, clippy::unused_unit)]
        unsafe impl<$($name: WorldQuery),*> WorldQuery for ($($name,)*) {
            type State = ($($name::State,)*);
            type Fetch<'w> = ($($name::Fetch<'w>,)*);
            const READS_TICKS: bool = false $(|| $name::READS_TICKS)*;

            fn init_state(world: &World) -> Self::State {
                ($($name::init_state(world),)*)
            }

            fn refresh_state(state: &mut Self::State, world: &World) -> bool {
                let ($($state,)*) = state;
                false $(| $name::refresh_state($state, world))*
            }

            fn update_access(access: &mut FilteredAccess) -> Result<(), QueryError> {
                $($name::update_access(access)?;)*
                Ok(())
            }

            fn summarize(state: &Self::State, summary: &mut StorageSummary) {
                let ($($state,)*) = state;
                $($name::summarize($state, summary);)*
            }

            fn matches(state: &Self::State, contains: &impl Fn(ComponentId) -> bool) -> bool {
                let ($($state,)*) = state;
                true $(&& $name::matches($state, contains))*
            }

            unsafe fn init_fetch<'w>(
                world: &'w World,
                state: &Self::State,
                last_run: u32,
                this_run: u32,
            ) -> Self::Fetch<'w> {
                let ($($state,)*) = state;
                // SAFETY: forwarded from the caller.
                unsafe { ($($name::init_fetch(world, $state, last_run, this_run),)*) }
            }

            #[inline(always)]
            unsafe fn set_table<'w>(fetch: &mut Self::Fetch<'w>, state: &Self::State, table: &'w Table) {
                let ($($state,)*) = state;
                let ($($fetch,)*) = fetch;
                // SAFETY: forwarded from the caller (a table matching the tuple matches each).
                unsafe { $($name::set_table($fetch, $state, table);)* }
            }

            #[inline(always)]
            unsafe fn set_sparse_set<'w>(
                fetch: &mut Self::Fetch<'w>,
                state: &Self::State,
                id: ComponentId,
                set: &'w ComponentSparseSet,
            ) {
                let ($($state,)*) = state;
                let ($($fetch,)*) = fetch;
                // SAFETY: forwarded from the caller.
                unsafe { $($name::set_sparse_set($fetch, $state, id, set);)* }
            }

            #[inline(always)]
            unsafe fn set_archetype<'w>(
                fetch: &mut Self::Fetch<'w>,
                state: &Self::State,
                archetype: &'w Archetype,
                table: &'w Table,
            ) {
                let ($($state,)*) = state;
                let ($($fetch,)*) = fetch;
                // SAFETY: forwarded from the caller.
                unsafe { $($name::set_archetype($fetch, $state, archetype, table);)* }
            }
        }

        // SAFETY: each element yields disjoint items (their access was checked for conflicts).
        #[allow(non_snake_case, unused_variables, unused_unsafe, clippy::unused_unit)]
        unsafe impl<$($name: QueryData),*> QueryData for ($($name,)*) {
            type Item<'w> = ($($name::Item<'w>,)*);
            type ReadOnly = ($($name::ReadOnly,)*);

            #[inline(always)]
            unsafe fn fetch<'w>(fetch: &mut Self::Fetch<'w>, entity: Entity, table_row: usize) -> Self::Item<'w> {
                let ($($fetch,)*) = fetch;
                // SAFETY: forwarded from the caller.
                unsafe { ($($name::fetch($fetch, entity, table_row),)*) }
            }

            #[inline(always)]
            unsafe fn fetch_table<'w>(fetch: &mut Self::Fetch<'w>, table_row: usize) -> Self::Item<'w> {
                let ($($fetch,)*) = fetch;
                // SAFETY: forwarded from the caller.
                unsafe { ($($name::fetch_table($fetch, table_row),)*) }
            }

            fn shrink<'wlong: 'wshort, 'wshort>(item: Self::Item<'wlong>) -> Self::Item<'wshort> {
                let ($($name,)*) = item;
                ($($name::shrink($name),)*)
            }

            const NOALIAS_ROWS: bool = true $(&& $name::NOALIAS_ROWS)*;
            // A tuple's own `fold_rows` hands its elements' columns to `noalias` one by one (an
            // argument that is a tuple of slices would carry no no-alias guarantee). Nested in
            // another tuple, it gives them as tuples, and its rebase moves every element's
            // fetch to the run's first row, as the outer tuple's other elements are.
            type ColA<'w> = ($($name::ColA<'w>,)*);
            type ColB<'w> = ($($name::ColB<'w>,)*);

            #[inline(always)]
            unsafe fn columns<'w>(
                fetch: &Self::Fetch<'w>,
                start: usize,
                end: usize,
            ) -> (Self::ColA<'w>, Self::ColB<'w>) {
                let ($($fetch,)*) = fetch;
                // SAFETY: forwarded from the caller, for each element (`NOALIAS_ROWS` holds
                // for the tuple, so for every element).
                let ($($name,)*) = unsafe { ($($name::columns($fetch, start, end),)*) };
                (($($name.0,)*), ($($name.1,)*))
            }

            #[inline(always)]
            unsafe fn rebase<'w>(
                fetch: &mut Self::Fetch<'w>,
                a: &mut Self::ColA<'w>,
                b: &mut Self::ColB<'w>,
            ) {
                let ($($fetch,)*) = fetch;
                let ($($a,)*) = a;
                let ($($b,)*) = b;
                // SAFETY: each element's columns were made by its `columns` for its fetch
                // (the tuple's `columns`, caller).
                unsafe { $($name::rebase($fetch, $a, $b);)* }
            }

            #[inline(always)]
            unsafe fn fold_rows<'w, BB, GG>(
                fetch: &Self::Fetch<'w>,
                start: usize,
                end: usize,
                acc: BB,
                g: &mut GG,
            ) -> BB
            where
                GG: FnMut(BB, Self::Item<'w>) -> BB,
            {
                /// `fold_rows_noalias` for a tuple: two arguments per element.
                ///
                /// # Safety
                /// - As for `fold_rows_noalias`, for each element's columns.
                #[inline(never)]
                #[allow(clippy::too_many_arguments, clippy::extra_unused_lifetimes)]
                unsafe fn noalias<'w, $($name: QueryData,)* BB, GG>(
                    $(mut $a: $name::ColA<'w>, mut $b: $name::ColB<'w>,)*
                    fetch: &($($name::Fetch<'w>,)*),
                    len: usize,
                    mut acc: BB,
                    g: &mut GG,
                ) -> BB
                where
                    GG: FnMut(BB, ($($name::Item<'w>,)*)) -> BB,
                {
                    let mut fetch = fetch.clone();
                    {
                        let ($($fetch,)*) = &mut fetch;
                        // SAFETY: each element's columns were made by its `columns` for its
                        // fetch (caller).
                        unsafe { $($name::rebase($fetch, &mut $a, &mut $b);)* }
                    }
                    for r in 0..len {
                        // SAFETY: rebased: row `r` is the table's row `start + r`, in bounds.
                        acc = g(acc, unsafe { <($($name,)*) as QueryData>::fetch_table(&mut fetch, r) });
                    }
                    acc
                }

                if Self::NOALIAS_ROWS {
                    let ($($fetch,)*) = fetch;
                    // SAFETY: forwarded from the caller; every element supports `columns`.
                    return unsafe {
                        $(let ($a, $b) = $name::columns($fetch, start, end);)*
                        noalias::<$($name,)* BB, GG>($($a, $b,)* fetch, end - start, acc, g)
                    };
                }
                // SAFETY: forwarded from the caller.
                unsafe { crate::fetch::fold_rows_plain::<Self, BB, GG>(fetch, start, end, acc, g) }
            }
        }

        // SAFETY: every element only reads.
        unsafe impl<$($name: ReadOnlyQueryData),*> ReadOnlyQueryData for ($($name,)*) {}
    };
}

macro_rules! all_tuples {
    ($m:ident; $($all:tt),*) => { all_tuples!(@step $m; []; $($all),*); };
    (@step $m:ident; [$($done:tt),*]; $next:tt $(, $rest:tt)*) => {
        $m!($($done,)* $next);
        all_tuples!(@step $m; [$($done,)* $next]; $($rest),*);
    };
    (@step $m:ident; [$($done:tt),*];) => {};
}
pub(crate) use all_tuples;

tuple_query!();
all_tuples!(tuple_query;
    (D0, s0, f0, a0, b0), (D1, s1, f1, a1, b1), (D2, s2, f2, a2, b2), (D3, s3, f3, a3, b3),
    (D4, s4, f4, a4, b4), (D5, s5, f5, a5, b5), (D6, s6, f6, a6, b6), (D7, s7, f7, a7, b7),
    (D8, s8, f8, a8, b8), (D9, s9, f9, a9, b9), (D10, s10, f10, a10, b10),
    (D11, s11, f11, a11, b11), (D12, s12, f12, a12, b12), (D13, s13, f13, a13, b13),
    (D14, s14, f14, a14, b14), (D15, s15, f15, a15, b15)
);
