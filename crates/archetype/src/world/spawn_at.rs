//! Spawning at a given id: [`World::spawn_at`] and [`World::try_spawn_at`], for a load that
//! keeps the saved ids and for a game that chooses its ids (a server's, mirrored by a client).

use folio_storage::Entity;

use super::{World, or_panic};
use crate::archetype::ArchetypeId;
use crate::bundle::Bundle;
use crate::error::EntityError;
use crate::hooks::HookFlags;

impl World {
    /// Spawns `entity`, exactly that id, with the components of `bundle`.
    ///
    /// # Panics
    /// When the id is not free, the bundle repeats a component type, or memory runs out;
    /// [`World::try_spawn_at`] returns those as errors.
    ///
    /// ```
    /// use folio_archetype::{Entity, World};
    ///
    /// let mut world = World::new();
    /// let id = Entity::from_bits(7 | 3 << 32).unwrap(); // index 7, generation 3
    /// world.spawn_at(id, (1.5f32,));
    /// assert_eq!(world.get::<f32>(id), Some(&1.5));
    /// assert!(world.try_spawn_at(id, ()).is_err()); // alive now
    /// ```
    #[track_caller]
    pub fn spawn_at<B: Bundle>(&mut self, entity: Entity, bundle: B) {
        or_panic(self.try_spawn_at(entity, bundle), "World::spawn_at");
    }

    /// Spawns `entity`, exactly that id, with the components of `bundle`, or says why it could
    /// not (and drops the bundle).
    ///
    /// The id's slot must be free or never used, and the id's generation at least the one the
    /// slot hands out next (an id is never alive twice). The slot leaves the freelist and the
    /// other free slots keep their order, so later spawns get the same ids on every run; an
    /// index past every one used so far makes the indices between free, at generation 1, at
    /// the back of the freelist. Reserved entities are flushed first, so an id handed out by
    /// [`World::reserve_entity`] is alive, not free.
    ///
    /// # Errors
    /// [`EntityError::IdNotFree`] when the slot is alive, retired, or hands out a later
    /// generation; [`EntityError::Component`] for a bundle that repeats a component type;
    /// [`EntityError::Storage`] when memory runs out or the index is past
    /// [`Entities::max_entities`](folio_storage::Entities::max_entities). On error nothing
    /// changed but the flush of reserved entities, when it succeeded.
    pub fn try_spawn_at<B: Bundle>(
        &mut self,
        entity: Entity,
        bundle: B,
    ) -> Result<(), EntityError> {
        self.try_flush()?;
        self.entities.check_alloc_exact(entity)?;
        let b = self.bundle_id::<B>()?;
        let tick = self.change_tick();
        let archetype = self.spawn_plan(b)?.archetype;
        self.reserve_at(archetype, entity)?;
        self.entities.try_alloc_exact(entity)?;
        // SAFETY:
        // - the pointers are `B`'s components in `B`'s order, which `bundles[b]` lists.
        // - room for a row in the archetype's table and an entry for `entity` in each of its
        //   sparse sets was reserved above.
        bundle.get_components(|ptrs| unsafe { self.place_new(entity, archetype, b, ptrs, tick) });
        if self.entity_has_hooks(entity, HookFlags::SPAWN) {
            self.after_spawn(entity);
        }
        Ok(())
    }

    /// Reserves what `entity`, new in `archetype`, takes: a row in its table and an entry in
    /// each of its sparse sets.
    fn reserve_at(&mut self, archetype: ArchetypeId, entity: Entity) -> Result<(), EntityError> {
        let arch = &self.archetypes[archetype.index()];
        self.tables[arch.table_id().index()].try_reserve(1)?;
        self.archetypes[archetype.index()].try_reserve(1)?;
        let arch = &self.archetypes[archetype.index()];
        for c in arch.sparse_components() {
            let set = self.sparse_sets[c.index()].as_mut().expect("made with the archetype");
            set.try_reserve(1)?;
            set.try_reserve_entity(entity)?;
        }
        Ok(())
    }
}
