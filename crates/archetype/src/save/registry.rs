//! [`SaveRegistry`]: the component and resource types a game saves, each under a stable name,
//! with the type-erased functions that write and read them.

use std::any::{TypeId, type_name};

use ahash::AHashMap;
use erased_serde::{Deserializer as ErasedDeserializer, Serialize as ErasedSerialize};
use folio_storage::Entity;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::entity_map::{EntityMap, MapEntities};
use crate::component::Component;
use crate::error::EntityError;
use crate::world::World;

/// The types a game saves, each under a stable name that goes into the save in place of the
/// Rust type (so renaming or moving a type does not break old saves).
///
/// Build one at start-up and use it for every save and load; it holds no world, so one
/// registry serves any number of worlds. A type the registry does not name is skipped by a save
/// and listed by [`WorldSave::skipped`](crate::WorldSave::skipped).
///
/// ```
/// use folio_archetype::{Entity, EntityMap, MapEntities, SaveRegistry};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Health(u32);
/// #[derive(Serialize, Deserialize)]
/// struct Follows(Entity);
/// impl MapEntities for Follows {
///     fn map_entities(&mut self, map: &EntityMap) {
///         self.0 = map.map(self.0);
///     }
/// }
/// #[derive(Serialize, Deserialize)]
/// struct Turn(u64);
///
/// let mut registry = SaveRegistry::new();
/// registry
///     .component::<Health>("health")
///     .component_with_entities::<Follows>("follows")
///     .resource::<Turn>("turn");
/// assert_eq!(registry.len(), 3);
/// ```
#[derive(Default)]
pub struct SaveRegistry {
    /// In registration order: the order a save writes them in.
    pub(crate) entries: Vec<Entry>,
    by_name: AHashMap<&'static str, usize>,
    components: AHashMap<TypeId, usize>,
    resources: AHashMap<TypeId, usize>,
}

/// One registered type.
pub(crate) struct Entry {
    /// Its name in saves.
    pub(crate) name: &'static str,
    /// The Rust type's name, for errors.
    pub(crate) type_name: &'static str,
    /// The Rust type.
    pub(crate) type_id: TypeId,
    /// How it is written and read.
    pub(crate) fns: Fns,
}

/// What an erased read returns.
type ReadResult<T> = Result<T, erased_serde::Error>;

/// The type-erased functions of one registered type.
pub(crate) enum Fns {
    /// A component type.
    Component {
        /// The entity's value, if it has one.
        get: for<'w> fn(&'w World, Entity) -> Option<&'w dyn ErasedSerialize>,
        /// Reads a column: a sequence of `(entity, value)` pairs.
        read: fn(&mut dyn ErasedDeserializer<'_>) -> ReadResult<StagedColumn>,
    },
    /// A resource type.
    Resource {
        /// The world's value, if it has one.
        get: for<'w> fn(&'w World) -> Option<&'w dyn ErasedSerialize>,
        /// Reads the value.
        read: fn(&mut dyn ErasedDeserializer<'_>) -> ReadResult<Box<dyn StagedResource>>,
    },
}

/// A component column read from a save, not yet in any world.
pub(crate) struct StagedColumn {
    /// The saved entity of each row.
    pub(crate) entities: Vec<Entity>,
    /// The values, in row order.
    pub(crate) values: Box<dyn StagedValues>,
}

/// The values of a [`StagedColumn`], typed inside.
pub(crate) trait StagedValues: Send {
    /// Inserts the `i`-th value into the `i`-th of `entities`, first mapping the ids it holds
    /// through `map` (when given and the type maps entities). Stops at the first error; the
    /// values not inserted are dropped.
    fn commit(
        self: Box<Self>,
        world: &mut World,
        entities: &mut dyn Iterator<Item = Entity>,
        map: Option<&EntityMap>,
    ) -> Result<(), EntityError>;
}

/// A resource read from a save, not yet in any world.
pub(crate) trait StagedResource: Send {
    /// Inserts the value, first mapping the ids it holds through `map` (when given and the
    /// type maps entities).
    fn commit(self: Box<Self>, world: &mut World, map: Option<&EntityMap>);
}

