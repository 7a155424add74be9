//! Sparse sets (seed 002): entity index → dense position through a paged sparse array, dense
//! entities beside dense data, swap-remove.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::column::{Column, DropFn, drop_fn_of};
use crate::config::StorageConfig;
use crate::entity::Entity;
use crate::error::StorageError;

mod snapshot;

pub use snapshot::SparseMembership;

/// Entries per sparse page: 1,024 `u32`s, one 4 KiB page.
pub const PAGE_LEN: usize = 1024;
const EMPTY: u32 = u32::MAX;

/// The paged sparse array: index → dense position.
#[derive(Default)]
struct SparseArray {
    pages: Vec<Option<Box<[u32; PAGE_LEN]>>>,
}

impl SparseArray {
    /// Bytes of the page table (its heap block) and of the pages allocated.
    fn memory(&self) -> (usize, usize) {
        let table = self.pages.capacity() * size_of::<Option<Box<[u32; PAGE_LEN]>>>();
        (table, self.page_count() * size_of::<[u32; PAGE_LEN]>())
    }

    #[inline]
    fn get(&self, index: u32) -> Option<u32> {
        let index = index as usize;
        let page = self.pages.get(index / PAGE_LEN)?.as_ref()?;
        let dense = page[index % PAGE_LEN];
        (dense != EMPTY).then_some(dense)
    }

    /// The entry of `index`, making its page (and the page table's room for it) first; on
    /// error nothing changes.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses the page or the page table's growth.
    #[inline]
    fn try_entry(&mut self, index: u32) -> Result<&mut u32, StorageError> {
        let index = index as usize;
        let page_index = index / PAGE_LEN;
        if !matches!(self.pages.get(page_index), Some(Some(_))) {
            self.make_page(page_index)?;
        }
        match &mut self.pages[page_index] {
            Some(page) => Ok(&mut page[index % PAGE_LEN]),
            None => unreachable!("the page was made above"),
        }
    }

    /// Allocates page `page_index`, growing the page table to hold it, without aborting when
    /// the heap refuses (a `Box::new` or a `resize` would).
    #[cold]
    #[inline(never)]
    fn make_page(&mut self, page_index: usize) -> Result<(), StorageError> {
        if page_index >= self.pages.len() {
            let additional = page_index + 1 - self.pages.len();
            self.pages.try_reserve(additional).map_err(|e| StorageError::alloc(additional, e))?;
        }
        let mut page = Vec::new();
        page.try_reserve_exact(PAGE_LEN).map_err(|e| StorageError::alloc(PAGE_LEN, e))?;
        page.resize(PAGE_LEN, EMPTY);
        let page: Box<[u32; PAGE_LEN]> = match page.into_boxed_slice().try_into() {
            Ok(page) => page,
            Err(_) => unreachable!("the page has PAGE_LEN entries"),
        };
        if page_index >= self.pages.len() {
            // Within the capacity reserved above: no allocation.
            self.pages.resize_with(page_index + 1, || None);
        }
        self.pages[page_index] = Some(page);
        Ok(())
    }

    /// Sets the entry of an index whose page exists (one [`Self::get`] found, or one set
    /// before): no page to grow or allocate.
    ///
    /// # Panics
    /// When the page does not exist.
    #[inline]
    fn set_on_page(&mut self, index: u32, dense: u32) {
        let index = index as usize;
        let page = self.pages[index / PAGE_LEN].as_mut().expect("the index's page exists");
        page[index % PAGE_LEN] = dense;
    }

    /// Pages allocated so far.
    fn page_count(&self) -> usize {
        self.pages.iter().filter(|p| p.is_some()).count()
    }
}

