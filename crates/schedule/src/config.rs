//! How systems are added: [`IntoSystemConfig`] (one system with its ordering, sets and run
//! conditions) and [`IntoSystemConfigs`] (tuples of them, optionally chained).

use std::any::{Any, TypeId};
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::access::SystemAccess;
use crate::commands::CommandStats;
use crate::error::ScheduleError;
use crate::param::EventUpdater;
use crate::system::{BoxedCondition, BoxedSystem, FallibleSystem, IntoSystem, System};
use folio_query::World;

/// A system set: a group of systems ordered and gated together ([`IntoSystemConfig::in_set`],
/// [`Schedule::configure_set`](crate::Schedule::configure_set)).
///
/// Sets are values of the game's own types, so a misspelled set does not compile:
///
/// ```
/// use folio_schedule::prelude::*;
///
/// #[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
/// enum GameSet {
///     Physics,
///     Render,
/// }
/// impl SystemSet for GameSet {}
///
/// fn step() {}
/// fn draw() {}
///
/// let mut schedule = Schedule::new();
/// schedule
///     .add_systems((draw.in_set(GameSet::Render), step.in_set(GameSet::Physics)))
///     .configure_set(GameSet::Render, SetConfig::new().after(GameSet::Physics));
/// # let mut world = World::new();
/// # assert_eq!(schedule.order(&mut world).unwrap().len(), 2);
/// ```
///
/// Two sets are the same set when they are of the same type and equal (`==`); a set is shown
/// (in errors) by its `Debug`. There is no blanket implementation, and strings are not sets.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a system set",
    label = "not a `SystemSet`",
    note = "sets are typed: give your own type (usually a fieldless enum) \
            `#[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]` and `impl SystemSet for ... {{}}`; \
            a string does not name a set"
)]
pub trait SystemSet: Debug + Hash + Eq + Clone + Send + Sync + 'static {}

/// The object-safe side of [`SystemSet`], behind [`ErasedSet`].
trait DynSet: Debug + Send + Sync + 'static {
    fn as_any(&self) -> &dyn Any;
    /// Equal to `other`: the same type, and `==`.
    fn dyn_eq(&self, other: &dyn DynSet) -> bool;
    fn dyn_hash(&self, state: &mut dyn Hasher);
}

impl<S: SystemSet> DynSet for S {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn dyn_eq(&self, other: &dyn DynSet) -> bool {
        other.as_any().downcast_ref::<S>() == Some(self)
    }

    fn dyn_hash(&self, mut state: &mut dyn Hasher) {
        TypeId::of::<S>().hash(&mut state);
        self.hash(&mut state);
    }
}

/// A [`SystemSet`] of any type: equal to another when both are of the same type and `==`,
/// hashed by type and value, shown by the set's `Debug`. Cheap to clone.
#[derive(Clone)]
pub struct ErasedSet(Arc<dyn DynSet>);

impl ErasedSet {
    /// Erases `set`'s type.
    pub fn new<S: SystemSet>(set: S) -> Self {
        Self(Arc::new(set))
    }

    /// The set, if it is an `S`.
    pub fn downcast_ref<S: SystemSet>(&self) -> Option<&S> {
        self.0.as_any().downcast_ref()
    }
}

impl<S: SystemSet> From<S> for ErasedSet {
    fn from(set: S) -> Self {
        Self::new(set)
    }
}

impl PartialEq for ErasedSet {
    fn eq(&self, other: &Self) -> bool {
        self.0.dyn_eq(&*other.0)
    }
}

impl Eq for ErasedSet {}

impl Hash for ErasedSet {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.dyn_hash(state);
    }
}

impl Debug for ErasedSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Debug::fmt(&*self.0, f)
    }
}

/// What an ordering constraint points at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Label {
    /// Every system made from this function (or closure) type.
    System(TypeId, &'static str),
    /// Every system in this set, directly or through a set nested in it.
    Set(ErasedSet),
}

/// Turns something into a [`Label`]: a system function, or a [`SystemSet`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` names neither a system nor a system set",
    label = "not a system or a `SystemSet`",
    note = "`before`/`after` take a system function or a value of a type that implements \
            `SystemSet`; a string does not name a set"
)]
pub trait IntoLabel<Marker> {
    /// The label.
    fn label(&self) -> Label;
}

/// Marks [`IntoLabel`] for system sets.
pub struct SetMarker;

impl<S: SystemSet> IntoLabel<SetMarker> for S {
    fn label(&self) -> Label {
        Label::Set(ErasedSet::new(self.clone()))
    }
}

impl<F: IntoSystem<(), M> + 'static, M> IntoLabel<(M,)> for F {
    fn label(&self) -> Label {
        Label::System(TypeId::of::<F>(), std::any::type_name::<F>())
    }
}