/// A `T` for each row, and how to map the ids one holds.
struct Values<T> {
    values: Vec<T>,
    map: Option<fn(&mut T, &EntityMap)>,
}

impl<T: Component> StagedValues for Values<T> {
    fn commit(
        self: Box<Self>,
        world: &mut World,
        entities: &mut dyn Iterator<Item = Entity>,
        map: Option<&EntityMap>,
    ) -> Result<(), EntityError> {
        let Values { values, map: map_fn } = *self;
        for (mut value, entity) in values.into_iter().zip(entities) {
            if let (Some(map), Some(map_fn)) = (map, map_fn) {
                map_fn(&mut value, map);
            }
            world.insert(entity, (value,))?;
        }
        Ok(())
    }
}

/// A resource value, and how to map the ids it holds.
struct ResourceValue<R> {
    value: R,
    map: Option<fn(&mut R, &EntityMap)>,
}

impl<R: Send + Sync + 'static> StagedResource for ResourceValue<R> {
    fn commit(self: Box<Self>, world: &mut World, map: Option<&EntityMap>) {
        let ResourceValue { mut value, map: map_fn } = *self;
        if let (Some(map), Some(map_fn)) = (map, map_fn) {
            map_fn(&mut value, map);
        }
        world.insert_resource(value);
    }
}

fn get_component<T: Component + Serialize>(
    world: &World,
    entity: Entity,
) -> Option<&dyn ErasedSerialize> {
    world.get::<T>(entity).map(|value| value as &dyn ErasedSerialize)
}

fn read_column<T: Component + DeserializeOwned, const MAPS: bool>(
    deserializer: &mut dyn ErasedDeserializer<'_>,
) -> Result<StagedColumn, erased_serde::Error>
where
    Mapper<T, MAPS>: MapFn<T>,
{
    let rows: Vec<(Entity, T)> = erased_serde::deserialize(deserializer)?;
    let (entities, values) = rows.into_iter().unzip();
    let values = Box::new(Values::<T> { values, map: <Mapper<T, MAPS>>::map_fn() });
    Ok(StagedColumn { entities, values })
}

fn get_resource<R: Send + Sync + 'static + Serialize>(
    world: &World,
) -> Option<&dyn ErasedSerialize> {
    world.resource::<R>().map(|value| value as &dyn ErasedSerialize)
}

fn read_resource<R: Send + Sync + 'static + DeserializeOwned, const MAPS: bool>(
    deserializer: &mut dyn ErasedDeserializer<'_>,
) -> Result<Box<dyn StagedResource>, erased_serde::Error>
where
    Mapper<R, MAPS>: MapFn<R>,
{
    let value: R = erased_serde::deserialize(deserializer)?;
    Ok(Box::new(ResourceValue { value, map: <Mapper<R, MAPS>>::map_fn() }))
}

/// Picks, at compile time, whether a type's ids are mapped: `Mapper<T, true>` needs
/// `T: MapEntities`, `Mapper<T, false>` nothing.
struct Mapper<T, const MAPS: bool>(std::marker::PhantomData<T>);

/// The id-mapping function of a [`Mapper`].
trait MapFn<T> {
    fn map_fn() -> Option<fn(&mut T, &EntityMap)>;
}

impl<T> MapFn<T> for Mapper<T, false> {
    fn map_fn() -> Option<fn(&mut T, &EntityMap)> {
        None
    }
}

impl<T: MapEntities> MapFn<T> for Mapper<T, true> {
    fn map_fn() -> Option<fn(&mut T, &EntityMap)> {
        Some(T::map_entities)
    }
}

