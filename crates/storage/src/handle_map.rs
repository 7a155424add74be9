//! [`HandleMap`]: values behind generational [`Handle`]s, stored densely (seed 001, `handle_map`).
//!
//! Its design (three virtual arrays, FIFO slot reuse, retiring generations) is on
//! [`HandleMap`]'s own docs. This module has no `unsafe` code; the virtual arrays keep their own
//! safety invariants.

use std::cmp::Ordering;
use std::fmt;
use std::num::NonZeroU16;
use std::ops::{Index, IndexMut};
use std::sync::Arc;

use crate::error::StorageError;
use crate::virtual_vec::{PushError, VirtualVec};
use crate::vm::PageSource;

/// Ends the freelist; never a slot index.
const NIL: u32 = u32::MAX;

/// The most slots a map can have: every `u32` but [`NIL`].
const MAX_SLOTS: usize = NIL as usize;

/// A key into one [`HandleMap`]: slot index, generation and the map's type tag, in 64 bits.
///
/// A handle stays valid until its value is removed, the map is cleared, or the map is reset;
/// after that every lookup with it returns `None` (except after a reset, see
/// [`HandleMap::reset`]). Handles order like their [`to_bits`](Self::to_bits): by tag, then
/// generation, then index.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle {
    // The field order is the derived sort order; it matches the bit layout of `to_bits`.
    /// The [`HandleMap`]'s type tag; a map rejects handles with another tag.
    tag: u16,
    /// The slot's generation when the value was inserted.
    generation: NonZeroU16,
    /// The slot index (into the sparse array, not the dense one).
    index: u32,
}

impl Handle {
    /// The slot index: stable for the value's lifetime, unlike its place in the dense array.
    #[inline]
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The slot's generation when this handle was made.
    #[inline]
    pub const fn generation(self) -> NonZeroU16 {
        self.generation
    }

    /// The type tag of the map that made this handle.
    #[inline]
    pub const fn type_tag(self) -> u16 {
        self.tag
    }

    /// The handle as 64 bits: the tag in bits 48..64, the generation in 32..48, the index in 0..32.
    #[inline]
    pub const fn to_bits(self) -> u64 {
        (self.tag as u64) << 48 | (self.generation.get() as u64) << 32 | self.index as u64
    }

    /// The handle [`to_bits`](Self::to_bits) made, or `None` if the generation bits are zero.
    #[inline]
    pub const fn from_bits(bits: u64) -> Option<Self> {
        match NonZeroU16::new((bits >> 32) as u16) {
            Some(generation) => {
                Some(Self { tag: (bits >> 48) as u16, generation, index: bits as u32 })
            }
            None => None,
        }
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("index", &self.index)
            .field("generation", &self.generation)
            .field("tag", &self.tag)
            .finish()
    }
}

/// One entry of the sparse array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Holds the value at `items[dense]`, inserted with `generation`.
    Occupied { dense: u32, generation: NonZeroU16 },
    /// On the freelist: `next` is the next free slot or `NIL`; the next occupant gets `generation`.
    Free { next: u32, generation: NonZeroU16 },
    /// Its generations are used up; never handed out again (until a reset).
    Retired,
}

