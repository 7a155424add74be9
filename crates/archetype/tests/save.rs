//! Save games (the `serde` feature): round trips through JSON and postcard for every storage
//! kind, loads that keep ids and a simulation that runs on bit for bit, id mapping, and bad
//! input and refused memory (typed errors, the world unchanged, never a panic).
#![cfg(feature = "serde")]

use std::collections::BTreeMap;

use folio_archetype::{
    EntitiesState, Entity, EntityMap, LoadError, LoadMode, MapEntities, SaveRegistry, StorageType,
    World,
};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
struct Pos(f64, f64);
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
struct Vel(f64, f64);
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
struct Health(u32);
/// Kept in a sparse set.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
struct Stunned(u8);
/// Zero-sized.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
struct Player;
/// Over-aligned.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[repr(align(256))]
struct Aligned(u64);
/// Owns heap memory: dropped once, by whichever world holds it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Name(String);
/// Holds an entity id.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
struct Follows(Entity);
impl MapEntities for Follows {
    fn map_entities(&mut self, map: &EntityMap) {
        self.0 = map.map(self.0);
    }
}
/// Not registered: skipped.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Secret(u32);

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Leader(Option<Entity>);
impl MapEntities for Leader {
    fn map_entities(&mut self, map: &EntityMap) {
        self.0 = self.0.map(|e| map.map(e));
    }
}

fn registry() -> SaveRegistry {
    let mut registry = SaveRegistry::new();
    registry
        .component::<Pos>("pos")
        .component::<Vel>("vel")
        .component::<Health>("health")
        .component::<Stunned>("stunned")
        .component::<Player>("player")
        .component::<Aligned>("aligned")
        .component::<Name>("name")
        .component_with_entities::<Follows>("follows")
        .resource::<Rng>("rng")
        .resource_with_entities::<Leader>("leader");
    registry
}

fn new_world() -> World {
    let mut world = World::new();
    world.register_component::<Stunned>(StorageType::SparseSet).unwrap();
    world
}

fn id(index: u32, generation: u32) -> Entity {
    Entity::from_bits(u64::from(generation) << 32 | u64::from(index)).unwrap()
}

/// Every alive entity with its registered components, as text, by id.
fn dump(world: &World) -> BTreeMap<Entity, String> {
    let mut out = BTreeMap::new();
    for archetype in world.archetypes() {
        for row in world.archetype_entities(archetype.id()).iter() {
            let e = row.entity;
            let text = format!(
                "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                world.get::<Pos>(e),
                world.get::<Vel>(e),
                world.get::<Health>(e),
                world.get::<Stunned>(e),
                world.get::<Player>(e),
                world.get::<Aligned>(e),
                world.get::<Name>(e),
                world.get::<Follows>(e),
            );
            out.insert(e, text);
        }
    }
    out
}

/// The whole observable state: allocator, entities and components, resources.
fn snapshot(world: &World) -> (EntitiesState, BTreeMap<Entity, String>, String) {
    let resources = format!("{:?} {:?}", world.resource::<Rng>(), world.resource::<Leader>());
    (world.entities().state(), dump(world), resources)
}

/// A world with every storage kind, despawned slots, a retired slot and pending reservations.
fn sample() -> World {
    let mut world = new_world();
    let a = world.spawn((Pos(1.0, 2.0), Vel(0.5, -0.5), Health(10)));
    let b = world.spawn((Pos(3.0, 4.0), Name("bob".into()), Player));
    let c = world.spawn((Aligned(77), Stunned(3), Follows(a)));
    let d = world.spawn((Health(1), Secret(5)));
    world.spawn(());
    let gone: Vec<Entity> = (0..4).map(|i| world.spawn((Health(i),))).collect();
    for &e in &gone[1..] {
        world.despawn(e).unwrap();
    }
    world.despawn(gone[0]).unwrap();
    // Slot 40 retires: spawned at the last generation, then despawned.
    world.spawn_at(id(40, u32::MAX), (Health(0),));
    world.despawn(id(40, u32::MAX)).unwrap();
    world.insert(b, (Follows(c),)).unwrap();
    world.insert(d, (Stunned(1),)).unwrap();
    world.insert_resource(Rng(0x9E37_79B9_7F4A_7C15));
    world.insert_resource(Leader(Some(b)));
    world.insert_resource(7u8); // not registered: skipped
    let _ = world.reserve_entity();
    let _ = world.reserve_entity();
    world
}

