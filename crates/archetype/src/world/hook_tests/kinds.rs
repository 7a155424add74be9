//! Setting hooks (replacing and turning them off, a world without hooks), and each kind of hook
//! on its own taking the hooked paths.

use super::*;

// ----- setting hooks -----

#[test]
fn set_hooks_returns_the_old_hooks_and_empty_hooks_turn_them_off() {
    let mut world = World::new();
    world.insert_resource(Log::default());
    assert!(world.hooks::<A>().is_empty(), "never registered");
    world.spawn((Plain(0),));
    assert!(world.hooks::<Plain>().is_empty(), "registered, no hooks");
    assert!(ComponentHooks::new().is_empty());
    assert!(!ComponentHooks::new().on_remove(log_remove::<A>).is_empty());

    assert!(world.set_hooks::<A>(logging::<A>()).is_empty());
    assert!(!world.hooks::<A>().is_empty());
    let e = world.spawn((A(1),));
    assert_eq!(take_log(&mut world).len(), 2);

    let old = world.set_hooks::<A>(ComponentHooks::new());
    assert!(!old.is_empty());
    assert!(world.hooks::<A>().is_empty());
    world.insert(e, (A(2),)).unwrap();
    let f = world.spawn((A(3),));
    assert_eq!(world.remove::<(A,)>(e), Some((A(2),)));
    world.insert_batch([(e, (A(4),))]).unwrap();
    world.remove_batch::<(A,)>([e]).unwrap();
    world.despawn(f).unwrap();
    world.spawn_batch([(A(5),), (A(6),)]);
    world.despawn_batch([e]);
    world.clear();
    assert_eq!(take_log(&mut world), [], "no hooks run once turned off");

    // The returned hooks are the ones set: setting them back turns the logging on again, also
    // for an entity spawned while they were off, in an archetype made then.
    let h = world.spawn((A(8), B(8)));
    assert!(world.set_hooks::<A>(old).is_empty());
    let g = world.spawn((A(7),));
    assert_eq!(take_log(&mut world), [(Add, "A", g, Some(7)), (Insert, "A", g, Some(7))]);
    world.despawn(g).unwrap();
    assert_eq!(take_log(&mut world), [(Replace, "A", g, Some(7)), (Remove, "A", g, Some(7))]);
    world.despawn(h).unwrap();
    assert_eq!(take_log(&mut world), [(Replace, "A", h, Some(8)), (Remove, "A", h, Some(8))]);
    world.check_invariants();
}

