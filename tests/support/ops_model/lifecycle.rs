//! Observers of every lifecycle event of some kinds, and the check that each event fired
//! exactly once: per (entity, kind), the events must follow `OnAdd`, `OnInsert`, then any
//! number of `OnReplace` + `OnInsert`, then `OnReplace`, `OnRemove` (and again, for a kind
//! added anew), each `OnInsert` seeing the value the model holds. After every step, the kinds
//! the events say an entity has must be the model's, with the values' identities the model's.
//!
//! Only some kinds are observed ([`OBSERVED`]: table and sparse-set stored, zero-sized and
//! larger than a page), so entities without them still take the paths without hooks.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use folio::prelude::*;
use folio::schedule::ComponentId;

use super::kinds::*;
use super::shape_ops::Get;

/// The kinds whose lifecycle events are observed.
pub(crate) const OBSERVED: [usize; 4] = [K_A, K_S, K_SZ, K_BIG];

/// Where a (entity, kind) is in its lifecycle, by the events seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// `OnAdd` seen, its `OnInsert` not yet.
    Added,
    /// Present, holding the value of this identity.
    Present(u64),
    /// `OnReplace` seen; an `OnInsert` (replaced) or `OnRemove` (removed) must follow.
    Replaced,
}

/// The phases of every (entity, kind) with one (absent: none), and the violations seen.
#[derive(Default)]
pub(crate) struct Lifecycles {
    phases: BTreeMap<(Entity, usize), Phase>,
    errors: Vec<String>,
}

type Shared = Arc<Mutex<Lifecycles>>;

impl Lifecycles {
    fn event(&mut self, which: &str, entity: Entity, kind: usize, val: Option<Val>) {
        let key = (entity, kind);
        let now = self.phases.get(&key).copied();
        let next = match (which, now, val) {
            ("add", None, Some(_)) => Some(Phase::Added),
            ("insert", Some(Phase::Added | Phase::Replaced), Some(v)) => Some(Phase::Present(v.id)),
            ("replace", Some(Phase::Present(id)), Some(v)) if v.id == id => Some(Phase::Replaced),
            ("remove", Some(Phase::Replaced), Some(_)) => None,
            _ => {
                let message =
                    format!("{which} of kind {kind} on {entity:?} at phase {now:?}, {val:?}");
                self.errors.push(message);
                return;
            }
        };
        match next {
            Some(p) => self.phases.insert(key, p),
            None => self.phases.remove(&key),
        };
    }

    /// Checks the events against the model's components of `entity` (`None`: dead).
    pub(crate) fn check(
        &mut self,
        entity: Entity,
        model: Option<&[Option<Val>]>,
    ) -> Result<(), String> {
        if !self.errors.is_empty() {
            return Err(format!("lifecycle events: {:?}", std::mem::take(&mut self.errors)));
        }
        for kind in OBSERVED {
            let want = model.and_then(|m| m[kind]).map(|v| Phase::Present(v.id));
            let got = self.phases.get(&(entity, kind)).copied();
            if got != want {
                return Err(format!(
                    "{entity:?} kind {kind}: the lifecycle events say {got:?}, the model {want:?}"
                ));
            }
        }
        Ok(())
    }
}

/// Adds one observer per lifecycle event, each watching every kind of [`OBSERVED`]; returns
/// what they record.
pub(crate) fn observe_lifecycles(world: &mut World) -> Shared {
    let shared = Shared::default();
    let ids: Vec<(ComponentId, usize)> =
        OBSERVED.iter().map(|&k| (with_kind(k, Register { world: &mut *world }), k)).collect();
    add::<OnAdd>(world, &shared, &ids, "add");
    add::<OnInsert>(world, &shared, &ids, "insert");
    add::<OnReplace>(world, &shared, &ids, "replace");
    add::<OnRemove>(world, &shared, &ids, "remove");
    shared
}

fn add<E: Event>(
    world: &mut World,
    shared: &Shared,
    ids: &[(ComponentId, usize)],
    which: &'static str,
) {
    let (log, map) = (shared.clone(), ids.to_vec());
    let mut observer = Observer::new(move |t: &mut Trigger<E>, w: &mut DeferredWorld| {
        let c = t.component().expect("a lifecycle event names its component");
        let kind = map.iter().find(|(id, _)| *id == c).expect("an observed kind").1;
        let entity = t.entity();
        // The value is in place for add and insert, still there for replace and remove.
        let val = with_kind(kind, Get { world: w, entity }).unwrap_or(None);
        log.lock().unwrap().event(which, entity, kind, val);
    });
    for &kind in &OBSERVED {
        observer = with_kind(kind, Watch { observer });
    }
    world.add_observer(observer).expect("a valid observer");
}

/// Registers a kind, returning its id.
struct Register<'a> {
    world: &'a mut World,
}

impl KindFn for Register<'_> {
    type Out = ComponentId;
    fn call<K: Kind>(self) -> ComponentId {
        // Sparse kinds are registered as such before this runs.
        match self.world.components().id::<K>() {
            Some(id) => id,
            None => self.world.register_component::<K>(StorageType::Table).expect("new"),
        }
    }
}

/// Adds a kind to an observer's components.
struct Watch<E: Event> {
    observer: Observer<E>,
}

impl<E: Event> KindFn for Watch<E> {
    type Out = Observer<E>;
    fn call<K: Kind>(self) -> Observer<E> {
        self.observer.component::<K>()
    }
}
