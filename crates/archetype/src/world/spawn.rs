//! Spawning: reserved entities and their flush, `spawn`, `spawn_reserved` and `spawn_batch`,
//! with the table-only fast paths that write a bundle straight into its row.

use folio_storage::{Entities, Entity, EntityLocation, StorageError};

use super::rows::{two_mut, unlink_row};
use super::{SpawnPlan, World, or_panic};
use crate::archetype::{Archetype, ArchetypeId};
use crate::bundle::{Bundle, MAX_BUNDLE_LEN};
use crate::component::ComponentId;
use crate::error::EntityError;
use crate::hooks::HookFlags;
use crate::table::{Table, TableId};
use crate::try_alloc::{reserve, vec_with_capacity};

impl World {
    /// Hands out an entity id through `&self` (usable from parallel systems); it is spawned,
    /// with no components, at the next [`World::flush`]. Every mutating method flushes first,
    /// except [`World::despawn`] (which needs no flush) and [`World::spawn_reserved`] of the
    /// oldest pending reservation (which spawns just that one, straight into its table).
    #[inline]
    #[track_caller]
    pub fn reserve_entity(&self) -> Entity {
        self.entities.reserve()
    }

    /// Places every reserved entity into the empty archetype.
    ///
    /// # Panics
    /// When the OS refuses memory for them (the empty table's rows or the entity metas);
    /// [`World::try_flush`] returns that as an error. Nothing changed then: the entities stay
    /// reserved and a later flush places them.
    #[inline]
    #[track_caller]
    pub fn flush(&mut self) {
        if let Err(e) = self.try_flush() {
            panic!("World::flush: cannot place the reserved entities: {e}");
        }
    }

    /// Places every reserved entity into the empty archetype, or says why it cannot.
    ///
    /// # Errors
    /// [`EntityError::Storage`] when the OS refuses memory for the empty table's rows or the
    /// entity metas. Nothing changed then: every reservation is still pending (not alive, not
    /// counted by [`World::len`]) and a later flush places them.
    #[inline]
    pub fn try_flush(&mut self) -> Result<(), EntityError> {
        if self.entities.has_reserved() {
            return self.flush_reserved();
        }
        Ok(())
    }

    /// [`World::try_flush`] once some reservation may be pending.
    #[inline(never)]
    pub(super) fn flush_reserved(&mut self) -> Result<(), EntityError> {
        let pending = self.entities.reserved_len();
        if pending == 0 {
            return Ok(());
        }
        let table = &mut self.tables[TableId::EMPTY.index()];
        // Every row first, then (inside `try_flush`) every meta: once an entity is alive
        // nothing can fail, so a refused commit leaves every reservation pending, never an
        // entity that is alive but in no table.
        table.try_reserve(pending)?;
        let archetype = &mut self.archetypes[ArchetypeId::EMPTY.index()];
        self.entities.try_flush(|entity, location| {
            // SAFETY: the empty table has no components, so `value` is never called.
            let row = match unsafe { table.push_row(entity, 0, |_| unreachable!()) } {
                Ok(row) => row,
                Err(e) => unreachable!("the rows of every reserved entity were reserved: {e}"),
            };
            let archetype_row = archetype.push(entity, row as u32);
            *location = EntityLocation {
                archetype_id: ArchetypeId::EMPTY.0,
                archetype_row,
                table_row: row as u32,
            };
        })?;
        Ok(())
    }

    /// Spawns an entity with no component, to add them later: the same as `spawn(())`.
    ///
    /// # Panics
    /// When memory runs out; [`World::try_spawn`] returns that as an error.
    #[track_caller]
    pub fn spawn_empty(&mut self) -> Entity {
        self.spawn(())
    }

    /// Spawns an entity with the components of `bundle`.
    ///
    /// # Panics
    /// When the bundle repeats a component type, or memory runs out; [`World::try_spawn`]
    /// returns those as errors.
    #[track_caller]
    pub fn spawn<B: Bundle>(&mut self, bundle: B) -> Entity {
        or_panic(self.try_spawn(bundle), "World::spawn")
    }

