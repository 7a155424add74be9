//! folio: an entity-component-system framework built on virtual arrays.

pub use folio_archetype as archetype;
pub use folio_query as query;
pub use folio_schedule as schedule;
pub use folio_storage as storage;
