//! The model of the hierarchy for the driver: each live child's parent, and which live
//! entities hold a `Children` (every entity that was ever a parent keeps one, emptied or not,
//! until it is despawned).

use std::collections::{BTreeMap, BTreeSet};
use std::mem::size_of;

use folio::prelude::*;

/// Why the model refuses a parent.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Bad {
    DeadChild,
    DeadParent,
    SelfParent,
    Cycle,
}

#[derive(Default)]
pub(crate) struct HierarchyModel {
    parents: BTreeMap<Entity, Entity>,
    has_children: BTreeSet<Entity>,
}

impl HierarchyModel {
    /// Whether `child` may be given `parent` (`alive` tells the model's live entities).
    pub(crate) fn check(
        &self,
        child: Entity,
        parent: Entity,
        alive: impl Fn(Entity) -> bool,
    ) -> Result<(), Bad> {
        if !alive(child) {
            return Err(Bad::DeadChild);
        }
        if child == parent {
            return Err(Bad::SelfParent);
        }
        if !alive(parent) {
            return Err(Bad::DeadParent);
        }
        let mut at = parent;
        while let Some(&up) = self.parents.get(&at) {
            if up == child {
                return Err(Bad::Cycle);
            }
            at = up;
        }
        Ok(())
    }

    pub(crate) fn set(&mut self, child: Entity, parent: Entity) {
        self.parents.insert(child, parent);
        self.has_children.insert(parent);
    }

    pub(crate) fn remove(&mut self, child: Entity) -> Option<Entity> {
        self.parents.remove(&child)
    }

    /// `e` and its descendants, `e` first.
    pub(crate) fn subtree(&self, e: Entity) -> Vec<Entity> {
        let children = self.children();
        let mut out = vec![e];
        let mut i = 0;
        while i < out.len() {
            out.extend(children.get(&out[i]).into_iter().flatten().copied());
            i += 1;
        }
        out
    }

    /// Forgets despawned `e`.
    pub(crate) fn despawned(&mut self, e: Entity) {
        self.parents.remove(&e);
        self.has_children.remove(&e);
    }

    pub(crate) fn clear(&mut self) {
        self.parents.clear();
        self.has_children.clear();
    }

    fn children(&self) -> BTreeMap<Entity, Vec<Entity>> {
        let mut children: BTreeMap<Entity, Vec<Entity>> = BTreeMap::new();
        for (&c, &p) in &self.parents {
            children.entry(p).or_default().push(c);
        }
        children
    }

    /// Bytes the hierarchy's components of the live entities hold (value and two ticks each).
    pub(crate) fn used(&self) -> usize {
        self.parents.len() * (size_of::<ChildOf>() + 8)
            + self.has_children.len() * (size_of::<Children>() + 8)
    }

    /// Compares every entity of `handles` with the world: its parent, its children (as a set)
    /// and whether it holds a `Children`.
    pub(crate) fn compare(&self, world: &World, handles: &[Entity]) -> Result<(), String> {
        let children = self.children();
        for &e in handles {
            let parent = self.parents.get(&e).copied();
            if world.parent(e) != parent {
                return Err(format!("{e:?}: parent {:?}, model {parent:?}", world.parent(e)));
            }
            let mut got = world.children(e).to_vec();
            got.sort();
            let want = children.get(&e).cloned().unwrap_or_default();
            if got != want {
                return Err(format!("{e:?}: children {got:?}, model {want:?}"));
            }
            if world.has::<Children>(e) != self.has_children.contains(&e) {
                return Err(format!("{e:?}: has Children {}", world.has::<Children>(e)));
            }
        }
        Ok(())
    }
}
