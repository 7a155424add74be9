//! [`QueryParIter`]: a query's items handed to a closure on rayon's thread pool, in batches (see
//! its docs).

use rayon::prelude::*;

use folio_archetype::{ArchetypeId, World};

use crate::fetch::{QueryData, QueryFilter};
use crate::iter::{QueryIter, fold_dense, smallest_set};
use crate::state::{IterMode, Matches};

/// Whether this target can run threads. wasm32 without the `atomics` feature (the web's
/// wasm32-unknown-unknown, WASI's wasm32-wasip1) cannot: there rayon's pool is not asked for at
/// all, and every parallel iteration runs on the calling thread, in the order a sequential
/// iteration visits the items.
const THREADS: bool = !cfg!(all(target_family = "wasm", not(target_feature = "atomics")));

/// The fewest rows a batch gets by default.
pub const MIN_BATCH: usize = 64;

/// A parallel iterator over a query's items: call [`QueryParIter::for_each`].
///
/// The work is cut into batches of rows (a table, or a slice of one; an archetype's entities, or
/// a slice of them; a slice of the driving sparse set, walked densely when the query names only
/// that set's component), each batch run by one task with its own fetch. The batch size adapts
/// to the query's length and the pool's size: about four batches per thread, none smaller than
/// [`MIN_BATCH`], and a query too small to split runs on the calling thread without touching the
/// pool.
pub struct QueryParIter<'w, 's, D: QueryData, F: QueryFilter> {
    world: &'w World,
    data_state: &'s D::State,
    filter_state: &'s F::State,
    matches: &'s Matches,
    last_run: u32,
    this_run: u32,
    batch_size: Option<usize>,
}

/// One batch: rows `start..end` of a table, an archetype's entity list, or the driving set.
#[derive(Clone, Copy, Debug)]
enum Batch {
    Table {
        index: usize,
        start: usize,
        end: usize,
    },
    Archetype {
        id: ArchetypeId,
        start: usize,
        end: usize,
    },
    Sparse {
        start: usize,
        end: usize,
    },
    /// Rows `start..end` of the one sparse set a dense `Sparse`-mode query walks.
    DenseSparse {
        start: usize,
        end: usize,
    },
}

impl<'w, 's, D: QueryData, F: QueryFilter> QueryParIter<'w, 's, D, F> {
    /// # Safety
    /// - As for `QueryIter::new`; the access is held for `'w` by the calling thread on behalf of
    ///   the pool's tasks, which each take disjoint rows.
    pub(crate) unsafe fn new(
        world: &'w World,
        data_state: &'s D::State,
        filter_state: &'s F::State,
        matches: &'s Matches,
        last_run: u32,
        this_run: u32,
    ) -> Self {
        Self { world, data_state, filter_state, matches, last_run, this_run, batch_size: None }
    }

    /// Fixes the number of rows per batch (at least 1) instead of adapting it.
    pub fn batch_size(mut self, rows: usize) -> Self {
        self.batch_size = Some(rows.max(1));
        self
    }

