//! Reading a save into a staging area: [`SaveRegistry::read`] and [`LoadSeed`] make a
//! [`SavedWorld`], checked but not yet in any world.
//!
//! The save is a struct of four fields, `version`, `entities`, `components` and `resources`
//! (read as a map from a self-describing format such as JSON, as a sequence from a compact
//! one such as postcard). `entities` is the tuple `(generations, alive, free, takeable,
//! reserved)` of [`EntitiesState`]; `components` a sequence of `(name, [(entity, value)])`;
//! `resources` a sequence of `(name, value)`.

use std::cell::RefCell;
use std::fmt;
use std::num::NonZeroU32;

use ahash::AHashSet;
use erased_serde::Deserializer as ErasedDeserializer;
use folio_storage::{EntitiesState, Entity};
use serde::Deserializer;
use serde::de::{self, DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};

use super::SAVE_VERSION;
use super::error::LoadError;
use super::registry::{Entry, Fns, SaveRegistry, StagedColumn, StagedResource};

/// A save read and checked, not yet in any world: what [`World::load_saved`] puts into one.
///
/// [`World::load_saved`]: crate::World::load_saved
pub struct SavedWorld {
    /// The saved allocator; `alive` in the order entities are placed back.
    pub(crate) entities: EntitiesState,
    /// Each registered component's column, in the save's order, with its name.
    pub(crate) columns: Vec<(&'static str, StagedColumn)>,
    /// Each resource, in the save's order.
    pub(crate) resources: Vec<Box<dyn StagedResource>>,
}

impl SavedWorld {
    /// How many entities the save holds alive.
    pub fn len(&self) -> usize {
        self.entities.alive.len()
    }

    /// Whether the save holds no entity alive.
    pub fn is_empty(&self) -> bool {
        self.entities.alive.is_empty()
    }

    /// The saved entities, in the order a load places them.
    pub fn entities(&self) -> impl ExactSizeIterator<Item = Entity> + '_ {
        self.entities.alive.iter().map(|&index| {
            let generation = self.entities.generations[index as usize];
            Entity::from_bits(u64::from(generation.get()) << 32 | u64::from(index))
                .expect("a generation is never 0")
        })
    }

    /// The saved allocator state.
    pub fn entities_state(&self) -> &EntitiesState {
        &self.entities
    }

    /// Checks that every row is of an entity alive in the save, once per column.
    fn check_rows(&self) -> Result<(), LoadError> {
        let state = &self.entities;
        let mut alive = vec![false; state.generations.len()];
        for &index in &state.alive {
            alive[index as usize] = true;
        }
        let mut seen = AHashSet::default();
        for (name, column) in &self.columns {
            seen.clear();
            for &entity in &column.entities {
                let index = entity.index() as usize;
                let is_alive = alive.get(index).copied().unwrap_or(false)
                    && state.generations[index] == entity.generation();
                if !is_alive {
                    return Err(LoadError::Row { name, entity, twice: false });
                }
                if !seen.insert(entity) {
                    return Err(LoadError::Row { name, entity, twice: true });
                }
            }
        }
        Ok(())
    }
}

impl fmt::Debug for SavedWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SavedWorld")
            .field("entities", &self.entities.alive.len())
            .field("components", &self.columns.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("resources", &self.resources.len())
            .finish()
    }
}

impl SaveRegistry {
    /// Reads a save written by [`World::save`](crate::World::save) from `deserializer` and
    /// checks it, into a [`SavedWorld`] for [`World::load_saved`](crate::World::load_saved).
    /// No world is touched.
    ///
    /// # Errors
    /// A [`LoadError`] naming what is wrong: the format's own error (truncated or corrupted
    /// data), a version, name or value the registry cannot read, an inconsistent allocator
    /// state, a row of an entity the save does not hold alive.
    pub fn read<'de, D: Deserializer<'de>>(
        &self,
        deserializer: D,
    ) -> Result<SavedWorld, LoadError> {
        let error = RefCell::new(None);
        let read = SaveSeed { registry: self, error: &error }.deserialize(deserializer);
        match (read, error.into_inner()) {
            (Ok(saved), _) => Ok(saved),
            (Err(_), Some(typed)) => Err(typed),
            (Err(e), None) => Err(LoadError::Format(e.to_string())),
        }
    }

