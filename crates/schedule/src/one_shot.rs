//! One-shot systems: [`RunSystemOnce::run_system_once`] runs any system once on a world, and
//! [`RunSystemOnce::register_system`] keeps an initialized system in the world (its `Local`s
//! and change ticks persist) to run by its [`SystemId`] when needed, also from a command
//! ([`Commands::run_system`]).

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, Location, catch_unwind};

use folio_query::{World, WorldId};

use crate::commands::Commands;
use crate::error::ScheduleError;
use crate::system::{IntoSystem, System};

/// The id of a system registered in a world ([`RunSystemOnce::register_system`]), returning
/// `Out`. Valid in that world until the system is unregistered; after that, and in any other
/// world, it names nothing ([`ScheduleError::UnknownSystem`]).
pub struct SystemId<Out = ()> {
    world: WorldId,
    index: u32,
    generation: u32,
    _out: PhantomData<fn() -> Out>,
}

impl<Out> Clone for SystemId<Out> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Out> Copy for SystemId<Out> {}

impl<Out> PartialEq for SystemId<Out> {
    fn eq(&self, other: &Self) -> bool {
        (self.world, self.index, self.generation) == (other.world, other.index, other.generation)
    }
}

impl<Out> Eq for SystemId<Out> {}

impl<Out> Hash for SystemId<Out> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.world, self.index, self.generation).hash(state);
    }
}

impl<Out> fmt::Debug for SystemId<Out> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SystemId({}v{})", self.index, self.generation)
    }
}

/// What one slot of the registry holds.
enum Entry {
    Vacant,
    /// A `Box<dyn System<Out = Out>>`, with the system's name.
    Stored(Box<dyn Any + Send + Sync>, String),
    /// Taken out by a run in progress.
    Running(String),
}

struct Slot {
    generation: u32,
    entry: Entry,
}

/// The world resource that keeps registered systems.
#[derive(Default)]
struct SystemRegistry {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl SystemRegistry {
    /// The slot `id` names, if it still names one.
    fn slot<Out>(&mut self, id: SystemId<Out>) -> Result<&mut Slot, ScheduleError> {
        self.slots
            .get_mut(id.index as usize)
            .filter(|slot| slot.generation == id.generation && !matches!(slot.entry, Entry::Vacant))
            .ok_or_else(|| unknown(id))
    }

    fn free(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        slot.entry = Entry::Vacant;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
    }
}

fn unknown<Out>(id: SystemId<Out>) -> ScheduleError {
    ScheduleError::UnknownSystem { id: format!("{id:?}") }
}

/// Running systems on a world outside a [`Schedule`](crate::Schedule): once
/// ([`run_system_once`](RunSystemOnce::run_system_once)), or registered and run by id
/// ([`register_system`](RunSystemOnce::register_system),
/// [`run_system`](RunSystemOnce::run_system)).
///
/// A run is as in a schedule: the system gets a fresh tick, its commands are applied right
/// after it, and a system with a [`Single`](crate::Single) that does not match exactly one
/// entity does not run ([`ScheduleError::InvalidParam`]). A panic is caught and returned as
/// [`ScheduleError::SystemPanicked`], the commands the system buffered in that run thrown
/// away. A system that returns a value (a `Result`, say) has it returned inside the `Ok`.
///
/// ```
/// use folio_schedule::prelude::*;
///
/// struct Score(u32);
///
/// let mut world = World::new();
/// world.insert_resource(Score(0));
/// let total = world.run_system_once(|mut score: ResMut<Score>| {
///     score.0 += 5;
///     score.0
/// });
/// assert_eq!(total, Ok(5));
///
/// // Registered, the system keeps its state between runs.
/// let count = world.register_system(|mut runs: Local<u32>| {
///     *runs += 1;
///     *runs
/// });
/// assert_eq!(world.run_system(count), Ok(1));
/// assert_eq!(world.run_system(count), Ok(2));
/// world.unregister_system(count).unwrap();
/// assert!(matches!(world.run_system(count), Err(ScheduleError::UnknownSystem { .. })));
/// ```
pub trait RunSystemOnce {
    /// Runs `system` once: its output, or why it did not run or did not finish
    /// ([`ScheduleError::ConflictingParams`] and [`ScheduleError::Query`] if it cannot be
    /// initialized, [`ScheduleError::InvalidParam`], [`ScheduleError::SystemPanicked`]; a
    /// missing resource that a `Res` or `ResMut` needs is a panic, so the latter).
    #[track_caller]
    fn run_system_once<Out: 'static, M, S: IntoSystem<Out, M>>(
        &mut self,
        system: S,
    ) -> Result<Out, ScheduleError>;

    /// Keeps `system` in the world, to run by the returned id; it is initialized on its first
    /// run, and its state (`Local`s, change ticks, event cursors) persists between runs.
    #[track_caller]
    fn register_system<Out: 'static, M, S: IntoSystem<Out, M>>(
        &mut self,
        system: S,
    ) -> SystemId<Out>;

    /// Runs registered system `id` once, as [`RunSystemOnce::run_system_once`] does;
    /// [`ScheduleError::UnknownSystem`] if `id` names no registered system of this world, and
    /// [`ScheduleError::SystemAlreadyRunning`] if it is the one running (or one that runs it).
    fn run_system<Out: 'static>(&mut self, id: SystemId<Out>) -> Result<Out, ScheduleError>;

    /// Drops registered system `id` (at the end of its run, if it is running); the id names
    /// nothing from then on. [`ScheduleError::UnknownSystem`] if it already names nothing.
    fn unregister_system<Out: 'static>(&mut self, id: SystemId<Out>) -> Result<(), ScheduleError>;
}