    /// Spawns an entity with the components of `bundle`, or says why it could not (and drops
    /// the bundle).
    ///
    /// # Errors
    /// [`EntityError::Component`] for a bundle that repeats a component type;
    /// [`EntityError::Storage`] when memory runs out, for the entity or for the reserved
    /// entities flushed first (which then stay reserved). On error nothing changed but that
    /// flush, when it succeeded.
    pub fn try_spawn<B: Bundle>(&mut self, bundle: B) -> Result<Entity, EntityError> {
        let entity = self.spawn_raw(bundle)?;
        if self.entity_has_hooks(entity, HookFlags::SPAWN) {
            self.after_spawn(entity);
        }
        Ok(entity)
    }

    /// [`World::try_spawn`] without hooks.
    ///
    /// Always inlined into the public operation, which was this body before hooks: out of
    /// line, the call costs the hookless path about 30 instructions (world_profile).
    #[inline(always)]
    fn spawn_raw<B: Bundle>(&mut self, bundle: B) -> Result<Entity, EntityError> {
        self.try_flush()?;
        let b = self.bundle_id::<B>()?;
        let tick = self.change_tick();
        if self.has_table_only_plan(b)? {
            return self.spawn_table_only(b, bundle, tick, |entities, location| {
                Ok(entities.try_alloc_at(location)?)
            });
        }
        let archetype = self.spawn_plan(b)?.archetype;
        // Room first, then the id: a refused reservation hands out (and burns) no id. On error
        // the bundle is dropped here, unmoved.
        self.reserve_new(archetype)?;
        let entity = self.entities.try_alloc()?;
        // SAFETY:
        // - the pointers are `B`'s components in `B`'s order, which `bundles[b]` lists.
        // - room for a row in the archetype's table and an entry in each of its sparse sets
        //   was reserved above.
        Ok(bundle
            .get_components(|ptrs| unsafe { self.place_new(entity, archetype, b, ptrs, tick) }))
    }

    /// Reserves what one new entity of `archetype` takes: a row in its table and an entry in
    /// each of its sparse sets.
    fn reserve_new(&mut self, archetype: ArchetypeId) -> Result<(), EntityError> {
        let arch = &self.archetypes[archetype.index()];
        self.tables[arch.table_id().index()].try_reserve(1)?;
        self.archetypes[archetype.index()].try_reserve(1)?;
        let arch = &self.archetypes[archetype.index()];
        // The id `try_alloc` hands out next, whose sparse page each set needs.
        let next = self.entities.next_alloc();
        for c in arch.sparse_components() {
            let set = self.sparse_sets[c.index()].as_mut().expect("made with the archetype");
            set.try_reserve(1)?;
            if let Some(next) = next {
                set.try_reserve_entity(next)?;
            }
        }
        Ok(())
    }

    /// Gives `entity`, reserved with [`World::reserve_entity`] and given no components since,
    /// the components of `bundle`: what [`World::insert`] does, but without moving a row. The
    /// entity leaves the empty archetype and its row is written in place in its new table, as
    /// a spawn's is. An entity that has components already gets an ordinary insert. How
    /// `Commands::spawn` makes its entities.
    ///
    /// An entity that is the oldest pending reservation (as each is, when a buffer spawns its
    /// reserved entities in order) is not flushed into the empty archetype first: it becomes
    /// alive in its table's row.
    ///
    /// On error nothing changed and the bundle is dropped: the entity stays, empty (alive in
    /// the empty archetype, or still reserved when memory to flush the reserved entities was
    /// refused; a later flush places it).
    pub fn spawn_reserved<B: Bundle>(
        &mut self,
        entity: Entity,
        bundle: B,
    ) -> Result<(), EntityError> {
        if self.bundle_has_hooks::<B>(HookFlags::INSERTS) {
            return self.insert_hooked::<B>(entity, |w| w.spawn_reserved_raw(entity, bundle));
        }
        self.spawn_reserved_raw(entity, bundle)
    }

