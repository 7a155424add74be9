//! The OS saying no: a refused commit at every point of a workload, while reserved entities are
//! flushed, and an exhausted reservation: each gives a typed [`EntityError::Storage`] with the
//! world unchanged (every entity's values as before, invariants intact, reserved entities still
//! reserved), and the world works again once memory is there. A reservation refused under
//! `prlimit --as` and the kernel's mapping-count limit are no errors: the columns fall back to
//! smaller reservations or heap pages, and `memory_stats` says so.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use folio_archetype::vm::{FaultyPages, default_source};
use folio_archetype::{
    Entity, EntityError, StorageConfig, StorageError, StorageType, TableId, World,
};

/// A 64-byte table component: 256 fit in a column's heap block, so the 257th moves the column
/// into its reservation.
#[derive(Clone, Debug, PartialEq)]
struct A(u64, [u8; 56]);

#[derive(Clone, Copy, Debug, PartialEq)]
struct B(u32);

/// A sparse-set component.
#[derive(Clone, Debug, PartialEq)]
struct S([u64; 4]);

/// Larger than a page: its column leaves the heap at the third row.
#[derive(Clone, Debug, PartialEq)]
struct Big([u8; 6000], u64);

/// Counts live values, so the tests see that a failed operation dropped nothing it kept and
/// kept nothing it dropped.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Carried by `A` so its values are counted.
#[derive(Debug, PartialEq)]
struct Counted(u64);

impl Counted {
    fn new(v: u64) -> Self {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Self(v)
    }
}

