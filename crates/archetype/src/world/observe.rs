//! The observers' side of the world ([`crate::observer`]): adding and removing observers,
//! triggering events, and running the observers of lifecycle events from the structural
//! operations (`hooked.rs`).

use std::any::{Any, TypeId, type_name};

use folio_storage::Entity;
use smallvec::SmallVec;

use super::World;
use crate::component::ComponentId;
use crate::hooks::{DeferredWorld, HookFlags};
use crate::observer::{
    Event, MAX_EVENT_DEPTH, ObservedBy, Observer, ObserverError, ObserverId, OnAdd, OnInsert,
    OnRemove, OnReplace, Registered, Runner, Trigger, TriggerMeta, lifecycle_kind,
    observed_by_removed,
};

impl World {
    /// Adds an observer; returns its id, for [`World::remove_observer`]. Components it names
    /// are registered (with table storage) if they are not yet. See [`crate::observer`].
    ///
    /// An observer watching entities gives each an [`ObservedBy`] component (a structural
    /// change, made now), so that despawning the entity removes the observer.
    ///
    /// # Errors
    /// [`ObserverError`], and nothing added: a lifecycle observer without components, a game
    /// event's observer with components, a watched entity not alive, or memory refused for
    /// marking one (an entity marked already may keep an empty [`ObservedBy`]).
    pub fn add_observer<E: Event>(
        &mut self,
        observer: Observer<E>,
    ) -> Result<ObserverId, ObserverError> {
        let event = type_name::<E>;
        let kind = lifecycle_kind::<E>();
        match (kind, observer.components.is_empty()) {
            (0, false) => return Err(ObserverError::ComponentsOnGameEvent { event: event() }),
            (1.., true) => return Err(ObserverError::NoComponents { event: event() }),
            _ => {}
        }
        if let Some(&dead) = observer.watch.iter().find(|&&e| !self.contains(e)) {
            return Err(ObserverError::NoSuchEntity(dead));
        }
        if !observer.watch.is_empty() && self.hooks::<ObservedBy>().is_empty() {
            self.set_hooks::<ObservedBy>(
                crate::ComponentHooks::new().on_remove(observed_by_removed),
            );
        }
        let mut components: SmallVec<[ComponentId; 2]> =
            observer.components.iter().map(|register| register(self)).collect();
        components.sort_unstable();
        components.dedup();
        let mut watch = observer.watch;
        watch.sort_unstable();
        watch.dedup();
        let id = self.observers.insert(Registered {
            runner: Some(observer.runner),
            event: TypeId::of::<E>(),
            kind,
            components: components.clone(),
            watch: watch.clone(),
        });
        for (i, &e) in watch.iter().enumerate() {
            let marked = match self.get_mut::<ObservedBy>(e) {
                Some(by) => {
                    by.0.push(id);
                    Ok(())
                }
                None => self.insert(e, (ObservedBy(smallvec::smallvec![id]),)),
            };
            if let Err(error) = marked {
                // Only a refused commit gets here (the entity is alive): unmark the entities
                // marked so far, and add nothing.
                for &marked in &watch[..i] {
                    if let Some(by) = self.get_mut::<ObservedBy>(marked) {
                        by.0.retain(|o| *o != id);
                    }
                }
                self.observers.remove(id);
                return Err(ObserverError::Entity(error));
            }
        }
        if kind != 0 {
            for &c in &components {
                self.hooks.set_observed(c, self.observers.observed_kinds(c));
            }
            self.refresh_hook_flags();
        }
        Ok(id)
    }

    /// Adds a global observer of event `E` ([`World::add_observer`] of
    /// [`Observer::new`]`(f)`): for a game event only, as a lifecycle event's observer needs
    /// components.
    ///
    /// # Panics
    /// For a lifecycle event ([`OnAdd`] and the others): use [`World::add_observer`] with
    /// [`Observer::component`].
    #[track_caller]
    pub fn observe<E: Event>(
        &mut self,
        f: impl FnMut(&mut Trigger<'_, E>, &mut DeferredWorld<'_>) + Send + Sync + 'static,
    ) -> ObserverId {
        match self.add_observer(Observer::new(f)) {
            Ok(id) => id,
            Err(e) => panic!("World::observe: {e}"),
        }
    }

    /// Removes observer `id`; returns whether it was there (a stale id is `false`). From an
    /// observer, defer it ([`DeferredWorld::defer`]): it takes effect once the observer's
    /// event is done.
    pub fn remove_observer(&mut self, id: ObserverId) -> bool {
        let Some(removed) = self.observers.remove(id) else { return false };
        for &e in &removed.watch {
            if let Some(by) = self.get_mut::<ObservedBy>(e) {
                by.0.retain(|o| *o != id);
            }
        }
        if removed.kind != 0 {
            for &c in &removed.components {
                self.hooks.set_observed(c, self.observers.observed_kinds(c));
            }
            self.refresh_hook_flags();
        }
        true
    }

    /// How many observers the world has.
    pub fn observer_count(&self) -> usize {
        self.observers.len()
    }

    /// Runs the global observers of `event`, then the work they deferred. See
    /// [`crate::observer`].
    ///
    /// # Panics
    /// When the event is [`MAX_EVENT_DEPTH`] deep (an observer triggering itself without end).
    #[track_caller]
    pub fn trigger<E: Event>(&mut self, mut event: E) {
        self.dispatch(&mut event, None);
        self.apply_deferred();
    }

