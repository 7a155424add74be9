//! change_detection: `Changed<T>`, `Added<T>`, `Ref<T>`, resources that know when they
//! changed, and why `Mut<T>` marks only real writes.
//!
//! A query over `&mut T` hands out `Mut<T>`: reading through it marks nothing, the first write
//! stamps the component's change tick. `Changed<T>` then keeps the entities whose `T` was
//! written (or added) since the system last ran, `Added<T>` those that gained `T`. Systems that
//! react to change — a UI refreshing health bars, a network layer sending deltas — look only
//! at what moved instead of every entity. `Ref<T>` keeps every entity and says per item
//! whether it changed; `Res<R>::is_changed()` and the `resource_changed::<R>` run condition do
//! the same for resources. `RemovedComponents<T>` tells which entities lost a `T` (despawned,
//! or the component removed), which change ticks cannot.
//!
//! Run it with `cargo run --example change_detection`.

use folio::prelude::*;

#[derive(Debug, PartialEq)]
struct Health(i32);
struct Name(&'static str);

/// What the reacting systems saw this frame.
#[derive(Default)]
struct Seen {
    changed: Vec<&'static str>,
    added: Vec<&'static str>,
    /// Every unit, with whether its health changed (through `Ref`).
    roster: Vec<(&'static str, bool)>,
    /// Frames on which the difficulty setting changed (`resource_changed` gate).
    difficulty_changes: u32,
}

/// A game setting the UI writes now and then.
struct Difficulty(u8);

/// Heals the wounded. Every unit's `Health` is read; only the wounded ones are written.
fn regenerate(mut units: Query<&mut Health>) {
    for mut health in units.iter_mut() {
        if health.0 < 100 {
            health.0 += 10;
        }
    }
}

/// Refreshes health bars: only for the units whose health changed since it last ran.
fn health_bars(changed: Query<&Name, Changed<Health>>, mut seen: ResMut<Seen>) {
    seen.changed = changed.iter().map(|n| n.0).collect();
}

/// Greets newcomers: the units that gained `Health` since it last ran.
fn greet(added: Query<&Name, Added<Health>>, mut seen: ResMut<Seen>) {
    seen.added = added.iter().map(|n| n.0).collect();
}

/// The roster screen lists every unit, marking those whose health changed.
fn roster(units: Query<(&Name, Ref<Health>)>, mut seen: ResMut<Seen>) {
    seen.roster = units.iter().map(|(n, h)| (n.0, h.is_changed())).collect();
}

/// Rebalances the spawn tables: only on frames after `Difficulty` changed.
fn rebalance(difficulty: Res<Difficulty>, mut seen: ResMut<Seen>) {
    assert!(difficulty.is_changed() && difficulty.0 > 0);
    seen.difficulty_changes += 1;
}

fn main() {
    let mut world = World::new();
    world.insert_resource(Seen::default());
    world.insert_resource(Difficulty(1));
    world.spawn((Name("knight"), Health(100)));
    world.spawn((Name("archer"), Health(70)));
    let mut schedule = Schedule::new();
    schedule.add_systems((regenerate, health_bars, greet, roster).chain());
    schedule.add_systems(rebalance.run_if(resource_changed::<Difficulty>));

    let mut frame = |world: &mut World, label: &str| {
        schedule.run(world).expect("no system panics");
        let seen = world.resource::<Seen>().expect("inserted");
        println!("{label:<44} changed: {:?}, added: {:?}", seen.changed, seen.added);
        (seen.changed.clone(), seen.added.clone())
    };

    // First run: everything is new.
    let (changed, added) = frame(&mut world, "frame 1 (knight and archer spawned)");
    assert_eq!((changed, added), (vec!["knight", "archer"], vec!["knight", "archer"]));
    // The archer is healed (70 -> 80 -> 90); the knight is only read.
    let (changed, added) = frame(&mut world, "frame 2 (the archer heals)");
    assert_eq!((changed, added), (vec!["archer"], vec![]));
    let roster = &world.resource::<Seen>().expect("inserted").roster;
    assert_eq!(roster, &[("knight", false), ("archer", true)]);
    let (changed, _) = frame(&mut world, "frame 3 (the archer reaches 100)");
    assert_eq!(changed, vec!["archer"]);
    let (changed, _) = frame(&mut world, "frame 4 (nobody is written)");
    assert!(changed.is_empty());
    // A newcomer.
    world.spawn((Name("mage"), Health(100)));
    let (changed, added) = frame(&mut world, "frame 5 (a mage joins)");
    assert_eq!((changed, added), (vec!["mage"], vec!["mage"]));

    // Resources: `rebalance` ran on the first frame (a new resource counts as changed), and
    // runs again only after the setting is written.
    assert_eq!(world.resource::<Seen>().expect("inserted").difficulty_changes, 1);
    world.resource_mut::<Difficulty>().expect("inserted").0 = 2;
    frame(&mut world, "frame 6 (difficulty raised)");
    frame(&mut world, "frame 7 (nothing new)");
    assert_eq!(world.resource::<Seen>().expect("inserted").difficulty_changes, 2);
    println!("ok: rebalance ran on the frames after Difficulty changed, and only then");

    // `Mut` by hand: deref without writing marks nothing; `bypass_change_detection` writes
    // without marking; `set_changed` marks without writing.
    let mut health = world.query::<&mut Health>();
    let mut watch = world.query_filtered::<&Name, Changed<Health>>();
    watch.iter(&world).count(); // catch up
    for mut h in health.iter_mut(&mut world) {
        let _ = h.0; // a read
        h.bypass_change_detection().0 += 0;
    }
    assert_eq!(watch.iter(&world).count(), 0, "reads and bypassed writes are not changes");
    health.iter_mut(&mut world).for_each(|mut h| h.set_changed());
    assert_eq!(watch.iter(&world).count(), 3);
    // `set_if_neq` writes only a value that differs, so setting a value every frame marks a
    // change only when it really changes.
    for mut h in health.iter_mut(&mut world) {
        h.set_if_neq(Health(100));
    }
    assert_eq!(watch.iter(&world).count(), 0, "every unit was already at 100");
    println!("ok: only real writes (and set_changed) count as changes");

    // Removals: a unit that falls takes its health bar with it. Change ticks cannot say that
    // a component is gone; `RemovedComponents<Health>` lists who lost it since it last read.
    fn fall(mut commands: Commands, units: Query<(Entity, &Name, &Health)>) {
        for (e, name, health) in units.iter() {
            if health.0 <= 0 {
                println!("{} falls", name.0);
                commands.despawn(e);
            }
        }
    }
    fn drop_health_bars(mut removed: RemovedComponents<Health>, mut bars: ResMut<Vec<Entity>>) {
        bars.extend(removed.read());
    }
    world.insert_resource(Vec::<Entity>::new());
    let mut battle = Schedule::new();
    battle.add_systems((fall, drop_health_bars));
    battle.run(&mut world).expect("no system panics"); // nobody falls
    let mage = world.query::<(Entity, &Name)>().iter(&world).find(|(_, n)| n.0 == "mage");
    let mage = mage.expect("spawned").0;
    world.get_mut::<Health>(mage).expect("alive").0 = 0;
    battle.run(&mut world).expect("no system panics"); // the mage falls (its commands apply last)
    battle.run(&mut world).expect("no system panics"); // and its bar goes
    assert_eq!(world.resource::<Vec<Entity>>().expect("inserted"), &[mage]);
    println!("ok: the fallen mage's health bar was dropped");
}
