//! The archetype layer's errors.

use std::collections::TryReserveError;
use std::fmt;

use folio_storage::{Entity, EntityIdError, StorageError};

use crate::component::StorageType;

/// A component type or bundle used in a way the registry cannot accept.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ComponentError {
    /// The component was registered with another storage type before.
    StorageConflict {
        /// The component type's name.
        name: &'static str,
        /// The storage it has.
        registered: StorageType,
        /// The storage that was asked for.
        requested: StorageType,
    },
    /// A tuple used as a component: in a bundle (`(A, (T, S))`) or registered on its own.
    /// Tuples are bundles, never components, so `get::<T>` never misses a `T` stored inside one.
    TupleComponent {
        /// The tuple type's name.
        name: &'static str,
        /// The bundle that holds it, if it came in one.
        bundle: Option<&'static str>,
    },
    /// A bundle names the same component type twice.
    DuplicateComponent {
        /// The repeated type's name.
        name: &'static str,
        /// The bundle type's name.
        bundle: &'static str,
    },
    /// A component was made a disabling marker
    /// ([`World::register_disabling_component`](crate::World::register_disabling_component))
    /// after entities had it: register disabling markers before their first use.
    DisablingInUse {
        /// The component type's name.
        name: &'static str,
    },
    /// Memory for the registry's bookkeeping of a type or bundle seen for the first time was
    /// refused; nothing was registered. An operation on an entity reports it as
    /// [`EntityError::Storage`].
    Alloc {
        /// The item count a registry list was asked to grow by.
        additional: usize,
        /// The allocator's own error.
        source: TryReserveError,
    },
}

impl ComponentError {
    /// A refused registry allocation ([`StorageError::Alloc`], the only error heap growth
    /// gives).
    pub(crate) fn from_alloc(e: StorageError) -> Self {
        match e {
            StorageError::Alloc { additional, source } => Self::Alloc { additional, source },
            other => unreachable!("heap growth fails only with StorageError::Alloc: {other}"),
        }
    }
}

impl fmt::Display for ComponentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::StorageConflict { name, registered, requested } => write!(
                f,
                "component {name} is registered with {registered:?} storage; \
                 it cannot be registered again with {requested:?} storage"
            ),
            Self::TupleComponent { name, bundle } => {
                match bundle {
                    Some(bundle) => write!(f, "bundle {bundle} holds the tuple {name} as one")?,
                    None => write!(f, "the tuple {name} was registered")?,
                }
                write!(
                    f,
                    " component, but a tuple is a bundle, never a component: write its \
                     components into the outer tuple (`(A, T, S)`, not `(A, (T, S))`; past 16, \
                     spawn 16 and `insert` the rest), or wrap them in a struct to store them as \
                     one component"
                )
            }
            Self::DuplicateComponent { name, bundle } => {
                write!(f, "bundle {bundle} contains component {name} more than once")
            }
            Self::Alloc { additional, source } => write!(
                f,
                "registering a component or bundle type: could not grow a list by {additional} \
                 items: {source}"
            ),
            Self::DisablingInUse { name } => write!(
                f,
                "component {name} is in use already: make it a disabling marker \
                 (World::register_disabling_component) before any entity has it"
            ),
        }
    }
}

impl std::error::Error for ComponentError {}

/// Why a [`World`](crate::World) operation on an entity failed. Nothing changed when it did.
#[derive(Debug)]
#[non_exhaustive]
pub enum EntityError {
    /// The entity was despawned, or never spawned in this world.
    NoSuchEntity(Entity),
    /// The entity lacks a component the operation needs.
    MissingComponent {
        /// The entity.
        entity: Entity,
        /// The missing component's type name.
        component: &'static str,
    },
    /// A batch that can take each entity once lists this one more than once.
    ListedTwice(Entity),
    /// The bundle or component type cannot be used.
    Component(ComponentError),
    /// The id given to [`World::try_spawn_at`](crate::World::try_spawn_at) is not free: alive,
    /// reserved, retired or stale.
    IdNotFree(EntityIdError),
    /// Memory could not be had: a reservation is full or the OS refused to commit.
    Storage(StorageError),
}

impl fmt::Display for EntityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchEntity(e) => {
                write!(f, "entity {e} does not exist (despawned or never spawned)")
            }
            Self::MissingComponent { entity, component } => {
                write!(f, "entity {entity} has no component {component}")
            }
            Self::ListedTwice(e) => write!(f, "entity {e} is listed more than once in the batch"),
            Self::Component(e) => e.fmt(f),
            Self::IdNotFree(e) => write!(f, "cannot spawn at that id: {e}"),
            Self::Storage(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for EntityError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Component(e) => Some(e),
            Self::IdNotFree(e) => Some(e),
            Self::Storage(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ComponentError> for EntityError {
    fn from(e: ComponentError) -> Self {
        match e {
            // Memory, not the component: the same error as every other refused allocation.
            ComponentError::Alloc { additional, source } => {
                Self::Storage(StorageError::alloc(additional, source))
            }
            e => Self::Component(e),
        }
    }
}

impl From<StorageError> for EntityError {
    fn from(e: StorageError) -> Self {
        Self::Storage(e)
    }
}

impl From<EntityIdError> for EntityError {
    fn from(e: EntityIdError) -> Self {
        match e {
            EntityIdError::Storage(e) => Self::Storage(e),
            e => Self::IdNotFree(e),
        }
    }
}
