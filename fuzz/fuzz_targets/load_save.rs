//! cargo-fuzz target: feeds the input, as postcard bytes (or as edits of a valid save, so the
//! fuzzer reaches past the header at once, and into the column byte strings each component's
//! own decoder reads), to a save load into an empty world (a restore), into a world with
//! entities (new ids) and into that world at the saved ids. A load must never panic; a refused
//! one must leave the world as it was; an accepted one must leave it consistent.
//!
//! ```sh
//! cargo +nightly fuzz run load_save -- -max_total_time=60
//! ```

#![no_main]

use std::sync::OnceLock;

use folio::World;
use folio::archetype::{Entity, EntityMap, LoadMode, MapEntities, SaveRegistry, StorageType};
use libfuzzer_sys::fuzz_target;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug)]
struct Pos(f32, f32);
#[derive(Serialize, Deserialize, Debug)]
struct Name(String);
#[derive(Serialize, Deserialize, Debug)]
struct Flag;
#[derive(Serialize, Deserialize, Debug)]
struct Follows(Entity);
impl MapEntities for Follows {
    fn map_entities(&mut self, map: &EntityMap) {
        self.0 = map.map(self.0);
    }
}
#[derive(Serialize, Deserialize, Debug)]
struct Turn(u64);

fn registry() -> SaveRegistry {
    let mut registry = SaveRegistry::new();
    registry
        .component::<Pos>("pos")
        .component::<Name>("name")
        .component::<Flag>("flag")
        .component_with_entities::<Follows>("follows")
        .resource::<Turn>("turn");
    registry
}

fn world(busy: bool) -> World {
    let mut world = World::new();
    world.register_component::<Flag>(StorageType::SparseSet).unwrap();
    if busy {
        let a = world.spawn((Pos(1.0, 2.0), Name("a".into())));
        let b = world.spawn((Flag, Follows(a)));
        let gone = world.spawn(());
        world.despawn(gone).unwrap();
        world.insert(a, (Follows(b),)).unwrap();
        world.insert_resource(Turn(3));
    }
    world
}

/// What a refused load must not change: the allocator, each entity's components, resources.
fn observe(world: &World) -> String {
    let mut out = format!("{:?} {:?}", world.entities().state(), world.resource::<Turn>());
    for archetype in world.archetypes() {
        for row in world.archetype_entities(archetype.id()).iter() {
            let e = row.entity;
            out += &format!(
                " {e}:{:?}{:?}{:?}{:?}",
                world.get::<Pos>(e),
                world.get::<Name>(e),
                world.get::<Flag>(e),
                world.get::<Follows>(e)
            );
        }
    }
    out
}

/// A valid save of the busy world, for inputs that edit one instead of being one.
fn valid_save() -> &'static [u8] {
    static SAVE: OnceLock<Vec<u8>> = OnceLock::new();
    SAVE.get_or_init(|| postcard::to_allocvec(&world(true).save(&registry())).unwrap())
}

/// The bytes to load: the input itself when its first byte is even; else a valid save, cut to
/// the length the second byte picks and edited by the rest, read as `(position, value)` pairs.
fn input(data: &[u8]) -> Vec<u8> {
    match data {
        [first, len, edits @ ..] if first % 2 == 1 => {
            let save = valid_save();
            let keep = save.len() - usize::from(*len) % (save.len() / 4 + 1);
            let mut bytes = save[..keep].to_vec();
            for edit in edits.chunks_exact(2) {
                let at = usize::from(edit[0]) % bytes.len().max(1);
                if let Some(byte) = bytes.get_mut(at) {
                    *byte = edit[1];
                }
            }
            bytes
        }
        _ => data.to_vec(),
    }
}

fuzz_target!(|data: &[u8]| {
    let registry = registry();
    let bytes = input(data);
    for busy in [false, true] {
        let mut world = world(busy);
        let before = observe(&world);
        match world.load(&registry, &mut postcard::Deserializer::from_bytes(&bytes)) {
            Ok(_) => world.check_invariants(),
            Err(_) => assert_eq!(observe(&world), before),
        }
    }
    // At the saved ids, beside the busy world's own entities.
    let mut world = world(true);
    let before = observe(&world);
    let loaded = registry
        .read(&mut postcard::Deserializer::from_bytes(&bytes))
        .and_then(|saved| world.load_saved(saved, LoadMode::KeepIds));
    match loaded {
        Ok(_) => world.check_invariants(),
        Err(_) => assert_eq!(observe(&world), before),
    }
});
