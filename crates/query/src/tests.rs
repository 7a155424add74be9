//! The three iteration paths, access checks, change detection, and parallel iteration.

use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pos(f32);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Vel(f32);
#[derive(Debug, Clone, Copy, PartialEq)]
struct Frozen;
#[derive(Debug, Clone, Copy, PartialEq)]
struct Marked(u32);

fn world() -> World {
    let mut world = World::new();
    world.register_component::<Marked>(StorageType::SparseSet).unwrap();
    world
}

#[test]
fn table_queries_walk_tables_and_see_every_archetype() {
    let mut world = world();
    let a = world.spawn((Pos(0.0), Vel(1.0)));
    let b = world.spawn((Pos(10.0), Vel(2.0), Frozen));
    let c = world.spawn((Pos(20.0),));
    let mut q = world.query::<(Entity, &mut Pos, &Vel)>();
    assert_eq!(q.matches().mode(), IterMode::Tables);
    let iter = q.iter_mut(&mut world);
    assert_eq!(iter.len(), 2);
    for (_, mut p, v) in iter {
        p.0 += v.0;
    }
    assert_eq!(world.get::<Pos>(a), Some(&Pos(1.0)));
    assert_eq!(world.get::<Pos>(b), Some(&Pos(12.0)));
    assert_eq!(world.get::<Pos>(c), Some(&Pos(20.0)));

    // An archetype made after the state is picked up.
    let d = world.spawn((Vel(5.0), Pos(30.0), Marked(1)));
    q.for_each_mut(&mut world, |(_, mut p, v)| p.0 += v.0);
    assert_eq!(world.get::<Pos>(d), Some(&Pos(35.0)));
    assert_eq!(world.get::<Pos>(a), Some(&Pos(2.0)));

    let mut not_frozen = world.query_filtered::<Entity, (With<Vel>, Without<Frozen>)>();
    let mut found: Vec<Entity> = not_frozen.iter(&world).collect();
    found.sort();
    let mut expected = vec![a, d];
    expected.sort();
    assert_eq!(found, expected);
}

#[test]
fn sparse_terms_walk_archetypes_or_the_smallest_set() {
    let mut world = world();
    let a = world.spawn((Pos(0.0), Marked(1)));
    let _b = world.spawn((Pos(1.0),));
    let c = world.spawn((Marked(3),));
    let mut both = world.query::<(&Pos, &Marked)>();
    assert_eq!(both.matches().mode(), IterMode::Archetypes);
    assert_eq!(both.iter(&world).collect::<Vec<_>>(), [(&Pos(0.0), &Marked(1))]);

    let mut marked = world.query::<(Entity, &mut Marked)>();
    assert_eq!(marked.matches().mode(), IterMode::Sparse);
    for (_, mut m) in marked.iter_mut(&mut world) {
        m.0 *= 10;
    }
    assert_eq!(world.get::<Marked>(a), Some(&Marked(10)));
    assert_eq!(world.get::<Marked>(c), Some(&Marked(30)));
    let mut count = world.query_filtered::<Entity, With<Marked>>();
    assert_eq!(count.count(&world), 2);

    let mut optional = world.query::<(&Pos, Option<&Marked>)>();
    let mut seen: Vec<_> = optional.iter(&world).map(|(p, m)| (p.0, m.copied())).collect();
    seen.sort_by(|x, y| x.0.total_cmp(&y.0));
    assert_eq!(seen, [(0.0, Some(Marked(10))), (1.0, None)]);
}

