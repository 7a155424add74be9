//! The registry of a world's observers: slots by [`ObserverId`] index, and the lists of
//! observers per game event type and per (lifecycle kind, component).

use std::any::TypeId;
use std::fmt;

use ahash::AHashMap;
use folio_storage::Entity;
use smallvec::SmallVec;

use super::{ObservedBy, ObserverId, Runner, kind_index};
use crate::World;
use crate::component::ComponentId;
use crate::hooks::DeferredWorld;
use crate::type_map::TypeIdMap;

#[derive(Default)]
pub(crate) struct Listeners {
    /// Observers of every entity (and of untargeted events).
    global: Vec<ObserverId>,
    /// Observers watching one entity.
    by_entity: AHashMap<Entity, SmallVec<[ObserverId; 2]>>,
}

impl Listeners {
    fn is_empty(&self) -> bool {
        self.global.is_empty() && self.by_entity.is_empty()
    }

    /// The observers of an event at `target`, in order: global ones, then those watching it.
    #[inline]
    fn at(&self, target: Option<Entity>, out: &mut SmallVec<[ObserverId; 4]>) {
        out.extend_from_slice(&self.global);
        if let Some(t) = target
            && !self.by_entity.is_empty()
            && let Some(ids) = self.by_entity.get(&t)
        {
            out.extend_from_slice(ids);
        }
    }

    fn add(&mut self, id: ObserverId, watch: &[Entity]) {
        if watch.is_empty() {
            self.global.push(id);
        }
        for &e in watch {
            self.by_entity.entry(e).or_default().push(id);
        }
    }

    pub(crate) fn remove(&mut self, id: ObserverId, watch: &[Entity]) {
        if watch.is_empty() {
            self.global.retain(|&o| o != id);
        }
        for e in watch {
            if let Some(list) = self.by_entity.get_mut(e) {
                list.retain(|o| *o != id);
                if list.is_empty() {
                    self.by_entity.remove(e);
                }
            }
        }
    }
}

/// One registered observer.
pub(crate) struct Registered {
    /// The closure; `None` while it runs.
    pub(crate) runner: Option<Box<dyn Runner>>,
    /// Its event type.
    pub(crate) event: TypeId,
    /// For a lifecycle event: its kind (0 for a game event) and components.
    pub(crate) kind: u8,
    pub(crate) components: SmallVec<[ComponentId; 2]>,
    /// The entities it watches (empty: global).
    pub(crate) watch: SmallVec<[Entity; 1]>,
}

impl Registered {
    /// Where its listener lists are: one per component for a lifecycle event, the event's own
    /// (`None`) for a game event.
    fn keys(&self) -> SmallVec<[Option<ComponentId>; 2]> {
        if self.kind == 0 {
            smallvec::smallvec![None]
        } else {
            self.components.iter().copied().map(Some).collect()
        }
    }
}

struct Slot {
    generation: u32,
    observer: Option<Registered>,
}

/// A world's observers ([`World::add_observer`](crate::World::add_observer)).
#[derive(Default)]
pub(crate) struct Observers {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Game events' observers, by event type.
    events: TypeIdMap<Listeners>,
    /// Lifecycle observers: by kind index, then by component index.
    lifecycle: [Vec<Listeners>; 4],
    /// The depth of the event whose observers (or deferred work) are running; 0 outside any.
    pub(crate) depth: u32,
}

impl fmt::Debug for Observers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observers").field("count", &self.len()).finish_non_exhaustive()
    }
}

impl Observers {
    /// How many observers there are.
    pub(crate) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// The observers of game event `event` (`component` `None`), or of lifecycle kind
    /// `kind` of `component`, created empty if need be.
    fn listeners_mut(
        &mut self,
        event: TypeId,
        kind: u8,
        component: Option<ComponentId>,
    ) -> &mut Listeners {
        match component {
            None => self.events.entry(event).or_default(),
            Some(c) => {
                let list = &mut self.lifecycle[kind_index(kind)];
                if list.len() <= c.index() {
                    list.resize_with(c.index() + 1, Listeners::default);
                }
                &mut list[c.index()]
            }
        }
    }

    /// The observers of game event `event` at `target`.
    #[inline]
    pub(crate) fn of_event(
        &self,
        event: TypeId,
        target: Option<Entity>,
        out: &mut SmallVec<[ObserverId; 4]>,
    ) -> bool {
        match self.events.get(&event) {
            Some(l) => {
                l.at(target, out);
                true
            }
            None => false,
        }
    }

