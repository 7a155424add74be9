//! [`World::snapshot`] and [`World::restore`]: whole-world copies for rollback, and the
//! registration of the types they may copy. What a snapshot holds is in the crate's
//! `snapshot` module.
//!
//! # Restore in three steps
//! 1. **Stage**: every cloned column and resource is cloned again, out of the snapshot, into
//!    values the restore will move in. This is the only user code before the world changes
//!    (`Clone` impls); if one panics, the world is as it was and the staged values are dropped.
//! 2. **Make room**: capacity in every table, sparse set, archetype list and the entity
//!    allocator, and graveyard columns for the current values that need dropping. A refused
//!    allocation is [`SnapshotError::Storage`] with the world as it was.
//! 3. **Commit**: the allocator's metas, then every table, sparse set, archetype and resource,
//!    with `memcpy`s and moves only: nothing allocates and no user code runs. Only then are
//!    the old values dropped, from the graveyards, each once even if one's `Drop` panics (the
//!    world is already consistent then).
//!
//! # Change detection: restored ticks keep their age
//! The world's change tick never goes back. A restore shifts every tick it writes (component
//! added/changed ticks, resource ticks) by `now - snapshot tick`, so each is exactly as old
//! (relative to [`World::change_tick`]) as it was when the snapshot was taken. A system or
//! query state that ran at the same point of the frame before the restore as before the
//! snapshot then sees exactly the changes it saw then: re-simulated frames see what the
//! original ones saw, and nothing looks "all changed". Restoring a snapshot taken at the
//! current tick puts the ticks back unchanged.

use std::any::TypeId;

use folio_storage::{Column, ComponentSparseSet, SparseMembership, StorageConfig, StorageError};

use super::World;
use crate::component::{Component, ComponentId};
use crate::resource::Resource;
use crate::snapshot::{
    Base, ColumnData, ResourceSnapshot, Snapshot, SnapshotError, SparseSnapshot, StagedValues,
    TableSnapshot,
};
use crate::table::{ChangedSince, TableRestore};
use crate::unwind::for_each_finishing;

impl World {
    /// Registers component type `T` for snapshots, copied with `Clone`. A type that is also
    /// `Copy` is better registered with [`World::register_snapshot_copy`] (a `memcpy` of its
    /// column). Registering again replaces the registration; either storage type works.
    pub fn register_snapshot<T: Component + Clone>(&mut self) {
        self.snapshots.register_clone::<T>();
    }

    /// Registers component type `T` for snapshots as plain data: each column of `T` is copied
    /// (and restored) as one `memcpy` of its used bytes.
    pub fn register_snapshot_copy<T: Component + Copy>(&mut self) {
        self.snapshots.register_copy::<T>();
    }

    /// [`World::register_snapshot`] unless `T` is registered for snapshots already: how
    /// folio registers its own types (relationships) without undoing a game's choice.
    pub(crate) fn register_snapshot_if_absent<T: Component + Clone>(&mut self) {
        self.snapshots.register_clone_if_absent::<T>();
    }

