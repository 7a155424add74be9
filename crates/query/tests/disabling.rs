//! Entity disabling: queries skip the entities that hold a disabling marker ([`Disabled`] or
//! one the world registered) in every iteration mode, in lookups and counts, unless a term
//! names the marker; disabling and enabling again keeps ids and values.

use folio_query::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Health(u32);
/// Sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Burning(u32);
/// A game's own disabling marker.
#[derive(Debug, Clone, Copy)]
struct Asleep;

fn world() -> World {
    let mut world = World::new();
    world.register_component::<Burning>(StorageType::SparseSet).unwrap();
    world
}

fn sorted<T: Ord>(mut items: Vec<T>) -> Vec<T> {
    items.sort();
    items
}

#[test]
fn default_queries_skip_disabled_entities_in_every_iteration_mode() {
    let mut world = world();
    let on = world.spawn((Health(1), Burning(1)));
    let off = world.spawn((Health(2), Burning(2), Disabled));
    let plain = world.spawn((Health(3),));
    world.check_invariants();

    // Tables mode.
    let mut health = world.query::<&Health>();
    assert_eq!(health.matches().mode(), IterMode::Tables);
    assert_eq!(sorted(health.iter(&world).copied().collect()), vec![Health(1), Health(3)]);
    assert_eq!(health.count(&world), 2);
    let mut seen = Vec::new();
    health.for_each(&world, |h| seen.push(*h));
    assert_eq!(sorted(seen), vec![Health(1), Health(3)]);
    let mut par = world.query::<&mut Health>();
    par.par_iter_mut(&mut world).for_each(|mut h| h.0 += 100);
    assert_eq!(world.get::<Health>(off), Some(&Health(2)), "a parallel pass skips it too");
    assert_eq!(world.get::<Health>(on), Some(&Health(101)));

    // Archetypes mode (a table and a sparse-set term).
    let mut both = world.query::<(&Health, &Burning)>();
    assert_eq!(both.matches().mode(), IterMode::Archetypes);
    assert_eq!(both.iter(&world).map(|(h, _)| *h).collect::<Vec<_>>(), vec![Health(101)]);

    // Sparse mode, walking the set densely when nothing else is named.
    let mut burning = world.query::<&Burning>();
    assert_eq!(burning.matches().mode(), IterMode::Sparse);
    assert_eq!(burning.iter(&world).copied().collect::<Vec<_>>(), vec![Burning(1)]);
    let mut burning_ids = world.query::<(Entity, &Burning)>();
    assert_eq!(burning_ids.iter(&world).map(|(e, _)| e).collect::<Vec<_>>(), vec![on]);

    // Lookups and `single`.
    assert_eq!(health.get(&world, off), Err(QueryError::DoesNotMatch(off)));
    assert_eq!(health.get(&world, plain), Ok(&Health(103)));
    assert!(burning.single(&world).is_ok(), "one burning entity is visible");

    // Per-entity access is not a query: it sees every entity.
    assert_eq!(world.get::<Burning>(off), Some(&Burning(2)));
}

#[test]
fn a_query_that_names_the_marker_sees_disabled_entities() {
    let mut world = world();
    let on = world.spawn((Health(1),));
    let off = world.spawn((Health(2), Disabled));

    let mut only_off = world.query_filtered::<Entity, With<Disabled>>();
    assert_eq!(only_off.iter(&world).collect::<Vec<_>>(), vec![off]);
    let mut all = world.query_filtered::<Entity, Allow<Disabled>>();
    assert_eq!(sorted(all.iter(&world).collect()), sorted(vec![on, off]));
    let mut flagged = world.query::<(Entity, Has<Disabled>)>();
    assert_eq!(sorted(flagged.iter(&world).collect()), sorted(vec![(on, false), (off, true)]));
    let mut optional = world.query::<(&Health, Option<&Disabled>)>();
    assert_eq!(optional.iter(&world).count(), 2);
    let mut without = world.query_filtered::<Entity, Without<Disabled>>();
    assert_eq!(without.iter(&world).collect::<Vec<_>>(), vec![on]);
    assert_eq!(all.get(&world, off), Ok(off));
    // `Allow` reads nothing: it conflicts with no write.
    assert!(world.try_query::<(&mut Health, Entity), Allow<Disabled>>().is_ok());
}