fn to_json(world: &World, registry: &SaveRegistry) -> String {
    serde_json::to_string(&world.save(registry)).unwrap()
}

fn to_postcard(world: &World, registry: &SaveRegistry) -> Vec<u8> {
    postcard::to_allocvec(&world.save(registry)).unwrap()
}

fn load_json(
    world: &mut World,
    registry: &SaveRegistry,
    json: &str,
) -> Result<EntityMap, LoadError> {
    world.load(registry, &mut serde_json::Deserializer::from_str(json))
}

fn load_postcard(
    world: &mut World,
    registry: &SaveRegistry,
    bytes: &[u8],
) -> Result<EntityMap, LoadError> {
    world.load(registry, &mut postcard::Deserializer::from_bytes(bytes))
}

/// `original` with its unregistered data taken out: what a loaded world should equal.
fn without_skipped(mut world: World) -> World {
    let holders: Vec<Entity> =
        dump(&world).into_keys().filter(|&e| world.has::<Secret>(e)).collect();
    for e in holders {
        world.remove::<(Secret,)>(e).unwrap();
    }
    world.remove_resource::<u8>();
    world
}

#[test]
fn a_restore_round_trips_every_storage_kind_through_json_and_postcard() {
    let registry = registry();
    let original = sample();
    assert_eq!(original.save(&registry).skipped(), ["save::Secret", "u8"]);
    let json = to_json(&original, &registry);
    let bytes = to_postcard(&original, &registry);
    // `snapshot` leaves the unregistered `Secret` and `u8` out.
    let expected = snapshot(&original);
    for loaded in [
        {
            let mut w = new_world();
            load_json(&mut w, &registry, &json).unwrap();
            w
        },
        {
            let mut w = new_world();
            load_postcard(&mut w, &registry, &bytes).unwrap();
            w
        },
    ] {
        loaded.check_invariants();
        assert_eq!(snapshot(&loaded), expected);
        // A save of the loaded world loads to the same world again (archetypes may come in
        // another order, so the bytes may differ).
        let mut again = new_world();
        load_json(&mut again, &registry, &to_json(&loaded, &registry)).unwrap();
        assert_eq!(snapshot(&again), expected);
    }
}

#[test]
fn reserved_ids_flush_to_the_same_ids_and_later_spawns_match() {
    let registry = registry();
    let mut original = without_skipped(sample());
    let mut loaded = new_world();
    load_postcard(&mut loaded, &registry, &to_postcard(&original, &registry)).unwrap();
    original.flush();
    loaded.flush();
    assert_eq!(snapshot(&loaded), snapshot(&original));
    for i in 0..10 {
        assert_eq!(loaded.spawn((Health(i),)), original.spawn((Health(i),)));
    }
    loaded.check_invariants();
}

#[test]
fn drop_types_are_dropped_once_by_each_world() {
    let registry = registry();
    let mut original = new_world();
    let names: Vec<Entity> = (0..50).map(|i| original.spawn((Name(format!("n{i}")),))).collect();
    let mut loaded = new_world();
    load_json(&mut loaded, &registry, &to_json(&original, &registry)).unwrap();
    for (i, &e) in names.iter().enumerate().step_by(3) {
        loaded.despawn(e).unwrap();
        assert_eq!(original.get::<Name>(e), Some(&Name(format!("n{i}"))));
    }
    loaded.check_invariants();
    drop(original);
    drop(loaded);
}

// --- A simulation saved mid-run continues bit for bit --------------------------------------

