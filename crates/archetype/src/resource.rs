//! Resources: one value per type, boxed, with the ticks it was added and last changed at.
//!
//! A resource lives in a heap cell of its own (`ResourceCell<R>`: its [`ResourceTicks`], then
//! the value) kept as a raw pointer, so that a scheduler can hand `&mut R` and the right to
//! stamp the changed tick to one system through a shared world ([`World::resource_ptr`],
//! [`World::resource_ticks_ptr`]). The ticks come first in a `repr(C)` cell, at offset 0 for
//! every `R`, so the type-erased world reaches them (to clamp them) without knowing `R`.
//!
//! [`World::resource_ptr`]: crate::World::resource_ptr
//! [`World::resource_ticks_ptr`]: crate::World::resource_ticks_ptr

use std::ptr::NonNull;

use crate::tick::{clamp_tick, is_newer};

/// The ticks a resource was added and last changed at (see [`World::change_tick`]).
///
/// [`World::change_tick`]: crate::World::change_tick
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceTicks {
    /// The tick the resource was inserted at (replacing a value keeps it).
    pub added: u32,
    /// The tick it was last changed at: inserted, replaced, or borrowed mutably.
    pub changed: u32,
}

impl ResourceTicks {
    /// Whether the resource was added after `last_run`, as seen from `this_run`.
    #[inline]
    pub fn is_added(&self, last_run: u32, this_run: u32) -> bool {
        is_newer(self.added, last_run, this_run)
    }

    /// Whether it was changed (or added) after `last_run`, as seen from `this_run`.
    #[inline]
    pub fn is_changed(&self, last_run: u32, this_run: u32) -> bool {
        is_newer(self.changed, last_run, this_run)
    }

    /// Clamps both ticks to at most [`MAX_CHANGE_AGE`](crate::MAX_CHANGE_AGE) before `now`.
    pub(crate) fn clamp(&mut self, now: u32) {
        clamp_tick(&mut self.added, now);
        clamp_tick(&mut self.changed, now);
    }
}

/// The heap cell of one resource: the ticks at offset 0, then the value.
#[repr(C)]
struct ResourceCell<R> {
    ticks: ResourceTicks,
    value: R,
}

/// A resource: a boxed [`ResourceCell`] of some `Send + Sync` type, kept as a raw pointer.
pub(crate) struct Resource {
    /// From `Box::<ResourceCell<R>>::leak`; owned.
    cell: NonNull<u8>,
    /// Drops and frees the box behind `cell`.
    drop: unsafe fn(NonNull<u8>),
    /// The value's type name (what a save lists when it skips the resource).
    type_name: &'static str,
}

// SAFETY: the value is `Send + Sync` (`Resource::new`'s bound) and owned; the ticks are plain
// integers.
unsafe impl Send for Resource {}
// SAFETY: as above; `&Resource` hands out only what `&World` allows.
unsafe impl Sync for Resource {}

impl Resource {
    /// `value` in a new cell, added and changed at `tick`.
    pub(crate) fn new<R: Send + Sync + 'static>(value: R, tick: u32) -> Self {
        /// # Safety
        /// - `cell` came from leaking a `Box<ResourceCell<R>>` and is dropped once.
        unsafe fn drop_box<R>(cell: NonNull<u8>) {
            // SAFETY: forwarded from the caller.
            drop(unsafe { Box::from_raw(cell.cast::<ResourceCell<R>>().as_ptr()) });
        }
        let ticks = ResourceTicks { added: tick, changed: tick };
        let cell = NonNull::from(Box::leak(Box::new(ResourceCell { ticks, value }))).cast();
        Self { cell, drop: drop_box::<R>, type_name: std::any::type_name::<R>() }
    }

    /// The value's type name.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// A pointer to the value, with the cell's provenance.
    ///
    /// # Safety
    /// - The resource holds an `R`.
    #[inline]
    pub(crate) unsafe fn value_ptr<R>(&self) -> NonNull<R> {
        let cell = self.cell.cast::<ResourceCell<R>>().as_ptr();
        // SAFETY: `cell` points at a live `ResourceCell<R>` (caller); taking a field's address
        // makes no reference.
        unsafe { NonNull::new_unchecked(&raw mut (*cell).value) }
    }

    /// A pointer to the ticks, with the cell's provenance (offset 0 whatever `R` is).
    #[inline]
    pub(crate) fn ticks_ptr(&self) -> NonNull<ResourceTicks> {
        self.cell.cast()
    }

    /// The ticks.
    #[inline]
    pub(crate) fn ticks(&self) -> ResourceTicks {
        // SAFETY: the cell is live; a writer of the ticks holds the resource's write access,
        // which excludes this `&self` borrow's holder (the world's callers' contract).
        unsafe { self.ticks_ptr().read() }
    }

    /// The ticks, mutably.
    #[inline]
    pub(crate) fn ticks_mut(&mut self) -> &mut ResourceTicks {
        // SAFETY: the cell is live and `&mut self` makes the borrow unique.
        unsafe { self.ticks_ptr().as_mut() }
    }

    /// Moves the value out and frees the cell.
    ///
    /// # Safety
    /// - The resource holds an `R`.
    pub(crate) unsafe fn into_inner<R>(self) -> R {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the cell holds an `R` (caller) and is freed once, here (no `Drop` runs).
        unsafe { Box::from_raw(this.cell.cast::<ResourceCell<R>>().as_ptr()) }.value
    }

    /// Swaps in `value` as the resource's value, returning the old one.
    ///
    /// # Safety
    /// - The resource holds an `R`.
    pub(crate) unsafe fn replace<R>(&mut self, value: R) -> R {
        // SAFETY: a live `R` (caller); `&mut self` makes the borrow unique.
        std::mem::replace(unsafe { self.value_ptr::<R>().as_mut() }, value)
    }
}

impl Drop for Resource {
    fn drop(&mut self) {
        // SAFETY: `cell` is the box made in `new`, dropped only here or in `into_inner`.
        unsafe { (self.drop)(self.cell) }
    }
}

/// How a resource is made by [`World::init_resource`](crate::World::init_resource): from the
/// world itself (a resource that needs another one, or the entities there), or, for every
/// `Default` type, by `Default`.
pub trait FromWorld {
    /// The value, made from `world`.
    fn from_world(world: &mut crate::World) -> Self;
}

impl<T: Default> FromWorld for T {
    fn from_world(_: &mut crate::World) -> Self {
        T::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_CHANGE_AGE;

    #[repr(align(64))]
    struct Wide(u8);

    #[test]
    fn ticks_sit_at_offset_zero_whatever_the_value() {
        let r = Resource::new(Wide(7), 3);
        assert_eq!(r.ticks(), ResourceTicks { added: 3, changed: 3 });
        // SAFETY: the resource holds a `Wide`.
        let v = unsafe { r.value_ptr::<Wide>() };
        assert_eq!(v.as_ptr() as usize % 64, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { v.as_ref() }.0, 7);
        let zst = Resource::new((), 9);
        assert_eq!(zst.ticks().changed, 9);
    }

    #[test]
    fn clamp_keeps_ticks_within_the_age() {
        let mut t = ResourceTicks { added: 0, changed: 10 };
        let now = MAX_CHANGE_AGE + 5;
        t.clamp(now);
        assert_eq!(t.added, now - MAX_CHANGE_AGE);
        assert_eq!(t.changed, 10);
    }
}