/// A type-erased sparse set: one component type's values for the entities that have it.
///
/// The sparse array is split into pages of [`PAGE_LEN`] entries allocated on first use, so a set
/// holding a few entities with large indices costs a page or two, not an array as long as the
/// largest index. The dense data is a [`Column`], so [`ComponentSparseSet`] is type-erased and
/// [`SparseSet<T>`] is a thin typed wrapper over it.
///
/// An entity whose index is present with another generation is not "in" the set (lookups compare
/// the whole entity); inserting it replaces the stale entry, dropping its value.
///
/// Beside each value the set keeps two change ticks (the tick it was added at and the tick it
/// was last changed at), in dense order, for the query layer's `Added` and `Changed` filters.
/// [`SparseSet<T>`], the typed wrapper for use outside a world, leaves them at 0.
///
/// # Safety model
/// `entities.len() == data.len() == added.len() == changed.len()`; for each dense position `i`,
/// `sparse[entities[i].index()] == i`, and every other sparse entry is `EMPTY`.
pub struct ComponentSparseSet {
    sparse: SparseArray,
    entities: Vec<Entity>,
    data: Column,
    /// The tick each value was added at (`u32`s, parallel to `entities`).
    added: Column,
    /// The tick each value was last changed at (`u32`s, parallel to `entities`).
    changed: Column,
    /// Entities that fit in every dense column (entities, data, ticks) without growing: the
    /// smallest of their capacities, so making room for one is a single comparison.
    /// `len <= cap`.
    cap: usize,
}

impl ComponentSparseSet {
    /// An empty set of items with `layout`, dropped with `drop`.
    ///
    /// # Safety
    /// - As for [`Column::new`]: `layout` and `drop` describe one `Send + Sync` type.
    pub unsafe fn new(layout: Layout, drop: Option<DropFn>) -> Self {
        // SAFETY:
        // - `layout` and `drop` describe one `Send + Sync` type (forwarded from the caller).
        unsafe { Self::with_config(layout, drop, &StorageConfig::new()) }
    }

    /// An empty set of items with `layout`, dropped with `drop`, whose columns take their
    /// pages from `config`.
    ///
    /// # Safety
    /// - As for [`Column::new`]: `layout` and `drop` describe one `Send + Sync` type.
    pub unsafe fn with_config(
        layout: Layout,
        drop: Option<DropFn>,
        config: &StorageConfig,
    ) -> Self {
        Self {
            sparse: SparseArray::default(),
            entities: Vec::new(),
            // SAFETY:
            // - `layout` and `drop` describe one `Send + Sync` type (forwarded from the caller).
            data: unsafe { config.column(layout, drop) },
            added: config.column_of::<u32>(),
            changed: config.column_of::<u32>(),
            cap: 0,
        }
    }

    /// An empty set for values of type `T`.
    pub fn of<T: Send + Sync>() -> Self {
        // SAFETY:
        // - the layout and the drop fn are both `T`'s, and `T` is `Send + Sync`.
        unsafe { Self::new(Layout::new::<T>(), drop_fn_of::<T>()) }
    }

    /// The number of entities in the set.
    #[inline]
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// The dense position of `entity`, if it is in the set.
    #[inline]
    pub fn dense_index(&self, entity: Entity) -> Option<usize> {
        let dense = self.sparse.get(entity.index())? as usize;
        (self.entities.get(dense) == Some(&entity)).then_some(dense)
    }

    /// Whether `entity` is in the set.
    #[inline]
    pub fn contains(&self, entity: Entity) -> bool {
        self.dense_index(entity).is_some()
    }

    /// A pointer to `entity`'s value.
    #[inline]
    pub fn get(&self, entity: Entity) -> Option<NonNull<u8>> {
        self.data.get(self.dense_index(entity)?)
    }

