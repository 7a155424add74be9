//! folio's archetype layer: the component registry and bundles (tables, the archetype graph
//! and the `World` are being built on them, see the project's issue 3).
//!
//! It re-exports the storage layer below it, so each layer sees everything beneath.
#![warn(unsafe_op_in_unsafe_fn)]

mod bundle;
mod component;
mod error;
mod table;

pub use bundle::{Bundle, BundleInfo, ComponentIds};
pub use component::{Component, ComponentId, ComponentInfo, Components, StorageType};
pub use error::ComponentError;
pub use folio_storage::*;
pub use table::{MovedRow, Table, TableColumn, TableId};
