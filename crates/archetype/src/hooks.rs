//! Component hooks: functions a component type runs when it is added to an entity, inserted,
//! replaced or removed — how a game keeps an index (a spatial hash, a name table, a parent's
//! list of children) in step with the components it mirrors, without every system that spawns
//! or despawns knowing about it.
//!
//! A hook is a plain `fn(&mut DeferredWorld, Entity)`, registered per component type with
//! [`World::set_hooks`]. It runs inside the structural operation, at a point where the world is
//! consistent:
//!
//! | hook | runs | when |
//! | --- | --- | --- |
//! | `on_add` | after the value is in place | the entity did not have the component |
//! | `on_insert` | after the value is in place, after every `on_add` of the entity's operation | every insert, new or replacing |
//! | `on_replace` | before the old value is overwritten or removed (it can still be read) | the entity had the component |
//! | `on_remove` | before the value is removed, after every `on_replace` of the entity's operation | remove, despawn, clear |
//!
//! The order is per entity: in a batch, one entity's hooks all run before the next entity's.
//! Observers of the lifecycle events ([`crate::observer`]) run at the same points, each kind's
//! after that kind's hooks.
//!
//! A hook gets a [`DeferredWorld`]: the whole world to read, components and resources to
//! change, but no structural change (no spawn, insert, remove or despawn), so the operation that
//! runs it cannot be pulled from under itself. Structural work goes through
//! [`DeferredWorld::defer`]: the closure runs once the operation (and every hook it runs) is
//! done, before it returns, in the order deferred. A deferred closure's own operations run
//! their hooks, and what those defer joins the same queue, run by the loop already running
//! before the outermost operation returns.
//!
//! Removal hooks see the value: despawning an entity with a hooked component runs its
//! `on_replace` and `on_remove` while the entity is still whole.
//!
//! Batches:
//! - `remove_batch`, [`World::despawn_batch`] and `clear` run the removal hooks of every entity
//!   of the batch first, while the whole batch is as it was (each entity's once, however often
//!   it is listed), then do the batch as without hooks (a large `despawn_batch` still sweeps its
//!   tables). `despawn_batch` collects its iterator first, so an iterator that panics despawns
//!   nothing, and any iterator long enough sweeps.
//! - `spawn_batch` (when the bundle has `on_add` or `on_insert` hooks) and `insert_batch` (when
//!   it has any insert hooks) go one entity at a time, each between its hooks: an iterator that
//!   panics leaves no spawned entity without its hooks.
//!
//! # Costs
//! A world with no hooks pays one compare per structural operation (callgrind: 2 to 5
//! instructions); an `insert` also compares its bundle type with the last one used, and looks
//! up a different one before deciding (the look-up the insert makes next anyway), so that a
//! bundle naming the built-in hierarchy ([`crate::relationship`]) has its hooks installed
//! first: 8 instructions an insert (callgrind, 10 rounds of inserting then removing a
//! component on 10,000 entities: 95.77M to 96.57M instructions, +0.8 %). Spawn, despawn and
//! remove pay nothing for it: they look their bundle up before deciding already. Once some component has hooks of a kind an operation could run, the
//! operation also reads the hook kinds of the entity's archetype (kept on the archetype) or of
//! the bundle, and only takes the hooked path when they name a hook: entities of archetypes
//! without hooks pay about 20 instructions an operation.
//!
//! # Failures and panics
//! `on_replace` and `on_remove` run once the operation is known to be valid (the entity alive,
//! holding what is removed), before anything moves. The operation can still fail afterwards
//! only if the OS refuses memory for it; the hooks have run then, and nothing else changed.
//!
//! A panicking hook stops the operation at that point, and no later hook of it runs (in a
//! batch: none of the later entities'):
//! - a removal hook: the entity keeps its components (in `remove_batch`, `despawn_batch` and
//!   `clear`, every entity of the batch does; in `insert_batch`, the entities before it have
//!   their new values);
//! - an `on_add`/`on_insert` hook: the entity's operation is complete.
//!
//! A panic of the operation itself (a replaced or despawned value's `Drop`) does not skip
//! hooks: an insert whose replaced value's `Drop` panics runs the new components' `on_add` and
//! `on_insert` before the panic continues, and a `despawn_batch` whose `Drop` panics still
//! despawns every entity of the batch (each entity whose removal hooks ran must go), then the
//! panic continues.
//!
//! Closures deferred before a panic stay queued until the world's next hooked operation or
//! [`World::apply_deferred`].
//!
//! [`World::set_hooks`]: crate::World::set_hooks
//! [`World::despawn_batch`]: crate::World::despawn_batch
//! [`World::apply_deferred`]: crate::World::apply_deferred