/// One frame: moves, damages, despawns the dead, spawns from the rng; returns a checksum of
/// the world afterwards and the ids spawned.
fn frame(world: &mut World) -> (u64, Vec<Entity>) {
    let mut ids: Vec<Entity> = dump(world).into_keys().collect();
    ids.sort();
    let mut rng = *world.resource::<Rng>().unwrap();
    for &e in &ids {
        if let Some(&v) = world.get::<Vel>(e)
            && let Some(p) = world.get_mut::<Pos>(e)
        {
            p.0 += v.0;
            p.1 += v.1;
        }
        if rng.next().is_multiple_of(4)
            && let Some(h) = world.get_mut::<Health>(e)
        {
            h.0 = h.0.saturating_sub(1);
            if h.0 == 0 {
                world.despawn(e).unwrap();
            }
        }
    }
    let mut spawned = Vec::new();
    for _ in 0..rng.next() % 4 {
        let r = rng.next();
        let target = ids.get((r % 7) as usize).copied().unwrap_or(Entity::PLACEHOLDER);
        let e = world.spawn((
            Pos((r % 100) as f64, 0.25),
            Vel(0.5, (r % 3) as f64),
            Health((r % 5 + 1) as u32),
            Follows(target),
        ));
        if r.is_multiple_of(5) {
            world.insert(e, (Stunned(1),)).unwrap();
        }
        spawned.push(e);
    }
    if rng.next().is_multiple_of(3) {
        let _ = world.reserve_entity();
    }
    *world.resource_mut::<Rng>().unwrap() = rng;
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for (e, text) in dump(world) {
        for byte in e.to_bits().to_le_bytes().into_iter().chain(text.bytes()) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
        }
    }
    (hash, spawned)
}

#[test]
fn a_simulation_saved_and_restored_runs_on_bit_for_bit() {
    let registry = registry();
    for json in [false, true] {
        let mut world = new_world();
        world.insert_resource(Rng(0x2545_F491_4F6C_DD1D));
        for _ in 0..60 {
            frame(&mut world);
        }
        let mut loaded = new_world();
        match json {
            true => load_json(&mut loaded, &registry, &to_json(&world, &registry)),
            false => load_postcard(&mut loaded, &registry, &to_postcard(&world, &registry)),
        }
        .unwrap();
        loaded.check_invariants();
        for _ in 0..60 {
            assert_eq!(frame(&mut loaded), frame(&mut world));
        }
        loaded.check_invariants();
    }
}

#[test]
fn an_entity_is_index_and_generation() {
    let e = id(12, 3);
    assert_eq!(serde_json::to_string(&e).unwrap(), "[12,3]");
    assert_eq!(serde_json::from_str::<Entity>("[12,3]").unwrap(), e);
    assert_eq!(postcard::from_bytes::<Entity>(&postcard::to_allocvec(&e).unwrap()).unwrap(), e);
    let err = serde_json::from_str::<Entity>("[12,0]").unwrap_err();
    assert!(err.to_string().contains("generation"), "{err}");
}

// --- Loading into a world that has entities ------------------------------------------------

#[test]
fn a_remap_load_gives_new_ids_and_maps_the_ids_components_hold() {
    let registry = registry();
    let mut source = new_world();
    let a = source.spawn((Pos(1.0, 1.0),));
    let b = source.spawn((Follows(a), Stunned(2)));
    let dead = source.spawn(());
    source.despawn(dead).unwrap();
    source.insert(a, (Follows(dead),)).unwrap();
    source.insert_resource(Leader(Some(b)));
    let json = to_json(&source, &registry);

    let mut target = new_world();
    let mine = target.spawn((Pos(9.0, 9.0),));
    let map = load_json(&mut target, &registry, &json).unwrap();
    assert_eq!(map.len(), 2);
    let (a2, b2) = (map.get(a).unwrap(), map.get(b).unwrap());
    assert_eq!(target.len(), 3);
    assert!(a2 != mine && b2 != mine && a2 != b2);
    assert_eq!(target.get::<Follows>(b2), Some(&Follows(a2)));
    assert_eq!(target.get::<Stunned>(b2), Some(&Stunned(2)));
    // An id the save did not hold alive stays dead.
    assert_eq!(target.get::<Follows>(a2), Some(&Follows(Entity::PLACEHOLDER)));
    assert_eq!(target.resource::<Leader>(), Some(&Leader(Some(b2))));
    assert_eq!(target.get::<Pos>(mine), Some(&Pos(9.0, 9.0)));
    target.check_invariants();
}

