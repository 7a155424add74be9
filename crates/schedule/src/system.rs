//! Systems: plain functions whose parameters are [`SystemParam`]s (up to 16), closures of the
//! same shape, and exclusive functions of `&mut World`.

use std::fmt;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, Location, catch_unwind, resume_unwind};

use folio_query::{MAX_CHANGE_AGE, World, WorldId};

use crate::access::SystemAccess;
use crate::commands::CommandStats;
use crate::error::ScheduleError;
use crate::param::EventUpdater;
use crate::param::{SystemMeta, SystemParam, SystemParamItem, all_tuples};
use crate::single::ParamInvalid;

/// A runnable system.
///
/// Systems are usually made from functions and closures ([`IntoSystem`]); implement this trait
/// by hand only for what those cannot express.
///
/// # Safety
/// The executor runs systems whose [`System::access`] does not conflict at the same time, on
/// different threads, each with a shared `&World`. So an implementation promises:
/// - `access` records everything [`System::run_unsafe`] reads (as reads) and writes (as
///   writes), components and resources alike, and does not change once the system is
///   [initialized](System::initialize); a system that touches anything it cannot name (as
///   through `&World`'s readers) declares that it reads the whole world.
/// - A system whose `access` is exclusive is run only through [`System::run_exclusive`].
pub unsafe trait System: Send + Sync + 'static {
    /// What a run returns (`()` for systems, `bool` for run conditions).
    type Out;

    /// The system's name.
    fn name(&self) -> &str;

    /// What it touches (known before it sees a world).
    fn access(&self) -> &SystemAccess;

    /// `Err` if the system can never run (its own parameters conflict).
    fn validate(&self) -> Result<(), ScheduleError> {
        Ok(())
    }

    /// Prepares the system's state for `world` (once per world).
    fn initialize(&mut self, world: &mut World) -> Result<(), ScheduleError>;

    /// Refreshes the state before a run (queries match new archetypes).
    fn update(&mut self, world: &World);

    /// Runs the system through a shared world.
    ///
    /// # Safety
    /// - The system was initialized for `world` and updated since the world last changed
    ///   structurally; the caller holds [`System::access`] for the duration of the call.
    /// - The system is not exclusive.
    unsafe fn run_unsafe(&mut self, world: &World, this_run: u32) -> Self::Out;

    /// Runs the system with the world to itself (exclusive systems; others update and run).
    fn run_exclusive(&mut self, world: &mut World, this_run: u32) -> Self::Out;

    /// [`System::run_unsafe`], unless one of the system's parameters cannot be built for this
    /// run ([`SystemParam::validate_param`]: a [`Single`](crate::Single) whose query matches
    /// no entity or several): then the system does not run, and `Err` says which parameter
    /// and why. What the executor calls; by default, always runs.
    ///
    /// # Safety
    /// - As for [`System::run_unsafe`].
    unsafe fn try_run_unsafe(
        &mut self,
        world: &World,
        this_run: u32,
    ) -> Result<Self::Out, ParamInvalid> {
        // SAFETY: forwarded from the caller.
        Ok(unsafe { self.run_unsafe(world, this_run) })
    }

    /// [`System::run_exclusive`], unless a parameter cannot be built for this run, as in
    /// [`System::try_run_unsafe`].
    fn try_run_exclusive(
        &mut self,
        world: &mut World,
        this_run: u32,
    ) -> Result<Self::Out, ParamInvalid> {
        Ok(self.run_exclusive(world, this_run))
    }

    /// Applies deferred commands.
    fn apply_deferred(&mut self, world: &mut World, stats: &mut CommandStats);

    /// Throws deferred commands away.
    fn discard_deferred(&mut self, world: &mut World);

    /// Whether [`System::apply_deferred`] can have work to do: the system has a parameter that
    /// buffers changes ([`SystemParam::DEFERRED`], as [`Commands`](crate::Commands) does). A
    /// [`Schedule`](crate::Schedule) puts an automatic sync point between such a system and a
    /// system ordered after it (see [automatic sync points](crate::Schedule#automatic-sync-points)).
    /// `false` by default.
    fn has_deferred(&self) -> bool {
        false
    }

    /// The event types it uses, with the function that ages each.
    fn event_updaters(&self) -> &[EventUpdater];

    /// Clamps the tick of the system's last run to at most
    /// [`MAX_CHANGE_AGE`](folio_query::MAX_CHANGE_AGE) before `now`, as
    /// [`World::check_change_ticks`] clamps the stored ticks: a [`Schedule`](crate::Schedule)
    /// calls it on its systems and run conditions whenever it calls that, so a system that a
    /// run condition keeps off for 2^32 ticks or more does not read its last run as recent
    /// again. Nothing by default (a system that keeps no tick).
    fn check_change_tick(&mut self, _now: u32) {}

    /// Whether a run can fail without panicking (a system that returns `Result`, run through
    /// [`FallibleSystem`]): the schedule asks such systems for [`System::take_failure`] after
    /// each run, and no others. `false` by default.
    fn can_fail(&self) -> bool {
        false
    }

    /// The error of the system's last failed run, as text, taken (the next call says `None`
    /// until a run fails again). `None` by default.
    fn take_failure(&mut self) -> Option<String> {
        None
    }

    /// Tells a system whose name holds the place it was added at (a closure's, see
    /// [`IntoSystem::into_system`]) that it is the `position`th (from 1) of `count` systems
    /// added in the same call, so that its name tells it from the others: they all share that
    /// place. Nothing by default.
    fn note_position(&mut self, _position: usize, _count: usize) {}

    /// Runs the system once on its own: initializes it if needed, runs it with a fresh tick,
    /// and applies its commands.
    ///
    /// A system one of whose parameters cannot be built now (a [`Single`](crate::Single) that
    /// does not match exactly one entity) does not run: [`ScheduleError::InvalidParam`].
    ///
    /// If the system panics, the commands it buffered in that run are thrown away (as a
    /// [`Schedule`](crate::Schedule) does; entities they reserved are not left behind), then
    /// the panic continues.
    fn run(&mut self, world: &mut World) -> Result<Self::Out, ScheduleError> {
        self.initialize(world)?;
        let this_run = world.increment_change_tick();
        let out = match catch_unwind(AssertUnwindSafe(|| self.try_run_exclusive(world, this_run))) {
            Ok(out) => out.map_err(|invalid| invalid.into_error(self.name()))?,
            Err(payload) => {
                self.discard_deferred(world);
                resume_unwind(payload);
            }
        };
        self.apply_deferred(world, &mut CommandStats::default());
        Ok(out)
    }
}

