//! Reading a save into a staging area: [`SaveRegistry::read`] and [`LoadSeed`] make a
//! [`SavedWorld`], checked but not yet in any world.
//!
//! The save is a struct of four fields, `version`, `entities`, `archetypes` and `resources`
//! (read as a map from a self-describing format such as JSON, as a sequence from a compact
//! one such as postcard). `entities` is the tuple `(generations, free, takeable, reserved)` of
//! [`EntitiesState`] (the alive indices are the archetypes' entities); `archetypes` a sequence
//! of `{entities, columns}`, `columns` a sequence of `(name, values)`; `resources` a sequence
//! of `(name, value)`. A column's values are a sequence in a self-describing format, and one
//! byte string in postcard's encoding in a compact one (see the [`save`](crate::save) module).

use std::cell::RefCell;
use std::fmt;
use std::num::NonZeroU32;

use erased_serde::Deserializer as ErasedDeserializer;
use folio_storage::{EntitiesState, Entity};
use serde::Deserializer;
use serde::de::{self, DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};

use super::SAVE_VERSION;
use super::entity_map::EntityMap;
use super::error::LoadError;
use super::registry::{ComponentFns, Entry, Fns, SaveRegistry, StagedResource, StagedValues};
use crate::component::ComponentId;
use crate::error::ComponentError;
use crate::world::World;

/// A save read and checked, not yet in any world: what [`World::load_saved`] puts into one.
///
/// [`World::load_saved`]: crate::World::load_saved
pub struct SavedWorld {
    /// The saved allocator; `alive` in the order entities are placed back (archetype by
    /// archetype, each in row order).
    pub(crate) entities: EntitiesState,
    /// Each saved archetype, in the save's order.
    pub(crate) groups: Vec<StagedGroup>,
    /// Each resource, in the save's order.
    pub(crate) resources: Vec<Box<dyn StagedResource>>,
}

/// One saved archetype: its entities and a column of values per registered component.
pub(crate) struct StagedGroup {
    /// The saved id of each row.
    pub(crate) entities: Vec<Entity>,
    /// One column per component, each with a value per row.
    pub(crate) columns: Vec<StagedColumn>,
}

/// One component's values in a [`StagedGroup`].
pub(crate) struct StagedColumn {
    /// The component's registered name.
    pub(crate) name: &'static str,
    /// The type's component id in a world (registering it).
    pub(crate) id: fn(&mut World) -> Result<ComponentId, ComponentError>,
    /// How an entity's value maps the ids it holds, if it holds any.
    pub(crate) map: Option<fn(&mut World, Entity, &EntityMap)>,
    /// The values, in row order.
    pub(crate) values: Box<dyn StagedValues>,
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
}

impl fmt::Debug for SavedWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> =
            self.groups.iter().flat_map(|g| g.columns.iter().map(|c| c.name)).collect();
        names.sort_unstable();
        names.dedup();
        f.debug_struct("SavedWorld")
            .field("entities", &self.entities.alive.len())
            .field("archetypes", &self.groups.len())
            .field("components", &names)
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
    /// state, an entity the saved allocator does not hold alive.
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

    /// The save's four parts, checked: every archetype's entity alive in the saved allocator
    /// at its generation, and listed once; the allocator's own rules.
    fn finish<E: de::Error>(
        &self,
        version: Option<u32>,
        entities: Option<RawEntities>,
        groups: Option<Vec<StagedGroup>>,
        resources: Option<Vec<Box<dyn StagedResource>>>,
    ) -> Result<SavedWorld, E> {
        let _ = version.ok_or_else(|| E::missing_field("version"))?;
        let (generations, free, takeable, reserved) =
            entities.ok_or_else(|| E::missing_field("entities"))?;
        let groups = groups.ok_or_else(|| E::missing_field("archetypes"))?;
        let resources = resources.ok_or_else(|| E::missing_field("resources"))?;
        let total = groups.iter().map(|g| g.entities.len()).sum();
        let mut alive = crate::try_alloc::vec_with_capacity(total)
            .map_err(|e| E::custom(format_args!("cannot hold the entities: {e}")))?;
        let mut listed = vec![false; generations.len()];
        for &entity in groups.iter().flat_map(|g| &g.entities) {
            let index = entity.index() as usize;
            if generations.get(index) != Some(&entity.generation()) {
                return Err(self.fail(LoadError::Entity { entity, twice: false }));
            }
            if std::mem::replace(&mut listed[index], true) {
                return Err(self.fail(LoadError::Entity { entity, twice: true }));
            }
            alive.push(entity.index());
        }
        let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let state = EntitiesState {
            generations,
            alive,
            free,
            takeable: to_usize(takeable),
            reserved: to_usize(reserved),
        };
        state.check().map_err(|e| self.fail(LoadError::Entities(e)))?;
        Ok(SavedWorld { entities: state, groups, resources })
    }

    fn version<E: de::Error>(&self, found: u32) -> Result<u32, E> {
        if found == SAVE_VERSION { Ok(found) } else { Err(self.fail(LoadError::Version { found })) }
    }
}