impl Clone for Counted {
    fn clone(&self) -> Self {
        Self::new(self.0)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

fn a(i: u64) -> A {
    A(i, [i as u8; 56])
}

fn big(i: u64) -> Big {
    Big([i as u8; 6000], i)
}

/// What every entity the test made should hold: `None` for a despawned one.
type Expected = Vec<(Entity, Option<(Option<A>, Option<B>, Option<S>, Option<Big>)>)>;

/// Checks the world against `expected`, value by value.
fn check(world: &World, expected: &Expected) {
    world.check_invariants();
    let mut live = 0;
    for (e, want) in expected {
        match want {
            None => assert!(!world.contains(*e), "{e} should be dead"),
            Some((wa, wb, ws, wbig)) => {
                live += 1;
                assert_eq!(world.get::<A>(*e), wa.as_ref(), "{e}: A");
                assert_eq!(world.get::<B>(*e), wb.as_ref(), "{e}: B");
                assert_eq!(world.get::<S>(*e), ws.as_ref(), "{e}: S");
                assert_eq!(world.get::<Big>(*e), wbig.as_ref(), "{e}: Big");
            }
        }
    }
    assert_eq!(world.len(), live, "live entities");
}

/// One step of the workload.
#[derive(Clone, Copy, Debug)]
enum Step {
    SpawnA(u64),
    SpawnBig(u64),
    InsertB(usize),
    InsertS(usize),
    RemoveA(usize),
    Despawn(usize),
    Counted(usize),
    /// Reserves this many entities (those a refused flush left pending count) and flushes them.
    Reserve(usize, Via),
}

/// How a [`Step::Reserve`] flushes its entities: two operations that can fail only there.
#[derive(Clone, Copy, Debug)]
enum Via {
    TryFlush,
    /// `entity_mut` of entity 0, which flushes first.
    EntityMut,
}

/// A workload that makes every kind of column leave the heap and commit several steps: table
/// columns and their ticks, sparse sets, the entity metas, rows moved between tables, and the
/// empty table and the metas while reserved entities are flushed.
fn workload() -> Vec<Step> {
    let n = if cfg!(miri) { 300 } else { 3000 };
    let mut steps: Vec<Step> = (0..n as u64).map(Step::SpawnA).collect();
    // 2,100 empty entities: the empty table's entity column outgrows its 16 KiB heap block
    // (2,048 ids) in the second flush, and the metas grow past commit points in both. Not under
    // miri, where these worlds cost minutes: the flush tests below cover a refused flush there.
    if !cfg!(miri) {
        steps.push(Step::Reserve(1000, Via::EntityMut));
        steps.push(Step::Reserve(1100, Via::TryFlush));
    }
    steps.extend((0..n).step_by(2).map(Step::InsertB));
    steps.extend((0..n).step_by(3).map(Step::InsertS));
    steps.extend((0..n).step_by(5).map(Step::RemoveA));
    steps.extend((0..n).step_by(7).map(Step::Despawn));
    steps.extend((0..8).map(Step::SpawnBig));
    steps.extend((0..n).step_by(11).map(Step::Counted));
    steps
}

/// Runs one step; on `Ok` updates `expected`.
fn apply(world: &mut World, expected: &mut Expected, step: Step) -> Result<(), EntityError> {
    let entity = |i: usize, expected: &Expected| expected[i].0;
    match step {
        Step::SpawnA(i) => {
            let e = world.try_spawn((a(i),))?;
            expected.push((e, Some((Some(a(i)), None, None, None))));
        }
        Step::SpawnBig(i) => {
            let e = world.try_spawn((big(i), B(i as u32)))?;
            expected.push((e, Some((None, Some(B(i as u32)), None, Some(big(i))))));
        }
        Step::InsertB(i) => {
            world.insert(entity(i, expected), (B(i as u32),))?;
            expected[i].1.as_mut().unwrap().1 = Some(B(i as u32));
        }
        Step::InsertS(i) => {
            world.insert(entity(i, expected), (S([i as u64; 4]),))?;
            expected[i].1.as_mut().unwrap().2 = Some(S([i as u64; 4]));
        }
        Step::RemoveA(i) => {
            let (removed,) = world.try_remove::<(A,)>(entity(i, expected))?;
            let want = expected[i].1.as_mut().unwrap().0.take();
            assert_eq!(Some(removed), want);
        }
        Step::Despawn(i) => {
            // Entities 0, 35, 70, ... had `A` removed at step 5k and are despawned here.
            world.despawn(entity(i, expected))?;
            expected[i].1 = None;
        }
        Step::Counted(i) => {
            // A spawn whose bundle owns counted values: on failure they must be dropped.
            let e = world.try_spawn((Counted::new(i as u64), B(7)))?;
            world.despawn(e)?;
        }
        Step::Reserve(count, via) => {
            // A refused flush leaves its reservations pending; the retry flushes those.
            for _ in world.entities().reserved_len()..count {
                world.reserve_entity();
            }
            let flushed = match via {
                Via::TryFlush => world.try_flush(),
                Via::EntityMut => world.entity_mut(entity(0, expected)).map(drop),
            };
            if let Err(e) = flushed {
                assert_eq!(world.entities().reserved_len(), count, "a refused flush keeps all");
                return Err(e);
            }
            // The flush appended them to the empty table, in order.
            let rows = world.tables()[TableId::EMPTY.index()].entities();
            for &e in &rows[rows.len() - count..] {
                expected.push((e, Some((None, None, None, None))));
            }
        }
    }
    Ok(())
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_refused_commit_anywhere_changes_nothing() {
    // A fault-free run counts the commits the workload makes.
    let counter = FaultyPages::failing_commit(0);
    let config = StorageConfig::new().with_source(counter.clone());
    let mut world = World::with_storage(config.clone());
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    let mut clean = Expected::new();
    // The commits made while reserved entities are flushed (one either side too: columns'
    // colours vary from world to world, so a commit may come one earlier or later).
    let mut flush_commits = BTreeSet::new();
    for step in workload() {
        let before = counter.commits();
        apply(&mut world, &mut clean, step).unwrap();
        if matches!(step, Step::Reserve(..)) {
            flush_commits.extend(before.max(1)..=counter.commits() + 1);
        }
    }
    let commits = counter.commits();
    assert!(commits >= if cfg!(miri) { 3 } else { 10 }, "the workload commits {commits} times");
    assert!(cfg!(miri) || flush_commits.len() > 2, "no flush of reserved entities commits");
    drop(world);

    // Then fail each of those commits in turn (a sample of them under miri, and every one a
    // flush makes).
    let sample = if cfg!(miri) { commits / 4 } else { 1 };
    let ks: BTreeSet<usize> = (1..=commits).step_by(sample.max(1)).chain(flush_commits).collect();
    let (mut failures, mut flush_failures) = (0, 0);
    for k in ks {
        let source = Arc::new(FaultyPages::new(default_source(), k));
        let mut world = World::with_storage(StorageConfig::new().with_source(source.clone()));
        world.register_component::<S>(StorageType::SparseSet).unwrap();
        let mut expected = Expected::new();
        let live_before = LIVE.load(Ordering::Relaxed);
        for step in workload() {
            match apply(&mut world, &mut expected, step) {
                Ok(()) => {}
                Err(EntityError::Storage(StorageError::Commit { .. })) => {
                    failures += 1;
                    flush_failures += usize::from(matches!(step, Step::Reserve(..)));
                    check(&world, &expected);
                    assert_eq!(LIVE.load(Ordering::Relaxed), live_before, "{step:?}: leak");
                    // Memory is back: the same step now succeeds.
                    source.fail_commit_after(0);
                    apply(&mut world, &mut expected, step).unwrap();
                }
                Err(e) => panic!("commit {k}, {step:?}: unexpected error {e}"),
            }
        }
        check(&world, &expected);
        assert_eq!(
            expected.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
            clean.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
            "commit {k}: the world after the failure differs from the fault-free one"
        );
    }
    assert!(failures > 0, "no injected failure reached the world");
    assert!(
        cfg!(miri) || flush_failures > 0,
        "no injected failure reached a flush of reserved entities"
    );
}

/// What the next flush of reserved entities commits for.
#[derive(Clone, Copy, Debug)]
enum FlushCommit {
    /// The empty table's entity column leaving its 16 KiB heap block (2,049 ids), alone: the
    /// reservations reuse freed indices, whose metas exist (the reviewer's case).
    Table,
    /// The metas leaving their 16 KiB heap block (1,025 indices), alone: the empty table
    /// stays on the heap.
    Metas,
    /// Both: 2,049 reservations of new indices.
    Both,
}

/// A world whose next flush commits for what `at` says: `e`, spawned with `(a(0), B(0))`,
/// and the reserved entities, which are not flushed yet.
fn world_with_reserved(at: FlushCommit) -> (Arc<FaultyPages>, World, Entity, Vec<Entity>) {
    let source = FaultyPages::failing_commit(0);
    let mut world = World::with_storage(StorageConfig::new().with_source(source.clone()));
    let e = world.spawn((a(0), B(0)));
    let reserved = match at {
        FlushCommit::Table => {
            let spawned = world.spawn_batch((1..=2049).map(|i| (a(i),)));
            assert_eq!(world.despawn_batch(spawned), 2049);
            2049
        }
        FlushCommit::Metas => {
            for i in 1..1024 {
                world.spawn((a(i),));
            }
            6
        }
        FlushCommit::Both => 2049,
    };
    let reserved = (0..reserved).map(|_| world.reserve_entity()).collect();
    (source, world, e, reserved)
}

/// Every operation of `ops` with every [`FlushCommit`]; under miri (slow: each world holds
/// thousands of entities, about 40 s each there), only the first operation, with the flush
/// that commits for both the empty table and the metas.
fn cases<T: Copy>(ops: &[T]) -> Vec<(FlushCommit, T)> {
    if cfg!(miri) {
        return vec![(FlushCommit::Both, ops[0])];
    }
    let ats = [FlushCommit::Table, FlushCommit::Metas, FlushCommit::Both];
    ops.iter().flat_map(|&op| ats.map(|at| (at, op))).collect()
}

/// Checks that a refused flush changed nothing: `live` entities, consistent, and every one of
/// `reserved` still reserved (not alive, not counted, readable as dead without a panic).
fn still_reserved(world: &World, reserved: &[Entity], live: usize, what: &str) {
    world.check_invariants();
    assert_eq!(world.len(), live, "{what}: live entities");
    assert_eq!(world.entities().reserved_len(), reserved.len(), "{what}: still reserved");
    assert_eq!(world.entities().front_reserved(), Some(reserved[0]), "{what}: the same ids");
    for &r in reserved {
        assert!(!world.contains(r), "{what}: {r} is alive");
        assert_eq!(world.get::<B>(r), None, "{what}: {r}");
        assert!(world.entity(r).is_err(), "{what}: {r}");
    }
}

/// An operation that flushes reserved entities first and returns a `Result`, given the spawned
/// entity `e` (which has `A` and `B`) and a reserved one `r` (not the oldest reservation).
type FlushingOp = fn(&mut World, Entity, Entity) -> Result<(), EntityError>;

const FLUSHING_OPS: &[(&str, FlushingOp)] = &[
    ("try_flush", |w, _, _| w.try_flush()),
    ("try_spawn", |w, _, _| w.try_spawn((B(1),)).map(drop)),
    ("insert", |w, e, _| w.insert(e, (B(1),))),
    ("try_remove", |w, e, _| w.try_remove::<(B,)>(e).map(drop)),
    ("insert_batch", |w, e, _| w.insert_batch([(e, (S([1; 4]),))])),
    ("remove_batch", |w, e, _| w.remove_batch::<(B,)>([e]).map(drop)),
    ("entity_mut", |w, _, r| w.entity_mut(r).map(drop)),
    ("despawn", |w, _, r| w.despawn(r)),
    ("spawn_reserved", |w, _, r| w.spawn_reserved(r, (B(2),))),
];

#[test]
fn a_refused_commit_while_flushing_reserved_entities_is_a_typed_error() {
    for (at, (name, op)) in cases(FLUSHING_OPS) {
        let what = format!("{name}, {at:?}");
        let (source, mut world, e, reserved) = world_with_reserved(at);
        let (live, r) = (world.len(), reserved[1]);
        source.fail_commit_after(1);
        let err = op(&mut world, e, r).expect_err(&what);
        assert!(matches!(err, EntityError::Storage(StorageError::Commit { .. })), "{what}: {err}");
        still_reserved(&world, &reserved, live, &what);
        assert_eq!(world.get::<B>(e), Some(&B(0)), "{what}");
        // Memory is back: the same operation flushes them all and succeeds.
        source.fail_commit_after(0);
        op(&mut world, e, r).unwrap_or_else(|err| panic!("{what}, memory back: {err}"));
        world.check_invariants();
        assert_eq!(world.entities().reserved_len(), 0, "{what}");
        let despawned = usize::from(name == "despawn");
        let spawned = usize::from(name == "try_spawn");
        assert_eq!(world.len(), live + reserved.len() + spawned - despawned, "{what}");
        assert!(reserved.iter().all(|&x| world.contains(x) != (name == "despawn" && x == r)));
    }
}

#[test]
fn every_commit_of_a_flush_can_be_refused() {
    // The flush of 2,049 reserved entities commits for the empty table and for the metas:
    // refusing either (or any later one) leaves them all reserved, and the world unchanged.
    let mut refused = 0;
    for k in 1.. {
        let (source, mut world, _, reserved) = world_with_reserved(FlushCommit::Both);
        let live = world.len();
        source.fail_commit_after(k);
        match world.try_flush() {
            Err(EntityError::Storage(StorageError::Commit { .. })) => refused += 1,
            Err(e) => panic!("commit {k}: unexpected error {e}"),
            Ok(()) => break,
        }
        still_reserved(&world, &reserved, live, &format!("commit {k}"));
        source.fail_commit_after(0);
        world.try_flush().unwrap();
        world.check_invariants();
        assert_eq!(world.len(), live + reserved.len());
    }
    assert!(refused >= 2, "the table's commit and the metas' ({refused} refused)");
}

/// An operation that flushes reserved entities first and panics when it cannot.
type PanickingOp = fn(&mut World);

const PANICKING_OPS: &[(&str, PanickingOp)] = &[
    ("World::flush", World::flush),
    ("World::spawn", |w| {
        w.spawn((B(1),));
    }),
    ("World::spawn", |w| drop(w.spawn_batch([(B(1),), (B(2),)]))),
    ("World::despawn_batch", |w| {
        w.despawn_batch([]);
    }),
    ("World::clear", World::clear),
];

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_refused_flush_in_an_operation_that_panics_leaves_no_half_made_entity() {
    for (at, (name, op)) in cases(PANICKING_OPS) {
        let what = format!("{name}, {at:?}");
        let (source, mut world, _, reserved) = world_with_reserved(at);
        let live = world.len();
        source.fail_commit_after(1);
        let panic = catch_unwind(AssertUnwindSafe(|| op(&mut world))).expect_err(&what);
        let message = panic.downcast_ref::<String>().map_or("", String::as_str);
        assert!(message.starts_with(name), "{what}: {message}");
        assert!(message.contains("could not commit"), "{what}: {message}");
        still_reserved(&world, &reserved, live, &what);
        source.fail_commit_after(0);
        world.flush();
        world.check_invariants();
        assert_eq!(world.len(), live + reserved.len(), "{what}");
    }
}

#[test]
fn spawn_reserved_of_the_oldest_reservation_refused_leaves_it_empty() {
    // The oldest reservation is placed straight into its table: no flush, but its meta is the
    // one that leaves the heap block. Refused, the entity stays, empty (the flush after the
    // error gets the memory).
    let (source, mut world, _, reserved) = world_with_reserved(FlushCommit::Metas);
    let live = world.len();
    source.fail_commit_after(1);
    let err = world.spawn_reserved(reserved[0], (B(3),)).unwrap_err();
    assert!(matches!(err, EntityError::Storage(StorageError::Commit { .. })), "{err}");
    world.check_invariants();
    assert_eq!(world.len(), live + reserved.len());
    assert_eq!(world.get::<B>(reserved[0]), None);
    world.spawn_reserved(reserved[0], (B(3),)).unwrap();
    assert_eq!(world.get::<B>(reserved[0]), Some(&B(3)));
    world.check_invariants();
}

#[test]
fn an_exhausted_reservation_is_a_typed_error_and_space_comes_back() {
    const RESERVE: usize = 64 << 10;
    let mut world = World::with_storage(StorageConfig::new().with_reserve_bytes(RESERVE));
    let mut expected = Expected::new();
    let mut i = 0;
    let err = loop {
        match apply(&mut world, &mut expected, Step::SpawnA(i)) {
            Ok(()) => i += 1,
            Err(e) => break e,
        }
    };
    // `A`'s column is full at 64 KiB / 64 bytes.
    assert_eq!(i as usize, RESERVE / size_of::<A>());
    assert!(
        matches!(err, EntityError::Storage(StorageError::CapacityExceeded { capacity: 1024, .. })),
        "{err}"
    );
    check(&world, &expected);
    // Another table still has room.
    let e = world.try_spawn((a(0), B(0))).expect("another table has room");
    expected.push((e, Some((Some(a(0)), Some(B(0)), None, None))));
    // Despawning frees rows; spawning works again.
    for k in 0..10 {
        apply(&mut world, &mut expected, Step::Despawn(k)).unwrap();
    }
    for k in 0..10 {
        apply(&mut world, &mut expected, Step::SpawnA(1000 + k)).unwrap();
    }
    assert!(apply(&mut world, &mut expected, Step::SpawnA(5000)).is_err());
    check(&world, &expected);
}

/// Set in the child process that [`a_refused_reservation_under_prlimit_falls_back`] starts
/// under `prlimit --as`.
const CHILD: &str = "FOLIO_PRLIMIT_CHILD";

#[test]
#[cfg_attr(miri, ignore = "starts a process")]
#[cfg_attr(target_family = "wasm", ignore = "starts a child process, which wasm32 cannot")]
fn a_refused_reservation_under_prlimit_falls_back() {
    if std::env::var_os(CHILD).is_some() {
        return prlimit_child();
    }
    // 2 GiB of address space: the test binary and growing reservations fit, a fixed 16 GiB
    // reservation does not.
    let limit = format!("--as={}", 2u64 << 30);
    run_child(
        &["prlimit", &limit],
        "a_refused_reservation_under_prlimit_falls_back",
        CHILD,
        "refused reservation:",
    );
}
/// Runs test `name` of this binary in a child process (behind `wrapper`, a command and its
/// arguments, if any) with `env` set, asserts that it passed and printed `marker`, and returns
/// what it printed.
fn run_child(wrapper: &[&str], name: &str, env: &str, marker: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let mut command = match wrapper {
        [] => std::process::Command::new(&exe),
        [program, args @ ..] => {
            let mut c = std::process::Command::new(program);
            c.args(args).arg(&exe);
            c
        }
    };
    let out = command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(env, "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot start {wrapper:?} {exe:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(marker), "child did not run:\n{stdout}\n{stderr}");
    stdout
}

/// Under a 2 GiB address-space limit: a default world (growing reservations) spawns 20,000
/// entities (its `A` column grows past its first reservation) with no fallback at all; a world asking for fixed 16 GiB reservations, which the
/// limit refuses, falls back to smaller ones and spawns them all the same, reporting it in
/// `memory_stats`; the world stays consistent and keeps working.
fn prlimit_child() {
    // The model's entries are large (`Big`): more would not fit under the limit.
    let n = 20_000;
    let mut world = World::new();
    let mut expected = Expected::new();
    for i in 0..n {
        apply(&mut world, &mut expected, Step::SpawnA(i)).expect("a growing world fits");
    }
    let stats = world.memory_stats();
    assert_eq!((stats.smaller_reservations, stats.heap_page_columns), (0, 0));
    assert!(stats.reserved < 64 << 20, "reserved {} bytes", stats.reserved);
    check(&world, &expected);

    let mut world = World::with_storage(StorageConfig::new().with_reserve_bytes(16 << 30));
    let mut expected = Expected::new();
    for i in 0..n {
        apply(&mut world, &mut expected, Step::SpawnA(i))
            .expect("a refused reservation falls back");
    }
    let stats = world.memory_stats();
    assert!(stats.smaller_reservations > 0, "{stats:?}");
    println!(
        "refused reservation: fixed 16 GiB reservations under a 2 GiB limit; {n} spawns, {} \
         smaller reservations, {} columns on heap pages, {} bytes reserved",
        stats.smaller_reservations, stats.heap_page_columns, stats.reserved
    );
    check(&world, &expected);
    // Entities in heap blocks elsewhere still work, and so do reads and despawns.
    let e = world.try_spawn((B(1),)).unwrap();
    expected.push((e, Some((None, Some(B(1)), None, None))));
    for k in 0..n as usize / 2 {
        apply(&mut world, &mut expected, Step::Despawn(k)).unwrap();
    }
    for k in 0..n / 2 {
        apply(&mut world, &mut expected, Step::SpawnA(k)).unwrap();
    }
    check(&world, &expected);
}

/// Larger than a column's heap block: every table holding one has its own reservation.
#[cfg(all(unix, not(target_family = "wasm")))]
#[derive(Clone, Debug, PartialEq)]
struct Huge([u8; 20_000]);

#[cfg(all(unix, not(target_family = "wasm")))]
macro_rules! markers {
    ($($m:ident),*) => {
        $(#[derive(Debug, Clone, Copy)] struct $m;)*
        /// Inserts marker `i`.
        const INSERT: &[fn(&mut World, Entity) -> Result<(), EntityError>] =
            &[$(|w, e| w.insert(e, ($m,))),*];
    };
}
#[cfg(all(unix, not(target_family = "wasm")))]
markers!(M0, M1, M2, M3, M4, M5, M6, M7, M8, M9, M10, M11, M12, M13, M14, M15);

/// Live OS mappings of this process, read through `buf`. At the mapping limit no allocation
/// that needs a mapping of its own succeeds, so `buf` must already hold room for the listing
/// (reading into a growing buffer there fails, and would count nothing).
#[cfg(all(unix, not(target_family = "wasm")))]
fn mappings(buf: &mut Vec<u8>) -> usize {
    use std::io::Read;
    buf.clear();
    let mut maps = std::fs::File::open("/proc/self/maps").expect("/proc/self/maps");
    loop {
        assert!(buf.len() < buf.capacity(), "the listing outgrew its buffer");
        // Read into a stack chunk, then append within the capacity: no allocation.
        let mut chunk = [0u8; 4096];
        let want = chunk.len().min(buf.capacity() - buf.len());
        match maps.read(&mut chunk[..want]).expect("reading /proc/self/maps") {
            0 => break,
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
    buf.iter().filter(|&&b| b == b'\n').count()
}

/// Set in the child process of [`the_mapping_count_limit_falls_back_to_heap_pages`].
#[cfg(all(unix, not(target_family = "wasm")))]
const MAP_CHILD: &str = "FOLIO_MAP_COUNT_CHILD";

// Only where folio has the OS page source, whose mapping budget this spends.
#[cfg(all(unix, not(target_family = "wasm")))]
#[test]
#[cfg_attr(miri, ignore = "starts a process")]
fn the_mapping_count_limit_falls_back_to_heap_pages() {
    if std::env::var_os(MAP_CHILD).is_some() {
        return map_count_child();
    }
    // Under an address-space limit (`ulimit -v`), the 1 MiB reservations fill the address space
    // before the mapping budget is spent; a_refused_reservation_under_prlimit_falls_back covers
    // that case.
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let address_limit = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|n| n.parse::<u64>().ok());
    if address_limit.is_some_and(|bytes| bytes < 64 << 30) {
        println!("skipped: an address-space limit of {address_limit:?} bytes");
        return;
    }
    // In a child process: the test spends folio's mapping budget, which other tests running
    // beside it in this one would feel.
    let stdout = run_child(
        &[],
        "the_mapping_count_limit_falls_back_to_heap_pages",
        MAP_CHILD,
        "mapping budget:",
    );
    println!("{stdout}");
}

/// Makes tables whose `Huge` column has its own reservation (two kernel mappings each, with
/// 1 MiB reservations so address space is not what runs out) until folio's mapping budget is
/// spent and 2,000 tables more: those columns go to heap pages instead of failing, the
/// process keeps most of its mappings free, and the world stays consistent and keeps working.
#[cfg(all(unix, not(target_family = "wasm")))]
fn map_count_child() {
    let limit: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530);
    let (budget, live) = folio_archetype::vm::mapping_budget();
    assert!(budget <= limit / 4 && live < budget, "budget {budget}, live {live}");
    let mut maps_buf: Vec<u8> = Vec::with_capacity(limit * 128 + (1 << 20));
    let mut world = World::with_storage(StorageConfig::new().with_reserve_bytes(1 << 20));
    let mut made: Vec<(Entity, u32)> = Vec::new();
    for k in 1..=(budget + 2_000).min(0xFFFF) as u32 {
        let combo = k.wrapping_mul(40_503) & 0xFFFF;
        let e = world.try_spawn((Huge([combo as u8; 20_000]),)).expect("falls back, not fails");
        for (bit, insert) in INSERT.iter().enumerate() {
            if combo & (1 << bit) != 0 {
                insert(&mut world, e).expect("falls back, not fails");
            }
        }
        made.push((e, combo));
    }
    let stats = world.memory_stats();
    let at = mappings(&mut maps_buf);
    println!(
        "mapping budget: {budget} reservations (vm.max_map_count {limit}); {} tables, {} \
         columns on heap pages, {at} mappings",
        world.tables().len(),
        stats.heap_page_columns
    );
    assert!(stats.heap_page_columns > 1_000, "{stats:?}");
    assert!(at < limit * 3 / 4, "{at} mappings of {limit}: the budget left too few");
    world.check_invariants();
    for &(e, combo) in made.iter().step_by(101) {
        assert_eq!(world.get::<Huge>(e).map(|h| h.0[0]), Some(combo as u8));
    }
    let (e, _) = made[0];
    world.despawn(e).unwrap();
    let again = world.try_spawn((Huge([7; 20_000]),)).unwrap();
    assert_eq!(world.get::<Huge>(again).map(|h| h.0[0]), Some(7));
    world.check_invariants();
}
