//! [`SystemParam`]: what a system function can ask for — [`Query`], [`Res`], [`ResMut`],
//! `Option<Res<R>>`, `Option<ResMut<R>>`, [`Local`], [`Commands`](crate::Commands),
//! [`EventReader`](crate::EventReader), [`EventWriter`](crate::EventWriter), `&World`, and
//! tuples of them; [`ParamSet`](crate::ParamSet), for parameters that conflict with each other,
//! has a module of its own.
//!
//! # Safety model
//! A parameter declares its access statically ([`SystemParam::access`]), before any world is
//! seen; the schedule never runs two systems whose accesses conflict at the same time, and a
//! system whose own parameters conflict is rejected. So `get_param` may hand out `&mut` to
//! what it declared as written, through the shared `&World` every running system holds: the
//! world's columns and resources are reached through raw pointers with their own provenance
//! (`Column::as_ptr`, `World::resource_ptr`), never through a reference another system holds.

use std::any::TypeId;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use folio_query::{
    Entity, QueryCombinationIter, QueryData, QueryError, QueryFilter, QueryIter, QueryManyIter,
    QueryParIter, QueryState, ReadOnlyQueryData, ResourceTicks, TypeKey, World,
};

use crate::access::SystemAccess;
use crate::commands::CommandStats;
use crate::error::ScheduleError;
use crate::single::ParamInvalid;

/// A system's bookkeeping: its name, access, and the tick of its last run.
#[derive(Clone, Debug)]
pub struct SystemMeta {
    /// The system's name (its function's type name).
    pub name: String,
    /// What it touches.
    pub access: SystemAccess,
    /// The tick of its last run: `Changed`/`Added` in its queries mean "since then".
    pub last_run: u32,
    /// Per event type it uses, the function that ages that type's events (run once per
    /// schedule run).
    pub event_updaters: Vec<EventUpdater>,
}

/// An event type's id and the function that ages its queue.
pub type EventUpdater = (TypeId, fn(&mut World));

impl SystemMeta {
    /// Empty bookkeeping for a system named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: short_type_name(&name.into()),
            access: SystemAccess::default(),
            last_run: 0,
            event_updaters: Vec::new(),
        }
    }
}

/// Something a system function can take as a parameter.
///
/// # Safety
/// - [`SystemParam::access`] records everything `get_param`'s item reads (as reads) and writes
///   (as writes).
pub unsafe trait SystemParam: Sized {
    /// Kept across runs (a query's cache, a `Local`'s value, a command buffer).
    type State: Send + Sync + 'static;
    /// The parameter as the system function receives it.
    type Item<'w, 's>: SystemParam<State = Self::State>;

    /// Whether the item hands the system the world itself (`&World`), through which it can run
    /// query states of its own: a system with such a parameter runs with its tick as the
    /// thread's system tick ([`folio_query::with_system_tick`]), so that those query states
    /// take the system's tick. Known at compile time, so the other systems pay nothing.
    const GIVES_WORLD: bool = false;

    /// Records the parameter's access; an error if it conflicts with the system's other
    /// parameters.
    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError>;

    /// Whether [`SystemParam::validate_param`] can refuse a run (a [`Single`](crate::Single)).
    /// Only systems with such a parameter check it before each run: known at compile time, so
    /// the others pay nothing.
    const VALIDATES: bool = false;

    /// Whether [`SystemParam::apply`] can have work to do: the parameter buffers changes the
    /// world sees only when they are applied ([`Commands`](crate::Commands)). A
    /// [`Schedule`](crate::Schedule) puts an automatic sync point between a system with such a
    /// parameter and a system ordered after it ([`System::has_deferred`](crate::System::has_deferred)).
    const DEFERRED: bool = false;

    /// Builds the state for `world`.
    fn init_state(world: &mut World, meta: &mut SystemMeta) -> Result<Self::State, ScheduleError>;

    /// Refreshes the state before a run (a query matches new archetypes).
    fn update(_state: &mut Self::State, _world: &World) {}

    /// Whether the parameter can be built for this run; `Err` skips the system for the run
    /// (a [`Single`](crate::Single) whose query matches no entity or several). Called right
    /// before [`SystemParam::get_param`], with the same arguments, when
    /// [`SystemParam::VALIDATES`] is set; `Ok` by default.
    ///
    /// # Safety
    /// - As for [`SystemParam::get_param`].
    unsafe fn validate_param(
        _state: &Self::State,
        _meta: &SystemMeta,
        _world: &World,
        _this_run: u32,
    ) -> Result<(), ParamInvalid> {
        Ok(())
    }