    /// For each entity of `targets` in turn: runs the global observers of `event` and those
    /// watching the entity, then propagates it ([`Event::PROPAGATE`]); then runs the work the
    /// observers deferred. Every target sees the same event value, with the changes observers
    /// made. A target that is not alive still reaches the global observers (it may have been
    /// despawned by work deferred before the event ran), and propagates no further.
    ///
    /// # Panics
    /// When the event is [`MAX_EVENT_DEPTH`] deep (an observer triggering itself without end).
    #[track_caller]
    pub fn trigger_targets<E: Event>(
        &mut self,
        mut event: E,
        targets: impl IntoIterator<Item = Entity>,
    ) {
        for target in targets {
            self.dispatch(&mut event, Some(target));
        }
        self.apply_deferred();
    }

    /// Runs the observers of game event `event` at `target` and up its propagation path.
    #[track_caller]
    fn dispatch<E: Event>(&mut self, event: &mut E, target: Option<Entity>) {
        let mut ids = SmallVec::new();
        if !self.observers.of_event(TypeId::of::<E>(), target, &mut ids) {
            return; // no observer of this event at all
        }
        let depth = self.enter_event::<E>();
        let mut meta = TriggerMeta {
            target,
            original: target,
            component: None,
            observer: ObserverId { index: 0, generation: 0 },
            propagate: E::PROPAGATE.propagates(),
        };
        let guard = Depth { world: self, outer: depth - 1 };
        guard.world.run_observers(&ids, event, &mut meta);
        if let (Some(next), Some(mut at)) = (E::PROPAGATE.next, target) {
            // Bounded by the entity count, should a relationship allow a cycle.
            for _ in 0..guard.world.len() {
                if !meta.propagate || !guard.world.contains(at) {
                    break;
                }
                let Some(up) = next(guard.world, at) else { break };
                // A dead target (despawned, its sources not yet settled) ends the walk.
                if up == at || Some(up) == target || !guard.world.contains(up) {
                    break;
                }
                at = up;
                meta.target = Some(up);
                ids.clear();
                if !guard.world.observers.of_event(TypeId::of::<E>(), Some(up), &mut ids) {
                    break; // no observer of this event is registered any more
                }
                guard.world.run_observers(&ids, event, &mut meta);
            }
        }
        drop(guard);
    }

    /// The observers of lifecycle event kind `kind` (one [`HookFlags`] bit) of `component`
    /// at `entity`, from inside a structural operation.
    pub(crate) fn run_lifecycle_observers(
        &mut self,
        kind: u8,
        component: ComponentId,
        entity: Entity,
    ) {
        let mut ids = SmallVec::new();
        self.observers.of_lifecycle(kind, component, entity, &mut ids);
        if ids.is_empty() {
            return;
        }
        let mut meta = TriggerMeta {
            target: Some(entity),
            original: Some(entity),
            component: Some(component),
            observer: ObserverId { index: 0, generation: 0 },
            propagate: false,
        };
        match kind {
            HookFlags::ADD => self.run_lifecycle_event(&ids, OnAdd, &mut meta),
            HookFlags::INSERT => self.run_lifecycle_event(&ids, OnInsert, &mut meta),
            HookFlags::REPLACE => self.run_lifecycle_event(&ids, OnReplace, &mut meta),
            _ => self.run_lifecycle_event(&ids, OnRemove, &mut meta),
        }
    }

    fn run_lifecycle_event<E: Event>(
        &mut self,
        ids: &[ObserverId],
        mut event: E,
        meta: &mut TriggerMeta,
    ) {
        let depth = self.enter_event::<E>();
        let guard = Depth { world: self, outer: depth - 1 };
        guard.world.run_observers(ids, &mut event, meta);
    }

    /// Checks and enters the depth of a new event; returns it.
    #[track_caller]
    fn enter_event<E: Event>(&mut self) -> u32 {
        let depth = self.observers.depth + 1;
        if depth > MAX_EVENT_DEPTH {
            panic!(
                "an event {} is {depth} events deep: its observers keep triggering events (or \
                 making the changes they observe) without end; stop the chain, or split it \
                 across frames (the limit is folio_archetype::MAX_EVENT_DEPTH = \
                 {MAX_EVENT_DEPTH})",
                type_name::<E>()
            );
        }
        self.observers.depth = depth;
        depth
    }

    /// Runs each observer of `ids` on `event`.
    fn run_observers(&mut self, ids: &[ObserverId], event: &mut dyn Any, meta: &mut TriggerMeta) {
        for &id in ids {
            let Some(runner) = self.observers.take(id) else { continue };
            meta.observer = id;
            let mut guard = PutBack { world: self, id, runner: Some(runner) };
            let PutBack { world, runner, .. } = &mut guard;
            let runner = runner.as_mut().expect("put back only on drop");
            runner.run(event, meta, &mut DeferredWorld::new(world));
        }
    }
}

/// Restores the event depth when an event's observers are done (or one panicked).
struct Depth<'w> {
    world: &'w mut World,
    outer: u32,
}

impl Drop for Depth<'_> {
    fn drop(&mut self) {
        self.world.observers.depth = self.outer;
    }
}

/// Puts a running observer's closure back when it returns (or panics).
struct PutBack<'w> {
    world: &'w mut World,
    id: ObserverId,
    runner: Option<Box<dyn Runner>>,
}

impl Drop for PutBack<'_> {
    fn drop(&mut self) {
        if let Some(runner) = self.runner.take() {
            self.world.observers.put_back(self.id, runner);
        }
    }
}