impl SaveRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Saves component `T` under `name`.
    ///
    /// # Panics
    /// When `name` or `T` (as a component) is registered already: a save could not tell the
    /// two apart. Give each type one name, and never reuse a name for another type.
    #[track_caller]
    pub fn component<T>(&mut self, name: &'static str) -> &mut Self
    where
        T: Component + Serialize + DeserializeOwned,
    {
        self.add_component::<T, false>(name)
    }

    /// Saves component `T`, which holds [`Entity`] values, under `name`: a load that gives the
    /// saved entities new ids ([`LoadMode::Remap`](crate::LoadMode::Remap)) rewrites them
    /// through `T`'s [`MapEntities`].
    ///
    /// # Panics
    /// As [`Self::component`].
    #[track_caller]
    pub fn component_with_entities<T>(&mut self, name: &'static str) -> &mut Self
    where
        T: Component + Serialize + DeserializeOwned + MapEntities,
    {
        self.add_component::<T, true>(name)
    }

    /// Saves resource `R` under `name`.
    ///
    /// # Panics
    /// When `name` or `R` (as a resource) is registered already.
    #[track_caller]
    pub fn resource<R>(&mut self, name: &'static str) -> &mut Self
    where
        R: Send + Sync + 'static + Serialize + DeserializeOwned,
    {
        self.add_resource::<R, false>(name)
    }

    /// Saves resource `R`, which holds [`Entity`] values, under `name`, mapped as
    /// [`Self::component_with_entities`]'s are.
    ///
    /// # Panics
    /// As [`Self::resource`].
    #[track_caller]
    pub fn resource_with_entities<R>(&mut self, name: &'static str) -> &mut Self
    where
        R: Send + Sync + 'static + Serialize + DeserializeOwned + MapEntities,
    {
        self.add_resource::<R, true>(name)
    }

    /// How many types are registered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no type is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The name component `T` is saved under, if it is registered.
    pub fn component_name<T: Component>(&self) -> Option<&'static str> {
        self.components.get(&TypeId::of::<T>()).map(|&i| self.entries[i].name)
    }

    /// The name resource `R` is saved under, if it is registered.
    pub fn resource_name<R: Send + Sync + 'static>(&self) -> Option<&'static str> {
        self.resources.get(&TypeId::of::<R>()).map(|&i| self.entries[i].name)
    }

    /// The entry saved under `name`.
    pub(crate) fn by_name(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// Whether `type_id` is registered as a component.
    pub(crate) fn has_component(&self, type_id: TypeId) -> bool {
        self.components.contains_key(&type_id)
    }

    /// Whether `type_id` is registered as a resource.
    pub(crate) fn has_resource(&self, type_id: TypeId) -> bool {
        self.resources.contains_key(&type_id)
    }

    #[track_caller]
    fn add_component<T, const MAPS: bool>(&mut self, name: &'static str) -> &mut Self
    where
        T: Component + Serialize + DeserializeOwned,
        Mapper<T, MAPS>: MapFn<T>,
    {
        let fns = Fns::Component { get: get_component::<T>, read: read_column::<T, MAPS> };
        self.add::<T>(name, fns, true)
    }

    #[track_caller]
    fn add_resource<R, const MAPS: bool>(&mut self, name: &'static str) -> &mut Self
    where
        R: Send + Sync + 'static + Serialize + DeserializeOwned,
        Mapper<R, MAPS>: MapFn<R>,
    {
        let fns = Fns::Resource { get: get_resource::<R>, read: read_resource::<R, MAPS> };
        self.add::<R>(name, fns, false)
    }

    #[track_caller]
    fn add<T: 'static>(&mut self, name: &'static str, fns: Fns, component: bool) -> &mut Self {
        let type_id = TypeId::of::<T>();
        let type_name = type_name::<T>();
        if let Some(&i) = self.by_name.get(name) {
            panic!(
                "SaveRegistry: the name \"{name}\" is registered already (for {}); give {type_name} \
                 a name of its own",
                self.entries[i].type_name
            );
        }
        let by_type = if component { &mut self.components } else { &mut self.resources };
        let kind = if component { "component" } else { "resource" };
        if let Some(&i) = by_type.get(&type_id) {
            panic!(
                "SaveRegistry: {kind} {type_name} is registered already (as \"{}\"); register \
                 each type once",
                self.entries[i].name
            );
        }
        by_type.insert(type_id, self.entries.len());
        self.by_name.insert(name, self.entries.len());
        self.entries.push(Entry { name, type_name, type_id, fns });
        self
    }
}

impl std::fmt::Debug for SaveRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.entries.iter().map(|e| (e.name, e.type_name))).finish()
    }
}
