//! Change ticks: `Changed` in systems means since that system last ran, also across exclusive
//! systems that take ticks, a system's own writes, `&World` systems, and 2^32 ticks.

use super::*;

#[test]
fn changed_in_systems_means_since_that_system_last_ran() {
    fn bump_even(mut q: Query<(&mut A, &B)>) {
        for (mut a, b) in q.iter_mut() {
            if b.0 % 2 == 0 {
                a.0 += 1;
            }
        }
    }
    fn watch(q: Query<&B, Changed<A>>, mut seen: ResMut<Vec<u64>>) {
        let mut changed: Vec<u64> = q.iter().map(|b| b.0).collect();
        changed.sort();
        seen.extend(changed);
    }
    let mut world = World::new();
    world.insert_resource(Vec::<u64>::new());
    for i in 0..4 {
        world.spawn((A(0), B(i)));
    }
    let mut schedule = Schedule::new();
    schedule.add_systems((watch, bump_even));
    schedule.run(&mut world).unwrap(); // watch: all four are new
    schedule.run(&mut world).unwrap(); // watch: the two bumped last run
    assert_eq!(world.resource::<Vec<u64>>().unwrap(), &[0, 1, 2, 3, 0, 2]);
}

#[test]
fn an_exclusive_system_that_takes_ticks_itself_stays_visible() {
    fn excl(world: &mut World) {
        let mut q = world.query::<&mut A>();
        for _ in 0..3 {
            for mut a in q.iter_mut(world) {
                a.0 += 1;
            }
        }
    }
    fn watch(q: Query<&A, Changed<A>>, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
    }
    let mut world = World::new();
    world.insert_resource(Vec::<usize>::new());
    world.spawn((A(0),));
    let mut schedule = Schedule::new();
    schedule.add_systems((excl, watch.after(excl)));
    for _ in 0..4 {
        schedule.run(&mut world).unwrap();
    }
    assert_eq!(world.resource::<Vec<usize>>().unwrap(), &[1, 1, 1, 1]);
}

#[test]
fn a_writer_may_filter_on_its_own_changes() {
    fn halve_changed(mut q: Query<&mut A, Changed<A>>, mut count: ResMut<usize>) {
        for mut a in q.iter_mut() {
            a.0 /= 2;
            *count += 1;
        }
    }
    let mut world = World::new();
    world.insert_resource(0usize);
    let e = world.spawn((A(64),));
    world.spawn((A(8),));
    let mut schedule = Schedule::new();
    schedule.add_systems(halve_changed);
    schedule.run(&mut world).unwrap();
    schedule.run(&mut world).unwrap(); // its own writes are not news to it
    assert_eq!(world.resource::<usize>(), Some(&2));
    world.get_mut::<A>(e).unwrap().0 = 100;
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<usize>(), Some(&3));
    assert_eq!(world.get::<A>(e), Some(&A(50)));
}

#[test]
fn a_world_system_s_own_query_sees_the_writes_ordered_after_it() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut state: Option<QueryState<Entity, Changed<A>>> = None;
    // Ordered before the writer (a `&World` reader conflicts with every writer), in the same
    // segment: each run sees the write of the run before.
    let watcher = move |world: &World| {
        let state = state.get_or_insert_with(|| world.query_filtered());
        log.lock().unwrap().push(state.iter(world).count());
    };
    let writer = |mut q: Query<&mut A>| q.iter_mut().for_each(|mut a| a.0 += 1);
    let mut world = World::new();
    world.spawn((A(0),));
    let mut schedule = Schedule::new();
    schedule.add_systems((watcher, writer));
    for _ in 0..4 {
        schedule.run(&mut world).unwrap();
    }
    assert_eq!(*seen.lock().unwrap(), [1, 1, 1, 1]);
}

#[test]
fn a_schedule_clamps_stored_ticks_at_its_first_run_and_every_so_many_ticks() {
    use crate::schedule::tick_check_due;
    let (a, b) = (World::new(), World::new());
    assert!(tick_check_due(None, a.id(), 5), "the first run on a world checks");
    let checked = Some((a.id(), 5));
    assert!(!tick_check_due(checked, a.id(), 5 + crate::CHECK_TICKS_EVERY - 1));
    assert!(tick_check_due(checked, a.id(), 5 + crate::CHECK_TICKS_EVERY));
    assert!(tick_check_due(checked, b.id(), 6), "another world is checked at once");
    // Across the wrap of the counter.
    let late = Some((a.id(), u32::MAX - 10));
    assert!(!tick_check_due(late, a.id(), 100));
    assert!(tick_check_due(late, a.id(), crate::CHECK_TICKS_EVERY));
}

/// How many ticks `burn` takes in the next run.
struct Burn(u32);
/// Whether `watch_changed` may run.
struct On(bool);

#[test]
#[cfg_attr(debug_assertions, ignore = "takes 2^32 ticks: about 30 s in a debug build")]
fn a_system_kept_off_for_more_than_2_pow_32_ticks_still_sees_what_changed() {
    fn burn(world: &mut World) {
        for _ in 0..world.resource::<Burn>().unwrap().0 {
            world.increment_change_tick_mut();
        }
    }
    fn watch_changed(q: Query<&A, Changed<A>>, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
    }
    let mut world = World::new();
    world.insert_resource(Burn(0));
    world.insert_resource(On(true));
    world.insert_resource(Vec::<usize>::new());
    let e = world.spawn((A(0),));
    let mut schedule = Schedule::new();
    schedule.add_systems((burn, watch_changed.run_if(|on: Res<On>| on.0)).chain());
    schedule.run(&mut world).unwrap();
    // Kept off while the ticks go round once, less a margin (the schedule clamping the stored
    // ticks every `CHECK_TICKS_EVERY` as it goes); then `A` changes and a little more passes.
    world.resource_mut::<On>().unwrap().0 = false;
    world.resource_mut::<Burn>().unwrap().0 = 1 << 28;
    for _ in 0..15 {
        schedule.run(&mut world).unwrap();
    }
    world.resource_mut::<Burn>().unwrap().0 = (1 << 28) - 10_000;
    schedule.run(&mut world).unwrap();
    world.get_mut::<A>(e).unwrap().0 = 1;
    world.resource_mut::<Burn>().unwrap().0 = 20_000;
    schedule.run(&mut world).unwrap();
    // `A` changed after the system last ran, however long ago that was.
    world.resource_mut::<Burn>().unwrap().0 = 0;
    world.resource_mut::<On>().unwrap().0 = true;
    schedule.run(&mut world).unwrap();
    assert_eq!(*world.resource::<Vec<usize>>().unwrap(), [1, 1]);
}