#[test]
fn a_keep_ids_load_places_saved_ids_beside_the_targets_own() {
    let registry = registry();
    let mut source = new_world();
    for i in 0..5 {
        source.spawn((Health(i),));
    }
    source.despawn(id(0, 1)).unwrap();
    let saved =
        registry.read(&mut serde_json::Deserializer::from_str(&to_json(&source, &registry)));
    let saved = saved.unwrap();
    let mut target = new_world();
    target.spawn_at(id(20, 1), (Health(99),));
    target.load_saved(saved, LoadMode::KeepIds).unwrap();
    assert_eq!(target.len(), 5);
    assert_eq!(target.get::<Health>(id(3, 1)), Some(&Health(3)));
    target.check_invariants();
}

#[test]
fn a_saved_id_alive_in_the_target_is_a_typed_error_and_changes_nothing() {
    let registry = registry();
    let mut source = new_world();
    for i in 0..3 {
        source.spawn((Health(i),));
    }
    let json = to_json(&source, &registry);
    let mut target = new_world();
    target.spawn((Name("mine".into()),));
    let gone = target.spawn(());
    target.despawn(gone).unwrap();
    let before = snapshot(&target);
    let saved = registry.read(&mut serde_json::Deserializer::from_str(&json)).unwrap();
    let err = target.load_saved(saved, LoadMode::KeepIds).unwrap_err();
    assert!(matches!(err, LoadError::IdNotFree(_)), "{err}");
    assert!(err.to_string().contains("0v1"), "{err}");
    assert_eq!(snapshot(&target), before);
    let saved = registry.read(&mut serde_json::Deserializer::from_str(&json)).unwrap();
    let err = target.load_saved(saved, LoadMode::Restore).unwrap_err();
    assert!(matches!(err, LoadError::NotEmpty { entities: 1 }), "{err}");
    assert_eq!(snapshot(&target), before);
    target.check_invariants();
}

// --- Bad input -----------------------------------------------------------------------------

/// Loads `json` into a fresh world and into a busy one, expecting an error each time and
/// both worlds unchanged.
fn expect_error(json: &str) -> LoadError {
    let registry = registry();
    let mut errors = Vec::new();
    for mut world in [new_world(), without_skipped(sample())] {
        let before = snapshot(&world);
        errors.push(load_json(&mut world, &registry, json).unwrap_err());
        assert_eq!(snapshot(&world), before);
        world.check_invariants();
    }
    errors.remove(0)
}

fn sample_json() -> String {
    to_json(&without_skipped(sample()), &registry())
}

#[test]
fn an_unknown_component_or_resource_name_is_named() {
    let json = sample_json().replace("\"health\"", "\"hitpoints\"");
    let err = expect_error(&json);
    assert!(matches!(&err, LoadError::UnknownComponent { name } if name == "hitpoints"), "{err}");
    let json = sample_json().replace("\"rng\"", "\"dice\"");
    let err = expect_error(&json);
    assert!(matches!(&err, LoadError::UnknownResource { name } if name == "dice"), "{err}");
}

#[test]
fn a_save_nested_in_a_larger_value_reads_through_the_seed() {
    use serde::de::DeserializeSeed;

    let registry = registry();
    let original = sample();
    let json = to_json(&original, &registry);
    let saved = registry.seed().deserialize(&mut serde_json::Deserializer::from_str(&json));
    let mut loaded = new_world();
    loaded.load_saved(saved.unwrap(), LoadMode::Restore).unwrap();
    assert_eq!(snapshot(&loaded), snapshot(&original));
    // The seed's errors are the format's, with the typed error's message.
    let bad = json.replace("\"rng\"", "\"dice\"");
    let err = registry.seed().deserialize(&mut serde_json::Deserializer::from_str(&bad));
    assert!(err.unwrap_err().to_string().contains("resource \"dice\""));
}

#[test]
fn a_value_of_the_wrong_type_names_the_component_and_type() {
    let json = sample_json().replace("\"bob\"", "17");
    let err = expect_error(&json);
    assert!(matches!(&err, LoadError::Value { name: "name", .. }), "{err}");
    assert!(err.to_string().contains("save::Name"), "{err}");
}

