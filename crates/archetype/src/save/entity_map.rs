//! [`EntityMap`]: saved ids to the ids a load gave them, and [`MapEntities`], how a component
//! holding ids follows it.

use ahash::AHashMap;
use folio_storage::Entity;

/// The ids a load gave the saved entities: saved id → id in the target world.
///
/// A restore and a [`LoadMode::KeepIds`](crate::LoadMode::KeepIds) load map every id to
/// itself; a [`LoadMode::Remap`](crate::LoadMode::Remap) load to the new ids.
///
/// Saved ids are dense (a save's indices run from 0 to its allocator's index count), so the
/// map is a table by saved index, with a hash map beside it for ids far past the others and
/// for a second generation of an index already held.
#[derive(Clone, Debug, Default)]
pub struct EntityMap {
    /// By saved index: `(saved, new)`.
    dense: Vec<Option<(Entity, Entity)>>,
    /// The pairs the table does not hold.
    sparse: AHashMap<Entity, Entity>,
    /// How many pairs `dense` holds.
    dense_len: usize,
}

/// An index past the table's length by more than this (and past twice the pairs held) goes
/// to the hash map: a stray large id does not grow the table to its index.
const DENSE_SLACK: usize = 1024;

impl EntityMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map whose table holds saved indices below `indices` without growing.
    pub(crate) fn with_indices(indices: usize) -> Result<Self, folio_storage::StorageError> {
        let mut dense = crate::try_alloc::vec_with_capacity(indices)?;
        dense.resize(indices, None);
        Ok(Self { dense, ..Self::default() })
    }

    /// Records that saved id `from` is `to` in the target world.
    pub fn insert(&mut self, from: Entity, to: Entity) {
        let index = from.index() as usize;
        if index >= self.dense.len() && index < (2 * self.len()).max(self.dense.len()) + DENSE_SLACK
        {
            self.dense.resize(index + 1, None);
        }
        match self.dense.get_mut(index) {
            Some(slot @ None) => {
                *slot = Some((from, to));
                self.dense_len += 1;
            }
            Some(Some((held, new))) if *held == from => *new = to,
            _ => {
                self.sparse.insert(from, to);
            }
        }
    }

    /// The id saved id `from` got, if the save held it alive.
    #[inline]
    pub fn get(&self, from: Entity) -> Option<Entity> {
        match self.dense.get(from.index() as usize) {
            Some(Some((held, to))) if *held == from => Some(*to),
            _ if self.sparse.is_empty() => None,
            _ => self.sparse.get(&from).copied(),
        }
    }

    /// The id saved id `from` got; [`Entity::PLACEHOLDER`] (never alive) for an id the save
    /// did not hold alive, so a reference that was stale in the saved world stays stale.
    #[inline]
    pub fn map(&self, from: Entity) -> Entity {
        self.get(from).unwrap_or(Entity::PLACEHOLDER)
    }

    /// How many ids are mapped.
    pub fn len(&self) -> usize {
        self.dense_len + self.sparse.len()
    }

    /// Whether no id is mapped.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every `(saved, new)` pair, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (Entity, Entity)> + '_ {
        self.dense.iter().flatten().copied().chain(self.sparse.iter().map(|(&from, &to)| (from, to)))
    }
}

impl PartialEq for EntityMap {
    /// Two maps are equal when they map the same ids to the same ids, however they hold them.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(from, to)| other.get(from) == Some(to))
    }
}

impl Eq for EntityMap {}

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
