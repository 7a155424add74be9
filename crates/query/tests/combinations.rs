//! Every data/filter combination over table, sparse-set and mixed components, in all three
//! iteration modes, checked against a brute-force filter over a plain list of what was spawned;
//! access conflicts; states that outlive the world's growth; `get`/`single`/`count`.

use std::fmt::Debug;

use folio_query::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Id(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct A(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct B(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct C(u32);
/// Sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct S(u32);
/// Sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct T(u32);
/// A zero-sized table component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Z;
/// A zero-sized sparse-set component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Zs;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(align(64))]
struct Al64(u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(align(4096))]
struct Page(u32);
/// Page-aligned and sparse-set stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(align(4096))]
struct PageS(u32);
/// Registered nowhere until a test registers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Late(u32);
/// Registered (sparse) only after a query names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct LateS(u32);

const BA: u32 = 1;
const BB: u32 = 2;
const BC: u32 = 4;
const BS: u32 = 8;
const BT: u32 = 16;
const BZ: u32 = 32;
const BZS: u32 = 64;
const BAL: u32 = 128;
const BPG: u32 = 256;
const BPGS: u32 = 512;
const ALL: u32 = 1023;

/// The value entity `id` holds in the component with bit `bit` (distinct per entity and
/// component, so a value identifies both).
fn val(id: u32, bit: u32) -> u32 {
    id * 1024 + bit
}

#[derive(Clone, Copy, Debug)]
struct Ent {
    e: Entity,
    id: u32,
    mask: u32,
}

impl Ent {
    fn has(&self, bits: u32) -> bool {
        self.mask & bits == bits
    }
    fn any(&self, bits: u32) -> bool {
        self.mask & bits != 0
    }
    fn v(&self, bit: u32) -> u32 {
        val(self.id, bit)
    }
    fn opt(&self, bit: u32) -> Option<u32> {
        self.has(bit).then(|| self.v(bit))
    }
}

fn new_world() -> World {
    let mut world = World::new();
    world.register_component::<S>(StorageType::SparseSet).unwrap();
    world.register_component::<T>(StorageType::SparseSet).unwrap();
    world.register_component::<Zs>(StorageType::SparseSet).unwrap();
    world.register_component::<PageS>(StorageType::SparseSet).unwrap();
    world
}

fn insert_bits(world: &mut World, e: Entity, id: u32, mask: u32) {
    let v = |bit| val(id, bit);
    if mask & BA != 0 {
        world.insert(e, (A(v(BA)),)).unwrap();
    }
    if mask & BB != 0 {
        world.insert(e, (B(v(BB)),)).unwrap();
    }
    if mask & BC != 0 {
        world.insert(e, (C(v(BC)),)).unwrap();
    }
    if mask & BS != 0 {
        world.insert(e, (S(v(BS)),)).unwrap();
    }
    if mask & BT != 0 {
        world.insert(e, (T(v(BT)),)).unwrap();
    }
    if mask & BZ != 0 {
        world.insert(e, (Z,)).unwrap();
    }
    if mask & BZS != 0 {
        world.insert(e, (Zs,)).unwrap();
    }
    if mask & BAL != 0 {
        world.insert(e, (Al64(v(BAL)),)).unwrap();
    }
    if mask & BPG != 0 {
        world.insert(e, (Page(v(BPG)),)).unwrap();
    }
    if mask & BPGS != 0 {
        world.insert(e, (PageS(v(BPGS)),)).unwrap();
    }
}

/// A world holding every subset of {A, B, C, S, T}, with the ZST and over-aligned components
/// sprinkled over them, some despawned and some with a component removed again (so rows were
/// swap-removed everywhere), and a few entities that have everything.
fn build() -> (World, Vec<Ent>) {
    // 7 is coprime with 32, so the masks below go round every subset of {A, B, C, S, T};
    // under miri (where each structural change costs about a second) six of them and one full
    // entity still give every query below a match.
    let (n, full) = if cfg!(miri) { (6, 1) } else { (320, 3) };
    let mut world = new_world();
    let mut model = Vec::new();
    for id in 0..n + full {
        let mut mask = if id >= n { ALL } else { id * 7 % 32 };
        if id < n {
            for (modulus, bit) in [(3, BZ), (5, BZS), (7, BAL), (11, BPG), (13, BPGS)] {
                if id % modulus == 1 {
                    mask |= bit;
                }
            }
        }
        let e = world.spawn((Id(id),));
        insert_bits(&mut world, e, id, mask);
        model.push(Ent { e, id, mask });
    }
    model.retain(|m| {
        if m.id % 17 == 16 {
            world.despawn(m.e).unwrap();
            false
        } else {
            true
        }
    });
    for m in &mut model {
        if m.id % 23 == 5 && m.has(BB) {
            assert_eq!(world.remove::<(B,)>(m.e), Some((B(m.v(BB)),)));
            m.mask &= !BB;
        }
        if m.id % 29 == 3 && m.has(BS) {
            assert_eq!(world.remove::<(S,)>(m.e), Some((S(m.v(BS)),)));
            m.mask &= !BS;
        }
    }
    world.check_invariants();
    (world, model)
}

fn sorted<K: Ord>(mut v: Vec<K>) -> Vec<K> {
    v.sort();
    v
}

/// Runs a read-only query three ways (by `next`, by `fold`, and half by `next` then the rest by
/// `fold`), checks its mode, its size hint, and its result against the model.
macro_rules! check {
    ($world:expr, $model:expr, $d:ty, $f:ty, $mode:expr, |$item:pat_param| $map:expr, |$m:ident| $want:expr) => {{
        let world: &World = &$world;
        let want = sorted($model.iter().filter_map(|$m: &Ent| $want).collect::<Vec<_>>());
        let what = concat!(stringify!($d), " / ", stringify!($f));
        assert!(!want.is_empty(), "{what}: the model should have matches");
        let mut q = world.query_filtered::<$d, $f>();
        assert_eq!(q.matches().mode(), $mode, "{what}: mode");

        let mut iter = q.iter(world);
        let (lo, hi) = iter.size_hint();
        if <$f as QueryFilter>::IS_ARCHETYPAL {
            assert_eq!((lo, hi), (want.len(), Some(want.len())), "{what}: exact size");
        } else {
            assert!(hi.unwrap() >= want.len(), "{what}: upper bound");
        }
        let mut by_next = Vec::new();
        while let Some($item) = iter.next() {
            by_next.push($map);
        }
        assert_eq!(iter.size_hint(), (0, Some(0)), "{what}: exhausted");
        assert!(iter.next().is_none(), "{what}: fused");
        assert_eq!(sorted(by_next), want, "{what}: by next");

        // Change filters see everything on a state's first run only: use fresh states.
        let mut q = world.query_filtered::<$d, $f>();
        let by_fold = q.iter(world).map(|$item| $map).collect::<Vec<_>>();
        assert_eq!(sorted(by_fold), want, "{what}: by fold");

        let mut q = world.query_filtered::<$d, $f>();
        let mut iter = q.iter(world);
        let mut split: Vec<_> = iter.by_ref().take(want.len() / 2).map(|$item| $map).collect();
        iter.for_each(|$item| split.push($map));
        assert_eq!(sorted(split), want, "{what}: next, then fold");
        want.len()
    }};
}

/// `check!` for archetypal filters, also checking `count` and `ExactSizeIterator::len`.
macro_rules! check_exact {
    ($world:expr, $model:expr, $d:ty, $f:ty, $mode:expr, |$item:pat_param| $map:expr, |$m:ident| $want:expr) => {{
        let n = check!($world, $model, $d, $f, $mode, |$item| $map, |$m| $want);
        let world: &World = &$world;
        let mut q = world.query_filtered::<$d, $f>();
        assert_eq!(q.count(world), n);
        let mut iter = q.iter(world);
        for left in (0..n).rev() {
            assert!(iter.next().is_some());
            assert_eq!(iter.len(), left);
        }
        assert!(iter.next().is_none());
    }};
}

#[test]
fn table_only_queries_walk_tables() {
    let (world, model) = build();
    let m = &model;
    use IterMode::Tables as M;
    check_exact!(world, m, (&Id, &A), (), M, |(i, a)| (i.0, a.0), |m| m
        .has(BA)
        .then(|| (m.id, m.v(BA))));
    check_exact!(world, m, (&A, &B, &C, &Id), (), M, |(a, b, c, i)| (i.0, a.0, b.0, c.0), |m| m
        .has(BA | BB | BC)
        .then(|| (m.id, m.v(BA), m.v(BB), m.v(BC))));
    check_exact!(world, m, (Entity, &Id), (), M, |(e, i)| (e, i.0), |m| Some((m.e, m.id)));
    check_exact!(world, m, Entity, (), M, |e| e, |m| Some(m.e));
    check_exact!(
        world,
        m,
        (&Id, Option<&A>, Option<&B>),
        (),
        M,
        |(i, a, b)| (i.0, a.map(|x| x.0), b.map(|x| x.0)),
        |m| Some((m.id, m.opt(BA), m.opt(BB)))
    );
    check_exact!(world, m, &Id, (With<A>, Without<B>), M, |i| i.0, |m| (m.has(BA) && !m.any(BB))
        .then_some(m.id));
    check_exact!(world, m, &Id, Or<(With<A>, With<B>)>, M, |i| i.0, |m| m
        .any(BA | BB)
        .then_some(m.id));
    check_exact!(world, m, &Id, Or<(Without<A>, With<C>)>, M, |i| i.0, |m| (!m.any(BA)
        || m.has(BC))
    .then_some(m.id));
    check_exact!(world, m, (&Id, &C), (Or<(With<A>, With<B>)>, Without<Z>), M, |(i, _)| i.0, |m| {
        (m.has(BC) && m.any(BA | BB) && !m.any(BZ)).then_some(m.id)
    });
    check_exact!(world, m, (&Id, &Z), (), M, |(i, z)| (i.0, *z == Z), |m| m
        .has(BZ)
        .then_some((m.id, true)));
    check_exact!(
        world,
        m,
        (&Id, &Al64),
        (),
        M,
        |(i, x)| {
            assert_eq!(x as *const Al64 as usize % 64, 0, "misaligned");
            (i.0, x.0)
        },
        |m| m.opt(BAL).map(|v| (m.id, v))
    );
    check_exact!(
        world,
        m,
        (&Id, &Page, Option<&Al64>),
        (),
        M,
        |(i, x, y)| {
            assert_eq!(x as *const Page as usize % 4096, 0, "misaligned");
            (i.0, x.0, y.map(|y| y.0))
        },
        |m| m.opt(BPG).map(|v| (m.id, v, m.opt(BAL)))
    );
    // Nested tuples, and an optional tuple (present only when all of it is).
    check_exact!(
        world,
        m,
        ((Entity, &Id), ((&A,), Option<(&B, &C)>)),
        (),
        M,
        |((e, i), ((a,), bc))| (e, i.0, a.0, bc.map(|(b, c)| (b.0, c.0))),
        |m| m.has(BA).then(|| (m.e, m.id, m.v(BA), m.has(BB | BC).then(|| (m.v(BB), m.v(BC)))))
    );
    // Change filters on a state's first run see every entity that has the component.
    check!(world, m, (&Id, &A), Changed<B>, M, |(i, _)| i.0, |m| m.has(BA | BB).then_some(m.id));
    check!(world, m, &Id, (Added<C>, With<A>), M, |i| i.0, |m| m.has(BA | BC).then_some(m.id));
    check!(world, m, &Id, Or<(Changed<A>, With<B>)>, M, |i| i.0, |m| m
        .any(BA | BB)
        .then_some(m.id));
}

#[test]
fn queries_naming_sparse_and_table_components_walk_archetypes() {
    let (world, model) = build();
    let m = &model;
    use IterMode::Archetypes as M;
    check_exact!(world, m, (&Id, &A, &S), (), M, |(i, a, s)| (i.0, a.0, s.0), |m| m
        .has(BA | BS)
        .then(|| (m.id, m.v(BA), m.v(BS))));
    check_exact!(
        world,
        m,
        (&Id, &A, Option<&S>),
        (),
        M,
        |(i, a, s)| (i.0, a.0, s.map(|s| s.0)),
        |m| m.has(BA).then(|| (m.id, m.v(BA), m.opt(BS)))
    );
    check_exact!(world, m, (Entity, Option<&T>), (), M, |(e, t)| (e, t.map(|t| t.0)), |m| Some((
        m.e,
        m.opt(BT)
    )));
    check_exact!(world, m, (&Id, &A), With<S>, M, |(i, _)| i.0, |m| m.has(BA | BS).then_some(m.id));
    check_exact!(world, m, (&Id, &A), Without<S>, M, |(i, _)| i.0, |m| (m.has(BA) && !m.any(BS))
        .then_some(m.id));
    check_exact!(world, m, (&Id, &Zs, &B), (), M, |(i, z, _)| (i.0, *z == Zs), |m| m
        .has(BZS | BB)
        .then_some((m.id, true)));
    check_exact!(
        world,
        m,
        (&Id, &PageS),
        (),
        M,
        |(i, p)| {
            assert_eq!(p as *const PageS as usize % 4096, 0, "misaligned");
            (i.0, p.0)
        },
        |m| m.opt(BPGS).map(|v| (m.id, v))
    );
    check_exact!(world, m, &Id, Or<(With<S>, With<A>)>, M, |i| i.0, |m| m
        .any(BS | BA)
        .then_some(m.id));
    check_exact!(world, m, &Id, (Or<(With<S>, Without<T>)>, With<C>), M, |i| i.0, |m| ((m
        .has(BS)
        || !m.any(BT))
        && m.has(BC))
    .then_some(m.id));
    check_exact!(
        world,
        m,
        (&Id, Option<(&S, &T)>),
        With<B>,
        M,
        |(i, st)| (i.0, st.map(|(s, t)| (s.0, t.0))),
        |m| m.has(BB).then(|| (m.id, m.has(BS | BT).then(|| (m.v(BS), m.v(BT)))))
    );
    check!(world, m, (&Id, &A), Changed<S>, M, |(i, _)| i.0, |m| m.has(BA | BS).then_some(m.id));
    check!(world, m, (&Id, &S), Added<A>, M, |(i, _)| i.0, |m| m.has(BA | BS).then_some(m.id));
    check!(world, m, &Id, Or<(Added<T>, With<Z>)>, M, |i| i.0, |m| m.any(BT | BZ).then_some(m.id));
}

#[test]
fn queries_requiring_only_sparse_components_are_driven_by_a_set() {
    let (world, model) = build();
    let m = &model;
    use IterMode::Sparse as M;
    check_exact!(world, m, &S, (), M, |s| s.0, |m| m.opt(BS));
    check_exact!(world, m, (Entity, &S, &T), (), M, |(e, s, t)| (e, s.0, t.0), |m| m
        .has(BS | BT)
        .then(|| (m.e, m.v(BS), m.v(BT))));
    check_exact!(
        world,
        m,
        (&S, Option<&A>, Option<&T>),
        (),
        M,
        |(s, a, t)| (s.0, a.map(|a| a.0), t.map(|t| t.0)),
        |m| m.opt(BS).map(|s| (s, m.opt(BA), m.opt(BT)))
    );
    check_exact!(world, m, &S, Without<A>, M, |s| s.0, |m| (!m.any(BA))
        .then_some(m.opt(BS))
        .flatten());
    check_exact!(world, m, (Entity, &T), With<S>, M, |(e, _)| e, |m| m.has(BS | BT).then_some(m.e));
    check_exact!(world, m, (&S, &Zs), (), M, |(s, z)| (s.0, *z == Zs), |m| m
        .has(BS | BZS)
        .then(|| (m.v(BS), true)));
    check_exact!(
        world,
        m,
        &PageS,
        (),
        M,
        |p| {
            assert_eq!(p as *const PageS as usize % 4096, 0, "misaligned");
            p.0
        },
        |m| m.opt(BPGS)
    );
    check_exact!(world, m, &T, Or<(With<A>, With<S>)>, M, |t| t.0, |m| m
        .any(BA | BS)
        .then_some(m.opt(BT))
        .flatten());
    check!(world, m, &S, Changed<T>, M, |s| s.0, |m| m.has(BT).then_some(m.opt(BS)).flatten());
    check!(world, m, Entity, Added<T>, M, |e| e, |m| m.has(BT).then_some(m.e));
}

/// Whether a fresh state of `D`/`F` walks one sparse set densely.
fn dense<D: QueryData, F: QueryFilter>(world: &World) -> bool {
    world.query_filtered::<D, F>().matches().is_dense_sparse()
}

#[test]
fn queries_naming_one_sparse_component_walk_its_set_densely() {
    let (mut world, model) = build();
    let m = &model;
    use IterMode::Sparse as M;
    // Dense: the query names `S` (or `Zs`, or `PageS`) and nothing else.
    check_exact!(world, m, &S, (), M, |s| s.0, |m| m.opt(BS));
    check_exact!(world, m, (Entity, &S), (), M, |(e, s)| (e, s.0), |m| m.opt(BS).map(|s| (m.e, s)));
    check_exact!(world, m, (Entity, Option<&S>), With<S>, M, |(e, s)| (e, s.map(|s| s.0)), |m| m
        .opt(BS)
        .map(|s| (m.e, Some(s))));
    check_exact!(world, m, (Entity, &Zs), (), M, |(e, z)| (e, *z == Zs), |m| m
        .has(BZS)
        .then_some((m.e, true)));
    check_exact!(
        world,
        m,
        &PageS,
        (),
        M,
        |p| {
            assert_eq!(p as *const PageS as usize % 4096, 0, "misaligned");
            p.0
        },
        |m| m.opt(BPGS)
    );
    check!(world, m, (Entity, &S), Or<(Added<S>, Changed<S>)>, M, |(e, _)| e, |m| m
        .has(BS)
        .then_some(m.e));
    for yes in [
        dense::<&S, ()>(&world),
        dense::<(Entity, &S), ()>(&world),
        dense::<(Entity, Option<&S>), With<S>>(&world),
        dense::<(Entity, &Zs), ()>(&world),
        dense::<&PageS, ()>(&world),
        dense::<(Entity, &S), Or<(Added<S>, Changed<S>)>>(&world),
        dense::<(&S, &S), ()>(&world),
        dense::<&mut S, Changed<S>>(&world),
    ] {
        assert!(yes, "a query naming only S walks S's set");
    }
    // Not dense: another component is named, even optionally or as a filter.
    for no in [
        dense::<(&S, &Zs), ()>(&world),
        dense::<&S, Without<A>>(&world),
        dense::<(&S, Option<&T>), ()>(&world),
        dense::<(&S, Option<&A>), ()>(&world),
        dense::<&S, Without<Late>>(&world),
        dense::<&S, Or<(With<S>, With<T>)>>(&world),
    ] {
        assert!(!no, "a query naming more than S checks each entity's archetype");
    }
    // Naming only `S` but rejecting every archetype that has it: nothing, not the whole set.
    let mut never = world.query_filtered::<&S, Without<S>>();
    assert!(!never.matches().is_dense_sparse());
    assert_eq!(never.iter(&world).count(), 0);
    assert_eq!(never.count(&world), 0);

    // Writes through the dense path land on the right entity and mark exactly those changed.
    let mut writer = world.query::<(Entity, &mut S)>();
    let mut changed = world.query_filtered::<Entity, Changed<S>>();
    assert!(writer.matches().is_dense_sparse() && changed.matches().is_dense_sparse());
    assert_eq!(changed.iter(&world).count(), model.iter().filter(|m| m.has(BS)).count());
    let mut written = Vec::new();
    for (e, mut s) in writer.iter_mut(&mut world) {
        if s.0 % 2 == 0 {
            s.0 += 1_000_000;
            written.push(e);
        }
    }
    assert!(!written.is_empty());
    assert_eq!(sorted(changed.iter(&world).collect()), sorted(written.clone()));
    for x in &model {
        let want = x.opt(BS).map(|s| if s % 2 == 0 { s + 1_000_000 } else { s });
        assert_eq!(world.get::<S>(x.e).map(|s| s.0), want);
    }
    world.check_invariants();
}

#[test]
fn a_sixteen_element_tuple_reads_everything() {
    let (world, model) = build();
    type Sixteen<'a> = (
        Entity,
        &'a Id,
        Option<&'a A>,
        Option<&'a B>,
        Option<&'a C>,
        Option<&'a S>,
        Option<&'a T>,
        Option<&'a Z>,
        Option<&'a Zs>,
        Option<&'a Al64>,
        Option<&'a Page>,
        Option<&'a PageS>,
        &'a Id,
        Entity,
        Option<&'a A>,
        (),
    );
    let mut q = world.query::<Sixteen>();
    assert_eq!(q.matches().mode(), IterMode::Archetypes);
    assert_eq!(q.iter(&world).len(), model.len());
    let got = sorted(
        q.iter(&world)
            .map(|(e, i, a, b, c, s, t, z, zs, al, pg, pgs, i2, e2, a2, ())| {
                assert_eq!((e, i), (e2, i2));
                assert_eq!(a, a2);
                let mut mask = 0;
                let mut bit = |present: bool, b: u32| mask |= if present { b } else { 0 };
                bit(a.is_some(), BA);
                bit(b.is_some(), BB);
                bit(c.is_some(), BC);
                bit(s.is_some(), BS);
                bit(t.is_some(), BT);
                bit(z.is_some(), BZ);
                bit(zs.is_some(), BZS);
                bit(al.is_some(), BAL);
                bit(pg.is_some(), BPG);
                bit(pgs.is_some(), BPGS);
                let values = [
                    a.map(|x| x.0),
                    b.map(|x| x.0),
                    c.map(|x| x.0),
                    s.map(|x| x.0),
                    t.map(|x| x.0),
                    al.map(|x| x.0),
                    pg.map(|x| x.0),
                    pgs.map(|x| x.0),
                ];
                (e, i.0, mask, values)
            })
            .collect(),
    );
    let want = sorted(
        model
            .iter()
            .map(|m| {
                let values = [BA, BB, BC, BS, BT, BAL, BPG, BPGS].map(|b| m.opt(b));
                (m.e, m.id, m.mask, values)
            })
            .collect(),
    );
    assert_eq!(got, want);
}

/// Writes through `Mut` in every mode, by `next` and by `fold`, and checks each landed once.
#[test]
#[allow(clippy::while_let_on_iterator)] // `next`, not `fold`: that is the path under test
fn writes_land_in_every_mode() {
    let (mut world, model) = build();
    let before = |m: &Ent, bit| m.has(bit).then(|| m.v(bit));

    // Tables: by `next`, then by `fold` (`for_each_mut`).
    let mut q = world.query::<(&Id, &mut A, &mut Al64)>();
    assert_eq!(q.matches().mode(), IterMode::Tables);
    let mut visited = Vec::new();
    let mut iter = q.iter_mut(&mut world);
    while let Some((i, mut a, mut al)) = iter.next() {
        a.0 += 1;
        al.0 += 1;
        assert_eq!(&*al as *const Al64 as usize % 64, 0);
        visited.push(i.0);
    }
    let mut q2 = world.query_filtered::<(&mut B, &mut Page), With<C>>();
    q2.for_each_mut(&mut world, |(mut b, mut p)| {
        b.0 += 1;
        p.0 += 1;
    });
    // Archetypes: a table and a sparse component, and an optional sparse one.
    let mut q3 = world.query::<(&mut C, &mut S, Option<&mut PageS>)>();
    assert_eq!(q3.matches().mode(), IterMode::Archetypes);
    for (mut c, mut s, p) in q3.iter_mut(&mut world) {
        c.0 += 1;
        s.0 += 1;
        if let Some(mut p) = p {
            p.0 += 1;
        }
    }
    // Sparse: driven by T, with an optional table component.
    let mut q4 = world.query::<(&mut T, Option<&mut A>, &mut Zs)>();
    assert_eq!(q4.matches().mode(), IterMode::Sparse);
    q4.for_each_mut(&mut world, |(mut t, a, mut zs)| {
        t.0 += 1;
        *zs = Zs;
        if let Some(mut a) = a {
            a.0 += 10;
        }
    });

    assert_eq!(
        sorted(visited),
        sorted(model.iter().filter(|m| m.has(BA | BAL)).map(|m| m.id).collect())
    );
    for m in &model {
        let e = m.e;
        let a =
            before(m, BA).map(|v| v + u32::from(m.has(BAL)) + if m.has(BT | BZS) { 10 } else { 0 });
        assert_eq!(world.get::<A>(e).map(|x| x.0), a, "A of {}", m.id);
        assert_eq!(
            world.get::<Al64>(e).map(|x| x.0),
            before(m, BAL).map(|v| v + u32::from(m.has(BA)))
        );
        let bp = m.has(BB | BPG | BC);
        assert_eq!(world.get::<B>(e).map(|x| x.0), before(m, BB).map(|v| v + u32::from(bp)));
        assert_eq!(world.get::<Page>(e).map(|x| x.0), before(m, BPG).map(|v| v + u32::from(bp)));
        let cs = m.has(BC | BS);
        assert_eq!(world.get::<C>(e).map(|x| x.0), before(m, BC).map(|v| v + u32::from(cs)));
        assert_eq!(world.get::<S>(e).map(|x| x.0), before(m, BS).map(|v| v + u32::from(cs)));
        assert_eq!(world.get::<PageS>(e).map(|x| x.0), before(m, BPGS).map(|v| v + u32::from(cs)));
        assert_eq!(
            world.get::<T>(e).map(|x| x.0),
            before(m, BT).map(|v| v + u32::from(m.has(BZS)))
        );
    }
    world.check_invariants();
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn conflicting_access_is_refused_at_creation() {
    let world = new_world();
    fn conflict<D: QueryData, F: QueryFilter>(world: &World) -> &'static str {
        match QueryState::<D, F>::try_new(world) {
            Err(QueryError::Conflict { component }) => component,
            Err(e) => panic!("{}: wrong error {e}", std::any::type_name::<(D, F)>()),
            Ok(_) => panic!("{}: accepted", std::any::type_name::<(D, F)>()),
        }
    }
    let a = std::any::type_name::<A>();
    let s = std::any::type_name::<S>();
    assert_eq!(conflict::<(&mut A, &A), ()>(&world), a);
    assert_eq!(conflict::<(&A, &mut A), ()>(&world), a);
    assert_eq!(conflict::<(&mut A, &mut A), ()>(&world), a);
    assert_eq!(conflict::<(&mut A, Option<&A>), ()>(&world), a);
    assert_eq!(conflict::<(Option<&mut A>, &A), ()>(&world), a);
    assert_eq!(conflict::<(Option<&mut A>, Option<&mut A>), ()>(&world), a);
    assert_eq!(conflict::<Option<(&mut A, &A)>, ()>(&world), a);
    assert_eq!(conflict::<((Entity, &S), (&B, (&mut S,))), ()>(&world), s);
    assert_eq!(conflict::<((&mut S,), Option<Option<&S>>), ()>(&world), s);
    // A conflict on a component no world has registered yet is found all the same.
    assert_eq!(conflict::<(&Late, &mut Late), ()>(&world), std::any::type_name::<Late>());
    let err = world.try_query::<(&mut A, &A), ()>().unwrap_err();
    assert!(err.to_string().contains(a), "{err}");
    if !cfg!(miri) {
        // (Unwinding takes many seconds under miri.)
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            world.query::<(&A, &mut A)>()
        }));
        let msg = *caught.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("conflicting access") && msg.contains(a), "{msg}");
    }

    // Shared reads, filters on what is written (a filter reads a row's ticks before that row's
    // `Mut` exists), and different components are fine.
    QueryState::<&mut A, Changed<A>>::try_new(&world).unwrap();
    QueryState::<&mut A, Added<A>>::try_new(&world).unwrap();
    QueryState::<&mut A, Or<(With<B>, Changed<A>)>>::try_new(&world).unwrap();
    QueryState::<(&mut S, &B), (With<A>, Changed<S>)>::try_new(&world).unwrap();
    QueryState::<(&A, &A), ()>::try_new(&world).unwrap();
    QueryState::<(&A, Option<&A>, (&A,)), Changed<A>>::try_new(&world).unwrap();
    QueryState::<&mut A, (With<A>, Without<B>)>::try_new(&world).unwrap();
    QueryState::<(&mut A, &mut B, &mut S, Option<&mut T>), Changed<C>>::try_new(&world).unwrap();
    QueryState::<(&mut A, Entity, Entity), Or<(With<A>, Added<B>)>>::try_new(&world).unwrap();
    let access = QueryState::<(&mut A, &B), (With<C>, Without<S>)>::component_access().unwrap();
    assert!(access.writes.contains(std::any::TypeId::of::<A>()));
    assert!(access.reads.contains(std::any::TypeId::of::<B>()));
    assert!(!access.reads.contains(std::any::TypeId::of::<A>()));
    assert!(access.with.contains(std::any::TypeId::of::<C>()));
    assert!(access.without.contains(std::any::TypeId::of::<S>()));
}