#[test]
fn conflicting_access_is_an_error() {
    let world = world();
    let err = QueryState::<(&mut Pos, &Pos)>::try_new(&world).unwrap_err();
    assert!(matches!(err, QueryError::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("Pos"));
    assert!(QueryState::<(&mut Pos, &mut Pos)>::try_new(&world).is_err());
    assert!(QueryState::<(&mut Pos, Option<&Pos>)>::try_new(&world).is_err());
    // A filter reads a row's ticks before the row's `Mut` exists: no conflict.
    assert!(QueryState::<&mut Pos, Changed<Pos>>::try_new(&world).is_ok());
    assert!(QueryState::<&mut Pos, Or<(Added<Pos>, Changed<Pos>)>>::try_new(&world).is_ok());
    assert!(QueryState::<(&Pos, &Pos)>::try_new(&world).is_ok());
}

#[test]
fn changed_sees_real_writes_only() {
    let mut world = world();
    let a = world.spawn((Pos(0.0), Marked(0)));
    let b = world.spawn((Pos(1.0), Marked(1)));
    let mut changed = world.query_filtered::<Entity, Changed<Pos>>();
    let mut changed_sparse = world.query_filtered::<Entity, Changed<Marked>>();
    assert_eq!(changed.iter(&world).count(), 2, "the first run sees everything");
    assert_eq!(changed_sparse.iter(&world).count(), 2);
    assert_eq!(changed.iter(&world).count(), 0);

    let mut write = world.query::<(Entity, &mut Pos, &mut Marked)>();
    for (e, mut p, m) in write.iter_mut(&mut world) {
        let _ = p.0; // reading marks nothing
        if e == b {
            p.0 = 5.0;
        }
        let _ = &*m;
    }
    assert_eq!(changed.iter(&world).collect::<Vec<_>>(), [b]);
    assert_eq!(changed_sparse.iter(&world).count(), 0);
    world.get_mut::<Marked>(a).unwrap().0 = 7;
    assert_eq!(changed_sparse.iter(&world).collect::<Vec<_>>(), [a]);

    let mut added = world.query_filtered::<Entity, Added<Pos>>();
    assert_eq!(added.iter(&world).count(), 2);
    let c = world.spawn((Pos(3.0),));
    assert_eq!(added.iter(&world).collect::<Vec<_>>(), [c]);
}

#[test]
fn a_writer_filtered_by_its_own_changes() {
    let mut world = world();
    let a = world.spawn((Pos(0.0), Marked(0)));
    let b = world.spawn((Pos(1.0), Marked(1)));
    let mut touch = world.query::<(Entity, &mut Pos)>();
    let mut bump = world.query_filtered::<(Entity, &mut Pos), Changed<Pos>>();
    let mut bump_sparse = world.query_filtered::<(Entity, &mut Marked), Changed<Marked>>();
    assert_eq!(bump.iter_mut(&mut world).count(), 2, "first run: everything");
    assert_eq!(bump_sparse.iter_mut(&mut world).count(), 2);
    // Its own writes are not changes it reports next time.
    for (_, mut p) in bump.iter_mut(&mut world) {
        p.0 += 1.0;
    }
    assert_eq!(bump.iter_mut(&mut world).count(), 0);
    for (e, mut p) in touch.iter_mut(&mut world) {
        if e == a {
            p.0 = 10.0;
        }
    }
    let seen: Vec<Entity> = bump
        .iter_mut(&mut world)
        .map(|(e, mut p)| {
            p.0 += 1.0;
            e
        })
        .collect();
    assert_eq!(seen, [a]);
    assert_eq!(world.get::<Pos>(a), Some(&Pos(11.0)));
    world.get_mut::<Marked>(b).unwrap().0 = 5;
    let seen: Vec<Entity> = bump_sparse.iter_mut(&mut world).map(|(e, _)| e).collect();
    assert_eq!(seen, [b]);
}

#[test]
fn get_get_many_mut_and_single() {
    let mut world = world();
    let a = world.spawn((Pos(0.0), Vel(1.0)));
    let b = world.spawn((Pos(1.0), Vel(2.0)));
    let lone = world.spawn((Pos(9.0),));
    let mut q = world.query::<(&mut Pos, &Vel)>();
    assert_eq!(q.get(&world, a).unwrap().0, &Pos(0.0));
    assert_eq!(q.get(&world, lone).unwrap_err(), QueryError::DoesNotMatch(lone));
    let [(mut pa, _), (mut pb, _)] = q.get_many_mut(&mut world, [a, b]).unwrap();
    std::mem::swap(&mut pa.0, &mut pb.0);
    assert_eq!(world.get::<Pos>(a), Some(&Pos(1.0)));
    assert_eq!(q.get_many_mut(&mut world, [a, a]).unwrap_err(), QueryError::DuplicateEntity(a));
    world.despawn(b).unwrap();
    assert_eq!(q.get_mut(&mut world, b).unwrap_err(), QueryError::NoSuchEntity(b));
    assert_eq!(q.single(&world).unwrap().0, &Pos(1.0));
    let mut all = world.query::<&Pos>();
    assert_eq!(all.single(&world).unwrap_err(), QueryError::MultipleEntities);
    let mut none = world.query::<&Frozen>();
    assert_eq!(none.single(&world).unwrap_err(), QueryError::NoEntities);
    assert!(none.is_empty(&world));
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_state_refuses_another_world() {
    let world = world();
    let other = World::new();
    let mut q = world.query::<&Pos>();
    assert_eq!(q.validate_world(&other), Err(QueryError::WorldMismatch));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| q.iter(&other).count()));
    assert!(caught.is_err());
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_refused_world_changes_neither_the_state_nor_that_world() {
    // Every entry point that takes a `&mut World` checks it before it takes a tick.
    let mut world = world();
    world.spawn((Pos(1.0),));
    world.spawn((Pos(2.0),));
    let mut other = World::new();
    let mut q = world.query::<&mut Pos>();
    q.for_each_mut(&mut world, |_| {});
    let (last_run, other_tick) = (q.last_run(), other.change_tick());
    type Attempt = fn(&mut QueryState<&'static mut Pos>, &mut World);
    let attempts: [(&str, Attempt); 3] = [
        ("for_each_combination_mut", |q, w| q.for_each_combination_mut::<2>(w, |_| {})),
        ("for_each_mut", |q, w| q.for_each_mut(w, |_| {})),
        ("iter_mut", |q, w| q.iter_mut(w).for_each(|_| {})),
    ];
    for (name, attempt) in attempts {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            attempt(&mut q, &mut other);
        }));
        assert!(caught.is_err(), "{name} refuses another world");
        assert_eq!(q.last_run(), last_run, "{name}: the state's last run is unchanged");
        assert_eq!(other.change_tick(), other_tick, "{name}: the other world's tick too");
    }
}

