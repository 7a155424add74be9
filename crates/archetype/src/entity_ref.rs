//! Views of one entity: [`EntityRef`] (read-only, `Copy`) from [`World::entity`] and
//! [`EntityWorldMut`] (reads, writes and structural changes) from [`World::entity_mut`]. What a
//! view checks, and where its calls go, is on [`EntityRef`]'s docs.

use folio_storage::Entity;

use crate::archetype::Archetype;
use crate::bundle::Bundle;
use crate::component::{Component, ComponentInfo};
use crate::error::EntityError;
use crate::world::World;

/// A read-only view of a live entity in a [`World`].
///
/// A view (this one, or an [`EntityWorldMut`]) is made only for a live entity, so code that does
/// several things to one entity checks it once (`world.entity(e)?`) and then works on components
/// without `Option`s of liveness. Both are thin: each call goes through the `World` method of the
/// same name, so they share its checks and its change-tick stamping.
#[derive(Clone, Copy)]
pub struct EntityRef<'w> {
    world: &'w World,
    /// Alive in `world` for as long as the shared borrow lasts.
    entity: Entity,
}

impl<'w> EntityRef<'w> {
    pub(crate) fn new(world: &'w World, entity: Entity) -> Self {
        debug_assert!(world.contains(entity));
        Self { world, entity }
    }

    /// The entity's id.
    #[inline]
    pub fn id(&self) -> Entity {
        self.entity
    }

    /// Its `T`, if it has one.
    #[inline]
    pub fn get<T: Component>(&self) -> Option<&'w T> {
        self.world.get::<T>(self.entity)
    }

    /// Whether it has a `T`.
    #[inline]
    pub fn contains<T: Component>(&self) -> bool {
        self.world.has::<T>(self.entity)
    }

    /// Its archetype: its exact component set, table and sparse-set components together.
    pub fn archetype(&self) -> &'w Archetype {
        archetype_of(self.world, self.entity)
    }

    /// Each of its components' registry entries (name, layout, storage), in component-id
    /// order.
    pub fn components(&self) -> impl ExactSizeIterator<Item = &'w ComponentInfo> + 'w {
        let components = self.world.components();
        self.archetype().components().iter().map(move |&c| components.info(c))
    }
}

impl std::fmt::Debug for EntityRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.components().map(ComponentInfo::name).collect();
        f.debug_struct("EntityRef").field("id", &self.entity).field("components", &names).finish()
    }
}

/// A view of a live entity that can read, write, insert, remove and despawn (made and working as
/// [`EntityRef`] says).
///
/// The view's own methods never despawn its entity while it lasts; work deferred by a
/// component hook ([`crate::hooks`]) during its `insert` or `remove` can
/// ([`EntityWorldMut::is_despawned`] tells). Then `get`, `get_mut` and `contains` answer as for
/// any dead entity, `insert` and `remove` fail as for one, `despawn` does nothing, `Debug`
/// says so, and `archetype` and `as_ref` panic.
pub struct EntityWorldMut<'w> {
    world: &'w mut World,
    /// Alive in `world`, unless a hook's deferred work despawned it.
    entity: Entity,
}

impl<'w> EntityWorldMut<'w> {
    pub(crate) fn new(world: &'w mut World, entity: Entity) -> Self {
        debug_assert!(world.contains(entity));
        Self { world, entity }
    }

    /// The entity's id.
    #[inline]
    pub fn id(&self) -> Entity {
        self.entity
    }

    /// Whether the entity is gone: despawned by work a component hook deferred during this
    /// view's `insert` or `remove` (nothing else can while the view lasts).
    #[inline]
    pub fn is_despawned(&self) -> bool {
        !self.world.contains(self.entity)
    }

    /// Its `T`, if it has one.
    #[inline]
    pub fn get<T: Component>(&self) -> Option<&T> {
        self.world.get::<T>(self.entity)
    }

