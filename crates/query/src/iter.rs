//! [`QueryIter`]: walks a query's matches in one of three ways (see [`IterMode`]); its safety
//! model is on its own docs.

use std::slice;

use folio_archetype::{ArchetypeEntities, ArchetypeId, Entity, TableId, World};

use crate::fetch::{ArchetypeFilter, QueryData, QueryFilter};
use crate::state::{IterMode, Matches};

/// The fewest rows `fold` hands to [`QueryData::fold_rows`] (an out-of-line call with the
/// columns as reference arguments); shorter runs stay in the inlined loop, where a call per
/// table would cost more than it saves (`frag_iter`'s tables have 20 rows).
pub(crate) const NOALIAS_MIN_ROWS: usize = 64;

enum Cursor<'w, 's> {
    /// Rows `row..len` of the current table are next (the iterator's `row` and `len`).
    Tables {
        ids: slice::Iter<'s, TableId>,
    },
    Archetypes {
        ids: slice::Iter<'s, ArchetypeId>,
        entities: ArchetypeEntities<'w>,
        row: usize,
    },
    Sparse {
        entities: &'w [Entity],
        row: usize,
        current: Option<ArchetypeId>,
    },
}

/// An iterator over a query's items, walking the matches in one of three ways (see
/// [`IterMode`]).
///
/// # Safety model
/// The iterator visits each matched entity at most once, so the items it hands out for
/// different rows never alias; its creator vouches that the query's access is held for `'w`.
/// In `Tables` mode rows are visited as `0..table.len()` of each matched table, with no lookup
/// per entity and no branch per entity unless the filter checks ticks. A dense `Sparse`-mode
/// query ([`Matches::is_dense_sparse`](crate::Matches::is_dense_sparse)) runs the same cursor
/// over `0..set.len()` of its one sparse set, with the fetches pointed at the set's arrays.
pub struct QueryIter<'w, 's, D: QueryData, F: QueryFilter> {
    world: &'w World,
    data_state: &'s D::State,
    filter_state: &'s F::State,
    matches: &'s Matches,
    data: D::Fetch<'w>,
    filter: F::Fetch<'w>,
    cursor: Cursor<'w, 's>,
    /// `Tables` mode: the next row of the current table, and its length. Kept out of `cursor`
    /// so the per-row check in `next` does not read the mode; 0 and 0 in the other modes.
    row: usize,
    len: usize,
    /// `Sparse` mode: matched entities not yet visited (exact when the filter is archetypal).
    /// Unused in the other modes, whose size hint is computed from the cursor.
    remaining: usize,
}

impl<'w, 's, D: QueryData, F: QueryFilter> QueryIter<'w, 's, D, F> {
    /// # Safety
    /// - `matches` is up to date for `world` and the states were built for it.
    /// - The caller holds, for `'w`, the access `D` and `F` need.
    #[inline]
    pub(crate) unsafe fn new(
        world: &'w World,
        data_state: &'s D::State,
        filter_state: &'s F::State,
        matches: &'s Matches,
        last_run: u32,
        this_run: u32,
    ) -> Self {
        // SAFETY: forwarded from the caller.
        let (data, filter) = unsafe {
            (
                D::init_fetch(world, data_state, last_run, this_run),
                F::init_fetch(world, filter_state, last_run, this_run),
            )
        };
        let (mut data, mut filter) = (data, filter);
        let dense = match matches.mode {
            IterMode::Sparse => matches.dense_sparse_set(world),
            _ => None,
        };
        let mut len = 0;
        let cursor = match matches.mode {
            _ if matches.none => Cursor::Sparse { entities: &[], row: 0, current: None },
            IterMode::Tables => Cursor::Tables { ids: matches.tables.iter() },
            IterMode::Sparse if let Some((id, set)) = dense => {
                // SAFETY: the query names only `id`, whose set this is, and every archetype
                // holding `id` matches (`Matches::dense_set`); rows `0..len` are the set's.
                unsafe {
                    D::set_sparse_set(&mut data, data_state, id, set);
                    F::set_sparse_set(&mut filter, filter_state, id, set);
                }
                // A single "table" with no further ones: `next` and `fold` walk it densely.
                len = set.len();
                Cursor::Tables { ids: [].iter() }
            }
            IterMode::Archetypes => Cursor::Archetypes {
                ids: matches.archetypes.iter(),
                entities: ArchetypeEntities::EMPTY,
                row: 0,
            },
            IterMode::Sparse => {
                let entities = smallest_set(world, matches);
                Cursor::Sparse { entities, row: 0, current: None }
            }
        };
        // Only `Sparse` mode counts down per entity; the others compute their size hint from
        // the tables or archetypes not yet entered, so a run that never asks pays nothing.
        let remaining = match matches.mode {
            IterMode::Sparse if !matches.none && dense.is_none() => matches.entity_count(world),
            _ => 0,
        };
        Self {
            world,
            data_state,
            filter_state,
            matches,
            data,
            filter,
            cursor,
            row: 0,
            len,
            remaining,
        }
    }
}

