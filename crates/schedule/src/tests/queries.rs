//! Queries inside systems: pairs of a query's entities, the entities a list names, several
//! entities at once.

use super::*;

#[test]
fn a_system_walks_pairs_of_its_query() {
    fn attract(mut bodies: Query<(Entity, &mut A)>, mut pairs: ResMut<Vec<[Entity; 2]>>) {
        assert_eq!(bodies.iter_combinations::<2>().count(), 3);
        bodies.for_each_combination_mut::<2>(|[(a, mut x), (b, mut y)]| {
            pairs.push([a, b]);
            x.0 += 1;
            y.0 += 1;
        });
    }
    let mut world = World::new();
    world.insert_resource(Vec::<[Entity; 2]>::new());
    let es: Vec<Entity> = (0..3).map(|_| world.spawn((A(0),))).collect();
    let mut schedule = Schedule::new();
    schedule.add_systems(attract);
    schedule.run(&mut world).unwrap();
    let mut pairs = world.resource::<Vec<[Entity; 2]>>().unwrap().clone();
    for p in &mut pairs {
        p.sort();
    }
    pairs.sort();
    assert_eq!(pairs, [[es[0], es[1]], [es[0], es[2]], [es[1], es[2]]]);
    // Each body is in two of the three pairs.
    for e in es {
        assert_eq!(world.get::<A>(e), Some(&A(2)));
    }
}

#[test]
fn a_system_writes_the_entities_a_list_names() {
    /// The entities an explosion hit, in the order it hit them (one twice).
    struct Hits(Vec<Entity>);
    fn damage(mut bodies: Query<(Entity, &mut A), Without<B>>, hits: Res<Hits>) {
        let mut order = Vec::new();
        bodies.for_each_many_mut(hits.0.iter().copied(), |(e, mut a)| {
            order.push(e);
            a.0 += 10;
        });
        assert_eq!(order.len(), 3, "the entity with B is filtered out, the repeat is not");
    }
    let mut world = World::new();
    let es: Vec<Entity> = (0..3).map(|_| world.spawn((A(0),))).collect();
    let shielded = world.spawn((A(0), B(0)));
    world.insert_resource(Hits(vec![es[2], shielded, es[0], es[2]]));
    let mut schedule = Schedule::new();
    schedule.add_systems(damage);
    schedule.run(&mut world).unwrap();
    let a = |e| world.get::<A>(e).unwrap().0;
    assert_eq!([a(es[0]), a(es[1]), a(es[2]), a(shielded)], [10, 0, 20, 0]);
}

#[test]
fn a_system_reads_many_entities_at_once_through_its_query() {
    // A spring between two bodies: both read at once (read-only, so one may be named twice),
    // then written one at a time.
    struct Spring(Entity, Entity);
    fn pull(springs: Query<&Spring>, mut bodies: Query<&mut A>) {
        for spring in springs.iter() {
            let [a, b] = bodies.get_many([spring.0, spring.1]).unwrap().map(|a| a.0);
            let mid = (a + b) / 2;
            bodies.get_mut(spring.0).unwrap().0 = mid;
            bodies.get_mut(spring.1).unwrap().0 = mid;
        }
        let any = springs.iter().next().map(|s| s.0).unwrap();
        assert_eq!(bodies.get_many([any, any]).unwrap().map(|a| a.0), [6, 6]);
    }
    let mut world = World::new();
    let x = world.spawn((A(2),));
    let y = world.spawn((A(10),));
    world.spawn((Spring(x, y),));
    let mut schedule = Schedule::new();
    schedule.add_systems(pull);
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<A>(x), Some(&A(6)));
    assert_eq!(world.get::<A>(y), Some(&A(6)));
}

#[test]
fn systems_do_not_see_disabled_entities_until_they_are_enabled() {
    fn bump(mut all: Query<&mut A>) {
        for mut a in all.iter_mut() {
            a.0 += 1;
        }
    }
    fn the_one(one: Single<Entity, With<A>>, mut seen: ResMut<Vec<Entity>>) {
        seen.push(*one);
    }
    fn enable(mut commands: Commands, off: Query<Entity, With<Disabled>>) {
        for e in off.iter() {
            commands.entity(e).remove::<(Disabled,)>();
        }
    }
    let mut world = World::new();
    world.insert_resource(Vec::<Entity>::new());
    let on = world.spawn((A(0),));
    let off = world.spawn((A(0), Disabled));
    let mut schedule = Schedule::new();
    schedule.add_systems((bump, the_one));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<A>(on), Some(&A(1)));
    assert_eq!(world.get::<A>(off), Some(&A(0)));
    assert_eq!(world.resource::<Vec<Entity>>().unwrap(), &vec![on], "`Single` sees one");

    world.run_system_once(enable).unwrap();
    world.check_invariants();
    let mut bump_only = Schedule::new();
    bump_only.add_systems(bump);
    bump_only.run(&mut world).unwrap();
    assert_eq!(world.get::<A>(off), Some(&A(1)), "enabled: seen again");
}
