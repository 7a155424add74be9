//! folio's [`Schedule`](folio_schedule::Schedule) side by side with bevy_ecs's `Schedule`
//! (multi-threaded executor, compute task pool of 2 threads), shipyard's workloads, hecs (plain
//! loops; it has no scheduler) and a hand-written `rayon::join` limit (issue 5):
//!
//! - `schedule`: 10,000 entities each of (A,B), (A,B,C), (A,B,C,D), (A,B,C,E); systems AB, CD,
//!   CE swap the two values they name. CD and CE both write C, so they are ordered; AB runs
//!   beside them. Timed per `run` of the schedule / workload. The limits: `join_world`, the same
//!   three loops over folio's own world through pre-built `QueryState`s under one
//!   `rayon::join(AB, CD then CE)` (no scheduler at all), and `join_vecs`, the same swaps over
//!   plain `Vec<f32>` columns. `folio_1thread` is folio's schedule inside a 1-thread rayon pool
//!   (its sequential path), for the 1 -> 2 thread speed-up.
//! - `schedule_par`: the same, with each system's loop on its library's parallel iterator
//!   (`par_iter_mut`, shipyard's `par_iter`), and `folio_1thread` for the speed-up.
//! - `empty_systems/50` and `empty_systems/1000`: the overhead of a run of that many distinct
//!   system functions without parameters (`empty::<I>`, one function item per `I`), all
//!   independent.
//! - `frame_churn`: 100,000 (Position, Velocity); one iteration is one frame: integrate all,
//!   despawn 1% chosen at random from a list of live entities, spawn 1% new; each library in
//!   each of its forms of `folio_benches::churn` (`plain`: the world's per-entity API;
//!   `schedule_1thread` and `schedule_2threads`: a schedule of an `integrate` system and a churn
//!   system with `Commands`). The per-frame distribution (median, p99) comes from
//!   `churn_report`, which runs the same frames.
//!
//! Setup (world, schedule, first run that initializes the systems) is outside the timed
//! region. Sample sizes and times come from `folio_benches::criterion()` and the command line.
#![allow(missing_docs)] // `criterion_group!` / `criterion_main!` generate undocumented items.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use folio_benches::churn::{Form, Frame, Lib};

/// Entities per archetype of the `schedule` workload.
const N: usize = 10_000;

#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct A(f32);
#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct B(f32);
#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct C(f32);
#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct D(f32);
#[derive(Clone, Copy, bevy_ecs::component::Component, shipyard::Component)]
struct E(f32);

/// bevy's compute task pool, sized to the 2 threads the other libraries' rayon pools have.
fn init_bevy_pool() {
    folio_benches::init_bevy_pool(2);
}

fn bevy_schedule() -> bevy_ecs::schedule::Schedule {
    let mut schedule = bevy_ecs::schedule::Schedule::default();
    schedule.set_executor(bevy_ecs::schedule::MultiThreadedExecutor::new());
    schedule
}

// ----- schedule -----

mod folio_sys {
    use super::{A, B, C, D, E};
    use folio_schedule::Query;

    pub(crate) fn ab(mut q: Query<(&mut A, &mut B)>) {
        for (mut a, mut b) in q.iter_mut() {
            std::mem::swap(&mut a.0, &mut b.0);
        }
    }
    pub(crate) fn cd(mut q: Query<(&mut C, &mut D)>) {
        for (mut c, mut d) in q.iter_mut() {
            std::mem::swap(&mut c.0, &mut d.0);
        }
    }
    pub(crate) fn ce(mut q: Query<(&mut C, &mut E)>) {
        for (mut c, mut e) in q.iter_mut() {
            std::mem::swap(&mut c.0, &mut e.0);
        }
    }
}

/// The same three systems with each loop split over the pool (`par_iter_mut`).
mod folio_par_sys {
    use super::{A, B, C, D, E};
    use folio_schedule::Query;

