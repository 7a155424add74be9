//! Walking the hierarchy: ancestors, descendants breadth-first and depth-first, and the whole
//! forest parents-first (for transform propagation). Each walk borrows the world and
//! allocates one queue or stack.

use std::collections::VecDeque;

use folio_storage::Entity;

use crate::World;

/// `entity`'s ancestors, nearest first ([`World::iter_ancestors`]).
pub struct Ancestors<'w> {
    world: &'w World,
    at: Entity,
    /// Steps left: the walk stops after `world.len()` steps, should a chain ever loop.
    left: usize,
}

impl Iterator for Ancestors<'_> {
    type Item = Entity;

    fn next(&mut self) -> Option<Entity> {
        self.left = self.left.checked_sub(1)?;
        self.at = self.world.parent(self.at)?;
        Some(self.at)
    }
}

/// An entity's descendants, breadth-first: its children, then their children, and so on
/// ([`World::iter_descendants`]). Parents come before their children.
pub struct Descendants<'w> {
    world: &'w World,
    queue: VecDeque<Entity>,
}

impl Iterator for Descendants<'_> {
    type Item = Entity;

    fn next(&mut self) -> Option<Entity> {
        let e = self.queue.pop_front()?;
        self.queue.extend(self.world.children(e));
        Some(e)
    }
}

/// An entity's descendants, depth-first in pre-order: each child followed by its whole subtree
/// ([`World::iter_descendants_depth_first`]).
pub struct DescendantsDepthFirst<'w> {
    world: &'w World,
    stack: Vec<Entity>,
}

impl Iterator for DescendantsDepthFirst<'_> {
    type Item = Entity;

    fn next(&mut self) -> Option<Entity> {
        let e = self.stack.pop()?;
        self.stack.extend(self.world.children(e).iter().rev());
        Some(e)
    }
}

/// Every entity of the hierarchy with its parent, parents before children
/// ([`World::iter_hierarchy`]).
pub struct HierarchyWalk<'w> {
    world: &'w World,
    queue: VecDeque<(Entity, Option<Entity>)>,
}

impl Iterator for HierarchyWalk<'_> {
    type Item = (Entity, Option<Entity>);

    fn next(&mut self) -> Option<(Entity, Option<Entity>)> {
        let (e, parent) = self.queue.pop_front()?;
        self.queue.extend(self.world.children(e).iter().map(|&c| (c, Some(e))));
        Some((e, parent))
    }
}

impl World {
    /// `entity`'s ancestors: its parent, its parent's parent, up to the root (empty for a root
    /// or a dead entity).
    pub fn iter_ancestors(&self, entity: Entity) -> Ancestors<'_> {
        Ancestors { world: self, at: entity, left: self.len() }
    }

    /// `entity`'s descendants breadth-first (not `entity` itself): parents before children,
    /// each level in [`Children`](crate::Children) order.
    pub fn iter_descendants(&self, entity: Entity) -> Descendants<'_> {
        Descendants { world: self, queue: self.children(entity).iter().copied().collect() }
    }

    /// `entity`'s descendants depth-first, pre-order (not `entity` itself).
    pub fn iter_descendants_depth_first(&self, entity: Entity) -> DescendantsDepthFirst<'_> {
        DescendantsDepthFirst {
            world: self,
            stack: self.children(entity).iter().rev().copied().collect(),
        }
    }

    /// Every entity in the hierarchy, with its parent (`None` for a root), parents before
    /// children: the order transform propagation needs. The roots are the entities with
    /// [`Children`](crate::Children) and no [`ChildOf`](crate::ChildOf), in archetype order;
    /// each tree is walked breadth-first, the trees interleaved level by level. Entities with
    /// neither component are not visited.
    ///
    /// ```
    /// use folio_archetype::{ChildOf, World};
    ///
    /// struct Local(f32);
    /// struct Global(f32);
    ///
    /// let mut world = World::new();
    /// let root = world.spawn((Local(1.0), Global(0.0)));
    /// let child = world.spawn((Local(2.0), Global(0.0), ChildOf(root)));
    /// let grandchild = world.spawn((Local(3.0), Global(0.0), ChildOf(child)));
    /// let order: Vec<_> = world.iter_hierarchy().collect();
    /// for (e, parent) in order {
    ///     let base = parent.map_or(0.0, |p| world.get::<Global>(p).unwrap().0);
    ///     let local = world.get::<Local>(e).unwrap().0;
    ///     world.get_mut::<Global>(e).unwrap().0 = base + local;
    /// }
    /// assert_eq!(world.get::<Global>(grandchild).unwrap().0, 6.0);
    /// ```
    pub fn iter_hierarchy(&self) -> HierarchyWalk<'_> {
        HierarchyWalk { world: self, queue: self.hierarchy_roots() }
    }
}

impl std::fmt::Debug for Ancestors<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ancestors").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Descendants<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Descendants").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for DescendantsDepthFirst<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DescendantsDepthFirst").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for HierarchyWalk<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HierarchyWalk").finish_non_exhaustive()
    }
}