    /// The entities in dense order.
    #[inline]
    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }

    /// The values in dense order.
    #[inline]
    pub fn column(&self) -> &Column {
        &self.data
    }

    /// The tick each value was added at, in dense order.
    #[inline]
    pub fn added_ticks(&self) -> &[u32] {
        // SAFETY: the column was built with `Column::of::<u32>()`.
        unsafe { self.added.as_slice() }
    }

    /// The tick each value was last changed at, in dense order.
    #[inline]
    pub fn changed_ticks(&self) -> &[u32] {
        // SAFETY: the column was built with `Column::of::<u32>()`.
        unsafe { self.changed.as_slice() }
    }

    /// A pointer to the first changed tick (`u32`s, `len` of them): how a query holding
    /// exclusive access to this component marks a write while the world is shared. It carries
    /// the column's own provenance, so writes through it are allowed while no reference to the
    /// ticks is live.
    #[inline]
    pub fn changed_ticks_ptr(&self) -> NonNull<u32> {
        self.changed.as_ptr().cast()
    }

    /// The changed ticks, mutably.
    #[inline]
    pub fn changed_ticks_mut(&mut self) -> &mut [u32] {
        // SAFETY: the column was built with `Column::of::<u32>()`.
        unsafe { self.changed.as_mut_slice() }
    }

    /// The added and changed ticks, mutably.
    pub fn ticks_mut(&mut self) -> (&mut [u32], &mut [u32]) {
        // SAFETY: both columns were built with `Column::of::<u32>()`.
        unsafe { (self.added.as_mut_slice(), self.changed.as_mut_slice()) }
    }

    /// Sparse pages allocated so far (each [`PAGE_LEN`] entries).
    pub fn sparse_pages(&self) -> usize {
        self.sparse.page_count()
    }

    /// `(reserved, committed, used)` bytes of the set. Reserved and committed cover all of it:
    /// the value and tick columns, the entity list and the sparse index (its page table and
    /// pages; heap blocks count in full). Used is what the live values and their ticks hold;
    /// the entity list and the index count as reserved and committed only.
    pub fn memory(&self) -> (usize, usize, usize) {
        let mut total = (0, 0, 0);
        for column in [&self.data, &self.added, &self.changed] {
            let (r, c, u) = column.memory();
            total = (total.0 + r, total.1 + c, total.2 + u);
        }
        let list = self.entities.capacity() * size_of::<Entity>();
        let (table, pages) = self.sparse.memory();
        let bookkeeping = list + table + pages;
        (total.0 + bookkeeping, total.1 + bookkeeping, total.2)
    }

    /// The columns (values and their two tick columns), for what their reservations fell back
    /// to ([`Column::fallback`]).
    pub fn columns(&self) -> [&Column; 3] {
        [&self.data, &self.added, &self.changed]
    }

    /// Makes room for `additional` more entities; on error nothing changes (some columns may
    /// have committed more memory, which is harmless).
    #[inline]
    pub fn try_reserve(&mut self, additional: usize) -> Result<(), StorageError> {
        if additional <= self.cap - self.len() {
            return Ok(());
        }
        self.grow(additional)
    }

    /// Makes the sparse page of `entity`'s index, so that inserting `entity` after a successful
    /// [`Self::try_reserve`] cannot fail; on error nothing changes. One look-up when the page
    /// exists.
    ///
    /// # Errors
    /// [`StorageError::Alloc`] when the heap refuses the page.
    #[inline]
    pub fn try_reserve_entity(&mut self, entity: Entity) -> Result<(), StorageError> {
        self.sparse.try_entry(entity.index()).map(|_| ())
    }

    #[cold]
    fn grow(&mut self, additional: usize) -> Result<(), StorageError> {
        // Recomputed on every exit: a column that grew before another failed keeps its room.
        let result = self.grow_columns(additional);
        self.cap = self
            .entities
            .capacity()
            .min(self.data.capacity())
            .min(self.added.capacity())
            .min(self.changed.capacity());
        result
    }

    fn grow_columns(&mut self, additional: usize) -> Result<(), StorageError> {
        self.entities.try_reserve(additional).map_err(|e| StorageError::alloc(additional, e))?;
        self.data.try_reserve(additional)?;
        self.added.try_reserve(additional)?;
        self.changed.try_reserve(additional)
    }

    /// Moves the value at `src` in as `entity`'s value at change tick `tick`, dropping a value
    /// it replaces (also one held by a stale entity with the same index). Replacing the same
    /// entity's value marks it changed; a new value (or a stale entity's slot) is also marked
    /// added. On error nothing changes and the value still belongs to the caller.
    ///
    /// # Safety
    /// - `src` points to a valid value of the set's type that does not live in this set; on
    ///   `Ok` the caller treats it as moved.
    pub unsafe fn insert(
        &mut self,
        entity: Entity,
        src: *const u8,
        tick: u32,
    ) -> Result<(), StorageError> {
        if let Some(dense) = self.sparse.get(entity.index()) {
            let dense = dense as usize;
            // The index is present (maybe with an older generation): replace in place.
            if self.entities[dense] != entity {
                // SAFETY: the column holds `u32`s; `dense < len` by the set's invariant.
                unsafe { self.added.as_mut_slice::<u32>()[dense] = tick };
                self.entities[dense] = entity;
            }
            self.changed_ticks_mut()[dense] = tick;
            // SAFETY:
            // - `dense < len` by the set's invariant; `src` is a valid value (caller).
            unsafe { self.data.replace_unchecked(dense, src) };
            return Ok(());
        }
        let dense = u32::try_from(self.entities.len()).ok().filter(|&d| d != EMPTY).ok_or(
            StorageError::CapacityExceeded {
                capacity: EMPTY as usize,
                requested: self.entities.len() + 1,
            },
        )?;
        self.try_reserve(1)?;
        // The index's page too, so that nothing below can fail.
        let slot = self.sparse.try_entry(entity.index())?;
        // SAFETY:
        // - room for one item was reserved in every column above.
        // - `src` is a valid value of the set's type (caller); the tick columns hold `u32`s.
        unsafe {
            self.data.push_unchecked(src);
            push_tick(&mut self.added, tick);
            push_tick(&mut self.changed, tick);
        }
        self.entities.push(entity);
        *slot = dense;
        Ok(())
    }

    /// Removes `entity`, dropping its value; `false` if it was not in the set.
    pub fn remove_and_drop(&mut self, entity: Entity) -> bool {
        let Some(dense) = self.unlink(entity) else { return false };
        // SAFETY: `dense < data.len()`, as `unlink` checked it against `entities`.
        unsafe { self.data.swap_remove_and_drop_unchecked(dense) };
        true
    }

    /// Removes `entity`, moving its value to `dst`; `false` (and nothing written) if it was not
    /// in the set.
    ///
    /// # Safety
    /// - `dst` is valid for writes of one item and does not overlap the set; the caller owns
    ///   what is written there.
    pub unsafe fn remove_into(&mut self, entity: Entity, dst: *mut u8) -> bool {
        let Some(dense) = self.unlink(entity) else { return false };
        // SAFETY:
        // - `dense < data.len()`, as `unlink` checked it against `entities`.
        // - `dst` is writable and disjoint (caller).
        unsafe { self.data.swap_remove_unchecked(dense, dst) };
        true
    }

    /// Swap-removes `entity` from the entity list, the ticks and the sparse array (not the data).
    #[inline]
    fn unlink(&mut self, entity: Entity) -> Option<usize> {
        let dense = self.dense_index(entity)?;
        self.entities.swap_remove(dense);
        // SAFETY: the tick columns hold `u32`s; `dense < len` in them too (the set's invariant).
        unsafe {
            self.added.swap_remove_copy::<u32>(dense);
            self.changed.swap_remove_copy::<u32>(dense);
        }
        // Both the entity's index and the moved one's have pages: each was found or set.
        if let Some(&moved) = self.entities.get(dense) {
            self.sparse.set_on_page(moved.index(), dense as u32);
        }
        self.sparse.set_on_page(entity.index(), EMPTY);
        Some(dense)
    }

    /// Removes `entity` without dropping its value, which the caller took; `false` if it was
    /// not in the set.
    ///
    /// # Safety
    /// - The value of `entity` was moved out (read) or dropped by the caller.
    pub unsafe fn remove_forget(&mut self, entity: Entity) -> bool {
        let Some(dense) = self.unlink(entity) else { return false };
        // SAFETY: `dense < data.len()`; the value was taken by the caller.
        unsafe { self.data.swap_remove_forget_unchecked(dense) };
        true
    }

    /// Removes every entity, dropping every value once; keeps the sparse pages.
    pub fn clear(&mut self) {
        for entity in self.entities.drain(..) {
            self.sparse.set_on_page(entity.index(), EMPTY);
        }
        self.added.clear();
        self.changed.clear();
        self.data.clear();
    }
}