    pub(crate) fn ab(mut q: Query<(&mut A, &mut B)>) {
        q.par_iter_mut().for_each(|(mut a, mut b)| std::mem::swap(&mut a.0, &mut b.0));
    }
    pub(crate) fn cd(mut q: Query<(&mut C, &mut D)>) {
        q.par_iter_mut().for_each(|(mut c, mut d)| std::mem::swap(&mut c.0, &mut d.0));
    }
    pub(crate) fn ce(mut q: Query<(&mut C, &mut E)>) {
        q.par_iter_mut().for_each(|(mut c, mut e)| std::mem::swap(&mut c.0, &mut e.0));
    }
}

mod bevy_sys {
    use super::{A, B, C, D, E};
    use bevy_ecs::system::Query;

    pub(crate) fn ab(mut q: Query<(&mut A, &mut B)>) {
        for (mut a, mut b) in q.iter_mut() {
            std::mem::swap(&mut a.0, &mut b.0);
        }
    }
    pub(crate) fn cd(mut q: Query<(&mut C, &mut D)>) {
        for (mut c, mut d) in q.iter_mut() {
            std::mem::swap(&mut c.0, &mut d.0);
        }
    }
    pub(crate) fn ce(mut q: Query<(&mut C, &mut E)>) {
        for (mut c, mut e) in q.iter_mut() {
            std::mem::swap(&mut c.0, &mut e.0);
        }
    }
}

mod bevy_par_sys {
    use super::{A, B, C, D, E};
    use bevy_ecs::system::Query;

    pub(crate) fn ab(mut q: Query<(&mut A, &mut B)>) {
        q.par_iter_mut().for_each(|(mut a, mut b)| std::mem::swap(&mut a.0, &mut b.0));
    }
    pub(crate) fn cd(mut q: Query<(&mut C, &mut D)>) {
        q.par_iter_mut().for_each(|(mut c, mut d)| std::mem::swap(&mut c.0, &mut d.0));
    }
    pub(crate) fn ce(mut q: Query<(&mut C, &mut E)>) {
        q.par_iter_mut().for_each(|(mut c, mut e)| std::mem::swap(&mut c.0, &mut e.0));
    }
}

mod shipyard_par_sys {
    use super::{A, B, C, D, E};
    use rayon::iter::ParallelIterator;
    use shipyard::{IntoIter, ViewMut};

    pub(crate) fn ab(mut a: ViewMut<A>, mut b: ViewMut<B>) {
        (&mut a, &mut b).par_iter().for_each(|(a, b)| std::mem::swap(&mut a.0, &mut b.0));
    }
    pub(crate) fn cd(mut c: ViewMut<C>, mut d: ViewMut<D>) {
        (&mut c, &mut d).par_iter().for_each(|(c, d)| std::mem::swap(&mut c.0, &mut d.0));
    }
    pub(crate) fn ce(mut c: ViewMut<C>, mut e: ViewMut<E>) {
        (&mut c, &mut e).par_iter().for_each(|(c, e)| std::mem::swap(&mut c.0, &mut e.0));
    }
}

mod shipyard_sys {
    use super::{A, B, C, D, E};
    use shipyard::{IntoIter, ViewMut};

    pub(crate) fn ab(mut a: ViewMut<A>, mut b: ViewMut<B>) {
        for (a, b) in (&mut a, &mut b).iter() {
            std::mem::swap(&mut a.0, &mut b.0);
        }
    }
    pub(crate) fn cd(mut c: ViewMut<C>, mut d: ViewMut<D>) {
        for (c, d) in (&mut c, &mut d).iter() {
            std::mem::swap(&mut c.0, &mut d.0);
        }
    }
    pub(crate) fn ce(mut c: ViewMut<C>, mut e: ViewMut<E>) {
        for (c, e) in (&mut c, &mut e).iter() {
            std::mem::swap(&mut c.0, &mut e.0);
        }
    }
}

fn folio_schedule_world() -> (folio_schedule::World, folio_schedule::Schedule) {
    folio_world_with((folio_sys::ab, folio_sys::cd, folio_sys::ce))
}

