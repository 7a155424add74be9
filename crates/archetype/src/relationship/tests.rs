//! Relationships: both sides kept exact through every structural operation, O(1) removal,
//! linked despawn, traversal, bad input; `check_invariants` after each step.

use folio_storage::Entity;

use super::*;
use crate::component::StorageType;

/// A game's own relationship: not linked, cycles allowed.
#[derive(Clone, Debug, PartialEq)]
struct Targets(Entity);
#[derive(Clone, Debug)]
struct TargetedBy(Sources);

impl Relationship for Targets {
    type Target = TargetedBy;
    fn target(&self) -> Entity {
        self.0
    }
    fn from_target(target: Entity) -> Self {
        Self(target)
    }
}
impl RelationshipTarget for TargetedBy {
    type Relationship = Targets;
    fn sources(&self) -> &Sources {
        &self.0
    }
    fn sources_mut(&mut self) -> &mut Sources {
        &mut self.0
    }
    fn from_sources(sources: Sources) -> Self {
        Self(sources)
    }
}

/// A relationship that keeps its sources' order.
#[derive(Clone, Debug)]
struct InQueue(Entity);
#[derive(Clone, Debug)]
struct Queue(Sources);

impl Relationship for InQueue {
    type Target = Queue;
    const KEEP_ORDER: bool = true;
    fn target(&self) -> Entity {
        self.0
    }
    fn from_target(target: Entity) -> Self {
        Self(target)
    }
}
impl RelationshipTarget for Queue {
    type Relationship = InQueue;
    fn sources(&self) -> &Sources {
        &self.0
    }
    fn sources_mut(&mut self) -> &mut Sources {
        &mut self.0
    }
    fn from_sources(sources: Sources) -> Self {
        Self(sources)
    }
}

