//! Out of memory for real: child processes under `prlimit --data` (private writable memory:
//! committing reserved pages fails with `ENOMEM`, and so does the heap). Every refused
//! operation is a typed [`EntityError::Storage`] with the world unchanged, never an abort (an
//! abort kills the child with a signal, which the parent reports as a failure).
//!
//! Two tests: a churn of every structural operation at three limits, which run out at
//! different points and then keep operating at the limit; and heap blocks too large for
//! what is left (a batch's list, the values a batch hands back, `clear`'s removal-log room, a
//! hooked batch's list), each refused with [`StorageError::Alloc`].
// Native only: child processes under `prlimit`; wasm32 runs neither.
#![cfg(not(target_family = "wasm"))]

use std::sync::atomic::{AtomicUsize, Ordering};

use folio_archetype::{
    ComponentHooks, DeferredWorld, Entity, EntityError, StorageError, StorageType, World,
};

#[derive(Clone, Copy, Debug, PartialEq)]
struct B(u32);

/// A sparse-set component.
#[derive(Clone, Debug, PartialEq)]
struct S([u64; 4]);

/// A second table component: inserting or removing it moves the entity's row to another table.
#[derive(Clone, Copy, Debug, PartialEq)]
struct C([u32; 2]);

/// Zero-sized table markers: the churn inserts the first four (16 combinations, each a table
/// and archetype of its own), and the operations at the limit the others (archetypes, tables
/// and graph edges made under pressure).
#[derive(Clone, Copy, Debug, PartialEq)]
struct M<const N: usize>;

/// This process's private writable memory (`VmData`, what `RLIMIT_DATA` limits), in bytes.
fn vm_data() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmData:")).expect("a VmData line");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("kB");
    kib << 10
}

/// Set (to the stage's name) in the child processes the tests start under `prlimit --data`.
const DATA_CHILD: &str = "FOLIO_DATA_LIMIT_CHILD";

