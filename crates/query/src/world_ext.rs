//! `world.query::<D>()`: queries built from the world itself.

use folio_archetype::World;

use crate::access::QueryError;
use crate::fetch::{QueryData, QueryFilter};
use crate::state::QueryState;

/// Builds queries from a [`World`] (re-exported by the `folio` prelude).
pub trait WorldQueryExt {
    /// A query for `D` over every entity that has it.
    ///
    /// # Panics
    /// When `D` conflicts with itself (`(&mut T, &T)`); see [`WorldQueryExt::try_query`].
    #[track_caller]
    fn query<D: QueryData>(&self) -> QueryState<D, ()>;

    /// A query for `D` over the entities that pass `F`.
    ///
    /// # Panics
    /// When the query conflicts with itself.
    #[track_caller]
    fn query_filtered<D: QueryData, F: QueryFilter>(&self) -> QueryState<D, F>;

    /// A query for `D` filtered by `F`, or the conflict that makes it unusable.
    fn try_query<D: QueryData, F: QueryFilter>(&self) -> Result<QueryState<D, F>, QueryError>;
}

impl WorldQueryExt for World {
    #[track_caller]
    fn query<D: QueryData>(&self) -> QueryState<D, ()> {
        QueryState::new(self)
    }

    #[track_caller]
    fn query_filtered<D: QueryData, F: QueryFilter>(&self) -> QueryState<D, F> {
        QueryState::new(self)
    }

    fn try_query<D: QueryData, F: QueryFilter>(&self) -> Result<QueryState<D, F>, QueryError> {
        QueryState::try_new(self)
    }
}