    /// The observers of lifecycle kind `kind` of `component` at `target`.
    pub(crate) fn of_lifecycle(
        &self,
        kind: u8,
        component: ComponentId,
        target: Entity,
        out: &mut SmallVec<[ObserverId; 4]>,
    ) {
        if let Some(l) = self.lifecycle[kind_index(kind)].get(component.index()) {
            l.at(Some(target), out);
        }
    }

    /// The kinds observed on `component`.
    pub(crate) fn observed_kinds(&self, component: ComponentId) -> u8 {
        (0..4)
            .filter(|&k| self.lifecycle[k].get(component.index()).is_some_and(|l| !l.is_empty()))
            .fold(0, |f, k| f | (1 << k))
    }

    /// Takes observer `id`'s closure out to run it (`None`: removed, or running).
    pub(crate) fn take(&mut self, id: ObserverId) -> Option<Box<dyn Runner>> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        slot.observer.as_mut()?.runner.take()
    }

    /// Puts observer `id`'s closure back after its run (dropped if it was removed meanwhile).
    pub(crate) fn put_back(&mut self, id: ObserverId, runner: Box<dyn Runner>) {
        if let Some(slot) = self.slots.get_mut(id.index as usize)
            && slot.generation == id.generation
            && let Some(o) = slot.observer.as_mut()
        {
            o.runner = Some(runner);
        }
    }

    pub(crate) fn insert(&mut self, registered: Registered) -> ObserverId {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot { generation: 0, observer: None });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        let id = ObserverId { index, generation: slot.generation };
        for key in registered.keys() {
            self.listeners_mut(registered.event, registered.kind, key).add(id, &registered.watch);
        }
        self.slots[index as usize].observer = Some(registered);
        id
    }

    /// Removes observer `id`; returns it (`None` for a stale id).
    pub(crate) fn remove(&mut self, id: ObserverId) -> Option<Registered> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        let registered = slot.observer.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(id.index);
        for key in registered.keys() {
            let listeners = self.listeners_mut(registered.event, registered.kind, key);
            listeners.remove(id, &registered.watch);
            if key.is_none() && listeners.is_empty() {
                self.events.remove(&registered.event);
            }
        }
        Some(registered)
    }

    /// Every (observer, entity it watches) pair, in slot order.
    pub(crate) fn watched(&self) -> impl Iterator<Item = (ObserverId, Entity)> + '_ {
        self.slots.iter().enumerate().flat_map(|(index, slot)| {
            let id = ObserverId { index: index as u32, generation: slot.generation };
            slot.observer.iter().flat_map(move |o| o.watch.iter().map(move |&e| (id, e)))
        })
    }

    /// Takes `entity` out of observer `id`'s watch list; returns whether the observer now
    /// watches nothing (and so should go).
    pub(crate) fn unwatch(&mut self, id: ObserverId, entity: Entity) -> bool {
        let Some(slot) = self.slots.get_mut(id.index as usize) else { return false };
        if slot.generation != id.generation {
            return false;
        }
        let Some(o) = slot.observer.as_mut() else { return false };
        let Some(at) = o.watch.iter().position(|&e| e == entity) else { return false };
        if o.watch.len() == 1 {
            return true;
        }
        o.watch.remove(at);
        let (event, kind, keys) = (o.event, o.kind, o.keys());
        for key in keys {
            self.listeners_mut(event, kind, key).remove(id, &[entity]);
        }
        false
    }
}

impl World {
    /// After a restore, which runs no hooks: the watched entities it despawned stop being
    /// watched, as [`ObservedBy`]'s `on_remove` would have done, and the observers left
    /// watching nothing go.
    pub(crate) fn unwatch_dead_entities(&mut self) {
        let dead: Vec<(ObserverId, Entity)> =
            self.observers.watched().filter(|&(_, e)| !self.contains(e)).collect();
        for (id, entity) in dead {
            if self.observers.unwatch(id, entity) {
                self.remove_observer(id);
            }
        }
    }
}

/// `on_remove` of [`ObservedBy`]: once the operation is done, the entity stops being watched.
pub(crate) fn observed_by_removed(world: &mut DeferredWorld, entity: Entity) {
    let Some(observed) = world.get::<ObservedBy>(entity) else { return };
    let ids = observed.0.clone();
    world.defer(move |world: &mut World| {
        for id in ids {
            if world.observers.unwatch(id, entity) {
                world.remove_observer(id);
            }
        }
    });
}