/// Appends `tick` to a tick column: a typed store, where [`Column::push_unchecked`] would
/// copy through the column's item size.
///
/// # Safety
/// - `column` holds `u32`s, and `len < capacity`.
#[inline]
unsafe fn push_tick(column: &mut Column, tick: u32) {
    let len = column.len();
    // SAFETY: `len < capacity` (caller): the slot lies inside the buffer, holds no live value
    // and is aligned for `u32`, the column's type; then `[0, len + 1)` is initialised.
    unsafe {
        column.get_unchecked(len).cast::<u32>().write(tick);
        column.set_len(len + 1);
    }
}

/// A typed sparse set of `T`s keyed by [`Entity`].
///
/// A thin typed wrapper over [`ComponentSparseSet`], whose docs describe the design.
pub struct SparseSet<T> {
    inner: ComponentSparseSet,
    _marker: PhantomData<T>,
}

// SAFETY: the set owns its `T`s.
unsafe impl<T: Send> Send for SparseSet<T> {}
// SAFETY: `&SparseSet<T>` hands out only `&T`.
unsafe impl<T: Sync> Sync for SparseSet<T> {}

impl<T> SparseSet<T> {
    /// An empty set.
    pub fn new() -> Self
    where
        T: Send + Sync,
    {
        Self { inner: ComponentSparseSet::of::<T>(), _marker: PhantomData }
    }