#[test]
fn a_state_picks_up_archetypes_and_components_made_after_it() {
    let mut world = new_world();
    let mut late = world.query::<(Entity, &Late)>();
    let mut late_sparse = world.query::<(Entity, &mut LateS)>();
    let mut with_opt = world.query::<(Entity, &A, Option<&LateS>)>();
    let mut without = world.query_filtered::<Entity, (With<A>, Without<LateS>)>();
    let mut changed_late = world.query_filtered::<Entity, Changed<Late>>();
    assert_eq!(late.matches().mode(), IterMode::Tables);
    assert!(late.is_empty(&world));
    assert_eq!(late.iter(&world).len(), 0);
    assert_eq!(changed_late.iter(&world).count(), 0);
    assert_eq!(late_sparse.iter_mut(&mut world).count(), 0);
    assert_eq!(late.count(&world), 0);

    let a0 = world.spawn((A(0),));
    let a1 = world.spawn((A(1),));
    assert_eq!(sorted(without.iter(&world).collect()), sorted(vec![a0, a1]));
    assert_eq!(
        with_opt.iter(&world).map(|(e, _, l)| (e, l.is_some())).collect::<Vec<_>>().len(),
        2
    );
    assert_eq!(with_opt.matches().mode(), IterMode::Tables);

    // Now register the late components: `LateS` in a sparse set, `Late` on first use.
    world.register_component::<LateS>(StorageType::SparseSet).unwrap();
    world.insert(a1, (LateS(10),)).unwrap();
    let l = world.spawn((Late(7), A(2)));
    let ls = world.spawn((LateS(20),));
    assert_eq!(late.iter(&world).map(|(e, x)| (e, x.0)).collect::<Vec<_>>(), [(l, 7)]);
    assert_eq!(late.count(&world), 1);
    assert_eq!(late.get(&world, l).unwrap().1, &Late(7));
    assert_eq!(changed_late.iter(&world).collect::<Vec<_>>(), [l]);
    for (_, mut x) in late_sparse.iter_mut(&mut world) {
        x.0 += 1;
    }
    assert_eq!(late_sparse.matches().mode(), IterMode::Sparse);
    // Unregistered when the state was made, `LateS` now resolves: the state walks its set.
    assert!(late_sparse.matches().is_dense_sparse());
    assert_eq!(world.get::<LateS>(a1), Some(&LateS(11)));
    assert_eq!(world.get::<LateS>(ls), Some(&LateS(21)));
    // The optional term resolved to a sparse set: the mode changed, and `a1` (same table as
    // `a0`, another archetype) is told apart from `a0`.
    let seen = sorted(with_opt.iter(&world).map(|(e, a, x)| (e, a.0, x.copied())).collect());
    assert_eq!(with_opt.matches().mode(), IterMode::Archetypes);
    assert_eq!(seen, sorted(vec![(a0, 0, None), (a1, 1, Some(LateS(11))), (l, 2, None)]));
    assert_eq!(sorted(without.iter(&world).collect()), sorted(vec![a0, l]));
    assert_eq!(without.count(&world), 2);
    world.check_invariants();
}

