//! Events: how long an event lives, each reader seeing each event once, queues replaced or
//! removed, and event aging across schedules (`EventAging`, `age_all_events`).

use super::*;
use crate::{ScheduleError, age_all_events};

#[test]
fn events_live_for_two_runs_and_each_reader_sees_each_once() {
    #[derive(Debug, PartialEq)]
    struct Hit(u32);
    #[derive(Default)]
    struct Sent(u32);
    fn send(mut out: EventWriter<Hit>, mut n: Local<u32>, mut sent: ResMut<Sent>) {
        *n += 1;
        out.send(Hit(*n));
        sent.0 += 1;
    }
    fn read_after(mut hits: EventReader<Hit>, mut log: ResMut<Vec<u32>>) {
        log.extend(hits.read().map(|h| h.0));
    }
    fn read_before(mut hits: EventReader<Hit>, mut log: ResMut<Vec<(u32, u32)>>) {
        let seen: Vec<u32> = hits.read().map(|h| h.0).collect();
        log.extend(seen.into_iter().map(|h| (h, 0)));
    }
    let mut world = World::new();
    world.insert_resource(Vec::<u32>::new());
    world.insert_resource(Vec::<(u32, u32)>::new());
    world.insert_resource(Sent::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((read_before, send, read_after));
    for _ in 0..3 {
        schedule.run(&mut world).unwrap();
    }
    // The reader after the writer sees each event in the run it was sent.
    assert_eq!(world.resource::<Vec<u32>>().unwrap(), &[1, 2, 3]);
    // The reader before it sees each one run later, still exactly once.
    let before: Vec<u32> =
        world.resource::<Vec<(u32, u32)>>().unwrap().iter().map(|p| p.0).collect();
    assert_eq!(before, [1, 2]);
    // After two more runs without sending, the queue is empty.
    let mut quiet = Schedule::new();
    quiet.add_systems(read_after);
    // Run 3's event is still readable in the next run; run 2's aged out at the end of run 3.
    assert_eq!(world.resource::<Events<Hit>>().unwrap().len(), 1);
    quiet.run(&mut world).unwrap();
    // A new reader (its own cursor) still finds run 3's event, and only that one.
    assert_eq!(world.resource::<Vec<u32>>().unwrap(), &[1, 2, 3, 3]);
    assert!(world.resource::<Events<Hit>>().unwrap().is_empty());
    quiet.run(&mut world).unwrap();
    assert_eq!(world.resource::<Vec<u32>>().unwrap(), &[1, 2, 3, 3]);
}

#[test]
fn events_can_be_drained_or_cleared_outside_a_schedule() {
    struct Ping(u32);
    let mut world = World::new();
    let mut events = Events::default();
    events.send(Ping(1));
    events.update();
    events.send(Ping(2));
    world.insert_resource(events);
    let events = world.resource_mut::<Events<Ping>>().unwrap();
    assert_eq!(events.drain().map(|p| p.0).collect::<Vec<_>>(), [1, 2]);
    assert!(events.is_empty());
    events.send(Ping(3));
    events.clear();
    assert!(events.is_empty());
    assert_eq!(events.next_id(), 3, "ids go on after a clear");
}

#[test]
fn events_read_only_by_a_condition_still_age() {
    struct Ping;
    fn pinged(mut pings: EventReader<Ping>) -> bool {
        pings.read().count() > 0
    }
    let mut world = World::new();
    world.insert_resource(Log::default());
    let mut schedule = Schedule::new();
    schedule.add_systems(first.run_if(pinged));
    for _ in 0..10 {
        schedule.run(&mut world).unwrap();
        world.resource_mut::<Events<Ping>>().unwrap().send(Ping);
    }
    assert_eq!(world.resource::<Log>().unwrap().0.len(), 9);
    assert!(world.resource::<Events<Ping>>().unwrap().len() <= 2);
}

#[test]
fn a_reader_survives_its_queue_being_replaced() {
    struct Note(u32);
    fn read(mut notes: EventReader<Note>, mut seen: ResMut<Vec<u32>>) {
        assert!(notes.len() <= 2);
        seen.extend(notes.read().map(|n| n.0));
    }
    let mut world = World::new();
    world.insert_resource(Vec::<u32>::new());
    let mut schedule = Schedule::new();
    schedule.add_systems(read);
    world.insert_resource(Events::<Note>::default());
    for i in 0..3 {
        world.resource_mut::<Events<Note>>().unwrap().send(Note(i));
        schedule.run(&mut world).unwrap();
    }
    let mut fresh = Events::<Note>::default();
    fresh.send(Note(99));
    world.insert_resource(fresh);
    schedule.run(&mut world).unwrap();
    assert_eq!(world.resource::<Vec<u32>>().unwrap(), &[0, 1, 2, 99]);
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn an_event_queue_removed_after_initialization_is_an_error_that_names_it() {
    struct Shout;
    let mut schedule = Schedule::new();
    schedule.add_systems(|mut reader: EventReader<Shout>| reader.clear());
    let mut world = World::new();
    schedule.run(&mut world).unwrap();
    world.remove_resource::<Events<Shout>>();
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::SystemPanicked { message, .. } = &err else { panic!("{err}") };
    assert!(message.contains("Events<") && message.contains("Shout"), "{err}");
    assert!(message.contains("removed from the world"), "{err}");
    // Put back, the schedule runs again.
    world.insert_resource(Events::<Shout>::default());
    schedule.run(&mut world).unwrap();
}

#[derive(Debug)]
struct Tick(u32);

fn send_tick(mut out: EventWriter<Tick>, mut n: Local<u32>) {
    *n += 1;
    out.send(Tick(*n));
}

/// What the frame schedule's reader saw: the events, and how many it missed.
#[derive(Default)]
struct TickLog(Vec<u32>, u64);

fn read_ticks(mut ticks: EventReader<Tick>, mut log: ResMut<TickLog>) {
    log.0.extend(ticks.read().map(|t| t.0));
    log.1 = ticks.missed();
}

/// Four frames of a fixed-step schedule sending one event per step, three steps a frame, and
/// a frame schedule reading them once a frame, each schedule aging as told.
fn fixed_and_frame(fixed_aging: EventAging, frame_aging: EventAging) -> World {
    let mut world = World::new();
    world.insert_resource(TickLog::default());
    let mut fixed = Schedule::new();
    fixed.add_systems(send_tick).set_event_aging(fixed_aging);
    let mut frame = Schedule::new();
    frame.add_systems(read_ticks).set_event_aging(frame_aging);
    for _ in 0..4 {
        for _ in 0..3 {
            fixed.run(&mut world).unwrap();
        }
        frame.run(&mut world).unwrap();
    }
    world
}

#[test]
fn a_fixed_step_schedule_that_ages_nothing_loses_no_event_to_the_frame_schedule() {
    let world = fixed_and_frame(EventAging::Never, EventAging::Used);
    let log = world.resource::<TickLog>().unwrap();
    assert_eq!(log.0, (1..=12).collect::<Vec<_>>());
    assert_eq!(log.1, 0);
    // Aged once a frame, at its end: the last frame's three events are kept for the next.
    assert_eq!(world.resource::<Events<Tick>>().unwrap().len(), 3);

    // Both aging what they use (the default): the fixed step ages the queue at the end of each
    // step, and the frame schedule sees only each frame's last step's event.
    let world = fixed_and_frame(EventAging::Used, EventAging::Used);
    let log = world.resource::<TickLog>().unwrap();
    assert_eq!(log.0, [3, 6, 9, 12]);
    assert_eq!(log.1, 8);
}

#[test]
fn a_frame_schedule_aging_all_ages_types_none_of_its_systems_use() {
    fn idle(mut count: Local<u32>) {
        *count += 1;
    }
    let run = |frame_aging| {
        let mut world = World::new();
        let mut fixed = Schedule::new();
        fixed.add_systems(send_tick).set_event_aging(EventAging::Never);
        let mut frame = Schedule::new();
        frame.add_systems(idle).set_event_aging(frame_aging);
        let mut lens = Vec::new();
        for _ in 0..4 {
            for _ in 0..3 {
                fixed.run(&mut world).unwrap();
            }
            frame.run(&mut world).unwrap();
            lens.push(world.resource::<Events<Tick>>().unwrap().len());
        }
        lens
    };
    // `All`: the end of each frame drops the frame before's three and keeps its own.
    assert_eq!(run(EventAging::All), [3, 3, 3, 3]);
    // `Used`: the frame schedule does not use `Tick`, and nothing ages it.
    assert_eq!(run(EventAging::Used), [3, 6, 9, 12]);
}

#[test]
fn a_schedule_aging_all_ages_its_own_types_once_per_run() {
    #[derive(Default)]
    struct Before(Vec<u32>, u64);
    fn read_before(mut ticks: EventReader<Tick>, mut log: ResMut<Before>) {
        log.0.extend(ticks.read().map(|t| t.0));
        log.1 = ticks.missed();
    }
    let mut world = World::new();
    world.insert_resource(TickLog::default());
    world.insert_resource(Before::default());
    // Another schedule registers a second type in the world: `All` now ages two.
    let mut other = Schedule::new();
    other.add_systems(|_: EventReader<Hit>| {}).set_event_aging(EventAging::Never);
    other.run(&mut world).unwrap();
    world.resource_mut::<Events<Hit>>().unwrap().send(Hit(7));
    let mut schedule = Schedule::new();
    schedule.add_systems((read_before, send_tick, read_ticks)).set_event_aging(EventAging::All);
    assert_eq!(schedule.event_aging(), EventAging::All);
    for _ in 0..3 {
        schedule.run(&mut world).unwrap();
    }
    // Aged twice per run, the reader before the writer would miss every event.
    let before = world.resource::<Before>().unwrap();
    assert_eq!((&before.0[..], before.1), (&[1, 2][..], 0));
    assert_eq!(world.resource::<TickLog>().unwrap().0, [1, 2, 3]);
    // The other schedule's type aged too: gone after two runs.
    assert!(world.resource::<Events<Hit>>().unwrap().is_empty());
}

#[derive(Debug)]
struct Hit(#[allow(dead_code)] u32);

#[test]
fn age_all_events_ages_every_registered_queue_and_removal_log() {
    struct Marker;
    let mut world = World::new();
    let mut schedule = Schedule::new();
    schedule
        .add_systems((send_tick, |mut gone: RemovedComponents<Marker>| gone.clear()))
        .set_event_aging(EventAging::Never);
    assert_eq!(schedule.event_aging(), EventAging::Never);
    let e = world.spawn((Marker,));
    schedule.run(&mut world).unwrap();
    schedule.run(&mut world).unwrap();
    world.despawn(e).unwrap();
    // `Never`: two runs and nothing aged.
    assert_eq!(world.resource::<Events<Tick>>().unwrap().len(), 2);
    assert_eq!(world.removed::<Marker>().collect::<Vec<_>>(), [e]);
    age_all_events(&mut world);
    age_all_events(&mut world);
    assert!(world.resource::<Events<Tick>>().unwrap().is_empty());
    assert_eq!(world.removed::<Marker>().count(), 0);
    // A queue taken out of the world is skipped, the others still aged.
    world.remove_resource::<Events<Tick>>();
    let f = world.spawn((Marker,));
    world.despawn(f).unwrap();
    age_all_events(&mut world);
    age_all_events(&mut world);
    assert_eq!(world.removed::<Marker>().count(), 0);
}
