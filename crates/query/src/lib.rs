//! folio's query layer: typed views over the components of many entities at once.
//!
//! A query names the data it wants ([`QueryData`]: `&T`, `&mut T`, `Option<..>`, [`Entity`],
//! [`Ref<T>`] (a `&T` that knows whether it was added or changed), [`Has<T>`] (whether the
//! entity has `T`), tuples of up to 16) and the entities it wants it from ([`QueryFilter`]: [`With`],
//! [`Without`], [`Added`], [`Changed`], [`Or`], tuples). A [`QueryState`] is built once: it
//! checks that the query never hands out a `&mut` beside another reference to the same
//! component, and caches the tables and archetypes it matches, extending that cache as the
//! world makes new archetypes.
//!
//! Iteration picks one of three paths ([`IterMode`]): a query of table-stored components walks
//! each matching table's columns as contiguous arrays (no lookup and no branch per entity); one
//! that also names sparse-set components walks matching archetypes and looks those up by entity;
//! one that requires only sparse-set components is driven by the smallest of their sets.
//! `&mut T` yields a [`Mut<T>`], which stamps the component's changed tick only when written
//! through, so [`Changed`] reports real writes.
//!
//! ```
//! use folio_archetype::World;
//! use folio_query::{Changed, WorldQueryExt};
//!
//! #[derive(Debug, PartialEq)]
//! struct Position(f32);
//! struct Velocity(f32);
//!
//! let mut world = World::new();
//! let moving = world.spawn((Position(0.0), Velocity(2.0)));
//! let still = world.spawn((Position(5.0),));
//!
//! let mut integrate = world.query::<(&mut Position, &Velocity)>();
//! for (mut position, velocity) in integrate.iter_mut(&mut world) {
//!     position.0 += velocity.0;
//! }
//! assert_eq!(world.get::<Position>(moving), Some(&Position(2.0)));
//!
//! // Only what was written since this query last ran (its first run sees everything).
//! let mut changed = world.query_filtered::<&Position, Changed<Position>>();
//! assert_eq!(changed.iter(&world).count(), 2);
//! assert_eq!(changed.iter(&world).count(), 0);
//! integrate.iter_mut(&mut world).for_each(|(mut p, v)| p.0 += v.0);
//! assert_eq!(changed.iter(&world).collect::<Vec<_>>(), [&Position(4.0)]);
//! # let _ = still;
//! ```
#![warn(unsafe_op_in_unsafe_fn)]

mod access;
mod combinations;
mod data;
mod fetch;
mod filter;
mod iter;
mod many;
mod par;
mod state;
mod terms;
mod world_ext;

pub use access::{FilteredAccess, QueryError, TypeKey, TypeSet};
pub use combinations::QueryCombinationIter;
pub use data::{ColumnFetch, EntityFetch, Mut, OptionFetch, WriteFetch};
pub use fetch::{
    ArchetypeFilter, ComponentTerm, QueryData, QueryFilter, ReadOnlyQueryData, StorageSummary,
    WorldQuery,
};
pub use filter::{Added, Allow, Changed, Or, OrFetch, TickFetch, With, Without};
pub use folio_archetype::*;
pub use iter::QueryIter;
pub use many::QueryManyIter;
pub use par::{MIN_BATCH, QueryParIter};
pub use state::{IterMode, Matches, QueryState, with_system_tick};
pub use terms::{Has, HasFetch, Ref, RefFetch};
pub use world_ext::WorldQueryExt;

#[cfg(test)]
mod tests;
