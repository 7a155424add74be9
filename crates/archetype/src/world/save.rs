//! [`World::save`]: a [`WorldSave`] view that serializes the world's registered components and
//! resources and its entity allocator (the layout is in the [`save`](crate::save) module).

use serde::ser::{Error as _, SerializeSeq, SerializeStruct, SerializeTuple};
use serde::{Serialize, Serializer};

use super::World;
use crate::archetype::{Archetype, ArchetypeId};
use crate::component::ComponentId;
use crate::save::registry::{ComponentFns, Entry, Fns};
use crate::save::{SAVE_VERSION, SaveRegistry};

impl World {
    /// A view of this world that serializes, to any serde format, every entity and the
    /// components and resources `registry` names; the rest is skipped
    /// ([`WorldSave::skipped`] lists it). Read it back with [`World::load`].
    ///
    /// Reserved entities not yet flushed are saved as pending reservations, so the loaded
    /// world flushes them to the same ids at its next structural change, as this one would.
    ///
    /// ```
    /// use folio_archetype::{SaveRegistry, World};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize, Debug, PartialEq)]
    /// struct Health(u32);
    ///
    /// let mut registry = SaveRegistry::new();
    /// registry.component::<Health>("health");
    ///
    /// let mut world = World::new();
    /// let e = world.spawn((Health(7), 'x')); // `char` is not registered: skipped
    /// let save = world.save(&registry);
    /// assert_eq!(save.skipped(), ["char"]);
    /// let json = serde_json::to_string(&save).unwrap();
    ///
    /// let mut loaded = World::new();
    /// loaded.load(&registry, &mut serde_json::Deserializer::from_str(&json)).unwrap();
    /// assert_eq!(loaded.get::<Health>(e), Some(&Health(7))); // same id
    /// ```
    pub fn save<'a>(&'a self, registry: &'a SaveRegistry) -> WorldSave<'a> {
        WorldSave { world: self, registry }
    }
}

/// A world to serialize: [`World::save`].
#[derive(Clone, Copy)]
pub struct WorldSave<'a> {
    world: &'a World,
    registry: &'a SaveRegistry,
}

impl WorldSave<'_> {
    /// The type names of the components (held by at least one entity) and resources the save
    /// leaves out because the registry does not name them, sorted.
    pub fn skipped(&self) -> Vec<&'static str> {
        let world = self.world;
        let mut skipped: Vec<&'static str> = world
            .components
            .iter()
            .filter(|info| !self.registry.has_component(info.type_id()))
            .filter(|info| self.rows(info.id()) > 0)
            .map(|info| info.name())
            .collect();
        skipped.extend(
            world
                .resources
                .iter()
                .filter(|(type_id, _)| !self.registry.has_resource(**type_id))
                .map(|(_, resource)| resource.type_name()),
        );
        skipped.sort_unstable();
        skipped
    }

    /// The archetypes holding component `id`.
    fn archetypes_with(&self, id: ComponentId) -> impl Iterator<Item = &Archetype> + '_ {
        self.world.archetypes.iter().filter(move |a| a.contains(id))
    }

    /// How many entities hold component `id`.
    fn rows(&self, id: ComponentId) -> usize {
        self.archetypes_with(id).map(Archetype::len).sum()
    }

    /// The registered components of `archetype`, in the registry's order, with their ids.
    fn columns_of<'s>(
        &'s self,
        archetype: &'s Archetype,
    ) -> impl Iterator<Item = (&'s Entry, &'s ComponentFns, ComponentId)> + 's {
        self.registry.entries.iter().filter_map(move |entry| match &entry.fns {
            Fns::Component(fns) => self
                .world
                .components
                .id_of(entry.type_id)
                .filter(|&id| archetype.contains(id))
                .map(|id| (entry, fns, id)),
            Fns::Resource { .. } => None,
        })
    }
}

impl std::fmt::Debug for WorldSave<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldSave")
            .field("entities", &self.world.len())
            .field("registry", self.registry)
            .finish()
    }
}

impl Serialize for WorldSave<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut save = serializer.serialize_struct("FolioSave", 4)?;
        save.serialize_field("version", &SAVE_VERSION)?;
        save.serialize_field("entities", &EntitiesPart(self))?;
        save.serialize_field("archetypes", &ArchetypesPart(self))?;
        save.serialize_field("resources", &ResourcesPart(self))?;
        save.end()
    }
}

