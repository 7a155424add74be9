//! [`system_param!`](crate::system_param): a struct of parameters that is a parameter itself,
//! so systems that share a group of them (the physics queries and their settings, say) name it
//! once. A `macro_rules!` stand-in for a derive, as folio uses no proc-macros.

/// Declares a struct whose fields are system parameters, and makes it a [`SystemParam`]
/// (and a [`ParamSetMember`]) itself: a system taking it gets every field, with the access of
/// all of them, checked against each other and against the system's other parameters.
///
/// The struct has the lifetimes `'w` (the world's borrow: `Query`, `Res`, `ResMut`, `Commands`,
/// `EventReader`, `EventWriter`, `&'w World`) and `'s` (the system's state: `Query`, `Local`,
/// `Commands`, `EventReader`), written as on the parameters' own types; component types in a
/// query are written `&'static T` / `&'static mut T`. The macro adds one hidden field (a
/// marker for the two lifetimes).
///
/// ```
/// use folio_schedule::prelude::*;
/// use folio_schedule::system_param;
///
/// struct Position(f32);
/// struct Velocity(f32);
/// struct Gravity(f32);
///
/// system_param! {
///     /// What every physics system needs.
///     struct Physics<'w, 's> {
///         bodies: Query<'w, 's, (&'static mut Position, &'static mut Velocity)>,
///         gravity: Res<'w, Gravity>,
///     }
/// }
///
/// fn fall(mut physics: Physics) {
///     let g = physics.gravity.0;
///     for (mut p, mut v) in physics.bodies.iter_mut() {
///         v.0 += g;
///         p.0 += v.0;
///     }
/// }
///
/// let mut world = World::new();
/// world.insert_resource(Gravity(-1.0));
/// let e = world.spawn((Position(10.0), Velocity(0.0)));
/// let mut schedule = Schedule::new();
/// schedule.add_systems(fall);
/// schedule.run(&mut world).unwrap();
/// assert_eq!(world.get::<Position>(e).unwrap().0, 9.0);
/// ```
///
/// [`SystemParam`]: crate::SystemParam
/// [`ParamSetMember`]: crate::ParamSetMember
#[macro_export]
macro_rules! system_param {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident<'w, 's> {
            $($(#[$field_attr:meta])* $field_vis:vis $field:ident : $ty:ty),* $(,)?
        }
    ) => {
        $(#[$attr])*
        $vis struct $name<'w, 's> {
            $($(#[$field_attr])* $field_vis $field: $ty,)*
            #[doc(hidden)]
            pub __folio_lifetimes: ::core::marker::PhantomData<(&'w (), &'s ())>,
        }

        const _: () = {
            /// The fields as one tuple parameter, for given lifetimes.
            type Fields<'w, 's> = ($($ty,)*);

            // SAFETY: every method forwards to the tuple of the fields (their access is the
            // tuple's: each field's, checked against the ones before it), and the item is the
            // tuple's item with its elements moved into the fields.
            unsafe impl $crate::SystemParam for $name<'_, '_> {
                type State = <Fields<'static, 'static> as $crate::SystemParam>::State;
                type Item<'w, 's> = $name<'w, 's>;

                const GIVES_WORLD: bool =
                    <Fields<'static, 'static> as $crate::SystemParam>::GIVES_WORLD;
                const VALIDATES: bool =
                    <Fields<'static, 'static> as $crate::SystemParam>::VALIDATES;
                const DEFERRED: bool =
                    <Fields<'static, 'static> as $crate::SystemParam>::DEFERRED;

                fn access(meta: &mut $crate::SystemMeta) -> ::core::result::Result<(), $crate::ScheduleError> {
                    <Fields<'static, 'static> as $crate::SystemParam>::access(meta)
                }

                fn init_state(
                    world: &mut $crate::World,
                    meta: &mut $crate::SystemMeta,
                ) -> ::core::result::Result<Self::State, $crate::ScheduleError> {
                    <Fields<'static, 'static> as $crate::SystemParam>::init_state(world, meta)
                }

                fn update(state: &mut Self::State, world: &$crate::World) {
                    <Fields<'static, 'static> as $crate::SystemParam>::update(state, world);
                }

                unsafe fn validate_param(
                    state: &Self::State,
                    meta: &$crate::SystemMeta,
                    world: &$crate::World,
                    this_run: u32,
                ) -> ::core::result::Result<(), $crate::ParamInvalid> {
                    // SAFETY: forwarded from the caller.
                    unsafe {
                        <Fields<'static, 'static> as $crate::SystemParam>::validate_param(
                            state, meta, world, this_run,
                        )
                    }
                }

                unsafe fn get_param<'w, 's>(
                    state: &'s mut Self::State,
                    meta: &$crate::SystemMeta,
                    world: &'w $crate::World,
                    this_run: u32,
                ) -> $name<'w, 's> {
                    // SAFETY: forwarded from the caller: the state is the tuple's, built for
                    // `world`, and the caller holds the tuple's access.
                    let ($($field,)*) = unsafe {
                        <Fields<'static, 'static> as $crate::SystemParam>::get_param(
                            state, meta, world, this_run,
                        )
                    };
                    $name { $($field,)* __folio_lifetimes: ::core::marker::PhantomData }
                }

                fn apply(
                    state: &mut Self::State,
                    world: &mut $crate::World,
                    stats: &mut $crate::CommandStats,
                ) {
                    <Fields<'static, 'static> as $crate::SystemParam>::apply(state, world, stats);
                }

                fn discard(state: &mut Self::State, world: &mut $crate::World) {
                    <Fields<'static, 'static> as $crate::SystemParam>::discard(state, world);
                }
            }

            impl $crate::ParamSetMember for $name<'_, '_> {
                type Item<'a>
                    = $name<'a, 'a>
                where
                    Self: 'a;
            }
        };
    };
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::{IntoSystem, ScheduleError, System};

    #[derive(Debug, PartialEq)]
    struct A(u32);
    #[derive(Debug, PartialEq)]
    struct B(u32);
    #[derive(Debug, Default, PartialEq)]
    struct Total(u32);
    struct Spawned;

    crate::system_param! {
        /// Everything the tests' systems share, of every kind of parameter.
        struct Kit<'w, 's> {
            a: Query<'w, 's, (Entity, &'static mut A)>,
            total: ResMut<'w, Total>,
            runs: Local<'s, u32>,
            commands: Commands<'w, 's>,
            spawned: EventWriter<'w, Spawned>,
        }
    }

    crate::system_param! {
        /// A group inside a group, beside a plain parameter.
        struct Outer<'w, 's> {
            kit: Kit<'w, 's>,
            b: Query<'w, 's, &'static B>,
        }
    }

    fn serial() -> Schedule {
        let mut schedule = Schedule::new();
        schedule.set_min_parallel_work(std::time::Duration::MAX);
        schedule
    }

    #[test]
    fn a_struct_of_parameters_is_a_parameter() {
        fn tally(mut kit: Kit) {
            *kit.runs += 1;
            let mut sum = 0;
            for (_, mut a) in kit.a.iter_mut() {
                a.0 += 1;
                sum += a.0;
            }
            kit.total.0 = sum * 100 + *kit.runs;
            kit.commands.spawn((B(sum),));
            kit.spawned.send(Spawned);
        }
        let mut world = World::new();
        world.insert_resource(Total::default());
        world.spawn((A(1),));
        world.spawn((A(2),));
        let mut schedule = serial();
        schedule.add_systems(tally);
        schedule.run(&mut world).unwrap();
        schedule.run(&mut world).unwrap();
        assert_eq!(world.resource::<Total>(), Some(&Total(7 * 100 + 2)), "the Local kept count");
        let mut bs: Vec<u32> = world.query::<&B>().iter(&world).map(|b| b.0).collect();
        bs.sort_unstable();
        assert_eq!(bs, [5, 7], "each run's commands were applied");
        assert_eq!(world.resource::<Events<Spawned>>().unwrap().len(), 1, "and its events aged");
    }

    #[test]
    fn groups_nest_and_are_checked_like_their_fields() {
        fn outer(mut outer: Outer) {
            let bs = outer.b.iter().count() as u32;
            outer.kit.total.0 += bs;
        }
        let mut world = World::new();
        world.insert_resource(Total::default());
        world.spawn((B(0),));
        let mut schedule = serial();
        schedule.add_systems(outer);
        schedule.run(&mut world).unwrap();
        assert_eq!(world.resource::<Total>(), Some(&Total(1)));

        // The fields conflict with a parameter beside the group, as they would on their own.
        fn beside(_: Kit, _: Query<&A>) {}
        let err = Schedule::new().try_add_systems(beside).err().unwrap();
        assert!(matches!(err, ScheduleError::ConflictingParams { .. }), "{err}");
        fn twice(_: Kit, _: Res<Total>) {}
        assert!(Schedule::new().try_add_systems(twice).is_err());
        // The group is ordered by its fields' access.
        fn reads_a(_: Query<&A>) {}
        let kit = IntoSystem::into_system(|_: Kit| {});
        assert!(kit.access().conflicts_with(IntoSystem::into_system(reads_a).access()));
    }

    #[test]
    fn a_group_is_a_param_set_member() {
        fn either(mut set: ParamSet<(Kit, Query<&mut A>)>) {
            for (_, mut a) in set.p0().a.iter_mut() {
                a.0 *= 10;
            }
            for mut a in set.p1().iter_mut() {
                a.0 += 1;
            }
        }
        let mut world = World::new();
        world.insert_resource(Total::default());
        let e = world.spawn((A(1),));
        let mut schedule = serial();
        schedule.add_systems(either);
        schedule.run(&mut world).unwrap();
        assert_eq!(world.get::<A>(e), Some(&A(11)));
    }
}
