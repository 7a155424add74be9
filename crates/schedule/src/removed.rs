//! [`RemovedComponents<T>`]: a system parameter that reads which entities lost a `T`, from the
//! world's removal log of `T` ([`World::track_removals`]), with its own cursor as an
//! [`EventReader`](crate::EventReader) has.

use std::any::TypeId;
use std::marker::PhantomData;

use folio_query::{BufferCursor, Component, Entity, RemovedLog, World};

use crate::error::ScheduleError;
use crate::param::{SystemMeta, SystemParam};

/// The entities that lost a `T` (by `remove`, `despawn` or `clear`, directly or through
/// commands) since this system last read, oldest first. Each system reads each removal once,
/// during the schedule run it happened in (if the system runs after it) or the next one: the
/// schedule ages the log once per run, as it does events. Removals are logged from the first
/// time a system with this parameter is initialized on the world.
///
/// By default every schedule with a reader of `T` ages `T`'s log when it runs (and so does
/// [`World::update_removals`]): with several schedules per frame, let the one that runs once a
/// frame age every log and the others none ([`Schedule::set_event_aging`](crate::Schedule::set_event_aging)),
/// or a removal can age out before a reader in another one (or in the same one, ordered before
/// the change) sees it; [`RemovedComponents::missed`] counts those.
///
/// ```
/// use folio_schedule::prelude::*;
///
/// struct Body(u32); // a handle into a physics engine
///
/// fn free_bodies(mut removed: RemovedComponents<Body>, mut freed: ResMut<Vec<Entity>>) {
///     freed.extend(removed.read());
/// }
///
/// let mut world = World::new();
/// world.insert_resource(Vec::<Entity>::new());
/// let mut schedule = Schedule::new();
/// schedule.add_systems(free_bodies);
/// schedule.run(&mut world).unwrap(); // initializes the system: Body's removals are logged
/// let e = world.spawn((Body(7),));
/// world.despawn(e).unwrap();
/// schedule.run(&mut world).unwrap();
/// assert_eq!(world.resource::<Vec<Entity>>().unwrap(), &[e]);
/// ```
///
/// No access is recorded: the log changes only through `&mut World` (commands applied at
/// sync points, exclusive systems), never while systems that read it run.
pub struct RemovedComponents<'w, 's, T: Component> {
    log: Option<&'w RemovedLog>,
    cursor: &'s mut RemovedCursor<T>,
}

/// A [`RemovedComponents`] reader's position in its log.
pub struct RemovedCursor<T> {
    cursor: BufferCursor,
    _marker: PhantomData<fn() -> T>,
}

impl<T> Default for RemovedCursor<T> {
    fn default() -> Self {
        Self { cursor: BufferCursor::default(), _marker: PhantomData }
    }
}

impl<'w, T: Component> RemovedComponents<'w, '_, T> {
    /// The removals not read yet by this system, oldest first. An entity may appear more than
    /// once (a `T` removed, inserted again, removed again), and may be alive.
    pub fn read(&mut self) -> impl Iterator<Item = Entity> + use<'w, T> {
        let log = self.log.map(|log| self.cursor.cursor.read(log));
        log.into_iter().flatten().copied()
    }

    /// How many removals are unread.
    pub fn len(&self) -> usize {
        self.log.map_or(0, |log| self.cursor.cursor.unread(log))
    }

    /// Whether no removal is unread.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks every removal read.
    pub fn clear(&mut self) {
        if let Some(log) = self.log {
            self.cursor.cursor.clear(log);
        }
    }

    /// Removals this system missed because they aged out before it ran.
    pub fn missed(&self) -> u64 {
        self.cursor.cursor.missed()
    }
}

/// The key of `T`'s removal-log updater among a schedule's event updaters.
struct RemovalsOf<T>(PhantomData<T>);

fn age_removals<T: Component>(world: &mut World) {
    world.update_removals_of::<T>();
}

// SAFETY: records nothing, and reads only the removal log of `T`, which changes only through
// `&mut World` (never while a system runs with the world shared); the cursor is its own state.
unsafe impl<T: Component> SystemParam for RemovedComponents<'_, '_, T> {
    type State = RemovedCursor<T>;
    type Item<'w, 's> = RemovedComponents<'w, 's, T>;

    fn access(_: &mut SystemMeta) -> Result<(), ScheduleError> {
        Ok(())
    }

    fn init_state(
        world: &mut World,
        meta: &mut SystemMeta,
    ) -> Result<RemovedCursor<T>, ScheduleError> {
        world.track_removals::<T>();
        crate::event::add_updater(world, meta, (TypeId::of::<RemovalsOf<T>>(), age_removals::<T>));
        // Read from the log's present on: what was logged before this system existed (for
        // another reader) is not news to it.
        let next = world.removed_log::<T>().map_or(0, RemovedLog::next_id);
        Ok(RemovedCursor { cursor: BufferCursor::at(next), _marker: PhantomData })
    }

