//! [`QueryManyIter`]: the read-only items of a list of entities, skipping those the query does
//! not match (gone, lacking a component, filtered out); [`for_each_many`] gives the mutable
//! items to a closure one at a time.

use folio_archetype::Entity;

use crate::fetch::{QueryData, QueryFilter, ReadOnlyQueryData};
use crate::state::Lookup;

/// The read-only items of the entities an iterator yields, in its order, skipping the ones
/// the query does not match ([`QueryState::iter_many`](crate::QueryState::iter_many)).
///
/// For entity lists kept in components: a unit's squad, an inventory's items, a node's
/// children, the targets an explosion hit. [`QueryState::for_each_many_mut`] gives the mutable
/// items to a closure one at a time.
///
/// [`QueryState::for_each_many_mut`]: crate::QueryState::for_each_many_mut
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

/// Runs `f` on the items of each entity `entities` yields, in its order, one at a time,
/// skipping the ones the query does not match. An entity listed twice gets two calls.
///
/// # Safety
/// - The lookup's maker may read and write everything `D` and `F` touch for the call, and no
///   other item of the query is alive.
pub(crate) unsafe fn for_each_many<D: QueryData, F: QueryFilter>(
    lookup: Lookup<'_, '_, D, F>,
    entities: impl IntoIterator<Item = Entity>,
    mut f: impl FnMut(D::Item<'_>),
) {
    for entity in entities {
        // SAFETY: the caller holds the access. `f` takes the item for the length of its own
        // call only (it is generic over the item's lifetime), so the item is gone before the
        // next one is made: an entity listed twice never has two items alive.
        if let Ok(item) = unsafe { lookup.get(entity) } {
            f(item);
        }
    }
}
