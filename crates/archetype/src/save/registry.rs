//! [`SaveRegistry`]: the component and resource types a game saves, each under a stable name,
//! with the type-erased functions that write and read them.

use std::any::{TypeId, type_name};
use std::fmt;
use std::marker::PhantomData;

use ahash::AHashMap;
use erased_serde::{Deserializer as ErasedDeserializer, Serialize as ErasedSerialize};
use folio_storage::{ComponentSparseSet, Entity};
use serde::de::{self, DeserializeOwned, DeserializeSeed, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::entity_map::{EntityMap, MapEntities};
use crate::archetype::{ArchetypeEntities, ArchetypeId};
use crate::component::{Component, ComponentId};
use crate::error::ComponentError;
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

/// A column's values as read, not yet in any world.
pub(crate) type Staged = Box<dyn StagedValues>;

/// The type-erased functions of one registered type.
pub(crate) enum Fns {
    /// A component type.
    Component(ComponentFns),
    /// A resource type.
    Resource {
        /// The world's value, if it has one.
        get: for<'w> fn(&'w World) -> Option<&'w dyn ErasedSerialize>,
        /// Reads the value.
        read: fn(&mut dyn ErasedDeserializer<'_>) -> ReadResult<Box<dyn StagedResource>>,
    },
}

/// The type-erased functions of one component type: one call per column, never one per value
/// (a value's fields are read and written by code made for the type and the format).
pub(crate) struct ComponentFns {
    /// The type's component id in a world, registered (with table storage) if it is new.
    pub(crate) id: fn(&mut World) -> Result<ComponentId, ComponentError>,
    /// The column of the type in an archetype, for a self-describing format: a sequence of
    /// the values in row order.
    pub(crate) column:
        for<'w> fn(&'w World, ArchetypeId, ComponentId) -> Box<dyn ErasedSerialize + 'w>,
    /// The same column for a compact format: appended to the buffer in postcard's encoding
    /// (the count, then each value).
    pub(crate) encode: fn(&World, ArchetypeId, ComponentId, &mut Vec<u8>) -> postcard::Result<()>,
    /// Reads a column of exactly `n` values written by `column`.
    pub(crate) read:
        fn(&mut dyn ErasedDeserializer<'_>, usize) -> ReadResult<Box<dyn StagedValues>>,
    /// Reads a column of exactly `n` values written by `encode`, every byte of it.
    pub(crate) decode: fn(&[u8], usize) -> postcard::Result<Staged>,
    /// Maps the ids held by `entity`'s value; `None` for a type registered without entities.
    pub(crate) map: Option<fn(&mut World, Entity, &EntityMap)>,
}

/// The values of one column read from a save, typed inside, not yet in any world.
pub(crate) trait StagedValues: Send {
    /// How many values.
    fn len(&self) -> usize;

    /// Moves the values into `dst`, one after the other (the slots of a table column's new
    /// rows).
    ///
    /// # Safety
    /// `dst` is valid for writes of `len()` values of the type, aligned for it, and holds no
    /// value the caller still needs (the slots are overwritten, nothing is dropped).
    unsafe fn write_to(self: Box<Self>, dst: *mut u8);

    /// Inserts the `i`-th value as `entities[i]`'s in `set`, at change tick `tick`.
    ///
    /// # Safety
    /// `set` holds values of the type, has room for `entities` (reserved entries and pages),
    /// and `entities.len() == len()`.
    unsafe fn insert_into(
        self: Box<Self>,
        set: &mut ComponentSparseSet,
        entities: &[Entity],
        tick: u32,
    );
}

/// A resource read from a save, not yet in any world.
pub(crate) trait StagedResource: Send {
    /// Inserts the value, first mapping the ids it holds through `map` (when given and the
    /// type maps entities).
    fn commit(self: Box<Self>, world: &mut World, map: Option<&EntityMap>);
}

impl<T: Component> StagedValues for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    unsafe fn write_to(mut self: Box<Self>, dst: *mut u8) {
        let n = self.len();
        // SAFETY:
        // - the vector's first `n` items are initialised `T`s; `dst` is valid and aligned for
        //   `n` of them (caller), and a table column's buffer never overlaps the vector's.
        // - `set_len(0)` then hands their ownership to `dst`: the vector frees its buffer
        //   without dropping them.
        unsafe {
            std::ptr::copy_nonoverlapping(self.as_ptr(), dst.cast::<T>(), n);
            self.set_len(0);
        }
    }

    unsafe fn insert_into(
        mut self: Box<Self>,
        set: &mut ComponentSparseSet,
        entities: &[Entity],
        tick: u32,
    ) {
        debug_assert_eq!(self.len(), entities.len());
        let n = self.len();
        // SAFETY: ownership of the values passes to the set one by one below; the vector
        // only frees its buffer (`set_len(0)` first, so a panic drops none of them twice).
        unsafe { self.set_len(0) };
        let base = self.as_ptr();
        for (i, &entity) in entities.iter().enumerate().take(n) {
            // SAFETY:
            // - item `i < n` is an initialised `T` that no one else owns (the vector gave
            //   them up above); the set holds `T`s (caller) and takes it as moved.
            // - room for the entry and the entity's page was reserved (caller), so the insert
            //   does not fail.
            let inserted = unsafe { set.insert(entity, base.add(i).cast::<u8>(), tick) };
            inserted.expect("room was reserved");
        }
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

/// The values of component `T` in one archetype, in row order, read where they live.
pub(crate) enum ColumnValues<'w, T> {
    /// The archetype has its table to itself: the column's slice.
    Slice(&'w [T]),
    /// The table is shared: the table column, read at the archetype's rows.
    Rows(&'w [T], ArchetypeEntities<'w>),
    /// A sparse-set component: the set, read at the archetype's entities.
    Sparse(&'w ComponentSparseSet, ArchetypeEntities<'w>),
}

impl<'w, T: Component> ColumnValues<'w, T> {
    /// The values of `id` (`T`'s component id) in `archetype`.
    fn new(world: &'w World, archetype: ArchetypeId, id: ComponentId) -> Self {
        let arch = &world.archetypes()[archetype.index()];
        let table = &world.tables()[arch.table_id().index()];
        let entities = world.archetype_entities(archetype);
        match table.column(id) {
            Some(column) => {
                // SAFETY: `id` is `T`'s component id (caller), so the column holds `T`s.
                let slice = unsafe { column.data().as_slice::<T>() };
                if arch.is_listed() { Self::Rows(slice, entities) } else { Self::Slice(slice) }
            }
            None => {
                let set = world.sparse_set(id).expect("a component of the archetype");
                Self::Sparse(set, entities)
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Slice(slice) => slice.len(),
            Self::Rows(_, rows) | Self::Sparse(_, rows) => rows.len(),
        }
    }

    fn for_each<E>(&self, mut f: impl FnMut(&T) -> Result<(), E>) -> Result<(), E> {
        match self {
            Self::Slice(slice) => slice.iter().try_for_each(f),
            Self::Rows(slice, rows) => {
                rows.iter().try_for_each(|row| f(&slice[row.table_row as usize]))
            }
            Self::Sparse(set, rows) => rows.iter().try_for_each(|row| {
                let ptr = set.get(row.entity).expect("the archetype's entity has the component");
                // SAFETY: the set holds `T`s (`id` is `T`'s); the value lives while the world
                // is borrowed.
                f(unsafe { ptr.cast::<T>().as_ref() })
            }),
        }
    }
}

impl<T: Component + Serialize> Serialize for ColumnValues<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        self.for_each(|value| seq.serialize_element(value))?;
        seq.end()
    }
}

fn component_id<T: Component>(world: &mut World) -> Result<ComponentId, ComponentError> {
    world.component_id_for_load::<T>()
}

fn column<'w, T: Component + Serialize>(
    world: &'w World,
    archetype: ArchetypeId,
    id: ComponentId,
) -> Box<dyn ErasedSerialize + 'w> {
    Box::new(ColumnValues::<T>::new(world, archetype, id))
}

