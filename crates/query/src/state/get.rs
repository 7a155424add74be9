//! Looking entities up in a [`QueryState`]: one (`get`) or `N` at once (`get_many`), and the
//! [`Lookup`] that the entity-list iterators keep.

use folio_archetype::{Entity, World};

use super::{Matches, QueryState};
use crate::access::QueryError;
use crate::fetch::{QueryData, QueryFilter, ReadOnlyQueryData};

impl<D: QueryData, F: QueryFilter> QueryState<D, F> {
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

    /// `entity`'s items, read-only.
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
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
    let archetype = &world.archetypes()[loc.archetype_id as usize];
    if !matches.contains_archetype(archetype.id()) {
        return Err(QueryError::DoesNotMatch(entity));
    }
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
