//! folio's archetype layer: the component registry, bundles, tables, the archetype graph and
//! the [`World`].
//!
//! It re-exports the storage layer below it, so each layer sees everything beneath.
#![warn(unsafe_op_in_unsafe_fn)]

mod archetype;
mod bundle;
mod component;
mod error;
mod table;
mod world;

pub use archetype::{Archetype, ArchetypeEntity, ArchetypeId};
pub use bundle::{Bundle, BundleInfo, ComponentIds};
pub use component::{Component, ComponentId, ComponentInfo, Components, StorageType};
pub use error::{ComponentError, EntityError};
pub use folio_storage::*;
pub use table::{MovedRow, Table, TableColumn, TableId};
pub use world::{EdgeStats, MemoryStats, TableMemory, World};
