//! The typed halves of a snapshot: a column's values cloned into a `Vec<T>`, staged (cloned
//! again) before a restore changes anything, and moved into the column once it is empty; a
//! resource cloned into a box and staged into a new resource cell.
//!
//! # Safety model
//! Each function here is made for one type `T` by its registration and reached through the
//! registry under `T`'s `TypeId`; the world calls it only on a column or resource that the
//! component registry (or the resource map's key) says holds a `T`.

use std::any::Any;
use std::ptr;

use folio_storage::{Column, StorageError};

use super::{ColumnData, ComponentFns};
use crate::resource::{Resource, ResourceTicks};

/// A column's values, cloned: a `Vec<T>` behind the type's registration.
pub(crate) trait ClonedValues: Send + Sync {
    /// The number of values.
    fn len(&self) -> usize;
    /// Clones the values again, for a restore to move into the world. Runs user code (`Clone`),
    /// which may panic: the world is not touched yet then.
    fn stage(&self) -> Box<dyn StagedValues>;
    /// The values, for a refresh to find its type.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Values cloned for a restore, waiting to move into their column.
pub(crate) trait StagedValues {
    /// Moves every value to the end of `column`, consuming them.
    ///
    /// # Safety
    /// - `column` holds values of this type, and has room for them all (`capacity - len`).
    unsafe fn move_into(self: Box<Self>, column: &mut Column);
}

/// A resource's value, cloned.
pub(crate) trait ClonedResource: Send + Sync {
    /// A new resource cell holding a clone of the value, with `ticks`. Runs user code (`Clone`).
    fn stage(&self, ticks: ResourceTicks) -> Resource;
}

struct Cloned<T>(Vec<T>);

impl<T: Clone + Send + Sync + 'static> ClonedValues for Cloned<T> {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn stage(&self) -> Box<dyn StagedValues> {
        Box::new(Staged(self.0.clone()))
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

struct Staged<T>(Vec<T>);

impl<T: 'static> StagedValues for Staged<T> {
    unsafe fn move_into(self: Box<Self>, column: &mut Column) {
        let mut values = self.0;
        let (len, n) = (column.len(), values.len());
        debug_assert!(column.capacity() - len >= n);
        // SAFETY:
        // - `column` holds `T`s with room for `n` more (caller): slots `[len, len + n)` lie
        //   inside its buffer, aligned for `T` (its items are `T`s).
        // - the source is the vector's own heap block, apart from the column.
        unsafe {
            let dst = column.get_unchecked(len).cast::<T>().as_ptr();
            ptr::copy_nonoverlapping(values.as_ptr(), dst, n);
        }
        // SAFETY:
        // - the values now belong to the column: the vector forgets them (length 0, nothing
        //   to drop) and frees only its block.
        unsafe { values.set_len(0) };
        // SAFETY:
        // - `len + n <= capacity`, and `[0, len + n)` holds `T`s: the old ones and the `n`
        //   just moved in.
        unsafe { column.set_len(len + n) };
    }
}

/// The snapshot fns of every `Copy` type: its bytes, untyped.
pub(crate) const COPY_FNS: ComponentFns =
    ComponentFns { copy: copy_column, refresh: refresh_bytes };

/// The snapshot fns of `Clone` type `T`.
pub(crate) fn clone_fns<T: Clone + Send + Sync + 'static>() -> ComponentFns {
    ComponentFns { copy: clone_column::<T>, refresh: refresh_cloned::<T> }
}

/// [`ComponentFns::refresh`] of a `Copy` type: the rows' bytes.
///
/// # Safety
/// - None beyond the fn pointer's contract (the bytes are copied untyped, and
///   [`Column::copy_rows_into`] checks the lengths).
unsafe fn refresh_bytes(column: &Column, out: &mut ColumnData, rows: &[u32]) -> bool {
    match out {
        ColumnData::Bytes(bytes) if bytes.len() == column.len() => {
            column.copy_rows_into(bytes, rows);
            true
        }
        _ => false,
    }
}

/// [`ComponentFns::refresh`] of `Clone` type `T`: each row's value cloned over the one kept.
///
/// # Safety
/// - `column` holds `T`s.
unsafe fn refresh_cloned<T: Clone + Send + Sync + 'static>(
    column: &Column,
    out: &mut ColumnData,
    rows: &[u32],
) -> bool {
    let ColumnData::Cloned(values) = out else { return false };
    let Some(Cloned(kept)) = values.as_any_mut().downcast_mut::<Cloned<T>>() else {
        return false;
    };
    // SAFETY: the column holds `T`s (caller).
    let values = unsafe { column.as_slice::<T>() };
    if kept.len() != values.len() {
        return false;
    }
    for &row in rows {
        kept[row as usize].clone_from(&values[row as usize]);
    }
    true
}

/// [`ComponentFns::copy`](super::ComponentFns) of a `Copy` type: the column's bytes, into
/// `out`'s buffer when it holds bytes already.
///
/// # Safety
/// - None beyond the fn pointer's contract (the bytes are copied untyped).
unsafe fn copy_column(column: &Column, out: &mut ColumnData) -> Result<(), StorageError> {
    match out {
        ColumnData::Bytes(bytes) => column.copy_bytes_into(bytes),
        ColumnData::Cloned(_) => {
            *out = ColumnData::Bytes(column.copy_bytes()?);
            Ok(())
        }
    }
}

/// [`ComponentFns::copy`](super::ComponentFns) of a `Clone` type: the values cloned into a
/// `Vec<T>`.
///
/// # Safety
/// - `column` holds `T`s.
unsafe fn clone_column<T: Clone + Send + Sync + 'static>(
    column: &Column,
    out: &mut ColumnData,
) -> Result<(), StorageError> {
    // SAFETY: the column holds `T`s (caller).
    let values = unsafe { column.as_slice::<T>() };
    let mut cloned = Vec::new();
    cloned.try_reserve_exact(values.len()).map_err(|e| StorageError::alloc(values.len(), e))?;
    cloned.extend_from_slice(values);
    *out = ColumnData::Cloned(Box::new(Cloned(cloned)));
    Ok(())
}

struct ClonedValue<R>(R);

impl<R: Clone + Send + Sync + 'static> ClonedResource for ClonedValue<R> {
    fn stage(&self, ticks: ResourceTicks) -> Resource {
        let mut resource = Resource::new(self.0.clone(), ticks.added);
        *resource.ticks_mut() = ticks;
        resource
    }
}

/// [`ResourceFns::clone`](super::ResourceFns) of `R`.
///
/// # Safety
/// - `resource` holds an `R`.
pub(crate) unsafe fn clone_resource<R: Clone + Send + Sync + 'static>(
    resource: &Resource,
) -> Box<dyn ClonedResource> {
    // SAFETY: the cell holds an `R` (caller) and is live; `&Resource` excludes a writer (the
    // world's callers hold `&World`).
    let value = unsafe { resource.value_ptr::<R>().as_ref() };
    Box::new(ClonedValue(value.clone()))
}
