//! [`Commands`]: structural changes a system asks for while the world is shared, applied later
//! (at a sync point or at the end of the schedule) in the schedule's order; the buffer that
//! holds them ([`CommandQueue`]) and how applying them went ([`CommandStats`]). The rules they
//! follow are on [`Commands`]' own page.

use std::mem::{self, MaybeUninit};
use std::panic::{AssertUnwindSafe, Location, catch_unwind, resume_unwind};

use folio_query::{
    BATCH_META_AHEAD, BATCH_ROW_AHEAD, Bundle, Entity, EntityError, Event, World, WorldId,
};

use crate::error::ScheduleError;
use crate::param::{SystemMeta, SystemParam};

/// One buffered command: the closure stored at `offset` in its queue's payload bytes, with the
/// two ways to consume it.
#[derive(Clone, Copy)]
struct Command {
    /// Moves the closure out of the payload and runs it.
    run: unsafe fn(*mut MaybeUninit<u8>, &mut World) -> Result<(), EntityError>,
    /// Moves the closure out of the payload and drops it, unrun.
    drop: unsafe fn(*mut MaybeUninit<u8>),
    /// Where the closure starts in [`CommandQueue::bytes`].
    offset: usize,
    /// What the command is, for [`CommandStats::recent_skips`].
    what: &'static str,
    /// The entity it is about, if any.
    entity: Option<Entity>,
    /// Whether it makes the reserved `entity`, which must not be left behind empty when the
    /// command does not run or fails.
    spawn: bool,
}

impl Command {
    /// For a spawn that did not happen (its closure was refused, panicked or never ran):
    /// despawns its reserved entity, so no empty entity stays behind. Nothing for the others.
    fn undo_spawn(&self, world: &mut World) {
        if let (true, Some(entity)) = (self.spawn, self.entity) {
            world.flush();
            let _ = world.despawn(entity);
        }
    }
}

/// Runs the `F` stored unaligned at `payload`, consuming it.
///
/// # Safety
/// - `payload` holds an `F` written by [`CommandQueue::push`] that was neither run nor dropped;
///   the caller treats it as moved out from now on.
unsafe fn run_payload<F>(
    payload: *mut MaybeUninit<u8>,
    world: &mut World,
) -> Result<(), EntityError>
where
    F: FnOnce(&mut World) -> Result<(), EntityError>,
{
    // SAFETY: a valid `F` is there (caller); the buffer has no alignment, hence unaligned.
    let f = unsafe { payload.cast::<F>().read_unaligned() };
    f(world)
}

/// Drops the `F` stored unaligned at `payload`.
///
/// # Safety
/// As for [`run_payload`].
unsafe fn drop_payload<F>(payload: *mut MaybeUninit<u8>) {
    // SAFETY: a valid `F` is there (caller); the buffer has no alignment, hence unaligned.
    drop(unsafe { payload.cast::<F>().read_unaligned() });
}

/// A system's buffer of commands.
///
/// Commands are closures stored one after another in one byte buffer (read and written
/// unaligned, so no padding), with a small record each: buffering a command allocates nothing
/// once the buffers have grown to a frame's worth, and applying keeps their capacity for the
/// next frame. Every closure stored is `Send + Sync` (the bound of `CommandQueue::push`),
/// which is what makes the queue `Send + Sync`.
#[derive(Default)]
pub struct CommandQueue {
    commands: Vec<Command>,
    /// The closures, back to back; `commands[i].offset` says where each starts.
    bytes: Vec<MaybeUninit<u8>>,
    /// The world whose entity ids the commands name (the one [`Commands::new`] reserved them
    /// in), while any are buffered; applying them to another world would spawn into, insert
    /// into or despawn whatever entity of that world has the same id.
    world: Option<WorldId>,
}

/// How applying commands went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandStats {
    /// Commands applied.
    pub applied: u64,
    /// Commands skipped because their entity was gone (or another entity error).
    pub skipped: u64,
    /// The last few skipped commands, described (at most [`CommandStats::KEEP`]).
    pub recent_skips: Vec<String>,
}

impl CommandStats {
    /// How many skip descriptions are kept.
    pub const KEEP: usize = 16;