    /// The parameter for one run.
    ///
    /// # Safety
    /// - `state` was built for `world`; the caller holds the access [`SystemParam::access`]
    ///   recorded, for `'w`.
    unsafe fn get_param<'w, 's>(
        state: &'s mut Self::State,
        meta: &SystemMeta,
        world: &'w World,
        this_run: u32,
    ) -> Self::Item<'w, 's>;

    /// Applies what the parameter deferred (commands) to the world.
    fn apply(_state: &mut Self::State, _world: &mut World, _stats: &mut CommandStats) {}

    /// Throws away what the parameter deferred (after its system panicked).
    fn discard(_state: &mut Self::State, _world: &mut World) {}
}

/// The item type of a parameter, for given lifetimes.
pub type SystemParamItem<'w, 's, P> = <P as SystemParam>::Item<'w, 's>;

pub(crate) fn param_name<P>() -> String {
    short_type_name(std::any::type_name::<P>())
}

/// A type name without module paths or elided lifetimes: `Query<&mut Position>`.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    for (i, ch) in full.char_indices() {
        if ch.is_alphanumeric() || ch == '_' {
            continue;
        }
        if ch == ':' {
            // Drop the path so far: `a::b::C` keeps `C`.
            segment_start = i + 1;
            continue;
        }
        out.push_str(&full[segment_start..i]);
        out.push(ch);
        segment_start = i + ch.len_utf8();
    }
    out.push_str(&full[segment_start..]);
    out.replace("'_, ", "").replace("<'_>", "")
}

/// A query as a system parameter: the entities with `D` that pass `F`.
pub struct Query<'w, 's, D: QueryData, F: QueryFilter = ()> {
    world: &'w World,
    state: &'s QueryState<D, F>,
    last_run: u32,
    this_run: u32,
}

impl<'w, 's, D: QueryData, F: QueryFilter> Query<'w, 's, D, F> {
    /// The items, read-only.
    #[inline(always)]
    pub fn iter(&self) -> QueryIter<'_, 's, D::ReadOnly, F> {
        // SAFETY: the schedule holds this system's access; reads through `&self` cannot
        // overlap the writes of `iter_mut`, which takes `&mut self`.
        unsafe { self.state.iter_readonly_unchecked(self.world, self.last_run, self.this_run) }
    }

    /// The items, mutably.
    #[inline(always)]
    pub fn iter_mut(&mut self) -> QueryIter<'_, 's, D, F> {
        // SAFETY: the schedule holds this system's access, and `&mut self` keeps any other
        // item of this query from being alive.
        unsafe { self.state.iter_unchecked(self.world, self.last_run, self.this_run) }
    }

    /// Runs `f` on every item, read-only.
    pub fn for_each(&self, f: impl FnMut(<D::ReadOnly as QueryData>::Item<'_>)) {
        self.iter().for_each(f);
    }

    /// Runs `f` on every item, mutably.
    pub fn for_each_mut(&mut self, f: impl FnMut(D::Item<'_>)) {
        self.iter_mut().for_each(f);
    }

    /// A parallel iterator over the items, read-only.
    pub fn par_iter(&self) -> QueryParIter<'_, 's, D::ReadOnly, F> {
        // SAFETY: as in `iter`.
        unsafe { self.state.par_iter_readonly_unchecked(self.world, self.last_run, self.this_run) }
    }

    /// A parallel iterator over the items, mutably.
    pub fn par_iter_mut(&mut self) -> QueryParIter<'_, 's, D, F> {
        // SAFETY: as in `iter_mut`.
        unsafe { self.state.par_iter_unchecked(self.world, self.last_run, self.this_run) }
    }

    /// `entity`'s items, read-only.
    pub fn get(&self, entity: Entity) -> Result<<D::ReadOnly as QueryData>::Item<'_>, QueryError> {
        // SAFETY: as in `iter`.
        unsafe {
            self.state.get_readonly_unchecked(self.world, entity, self.last_run, self.this_run)
        }
    }

    /// `entity`'s items, mutably.
    pub fn get_mut(&mut self, entity: Entity) -> Result<D::Item<'_>, QueryError> {
        // SAFETY: as in `iter_mut`; one item is handed out while `&mut self` is borrowed.
        unsafe { self.state.get_unchecked(self.world, entity, self.last_run, self.this_run) }
    }