use std::collections::VecDeque;
use std::ops::Deref;

use folio_storage::Entity;

use smallvec::SmallVec;

use crate::World;
use crate::bundle::Bundle;
use crate::component::{Component, ComponentId};
use crate::observer::Event;

/// A component hook: called with the world (restricted to non-structural access) and the entity
/// whose component is being added, inserted, replaced or removed. Closures that capture nothing
/// coerce to it.
pub type ComponentHook = for<'w> fn(&mut DeferredWorld<'w>, Entity);

/// The hooks of one component type; see the [module docs](self) for when each runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct ComponentHooks {
    on_add: Option<ComponentHook>,
    on_insert: Option<ComponentHook>,
    on_replace: Option<ComponentHook>,
    on_remove: Option<ComponentHook>,
}

impl ComponentHooks {
    /// No hooks.
    pub const fn new() -> Self {
        Self { on_add: None, on_insert: None, on_replace: None, on_remove: None }
    }

    /// Runs `hook` after the component is added to an entity that did not have it.
    #[must_use]
    pub const fn on_add(mut self, hook: ComponentHook) -> Self {
        self.on_add = Some(hook);
        self
    }

    /// Runs `hook` after every insert of the component, new or replacing.
    #[must_use]
    pub const fn on_insert(mut self, hook: ComponentHook) -> Self {
        self.on_insert = Some(hook);
        self
    }

    /// Runs `hook` before the component's value is overwritten by an insert or removed.
    #[must_use]
    pub const fn on_replace(mut self, hook: ComponentHook) -> Self {
        self.on_replace = Some(hook);
        self
    }

    /// Runs `hook` before the component is removed from an entity (remove, despawn, clear).
    #[must_use]
    pub const fn on_remove(mut self, hook: ComponentHook) -> Self {
        self.on_remove = Some(hook);
        self
    }

    /// Whether no hook is set.
    pub const fn is_empty(&self) -> bool {
        self.flags() == 0
    }

    /// The [`HookFlags`] bits of the hooks set.
    pub(crate) const fn flags(&self) -> u8 {
        (self.on_add.is_some() as u8 * HookFlags::ADD)
            | (self.on_insert.is_some() as u8 * HookFlags::INSERT)
            | (self.on_replace.is_some() as u8 * HookFlags::REPLACE)
            | (self.on_remove.is_some() as u8 * HookFlags::REMOVE)
    }
}

/// Which kinds of hook some component of a set has: one bit per kind.
pub(crate) struct HookFlags;

impl HookFlags {
    pub(crate) const ADD: u8 = 1;
    pub(crate) const INSERT: u8 = 2;
    pub(crate) const REPLACE: u8 = 4;
    pub(crate) const REMOVE: u8 = 8;
    /// The hooks that run before a value goes.
    pub(crate) const REMOVAL: u8 = Self::REPLACE | Self::REMOVE;
    /// The hooks an insert can run.
    pub(crate) const INSERTS: u8 = Self::ADD | Self::INSERT | Self::REPLACE;
    /// The hooks a spawn can run.
    pub(crate) const SPAWN: u8 = Self::ADD | Self::INSERT;
}