/// A boxed system returning nothing.
pub type BoxedSystem = Box<dyn System<Out = ()>>;
/// A boxed run condition.
pub type BoxedCondition = Box<dyn System<Out = bool>>;

/// Turns something into a [`System`]: functions and closures of system parameters, and
/// `FnMut(&mut World)`.
pub trait IntoSystem<Out, Marker>: Sized {
    /// The system it becomes.
    type System: System<Out = Out>;

    /// Makes the system.
    ///
    /// A closure's type name says only which function it is in (`setup::{{closure}}`), so a
    /// system made from a closure is named after that and the place of the call that made it:
    /// the user's call to [`Schedule::add_systems`](crate::Schedule::add_systems),
    /// `run_if`, `run_system_once` and the like, which all pass their caller's place down
    /// (`#[track_caller]`): `setup::{{closure}} (src/main.rs:12:14)`. Systems added together
    /// in one call are numbered: `(src/main.rs:12:14, system 2 of 3)`. A function keeps its
    /// name (`move_players`).
    #[track_caller]
    fn into_system(self) -> Self::System;
}

/// A function whose parameters are all system parameters.
pub trait SystemParamFunction<Marker>: Send + Sync + 'static {
    /// The parameters, as a tuple.
    type Param: SystemParam;
    /// The return type.
    type Out;

    /// Calls the function.
    fn run(&mut self, param: SystemParamItem<'_, '_, Self::Param>) -> Self::Out;
}

