//! Automatic sync points: an explicit ordering after a system with `Commands` applies its
//! commands in between, as few points as the order allows, none where an `ApplyDeferred`
//! already lies between, none with the switch off or a constraint that ignores deferred work;
//! and the plan stays the same on any number of threads.

use super::*;
use crate::AUTO_SYNC_NAME;

fn spawn_flag(mut commands: Commands) {
    commands.spawn((Flag,));
}

fn spawn_other(mut commands: Commands) {
    commands.spawn((Flag,));
}

fn count(q: Query<&Flag>, mut seen: ResMut<Vec<usize>>) {
    seen.push(q.iter().count());
}

/// Runs `schedule` once on a fresh world; what `count` saw, and the schedule's order.
fn run_once(schedule: &mut Schedule) -> (Vec<usize>, Vec<String>) {
    let mut world = World::new();
    world.insert_resource(Vec::<usize>::new());
    schedule.run(&mut world).unwrap();
    let order = schedule.order(&mut world).unwrap();
    (world.resource::<Vec<usize>>().unwrap().clone(), order)
}

fn auto_points(order: &[String]) -> usize {
    order.iter().filter(|name| *name == AUTO_SYNC_NAME).count()
}

#[test]
fn a_system_ordered_after_a_spawner_sees_its_entities() {
    let mut schedule = Schedule::new();
    schedule.add_systems((spawn_flag, count.after(spawn_flag)));
    let (seen, order) = run_once(&mut schedule);
    assert_eq!(seen, [1]);
    assert_eq!(order.len(), 3, "{order:?}");
    assert_eq!(order[1], AUTO_SYNC_NAME, "{order:?}");

    // `before` on the spawner's side makes the same edge.
    let mut before = Schedule::new();
    before.add_systems((count, spawn_flag.before(count)));
    assert_eq!(run_once(&mut before).0, [1]);
}

#[test]
fn the_switch_and_ignore_deferred_leave_the_commands_to_the_end() {
    let mut off = Schedule::new();
    off.set_auto_sync(false).add_systems((spawn_flag, count.after(spawn_flag)));
    assert!(!off.auto_sync());
    let (seen, order) = run_once(&mut off);
    assert_eq!((seen, auto_points(&order)), (vec![0], 0));
    // Back on: the plan is built again.
    off.set_auto_sync(true);
    assert_eq!(run_once(&mut off).0, [1]);

    let mut after = Schedule::new();
    after.add_systems((spawn_flag, count.after_ignore_deferred(spawn_flag)));
    let (seen, order) = run_once(&mut after);
    assert_eq!((seen, auto_points(&order)), (vec![0], 0));
    let mut before = Schedule::new();
    before.add_systems((count, spawn_flag.before_ignore_deferred(count)));
    assert_eq!(run_once(&mut before).0, [0]);
    let mut chained = Schedule::new();
    chained.add_systems((spawn_flag, count).chain_ignore_deferred());
    assert_eq!(run_once(&mut chained).0, [0]);
    // An outer chain keeps the inner chain's link without a point, and adds its own: the
    // first `count` does not see the spawn, `spawn_other` and the second `count` do.
    let mut nested = Schedule::new();
    nested.add_systems(((spawn_flag, count).chain_ignore_deferred(), spawn_other, count).chain());
    let (seen, order) = run_once(&mut nested);
    assert_eq!(
        order,
        ["spawn_flag", "count", AUTO_SYNC_NAME, "spawn_other", AUTO_SYNC_NAME, "count"]
    );
    assert_eq!(seen, [0, 2]);
    // Another constraint on the same pair still asks for the point.
    let mut both = Schedule::new();
    both.add_systems((spawn_flag, count.after_ignore_deferred(spawn_flag).after(spawn_flag)));
    assert_eq!(run_once(&mut both).0, [1]);
}

#[test]
fn commands_an_ordering_ignores_are_applied_for_the_systems_after_it() {
    fn log(mut seen: ResMut<Vec<usize>>) {
        seen.push(usize::MAX);
    }
    // `log` does not need the spawn; `count`, ordered after `log` by a plain `after`, does.
    let mut schedule = Schedule::new();
    schedule.add_systems((spawn_flag, log.after_ignore_deferred(spawn_flag), count.after(log)));
    let (seen, order) = run_once(&mut schedule);
    assert_eq!(seen, [usize::MAX, 1]);
    assert_eq!(order, ["spawn_flag", "log", AUTO_SYNC_NAME, "count"]);

    // Every ordering on the path ignores it: no point.
    let mut ignored = Schedule::new();
    ignored.add_systems((spawn_flag, log, count).chain_ignore_deferred());
    let (seen, order) = run_once(&mut ignored);
    assert_eq!((seen, auto_points(&order)), (vec![usize::MAX, 0], 0));

    // A sync point on the way applies it: no second one.
    let mut synced = Schedule::new();
    synced.add_systems((
        (spawn_flag, ApplyDeferred).chain(),
        log.after_ignore_deferred(spawn_flag).after(ApplyDeferred),
        count.after(log),
    ));
    let (seen, order) = run_once(&mut synced);
    assert_eq!(seen, [usize::MAX, 1]);
    assert_eq!(auto_points(&order), 0, "{order:?}");
}