/// Values behind generational [`Handle`]s, packed densely for iteration.
///
/// Insert, lookup and remove are O(1). Iteration walks the dense array, whose order changes as
/// values are removed (swap-remove) and can be restored with [`defragment`](Self::defragment).
///
/// You insert a value and get back a [`Handle`]; the map picks the key. A handle is 64 bits:
/// a 32-bit slot index, a 16-bit generation and a 16-bit type tag.
///
/// ```
/// use folio_storage::HandleMap;
///
/// let mut lights = HandleMap::with_type_tag(7);
/// let red = lights.insert("red");
/// let green = lights.insert("green");
/// assert_eq!(lights.get(red), Some(&"red"));
/// assert_eq!(lights.remove(red), Some("red"));
/// assert_eq!(lights.get(red), None); // stale: the generation moved on
/// assert_eq!(lights[green], "green");
/// assert_eq!(lights.values(), ["green"]);
/// ```
///
/// # Design
/// Three virtual arrays:
/// - `items`: the values, packed with no holes, so iterating is a walk over one slice.
/// - `dense_to_sparse`: one entry per value, the slot that owns it. `remove` needs it to find the
///   slot of the value that swap-remove moves into the hole, in O(1).
/// - `slots`: one per index ever handed out. A slot is one of:
///   - `Occupied { dense, generation }`: its value lives at `items[dense]`;
///   - `Free { next, generation }`: a link in the intrusive freelist (FIFO: freed slots go to the
///     back, `insert` takes from the front, so a slot's generations are used up as slowly as
///     possible); `generation` is what the next occupant gets;
///   - `Retired`: its generations are used up and it is never handed out again.
///
/// A lookup checks the handle's tag against the map's, then indexes `slots` and compares the
/// generation, then indexes `items`: two array reads, no hashing. Insert takes the front free slot
/// (or appends one) and pushes the value; remove swap-removes the value, points the moved value's
/// slot at its new place, bumps the freed slot's generation and appends it to the freelist.
///
/// # Generations
/// A generation is a [`NonZeroU16`]: the zero niche makes `Option<Handle>` 8 bytes, and 16 bits
/// leave room for the 16-bit type tag in a 64-bit handle. When a slot's generation would wrap, the
/// slot is retired instead, so an `(index, generation)` pair is never handed out twice and a stale
/// handle can never alias a new value. A retired slot costs 8 bytes of `slots` for every 65,535
/// values that passed through it; retired slots count against the map's index space.
///
/// [`HandleMap::reset`] is the exception: it forgets every slot and generation, so a handle from
/// before a reset may resolve to a value inserted after it.
pub struct HandleMap<T> {
    /// The values; `items.len() == dense_to_sparse.len()`.
    items: VirtualVec<T>,
    /// `dense_to_sparse[i]` is the slot of `items[i]`, and that slot is
    /// `Occupied { dense: i, .. }`. Every occupied slot is named here exactly once.
    dense_to_sparse: VirtualVec<u32>,
    /// One per index handed out since the last reset; `slots.len() <= MAX_SLOTS`.
    slots: VirtualVec<Slot>,
    /// The first free slot, or `NIL`. Following `next` from it visits every `Free` slot exactly
    /// once and ends at `free_tail`.
    free_head: u32,
    /// The last free slot (whose `next` is `NIL`), or `NIL` exactly when `free_head` is.
    free_tail: u32,
    /// Stamped into every handle this map makes.
    tag: u16,
}

impl<T> HandleMap<T> {
    /// An empty map with type tag 0 and the default reservations.
    pub fn new() -> Self {
        Self::with_type_tag(0)
    }

    /// An empty map whose handles carry `tag`; handles with any other tag are rejected.
    ///
    /// Give each map that holds a different kind of value its own tag, so a handle can never be
    /// used with the wrong map by mistake.
    pub fn with_type_tag(tag: u16) -> Self {
        Self::from_parts(tag, VirtualVec::new(), VirtualVec::new(), VirtualVec::new())
    }

    /// An empty map (type tag 0) that will hold at most `max_len` values and hand out at most
    /// `max_len` slot indices, retired ones included.
    pub fn with_max_capacity(max_len: usize) -> Self {
        Self::with_source(0, max_len, crate::vm::default_source())
    }

    /// An empty map with type tag `tag`, at most `max_len` values and slots, whose pages come from
    /// `source`.
    pub fn with_source(tag: u16, max_len: usize, source: Arc<dyn PageSource>) -> Self {
        Self::from_parts(
            tag,
            VirtualVec::with_source(max_len, Arc::clone(&source)),
            VirtualVec::with_source(max_len, Arc::clone(&source)),
            VirtualVec::with_source(max_len.min(MAX_SLOTS), source),
        )
    }

    fn from_parts(
        tag: u16,
        items: VirtualVec<T>,
        dense_to_sparse: VirtualVec<u32>,
        slots: VirtualVec<Slot>,
    ) -> Self {
        Self { items, dense_to_sparse, slots, free_head: NIL, free_tail: NIL, tag }
    }

    /// The type tag stamped into this map's handles.
    #[inline]
    pub fn type_tag(&self) -> u16 {
        self.tag
    }

