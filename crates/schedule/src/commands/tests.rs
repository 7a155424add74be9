//! Tests of the command buffer: order, payloads dropped once, panics, batches, and a queue
//! applied to the world it was made for.
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use folio_query::{Entity, World};

use super::{CommandQueue, CommandStats, Commands};

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Over-aligned: stored unaligned in the queue, it must still land aligned in its column.
#[repr(align(64))]
#[derive(Debug, PartialEq)]
struct Aligned([u8; 3]);

/// Panics when dropped.
struct Bomb;
impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("bomb dropped");
    }
}

/// A drop counter, an empty world and an empty queue.
fn setup() -> (Arc<AtomicUsize>, World, CommandQueue) {
    (Arc::new(AtomicUsize::new(0)), World::new(), CommandQueue::default())
}

/// A frame's worth of mixed commands; returns the spawned entities.
fn fill(
    queue: &mut CommandQueue,
    world: &World,
    drops: &Arc<AtomicUsize>,
) -> Vec<folio_query::Entity> {
    let mut commands = Commands::new(queue, world);
    let spawned: Vec<_> = (0..5u8)
        .map(|i| commands.spawn((Counted(drops.clone()), Aligned([i, i + 1, i + 2]))))
        .collect();
    commands.despawn(spawned[1]);
    commands.despawn(spawned[1]); // skipped: gone by then
    // A closure capturing nothing: a zero-sized payload.
    commands.add(|w: &mut World| {
        w.insert_resource(7u32);
    });
    commands.insert(spawned[2], (3u64,));
    spawned
}

#[test]
fn despawns_then_spawns_place_the_spawned_straight_into_their_table() {
    let (drops, mut world, mut queue) = setup();
    let mut stats = CommandStats::default();
    let old: Vec<_> = (0..4u8).map(|i| world.spawn((Aligned([i; 3]),))).collect();
    let mut commands = Commands::new(&mut queue, &world);
    for &e in &old[..3] {
        commands.despawn(e);
    }
    let spawned: Vec<_> =
        (0..3u8).map(|i| commands.spawn((Counted(drops.clone()), Aligned([10 + i; 3])))).collect();
    queue.apply(&mut world, &mut stats);
    assert_eq!((stats.applied, stats.skipped), (6, 0));
    // Each spawn was of the oldest pending reservation: none went through the empty
    // archetype, and the indices the despawns freed wait for the next reservations.
    let empty = world.archetypes()[folio_query::ArchetypeId::EMPTY.index()].len();
    assert_eq!(empty, 0);
    assert_eq!(world.len(), 4);
    for (i, &e) in spawned.iter().enumerate() {
        assert_eq!(world.get::<Aligned>(e), Some(&Aligned([10 + i as u8; 3])));
    }
    assert!(old[..3].iter().all(|&e| !world.contains(e)));
    world.check_invariants();
    let next = world.spawn((Aligned([0; 3]),));
    assert_eq!(next.index(), old[0].index(), "freed during the apply, reused after it");
    drop(world);
    assert_eq!(drops.load(Ordering::Relaxed), 3);
}

#[test]
fn payloads_run_once_in_order_aligned_and_the_buffers_are_reused() {
    let (drops, mut world, mut queue) = setup();
    let mut stats = CommandStats::default();
    let spawned = fill(&mut queue, &world, &drops);
    assert_eq!(queue.len(), 9);
    queue.apply(&mut world, &mut stats);
    assert!(queue.is_empty());
    assert_eq!((stats.applied, stats.skipped), (8, 1), "{:?}", stats.recent_skips);
    assert_eq!(drops.load(Ordering::Relaxed), 1, "only the despawned entity's value");
    assert_eq!(world.resource::<u32>(), Some(&7));
    assert_eq!(world.get::<u64>(spawned[2]), Some(&3));
    for (i, &e) in spawned.iter().enumerate().filter(|&(i, _)| i != 1) {
        let a = world.get::<Aligned>(e).unwrap();
        let i = i as u8;
        assert_eq!(a, &Aligned([i, i + 1, i + 2]));
        assert_eq!((a as *const Aligned).addr() % 64, 0);
    }
    // The next frame's commands fit the buffers the first one grew.
    let capacity = (queue.commands.capacity(), queue.bytes.capacity());
    fill(&mut queue, &world, &drops);
    assert_eq!((queue.commands.capacity(), queue.bytes.capacity()), capacity);
    queue.apply(&mut world, &mut stats);
    assert_eq!(drops.load(Ordering::Relaxed), 2);
    world.clear();
    assert_eq!(drops.load(Ordering::Relaxed), 10, "every value dropped once");
    world.check_invariants();
}