    fn skip(&mut self, what: &str, entity: Option<Entity>, error: &EntityError) {
        self.skipped += 1;
        if self.recent_skips.len() == Self::KEEP {
            self.recent_skips.remove(0);
        }
        let on = entity.map(|e| format!(" on {e}")).unwrap_or_default();
        self.recent_skips.push(format!("{what}{on} skipped: {error}"));
    }
}

/// Drops the payloads of `commands` not yet consumed (from `next` on), also when dropped
/// during unwinding from a payload whose drop panicked: each payload is dropped once, and
/// with a `world`, each spawn's reserved entity is despawned (also those after the panic).
struct DropPayloads<'a> {
    commands: &'a [Command],
    next: usize,
    base: *mut MaybeUninit<u8>,
    world: Option<&'a mut World>,
}

impl DropPayloads<'_> {
    fn run(&mut self) {
        while let Some(&command) = self.commands.get(self.next) {
            self.next += 1;
            if let Some(world) = self.world.as_deref_mut() {
                command.undo_spawn(world);
            }
            // SAFETY: `base` is the start of the queue's payload bytes, where `command`'s
            // unconsumed closure is (`next` moved past it first, so it is dropped once).
            unsafe { (command.drop)(self.base.add(command.offset)) };
        }
    }
}

impl Drop for DropPayloads<'_> {
    fn drop(&mut self) {
        self.run();
    }
}

