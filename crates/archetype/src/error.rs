//! The archetype layer's errors.

use std::fmt;

use crate::component::StorageType;

/// A component type or bundle used in a way the registry cannot accept.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// A bundle names the same component type twice.
    DuplicateComponent {
        /// The repeated type's name.
        name: &'static str,
        /// The bundle type's name.
        bundle: &'static str,
    },
}

impl fmt::Display for ComponentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::StorageConflict { name, registered, requested } => write!(
                f,
                "component {name} is registered with {registered:?} storage; \
                 it cannot be registered again with {requested:?} storage"
            ),
            Self::DuplicateComponent { name, bundle } => {
                write!(f, "bundle {bundle} contains component {name} more than once")
            }
        }
    }
}

impl std::error::Error for ComponentError {}
