//! The component registry: every component type gets a dense [`ComponentId`] and a
//! [`ComponentInfo`] that lets the type-erased storage below move and drop its values. What a
//! component is, and when its storage type is fixed, is on [`Component`]'s docs.

use std::alloc::Layout;
use std::any::TypeId;
use std::fmt;

use folio_storage::{DropFn, drop_fn_of};

use crate::error::ComponentError;
use crate::type_map::TypeIdMap;

/// A component: any `Send + Sync + 'static` type (a blanket impl, no derive).
///
/// Its storage type is fixed when it is first registered: [`StorageType::Table`] unless
/// [`Components::register_with`] asked for [`StorageType::SparseSet`] first.
pub trait Component: Send + Sync + 'static {}

impl<T: Send + Sync + 'static> Component for T {}

/// A component type's dense id in one [`Components`] registry.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComponentId(u32);

impl ComponentId {
    /// The id as an index into per-component arrays.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The id with index `index`.
    #[inline]
    pub const fn new(index: u32) -> Self {
        Self(index)
    }
}

impl fmt::Debug for ComponentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ComponentId({})", self.0)
    }
}

/// Where a component's values live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum StorageType {
    /// In the table of the entity's archetype: fastest to iterate; adding or removing it moves
    /// the entity's row to another table.
    #[default]
    Table,
    /// In one sparse set per component type: adding or removing it moves no other data, for
    /// components that are toggled often.
    SparseSet,
}

/// What the type-erased storage needs to know about a component type.
#[derive(Clone, Debug)]
pub struct ComponentInfo {
    id: ComponentId,
    name: &'static str,
    type_id: TypeId,
    layout: Layout,
    drop: Option<DropFn>,
    storage: StorageType,
}

impl ComponentInfo {
    /// The component's id.
    #[inline]
    pub fn id(&self) -> ComponentId {
        self.id
    }

    /// The type's name, for messages.
    #[inline]
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The type's `TypeId`.
    #[inline]
    pub fn type_id(&self) -> TypeId {
        self.type_id
    }

    /// The type's layout.
    #[inline]
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// How to drop a value in place (`None` if the type needs no drop).
    #[inline]
    pub fn drop_fn(&self) -> Option<DropFn> {
        self.drop
    }

    /// Where the values live.
    #[inline]
    pub fn storage_type(&self) -> StorageType {
        self.storage
    }
}

/// The registry of component types.
#[derive(Debug, Default)]
pub struct Components {
    infos: Vec<ComponentInfo>,
    by_type: TypeIdMap<ComponentId>,
}

impl Components {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `T`, registering it with table storage if it is new.
    #[inline]
    pub fn register<T: Component>(&mut self) -> ComponentId {
        match self.by_type.get(&TypeId::of::<T>()) {
            Some(&id) => id,
            None => self.insert::<T>(StorageType::Table),
        }
    }

    /// Makes room for `additional` more registrations without allocating: a refused
    /// allocation is an error here, before anything is registered.
    pub(crate) fn try_reserve(
        &mut self,
        additional: usize,
    ) -> Result<(), folio_storage::StorageError> {
        crate::try_alloc::reserve(&mut self.infos, additional)?;
        crate::try_alloc::reserve_map(&mut self.by_type, additional)
    }

    /// Registers `T` with `storage`; registering it again with the same storage is fine, with
    /// another one is an error (its values already live somewhere), and so is a tuple type
    /// ([`ComponentError::TupleComponent`]: tuples are bundles, never components).
    pub fn register_with<T: Component>(
        &mut self,
        storage: StorageType,
    ) -> Result<ComponentId, ComponentError> {
        let name = std::any::type_name::<T>();
        if crate::bundle::is_tuple(name) {
            return Err(ComponentError::TupleComponent { name, bundle: None });
        }
        match self.by_type.get(&TypeId::of::<T>()) {
            Some(&id) if self.infos[id.index()].storage == storage => Ok(id),
            Some(&id) => Err(ComponentError::StorageConflict {
                name: self.infos[id.index()].name,
                registered: self.infos[id.index()].storage,
                requested: storage,
            }),
            None => Ok(self.insert::<T>(storage)),
        }
    }

    fn insert<T: Component>(&mut self, storage: StorageType) -> ComponentId {
        let index = u32::try_from(self.infos.len()).expect("more than 2^32 component types");
        let id = ComponentId(index);
        self.infos.push(ComponentInfo {
            id,
            name: std::any::type_name::<T>(),
            type_id: TypeId::of::<T>(),
            layout: Layout::new::<T>(),
            drop: drop_fn_of::<T>(),
            storage,
        });
        self.by_type.insert(TypeId::of::<T>(), id);
        id
    }

    /// The id of `T`, if it is registered.
    #[inline]
    pub fn id<T: Component>(&self) -> Option<ComponentId> {
        self.id_of(TypeId::of::<T>())
    }

    /// The id of the type with `type_id`, if it is registered.
    #[inline]
    pub fn id_of(&self, type_id: TypeId) -> Option<ComponentId> {
        self.by_type.get(&type_id).copied()
    }

    /// The info of a registered component.
    ///
    /// # Panics
    /// When `id` comes from another registry and is out of range.
    #[inline]
    #[track_caller]
    pub fn info(&self, id: ComponentId) -> &ComponentInfo {
        &self.infos[id.index()]
    }

    /// The info of `id`, if it is registered here.
    #[inline]
    pub fn get_info(&self, id: ComponentId) -> Option<&ComponentInfo> {
        self.infos.get(id.index())
    }

    /// How many component types are registered.
    #[inline]
    pub fn len(&self) -> usize {
        self.infos.len()
    }

    /// Whether none is registered.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }

    /// Every registered component's info, by id.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &ComponentInfo> + '_ {
        self.infos.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Position(#[allow(dead_code)] [f32; 3]);
    struct Tag;

    #[test]
    fn ids_are_dense_and_stable() {
        let mut c = Components::new();
        let p = c.register::<Position>();
        let t = c.register::<Tag>();
        assert_eq!((p.index(), t.index()), (0, 1));
        assert_eq!(c.register::<Position>(), p);
        assert_eq!(c.id::<Tag>(), Some(t));
        assert_eq!(c.id::<String>(), None);
        let info = c.info(p);
        assert_eq!(info.layout(), Layout::new::<Position>());
        assert!(info.name().ends_with("Position"));
        assert_eq!(info.storage_type(), StorageType::Table);
        assert!(info.drop_fn().is_none());
        let s = c.register::<String>();
        assert!(c.info(s).drop_fn().is_some());
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn storage_type_is_fixed_at_registration() {
        let mut c = Components::new();
        let t = c.register_with::<Tag>(StorageType::SparseSet).unwrap();
        assert_eq!(c.register_with::<Tag>(StorageType::SparseSet).unwrap(), t);
        assert_eq!(c.register::<Tag>(), t);
        let err = c.register_with::<Tag>(StorageType::Table).unwrap_err();
        assert!(err.to_string().contains("Tag"), "{err}");
        assert!(matches!(err, ComponentError::StorageConflict { .. }));
        c.register::<Position>();
        assert!(c.register_with::<Position>(StorageType::SparseSet).is_err());
    }
}