impl CommandQueue {
    /// The number of buffered commands.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// Whether none is buffered.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Buffers `f`, a command about `entity` (if any) described as `what`; `spawn` says that
    /// it makes the reserved `entity`.
    fn push<F>(&mut self, what: &'static str, entity: Option<Entity>, spawn: bool, f: F)
    where
        F: FnOnce(&mut World) -> Result<(), EntityError> + Send + Sync + 'static,
    {
        // Room for the record first: once the closure is written, nothing may fail before the
        // record that owns it is in.
        self.commands.reserve(1);
        let offset = self.bytes.len();
        let size = mem::size_of::<F>();
        self.bytes.reserve(size);
        // SAFETY:
        // - `reserve` made room for `size` bytes past `len`, inside one allocation; the write
        //   is unaligned, as the byte buffer has no alignment to offer.
        // - `set_len`: those bytes now hold the closure (`MaybeUninit` needs no initialising).
        unsafe {
            self.bytes.as_mut_ptr().add(offset).cast::<F>().write_unaligned(f);
            self.bytes.set_len(offset + size);
        }
        self.commands.push(Command {
            run: run_payload::<F>,
            drop: drop_payload::<F>,
            offset,
            what,
            entity,
            spawn,
        });
    }

    /// Applies every command in order, emptying the buffer (and keeping its capacity).
    ///
    /// Its spawns place their entities straight into their tables when they are the oldest
    /// pending reservations ([`World::spawn_reserved`]); ids reserved elsewhere and not
    /// spawned by this buffer stay reserved until the world's next flush (a `Schedule`
    /// flushes after applying its buffers).
    ///
    /// If a command panics (a custom closure, or a component's `Drop` run by a replace or a
    /// despawn), the rest of the buffer is thrown away as by [`CommandQueue::discard`] (the
    /// panicking spawn's entity too), then the panic continues: nothing is left half-made.
    ///
    /// # Panics
    /// If the buffer holds commands made with [`Commands::new`] for another world (nothing of
    /// `world` changes then, and the buffer keeps its commands).
    #[track_caller]
    pub fn apply(&mut self, world: &mut World, stats: &mut CommandStats) {
        self.check_world("apply", world);
        self.world = None;
        let mut commands = mem::take(&mut self.commands);
        let mut bytes = mem::take(&mut self.bytes);
        let base = bytes.as_mut_ptr();
        let mut next = 0;
        // Reserved entities are not flushed first: a spawn of the oldest pending one places it
        // straight into its table (`World::spawn_reserved`), and despawns need no flush. (The
        // look-ahead below reads a pending entity's meta only once it exists.)
        while let Some(&command) = commands.get(next) {
            next += 1;
            prefetch_ahead(&commands, next, world);
            // SAFETY: `command`'s closure is at `offset` in `bytes` and was neither run nor
            // dropped (`next` moved past it first; the rest are dropped below on a panic).
            let ran = catch_unwind(AssertUnwindSafe(|| unsafe {
                (command.run)(base.add(command.offset), world)
            }));
            match ran {
                Ok(Ok(())) => stats.applied += 1,
                Ok(Err(error)) => {
                    // A refused spawn (a bundle that repeats a component, memory refused).
                    command.undo_spawn(world);
                    stats.skip(command.what, command.entity, &error);
                }
                Err(payload) => {
                    command.undo_spawn(world);
                    DropPayloads { commands: &commands, next, base, world: Some(world) }.run();
                    resume_unwind(payload);
                }
            }
        }
        // Every closure was consumed; keep both allocations for the next frame.
        commands.clear();
        bytes.clear();
        self.commands = commands;
        self.bytes = bytes;
    }

    /// Throws the buffer away; entities reserved by `spawn` are made and despawned at once, so
    /// no empty entity is left behind.
    ///
    /// # Panics
    /// As [`CommandQueue::apply`], if the commands were made for another world.
    #[track_caller]
    pub fn discard(&mut self, world: &mut World) {
        self.check_world("discard", world);
        self.world = None;
        let commands = mem::take(&mut self.commands);
        let base = self.bytes.as_mut_ptr();
        DropPayloads { commands: &commands, next: 0, base, world: Some(world) }.run();
        self.bytes.clear();
    }
}

impl CommandQueue {
    /// Panics, changing nothing, if the buffered commands were made for a world other than
    /// `world`.
    #[track_caller]
    fn check_world(&self, what: &str, world: &World) {
        if let Some(id) = self.world
            && id != world.id()
            && !self.is_empty()
        {
            panic!(
                "CommandQueue::{what}: its {} commands were made with `Commands::new` for \
                 another world (their entity ids were reserved there); {what} them on that world",
                self.len()
            );
        }
    }
}

impl Drop for CommandQueue {
    /// Drops the closures of commands never applied (their reserved entities, with no world
    /// here, are made empty at the world's next flush).
    fn drop(&mut self) {
        let commands = mem::take(&mut self.commands);
        let base = self.bytes.as_mut_ptr();
        DropPayloads { commands: &commands, next: 0, base, world: None }.run();
    }
}

/// Starts loading the meta of the entity of the command [`BATCH_META_AHEAD`] past `next`, and
/// the row of the one [`BATCH_ROW_AHEAD`] past it. A despawn (or insert, or remove) of a random
/// entity among many waits on cache misses: its meta, then its row in every column. Asked for
/// this far ahead, they arrive while the commands before it run, as in
/// [`World::despawn_batch`].
#[inline]
fn prefetch_ahead(commands: &[Command], next: usize, world: &World) {
    if let Some(entity) = commands.get(next + BATCH_META_AHEAD).and_then(|c| c.entity) {
        world.prefetch_entity(entity);
    }
    if let Some(entity) = commands.get(next + BATCH_ROW_AHEAD).and_then(|c| c.entity) {
        world.prefetch_entity_row(entity);
    }
}

/// Buffers structural changes for later: a system asks for them while the world is shared, and
/// they are applied in the schedule's order, at the next sync point or at the end of the
/// schedule's run. Until then no system sees them. A sync point is an
/// [`ApplyDeferred`](crate::ApplyDeferred), or the one the schedule puts between this system
/// and every system ordered after it
/// ([automatic sync points](crate::Schedule#automatic-sync-points)); so a system ordered after
/// a spawner sees the spawned entities, and one that is not ordered after it may run before
/// they are applied (and then sees them in the next run).
///
/// # Entities spawned
/// [`Commands::spawn`] hands back the new [`Entity`] at once: its id is reserved through
/// `&World` ([`World::reserve_entity`]) and the entity is made when the buffer is applied. The
/// id can go into other commands, or into components, right away. (As two systems that may
/// reserve ids are ordered like conflicting ones, the ids handed out are the same on any number
/// of threads.)
///
/// # Commands that cannot apply
/// A command whose entity is gone by then (despawned earlier in the same buffer, or by an
/// earlier system's buffer) is skipped and counted in [`CommandStats`]
/// ([`Schedule::command_stats`](crate::Schedule::command_stats)), never a panic or a half-made
/// entity; a spawn whose bundle is refused (it repeats a component type) is skipped and counted
/// too, and its reserved entity does not stay behind.
///
/// # Commands that panic
/// A command that panics when it is applied (a closure of [`Commands::add`], a component's
/// `Drop`) throws away the rest of its buffer; the other buffers are still applied, and the run
/// returns the panic (see [when a command panics](crate::Schedule#when-a-command-panics)). The
/// commands of a system that panicked are thrown away unapplied.
pub struct Commands<'w, 's> {
    queue: &'s mut CommandQueue,
    world: &'w World,
}

impl<'w, 's> Commands<'w, 's> {
    /// Commands that push to `queue`, reserving entities in `world`. The queue remembers
    /// `world` until it is applied or discarded, which must then be done on `world`.
    ///
    /// # Panics
    /// If `queue` still holds commands made for another world: apply or discard them first.
    #[track_caller]
    pub fn new(queue: &'s mut CommandQueue, world: &'w World) -> Self {
        if queue.world.is_some_and(|id| id != world.id()) && !queue.is_empty() {
            panic!(
                "Commands::new: the queue still holds {} commands made for another world; apply \
                 or discard them on that world before buffering commands for this one",
                queue.len()
            );
        }
        queue.world = Some(world.id());
        Self { queue, world }
    }

