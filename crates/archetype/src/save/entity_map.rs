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
/// map is a table by saved index (the saved generation, and the new id unless every id maps to
/// itself), with a hash map beside it for ids far past the others and for a second generation
/// of an index already held.
#[derive(Clone, Debug, Default)]
pub struct EntityMap {
    /// By saved index: the saved generation, 0 where no id of that index is held.
    generations: Vec<u32>,
    /// By saved index: the new id; empty while every id held maps to itself.
    targets: Vec<Option<Entity>>,
    /// The pairs the table does not hold.
    sparse: AHashMap<Entity, Entity>,
    /// How many pairs the table holds.
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
        let mut generations = crate::try_alloc::vec_with_capacity(indices)?;
        generations.resize(indices, 0);
        Ok(Self { generations, ..Self::default() })
    }

    /// Records that saved id `from` is `to` in the target world.
    pub fn insert(&mut self, from: Entity, to: Entity) {
        let index = from.index() as usize;
        let len = self.generations.len();
        if index >= len && index < (2 * self.len()).max(len) + DENSE_SLACK {
            self.generations.resize(index + 1, 0);
            if !self.targets.is_empty() {
                self.targets.resize(index + 1, None);
            }
        }
        let generation = from.generation().get();
        match self.generations.get(index).copied() {
            Some(held) if held == 0 || held == generation => {
                if held == 0 {
                    self.generations[index] = generation;
                    self.dense_len += 1;
                }
                if self.targets.is_empty() && to != from {
                    self.make_targets();
                }
                if let Some(target) = self.targets.get_mut(index) {
                    *target = Some(to);
                }
            }
            _ => {
                self.sparse.insert(from, to);
            }
        }
    }

    /// Makes the table of new ids, every id held so far mapping to itself.
    #[cold]
    fn make_targets(&mut self) {
        self.targets = (0..self.generations.len()).map(|i| self.saved(i)).collect();
    }

    /// The saved id the table holds at `index`.
    fn saved(&self, index: usize) -> Option<Entity> {
        let generation = u64::from(*self.generations.get(index)?);
        Entity::from_bits(generation << 32 | index as u64)
    }

    /// The id saved id `from` got, if the save held it alive.
    #[inline]
    pub fn get(&self, from: Entity) -> Option<Entity> {
        let index = from.index() as usize;
        match self.generations.get(index) {
            Some(&held) if held == from.generation().get() => {
                Some(self.targets.get(index).map_or(from, |to| to.expect("held")))
            }
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
        let dense = (0..self.generations.len()).filter_map(|i| {
            let from = self.saved(i)?;
            Some((from, self.targets.get(i).map_or(from, |to| to.expect("held"))))
        });
        dense.chain(self.sparse.iter().map(|(&from, &to)| (from, to)))
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