/// 2^32 ticks: instant in release builds (the loop folds), about a minute in debug ones, so
/// ignored there; CI runs it in release.
#[test]
#[cfg_attr(debug_assertions, ignore = "2^32 ticks: run in release")]
fn a_state_idle_for_more_than_2_pow_32_ticks_still_sees_what_changed() {
    let mut world = world();
    let e = world.spawn((Pos(0.0),));
    let mut changed = world.query_filtered::<Entity, Changed<Pos>>();
    assert_eq!(changed.iter(&world).count(), 1, "a new entity counts as changed");
    // Idle for 2^32 - 500 ticks, the world's ticks checked every 2^28 as a game would; then
    // a change, and 1,000 ticks more: the state's 32-bit age has wrapped to 500.
    let advance = |world: &mut World, ticks: u64| {
        for i in 0..ticks {
            world.increment_change_tick_mut();
            if i % (1 << 28) == 0 {
                world.check_change_ticks();
            }
        }
    };
    advance(&mut world, (1u64 << 32) - 500);
    world.get_mut::<Pos>(e).unwrap().0 = 1.0;
    advance(&mut world, 1_000);
    world.check_change_ticks();
    assert_eq!(changed.iter(&world).collect::<Vec<_>>(), [e], "the change is seen");
    assert_eq!(changed.iter(&world).count(), 0, "and only once");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn misuse_panics_name_the_caller_s_line() {
    use std::sync::Mutex;
    static SEEN: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());
    static THIS_TEST: Mutex<Option<std::thread::ThreadId>> = Mutex::new(None);
    *THIS_TEST.lock().unwrap() = Some(std::thread::current().id());
    let world = world();
    let other = World::new();
    let mut q = world.query::<&Pos>();
    let previous = std::panic::take_hook();
    // Other tests panic meanwhile, some with the same messages: only this thread's panics are
    // recorded.
    std::panic::set_hook(Box::new(|info| {
        if *THIS_TEST.lock().unwrap() == Some(std::thread::current().id()) {
            let location = info.location().expect("a location");
            SEEN.lock().unwrap().push((location.file().to_owned(), location.line()));
        }
    }));
    let lines = [line!() + 1, line!() + 3];
    let iter = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| q.iter(&other).count()));
    let build = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.query::<(&mut Pos, &Pos)>().matches().mode()
    }));
    assert!(iter.is_err() && build.is_err());
    let mut expected: Vec<(String, u32)> = lines.iter().map(|&l| (file!().to_owned(), l)).collect();
    // Every other form that runs the state on a world, given another world: each call is on the
    // line `line!()` names, and must panic there.
    let mut case = |line: u32, call: &mut dyn FnMut()| {
        expected.push((file!().to_owned(), line));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
        assert!(result.is_err(), "the call on line {line} did not panic");
    };
    let mut other_mut = World::new();
    let e = other_mut.spawn((Pos(0.0),));
    case(line!(), &mut || _ = q.iter_mut(&mut other_mut).count());
    case(line!(), &mut || _ = q.get(&other, e));
    case(line!(), &mut || _ = q.get_mut(&mut other_mut, e));
    case(line!(), &mut || _ = q.get_many(&other, [e]));
    case(line!(), &mut || _ = q.get_many_mut(&mut other_mut, [e]));
    case(line!(), &mut || q.for_each(&other, |_| {}));
    case(line!(), &mut || q.for_each_mut(&mut other_mut, |_| {}));
    case(line!(), &mut || _ = q.par_iter(&other));
    case(line!(), &mut || _ = q.par_iter_mut(&mut other_mut));
    case(line!(), &mut || _ = q.iter_many(&other, [e]).count());
    case(line!(), &mut || q.for_each_many_mut(&mut other_mut, [e], |_| {}));
    case(line!(), &mut || _ = q.iter_combinations::<2>(&other).count());
    case(line!(), &mut || q.for_each_combination_mut::<2>(&mut other_mut, |_| {}));
    case(line!(), &mut || _ = q.single(&other));
    case(line!(), &mut || _ = q.single_mut(&mut other_mut));
    case(line!(), &mut || _ = q.is_empty(&other));
    case(line!(), &mut || _ = q.count(&other));
    case(line!(), &mut || q.update_archetypes(&other));
    case(line!(), &mut || _ = other.query::<(&mut Pos, &Pos)>());
    std::panic::set_hook(previous);
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(seen, expected, "each panic points at the line that misused the query");
}

