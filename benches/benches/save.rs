//! Save games: a save and a load of 100,000 entities × (Position, Velocity, Health) in a
//! compact binary format (postcard, the same for both), side by side with hecs's column
//! serializer, its fastest:
//!
//! Two groups, `save` and `load`, each with a `folio` and a `hecs` bench:
//!
//! - `save/folio`: `postcard::to_extend` of [`World::save`](folio_archetype::World::save)
//!   through a [`SaveRegistry`](folio_archetype::SaveRegistry) naming the three components,
//!   into a reused buffer.
//! - `save/hecs`: `postcard::to_extend` of `hecs::serialize::column::serialize` with a context
//!   naming the same three components, into a reused buffer.
//! - `load/folio`: [`World::load`](folio_archetype::World::load) of that save into a new world
//!   (a restore: every entity at its saved id, the allocator as it was), every check included.
//! - `load/hecs`: `hecs::serialize::column::deserialize` of its save, which makes a new world.
//!
//! Each load's world is dropped outside the timing. Sample sizes and times come from
//! `folio_benches::criterion()` and the command line.
#![allow(missing_docs)] // `criterion_group!` / `criterion_main!` generate undocumented items.

use std::any::TypeId;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde::{Deserialize, Serialize};

/// Entities in the world.
const N: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Position([f32; 3]);

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Velocity([f32; 3]);

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Health(u32);

fn bundle(i: usize) -> (Position, Velocity, Health) {
    let f = i as f32;
    (Position([f, 0.0, -f]), Velocity([1.0, 0.5, 0.0]), Health(i as u32))
}

fn registry() -> folio_archetype::SaveRegistry {
    let mut registry = folio_archetype::SaveRegistry::new();
    registry
        .component::<Position>("position")
        .component::<Velocity>("velocity")
        .component::<Health>("health");
    registry
}

/// hecs's name for each saved component, as a game writes its context.
#[derive(Serialize, Deserialize, Clone, Copy)]
enum HecsId {
    Position,
    Velocity,
    Health,
}

/// hecs's context for the three components (its `serialize_to_disk` example's shape).
#[derive(Default)]
struct HecsContext {
    ids: Vec<HecsId>,
}

impl hecs::serialize::column::SerializeContext for HecsContext {
    fn component_count(&self, archetype: &hecs::Archetype) -> usize {
        let saved = [TypeId::of::<Position>(), TypeId::of::<Velocity>(), TypeId::of::<Health>()];
        archetype.component_types().filter(|t| saved.contains(t)).count()
    }

    fn serialize_component_ids<S: serde::ser::SerializeTuple>(
        &mut self,
        archetype: &hecs::Archetype,
        mut out: S,
    ) -> Result<S::Ok, S::Error> {
        use hecs::serialize::column::try_serialize_id;
        try_serialize_id::<Position, _, _>(archetype, &HecsId::Position, &mut out)?;
        try_serialize_id::<Velocity, _, _>(archetype, &HecsId::Velocity, &mut out)?;
        try_serialize_id::<Health, _, _>(archetype, &HecsId::Health, &mut out)?;
        out.end()
    }

    fn serialize_components<S: serde::ser::SerializeTuple>(
        &mut self,
        archetype: &hecs::Archetype,
        mut out: S,
    ) -> Result<S::Ok, S::Error> {
        use hecs::serialize::column::try_serialize;
        try_serialize::<Position, _>(archetype, &mut out)?;
        try_serialize::<Velocity, _>(archetype, &mut out)?;
        try_serialize::<Health, _>(archetype, &mut out)?;
        out.end()
    }
}

impl hecs::serialize::column::DeserializeContext for HecsContext {
    fn deserialize_component_ids<'de, A: serde::de::SeqAccess<'de>>(
        &mut self,
        mut seq: A,
    ) -> Result<hecs::ColumnBatchType, A::Error> {
        self.ids.clear();
        let mut batch = hecs::ColumnBatchType::new();
        while let Some(id) = seq.next_element()? {
            match id {
                HecsId::Position => batch.add::<Position>(),
                HecsId::Velocity => batch.add::<Velocity>(),
                HecsId::Health => batch.add::<Health>(),
            };
            self.ids.push(id);
        }
        Ok(batch)
    }

