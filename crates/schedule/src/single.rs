//! [`Single`]: the one entity a query matches, as a system parameter, and `Option<Single>`
//! for "one or none"; [`ParamInvalid`], how a parameter refuses a run.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use folio_query::{QueryData, QueryFilter, QueryState, World};

use crate::error::ScheduleError;
use crate::param::{
    SystemMeta, SystemParam, query_param_access, query_param_state, short_type_name,
};

/// Why a parameter cannot be built for a run ([`SystemParam::validate_param`]): the system is
/// skipped for that run in a [`Schedule`](crate::Schedule), and a system run on its own
/// ([`System::run`](crate::System::run)) reports [`ScheduleError::InvalidParam`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamInvalid {
    /// The parameter's type name.
    pub param: &'static str,
    /// Why, completing "the parameter ...": "matched no entity", say.
    pub reason: &'static str,
}

impl ParamInvalid {
    /// Parameter `P` cannot be built, for `reason`.
    pub fn new<P>(reason: &'static str) -> Self {
        Self { param: std::any::type_name::<P>(), reason }
    }

    /// The error for system `system`: [`ScheduleError::InvalidParam`].
    pub fn into_error(self, system: &str) -> ScheduleError {
        ScheduleError::InvalidParam {
            system: system.to_owned(),
            param: short_type_name(self.param),
            reason: self.reason,
        }
    }
}

const NO_MATCH: &str = "matched no entity (a Single needs exactly one)";
const SEVERAL: &str = "matched several entities (a Single needs exactly one)";

/// The one entity that query `Query<D, F>` matches, as a system parameter: derefs to its item
/// (`D::Item`), so `Single<&mut Player>` reads and writes the player directly.
///
/// When the query matches no entity, or more than one, a system with a `Single` is **skipped**
/// for that run: it is neither an error nor a panic (the [`Schedule`](crate::Schedule) run
/// returns `Ok`, and the system's commands and effects are absent); the next run checks again.
/// Its last-run tick stays, so a `Changed` filter still sees everything since its last real
/// run. Take `Option<Single<D, F>>` to run with `None` when nothing matches (the system is
/// still skipped when several do). A system run on its own ([`System::run`](crate::System::run),
/// [`RunSystemOnce`](crate::RunSystemOnce)) reports [`ScheduleError::InvalidParam`] instead.
///
/// The access is the query's, checked against the system's other parameters as a
/// [`Query`](crate::Query)'s is. Inside a [`ParamSet`](crate::ParamSet) or a run condition,
/// where no run is skipped, a `Single` that does not match exactly one entity panics.
///
/// ```
/// use folio_schedule::prelude::*;
///
/// struct Player;
/// struct Health(u32);
///
/// fn heal(mut player: Single<&mut Health, With<Player>>) {
///     player.0 += 1;
/// }
///
/// let mut world = World::new();
/// let mut schedule = Schedule::new();
/// schedule.add_systems(heal);
/// schedule.run(&mut world).unwrap(); // no player yet: `heal` is skipped
/// let p = world.spawn((Player, Health(1)));
/// world.spawn((Health(1),)); // not a player: filtered out
/// schedule.run(&mut world).unwrap();
/// assert_eq!(world.get::<Health>(p).unwrap().0, 2);
/// ```
pub struct Single<'w, D: QueryData, F: QueryFilter = ()> {
    item: D::Item<'w>,
    _filter: PhantomData<fn() -> F>,
}

impl<'w, D: QueryData, F: QueryFilter> Single<'w, D, F> {
    /// The item, for the world's lifetime.
    pub fn into_inner(self) -> D::Item<'w> {
        self.item
    }
}

impl<'w, D: QueryData, F: QueryFilter> Deref for Single<'w, D, F> {
    type Target = D::Item<'w>;

    fn deref(&self) -> &D::Item<'w> {
        &self.item
    }
}

impl<'w, D: QueryData, F: QueryFilter> DerefMut for Single<'w, D, F> {
    fn deref_mut(&mut self) -> &mut D::Item<'w> {
        &mut self.item
    }
}

/// How many entities (0, 1, or 2 for "several") the query matches this run.
///
/// # Safety
/// - As for [`SystemParam::validate_param`]: `state` was built and updated for `world`; the
///   caller holds the query's access.
unsafe fn matches_up_to_two<D: QueryData, F: QueryFilter>(
    state: &QueryState<D, F>,
    meta: &SystemMeta,
    world: &World,
    this_run: u32,
) -> usize {
    // SAFETY: the state is for `world` and up to date, and the caller holds the query's access,
    // which covers reading (the caller's contract).
    let mut iter = unsafe { state.iter_readonly_unchecked(world, meta.last_run, this_run) };
    if iter.next().is_none() {
        0
    } else if iter.next().is_none() {
        1
    } else {
        2
    }
}