/// The `entities` field as written: `(generations, free, takeable, reserved)`.
type RawEntities = (Vec<NonZeroU32>, Vec<u32>, u64, u64);

const FIELDS: &[&str] = &["version", "entities", "archetypes", "resources"];

impl<'de> DeserializeSeed<'de> for SaveSeed<'_> {
    type Value = SavedWorld;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<SavedWorld, D::Error> {
        deserializer.deserialize_struct("FolioSave", FIELDS, self)
    }
}

impl<'de> Visitor<'de> for SaveSeed<'_> {
    type Value = SavedWorld;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a folio save (version, entities, archetypes, resources)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SavedWorld, A::Error> {
        let missing = |i, this: &Self| de::Error::invalid_length(i, this);
        let version: u32 = seq.next_element()?.ok_or_else(|| missing(0, &self))?;
        self.version::<A::Error>(version)?;
        let entities: RawEntities = seq.next_element()?.ok_or_else(|| missing(1, &self))?;
        let groups =
            seq.next_element_seed(Groups { seed: &self })?.ok_or_else(|| missing(2, &self))?;
        let resources =
            seq.next_element_seed(Resources { seed: &self })?.ok_or_else(|| missing(3, &self))?;
        self.finish(Some(version), Some(entities), Some(groups), Some(resources))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SavedWorld, A::Error> {
        let (mut version, mut entities, mut groups, mut resources) = (None, None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "version" if version.is_none() => {
                    version = Some(self.version(map.next_value()?)?);
                }
                "entities" if entities.is_none() => {
                    entities = Some(map.next_value()?);
                }
                "archetypes" if groups.is_none() => {
                    groups = Some(map.next_value_seed(Groups { seed: &self })?);
                }
                "resources" if resources.is_none() => {
                    resources = Some(map.next_value_seed(Resources { seed: &self })?);
                }
                "version" | "entities" | "archetypes" | "resources" => {
                    return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                }
                _ => return Err(de::Error::unknown_field(&key, FIELDS)),
            }
        }
        self.finish(version, entities, groups, resources)
    }
}

/// The `archetypes` field: a sequence of [`Group`]s.
struct Groups<'s, 'a> {
    seed: &'s SaveSeed<'a>,
}

impl<'de> DeserializeSeed<'de> for Groups<'_, '_> {
    type Value = Vec<StagedGroup>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Groups<'_, '_> {
    type Value = Vec<StagedGroup>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of archetypes (entities, columns)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut groups = Vec::new();
        while let Some(group) = seq.next_element_seed(Group { seed: self.seed })? {
            groups.push(group);
        }
        Ok(groups)
    }
}

const GROUP_FIELDS: &[&str] = &["entities", "columns"];

/// One archetype: `{entities, columns}`, the entities first (a column is read knowing how
/// many values it holds).
struct Group<'s, 'a> {
    seed: &'s SaveSeed<'a>,
}

impl<'de> DeserializeSeed<'de> for Group<'_, '_> {
    type Value = StagedGroup;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<StagedGroup, D::Error> {
        deserializer.deserialize_struct("Archetype", GROUP_FIELDS, self)
    }
}