    /// The read-only items of `N` entities (one may be named twice); the first entity's error
    /// if one does not match.
    pub fn get_many<const N: usize>(
        &self,
        entities: [Entity; N],
    ) -> Result<[<D::ReadOnly as QueryData>::Item<'_>; N], QueryError> {
        // SAFETY: as in `iter`.
        unsafe {
            self.state.get_many_readonly_unchecked(
                self.world,
                entities,
                self.last_run,
                self.this_run,
            )
        }
    }

    /// The items of `N` distinct entities, mutably; an error if one is named twice.
    pub fn get_many_mut<const N: usize>(
        &mut self,
        entities: [Entity; N],
    ) -> Result<[D::Item<'_>; N], QueryError> {
        // SAFETY: as in `iter_mut`; the entities are checked to be distinct.
        unsafe { self.state.get_many_unchecked(self.world, entities, self.last_run, self.this_run) }
    }

    /// The read-only items of the entities `entities` yields, in its order, skipping those the
    /// query does not match (despawned, lacking a component, filtered out).
    pub fn iter_many<I: IntoIterator<Item = Entity>>(
        &self,
        entities: I,
    ) -> QueryManyIter<'_, 's, D::ReadOnly, F, I::IntoIter> {
        // SAFETY: as in `iter`.
        unsafe {
            self.state.iter_many_unchecked(self.world, entities, self.last_run, self.this_run)
        }
    }

    /// Runs `f` on the mutable items of the entities `entities` yields, in its order, one at
    /// a time, skipping those the query does not match; an entity listed twice gets two
    /// calls. `f` gets each item for the length of its call.
    pub fn for_each_many_mut<I: IntoIterator<Item = Entity>>(
        &mut self,
        entities: I,
        f: impl FnMut(D::Item<'_>),
    ) {
        // SAFETY: as in `iter_mut`; `&mut self` keeps any other item of this query from being
        // alive while `f` runs.
        unsafe {
            self.state.for_each_many_unchecked(
                self.world,
                entities,
                self.last_run,
                self.this_run,
                f,
            );
        }
    }

    /// The read-only items of every `K` distinct matching entities, each set once (`[a, b]`
    /// but not `[b, a]`): pairs for collisions or forces between bodies. The entities are
    /// listed when it starts; `n` of them make `n` choose `K` combinations.
    pub fn iter_combinations<const K: usize>(
        &self,
    ) -> QueryCombinationIter<'_, 's, D::ReadOnly, F, K> {
        // SAFETY: as in `iter`.
        unsafe { self.state.iter_combinations_unchecked(self.world, self.last_run, self.this_run) }
    }

    /// Runs `f` on the mutable items of every `K` distinct matching entities, each set once,
    /// one set at a time: `f` gets the items for the length of its call.
    pub fn for_each_combination_mut<const K: usize>(&mut self, f: impl FnMut([D::Item<'_>; K])) {
        // SAFETY: as in `iter_mut`; `&mut self` keeps any other item of this query from being
        // alive while `f` runs.
        unsafe {
            self.state.for_each_combination_unchecked(self.world, self.last_run, self.this_run, f);
        }
    }

    /// The one matching entity's items; an error unless exactly one matches.
    pub fn single(&self) -> Result<<D::ReadOnly as QueryData>::Item<'_>, QueryError> {
        let mut iter = self.iter();
        let first = iter.next().ok_or(QueryError::NoEntities)?;
        if iter.next().is_some() {
            return Err(QueryError::MultipleEntities);
        }
        Ok(first)
    }

    /// The one matching entity's items, mutably; an error unless exactly one matches.
    pub fn single_mut(&mut self) -> Result<D::Item<'_>, QueryError> {
        let mut iter = self.iter_mut();
        let first = iter.next().ok_or(QueryError::NoEntities)?;
        if iter.next().is_some() {
            return Err(QueryError::MultipleEntities);
        }
        Ok(first)
    }

    /// Whether no entity matches.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// How many entities match.
    pub fn count(&self) -> usize {
        self.iter().count()
    }

    /// Whether `entity` matches the query (alive, and passing its filter).
    pub fn contains(&self, entity: Entity) -> bool {
        self.get(entity).is_ok()
    }
}

impl<'w, 's, D: ReadOnlyQueryData, F: QueryFilter> IntoIterator for &'w Query<'_, 's, D, F> {
    type Item = D::Item<'w>;
    type IntoIter = QueryIter<'w, 's, D, F>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// `Query<D, F>`'s access, recorded for parameter `P` (a `Query`, or a `Single` of one).
pub(crate) fn query_param_access<P, D: QueryData + 'static, F: QueryFilter + 'static>(
    meta: &mut SystemMeta,
) -> Result<(), ScheduleError> {
    let access = QueryState::<D, F>::component_access()
        .map_err(|error| ScheduleError::Query { system: meta.name.clone(), error })?;
    let name = meta.name.clone();
    meta.access.add_query(&name, access, param_name::<P>())
}

/// The state of a query parameter (a `Query`, or a `Single` of one) over `world`.
pub(crate) fn query_param_state<D: QueryData + 'static, F: QueryFilter + 'static>(
    world: &World,
    meta: &SystemMeta,
) -> Result<QueryState<D, F>, ScheduleError> {
    QueryState::try_new(world)
        .map_err(|error| ScheduleError::Query { system: meta.name.clone(), error })
}

// SAFETY: records the query's component access (validated against itself by `QueryState`, and
// against the system's other queries by `add_query`); `get_param` hands out a `Query` whose
// methods stay within it.
unsafe impl<D: QueryData + 'static, F: QueryFilter + 'static> SystemParam for Query<'_, '_, D, F> {
    type State = QueryState<D, F>;
    type Item<'w, 's> = Query<'w, 's, D, F>;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        query_param_access::<Self, D, F>(meta)
    }