    /// Registers resource type `R` for snapshots, copied with `Clone`.
    pub fn register_snapshot_resource<R: Clone + Send + Sync + 'static>(&mut self) {
        self.snapshots.register_resource::<R>();
    }

    /// A copy of the whole world (entities with their ids, generations and the allocator's
    /// freelist, every component with its change ticks, which entity is in which row, and
    /// every resource) for [`World::restore`].
    ///
    /// `Copy` components registered with [`World::register_snapshot_copy`] cost one `memcpy`
    /// per column; those registered with [`World::register_snapshot`] are cloned. A game that
    /// snapshots every frame reuses its snapshots' buffers with [`World::snapshot_into`], which
    /// also copies only what changed since (a [`SnapshotRing`] does both for it).
    ///
    /// Taking a snapshot advances the world's change tick by one (as
    /// [`World::increment_change_tick`]), so every write made after it is newer than every
    /// write it holds; nothing else in the world changes.
    ///
    /// # Errors
    /// [`SnapshotError::NotRegistered`] naming the first component (with values in the world)
    /// or resource whose type is not registered; [`SnapshotError::Storage`] when memory for
    /// the copy is refused. The world is never changed.
    ///
    /// [`SnapshotRing`]: crate::SnapshotRing
    pub fn snapshot(&self) -> Result<Snapshot, SnapshotError> {
        let mut out = Snapshot::new();
        self.snapshot_into(&mut out)?;
        Ok(out)
    }

    /// [`World::snapshot`] into `out`, reusing its buffers, and incremental: when `out` holds
    /// an earlier snapshot of this world (taken with `snapshot_into` or [`World::snapshot`],
    /// and not made stale since by a [`World::restore`], [`World::check_change_ticks`], a load
    /// or [`World::clear`]), only what changed since is copied:
    ///
    /// - in each table whose rows were not added, removed or moved since, only the rows
    ///   whose changed tick is newer than `out`'s (values written through
    ///   [`World::get_mut`], a query's `&mut T`, an insert that replaces a value), found by a
    ///   vectorised scan of the changed ticks; a table whose rows changed is copied whole;
    /// - the entity allocator only if an entity was spawned, despawned or moved (or reserved);
    /// - sparse sets and resources whole, every time.
    ///
    /// The result is the same snapshot a whole copy makes (restoring either gives the same
    /// world). A value written with change detection bypassed (a query's
    /// `Mut::bypass_change_detection`) is not seen as changed: write with change detection
    /// between snapshots that must see the write.
    ///
    /// Once a snapshot has held a world of this size, taking another into it allocates
    /// nothing for `Copy` columns, ticks and entity metadata (cloned columns and resources are
    /// cloned anew when copied whole).
    ///
    /// # Errors
    /// As [`World::snapshot`]. On [`SnapshotError::NotRegistered`] `out` is unchanged (the
    /// types are checked before anything is copied); on [`SnapshotError::Storage`] it is
    /// left holding no whole world, and restoring it is [`SnapshotError::Incomplete`].
    pub fn snapshot_into(&self, out: &mut Snapshot) -> Result<(), SnapshotError> {
        self.check_snapshot_types()?;
        let base =
            out.base.filter(|b| out.world == Some(self.id) && b.epoch == self.snapshot_epoch);
        out.world = None;
        out.base = None;
        // Every write from here on is stamped later than `since`.
        let since = self.increment_change_tick();
        let result = self.fill_snapshot(out, base);
        if result.is_ok() {
            out.world = Some(self.id);
            out.base = Some(Base {
                epoch: self.snapshot_epoch,
                since: since.wrapping_sub(self.tick_shift),
                forked: false,
            });
        }
        result
    }

    /// The first component (with values) or resource whose type is not registered.
    fn check_snapshot_types(&self) -> Result<(), SnapshotError> {
        let component = |id: ComponentId| {
            let info = self.components.info(id);
            match self.snapshots.components.contains_key(&info.type_id()) {
                true => Ok(()),
                false => Err(SnapshotError::NotRegistered { name: info.name(), kind: "component" }),
            }
        };
        for table in self.tables.iter().filter(|t| !t.is_empty()) {
            table.component_ids().iter().try_for_each(|&id| component(id))?;
        }
        for (index, set) in self.sparse_sets.iter().enumerate() {
            if set.as_ref().is_some_and(|set| !set.is_empty()) {
                component(ComponentId::new(index as u32))?;
            }
        }
        for (type_id, resource) in &self.resources {
            if !self.snapshots.resources.contains_key(type_id) {
                let name = resource.type_name();
                return Err(SnapshotError::NotRegistered { name, kind: "resource" });
            }
        }
        Ok(())
    }

    /// Copies everything into `out` (whose types [`Self::check_snapshot_types`] checked): only
    /// what changed since `base` when it is `Some` (`out` holds a copy of this world it
    /// describes).
    fn fill_snapshot(&self, out: &mut Snapshot, base: Option<Base>) -> Result<(), SnapshotError> {
        let copy_column = |id: ComponentId, column: &Column, data: &mut ColumnData| {
            let info = self.components.info(id);
            let fns = self.snapshots.components.get(&info.type_id());
            let fns =
                fns.ok_or(SnapshotError::NotRegistered { name: info.name(), kind: "component" })?;
            // SAFETY: the column is of component `id`, whose type is `info.type_id()`'s: the
            // one `fns` was registered for.
            unsafe { (fns.copy)(column, data) }.map_err(SnapshotError::Storage)
        };
        let refresh_column =
            |id: ComponentId, column: &Column, data: &mut ColumnData, rows: &[u32]| {
                let info = self.components.info(id);
                let fns = self.snapshots.components.get(&info.type_id());
                let fns = fns
                    .ok_or(SnapshotError::NotRegistered { name: info.name(), kind: "component" })?;
                // SAFETY: the column is of component `id`, whose type is `info.type_id()`'s: the
                // one `fns` was registered for. `data` was copied from it at the same table
                // version, so at its current length, and `rows` are below it (`refresh_into`).
                if unsafe { (fns.refresh)(column, data, rows) } {
                    return Ok(());
                }
                copy_column(id, column, data)
            };
        let shift = self.tick_shift;
        out.tick = self.change_tick();
        out.shift = shift;
        out.incremental = base.is_some();
        let mut bytes = 0;
        // Archetype versions change with every spawn, despawn and move, and reservations show
        // in the allocator's counts: with neither, its metas are as `out` holds them.
        let same_archetypes = base.is_some()
            && out.archetype_versions.len() == self.archetypes.len()
            && self.archetypes.iter().zip(&out.archetype_versions).all(|(a, &v)| a.version() == v)
            && out.entities.same_counts(&self.entities);
        if !same_archetypes {
            self.entities.snapshot_into(&mut out.entities)?;
            bytes += out.entities.indices() * 16;
        }
        let changed = base.map(|b| ChangedSince {
            world: b.since.wrapping_add(shift),
            kept: b.forked.then_some(b.since),
            shift,
        });
        resize(&mut out.tables, self.tables.len())?;
        let known_tables = if base.is_some() { out.tables.len().min(self.tables.len()) } else { 0 };
        for (i, (table, saved)) in self.tables.iter().zip(&mut out.tables).enumerate() {
            match changed {
                // A table made since `base` was taken has a default (version 0) entry: as the
                // table's version 0 is its empty start, refreshing it is right too.
                Some(changed) if i < known_tables && saved.version == table.version() => {
                    bytes += table.refresh_into(saved, changed, &mut out.rows, refresh_column)?;
                }
                _ => {
                    table.snapshot_into(saved, shift, copy_column)?;
                    bytes += saved.entities.byte_len()
                        + saved
                            .columns
                            .iter()
                            .map(|c| match &c.data {
                                ColumnData::Bytes(b) => b.byte_len() + 8 * b.len(),
                                ColumnData::Cloned(v) => 8 * v.len(),
                            })
                            .sum::<usize>();
                }
            }
        }
        resize(&mut out.archetypes, self.archetypes.len())?;
        resize(&mut out.archetype_versions, self.archetypes.len())?;
        for ((archetype, saved), version) in
            self.archetypes.iter().zip(&mut out.archetypes).zip(&mut out.archetype_versions)
        {
            if base.is_none() || *version != archetype.version() {
                archetype.snapshot_entities_into(saved)?;
                *version = archetype.version();
            }
        }
        resize(&mut out.sparse_sets, self.sparse_sets.len())?;
        for (index, (set, saved)) in self.sparse_sets.iter().zip(&mut out.sparse_sets).enumerate() {
            match set {
                Some(set) if !set.is_empty() => {
                    let saved = saved.get_or_insert_with(SparseSnapshot::default);
                    copy_column(ComponentId::new(index as u32), set.column(), &mut saved.data)?;
                    set.membership_into(&mut saved.membership)?;
                }
                _ => *saved = None,
            }
        }
        out.resources.clear();
        out.resources
            .try_reserve_exact(self.resources.len())
            .map_err(|e| StorageError::alloc(self.resources.len(), e))?;
        for (&type_id, resource) in &self.resources {
            let fns = self.snapshots.resources.get(&type_id);
            let fns = fns.ok_or(SnapshotError::NotRegistered {
                name: resource.type_name(),
                kind: "resource",
            })?;
            // SAFETY: the resource is keyed by its value's `TypeId`, the one `fns` is for.
            let value = unsafe { (fns.clone)(resource) };
            out.resources.push(ResourceSnapshot { type_id, ticks: resource.ticks(), value });
        }
        out.filled_bytes = bytes;
        Ok(())
    }

    /// Puts the world back as it was when `snapshot` was taken: the same entities with the
    /// same ids and generations, the same allocator state (so the next spawns get the same
    /// ids), the same rows in the same order (so queries iterate in the same order), the same
    /// component values and resources. May be called any number of times with one snapshot.
    ///
    /// What it does not undo: archetypes, tables and component registrations made since stay
    /// (empty), so the ids a query state or a schedule cached stay valid. Change ticks keep
    /// their age: every restored tick is shifted so that it is as old, relative to the
    /// world's change tick (which never goes back), as it was at the snapshot; see the
    /// `world::snapshot` module docs.
    ///
    /// A restore is not a sequence of spawns, inserts and despawns: no component hook runs and
    /// no removal is logged ([`World::track_removals`]). The values it replaces are dropped
    /// (each once), after the world is consistent again.
    ///
    /// # Errors
    /// [`SnapshotError::WrongWorld`] when `snapshot` was taken from another world;
    /// [`SnapshotError::Storage`] when memory is refused. The world is unchanged then.
    ///
    /// # Panics
    /// When a component's or resource's `Clone` panics (the world is unchanged then), or,
    /// after the world is restored, when a replaced value's `Drop` does (the other replaced
    /// values are still dropped).
    pub fn restore(&mut self, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        match snapshot.world {
            None => return Err(SnapshotError::Incomplete),
            Some(id) if id != self.id => {
                return Err(SnapshotError::WrongWorld { snapshot: id, world: self.id });
            }
            Some(_) => {}
        }
        let tick_delta = self.change_tick().wrapping_sub(snapshot.tick);
        // Table ticks were kept minus the snapshot's shift.
        let table_delta = tick_delta.wrapping_add(snapshot.shift);

        // 1. Stage: the clones, before anything changes.
        let mut staged_tables = try_vec(self.tables.len())?;
        for i in 0..self.tables.len() {
            staged_tables.push(match snapshot.tables.get(i) {
                Some(saved) => stage_columns(saved)?,
                None => Vec::new(),
            });
        }
        let mut staged_sets = try_vec(self.sparse_sets.len())?;
        for i in 0..self.sparse_sets.len() {
            staged_sets.push(match snapshot.sparse_sets.get(i).and_then(Option::as_ref) {
                Some(SparseSnapshot { data: ColumnData::Cloned(values), .. }) => {
                    Some(values.stage())
                }
                _ => None,
            });
        }
        let mut staged_resources = try_vec(snapshot.resources.len())?;
        for saved in &snapshot.resources {
            let mut ticks = saved.ticks;
            ticks.added = ticks.added.wrapping_add(tick_delta);
            ticks.changed = ticks.changed.wrapping_add(tick_delta);
            staged_resources.push((saved.type_id, saved.value.stage(ticks)));
        }

        // 2. Make room.
        let mut table_restores: Vec<TableRestore> = try_vec(self.tables.len())?;
        for (i, table) in self.tables.iter_mut().enumerate() {
            table_restores.push(table.prepare_restore(snapshot.tables.get(i), &self.storage)?);
        }
        for (i, archetype) in self.archetypes.iter_mut().enumerate() {
            let len = snapshot.archetypes.get(i).map_or(0, |(len, _)| *len);
            archetype.try_reserve_restore(len as usize)?;
        }
        let mut set_graves = try_vec(self.sparse_sets.len())?;
        for (i, set) in self.sparse_sets.iter_mut().enumerate() {
            let grave = match set {
                Some(set) => {
                    let saved = snapshot.sparse_sets.get(i).and_then(Option::as_ref);
                    prepare_set(set, saved, &self.storage)?
                }
                None => None,
            };
            set_graves.push(grave);
        }
        let mut stale = try_vec(self.resources.len())?;
        let saved_resource = |t: &TypeId| snapshot.resources.iter().any(|r| r.type_id == *t);
        stale.extend(self.resources.keys().filter(|t| !saved_resource(t)).copied());
        self.resources
            .try_reserve(staged_resources.len())
            .map_err(|e| StorageError::alloc(staged_resources.len(), e))?;
        let mut old_resources: Vec<Resource> =
            try_vec(self.resources.len() + staged_resources.len())?;
        // The allocator last: it makes its room and commits in one call, which fails before
        // changing anything. From here on nothing fails and no user code runs.
        self.entities.try_restore_snapshot(&snapshot.entities)?;

        // 3. Commit.
        for (i, ((table, restore), staged)) in
            self.tables.iter_mut().zip(&mut table_restores).zip(staged_tables).enumerate()
        {
            // SAFETY:
            // - `restore` was made by `prepare_restore` of `snapshot.tables.get(i)` on this
            //   table just above, and the table has not changed since.
            // - that table snapshot was taken from this table: the snapshot is this world's
            //   (checked above) and tables are never removed or renumbered. Its byte columns
            //   are of types registered as `Copy` (`ComponentFns::copy` of a `Copy`
            //   registration is the only maker of bytes), and `staged` holds, by column, the
            //   clones of its cloned columns, made from it by `stage_columns`.
            unsafe {
                table.restore_unchecked(snapshot.tables.get(i), staged, restore, table_delta)
            };
            table.set_version(snapshot.tables.get(i).map(|t| t.version));
        }
        for (i, archetype) in self.archetypes.iter_mut().enumerate() {
            let (len, list) = match snapshot.archetypes.get(i) {
                Some((len, list)) => (*len, list.as_deref()),
                // Made since: no entities (and an empty list, if it keeps one).
                None => (0, Some(&[][..])),
            };
            let table = self.tables[archetype.table_id().index()].entities();
            archetype.restore_entities(len, list, table);
            // An archetype that keeps a list now but did not then is not as the snapshot
            // recorded it (the list is new): a fresh version, so no snapshot takes its entry
            // (with no list) for its current one.
            let recorded = snapshot.archetype_versions.get(i).copied();
            let same = list.is_some() || !archetype.is_listed();
            archetype.set_version(recorded.filter(|_| same));
        }
        for (i, ((set, grave), staged)) in
            self.sparse_sets.iter_mut().zip(&mut set_graves).zip(staged_sets).enumerate()
        {
            let Some(set) = set else { continue };
            let saved = snapshot.sparse_sets.get(i).and_then(Option::as_ref);
            // SAFETY:
            // - `prepare_set` made room for `saved` (or for nothing) on this set above, and
            //   a grave for its current values when they need dropping.
            // - `saved` was taken from this set (this world's, by component index, which is
            //   never renumbered); its values are bytes of a `Copy` type or cloned into
            //   `staged`, one per entity, in its dense order.
            unsafe { restore_set(set, saved, staged, grave.as_mut(), tick_delta) };
        }
        for (type_id, resource) in staged_resources {
            // Room was reserved in both the map and `old_resources`.
            if let Some(old) = self.resources.insert(type_id, resource) {
                old_resources.push(old);
            }
        }
        for type_id in stale {
            if let Some(old) = self.resources.remove(&type_id) {
                old_resources.push(old);
            }
        }
        // The table ticks' frame is now the snapshot's, moved by `table_delta`; snapshots
        // taken before are stale unless a ring says otherwise.
        self.tick_shift = table_delta;
        self.snapshot_epoch += 1;
        // Relationship links are the world's bookkeeping, not a resource: made again from
        // the restored collections.
        self.rebuild_relationship_links();
        // Observers are configuration, not restored; those watching entities the restore
        // despawned stop watching them.
        self.unwatch_dead_entities();
        debug_assert!(self.check_restored());

        // The world is consistent: the replaced values may drop now (user code).
        let graves = table_restores
            .into_iter()
            .flat_map(TableRestore::into_graves)
            .chain(set_graves.into_iter().flatten());
        for_each_finishing(graves, drop);
        for_each_finishing(old_resources.into_iter(), drop);
        Ok(())
    }

    /// Checks the world's invariants, panicking on a broken one; `true`, for a
    /// `debug_assert!` after a restore.
    fn check_restored(&self) -> bool {
        self.check_invariants();
        true
    }
}

