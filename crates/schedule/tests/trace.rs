//! The `trace` feature: a span per schedule run, per system run, per run condition and per
//! system's commands applied, on whichever thread does the work. A small subscriber, written
//! here, records every span made (this file is its own test binary, so the global subscriber
//! sees this test's spans only).
//!
//! `cargo test -p folio-schedule --features trace --test trace`
#![cfg(feature = "trace")]

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use folio_schedule::prelude::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Every span made: its kind (the span's name) and its `name` field, and how often it was
/// entered.
struct Recorder {
    spans: Mutex<Vec<(&'static str, String, u32)>>,
}

static RECORDER: Recorder = Recorder { spans: Mutex::new(Vec::new()) };

/// The global subscriber: everything goes to [`RECORDER`].
struct ToRecorder;

/// Reads a span's `name` field.
struct NameField(String);

impl Visit for NameField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "name" {
            self.0 = value.to_owned();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "name" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for ToRecorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut name = NameField(String::new());
        span.record(&mut name);
        let mut spans = RECORDER.spans.lock().unwrap();
        spans.push((span.metadata().name(), name.0, 0));
        // Ids start at 1.
        Id::from_u64(spans.len() as u64)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, span: &Id) {
        RECORDER.spans.lock().unwrap()[span.into_u64() as usize - 1].2 += 1;
    }

    fn exit(&self, _: &Id) {}
}

/// The spans made so far, by (kind, name): how many, and how many entries in all.
fn take_spans() -> HashMap<(&'static str, String), (u32, u32)> {
    let mut counts = HashMap::new();
    for (kind, name, entered) in RECORDER.spans.lock().unwrap().drain(..) {
        let count = counts.entry((kind, name)).or_insert((0, 0));
        count.0 += 1;
        count.1 += entered;
    }
    counts
}

struct Position(f32);
struct Open(bool);

fn mover(mut query: Query<&mut Position>) {
    query.iter_mut().for_each(|mut p| p.0 += 1.0);
}
fn spawner(mut commands: Commands) {
    commands.spawn((Position(0.0),));
}
fn reader(query: Query<&Position>) {
    assert!(query.iter().count() > 0);
}
fn open(open: Res<Open>) -> bool {
    open.0
}

#[test]
fn a_span_per_system_run_condition_and_commands_applied() {
    tracing::subscriber::set_global_default(ToRecorder).unwrap();
    let mut world = World::new();
    world.insert_resource(Open(true));
    world.spawn((Position(0.0),));
    let mut schedule = Schedule::new();
    schedule.add_systems((mover, spawner, reader.run_if(open).after(mover)));
    // On the calling thread, then on the pool (two threads beside the caller).
    for (work, threads) in [(Duration::MAX, 1), (Duration::ZERO, 2)] {
        schedule.set_min_parallel_work(work);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            for run in 0..3 {
                world.resource_mut::<Open>().unwrap().0 = run != 1;
                schedule.run(&mut world).unwrap();
            }
        });
        let spans = take_spans();
        let count = |kind: &'static str, name: &str| {
            spans.get(&(kind, name.to_owned())).copied().unwrap_or_default()
        };
        // Each span entered once.
        assert_eq!(count("schedule", ""), (3, 3), "{spans:?}");
        assert_eq!(count("system", "mover"), (3, 3), "{spans:?}");
        assert_eq!(count("system", "spawner"), (3, 3), "{spans:?}");
        // Its condition said no once.
        assert_eq!(count("system", "reader"), (2, 2), "{spans:?}");
        assert_eq!(count("condition", "open"), (3, 3), "{spans:?}");
        // The buffers of the one system with commands are applied once a run (at the end);
        // systems without a deferred parameter open no span for it.
        assert_eq!(count("commands", "spawner"), (3, 3), "{spans:?}");
        assert_eq!(spans.len(), 6, "{spans:?}");
    }
    assert_eq!(world.query::<&Position>().iter(&world).count(), 7);
}
