//! [`QueryManyIter`]: the read-only items of a list of entities, skipping those the query does
//! not match (gone, lacking a component, filtered out). For entity lists kept in components:
//! a unit's squad, an inventory's items, a node's children.

use std::marker::PhantomData;

use folio_archetype::{Entity, World};

use crate::fetch::{QueryFilter, ReadOnlyQueryData};
use crate::state::{Matches, get_in};

/// The read-only items of the entities an iterator yields, in its order, skipping the ones
/// the query does not match ([`QueryState::iter_many`](crate::QueryState::iter_many)).
pub struct QueryManyIter<'w, 's, D: ReadOnlyQueryData, F: QueryFilter, I: Iterator<Item = Entity>> {
    world: &'w World,
    data: &'s D::State,
    filter: &'s F::State,
    matches: &'s Matches,
    last_run: u32,
    this_run: u32,
    entities: I,
    _marker: PhantomData<fn() -> (D, F)>,
}

impl<'w, 's, D: ReadOnlyQueryData, F: QueryFilter, I: Iterator<Item = Entity>>
    QueryManyIter<'w, 's, D, F, I>
{
    /// # Safety
    /// - The caller may read everything `D` and `F` read in `world` for `'w`, and `matches`
    ///   is up to date for `world`.
    pub(crate) unsafe fn new(
        world: &'w World,
        data: &'s D::State,
        filter: &'s F::State,
        matches: &'s Matches,
        last_run: u32,
        this_run: u32,
        entities: I,
    ) -> Self {
        Self { world, data, filter, matches, last_run, this_run, entities, _marker: PhantomData }
    }
}

impl<'w, D: ReadOnlyQueryData, F: QueryFilter, I: Iterator<Item = Entity>> Iterator
    for QueryManyIter<'w, '_, D, F, I>
{
    type Item = D::Item<'w>;

    fn next(&mut self) -> Option<D::Item<'w>> {
        for entity in self.entities.by_ref() {
            // SAFETY: read-only items may alias; the caller of `new` holds the reads for `'w`.
            let item = unsafe {
                get_in::<D, F>(
                    self.world,
                    self.data,
                    self.filter,
                    self.matches,
                    entity,
                    self.last_run,
                    self.this_run,
                )
            };
            if let Ok(item) = item {
                return Some(item);
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.entities.size_hint().1)
    }
}