fn folio_world_with<M>(
    systems: impl folio_schedule::IntoSystemConfigs<M>,
) -> (folio_schedule::World, folio_schedule::Schedule) {
    let mut world = folio_schedule::World::new();
    world.spawn_batch((0..N).map(|_| (A(0.0), B(1.0))));
    world.spawn_batch((0..N).map(|_| (A(0.0), B(1.0), C(2.0))));
    world.spawn_batch((0..N).map(|_| (A(0.0), B(1.0), C(2.0), D(3.0))));
    world.spawn_batch((0..N).map(|_| (A(0.0), B(1.0), C(2.0), E(4.0))));
    let mut schedule = folio_schedule::Schedule::new();
    schedule.add_systems(systems);
    schedule.run(&mut world).unwrap();
    (world, schedule)
}

/// bevy's world of the `schedule` workload.
fn bevy_schedule_world() -> bevy_ecs::world::World {
    let mut world = bevy_ecs::world::World::new();
    world.spawn_batch((0..N).map(|_| (A(0.0), B(1.0))));
    world.spawn_batch((0..N).map(|_| (A(0.0), B(1.0), C(2.0))));
    world.spawn_batch((0..N).map(|_| (A(0.0), B(1.0), C(2.0), D(3.0))));
    world.spawn_batch((0..N).map(|_| (A(0.0), B(1.0), C(2.0), E(4.0))));
    world
}

/// shipyard's world of the `schedule` workload.
fn shipyard_schedule_world() -> shipyard::World {
    let mut world = shipyard::World::new();
    world.bulk_add_entity((0..N).map(|_| (A(0.0), B(1.0))));
    world.bulk_add_entity((0..N).map(|_| (A(0.0), B(1.0), C(2.0))));
    world.bulk_add_entity((0..N).map(|_| (A(0.0), B(1.0), C(2.0), D(3.0))));
    world.bulk_add_entity((0..N).map(|_| (A(0.0), B(1.0), C(2.0), E(4.0))));
    world
}

fn schedule(c: &mut Criterion) {
    init_bevy_pool();
    let mut group = c.benchmark_group("schedule");
    group.bench_function("folio", |b| {
        let (mut world, mut schedule) = folio_schedule_world();
        b.iter(|| schedule.run(black_box(&mut world)).unwrap())
    });
    group.bench_function("folio_1thread", |b| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let (mut world, mut schedule) = folio_schedule_world();
        pool.install(|| b.iter(|| schedule.run(black_box(&mut world)).unwrap()))
    });
    group.bench_function("join_world", |b| {
        use folio_schedule::{QueryState, WorldQueryExt};
        let (world, _) = folio_schedule_world();
        let mut ab: QueryState<(&mut A, &mut B)> = world.query();
        let mut cd: QueryState<(&mut C, &mut D)> = world.query();
        let mut ce: QueryState<(&mut C, &mut E)> = world.query();
        ab.update_archetypes(&world);
        cd.update_archetypes(&world);
        ce.update_archetypes(&world);
        let (ab, cd, ce) = (&ab, &cd, &ce);
        b.iter(|| {
            let world = black_box(&world);
            let last = world.change_tick();
            let tick = world.increment_change_tick();
            // SAFETY: the states were updated for `world`, which makes no archetype while they
            // are used; AB touches A and B only, CD then CE (one after the other) C, D and E,
            // so the two sides of the join never touch the same column.
            rayon::join(
                || unsafe {
                    for (mut a, mut b) in ab.iter_unchecked(world, last, tick) {
                        std::mem::swap(&mut a.0, &mut b.0);
                    }
                },
                || unsafe {
                    for (mut c, mut d) in cd.iter_unchecked(world, last, tick) {
                        std::mem::swap(&mut c.0, &mut d.0);
                    }
                    for (mut c, mut e) in ce.iter_unchecked(world, last, tick) {
                        std::mem::swap(&mut c.0, &mut e.0);
                    }
                },
            );
        })
    });
    group.bench_function("join_vecs", |b| {
        // Columns of the four archetypes: A and B in all four, C in three, D and E in one each.
        let mut a: Vec<Vec<f32>> = vec![vec![0.0; N]; 4];
        let mut bv: Vec<Vec<f32>> = vec![vec![1.0; N]; 4];
        let mut cv: Vec<Vec<f32>> = vec![vec![2.0; N]; 3];
        let mut d = vec![3.0f32; N];
        let mut e = vec![4.0f32; N];
        b.iter(|| {
            let (a, bv, cv) = (black_box(&mut a), black_box(&mut bv), black_box(&mut cv));
            let (d, e) = (black_box(&mut d), black_box(&mut e));
            rayon::join(
                || {
                    for (a, b) in a.iter_mut().zip(bv.iter_mut()) {
                        a.swap_with_slice(b);
                    }
                },
                || {
                    cv[1].swap_with_slice(d);
                    cv[2].swap_with_slice(e);
                },
            );
        })
    });
    group.bench_function("bevy", |b| {
        let mut world = bevy_schedule_world();
        let mut schedule = bevy_schedule();
        schedule.add_systems((bevy_sys::ab, bevy_sys::cd, bevy_sys::ce));
        schedule.run(&mut world);
        b.iter(|| schedule.run(black_box(&mut world)))
    });
    group.bench_function("shipyard", |b| {
        let world = shipyard_schedule_world();
        let (workload, _) = shipyard::Workload::new("schedule")
            .with_system(shipyard_sys::ab)
            .with_system(shipyard_sys::cd)
            .with_system(shipyard_sys::ce)
            .build()
            .unwrap();
        workload.run_with_world(&world).unwrap();
        b.iter(|| workload.run_with_world(black_box(&world)).unwrap())
    });
    group.finish();
}