/// The world's hooks, by component index, and the queue of deferred structural work.
///
/// Observers of the lifecycle events ([`crate::observer`]) count as hooks of their kind here:
/// a component observed for `OnAdd` has the [`HookFlags::ADD`] bit in its flags, so the
/// structural paths decide "hooked or not" with the same compare, whether hooks or observers
/// (or neither) are why.
#[derive(Default)]
pub(crate) struct Hooks {
    by_component: Vec<ComponentHooks>,
    /// By component index: the [`HookFlags`] kinds that some observer watches.
    observed: Vec<u8>,
    /// Components with at least one hook or observed kind.
    hooked: usize,
    /// Union of every component's [`HookFlags`], hooks' and observers'.
    flags: u8,
    /// Union of the observed kinds only.
    observed_flags: u8,
    /// The deferred work, each with the event depth ([`crate::observer`]) it was queued at.
    pub(crate) deferred: VecDeque<(u32, Deferred)>,
    /// Set while [`World::apply_deferred`] drains the queue, so nested operations leave the
    /// closures they queue to the loop already running.
    pub(crate) applying: bool,
}

/// A closure deferred by a hook.
pub(crate) type Deferred = Box<dyn FnOnce(&mut World) + Send + Sync>;

impl Hooks {
    /// Whether any component has a hook of a kind in `flags`: one compare on every structural
    /// operation of a world without hooks.
    #[inline(always)]
    pub(crate) fn any(&self, flags: u8) -> bool {
        self.flags & flags != 0
    }

    /// Sets component `id`'s hooks, returning the old ones.
    pub(crate) fn set(&mut self, id: ComponentId, hooks: ComponentHooks) -> ComponentHooks {
        if self.by_component.len() <= id.index() {
            self.by_component.resize(id.index() + 1, ComponentHooks::new());
        }
        let old = std::mem::replace(&mut self.by_component[id.index()], hooks);
        self.recount();
        old
    }

    /// Sets the kinds of lifecycle event that observers watch on component `id`.
    pub(crate) fn set_observed(&mut self, id: ComponentId, kinds: u8) {
        if self.observed.len() <= id.index() {
            self.observed.resize(id.index() + 1, 0);
        }
        self.observed[id.index()] = kinds;
        self.recount();
    }

    /// Recomputes the counts and unions after a change (rare: registering hooks or observers).
    fn recount(&mut self) {
        let len = self.by_component.len().max(self.observed.len());
        let (hooked, flags) = (0..len)
            .map(|i| self.flags_at(i))
            .fold((0, 0), |(n, f), g| (n + usize::from(g != 0), f | g));
        (self.hooked, self.flags) = (hooked, flags);
        self.observed_flags = self.observed.iter().fold(0, |f, &g| f | g);
    }

    /// The hook and observed kinds of the component of index `i`.
    #[inline]
    fn flags_at(&self, i: usize) -> u8 {
        self.by_component.get(i).map_or(0, ComponentHooks::flags)
            | self.observed.get(i).copied().unwrap_or(0)
    }

    /// Whether some observer watches a lifecycle event of a kind in `kinds`.
    #[inline(always)]
    pub(crate) fn any_observed(&self, kinds: u8) -> bool {
        self.observed_flags & kinds != 0
    }

    /// Whether some observer watches component `id`'s lifecycle events of kind `kind`.
    #[inline]
    pub(crate) fn observed(&self, id: ComponentId, kind: u8) -> bool {
        self.observed.get(id.index()).is_some_and(|&f| f & kind != 0)
    }

    /// Component `id`'s hooks.
    #[inline]
    pub(crate) fn of(&self, id: ComponentId) -> ComponentHooks {
        self.by_component.get(id.index()).copied().unwrap_or_default()
    }

    /// Whether some component of `ids` has a hook of a kind in `kinds` (the look-up skipped
    /// while no component has such a hook).
    #[inline(always)]
    pub(crate) fn any_in(&self, ids: &[ComponentId], kinds: u8) -> bool {
        self.any(kinds) && self.flags_of(ids) & kinds != 0
    }

    /// The union of the [`HookFlags`] of `ids`.
    pub(crate) fn flags_of(&self, ids: &[ComponentId]) -> u8 {
        if self.hooked == 0 {
            return 0;
        }
        ids.iter().fold(0, |f, &c| f | self.flags_at(c.index()))
    }

