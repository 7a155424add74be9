//! [`Commands`]: structural changes a system asks for while the world is shared, applied later
//! (at the end of the schedule or at a sync point) in the schedule's order.
//!
//! `spawn` hands back the new [`Entity`] at once: its id is reserved through `&World`
//! (`World::reserve_entity`) and the entity is made when the buffer is applied. A command whose
//! entity is gone by then (despawned earlier in the same buffer, or by an earlier system's
//! buffer) is skipped and counted in [`CommandStats`], never a panic or a half-made entity; a
//! spawn whose bundle is refused (it repeats a component type) is skipped and counted too, and
//! its reserved entity does not stay behind.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use folio_query::{Bundle, Entity, EntityError, World};

use crate::error::ScheduleError;
use crate::param::{SystemMeta, SystemParam};

type Apply = Box<dyn FnOnce(&mut World) -> Result<(), EntityError> + Send + Sync>;

enum Command {
    /// Make the reserved `entity` with the components `insert` adds.
    Spawn { entity: Entity, insert: Apply },
    /// Anything else: despawn, insert, remove, resources, custom closures.
    Other { what: &'static str, entity: Option<Entity>, apply: Apply },
}

/// A system's buffer of commands.
#[derive(Default)]
pub struct CommandQueue {
    commands: Vec<Command>,
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

impl CommandQueue {
    /// The number of buffered commands.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// Whether none is buffered.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Applies every command in order, emptying the buffer.
    ///
    /// If a command panics (a custom closure, or a component's `Drop` run by a replace or a
    /// despawn), the rest of the buffer is thrown away as by [`CommandQueue::discard`] (the
    /// panicking spawn's entity too), then the panic continues: nothing is left half-made.
    pub fn apply(&mut self, world: &mut World, stats: &mut CommandStats) {
        let mut commands = std::mem::take(&mut self.commands).into_iter();
        while let Some(command) = commands.next() {
            let spawned = match &command {
                Command::Spawn { entity, .. } => Some(*entity),
                Command::Other { .. } => None,
            };
            let ran = catch_unwind(AssertUnwindSafe(|| match command {
                Command::Spawn { entity, insert } => ("spawn", Some(entity), insert(world)),
                Command::Other { what, entity, apply } => (what, entity, apply(world)),
            }));
            match ran {
                Ok((_, _, Ok(()))) => stats.applied += 1,
                Ok((what, entity, Err(error))) => {
                    // A refused spawn (a bundle that repeats a component, memory refused)
                    // must not leave its reserved entity behind, empty.
                    if let Some(entity) = spawned {
                        let _ = world.despawn(entity);
                    }
                    stats.skip(what, entity, &error);
                }
                Err(payload) => {
                    self.commands.extend(commands);
                    self.discard(world);
                    if let Some(entity) = spawned {
                        let _ = world.despawn(entity);
                    }
                    resume_unwind(payload);
                }
            }
        }
    }

    /// Throws the buffer away; entities reserved by `spawn` are made and despawned at once, so
    /// no empty entity is left behind.
    pub fn discard(&mut self, world: &mut World) {
        for command in self.commands.drain(..) {
            if let Command::Spawn { entity, .. } = command {
                world.flush();
                let _ = world.despawn(entity);
            }
        }
    }
}

/// Buffers structural changes for later (see the module docs).
pub struct Commands<'w, 's> {
    queue: &'s mut CommandQueue,
    world: &'w World,
}

impl<'w, 's> Commands<'w, 's> {
    /// Commands that push to `queue`, reserving entities in `world`.
    pub fn new(queue: &'s mut CommandQueue, world: &'w World) -> Self {
        Self { queue, world }
    }

    /// Spawns an entity with `bundle`; its id is usable at once (in other commands, or stored
    /// in components), the entity exists once the buffer is applied.
    pub fn spawn<B: Bundle>(&mut self, bundle: B) -> Entity {
        let entity = self.world.reserve_entity();
        self.queue.commands.push(Command::Spawn {
            entity,
            insert: Box::new(move |world: &mut World| world.insert(entity, bundle)),
        });
        entity
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

    /// Runs `f` with the world, in order with the other commands.
    pub fn add(&mut self, f: impl FnOnce(&mut World) + Send + Sync + 'static) {
        self.push("custom command", None, move |world| {
            f(world);
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
        self.queue.commands.push(Command::Other { what, entity, apply: Box::new(apply) });
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
// It marks the system as reserving entity ids: systems with `Commands` keep their schedule
// order among themselves, so the ids `spawn` hands out are the same on 1 thread or 64.
unsafe impl SystemParam for Commands<'_, '_> {
    type State = CommandQueue;
    type Item<'w, 's> = Commands<'w, 's>;

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