#[test]
fn disabling_and_enabling_keeps_ids_and_values_and_kept_states_follow() {
    let mut world = world();
    let entities: Vec<Entity> = (0..10).map(|i| world.spawn((Health(i), Burning(i)))).collect();
    let mut health = world.query::<(Entity, &Health)>();
    let mut burning = world.query::<&Burning>();
    assert_eq!(health.iter(&world).count(), 10);

    for &e in entities.iter().step_by(2) {
        world.insert(e, (Disabled,)).unwrap();
    }
    world.check_invariants();
    let visible: Vec<Entity> = sorted(health.iter(&world).map(|(e, _)| e).collect());
    assert_eq!(visible, entities.iter().copied().skip(1).step_by(2).collect::<Vec<_>>());
    assert_eq!(burning.iter(&world).count(), 5);

    for &e in entities.iter().step_by(2) {
        world.remove::<(Disabled,)>(e).unwrap();
    }
    world.check_invariants();
    let all: Vec<(Entity, Health)> = sorted(health.iter(&world).map(|(e, h)| (e, *h)).collect());
    let expected: Vec<(Entity, Health)> =
        entities.iter().enumerate().map(|(i, &e)| (e, Health(i as u32))).collect();
    assert_eq!(all, expected);
    assert_eq!(burning.iter(&world).count(), 10);
}

#[test]
fn a_world_registers_its_own_disabling_markers_before_their_first_use() {
    let mut world = world();
    let id = world.register_disabling_component::<Asleep>().unwrap();
    assert!(world.is_disabling(id));
    assert_eq!(world.register_disabling_component::<Asleep>().unwrap(), id, "idempotent");
    let awake = world.spawn((Health(1),));
    let asleep = world.spawn((Health(2), Asleep));
    let both = world.spawn((Health(3), Asleep, Disabled));
    let mut health = world.query::<Entity>();
    assert_eq!(health.iter(&world).collect::<Vec<_>>(), vec![awake]);
    // A query sees an archetype only when it names every marker there.
    let mut allow_asleep = world.query_filtered::<Entity, Allow<Asleep>>();
    assert_eq!(sorted(allow_asleep.iter(&world).collect()), sorted(vec![awake, asleep]));
    let mut allow_both = world.query_filtered::<Entity, (Allow<Asleep>, Allow<Disabled>)>();
    assert_eq!(sorted(allow_both.iter(&world).collect()), sorted(vec![awake, asleep, both]));

    // Too late: entities have it already.
    #[derive(Debug)]
    struct Frozen;
    world.spawn((Frozen,));
    assert!(matches!(
        world.register_disabling_component::<Frozen>(),
        Err(ComponentError::DisablingInUse { .. })
    ));
    // A disabling marker decides the table: never a sparse-set component.
    struct Hidden;
    world.register_component::<Hidden>(StorageType::SparseSet).unwrap();
    assert!(matches!(
        world.register_disabling_component::<Hidden>(),
        Err(ComponentError::StorageConflict { .. })
    ));
    assert!(matches!(
        world.register_component::<Disabled>(StorageType::SparseSet),
        Err(ComponentError::StorageConflict { .. })
    ));
    world.check_invariants();
}

#[test]
fn a_state_built_before_the_marker_was_ever_used_resolves_it_later() {
    let mut world = world();
    let mut all = world.query_filtered::<Entity, Allow<Disabled>>();
    let mut default = world.query::<Entity>();
    assert_eq!(all.iter(&world).count(), 0);
    let off = world.spawn((Health(1), Disabled));
    let on = world.spawn((Health(2),));
    assert_eq!(sorted(all.iter(&world).collect()), sorted(vec![off, on]));
    assert_eq!(default.iter(&world).collect::<Vec<_>>(), vec![on]);
}