#[test]
fn truncated_json_and_other_versions_are_refused() {
    let json = sample_json();
    for cut in [1, json.len() / 3, json.len() / 2, json.len() - 1] {
        expect_error(&json[..cut]);
    }
    let err = expect_error(&json.replacen("\"version\":2", "\"version\":1", 1));
    assert!(matches!(err, LoadError::Version { found: 1 }), "{err}");
}

#[test]
fn an_entity_the_saved_allocator_does_not_hold_alive_is_refused() {
    let registry = registry();
    let mut world = new_world();
    world.spawn((Health(1),));
    let json = to_json(&world, &registry);
    assert!(json.contains("{\"entities\":[[0,1]],\"columns\":[[\"health\",[1]]]}"), "{json}");
    // Past the saved indices, and at another generation than the saved allocator's.
    for entity in ["[5,1]", "[0,2]"] {
        let err = expect_error(
            &json.replace("\"entities\":[[0,1]]", &format!("\"entities\":[{entity}]")),
        );
        assert!(matches!(err, LoadError::Entity { twice: false, .. }), "{err}");
    }
    // Listed twice, in one archetype or in two.
    let err = expect_error(&json.replace(
        "{\"entities\":[[0,1]],\"columns\":[[\"health\",[1]]]}",
        "{\"entities\":[[0,1],[0,1]],\"columns\":[[\"health\",[1,1]]]}",
    ));
    assert!(matches!(err, LoadError::Entity { twice: true, .. }), "{err}");
    let group = "{\"entities\":[[0,1]],\"columns\":[[\"health\",[1]]]}";
    let err = expect_error(&json.replace(group, &format!("{group},{group}")));
    assert!(matches!(err, LoadError::Entity { twice: true, .. }), "{err}");
}

#[test]
fn a_column_of_another_length_than_its_archetype_is_refused() {
    let registry = registry();
    let mut world = new_world();
    world.spawn((Health(1),));
    let json = to_json(&world, &registry);
    for values in ["[]", "[1,2]"] {
        let err =
            expect_error(&json.replace("[\"health\",[1]]", &format!("[\"health\",{values}]")));
        assert!(matches!(err, LoadError::Value { name: "health", .. }), "{err}");
    }
    // A component listed twice in one archetype.
    let err = expect_error(&json.replace("[\"health\",[1]]", "[\"health\",[1]],[\"health\",[2]]"));
    assert!(matches!(&err, LoadError::DuplicateName { name } if name == "health"), "{err}");
    // The columns before the entities they belong to.
    let err = expect_error(&json.replace(
        "{\"entities\":[[0,1]],\"columns\":[[\"health\",[1]]]}",
        "{\"columns\":[[\"health\",[1]]],\"entities\":[[0,1]]}",
    ));
    assert!(matches!(err, LoadError::Format(_)), "{err}");
}

#[test]
fn an_inconsistent_allocator_state_is_refused() {
    let registry = registry();
    let mut world = new_world();
    world.spawn((Health(1),));
    let json = to_json(&world, &registry);
    assert!(json.contains("\"entities\":[[1],[],0,0]"), "{json}");
    // The alive index also free.
    let err =
        expect_error(&json.replace("\"entities\":[[1],[],0,0]", "\"entities\":[[1],[0],1,0]"));
    assert!(matches!(err, LoadError::Entities(_)), "{err}");
    // An index neither alive, free nor retired.
    let err =
        expect_error(&json.replace("\"entities\":[[1],[],0,0]", "\"entities\":[[1,1],[],0,0]"));
    assert!(matches!(err, LoadError::Entities(_)), "{err}");
    // More pending reservations than the allocator has ids: refused by a restore.
    let json = json.replace("[[1],[],0,0]", "[[1],[],0,99999999999]");
    let mut fresh = new_world();
    let before = snapshot(&fresh);
    let err = load_json(&mut fresh, &registry, &json).unwrap_err();
    assert!(matches!(err, LoadError::Entities(_)), "{err}");
    assert_eq!(snapshot(&fresh), before);
}

