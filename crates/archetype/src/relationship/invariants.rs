//! The consistency check of both sides of every registered relationship, run by
//! [`World::check_invariants`].

use super::world_api::slot_of;
use super::{PENDING, Relationship, RelationshipTarget, UNLINKED, check, target_of};
use crate::World;

impl World {
    /// Checks both sides of every registered relationship; panics with the first broken one.
    pub(crate) fn check_relationships(&self) {
        for &(_, check, _) in &self.relationships.checks {
            check(self);
        }
    }
}

/// Every `R` names a live target (allowed: not itself unless `ALLOW_SELF`, no cycle if
/// `ACYCLIC`) whose collection lists it at its recorded index; every collection lists only
/// sources whose `R` names it, each once, at their recorded index. With deferred work queued
/// (inside a hook), unlisted sources are allowed: their links or undoing are queued.
pub(super) fn check_relationship<R: Relationship>(world: &World) {
    let name = super::short_name::<R>();
    let settled = world.deferred_len() == 0;
    if let Some(id) = world.components().id::<R>() {
        for source in world.holders(id) {
            let target = target_of::<R>(world, source).expect("a holder has the component");
            let (slot, linked_to) = slot_of::<R>(world, source);
            if !settled && slot >= PENDING {
                continue; // a link, or the undoing of a bad insert, still queued
            }
            assert_ne!(slot, UNLINKED, "{name} of {source} to {target}: not listed");
            assert_ne!(slot, PENDING, "{name} of {source} to {target}: still pending");
            assert_eq!(linked_to, Some(target), "{name} of {source} to {target}: linked elsewhere");
            if let Err(e) = check::<R>(world, source, target) {
                panic!("{name} of {source}: {e}");
            }
            let listed = world.sources::<R::Target>(target);
            assert_eq!(
                listed.get(slot as usize),
                Some(&source),
                "{name} of {source}: not at its index {slot} in {target}'s list {listed:?}"
            );
        }
    }
    if let Some(id) = world.components().id::<R::Target>() {
        for target in world.holders(id) {
            let list = world.get::<R::Target>(target).expect("a holder has it").sources();
            for (i, &source) in list.iter().enumerate() {
                assert_eq!(
                    target_of::<R>(world, source),
                    Some(target),
                    "{target} lists {source} at {i}, whose {name} does not name it"
                );
                assert_eq!(
                    slot_of::<R>(world, source).0 as usize,
                    i,
                    "{target} lists {source} at {i}, whose recorded index differs"
                );
            }
        }
    }
}
