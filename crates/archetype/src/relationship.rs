//! Relationships: a component on a *source* entity naming a *target* entity ([`Relationship`]),
//! and a collection component on the target listing its sources ([`RelationshipTarget`]),
//! kept in step by folio. The hierarchy is one: a child holds [`ChildOf`]`(parent)`, its parent
//! holds [`Children`].
//!
//! # How the two sides stay exact
//! [`World::register_relationship`] sets component hooks ([`crate::hooks`]) on both types,
//! generic functions monomorphized per relationship:
//! - the relationship's `on_insert` appends the source to the target's collection (a target
//!   without one gets it through deferred work, before the operation returns);
//! - its `on_replace` (replace, remove, despawn, clear) takes the source out of the old target's
//!   collection;
//! - the collection's `on_replace` (its removal, or the target's despawn) settles the sources:
//!   a despawned target despawns them when the relationship says so
//!   ([`Relationship::LINKED_DESPAWN`], as [`ChildOf`] does), otherwise they lose the
//!   relationship.
//!
//! So every structural path keeps both sides exact: `insert`, `spawn`, `spawn_batch`,
//! `insert_batch`, `remove`, `despawn`, `despawn_batch`, `clear`, and the commands of
//! folio-schedule, which run those.
//!
//! # O(1) removal
//! The world keeps, per source, its index in the target's list (a dense array by entity index,
//! four bytes per entity index up to the highest source's). Removing a source swaps the last
//! source into its place and fixes that one's index: no scan of the list, however long. The
//! price is order: a collection lists its sources in insertion order only until one is removed.
//! A relationship that needs a stable order sets [`Relationship::KEEP_ORDER`]: removal then
//! shifts the later sources down (O(sources after it)).
//!
//! # Not fragmenting
//! The target is a value inside the component, not part of the component's identity: every
//! child of every parent shares the tables of entities with the same component types.
//!
//! # Registration
//! [`ChildOf`] and [`Children`] register themselves: the first bundle that names either in a
//! world installs the hooks, before that operation runs. A game's own relationship is registered
//! by [`World::register_relationship`], or by the first [`World::relate`] or
//! [`World::unrelate`] of it; entities that already held the relationship then are linked at
//! registration. Until then the type is a plain component that folio does not follow.
//!
//! # Bad input
//! [`World::relate`] (and [`World::set_parent`]) check first and change nothing on an error:
//! a dead source or target, a source related to itself (unless
//! [`Relationship::ALLOW_SELF`]), or a cycle for an acyclic relationship
//! ([`Relationship::ACYCLIC`]: a child made the parent of its ancestor). A raw `insert` of such
//! a relationship (`world.insert(e, (ChildOf(e),))`) cannot be refused by a hook; the
//! relationship's `on_insert` leaves the source out of every collection and removes the
//! relationship again (deferred, before the insert returns), so the source ends with no
//! relationship of that type — having lost its old one, when the insert replaced it.
//!
//! # Cost
//! Only the two component types of a relationship have hooks: entities without them take the
//! hookless paths (see the [`crate::hooks`] docs for what a world with some hooks pays). A world
//! that never names a relationship has no hooks from them at all.
//!
//! [`World::register_relationship`]: crate::World::register_relationship
//! [`World::relate`]: crate::World::relate
//! [`World::unrelate`]: crate::World::unrelate
//! [`World::set_parent`]: crate::World::set_parent

use std::any::{Any, TypeId};
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use folio_storage::Entity;
use smallvec::SmallVec;

use crate::World;
use crate::component::Component;
use crate::error::EntityError;
use crate::hooks::{ComponentHooks, DeferredWorld};
use crate::type_map::TypeIdMap;

mod hierarchy;
mod invariants;
#[cfg(test)]
mod tests;
mod traversal;
mod world_api;

pub use hierarchy::{ChildOf, Children};
pub use traversal::{Ancestors, Descendants, DescendantsDepthFirst, HierarchyWalk};

