//! Entity disabling: [`Disabled`] and the other markers that default queries skip.

use std::any::TypeId;

use super::World;
use crate::component::{Component, ComponentId, StorageType};
use crate::error::ComponentError;

/// The built-in disabling marker: queries skip an entity that has it unless they name it.
///
/// Insert it to take an entity out of every system's view without despawning it (a pooled
/// bullet, an object in a closed level, a paused subtree); remove it to bring the entity
/// back, values and ids unchanged. A query still sees disabled entities when one of its terms
/// names `Disabled`: `With<Disabled>` (only them), `Has<Disabled>`, `Option<&Disabled>`, or
/// the `Allow<Disabled>` filter of folio-query (everything, disabled or not). `World::get`
/// and the other per-entity accessors are not queries and see every entity.
///
/// Whether an entity is disabled is decided per archetype, when a query first meets the
/// archetype: while nothing is disabled, a query pays nothing per entity for it.
///
/// ```
/// use folio_archetype::{Disabled, World};
///
/// struct Health(u32);
///
/// let mut world = World::new();
/// let e = world.spawn((Health(10), Disabled));
/// assert_eq!(world.get::<Health>(e).map(|h| h.0), Some(10)); // per-entity access sees it
/// assert!(world.is_disabling(world.components().id::<Disabled>().unwrap()));
/// world.remove::<(Disabled,)>(e).unwrap(); // enabled again, same id, same values
/// ```
///
/// With the `serde` feature, `Disabled` is serializable: a save game keeps disabled entities
/// disabled once its registry names it (`registry.component::<Disabled>("disabled")`);
/// otherwise the save lists it among the skipped types and a load enables them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Disabled;

#[cfg(feature = "serde")]
impl serde::Serialize for Disabled {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit_struct("Disabled")
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Disabled {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Unit;
        impl serde::de::Visitor<'_> for Unit {
            type Value = Disabled;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the unit struct Disabled")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Disabled, E> {
                Ok(Disabled)
            }
        }
        deserializer.deserialize_unit_struct("Disabled", Unit)
    }
}

impl World {
    /// Makes `C` a disabling marker like [`Disabled`]: queries that do not name `C` skip the
    /// entities that have it. Registers `C` with table storage if it is not yet.
    ///
    /// Call it before any entity has a `C` (at startup, with the other registrations): the
    /// queries built before then have already matched the archetypes that hold it.
    ///
    /// # Errors
    /// - [`ComponentError::StorageConflict`] when `C` is registered as a sparse-set component:
    ///   a disabling marker decides the table, so that a query walking whole tables never
    ///   walks a disabled row.
    /// - [`ComponentError::DisablingInUse`] when some entity has (or had) a `C` already.
    pub fn register_disabling_component<C: Component>(
        &mut self,
    ) -> Result<ComponentId, ComponentError> {
        let type_id = TypeId::of::<C>();
        if self.disabling.contains(&type_id) {
            return self.register_component::<C>(StorageType::Table);
        }
        if let Some(id) = self.components.id::<C>()
            && self.archetypes.iter().any(|a| a.contains(id))
        {
            return Err(ComponentError::DisablingInUse { name: std::any::type_name::<C>() });
        }
        let id = self.register_component::<C>(StorageType::Table)?;
        self.disabling.push(type_id);
        Ok(id)
    }

    /// Whether component `id` is a disabling marker ([`Disabled`], or one registered with
    /// [`World::register_disabling_component`]).
    pub fn is_disabling(&self, id: ComponentId) -> bool {
        self.components.get_info(id).is_some_and(|info| self.disabling.contains(&info.type_id()))
    }

    /// Whether a type is a disabling marker (by its `TypeId`): for registration, before it
    /// has an id.
    pub(super) fn is_disabling_type(&self, type_id: TypeId) -> bool {
        self.disabling.contains(&type_id)
    }

    /// Whether an archetype with `components` holds a disabling marker.
    pub(super) fn holds_disabling(&self, components: &[ComponentId]) -> bool {
        components.iter().any(|&id| self.is_disabling(id))
    }
}
