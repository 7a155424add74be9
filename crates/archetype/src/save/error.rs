//! [`LoadError`]: why a load failed. The target world is unchanged when one is returned (see
//! the [`save`](crate::save) module's docs for the one exception, the OS refusing memory).

use std::fmt;

use folio_storage::{EntitiesStateError, Entity, EntityIdError};

use crate::error::EntityError;

/// Why a save could not be loaded. Each names what is wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// The data is not a save this registry can read: truncated, corrupted, or of another
    /// shape. The format's own message says where.
    Format(String),
    /// The save is of format version `found`; this build reads [`SAVE_VERSION`].
    ///
    /// [`SAVE_VERSION`]: crate::save::SAVE_VERSION
    Version {
        /// The save's version.
        found: u32,
    },
    /// The save names a component the registry does not know.
    UnknownComponent {
        /// The saved name.
        name: String,
    },
    /// The save names a resource the registry does not know.
    UnknownResource {
        /// The saved name.
        name: String,
    },
    /// The save lists one component or resource name twice.
    DuplicateName {
        /// The name.
        name: String,
    },
    /// A saved value does not read as the type registered under its name (a type mismatch,
    /// or data cut or corrupted inside it).
    Value {
        /// The registered name.
        name: &'static str,
        /// The registered type.
        type_name: &'static str,
        /// The format's message.
        message: String,
    },
    /// The saved entity allocator state breaks its rules.
    Entities(EntitiesStateError),
    /// An archetype lists an entity the saved allocator does not hold alive at that
    /// generation, or the archetypes list one entity twice.
    Entity {
        /// The entity.
        entity: Entity,
        /// Whether the entity is listed twice (else: not alive in the saved allocator).
        twice: bool,
    },
    /// A restore ([`LoadMode::Restore`](crate::LoadMode::Restore)) needs a world with no
    /// entity, alive or reserved; this one has `entities`.
    NotEmpty {
        /// The target's alive and reserved entities.
        entities: usize,
    },
    /// A saved id cannot be spawned in the target world
    /// ([`LoadMode::KeepIds`](crate::LoadMode::KeepIds)): alive there, reserved, retired or
    /// stale.
    IdNotFree(EntityIdError),
    /// The target world refused: memory ran out while the load committed (what it spawned is
    /// despawned again and the allocator put back).
    World(EntityError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Format(message) => write!(f, "not a readable save: {message}"),
            Self::Version { found } => write!(
                f,
                "save format version {found}; this build reads version {}",
                crate::save::SAVE_VERSION
            ),
            Self::UnknownComponent { name } => {
                write!(f, "the save holds component \"{name}\", which the registry does not name")
            }
            Self::UnknownResource { name } => {
                write!(f, "the save holds resource \"{name}\", which the registry does not name")
            }
            Self::DuplicateName { name } => write!(f, "the save lists \"{name}\" twice"),
            Self::Value { name, type_name, message } => {
                write!(f, "a value of \"{name}\" does not read as {type_name}: {message}")
            }
            Self::Entities(e) => write!(f, "the saved entities are inconsistent: {e}"),
            Self::Entity { entity, twice: true } => {
                write!(f, "the saved archetypes list entity {entity} twice")
            }
            Self::Entity { entity, twice: false } => write!(
                f,
                "a saved archetype lists entity {entity}, which the saved allocator does not \
                 hold alive at that generation"
            ),
            Self::NotEmpty { entities } => write!(
                f,
                "a restore needs a world with no entity, and this one has {entities}; load with \
                 LoadMode::Remap or LoadMode::KeepIds instead"
            ),
            Self::IdNotFree(e) => write!(f, "a saved id cannot be spawned: {e}"),
            Self::World(e) => write!(f, "the world refused the load: {e}"),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Entities(e) => Some(e),
            Self::IdNotFree(e) => Some(e),
            Self::World(e) => Some(e),
            _ => None,
        }
    }
}

impl From<EntityError> for LoadError {
    fn from(e: EntityError) -> Self {
        match e {
            EntityError::IdNotFree(e) => Self::IdNotFree(e),
            e => Self::World(e),
        }
    }
}

impl From<folio_storage::StorageError> for LoadError {
    fn from(e: folio_storage::StorageError) -> Self {
        Self::World(EntityError::Storage(e))
    }
}
