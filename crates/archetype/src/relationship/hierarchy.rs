//! The built-in hierarchy: [`ChildOf`] on a child, [`Children`] on its parent, and the
//! world's parent/child operations.

use std::collections::VecDeque;
use std::ops::Deref;

use folio_storage::Entity;

use super::{Relationship, RelationshipError, RelationshipTarget, Sources};
use crate::World;
use crate::component::ComponentId;
use crate::error::EntityError;

/// The parent of the entity holding it: the hierarchy's [`Relationship`].
///
/// Despawning a parent despawns its children, recursively ([`Relationship::LINKED_DESPAWN`]);
/// the hierarchy is acyclic ([`World::set_parent`] refuses making a child the parent of its
/// ancestor) and no entity is its own parent. [`Children`] lists a parent's children: in the
/// order they were attached until one is detached, whose place the last child then takes
/// (removal is O(1); see [`crate::relationship`]).
///
/// `ChildOf` registers itself in a world on first use, however it is inserted: `insert`,
/// `spawn`, batches or commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChildOf(pub Entity);

impl ChildOf {
    /// The parent.
    pub fn parent(&self) -> Entity {
        self.0
    }
}

/// With the `serde` feature a save game keeps the hierarchy when its registry names `ChildOf`
/// (`registry.component_with_entities::<ChildOf>("child_of")`): the load inserts each
/// `ChildOf`, whose hook lists the child in its parent's `Children` again (`Children` itself is
/// not saved), and a load that gives entities new ids maps the parent's id. A parent's children
/// are then listed in the order the load inserts them (the save's table order), which need
/// not be the order they were attached in.
#[cfg(feature = "serde")]
impl serde::Serialize for ChildOf {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_newtype_struct("ChildOf", &self.0)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for ChildOf {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Parent;
        impl<'de> serde::de::Visitor<'de> for Parent {
            type Value = ChildOf;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("ChildOf(entity)")
            }
            fn visit_newtype_struct<D: serde::Deserializer<'de>>(
                self,
                deserializer: D,
            ) -> Result<ChildOf, D::Error> {
                serde::Deserialize::deserialize(deserializer).map(ChildOf)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<ChildOf, A::Error> {
                seq.next_element()?
                    .map(ChildOf)
                    .ok_or_else(|| serde::de::Error::invalid_length(0, &self))
            }
        }
        deserializer.deserialize_newtype_struct("ChildOf", Parent)
    }
}

#[cfg(feature = "serde")]
impl crate::save::MapEntities for ChildOf {
    fn map_entities(&mut self, map: &crate::save::EntityMap) {
        self.0 = map.map(self.0);
    }
}

impl Relationship for ChildOf {
    type Target = Children;
    const LINKED_DESPAWN: bool = true;
    const ACYCLIC: bool = true;

    fn target(&self) -> Entity {
        self.0
    }

    fn from_target(target: Entity) -> Self {
        Self(target)
    }
}

/// The children of the entity holding it, kept by folio from their [`ChildOf`]s. A parent keeps
/// its (then empty) `Children` when its last child leaves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Children(Sources);

impl RelationshipTarget for Children {
    type Relationship = ChildOf;

    fn sources(&self) -> &Sources {
        &self.0
    }

    fn sources_mut(&mut self) -> &mut Sources {
        &mut self.0
    }

    fn from_sources(sources: Sources) -> Self {
        Self(sources)
    }
}

impl Deref for Children {
    type Target = [Entity];

    fn deref(&self) -> &[Entity] {
        &self.0
    }
}

impl World {
    /// Makes `child` a child of `parent` (moving it from its old parent, if any): the checked
    /// form of `insert(child, (ChildOf(parent),))`.
    ///
    /// # Errors
    /// A dead `child` or `parent`, `child == parent`, or `parent` a descendant of `child` (a
    /// cycle); see [`World::relate`]. Nothing changed then.
    pub fn set_parent(&mut self, child: Entity, parent: Entity) -> Result<(), RelationshipError> {
        self.relate::<ChildOf>(child, parent)
    }

    /// Detaches `child` from its parent, making it a root; returns the old parent (`None` when
    /// it had none or is not alive).
    pub fn remove_parent(&mut self, child: Entity) -> Option<Entity> {
        self.unrelate::<ChildOf>(child)
    }