#[derive(Debug, PartialEq)]
struct Name(&'static str);

fn sorted(mut v: Vec<Entity>) -> Vec<Entity> {
    v.sort();
    v
}

fn kids(world: &World, e: Entity) -> Vec<Entity> {
    sorted(world.children(e).to_vec())
}

#[test]
fn raw_insert_registers_the_hierarchy_and_lists_the_child() {
    let mut world = World::new();
    let parent = world.spawn((Name("p"),));
    let child = world.spawn((Name("c"),));
    world.insert(child, (ChildOf(parent),)).unwrap();
    assert!(world.is_relationship_registered::<ChildOf>());
    assert_eq!(world.children(parent), [child]);
    assert_eq!(world.parent(child), Some(parent));
    assert_eq!(world.source_index::<ChildOf>(child), Some(0));
    world.check_invariants();
}

#[test]
fn spawn_with_child_of_registers_too() {
    let mut world = World::new();
    let parent = world.spawn(());
    let a = world.spawn((ChildOf(parent), Name("a")));
    let b = world.spawn((ChildOf(parent),));
    assert_eq!(world.children(parent), [a, b]);
    world.check_invariants();
}

#[test]
fn spawn_batch_of_children_lists_them_all() {
    let mut world = World::new();
    let parents: Vec<Entity> = (0..3).map(|_| world.spawn(())).collect();
    let children = world.spawn_batch((0..30).map(|i| (ChildOf(parents[i % 3]), Name("c"))));
    for (i, &p) in parents.iter().enumerate() {
        let expected: Vec<Entity> = children.iter().copied().skip(i).step_by(3).collect();
        assert_eq!(world.children(p), expected.as_slice());
    }
    world.check_invariants();
}

#[test]
fn insert_batch_lists_children() {
    let mut world = World::new();
    let p = world.spawn(());
    let es: Vec<Entity> = (0..5).map(|_| world.spawn((Name("x"),))).collect();
    world.insert_batch(es.iter().map(|&e| (e, (ChildOf(p),)))).unwrap();
    assert_eq!(world.children(p), es.as_slice());
    world.check_invariants();
}

#[test]
fn reparent_moves_the_child_between_lists() {
    let mut world = World::new();
    let (p, q) = (world.spawn(()), world.spawn(()));
    let c = world.spawn((ChildOf(p),));
    let d = world.spawn((ChildOf(p),));
    world.insert(c, (ChildOf(q),)).unwrap();
    assert_eq!(world.children(p), [d]);
    assert_eq!(world.children(q), [c]);
    world.check_invariants();
    world.set_parent(d, q).unwrap();
    assert_eq!(world.children(p), [] as [Entity; 0]);
    assert_eq!(world.children(q), [c, d]);
    // Re-inserting the same parent relists it (at the end).
    world.set_parent(c, q).unwrap();
    assert_eq!(world.children(q), [d, c]);
    world.check_invariants();
}

#[test]
fn removing_a_child_swaps_the_last_into_its_place() {
    let mut world = World::new();
    let p = world.spawn(());
    let cs: Vec<Entity> = (0..5).map(|_| world.spawn((ChildOf(p),))).collect();
    assert_eq!(world.remove_parent(cs[1]), Some(p));
    assert_eq!(world.children(p), [cs[0], cs[4], cs[2], cs[3]]);
    assert_eq!(world.source_index::<ChildOf>(cs[4]), Some(1));
    assert_eq!(world.source_index::<ChildOf>(cs[1]), None);
    world.check_invariants();
    world.remove::<(ChildOf,)>(cs[3]).unwrap();
    assert_eq!(world.children(p), [cs[0], cs[4], cs[2]]);
    world.check_invariants();
}

#[test]
fn keep_order_shifts_instead() {
    let mut world = World::new();
    let q = world.spawn(());
    let es: Vec<Entity> = (0..5).map(|_| world.spawn(())).collect();
    for &e in &es {
        world.relate::<InQueue>(e, q).unwrap();
    }
    world.despawn(es[1]).unwrap();
    assert_eq!(world.sources::<Queue>(q), [es[0], es[2], es[3], es[4]]);
    assert_eq!(world.source_index::<InQueue>(es[4]), Some(3));
    world.check_invariants();
}

#[test]
fn despawning_a_child_unlists_it() {
    let mut world = World::new();
    let p = world.spawn(());
    let a = world.spawn((ChildOf(p),));
    let b = world.spawn((ChildOf(p),));
    world.despawn(a).unwrap();
    assert_eq!(world.children(p), [b]);
    world.check_invariants();
}

#[test]
fn despawning_a_parent_despawns_the_subtree() {
    let mut world = World::new();
    let root = world.spawn(());
    let a = world.spawn((ChildOf(root),));
    let b = world.spawn((ChildOf(a),));
    let c = world.spawn((ChildOf(b),));
    let other = world.spawn(());
    let kept = world.spawn((ChildOf(other),));
    world.despawn(a).unwrap();
    for gone in [a, b, c] {
        assert!(!world.contains(gone));
    }
    assert_eq!(world.children(root), [] as [Entity; 0]);
    assert_eq!(world.children(other), [kept]);
    assert_eq!(world.deferred_len(), 0);
    world.check_invariants();
}

#[test]
fn despawn_recursive_takes_the_tree_at_once() {
    let mut world = World::new();
    let root = world.spawn(());
    let mut frontier = vec![root];
    for _ in 0..4 {
        let mut next = Vec::new();
        for &p in &frontier {
            next.extend((0..3).map(|_| world.spawn((ChildOf(p),))));
        }
        frontier = next;
    }
    let outside = world.spawn(());
    assert_eq!(world.len(), 1 + 3 + 9 + 27 + 81 + 1);
    assert_eq!(world.despawn_recursive(root).unwrap(), 121);
    assert_eq!(world.len(), 1);
    assert!(world.contains(outside));
    world.check_invariants();
    assert!(
        matches!(world.despawn_recursive(root), Err(EntityError::NoSuchEntity(e)) if e == root)
    );
}

#[test]
fn despawn_recursive_of_a_subtree_unlists_its_root() {
    let mut world = World::new();
    let root = world.spawn(());
    let a = world.spawn((ChildOf(root),));
    let b = world.spawn((ChildOf(root),));
    world.spawn((ChildOf(a),));
    assert_eq!(world.despawn_recursive(a).unwrap(), 2);
    assert_eq!(world.children(root), [b]);
    world.check_invariants();
}

#[test]
fn despawn_batch_of_parents_and_children_in_any_order() {
    let mut world = World::new();
    let p = world.spawn(());
    let cs: Vec<Entity> = (0..4).map(|_| world.spawn((ChildOf(p),))).collect();
    let q = world.spawn(());
    let ds: Vec<Entity> = (0..4).map(|_| world.spawn((ChildOf(q),))).collect();
    // Children before their parent, a parent before its children, and a lone child.
    world.despawn_batch([cs[0], p, q, ds[1], ds[2]]);
    assert_eq!(world.len(), 0);
    world.check_invariants();
}

#[test]
fn clear_keeps_the_world_consistent() {
    let mut world = World::new();
    let p = world.spawn(());
    world.spawn((ChildOf(p),));
    let t = world.spawn(());
    world.relate::<Targets>(p, t).unwrap();
    world.clear();
    assert!(world.is_empty());
    world.check_invariants();
    // And the world works afterwards.
    let p = world.spawn(());
    let c = world.spawn((ChildOf(p),));
    assert_eq!(world.children(p), [c]);
    world.check_invariants();
}

#[test]
fn a_game_relationship_leaves_sources_when_the_target_goes() {
    let mut world = World::new();
    let boss = world.spawn(());
    let a = world.spawn(());
    let b = world.spawn(());
    world.relate::<Targets>(a, boss).unwrap();
    world.relate::<Targets>(b, boss).unwrap();
    world.relate::<Targets>(boss, a).unwrap(); // cycles are fine for it
    assert_eq!(world.sources::<TargetedBy>(boss), [a, b]);
    world.check_invariants();
    world.despawn(boss).unwrap();
    assert!(world.contains(a) && world.contains(b));
    assert!(!world.has::<Targets>(a) && !world.has::<Targets>(b));
    assert_eq!(world.sources::<TargetedBy>(a), [] as [Entity; 0]);
    world.check_invariants();
}

#[test]
fn removing_the_collection_detaches_the_sources() {
    let mut world = World::new();
    let p = world.spawn(());
    let c = world.spawn((ChildOf(p),));
    world.remove::<(Children,)>(p).unwrap();
    assert!(world.contains(c), "removing Children is not a despawn");
    assert_eq!(world.parent(c), None);
    world.check_invariants();
}

#[test]
fn replacing_the_collection_relists_the_sources() {
    let mut world = World::new();
    let p = world.spawn(());
    let a = world.spawn((ChildOf(p),));
    let b = world.spawn((ChildOf(p),));
    world.insert(p, (Children::from_sources(Sources::new()),)).unwrap();
    assert_eq!(kids(&world, p), sorted(vec![a, b]));
    world.check_invariants();
}

#[test]
fn sparse_set_relationships_work_alike() {
    let mut world = World::new();
    world.register_component::<Targets>(StorageType::SparseSet).unwrap();
    let t = world.spawn(());
    let s = world.spawn(());
    world.relate::<Targets>(s, t).unwrap();
    world.unrelate::<Targets>(s);
    world.relate::<Targets>(s, t).unwrap();
    assert_eq!(world.sources::<TargetedBy>(t), [s]);
    world.check_invariants();
}

#[test]
fn late_registration_links_existing_holders() {
    let mut world = World::new();
    let t = world.spawn(());
    let a = world.spawn((Targets(t),));
    let dead = world.spawn(());
    world.despawn(dead).unwrap();
    let bad = world.spawn((Targets(dead),));
    assert!(!world.is_relationship_registered::<Targets>());
    world.register_relationship::<Targets>();
    assert_eq!(world.sources::<TargetedBy>(t), [a]);
    assert!(!world.has::<Targets>(bad), "a relationship to a dead target is dropped");
    world.check_invariants();
}

#[test]
fn bad_input_is_refused_with_nothing_changed() {
    let mut world = World::new();
    let root = world.spawn(());
    let a = world.spawn((ChildOf(root),));
    let b = world.spawn((ChildOf(a),));
    let dead = world.spawn(());
    world.despawn(dead).unwrap();

    let e = world.set_parent(a, a).unwrap_err();
    assert!(matches!(e, RelationshipError::SelfRelation { entity, .. } if entity == a), "{e}");
    let e = world.set_parent(a, dead).unwrap_err();
    assert!(matches!(e, RelationshipError::NoSuchTarget { target, .. } if target == dead), "{e}");
    let e = world.set_parent(dead, a).unwrap_err();
    assert!(matches!(e, RelationshipError::NoSuchSource(s) if s == dead), "{e}");
    let e = world.set_parent(root, b).unwrap_err();
    assert!(
        matches!(e, RelationshipError::Cycle { source, target, .. } if (source, target) == (root, b))
    );
    assert!(e.to_string().contains("cycle"), "{e}");
    let e = world.set_parent(a, b).unwrap_err();
    assert!(matches!(e, RelationshipError::Cycle { .. }));
    // Nothing changed.
    assert_eq!(world.parent(a), Some(root));
    assert_eq!(world.parent(b), Some(a));
    assert_eq!(world.parent(root), None);
    world.check_invariants();
}

#[test]
fn a_raw_insert_of_a_bad_relationship_is_undone() {
    let mut world = World::new();
    let root = world.spawn(());
    let a = world.spawn((ChildOf(root),));
    let b = world.spawn((ChildOf(a),));
    let dead = world.spawn(());
    world.despawn(dead).unwrap();
    // A cycle: root under its grandchild. The insert is undone; root had no parent.
    world.insert(root, (ChildOf(b),)).unwrap();
    assert_eq!(world.parent(root), None);
    world.check_invariants();
    // Self: `a` loses its old parent too (the insert replaced it before the hook ran).
    world.insert(a, (ChildOf(a),)).unwrap();
    assert_eq!(world.parent(a), None);
    assert_eq!(world.children(root), [] as [Entity; 0]);
    world.check_invariants();
    // Dead target, at spawn.
    let orphan = world.spawn((ChildOf(dead), Name("o")));
    assert!(world.contains(orphan) && world.parent(orphan).is_none());
    world.check_invariants();
}

#[test]
fn a_target_despawned_before_its_link_completes() {
    // In one batch, a child is spawned under a parent without `Children` (its link waits for
    // deferred work), and the parent is despawned by a later deferred closure first.
    let mut world = World::new();
    let p = world.spawn(());
    let c = world.spawn((ChildOf(p),));
    world.despawn(p).unwrap();
    assert!(!world.contains(c));
    let q = world.spawn(());
    world.set_hooks::<Name>(crate::hooks::ComponentHooks::new().on_add(|w, e| {
        let q = w.get::<ChildOf>(e).unwrap().0;
        w.defer(move |w: &mut World| drop(w.despawn(q)));
    }));
    let d = world.spawn((ChildOf(q), Name("d")));
    assert!(!world.contains(q) && !world.contains(d), "linked despawn reaches the pending child");
    world.check_invariants();
}

#[test]
fn traversal() {
    let mut world = World::new();
    //      r
    //    /   \
    //   a     b
    //  / \    |
    // c   d   e
    let r = world.spawn(());
    let a = world.spawn((ChildOf(r),));
    let b = world.spawn((ChildOf(r),));
    let c = world.spawn((ChildOf(a),));
    let d = world.spawn((ChildOf(a),));
    let e = world.spawn((ChildOf(b),));
    let lone = world.spawn(());
    assert_eq!(world.iter_descendants(r).collect::<Vec<_>>(), [a, b, c, d, e]);
    assert_eq!(world.iter_descendants_depth_first(r).collect::<Vec<_>>(), [a, c, d, b, e]);
    assert_eq!(world.iter_ancestors(d).collect::<Vec<_>>(), [a, r]);
    assert_eq!(world.iter_ancestors(r).count(), 0);
    assert_eq!(world.iter_descendants(lone).count(), 0);
    let walk: Vec<_> = world.iter_hierarchy().collect();
    assert_eq!(
        walk,
        [(r, None), (a, Some(r)), (b, Some(r)), (c, Some(a)), (d, Some(a)), (e, Some(b))]
    );
    assert_eq!(world.children(lone), [] as [Entity; 0]);
    assert_eq!(world.parent(lone), None);
}

#[test]
fn a_world_without_relationships_has_no_hooks() {
    let mut world = World::new();
    let e = world.spawn((Name("x"),));
    world.insert(e, (7u32,)).unwrap();
    world.despawn(e).unwrap();
    assert!(!world.hooks.any(crate::hooks::HookFlags::INSERTS | crate::hooks::HookFlags::REMOVAL));
    assert!(!world.is_relationship_registered::<ChildOf>());
}

#[test]
fn a_long_list_removes_in_constant_time() {
    let mut world = World::new();
    let p = world.spawn(());
    // Smaller under miri, which interprets every hook call.
    let n = if cfg!(miri) { 300 } else { 10_000 };
    let cs = world.spawn_batch((0..n).map(|_| (ChildOf(p),)));
    for &c in cs.iter().step_by(7) {
        world.despawn(c).unwrap();
    }
    assert_eq!(world.children(p).len(), n - cs.iter().step_by(7).count());
    world.check_invariants();
}

/// A relationship that allows an entity to be related to itself.
#[derive(Clone)]
struct Likes(Entity);
#[derive(Clone)]
struct LikedBy(Sources);

impl Relationship for Likes {
    type Target = LikedBy;
    const ALLOW_SELF: bool = true;
    fn target(&self) -> Entity {
        self.0
    }
    fn from_target(target: Entity) -> Self {
        Self(target)
    }
}
impl RelationshipTarget for LikedBy {
    type Relationship = Likes;
    fn sources(&self) -> &Sources {
        &self.0
    }
    fn sources_mut(&mut self) -> &mut Sources {
        &mut self.0
    }
    fn from_sources(sources: Sources) -> Self {
        Self(sources)
    }
}

#[test]
fn a_self_relation_where_allowed() {
    let mut world = World::new();
    let narcissus = world.spawn(());
    let echo = world.spawn(());
    world.relate::<Likes>(narcissus, narcissus).unwrap();
    world.relate::<Likes>(echo, narcissus).unwrap();
    assert_eq!(world.sources::<LikedBy>(narcissus), [narcissus, echo]);
    world.check_invariants();
    world.despawn(narcissus).unwrap();
    assert!(!world.has::<Likes>(echo));
    world.check_invariants();
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn check_invariants_catches_a_list_out_of_step() {
    let mut world = World::new();
    let p = world.spawn(());
    let q = world.spawn(());
    world.spawn((ChildOf(p),));
    world.spawn((ChildOf(q),));
    world.check_invariants();
    // Swap the two lists behind folio's back: each now lists the other's child.
    let mut taken = std::mem::take(world.get_mut::<Children>(p).unwrap().sources_mut());
    std::mem::swap(world.get_mut::<Children>(q).unwrap().sources_mut(), &mut taken);
    *world.get_mut::<Children>(p).unwrap().sources_mut() = taken;
    let caught =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.check_invariants()));
    let message = caught.expect_err("the check sees it");
    let message = message.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("ChildOf"), "{message}");
}

