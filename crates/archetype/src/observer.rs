//! Observers: closures, with whatever state they capture, that run when an event happens — a
//! component's lifecycle event ([`OnAdd`], [`OnInsert`], [`OnReplace`], [`OnRemove`]) or a
//! game's own [`Event`], sent with [`World::trigger`] (to no entity) or
//! [`World::trigger_targets`] (to entities).
//!
//! ```
//! use folio_archetype::{DeferredWorld, Observer, OnAdd, Trigger, World};
//!
//! struct Health(u32);
//! struct Hit(u32);
//! impl folio_archetype::Event for Hit {}
//!
//! let mut world = World::new();
//! // A global observer of a lifecycle event: every `Health` added to any entity.
//! let mut seen = 0;
//! world
//!     .add_observer(Observer::new(move |t: &mut Trigger<OnAdd>, _: &mut DeferredWorld| {
//!         seen += 1;
//!         println!("{:?} got Health ({seen} so far)", t.entity());
//!     }).component::<Health>())
//!     .unwrap();
//! let hero = world.spawn((Health(10),));
//! // An observer of a game event, watching one entity.
//! world
//!     .add_observer(Observer::new(|t: &mut Trigger<Hit>, w: &mut DeferredWorld| {
//!         let damage = t.event().0;
//!         let health = w.get_mut::<Health>(t.entity()).unwrap();
//!         health.0 = health.0.saturating_sub(damage);
//!     }).watch(hero))
//!     .unwrap();
//! world.trigger_targets(Hit(3), [hero]);
//! assert_eq!(world.get::<Health>(hero).unwrap().0, 7);
//! ```
//!
//! # What an observer gets
//! A [`Trigger`] (the event, mutable; its target entity, if any; for a lifecycle event, the
//! component; the observer's own [`ObserverId`]) and a [`DeferredWorld`]: the whole world to
//! read, components and resources to change, and structural changes and further events
//! deferred ([`DeferredWorld::spawn`], [`DeferredWorld::insert`], [`DeferredWorld::remove`],
//! [`DeferredWorld::despawn`], [`DeferredWorld::trigger`], [`DeferredWorld::defer`]). No entity,
//! component or observer moves while an observer runs, and no observer runs inside another.
//!
//! # When observers run
//! - Lifecycle events run where the component hooks of the same kind run ([`crate::hooks`]),
//!   after every hook of that kind of the operation: `on_add` hooks, then `OnAdd` observers,
//!   then `on_insert` hooks, then `OnInsert` observers; `on_replace` hooks, `OnReplace`
//!   observers, `on_remove` hooks, `OnRemove` observers. An observer of several components runs
//!   once per component the operation adds (or inserts, replaces, removes); despawning an
//!   entity is the removal of all its components.
//! - [`World::trigger`] runs the event's global observers; [`World::trigger_targets`] runs, for
//!   each target in turn, the global observers and those watching the target. Both run the
//!   work the observers deferred before they return.
//! - Observers of one event run in the order they were added, global ones first.
//! - Events and structural work an observer defers run after it, in the order deferred, once
//!   the event (with its propagation) is done: before the operation or trigger that started it
//!   all returns.
//!
//! # Propagation
//! An event type may name a relationship to travel along ([`Event::PROPAGATE`],
//! [`Propagation::along`]): after the observers of a target have run, the event goes to the
//! target's target under that relationship (its parent, for [`crate::ChildOf`]), whose global
//! and watching observers run with [`Trigger::target`] set to it, and so on up, until an entity
//! without the relationship or an observer calling [`Trigger::stop_propagation`]. Each hop reads
//! the relationship as it is then; an entity that is not alive ends the walk. Should a
//! relationship allow cycles, the walk ends on coming back to its start, and makes at most as
//! many hops as there are entities.
//!
//! # Bounded chains
//! Each event runs at a *depth*: one more than the observer (or its deferred work) that
//! triggered it; an event from outside any observer runs at depth 1. An event beyond
//! [`MAX_EVENT_DEPTH`] — an observer that triggers itself without end, directly or through
//! the structural work it defers — panics, naming the event type, before any of its observers
//! run. The world stays consistent: the panic is raised where a hook's panic would be (see
//! [`crate::hooks`] for what a panic inside a structural operation leaves), and the queued work
//! that follows stays queued for [`World::apply_deferred`].
//!
//! # Ids and removal
//! [`World::add_observer`] returns an [`ObserverId`] (an index and a generation, so an id of a
//! removed observer never names a later one); [`World::remove_observer`] removes it. An
//! observer watching entities is removed when the last of them is despawned (or loses its
//! [`ObservedBy`] component); it keeps running for the others until then.
//!
//! # Costs
//! Observers of lifecycle events set the same per-component and per-archetype flags as hooks:
//! a world with neither pays one compare per structural operation, as before, and entities of
//! archetypes without observed components take the hookless paths. Triggering a game event
//! costs a hash look-up of its type, then one indirect call per observer.
//!
//! [`World::trigger`]: crate::World::trigger
//! [`World::trigger_targets`]: crate::World::trigger_targets
//! [`World::add_observer`]: crate::World::add_observer
//! [`World::remove_observer`]: crate::World::remove_observer
//! [`World::apply_deferred`]: crate::World::apply_deferred