    /// Spawns an entity with `bundle`; its id is usable at once (in other commands, or stored
    /// in components), the entity exists once the buffer is applied.
    ///
    /// # Panics
    /// When every entity index is in use, reserved or retired ([`World::reserve_entity`]).
    #[track_caller]
    pub fn spawn<B: Bundle>(&mut self, bundle: B) -> Entity {
        let entity = self.world.reserve_entity();
        self.queue
            .push("spawn", Some(entity), true, move |world| world.spawn_reserved(entity, bundle));
        entity
    }

    /// Spawns an entity for each bundle `bundles` yields, when the buffer is applied, as one
    /// [`World::spawn_batch`] (rows written a room-full at a time): the way to spawn many
    /// entities from a system (a burst of particles). Their ids are not handed out; spawn with
    /// [`Commands::spawn`] what must be named before the buffer is applied.
    ///
    /// The iterator runs when the buffer is applied, so it is stored in the buffer (hence
    /// `Send + Sync + 'static`; collect into a `Vec` first what borrows from the system). As
    /// with `World::spawn_batch`, a bundle that repeats a component type, or memory refused,
    /// panics when applied: the rest of this buffer is thrown away and the schedule's run
    /// returns the panic, whose message says where `spawn_batch` was called.
    #[track_caller]
    pub fn spawn_batch<I>(&mut self, bundles: I)
    where
        I: IntoIterator,
        I::Item: Bundle,
        I::IntoIter: Send + Sync + 'static,
    {
        let bundles = bundles.into_iter();
        let caller = Location::caller();
        self.push("spawn_batch", None, move |world| {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| world.spawn_batch(bundles))) {
                // The world's own refusal (not a panic of the iterator): say whose it was.
                match payload.downcast_ref::<String>() {
                    Some(message) if message.starts_with("World::spawn") => {
                        resume_unwind(Box::new(format!(
                            "Commands::spawn_batch (buffered at {caller}): {message}"
                        )))
                    }
                    _ => resume_unwind(payload),
                }
            }
            Ok(())
        });
    }

    /// Despawns `entity`.
    pub fn despawn(&mut self, entity: Entity) {
        self.push("despawn", Some(entity), move |world| world.despawn(entity));
    }

    /// Adds `bundle` to `entity` (replacing components it has).
    pub fn insert<B: Bundle>(&mut self, entity: Entity, bundle: B) {
        self.push("insert", Some(entity), move |world| world.insert(entity, bundle));
    }

    /// Removes the components of `B` from `entity` (dropping them).
    pub fn remove<B: Bundle>(&mut self, entity: Entity) {
        self.push("remove", Some(entity), move |world| world.try_remove::<B>(entity).map(drop));
    }

    /// Inserts (or replaces) a resource.
    pub fn insert_resource<R: Send + Sync + 'static>(&mut self, value: R) {
        self.push("insert_resource", None, move |world| {
            world.insert_resource(value);
            Ok(())
        });
    }

    /// Removes (and drops) resource `R`, if there is one.
    pub fn remove_resource<R: Send + Sync + 'static>(&mut self) {
        self.push("remove_resource", None, move |world| {
            world.remove_resource::<R>();
            Ok(())
        });
    }

    /// Runs `f` with the world, in order with the other commands.
    pub fn add(&mut self, f: impl FnOnce(&mut World) + Send + Sync + 'static) {
        self.push("custom command", None, move |world| {
            f(world);
            Ok(())
        });
    }

    /// Triggers `event` for its observers ([`World::trigger`]).
    pub fn trigger<E: Event>(&mut self, event: E) {
        self.push("trigger", None, move |world| {
            world.trigger(event);
            Ok(())
        });
    }

    /// Triggers `event` at `targets` for their observers ([`World::trigger_targets`]).
    pub fn trigger_targets<E: Event>(
        &mut self,
        event: E,
        targets: impl IntoIterator<Item = Entity>,
    ) {
        let targets: Vec<Entity> = targets.into_iter().collect();
        self.push("trigger", None, move |world| {
            world.trigger_targets(event, targets);
            Ok(())
        });
    }

    /// Commands about one entity.
    pub fn entity(&mut self, entity: Entity) -> EntityCommands<'_, 'w, 's> {
        EntityCommands { commands: self, entity }
    }

    fn push(
        &mut self,
        what: &'static str,
        entity: Option<Entity>,
        apply: impl FnOnce(&mut World) -> Result<(), EntityError> + Send + Sync + 'static,
    ) {
        self.queue.push(what, entity, false, apply);
    }
}