    fn init_state(world: &mut World, meta: &mut SystemMeta) -> Result<Self::State, ScheduleError> {
        query_param_state(world, meta)
    }

    fn update(state: &mut Self::State, world: &World) {
        state.update_archetypes(world);
    }

    unsafe fn get_param<'w, 's>(
        state: &'s mut Self::State,
        meta: &SystemMeta,
        world: &'w World,
        this_run: u32,
    ) -> Query<'w, 's, D, F> {
        Query { world, state, last_run: meta.last_run, this_run }
    }
}

/// `is_added`, `is_changed` and `last_changed` for [`Res`] and [`ResMut`] (fields `ticks`,
/// `last_run`, `this_run`).
macro_rules! resource_change_queries {
    () => {
        /// Whether the resource was inserted since the system last ran (on its first run: yes).
        #[inline]
        pub fn is_added(&self) -> bool {
            self.ticks.is_added(self.last_run, self.this_run)
        }

        /// Whether the resource was inserted, replaced or written since the system last ran
        /// (on its first run: yes); for a `ResMut`, this run's own writes included.
        #[inline]
        pub fn is_changed(&self) -> bool {
            self.ticks.is_changed(self.last_run, self.this_run)
        }

        /// The tick the resource was last changed at.
        #[inline]
        pub fn last_changed(&self) -> u32 {
            self.ticks.changed
        }
    };
}

/// A shared borrow of resource `R`, with what changed since the system last ran.
pub struct Res<'w, R> {
    value: &'w R,
    ticks: ResourceTicks,
    last_run: u32,
    this_run: u32,
}

impl<'w, R> Res<'w, R> {
    resource_change_queries!();

    /// The borrow, for the world's lifetime.
    #[inline]
    pub fn into_inner(self) -> &'w R {
        self.value
    }
}

impl<R> Deref for Res<'_, R> {
    type Target = R;

    #[inline]
    fn deref(&self) -> &R {
        self.value
    }
}

/// A mutable borrow of resource `R` that marks it changed when written through.
///
/// Reading (`Deref`) marks nothing; the first `DerefMut` stamps the resource's changed tick
/// with the system's tick, so `Res::is_changed` (and [`resource_changed`](crate::resource_changed))
/// in later systems see real writes only.
pub struct ResMut<'w, R: ?Sized> {
    value: &'w mut R,
    ticks: &'w mut ResourceTicks,
    last_run: u32,
    this_run: u32,
}