    /// Its `T`, mutably; marks it changed at the current tick.
    #[inline]
    pub fn get_mut<T: Component>(&mut self) -> Option<&mut T> {
        self.world.get_mut::<T>(self.entity)
    }

    /// Whether it has a `T`.
    #[inline]
    pub fn contains<T: Component>(&self) -> bool {
        self.world.has::<T>(self.entity)
    }

    /// Its archetype.
    ///
    /// # Panics
    /// When a hook's deferred work despawned the entity ([`EntityWorldMut::is_despawned`]).
    #[track_caller]
    pub fn archetype(&self) -> &Archetype {
        archetype_of(self.world, self.entity)
    }

    /// Adds the components of `bundle`, replacing any it has (as [`World::insert`]).
    ///
    /// # Errors
    /// A bundle that repeats a component, or memory the OS refuses; nothing changed then.
    /// [`EntityError::NoSuchEntity`] once a hook's deferred work despawned the entity.
    pub fn insert<B: Bundle>(&mut self, bundle: B) -> Result<&mut Self, EntityError> {
        self.world.insert(self.entity, bundle)?;
        Ok(self)
    }

    /// Takes the components of `B` out, or `None` (changing nothing) when it lacks one of
    /// them (as [`World::remove`]).
    pub fn remove<B: Bundle>(&mut self) -> Option<B> {
        self.world.remove::<B>(self.entity)
    }

    /// A read-only view of the entity.
    ///
    /// # Panics
    /// When a hook's deferred work despawned the entity ([`EntityWorldMut::is_despawned`]).
    #[track_caller]
    pub fn as_ref(&self) -> EntityRef<'_> {
        assert!(!self.is_despawned(), "{:?} was despawned by a hook's deferred work", self.entity);
        EntityRef::new(self.world, self.entity)
    }

    /// Despawns the entity, dropping its components, and ends the view (nothing to do if a
    /// hook's deferred work despawned it already).
    pub fn despawn(self) {
        // The only error is a dead entity: one that a hook's deferred work despawned.
        let _ = self.world.despawn(self.entity);
    }

    /// The world, for what the view does not cover; the view ends.
    pub fn into_world_mut(self) -> &'w mut World {
        self.world
    }
}

impl std::fmt::Debug for EntityWorldMut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_despawned() {
            return f
                .debug_struct("EntityWorldMut")
                .field("id", &self.entity)
                .field("despawned", &true)
                .finish();
        }
        let view = self.as_ref();
        let names: Vec<_> = view.components().map(ComponentInfo::name).collect();
        f.debug_struct("EntityWorldMut")
            .field("id", &self.entity)
            .field("components", &names)
            .finish()
    }
}

#[track_caller]
fn archetype_of(world: &World, entity: Entity) -> &Archetype {
    let Some(loc) = world.entities().location(entity) else {
        panic!("{entity:?} was despawned (by a hook's deferred work, as a view's entity can be)")
    };
    &world.archetypes()[loc.archetype_id as usize]
}

impl World {
    /// A read-only view of `entity`.
    ///
    /// # Errors
    /// [`EntityError::NoSuchEntity`] when it is not alive.
    pub fn entity(&self, entity: Entity) -> Result<EntityRef<'_>, EntityError> {
        if self.contains(entity) {
            Ok(EntityRef::new(self, entity))
        } else {
            Err(EntityError::NoSuchEntity(entity))
        }
    }

    /// A view of `entity` that can change it. Reserved entities are flushed first, so a reserved
    /// `entity` is alive by then.
    ///
    /// # Errors
    /// [`EntityError::NoSuchEntity`] when it is not alive; [`EntityError::Storage`] when memory
    /// to flush the reserved entities was refused (nothing changed: they stay reserved).
    pub fn entity_mut(&mut self, entity: Entity) -> Result<EntityWorldMut<'_>, EntityError> {
        self.try_flush()?;
        if self.contains(entity) {
            Ok(EntityWorldMut::new(self, entity))
        } else {
            Err(EntityError::NoSuchEntity(entity))
        }
    }
}
