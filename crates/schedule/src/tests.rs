//! The executor's promises, by topic in the submodules. Here: the fixtures they share, and the
//! tests that `.ci/run` names by path (its miri runs across scheduler seeds), kept at `tests::`
//! so those paths hold: conflicting systems never overlap, the world is bit-identical on any
//! number of threads, and a panic that crosses pool tasks reaches the caller once every task
//! is done.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::prelude::*;

mod auto_sync;
mod change_ticks;
mod deferred;
mod events;
mod failures;
mod names;
mod one_shot;
mod ordering;
mod panics;
mod queries;
mod sets;
mod single;
mod stats;
mod threshold;

#[derive(Debug, Clone, Copy, PartialEq)]
struct A(u64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct B(u64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct C(u64);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Flag;

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
}

/// Counts how many systems of a group run at once, and the most ever seen.
#[derive(Default)]
struct Overlap {
    running: AtomicUsize,
    max: AtomicUsize,
}

impl Overlap {
    fn enter(&self) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn conflicting_systems_never_overlap() {
    let writers = Arc::new(Overlap::default());
    let mut schedule = Schedule::new();
    for _ in 0..4 {
        let o = writers.clone();
        schedule.add_systems(move |mut q: Query<&mut A>| {
            o.enter();
            q.iter_mut().for_each(|mut a| a.0 += 1);
        });
    }
    let o = writers.clone();
    schedule.add_systems(move |q: Query<&A>| {
        o.enter();
        assert!(q.iter().count() > 0);
    });
    let mut world = World::new();
    world.spawn((A(0),));
    pool(4).install(|| schedule.run(&mut world)).unwrap();
    assert_eq!(writers.max.load(Ordering::SeqCst), 1);
    let mut q = world.query::<&A>();
    assert_eq!(q.single(&world).unwrap(), &A(4));
}

#[derive(Default)]
struct Log(Vec<&'static str>);

fn first(mut log: ResMut<Log>) {
    log.0.push("first");
}
fn second(mut log: ResMut<Log>) {
    log.0.push("second");
}
fn third(mut log: ResMut<Log>) {
    log.0.push("third");
}

/// One entity of the canonical world: `(id ^ A, B, C, A, has Flag)`.
type Row = (u64, Option<u64>, Option<u64>, Option<u64>, bool);

/// A seeded world and a schedule of 29 systems with mixed conflicts (change detection, events,
/// a `&World` system with a query state of its own and an exclusive system among them); the
/// world afterwards, in a canonical form, with what those systems saw.
fn simulate(threads: usize, min_parallel_work: Duration) -> Vec<Row> {
    #[derive(Clone, Copy)]
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
    }
    let mut world = World::new();
    world.register_component::<Flag>(StorageType::SparseSet).unwrap();
    let mut rng = Rng(42);
    let entities = if cfg!(miri) { 24 } else { 2_000u64 };
    for i in 0..entities {
        let r = rng.next();
        let e = world.spawn((A(i),));
        if r & 1 != 0 {
            world.insert(e, (B(r % 1000),)).unwrap();
        }
        if r & 2 != 0 {
            world.insert(e, (C(r % 777),)).unwrap();
        }
        if r & 4 != 0 {
            world.insert(e, (Flag,)).unwrap();
        }
    }
    world.insert_resource(0u64);
    let mut schedule = Schedule::new();
    schedule.set_min_parallel_work(min_parallel_work);
    for k in 0..6u64 {
        schedule.add_systems((
            move |mut q: Query<(&mut A, &B)>| {
                for (mut a, b) in q.iter_mut() {
                    a.0 = a.0.wrapping_mul(31).wrapping_add(b.0 + k);
                }
            },
            move |mut q: Query<(&mut B, Option<&C>), With<Flag>>| {
                q.par_iter_mut().for_each(|(mut b, c)| {
                    b.0 = b.0.wrapping_mul(17) ^ c.map_or(k, |c| c.0);
                });
            },
            move |mut q: Query<&mut C, Without<Flag>>, mut total: ResMut<u64>| {
                for mut c in q.iter_mut() {
                    c.0 = c.0.rotate_left(3) ^ k;
                    *total = total.wrapping_add(c.0);
                }
            },
            move |q: Query<(Entity, &A, &C)>, mut commands: Commands| {
                for (e, a, c) in q.iter() {
                    if (a.0 ^ c.0) % 97 == k {
                        if a.0 % 2 == 0 {
                            commands.despawn(e);
                        } else {
                            commands.spawn((A(a.0 / 3), B(c.0)));
                            commands.entity(e).insert((Flag,));
                        }
                    }
                }
            },
        ));
    }
    /// What the watching systems saw: a running hash and a count each.
    #[derive(Default)]
    struct Seen {
        changed_a: (u64, u64),
        events: (u64, u64),
    }
    struct Noted(u64);
    fn fold(log: &mut (u64, u64), value: u64) {
        log.0 = log.0.wrapping_mul(1_000_003) ^ value;
        log.1 += 1;
    }
    world.insert_resource(Seen::default());
    let by_world = Arc::new(AtomicUsize::new(0));
    let counted = by_world.clone();
    let mut changed_b: Option<QueryState<Entity, Changed<B>>> = None;
    schedule.add_systems((
        |q: Query<(Entity, &A), Changed<A>>, mut seen: ResMut<Seen>| {
            let mut changed: Vec<(Entity, u64)> = q.iter().map(|(e, a)| (e, a.0)).collect();
            changed.sort_unstable();
            for (e, a) in changed {
                fold(&mut seen.changed_a, e.to_bits() ^ a);
            }
        },
        |q: Query<&C, Changed<C>>, mut notes: EventWriter<Noted>| {
            let mut fives: Vec<u64> = q.iter().map(|c| c.0).filter(|c| c % 5 == 0).collect();
            fives.sort_unstable();
            notes.send_batch(fives.into_iter().map(Noted));
        },
        |mut notes: EventReader<Noted>, mut seen: ResMut<Seen>| {
            for note in notes.read() {
                fold(&mut seen.events, note.0);
            }
        },
        move |world: &World| {
            let state = changed_b.get_or_insert_with(|| world.query_filtered());
            counted.fetch_add(state.iter(world).count(), Ordering::Relaxed);
        },
        |world: &mut World| {
            let len = world.len() as u64;
            let total = world.resource_mut::<u64>().unwrap();
            *total = total.rotate_left(7) ^ len;
        },
    ));
    pool(threads).install(|| {
        for _ in 0..if cfg!(miri) { 2 } else { 5 } {
            schedule.run(&mut world).unwrap();
        }
    });
    let mut out: Vec<_> = world
        .query::<(Entity, &A, Option<&B>, Option<&C>, Option<&Flag>)>()
        .iter(&world)
        .map(|(e, a, b, c, f)| {
            (e.to_bits() ^ a.0, b.map(|b| b.0), c.map(|c| c.0), Some(a.0), f.is_some())
        })
        .collect();
    out.sort_unstable();
    out.push((*world.resource::<u64>().unwrap(), None, None, Some(world.len() as u64), false));
    let seen = world.resource::<Seen>().unwrap();
    let (changed_a, events) = (seen.changed_a, seen.events);
    out.push((changed_a.0, Some(changed_a.1), Some(events.0), Some(events.1), false));
    out.push((by_world.load(Ordering::Relaxed) as u64, None, None, None, true));
    out
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn the_world_is_bit_identical_on_1_2_and_8_threads() {
    // Always on the pool, the adaptive default, and never on the pool.
    let one = simulate(1, Duration::ZERO);
    assert!(one.len() > if cfg!(miri) { 20 } else { 1_000 });
    // The watchers saw something: changes of A, events, changes of B through `&World`.
    let [.., (_, Some(changed_a), _, Some(events), _), (by_world, ..)] = one[..] else {
        panic!("the watchers' rows")
    };
    assert!(changed_a > 0 && events > 0 && by_world > 0, "{changed_a} {events} {by_world}");
    for work in [Duration::ZERO, crate::MIN_PARALLEL_WORK, Duration::MAX] {
        assert_eq!(simulate(2, work), one, "2 threads, min parallel work {work:?}");
        if !cfg!(miri) {
            assert_eq!(simulate(8, work), one, "8 threads, min parallel work {work:?}");
        }
    }
}

/// Eight independent nodes, run by the calling thread (outside the pool) and up to two pool
/// tasks; `run` sees which thread runs each node.
fn run_eight_on_pool(run: &crate::workers::RunNode<'_>) -> std::thread::Result<()> {
    let predecessors = [0; 8];
    let successors = vec![Vec::new(); 8];
    let workers = crate::workers::Workers::new(&predecessors, &successors, 3);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::schedule::run_on_pool(&workers, run);
    }))
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_panic_escaping_a_pool_task_resumes_on_the_caller_once_every_task_is_done() {
    // A node's panic is caught by the node (`run_node_shared`); one that escapes the worker
    // loop is an executor bug, and must reach the caller rather than abort the process or
    // vanish, and only once no task runs any more.
    let (entered, left) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let run = |_k: usize| -> Result<(), String> {
        if rayon::current_thread_index().is_some() {
            entered.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            left.fetch_add(1, Ordering::SeqCst);
            panic!("escaped a task");
        }
        // The caller holds its first node until a task ran one, so a task surely panics.
        while entered.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        Ok(())
    };
    let payload = run_eight_on_pool(&run).unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"escaped a task"));
    let (entered, left) = (entered.load(Ordering::SeqCst), left.load(Ordering::SeqCst));
    assert!(entered >= 1);
    assert_eq!(entered, left, "a task was still in a node when the panic reached the caller");
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn a_caller_that_unwinds_waits_for_its_pool_tasks_first() {
    // The tasks borrow the caller's frame: it may not end while one still runs. One task node
    // stays in until the caller has returned (`returned`), or until a deadline far beyond the
    // time an unwind takes; if it sees the caller back first, the caller did not wait.
    const CALLER: u8 = 1;
    const TASK: u8 = 2;
    let runner: Vec<std::sync::atomic::AtomicU8> =
        (0..8).map(|_| std::sync::atomic::AtomicU8::new(0)).collect();
    let (returned, early, long_taken) =
        (AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false));
    let caller_started = AtomicBool::new(false);
    let run = |k: usize| -> Result<(), String> {
        if rayon::current_thread_index().is_some() {
            runner[k].store(TASK, Ordering::SeqCst);
            // Two tasks stopped in their first nodes hold few roots: the caller finds one.
            while !caller_started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            if !long_taken.swap(true, Ordering::SeqCst) {
                let deadline = std::time::Instant::now() + Duration::from_millis(300);
                while std::time::Instant::now() < deadline {
                    if returned.load(Ordering::SeqCst) {
                        early.store(true, Ordering::SeqCst);
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            return Ok(());
        }
        runner[k].store(CALLER, Ordering::SeqCst);
        caller_started.store(true, Ordering::SeqCst);
        while !long_taken.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        panic!("the caller unwinds");
    };
    let payload = run_eight_on_pool(&run).unwrap_err();
    returned.store(true, Ordering::SeqCst);
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the caller unwinds"));
    assert!(!early.load(Ordering::SeqCst), "the caller returned while a task still ran");
    // The caller ran one node (its first) and panicked; the tasks ran every other node but the
    // rest of the caller's chunk of roots (at most two here: 8 roots over 2 x 3 workers).
    let runner: Vec<u8> = runner.iter().map(|r| r.load(Ordering::SeqCst)).collect();
    let first = runner.iter().position(|&r| r == CALLER).expect("the caller ran a node");
    for (k, &r) in runner.iter().enumerate() {
        if k != first && k != first + 1 {
            assert_eq!(r, TASK, "node {k} was not run by a task: {runner:?}");
        }
    }
}