    /// A [`DeserializeSeed`] reading a save into a [`SavedWorld`], for a save nested in a
    /// larger serde value. Its errors are the format's, with the message of the [`LoadError`]
    /// that [`Self::read`] would return.
    pub fn seed(&self) -> LoadSeed<'_> {
        LoadSeed { registry: self }
    }
}

/// Reads a save into a [`SavedWorld`] as part of a larger serde value
/// ([`SaveRegistry::seed`]).
#[derive(Clone, Copy, Debug)]
pub struct LoadSeed<'r> {
    registry: &'r SaveRegistry,
}

impl<'de> DeserializeSeed<'de> for LoadSeed<'_> {
    type Value = SavedWorld;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<SavedWorld, D::Error> {
        let error = RefCell::new(None);
        let read = SaveSeed { registry: self.registry, error: &error }.deserialize(deserializer);
        match (read, error.into_inner()) {
            (Err(_), Some(typed)) => Err(D::Error::custom(typed)),
            (read, _) => read,
        }
    }
}

/// The seed under both entry points: `error` receives the typed error of a failure it can
/// name (the format's error carries its message up).
struct SaveSeed<'a> {
    registry: &'a SaveRegistry,
    error: &'a RefCell<Option<LoadError>>,
}

impl SaveSeed<'_> {
    /// Records `typed` and returns it as the format's error.
    fn fail<E: de::Error>(&self, typed: LoadError) -> E {
        let e = E::custom(&typed);
        *self.error.borrow_mut() = Some(typed);
        e
    }

    /// The save's four parts, checked.
    fn finish<E: de::Error>(
        &self,
        version: Option<u32>,
        entities: Option<EntitiesState>,
        columns: Option<Vec<(&'static str, StagedColumn)>>,
        resources: Option<Vec<Box<dyn StagedResource>>>,
    ) -> Result<SavedWorld, E> {
        let _ = version.ok_or_else(|| E::missing_field("version"))?;
        let entities = entities.ok_or_else(|| E::missing_field("entities"))?;
        let columns = columns.ok_or_else(|| E::missing_field("components"))?;
        let resources = resources.ok_or_else(|| E::missing_field("resources"))?;
        let saved = SavedWorld { entities, columns, resources };
        saved.check_rows().map_err(|e| self.fail(e))?;
        Ok(saved)
    }

    fn version<E: de::Error>(&self, found: u32) -> Result<u32, E> {
        if found == SAVE_VERSION { Ok(found) } else { Err(self.fail(LoadError::Version { found })) }
    }

    fn entities<E: de::Error>(&self, raw: RawEntities) -> Result<EntitiesState, E> {
        let (generations, alive, free, takeable, reserved) = raw;
        let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let state = EntitiesState {
            generations,
            alive,
            free,
            takeable: to_usize(takeable),
            reserved: to_usize(reserved),
        };
        state.check().map_err(|e| self.fail(LoadError::Entities(e)))?;
        Ok(state)
    }
}

/// The `entities` field as written: `(generations, alive, free, takeable, reserved)`.
type RawEntities = (Vec<NonZeroU32>, Vec<u32>, Vec<u32>, u64, u64);

const FIELDS: &[&str] = &["version", "entities", "components", "resources"];

impl<'de> DeserializeSeed<'de> for SaveSeed<'_> {
    type Value = SavedWorld;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<SavedWorld, D::Error> {
        deserializer.deserialize_struct("FolioSave", FIELDS, self)
    }
}

impl<'de> Visitor<'de> for SaveSeed<'_> {
    type Value = SavedWorld;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a folio save (version, entities, components, resources)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SavedWorld, A::Error> {
        let missing = |i, this: &Self| de::Error::invalid_length(i, this);
        let version: u32 = seq.next_element()?.ok_or_else(|| missing(0, &self))?;
        self.version::<A::Error>(version)?;
        let raw: RawEntities = seq.next_element()?.ok_or_else(|| missing(1, &self))?;
        let entities = self.entities(raw)?;
        let columns =
            seq.next_element_seed(Columns { seed: &self })?.ok_or_else(|| missing(2, &self))?;
        let resources =
            seq.next_element_seed(Resources { seed: &self })?.ok_or_else(|| missing(3, &self))?;
        self.finish(Some(version), Some(entities), Some(columns), Some(resources))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SavedWorld, A::Error> {
        let (mut version, mut entities, mut columns, mut resources) = (None, None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "version" if version.is_none() => {
                    version = Some(self.version(map.next_value()?)?);
                }
                "entities" if entities.is_none() => {
                    entities = Some(self.entities(map.next_value()?)?);
                }
                "components" if columns.is_none() => {
                    columns = Some(map.next_value_seed(Columns { seed: &self })?);
                }
                "resources" if resources.is_none() => {
                    resources = Some(map.next_value_seed(Resources { seed: &self })?);
                }
                "version" | "entities" | "components" | "resources" => {
                    return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                }
                _ => return Err(de::Error::unknown_field(&key, FIELDS)),
            }
        }
        self.finish(version, entities, columns, resources)
    }
}

