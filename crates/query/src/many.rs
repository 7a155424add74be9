//! [`QueryManyIter`]: the read-only items of a list of entities, skipping those the query does
//! not match (gone, lacking a component, filtered out). For entity lists kept in components:
//! a unit's squad, an inventory's items, a node's children.

use folio_archetype::Entity;

use crate::fetch::{QueryFilter, ReadOnlyQueryData};
use crate::state::Lookup;

/// The read-only items of the entities an iterator yields, in its order, skipping the ones
/// the query does not match ([`QueryState::iter_many`](crate::QueryState::iter_many)).
pub struct QueryManyIter<'w, 's, D: ReadOnlyQueryData, F: QueryFilter, I: Iterator<Item = Entity>> {
    lookup: Lookup<'w, 's, D, F>,
    entities: I,
}

impl<'w, 's, D: ReadOnlyQueryData, F: QueryFilter, I: Iterator<Item = Entity>>
    QueryManyIter<'w, 's, D, F, I>
{
    pub(crate) fn new(
        lookup: Lookup<'w, 's, D, F>,
        entities: impl IntoIterator<IntoIter = I>,
    ) -> Self {
        Self { lookup, entities: entities.into_iter() }
    }
}

impl<'w, D: ReadOnlyQueryData, F: QueryFilter, I: Iterator<Item = Entity>> Iterator
    for QueryManyIter<'w, '_, D, F, I>
{
    type Item = D::Item<'w>;

    fn next(&mut self) -> Option<D::Item<'w>> {
        // SAFETY: read-only items may alias; the lookup's maker holds the reads for `'w`.
        self.entities.by_ref().find_map(|entity| unsafe { self.lookup.get(entity) }.ok())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.entities.size_hint().1)
    }
}
