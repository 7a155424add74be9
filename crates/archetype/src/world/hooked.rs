//! The hooked paths of the structural operations ([`crate::hooks`]): each runs the raw
//! operation (the `*_raw` methods of `spawn.rs`, `despawn.rs`, `insert_remove.rs` and
//! `batch.rs`) between the hooks of the components it adds, replaces or removes, then the work
//! those hooks deferred. The public operations take these paths only while some
//! component has a hook of the kind they would run.

use std::any::TypeId;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use super::batch::first_repeat;
use super::{World, or_panic};
use crate::archetype::ArchetypeId;
use crate::bundle::Bundle;
use crate::component::{Component, ComponentId};
use crate::error::EntityError;
use crate::hooks::{ComponentHooks, DeferredWorld, HookFlags};
use crate::try_alloc::{reserve, vec_with_capacity};
use folio_storage::Entity;

impl World {
    /// Sets the hooks of component type `T` (registering it, with table storage, if it is not
    /// yet), replacing any it had, and returns the old ones. See [`crate::hooks`] for when each
    /// hook runs. Hooks apply to the operations from now on: entities that have a `T` already
    /// are not visited. A sparse-set component is registered as one
    /// ([`World::register_component`]) before its hooks are set, as before its first spawn.
    pub fn set_hooks<T: Component>(&mut self, hooks: ComponentHooks) -> ComponentHooks {
        let id = self.register_hooked::<T>();
        let old = self.hooks.set(id, hooks);
        self.refresh_hook_flags();
        old
    }

    /// Registers `T` (with table storage, if it is not yet) for hooks or observers.
    pub(crate) fn register_hooked<T: Component>(&mut self) -> ComponentId {
        let id = self.components.register::<T>();
        self.removals.resolve_pending(&self.components);
        id
    }

    /// Recomputes every archetype's hook kinds, after hooks or observers changed.
    pub(crate) fn refresh_hook_flags(&mut self) {
        for archetype in &mut self.archetypes {
            archetype.set_hook_flags(self.hooks.flags_of(archetype.components()));
        }
    }

    /// The hooks of component type `T` (none for a type not registered).
    pub fn hooks<T: Component>(&self) -> ComponentHooks {
        self.components.id::<T>().map(|id| self.hooks.of(id)).unwrap_or_default()
    }

    /// Runs the structural work hooks deferred ([`DeferredWorld::defer`]), in order, until none
    /// is left (work deferred by the hooks of that work included). Every hooked operation does
    /// this before it returns; call it to run what a panicking hook's operation left queued.
    /// Called from inside deferred work, it returns at once: the loop already running takes
    /// what is queued.
    #[inline]
    pub fn apply_deferred(&mut self) {
        if self.hooks.deferred.is_empty() || self.hooks.applying {
            return;
        }
        self.apply_deferred_queue();
    }