/// The entities of the smallest required sparse set: the fewest candidates to check.
pub(crate) fn smallest_set<'w>(world: &'w World, matches: &Matches) -> &'w [Entity] {
    matches
        .required_sparse
        .iter()
        .filter_map(|&id| world.sparse_set(id))
        .min_by_key(|set| set.len())
        .map_or(&[], |set| set.entities())
}

impl<'w, D: QueryData, F: QueryFilter> QueryIter<'w, '_, D, F> {
    /// `next` in the `Archetypes` and `Sparse` modes. Inlined into the caller's loop with the
    /// rest of `next`, as are the fetches' `set_table` and `set_archetype`: then no pointer to
    /// the iterator escapes into a call, so the optimiser keeps the row counter in a register
    /// instead of storing and reloading it every row. Measured through `iter_mut` (criterion,
    /// side by side), when this also entered tables: simple_iter 19.4 µs -> 14.7 µs; frag_iter
    /// (20 rows a table, a call per table entered when out of line) 858 ns -> 484 ns.
    #[inline(always)]
    fn next_other(&mut self) -> Option<D::Item<'w>> {
        match &mut self.cursor {
            Cursor::Tables { .. } => unreachable!("`next` walks the tables"),
            Cursor::Archetypes { ids, entities, row } => loop {
                if let Some(ae) = entities.get(*row) {
                    *row += 1;
                    let table_row = ae.table_row as usize;
                    // SAFETY: `set_archetype` was called for the entity's archetype, where it
                    // lives at `table_row`; each entity is visited once.
                    unsafe {
                        if F::IS_ARCHETYPAL
                            || F::filter_fetch(&mut self.filter, ae.entity, table_row)
                        {
                            return Some(D::fetch(&mut self.data, ae.entity, table_row));
                        }
                    }
                    continue;
                }
                let archetype = &self.world.archetypes()[ids.next()?.index()];
                let table = &self.world.tables()[archetype.table_id().index()];
                // SAFETY: a matched archetype of this world and its table.
                unsafe {
                    D::set_archetype(&mut self.data, self.data_state, archetype, table);
                    F::set_archetype(&mut self.filter, self.filter_state, archetype, table);
                }
                *entities = archetype.entities(table);
                *row = 0;
            },
            Cursor::Sparse { entities, row, current } => loop {
                let &entity = entities.get(*row)?;
                *row += 1;
                let Some(loc) = self.world.entities().location(entity) else { continue };
                let archetype = &self.world.archetypes()[loc.archetype_id as usize];
                if !self.matches.contains_archetype(archetype.id()) {
                    continue;
                }
                self.remaining -= 1;
                if *current != Some(archetype.id()) {
                    *current = Some(archetype.id());
                    let table = &self.world.tables()[archetype.table_id().index()];
                    // SAFETY: a matched archetype of this world and its table.
                    unsafe {
                        D::set_archetype(&mut self.data, self.data_state, archetype, table);
                        F::set_archetype(&mut self.filter, self.filter_state, archetype, table);
                    }
                }
                let table_row = loc.table_row as usize;
                // SAFETY: the fetches are set to the entity's archetype, where it lives at
                // `table_row`; a set holds each entity once.
                unsafe {
                    if F::IS_ARCHETYPAL || F::filter_fetch(&mut self.filter, entity, table_row) {
                        return Some(D::fetch(&mut self.data, entity, table_row));
                    }
                }
            },
        }
    }
}

