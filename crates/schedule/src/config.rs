//! How systems are added: [`IntoSystemConfig`] (one system with its ordering, sets and run
//! conditions) and [`IntoSystemConfigs`] (tuples of them, optionally chained).

use std::any::TypeId;

use crate::access::SystemAccess;
use crate::commands::CommandStats;
use crate::error::ScheduleError;
use crate::param::EventUpdater;
use crate::system::{BoxedCondition, BoxedSystem, FallibleSystem, IntoSystem, System};
use folio_query::World;

/// What an ordering constraint points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Label {
    /// Every system made from this function (or closure) type.
    System(TypeId, &'static str),
    /// Every system in this named set.
    Set(&'static str),
}

/// Turns something into a [`Label`]: a system function, or a set name.
pub trait IntoLabel<Marker> {
    /// The label.
    fn label(&self) -> Label;
}

/// Marks [`IntoLabel`] for set names.
pub struct SetMarker;

impl IntoLabel<SetMarker> for &'static str {
    fn label(&self) -> Label {
        Label::Set(self)
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

/// One system, configured.
pub struct SystemConfig {
    pub(crate) system: BoxedSystem,
    pub(crate) label: TypeId,
    pub(crate) sets: Vec<&'static str>,
    pub(crate) before: Vec<Label>,
    pub(crate) after: Vec<Label>,
    pub(crate) conditions: Vec<BoxedCondition>,
    pub(crate) sync_point: bool,
    /// Runs after this very system just before it in its list ([`IntoSystemConfigs::chain`]),
    /// not after every system of that system's type: a chain may repeat a function, or pass
    /// through several sync points.
    pub(crate) after_previous: bool,
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
        }
    }
}

/// Something that becomes one configured system.
pub trait IntoSystemConfig<Marker>: Sized {
    /// The configuration.
    fn into_config(self) -> SystemConfig;

    /// Runs this system before every system `other` names.
    fn before<M>(self, other: impl IntoLabel<M>) -> SystemConfig {
        let mut config = self.into_config();
        config.before.push(other.label());
        config
    }

    /// Runs this system after every system `other` names.
    fn after<M>(self, other: impl IntoLabel<M>) -> SystemConfig {
        let mut config = self.into_config();
        config.after.push(other.label());
        config
    }

    /// Puts this system in the named set (see [`Schedule::configure_set`](crate::Schedule)).
    fn in_set(self, set: &'static str) -> SystemConfig {
        let mut config = self.into_config();
        config.sets.push(set);
        config
    }

    /// Runs this system only when `condition` (a system returning `bool`, evaluated right
    /// before it) says so.
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
/// reached (they are otherwise applied at the end of the schedule run).
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
    fn into_configs(self) -> SystemConfigs;

    /// Runs each system after the one before it in the list: that very system, so a chain may
    /// name one function twice, or pass through several [`ApplyDeferred`] sync points. Nested
    /// tuples are flattened first: `((a, b), c).chain()` runs `a`, `b`, `c` in that order.
    fn chain(self) -> SystemConfigs {
        let mut configs = self.into_configs();
        for config in configs.0.iter_mut().skip(1) {
            config.after_previous = true;
        }
        configs
    }

    /// Puts every system of the list in the named set.
    fn all_in_set(self, set: &'static str) -> SystemConfigs {
        let mut configs = self.into_configs();
        for config in &mut configs.0 {
            config.sets.push(set);
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

/// The ordering and run conditions of a named set, applied to every system in it.
#[derive(Default)]
pub struct SetConfig {
    pub(crate) before: Vec<Label>,
    pub(crate) after: Vec<Label>,
    pub(crate) conditions: Vec<BoxedCondition>,
}

impl SetConfig {
    /// No constraints.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set's systems run before what `other` names.
    pub fn before<M>(mut self, other: impl IntoLabel<M>) -> Self {
        self.before.push(other.label());
        self
    }

    /// The set's systems run after what `other` names.
    pub fn after<M>(mut self, other: impl IntoLabel<M>) -> Self {
        self.after.push(other.label());
        self
    }

    /// The set's systems run only when `condition` says so; set conditions are evaluated once
    /// per schedule run, before any system runs.
    pub fn run_if<M>(mut self, condition: impl IntoSystem<bool, M>) -> Self {
        self.conditions.push(Box::new(condition.into_system()));
        self
    }
}