use std::any::{Any, TypeId, type_name};
use std::fmt;
use std::marker::PhantomData;

use folio_storage::Entity;
use smallvec::SmallVec;

use crate::World;
use crate::component::{Component, ComponentId};
use crate::error::EntityError;
use crate::hooks::{DeferredWorld, HookFlags};
use crate::relationship::Relationship;

/// How deep a chain of events may go (see the [module docs](self#bounded-chains)): an event
/// triggered from the observers of an event at this depth panics.
pub const MAX_EVENT_DEPTH: u32 = 1024;

/// An event observers can watch: any `Send + Sync + 'static` type that implements it.
///
/// ```
/// use folio_archetype::{ChildOf, Event, Propagation};
///
/// // Sent to no entity, or to entities; goes no further.
/// struct Explosion { radius: f32 }
/// impl Event for Explosion {}
///
/// // Bubbles up the hierarchy: a click on a button reaches its panel, then the panel's parent.
/// struct Clicked;
/// impl Event for Clicked {
///     const PROPAGATE: Propagation = Propagation::along::<ChildOf>();
/// }
/// ```
pub trait Event: Send + Sync + 'static {
    /// The relationship a targeted event travels along after its target's observers ran
    /// (none by default).
    const PROPAGATE: Propagation = Propagation::NONE;
}

/// The relationship an [`Event`] propagates along, if any.
#[derive(Clone, Copy)]
pub struct Propagation {
    /// The next entity up from an entity, if it has one.
    pub(crate) next: Option<fn(&World, Entity) -> Option<Entity>>,
}

impl Propagation {
    /// The event stays at its targets.
    pub const NONE: Self = Self { next: None };

    /// The event goes from an entity to its target under `R` (from a child to its parent, for
    /// [`crate::ChildOf`]).
    pub const fn along<R: Relationship>() -> Self {
        Self { next: Some(target_under::<R>) }
    }

    /// Whether the event propagates at all.
    pub const fn propagates(&self) -> bool {
        self.next.is_some()
    }
}

impl fmt::Debug for Propagation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Propagation").field("propagates", &self.propagates()).finish()
    }
}

/// `entity`'s target under `R`.
fn target_under<R: Relationship>(world: &World, entity: Entity) -> Option<Entity> {
    world.get::<R>(entity).map(R::target)
}

/// A component was added to an entity that did not have it (runs with `on_add` hooks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnAdd;
/// A component was inserted, new or replacing a value (runs with `on_insert` hooks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnInsert;
/// A component's value is about to be replaced or removed; it can still be read (runs with
/// `on_replace` hooks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnReplace;
/// A component is about to be removed: remove, despawn, clear; it can still be read (runs with
/// `on_remove` hooks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnRemove;

impl Event for OnAdd {}
impl Event for OnInsert {}
impl Event for OnReplace {}
impl Event for OnRemove {}

/// The [`HookFlags`] kind of lifecycle event `E`, or 0 for a game event.
pub(crate) fn lifecycle_kind<E: Event>() -> u8 {
    let t = TypeId::of::<E>();
    [
        (TypeId::of::<OnAdd>(), HookFlags::ADD),
        (TypeId::of::<OnInsert>(), HookFlags::INSERT),
        (TypeId::of::<OnReplace>(), HookFlags::REPLACE),
        (TypeId::of::<OnRemove>(), HookFlags::REMOVE),
    ]
    .into_iter()
    .find_map(|(k, kind)| (k == t).then_some(kind))
    .unwrap_or(0)
}