/// `schedule_par`: the same world and systems, each system's loop split over the pool with its
/// library's parallel iterator, so that both threads share AB's 40,000 rows. (In `schedule`, AB
/// runs on one thread beside CD then CE, which bounds the 1 -> 2 thread speed-up at 1.5x.)
fn schedule_par(c: &mut Criterion) {
    init_bevy_pool();
    let mut group = c.benchmark_group("schedule_par");
    let folio = || folio_world_with((folio_par_sys::ab, folio_par_sys::cd, folio_par_sys::ce));
    group.bench_function("folio", |b| {
        let (mut world, mut schedule) = folio();
        b.iter(|| schedule.run(black_box(&mut world)).unwrap())
    });
    group.bench_function("folio_1thread", |b| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let (mut world, mut schedule) = folio();
        pool.install(|| b.iter(|| schedule.run(black_box(&mut world)).unwrap()))
    });
    group.bench_function("bevy", |b| {
        let mut world = bevy_schedule_world();
        let mut schedule = bevy_schedule();
        schedule.add_systems((bevy_par_sys::ab, bevy_par_sys::cd, bevy_par_sys::ce));
        schedule.run(&mut world);
        b.iter(|| schedule.run(black_box(&mut world)))
    });
    group.bench_function("shipyard", |b| {
        let world = shipyard_schedule_world();
        let (workload, _) = shipyard::Workload::new("schedule_par")
            .with_system(shipyard_par_sys::ab)
            .with_system(shipyard_par_sys::cd)
            .with_system(shipyard_par_sys::ce)
            .build()
            .unwrap();
        workload.run_with_world(&world).unwrap();
        b.iter(|| workload.run_with_world(black_box(&world)).unwrap())
    });
    group.finish();
}

// ----- empty systems -----

/// A system that does nothing; one distinct function per `I`.
fn empty<const I: usize>() {
    black_box(I);
}

/// Something that takes `empty::<I>` for `I < limit`.
trait AddEmpty {
    fn add<const I: usize>(&mut self);
}