/// `(generations, free, takeable, reserved)`: the alive indices are the archetypes' entities.
struct EntitiesPart<'s, 'a>(&'s WorldSave<'a>);

impl Serialize for EntitiesPart<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entities = &self.0.world.entities;
        let mut tuple = serializer.serialize_tuple(4)?;
        tuple.serialize_element(&Seq(|| entities.generations()))?;
        tuple.serialize_element(&Seq(|| entities.free_indices()))?;
        tuple.serialize_element(&(entities.takeable() as u64))?;
        tuple.serialize_element(&(entities.reserved_len() as u64))?;
        tuple.end()
    }
}

/// The items of the iterator `.0()` makes, as a sequence.
struct Seq<F>(F);

impl<F, I> Serialize for Seq<F>
where
    F: Fn() -> I,
    I: ExactSizeIterator<Item: Serialize>,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq((self.0)())
    }
}

/// Every archetype with entities, in the world's order: `[{entities, columns}]`.
struct ArchetypesPart<'s, 'a>(&'s WorldSave<'a>);

impl Serialize for ArchetypesPart<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let save = self.0;
        let held = || save.world.archetypes.iter().filter(|a| !a.is_empty());
        let mut seq = serializer.serialize_seq(Some(held().count()))?;
        for archetype in held() {
            seq.serialize_element(&ArchetypePart { save, archetype })?;
        }
        seq.end()
    }
}

/// One archetype: its entities in row order, and a column per registered component.
struct ArchetypePart<'s, 'a> {
    save: &'s WorldSave<'a>,
    archetype: &'s Archetype,
}

impl Serialize for ArchetypePart<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut group = serializer.serialize_struct("Archetype", 2)?;
        group.serialize_field("entities", &EntitiesOf(self.save.world, self.archetype))?;
        group.serialize_field("columns", &ColumnsOf(self))?;
        group.end()
    }
}

/// An archetype's entities, in row order.
struct EntitiesOf<'w>(&'w World, &'w Archetype);

impl Serialize for EntitiesOf<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (world, archetype) = (self.0, self.1);
        if !archetype.is_listed() {
            // The archetype has its table to itself: the table's entity column, as one slice.
            return world.tables[archetype.table_id().index()].entities().serialize(serializer);
        }
        serializer.collect_seq(world.archetype_entities(archetype.id()).iter().map(|r| r.entity))
    }
}

/// An archetype's `[(name, values)]`, in the registry's order.
struct ColumnsOf<'p, 's, 'a>(&'p ArchetypePart<'s, 'a>);

impl Serialize for ColumnsOf<'_, '_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let ArchetypePart { save, archetype } = *self.0;
        let mut seq = serializer.serialize_seq(Some(save.columns_of(archetype).count()))?;
        for (entry, fns, id) in save.columns_of(archetype) {
            let values = ColumnPart { world: save.world, archetype: archetype.id(), id, fns };
            seq.serialize_element(&(entry.name, values))?;
        }
        seq.end()
    }
}

/// One component's values in one archetype: a sequence in a self-describing format, one
/// byte string in postcard's encoding in a compact one.
struct ColumnPart<'w> {
    world: &'w World,
    archetype: ArchetypeId,
    id: ComponentId,
    fns: &'w ComponentFns,
}

impl Serialize for ColumnPart<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            return (self.fns.column)(self.world, self.archetype, self.id).serialize(serializer);
        }
        let mut bytes = Vec::new();
        (self.fns.encode)(self.world, self.archetype, self.id, &mut bytes)
            .map_err(S::Error::custom)?;
        serializer.serialize_bytes(&bytes)
    }
}

/// `[(name, value)]`, in the registry's order, for the resources the world has.
struct ResourcesPart<'s, 'a>(&'s WorldSave<'a>);

impl Serialize for ResourcesPart<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let save = self.0;
        let present = || {
            save.registry.entries.iter().filter_map(|entry| match entry.fns {
                Fns::Resource { get, .. } => get(save.world).map(|value| (entry.name, value)),
                Fns::Component(_) => None,
            })
        };
        let mut seq = serializer.serialize_seq(Some(present().count()))?;
        for pair in present() {
            seq.serialize_element(&pair)?;
        }
        seq.end()
    }
}
