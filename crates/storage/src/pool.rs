//! [`VirtualPool`]: slots with stable indices on a virtual array (seed 000).

use std::fmt;
use std::mem::ManuallyDrop;

use crate::error::StorageError;
use crate::virtual_vec::VirtualVec;

const NONE: u32 = u32::MAX;

/// A slot: a live value or a link to the next hole. `repr(C)` puts both at offset 0.
#[repr(C)]
union Slot<T> {
    value: ManuallyDrop<T>,
    next_free: u32,
}

/// A pool of values with stable indices, O(1) insert and remove, and hole-skipping iteration.
///
/// Removing a value leaves a hole; the hole itself stores the index of the next hole (an intrusive
/// freelist, so no side allocation), and `insert` fills the most recent hole first. A validity
/// bitset, one bit per slot, tells live slots from holes, so iteration skips 64 holes with one
/// word test. An index stays valid until its value is removed. A pointer does too in a pool made
/// with [`VirtualPool::with_max_capacity`] (its slots are reserved whole and never move); in one
/// made with [`VirtualPool::new`] the slots move when they outgrow their reservation (see
/// [`VirtualVec`]), so a pointer stays valid until the next insert that grows the pool.
///
/// # Safety model
/// Slot `i < slots.len()` holds a live `T` exactly when bit `i` of `bits` is set; otherwise it
/// holds the freelist link. `free_head` and every link name a hole or are `NONE`.
pub struct VirtualPool<T> {
    slots: VirtualVec<Slot<T>>,
    /// Bit `i % 64` of word `i / 64` is set when slot `i` is live.
    bits: VirtualVec<u64>,
    /// The most recently freed hole, or `NONE`.
    free_head: u32,
    len: usize,
}

impl<T> VirtualPool<T> {
    /// An empty pool.
    pub fn new() -> Self {
        Self::from_parts(VirtualVec::new())
    }

    /// An empty pool of at most `max_len` slots.
    pub fn with_max_capacity(max_len: usize) -> Self {
        Self::from_parts(VirtualVec::with_max_capacity(max_len))
    }

    fn from_parts(slots: VirtualVec<Slot<T>>) -> Self {
        let words = slots.max_capacity().min(NONE as usize).div_ceil(64);
        Self { slots, bits: VirtualVec::with_max_capacity(words), free_head: NONE, len: 0 }
    }

    /// The number of live values.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no live values.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of slots, live or holes: every live index is below it.
    #[inline]
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Inserts `value`, reusing the most recent hole, and returns its index.
    ///
    /// # Panics
    /// When the pool is full or the OS refuses memory; [`Self::try_insert`] returns the error.
    #[inline]
    #[track_caller]
    pub fn insert(&mut self, value: T) -> usize {
        match self.try_insert(value) {
            Ok(index) => index,
            Err((_, error)) => panic!("VirtualPool::insert: {error}"),
        }
    }

    /// Inserts `value` and returns its index, or gives it back with the reason it did not fit.
    #[inline]
    pub fn try_insert(&mut self, value: T) -> Result<usize, (T, StorageError)> {
        let index = self.free_head;
        if index != NONE {
            let slot = &mut self.slots[index as usize];
            // SAFETY:
            // - `free_head` names a hole, whose slot holds the `next_free` link.
            self.free_head = unsafe { slot.next_free };
            slot.value = ManuallyDrop::new(value);
            self.set_bit(index as usize);
            self.len += 1;
            return Ok(index as usize);
        }
        self.push_new(value)
    }

    #[inline]
    fn push_new(&mut self, value: T) -> Result<usize, (T, StorageError)> {
        let index = self.slots.len();
        if index >= NONE as usize {
            let error = StorageError::CapacityExceeded { capacity: index, requested: index + 1 };
            return Err((value, error));
        }
        if index.is_multiple_of(64)
            && let Err(e) = self.bits.try_push(0)
        {
            return Err((value, e.error));
        }
        if let Err(e) = self.slots.try_push(Slot { value: ManuallyDrop::new(value) }) {
            if index.is_multiple_of(64) {
                self.bits.pop();
            }
            // SAFETY: the slot was just built from a live value and never stored.
            let value = ManuallyDrop::into_inner(unsafe { e.value.value });
            return Err((value, e.error));
        }
        self.set_bit(index);
        self.len += 1;
        Ok(index)
    }