impl<'w, R: ?Sized> ResMut<'w, R> {
    resource_change_queries!();

    /// Marks the resource changed without writing it.
    #[inline]
    pub fn set_changed(&mut self) {
        self.ticks.changed = self.this_run;
    }

    /// Writes `value` and marks a change only if it differs from the current value; returns
    /// whether it did (so `resource_changed` readers see only real changes of a value set
    /// every frame).
    #[inline]
    pub fn set_if_neq(&mut self, value: R) -> bool
    where
        R: Sized + PartialEq,
    {
        if *self.value == value {
            return false;
        }
        *self.deref_mut() = value;
        true
    }

    /// A `ResMut` of a part of the resource (a field, say), sharing its change ticks: writes
    /// through it mark the whole resource changed. `f` itself marks nothing.
    #[inline]
    pub fn map_unchanged<U: ?Sized>(self, f: impl FnOnce(&mut R) -> &mut U) -> ResMut<'w, U> {
        let Self { value, ticks, last_run, this_run } = self;
        ResMut { value: f(value), ticks, last_run, this_run }
    }

    /// A shorter `ResMut` of the same resource, for passing to a function that takes one by
    /// value while keeping this one.
    #[inline]
    pub fn reborrow(&mut self) -> ResMut<'_, R> {
        ResMut {
            value: self.value,
            ticks: self.ticks,
            last_run: self.last_run,
            this_run: self.this_run,
        }
    }

    /// The value, mutably, without marking it changed (for writes no one should react to).
    #[inline]
    pub fn bypass_change_detection(&mut self) -> &mut R {
        self.value
    }

    /// The borrow, marked changed, for the world's lifetime.
    #[inline]
    pub fn into_inner(self) -> &'w mut R {
        self.ticks.changed = self.this_run;
        self.value
    }
}

impl<R: ?Sized> Deref for ResMut<'_, R> {
    type Target = R;

    #[inline]
    fn deref(&self) -> &R {
        self.value
    }
}

impl<R: ?Sized> DerefMut for ResMut<'_, R> {
    #[inline]
    fn deref_mut(&mut self) -> &mut R {
        self.set_changed();
        self.value
    }
}

/// `Res` for the resource behind `value` and `ticks`.
///
/// # Safety
/// - Both pointers are resource `R`'s, from the world, and no one writes either for `'w`.
unsafe fn make_res<'w, R>(
    value: NonNull<R>,
    ticks: NonNull<ResourceTicks>,
    meta: &SystemMeta,
    this_run: u32,
) -> Res<'w, R> {
    // SAFETY: forwarded from the caller.
    let (value, ticks) = unsafe { (value.as_ref(), ticks.read()) };
    Res { value, ticks, last_run: meta.last_run, this_run }
}

/// `ResMut` for the resource behind `value` and `ticks`.
///
/// # Safety
/// - Both pointers are resource `R`'s, from the world (with the resource cell's provenance),
///   and no one else reads or writes either for `'w`.
unsafe fn make_res_mut<'w, R>(
    value: NonNull<R>,
    ticks: NonNull<ResourceTicks>,
    meta: &SystemMeta,
    this_run: u32,
) -> ResMut<'w, R> {
    // SAFETY: forwarded from the caller; the value and the ticks are disjoint fields of the
    // cell, so the two `&mut` do not overlap.
    let (value, ticks) = unsafe { (&mut *value.as_ptr(), &mut *ticks.as_ptr()) };
    ResMut { value, ticks, last_run: meta.last_run, this_run }
}

/// Resource `R`'s value and ticks, if it exists.
pub(crate) fn resource_ptrs<R: Send + Sync + 'static>(
    world: &World,
) -> Option<(NonNull<R>, NonNull<ResourceTicks>)> {
    Some((world.resource_ptr::<R>()?, world.resource_ticks_ptr::<R>()?))
}

/// The panic of a `Res<R>` or `ResMut<R>` (`P`) whose resource is not in the world when its
/// system runs: names the system, the parameter and the resource.
#[cold]
fn missing_resource<P, R>(meta: &SystemMeta) -> ! {
    panic!(
        "system `{}`: parameter `{}` needs resource `{}`, which is not in the world (insert it \
         first, or take Option<{}>)",
        meta.name,
        param_name::<P>(),
        std::any::type_name::<R>(),
        param_name::<P>(),
    )
}

