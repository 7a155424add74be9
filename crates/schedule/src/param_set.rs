//! [`ParamSet`]: parameters of one system that conflict with each other, used one at a time;
//! [`ParamSetMember`], what makes a parameter type a member. Their rules are on their own pages.

use std::marker::PhantomData;
use std::ptr::NonNull;

use folio_query::{Component, QueryData, QueryFilter, World};

use crate::commands::{CommandStats, Commands};
use crate::error::ScheduleError;
use crate::event::{EventReader, EventWriter};
use crate::param::{
    Local, Query, Res, ResMut, SystemMeta, SystemParam, SystemParamItem, all_tuples, param_name,
};
use crate::removed::RemovedComponents;

/// Up to eight parameters that may conflict with each other, given out one at a time: `p0()`
/// for the first, `p1()` for the second, and so on.
///
/// A system cannot take `Query<&mut Transform>` beside `Query<&Transform, With<Camera>>`: both
/// may reach the same `Transform`, and the schedule rejects the pair when the system is added.
/// A `ParamSet<(Query<&mut Transform>, Query<&Transform, With<Camera>>)>` takes both: its
/// members are handed out one at a time (`p0()`, `p1()`, ...; each borrows the set mutably), so
/// no two of them are alive at once. The set's access is the union of its members', so the
/// schedule orders it against every other system as if it held all of them, and each member is
/// still checked against the system's other parameters.
///
/// ```
/// use folio_schedule::prelude::*;
///
/// struct Position(f32);
/// struct Leader;
///
/// // Everyone moves toward the leader: the leader's position is read, every position written.
/// fn follow(mut set: ParamSet<(Query<&Position, With<Leader>>, Query<&mut Position>)>) {
///     let Ok(target) = set.p0().single().map(|p| p.0) else { return };
///     for mut p in set.p1().iter_mut() {
///         p.0 += (target - p.0) * 0.5;
///     }
/// }
///
/// let mut world = World::new();
/// world.spawn((Position(10.0), Leader));
/// let follower = world.spawn((Position(0.0),));
/// let mut schedule = Schedule::new();
/// schedule.add_systems(follow);
/// schedule.run(&mut world).unwrap();
/// assert_eq!(world.get::<Position>(follower).unwrap().0, 5.0);
/// ```
///
/// Each member is checked on its own as a parameter would be (`ParamSet<((Query<&mut A>,
/// Query<&A>),)>` is rejected), and against the system's other parameters. A member can be any
/// of folio's parameters, a tuple of them, or another `ParamSet`; a parameter type of your own
/// needs a [`ParamSetMember`] impl to be one.
pub struct ParamSet<'w, 's, T: ParamSetMembers> {
    /// Per member: a pointer to its state (a field of the set's state, which the set borrows
    /// mutably for `'s`) and the function that makes its item from it.
    members: T::Members,
    /// The system's bookkeeping as the members see it (its name, the tick of its last run).
    meta: &'s SystemMeta,
    world: &'w World,
    this_run: u32,
    _states: PhantomData<&'s mut ()>,
}

/// A parameter type that can be a member of a [`ParamSet`]: names its item for a borrow of
/// the set, for any lifetimes in the type as written (see
/// [why](ParamSetMember#why-the-members-go-through-paramsetmember)). Implemented for every
/// parameter of folio's, for tuples of members and for `ParamSet` itself; a parameter of your
/// own implements it with `Item<'a>` its `SystemParam::Item<'a, 'a>` (a set with a member whose
/// mapping differs is not a `SystemParam`, so it cannot be a system's).
///
/// # Why the members go through `ParamSetMember`
/// In a system's signature, `ParamSet<(Query<&A>,)>` has elided lifetimes inside the query's
/// data (`&'x A`), so in the function's body the member's type is not `'static`, and no
/// [`SystemParam`] impl covers it (a parameter's state must be `'static`). The body therefore
/// never asks for the member's `SystemParam` impl: `p0()` calls a function pointer that the
/// set's `get_param` made for the `'static` member the schedule actually runs, and its return
/// type is the member's [`ParamSetMember::Item`], a mapping that holds for any lifetimes. The
/// set's `SystemParam` impl requires that mapping to be the member's own item type, so the two
/// cannot disagree.
pub trait ParamSetMember {
    /// The member's item, borrowed from the set for `'a`.
    type Item<'a>
    where
        Self: 'a;
}