    /// `child`'s parent, if it has one.
    pub fn parent(&self, child: Entity) -> Option<Entity> {
        self.get::<ChildOf>(child).map(ChildOf::parent)
    }

    /// `parent`'s children (empty when it has none or is not alive).
    pub fn children(&self, parent: Entity) -> &[Entity] {
        self.sources::<Children>(parent)
    }

    /// Despawns `entity` and all its descendants, as one batch ([`World::despawn_batch`]);
    /// returns how many were despawned. `despawn` alone does the same for the hierarchy,
    /// one entity at a time; this walks the tree first and despawns it at once.
    ///
    /// # Errors
    /// [`EntityError::NoSuchEntity`] when `entity` is not alive.
    pub fn despawn_recursive(&mut self, entity: Entity) -> Result<usize, EntityError> {
        if !self.contains(entity) {
            return Err(EntityError::NoSuchEntity(entity));
        }
        let mut all = vec![entity];
        all.extend(self.iter_descendants(entity));
        Ok(self.despawn_batch(all))
    }

    /// Disables `entity` and all its descendants: inserts [`Disabled`](crate::Disabled) on
    /// each that lacks it, as one batch ([`World::insert_batch`]), so the whole subtree leaves
    /// every query that does not ask for disabled entities. Returns how many were disabled
    /// now. Children attached later are not disabled by this.
    ///
    /// # Errors
    /// [`EntityError::NoSuchEntity`] when `entity` is not alive; the batch's errors (memory),
    /// with nothing changed.
    pub fn disable_recursive(&mut self, entity: Entity) -> Result<usize, EntityError> {
        let subtree = self.subtree_where(entity, false)?;
        let n = subtree.len();
        self.insert_batch(subtree.into_iter().map(|e| (e, (crate::Disabled,))))?;
        Ok(n)
    }

    /// Enables `entity` and all its descendants again: removes [`Disabled`](crate::Disabled)
    /// from each that has it, as one batch ([`World::remove_batch`]). Returns how many were
    /// enabled.
    ///
    /// # Errors
    /// As [`World::disable_recursive`].
    pub fn enable_recursive(&mut self, entity: Entity) -> Result<usize, EntityError> {
        let subtree = self.subtree_where(entity, true)?;
        let n = subtree.len();
        self.remove_batch::<(crate::Disabled,)>(subtree)?;
        Ok(n)
    }

    /// `entity` and its descendants, breadth-first, those that have `Disabled` (`disabled`)
    /// or lack it.
    fn subtree_where(&self, entity: Entity, disabled: bool) -> Result<Vec<Entity>, EntityError> {
        if !self.contains(entity) {
            return Err(EntityError::NoSuchEntity(entity));
        }
        Ok(std::iter::once(entity)
            .chain(self.iter_descendants(entity))
            .filter(|&e| self.has::<crate::Disabled>(e) == disabled)
            .collect())
    }

    /// Registers the built-in hierarchy if `ids` (a bundle new to this world) names `ChildOf`
    /// or `Children` and it is not registered yet: how the hierarchy registers itself on first
    /// use. Runs only when a bundle type is first seen.
    pub(crate) fn register_builtin_relationships(&mut self, ids: &[ComponentId]) {
        let components = self.components();
        let hierarchy = [components.id::<ChildOf>(), components.id::<Children>()];
        if ids.iter().any(|&id| hierarchy.contains(&Some(id))) {
            self.register_relationship::<ChildOf>();
        }
    }

    /// The roots of the hierarchy: entities with children and no parent, in archetype order.
    pub(super) fn hierarchy_roots(&self) -> VecDeque<(Entity, Option<Entity>)> {
        let (Some(children), child_of) =
            (self.components().id::<Children>(), self.components().id::<ChildOf>())
        else {
            return VecDeque::new();
        };
        let mut roots = VecDeque::new();
        for archetype in self.archetypes() {
            if archetype.contains(children) && child_of.is_none_or(|c| !archetype.contains(c)) {
                let entities = self.archetype_entities(archetype.id());
                roots.extend(entities.iter().map(|e| (e.entity, None)));
            }
        }
        roots
    }
}