    /// Runs `f` on every item, in parallel.
    pub fn for_each<G>(self, f: G)
    where
        G: Fn(D::Item<'w>) + Send + Sync,
    {
        let total = if self.matches.none { 0 } else { self.matches.entity_count(self.world) };
        let threads = if THREADS { rayon::current_num_threads() } else { 1 };
        let batch = self.batch_size.unwrap_or_else(|| (total / (threads * 4)).max(MIN_BATCH));
        if total == 0 {
            return;
        }
        if threads <= 1 || total <= batch {
            // SAFETY: as for `new`, on this thread alone.
            let iter = unsafe {
                QueryIter::<D, F>::new(
                    self.world,
                    self.data_state,
                    self.filter_state,
                    self.matches,
                    self.last_run,
                    self.this_run,
                )
            };
            iter.for_each(f);
            return;
        }
        let batches = self.batches(batch);
        batches.into_par_iter().for_each(|b| {
            // SAFETY: batches cover disjoint rows, so no two tasks make items for one entity;
            // the access is held by the caller of `new` for `'w`.
            unsafe { self.run_batch(b, &f) }
        });
    }

    fn batches(&self, batch: usize) -> Vec<Batch> {
        let mut out = Vec::new();
        let mut split = |len: usize, make: &mut dyn FnMut(usize, usize) -> Batch| {
            let mut start = 0;
            while start < len {
                let end = (start + batch).min(len);
                out.push(make(start, end));
                start = end;
            }
        };
        match self.matches.mode {
            IterMode::Tables => {
                for id in &self.matches.tables {
                    let len = self.world.tables()[id.index()].len();
                    let index = id.index();
                    split(len, &mut |start, end| Batch::Table { index, start, end });
                }
            }
            IterMode::Archetypes => {
                for &id in &self.matches.archetypes {
                    let len = self.world.archetypes()[id.index()].len();
                    split(len, &mut |start, end| Batch::Archetype { id, start, end });
                }
            }
            IterMode::Sparse => match self.matches.dense_sparse_set(self.world) {
                Some((_, set)) => {
                    split(set.len(), &mut |start, end| Batch::DenseSparse { start, end });
                }
                None => {
                    let len = smallest_set(self.world, self.matches).len();
                    split(len, &mut |start, end| Batch::Sparse { start, end });
                }
            },
        }
        out
    }

    /// # Safety
    /// - No other task runs a batch overlapping `batch`; the access is held for `'w`.
    unsafe fn run_batch<G: Fn(D::Item<'w>)>(&self, batch: Batch, f: &G) {
        let world = self.world;
        // SAFETY: the states were built for `world`; the access is held (caller).
        let (mut data, mut filter) = unsafe {
            (
                D::init_fetch(world, self.data_state, self.last_run, self.this_run),
                F::init_fetch(world, self.filter_state, self.last_run, self.this_run),
            )
        };
        match batch {
            Batch::Table { index, start, end } => {
                let table = &world.tables()[index];
                // SAFETY: a matched table; every term is table-stored; rows `start..end` are
                // in bounds and this task's alone.
                unsafe {
                    D::set_table(&mut data, self.data_state, table);
                    F::set_table(&mut filter, self.filter_state, table);
                    fold_dense::<D, F, (), _>(&data, &filter, start, end, (), &mut |(), item| {
                        f(item)
                    });
                }
            }
            Batch::DenseSparse { start, end } => {
                let Some((id, set)) = self.matches.dense_sparse_set(world) else { return };
                // SAFETY: the query names only `id` and every archetype holding it matches
                // (`Matches::dense_set`); rows `start..end` are in the set and this task's alone.
                unsafe {
                    D::set_sparse_set(&mut data, self.data_state, id, set);
                    F::set_sparse_set(&mut filter, self.filter_state, id, set);
                    fold_dense::<D, F, (), _>(&data, &filter, start, end, (), &mut |(), item| {
                        f(item)
                    });
                }
            }
            Batch::Archetype { id, start, end } => {
                let archetype = &world.archetypes()[id.index()];
                let table = &world.tables()[archetype.table_id().index()];
                // SAFETY: a matched archetype and its table; these entities are this task's.
                unsafe {
                    D::set_archetype(&mut data, self.data_state, archetype, table);
                    F::set_archetype(&mut filter, self.filter_state, archetype, table);
                    for ae in archetype.entities(table).range(start, end) {
                        let row = ae.table_row as usize;
                        if F::IS_ARCHETYPAL || F::filter_fetch(&mut filter, ae.entity, row) {
                            f(D::fetch(&mut data, ae.entity, row));
                        }
                    }
                }
            }
            Batch::Sparse { start, end } => {
                let mut current = None;
                for &entity in &smallest_set(world, self.matches)[start..end] {
                    let Some(loc) = world.entities().location(entity) else { continue };
                    let archetype = &world.archetypes()[loc.archetype_id as usize];
                    if !self.matches.contains_archetype(archetype.id()) {
                        continue;
                    }
                    let table = &world.tables()[archetype.table_id().index()];
                    let row = loc.table_row as usize;
                    // SAFETY: a matched archetype; the entity lives there at `row` and is in
                    // this task's slice of the driving set only.
                    unsafe {
                        if current != Some(archetype.id()) {
                            current = Some(archetype.id());
                            D::set_archetype(&mut data, self.data_state, archetype, table);
                            F::set_archetype(&mut filter, self.filter_state, archetype, table);
                        }
                        if F::IS_ARCHETYPAL || F::filter_fetch(&mut filter, entity, row) {
                            f(D::fetch(&mut data, entity, row));
                        }
                    }
                }
            }
        }
    }
}