#[test]
fn a_chain_of_spawners_gets_a_point_between_each_pair() {
    fn spawn_and_count(q: Query<&Flag>, mut commands: Commands, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
        commands.spawn((Flag,));
    }
    let mut schedule = Schedule::new();
    schedule.add_systems((spawn_and_count, spawn_and_count, spawn_and_count).chain());
    let (seen, order) = run_once(&mut schedule);
    assert_eq!(seen, [0, 1, 2]);
    assert_eq!(auto_points(&order), 2, "{order:?}");
    assert_eq!(order[1], AUTO_SYNC_NAME, "{order:?}");
    assert_eq!(order[3], AUTO_SYNC_NAME, "{order:?}");
}

#[test]
fn spawners_before_one_reader_share_one_point() {
    let mut schedule = Schedule::new();
    schedule.add_systems((spawn_flag, spawn_other, count.after(spawn_flag).after(spawn_other)));
    let (seen, order) = run_once(&mut schedule);
    assert_eq!(seen, [2]);
    assert_eq!(auto_points(&order), 1, "{order:?}");

    // Two readers of two spawners at the same depth share one point too.
    fn count_again(q: Query<&Flag>, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
    }
    let mut pairs = Schedule::new();
    pairs.add_systems((
        spawn_flag,
        spawn_other,
        count.after(spawn_flag),
        count_again.after(spawn_other),
    ));
    let (seen, order) = run_once(&mut pairs);
    assert_eq!(seen, [2, 2]);
    assert_eq!(auto_points(&order), 1, "{order:?}");
}

#[test]
fn a_system_without_commands_gets_no_point() {
    fn write_a(mut q: Query<&mut A>) {
        q.iter_mut().for_each(|mut a| a.0 += 1);
    }
    fn read_a(q: Query<&A>, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
    }
    let mut schedule = Schedule::new();
    schedule.add_systems((write_a, read_a.after(write_a), spawn_flag.after(read_a)));
    let (seen, order) = run_once(&mut schedule);
    assert_eq!((seen, auto_points(&order)), (vec![0], 0), "{order:?}");
}

#[test]
fn an_explicit_sync_point_between_is_not_doubled() {
    // Chained through it.
    let mut chained = Schedule::new();
    chained.add_systems((spawn_flag, ApplyDeferred, count).chain());
    let (seen, order) = run_once(&mut chained);
    assert_eq!(seen, [1]);
    assert_eq!(order, ["spawn_flag", "apply_deferred", "count"]);

    // Between them only by the order it was added in (a sync point conflicts with every
    // system), with a direct edge from the spawner to the reader.
    let mut added = Schedule::new();
    added.add_systems((spawn_flag, ApplyDeferred, count.after(spawn_flag)));
    let (seen, order) = run_once(&mut added);
    assert_eq!(seen, [1]);
    assert_eq!(order, ["spawn_flag", "apply_deferred", "count"]);

    // Ordered between them by constraints of its own.
    let mut ordered = Schedule::new();
    ordered.add_systems((
        count.after(spawn_flag),
        spawn_flag,
        ApplyDeferred.after(spawn_flag).before(count),
    ));
    let (seen, order) = run_once(&mut ordered);
    assert_eq!(seen, [1]);
    assert_eq!(auto_points(&order), 0, "{order:?}");

    // An explicit sync point elsewhere does not count: the one it leaves out gets a point.
    let mut elsewhere = Schedule::new();
    elsewhere.add_systems((spawn_flag, count.after(spawn_flag), ApplyDeferred));
    let (seen, order) = run_once(&mut elsewhere);
    assert_eq!(seen, [1]);
    assert_eq!(order, ["spawn_flag", AUTO_SYNC_NAME, "count", "apply_deferred"]);
}