/// Marks [`IntoSystem`] for parameter functions.
pub struct IsFunctionSystem;
/// Marks [`IntoSystem`] for `FnMut(&mut World)`.
pub struct IsExclusiveSystem;

/// A system made from a function of system parameters.
pub struct FunctionSystem<F: SystemParamFunction<M>, M> {
    func: F,
    state: Option<<F::Param as SystemParam>::State>,
    meta: SystemMeta,
    /// The world the state was built for.
    world: Option<WorldId>,
    /// A conflict among the function's own parameters, found when it was made.
    error: Option<ScheduleError>,
    /// Whether the name ends with the place the system was made at (a closure's does).
    named_by_place: bool,
    _marker: PhantomData<fn() -> M>,
}

impl<F: SystemParamFunction<M>, M: 'static> FunctionSystem<F, M> {
    #[track_caller]
    fn new(func: F) -> Self {
        let mut meta = SystemMeta::new("");
        let named_by_place;
        (meta.name, named_by_place) = system_name(std::any::type_name::<F>(), Location::caller());
        let error = F::Param::access(&mut meta).err();
        Self { func, state: None, meta, world: None, error, named_by_place, _marker: PhantomData }
    }

    /// The conflict among the function's parameters, if any (such a system cannot run).
    pub fn param_error(&self) -> Option<&ScheduleError> {
        self.error.as_ref()
    }

    /// Builds the parameters and calls the function; with `validate`, first asks the
    /// parameters that can refuse a run ([`SystemParam::VALIDATES`]) and, if one does, returns
    /// its refusal without running (the last-run tick stays, so the next run still sees the
    /// changes since the last one that happened).
    ///
    /// # Safety
    /// - As for [`System::run_unsafe`].
    #[inline(always)]
    unsafe fn run_params(
        &mut self,
        world: &World,
        this_run: u32,
        validate: bool,
    ) -> Result<F::Out, ParamInvalid> {
        debug_assert_eq!(self.world, Some(world.id()), "system run on another world");
        let state = self.state.as_mut().expect("system not initialized");
        // A system that did not run for most of the tick range (a run condition kept it off)
        // counts as having last run `MAX_CHANGE_AGE` ago, the oldest a stored tick can be
        // after `World::check_change_ticks`.
        if this_run.wrapping_sub(self.meta.last_run) > MAX_CHANGE_AGE {
            self.meta.last_run = this_run.wrapping_sub(MAX_CHANGE_AGE);
        }
        if validate && F::Param::VALIDATES {
            // SAFETY: forwarded from the caller: the state is for `world`, the access is held.
            unsafe { F::Param::validate_param(state, &self.meta, world, this_run)? };
        }
        let (func, meta) = (&mut self.func, &self.meta);
        let mut call = || {
            // SAFETY: forwarded from the caller: the state is for `world`, the access is held.
            let params = unsafe { F::Param::get_param(state, meta, world, this_run) };
            func.run(params)
        };
        let out = if F::Param::GIVES_WORLD {
            // A query state the function runs through its `&World` takes this run's tick, not
            // a newer one from the world's counter: in a parallel segment that counter is
            // already past every system of the segment, so such a state would never see the
            // writes of the systems ordered after this one.
            folio_query::with_system_tick(world.id(), this_run, call)
        } else {
            call()
        };
        self.meta.last_run = this_run;
        Ok(out)
    }
}