/// A member's item maker: its state, the system's bookkeeping, the world and the run's tick in,
/// its item out.
pub type MemberGetter<P> = for<'a> unsafe fn(
    NonNull<()>,
    &'a SystemMeta,
    &'a World,
    u32,
) -> <P as ParamSetMember>::Item<'a>;

/// A tuple of [`ParamSetMember`]s: what a [`ParamSet`] keeps per member.
pub trait ParamSetMembers {
    /// Per member, a pointer to its state and its [`MemberGetter`].
    type Members: Copy;
}

/// A [`ParamSet`]'s state: its members' states, and the system's bookkeeping as they see it.
pub struct ParamSetState<S> {
    states: S,
    meta: SystemMeta,
}

/// A member's view of the system's bookkeeping: the same name and last run, its own access
/// and event agers (which the set merges into the system's).
fn member_meta(meta: &SystemMeta) -> SystemMeta {
    SystemMeta {
        name: meta.name.clone(),
        access: Default::default(),
        last_run: meta.last_run,
        event_updaters: Vec::new(),
    }
}

/// Makes member `P`'s item: the [`MemberGetter`] the set hands to its accessors.
///
/// # Safety
/// - `state` points to a live `P::State` built for `world` and refreshed since its archetypes
///   last changed, that nothing else uses for `'a`.
/// - The caller holds `P`'s access ([`SystemParam::access`]) for `'a`.
unsafe fn get_member<'a, P>(
    state: NonNull<()>,
    meta: &'a SystemMeta,
    world: &'a World,
    this_run: u32,
) -> <P as ParamSetMember>::Item<'a>
where
    P: SystemParam + 'static + for<'b> ParamSetMember<Item<'b> = SystemParamItem<'b, 'b, P>>,
{
    // SAFETY: a live `P::State` that only this call uses for `'a` (the caller).
    let state = unsafe { state.cast::<P::State>().as_mut() };
    // SAFETY: the state is for `world`, and the caller holds `P`'s access for `'a`.
    unsafe { P::get_param(state, meta, world, this_run) }
}

macro_rules! param_set {
    ($($P:ident $p:ident $i:tt),*) => {
        impl<$($P: ParamSetMember),*> ParamSetMembers for ($($P,)*) {
            type Members = ($((NonNull<()>, MemberGetter<$P>),)*);
        }

        // SAFETY:
        // - `access` records the union of the members' accesses, each member checked on its own
        //   (`P::access`) and against the system's other parameters, but not against the other
        //   members (`SystemAccess::add_param_set`).
        // - the item hands out one member at a time: each accessor borrows the set mutably and
        //   returns an item no longer-lived than that borrow, so only one member's item is alive
        //   at any moment, and it stays within that member's access, part of the union.
        unsafe impl<$($P),*> SystemParam for ParamSet<'_, '_, ($($P,)*)>
        where
            $($P: SystemParam
                + 'static
                + for<'b> ParamSetMember<Item<'b> = SystemParamItem<'b, 'b, $P>>,)*
        {
            type State = ParamSetState<($($P::State,)*)>;
            type Item<'w, 's> = ParamSet<'w, 's, ($($P,)*)>;

            const GIVES_WORLD: bool = false $(|| $P::GIVES_WORLD)*;
            const DEFERRED: bool = false $(|| $P::DEFERRED)*;

            fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
                let mut members = Vec::new();
                $(
                    let mut member = member_meta(meta);
                    $P::access(&mut member)?;
                    members.push(member.access);
                )*
                let name = meta.name.clone();
                meta.access.add_param_set(&name, &members, param_name::<Self>())
            }

            fn init_state(
                world: &mut World,
                meta: &mut SystemMeta,
            ) -> Result<Self::State, ScheduleError> {
                let mut inner = member_meta(meta);
                let states = ($($P::init_state(world, &mut inner)?,)*);
                meta.event_updaters.append(&mut inner.event_updaters);
                Ok(ParamSetState { states, meta: inner })
            }

            fn update(state: &mut Self::State, world: &World) {
                $($P::update(&mut state.states.$i, world);)*
            }

            unsafe fn get_param<'w, 's>(
                state: &'s mut Self::State,
                meta: &SystemMeta,
                world: &'w World,
                this_run: u32,
            ) -> Self::Item<'w, 's> {
                let ParamSetState { states, meta: inner } = state;
                inner.last_run = meta.last_run;
                let base: *mut ($($P::State,)*) = states;
                ParamSet {
                    members: ($(
                        (
                            // SAFETY: `base` is the set's `&'s mut` borrow of the members'
                            // states, as a pointer; this is the place of one of its fields, so
                            // it is in bounds and not null. No reference is made, so the
                            // fields' pointers do not invalidate each other.
                            unsafe { NonNull::new_unchecked(&raw mut (*base).$i) }.cast::<()>(),
                            get_member::<$P> as MemberGetter<$P>,
                        ),
                    )*),
                    meta: inner,
                    world,
                    this_run,
                    _states: PhantomData,
                }
            }

            fn apply(state: &mut Self::State, world: &mut World, stats: &mut CommandStats) {
                $($P::apply(&mut state.states.$i, world, stats);)*
            }

            fn discard(state: &mut Self::State, world: &mut World) {
                $($P::discard(&mut state.states.$i, world);)*
            }
        }

        impl<$($P: ParamSetMember),*> ParamSet<'_, '_, ($($P,)*)> {
            $(
                #[doc = concat!(
                    "The set's parameter ", stringify!($i), " (counting from 0), for as long as ",
                    "the set stays borrowed: no other member can be had meanwhile."
                )]
                pub fn $p(&mut self) -> $P::Item<'_> {
                    let (state, get) = self.members.$i;
                    // SAFETY:
                    // - `get` is `get_member` of this member's parameter (the set's `get_param`
                    //   made it), and `state` points to that member's state, a field of the
                    //   state the set borrows mutably for `'s`; `&mut self` keeps every other
                    //   use of it away while the item lives.
                    // - the state was built for `world` and refreshed by the set's `update`.
                    // - the system holds the set's access, which covers this member's; the item
                    //   lives only as long as `&mut self`, so no other member's item (which
                    //   could conflict with this one) is alive while it is.
                    unsafe { get(state, self.meta, self.world, self.this_run) }
                }
            )*
        }
    };
}

