//! World and command operations generic over a bundle shape or a component kind, picked at
//! run time through [`with_shape`](super::kinds::with_shape) and
//! [`with_kind`](super::kinds::with_kind).

use std::mem::align_of;

use folio::prelude::*;

use super::kinds::{Kind, KindFn, Shape, ShapeFn, Val};
use super::{CmdFn, Vals};

/// `World::spawn` of a new bundle; its values.
pub(crate) struct SpawnOne<'a> {
    pub(crate) world: &'a mut World,
    pub(crate) next_id: &'a mut u64,
}

impl ShapeFn for SpawnOne<'_> {
    type Out = (Entity, Vals);
    fn call<T: Shape>(self) -> Self::Out {
        let bundle = T::make(&mut || next(self.next_id));
        let vals = bundle.vals();
        (self.world.spawn(bundle), vals)
    }
}

/// `World::spawn_batch` of `n` new bundles, made lazily by the iterator; their values.
pub(crate) struct SpawnBatch<'a> {
    pub(crate) world: &'a mut World,
    pub(crate) next_id: &'a mut u64,
    pub(crate) n: usize,
}

impl ShapeFn for SpawnBatch<'_> {
    type Out = (Vec<Entity>, Vec<Vals>);
    fn call<T: Shape>(self) -> Self::Out {
        let mut vals = Vec::new();
        let next_id = self.next_id;
        let bundles = (0..self.n).map(|_| {
            let bundle = T::make(&mut || next(next_id));
            vals.push(bundle.vals());
            bundle
        });
        let entities = self.world.spawn_batch(bundles);
        (entities, vals)
    }
}

/// `World::insert` of a new bundle; the result and the bundle's values.
pub(crate) struct InsertOne<'a> {
    pub(crate) world: &'a mut World,
    pub(crate) next_id: &'a mut u64,
    pub(crate) entity: Entity,
}

impl ShapeFn for InsertOne<'_> {
    type Out = (Result<(), EntityError>, Vals);
    fn call<T: Shape>(self) -> Self::Out {
        let bundle = T::make(&mut || next(self.next_id));
        let vals = bundle.vals();
        (self.world.insert(self.entity, bundle), vals)
    }
}

/// `World::try_remove`; the removed values (the bundle is dropped here).
pub(crate) struct RemoveOne<'a> {
    pub(crate) world: &'a mut World,
    pub(crate) entity: Entity,
}

impl ShapeFn for RemoveOne<'_> {
    type Out = Result<Vals, EntityError>;
    fn call<T: Shape>(self) -> Self::Out {
        // The bundle is dropped here, after its values were read.
        self.world.try_remove::<T>(self.entity).map(|bundle| bundle.vals())
    }
}

/// A `Commands::spawn` of a bundle made now, and its values.
pub(crate) struct CmdSpawn<'a> {
    pub(crate) next_id: &'a mut u64,
}

impl ShapeFn for CmdSpawn<'_> {
    type Out = (CmdFn, Vals);
    fn call<T: Shape>(self) -> Self::Out {
        let bundle = T::make(&mut || next(self.next_id));
        let vals = bundle.vals();
        (Box::new(move |c, spawned| spawned.push(c.spawn(bundle))), vals)
    }
}

/// A command's entity: known when the run is planned, or the one an earlier spawn command of
/// the run reserves.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Resolved {
    World(Entity),
    Spawned(usize),
}

impl Resolved {
    pub(crate) fn entity(self, spawned: &[Entity]) -> Entity {
        match self {
            Resolved::World(e) => e,
            Resolved::Spawned(k) => spawned[k],
        }
    }
}

/// A `Commands::insert` of a bundle made now, and its values.
pub(crate) struct CmdInsert<'a> {
    pub(crate) next_id: &'a mut u64,
    pub(crate) target: Resolved,
}

impl ShapeFn for CmdInsert<'_> {
    type Out = (CmdFn, Vals);
    fn call<T: Shape>(self) -> Self::Out {
        let bundle = T::make(&mut || next(self.next_id));
        let vals = bundle.vals();
        let target = self.target;
        (Box::new(move |c, spawned| c.insert(target.entity(spawned), bundle)), vals)
    }
}

/// A `Commands::remove`.
pub(crate) struct CmdRemove {
    pub(crate) target: Resolved,
}

impl ShapeFn for CmdRemove {
    type Out = CmdFn;
    fn call<T: Shape>(self) -> Self::Out {
        let target = self.target;
        Box::new(move |c, spawned| c.remove::<T>(target.entity(spawned)))
    }
}

pub(crate) fn next(next_id: &mut u64) -> u64 {
    *next_id += 1;
    *next_id - 1
}

/// `World::get`: the value, checked for alignment and intact bytes.
pub(crate) struct Get<'a> {
    pub(crate) world: &'a World,
    pub(crate) entity: Entity,
}

impl KindFn for Get<'_> {
    type Out = Result<Option<Val>, String>;
    fn call<K: Kind>(self) -> Self::Out {
        let Some(c) = self.world.get::<K>(self.entity) else {
            return Ok(None);
        };
        if std::ptr::from_ref(c).addr() % align_of::<K>() != 0 {
            return Err(format!("{:?}: kind {} misaligned at {c:p}", self.entity, K::KIND));
        }
        if !c.intact() {
            return Err(format!("{:?}: kind {} bytes changed", self.entity, K::KIND));
        }
        Ok(Some(c.val()))
    }
}

/// `World::get_mut`, setting the data; whether the entity had the component.
pub(crate) struct SetData<'a> {
    pub(crate) world: &'a mut World,
    pub(crate) entity: Entity,
    pub(crate) data: u64,
}

impl KindFn for SetData<'_> {
    type Out = bool;
    fn call<K: Kind>(self) -> bool {
        self.world.get_mut::<K>(self.entity).map(|c| c.set_data(self.data)).is_some()
    }
}
