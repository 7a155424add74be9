//! Events: [`Events<E>`] is a double-buffered queue kept as a resource; [`EventWriter`] sends,
//! [`EventReader`] reads with its own cursor. An event can be read during the schedule run it
//! was sent in and the next one; by default a schedule ages every event type its systems (and
//! run conditions) use once per run, after the systems and commands.
//!
//! With several schedules per frame, each would age the types it uses, so an event sent in a
//! fixed-step schedule that runs three times a frame would be gone before the frame's other
//! schedule read it. [`Schedule::set_event_aging`](crate::Schedule::set_event_aging) chooses
//! per schedule ([`EventAging`]): the frame's main schedule ages every event type of the world
//! ([`EventAging::All`]), the others age nothing ([`EventAging::Never`]), and an event lives
//! two frames whatever runs in between. The world keeps a registry of every event queue and
//! removal log a system parameter has been initialized for; [`age_all_events`] ages them all
//! by hand (a game loop without a main schedule). [`Events::update`] ages one queue.
//!
//! Sending through an [`EventWriter`] marks the `Events<E>` resource changed at the sending
//! system's tick, as a write through `ResMut` does, and aging does not: so
//! [`resource_changed::<Events<E>>`](crate::resource_changed) means "an event was sent since
//! the condition last looked".

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use folio_query::{BufferCursor, DoubleBuffer, ResourceTicks, TypeKey, World};

use crate::error::ScheduleError;
use crate::param::{EventUpdater, SystemMeta, SystemParam, resource_ptrs};

/// The queue of events of type `E`: a [`DoubleBuffer`] kept as a resource.
pub struct Events<E> {
    buffer: DoubleBuffer<E>,
}

impl<E> Default for Events<E> {
    fn default() -> Self {
        Self { buffer: DoubleBuffer::new() }
    }
}

impl<E> Events<E> {
    /// Sends an event.
    pub fn send(&mut self, event: E) {
        self.buffer.push(event);
    }

    /// The id the next event will get.
    pub fn next_id(&self) -> u64 {
        self.buffer.next_id()
    }

    /// Events still readable.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// Whether none is readable.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// Takes every readable event out, oldest first (the queue stays, empty). A reader that
    /// had not read them counts them as missed ([`EventReader::missed`]).
    pub fn drain(&mut self) -> impl Iterator<Item = E> + use<E> {
        self.buffer.drain()
    }

    /// Drops every readable event, as [`Events::drain`] without taking them.
    pub fn clear(&mut self) {
        self.buffer.clear();
    }

    /// Ages the queue: events sent before the previous update are dropped.
    pub fn update(&mut self) {
        self.buffer.update();
    }

    /// Events with ids from `cursor` on, and how many were missed (dropped before they were
    /// read). A cursor past the end belongs to a queue this one replaced: it reads all of this
    /// one.
    pub fn read_from(&self, cursor: u64) -> (impl Iterator<Item = &E>, u64) {
        self.buffer.read_from(cursor)
    }

    /// Ages the `E` events in `world`, if it has them. Aging sends nothing, so it does not
    /// mark the queue changed (as [`World::resource_mut`] would).
    pub fn update_in(world: &mut World)
    where
        E: Send + Sync + 'static,
    {
        if let Some(events) = world.resource_ptr::<Events<E>>() {
            // SAFETY: a live `Events<E>` behind a pointer with the resource cell's provenance;
            // `&mut World` keeps every other reference to it from being alive.
            unsafe { &mut *events.as_ptr() }.update();
        }
    }
}

/// Reads events of type `E`; each reader sees each event once.
pub struct EventReader<'w, 's, E> {
    events: &'w Events<E>,
    cursor: &'s mut EventCursor<E>,
}

/// A reader's position in an event queue.
pub struct EventCursor<E> {
    cursor: BufferCursor,
    _marker: PhantomData<fn() -> E>,
}