#[test]
fn discarded_and_dropped_queues_drop_each_payload_once() {
    let (drops, mut world, mut queue) = setup();
    fill(&mut queue, &world, &drops);
    queue.discard(&mut world);
    assert!(queue.is_empty());
    assert_eq!(drops.load(Ordering::Relaxed), 5);
    assert_eq!(world.len(), 0, "no reserved entity left behind");
    assert_eq!(world.resource::<u32>(), None, "nothing ran");

    fill(&mut queue, &world, &drops);
    drop(queue);
    assert_eq!(drops.load(Ordering::Relaxed), 10);
    world.check_invariants();
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_payload_drop_still_drops_the_rest_once() {
    let (drops, mut world, mut queue) = setup();
    {
        let mut commands = Commands::new(&mut queue, &world);
        let c = Counted(drops.clone());
        commands.add(move |_: &mut World| drop(c));
        let bomb = Bomb;
        commands.add(move |_: &mut World| drop(bomb));
        commands.spawn((Counted(drops.clone()),));
    }
    let panicked = catch_unwind(AssertUnwindSafe(|| queue.discard(&mut world)));
    assert!(panicked.is_err());
    assert_eq!(drops.load(Ordering::Relaxed), 2, "the payloads after the bomb too");
    assert!(queue.is_empty());
    drop(queue);
    assert_eq!(drops.load(Ordering::Relaxed), 2, "nothing dropped twice");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_command_drops_the_unrun_rest_once() {
    let (drops, mut world, mut queue) = setup();
    let mut stats = CommandStats::default();
    {
        let mut commands = Commands::new(&mut queue, &world);
        commands.spawn((Counted(drops.clone()),));
        commands.add(|_: &mut World| panic!("command failed"));
        commands.spawn((Counted(drops.clone()), Aligned([1, 2, 3])));
        let c = Counted(drops.clone());
        commands.add(move |_: &mut World| drop(c));
    }
    let panicked = catch_unwind(AssertUnwindSafe(|| queue.apply(&mut world, &mut stats)));
    assert!(panicked.is_err());
    assert_eq!(drops.load(Ordering::Relaxed), 2, "the two unrun payloads");
    assert_eq!(stats.applied, 1);
    assert_eq!(world.len(), 1, "the first spawn stands, the thrown-away one left nothing");
    world.check_invariants();
    drop(queue);
    world.clear();
    assert_eq!(drops.load(Ordering::Relaxed), 3);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn spawns_thrown_away_after_a_payload_whose_drop_panics_leave_no_entity() {
    let (drops, mut world, mut queue) = setup();
    let mut stats = CommandStats::default();
    let fill = |queue: &mut CommandQueue, world: &World, fail: bool| {
        let mut commands = Commands::new(queue, world);
        if fail {
            commands.add(|_: &mut World| panic!("command failed"));
        }
        commands.spawn((Bomb,));
        commands.spawn((Counted(drops.clone()),));
    };
    // Thrown away by `discard`, and by `apply` after a command panicked.
    fill(&mut queue, &world, false);
    assert!(catch_unwind(AssertUnwindSafe(|| queue.discard(&mut world))).is_err());
    fill(&mut queue, &world, true);
    let applied = catch_unwind(AssertUnwindSafe(|| queue.apply(&mut world, &mut stats)));
    assert!(applied.is_err());
    assert_eq!(drops.load(Ordering::Relaxed), 2);
    world.flush();
    assert_eq!(world.len(), 0, "the spawns after the bomb left no empty entity");
    world.check_invariants();
}

#[test]
fn a_long_buffer_applies_as_the_same_calls_made_one_by_one() {
    // Long enough that every command is prefetched ahead of it (`BATCH_META_AHEAD`), and mixed:
    // despawns of random entities (some twice), inserts and removes on entities despawned
    // earlier in the buffer, spawns, and despawns of entities spawned in the same buffer.
    // The ops name entities by slot (the n-th entity made), as the two worlds hand out
    // different ids (a reserved id is taken before the despawns ahead of it free theirs).
    #[derive(Clone, Copy)]
    enum Op {
        Despawn(usize),
        Insert(usize, f32),
        Remove(usize),
        Spawn(u32),
        SpawnDespawn(u32),
    }
    const START: usize = 300;
    // Under miri a few hundred commands (each op a world operation interpreted) still
    // run every command with the look-ahead in front of it.
    const STEPS: u32 = if cfg!(miri) { 300 } else { 2_000 };
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rand = |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    let mut slots = START;
    let ops: Vec<Op> = (0..STEPS)
        .map(|step| {
            let slot = rand(slots);
            match rand(5) {
                0 => Op::Despawn(slot),
                1 => Op::Insert(slot, f32::from(step as u16)),
                2 => Op::Remove(slot),
                3 => {
                    slots += 1;
                    Op::Spawn(step)
                }
                _ => {
                    slots += 1;
                    Op::SpawnDespawn(step)
                }
            }
        })
        .collect();
    let start = |world: &mut World| -> Vec<folio_query::Entity> {
        (0..START as u32).map(|i| world.spawn((i, u64::from(i)))).collect()
    };

    let mut buffered = World::new();
    let mut buffered_ids = start(&mut buffered);
    let mut queue = CommandQueue::default();
    let mut stats = CommandStats::default();
    {
        let mut commands = Commands::new(&mut queue, &buffered);
        for &op in &ops {
            match op {
                Op::Despawn(s) => commands.despawn(buffered_ids[s]),
                Op::Insert(s, x) => commands.insert(buffered_ids[s], (x,)),
                Op::Remove(s) => commands.remove::<(u64,)>(buffered_ids[s]),
                Op::Spawn(i) => buffered_ids.push(commands.spawn((i, u64::from(i)))),
                Op::SpawnDespawn(i) => {
                    let e = commands.spawn((i,));
                    commands.despawn(e);
                    buffered_ids.push(e);
                }
            }
        }
    }
    let buffered_len = queue.len() as u64;
    queue.apply(&mut buffered, &mut stats);
    assert!(stats.skipped > 0, "some commands found their entity gone");
    assert_eq!(stats.applied + stats.skipped, buffered_len);

    let mut direct = World::new();
    let mut direct_ids = start(&mut direct);
    for &op in &ops {
        match op {
            Op::Despawn(s) => drop(direct.despawn(direct_ids[s])),
            Op::Insert(s, x) => drop(direct.insert(direct_ids[s], (x,))),
            Op::Remove(s) => drop(direct.try_remove::<(u64,)>(direct_ids[s])),
            Op::Spawn(i) => direct_ids.push(direct.spawn((i, u64::from(i)))),
            Op::SpawnDespawn(i) => {
                let e = direct.spawn((i,));
                direct.despawn(e).unwrap();
                direct_ids.push(e);
            }
        }
    }

    assert_eq!(buffered.len(), direct.len());
    for (&b, &d) in buffered_ids.iter().zip(&direct_ids) {
        assert_eq!(buffered.contains(b), direct.contains(d), "{b} / {d}");
        assert_eq!(buffered.get::<u32>(b), direct.get::<u32>(d), "{b} / {d}");
        assert_eq!(buffered.get::<u64>(b), direct.get::<u64>(d), "{b} / {d}");
        assert_eq!(buffered.get::<f32>(b), direct.get::<f32>(d), "{b} / {d}");
    }
    buffered.check_invariants();
}

#[test]
fn spawn_batch_spawns_in_order_when_applied_and_drops_what_it_never_ran() {
    use folio_query::WorldQueryExt;
    let (drops, mut world, mut queue) = setup();
    let mut stats = CommandStats::default();
    let mut commands = Commands::new(&mut queue, &world);
    let named = commands.spawn((Aligned([9; 3]),));
    let counted: Vec<Counted> = (0..3).map(|_| Counted(drops.clone())).collect();
    commands.spawn_batch(counted.into_iter().map(|c| (c, 1u16)));
    commands.spawn_batch((0..4u8).map(|i| (Aligned([i; 3]),)));
    commands.despawn(named);
    assert_eq!(world.len(), 0, "nothing spawned before the apply");
    queue.apply(&mut world, &mut stats);
    assert_eq!((stats.applied, stats.skipped), (4, 0));
    assert_eq!(world.len(), 7);
    let mut aligned: Vec<u8> = world.query::<&Aligned>().iter(&world).map(|a| a.0[0]).collect();
    aligned.sort_unstable();
    assert_eq!(aligned, [0, 1, 2, 3], "the named one despawned after the batch");
    assert!(
        world
            .query::<&Aligned>()
            .iter(&world)
            .all(|a| (a as *const Aligned).addr().is_multiple_of(64))
    );
    world.check_invariants();
    assert_eq!(drops.load(Ordering::Relaxed), 0);
    drop(world);
    assert_eq!(drops.load(Ordering::Relaxed), 3);

    // A batch never applied: its iterator, and the bundles it holds, are dropped once.
    let (drops, world, mut queue) = setup();
    let mut commands = Commands::new(&mut queue, &world);
    commands.spawn_batch(vec![(Counted(drops.clone()),), (Counted(drops.clone()),)]);
    drop(queue);
    assert_eq!(drops.load(Ordering::Relaxed), 2);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_queue_applied_to_another_world_panics_and_changes_nothing() {
    let (mut w1, mut w2) = (World::new(), World::new());
    let w2_entities: Vec<Entity> = (0..4u32).map(|i| w2.spawn((i,))).collect();
    let mut queue = CommandQueue::default();
    let spawned = {
        let mut commands = Commands::new(&mut queue, &w1);
        let e = commands.spawn((7u32,));
        commands.insert(e, (1.5f32,));
        commands.despawn(w2_entities[3]); // an id that also names a live entity of w2
        e
    };
    let before: Vec<Option<u32>> = w2_entities.iter().map(|&e| w2.get::<u32>(e).copied()).collect();
    let mut stats = CommandStats::default();
    for attempt in 0..2 {
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            if attempt == 0 {
                queue.apply(&mut w2, &mut stats);
            } else {
                queue.discard(&mut w2);
            }
        }));
        let message = panicked.unwrap_err();
        let message = message.downcast_ref::<String>().expect("a formatted message");
        assert!(message.contains("another world"), "{message}");
        assert_eq!(queue.len(), 3, "the queue keeps its commands");
        assert_eq!(w2.len(), 4);
        let after: Vec<Option<u32>> =
            w2_entities.iter().map(|&e| w2.get::<u32>(e).copied()).collect();
        assert_eq!(after, before, "nothing of the other world changed");
        assert_eq!(w2.get::<f32>(spawned), None);
    }
    // Buffering for another world while commands are pending is refused too.
    let refused = catch_unwind(AssertUnwindSafe(|| {
        Commands::new(&mut queue, &w2);
    }));
    assert!(refused.is_err());
    // On its own world the queue applies, and is then free for any world.
    queue.apply(&mut w1, &mut stats);
    assert_eq!(w1.get::<u32>(spawned), Some(&7));
    assert_eq!(w1.get::<f32>(spawned), Some(&1.5));
    Commands::new(&mut queue, &w2).despawn(w2_entities[1]);
    queue.apply(&mut w2, &mut stats);
    assert!(!w2.contains(w2_entities[1]));
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_command_that_panics_when_applied_names_where_it_was_buffered() {
    use crate::RunSystemOnce;
    struct A(#[allow(dead_code)] u32);
    let mut world = World::new();
    let mut queue = CommandQueue::default();
    let apply = |world: &mut World, queue: &mut CommandQueue| {
        let applied = catch_unwind(AssertUnwindSafe(|| {
            queue.apply(world, &mut CommandStats::default());
        }));
        match applied.unwrap_err().downcast::<String>() {
            Ok(message) => *message,
            Err(_) => panic!("a String payload"),
        }
    };
    let line = line!() + 1;
    Commands::new(&mut queue, &world).spawn_batch([(A(1), A(2))]);
    let text = apply(&mut world, &mut queue);
    assert!(text.starts_with("Commands::spawn_batch (buffered at "), "{text}");
    assert!(text.contains(&format!("{}:{line}:", file!())) && text.contains("A"), "{text}");
    let id = world.register_system(|| {});
    world.unregister_system(id).unwrap();
    let line = line!() + 1;
    Commands::new(&mut queue, &world).run_system(id);
    let text = apply(&mut world, &mut queue);
    assert!(text.starts_with("Commands::run_system (buffered at "), "{text}");
    assert!(text.contains(&format!("{}:{line}:", file!())) && text.contains("SystemId"), "{text}");
    world.check_invariants();
}