    /// The number of values.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no values.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The number of slots handed out since the last reset: live, free and retired.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Inserts `value` and returns its handle.
    ///
    /// # Panics
    /// When the index space or a reservation is exhausted, or the OS refuses memory;
    /// [`Self::try_insert`] returns the error instead.
    #[inline]
    #[track_caller]
    pub fn insert(&mut self, value: T) -> Handle {
        match self.try_insert(value) {
            Ok(handle) => handle,
            Err(e) => panic!("HandleMap::insert (type tag {}): {}", self.tag, e.error),
        }
    }

    /// Inserts `value` and returns its handle, or gives the value back with the reason it did not
    /// fit. On error the map is unchanged.
    ///
    /// # Errors
    /// - [`StorageError::CapacityExceeded`] when all `u32` slot indices or the map's reservation
    ///   (its `max_len`) are used up; retired slots count as used.
    /// - The OS's error ([`StorageError::Reserve`], [`StorageError::Commit`]) when it refuses
    ///   address space or memory.
    pub fn try_insert(&mut self, value: T) -> Result<Handle, PushError<T>> {
        if let Err(error) = self.reserve_one() {
            return Err(PushError { value, error });
        }
        // Every value has its own slot, so `items.len() < slots.len() <= MAX_SLOTS` after this
        // insert: the dense index fits in a `u32`.
        let dense = self.items.len() as u32;
        let (index, generation) = if self.free_head == NIL {
            let index = self.slots.len() as u32;
            let generation = NonZeroU16::MIN;
            self.slots.push(Slot::Occupied { dense, generation });
            (index, generation)
        } else {
            let index = self.free_head;
            let slot = &mut self.slots[index as usize];
            let Slot::Free { next, generation } = *slot else {
                unreachable!("freelist names slot {index}, which is not free: {slot:?}")
            };
            *slot = Slot::Occupied { dense, generation };
            self.free_head = next;
            if next == NIL {
                self.free_tail = NIL;
            }
            (index, generation)
        };
        // Neither push can fail: `reserve_one` made room in both.
        self.items.push(value);
        self.dense_to_sparse.push(index);
        Ok(Handle { tag: self.tag, generation, index })
    }

    /// Makes room for one more value (and one more slot if the freelist is empty).
    fn reserve_one(&mut self) -> Result<(), StorageError> {
        if self.free_head == NIL {
            let slots = self.slots.len();
            if slots >= MAX_SLOTS {
                return Err(StorageError::CapacityExceeded {
                    capacity: MAX_SLOTS,
                    requested: slots + 1,
                });
            }
            self.slots.try_reserve(1)?;
        }
        self.items.try_reserve(1)?;
        self.dense_to_sparse.try_reserve(1)
    }

    /// The dense index of `handle`'s value, if the handle is live in this map.
    #[inline]
    fn dense_index(&self, handle: Handle) -> Option<usize> {
        if handle.tag != self.tag {
            return None;
        }
        match self.slots.get(handle.index as usize)? {
            Slot::Occupied { dense, generation } if *generation == handle.generation => {
                Some(*dense as usize)
            }
            _ => None,
        }
    }

    /// Whether `handle` names a live value of this map.
    #[inline]
    pub fn contains(&self, handle: Handle) -> bool {
        self.dense_index(handle).is_some()
    }

    /// The value behind `handle`; `None` if it was removed, or the handle is from another map.
    #[inline]
    pub fn get(&self, handle: Handle) -> Option<&T> {
        let dense = self.dense_index(handle)?;
        Some(&self.items[dense])
    }

    /// The value behind `handle`, mutably; `None` as for [`Self::get`].
    #[inline]
    pub fn get_mut(&mut self, handle: Handle) -> Option<&mut T> {
        let dense = self.dense_index(handle)?;
        Some(&mut self.items[dense])
    }

    /// The handle of the value at `dense` in [`Self::values`], if there is one.
    pub fn handle_at(&self, dense: usize) -> Option<Handle> {
        let index = *self.dense_to_sparse.get(dense)?;
        Some(occupied_handle(&self.slots, self.tag, index))
    }