/// The index of lifecycle kind `kind` (one [`HookFlags`] bit) in per-kind tables.
fn kind_index(kind: u8) -> usize {
    debug_assert!(kind.is_power_of_two() && kind <= HookFlags::REMOVE);
    kind.trailing_zeros() as usize
}

/// An observer's identity: what [`World::remove_observer`](crate::World::remove_observer)
/// takes. The generation makes the id of a removed observer stale for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObserverId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl fmt::Display for ObserverId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "observer {}v{}", self.index, self.generation)
    }
}

/// What an observer is told about the event it observes.
pub struct Trigger<'t, E> {
    event: &'t mut E,
    meta: &'t mut TriggerMeta,
}

/// The non-generic part of a [`Trigger`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct TriggerMeta {
    /// The entity the event is at now (it changes as the event propagates).
    pub(crate) target: Option<Entity>,
    /// The entity the event was sent to.
    pub(crate) original: Option<Entity>,
    /// The component, for a lifecycle event.
    pub(crate) component: Option<ComponentId>,
    /// The observer running.
    pub(crate) observer: ObserverId,
    /// Cleared by [`Trigger::stop_propagation`].
    pub(crate) propagate: bool,
}

impl<E> Trigger<'_, E> {
    /// The event.
    pub fn event(&self) -> &E {
        self.event
    }

    /// The event, mutably: later observers (and later hops) see the change.
    pub fn event_mut(&mut self) -> &mut E {
        self.event
    }

    /// The entity the event is at: its target, or, as it propagates, the entity it reached;
    /// `None` for an event sent to no entity ([`World::trigger`](crate::World::trigger)).
    pub fn target(&self) -> Option<Entity> {
        self.meta.target
    }

    /// The entity the event is at ([`Trigger::target`]), for an observer that only ever
    /// observes targeted events (lifecycle events always have one).
    ///
    /// # Panics
    /// If the event was sent to no entity: use [`Trigger::target`] in an observer that can see
    /// such events.
    #[track_caller]
    pub fn entity(&self) -> Entity {
        match self.meta.target {
            Some(e) => e,
            None => panic!(
                "Trigger::entity: this {} was triggered with no target (World::trigger); use \
                 Trigger::target, which returns an Option",
                type_name::<E>()
            ),
        }
    }

    /// The entity the event was sent to, before it propagated.
    pub fn original_target(&self) -> Option<Entity> {
        self.meta.original
    }

    /// For a lifecycle event, the component added, inserted, replaced or removed.
    pub fn component(&self) -> Option<ComponentId> {
        self.meta.component
    }

    /// The id of the observer running.
    pub fn observer(&self) -> ObserverId {
        self.meta.observer
    }

    /// Stops the event from propagating further: the other observers of the entity it is at
    /// still run, no entity further up sees it.
    pub fn stop_propagation(&mut self) {
        self.meta.propagate = false;
    }

    /// Whether the event will propagate further (its type names a relationship and no observer
    /// has stopped it).
    pub fn propagates(&self) -> bool {
        self.meta.propagate
    }
}

impl<E: fmt::Debug> fmt::Debug for Trigger<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trigger")
            .field("event", &self.event)
            .field("target", &self.meta.target)
            .field("original_target", &self.meta.original)
            .field("component", &self.meta.component)
            .field("observer", &self.meta.observer)
            .field("propagate", &self.meta.propagate)
            .finish()
    }
}