/// A component on a source entity that names one target entity; its target lists it in a
/// [`RelationshipTarget`] collection that folio keeps exact (see the [module docs](self)).
///
/// ```
/// use folio_archetype::{Entity, Relationship, RelationshipTarget, Sources, World};
///
/// /// The unit this one is aiming at.
/// #[derive(Clone)]
/// struct Targets(Entity);
/// /// The units aiming at this one.
/// #[derive(Clone)]
/// struct TargetedBy(Sources);
///
/// impl Relationship for Targets {
///     type Target = TargetedBy;
///     fn target(&self) -> Entity { self.0 }
///     fn from_target(target: Entity) -> Self { Targets(target) }
/// }
/// impl RelationshipTarget for TargetedBy {
///     type Relationship = Targets;
///     fn sources(&self) -> &Sources { &self.0 }
///     fn sources_mut(&mut self) -> &mut Sources { &mut self.0 }
///     fn from_sources(sources: Sources) -> Self { TargetedBy(sources) }
/// }
///
/// let mut world = World::new();
/// world.register_relationship::<Targets>();
/// let boss = world.spawn(());
/// let a = world.spawn((Targets(boss),));
/// let b = world.spawn((Targets(boss),));
/// assert_eq!(world.sources::<TargetedBy>(boss), [a, b]);
/// world.despawn(a).unwrap();
/// assert_eq!(world.sources::<TargetedBy>(boss), [b]);
/// world.despawn(boss).unwrap(); // not linked: `b` stays, without its relationship
/// assert!(world.contains(b) && !world.has::<Targets>(b));
/// world.check_invariants();
/// ```
pub trait Relationship: Component + Clone + Sized {
    /// The collection on the target.
    type Target: RelationshipTarget<Relationship = Self>;

    /// Whether despawning a target despawns its sources (recursively, as theirs go too).
    /// `false`: the sources stay, without the relationship.
    const LINKED_DESPAWN: bool = false;

    /// Whether an entity may be related to itself.
    const ALLOW_SELF: bool = false;

    /// Whether the relationship must not form cycles (a hierarchy): relating a source to a
    /// target that reaches the source by following the relationship is refused. The check
    /// walks the target's chain, O(depth).
    const ACYCLIC: bool = false;

    /// Whether the target's collection keeps insertion order: removal is then O(sources after
    /// the removed one) instead of O(1).
    const KEEP_ORDER: bool = false;

    /// The entity this one is related to.
    fn target(&self) -> Entity;

    /// The relationship to `target`.
    fn from_target(target: Entity) -> Self;
}

/// The collection on a target entity listing the sources related to it. folio alone changes it:
/// a game reads it ([`Sources`] derefs to a slice) and changes relationships on the sources.
pub trait RelationshipTarget: Component + Clone + Sized {
    /// The relationship whose sources this lists.
    type Relationship: Relationship<Target = Self>;

    /// The sources.
    fn sources(&self) -> &Sources;

    /// The sources, for folio to keep; [`Sources`] has no public way to change them.
    fn sources_mut(&mut self) -> &mut Sources;

    /// The collection holding `sources`.
    fn from_sources(sources: Sources) -> Self;
}

/// The sources a [`RelationshipTarget`] lists, in the order described on the [module
/// docs](self). Only folio changes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources(Vec<Entity>);

impl Sources {
    /// An empty list.
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// The sources as a slice.
    pub fn as_slice(&self) -> &[Entity] {
        &self.0
    }
}

impl Deref for Sources {
    type Target = [Entity];

    fn deref(&self) -> &[Entity] {
        &self.0
    }
}

/// Why a relationship was refused; nothing changed.
#[derive(Debug)]
pub enum RelationshipError {
    /// The source is not alive.
    NoSuchSource(Entity),
    /// The target is not alive.
    NoSuchTarget {
        /// The source.
        source: Entity,
        /// The dead target.
        target: Entity,
    },
    /// The source was to be related to itself, which the relationship does not allow.
    SelfRelation {
        /// The entity.
        entity: Entity,
        /// The relationship's type name.
        relationship: &'static str,
    },
    /// The target already reaches the source through the (acyclic) relationship: relating them
    /// would close a cycle (a child made the parent of its ancestor).
    Cycle {
        /// The source.
        source: Entity,
        /// The target, a descendant of the source.
        target: Entity,
        /// The relationship's type name.
        relationship: &'static str,
    },
    /// The insert itself failed (memory refused).
    Entity(EntityError),
}