impl RunSystemOnce for World {
    fn run_system_once<Out: 'static, M, S: IntoSystem<Out, M>>(
        &mut self,
        system: S,
    ) -> Result<Out, ScheduleError> {
        run_caught(&mut system.into_system(), self)
    }

    fn register_system<Out: 'static, M, S: IntoSystem<Out, M>>(
        &mut self,
        system: S,
    ) -> SystemId<Out> {
        let world = self.id();
        let system: Box<dyn System<Out = Out>> = Box::new(system.into_system());
        let name = system.name().to_owned();
        let entry = Entry::Stored(Box::new(system), name);
        if !self.contains_resource::<SystemRegistry>() {
            self.insert_resource(SystemRegistry::default());
        }
        let registry = self.resource_mut::<SystemRegistry>().expect("inserted above");
        let index = match registry.free.pop() {
            Some(index) => {
                registry.slots[index as usize].entry = entry;
                index
            }
            None => {
                registry.slots.push(Slot { generation: 0, entry });
                u32::try_from(registry.slots.len() - 1).expect("fewer than 2^32 systems")
            }
        };
        let generation = registry.slots[index as usize].generation;
        SystemId { world, index, generation, _out: PhantomData }
    }

    fn run_system<Out: 'static>(&mut self, id: SystemId<Out>) -> Result<Out, ScheduleError> {
        if id.world != self.id() {
            return Err(unknown(id));
        }
        let registry = self.resource_mut::<SystemRegistry>().ok_or_else(|| unknown(id))?;
        let slot = registry.slot(id)?;
        let (boxed, name) = match std::mem::replace(&mut slot.entry, Entry::Vacant) {
            Entry::Stored(boxed, name) => (boxed, name),
            Entry::Running(system) => {
                slot.entry = Entry::Running(system.clone());
                return Err(ScheduleError::SystemAlreadyRunning { system });
            }
            Entry::Vacant => unreachable!("`slot` skips vacant slots"),
        };
        let mut system = match boxed.downcast::<Box<dyn System<Out = Out>>>() {
            Ok(system) => system,
            Err(boxed) => {
                // Ids are typed by what their system returns, so this takes an id forged
                // across worlds; the system stays.
                slot.entry = Entry::Stored(boxed, name);
                return Err(unknown(id));
            }
        };
        slot.entry = Entry::Running(name.clone());
        let out = run_caught(&mut **system, self);
        // Back in its slot, unless it was unregistered meanwhile (or the registry removed).
        if let Some(registry) = self.resource_mut::<SystemRegistry>()
            && let Some(slot) = registry.slots.get_mut(id.index as usize)
            && slot.generation == id.generation
            && matches!(slot.entry, Entry::Running(_))
        {
            slot.entry = Entry::Stored(system, name);
        }
        out
    }

    fn unregister_system<Out: 'static>(&mut self, id: SystemId<Out>) -> Result<(), ScheduleError> {
        if id.world != self.id() {
            return Err(unknown(id));
        }
        let registry = self.resource_mut::<SystemRegistry>().ok_or_else(|| unknown(id))?;
        registry.slot(id)?;
        registry.free(id.index);
        Ok(())
    }
}

/// [`System::run`], with a panic (the system's, or one of its commands') caught and returned
/// as [`ScheduleError::SystemPanicked`], the commands left in its buffer thrown away.
fn run_caught<S: System + ?Sized>(
    system: &mut S,
    world: &mut World,
) -> Result<S::Out, ScheduleError> {
    match catch_unwind(AssertUnwindSafe(|| system.run(world))) {
        Ok(result) => result,
        Err(payload) => {
            // Already done if the system itself panicked; a command's panic leaves the rest of
            // its buffer. A payload whose `Drop` panics must not unwind out of here either.
            let _ = catch_unwind(AssertUnwindSafe(|| system.discard_deferred(world)));
            world.flush();
            Err(ScheduleError::SystemPanicked {
                system: system.name().to_owned(),
                message: panic_message(payload.as_ref()),
            })
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic payload that is not a string)".to_owned())
}

impl Commands<'_, '_> {
    /// Runs registered system `id` ([`RunSystemOnce::run_system`]) when the commands are
    /// applied, in order with the others; its own commands are applied right after it. If it
    /// cannot run (an unknown id, a `Single` without its one match) or panics, the command
    /// panics with the error and the place `run_system` was called at, which the schedule reports as
    /// a panic of this system's commands.
    #[track_caller]
    pub fn run_system(&mut self, id: SystemId) {
        let caller = Location::caller();
        self.add(move |world| {
            if let Err(error) = world.run_system(id) {
                panic!("Commands::run_system (buffered at {caller}): {error}");
            }
        });
    }
}