#[test]
fn a_subtree_is_disabled_and_enabled_as_one() {
    let mut world = World::new();
    let root = world.spawn(());
    let a = world.spawn((ChildOf(root),));
    let b = world.spawn((ChildOf(a), crate::Disabled)); // disabled already
    let c = world.spawn((ChildOf(b),));
    let outside = world.spawn(());

    assert_eq!(world.disable_recursive(a).unwrap(), 2, "a and c; b was disabled");
    world.check_invariants();
    for e in [a, b, c] {
        assert!(world.has::<crate::Disabled>(e), "{e}");
    }
    assert!(!world.has::<crate::Disabled>(root));
    assert!(!world.has::<crate::Disabled>(outside));
    assert_eq!(kids(&world, a), vec![b], "the hierarchy is untouched");

    assert_eq!(world.enable_recursive(root).unwrap(), 3);
    world.check_invariants();
    for e in [root, a, b, c] {
        assert!(!world.has::<crate::Disabled>(e), "{e}");
    }
    assert_eq!(world.parent(c), Some(b));

    world.despawn(outside).unwrap();
    assert!(matches!(world.disable_recursive(outside), Err(EntityError::NoSuchEntity(_))));
    assert!(matches!(world.enable_recursive(outside), Err(EntityError::NoSuchEntity(_))));
}