#[test]
fn get_single_count_and_is_empty_in_every_mode() {
    let mut world = new_world();
    let ta = world.spawn((A(1), B(1)));
    let tb = world.spawn((A(2),));
    let sa = world.spawn((A(3), S(3)));
    let ss = world.spawn((S(4), T(4)));
    let lone = world.spawn((C(5),));
    let dead = world.spawn((A(6), S(6)));
    world.despawn(dead).unwrap();

    // Tables.
    let mut q = world.query::<(Entity, &mut A)>();
    assert_eq!(q.get(&world, ta).unwrap(), (ta, &A(1)));
    assert_eq!(q.get(&world, lone).unwrap_err(), QueryError::DoesNotMatch(lone));
    assert_eq!(q.get(&world, dead).unwrap_err(), QueryError::NoSuchEntity(dead));
    q.get_mut(&mut world, tb).unwrap().1.0 = 20;
    assert_eq!(world.get::<A>(tb), Some(&A(20)));
    let [(_, mut x), (_, mut y), (_, mut z)] = q.get_many_mut(&mut world, [ta, tb, sa]).unwrap();
    std::mem::swap(&mut x.0, &mut y.0);
    z.0 += 30;
    assert_eq!([ta, tb, sa].map(|e| world.get::<A>(e).unwrap().0), [20, 1, 33]);
    assert_eq!(
        q.get_many_mut(&mut world, [ta, sa, ta]).unwrap_err(),
        QueryError::DuplicateEntity(ta)
    );
    assert_eq!(q.get_many_mut(&mut world, [ta, dead]).unwrap_err(), QueryError::NoSuchEntity(dead));
    assert_eq!(q.get_many_mut(&mut world, [lone, ta]).unwrap_err(), QueryError::DoesNotMatch(lone));
    assert_eq!(q.get_many_mut(&mut world, []).unwrap().len(), 0);
    // Read-only: an entity may come twice; the first failing entity's error.
    assert_eq!(
        q.get_many(&world, [ta, sa, ta]).unwrap().map(|(e, a)| (e, a.0)),
        [(ta, 20), (sa, 33), (ta, 20)]
    );
    assert_eq!(q.get_many(&world, [ta, lone, dead]).unwrap_err(), QueryError::DoesNotMatch(lone));
    assert_eq!(q.get_many(&world, [dead, lone]).unwrap_err(), QueryError::NoSuchEntity(dead));
    assert_eq!(q.single(&world).unwrap_err(), QueryError::MultipleEntities);
    assert_eq!(q.count(&world), 3);
    assert!(!q.is_empty(&world));
    let mut one = world.query_filtered::<(Entity, &mut A), With<B>>();
    assert_eq!(one.single(&world).unwrap(), (ta, &A(20)));
    one.single_mut(&mut world).unwrap().1.0 = 21;
    assert_eq!(world.get::<A>(ta), Some(&A(21)));
    let mut none = world.query_filtered::<&A, With<C>>();
    assert_eq!(none.single(&world).unwrap_err(), QueryError::NoEntities);
    assert_eq!(none.single_mut(&mut world).unwrap_err(), QueryError::NoEntities);
    assert!(none.is_empty(&world));
    assert_eq!(none.count(&world), 0);

    // Archetypes.
    let mut q = world.query::<(&A, &mut S)>();
    assert_eq!(q.matches().mode(), IterMode::Archetypes);
    assert_eq!(q.get(&world, sa).unwrap(), (&A(33), &S(3)));
    assert_eq!(q.get(&world, ta).unwrap_err(), QueryError::DoesNotMatch(ta));
    assert_eq!(q.get(&world, ss).unwrap_err(), QueryError::DoesNotMatch(ss));
    assert_eq!(q.get(&world, dead).unwrap_err(), QueryError::NoSuchEntity(dead));
    q.single_mut(&mut world).unwrap().1.0 = 30;
    assert_eq!(world.get::<S>(sa), Some(&S(30)));
    assert_eq!(q.count(&world), 1);

    // Sparse.
    let mut q = world.query::<(Entity, &mut S)>();
    assert_eq!(q.matches().mode(), IterMode::Sparse);
    assert_eq!(q.get(&world, ss).unwrap(), (ss, &S(4)));
    assert_eq!(q.get(&world, tb).unwrap_err(), QueryError::DoesNotMatch(tb));
    assert_eq!(q.get(&world, dead).unwrap_err(), QueryError::NoSuchEntity(dead));
    let [(_, mut x), (_, mut y)] = q.get_many_mut(&mut world, [ss, sa]).unwrap();
    x.0 += 100;
    y.0 += 100;
    assert_eq!(world.get::<S>(ss), Some(&S(104)));
    assert_eq!(world.get::<S>(sa), Some(&S(130)));
    assert_eq!(q.get_many_mut(&mut world, [ss, ss]).unwrap_err(), QueryError::DuplicateEntity(ss));
    assert_eq!(q.single(&world).unwrap_err(), QueryError::MultipleEntities);
    assert_eq!(q.count(&world), 2);
    let mut t = world.query_filtered::<Entity, With<T>>();
    assert_eq!(t.single(&world), Ok(ss));
    assert_eq!(t.get_readonly(&world, ss), Ok(ss));
    assert_eq!(t.get_readonly(&world, sa), Err(QueryError::DoesNotMatch(sa)));
    world.despawn(ss).unwrap();
    assert_eq!(t.single(&world).unwrap_err(), QueryError::NoEntities);
    assert!(t.is_empty(&world));
    assert_eq!(t.get(&world, ss).unwrap_err(), QueryError::NoSuchEntity(ss));
    assert_eq!(t.count(&world), 0);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_state_refuses_a_world_it_was_not_built_for() {
    let mut world = new_world();
    let mut other = new_world();
    let e = world.spawn((A(1), S(1)));
    let o = other.spawn((A(1), S(1)));
    let mut q = world.query::<(&mut A, &S)>();
    assert_eq!(q.validate_world(&world), Ok(()));
    assert_eq!(q.validate_world(&other), Err(QueryError::WorldMismatch));
    assert_eq!(
        QueryState::<(&A, &S)>::new(&world).get_readonly(&other, o),
        Err(QueryError::WorldMismatch)
    );
    // Unwinding costs many seconds under miri: check one entry point there, all of them natively.
    let mut budget = if cfg!(miri) { 1 } else { usize::MAX };
    let mut panics = |f: &mut dyn FnMut()| {
        if budget == 0 {
            return;
        }
        budget -= 1;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let msg = *caught.expect_err("must panic").downcast::<String>().unwrap();
        assert!(msg.contains("another world"), "{msg}");
    };
    panics(&mut || _ = q.iter(&other).count());
    panics(&mut || _ = q.iter_mut(&mut other).count());
    panics(&mut || drop(q.get(&other, o)));
    panics(&mut || drop(q.get_mut(&mut other, o)));
    panics(&mut || drop(q.get_many_mut(&mut other, [o])));
    panics(&mut || drop(q.single(&other)));
    panics(&mut || _ = q.is_empty(&other));
    panics(&mut || q.par_iter(&other).for_each(|_| ()));
    panics(&mut || q.par_iter_mut(&mut other).for_each(|_| ()));
    let mut count = world.query::<&A>();
    panics(&mut || _ = count.count(&other));
    // The state still works with its own world afterwards.
    assert_eq!(q.iter(&world).count(), 1);
    assert_eq!(q.get(&world, e).unwrap(), (&A(1), &S(1)));
}

/// A component nobody registered is simply absent: `Option` yields `None`, `Without` passes,
/// and an `Or` alternative naming it fails without failing the others.
#[test]
fn unregistered_components_in_optional_and_or_terms() {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Never(u32);
    let mut world = new_world();
    let a = world.spawn((A(1),));
    let s = world.spawn((S(2),));
    let mut opt = world.query::<(Entity, Option<&Never>, Option<&mut Late>)>();
    assert_eq!(
        sorted(opt.iter(&world).map(|(e, n, l)| (e, n.is_some() || l.is_some())).collect()),
        sorted(vec![(a, false), (s, false)])
    );
    let mut or = world.query_filtered::<Entity, Or<(With<Never>, With<A>)>>();
    assert_eq!(or.iter(&world).collect::<Vec<_>>(), [a]);
    assert_eq!(or.count(&world), 1);
    let mut or_sparse = world.query_filtered::<Entity, Or<(Changed<Never>, With<S>)>>();
    assert_eq!(or_sparse.iter(&world).collect::<Vec<_>>(), [s]);
    let mut without = world.query_filtered::<Entity, Without<Never>>();
    assert_eq!(without.count(&world), 2);
    let mut required = world.query_filtered::<Entity, (With<A>, Added<Never>)>();
    assert!(required.is_empty(&world));
    assert_eq!(required.iter(&world).size_hint(), (0, Some(0)));
}

/// `World::clear` keeps archetypes and tables: states keep working, and what is spawned
/// afterwards is added anew.
#[test]
fn states_survive_world_clear() {
    let mut world = new_world();
    let mut q = world.query::<(Entity, &mut A, Option<&S>)>();
    let mut added = world.query_filtered::<Entity, Added<A>>();
    let mut sparse = world.query::<(Entity, &S)>();
    for i in 0..10 {
        let e = world.spawn((A(i),));
        if i % 2 == 0 {
            world.insert(e, (S(i),)).unwrap();
        }
    }
    assert_eq!(q.iter_mut(&mut world).count(), 10);
    assert_eq!(added.iter(&world).count(), 10);
    assert_eq!(sparse.iter(&world).count(), 5);
    world.clear();
    assert_eq!(q.iter_mut(&mut world).count(), 0);
    assert_eq!(sparse.iter(&world).count(), 0);
    assert_eq!(q.count(&world), 0);
    let e = world.spawn((A(7), S(7)));
    assert_eq!(added.iter(&world).collect::<Vec<_>>(), [e]);
    assert_eq!(sparse.single(&world).unwrap(), (e, &S(7)));
    assert_eq!(q.single_mut(&mut world).unwrap().1.0, 7);
    world.check_invariants();
}