    /// [`World::spawn_reserved`] without hooks.
    ///
    /// Always inlined into the public operation, as the other `*_raw` bodies are (out of line:
    /// about 30 instructions a command spawn, world_profile commands_spawn).
    #[inline(always)]
    fn spawn_reserved_raw<B: Bundle>(
        &mut self,
        entity: Entity,
        bundle: B,
    ) -> Result<(), EntityError> {
        if self.entities.front_reserved() == Some(entity)
            && let Ok(b) = self.bundle_id::<B>()
            // A refused plan takes the general path, which reports it.
            && matches!(self.has_table_only_plan(b), Ok(true))
        {
            let tick = self.change_tick();
            let spawned = self.spawn_table_only(b, bundle, tick, |entities, location| {
                let front = entities.flush_front(location)?;
                debug_assert_eq!(front, entity);
                Ok(front)
            });
            if spawned.is_err() {
                // As on the other path: the entity stays, empty. If even that flush is refused,
                // nothing changed and it stays reserved; the first error is the one to report.
                let _ = self.try_flush();
            }
            return spawned.map(drop);
        }
        self.try_flush()?;
        let loc = self.entities.location(entity).ok_or(EntityError::NoSuchEntity(entity))?;
        let b = self.bundle_id::<B>()?;
        let plan = self.spawn_plan(b)?;
        let (archetype, table) = (plan.archetype, plan.table);
        let table_only = self.spawn_plans[b].as_ref().is_some_and(|p| p.columns.is_some());
        if loc.archetype_id != ArchetypeId::EMPTY.0 || !table_only {
            return self.insert_raw(entity, bundle);
        }
        let tick = self.change_tick();
        let plan = self.spawn_plans[b].as_ref().expect("checked above");
        // A bundle has a component, so a table-only plan's table has a column: not the empty one.
        debug_assert_ne!(table, TableId::EMPTY);
        let (empty, target) = two_mut(&mut self.tables, TableId::EMPTY.index(), table.index());
        spawn_in(
            &mut self.entities,
            target,
            &mut self.archetypes[archetype.index()],
            plan,
            bundle,
            tick,
            |entities, location| {
                entities.set_location(entity, location);
                Ok(entity)
            },
        )?;
        // The entity's row is written in its new table; take it out of the empty one. The
        // empty table has no columns, so the swap-remove moves only an entity id.
        unlink_row(&mut self.entities, &mut self.archetypes, empty, entity, loc);
        empty.swap_remove_and_drop(loc.table_row as usize);
        Ok(())
    }

    /// Whether bundle `b` spawns along a table-only plan (making the plan if needed).
    #[inline]
    fn has_table_only_plan(&mut self, b: usize) -> Result<bool, StorageError> {
        Ok(self.spawn_plan(b)?.columns.is_some())
    }

    /// Spawns `bundle` (of bundle id `b`, whose plan [`World::has_table_only_plan`] says is
    /// table-only): its values written in place in a new row of the table, which `place`
    /// makes the new entity's.
    ///
    /// Always inlined: it sits under the `*_raw` bodies, which are inlined into a cold hooked
    /// path as well as into their public operation, and with two call sites the compiler made
    /// it a call (world_profile commands_spawn 10 % more instructions).
    #[inline(always)]
    fn spawn_table_only<B: Bundle>(
        &mut self,
        b: usize,
        bundle: B,
        tick: u32,
        place: impl FnOnce(&mut Entities, EntityLocation) -> Result<Entity, EntityError>,
    ) -> Result<Entity, EntityError> {
        let plan = self.spawn_plans[b].as_ref().expect("made by has_table_only_plan");
        spawn_in(
            &mut self.entities,
            &mut self.tables[plan.table.index()],
            &mut self.archetypes[plan.archetype.index()],
            plan,
            bundle,
            tick,
            place,
        )
    }