    /// Removes and returns the value behind `handle`; `None` if the handle is not live here.
    ///
    /// The last value in the dense array moves into the hole; every handle stays valid except
    /// `handle`, which is stale from now on.
    pub fn remove(&mut self, handle: Handle) -> Option<T> {
        let dense = self.dense_index(handle)?;
        let value = self.items.swap_remove(dense);
        self.dense_to_sparse.swap_remove(dense);
        if let Some(&moved) = self.dense_to_sparse.get(dense) {
            set_dense(&mut self.slots, moved, dense);
        }
        self.free_slot(handle.index, handle.generation);
        Some(value)
    }

    /// Frees slot `index`, last occupied with `generation`: bumps the generation and appends the
    /// slot to the freelist, or retires it if the generation would wrap.
    fn free_slot(&mut self, index: u32, generation: NonZeroU16) {
        let Some(generation) = generation.checked_add(1) else {
            self.slots[index as usize] = Slot::Retired;
            return;
        };
        self.slots[index as usize] = Slot::Free { next: NIL, generation };
        if self.free_tail == NIL {
            self.free_head = index;
        } else {
            match &mut self.slots[self.free_tail as usize] {
                Slot::Free { next, .. } => *next = index,
                other => unreachable!("freelist tail {} is not free: {other:?}", self.free_tail),
            }
        }
        self.free_tail = index;
    }

    /// Iterates over `(handle, &value)` in dense order.
    pub fn iter(
        &self,
    ) -> impl ExactSizeIterator<Item = (Handle, &T)> + DoubleEndedIterator + Clone + '_ {
        let (slots, tag) = (&self.slots, self.tag);
        self.dense_to_sparse
            .iter()
            .zip(self.items.iter())
            .map(move |(&index, value)| (occupied_handle(slots, tag, index), value))
    }

    /// Iterates over `(handle, &mut value)` in dense order.
    pub fn iter_mut(
        &mut self,
    ) -> impl ExactSizeIterator<Item = (Handle, &mut T)> + DoubleEndedIterator + '_ {
        let (slots, tag) = (&self.slots, self.tag);
        self.dense_to_sparse
            .iter()
            .zip(self.items.iter_mut())
            .map(move |(&index, value)| (occupied_handle(slots, tag, index), value))
    }

    /// The values in dense order, as one slice.
    #[inline]
    pub fn values(&self) -> &[T] {
        self.items.as_slice()
    }

    /// The values in dense order, as one mutable slice.
    ///
    /// Change values through it freely, but do not reorder them (`swap`, `sort`, ...): handles
    /// follow positions, so a value moved this way is then found through another value's handle.
    /// Reorder with [`Self::defragment`], which keeps handles attached to their values.
    #[inline]
    pub fn values_mut(&mut self) -> &mut [T] {
        self.items.as_mut_slice()
    }

    /// Drops every value and makes every handle stale; keeps the slots and committed memory.
    ///
    /// Each live slot's generation is bumped (or the slot retired, if it would wrap) and the
    /// freelist is rebuilt in index order, so lookups with any earlier handle return `None`.
    /// O(slots). See [`Self::reset`] for the faster variant without that guarantee.
    pub fn clear(&mut self) {
        let (mut head, mut tail) = (NIL, NIL);
        for index in 0..self.slots.len() {
            let generation = match self.slots[index] {
                Slot::Occupied { generation, .. } => generation.checked_add(1),
                Slot::Free { generation, .. } => Some(generation),
                Slot::Retired => None,
            };
            let Some(generation) = generation else {
                self.slots[index] = Slot::Retired;
                continue;
            };
            let index = index as u32;
            self.slots[index as usize] = Slot::Free { next: NIL, generation };
            if tail == NIL {
                head = index;
            } else if let Slot::Free { next, .. } = &mut self.slots[tail as usize] {
                *next = index;
            }
            tail = index;
        }
        (self.free_head, self.free_tail) = (head, tail);
        self.dense_to_sparse.clear();
        // Last: if a value's `Drop` panics, the slots already agree with an empty map.
        self.items.clear();
    }

    /// Drops every value and forgets every slot and generation; keeps committed memory.
    ///
    /// O(values), with no pass over the slots. Generations restart, so **a handle from before the
    /// reset may resolve to a value inserted after it** (it aliases the new value in the same slot
    /// with the same generation). Use it only when no old handle survives; otherwise use
    /// [`Self::clear`]. Retired slots become usable again.
    pub fn reset(&mut self) {
        self.slots.clear();
        self.dense_to_sparse.clear();
        (self.free_head, self.free_tail) = (NIL, NIL);
        // Last: if a value's `Drop` panics, the slots already agree with an empty map.
        self.items.clear();
    }

    /// Sorts the dense array by `cmp` a step at a time, keeping every handle attached to its
    /// value; returns the number of swaps done.
    ///
    /// An insertion sort: stable (equal values keep their order), and cheap on arrays that are
    /// already nearly sorted. Moving a value `k` places toward the front counts as `k` swaps (it
    /// passes `k` greater values). It stops after `max_swaps` swaps (`0`: no limit), possibly
    /// with a value part way to its place; the array and the handles are consistent at every
    /// stop. Each swap removes one inversion, so repeated calls with the same `cmp` and no
    /// changes in between reach sorted order, after which a call returns 0 (having done
    /// `len - 1` comparisons).
    pub fn defragment<F>(&mut self, mut cmp: F, max_swaps: usize) -> usize
    where
        F: FnMut(&T, &T) -> Ordering,
    {
        let budget = if max_swaps == 0 { usize::MAX } else { max_swaps };
        let mut swaps = 0;
        for i in 1..self.items.len() {
            if swaps == budget {
                break;
            }
            // The value at `i` goes before every value in `j..i` that is strictly greater.
            let floor = i.saturating_sub(budget - swaps);
            let mut j = i;
            while j > floor && cmp(&self.items[j - 1], &self.items[i]) == Ordering::Greater {
                j -= 1;
            }
            if j == i {
                continue;
            }
            self.items[j..=i].rotate_right(1);
            self.dense_to_sparse[j..=i].rotate_right(1);
            for dense in j..=i {
                set_dense(&mut self.slots, self.dense_to_sparse[dense], dense);
            }
            swaps += i - j;
        }
        swaps
    }

    /// A short reason why `handle` does not resolve, for panic messages.
    fn miss_reason(&self, handle: Handle) -> String {
        if handle.tag != self.tag {
            return format!("its type tag {} is not this map's tag {}", handle.tag, self.tag);
        }
        match self.slots.get(handle.index as usize) {
            None => format!("its index is past the {} slots of this map", self.slots.len()),
            Some(Slot::Occupied { generation, .. }) => format!(
                "it is stale: the slot now holds generation {generation}, not {}",
                handle.generation
            ),
            Some(Slot::Free { .. } | Slot::Retired) => "its value was removed".to_owned(),
        }
    }
}