impl<E> Default for EventCursor<E> {
    fn default() -> Self {
        Self { cursor: BufferCursor::default(), _marker: PhantomData }
    }
}

impl<'w, E> EventReader<'w, '_, E> {
    /// The events not read yet by this reader, oldest first.
    pub fn read(&mut self) -> impl Iterator<Item = &'w E> + use<'w, E> {
        self.cursor.cursor.read(&self.events.buffer)
    }

    /// How many unread events there are.
    pub fn len(&self) -> usize {
        self.cursor.cursor.unread(&self.events.buffer)
    }

    /// Whether there is no unread event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks every event read.
    pub fn clear(&mut self) {
        self.cursor.cursor.clear(&self.events.buffer);
    }

    /// Events this reader missed because they aged out before it ran.
    pub fn missed(&self) -> u64 {
        self.cursor.cursor.missed()
    }
}

/// Sends events of type `E`, marking the `Events<E>` resource changed when it does (as
/// `ResMut` marks a resource it writes).
pub struct EventWriter<'w, E> {
    events: &'w mut Events<E>,
    ticks: &'w mut ResourceTicks,
    this_run: u32,
}

impl<E> EventWriter<'_, E> {
    /// Sends `event`.
    pub fn send(&mut self, event: E) {
        self.ticks.changed = self.this_run;
        self.events.send(event);
    }

    /// Sends every event of `events` (an empty batch marks nothing).
    pub fn send_batch(&mut self, events: impl IntoIterator<Item = E>) {
        if self.events.buffer.extend(events) != 0 {
            self.ticks.changed = self.this_run;
        }
    }
}

/// The panic of an event parameter (`P`) whose queue was removed from the world after its
/// system was initialized (which inserted it): names the system, the parameter and the queue.
#[cold]
fn events_removed<P, E>(meta: &SystemMeta) -> ! {
    panic!(
        "system `{}`: parameter `{}` needs the {} resource, which was removed from the world \
         after the systems reading or sending it were initialized; insert it again before the \
         schedule runs",
        meta.name,
        crate::param::short_type_name(std::any::type_name::<P>()),
        std::any::type_name::<Events<E>>()
    )
}

fn init_events<E: Send + Sync + 'static>(world: &mut World, meta: &mut SystemMeta) {
    if !world.contains_resource::<Events<E>>() {
        world.insert_resource(Events::<E>::default());
    }
    add_updater(world, meta, (std::any::TypeId::of::<Events<E>>(), Events::<E>::update_in));
}

/// Which event queues (and removal logs, see
/// [`RemovedComponents`](crate::RemovedComponents)) a schedule ages at the end of each run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EventAging {
    /// The ones its systems and run conditions use: right for a world with one schedule.
    #[default]
    Used,
    /// Every one registered in the world ([`age_all_events`]), each once, whether this
    /// schedule uses it or not: for the schedule that runs once per frame when others run
    /// more or less often.
    All,
    /// None: for a schedule that runs several times a frame, or not at all in some, while
    /// another schedule (or [`age_all_events`]) ages the events it uses once per frame.
    Never,
}

/// The world's registry of agers: one per event queue and removal log that a system parameter
/// (or a schedule, for its systems' parameters) has been initialized for. Append-only; each
/// type once.
pub(crate) struct EventRegistry {
    updaters: Vec<EventUpdater>,
    /// Tells a schedule's copy of `updaters` apart from a newer list: taken from
    /// [`NEXT_REGISTRY_VERSION`] whenever the list grows (a world's registry, removed and made
    /// again, never repeats a version).
    version: u64,
}

static NEXT_REGISTRY_VERSION: AtomicU64 = AtomicU64::new(1);

impl EventRegistry {
    /// The registered agers and the list's version.
    pub(crate) fn updaters(&self) -> (&[EventUpdater], u64) {
        (&self.updaters, self.version)
    }
}

