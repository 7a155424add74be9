//! [`World::save`]: a [`WorldSave`] view that serializes the world's registered components and
//! resources and its entity allocator (the layout is in the [`save`](crate::save) module).

use serde::ser::{SerializeSeq, SerializeStruct, SerializeTuple};
use serde::{Serialize, Serializer};

use super::World;
use crate::archetype::Archetype;
use crate::component::ComponentId;
use crate::save::registry::{Entry, Fns};
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

    /// The registered components this world has a component id for, with it.
    fn columns(&self) -> impl Iterator<Item = (&Entry, ComponentId)> + '_ {
        self.registry.entries.iter().filter_map(|entry| match entry.fns {
            Fns::Component { .. } => {
                self.world.components.id_of(entry.type_id).map(|id| (entry, id))
            }
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
        save.serialize_field("components", &ComponentsPart(self))?;
        save.serialize_field("resources", &ResourcesPart(self))?;
        save.end()
    }
}

/// `(generations, alive, free, takeable, reserved)`; `alive` in archetype order, so a load
/// places each table's entities back in row order.
struct EntitiesPart<'s, 'a>(&'s WorldSave<'a>);

impl Serialize for EntitiesPart<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let world = self.0.world;
        let state = world.entities.state();
        let mut tuple = serializer.serialize_tuple(5)?;
        tuple.serialize_element(&state.generations)?;
        tuple.serialize_element(&AliveInOrder(world))?;
        tuple.serialize_element(&state.free)?;
        tuple.serialize_element(&(state.takeable as u64))?;
        tuple.serialize_element(&(state.reserved as u64))?;
        tuple.end()
    }
}

/// The alive indices, archetype by archetype in row order.
struct AliveInOrder<'w>(&'w World);

impl Serialize for AliveInOrder<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let world = self.0;
        let mut seq = serializer.serialize_seq(Some(world.len()))?;
        for archetype in &world.archetypes {
            for row in world.archetype_entities(archetype.id()).iter() {
                seq.serialize_element(&row.entity.index())?;
            }
        }
        seq.end()
    }
}

/// `[(name, [(entity, value)])]`, in the registry's order.
struct ComponentsPart<'s, 'a>(&'s WorldSave<'a>);

impl Serialize for ComponentsPart<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let save = self.0;
        let mut seq = serializer.serialize_seq(Some(save.columns().count()))?;
        for (entry, id) in save.columns() {
            seq.serialize_element(&(entry.name, Column { save, entry, id }))?;
        }
        seq.end()
    }
}

/// One component's rows.
struct Column<'s, 'a> {
    save: &'s WorldSave<'a>,
    entry: &'s Entry,
    id: ComponentId,
}

impl Serialize for Column<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Fns::Component { get, .. } = self.entry.fns else { unreachable!("a component") };
        let world = self.save.world;
        let mut seq = serializer.serialize_seq(Some(self.save.rows(self.id)))?;
        for archetype in self.save.archetypes_with(self.id) {
            for row in world.archetype_entities(archetype.id()).iter() {
                let value = get(world, row.entity).expect("the archetype holds the component");
                seq.serialize_element(&(row.entity, value))?;
            }
        }
        seq.end()
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
                Fns::Component { .. } => None,
            })
        };
        let mut seq = serializer.serialize_seq(Some(present().count()))?;
        for pair in present() {
            seq.serialize_element(&pair)?;
        }
        seq.end()
    }
}