impl fmt::Display for RelationshipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchSource(e) => write!(f, "source {e} does not exist"),
            Self::NoSuchTarget { source, target } => {
                write!(f, "cannot relate {source} to {target}: {target} does not exist")
            }
            Self::SelfRelation { entity, relationship } => {
                write!(f, "{relationship} cannot relate {entity} to itself")
            }
            Self::Cycle { source, target, relationship } => write!(
                f,
                "{relationship} from {source} to {target} would close a cycle: {target} \
                 already reaches {source}"
            ),
            Self::Entity(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RelationshipError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Entity(e) => Some(e),
            _ => None,
        }
    }
}

impl From<EntityError> for RelationshipError {
    fn from(e: EntityError) -> Self {
        Self::Entity(e)
    }
}

/// A source's entry in [`Links`]: not listed by any target.
const UNLINKED: u32 = u32::MAX;
/// A source's entry in [`Links`]: to be appended to a target that had no collection yet, by
/// deferred work ([`finish_link`]).
const PENDING: u32 = u32::MAX - 1;

/// Per source (by entity index), its index in its target's collection and that target, or
/// [`UNLINKED`] / [`PENDING`]. A resource of a type only this module names.
///
/// The target is kept beside the index so that taking a source off its list (every despawn of
/// a child) needs no lookup of the source's relationship component.
struct Links<R> {
    /// Invariant: for every source `s` listed by a target `t`, `slots[s.index()]` is its index
    /// there and `t`; every other entry is `UNLINKED`, or `PENDING` while deferred work is
    /// queued.
    slots: Vec<Link>,
    _r: PhantomData<fn() -> R>,
}

/// One source's entry in [`Links`].
#[derive(Clone, Copy, Debug)]
struct Link {
    /// The index in the target's list, or [`UNLINKED`] / [`PENDING`].
    slot: u32,
    /// The target listing the source (`Some` exactly when `slot` is an index).
    target: Option<Entity>,
}

impl Link {
    const UNLINKED: Self = Self { slot: UNLINKED, target: None };
}

impl<R> Links<R> {
    fn get(&self, e: Entity) -> u32 {
        self.link(e).slot
    }

    fn link(&self, e: Entity) -> Link {
        self.slots.get(e.index() as usize).copied().unwrap_or(Link::UNLINKED)
    }

    /// Records `e` at index `slot` of `target`'s list.
    fn list(&mut self, e: Entity, slot: u32, target: Entity) {
        debug_assert!(slot < PENDING, "an index, not a mark");
        self.put(e, Link { slot, target: Some(target) });
    }

    /// Marks `e` [`UNLINKED`] or [`PENDING`].
    fn mark(&mut self, e: Entity, mark: u32) {
        debug_assert!(mark >= PENDING, "a mark, not an index");
        self.put(e, Link { slot: mark, target: None });
    }

    /// `e`'s entry, which is [`UNLINKED`] from now on.
    fn take(&mut self, e: Entity) -> Link {
        match self.slots.get_mut(e.index() as usize) {
            Some(link) => std::mem::replace(link, Link::UNLINKED),
            None => Link::UNLINKED,
        }
    }

    fn put(&mut self, e: Entity, link: Link) {
        let i = e.index() as usize;
        if i >= self.slots.len() {
            if link.slot == UNLINKED {
                return;
            }
            self.slots.resize(i + 1, Link::UNLINKED);
        }
        self.slots[i] = link;
    }
}

/// A registered relationship's consistency check.
type Check = fn(&World);
/// A registered relationship's links made again from its collections (after a restore).
type Rebuild = fn(&mut World);

/// The relationships registered in a world, by type: their checks for
/// [`World::check_invariants`], how to rebuild their links, and the links. A field of the
/// world, not a resource: it is configuration and bookkeeping that a snapshot's restore of the
/// resources must not take back (a relationship registered after a snapshot keeps its hooks,
/// so it keeps its links too), and the links follow the restored collections instead.
#[derive(Default)]
pub(crate) struct Relationships {
    checks: Vec<(TypeId, Check, Rebuild)>,
    /// By relationship type: its `Links<R>`.
    links: TypeIdMap<Box<dyn Any + Send + Sync>>,
}

impl World {
    /// Makes every registered relationship's links again from the collections (each source's
    /// index in its target's list): after a restore put the components back.
    pub(crate) fn rebuild_relationship_links(&mut self) {
        let rebuilds: Vec<Rebuild> = self.relationships.checks.iter().map(|c| c.2).collect();
        for rebuild in rebuilds {
            rebuild(self);
        }
    }
}

