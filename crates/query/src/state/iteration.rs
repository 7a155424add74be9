//! Running a [`QueryState`]: its iterators (sequential, parallel, over a list of entities,
//! over combinations), and the looks that walk its matches (`single`, `is_empty`, `count`).

use folio_archetype::{Entity, World};

use super::{Lookup, QueryState};
use crate::access::QueryError;
use crate::combinations::{QueryCombinationIter, for_each_combination};
use crate::fetch::{ArchetypeFilter, QueryData, QueryFilter};
use crate::iter::QueryIter;
use crate::many::{QueryManyIter, for_each_many};
use crate::par::QueryParIter;

impl<D: QueryData, F: QueryFilter> QueryState<D, F> {
    /// The matching entities' items, read-only. Counts as a run of the query.
    #[inline(always)]
    #[track_caller]
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
    #[track_caller]
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

    /// Runs `f` on every matching entity's items, read-only. Counts as a run.
    #[track_caller]
    pub fn for_each<'w>(
        &mut self,
        world: &'w World,
        f: impl FnMut(<D::ReadOnly as QueryData>::Item<'w>),
    ) {
        self.iter(world).for_each(f);
    }

    /// Runs `f` on every matching entity's items, mutably. Counts as a run.
    #[track_caller]
    pub fn for_each_mut<'w>(&mut self, world: &'w mut World, f: impl FnMut(D::Item<'w>)) {
        self.iter_mut(world).for_each(f);
    }

    /// A parallel iterator over the items, read-only. Counts as a run.
    #[track_caller]
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
    #[track_caller]
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

    /// The read-only items of the entities `entities` yields, in its order, skipping those the
    /// query does not match (despawned, lacking a component, filtered out): for lists of
    /// entities kept in components. A lookup per entity; not a run (ticks as for `get`).
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
    pub fn for_each_combination_mut<const K: usize>(
        &mut self,
        world: &mut World,
        f: impl FnMut([D::Item<'_>; K]),
    ) {
        // Matched (and the world checked) before the run takes a tick: a state refused for
        // another world changes neither its own last run nor that world's tick.
        self.update_archetypes(world);
        let (last_run, this_run) = self.begin_run_mut(world);
        let world = &*world;
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
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
    pub fn count(&mut self, world: &World) -> usize {
        self.update_archetypes(world);
        self.matches.entity_count(world)
    }
}

fn single_of<I: Iterator>(mut iter: I) -> Result<I::Item, QueryError> {
    let first = iter.next().ok_or(QueryError::NoEntities)?;
    if iter.next().is_some() {
        return Err(QueryError::MultipleEntities);
    }
    Ok(first)
}
