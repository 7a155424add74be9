//! Fallible heap growth for the world's bookkeeping: each helper asks the allocator with
//! `try_reserve` and turns a refusal into [`StorageError::Alloc`], where `Vec::push`,
//! `collect` or `SmallVec` spilling would abort the process. Operations that return a
//! `Result` call these before they change anything, so a refused block leaves the world as
//! it was.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

use folio_storage::StorageError;
use smallvec::{Array, SmallVec};

/// Makes room for `additional` more items in `v` (a compare when it has the room).
#[inline]
pub(crate) fn reserve<T>(v: &mut Vec<T>, additional: usize) -> Result<(), StorageError> {
    if v.capacity() - v.len() < additional {
        return grow(v, additional);
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn grow<T>(v: &mut Vec<T>, additional: usize) -> Result<(), StorageError> {
    v.try_reserve(additional).map_err(|e| StorageError::alloc(additional, e))
}

/// Makes room for `additional` more entries in `map`.
pub(crate) fn reserve_map<K: Eq + Hash, V, S: BuildHasher>(
    map: &mut HashMap<K, V, S>,
    additional: usize,
) -> Result<(), StorageError> {
    map.try_reserve(additional).map_err(|e| StorageError::alloc(additional, e))
}

/// An empty `Vec` with room for `n` items.
pub(crate) fn vec_with_capacity<T>(n: usize) -> Result<Vec<T>, StorageError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|e| StorageError::alloc(n, e))?;
    Ok(v)
}

/// The items of `items` as a boxed slice, allocated fallibly (no block for an empty one).
pub(crate) fn box_slice<T>(
    items: impl ExactSizeIterator<Item = T>,
) -> Result<Box<[T]>, StorageError> {
    let mut v = vec_with_capacity(items.len())?;
    v.extend(items);
    // `len == capacity`: no reallocation.
    Ok(v.into_boxed_slice())
}

/// The items of `items` (at most `max` of them) as a `SmallVec`: inline when they fit, else
/// in a heap block allocated fallibly (a `SmallVec` that spills aborts when refused).
pub(crate) fn small_vec<A: Array>(
    max: usize,
    items: impl Iterator<Item = A::Item>,
) -> Result<SmallVec<A>, StorageError> {
    if max <= A::size() {
        return Ok(items.collect());
    }
    let mut v = vec_with_capacity(max)?;
    v.extend(items.take(max));
    Ok(SmallVec::from_vec(v))
}

/// Collects `items` into a `Vec`, growing it fallibly: the room its size hint promises first,
/// then more as needed. On a refusal the items taken so far and the rest of the iterator are
/// dropped. An exact size hint (a slice's, a range's, their `map`s') is trusted: the items
/// are moved into the block made for them in one `extend`, with no check per item (an
/// iterator whose exact hint lies grows the block as `Vec::extend` does).
pub(crate) fn collect<T>(items: impl Iterator<Item = T>) -> Result<Vec<T>, StorageError> {
    let (lower, upper) = items.size_hint();
    let mut v = vec_with_capacity(lower)?;
    if upper == Some(lower) {
        v.extend(items);
        return Ok(v);
    }
    for item in items {
        reserve(&mut v, 1)?;
        v.push(item);
    }
    Ok(v)
}