/// A postcard save of one archetype, written field by field as the format lays it out: the
/// allocator of `generations` (nothing free, nothing reserved), the archetype's `entities` and
/// one column per `(name, bytes)`. (In postcard a byte string and a `Vec<u8>` read alike.)
fn postcard_save(generations: &[u32], entities: &[Entity], columns: &[(&str, Vec<u8>)]) -> Vec<u8> {
    type Entities = (Vec<u32>, Vec<u32>, u64, u64);
    type Archetype = (Vec<Entity>, Vec<(String, Vec<u8>)>);
    let columns = columns.iter().map(|(name, bytes)| (name.to_string(), bytes.clone())).collect();
    let save: (u32, Entities, Vec<Archetype>, Vec<()>) = (
        folio_archetype::save::SAVE_VERSION,
        (generations.to_vec(), Vec::new(), 0, 0),
        vec![(entities.to_vec(), columns)],
        Vec::new(),
    );
    postcard::to_allocvec(&save).unwrap()
}

#[test]
fn a_binary_column_is_one_byte_string_read_to_its_exact_length() {
    let registry = registry();
    let mut world = new_world();
    let e = world.spawn((Health(7),));
    let health = |values: &[Health]| postcard::to_allocvec(values).unwrap();
    // The layout as documented: what a save writes.
    let valid = postcard_save(&[1], &[e], &[("health", health(&[Health(7)]))]);
    assert_eq!(to_postcard(&world, &registry), valid);

    let expect_postcard_error = |bytes: &[u8]| {
        let mut errors = Vec::new();
        for mut target in [new_world(), without_skipped(sample())] {
            let before = snapshot(&target);
            errors.push(load_postcard(&mut target, &registry, bytes).unwrap_err());
            assert_eq!(snapshot(&target), before);
            target.check_invariants();
        }
        errors.remove(0)
    };
    // More values than entities, fewer, and a byte past the last value.
    for bad in [health(&[Health(7), Health(8)]), health(&[]), {
        let mut bytes = health(&[Health(7)]);
        bytes.push(0);
        bytes
    }] {
        let err = expect_postcard_error(&postcard_save(&[1], &[e], &[("health", bad)]));
        assert!(matches!(err, LoadError::Value { name: "health", .. }), "{err}");
    }
    // A column of a zero-sized type that claims billions of values is refused before any is
    // read (it would otherwise take as long as it claims).
    let mut player = Vec::new();
    let huge: u64 = 1 << 40;
    player.extend(postcard::to_allocvec(&huge).unwrap());
    let bad = postcard_save(&[1], &[e], &[("health", health(&[Health(7)])), ("player", player)]);
    let err = expect_postcard_error(&bad);
    assert!(matches!(err, LoadError::Value { name: "player", .. }), "{err}");
    // The valid save still loads, into a world with entities too (new ids).
    let mut busy = without_skipped(sample());
    let map = load_postcard(&mut busy, &registry, &valid).unwrap();
    assert_eq!(busy.get::<Health>(map.get(e).unwrap()), Some(&Health(7)));
}

#[test]
fn an_entity_map_holds_saved_ids_by_index_and_strays_beside() {
    let mut map = EntityMap::new();
    assert!(map.is_empty());
    // Ids that map to themselves.
    for index in 0..4 {
        map.insert(id(index, 1), id(index, 1));
    }
    assert_eq!(map.get(id(2, 1)), Some(id(2, 1)));
    assert_eq!(map.get(id(2, 2)), None, "another generation of a held index");
    assert_eq!(map.get(id(9, 1)), None);
    // A remapped id, an index far past the others, a second generation of a held index.
    map.insert(id(4, 3), id(100, 1));
    map.insert(id(4_000_000, 1), id(101, 1));
    map.insert(id(2, 2), id(102, 1));
    assert_eq!(map.get(id(4, 3)), Some(id(100, 1)));
    assert_eq!(map.get(id(4_000_000, 1)), Some(id(101, 1)));
    assert_eq!(map.get(id(2, 2)), Some(id(102, 1)));
    assert_eq!(map.get(id(2, 1)), Some(id(2, 1)), "earlier ids still map to themselves");
    assert_eq!(map.map(id(5, 1)), Entity::PLACEHOLDER);
    // Inserting a held id again replaces its target.
    map.insert(id(0, 1), id(103, 1));
    assert_eq!(map.get(id(0, 1)), Some(id(103, 1)));
    assert_eq!(map.len(), 7);
    let mut pairs: Vec<_> = map.iter().collect();
    pairs.sort();
    let mut expected = vec![
        (id(0, 1), id(103, 1)),
        (id(1, 1), id(1, 1)),
        (id(2, 1), id(2, 1)),
        (id(3, 1), id(3, 1)),
        (id(4, 3), id(100, 1)),
        (id(4_000_000, 1), id(101, 1)),
        (id(2, 2), id(102, 1)),
    ];
    expected.sort();
    assert_eq!(pairs, expected);
    // Equal to a map built in another order, however it holds the pairs.
    let mut other = EntityMap::new();
    expected.iter().rev().for_each(|&(from, to)| other.insert(from, to));
    assert_eq!(map, other);
    other.insert(id(3, 1), id(104, 1));
    assert_ne!(map, other);
}