/// Registers `updater` in `world`'s registry (once per type).
pub(crate) fn register_updater(world: &mut World, updater: EventUpdater) {
    let registry = match world.resource_mut::<EventRegistry>() {
        Some(registry) => registry,
        None => {
            world.insert_resource(EventRegistry { updaters: Vec::new(), version: 0 });
            world.resource_mut::<EventRegistry>().expect("inserted above")
        }
    };
    if registry.updaters.iter().all(|(id, _)| *id != updater.0) {
        registry.updaters.push(updater);
        registry.version = NEXT_REGISTRY_VERSION.fetch_add(1, Ordering::Relaxed);
    }
}

/// Adds `updater` to a system's agers and to `world`'s registry.
pub(crate) fn add_updater(world: &mut World, meta: &mut SystemMeta, updater: EventUpdater) {
    meta.event_updaters.push(updater);
    register_updater(world, updater);
}

/// Ages every event queue and removal log registered in `world` (see [`EventAging::All`]), each
/// once: what a game loop without a main schedule calls once per frame. A queue that is no
/// longer in the world is skipped.
pub fn age_all_events(world: &mut World) {
    let mut i = 0;
    while let Some(&(_, update)) =
        world.resource::<EventRegistry>().and_then(|registry| registry.updaters.get(i))
    {
        update(world);
        i += 1;
    }
}

// SAFETY: records a read of the `Events<E>` resource, the only thing it reads; the cursor is
// its own state.
unsafe impl<E: Send + Sync + 'static> SystemParam for EventReader<'_, '_, E> {
    type State = EventCursor<E>;
    type Item<'w, 's> = EventReader<'w, 's, E>;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        let name = meta.name.clone();
        let param = crate::param::short_type_name(std::any::type_name::<Self>());
        meta.access.add_resource_read(&name, TypeKey::of::<Events<E>>(), param)
    }

    fn init_state(
        world: &mut World,
        meta: &mut SystemMeta,
    ) -> Result<EventCursor<E>, ScheduleError> {
        init_events::<E>(world, meta);
        Ok(EventCursor::default())
    }

    unsafe fn get_param<'w, 's>(
        state: &'s mut EventCursor<E>,
        meta: &SystemMeta,
        world: &'w World,
        _: u32,
    ) -> EventReader<'w, 's, E> {
        let ptr =
            world.resource_ptr::<Events<E>>().unwrap_or_else(|| events_removed::<Self, E>(meta));
        // SAFETY: a live queue; the schedule lets no system write it while this one reads.
        EventReader { events: unsafe { ptr.as_ref() }, cursor: state }
    }
}

// SAFETY: records a write of the `Events<E>` resource, the only thing it touches.
unsafe impl<E: Send + Sync + 'static> SystemParam for EventWriter<'_, E> {
    type State = ();
    type Item<'w, 's> = EventWriter<'w, E>;

    fn access(meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        let name = meta.name.clone();
        let param = crate::param::short_type_name(std::any::type_name::<Self>());
        meta.access.add_resource_write(&name, TypeKey::of::<Events<E>>(), param)
    }

    fn init_state(world: &mut World, meta: &mut SystemMeta) -> Result<(), ScheduleError> {
        init_events::<E>(world, meta);
        Ok(())
    }

    unsafe fn get_param<'w>(
        _: &mut (),
        meta: &SystemMeta,
        world: &'w World,
        this_run: u32,
    ) -> EventWriter<'w, E> {
        let (events, ticks) =
            resource_ptrs::<Events<E>>(world).unwrap_or_else(|| events_removed::<Self, E>(meta));
        // SAFETY: a live queue and its ticks behind pointers with the resource cell's
        // provenance; the schedule lets no other system touch them while this one runs, and
        // the value and the ticks are disjoint fields of the cell, so the two `&mut` do not
        // overlap.
        let (events, ticks) = unsafe { (&mut *events.as_ptr(), &mut *ticks.as_ptr()) };
        EventWriter { events, ticks, this_run }
    }
}