// SAFETY: `access` is the parameters' (`SystemParam::access`, whose implementations promise it
// covers their items); `run_unsafe` touches the world only through those items.
unsafe impl<F: SystemParamFunction<M>, M: 'static> System for FunctionSystem<F, M> {
    type Out = F::Out;

    fn name(&self) -> &str {
        &self.meta.name
    }

    fn access(&self) -> &SystemAccess {
        &self.meta.access
    }

    fn validate(&self) -> Result<(), ScheduleError> {
        self.error.clone().map_or(Ok(()), Err)
    }

    fn has_deferred(&self) -> bool {
        F::Param::DEFERRED
    }

    fn initialize(&mut self, world: &mut World) -> Result<(), ScheduleError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        if self.world == Some(world.id()) {
            return Ok(());
        }
        self.meta.event_updaters.clear();
        self.state = Some(F::Param::init_state(world, &mut self.meta)?);
        self.world = Some(world.id());
        // The first run sees every component as added and changed.
        self.meta.last_run = world.change_tick().wrapping_sub(MAX_CHANGE_AGE);
        Ok(())
    }

    fn update(&mut self, world: &World) {
        let state = self.state.as_mut().expect("system not initialized");
        F::Param::update(state, world);
    }

    unsafe fn run_unsafe(&mut self, world: &World, this_run: u32) -> F::Out {
        // SAFETY: forwarded from the caller.
        match unsafe { self.run_params(world, this_run, false) } {
            Ok(out) => out,
            Err(_) => unreachable!("parameters are validated only when asked"),
        }
    }

    fn run_exclusive(&mut self, world: &mut World, this_run: u32) -> F::Out {
        self.update(world);
        // SAFETY: initialized (the state exists, `update` checked) and `&mut World` holds
        // every access there is.
        unsafe { self.run_unsafe(world, this_run) }
    }

    #[inline]
    unsafe fn try_run_unsafe(
        &mut self,
        world: &World,
        this_run: u32,
    ) -> Result<F::Out, ParamInvalid> {
        // SAFETY: forwarded from the caller.
        unsafe { self.run_params(world, this_run, true) }
    }

    fn try_run_exclusive(
        &mut self,
        world: &mut World,
        this_run: u32,
    ) -> Result<F::Out, ParamInvalid> {
        self.update(world);
        // SAFETY: as in `run_exclusive`.
        unsafe { self.try_run_unsafe(world, this_run) }
    }

    fn apply_deferred(&mut self, world: &mut World, stats: &mut CommandStats) {
        if let Some(state) = self.state.as_mut() {
            F::Param::apply(state, world, stats);
        }
    }

    fn discard_deferred(&mut self, world: &mut World) {
        if let Some(state) = self.state.as_mut() {
            F::Param::discard(state, world);
        }
    }

    fn event_updaters(&self) -> &[EventUpdater] {
        &self.meta.event_updaters
    }

    fn check_change_tick(&mut self, now: u32) {
        if now.wrapping_sub(self.meta.last_run) > MAX_CHANGE_AGE {
            self.meta.last_run = now.wrapping_sub(MAX_CHANGE_AGE);
        }
    }

    fn note_position(&mut self, position: usize, count: usize) {
        if self.named_by_place {
            add_position(&mut self.meta.name, position, count);
            if let Some(ScheduleError::ConflictingParams { system, .. }) = &mut self.error {
                system.clone_from(&self.meta.name);
            }
        }
    }
}

/// A system's name, and whether it ends with `caller`, the place the system was made at: a
/// function's short type name (`move_players`); a closure's (whose type name says only which
/// function it is in) followed by that place: `setup::{{closure}} (src/main.rs:12:14)`.
fn system_name(type_name: &str, caller: &Location<'_>) -> (String, bool) {
    match type_name.find("::{{closure}}") {
        Some(at) => {
            let (function, closure) = type_name.split_at(at);
            let name = format!("{}{closure} ({caller})", crate::param::short_type_name(function));
            (name, true)
        }
        None => (crate::param::short_type_name(type_name), false),
    }
}

/// Adds to a name that ends with its place (`f::{{closure}} (src/main.rs:12:14)`) which of
/// the `count` systems added at that place it is: `(src/main.rs:12:14, system 2 of 3)`.
fn add_position(name: &mut String, position: usize, count: usize) {
    if count > 1 && name.ends_with(')') {
        name.pop();
        name.push_str(&format!(", system {position} of {count})"));
    }
}