/// Commands about one entity: `commands.entity(e).insert((A,)).remove::<(B,)>()`.
pub struct EntityCommands<'a, 'w, 's> {
    commands: &'a mut Commands<'w, 's>,
    entity: Entity,
}

impl EntityCommands<'_, '_, '_> {
    /// The entity.
    pub fn id(&self) -> Entity {
        self.entity
    }

    /// Adds `bundle`.
    pub fn insert<B: Bundle>(self, bundle: B) -> Self {
        self.commands.insert(self.entity, bundle);
        self
    }

    /// Removes `B`.
    pub fn remove<B: Bundle>(self) -> Self {
        self.commands.remove::<B>(self.entity);
        self
    }

    /// Despawns the entity.
    pub fn despawn(self) {
        self.commands.despawn(self.entity);
    }
}

// SAFETY: touches only its own buffer and `World::reserve_entity` (atomic, through `&World`).
// It marks the system as reserving entity ids: systems with `Commands` (or `&World`, which can
// reserve too) keep their schedule order among themselves, so the ids `spawn` hands out are the
// same on 1 thread or 64.
unsafe impl SystemParam for Commands<'_, '_> {
    type State = CommandQueue;
    type Item<'w, 's> = Commands<'w, 's>;

    const DEFERRED: bool = true;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        meta.access.reserves_entities = true;
        Ok(())
    }

    fn init_state(_: &mut World, _: &mut SystemMeta) -> Result<CommandQueue, ScheduleError> {
        Ok(CommandQueue::default())
    }

    unsafe fn get_param<'w, 's>(
        state: &'s mut CommandQueue,
        _: &SystemMeta,
        world: &'w World,
        _: u32,
    ) -> Commands<'w, 's> {
        Commands { queue: state, world }
    }

    fn apply(state: &mut CommandQueue, world: &mut World, stats: &mut CommandStats) {
        state.apply(world, stats);
    }

    fn discard(state: &mut CommandQueue, world: &mut World) {
        state.discard(world);
    }
}

#[cfg(test)]
mod tests;
