//! Every set of `K` distinct matching entities: pairs for collisions or forces between bodies,
//! triples for formations ([`QueryCombinationIter`], and the closure that mutable items go to).

use folio_archetype::Entity;

use crate::fetch::{QueryData, QueryFilter, ReadOnlyQueryData};
use crate::state::Lookup;

/// The `K`-combinations of a list of entities, as index tuples in lexicographic order:
/// `[0, 1], [0, 2], .., [1, 2], ..` for `K = 2`.
pub(crate) struct Combinations<const K: usize> {
    entities: Vec<Entity>,
    /// The next combination's indices, strictly increasing; `None` once all were given.
    next: Option<[usize; K]>,
}

impl<const K: usize> Combinations<K> {
    /// The combinations of `entities` (none if there are fewer than `K`).
    pub(crate) fn new(entities: Vec<Entity>) -> Self {
        const { assert!(K > 0, "a combination has at least one entity") };
        let next = (entities.len() >= K).then(|| std::array::from_fn(|i| i));
        Self { entities, next }
    }

    /// The entities of every matching archetype that pass the query's filter, in archetype
    /// order.
    pub(crate) fn of_query<D: QueryData, F: QueryFilter>(lookup: &Lookup<'_, '_, D, F>) -> Self {
        let mut entities = Vec::new();
        for &id in lookup.matches.archetypes() {
            let listed = lookup.world.archetype_entities(id);
            entities.extend(listed.iter().map(|e| e.entity).filter(|&e| lookup.matches(e)));
        }
        Self::new(entities)
    }

    /// The next combination's entities.
    pub(crate) fn next(&mut self) -> Option<[Entity; K]> {
        let current = self.next?;
        let n = self.entities.len();
        // Advance: the rightmost index that can still move moves by one, and the ones after
        // it follow right behind it.
        self.next = (0..K).rev().find(|&i| current[i] < n - K + i).map(|i| {
            let mut next = current;
            next[i] += 1;
            for j in i + 1..K {
                next[j] = next[j - 1] + 1;
            }
            next
        });
        Some(current.map(|i| self.entities[i]))
    }

    /// How many combinations are left (saturating at `usize::MAX`).
    pub(crate) fn remaining(&self) -> usize {
        let Some(current) = self.next else { return 0 };
        // Combinations strictly after `current` in lexicographic order, plus `current`: for
        // each position, the combinations that agree before it and are larger at it.
        let n = self.entities.len();
        let mut count: usize = 1;
        for (i, &c) in current.iter().enumerate() {
            for larger in c + 1..n {
                count = count.saturating_add(binomial(n - larger - 1, K - i - 1));
            }
        }
        count
    }
}

/// `n` choose `k`, saturating.
fn binomial(n: usize, k: usize) -> usize {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut result: usize = 1;
    for i in 0..k {
        // Exact at each step: the product of `i + 1` consecutive integers is divisible by
        // `(i + 1)!`.
        match result.checked_mul(n - i) {
            Some(product) => result = product / (i + 1),
            None => return usize::MAX,
        }
    }
    result
}

/// The read-only items of every `K` distinct matching entities
/// ([`QueryState::iter_combinations`](crate::QueryState::iter_combinations)).
///
/// Pairs for collisions or forces between bodies, triples for formations.
/// [`QueryState::iter_combinations`] yields read-only items;
/// [`QueryState::for_each_combination_mut`] hands mutable ones to a closure, one combination
/// at a time (an iterator could not: two of its combinations share entities, so their items
/// would alias while both are alive).
///
/// [`QueryState::iter_combinations`]: crate::QueryState::iter_combinations
/// [`QueryState::for_each_combination_mut`]: crate::QueryState::for_each_combination_mut
pub struct QueryCombinationIter<'w, 's, D: ReadOnlyQueryData, F: QueryFilter, const K: usize> {
    lookup: Lookup<'w, 's, D, F>,
    combinations: Combinations<K>,
}

impl<'w, 's, D: ReadOnlyQueryData, F: QueryFilter, const K: usize>
    QueryCombinationIter<'w, 's, D, F, K>
{
    pub(crate) fn new(lookup: Lookup<'w, 's, D, F>) -> Self {
        let combinations = Combinations::of_query(&lookup);
        Self { lookup, combinations }
    }
}

impl<'w, D: ReadOnlyQueryData, F: QueryFilter, const K: usize> Iterator
    for QueryCombinationIter<'w, '_, D, F, K>
{
    type Item = [D::Item<'w>; K];

    fn next(&mut self) -> Option<Self::Item> {
        let entities = self.combinations.next()?;
        Some(entities.map(|e| {
            // SAFETY: read-only items may alias; the lookup's maker holds the reads for `'w`.
            // Each entity matched when the list was made, and nothing can change the world
            // while `'w` borrows it.
            unsafe { self.lookup.get(e) }.expect("matched when the combinations were listed")
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.combinations.remaining();
        (n, (n < usize::MAX).then_some(n))
    }
}

/// Runs `f` on the mutable items of every `K` distinct matching entities, one combination at
/// a time.
///
/// # Safety
/// - The lookup's maker may read and write everything `D` and `F` touch for the call, and no
///   other item of the query is alive.
pub(crate) unsafe fn for_each_combination<D: QueryData, F: QueryFilter, const K: usize>(
    lookup: Lookup<'_, '_, D, F>,
    mut f: impl FnMut([D::Item<'_>; K]),
) {
    let mut combinations = Combinations::<K>::of_query(&lookup);
    while let Some(entities) = combinations.next() {
        let items = entities.map(|e| {
            // SAFETY:
            // - a combination's entities are distinct (strictly increasing indices into a list
            //   with each entity once), so its items never alias one another; the caller holds
            //   the access.
            // - `f` takes the items for a lifetime of its own call only (it is generic over
            //   it), so they are gone before the next combination's, which may share entities,
            //   exist.
            unsafe { lookup.get(e) }.expect("matched when the combinations were listed")
        });
        f(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all<const K: usize>(n: usize) -> Vec<[u32; K]> {
        let entities = (0..n as u64).map(|i| Entity::from_bits(1 << 32 | i).unwrap()).collect();
        let mut c = Combinations::<K>::new(entities);
        let mut out = Vec::new();
        let mut left = c.remaining();
        while let Some(es) = c.next() {
            out.push(es.map(|e| e.index()));
            left -= 1;
            assert_eq!(c.remaining(), left);
        }
        assert_eq!(left, 0);
        out
    }

    #[test]
    fn combinations_come_once_each_in_lexicographic_order() {
        assert_eq!(all::<2>(4), [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]);
        assert_eq!(all::<3>(4), [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]);
        assert_eq!(all::<1>(3), [[0], [1], [2]]);
        assert_eq!(all::<3>(2), Vec::<[u32; 3]>::new());
        assert_eq!(all::<2>(0), Vec::<[u32; 2]>::new());
        assert_eq!(all::<4>(4), [[0, 1, 2, 3]]);
        assert_eq!(all::<3>(10).len(), 120);
    }

    #[test]
    fn binomials() {
        assert_eq!(binomial(10, 3), 120);
        assert_eq!(binomial(5, 0), 1);
        assert_eq!(binomial(3, 5), 0);
        assert_eq!(binomial(200, 100), usize::MAX, "saturates");
    }
}