/// Marks [`IntoLabel`] and [`IntoSystemConfig`] for systems that return `Result<(), E>`.
pub struct FallibleMarker;

impl<F: IntoSystem<Result<(), E>, M> + 'static, E, M> IntoLabel<(FallibleMarker, E, M)> for F {
    fn label(&self) -> Label {
        Label::System(TypeId::of::<F>(), std::any::type_name::<F>())
    }
}

/// An ordering constraint: what it names, and whether the edges it makes ask for an automatic
/// sync point (see [automatic sync points](crate::Schedule#automatic-sync-points)).
#[derive(Clone, Debug)]
pub(crate) struct Dependency {
    pub(crate) label: Label,
    /// False for the `_ignore_deferred` forms.
    pub(crate) auto_sync: bool,
}

impl Dependency {
    fn new<M>(label: impl IntoLabel<M>, auto_sync: bool) -> Self {
        Self { label: label.label(), auto_sync }
    }
}

/// One system, configured.
pub struct SystemConfig {
    pub(crate) system: BoxedSystem,
    pub(crate) label: TypeId,
    pub(crate) sets: Vec<ErasedSet>,
    pub(crate) before: Vec<Dependency>,
    pub(crate) after: Vec<Dependency>,
    pub(crate) conditions: Vec<BoxedCondition>,
    pub(crate) sync_point: bool,
    /// Runs after this very system just before it in its list ([`IntoSystemConfigs::chain`]),
    /// not after every system of that system's type: a chain may repeat a function, or pass
    /// through several sync points.
    pub(crate) after_previous: bool,
    /// Whether the link to the previous system asks for an automatic sync point (false when a
    /// [`IntoSystemConfigs::chain_ignore_deferred`] made it).
    pub(crate) previous_auto_sync: bool,
}

impl SystemConfig {
    fn new<F: 'static>(system: BoxedSystem) -> Self {
        Self {
            system,
            label: TypeId::of::<F>(),
            sets: Vec::new(),
            before: Vec::new(),
            after: Vec::new(),
            conditions: Vec::new(),
            sync_point: false,
            after_previous: false,
            previous_auto_sync: true,
        }
    }
}

/// Something that becomes one configured system.
pub trait IntoSystemConfig<Marker>: Sized {
    /// The configuration.
    #[track_caller]
    fn into_config(self) -> SystemConfig;

    /// Runs this system before every system `other` names. If this system has
    /// [`Commands`](crate::Commands), they are applied before those systems run (an
    /// [automatic sync point](crate::Schedule#automatic-sync-points)).
    #[track_caller]
    fn before<M>(self, other: impl IntoLabel<M>) -> SystemConfig {
        let mut config = self.into_config();
        config.before.push(Dependency::new(other, true));
        config
    }

    /// Runs this system after every system `other` names, and after their
    /// [`Commands`](crate::Commands) are applied (an
    /// [automatic sync point](crate::Schedule#automatic-sync-points)).
    #[track_caller]
    fn after<M>(self, other: impl IntoLabel<M>) -> SystemConfig {
        let mut config = self.into_config();
        config.after.push(Dependency::new(other, true));
        config
    }

    /// [`IntoSystemConfig::before`] without the automatic sync point: the systems `other` names
    /// do not see this system's commands (unless a sync point lies between them anyway), and
    /// may run in the same parallel segment. Systems ordered after them by orderings that do
    /// not ignore the commands still see them.
    #[track_caller]
    fn before_ignore_deferred<M>(self, other: impl IntoLabel<M>) -> SystemConfig {
        let mut config = self.into_config();
        config.before.push(Dependency::new(other, false));
        config
    }

    /// [`IntoSystemConfig::after`] without the automatic sync point: this system does not see
    /// the commands of the systems `other` names (unless a sync point lies between them
    /// anyway), and may run in the same parallel segment. Systems ordered after this one by
    /// orderings that do not ignore the commands still see them.
    #[track_caller]
    fn after_ignore_deferred<M>(self, other: impl IntoLabel<M>) -> SystemConfig {
        let mut config = self.into_config();
        config.after.push(Dependency::new(other, false));
        config
    }

    /// Puts this system in `set` (see
    /// [`Schedule::configure_set`](crate::Schedule::configure_set)), and so in every set `set`
    /// is nested in.
    #[track_caller]
    fn in_set(self, set: impl SystemSet) -> SystemConfig {
        let mut config = self.into_config();
        config.sets.push(ErasedSet::new(set));
        config
    }

    /// Runs this system only when `condition` (a system returning `bool`, evaluated right
    /// before it) says so.
    #[track_caller]
    fn run_if<M>(self, condition: impl IntoSystem<bool, M>) -> SystemConfig {
        let mut config = self.into_config();
        config.conditions.push(Box::new(condition.into_system()));
        config
    }
}

/// Marks [`IntoSystemConfig`] for systems that return nothing.
pub struct InfallibleMarker;