// SAFETY: records a read of `R`; hands out `&R`.
unsafe impl<R: Send + Sync + 'static> SystemParam for Res<'_, R> {
    type State = ();
    type Item<'w, 's> = Res<'w, R>;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        let name = meta.name.clone();
        meta.access.add_resource_read(&name, TypeKey::of::<R>(), param_name::<Self>())
    }

    fn init_state(_: &mut World, _: &mut SystemMeta) -> Result<(), ScheduleError> {
        Ok(())
    }

    unsafe fn get_param<'w>(
        _: &mut (),
        meta: &SystemMeta,
        world: &'w World,
        this_run: u32,
    ) -> Res<'w, R> {
        let (value, ticks) =
            resource_ptrs::<R>(world).unwrap_or_else(|| missing_resource::<Self, R>(meta));
        // SAFETY: a live `R` and its ticks; the schedule lets no system write them while this
        // one reads them.
        unsafe { make_res(value, ticks, meta, this_run) }
    }
}

// SAFETY: records a write of `R`; hands out `&mut R`.
unsafe impl<R: Send + Sync + 'static> SystemParam for ResMut<'_, R> {
    type State = ();
    type Item<'w, 's> = ResMut<'w, R>;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        let name = meta.name.clone();
        meta.access.add_resource_write(&name, TypeKey::of::<R>(), param_name::<Self>())
    }

    fn init_state(_: &mut World, _: &mut SystemMeta) -> Result<(), ScheduleError> {
        Ok(())
    }

    unsafe fn get_param<'w>(
        _: &mut (),
        meta: &SystemMeta,
        world: &'w World,
        this_run: u32,
    ) -> ResMut<'w, R> {
        let (value, ticks) =
            resource_ptrs::<R>(world).unwrap_or_else(|| missing_resource::<Self, R>(meta));
        // SAFETY: a live `R` and its ticks behind pointers with the cell's provenance; the
        // schedule lets no other system touch them while this one runs.
        unsafe { make_res_mut(value, ticks, meta, this_run) }
    }
}

// SAFETY: as `Res<R>`.
unsafe impl<R: Send + Sync + 'static> SystemParam for Option<Res<'_, R>> {
    type State = ();
    type Item<'w, 's> = Option<Res<'w, R>>;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        let name = meta.name.clone();
        meta.access.add_resource_read(&name, TypeKey::of::<R>(), param_name::<Self>())
    }

    fn init_state(_: &mut World, _: &mut SystemMeta) -> Result<(), ScheduleError> {
        Ok(())
    }

    unsafe fn get_param<'w>(
        _: &mut (),
        meta: &SystemMeta,
        world: &'w World,
        this_run: u32,
    ) -> Option<Res<'w, R>> {
        let (value, ticks) = resource_ptrs::<R>(world)?;
        // SAFETY: as in `Res`.
        Some(unsafe { make_res(value, ticks, meta, this_run) })
    }
}

// SAFETY: as `ResMut<R>`.
unsafe impl<R: Send + Sync + 'static> SystemParam for Option<ResMut<'_, R>> {
    type State = ();
    type Item<'w, 's> = Option<ResMut<'w, R>>;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        let name = meta.name.clone();
        meta.access.add_resource_write(&name, TypeKey::of::<R>(), param_name::<Self>())
    }

    fn init_state(_: &mut World, _: &mut SystemMeta) -> Result<(), ScheduleError> {
        Ok(())
    }

    unsafe fn get_param<'w>(
        _: &mut (),
        meta: &SystemMeta,
        world: &'w World,
        this_run: u32,
    ) -> Option<ResMut<'w, R>> {
        let (value, ticks) = resource_ptrs::<R>(world)?;
        // SAFETY: as in `ResMut`.
        Some(unsafe { make_res_mut(value, ticks, meta, this_run) })
    }
}

/// A value private to one system, kept across its runs (starts as `T::default()`).
///
/// The system may run on any thread, so `T` must be `Send + Sync`; the bound is on the type
/// itself so that `Local<Rc<u32>>` is rejected where it is written, naming the type.
pub struct Local<'s, T: Send + Sync + 'static> {
    value: &'s mut T,
}

impl<T: Send + Sync + 'static> Deref for Local<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.value
    }
}