/// A small xorshift, so the fuzz loop is the same on every run.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn random_and_mutated_bytes_never_panic_and_leave_the_world_unchanged_on_error() {
    let registry = registry();
    let bytes = to_postcard(&without_skipped(sample()), &registry);
    let mut targets = [new_world(), without_skipped(sample())];
    let befores: Vec<_> = targets.iter().map(snapshot).collect();
    let mut seed = 0x1234_5678_9ABC_DEF1u64;
    let cases = if cfg!(miri) { 20 } else { 3000 };
    for case in 0..cases {
        let mut input = bytes.clone();
        match case % 4 {
            0 => input.truncate((xorshift(&mut seed) as usize) % bytes.len()),
            1 | 2 => {
                for _ in 0..1 + xorshift(&mut seed) % 4 {
                    let at = (xorshift(&mut seed) as usize) % input.len();
                    input[at] = xorshift(&mut seed) as u8;
                }
            }
            _ => {
                let len = (xorshift(&mut seed) % 64) as usize;
                input = (0..len).map(|_| xorshift(&mut seed) as u8).collect();
            }
        }
        for (i, (target, before)) in targets.iter_mut().zip(&befores).enumerate() {
            match load_postcard(target, &registry, &input) {
                Err(_) => assert_eq!(&snapshot(target), before, "case {case}"),
                Ok(_) => {
                    // A mutation that still reads: the world is consistent; start again.
                    target.check_invariants();
                    *target = if i == 0 { new_world() } else { without_skipped(sample()) };
                }
            }
        }
    }
}

/// A world on `source`, set up as `new_world`.
fn world_on(source: std::sync::Arc<folio_archetype::vm::FaultyPages>) -> World {
    let mut world = World::with_storage(folio_archetype::StorageConfig::new().with_source(source));
    world.register_component::<Stunned>(StorageType::SparseSet).unwrap();
    world
}

// Safe code over the same paths as the round trips; thousands of entities per step are too
// slow to interpret.
#[test]
#[cfg_attr(miri, ignore)]
fn memory_refused_part_way_undoes_the_load() {
    use folio_archetype::vm::{FaultyPages, default_source};
    use std::sync::Arc;

    let registry = registry();
    let mut source = new_world();
    for i in 0..3000u32 {
        let e = source.spawn((Pos(f64::from(i), 0.0), Name(format!("n{i}"))));
        if i % 3 == 0 {
            source.insert(e, (Stunned(1), Health(i))).unwrap();
        }
    }
    let bytes = to_postcard(&source, &registry);
    let (mut refused, mut loaded) = (0, 0);
    for k in 0..40 {
        // Restore into an empty world: on error the world is exactly as it was.
        let faulty = Arc::new(FaultyPages::new(default_source(), usize::MAX));
        let mut world = world_on(faulty.clone());
        let before = snapshot(&world);
        faulty.fail_commit_after(k);
        match load_postcard(&mut world, &registry, &bytes) {
            Ok(_) => loaded += 1,
            Err(err) => {
                assert!(matches!(err, LoadError::World(_)), "{err}");
                assert_eq!(snapshot(&world), before, "k = {k}");
                refused += 1;
            }
        }
        world.check_invariants();

        // Remap into a busy world: on error it is as it was, allocator included, and hands
        // out the ids it would have.
        let faulty = Arc::new(FaultyPages::new(default_source(), usize::MAX));
        let mut world = world_on(faulty.clone());
        for i in 0..10 {
            world.spawn((Health(i),));
        }
        world.despawn(id(4, 1)).unwrap();
        let before = snapshot(&world);
        faulty.fail_commit_after(k);
        if let Err(err) = load_postcard(&mut world, &registry, &bytes) {
            assert!(matches!(err, LoadError::World(_)), "{err}");
            assert_eq!(snapshot(&world), before, "k = {k}");
            faulty.fail_commit_after(0);
            assert_eq!(world.spawn(()), id(4, 2));
        }
        world.check_invariants();
    }
    assert!(refused > 0 && loaded > 0, "refused {refused}, loaded {loaded}");
}