#[test]
#[cfg_attr(target_family = "wasm", ignore = "starts threads, which wasm32 has not")]
fn par_iter_mut_visits_every_entity_once() {
    let mut world = world();
    let mut n = 0u32;
    // Tables of uneven sizes, some sparse-marked.
    let sizes: &[usize] = if cfg!(miri) { &[1, 7, 20, 3] } else { &[1, 7, 64, 65, 300, 1000, 3] };
    for &size in sizes {
        for _ in 0..size {
            world.spawn((Pos(n as f32), Marked(n)));
            n += 1;
        }
        world.spawn((Pos(0.0), Frozen));
        n += 1;
    }
    let visits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let mut q = world.query::<(Entity, &mut Pos)>();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    pool.install(|| {
        q.par_iter_mut(&mut world).batch_size(16).for_each(|(e, mut p)| {
            visits[e.index() as usize].fetch_add(1, Ordering::Relaxed);
            p.0 += 1.0;
        })
    });
    assert!(visits.iter().all(|v| v.load(Ordering::Relaxed) == 1));
    let mut sparse = world.query::<(Entity, &Marked)>();
    let count = AtomicU32::new(0);
    pool.install(|| {
        sparse.par_iter(&world).batch_size(10).for_each(|_| {
            count.fetch_add(1, Ordering::Relaxed);
        })
    });
    assert_eq!(count.load(Ordering::Relaxed), n - sizes.len() as u32);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_system_tick_stands_in_for_a_new_tick_on_its_world_only_and_is_restored() {
    let mut world = world();
    let e = world.spawn((Pos(0.0),));
    let other = World::new();
    let mut q = world.query::<&Pos>();
    let before = world.change_tick();
    with_system_tick(world.id(), 3, || {
        assert_eq!(q.iter(&world).count(), 1);
        assert_eq!(q.last_run(), Some(3), "the system's tick, not a new one");
        assert_eq!(world.change_tick(), before, "nothing taken from the counter");
        with_system_tick(world.id(), 5, || {
            q.iter(&world).count();
            assert_eq!(q.last_run(), Some(5), "the inner call's tick");
        });
        q.iter(&world).count();
        assert_eq!(q.last_run(), Some(3), "the outer tick is back");
        // Another world's system tick does not apply here.
        with_system_tick(other.id(), 9, || {
            q.iter(&world).count();
            assert_eq!(q.last_run(), Some(before), "a tick of this world's counter");
        });
    });
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_system_tick(world.id(), 7, || panic!("a system panics"))
    }));
    assert!(unwound.is_err());
    q.iter(&world).count();
    assert_eq!(q.last_run(), Some(before + 1), "no system tick once the panic unwound");
    assert_eq!(q.get(&world, e).unwrap(), &Pos(0.0));
}

#[test]
fn only_terms_that_compare_or_stamp_ticks_read_them() {
    fn reads<Q: WorldQuery>() -> bool {
        Q::READS_TICKS
    }
    assert!(!reads::<(Entity, &Pos, Option<&Vel>, Has<Frozen>)>());
    assert!(!reads::<(With<Pos>, Without<Frozen>)>());
    assert!(!reads::<()>());
    assert!(reads::<&mut Pos>());
    assert!(reads::<Ref<Pos>>());
    assert!(reads::<Option<&mut Pos>>());
    assert!(reads::<(&Pos, Changed<Vel>)>());
    assert!(reads::<Or<(With<Pos>, Added<Vel>)>>());

    // A lookup whose filter compares ticks still sees changes made since the state's last run,
    // beside a tick-free state looking at the same entity.
    let mut world = world();
    let e = world.spawn((Pos(0.0), Vel(0.0)));
    let mut changed = world.query_filtered::<&Pos, Changed<Vel>>();
    let mut plain = world.query::<&Pos>();
    changed.iter(&world).for_each(drop); // a run: from now on, only new changes count
    assert_eq!(changed.get(&world, e), Err(QueryError::DoesNotMatch(e)));
    world.get_mut::<Vel>(e).unwrap().0 = 1.0;
    assert_eq!(changed.get(&world, e), Ok(&Pos(0.0)));
    assert_eq!(plain.get(&world, e), Ok(&Pos(0.0)));
}