/// Clones `saved`'s cloned columns again, by column (`None` for byte columns).
fn stage_columns(
    saved: &TableSnapshot,
) -> Result<Vec<Option<Box<dyn StagedValues>>>, StorageError> {
    let mut staged = try_vec(saved.columns.len())?;
    for column in &saved.columns {
        staged.push(match &column.data {
            ColumnData::Cloned(values) => Some(values.stage()),
            ColumnData::Bytes(_) => None,
        });
    }
    Ok(staged)
}

/// Makes room in `set` for restoring `saved` (`None`: emptying it), and a grave (from
/// `config`) for its current values if they need dropping.
fn prepare_set(
    set: &mut ComponentSparseSet,
    saved: Option<&SparseSnapshot>,
    config: &StorageConfig,
) -> Result<Option<Column>, StorageError> {
    if let Some(saved) = saved {
        set.try_reserve_membership(&saved.membership)?;
    }
    let data = set.column();
    match data.drop_fn() {
        Some(drop) if !data.is_empty() => {
            // SAFETY: the layout and drop fn are the set's: one `Send + Sync` component
            // type's.
            let mut grave = unsafe { config.column(data.item_layout(), Some(drop)) };
            grave.try_reserve(data.len())?;
            Ok(Some(grave))
        }
        _ => Ok(None),
    }
}