/// An observer's closure with its event type erased.
pub(crate) trait Runner: Send + Sync {
    /// Runs the closure on `event` (of the observer's event type).
    fn run(&mut self, event: &mut dyn Any, meta: &mut TriggerMeta, world: &mut DeferredWorld<'_>);
}

struct Typed<E, F>(F, PhantomData<fn(E)>);

impl<E, F> Runner for Typed<E, F>
where
    E: Event,
    F: FnMut(&mut Trigger<'_, E>, &mut DeferredWorld<'_>) + Send + Sync,
{
    #[inline]
    fn run(&mut self, event: &mut dyn Any, meta: &mut TriggerMeta, world: &mut DeferredWorld<'_>) {
        let event = event.downcast_mut::<E>().expect("an observer runs only on its event type");
        (self.0)(&mut Trigger { event, meta }, world);
    }
}

/// Registers a component type in a world, returning its id.
pub(crate) type RegisterComponent = fn(&mut World) -> ComponentId;

/// An observer to add with [`World::add_observer`](crate::World::add_observer): its closure,
/// the components it watches (for a lifecycle event) and the entities it watches (none: all).
pub struct Observer<E: Event> {
    pub(crate) runner: Box<dyn Runner>,
    /// Registers each component watched, returning its id.
    pub(crate) components: SmallVec<[RegisterComponent; 2]>,
    pub(crate) watch: SmallVec<[Entity; 1]>,
    _event: PhantomData<fn(E)>,
}

impl<E: Event> Observer<E> {
    /// An observer running `f` on every event `E`. A lifecycle event's observer also needs
    /// the components it watches ([`Observer::component`]).
    pub fn new(
        f: impl FnMut(&mut Trigger<'_, E>, &mut DeferredWorld<'_>) + Send + Sync + 'static,
    ) -> Self {
        Self {
            runner: Box::new(Typed(f, PhantomData)),
            components: SmallVec::new(),
            watch: SmallVec::new(),
            _event: PhantomData,
        }
    }

    /// Also watches component `T`'s lifecycle events (registering `T`, with table storage, if
    /// it is not yet).
    #[must_use]
    pub fn component<T: Component>(mut self) -> Self {
        self.components.push(World::register_hooked::<T>);
        self
    }

    /// Runs only for events at `entity` (its own, or, for a propagating event, one that
    /// reached it), instead of at every entity; call again to watch more entities.
    #[must_use]
    pub fn watch(mut self, entity: Entity) -> Self {
        self.watch.push(entity);
        self
    }
}

impl<E: Event> fmt::Debug for Observer<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observer")
            .field("event", &type_name::<E>())
            .field("components", &self.components.len())
            .field("watch", &self.watch)
            .finish_non_exhaustive()
    }
}

/// Why [`World::add_observer`](crate::World::add_observer) refused an observer; nothing was
/// added.
#[derive(Debug)]
#[non_exhaustive]
pub enum ObserverError {
    /// A lifecycle event's observer names no component ([`Observer::component`]).
    NoComponents {
        /// The event type.
        event: &'static str,
    },
    /// A game event's observer names components: only lifecycle events have them.
    ComponentsOnGameEvent {
        /// The event type.
        event: &'static str,
    },
    /// A watched entity is not alive.
    NoSuchEntity(Entity),
    /// Marking a watched entity with [`ObservedBy`] failed: the OS refused the memory.
    Entity(EntityError),
}

impl fmt::Display for ObserverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoComponents { event } => write!(
                f,
                "an observer of {event} must name the components it watches (Observer::component)"
            ),
            Self::ComponentsOnGameEvent { event } => write!(
                f,
                "an observer of {event} names components, but only the lifecycle events (OnAdd, \
                 OnInsert, OnReplace, OnRemove) concern components"
            ),
            Self::NoSuchEntity(e) => write!(f, "an observer cannot watch {e:?}: it is not alive"),
            Self::Entity(e) => write!(f, "cannot mark a watched entity: {e}"),
        }
    }
}

impl std::error::Error for ObserverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Entity(e) => Some(e),
            _ => None,
        }
    }
}

/// The component an entity watched by observers holds: the ids of the observers watching it.
/// Its `on_remove` hook (the entity despawned, or this component removed) takes the entity out
/// of each observer's watch list, and removes the observers left watching nothing, once the
/// operation is done (so the entity's own `OnRemove` observers still run).
#[derive(Clone, Debug, Default)]
pub struct ObservedBy(pub(crate) SmallVec<[ObserverId; 2]>);

impl ObservedBy {
    /// The observers watching the entity.
    pub fn observers(&self) -> &[ObserverId] {
        &self.0
    }
}

/// The observers of one event (or one component's lifecycle event of one kind).
mod registry;

pub(crate) use registry::{Observers, Registered, observed_by_removed};