impl<'w, D: QueryData, F: QueryFilter> Iterator for QueryIter<'w, '_, D, F> {
    type Item = D::Item<'w>;

    /// In `Tables` mode one loop: the next row of the current table (a compare, an increment
    /// and the fetch), or else the next table; the other modes in `next_other`. Inlined into
    /// the caller with everything it calls. The row and length are fields of the iterator, not
    /// of the `Tables` cursor, and the mode is read only when a table runs out: in a `for`
    /// loop the optimiser then makes the rows of a table an inner loop with no check of the
    /// mode per row (criterion, side by side: simple_iter 15.6 -> 14.7 µs, frag_iter
    /// 460 -> 430 ns). Entering a table is marked as the cold path: without that hint the
    /// register allocator, in a system's `for` loop, kept the column pointers and the row on
    /// the stack and stored the row back every row (frame_churn's `integrate` system,
    /// 100,000 rows: 250 -> 165 µs; simple_iter 14.7 -> 11.1 µs).
    #[inline(always)]
    fn next(&mut self) -> Option<D::Item<'w>> {
        loop {
            if self.row < self.len {
                let r = self.row;
                self.row += 1;
                // SAFETY: `set_table` (or `set_sparse_set`) was called for this table and
                // `r < len`; each row is visited once.
                unsafe {
                    if F::IS_ARCHETYPAL || F::filter_fetch_table(&mut self.filter, r) {
                        return Some(D::fetch_table(&mut self.data, r));
                    }
                }
                continue;
            }
            std::hint::cold_path();
            let Cursor::Tables { ids } = &mut self.cursor else { return self.next_other() };
            let table = &self.world.tables()[ids.next()?.index()];
            // SAFETY: a matched table of this world; every term is table-stored (mode).
            unsafe {
                D::set_table(&mut self.data, self.data_state, table);
                F::set_table(&mut self.filter, self.filter_state, table);
            }
            self.row = 0;
            self.len = table.len();
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = match &self.cursor {
            Cursor::Tables { ids } => {
                let tables = self.world.tables();
                self.len - self.row
                    + ids.as_slice().iter().map(|t| tables[t.index()].len()).sum::<usize>()
            }
            Cursor::Archetypes { ids, entities, row } => {
                let archetypes = self.world.archetypes();
                entities.len() - row
                    + ids.as_slice().iter().map(|a| archetypes[a.index()].len()).sum::<usize>()
            }
            Cursor::Sparse { .. } => self.remaining,
        };
        let lower = if F::IS_ARCHETYPAL { remaining } else { 0 };
        (lower, Some(remaining))
    }

    /// Internal iteration: in `Tables` mode a tight loop per table.
    #[inline]
    fn fold<B, G>(mut self, init: B, mut g: G) -> B
    where
        G: FnMut(B, D::Item<'w>) -> B,
    {
        let Cursor::Tables { ids } = &mut self.cursor else {
            let mut acc = init;
            for item in self.by_ref() {
                acc = g(acc, item);
            }
            return acc;
        };
        let mut acc = init;
        let (mut start, mut end) = (self.row, self.len);
        loop {
            // SAFETY: the fetches are set to this table (or dense set), `end <= len`, and no
            // item of rows `start..end` was handed out yet (`next` stopped at `start`).
            acc = unsafe {
                fold_dense::<D, F, B, G>(&self.data, &self.filter, start, end, acc, &mut g)
            };
            let Some(id) = ids.next() else { return acc };
            let table = &self.world.tables()[id.index()];
            // SAFETY: a matched table of this world; every term is table-stored (mode).
            unsafe {
                D::set_table(&mut self.data, self.data_state, table);
                F::set_table(&mut self.filter, self.filter_state, table);
            }
            (start, end) = (0, table.len());
        }
    }
}

/// Rows `start..end` of the table (or dense sparse set) both fetches are set to, in order: the
/// dense loop of `fold`, `for_each` and `par_iter`'s batches. Long runs with an archetypal
/// filter go to [`QueryData::fold_rows`] (the columns as reference arguments); the others run
/// here, on copies of the fetches whose address is never taken, so the optimiser keeps the
/// column pointers in registers across the writes made through items (the originals escape
/// into `set_table`, and reading them per row would reload them after every write, and keep
/// the loop from being vectorised).
///
/// # Safety
/// - The fetches are set (`set_table` or `set_sparse_set`), `end <= len`, the rows are the
///   caller's alone and none of them has an item yet.
#[inline(always)]
pub(crate) unsafe fn fold_dense<'w, D: QueryData, F: QueryFilter, B, G>(
    data: &D::Fetch<'w>,
    filter: &F::Fetch<'w>,
    start: usize,
    end: usize,
    mut acc: B,
    g: &mut G,
) -> B
where
    G: FnMut(B, D::Item<'w>) -> B,
{
    if F::IS_ARCHETYPAL && end - start >= NOALIAS_MIN_ROWS {
        // SAFETY: forwarded from the caller.
        return unsafe { D::fold_rows(data, start, end, acc, g) };
    }
    let (mut data, mut filter) = (data.clone(), filter.clone());
    for r in start..end {
        // SAFETY: forwarded from the caller; each row is visited once.
        unsafe {
            if F::IS_ARCHETYPAL || F::filter_fetch_table(&mut filter, r) {
                acc = g(acc, D::fetch_table(&mut data, r));
            }
        }
    }
    acc
}

impl<D: QueryData, F: ArchetypeFilter> ExactSizeIterator for QueryIter<'_, '_, D, F> {}

impl<D: QueryData, F: QueryFilter> std::iter::FusedIterator for QueryIter<'_, '_, D, F> {}

#[cfg(test)]
mod tests {
    use folio_archetype::World;

    use crate::WorldQueryExt;

    struct A;
    struct B;

    #[test]
    fn len_counts_down_across_tables() {
        let mut world = World::new();
        for _ in 0..3 {
            world.spawn((A,));
        }
        for _ in 0..2 {
            world.spawn((A, B));
        }
        let mut query = world.query::<&A>();
        let mut iter = query.iter(&world);
        for left in (1..=5).rev() {
            assert_eq!(iter.len(), left);
            assert!(iter.next().is_some());
        }
        assert_eq!(iter.len(), 0);
        assert!(iter.next().is_none());
    }
}