    unsafe fn get_param<'w, 's>(
        state: &'s mut RemovedCursor<T>,
        _: &SystemMeta,
        world: &'w World,
        _: u32,
    ) -> RemovedComponents<'w, 's, T> {
        RemovedComponents { log: world.removed_log::<T>(), cursor: state }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::prelude::*;

    #[derive(Debug)]
    struct Body(#[allow(dead_code)] u32);
    struct Doomed;

    type Seen = Arc<Mutex<Vec<Vec<Entity>>>>;

    /// A system that records, per run, the `Body` removals it read.
    fn reader(seen: &Seen) -> impl FnMut(RemovedComponents<Body>) + Send + Sync + 'static {
        let seen = seen.clone();
        move |mut removed: RemovedComponents<Body>| {
            seen.lock().unwrap().push(removed.read().collect());
        }
    }

    fn despawn_doomed(mut commands: Commands, q: Query<Entity, With<Doomed>>) {
        for e in q.iter() {
            commands.despawn(e);
        }
    }

    #[test]
    fn removals_through_commands_are_read_once_by_each_reader_in_the_next_run() {
        let mut world = World::new();
        let (early, late): (Seen, Seen) = Default::default();
        let mut schedule = Schedule::new();
        // No sync point: the commands apply at the end of the run, after both readers.
        schedule
            .add_systems((reader(&early), despawn_doomed, reader(&late)).chain_ignore_deferred());
        let a = world.spawn((Body(1), Doomed));
        let b = world.spawn((Body(2),));
        schedule.run(&mut world).unwrap(); // `a` goes when the commands apply, after both
        world.insert(b, (Doomed,)).unwrap();
        schedule.run(&mut world).unwrap(); // `b` goes
        schedule.run(&mut world).unwrap();
        schedule.run(&mut world).unwrap();
        let want = vec![vec![], vec![a], vec![b], vec![]];
        assert_eq!(*early.lock().unwrap(), want);
        assert_eq!(*late.lock().unwrap(), want);
    }

    #[test]
    fn a_reader_after_an_automatic_sync_point_reads_removals_in_the_same_run() {
        let mut world = World::new();
        let (early, late): (Seen, Seen) = Default::default();
        let mut schedule = Schedule::new();
        schedule.add_systems((reader(&early), despawn_doomed, reader(&late)).chain());
        let a = world.spawn((Body(1), Doomed));
        let b = world.spawn((Body(2),));
        schedule.run(&mut world).unwrap(); // `a` goes at the sync point, between the readers
        world.insert(b, (Doomed,)).unwrap();
        schedule.run(&mut world).unwrap(); // `b` goes
        schedule.run(&mut world).unwrap();
        schedule.run(&mut world).unwrap();
        assert_eq!(*early.lock().unwrap(), vec![vec![], vec![a], vec![b], vec![]]);
        assert_eq!(*late.lock().unwrap(), vec![vec![a], vec![b], vec![], vec![]]);
    }

    #[test]
    fn removals_made_before_a_reader_runs_in_the_same_run_are_read_then() {
        let mut world = World::new();
        let seen: Seen = Default::default();
        let mut schedule = Schedule::new();
        let strip = |world: &mut World| {
            let bodies: Vec<Entity> =
                world.query::<(Entity, &Body)>().iter(world).map(|(e, _)| e).collect();
            for e in bodies {
                world.remove::<(Body,)>(e).unwrap();
            }
        };
        schedule.add_systems((strip, reader(&seen)).chain());
        schedule.run(&mut world).unwrap();
        let e = world.spawn((Body(3),));
        schedule.run(&mut world).unwrap();
        schedule.run(&mut world).unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![vec![], vec![e], vec![]]);
        assert!(world.contains(e), "removing a component is not a despawn");
    }

    #[test]
    fn each_schedule_with_a_reader_ages_the_log() {
        // As documented: two schedules reading `Body` each age its log once per run, so a
        // reader ordered before the despawn in the first never sees it.
        let mut world = World::new();
        let (early, other): (Seen, Seen) = Default::default();
        let missed = Arc::new(Mutex::new(0));
        let (s, m) = (early.clone(), missed.clone());
        let mut first = Schedule::new();
        first.add_systems(
            (
                move |mut removed: RemovedComponents<Body>| {
                    s.lock().unwrap().push(removed.read().collect());
                    *m.lock().unwrap() = removed.missed();
                },
                despawn_doomed,
            )
                .chain(),
        );
        let mut second = Schedule::new();
        second.add_systems(reader(&other));
        second.initialize(&mut world).unwrap(); // its reader exists before the despawn
        let e = world.spawn((Body(1), Doomed));
        for _ in 0..2 {
            first.run(&mut world).unwrap();
            second.run(&mut world).unwrap();
        }
        assert_eq!(*other.lock().unwrap(), vec![vec![e], vec![]]);
        assert_eq!(*early.lock().unwrap(), vec![vec![], vec![]]);
        assert_eq!(*missed.lock().unwrap(), 1);
    }

    #[test]
    fn a_reader_that_runs_rarely_counts_what_it_missed() {
        let mut world = World::new();
        let seen: Seen = Default::default();
        let mut schedule = Schedule::new();
        let every_third = |mut n: Local<u32>| {
            *n += 1;
            (*n).is_multiple_of(3)
        };
        let missed = Arc::new(Mutex::new(0));
        let m = missed.clone();
        let s = seen.clone();
        schedule.add_systems(
            (move |mut removed: RemovedComponents<Body>| {
                s.lock().unwrap().push(removed.read().collect());
                *m.lock().unwrap() = removed.missed();
            })
            .run_if(every_third),
        );
        let mut gone = Vec::new();
        for _ in 0..6 {
            let e = world.spawn((Body(0),));
            world.despawn(e).unwrap();
            gone.push(e);
            schedule.run(&mut world).unwrap();
        }
        // Runs 3 and 6 read: each time the removals of its own run and the one before. The
        // first was never logged (made before the first run initialized the reader); the
        // fourth aged out before run 6: missed.
        assert_eq!(*seen.lock().unwrap(), vec![gone[1..3].to_vec(), gone[4..6].to_vec()]);
        assert_eq!(*missed.lock().unwrap(), 1);
    }
}