    /// Spawns one entity per bundle, resolving the archetype and reserving rows for the whole
    /// batch once (as many as the iterator's lower size bound).
    ///
    /// Each entity is complete before the iterator is asked for the next bundle, so an iterator
    /// that panics leaves the entities spawned so far in a consistent world.
    ///
    /// # Panics
    /// As [`World::spawn`].
    #[track_caller]
    pub fn spawn_batch<B: Bundle, I: IntoIterator<Item = B>>(&mut self, iter: I) -> Vec<Entity> {
        let iter = iter.into_iter();
        let (lower, _) = iter.size_hint();
        or_panic(self.try_flush(), "World::spawn");
        let b = or_panic(self.bundle_id::<B>(), "World::spawn");
        if self.hooks.any_in(self.bundles[b].ids(), HookFlags::SPAWN) {
            return self.spawn_batch_hooked(iter);
        }
        let tick = self.change_tick();
        let plan = or_panic(self.spawn_plan(b), "World::spawn");
        let (archetype, table) = (plan.archetype, plan.table);
        let Self { entities, tables, archetypes, spawn_plans, .. } = self;
        let (table, archetype) = (&mut tables[table.index()], &mut archetypes[archetype.index()]);
        // Failed reservations are not fatal: each spawn reserves (and reports) for itself.
        let _ = table.try_reserve(lower);
        let _ = entities.try_reserve_new(lower);
        // Not fatal either: the list grows (fallibly) as the batch needs.
        let mut spawned = vec_with_capacity(lower).unwrap_or_default();
        match spawn_plans[b].as_ref().filter(|p| p.columns.is_some()) {
            Some(plan) => or_panic(
                spawn_rows(entities, table, archetype, plan, iter, tick, &mut spawned),
                "World::spawn",
            ),
            // (No hook to run: a bundle with spawn hooks took the hooked path above.)
            None => {
                for bundle in iter {
                    or_panic(reserve(&mut spawned, 1), "World::spawn");
                    spawned.push(self.spawn(bundle));
                }
            }
        }
        spawned
    }

    /// Writes a new entity's components into `archetype`.
    ///
    /// # Safety
    /// - `ptrs` are bundle `b`'s component values in its order; they are moved here.
    /// - [`World::reserve_new`] of `archetype` succeeded since the lengths of its table and sets
    ///   last changed, so nothing here can fail.
    pub(super) unsafe fn place_new(
        &mut self,
        entity: Entity,
        archetype: ArchetypeId,
        b: usize,
        ptrs: &[*mut u8],
        tick: u32,
    ) -> Entity {
        let arch = &self.archetypes[archetype.index()];
        let table_id = arch.table_id();
        let bundle = &self.bundles[b];
        let position = |id: ComponentId| bundle.ids().iter().position(|&c| c == id).unwrap();
        // SAFETY:
        // - the table's ids are the bundle's table components; each pointer is a value of the
        //   id's type, moved in once. The closure cannot unwind (the ids are in the bundle).
        // - room was reserved (caller), so this cannot fail.
        let table_row = unsafe {
            self.tables[table_id.index()].push_row(entity, tick, |id| ptrs[position(id)])
        }
        .expect("room was reserved");
        for &c in arch.sparse_components() {
            let set = self.sparse_sets[c.index()].as_mut().expect("made with the archetype");
            // SAFETY: the pointer is a value of `c`'s type, moved in once; room was reserved
            // (caller).
            unsafe { set.insert(entity, ptrs[position(c)], tick) }.expect("room was reserved");
        }
        let archetype_row = self.archetypes[archetype.index()].push(entity, table_row as u32);
        self.entities.set_location(
            entity,
            EntityLocation {
                archetype_id: archetype.0,
                archetype_row,
                table_row: table_row as u32,
            },
        );
        entity
    }
}

/// Spawns one entity of a bundle whose archetype has only table components: reserves, then
/// writes the row in place, for the entity `place` gives the new location to (a new one, or
/// one being moved out of the empty archetype). On error (from the reservation or from
/// `place`) nothing changed and the bundle is dropped.
///
/// Always inlined: the bundle is then written from where the caller built it, not copied
/// through the stack first (criterion's simple_insert spent 12 % in that `memmove`).
#[inline(always)]
fn spawn_in<B: Bundle>(
    entities: &mut Entities,
    table: &mut Table,
    archetype: &mut Archetype,
    plan: &SpawnPlan,
    bundle: B,
    tick: u32,
    place: impl FnOnce(&mut Entities, EntityLocation) -> Result<Entity, EntityError>,
) -> Result<Entity, EntityError> {
    let columns = plan.columns.as_deref().expect("a table-only spawn plan");
    table.try_reserve(1)?;
    archetype.try_reserve(1)?;
    let table_row = table.len();
    let location = EntityLocation {
        archetype_id: plan.archetype.0,
        archetype_row: archetype.next_row(table_row as u32),
        table_row: table_row as u32,
    };
    let entity = place(entities, location)?;
    // SAFETY:
    // - `data_slot`: `columns[i]` is the table column of bundle component `i` (the plan was
    //   made for this bundle and table), and `table_row == len < cap` after `try_reserve(1)`.
    //   Distinct components have distinct columns, so the slots do not overlap.
    // - `write_components` writes every bundle component, and the archetype has no other
    //   table component, so every column's slot at `len` now holds a value of its type;
    //   `commit_row` takes them. Neither unwinds.
    unsafe {
        bundle.write_components(&mut |i| table.data_slot(columns[i] as usize, table_row));
        table.commit_row(entity, tick);
    }
    archetype.push(entity, table_row as u32);
    Ok(entity)
}