impl<F: SystemParamFunction<M>, M: 'static> IntoSystem<F::Out, (IsFunctionSystem, M)> for F {
    type System = FunctionSystem<F, M>;

    #[track_caller]
    fn into_system(self) -> Self::System {
        FunctionSystem::new(self)
    }
}

/// A system with the world to itself: `FnMut(&mut World)`, returning `Out` (`()`, or a
/// `Result` for a system that can fail).
pub struct ExclusiveSystem<F, Out = ()> {
    func: F,
    name: String,
    /// Whether the name ends with the place the system was made at (a closure's does).
    named_by_place: bool,
    access: SystemAccess,
    _out: PhantomData<fn() -> Out>,
}

// SAFETY: the access is exclusive, and `run_unsafe` never touches the world (it panics).
unsafe impl<F, Out> System for ExclusiveSystem<F, Out>
where
    F: FnMut(&mut World) -> Out + Send + Sync + 'static,
    Out: 'static,
{
    type Out = Out;

    fn name(&self) -> &str {
        &self.name
    }

    fn access(&self) -> &SystemAccess {
        &self.access
    }

    fn initialize(&mut self, _: &mut World) -> Result<(), ScheduleError> {
        Ok(())
    }

    fn update(&mut self, _: &World) {}

    unsafe fn run_unsafe(&mut self, _: &World, _: u32) -> Out {
        unreachable!("exclusive systems run through run_exclusive")
    }

    fn run_exclusive(&mut self, world: &mut World, _: u32) -> Out {
        (self.func)(world)
    }

    fn apply_deferred(&mut self, _: &mut World, _: &mut CommandStats) {}

    fn discard_deferred(&mut self, _: &mut World) {}

    fn event_updaters(&self) -> &[EventUpdater] {
        &[]
    }

    fn note_position(&mut self, position: usize, count: usize) {
        if self.named_by_place {
            add_position(&mut self.name, position, count);
        }
    }
}

impl<F, Out> IntoSystem<Out, IsExclusiveSystem> for F
where
    F: FnMut(&mut World) -> Out + Send + Sync + 'static,
    Out: 'static,
{
    type System = ExclusiveSystem<F, Out>;

    #[track_caller]
    fn into_system(self) -> Self::System {
        let access = SystemAccess { exclusive: true, ..SystemAccess::default() };
        let (name, named_by_place) = system_name(std::any::type_name::<F>(), Location::caller());
        ExclusiveSystem { func: self, name, named_by_place, access, _out: PhantomData }
    }
}

/// The [`System`] methods an adapter (a system wrapping another, in its field `inner`) takes
/// over from the system it wraps unchanged.
macro_rules! forward_to_inner {
    () => {
        fn access(&self) -> &SystemAccess {
            self.inner.access()
        }

        fn validate(&self) -> Result<(), ScheduleError> {
            self.inner.validate()
        }

        fn initialize(&mut self, world: &mut World) -> Result<(), ScheduleError> {
            self.inner.initialize(world)
        }

        fn update(&mut self, world: &World) {
            self.inner.update(world);
        }

        fn apply_deferred(&mut self, world: &mut World, stats: &mut CommandStats) {
            self.inner.apply_deferred(world, stats);
        }

        fn discard_deferred(&mut self, world: &mut World) {
            self.inner.discard_deferred(world);
        }

        fn event_updaters(&self) -> &[EventUpdater] {
            self.inner.event_updaters()
        }

        fn check_change_tick(&mut self, now: u32) {
            self.inner.check_change_tick(now);
        }

        fn has_deferred(&self) -> bool {
            self.inner.has_deferred()
        }
    };
}
pub(crate) use forward_to_inner;