    /// The number of entities in the set.
    #[inline]
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Whether `entity` is in the set.
    #[inline]
    pub fn contains(&self, entity: Entity) -> bool {
        self.inner.contains(entity)
    }

    /// Inserts `value` for `entity`, returning the value it replaces (`None` also when it
    /// replaces a stale entity's value, which is dropped).
    ///
    /// # Panics
    /// When the OS refuses memory or the set is full; [`Self::try_insert`] returns the error.
    #[track_caller]
    pub fn insert(&mut self, entity: Entity, value: T) -> Option<T> {
        match self.try_insert(entity, value) {
            Ok(old) => old,
            Err((_, e)) => insert_failed(e),
        }
    }

    /// Inserts `value` for `entity`, or gives it back with the reason it did not fit.
    pub fn try_insert(&mut self, entity: Entity, value: T) -> Result<Option<T>, (T, StorageError)> {
        let old = self.remove(entity);
        let value = MaybeUninit::new(value);
        // SAFETY:
        // - `value` is a valid `T`, the set's type; on `Ok` it was moved in and is not used again
        //   (`MaybeUninit` does not drop it).
        match unsafe { self.inner.insert(entity, value.as_ptr().cast(), 0) } {
            Ok(()) => Ok(old),
            // SAFETY: on error the value was not moved in and is still ours.
            Err(e) => Err((unsafe { value.assume_init() }, e)),
        }
    }

    /// `entity`'s value.
    #[inline]
    pub fn get(&self, entity: Entity) -> Option<&T> {
        // SAFETY: the set holds `T`s; the pointer is to a live value borrowed through `&self`.
        self.inner.get(entity).map(|p| unsafe { p.cast::<T>().as_ref() })
    }

    /// `entity`'s value, mutably.
    #[inline]
    pub fn get_mut(&mut self, entity: Entity) -> Option<&mut T> {
        // SAFETY: as in `get`, with `&mut self` making the borrow unique.
        self.inner.get(entity).map(|p| unsafe { p.cast::<T>().as_mut() })
    }

    /// Removes `entity`'s value and returns it.
    pub fn remove(&mut self, entity: Entity) -> Option<T> {
        let mut out = MaybeUninit::<T>::uninit();
        // SAFETY:
        // - `out` is writable for one `T` and is a local, disjoint from the set.
        // - when `remove_into` returns true it wrote a live `T` there, which we now own.
        unsafe {
            self.inner.remove_into(entity, out.as_mut_ptr().cast()).then(|| out.assume_init())
        }
    }

    /// The entities, in dense order.
    #[inline]
    pub fn entities(&self) -> &[Entity] {
        self.inner.entities()
    }

    /// The values, in dense order (parallel to [`Self::entities`]).
    #[inline]
    pub fn values(&self) -> &[T] {
        // SAFETY: the column holds `T`s.
        unsafe { self.inner.column().as_slice() }
    }

    /// The values, mutably, in dense order.
    #[inline]
    pub fn values_mut(&mut self) -> &mut [T] {
        // SAFETY: the column holds `T`s; `&mut self` makes the borrow unique.
        unsafe { self.inner.data.as_mut_slice() }
    }

    /// `(entity, &value)` pairs in dense order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (Entity, &T)> + '_ {
        self.entities().iter().copied().zip(self.values())
    }

    /// Removes every entry, dropping each value once.
    pub fn clear(&mut self) {
        self.inner.clear();
    }

    /// The type-erased set underneath.
    pub fn as_erased(&self) -> &ComponentSparseSet {
        &self.inner
    }
}

impl<T: Send + Sync> Default for SparseSet<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The panic of [`SparseSet::insert`]: out of line, so the insert itself stays small.
#[cold]
#[inline(never)]
#[track_caller]
fn insert_failed(e: StorageError) -> ! {
    panic!("SparseSet::insert: {e}")
}

#[cfg(test)]
mod tests;