/// The item of the one entity the query matches, `None` if none does.
///
/// # Panics
/// When several entities match.
///
/// # Safety
/// - As for [`SystemParam::get_param`]: `state` was built and updated for `world`; the caller
///   holds the query's access for `'w`.
unsafe fn single_item<'w, D: QueryData, F: QueryFilter>(
    state: &QueryState<D, F>,
    meta: &SystemMeta,
    world: &'w World,
    this_run: u32,
) -> Option<D::Item<'w>> {
    // SAFETY: the state is for `world` and up to date, and the caller holds the query's access
    // for `'w`; the one item handed out is the only item of this query alive.
    let mut iter = unsafe { state.iter_unchecked(world, meta.last_run, this_run) };
    let item = iter.next()?;
    assert!(
        iter.next().is_none(),
        "system `{}`: `Single<{}>` {SEVERAL}; in a schedule such a system is skipped, but not \
         inside a ParamSet or a run condition",
        meta.name,
        short_type_name(std::any::type_name::<D>()),
    );
    Some(item)
}

// SAFETY: records the query's component access (as `Query` does); `get_param` hands out one
// item of that query.
unsafe impl<D: QueryData + 'static, F: QueryFilter + 'static> SystemParam for Single<'_, D, F> {
    type State = QueryState<D, F>;
    type Item<'w, 's> = Single<'w, D, F>;

    const VALIDATES: bool = true;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        query_param_access::<Self, D, F>(meta)
    }

    fn init_state(world: &mut World, meta: &mut SystemMeta) -> Result<Self::State, ScheduleError> {
        query_param_state(world, meta)
    }

    fn update(state: &mut Self::State, world: &World) {
        state.update_archetypes(world);
    }

    unsafe fn validate_param(
        state: &Self::State,
        meta: &SystemMeta,
        world: &World,
        this_run: u32,
    ) -> Result<(), crate::ParamInvalid> {
        // SAFETY: forwarded from the caller (the state is for `world` and was updated; the
        // access is held).
        match unsafe { matches_up_to_two(state, meta, world, this_run) } {
            1 => Ok(()),
            0 => Err(ParamInvalid::new::<Self>(NO_MATCH)),
            _ => Err(ParamInvalid::new::<Self>(SEVERAL)),
        }
    }

    unsafe fn get_param<'w>(
        state: &mut Self::State,
        meta: &SystemMeta,
        world: &'w World,
        this_run: u32,
    ) -> Single<'w, D, F> {
        // SAFETY: forwarded from the caller.
        let item = unsafe { single_item(state, meta, world, this_run) };
        let item = item.unwrap_or_else(|| {
            panic!(
                "system `{}`: `Single<{}>` {NO_MATCH}; in a schedule such a system is skipped, \
                 but not inside a ParamSet or a run condition",
                meta.name,
                short_type_name(std::any::type_name::<D>()),
            )
        });
        Single { item, _filter: PhantomData }
    }
}

// SAFETY: as `Single`.
unsafe impl<D: QueryData + 'static, F: QueryFilter + 'static> SystemParam
    for Option<Single<'_, D, F>>
{
    type State = QueryState<D, F>;
    type Item<'w, 's> = Option<Single<'w, D, F>>;

    const VALIDATES: bool = true;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        query_param_access::<Self, D, F>(meta)
    }

    fn init_state(world: &mut World, meta: &mut SystemMeta) -> Result<Self::State, ScheduleError> {
        query_param_state(world, meta)
    }

    fn update(state: &mut Self::State, world: &World) {
        state.update_archetypes(world);
    }

    unsafe fn validate_param(
        state: &Self::State,
        meta: &SystemMeta,
        world: &World,
        this_run: u32,
    ) -> Result<(), crate::ParamInvalid> {
        // SAFETY: forwarded from the caller.
        match unsafe { matches_up_to_two(state, meta, world, this_run) } {
            0 | 1 => Ok(()),
            _ => Err(ParamInvalid::new::<Self>(SEVERAL)),
        }
    }

    unsafe fn get_param<'w>(
        state: &mut Self::State,
        meta: &SystemMeta,
        world: &'w World,
        this_run: u32,
    ) -> Option<Single<'w, D, F>> {
        // SAFETY: forwarded from the caller.
        let item = unsafe { single_item(state, meta, world, this_run) }?;
        Some(Single { item, _filter: PhantomData })
    }
}