impl<F: IntoSystem<(), M> + 'static, M> IntoSystemConfig<(InfallibleMarker, M)> for F {
    fn into_config(self) -> SystemConfig {
        SystemConfig::new::<F>(Box::new(self.into_system()))
    }
}

/// A system that returns `Result<(), E>`: a run that returns `Err` does not stop the others;
/// [`Schedule::run`](crate::Schedule::run) reports it as
/// [`ScheduleError::SystemFailed`](crate::ScheduleError::SystemFailed) once the run is
/// complete.
impl<F, E, M> IntoSystemConfig<(FallibleMarker, E, M)> for F
where
    F: IntoSystem<Result<(), E>, M> + 'static,
    E: std::fmt::Display + 'static,
{
    fn into_config(self) -> SystemConfig {
        SystemConfig::new::<F>(Box::new(FallibleSystem::new(self.into_system())))
    }
}

impl IntoSystemConfig<()> for SystemConfig {
    fn into_config(self) -> SystemConfig {
        self
    }
}

/// A sync point: every command buffered by the systems before it is applied when it is
/// reached (they are otherwise applied at the end of the schedule run). An ordering after a
/// system with [`Commands`](crate::Commands) gets one of its own where none lies between
/// ([automatic sync points](crate::Schedule#automatic-sync-points)); place one by hand to
/// apply commands at a point no ordering names, or with the automatic ones turned off.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApplyDeferred;

struct SyncPoint {
    access: SystemAccess,
}

// SAFETY: a sync point's access is exclusive (the executor applies commands there), and its
// `run_unsafe` touches nothing.
unsafe impl System for SyncPoint {
    type Out = ();

    fn name(&self) -> &str {
        "apply_deferred"
    }

    fn access(&self) -> &SystemAccess {
        &self.access
    }

    fn initialize(&mut self, _: &mut World) -> Result<(), ScheduleError> {
        Ok(())
    }

    fn update(&mut self, _: &World) {}

    unsafe fn run_unsafe(&mut self, _: &World, _: u32) {}

    fn run_exclusive(&mut self, _: &mut World, _: u32) {}

    fn apply_deferred(&mut self, _: &mut World, _: &mut CommandStats) {}

    fn discard_deferred(&mut self, _: &mut World) {}

    fn event_updaters(&self) -> &[EventUpdater] {
        &[]
    }
}

impl IntoLabel<()> for ApplyDeferred {
    fn label(&self) -> Label {
        Label::System(TypeId::of::<ApplyDeferred>(), "apply_deferred")
    }
}

impl IntoSystemConfig<()> for ApplyDeferred {
    fn into_config(self) -> SystemConfig {
        let access = SystemAccess { exclusive: true, ..SystemAccess::default() };
        let mut config = SystemConfig::new::<ApplyDeferred>(Box::new(SyncPoint { access }));
        config.sync_point = true;
        config
    }
}

/// A list of configured systems.
pub struct SystemConfigs(pub(crate) Vec<SystemConfig>);

/// Something that becomes a list of configured systems: one system, or a tuple of up to 16.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a system (or a tuple of systems)",
    label = "not a system",
    note = "a system is a function or closure whose parameters are all system parameters \
            (`Query`, `Res`, `ResMut`, `Option<Res>`, `Option<ResMut>`, `Local`, `Commands`, \
            `EventReader`, `EventWriter`, `RemovedComponents`, `&World`, a `ParamSet` of them; \
            up to 16), or a function of `&mut World` alone: an exclusive system takes no other \
            parameter; either returns nothing or `Result<(), E>` with `E: Display`"
)]
pub trait IntoSystemConfigs<Marker>: Sized {
    /// The configurations, in order.
    #[track_caller]
    fn into_configs(self) -> SystemConfigs;

    /// Runs each system after the one before it in the list: that very system, so a chain may
    /// name one function twice, or pass through several [`ApplyDeferred`] sync points. Nested
    /// tuples are flattened first: `((a, b), c).chain()` runs `a`, `b`, `c` in that order.
    ///
    /// A system with [`Commands`](crate::Commands) has them applied before the next one runs
    /// (an [automatic sync point](crate::Schedule#automatic-sync-points)).
    #[track_caller]
    fn chain(self) -> SystemConfigs {
        let mut configs = self.into_configs();
        for config in configs.0.iter_mut().skip(1) {
            config.after_previous = true;
        }
        configs
    }

    /// [`IntoSystemConfigs::chain`] without automatic sync points: each system runs after the
    /// one before it in the list but does not see its commands (unless a sync point lies
    /// between them anyway); a system after the chain, ordered by a plain ordering, still sees
    /// them. A link made here stays without a point when an outer `chain` flattens this list
    /// into its own.
    #[track_caller]
    fn chain_ignore_deferred(self) -> SystemConfigs {
        let mut configs = self.into_configs();
        for config in configs.0.iter_mut().skip(1) {
            config.after_previous = true;
            config.previous_auto_sync = false;
        }
        configs
    }

