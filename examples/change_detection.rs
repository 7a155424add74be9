//! change_detection: `Changed<T>`, `Added<T>`, and why `Mut<T>` marks only real writes.
//!
//! A query over `&mut T` hands out `Mut<T>`: reading through it marks nothing, the first write
//! stamps the component's change tick. `Changed<T>` then keeps the entities whose `T` was
//! written (or added) since the system last ran, `Added<T>` those that gained `T`. Systems that
//! react to change — a UI refreshing health bars, a network layer sending deltas — look only
//! at what moved instead of every entity.
//!
//! Run it with `cargo run --example change_detection`.

use folio::prelude::*;

#[derive(Debug)]
struct Health(i32);
struct Name(&'static str);

/// What the reacting systems saw this frame.
#[derive(Default)]
struct Seen {
    changed: Vec<&'static str>,
    added: Vec<&'static str>,
}

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

fn main() {
    let mut world = World::new();
    world.insert_resource(Seen::default());
    world.spawn((Name("knight"), Health(100)));
    world.spawn((Name("archer"), Health(70)));
    let mut schedule = Schedule::new();
    schedule.add_systems((regenerate, health_bars, greet).chain());

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
    let (changed, _) = frame(&mut world, "frame 3 (the archer reaches 100)");
    assert_eq!(changed, vec!["archer"]);
    let (changed, _) = frame(&mut world, "frame 4 (nobody is written)");
    assert!(changed.is_empty());
    // A newcomer.
    world.spawn((Name("mage"), Health(100)));
    let (changed, added) = frame(&mut world, "frame 5 (a mage joins)");
    assert_eq!((changed, added), (vec!["mage"], vec!["mage"]));

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
    println!("ok: only real writes (and set_changed) count as changes");
}