    /// Removes and returns the value at `index`, leaving a hole; `None` if there is none.
    #[inline]
    pub fn remove(&mut self, index: usize) -> Option<T> {
        if !self.contains(index) {
            return None;
        }
        self.bits[index / 64] &= !(1u64 << (index % 64));
        let slot = &mut self.slots[index];
        // SAFETY:
        // - the bit was set, so the slot held a live value; the bit is now clear, so it is read
        //   out exactly once and the slot becomes a hole.
        let value = unsafe { ManuallyDrop::take(&mut slot.value) };
        slot.next_free = self.free_head;
        self.free_head = index as u32;
        self.len -= 1;
        Some(value)
    }

    /// Whether `index` holds a live value.
    #[inline]
    pub fn contains(&self, index: usize) -> bool {
        self.bits.get(index / 64).is_some_and(|word| word & (1u64 << (index % 64)) != 0)
    }

    /// The value at `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        if !self.contains(index) {
            return None;
        }
        // SAFETY: the bit is set, so the slot holds a live value.
        Some(unsafe { &self.slots[index].value })
    }

    /// The value at `index`, mutably.
    #[inline]
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        if !self.contains(index) {
            return None;
        }
        // SAFETY: the bit is set, so the slot holds a live value.
        Some(unsafe { &mut self.slots[index].value })
    }

    /// The live values with their indices, in index order, skipping holes a word at a time.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> + '_ {
        live_indices(&self.bits).map(move |index| {
            // SAFETY: `live_indices` yields only indices whose bit is set.
            (index, unsafe { &*self.slots.as_ptr().add(index).cast::<T>() })
        })
    }

    /// The live values with their indices, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut T)> + '_ {
        let slots = self.slots.as_mut_ptr();
        live_indices(&self.bits).map(move |index| {
            // SAFETY:
            // - the bit is set, so the slot holds a live value;
            // - each index is yielded once, so the `&mut`s are disjoint, and `&mut self` is held.
            (index, unsafe { &mut *slots.add(index).cast::<T>() })
        })
    }

    /// Drops every value (each exactly once, even if one's `Drop` panics) and forgets all slots.
    pub fn clear(&mut self) {
        /// Drops live values word by word; if one panics, its `Drop` (run during unwinding)
        /// carries on from where it stopped, so every value is dropped once.
        struct DropRest<'a, T> {
            pool: &'a mut VirtualPool<T>,
            word: usize,
        }
        impl<T> DropRest<'_, T> {
            fn run(&mut self) {
                let pool = &mut *self.pool;
                while self.word < pool.bits.len() {
                    while pool.bits[self.word] != 0 {
                        let word = pool.bits[self.word];
                        let bit = word.trailing_zeros() as usize;
                        pool.bits[self.word] = word & (word - 1);
                        let slot = &mut pool.slots[self.word * 64 + bit];
                        // SAFETY:
                        // - the bit was set, so the slot is live; it is cleared first, so this
                        //   value is dropped once even if its drop panics.
                        unsafe { ManuallyDrop::drop(&mut slot.value) };
                    }
                    self.word += 1;
                }
                pool.slots.clear();
                pool.bits.clear();
                pool.free_head = NONE;
                pool.len = 0;
            }
        }
        impl<T> Drop for DropRest<'_, T> {
            fn drop(&mut self) {
                self.run();
            }
        }
        DropRest { pool: self, word: 0 }.run();
    }

    #[inline]
    fn set_bit(&mut self, index: usize) {
        self.bits[index / 64] |= 1u64 << (index % 64);
    }
}

/// The indices of the set bits, in order.
fn live_indices(bits: &[u64]) -> impl Iterator<Item = usize> + '_ {
    bits.iter().enumerate().flat_map(|(word_index, &word)| {
        let mut word = word;
        std::iter::from_fn(move || {
            if word == 0 {
                return None;
            }
            let bit = word.trailing_zeros() as usize;
            word &= word - 1;
            Some(word_index * 64 + bit)
        })
    })
}

impl<T> Drop for VirtualPool<T> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<T> Default for VirtualPool<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for VirtualPool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

// SAFETY: a pool owns its `T`s like a `Vec<T>`.
unsafe impl<T: Send> Send for VirtualPool<T> {}
// SAFETY: `&VirtualPool<T>` hands out only `&T`.
unsafe impl<T: Sync> Sync for VirtualPool<T> {}

#[cfg(test)]
mod tests;