/// Replaces `set`'s entities and values with `saved`'s (`None`: none), the ticks shifted by
/// `tick_delta`; the current values go to `grave` (or are forgotten when they need no drop).
///
/// # Safety
/// - [`prepare_set`] of `saved` on `set` made `grave`, and `set` has not changed since.
/// - `saved` was taken from `set`; its values are bytes of a `Copy` type, or `staged` holds
///   clones of them, one per entity in its dense order.
unsafe fn restore_set(
    set: &mut ComponentSparseSet,
    saved: Option<&SparseSnapshot>,
    staged: Option<Box<dyn StagedValues>>,
    grave: Option<&mut Column>,
    tick_delta: u32,
) {
    let empty = SparseMembership::default();
    let membership = saved.map_or(&empty, |s| &s.membership);
    let refill = |data: &mut Column| {
        match grave {
            // SAFETY: the grave holds the set's type, with room for its values (caller).
            Some(grave) => unsafe { data.move_all_into_unchecked(grave) },
            // SAFETY: `0 <= capacity`; the values need no drop (or there are none).
            None => unsafe { data.set_len(0) },
        }
        match (saved.map(|s| &s.data), staged) {
            // SAFETY:
            // - the type is `Copy`: plain data with no drop fn (only a `Copy` registration
            //   makes bytes).
            // - the bytes were copied from this set's column (caller); room was made by
            //   `try_reserve_membership`.
            (Some(ColumnData::Bytes(bytes)), _) => unsafe { data.restore_bytes_unchecked(bytes) },
            // SAFETY: the column is empty, holds the staged values' type, and has room for
            // them (caller).
            (Some(ColumnData::Cloned(_)), Some(staged)) => unsafe { staged.move_into(data) },
            (Some(ColumnData::Cloned(_)), None) => unreachable!("a cloned set is staged"),
            (None, _) => {}
        }
    };
    // SAFETY:
    // - `try_reserve_membership` of `membership` succeeded in `prepare_set` (or, emptying,
    //   no room is needed).
    // - `refill` empties the column and writes `membership.len()` values in its dense order,
    //   with moves and copies only: it does not panic.
    unsafe { set.restore_unchecked(membership, tick_delta, refill) };
}

/// Makes `v` `n` long (new entries default), without aborting when the heap refuses.
fn resize<T: Default>(v: &mut Vec<T>, n: usize) -> Result<(), StorageError> {
    v.truncate(n);
    let more = n - v.len();
    v.try_reserve_exact(more).map_err(|e| StorageError::alloc(more, e))?;
    v.resize_with(n, T::default);
    Ok(())
}

/// A vector with room for `n`, without aborting when the heap refuses.
fn try_vec<T>(n: usize) -> Result<Vec<T>, StorageError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|e| StorageError::alloc(n, e))?;
    Ok(v)
}