param_set!(P0 p0 0);
param_set!(P0 p0 0, P1 p1 1);
param_set!(P0 p0 0, P1 p1 1, P2 p2 2);
param_set!(P0 p0 0, P1 p1 1, P2 p2 2, P3 p3 3);
param_set!(P0 p0 0, P1 p1 1, P2 p2 2, P3 p3 3, P4 p4 4);
param_set!(P0 p0 0, P1 p1 1, P2 p2 2, P3 p3 3, P4 p4 4, P5 p5 5);
param_set!(P0 p0 0, P1 p1 1, P2 p2 2, P3 p3 3, P4 p4 4, P5 p5 5, P6 p6 6);
param_set!(P0 p0 0, P1 p1 1, P2 p2 2, P3 p3 3, P4 p4 4, P5 p5 5, P6 p6 6, P7 p7 7);

/// [`ParamSetMember`] for parameter types: each one's item for a borrow `'a` of the set, its
/// `SystemParam::Item<'a, 'a>`.
macro_rules! member {
    ($(impl[$($generics:tt)*] $param:ty => $item:ty;)*) => {$(
        impl<$($generics)*> ParamSetMember for $param {
            type Item<'a>
                = $item
            where
                Self: 'a;
        }
    )*};
}

member! {
    impl[D: QueryData, F: QueryFilter] Query<'_, '_, D, F> => Query<'a, 'a, D, F>;
    impl[R: Send + Sync + 'static] Res<'_, R> => Res<'a, R>;
    impl[R: Send + Sync + 'static] ResMut<'_, R> => ResMut<'a, R>;
    impl[R: Send + Sync + 'static] Option<Res<'_, R>> => Option<Res<'a, R>>;
    impl[R: Send + Sync + 'static] Option<ResMut<'_, R>> => Option<ResMut<'a, R>>;
    impl[T: Send + Sync + 'static] Local<'_, T> => Local<'a, T>;
    impl[] Commands<'_, '_> => Commands<'a, 'a>;
    impl[E: Send + Sync + 'static] EventReader<'_, '_, E> => EventReader<'a, 'a, E>;
    impl[E: Send + Sync + 'static] EventWriter<'_, E> => EventWriter<'a, E>;
    impl[T: Component] RemovedComponents<'_, '_, T> => RemovedComponents<'a, 'a, T>;
    impl[] &World => &'a World;
    impl[T: ParamSetMembers] ParamSet<'_, '_, T> => ParamSet<'a, 'a, T>;
}

macro_rules! tuple_member {
    ($($name:ident),*) => {
        impl<$($name: ParamSetMember),*> ParamSetMember for ($($name,)*) {
            type Item<'a>
                = ($($name::Item<'a>,)*)
            where
                Self: 'a;
        }
    };
}

tuple_member!();
all_tuples!(tuple_member; P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15);

#[cfg(test)]
mod tests;
