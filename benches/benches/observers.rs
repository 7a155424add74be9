//! folio's observers side by side with bevy_ecs's, one run:
//!
//! - `observers/entity_event`: a world of 1,000 entities, one of them watched by one observer
//!   (bevy: `EntityWorldMut::observe`; folio: `Observer::watch`) that adds the event's amount to
//!   a resource; the timed routine triggers the event at that entity 10,000 times (bevy:
//!   `World::trigger` of an `EntityEvent`; folio: `World::trigger_targets`).
//! - `observers/global_event`: the same with one global observer and an event sent to no
//!   entity (`World::add_observer` / `World::observe`, then `World::trigger`), 10,000 times.
//!
//! Each trigger runs the observer, which reads the event and writes the resource, through the
//! library's own deferred world access (bevy: a `ResMut` system parameter; folio:
//! `DeferredWorld::resource_mut`). Sample sizes and times come from `folio_benches::criterion()`
//! and the command line.
#![allow(missing_docs)] // `criterion_group!` / `criterion_main!` generate undocumented items.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use folio_archetype::{DeferredWorld, Entity, Event, Observer, Trigger, World};

/// Triggers per iteration.
const TRIGGERS: u64 = 10_000;
/// Entities in the world.
const ENTITIES: usize = 1_000;

/// The resource the observers add to.
#[derive(Default, bevy_ecs::resource::Resource)]
struct Counter(u64);

#[derive(Clone, Copy, bevy_ecs::component::Component)]
struct Marker(#[allow(dead_code)] u32);

/// folio's events.
struct Hit(u64);
impl Event for Hit {}
struct Tick(u64);
impl Event for Tick {}

/// bevy's events.
#[derive(bevy_ecs::event::EntityEvent)]
struct BevyHit {
    entity: bevy_ecs::entity::Entity,
    amount: u64,
}
#[derive(bevy_ecs::event::Event)]
struct BevyTick(u64);

fn folio_world() -> (World, Entity) {
    let mut world = World::new();
    world.insert_resource(Counter::default());
    let entities = world.spawn_batch((0..ENTITIES as u32).map(|i| (Marker(i),)));
    (world, entities[ENTITIES / 2])
}

fn bevy_world() -> (bevy_ecs::world::World, bevy_ecs::entity::Entity) {
    let mut world = bevy_ecs::world::World::new();
    world.insert_resource(Counter::default());
    let entities: Vec<_> = world.spawn_batch((0..ENTITIES as u32).map(|i| (Marker(i),))).collect();
    (world, entities[ENTITIES / 2])
}

fn entity_event(c: &mut Criterion) {
    let mut group = c.benchmark_group("observers/entity_event");
    group.bench_function("folio", |b| {
        let (mut world, target) = folio_world();
        let observer = Observer::new(|t: &mut Trigger<Hit>, w: &mut DeferredWorld| {
            w.resource_mut::<Counter>().unwrap().0 += t.event().0;
        });
        world.add_observer(observer.watch(target)).unwrap();
        b.iter(|| {
            for i in 0..TRIGGERS {
                world.trigger_targets(Hit(black_box(i)), [black_box(target)]);
            }
        });
        assert!(world.resource::<Counter>().unwrap().0 > 0);
    });
    group.bench_function("bevy", |b| {
        use bevy_ecs::prelude::{On, ResMut};
        let (mut world, target) = bevy_world();
        world.entity_mut(target).observe(|hit: On<BevyHit>, mut counter: ResMut<Counter>| {
            counter.0 += hit.amount;
        });
        b.iter(|| {
            for i in 0..TRIGGERS {
                world.trigger(BevyHit { entity: black_box(target), amount: black_box(i) });
            }
        });
        assert!(world.resource::<Counter>().0 > 0);
    });
    group.finish();
}

fn global_event(c: &mut Criterion) {
    let mut group = c.benchmark_group("observers/global_event");
    group.bench_function("folio", |b| {
        let (mut world, _) = folio_world();
        world.observe(|t: &mut Trigger<Tick>, w: &mut DeferredWorld| {
            w.resource_mut::<Counter>().unwrap().0 += t.event().0;
        });
        b.iter(|| {
            for i in 0..TRIGGERS {
                world.trigger(Tick(black_box(i)));
            }
        });
        assert!(world.resource::<Counter>().unwrap().0 > 0);
    });
    group.bench_function("bevy", |b| {
        use bevy_ecs::prelude::{On, ResMut};
        let (mut world, _) = bevy_world();
        world.add_observer(|tick: On<BevyTick>, mut counter: ResMut<Counter>| {
            counter.0 += tick.0;
        });
        b.iter(|| {
            for i in 0..TRIGGERS {
                world.trigger(BevyTick(black_box(i)));
            }
        });
        assert!(world.resource::<Counter>().0 > 0);
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = folio_benches::criterion();
    targets = entity_event, global_event
}
criterion_main!(benches);
