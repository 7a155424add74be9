//! [`EntityMap`]: saved ids to the ids a load gave them, and [`MapEntities`], how a component
//! holding ids follows it.

use ahash::AHashMap;
use folio_storage::Entity;

/// The ids a load gave the saved entities: saved id → id in the target world.
///
/// A restore and a [`LoadMode::KeepIds`](crate::LoadMode::KeepIds) load map every id to
/// itself; a [`LoadMode::Remap`](crate::LoadMode::Remap) load to the new ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntityMap {
    map: AHashMap<Entity, Entity>,
}

impl EntityMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that saved id `from` is `to` in the target world.
    pub fn insert(&mut self, from: Entity, to: Entity) {
        self.map.insert(from, to);
    }

    /// The id saved id `from` got, if the save held it alive.
    pub fn get(&self, from: Entity) -> Option<Entity> {
        self.map.get(&from).copied()
    }

    /// The id saved id `from` got; [`Entity::PLACEHOLDER`] (never alive) for an id the save
    /// did not hold alive, so a reference that was stale in the saved world stays stale.
    pub fn map(&self, from: Entity) -> Entity {
        self.get(from).unwrap_or(Entity::PLACEHOLDER)
    }

    /// How many ids are mapped.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no id is mapped.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every `(saved, new)` pair, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (Entity, Entity)> + '_ {
        self.map.iter().map(|(&from, &to)| (from, to))
    }
}

/// A component or resource that holds [`Entity`] values, and rewrites them when a load gives
/// the saved entities new ids. Implement it by hand (no derive needed), and register the type
/// with [`SaveRegistry::component_with_entities`](crate::SaveRegistry::component_with_entities)
/// or [`SaveRegistry::resource_with_entities`](crate::SaveRegistry::resource_with_entities).
///
/// ```
/// use folio_archetype::{Entity, EntityMap, MapEntities};
///
/// struct Target {
///     entity: Entity,
///     also: Vec<Entity>,
/// }
///
/// impl MapEntities for Target {
///     fn map_entities(&mut self, map: &EntityMap) {
///         self.entity = map.map(self.entity);
///         self.also.iter_mut().for_each(|e| *e = map.map(*e));
///     }
/// }
/// ```
pub trait MapEntities {
    /// Replaces every saved id this value holds with `map.map(id)`.
    fn map_entities(&mut self, map: &EntityMap);
}