fn encode<T: Component + Serialize>(
    world: &World,
    archetype: ArchetypeId,
    id: ComponentId,
    out: &mut Vec<u8>,
) -> postcard::Result<()> {
    let values = ColumnValues::<T>::new(world, archetype, id);
    // Room for the values at their in-memory size (about their encoded size), so the buffer
    // does not grow by doubling, each step a copy of what was written.
    out.reserve(values.len().saturating_mul(size_of::<T>()).saturating_add(16));
    postcard::to_extend(&values, std::mem::take(out)).map(|written| *out = written)
}

/// Reads a sequence of exactly `n` values of `T`: a longer or shorter one is an error (and
/// a declared length past `n` is refused before any value is read).
struct Exactly<T> {
    n: usize,
    marker: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Exactly<T> {
    type Value = Vec<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<T>, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Exactly<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a sequence of {} values, one per entity", self.n)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        if let Some(len) = seq.size_hint()
            && len != self.n
        {
            return Err(de::Error::invalid_length(len, &self));
        }
        let mut values = crate::try_alloc::vec_with_capacity(self.n)
            .map_err(|e| de::Error::custom(format_args!("cannot hold the column: {e}")))?;
        while values.len() < self.n {
            match seq.next_element()? {
                Some(value) => values.push(value),
                None => return Err(de::Error::invalid_length(values.len(), &self)),
            }
        }
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(self.n + 1, &self));
        }
        Ok(values)
    }
}

fn read_column<T: Component + DeserializeOwned>(
    deserializer: &mut dyn ErasedDeserializer<'_>,
    n: usize,
) -> ReadResult<Box<dyn StagedValues>> {
    let values = Exactly::<T> { n, marker: PhantomData }.deserialize(deserializer)?;
    Ok(Box::new(values))
}

fn decode_column<T: Component + DeserializeOwned>(
    bytes: &[u8],
    n: usize,
) -> postcard::Result<Staged> {
    let mut deserializer = postcard::Deserializer::from_bytes(bytes);
    let values = Exactly::<T> { n, marker: PhantomData }.deserialize(&mut deserializer)?;
    if !deserializer.finalize()?.is_empty() {
        return Err(postcard::Error::DeserializeBadEncoding);
    }
    Ok(Box::new(values))
}

fn map_component<T: Component + MapEntities>(world: &mut World, entity: Entity, map: &EntityMap) {
    if let Some(value) = world.get_mut::<T>(entity) {
        value.map_entities(map);
    }
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

/// The function that maps the ids an entity's component of a [`Mapper`]'s type holds.
trait MapWorldFn<T> {
    fn map_world_fn() -> Option<fn(&mut World, Entity, &EntityMap)>;
}

impl<T> MapWorldFn<T> for Mapper<T, false> {
    fn map_world_fn() -> Option<fn(&mut World, Entity, &EntityMap)> {
        None
    }
}

impl<T: Component + MapEntities> MapWorldFn<T> for Mapper<T, true> {
    fn map_world_fn() -> Option<fn(&mut World, Entity, &EntityMap)> {
        Some(map_component::<T>)
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
        Mapper<T, MAPS>: MapWorldFn<T>,
    {
        let fns = Fns::Component(ComponentFns {
            id: component_id::<T>,
            column: column::<T>,
            encode: encode::<T>,
            read: read_column::<T>,
            decode: decode_column::<T>,
            map: <Mapper<T, MAPS>>::map_world_fn(),
        });
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