#[test]
fn disabled_entities_stay_disabled_through_a_save_that_names_the_marker() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Hp(u32);
    let mut world = World::new();
    let on = world.spawn((Hp(1),));
    let off = world.spawn((Hp(2), folio_archetype::Disabled));
    let mut registry = SaveRegistry::new();
    registry.component::<Hp>("hp");

    // Not named: listed as skipped, and the load brings the entity back enabled.
    assert!(world.save(&registry).skipped().iter().any(|name| name.contains("Disabled")));
    let mut enabled = World::new();
    load_json(&mut enabled, &registry, &to_json(&world, &registry)).unwrap();
    assert!(!enabled.has::<folio_archetype::Disabled>(off));

    registry.component::<folio_archetype::Disabled>("disabled");
    let (mut from_json, mut from_postcard) = (World::new(), World::new());
    load_json(&mut from_json, &registry, &to_json(&world, &registry)).unwrap();
    load_postcard(&mut from_postcard, &registry, &to_postcard(&world, &registry)).unwrap();
    for loaded in [from_json, from_postcard] {
        loaded.check_invariants();
        assert!(loaded.has::<folio_archetype::Disabled>(off));
        assert!(!loaded.has::<folio_archetype::Disabled>(on));
        assert_eq!(loaded.get::<Hp>(off), Some(&Hp(2)));
    }
}

fn sorted(entities: &[Entity]) -> Vec<Entity> {
    let mut entities = entities.to_vec();
    entities.sort();
    entities
}

#[test]
fn a_hierarchy_survives_a_save_and_a_remapping_load() {
    use folio_archetype::{ChildOf, Children};
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Name(String);
    let mut world = World::new();
    let root = world.spawn((Name("root".into()),));
    let a = world.spawn((Name("a".into()), ChildOf(root)));
    let b = world.spawn((Name("b".into()), ChildOf(root)));
    let leaf = world.spawn((Name("leaf".into()), ChildOf(a)));
    let mut registry = SaveRegistry::new();
    registry.component::<Name>("name").component_with_entities::<ChildOf>("child_of");
    assert!(world.save(&registry).skipped().iter().any(|name| name.contains("Children")));

    // Into an empty world: the same ids, and `Children` rebuilt by the hooks.
    let mut restored = World::new();
    load_postcard(&mut restored, &registry, &to_postcard(&world, &registry)).unwrap();
    restored.check_invariants();
    assert_eq!(sorted(restored.children(root)), vec![a, b]);
    assert_eq!(restored.parent(leaf), Some(a));

    // Into a busy world: new ids, the parents mapped.
    let mut busy = World::new();
    let other = busy.spawn((Name("other".into()),));
    let map = load_json(&mut busy, &registry, &to_json(&world, &registry)).unwrap();
    busy.check_invariants();
    let (root2, a2, b2, leaf2) = (map.map(root), map.map(a), map.map(b), map.map(leaf));
    assert_ne!(root2, root);
    assert_eq!(busy.get::<Children>(root2).map(|c| c.len()), Some(2));
    assert_eq!(sorted(busy.children(root2)), sorted(&[a2, b2]));
    assert_eq!(busy.parent(leaf2), Some(a2));
    assert_eq!(busy.get::<Name>(leaf2), Some(&Name("leaf".into())));
    assert!(busy.children(other).is_empty());
}