#[test]
fn a_world_without_hooks_defers_nothing() {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    let e: Vec<Entity> = (0..4).map(|i| world.spawn((A(i), S(i)))).collect();
    world.insert(e[0], (B(0),)).unwrap();
    assert_eq!(world.remove::<(A,)>(e[0]), Some((A(0),)));
    world.insert_batch([(e[1], (B(1),))]).unwrap();
    assert_eq!(world.remove_batch::<(S,)>([e[2], e[3]]).unwrap(), [(S(2),), (S(3),)]);
    assert_eq!(world.despawn_batch([e[1], e[2]]), 2);
    world.despawn(e[3]).unwrap();
    assert_eq!(world.deferred_len(), 0);
    world.apply_deferred();
    assert!(world.hooks::<A>().is_empty() && world.hooks::<S>().is_empty());
    assert_eq!(world.len(), 1);
    assert_eq!(world.get::<B>(e[0]), Some(&B(0)));
    world.clear();
    assert!(world.is_empty());
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

// ----- one kind of hook alone -----

/// A world with a [`Log`] and only `hooks` set (on `A`, or on the sparse-set `S` when
/// `sparse`): the operations must take their hooked paths for each kind of hook on its own.
fn world_with_only(hooks: ComponentHooks, sparse: bool) -> World {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    world.insert_resource(Log::default());
    if sparse {
        world.set_hooks::<S>(hooks);
    } else {
        world.set_hooks::<A>(hooks);
    }
    world
}

/// Runs every structural operation on `T` and returns the log, with the entities involved.
fn every_operation<T: Val>(world: &mut World, make: fn(i32) -> T) -> (Vec<Call>, [Entity; 6]) {
    let spawned = world.spawn((make(1), Plain(0)));
    let batch = world.spawn_batch([(make(2),)]);
    let reserved = world.reserve_entity();
    world.spawn_reserved(reserved, (make(3),)).unwrap();
    let bare = world.spawn((Plain(1),));
    world.insert(bare, (make(4),)).unwrap(); // new
    world.insert(bare, (make(5),)).unwrap(); // replacing
    world.insert_batch([(spawned, (make(6),))]).unwrap(); // replacing
    assert!(world.remove::<(T,)>(bare).is_some());
    world.remove_batch::<(T,)>([spawned]).unwrap();
    world.despawn(batch[0]).unwrap();
    let doomed = world.spawn((make(7),));
    assert_eq!(world.despawn_batch([doomed]), 1);
    let cleared = world.spawn((make(8),));
    world.clear();
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
    (take_log(world), [spawned, batch[0], reserved, bare, doomed, cleared])
}

#[test]
fn each_kind_of_hook_runs_on_its_own() {
    for sparse in [false, true] {
        let name = if sparse { "S" } else { "A" };
        let run = |hooks: ComponentHooks| {
            let mut world = world_with_only(hooks, sparse);
            let (log, e) = if sparse {
                every_operation(&mut world, S)
            } else {
                every_operation(&mut world, A)
            };
            let [spawned, batch, reserved, bare, doomed, cleared] = e;
            (log, spawned, batch, reserved, bare, doomed, cleared)
        };

        let (log, spawned, batch, reserved, bare, doomed, cleared) =
            run(ComponentHooks::new().on_add(if sparse { log_add::<S> } else { log_add::<A> }));
        let want: Vec<Call> =
            [(spawned, 1), (batch, 2), (reserved, 3), (bare, 4), (doomed, 7), (cleared, 8)]
                .into_iter()
                .map(|(e, v)| (Add, name, e, Some(v)))
                .collect();
        assert_eq!(log, want, "on_add alone ({name})");

        let (log, spawned, batch, reserved, bare, doomed, cleared) =
            run(ComponentHooks::new().on_insert(if sparse {
                log_insert::<S>
            } else {
                log_insert::<A>
            }));
        let want: Vec<Call> = [
            (spawned, 1),
            (batch, 2),
            (reserved, 3),
            (bare, 4),
            (bare, 5),
            (spawned, 6),
            (doomed, 7),
            (cleared, 8),
        ]
        .into_iter()
        .map(|(e, v)| (Insert, name, e, Some(v)))
        .collect();
        assert_eq!(log, want, "on_insert alone ({name})");

        let (log, spawned, batch, _, bare, doomed, cleared) = run(ComponentHooks::new()
            .on_replace(if sparse { log_replace::<S> } else { log_replace::<A> }));
        let want: Vec<Call> =
            [(bare, 4), (spawned, 1), (bare, 5), (spawned, 6), (batch, 2), (doomed, 7)]
                .into_iter()
                .map(|(e, v)| (Replace, name, e, Some(v)))
                .collect();
        // The clear's calls come last, in the world's order of its entities.
        let (before_clear, rest) = log.split_at(log.len().saturating_sub(2));
        assert_eq!(rest.len(), 2, "on_replace alone ({name}): {log:?}");
        assert_eq!(before_clear, want, "on_replace alone ({name})");
        let mut rest = rest.to_vec();
        rest.sort();
        let mut cleared_want =
            vec![(Replace, name, cleared, Some(8)), (Replace, name, reserved, Some(3))];
        cleared_want.sort();
        assert_eq!(rest, cleared_want, "on_replace alone, clear ({name})");

        let (log, spawned, batch, reserved, bare, doomed, cleared) =
            run(ComponentHooks::new().on_remove(if sparse {
                log_remove::<S>
            } else {
                log_remove::<A>
            }));
        let want: Vec<Call> = [(bare, 5), (spawned, 6), (batch, 2), (doomed, 7)]
            .into_iter()
            .map(|(e, v)| (Remove, name, e, Some(v)))
            .collect();
        assert_eq!(log[..4], want, "on_remove alone ({name})");
        let mut rest = log[4..].to_vec();
        rest.sort();
        let mut cleared_want =
            vec![(Remove, name, cleared, Some(8)), (Remove, name, reserved, Some(3))];
        cleared_want.sort();
        assert_eq!(rest, cleared_want, "on_remove alone, clear ({name})");
    }
}