/// Runs `test`'s child of `stage` under `prlimit --data=limit` (or no limit), asserts that it
/// exited successfully (an abort is a signal, not an exit), and returns its `data limit:` line.
fn data_limit_run(test: &str, limit: Option<u64>, stage: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let mut command = match limit {
        Some(limit) => {
            let mut c = std::process::Command::new("prlimit");
            c.arg(format!("--data={limit}")).arg(&exe);
            c
        }
        None => std::process::Command::new(&exe),
    };
    let out = command
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(DATA_CHILD, stage)
        .output()
        .unwrap_or_else(|e| panic!("cannot start prlimit {exe:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // An abort (a heap allocation failure outside `try_reserve`) is a signal, not an exit.
    assert!(out.status.success(), "{stage} child failed ({}):\n{stdout}\n{stderr}", out.status);
    let line = stdout
        .lines()
        .find_map(|l| l.find("data limit:").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("{stage} child did not run:\n{stdout}\n{stderr}"));
    line.to_owned()
}

/// What a child uses before its world (measured by a child without a limit: the parent
/// process runs other tests meanwhile).
fn base_vm_data(test: &str) -> u64 {
    data_limit_run(test, None, "probe")
        .split("vmdata=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("vmdata=N")
}

/// The number after `key=` in a child's line.
fn field(line: &str, key: &str) -> usize {
    line.split(&format!("{key}="))
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{key}=N in {line}"))
}

/// Asserts that `err` is the storage layer's: a refused commit or heap block.
#[track_caller]
fn assert_storage(err: &EntityError, what: &str) {
    assert!(
        matches!(
            err,
            EntityError::Storage(StorageError::Commit { .. } | StorageError::Alloc { .. })
        ),
        "{what}: {err}"
    );
}

/// The entities a data-limit churn spawns in all (its despawns free some of them as it goes).
const CHURN: usize = 10_000_000;

/// Under `prlimit --data` the world gives typed errors, never an abort, at three limits that
/// run out at different points: early (the first table pages and heap blocks), while tables
/// grow past their first megabytes, and late in a churn of 10,000,000 spawns with sparse-set
/// and table inserts and removes (row moves between 32 tables), despawns and removal logs.
/// After the first refused operation the child keeps operating at the limit: spawns, inserts
/// and removes of both storage types, a general-path insert, markers that make new
/// archetypes, tables and graph edges, small batches and `try_clear`; each either succeeds or
/// is refused with a typed error, and after each refusal the invariants hold and the entity
/// count is unchanged. Despawns need no memory, and free room for later operations.
#[test]
#[cfg_attr(miri, ignore = "starts a process")]
fn exhausted_memory_under_a_data_limit_is_a_typed_error() {
    let test = "exhausted_memory_under_a_data_limit_is_a_typed_error";
    if let Some(stage) = std::env::var_os(DATA_CHILD) {
        return churn_child(stage.to_str().expect("a stage name"));
    }
    // Limits above what a child uses before its world, plus its list of ids, made up front.
    let base = base_vm_data(test) + (CHURN * size_of::<Entity>()) as u64;
    let mut spawned_at_failure = Vec::new();
    for (stage, extra) in [("early", 1u64 << 20), ("tables", 24 << 20), ("late", 260 << 20)] {
        let line = data_limit_run(test, Some(base + extra), stage);
        println!("{line}");
        spawned_at_failure.push(field(&line, "spawned"));
        assert!(field(&line, "refused") >= 2, "{line}");
    }
    // Each limit runs out at a different point: early, during table growth, late in the churn.
    let [early, tables, late] = spawned_at_failure[..] else { unreachable!() };
    assert!(early < 100_000, "early: the first error came after {early} spawns");
    assert!(early < tables && tables < late, "{spawned_at_failure:?}");
    assert!(late > CHURN / 4, "late: the first error came after {late} spawns");
}

/// One operation of the data-limit churn, of kind `op % 16`.
fn churn_op(world: &mut World, live: &mut Vec<Entity>, op: usize) -> Result<(), EntityError> {
    let pick = |k: usize| live[(op / 16).wrapping_mul(k) % live.len()];
    match op % 16 {
        // Spawns: four of every sixteen operations.
        0 | 4 | 8 | 12 => live.push(world.try_spawn((B(op as u32),))?),
        // A sparse-set insert into an entity, and a remove from another.
        1 | 9 => world.insert(pick(1), (S([op as u64; 4]),))?,
        2 => ok_if_missing(world.try_remove::<(S,)>(pick(7)))?,
        // A table insert and remove: the entity's row moves to another table.
        3 => world.insert(pick(3), (C([op as u32; 2]),))?,
        10 => ok_if_missing(world.try_remove::<(C,)>(pick(5)))?,
        // A marker: 16 combinations, so 16 (and with `C`, 32) tables in all.
        5 | 13 => {
            let e = pick(11);
            match op / 16 % 4 {
                0 => world.insert(e, (M::<0>,))?,
                1 => world.insert(e, (M::<1>,))?,
                2 => world.insert(e, (M::<2>,))?,
                _ => world.insert(e, (M::<3>,))?,
            }
        }
        // Despawns: two of every sixteen, so the world grows by one entity per eight.
        6 | 14 => {
            let e = live.swap_remove(op / 16 % live.len());
            if let Err(err) = world.despawn(e) {
                live.push(e);
                return Err(err);
            }
        }
        // The removal logs age, as a schedule's runs would age them.
        7 if op % (1 << 16) == 7 => world.update_removals(),
        _ => {}
    }
    Ok(())
}

/// A remove of a component the entity lacks is no failure here; the removed values drop.
fn ok_if_missing<T>(result: Result<T, EntityError>) -> Result<(), EntityError> {
    match result {
        Ok(_) | Err(EntityError::MissingComponent { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// One operation at the limit, of kind `k % 12`: what the churn does, and what makes new
/// archetypes, tables and edges, general-path and batch moves.
fn pressure_op(world: &mut World, live: &mut Vec<Entity>, k: usize) -> Result<(), EntityError> {
    let pick = |j: usize| live[k.wrapping_mul(j).wrapping_add(j) % live.len()];
    match k % 12 {
        0 => live.push(world.try_spawn((B(k as u32), C([1, 2])))?),
        1 => world.insert(pick(1), (S([k as u64; 4]),))?,
        2 => ok_if_missing(world.try_remove::<(S,)>(pick(2)))?,
        3 => world.insert(pick(3), (C([k as u32; 2]),))?,
        4 => ok_if_missing(world.try_remove::<(C,)>(pick(4)))?,
        // A bundle of both storage types: the general path.
        5 => world.insert(pick(5), (C([3, 4]), S([5; 4])))?,
        // Markers never used before: new archetypes, tables, edges and move plans.
        6 => match k / 12 % 4 {
            0 => world.insert(pick(6), (M::<4>,))?,
            1 => world.insert(pick(6), (M::<5>, M::<6>))?,
            2 => world.insert(pick(6), (M::<7>, S([7; 4])))?,
            _ => ok_if_missing(world.try_remove::<(M<4>,)>(pick(6)))?,
        },
        // Small batches: a list, a run of targets, the values handed back.
        7 => {
            let batch: Vec<_> = (0..8).map(|j| (pick(7 + j), (M::<8>,))).collect();
            world.insert_batch(batch)?;
        }
        8 => {
            let mut es: Vec<_> = (0..8).map(|j| pick(7 + j)).collect();
            es.sort_unstable();
            es.dedup();
            es.retain(|&e| world.has::<M<8>>(e));
            world.remove_batch::<(M<8>,)>(es)?;
        }
        10 => {
            let e = live.swap_remove(k.wrapping_mul(7) % live.len());
            if let Err(err) = world.despawn(e) {
                live.push(e);
                return Err(err);
            }
        }
        _ => {}
    }
    Ok(())
}

/// The churn until the first refused operation, which must be a typed storage error; then
/// operations at the limit; then the checks that the world is intact and works again.
fn churn_child(stage: &str) {
    if stage == "probe" {
        println!("data limit: vmdata={}", vm_data());
        return;
    }
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    world.track_removals::<C>();
    // The ids; its room is made up front, so that the test's own bookkeeping is not what the
    // limit refuses (a heap abort here would not be the world's).
    let mut live: Vec<Entity> = Vec::with_capacity(CHURN + 1000);
    let holder = Vec::with_capacity(BALLAST_BLOCKS);
    live.push(world.try_spawn((B(0),)).unwrap());
    let mut spawned = 1usize;
    let mut op = 0usize;
    let err = loop {
        assert!(spawned < CHURN, "{stage}: nothing was refused in {spawned} spawns");
        let (before, len) = (live.len(), world.len());
        if let Err(e) = churn_op(&mut world, &mut live, op) {
            assert_eq!(world.len(), len, "{stage}: a refused operation changed the entity count");
            break e;
        }
        spawned += live.len().saturating_sub(before);
        op += 1;
    };
    assert_storage(&err, stage);
    world.check_invariants();
    assert_eq!(world.len(), live.len(), "{stage}: a refused operation changed the entity count");
    // At the limit, with what it leaves filled (so any block of 64 KiB or more is refused):
    // every kind of operation, each a success or a typed refusal.
    let blocks = ballast(holder);
    let mut refused = 1;
    let mut check = |result: Result<(), EntityError>, len: usize, world: &World, what: &str| {
        if let Err(e) = result {
            assert_storage(&e, &format!("{stage}: {what}"));
            assert_eq!(world.len(), len, "{stage}: refused {what} changed the entity count");
            world.check_invariants();
            refused += 1;
        }
    };
    for k in 0..48 {
        let len = world.len();
        let result = pressure_op(&mut world, &mut live, k);
        check(result, len, &world, &format!("op {k}"));
        assert_eq!(world.len(), live.len(), "{stage}: op {k}");
    }
    // A clear needs room for a removal-log entry per entity with a `C` (tracked): refused
    // with nothing changed, or done.
    let len = world.len();
    let cleared = world.try_clear();
    if cleared.is_ok() {
        live.clear();
    }
    check(cleared, len, &world, "try_clear");
    let ballast_blocks = blocks.len();
    drop(blocks);
    println!(
        "data limit: stage={stage} op={} spawned={spawned} live={} refused={refused} \
         ballast={ballast_blocks} archetypes={} tables={} error: {err}",
        op % 16,
        live.len(),
        world.archetypes().len(),
        world.tables().len()
    );
    // Despawning needs no memory but a removal-log entry for an entity with a `C`: aging the
    // logs (as a schedule does) frees them, and a refused despawn then succeeds.
    for e in live.drain(live.len() / 2..) {
        if let Err(err) = world.despawn(e) {
            assert_storage(&err, &format!("{stage}: despawn"));
            world.update_removals();
            world.update_removals();
            world.despawn(e).unwrap_or_else(|e| panic!("{stage}: despawn refused twice: {e}"));
        }
    }
    world.check_invariants();
    world.update_removals();
    world.update_removals();
    // The rows freed are reused.
    for k in 0..1000 {
        let e = world
            .try_spawn((B(k),))
            .unwrap_or_else(|e| panic!("{stage}: spawn after despawns: {e}"));
        world.insert(e, (S([k as u64; 4]),)).unwrap_or_else(|e| panic!("{stage}: insert: {e}"));
        world.insert(e, (C([k; 2]),)).unwrap_or_else(|e| panic!("{stage}: insert: {e}"));
        world.try_remove::<(S,)>(e).unwrap_or_else(|e| panic!("{stage}: remove: {e}"));
        world.try_remove::<(C,)>(e).unwrap_or_else(|e| panic!("{stage}: remove: {e}"));
        live.push(e);
    }
    world.check_invariants();
    assert_eq!(world.len(), live.len());
    world.update_removals();
    world.update_removals();
    for e in live.drain(..) {
        if world.despawn(e).is_err() {
            world.update_removals();
            world.update_removals();
            world.despawn(e).unwrap();
        }
    }
    world.check_invariants();
    assert!(world.is_empty());
}

/// A 4 KiB table component: a batch of 256 hands back (or takes) a megabyte of them.
#[derive(Clone, Debug, PartialEq)]
struct Big([u8; 4096]);

/// The same, stored in a sparse set.
#[derive(Clone, Debug, PartialEq)]
struct BigS([u8; 4096]);

#[derive(Clone, Copy, Debug, PartialEq)]
struct B2(u32);

#[derive(Clone, Copy, Debug, PartialEq)]
struct B3(u32);

/// Has an `on_remove` hook, counted in [`HOOKED`].
#[derive(Clone, Copy, Debug, PartialEq)]
struct H(u8);

static HOOKED: AtomicUsize = AtomicUsize::new(0);

fn count_removal(_: &mut DeferredWorld<'_>, _: Entity) {
    HOOKED.fetch_add(1, Ordering::Relaxed);
}

/// Entities of each fixture of [`refused_blocks_child`].
const FIXTURE: usize = 100_000;

/// A batch of 256 `Big`s: a megabyte.
const BLOCK: usize = 256;

/// Heap blocks larger than what is left under the limit, each refused with
/// [`StorageError::Alloc`] and nothing changed, where the allocation used to abort: the list
/// `insert_batch` collects its batch into; the values `remove_batch` hands back when it moves
/// a table's tail as a block and when it moves an archetype list's tail along a sparse-set
/// edge; the removal-log room `try_clear` needs (no hook runs); the list a hooked
/// `despawn_batch` collects (it then despawns one at a time, each entity's hook run once). The
/// child fills what the limit leaves with blocks of its own first, so the refusals are
/// certain; then frees them, and the same operations succeed.
#[test]
#[cfg_attr(miri, ignore = "starts a process")]
fn exhausted_memory_under_a_data_limit_refuses_large_blocks_with_typed_errors() {
    let test = "exhausted_memory_under_a_data_limit_refuses_large_blocks_with_typed_errors";
    if std::env::var_os(DATA_CHILD).is_some_and(|s| s == "probe") {
        println!("data limit: vmdata={}", vm_data());
        return;
    }
    if std::env::var_os(DATA_CHILD).is_some() {
        return refused_blocks_child();
    }
    let line = data_limit_run(test, Some(base_vm_data(test) + (96 << 20)), "blocks");
    println!("{line}");
    assert_eq!(field(&line, "refused"), 5, "{line}");
}

/// The most blocks [`ballast`] makes (its list is made before the limit is near).
const BALLAST_BLOCKS: usize = 1024;

/// Fills what the data limit leaves with blocks of at least 64 KiB (smaller ones stay free for
/// the test's own bookkeeping), kept in `blocks` (empty, with room for [`BALLAST_BLOCKS`]).
fn ballast(mut blocks: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut size = 64 << 20;
    while size >= 64 << 10 && blocks.len() < blocks.capacity() {
        let mut block = Vec::new();
        match block.try_reserve_exact(size) {
            Ok(()) => blocks.push(block),
            Err(_) => size /= 2,
        }
    }
    blocks
}

fn refused_blocks_child() {
    let mut world = World::new();
    world.register_component::<BigS>(StorageType::SparseSet).unwrap();
    world.track_removals::<B2>();
    world.set_hooks::<H>(ComponentHooks::new().on_remove(count_removal));
    // Table `{B2}` keeps room for every row, so moving rows back into it commits nothing.
    let b2: Vec<Entity> = (0..FIXTURE as u32).map(|i| world.spawn((B2(i),))).collect();
    let tail = &b2[FIXTURE - BLOCK..];
    world.insert_batch(tail.iter().map(|&e| (e, (Big([1; 4096]),)))).unwrap();
    // `{B3}` and `{B3, BigS}` share a table, so both keep entity lists.
    let b3: Vec<Entity> = (0..1000).map(|i| world.spawn((B3(i),))).collect();
    let b3_tail = &b3[1000 - BLOCK..];
    world.insert_batch(b3_tail.iter().map(|&e| (e, (BigS([2; 4096]),)))).unwrap();
    let hooked: Vec<Entity> = (0..FIXTURE).map(|i| world.spawn((H(i as u8),))).collect();
    let head = &b2[..BLOCK];
    world.check_invariants();
    let len = world.len();

    let blocks = ballast(Vec::with_capacity(BALLAST_BLOCKS));
    let mut refused = 0;
    let mut expect_refused = |result: Result<(), EntityError>, what: &str, world: &World| {
        let err = result.expect_err(what);
        assert!(matches!(err, EntityError::Storage(StorageError::Alloc { .. })), "{what}: {err}");
        assert_eq!(world.len(), len, "{what}");
        world.check_invariants();
        refused += 1;
    };
    // The batch list of an insert (collected from an iterator).
    let r = world.insert_batch(head.iter().map(|&e| (e, (Big([3; 4096]),))));
    expect_refused(r, "insert_batch", &world);
    assert!(!world.has::<Big>(head[0]));
    // The values handed back by a table's tail moved as a block, and by a list's tail.
    let r = world.remove_batch::<(Big,)>(tail.iter().copied()).map(drop);
    expect_refused(r, "remove_batch, a table's tail", &world);
    assert_eq!(world.get::<Big>(tail[0]).map(|b| b.0[0]), Some(1));
    let r = world.remove_batch::<(BigS,)>(b3_tail.iter().copied()).map(drop);
    expect_refused(r, "remove_batch, a list's tail", &world);
    assert_eq!(world.get::<BigS>(b3_tail[0]).map(|b| b.0[0]), Some(2));
    // A clear's removal-log room: refused before any hook runs.
    expect_refused(world.try_clear(), "try_clear", &world);
    assert_eq!(HOOKED.load(Ordering::Relaxed), 0, "a refused clear ran hooks");
    // A hooked despawn_batch's list: refused, so one at a time, each hook run once.
    let despawned = world.despawn_batch(hooked.iter().copied());
    assert_eq!(despawned, FIXTURE);
    assert_eq!(HOOKED.load(Ordering::Relaxed), FIXTURE);
    world.check_invariants();
    refused += 1;
    println!("data limit: stage=blocks refused={refused} ballast={}", blocks.len());

    // Memory back: the same operations succeed.
    drop(blocks);
    world.insert_batch(head.iter().map(|&e| (e, (Big([3; 4096]),)))).unwrap();
    assert_eq!(world.remove_batch::<(Big,)>(tail.iter().copied()).unwrap().len(), BLOCK);
    assert_eq!(world.remove_batch::<(BigS,)>(b3_tail.iter().copied()).unwrap().len(), BLOCK);
    world.check_invariants();
    world.try_clear().unwrap();
    assert!(world.is_empty());
    assert_eq!(world.removed::<B2>().count(), FIXTURE);
    world.check_invariants();
}