    /// Component `id`'s hook of one kind (`kind` is one [`HookFlags`] bit), if it has one.
    #[inline]
    pub(crate) fn of_kind(&self, id: ComponentId, kind: u8) -> Option<ComponentHook> {
        let h = self.of(id);
        match kind {
            HookFlags::ADD => h.on_add,
            HookFlags::INSERT => h.on_insert,
            HookFlags::REPLACE => h.on_replace,
            HookFlags::REMOVE => h.on_remove,
            _ => None,
        }
    }
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("hooked", &self.hooked)
            .field("deferred", &self.deferred.len())
            .finish_non_exhaustive()
    }
}

/// The world as a hook sees it: everything to read (it derefs to [`World`]), components and
/// resources to change, and structural changes only deferred ([`DeferredWorld::defer`]).
pub struct DeferredWorld<'w> {
    world: &'w mut World,
}

impl<'w> DeferredWorld<'w> {
    pub(crate) fn new(world: &'w mut World) -> Self {
        Self { world }
    }

    /// `entity`'s `T`, mutably; marks it changed, as [`World::get_mut`] does.
    pub fn get_mut<T: Component>(&mut self, entity: Entity) -> Option<&mut T> {
        self.world.get_mut(entity)
    }

    /// The world's relationship bookkeeping, for the relationship hooks (not structural).
    pub(crate) fn relationships_mut(&mut self) -> &mut crate::relationship::Relationships {
        &mut self.world.relationships
    }

    /// The resource of type `R`, mutably, as [`World::resource_mut`] gives it.
    pub fn resource_mut<R: Send + Sync + 'static>(&mut self) -> Option<&mut R> {
        self.world.resource_mut()
    }

    /// Runs `f` with the whole world once the structural operation that runs this hook (and
    /// every other hook it runs) is done, before that operation returns (or, for an operation
    /// that deferred work runs, before the outermost one returns); closures run in the order
    /// deferred.
    pub fn defer(&mut self, f: impl FnOnce(&mut World) + Send + Sync + 'static) {
        self.world.defer(Box::new(f));
    }
}

/// Commands-like deferred access, for observers and hooks: each queues its work to run once
/// the running operation or event is done (see [`DeferredWorld::defer`]). Work on an entity
/// gone by then does nothing.
impl DeferredWorld<'_> {
    /// Reserves an entity now and spawns it with `bundle` later; returns the entity (alive,
    /// with no components, until then).
    pub fn spawn<B: Bundle>(&mut self, bundle: B) -> Entity {
        let entity = self.world.reserve_entity();
        self.defer(move |world: &mut World| {
            let _ = world.spawn_reserved(entity, bundle);
        });
        entity
    }

    /// Inserts `bundle` into `entity` later.
    pub fn insert<B: Bundle>(&mut self, entity: Entity, bundle: B) {
        self.defer(move |world: &mut World| {
            let _ = world.insert(entity, bundle);
        });
    }

    /// Removes the components of `B` from `entity` later ([`World::remove`]: nothing, if it
    /// lacks one of them then).
    pub fn remove<B: Bundle>(&mut self, entity: Entity) {
        self.defer(move |world: &mut World| {
            drop(world.remove::<B>(entity));
        });
    }

    /// Despawns `entity` later.
    pub fn despawn(&mut self, entity: Entity) {
        self.defer(move |world: &mut World| {
            let _ = world.despawn(entity);
        });
    }

    /// Triggers `event` ([`World::trigger`]) later: after the running observer and every
    /// other observer of the running event. The event is one deeper than the one running
    /// ([`crate::MAX_EVENT_DEPTH`]).
    pub fn trigger<E: Event>(&mut self, event: E) {
        self.defer(move |world: &mut World| world.trigger(event));
    }

    /// Triggers `event` at `targets` ([`World::trigger_targets`]) later.
    pub fn trigger_targets<E: Event>(
        &mut self,
        event: E,
        targets: impl IntoIterator<Item = Entity>,
    ) {
        let targets: SmallVec<[Entity; 4]> = targets.into_iter().collect();
        self.defer(move |world: &mut World| world.trigger_targets(event, targets));
    }
}

impl Deref for DeferredWorld<'_> {
    type Target = World;

    fn deref(&self) -> &World {
        self.world
    }
}

impl std::fmt::Debug for DeferredWorld<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredWorld").field("world", &self.world.id()).finish()
    }
}