/// [`Rebuild`] for `R`.
fn rebuild_links<R: Relationship>(world: &mut World) {
    let mut fresh = Links::<R> { slots: Vec::new(), _r: PhantomData };
    if let Some(id) = world.components().id::<R::Target>() {
        for target in world.holders(id) {
            let list = world.get::<R::Target>(target).expect("a holder has it").sources();
            for (slot, &source) in list.iter().enumerate() {
                fresh.list(source, slot as u32, target);
            }
        }
    }
    *world_links_mut::<R>(world) = fresh;
}

fn links<R: Relationship>(world: &World) -> &Links<R> {
    world
        .relationships
        .links
        .get(&TypeId::of::<R>())
        .and_then(|links| links.downcast_ref())
        .expect("a registered relationship keeps its links")
}

fn links_mut<'a, R: Relationship>(world: &'a mut DeferredWorld<'_>) -> &'a mut Links<R> {
    world
        .relationships_mut()
        .links
        .get_mut(&TypeId::of::<R>())
        .and_then(|links| links.downcast_mut())
        .expect("a registered relationship keeps its links")
}

/// [`links_mut`] through the whole world.
fn world_links_mut<R: Relationship>(world: &mut World) -> &mut Links<R> {
    world
        .relationships
        .links
        .get_mut(&TypeId::of::<R>())
        .and_then(|links| links.downcast_mut())
        .expect("a registered relationship keeps its links")
}

/// `source`'s target under `R`, if it has one.
fn target_of<R: Relationship>(world: &World, source: Entity) -> Option<Entity> {
    world.get::<R>(source).map(R::target)
}

/// Whether relating `source` to `target` under `R` is allowed (`source` is taken to be alive).
fn check<R: Relationship>(
    world: &World,
    source: Entity,
    target: Entity,
) -> Result<(), RelationshipError> {
    // The name only on the error paths: finding it is a string search.
    let relationship = short_name::<R>;
    if source == target && !R::ALLOW_SELF {
        return Err(RelationshipError::SelfRelation {
            entity: source,
            relationship: relationship(),
        });
    }
    if !world.contains(target) {
        return Err(RelationshipError::NoSuchTarget { source, target });
    }
    if R::ACYCLIC && source != target {
        // Bounded by the entity count, should a chain ever loop.
        let mut at = target;
        for _ in 0..=world.len() {
            match target_of::<R>(world, at) {
                Some(next) if next == source => {
                    let relationship = relationship();
                    return Err(RelationshipError::Cycle { source, target, relationship });
                }
                Some(next) if next != at => at = next,
                _ => break,
            }
        }
    }
    Ok(())
}

/// `T`'s type name without its module path (`ChildOf`), for messages.
fn short_name<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    let end = name.find('<').unwrap_or(name.len());
    name[..end].rsplit("::").next().map_or(name, |last| &name[end - last.len()..])
}

/// Takes the source at `index` out of `list`; returns the sources that moved, with their new
/// index (one at most, unless the relationship keeps order).
fn unlist<R: Relationship>(list: &mut Vec<Entity>, index: usize) -> SmallVec<[(Entity, u32); 1]> {
    if R::KEEP_ORDER {
        list.remove(index);
        list.iter().enumerate().skip(index).map(|(i, &moved)| (moved, i as u32)).collect()
    } else {
        list.swap_remove(index);
        list.get(index).map(|&moved| (moved, index as u32)).into_iter().collect()
    }
}

/// `on_insert` of a relationship: list the source on its target.
fn source_inserted<R: Relationship>(world: &mut DeferredWorld, source: Entity) {
    let target = target_of::<R>(world, source).expect("on_insert: the value is in place");
    if check::<R>(world, source, target).is_err() {
        // A hook cannot refuse the insert: undo it (the source stays unlisted meanwhile).
        world.defer(move |world: &mut World| {
            if target_of::<R>(world, source) == Some(target) {
                let _ = world.remove::<(R,)>(source);
            }
        });
        return;
    }
    let slot = world.get_mut::<R::Target>(target).map(|t| {
        let list = &mut t.sources_mut().0;
        list.push(source);
        (list.len() - 1) as u32
    });
    match slot {
        Some(slot) => links_mut::<R>(world).list(source, slot, target),
        None => {
            // The target's first source: giving it a collection is structural.
            links_mut::<R>(world).mark(source, PENDING);
            world.defer(move |world: &mut World| finish_link::<R>(world, source, target));
        }
    }
}