impl<'de> Visitor<'de> for Group<'_, '_> {
    type Value = StagedGroup;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an archetype (entities, columns)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StagedGroup, A::Error> {
        let entities: Vec<Entity> =
            seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let columns = seq
            .next_element_seed(Columns { seed: self.seed, rows: entities.len() })?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok(StagedGroup { entities, columns })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StagedGroup, A::Error> {
        let mut entities: Option<Vec<Entity>> = None;
        let mut columns = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "entities" if entities.is_none() => {
                    entities = Some(map.next_value()?);
                }
                "columns" if columns.is_none() => {
                    let Some(rows) = entities.as_ref().map(Vec::len) else {
                        return Err(de::Error::custom(
                            "an archetype's `entities` must come before its `columns`",
                        ));
                    };
                    columns = Some(map.next_value_seed(Columns { seed: self.seed, rows })?);
                }
                "entities" | "columns" => {
                    return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                }
                _ => return Err(de::Error::unknown_field(&key, GROUP_FIELDS)),
            }
        }
        let entities = entities.ok_or_else(|| de::Error::missing_field("entities"))?;
        let columns = columns.ok_or_else(|| de::Error::missing_field("columns"))?;
        Ok(StagedGroup { entities, columns })
    }
}

/// An archetype's `columns`: a sequence of `(name, values)`, each of `rows` values.
struct Columns<'s, 'a> {
    seed: &'s SaveSeed<'a>,
    rows: usize,
}

impl<'de> DeserializeSeed<'de> for Columns<'_, '_> {
    type Value = Vec<StagedColumn>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Columns<'_, '_> {
    type Value = Vec<StagedColumn>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of (component name, values)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut columns: Vec<StagedColumn> = Vec::new();
        let named = || Named { seed: self.seed, component: true, rows: self.rows };
        while let Some((entry, staged)) = seq.next_element_seed(named())? {
            if columns.iter().any(|column| column.name == entry.name) {
                let name = entry.name.to_owned();
                return Err(self.seed.fail(LoadError::DuplicateName { name }));
            }
            let (Staged::Column(values), Fns::Component(fns)) = (staged, &entry.fns) else {
                unreachable!("a component entry")
            };
            columns.push(StagedColumn { name: entry.name, id: fns.id, map: fns.map, values });
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
            seq.next_element_seed(Named { seed: self.seed, component: false, rows: 0 })?
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
    Column(Box<dyn StagedValues>),
    Resource(Box<dyn StagedResource>),
}

/// One `(name, data)` pair: the name picks the registered type that reads the data (a
/// component's column of `rows` values, or a resource's value).
struct Named<'s, 'a> {
    seed: &'s SaveSeed<'a>,
    component: bool,
    rows: usize,
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
                (Fns::Component(_), true) | (Fns::Resource { .. }, false)
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
            .next_element_seed(Data { seed: self.seed, entry, rows: self.rows })?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok((entry, data))
    }
}

/// The data of one registered type, read by its erased function.
struct Data<'s, 'a> {
    seed: &'s SaveSeed<'a>,
    entry: &'a Entry,
    rows: usize,
}

impl Data<'_, '_> {
    /// The typed error for data that does not read as the registered type.
    fn value_error<E: de::Error>(&self, message: impl fmt::Display) -> E {
        self.seed.fail(LoadError::Value {
            name: self.entry.name,
            type_name: self.entry.type_name,
            message: message.to_string(),
        })
    }
}

impl<'de> DeserializeSeed<'de> for Data<'_, '_> {
    type Value = Staged;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Staged, D::Error> {
        match &self.entry.fns {
            Fns::Component(fns) if !deserializer.is_human_readable() => {
                deserializer.deserialize_bytes(Encoded { data: &self, fns })
            }
            Fns::Component(fns) => {
                let mut erased = <dyn ErasedDeserializer>::erase(deserializer);
                let read = (fns.read)(&mut erased, self.rows);
                read.map(Staged::Column).map_err(|e| self.value_error(e))
            }
            Fns::Resource { read, .. } => {
                let mut erased = <dyn ErasedDeserializer>::erase(deserializer);
                read(&mut erased).map(Staged::Resource).map_err(|e| self.value_error(e))
            }
        }
    }
}

/// A column in a compact format: one byte string, decoded by the type's own function.
struct Encoded<'d, 's, 'a> {
    data: &'d Data<'s, 'a>,
    fns: &'a ComponentFns,
}

impl<'de> Visitor<'de> for Encoded<'_, '_, '_> {
    type Value = Staged;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a column's values as a byte string")
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Staged, E> {
        let decoded = (self.fns.decode)(bytes, self.data.rows);
        decoded.map(Staged::Column).map_err(|e| self.data.value_error(e))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Staged, A::Error> {
        // A compact format that writes a byte string as a sequence of bytes.
        let mut bytes = Vec::new();
        while let Some(byte) = seq.next_element::<u8>()? {
            bytes.push(byte);
        }
        self.visit_bytes(&bytes)
    }
}