    fn deserialize_components<'de, A: serde::de::SeqAccess<'de>>(
        &mut self,
        entity_count: u32,
        mut seq: A,
        batch: &mut hecs::ColumnBatchBuilder,
    ) -> Result<(), A::Error> {
        use hecs::serialize::column::deserialize_column;
        for &id in &self.ids {
            match id {
                HecsId::Position => {
                    deserialize_column::<Position, _>(entity_count, &mut seq, batch)
                }
                HecsId::Velocity => {
                    deserialize_column::<Velocity, _>(entity_count, &mut seq, batch)
                }
                HecsId::Health => deserialize_column::<Health, _>(entity_count, &mut seq, batch),
            }?;
        }
        Ok(())
    }
}

/// A hecs world as a serde value, so both libraries go through the same postcard call.
struct HecsSave<'w>(&'w hecs::World);

impl Serialize for HecsSave<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        hecs::serialize::column::serialize(self.0, &mut HecsContext::default(), serializer)
    }
}

fn save(c: &mut Criterion) {
    let mut group = c.benchmark_group("save");

    let registry = registry();
    let mut world = folio_archetype::World::new();
    world.spawn_batch((0..N).map(bundle));
    let folio_bytes = postcard::to_allocvec(&world.save(&registry)).unwrap();
    let mut buf = Vec::with_capacity(folio_bytes.len());
    group.bench_function("folio", |b| {
        b.iter(|| {
            buf.clear();
            buf = postcard::to_extend(&world.save(black_box(&registry)), std::mem::take(&mut buf))
                .unwrap();
        })
    });
    // The benched path writes the same save (`buf` stays empty when a filter skips it).
    assert!(buf.is_empty() || buf == folio_bytes, "folio's save differs between runs");

    let mut hecs_world = hecs::World::new();
    hecs_world.spawn_batch((0..N).map(bundle)).for_each(drop);
    let hecs_bytes = postcard::to_allocvec(&HecsSave(&hecs_world)).unwrap();
    let mut buf = Vec::with_capacity(hecs_bytes.len());
    group.bench_function("hecs", |b| {
        b.iter(|| {
            buf.clear();
            buf = postcard::to_extend(&HecsSave(black_box(&hecs_world)), std::mem::take(&mut buf))
                .unwrap();
        })
    });
    assert!(buf.is_empty() || buf == hecs_bytes, "hecs's save differs between runs");
    group.finish();

    let mut group = c.benchmark_group("load");
    group.bench_function("folio", |b| {
        b.iter_with_large_drop(|| {
            let mut loaded = folio_archetype::World::new();
            let mut de = postcard::Deserializer::from_bytes(black_box(&folio_bytes));
            loaded.load(&registry, &mut de).unwrap();
            loaded
        })
    });
    let mut loaded = folio_archetype::World::new();
    loaded.load(&registry, &mut postcard::Deserializer::from_bytes(&folio_bytes)).unwrap();
    assert_eq!(loaded.len(), N);
    let e = world.archetype_entities(world.archetypes()[1].id()).iter().last().unwrap().entity;
    assert_eq!(loaded.get::<Health>(e), world.get::<Health>(e));

    group.bench_function("hecs", |b| {
        b.iter_with_large_drop(|| {
            let mut de = postcard::Deserializer::from_bytes(black_box(&hecs_bytes));
            hecs::serialize::column::deserialize(&mut HecsContext::default(), &mut de).unwrap()
        })
    });
    let hecs_loaded = hecs::serialize::column::deserialize(
        &mut HecsContext::default(),
        &mut postcard::Deserializer::from_bytes(&hecs_bytes),
    )
    .unwrap();
    assert_eq!(hecs_loaded.len() as usize, N);
    group.finish();
    println!(
        "save: {N} entities, folio {} bytes, hecs {} bytes",
        folio_bytes.len(),
        hecs_bytes.len()
    );
}

criterion_group! {
    name = benches;
    config = folio_benches::criterion();
    targets = save
}
criterion_main!(benches);