/// The handle of occupied slot `index`.
#[inline]
fn occupied_handle(slots: &[Slot], tag: u16, index: u32) -> Handle {
    match slots[index as usize] {
        Slot::Occupied { generation, .. } => Handle { tag, generation, index },
        other => unreachable!("dense value's slot {index} is not occupied: {other:?}"),
    }
}

/// Points occupied slot `index` at dense position `dense`.
#[inline]
fn set_dense(slots: &mut [Slot], index: u32, dense: usize) {
    match &mut slots[index as usize] {
        Slot::Occupied { dense: d, .. } => *d = dense as u32,
        other => unreachable!("dense value's slot {index} is not occupied: {other:?}"),
    }
}

impl<T> Default for HandleMap<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Index<Handle> for HandleMap<T> {
    type Output = T;

    /// # Panics
    /// When `handle` is not live in this map.
    #[inline]
    #[track_caller]
    fn index(&self, handle: Handle) -> &T {
        match self.get(handle) {
            Some(value) => value,
            None => panic!("HandleMap: no value for {handle:?}: {}", self.miss_reason(handle)),
        }
    }
}

impl<T> IndexMut<Handle> for HandleMap<T> {
    /// # Panics
    /// When `handle` is not live in this map.
    #[inline]
    #[track_caller]
    fn index_mut(&mut self, handle: Handle) -> &mut T {
        match self.dense_index(handle) {
            Some(dense) => &mut self.items[dense],
            None => panic!("HandleMap: no value for {handle:?}: {}", self.miss_reason(handle)),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for HandleMap<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests;
