//! Commands: applied in the schedule's order at the end of the run, commands on entities gone
//! by then skipped, and sync points that apply them mid-schedule.

use super::*;

#[test]
fn commands_apply_in_order_and_skip_gone_entities() {
    #[derive(Default)]
    struct Spawned(Vec<Entity>);
    fn spawner(mut commands: Commands, mut spawned: ResMut<Spawned>) {
        let e = commands.spawn((A(1),));
        commands.insert(e, (B(2),));
        let doomed = commands.spawn((A(9),));
        commands.despawn(doomed);
        commands.insert(doomed, (B(9),)); // skipped: despawned earlier in the buffer
        commands.despawn(doomed); // skipped too
        commands.insert_resource(7u32);
        commands.add(|world: &mut World| {
            world.insert_resource(String::from("custom"));
        });
        spawned.0.extend([e, doomed]);
    }
    fn remover(q: Query<Entity, With<B>>, mut commands: Commands) {
        for e in q.iter() {
            commands.entity(e).remove::<(B,)>().insert((C(3),));
        }
    }
    let mut world = World::new();
    world.insert_resource(Spawned::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((spawner, remover));
    schedule.run(&mut world).unwrap();
    let [e, doomed] = world.resource::<Spawned>().unwrap().0[..] else { panic!() };
    assert_eq!(world.get::<A>(e), Some(&A(1)));
    assert_eq!(world.get::<B>(e), Some(&B(2)), "remover ran before the spawn was applied");
    assert!(!world.contains(doomed));
    assert_eq!(world.resource::<u32>(), Some(&7));
    assert_eq!(world.resource::<String>().map(String::as_str), Some("custom"));
    let stats = schedule.command_stats();
    assert_eq!(stats.skipped, 2, "{stats:?}");
    assert!(stats.recent_skips.iter().all(|s| s.contains("skipped")), "{stats:?}");
    // The next run sees B and swaps it for C.
    schedule.run(&mut world).unwrap();
    assert_eq!(world.get::<B>(e), None);
    assert_eq!(world.get::<C>(e), Some(&C(3)));
    world.check_invariants();
}

#[test]
fn sync_points_apply_commands_mid_schedule() {
    fn spawn_one(mut commands: Commands) {
        commands.spawn((Flag,));
    }
    fn count(q: Query<&Flag>, mut seen: ResMut<Vec<usize>>) {
        seen.push(q.iter().count());
    }
    let mut world = World::new();
    world.insert_resource(Vec::<usize>::new());
    let mut schedule = Schedule::new();
    schedule.add_systems((spawn_one, count, ApplyDeferred, count.after(ApplyDeferred)));
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Vec<usize>>().unwrap(), &[0, 1]);
}