/// A system that returns `Result<(), E>`, as the schedule runs it: a run that returns `Err`
/// is kept (as its error's `Display` text) until the schedule asks for it
/// ([`System::take_failure`]), and reported by [`Schedule::run`](crate::Schedule::run) as
/// [`ScheduleError::SystemFailed`] once the run is complete.
pub struct FallibleSystem<S, E> {
    inner: S,
    failure: Option<String>,
    _error: PhantomData<fn() -> E>,
}

impl<S, E> FallibleSystem<S, E> {
    /// `inner`, its failures kept.
    pub fn new(inner: S) -> Self {
        Self { inner, failure: None, _error: PhantomData }
    }

    fn keep(&mut self, out: Result<(), E>)
    where
        E: fmt::Display,
    {
        if let Err(error) = out {
            self.failure = Some(error.to_string());
        }
    }
}

// SAFETY: every method forwards to `inner`, whose access this is; `run_unsafe` and
// `run_exclusive` only look at what it returned.
unsafe impl<S, E> System for FallibleSystem<S, E>
where
    S: System<Out = Result<(), E>>,
    E: fmt::Display + 'static,
{
    type Out = ();

    forward_to_inner!();

    fn name(&self) -> &str {
        self.inner.name()
    }

    unsafe fn run_unsafe(&mut self, world: &World, this_run: u32) {
        // SAFETY: forwarded from the caller, with the same access.
        let out = unsafe { self.inner.run_unsafe(world, this_run) };
        self.keep(out);
    }

    fn run_exclusive(&mut self, world: &mut World, this_run: u32) {
        let out = self.inner.run_exclusive(world, this_run);
        self.keep(out);
    }

    unsafe fn try_run_unsafe(&mut self, world: &World, this_run: u32) -> Result<(), ParamInvalid> {
        // SAFETY: forwarded from the caller, with the same access.
        let out = unsafe { self.inner.try_run_unsafe(world, this_run) }?;
        self.keep(out);
        Ok(())
    }

    fn try_run_exclusive(&mut self, world: &mut World, this_run: u32) -> Result<(), ParamInvalid> {
        let out = self.inner.try_run_exclusive(world, this_run)?;
        self.keep(out);
        Ok(())
    }

    fn can_fail(&self) -> bool {
        true
    }

    fn take_failure(&mut self) -> Option<String> {
        self.failure.take()
    }

    fn note_position(&mut self, position: usize, count: usize) {
        self.inner.note_position(position, count);
    }

    /// Runs the system once on its own, as [`System::run`] does; a run that returned `Err` is
    /// [`ScheduleError::SystemFailed`] (its commands applied, as in a schedule).
    fn run(&mut self, world: &mut World) -> Result<(), ScheduleError> {
        match self.inner.run(world)? {
            Ok(()) => Ok(()),
            Err(error) => Err(ScheduleError::SystemFailed {
                system: self.inner.name().to_owned(),
                error: error.to_string(),
                others: 0,
            }),
        }
    }
}

macro_rules! impl_system_function {
    ($($param:ident),*) => {
        #[allow(non_snake_case)]
        impl<Func, Out, $($param: SystemParam),*> SystemParamFunction<fn($($param,)*) -> Out> for Func
        where
            Func: Send + Sync + 'static,
            for<'a> &'a mut Func: FnMut($($param),*) -> Out + FnMut($(SystemParamItem<$param>),*) -> Out,
            Out: 'static,
        {
            type Param = ($($param,)*);
            type Out = Out;

            fn run(&mut self, param: SystemParamItem<'_, '_, ($($param,)*)>) -> Out {
                // Calling through a helper makes the compiler pick the `FnMut(Item)` impl.
                #[allow(clippy::too_many_arguments)]
                fn call_inner<Out, $($param,)*>(mut f: impl FnMut($($param,)*) -> Out, $($param: $param,)*) -> Out {
                    f($($param,)*)
                }
                let ($($param,)*) = param;
                call_inner(self, $($param),*)
            }
        }
    };
}

impl_system_function!();
all_tuples!(impl_system_function; P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15);
