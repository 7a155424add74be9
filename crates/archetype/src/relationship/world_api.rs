//! The world's relationship operations for any [`Relationship`]: registering, relating with
//! checks, unrelating, and reading both sides.

use std::any::TypeId;
use std::marker::PhantomData;

use folio_storage::Entity;

use super::{
    Links, Relationship, RelationshipError, RelationshipTarget, check, install, link_now, links,
    target_of,
};
use crate::World;
use crate::component::ComponentId;

impl World {
    /// Makes folio keep `R` and its collection in step (see [`crate::relationship`]); does
    /// nothing if `R` is registered already. Entities that hold an `R` already are listed on
    /// their targets now, in entity order (those whose relationship is bad, e.g. to a dead
    /// target, lose it, as a raw insert of it would).
    ///
    /// [`ChildOf`](crate::ChildOf) registers itself; [`World::relate`] and
    /// [`World::unrelate`] register `R` on first use.
    pub fn register_relationship<R: Relationship>(&mut self) {
        if self.is_relationship_registered::<R>() {
            return;
        }
        let registered = &mut self.relationships;
        registered.checks.push((
            TypeId::of::<R>(),
            super::invariants::check_relationship::<R>,
            super::rebuild_links::<R>,
        ));
        registered
            .links
            .insert(TypeId::of::<R>(), Box::new(Links::<R> { slots: Vec::new(), _r: PhantomData }));
        // Snapshots copy both sides (unless the game registered them its own way already);
        // a restore then makes the links again from the collections.
        self.register_snapshot_if_absent::<R>();
        self.register_snapshot_if_absent::<R::Target>();
        install::<R>(self);
        // Link the entities that held `R` before: the hooks did not see them.
        let id = self.components().id::<R>().expect("registered by install");
        let holders = self.holders(id);
        for source in holders {
            let Some(target) = target_of::<R>(self, source) else { continue };
            if check::<R>(self, source, target).is_ok() {
                link_now::<R>(self, source, target);
            } else {
                let _ = self.remove::<(R,)>(source);
            }
        }
    }

    /// Whether `R` is registered in this world.
    pub fn is_relationship_registered<R: Relationship>(&self) -> bool {
        self.relationships.checks.iter().any(|&(t, ..)| t == TypeId::of::<R>())
    }

    /// Relates `source` to `target` under `R` (inserting `R::from_target(target)` on
    /// `source`, replacing a relationship it had), after checking that it may: the checked form
    /// of `insert((R::from_target(target),))`. Registers `R` on first use.
    ///
    /// # Errors
    /// [`RelationshipError::NoSuchSource`] / [`RelationshipError::NoSuchTarget`] for a dead
    /// entity, [`RelationshipError::SelfRelation`] for `source == target` unless
    /// [`Relationship::ALLOW_SELF`], [`RelationshipError::Cycle`] when `target` reaches
    /// `source` through an acyclic `R`, [`RelationshipError::Entity`] when memory was refused.
    /// Nothing changed then.
    pub fn relate<R: Relationship>(
        &mut self,
        source: Entity,
        target: Entity,
    ) -> Result<(), RelationshipError> {
        self.register_relationship::<R>();
        if !self.contains(source) {
            return Err(RelationshipError::NoSuchSource(source));
        }
        check::<R>(self, source, target)?;
        self.insert(source, (R::from_target(target),))?;
        Ok(())
    }

    /// Removes `source`'s `R`, returning the target it had (`None` when it had none, or is
    /// not alive). Registers `R` on first use.
    pub fn unrelate<R: Relationship>(&mut self, source: Entity) -> Option<Entity> {
        self.register_relationship::<R>();
        self.remove::<(R,)>(source).map(|(r,)| r.target())
    }

    /// `source`'s target under `R`, if it has one.
    pub fn related<R: Relationship>(&self, source: Entity) -> Option<Entity> {
        target_of::<R>(self, source)
    }

    /// The sources related to `target` (empty when it has none, or is not alive).
    pub fn sources<T: RelationshipTarget>(&self, target: Entity) -> &[Entity] {
        self.get::<T>(target).map_or(&[], |t| t.sources().as_slice())
    }

    /// The index of `source` in its target's list under `R` (`None` when it is not listed).
    pub fn source_index<R: Relationship>(&self, source: Entity) -> Option<usize> {
        if !self.is_relationship_registered::<R>() {
            return None;
        }
        let links = super::links::<R>(self);
        target_of::<R>(self, source)?;
        let slot = links.get(source);
        (slot < super::PENDING).then_some(slot as usize)
    }

    /// The entities holding component `id`, in archetype order.
    pub(super) fn holders(&self, id: ComponentId) -> Vec<Entity> {
        let mut out = Vec::new();
        for archetype in self.archetypes() {
            if archetype.contains(id) {
                out.extend(self.archetype_entities(archetype.id()).iter().map(|e| e.entity));
            }
        }
        out
    }
}

/// `links` for the invariant checks: the source's index in its target's list (or a mark),
/// and the target its link records.
pub(super) fn slot_of<R: Relationship>(world: &World, source: Entity) -> (u32, Option<Entity>) {
    let link = links::<R>(world).link(source);
    (link.slot, link.target)
}