impl<T: Send + Sync + 'static> DerefMut for Local<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
    }
}

// SAFETY: touches only its own state.
unsafe impl<T: Default + Send + Sync + 'static> SystemParam for Local<'_, T> {
    type State = T;
    type Item<'w, 's> = Local<'s, T>;

    fn access(_: &mut SystemMeta) -> Result<(), ScheduleError> {
        Ok(())
    }

    fn init_state(_: &mut World, _: &mut SystemMeta) -> Result<T, ScheduleError> {
        Ok(T::default())
    }

    unsafe fn get_param<'s>(state: &'s mut T, _: &SystemMeta, _: &World, _: u32) -> Local<'s, T> {
        Local { value: state }
    }
}

// SAFETY: records a read of the whole world; hands out `&World`, through which only reads are
// possible (and id reservations, which are atomic: `world_read` also orders the system with
// every other system that may reserve ids, `SystemAccess::may_reserve_entities`, so the ids are
// the same on any number of threads).
unsafe impl SystemParam for &World {
    type State = ();
    type Item<'w, 's> = &'w World;

    const GIVES_WORLD: bool = true;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        let name = meta.name.clone();
        meta.access.add_world_read(&name)
    }

    fn init_state(_: &mut World, _: &mut SystemMeta) -> Result<(), ScheduleError> {
        Ok(())
    }

    unsafe fn get_param<'w>(_: &mut (), _: &SystemMeta, world: &'w World, _: u32) -> &'w World {
        world
    }
}

macro_rules! tuple_param {
    ($($name:ident),*) => {
        // SAFETY: every method forwards to each element; the access is the union, each element
        // checked against the ones before it.
        #[allow(non_snake_case, unused_variables, clippy::unused_unit)]
        unsafe impl<$($name: SystemParam),*> SystemParam for ($($name,)*) {
            type State = ($($name::State,)*);
            type Item<'w, 's> = ($($name::Item<'w, 's>,)*);

            const GIVES_WORLD: bool = false $(|| $name::GIVES_WORLD)*;
            const VALIDATES: bool = false $(|| $name::VALIDATES)*;
            const DEFERRED: bool = false $(|| $name::DEFERRED)*;

            fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
                $($name::access(meta)?;)*
                Ok(())
            }

            fn init_state(world: &mut World, meta: &mut SystemMeta) -> Result<Self::State, ScheduleError> {
                Ok(($($name::init_state(world, meta)?,)*))
            }

            fn update(state: &mut Self::State, world: &World) {
                let ($($name,)*) = state;
                $($name::update($name, world);)*
            }

            #[allow(unused_unsafe)]
            unsafe fn validate_param(
                state: &Self::State,
                meta: &SystemMeta,
                world: &World,
                this_run: u32,
            ) -> Result<(), ParamInvalid> {
                let ($($name,)*) = state;
                $(if $name::VALIDATES {
                    // SAFETY: forwarded from the caller.
                    unsafe { $name::validate_param($name, meta, world, this_run)? };
                })*
                Ok(())
            }

            #[allow(unused_unsafe)]
            unsafe fn get_param<'w, 's>(
                state: &'s mut Self::State,
                meta: &SystemMeta,
                world: &'w World,
                this_run: u32,
            ) -> Self::Item<'w, 's> {
                let ($($name,)*) = state;
                // SAFETY: forwarded from the caller.
                unsafe { ($($name::get_param($name, meta, world, this_run),)*) }
            }

            fn apply(state: &mut Self::State, world: &mut World, stats: &mut CommandStats) {
                let ($($name,)*) = state;
                $($name::apply($name, world, stats);)*
            }

            fn discard(state: &mut Self::State, world: &mut World) {
                let ($($name,)*) = state;
                $($name::discard($name, world);)*
            }
        }
    };
}

macro_rules! all_tuples {
    ($m:ident; $($all:ident),*) => { all_tuples!(@step $m; []; $($all),*); };
    (@step $m:ident; [$($done:ident),*]; $next:ident $(, $rest:ident)*) => {
        $m!($($done,)* $next);
        all_tuples!(@step $m; [$($done,)* $next]; $($rest),*);
    };
    (@step $m:ident; [$($done:ident),*];) => {};
}
pub(crate) use all_tuples;

tuple_param!();
all_tuples!(tuple_param; P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15);