#[test]
fn an_ordering_through_sets_gets_a_point() {
    #[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
    enum Step {
        Spawn,
        Read,
    }
    impl SystemSet for Step {}
    let mut schedule = Schedule::new();
    schedule
        .add_systems((count.in_set(Step::Read), spawn_flag.in_set(Step::Spawn)))
        .configure_set(Step::Read, SetConfig::new().after(Step::Spawn));
    let (seen, order) = run_once(&mut schedule);
    assert_eq!((seen, auto_points(&order)), (vec![1], 1), "{order:?}");

    let mut ignoring = Schedule::new();
    ignoring
        .add_systems((count.in_set(Step::Read), spawn_flag.in_set(Step::Spawn)))
        .configure_set(Step::Read, SetConfig::new().after_ignore_deferred(Step::Spawn));
    assert_eq!(run_once(&mut ignoring).0, [0]);

    let mut before = Schedule::new();
    before
        .add_systems((count.in_set(Step::Read), spawn_flag.in_set(Step::Spawn)))
        .configure_set(Step::Spawn, SetConfig::new().before(Step::Read));
    assert_eq!(run_once(&mut before).0, [1]);
}

#[test]
fn a_fallible_spawner_gets_a_point_too() {
    fn spawn_or_fail(mut commands: Commands) -> Result<(), String> {
        commands.spawn((Flag,));
        Ok(())
    }
    let mut schedule = Schedule::new();
    schedule.add_systems((spawn_or_fail, count.after(spawn_or_fail)));
    assert_eq!(run_once(&mut schedule).0, [1]);
}

#[test]
fn points_follow_conflict_edges_without_a_cycle() {
    // `spawn_flag -> count` needs a point; `spawn_and_note` conflicts with `count` (both write
    // the `Vec`) and was added after it, so it runs after `count`; `spawn_and_note -> late`
    // needs a point too, which cannot be the first one (`count` is before `spawn_and_note`).
    fn spawn_and_note(mut commands: Commands, mut seen: ResMut<Vec<usize>>) {
        seen.push(usize::MAX);
        commands.spawn((Flag,));
    }
    fn late(q: Query<&Flag>, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
    }
    let mut schedule = Schedule::new();
    schedule.add_systems((
        spawn_flag,
        count.after(spawn_flag),
        spawn_and_note,
        late.after(spawn_and_note),
    ));
    let (seen, order) = run_once(&mut schedule);
    assert_eq!(seen, [1, usize::MAX, 2]);
    assert_eq!(auto_points(&order), 2, "{order:?}");
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn the_plan_with_points_is_the_same_on_any_number_of_threads() {
    fn grow(q: Query<(Entity, &A)>, mut commands: Commands) {
        for (e, a) in q.iter() {
            if a.0 % 3 == 0 {
                commands.spawn((A(a.0 + 1), B(a.0)));
            } else {
                commands.entity(e).insert((C(a.0),));
            }
        }
    }
    fn bump(mut q: Query<&mut A, With<C>>) {
        q.iter_mut().for_each(|mut a| a.0 = a.0.wrapping_mul(7).wrapping_add(1));
    }
    fn tally(q: Query<(&A, Option<&B>)>, mut total: ResMut<u64>) {
        for (a, b) in q.iter() {
            *total = total.rotate_left(5) ^ a.0 ^ b.map_or(0, |b| b.0);
        }
    }
    fn shrink(q: Query<(Entity, &B)>, mut commands: Commands) {
        for (e, b) in q.iter() {
            if b.0 % 2 == 1 {
                commands.despawn(e);
            }
        }
    }
    let simulate = |threads: usize| {
        let mut world = World::new();
        for i in 0..200 {
            world.spawn((A(i),));
        }
        world.insert_resource(0u64);
        let mut schedule = Schedule::new();
        schedule.set_min_parallel_work(Duration::ZERO).add_systems((
            (grow, bump, tally).chain(),
            shrink.after(grow).before(tally),
            (|q: Query<&C>| assert!(q.iter().count() < 10_000)).after(bump),
        ));
        let order = schedule.order(&mut world).unwrap();
        pool(threads).install(|| {
            for _ in 0..4 {
                schedule.run(&mut world).unwrap();
            }
        });
        let mut rows: Vec<(u64, u64, Option<u64>, Option<u64>)> = world
            .query::<(Entity, &A, Option<&B>, Option<&C>)>()
            .iter(&world)
            .map(|(e, a, b, c)| (e.to_bits(), a.0, b.map(|b| b.0), c.map(|c| c.0)))
            .collect();
        rows.sort_unstable();
        (order, rows, *world.resource::<u64>().unwrap())
    };
    let one = simulate(1);
    assert!(auto_points(&one.0) >= 2, "{:?}", one.0);
    for threads in [2, 4, 16] {
        assert_eq!(simulate(threads), one, "{threads} threads");
    }
}
