//! folio's archetype layer: the component registry, bundles, tables, the archetype graph and
//! the [`World`].
//!
//! It re-exports the storage layer below it, so each layer sees everything beneath.
//!
//! ```
//! use folio_archetype::{StorageType, World};
//!
//! #[derive(Debug, PartialEq)]
//! struct Position(f32, f32);
//! struct Velocity(f32, f32);
//! struct Stunned; // toggled often: keep it in a sparse set, so toggling moves no table rows
//!
//! let mut world = World::new();
//! world.register_component::<Stunned>(StorageType::SparseSet).unwrap();
//! let e = world.spawn((Position(0.0, 0.0), Velocity(1.0, 0.5)));
//! world.insert(e, (Stunned,)).unwrap();
//! assert!(world.has::<Stunned>(e));
//! world.remove::<(Stunned,)>(e).unwrap();
//! world.get_mut::<Position>(e).unwrap().0 += 1.0;
//! assert_eq!(world.get::<Position>(e), Some(&Position(1.0, 0.0)));
//! world.despawn(e).unwrap();
//! assert!(world.despawn(e).is_err()); // a stale entity is an error, never a panic
//! ```
#![warn(unsafe_op_in_unsafe_fn)]

mod archetype;
mod bundle;
mod component;
mod double_buffer;
mod entity_ref;
mod error;
pub mod hooks;
pub mod observer;
pub mod relationship;
mod removed;
mod resource;
#[cfg(feature = "serde")]
pub mod save;
mod snapshot;
mod table;
mod tick;
mod try_alloc;
mod type_map;
mod unwind;
mod version;
mod world;

pub use archetype::{Archetype, ArchetypeEntities, ArchetypeEntity, ArchetypeId};
pub use bundle::{Bundle, BundleInfo, ComponentIds, MAX_BUNDLE_LEN};
pub use component::{Component, ComponentId, ComponentInfo, Components, StorageType};
pub use double_buffer::{BufferCursor, DoubleBuffer};
pub use entity_ref::{EntityRef, EntityWorldMut};
pub use error::{ComponentError, EntityError};
pub use folio_storage::*;
pub use hooks::{ComponentHook, ComponentHooks, DeferredWorld};
pub use observer::{
    Event, MAX_EVENT_DEPTH, ObservedBy, Observer, ObserverError, ObserverId, OnAdd, OnInsert,
    OnRemove, OnReplace, Propagation, Trigger,
};
pub use relationship::{
    Ancestors, ChildOf, Children, Descendants, DescendantsDepthFirst, HierarchyWalk, Relationship,
    RelationshipError, RelationshipTarget, Sources,
};
pub use removed::RemovedLog;
pub use resource::{FromWorld, ResourceTicks};
#[cfg(feature = "serde")]
pub use save::{
    EntityMap, LoadError, LoadMode, LoadSeed, MapEntities, SaveRegistry, SavedWorld, WorldSave,
};
pub use snapshot::{Snapshot, SnapshotError, SnapshotRing};
pub use table::{MovedRow, Table, TableColumn, TableId};
pub use tick::{MAX_CHANGE_AGE, is_newer};
pub use world::{
    BATCH_META_AHEAD, BATCH_ROW_AHEAD, BULK_DESPAWN_FROM, Disabled, EdgeStats, MemoryStats,
    TableMemory, World, WorldId,
};