/// `spawn_batch` along a table-only spawn plan: the bundles are written straight into the
/// table's reserved rows, a room-full at a time, and each room-full is committed at once (its
/// ticks filled per column, every column's length set once) instead of row by row.
///
/// If the iterator panics, or an entity or a row cannot be had, the rows written so far are
/// committed first (their entities exist, complete); the failing bundle is dropped.
fn spawn_rows<B: Bundle>(
    entities: &mut Entities,
    table: &mut Table,
    archetype: &mut Archetype,
    plan: &SpawnPlan,
    mut iter: impl Iterator<Item = B>,
    tick: u32,
    spawned: &mut Vec<Entity>,
) -> Result<(), EntityError> {
    /// Commits the rows written so far when dropped, on unwind too.
    struct Rows<'a> {
        table: &'a mut Table,
        written: usize,
        tick: u32,
    }
    impl Drop for Rows<'_> {
        fn drop(&mut self) {
            // SAFETY: `written <= spare_rows()` (the loop stops at the room it took), and each
            // of those rows had every column's value and its entity written before `written`
            // counted it.
            unsafe { self.table.commit_rows(self.written, self.tick) };
        }
    }

    let columns = plan.columns.as_deref().expect("a table-only spawn plan");
    let mut next = iter.next();
    while let Some(first) = next.take() {
        if table.spare_rows() == 0 {
            // Room for what the iterator still promises; if that is refused, for one row, so
            // that a batch past the end of a reservation still spawns every row that fits.
            if table.try_reserve(iter.size_hint().0.saturating_add(1)).is_err() {
                table.try_reserve(1)?;
            }
        }
        let room = table.spare_rows();
        archetype.try_reserve(room)?;
        // Not fatal: `try_alloc_at` reserves (and reports) for itself.
        let _ = entities.try_reserve_new(room);
        let start = table.len();
        // The list of ids gets the room-full's room too, so its pushes below never allocate.
        reserve(spawned, room)?;
        let entity_base = table.entity_base();
        // Each bundle component's column start, in the bundle's order, for the room-full.
        let mut bundle_bases = [std::ptr::null_mut::<u8>(); MAX_BUNDLE_LEN];
        for (slot, &c) in bundle_bases.iter_mut().zip(columns) {
            *slot = table.row_base(c as usize);
        }
        let mut rows = Rows { table, written: 0, tick };
        let mut bundle = first;
        loop {
            let row = start + rows.written;
            let entity = entities.try_alloc_at(EntityLocation {
                archetype_id: plan.archetype.0,
                archetype_row: archetype.next_row(row as u32),
                table_row: row as u32,
            })?;
            // SAFETY:
            // - `row < start + room`, inside every column's buffer; `bases` was taken after the
            //   last reservation and nothing reserves or removes until `rows` commits.
            // - `bundle_bases[i]` is the start of the table column of bundle component `i`
            //   (`columns[i]`: the plan was made for this bundle and table), whose items are of
            //   that component's type, so `row` items on is its slot in `row`; `columns` has
            //   one entry per bundle component, at most `MAX_BUNDLE_LEN`. Distinct components
            //   have distinct columns, so the slots do not overlap, and the archetype has no
            //   other table component, so every column's slot in `row` is written. Typed writes
            //   do not unwind.
            unsafe {
                bundle.write_row(&bundle_bases, row);
                entity_base.add(row).write(entity);
            }
            rows.written += 1;
            archetype.push(entity, row as u32);
            spawned.push(entity);
            if rows.written == room {
                break;
            }
            match iter.next() {
                Some(b) => bundle = b,
                None => return Ok(()),
            }
        }
        drop(rows);
        next = iter.next();
    }
    Ok(())
}