    fn apply_deferred_queue(&mut self) {
        /// Clears the "applying" mark even when a closure panics (the closures after it stay
        /// queued for the next call).
        struct Applying<'a>(&'a mut World);
        impl Drop for Applying<'_> {
            fn drop(&mut self) {
                self.0.hooks.applying = false;
                // The loop runs from outside any event: back to depth 0.
                self.0.observers.depth = 0;
            }
        }
        self.hooks.applying = true;
        let guard = Applying(self);
        while let Some((depth, work)) = guard.0.hooks.deferred.pop_front() {
            // Work runs at the event depth it was queued at (an observer's work at its event's
            // depth), so an event it triggers is one deeper: a chain of events through
            // deferred work is counted too.
            guard.0.observers.depth = depth;
            work(guard.0);
        }
    }

    /// Queues `work` to run after the current operation, at the current event depth.
    pub(crate) fn defer(&mut self, work: Box<dyn FnOnce(&mut World) + Send + Sync>) {
        self.hooks.deferred.push_back((self.observers.depth, work));
    }

    /// Whether some component of `entity` (alive) has a hook of a kind in `kinds`: what a
    /// public operation checks before it leaves its hookless path. One compare while no
    /// component has such a hook; then the kinds kept on the entity's archetype.
    #[inline(always)]
    pub(super) fn entity_has_hooks(&self, entity: Entity, kinds: u8) -> bool {
        self.hooks.any(kinds)
            && self.entities.location(entity).is_some_and(|loc| {
                self.archetypes[loc.archetype_id as usize].hook_flags() & kinds != 0
            })
    }

    /// Whether some component of bundle `B` has a hook of a kind in `kinds` (never for a bundle
    /// the hookless path refuses anyway).
    #[inline(always)]
    pub(super) fn bundle_has_hooks<B: Bundle>(&mut self, kinds: u8) -> bool {
        if !self.hooks.any(kinds) && self.last_bundle.is_none_or(|(t, _)| t != TypeId::of::<B>()) {
            // A bundle new to the world may name the built-in hierarchy, whose registration
            // installs hooks: register the bundle before deciding (the hookless path would look
            // it up next anyway).
            let _ = self.bundle_id::<B>();
        }
        self.hooks.any(kinds)
            && self.bundle_id::<B>().is_ok_and(|b| self.hooks.any_in(self.bundles[b].ids(), kinds))
    }

    /// How many closures hooks deferred wait to run ([`World::apply_deferred`]).
    pub fn deferred_len(&self) -> usize {
        self.hooks.deferred.len()
    }

    /// Runs the hooks of kind `kind` (one [`HookFlags`] bit) of the components of `ids` that
    /// `only` keeps, in order, on `entity`. Each hook is looked up as its turn comes, so
    /// nothing is collected (a list of hooks or ids could need the heap): a hook changes no
    /// hooks, bundles or archetypes (a [`DeferredWorld`] defers structural changes), so the
    /// ids stay as they are while the hooks run.
    fn run_kind(
        &mut self,
        entity: Entity,
        ids: Ids,
        kind: u8,
        only: impl Fn(&World, ComponentId) -> bool,
    ) {
        let mut i = 0;
        while let Some(&c) = self.ids(ids).get(i) {
            i += 1;
            if let Some(hook) = self.hooks.of_kind(c, kind)
                && only(self, c)
            {
                hook(&mut DeferredWorld::new(self), entity);
            }
        }
        // Then the observers of the kind, once every hook has run (so an observer sees the
        // indexes hooks keep, such as a relationship's, up to date).
        if self.hooks.any_observed(kind) {
            let mut i = 0;
            while let Some(&c) = self.ids(ids).get(i) {
                i += 1;
                if self.hooks.observed(c, kind) && only(self, c) {
                    self.run_lifecycle_observers(kind, c, entity);
                }
            }
        }
    }

    /// The component ids `ids` names.
    fn ids(&self, ids: Ids) -> &[ComponentId] {
        match ids {
            Ids::Bundle(b) => self.bundles[b].ids(),
            Ids::Archetype(a) => self.archetypes[a.index()].components(),
        }
    }

    /// Runs `on_replace`, then `on_remove`, of the components `ids` that `entity` is about to
    /// lose.
    fn run_removal_hooks(&mut self, entity: Entity, ids: Ids) {
        self.run_kind(entity, ids, HookFlags::REPLACE, |_, _| true);
        self.run_kind(entity, ids, HookFlags::REMOVE, |_, _| true);
    }

    /// The archetype of `entity`, or `None` if it is not alive.
    fn archetype_of(&self, entity: Entity) -> Option<ArchetypeId> {
        self.entities.location(entity).map(|loc| ArchetypeId(loc.archetype_id))
    }

    /// [`World::spawn_batch`] of a bundle with `on_add` or `on_insert` hooks: one
    /// [`World::spawn`] at a time, each entity complete, its hooks and their deferred work
    /// run, before the iterator is asked for the next bundle (an iterator that panics leaves no
    /// spawned entity without its hooks).
    #[cold]
    #[inline(never)]
    pub(super) fn spawn_batch_hooked<B: Bundle>(
        &mut self,
        iter: impl Iterator<Item = B>,
    ) -> Vec<Entity> {
        // The list grows fallibly (a refusal is `spawn`'s panic, not an abort).
        let mut spawned = vec_with_capacity(iter.size_hint().0).unwrap_or_default();
        for bundle in iter {
            or_panic(reserve(&mut spawned, 1), "World::spawn");
            spawned.push(self.spawn(bundle));
        }
        spawned
    }

    /// Runs `on_add`, then `on_insert`, of every component of a freshly spawned entity (all of
    /// them new).
    fn run_spawn_hooks(&mut self, entity: Entity) {
        let Some(archetype) = self.archetype_of(entity) else { return };
        self.run_kind(entity, Ids::Archetype(archetype), HookFlags::ADD, |_, _| true);
        self.run_kind(entity, Ids::Archetype(archetype), HookFlags::INSERT, |_, _| true);
    }

    /// Runs `on_add`, then `on_insert`, of every component of a freshly spawned entity (all of
    /// them new), then the deferred work.
    #[cold]
    #[inline(never)]
    pub(super) fn after_spawn(&mut self, entity: Entity) {
        self.run_spawn_hooks(entity);
        self.apply_deferred();
    }

    /// An insert of bundle `B` into `entity` done by `op`, between its hooks: `on_replace` of
    /// the components the entity has (before), `on_add` of those it did not have and `on_insert`
    /// of all (after), then the deferred work.
    ///
    /// Out of line and cold, so that the hookless path it branches off from stays as small as
    /// it was: its inlining budget goes to its own helpers (as for every `*_with_hooks`).
    #[cold]
    #[inline(never)]
    pub(super) fn insert_hooked<B: Bundle>(
        &mut self,
        entity: Entity,
        op: impl FnOnce(&mut Self) -> Result<(), EntityError>,
    ) -> Result<(), EntityError> {
        let done = self.insert_hooked_deferring::<B>(entity, op);
        self.apply_deferred();
        done
    }

    /// [`World::insert_hooked`] without running the deferred work.
    fn insert_hooked_deferring<B: Bundle>(
        &mut self,
        entity: Entity,
        op: impl FnOnce(&mut Self) -> Result<(), EntityError>,
    ) -> Result<(), EntityError> {
        // The callers checked that the bundle has insert hooks (and so resolves).
        let b = self.bundle_id::<B>()?;
        // `None`: not alive (yet): a pending reservation becomes an entity with only these.
        let before = self.archetype_of(entity);
        let had = move |w: &World, c| before.is_some_and(|a| w.archetypes[a.index()].contains(c));
        self.run_kind(entity, Ids::Bundle(b), HookFlags::REPLACE, had);
        // A replaced value's `Drop` that panics does so once the insert is complete: the new
        // values still get their hooks, then the panic continues. Only components the entity
        // now has are hooked, whatever the panic was.
        let panic = match catch_unwind(AssertUnwindSafe(|| op(self))) {
            Ok(done) => {
                done?;
                None
            }
            Err(payload) => Some(payload),
        };
        let now = self.archetype_of(entity);
        let has = move |w: &World, c| now.is_some_and(|a| w.archetypes[a.index()].contains(c));
        let added = move |w: &World, c| !had(w, c) && has(w, c);
        self.run_kind(entity, Ids::Bundle(b), HookFlags::ADD, added);
        self.run_kind(entity, Ids::Bundle(b), HookFlags::INSERT, has);
        if let Some(payload) = panic {
            resume_unwind(payload);
        }
        Ok(())
    }

    /// [`World::insert_batch`] of a bundle with hooks, its entities checked alive: room
    /// reserved for all, then one hooked insert at a time in the batch's order, then the
    /// deferred work.
    #[cold]
    #[inline(never)]
    pub(super) fn insert_batch_hooked<B: Bundle>(
        &mut self,
        batch: Vec<(Entity, B)>,
        b: usize,
    ) -> Result<(), EntityError> {
        let targets =
            self.batch_targets(batch.iter().map(|&(e, _)| e), |w, from| w.insert_edge(from, b))?;
        self.reserve_batch_targets(&targets)?;
        self.reserve_bundle_sets(b, batch.iter().map(|&(e, _)| e), batch.len())?;
        let mut done = Ok(());
        for (entity, bundle) in batch {
            done = self.insert_hooked_deferring::<B>(entity, |w| w.insert_raw(entity, bundle));
            if done.is_err() {
                break;
            }
        }
        self.apply_deferred();
        done
    }

    /// [`World::try_remove`] with removal hooks somewhere: once the entity is known to be
    /// alive and hold every component of `B`, their `on_replace` and `on_remove` hooks, then the
    /// removal, then the deferred work.
    #[cold]
    #[inline(never)]
    pub(super) fn try_remove_with_hooks<B: Bundle>(
        &mut self,
        entity: Entity,
    ) -> Result<B, EntityError> {
        let removed = self.try_remove_hooked(entity);
        self.apply_deferred();
        removed
    }

    fn try_remove_hooked<B: Bundle>(&mut self, entity: Entity) -> Result<B, EntityError> {
        self.try_flush()?;
        let loc = self.entities.location(entity).ok_or(EntityError::NoSuchEntity(entity))?;
        // The caller checked that the entity's archetype has removal hooks; the bundle's own
        // components may have none.
        let b = self.bundle_id::<B>()?;
        if self.hooks.any_in(self.bundles[b].ids(), HookFlags::REMOVAL) {
            self.check_has_bundle(entity, loc, b)?;
            self.run_removal_hooks(entity, Ids::Bundle(b));
        }
        self.try_remove_raw(entity)
    }

    /// The removal hooks of bundle `b`'s components for each of `entities` (checked: alive,
    /// holding the bundle, listed once).
    #[cold]
    #[inline(never)]
    pub(super) fn run_removal_hooks_batch(&mut self, entities: &[Entity], b: usize) {
        for &entity in entities {
            self.run_removal_hooks(entity, Ids::Bundle(b));
        }
    }

    /// Checks a batch for [`World::remove_batch`] as its raw path would, before any hook runs:
    /// every entity alive and holding bundle `b`, none listed twice.
    pub(super) fn check_remove_batch(
        &self,
        entities: &[Entity],
        b: usize,
    ) -> Result<(), EntityError> {
        let run = self.check_batch(entities.iter().copied(), Some(b))?;
        // A run of one archetype's rows in increasing order lists no entity twice.
        if run.archetype.is_none()
            && let Some(twice) = first_repeat(entities.iter().copied())?
        {
            return Err(EntityError::ListedTwice(twice));
        }
        Ok(())
    }

    /// [`World::despawn`] with removal hooks somewhere: [`World::despawn_hooked`], then the
    /// deferred work.
    #[cold]
    #[inline(never)]
    pub(super) fn despawn_with_hooks(&mut self, entity: Entity) -> Result<(), EntityError> {
        let despawned = self.despawn_hooked(entity);
        self.apply_deferred();
        despawned
    }

    /// The entity's components' `on_replace` and `on_remove` hooks while it is whole, then the
    /// despawn; the caller runs the deferred work. The removal logs' room is made before the
    /// hooks run (they change no structure, so it stays made): a despawn the heap refuses runs
    /// no hook.
    fn despawn_hooked(&mut self, entity: Entity) -> Result<(), EntityError> {
        if self.removals.any() {
            self.reserve_removal_of(entity)?;
        }
        self.run_removal_hooks_of(entity);
        self.despawn_raw(entity)
    }

    /// The removal hooks of every component of `entity`, if it is alive and has any.
    fn run_removal_hooks_of(&mut self, entity: Entity) {
        let Some(archetype) = self.archetype_of(entity) else { return };
        if self.archetypes[archetype.index()].hook_flags() & HookFlags::REMOVAL != 0 {
            self.run_removal_hooks(entity, Ids::Archetype(archetype));
        }
    }

    /// [`World::despawn_batch`] with removal hooks somewhere: the removal hooks of every entity
    /// of the batch first, while all of them are whole (each entity once, however often it is
    /// listed), then the batch despawned as without hooks (swept, for a large one), then the
    /// deferred work.
    ///
    /// If a component's `Drop` panics, the rest of the batch is still despawned (each entity
    /// whose hooks ran must go: its `on_remove` will not run again), each further panic caught
    /// and dropped, and the first panic continues once the batch is gone.
    #[cold]
    #[inline(never)]
    pub(super) fn despawn_batch_hooked(
        &mut self,
        mut entities: impl Iterator<Item = Entity>,
    ) -> usize {
        // The batch and the set of entities whose hooks ran, made fallibly; when the heap
        // refuses either, the batch is despawned one at a time instead, each entity right
        // after its own hooks, which needs no memory.
        let mut list = vec_with_capacity(entities.size_hint().0).unwrap_or_default();
        let mut refused = None;
        for entity in entities.by_ref() {
            if reserve(&mut list, 1).is_err() {
                refused = Some(entity);
                break;
            }
            list.push(entity);
        }
        let mut seen = ahash::AHashSet::default();
        if refused.is_some() || seen.try_reserve(list.len()).is_err() {
            let mut despawned = 0;
            for entity in list.into_iter().chain(refused).chain(entities) {
                despawned += usize::from(self.despawn_hooked(entity).is_ok());
            }
            self.apply_deferred();
            return despawned;
        }
        let entities = list;
        for &entity in &entities {
            if self.entity_has_hooks(entity, HookFlags::REMOVAL) && seen.insert(entity) {
                self.run_removal_hooks_of(entity);
            }
        }
        let batch = entities.iter().copied();
        match catch_unwind(AssertUnwindSafe(|| self.despawn_batch_raw(batch))) {
            Ok(despawned) => {
                self.apply_deferred();
                despawned
            }
            Err(payload) => {
                // The entities the batch had not reached (and the one whose `Drop` panicked is
                // gone already): despawned one at a time, later panics dropped.
                for &entity in &entities {
                    if self.entities.is_alive(entity) {
                        let _ = catch_unwind(AssertUnwindSafe(|| self.despawn_raw(entity)));
                    }
                }
                resume_unwind(payload)
            }
        }
    }

    /// For [`World::try_clear`]: the removal hooks of every entity whose archetype has some,
    /// while the world is whole. Nothing is collected: the hooks change no structure, so each
    /// archetype's entities stay at their rows while its hooks run.
    #[cold]
    #[inline(never)]
    pub(super) fn run_removal_hooks_all(&mut self) {
        for a in 0..self.archetypes.len() {
            let archetype = &self.archetypes[a];
            if archetype.hook_flags() & HookFlags::REMOVAL == 0 {
                continue;
            }
            for row in 0..archetype.len() {
                let archetype = &self.archetypes[a];
                let table = &self.tables[archetype.table_id().index()];
                let entity = archetype.entities(table).get(row).expect("in bounds").entity;
                self.run_removal_hooks(entity, Ids::Archetype(ArchetypeId(a as u32)));
            }
        }
    }
}

/// Where [`World::run_kind`] finds its component ids.
#[derive(Clone, Copy, Debug)]
enum Ids {
    /// The components of a bundle (by the world's index of it).
    Bundle(usize),
    /// The components of an archetype.
    Archetype(ArchetypeId),
}