/// The `components` field: a sequence of `(name, rows)`.
struct Columns<'s, 'a> {
    seed: &'s SaveSeed<'a>,
}

impl<'de> DeserializeSeed<'de> for Columns<'_, '_> {
    type Value = Vec<(&'static str, StagedColumn)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Columns<'_, '_> {
    type Value = Vec<(&'static str, StagedColumn)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of (component name, rows)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut columns: Vec<(&'static str, StagedColumn)> = Vec::new();
        while let Some(column) =
            seq.next_element_seed(Named { seed: self.seed, component: true })?
        {
            let (entry, staged) = column;
            if columns.iter().any(|(name, _)| *name == entry.name) {
                let name = entry.name.to_owned();
                return Err(self.seed.fail(LoadError::DuplicateName { name }));
            }
            let Staged::Column(staged) = staged else { unreachable!("a component entry") };
            columns.push((entry.name, staged));
        }
        Ok(columns)
    }
}

/// The `resources` field: a sequence of `(name, value)`.
struct Resources<'s, 'a> {
    seed: &'s SaveSeed<'a>,
}

impl<'de> DeserializeSeed<'de> for Resources<'_, '_> {
    type Value = Vec<Box<dyn StagedResource>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Resources<'_, '_> {
    type Value = Vec<Box<dyn StagedResource>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of (resource name, value)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut names: Vec<&'static str> = Vec::new();
        let mut resources = Vec::new();
        while let Some((entry, staged)) =
            seq.next_element_seed(Named { seed: self.seed, component: false })?
        {
            if names.contains(&entry.name) {
                let name = entry.name.to_owned();
                return Err(self.seed.fail(LoadError::DuplicateName { name }));
            }
            names.push(entry.name);
            let Staged::Resource(staged) = staged else { unreachable!("a resource entry") };
            resources.push(staged);
        }
        Ok(resources)
    }
}

/// What one named entry read.
enum Staged {
    Column(StagedColumn),
    Resource(Box<dyn StagedResource>),
}

/// One `(name, data)` pair: the name picks the registered type that reads the data.
struct Named<'s, 'a> {
    seed: &'s SaveSeed<'a>,
    component: bool,
}

impl<'de, 'a> DeserializeSeed<'de> for Named<'_, 'a> {
    type Value = (&'a Entry, Staged);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_tuple(2, self)
    }
}

impl<'de, 'a> Visitor<'de> for Named<'_, 'a> {
    type Value = (&'a Entry, Staged);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a (name, data) pair")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let name: String =
            seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let entry = self.seed.registry.by_name(&name).filter(|entry| {
            matches!(
                (&entry.fns, self.component),
                (Fns::Component { .. }, true) | (Fns::Resource { .. }, false)
            )
        });
        let Some(entry) = entry else {
            let typed = if self.component {
                LoadError::UnknownComponent { name }
            } else {
                LoadError::UnknownResource { name }
            };
            return Err(self.seed.fail(typed));
        };
        let data = seq
            .next_element_seed(Data { seed: self.seed, entry })?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok((entry, data))
    }
}

/// The data of one registered type, read by its erased function.
struct Data<'s, 'a> {
    seed: &'s SaveSeed<'a>,
    entry: &'a Entry,
}

impl<'de> DeserializeSeed<'de> for Data<'_, '_> {
    type Value = Staged;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Staged, D::Error> {
        let mut erased = <dyn ErasedDeserializer>::erase(deserializer);
        let read = match self.entry.fns {
            Fns::Component { read, .. } => read(&mut erased).map(Staged::Column),
            Fns::Resource { read, .. } => read(&mut erased).map(Staged::Resource),
        };
        read.map_err(|e| {
            self.seed.fail(LoadError::Value {
                name: self.entry.name,
                type_name: self.entry.type_name,
                message: e.to_string(),
            })
        })
    }
}