/// Calls `sink.add::<I>()` for `I` in `0..1000`.
macro_rules! thousand {
    ($sink:ident; $($a:literal)*) => { $( thousand!(@b $sink; $a; 0 1 2 3 4 5 6 7 8 9); )* };
    (@b $sink:ident; $a:literal; $($b:literal)*) => {
        $( thousand!(@c $sink; $a; $b; 0 1 2 3 4 5 6 7 8 9); )*
    };
    (@c $sink:ident; $a:literal; $b:literal; $($c:literal)*) => {
        $( $sink.add::<{ $a * 100 + $b * 10 + $c }>(); )*
    };
}

fn add_empty(sink: &mut impl AddEmpty) {
    thousand!(sink; 0 1 2 3 4 5 6 7 8 9);
}

struct FolioSink(folio_schedule::Schedule, usize);
impl AddEmpty for FolioSink {
    fn add<const I: usize>(&mut self) {
        if I < self.1 {
            self.0.add_systems(empty::<I>);
        }
    }
}

struct BevySink(bevy_ecs::schedule::Schedule, usize);
impl AddEmpty for BevySink {
    fn add<const I: usize>(&mut self) {
        if I < self.1 {
            self.0.add_systems(empty::<I>);
        }
    }
}

struct ShipyardSink(Option<shipyard::Workload>, usize);
impl AddEmpty for ShipyardSink {
    fn add<const I: usize>(&mut self) {
        if I < self.1 {
            self.0 = self.0.take().map(|w| w.with_system(empty::<I>));
        }
    }
}

fn empty_systems(c: &mut Criterion) {
    init_bevy_pool();
    for n in [50, 1000] {
        let mut group = c.benchmark_group(format!("empty_systems/{n}"));
        group.bench_function("folio", |b| {
            let mut world = folio_schedule::World::new();
            let mut sink = FolioSink(folio_schedule::Schedule::new(), n);
            add_empty(&mut sink);
            assert_eq!(sink.0.len(), n);
            sink.0.run(&mut world).unwrap();
            b.iter(|| sink.0.run(black_box(&mut world)).unwrap())
        });
        group.bench_function("folio_1thread", |b| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
            let mut world = folio_schedule::World::new();
            let mut sink = FolioSink(folio_schedule::Schedule::new(), n);
            add_empty(&mut sink);
            sink.0.run(&mut world).unwrap();
            pool.install(|| b.iter(|| sink.0.run(black_box(&mut world)).unwrap()))
        });
        group.bench_function("bevy", |b| {
            let mut world = bevy_ecs::world::World::new();
            let mut sink = BevySink(bevy_schedule(), n);
            add_empty(&mut sink);
            assert_eq!(sink.0.systems_len(), n);
            sink.0.run(&mut world);
            b.iter(|| sink.0.run(black_box(&mut world)))
        });
        group.bench_function("shipyard", |b| {
            let world = shipyard::World::new();
            let mut sink = ShipyardSink(Some(shipyard::Workload::new("empty")), n);
            add_empty(&mut sink);
            let (workload, info) = sink.0.take().unwrap().build().unwrap();
            assert_eq!(info.batches_info.iter().map(|b| b.systems().count()).sum::<usize>(), n);
            workload.run_with_world(&world).unwrap();
            b.iter(|| workload.run_with_world(black_box(&world)).unwrap())
        });
        group.finish();
    }
}

// ----- frame_churn -----

fn frame_churn(c: &mut Criterion) {
    init_bevy_pool();
    let mut group = c.benchmark_group("frame_churn");
    for form in Form::ALL {
        for lib in Lib::ALL {
            if !lib.has(form) {
                continue;
            }
            let name = format!("{} ({})", lib.name(), form.name());
            group.bench_function(name, |b| {
                let mut frame = Frame::new(lib, form).expect("a form the library has");
                frame.run(|step| b.iter(step));
                assert_eq!(frame.len(), folio_benches::churn::N);
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = folio_benches::criterion();
    targets = schedule, schedule_par, empty_systems, frame_churn
}
criterion_main!(benches);
