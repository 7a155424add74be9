//! [`Entity`] as serde data (the `serde` feature): the tuple `(index, generation)`, so a text
//! format shows both halves (`[12, 3]` in JSON) and a compact binary one writes two small
//! integers. A generation of 0 is refused with an error naming the value.

use std::fmt;
use std::num::NonZeroU32;

use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Entity;

impl Serialize for Entity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tuple = serializer.serialize_tuple(2)?;
        tuple.serialize_element(&self.index)?;
        tuple.serialize_element(&self.generation.get())?;
        tuple.end()
    }
}

impl<'de> Deserialize<'de> for Entity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntityVisitor;

        impl<'de> Visitor<'de> for EntityVisitor {
            type Value = Entity;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an entity as (index, generation), the generation not 0")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entity, A::Error> {
                let index: u32 =
                    seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let generation: u32 =
                    seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                let generation = NonZeroU32::new(generation).ok_or_else(|| {
                    de::Error::invalid_value(de::Unexpected::Unsigned(0), &"a generation above 0")
                })?;
                Ok(Entity { index, generation })
            }
        }

        deserializer.deserialize_tuple(2, EntityVisitor)
    }
}