/// `on_replace` of a relationship: take the source off its target's list.
///
/// The target comes from the source's link, not from its component: one lookup of the links
/// and one of the target's list, the links again only when another source moved into the
/// freed index.
fn source_replaced<R: Relationship>(world: &mut DeferredWorld, source: Entity) {
    // Unlisted, or a pending link, which then finds its mark cleared and does nothing.
    let Link { slot, target: Some(target) } = links_mut::<R>(world).take(source) else {
        return;
    };
    debug_assert_eq!(target_of::<R>(world, source), Some(target), "{source}'s link");
    // One borrow of the list: take the source out, note whose index changed.
    let moved = match world.get_mut::<R::Target>(target) {
        Some(t) => {
            let list = &mut t.sources_mut().0;
            debug_assert_eq!(list.get(slot as usize), Some(&source), "{source} at its slot");
            if list.get(slot as usize) == Some(&source) {
                unlist::<R>(list, slot as usize)
            } else {
                SmallVec::new()
            }
        }
        None => SmallVec::new(),
    };
    if !moved.is_empty() {
        let links = links_mut::<R>(world);
        for (e, i) in moved {
            links.list(e, i, target);
        }
    }
}

/// `on_replace` of a relationship's collection (removed, replaced, or its entity despawned):
/// unlist every source, then settle them once the operation is done.
fn target_replaced<T: RelationshipTarget>(world: &mut DeferredWorld, target: Entity) {
    let sources =
        world.get::<T>(target).expect("on_replace: the value is there").sources().to_vec();
    if sources.is_empty() {
        return;
    }
    let links = links_mut::<T::Relationship>(world);
    for &s in &sources {
        links.mark(s, UNLINKED);
    }
    world.defer(move |world: &mut World| settle::<T::Relationship>(world, target, sources));
}

/// After a target's collection went: relist the sources on its new collection (a replaced
/// collection), or despawn them (a despawned target of a linked relationship), or remove their
/// relationship. Sources related elsewhere since are left alone.
fn settle<R: Relationship>(world: &mut World, target: Entity, sources: Vec<Entity>) {
    for s in sources {
        if target_of::<R>(world, s) != Some(target) || links::<R>(world).get(s) != UNLINKED {
            continue;
        }
        if world.has::<R::Target>(target) {
            link_now::<R>(world, s, target);
        } else if R::LINKED_DESPAWN && !world.contains(target) {
            let _ = world.despawn(s);
        } else {
            let _ = world.remove::<(R,)>(s);
        }
    }
}

/// Deferred by [`source_inserted`] for a target without a collection.
fn finish_link<R: Relationship>(world: &mut World, source: Entity, target: Entity) {
    if links::<R>(world).get(source) != PENDING || target_of::<R>(world, source) != Some(target) {
        return; // related elsewhere, or despawned, since
    }
    world_links_mut::<R>(world).mark(source, UNLINKED);
    link_now::<R>(world, source, target);
}

/// Lists unlisted `source` (alive, holding `R` to `target`) on `target`, creating the
/// collection if needed; a target gone meanwhile settles the source as its despawn would have.
fn link_now<R: Relationship>(world: &mut World, source: Entity, target: Entity) {
    if !world.contains(target) {
        if R::LINKED_DESPAWN {
            let _ = world.despawn(source);
        } else {
            let _ = world.remove::<(R,)>(source);
        }
        return;
    }
    let slot = match world.get_mut::<R::Target>(target) {
        Some(t) => {
            let list = &mut t.sources_mut().0;
            list.push(source);
            list.len() - 1
        }
        None => {
            let sources = Sources(vec![source]);
            if world.insert(target, (R::Target::from_sources(sources),)).is_err() {
                // Memory refused: the source cannot be listed, so it loses the relationship.
                let _ = world.remove::<(R,)>(source);
                return;
            }
            0
        }
    };
    world_links_mut::<R>(world).list(source, slot as u32, target);
}

/// The hooks of `R` and its collection.
fn install<R: Relationship>(world: &mut World) {
    world.set_hooks::<R>(
        ComponentHooks::new().on_insert(source_inserted::<R>).on_replace(source_replaced::<R>),
    );
    world.set_hooks::<R::Target>(ComponentHooks::new().on_replace(target_replaced::<R::Target>));
}
