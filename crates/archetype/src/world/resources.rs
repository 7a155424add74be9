//! Resources: one value per type, inserted, borrowed, removed, or taken out for a scope.

use std::any::TypeId;
use std::collections::hash_map::Entry;
use std::ptr::NonNull;

use super::World;
use crate::resource::{FromWorld, Resource, ResourceTicks};

impl World {
    /// Inserts a resource, returning the one it replaces. A new resource is added and changed
    /// at the current [`change_tick`](World::change_tick); a replaced one keeps its added tick
    /// and is changed now.
    pub fn insert_resource<R: Send + Sync + 'static>(&mut self, value: R) -> Option<R> {
        let tick = self.change_tick();
        match self.resources.entry(TypeId::of::<R>()) {
            Entry::Occupied(mut slot) => {
                let resource = slot.get_mut();
                resource.ticks_mut().changed = tick;
                // SAFETY: keyed by `R`'s `TypeId`, so the cell holds an `R`.
                Some(unsafe { resource.replace(value) })
            }
            Entry::Vacant(slot) => {
                slot.insert(Resource::new(value, tick));
                None
            }
        }
    }

    /// Inserts an `R` made by [`FromWorld`] (`Default` for most types) unless the world has
    /// one already; an existing one is kept as it is (not marked changed).
    pub fn init_resource<R: FromWorld + Send + Sync + 'static>(&mut self) {
        if !self.resources.contains_key(&TypeId::of::<R>()) {
            let value = R::from_world(self);
            // `from_world` may have inserted an `R` itself: the value made last wins, as an
            // `insert_resource` after it would.
            self.insert_resource(value);
        }
    }

    /// The resource of type `R`.
    pub fn resource<R: Send + Sync + 'static>(&self) -> Option<&R> {
        // SAFETY: keyed by `R`'s `TypeId`, so the pointer is to a live `R`, borrowed via `&self`.
        self.resources.get(&TypeId::of::<R>()).map(|r| unsafe { r.value_ptr::<R>().as_ref() })
    }

    /// The resource of type `R`, mutably; marks it changed at the current
    /// [`change_tick`](World::change_tick), as [`World::get_mut`] does a component.
    pub fn resource_mut<R: Send + Sync + 'static>(&mut self) -> Option<&mut R> {
        let tick = self.change_tick();
        let resource = self.resources.get_mut(&TypeId::of::<R>())?;
        resource.ticks_mut().changed = tick;
        // SAFETY: as in `resource`; `&mut self` makes the borrow unique.
        Some(unsafe { resource.value_ptr::<R>().as_mut() })
    }

    /// A pointer to the resource of type `R`, for a scheduler that hands `&mut R` to one system
    /// while others share the world. It carries the resource's own provenance (the box's raw
    /// pointer, never derived from a reference), so writing through it is allowed while no
    /// other reference to the resource is live.
    pub fn resource_ptr<R: Send + Sync + 'static>(&self) -> Option<NonNull<R>> {
        // SAFETY: keyed by `R`'s `TypeId`, so the cell holds an `R`.
        self.resources.get(&TypeId::of::<R>()).map(|r| unsafe { r.value_ptr::<R>() })
    }

    /// The ticks resource `R` was added and last changed at.
    pub fn resource_ticks<R: Send + Sync + 'static>(&self) -> Option<ResourceTicks> {
        self.resources.get(&TypeId::of::<R>()).map(Resource::ticks)
    }

    /// A pointer to resource `R`'s ticks, with the same provenance as
    /// [`World::resource_ptr`]'s: how a scheduler lets the system it hands `&mut R` to stamp
    /// the changed tick through a shared world.
    pub fn resource_ticks_ptr<R: Send + Sync + 'static>(&self) -> Option<NonNull<ResourceTicks>> {
        self.resources.get(&TypeId::of::<R>()).map(Resource::ticks_ptr)
    }

    /// Removes and returns the resource of type `R`.
    pub fn remove_resource<R: Send + Sync + 'static>(&mut self) -> Option<R> {
        let old = self.resources.remove(&TypeId::of::<R>())?;
        // SAFETY: keyed by `R`'s `TypeId`, so the cell holds an `R`.
        Some(unsafe { old.into_inner::<R>() })
    }

    /// Runs `f` with the world and resource `R` both borrowed mutably, then puts `R` back:
    /// what an exclusive system uses to, say, spawn from a level description kept as a
    /// resource. `None` (and `f` not called) if there is no `R`.
    ///
    /// While `f` runs, `R` is out of the world (`resource::<R>()` is `None`). Afterwards it is
    /// back with its added tick, changed at the world's [`change_tick`](World::change_tick)
    /// then (as [`World::resource_mut`] marks it). An `R` that `f` inserted meanwhile is
    /// replaced by it and dropped, as [`World::insert_resource`] replaces. If `f` panics, `R`
    /// is put back the same way before the panic continues, so it is never lost.
    pub fn resource_scope<R: Send + Sync + 'static, U>(
        &mut self,
        f: impl FnOnce(&mut World, &mut R) -> U,
    ) -> Option<U> {
        let mut resource = self.resources.remove(&TypeId::of::<R>())?;
        // SAFETY: keyed by `R`'s `TypeId`, so the cell holds an `R`; the cell is owned here, out
        // of the world, until it goes back below, so this is the only reference to the value,
        // and the last use of it is inside `f`.
        let value = unsafe { resource.value_ptr::<R>().as_mut() };
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self, value)));
        let now = self.change_tick();
        let ticks = resource.ticks_mut();
        ticks.changed = now;
        // `f` may have run the world's tick far on, past what `check_change_ticks` kept up.
        ticks.clamp(now);
        // Whatever `f` inserted is dropped only once `R` is back (its `Drop` may panic).
        let inserted = self.resources.insert(TypeId::of::<R>(), resource);
        drop(inserted);
        Some(out.unwrap_or_else(|payload| std::panic::resume_unwind(payload)))
    }

    /// Whether a resource of type `R` exists.
    pub fn contains_resource<R: Send + Sync + 'static>(&self) -> bool {
        self.resources.contains_key(&TypeId::of::<R>())
    }
}
