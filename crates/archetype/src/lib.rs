//! folio's `archetype` layer: not built yet (see the project's issues); it re-exports the layer below
//! so the workspace compiles end to end.

pub use folio_storage::*;
