//! A model test: random spawns, despawns, inserts, removes, writes (through `World::get_mut` and
//! through queries) and tick increments, replayed against a `HashMap<Entity, Model>`; after every
//! step, long-lived query states are compared with a brute-force filter over the model, and
//! `Changed`/`Added` states with what the model says was written since each one last ran.

use std::collections::{HashMap, HashSet};

use folio_query::*;
use proptest::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct A(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct B(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct C(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct D(u32);
/// Sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct E(u32);
/// Sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct F(u32);

const KA: usize = 0;
const KB: usize = 1;
const KC: usize = 2;
const KD: usize = 3;
const KE: usize = 4;
const KF: usize = 5;
const KINDS: usize = 6;

/// What the model knows of one entity: its value of each component it has.
type Model = [Option<u32>; KINDS];

#[derive(Clone, Debug)]
enum Op {
    /// Spawn with the components whose bits are set in the mask.
    Spawn(u8, u32),
    Despawn(usize),
    Insert(usize, usize, u32),
    Remove(usize, usize),
    /// `World::get_mut` write.
    Write(usize, usize, u32),
    /// Write through a query's `Mut`s, to the entities whose index is `r` modulo 3, reading
    /// (not writing) the others; `true` for `A`, `false` for the sparse `E`.
    QueryWrite(bool, u8, u32),
    Tick,
    /// Run change state `i` and compare it with the model.
    RunChanged(usize),
    /// `get` on a live or dead entity.
    Get(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<u8>(), any::<u32>()).prop_map(|(m, v)| Op::Spawn(m, v)),
        1 => any::<usize>().prop_map(Op::Despawn),
        3 => (any::<usize>(), 0..KINDS, any::<u32>()).prop_map(|(e, k, v)| Op::Insert(e, k, v)),
        2 => (any::<usize>(), 0..KINDS).prop_map(|(e, k)| Op::Remove(e, k)),
        3 => (any::<usize>(), 0..KINDS, any::<u32>()).prop_map(|(e, k, v)| Op::Write(e, k, v)),
        2 => (any::<bool>(), 0..3u8, any::<u32>()).prop_map(|(a, r, v)| Op::QueryWrite(a, r, v)),
        1 => Just(Op::Tick),
        3 => (0..CHANGE_STATES).prop_map(Op::RunChanged),
        2 => any::<usize>().prop_map(Op::Get),
    ]
}

/// Number of change-detecting states: `Changed<A>` twice, `Changed<E>`, `Added<F>`, and
/// `Changed<B>` over `(Entity, &mut D)`.
const CHANGE_STATES: usize = 5;

fn insert_kind(world: &mut World, e: Entity, k: usize, v: u32) {
    match k {
        KA => world.insert(e, (A(v),)),
        KB => world.insert(e, (B(v),)),
        KC => world.insert(e, (C(v),)),
        KD => world.insert(e, (D(v),)),
        KE => world.insert(e, (E(v),)),
        _ => world.insert(e, (F(v),)),
    }
    .unwrap();
}

fn remove_kind(world: &mut World, e: Entity, k: usize) -> Option<u32> {
    match k {
        KA => world.remove::<(A,)>(e).map(|(x,)| x.0),
        KB => world.remove::<(B,)>(e).map(|(x,)| x.0),
        KC => world.remove::<(C,)>(e).map(|(x,)| x.0),
        KD => world.remove::<(D,)>(e).map(|(x,)| x.0),
        KE => world.remove::<(E,)>(e).map(|(x,)| x.0),
        _ => world.remove::<(F,)>(e).map(|(x,)| x.0),
    }
}

fn write_kind(world: &mut World, e: Entity, k: usize, v: u32) -> bool {
    let slot = match k {
        KA => world.get_mut::<A>(e).map(|x| &mut x.0),
        KB => world.get_mut::<B>(e).map(|x| &mut x.0),
        KC => world.get_mut::<C>(e).map(|x| &mut x.0),
        KD => world.get_mut::<D>(e).map(|x| &mut x.0),
        KE => world.get_mut::<E>(e).map(|x| &mut x.0),
        _ => world.get_mut::<F>(e).map(|x| &mut x.0),
    };
    slot.map(|x| *x = v).is_some()
}

fn sorted<K: Ord>(mut v: Vec<K>) -> Vec<K> {
    v.sort();
    v
}

/// The world, its model, and the long-lived query states under test.
#[allow(clippy::type_complexity)] // the query types are what is under test
struct Harness {
    world: World,
    model: HashMap<Entity, Model>,
    /// Entities in spawn order (dead ones included, to test stale ids).
    order: Vec<Entity>,
    q_tables: QueryState<(Entity, &'static A, Option<&'static B>), Without<C>>,
    q_sparse: QueryState<(Entity, &'static mut E)>,
    q_or: QueryState<Entity, Or<(With<A>, With<E>)>>,
    q_mixed: QueryState<(Entity, &'static B, &'static F, Option<&'static D>)>,
    q_sparse_without: QueryState<(Entity, &'static E, Option<&'static F>), Without<A>>,
    w_a: QueryState<(Entity, &'static mut A)>,
    changed_a: [QueryState<Entity, Changed<A>>; 2],
    changed_e: QueryState<(Entity, &'static E), Changed<E>>,
    added_f: QueryState<Entity, Added<F>>,
    changed_b_write_d: QueryState<(Entity, &'static mut D), Changed<B>>,
    /// Per change state, the entities whose component was written (or added, for `Added`)
    /// since the state last ran.
    dirty: [HashSet<Entity>; CHANGE_STATES],
}

/// Which component kind each change state watches.
const WATCHES: [usize; CHANGE_STATES] = [KA, KA, KE, KF, KB];

impl Harness {
    fn new() -> Self {
        let mut world = World::new();
        // The states come first: every archetype they match is made after them. `E` and `F`
        // are registered before their first use, as sparse-set components must be.
        let q_tables = world.query_filtered();
        let changed_a = [world.query_filtered(), world.query_filtered()];
        world.register_component::<E>(StorageType::SparseSet).unwrap();
        world.register_component::<F>(StorageType::SparseSet).unwrap();
        let mut h = Self {
            q_tables,
            q_sparse: world.query(),
            q_or: world.query_filtered(),
            q_mixed: world.query(),
            q_sparse_without: world.query_filtered(),
            w_a: world.query(),
            changed_a,
            changed_e: world.query_filtered(),
            added_f: world.query_filtered(),
            changed_b_write_d: world.query_filtered(),
            world,
            model: HashMap::new(),
            order: Vec::new(),
            dirty: Default::default(),
        };
        for i in 0..CHANGE_STATES {
            h.run_changed(i);
        }
        h
    }

    fn pick(&self, i: usize) -> Option<Entity> {
        (!self.order.is_empty()).then(|| self.order[i % self.order.len()])
    }

    /// Records that `e`'s component `k` was written (`added`: newly added).
    fn mark(&mut self, e: Entity, k: usize, added: bool) {
        for (i, &w) in WATCHES.iter().enumerate() {
            // State 3 is `Added<F>`: only additions count.
            if w == k && (i != 3 || added) {
                self.dirty[i].insert(e);
            }
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Spawn(mask, v) => {
                let e = self.world.spawn((C(v),));
                self.world.remove::<(C,)>(e).unwrap();
                let mut m = [None; KINDS];
                for (k, slot) in m.iter_mut().enumerate() {
                    if mask & (1 << k) != 0 {
                        let v = v.wrapping_add(k as u32);
                        insert_kind(&mut self.world, e, k, v);
                        *slot = Some(v);
                        for (i, &w) in WATCHES.iter().enumerate() {
                            if w == k {
                                self.dirty[i].insert(e);
                            }
                        }
                    }
                }
                self.model.insert(e, m);
                self.order.push(e);
            }
            Op::Despawn(i) => {
                if let Some(e) = self.pick(i) {
                    let alive = self.model.remove(&e).is_some();
                    assert_eq!(self.world.despawn(e).is_ok(), alive);
                }
            }
            Op::Insert(i, k, v) => {
                let Some(e) = self.pick(i) else { return };
                if let Some(m) = self.model.get_mut(&e) {
                    let added = m[k].is_none();
                    m[k] = Some(v);
                    insert_kind(&mut self.world, e, k, v);
                    self.mark(e, k, added);
                }
            }
            Op::Remove(i, k) => {
                if let Some(e) = self.pick(i) {
                    let had = self.model.get_mut(&e).and_then(|m| m[k].take());
                    assert_eq!(remove_kind(&mut self.world, e, k), had);
                }
            }
            Op::Write(i, k, v) => {
                if let Some(e) = self.pick(i) {
                    let slot = self.model.get_mut(&e).and_then(|m| m[k].as_mut());
                    let had = slot.is_some();
                    if let Some(x) = slot {
                        *x = v;
                    }
                    assert_eq!(write_kind(&mut self.world, e, k, v), had);
                    if had {
                        self.mark(e, k, false);
                    }
                }
            }
            Op::QueryWrite(on_a, r, v) => {
                let mut written = Vec::new();
                let hit = |e: Entity| e.index() % 3 == u32::from(r);
                if on_a {
                    for (e, mut a) in self.w_a.iter_mut(&mut self.world) {
                        if hit(e) {
                            a.0 = v;
                            written.push(e);
                        } else {
                            assert!(a.0 == self.model[&e][KA].unwrap());
                        }
                    }
                } else {
                    for (e, mut x) in self.q_sparse.iter_mut(&mut self.world) {
                        if hit(e) {
                            x.0 = v;
                            written.push(e);
                        } else {
                            assert!(x.0 == self.model[&e][KE].unwrap());
                        }
                    }
                }
                let k = if on_a { KA } else { KE };
                for e in written {
                    self.model.get_mut(&e).unwrap()[k] = Some(v);
                    self.mark(e, k, false);
                }
            }
            Op::Tick => {
                self.world.increment_change_tick();
            }
            Op::RunChanged(i) => self.run_changed(i),
            Op::Get(i) => {
                if let Some(e) = self.pick(i) {
                    let got =
                        self.q_tables.get(&self.world, e).map(|(e, a, b)| (e, *a, b.copied()));
                    let want = match self.model.get(&e) {
                        None => Err(QueryError::NoSuchEntity(e)),
                        Some(m) if m[KA].is_none() || m[KC].is_some() => {
                            Err(QueryError::DoesNotMatch(e))
                        }
                        Some(m) => Ok((e, A(m[KA].unwrap()), m[KB].map(B))),
                    };
                    assert_eq!(got, want);
                    let got = self.q_sparse.get(&self.world, e).map(|(e, x)| (e, *x));
                    let want = match self.model.get(&e) {
                        None => Err(QueryError::NoSuchEntity(e)),
                        Some(m) => m[KE].map(|v| (e, E(v))).ok_or(QueryError::DoesNotMatch(e)),
                    };
                    assert_eq!(got, want);
                }
            }
        }
    }

    /// Runs change state `i` and checks it against what the model saw written since.
    fn run_changed(&mut self, i: usize) {
        let got: Vec<Entity> = match i {
            0 | 1 => sorted(self.changed_a[i].iter(&self.world).collect()),
            2 => sorted(
                self.changed_e
                    .iter(&self.world)
                    .map(|(e, x)| {
                        assert_eq!(Some(x.0), self.model[&e][KE]);
                        e
                    })
                    .collect(),
            ),
            3 => sorted(self.added_f.iter(&self.world).collect()),
            _ => {
                // Reads `D` through `Mut` without writing: `Changed<B>` must not notice, and
                // neither must a later `Changed<D>` (there is none to notice, by construction).
                let mut out = Vec::new();
                for (e, d) in self.changed_b_write_d.iter_mut(&mut self.world) {
                    assert_eq!(Some(d.0), self.model[&e][KD]);
                    out.push(e);
                }
                sorted(out)
            }
        };
        let k = WATCHES[i];
        let needs_d = i == 4;
        let want: Vec<Entity> = sorted(
            self.dirty[i]
                .iter()
                .copied()
                .filter(|e| {
                    self.model
                        .get(e)
                        .is_some_and(|m| m[k].is_some() && (!needs_d || m[KD].is_some()))
                })
                .collect(),
        );
        assert_eq!(got, want, "change state {i}");
        self.dirty[i].clear();
    }

    /// Compares every long-lived read-only state with a brute-force filter over the model.
    fn check(&mut self) {
        let world = &self.world;
        let live = || self.model.iter().map(|(&e, m)| (e, m));

        let mut it = self.q_tables.iter(world);
        let len = it.len();
        let got = sorted(it.by_ref().map(|(e, a, b)| (e, a.0, b.map(|b| b.0))).collect());
        let want = sorted(
            live()
                .filter(|(_, m)| m[KA].is_some() && m[KC].is_none())
                .map(|(e, m)| (e, m[KA].unwrap(), m[KB]))
                .collect(),
        );
        assert_eq!((len, &got), (want.len(), &want), "(Entity, &A, Option<&B>) Without<C>");
        assert_eq!(self.q_tables.count(world), want.len());

        let got = sorted(self.q_sparse.iter(world).map(|(e, x)| (e, x.0)).collect());
        let want = sorted(live().filter_map(|(e, m)| m[KE].map(|v| (e, v))).collect::<Vec<_>>());
        assert_eq!(got, want, "(Entity, &mut E)");
        assert_eq!(self.q_sparse.matches().mode(), IterMode::Sparse);

        let got = sorted(self.q_or.iter(world).collect());
        let want = sorted(
            live().filter(|(_, m)| m[KA].is_some() || m[KE].is_some()).map(|(e, _)| e).collect(),
        );
        assert_eq!(got, want, "Or<(With<A>, With<E>)>");
        assert_eq!(self.q_or.count(world), want.len());

        let got = sorted(
            self.q_mixed.iter(world).map(|(e, b, f, d)| (e, b.0, f.0, d.map(|d| d.0))).collect(),
        );
        let want = sorted(
            live()
                .filter(|(_, m)| m[KB].is_some() && m[KF].is_some())
                .map(|(e, m)| (e, m[KB].unwrap(), m[KF].unwrap(), m[KD]))
                .collect(),
        );
        assert_eq!(got, want, "(Entity, &B, &F, Option<&D>)");

        let got = sorted(
            self.q_sparse_without.iter(world).map(|(e, x, f)| (e, x.0, f.map(|f| f.0))).collect(),
        );
        let want = sorted(
            live()
                .filter(|(_, m)| m[KE].is_some() && m[KA].is_none())
                .map(|(e, m)| (e, m[KE].unwrap(), m[KF]))
                .collect(),
        );
        assert_eq!(got, want, "(Entity, &E, Option<&F>) Without<A>");
        assert_eq!(self.q_sparse_without.count(world), want.len());
        assert_eq!(world.len(), self.model.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 2 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn queries_match_a_hashmap_model(
        ops in proptest::collection::vec(op(), if cfg!(miri) { 12 } else { 200 })
    ) {
        let mut h = Harness::new();
        for op in &ops {
            h.apply(op);
            h.check();
        }
        for i in 0..CHANGE_STATES {
            h.run_changed(i);
        }
        h.world.check_invariants();
        prop_assert_eq!(h.world.len(), h.model.len());
    }
}