    /// Puts every system of the list in `set`.
    #[track_caller]
    fn all_in_set(self, set: impl SystemSet) -> SystemConfigs {
        let set = ErasedSet::new(set);
        let mut configs = self.into_configs();
        for config in &mut configs.0 {
            config.sets.push(set.clone());
        }
        configs
    }
}

/// Marks [`IntoSystemConfigs`] for a single system.
pub struct SingleMarker;

/// Marks [`IntoSystemConfigs`] for tuples.
pub struct TupleMarker;

impl<T: IntoSystemConfig<M>, M> IntoSystemConfigs<(SingleMarker, M)> for T {
    fn into_configs(self) -> SystemConfigs {
        SystemConfigs(vec![self.into_config()])
    }
}

impl IntoSystemConfigs<()> for SystemConfigs {
    fn into_configs(self) -> SystemConfigs {
        self
    }
}

macro_rules! tuple_configs {
    ($(($name:ident, $marker:ident)),*) => {
        #[allow(non_snake_case)]
        impl<$($name: IntoSystemConfigs<$marker>, $marker),*> IntoSystemConfigs<(TupleMarker, $($marker,)*)> for ($($name,)*) {
            fn into_configs(self) -> SystemConfigs {
                let ($($name,)*) = self;
                let mut all = Vec::new();
                $(all.extend($name.into_configs().0);)*
                SystemConfigs(all)
            }
        }
    };
}

macro_rules! all_pairs {
    ($m:ident; $($all:tt),*) => { all_pairs!(@step $m; []; $($all),*); };
    (@step $m:ident; [$($done:tt),*]; $next:tt $(, $rest:tt)*) => {
        $m!($($done,)* $next);
        all_pairs!(@step $m; [$($done,)* $next]; $($rest),*);
    };
    (@step $m:ident; [$($done:tt),*];) => {};
}

all_pairs!(tuple_configs;
    (S0, M0), (S1, M1), (S2, M2), (S3, M3), (S4, M4), (S5, M5), (S6, M6), (S7, M7),
    (S8, M8), (S9, M9), (S10, M10), (S11, M11), (S12, M12), (S13, M13), (S14, M14), (S15, M15)
);

/// The ordering, run conditions and parent sets of a [`SystemSet`], applied to every system
/// in it (see [`Schedule::configure_set`](crate::Schedule::configure_set)).
#[derive(Default)]
pub struct SetConfig {
    pub(crate) before: Vec<Dependency>,
    pub(crate) after: Vec<Dependency>,
    pub(crate) conditions: Vec<BoxedCondition>,
    pub(crate) parents: Vec<ErasedSet>,
}

impl SetConfig {
    /// No constraints.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set's systems run before what `other` names, their
    /// [`Commands`](crate::Commands) applied first (an
    /// [automatic sync point](crate::Schedule#automatic-sync-points)).
    pub fn before<M>(mut self, other: impl IntoLabel<M>) -> Self {
        self.before.push(Dependency::new(other, true));
        self
    }

    /// The set's systems run after what `other` names, and after its
    /// [`Commands`](crate::Commands) are applied (an
    /// [automatic sync point](crate::Schedule#automatic-sync-points)).
    pub fn after<M>(mut self, other: impl IntoLabel<M>) -> Self {
        self.after.push(Dependency::new(other, true));
        self
    }

    /// [`SetConfig::before`] without the automatic sync point.
    pub fn before_ignore_deferred<M>(mut self, other: impl IntoLabel<M>) -> Self {
        self.before.push(Dependency::new(other, false));
        self
    }

    /// [`SetConfig::after`] without the automatic sync point.
    pub fn after_ignore_deferred<M>(mut self, other: impl IntoLabel<M>) -> Self {
        self.after.push(Dependency::new(other, false));
        self
    }

    /// The set's systems run only when `condition` says so; set conditions are evaluated once
    /// per schedule run, before any system runs, in the order the sets were first configured.
    #[track_caller]
    pub fn run_if<M>(mut self, condition: impl IntoSystem<bool, M>) -> Self {
        self.conditions.push(Box::new(condition.into_system()));
        self
    }

    /// Nests the set in `parent`: every system in the set is in `parent` too (and in every set
    /// `parent` is nested in), so it follows `parent`'s ordering and run conditions. A cycle
    /// of nesting (a set in itself, or `A` in `B` in `A`) is
    /// [`ScheduleError::SetCycle`](crate::ScheduleError::SetCycle) when the schedule is built.
    pub fn in_set(mut self, parent: impl SystemSet) -> Self {
        self.parents.push(ErasedSet::new(parent));
        self
    }
}
