//! Resource change detection in systems, and the common run conditions.

use crate::prelude::*;

#[derive(Debug, PartialEq)]
struct Score(u32);

/// Whether `bump` writes `Score` this run, and whether `peek` borrows it mutably (reading only).
#[derive(Default)]
struct Plan {
    bump: bool,
    peek: bool,
}

/// `(is_added, is_changed)` as `watch` saw them, per run.
#[derive(Default)]
struct Seen(Vec<(bool, bool)>);

fn bump(plan: Res<Plan>, score: Option<ResMut<Score>>) {
    if let Some(mut score) = score.filter(|_| plan.bump) {
        score.0 += 1;
    }
}

fn peek(plan: Res<Plan>, score: Option<ResMut<Score>>) {
    if plan.peek {
        // Reading through a mutable borrow marks nothing.
        let _ = score.map(|s| s.0);
    }
}

fn watch(score: Option<Res<Score>>, mut seen: ResMut<Seen>) {
    if let Some(score) = score {
        seen.0.push((score.is_added(), score.is_changed()));
    }
}

fn run(schedule: &mut Schedule, world: &mut World, plan: Plan) -> Option<(bool, bool)> {
    world.insert_resource(plan);
    let before = world.resource::<Seen>().unwrap().0.len();
    schedule.run(world).unwrap();
    let seen = &world.resource::<Seen>().unwrap().0;
    assert!(seen.len() <= before + 1);
    seen.get(before).copied()
}

#[test]
fn res_reports_changes_since_the_system_last_ran() {
    let mut world = World::new();
    world.insert_resource(Seen::default());
    world.insert_resource(Score(0));
    let mut schedule = Schedule::new();
    schedule.add_systems((bump, peek.after(bump), watch.after(peek)));
    let quiet = || Plan { bump: false, peek: true };
    // First run: everything is added and changed.
    assert_eq!(run(&mut schedule, &mut world, quiet()), Some((true, true)));
    assert_eq!(run(&mut schedule, &mut world, quiet()), Some((false, false)));
    // A write in a system before it.
    assert_eq!(
        run(&mut schedule, &mut world, Plan { bump: true, peek: false }),
        Some((false, true))
    );
    assert_eq!(run(&mut schedule, &mut world, quiet()), Some((false, false)));
    // Between runs: a replacement, a mutable borrow from the world.
    world.insert_resource(Score(10));
    assert_eq!(run(&mut schedule, &mut world, quiet()), Some((false, true)));
    world.resource_mut::<Score>().unwrap().0 += 1;
    assert_eq!(run(&mut schedule, &mut world, quiet()), Some((false, true)));
    assert_eq!(run(&mut schedule, &mut world, quiet()), Some((false, false)));
    // Removed, then inserted again: added anew.
    world.remove_resource::<Score>();
    assert_eq!(run(&mut schedule, &mut world, quiet()), None);
    world.insert_resource(Score(0));
    assert_eq!(run(&mut schedule, &mut world, quiet()), Some((true, true)));
    assert_eq!(world.resource::<Score>(), Some(&Score(0)));
}

#[test]
fn a_write_after_the_reader_shows_on_its_next_run() {
    let mut world = World::new();
    world.insert_resource(Seen::default());
    world.insert_resource(Score(0));
    let mut schedule = Schedule::new();
    schedule.add_systems((watch, bump.after(watch)));
    let bumping = || Plan { bump: true, peek: false };
    assert_eq!(run(&mut schedule, &mut world, bumping()), Some((true, true)));
    assert_eq!(run(&mut schedule, &mut world, bumping()), Some((false, true)));
    assert_eq!(run(&mut schedule, &mut world, Plan::default()), Some((false, true)));
    assert_eq!(run(&mut schedule, &mut world, Plan::default()), Some((false, false)));
}

#[test]
fn res_mut_marks_on_write_and_can_bypass_or_force_it() {
    fn quiet_write(mut score: ResMut<Score>) {
        score.bypass_change_detection().0 += 100;
        assert!(score.is_changed() == score.is_added());
    }
    fn force(mut score: ResMut<Score>, plan: Res<Plan>) {
        if plan.peek {
            score.set_changed();
            assert!(score.is_changed());
        }
    }
    let mut world = World::new();
    world.insert_resource(Seen::default());
    world.insert_resource(Score(0));
    let mut schedule = Schedule::new();
    schedule.add_systems((quiet_write, force.after(quiet_write), watch.after(force)));
    assert_eq!(run(&mut schedule, &mut world, Plan::default()), Some((true, true)));
    assert_eq!(run(&mut schedule, &mut world, Plan::default()), Some((false, false)));
    assert_eq!(world.resource::<Score>(), Some(&Score(200)));
    assert_eq!(
        run(&mut schedule, &mut world, Plan { bump: false, peek: true }),
        Some((false, true))
    );
}

#[test]
fn res_mut_set_if_neq_map_unchanged_and_reborrow_mark_only_real_writes() {
    #[derive(Debug, PartialEq)]
    struct Settings {
        volume: u32,
        muted: bool,
    }
    /// `Plan::bump`: set the volume to 7 (a change the first time only); `Plan::peek`: mute
    /// through a field `ResMut`, and through a reborrow passed to a function.
    fn settle(mut settings: ResMut<Settings>, plan: Res<Plan>) {
        if plan.bump {
            let wrote = settings.set_if_neq(Settings { volume: 7, muted: settings.muted });
            assert_eq!(wrote, settings.is_changed(), "a write marks; an equal value does not");
        }
        if plan.peek {
            fn mute(mut muted: ResMut<bool>) {
                *muted = true;
            }
            let muted = settings.reborrow().map_unchanged(|s| &mut s.muted);
            assert!(!muted.is_changed() || muted.is_added(), "mapping marks nothing");
            mute(settings.reborrow().map_unchanged(|s| &mut s.muted));
            assert!(settings.is_changed());
        }
    }
    fn watch_settings(settings: Res<Settings>, mut seen: ResMut<Seen>) {
        seen.0.push((settings.is_added(), settings.is_changed()));
    }
    let mut world = World::new();
    world.insert_resource(Seen::default());
    world.insert_resource(Settings { volume: 1, muted: false });
    let mut schedule = Schedule::new();
    schedule.add_systems((settle, watch_settings.after(settle)));
    let bump = || Plan { bump: true, peek: false };
    assert_eq!(run(&mut schedule, &mut world, bump()), Some((true, true)), "added");
    assert_eq!(world.resource::<Settings>().unwrap().volume, 7);
    assert_eq!(run(&mut schedule, &mut world, bump()), Some((false, false)), "7 again: no change");
    let peek = Plan { bump: false, peek: true };
    assert_eq!(run(&mut schedule, &mut world, peek), Some((false, true)), "muted: a change");
    assert_eq!(world.resource::<Settings>(), Some(&Settings { volume: 7, muted: true }));
    assert_eq!(run(&mut schedule, &mut world, Plan::default()), Some((false, false)));
}

#[test]
fn an_exclusive_systems_writes_count_as_changes() {
    let mut world = World::new();
    world.insert_resource(Seen::default());
    world.insert_resource(Score(0));
    let mut schedule = Schedule::new();
    schedule.add_systems((
        |world: &mut World| {
            if world.resource::<Plan>().unwrap().bump {
                world.resource_mut::<Score>().unwrap().0 += 1;
            }
        },
        watch,
    ));
    assert_eq!(run(&mut schedule, &mut world, Plan::default()), Some((true, true)));
    assert_eq!(run(&mut schedule, &mut world, Plan::default()), Some((false, false)));
    assert_eq!(
        run(&mut schedule, &mut world, Plan { bump: true, peek: false }),
        Some((false, true))
    );
}

/// How many times each gated system ran.
#[derive(Default, Debug, PartialEq)]
struct Runs {
    changed: u32,
    added: u32,
    exists: u32,
    removed: u32,
    once: u32,
    event: u32,
    any: u32,
}

/// Runs the schedule once and takes the counts of what ran.
fn runs_of(schedule: &mut Schedule, world: &mut World) -> Runs {
    schedule.run(world).unwrap();
    std::mem::take(&mut *world.resource_mut::<Runs>().unwrap())
}

struct Ping;
struct Marker;

#[test]
fn common_conditions_gate_as_named() {
    let mut world = World::new();
    world.insert_resource(Runs::default());
    world.insert_resource(Events::<Ping>::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((
        (|mut r: ResMut<Runs>| r.changed += 1).run_if(resource_changed::<Score>),
        (|mut r: ResMut<Runs>| r.added += 1).run_if(resource_added::<Score>),
        (|mut r: ResMut<Runs>| r.exists += 1).run_if(resource_exists::<Score>),
        (|mut r: ResMut<Runs>| r.removed += 1).run_if(resource_removed::<Score>),
        (|mut r: ResMut<Runs>| r.once += 1).run_if(run_once),
        (|mut r: ResMut<Runs>| r.event += 1).run_if(on_event::<Ping>),
        (|mut r: ResMut<Runs>| r.any += 1).run_if(any_with_component::<Marker>),
    ));
    let mut step = |world: &mut World| runs_of(&mut schedule, world);
    // No Score, no events, no Marker: only `run_once`.
    assert_eq!(step(&mut world), Runs { once: 1, ..Runs::default() });
    assert_eq!(step(&mut world), Runs::default());
    world.insert_resource(Score(0));
    world.resource_mut::<Events<Ping>>().unwrap().send(Ping);
    assert_eq!(
        step(&mut world),
        Runs { changed: 1, added: 1, exists: 1, event: 1, ..Runs::default() }
    );
    // Nothing new: the event was seen, Score unchanged.
    assert_eq!(step(&mut world), Runs { exists: 1, ..Runs::default() });
    world.resource_mut::<Score>().unwrap().0 = 5;
    let marked = world.spawn((Marker,));
    assert_eq!(step(&mut world), Runs { changed: 1, exists: 1, any: 1, ..Runs::default() });
    world.despawn(marked).unwrap();
    world.remove_resource::<Score>();
    assert_eq!(step(&mut world), Runs { removed: 1, ..Runs::default() });
    assert_eq!(step(&mut world), Runs::default());
}

struct Paused;

#[test]
fn not_turns_a_condition_around_and_keeps_its_state_and_access() {
    let mut world = World::new();
    world.insert_resource(Runs::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((
        (|mut r: ResMut<Runs>| r.exists += 1).run_if(not(resource_exists::<Paused>)),
        (|mut r: ResMut<Runs>| r.once += 1).run_if(not(run_once)),
    ));
    let mut step = |world: &mut World| runs_of(&mut schedule, world);
    // `run_once` is true on its first look, so `not(run_once)` is false then and true after.
    assert_eq!(step(&mut world), Runs { exists: 1, ..Runs::default() });
    assert_eq!(step(&mut world), Runs { exists: 1, once: 1, ..Runs::default() });
    world.insert_resource(Paused);
    assert_eq!(step(&mut world), Runs { once: 1, ..Runs::default() });
    // A condition that writes is refused through `not` as well.
    let writes = |mut r: ResMut<Runs>| {
        r.once += 1;
        true
    };
    let mut bad = Schedule::new();
    let refused = bad.try_add_systems((|| {}).run_if(not(writes))).err();
    assert!(matches!(refused, Some(crate::ScheduleError::ConditionNotReadOnly { .. })));
    assert!(crate::System::name(&not(resource_exists::<Paused>)).starts_with("not("));
}

#[test]
fn a_resource_removed_by_a_command_shows_in_resource_removed() {
    let mut world = World::new();
    world.insert_resource(Runs::default());
    world.insert_resource(Score(3));
    let mut schedule = Schedule::new();
    schedule.add_systems((
        (|mut commands: Commands, score: Option<Res<Score>>| {
            if score.is_some_and(|s| s.0 == 0) {
                commands.remove_resource::<Score>();
            }
        }),
        (|mut r: ResMut<Runs>| r.removed += 1).run_if(resource_removed::<Score>),
    ));
    let mut step = |world: &mut World| runs_of(&mut schedule, world).removed;
    assert_eq!(step(&mut world), 0);
    world.resource_mut::<Score>().unwrap().0 = 0;
    assert_eq!(step(&mut world), 0, "removed at the end of this run");
    assert!(!world.contains_resource::<Score>());
    assert_eq!(step(&mut world), 1);
    assert_eq!(step(&mut world), 0);
}

/// How many runs of four a system gated by `resource_changed::<Score>` made, when it writes
/// `Score` itself every time it runs (through `ResMut`, or through `&mut World`).
fn self_writing_runs(exclusive: bool) -> u32 {
    let mut world = World::new();
    world.insert_resource(Runs::default());
    world.insert_resource(Score(0));
    let mut schedule = Schedule::new();
    if exclusive {
        schedule.add_systems(
            (|world: &mut World| {
                world.resource_mut::<Score>().unwrap().0 += 1;
                world.resource_mut::<Runs>().unwrap().changed += 1;
            })
            .run_if(resource_changed::<Score>),
        );
    } else {
        schedule.add_systems(
            (|mut score: ResMut<Score>, mut runs: ResMut<Runs>| {
                score.0 += 1;
                runs.changed += 1;
            })
            .run_if(resource_changed::<Score>),
        );
    }
    for _ in 0..4 {
        schedule.run(&mut world).unwrap();
    }
    world.resource::<Runs>().unwrap().changed
}

#[test]
fn a_condition_sees_the_writes_its_own_system_made_after_it() {
    // The write comes after the condition was evaluated, so the next evaluation sees it: the
    // system runs every time, however it writes.
    assert_eq!(self_writing_runs(true), 4);
    assert_eq!(self_writing_runs(false), 4);
}

#[test]
fn every_condition_of_a_system_runs_even_after_one_says_no() {
    // `run_once` is true on its first look only. Behind a condition that says no on the first
    // run, it still has its look then, so the system never runs (with short-circuiting it
    // would have run on the second).
    for exclusive in [false, true] {
        let mut world = World::new();
        world.insert_resource(Runs::default());
        world.insert_resource(Plan::default());
        let mut schedule = Schedule::new();
        let gate = |plan: Res<Plan>| plan.bump;
        if exclusive {
            schedule.add_systems(
                (|world: &mut World| world.resource_mut::<Runs>().unwrap().once += 1)
                    .run_if(gate)
                    .run_if(run_once),
            );
        } else {
            schedule.add_systems((|mut r: ResMut<Runs>| r.once += 1).run_if(gate).run_if(run_once));
        }
        schedule.run(&mut world).unwrap();
        world.resource_mut::<Plan>().unwrap().bump = true;
        schedule.run(&mut world).unwrap();
        schedule.run(&mut world).unwrap();
        assert_eq!(world.resource::<Runs>().unwrap().once, 0, "exclusive: {exclusive}");
    }
}

#[test]
fn a_system_s_own_conditions_look_also_while_its_set_says_no() {
    // `inc` in set `S`, gated by its own `resource_changed::<R2>` and by `S`'s
    // `resource_changed::<R1>`. R2 changes while S says no; then R1 changes alone. R2's change
    // was seen while S said no, so `inc` must not run on it later.
    struct R1(u32);
    struct R2(u32);
    #[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
    struct S;
    impl SystemSet for S {}
    for exclusive in [false, true] {
        let mut world = World::new();
        world.insert_resource(Runs::default());
        world.insert_resource(R1(0));
        world.insert_resource(R2(0));
        let mut schedule = Schedule::new();
        if exclusive {
            schedule.add_systems(
                (|world: &mut World| world.resource_mut::<Runs>().unwrap().once += 1)
                    .run_if(resource_changed::<R2>)
                    .in_set(S),
            );
        } else {
            schedule.add_systems(
                (|mut r: ResMut<Runs>| r.once += 1).run_if(resource_changed::<R2>).in_set(S),
            );
        }
        schedule.configure_set(S, SetConfig::new().run_if(resource_changed::<R1>));
        // First run: both were just inserted, so both conditions say yes.
        schedule.run(&mut world).unwrap();
        assert_eq!(world.resource::<Runs>().unwrap().once, 1, "exclusive: {exclusive}");
        world.resource_mut::<R2>().unwrap().0 += 1;
        schedule.run(&mut world).unwrap(); // S says no; `inc`'s condition sees R2's change
        world.resource_mut::<R1>().unwrap().0 += 1;
        schedule.run(&mut world).unwrap(); // S says yes; R2 has not changed since
        assert_eq!(world.resource::<Runs>().unwrap().once, 1, "exclusive: {exclusive}");
        world.resource_mut::<R1>().unwrap().0 += 1;
        world.resource_mut::<R2>().unwrap().0 += 1;
        schedule.run(&mut world).unwrap(); // both changed: it runs
        assert_eq!(world.resource::<Runs>().unwrap().once, 2, "exclusive: {exclusive}");
    }
}

#[test]
fn an_event_writer_marks_its_queue_changed_when_it_sends_and_aging_does_not() {
    // `Plan::bump`: the writer sends one `Ping`; `Plan::peek`: it sends an empty batch.
    fn send(plan: Res<Plan>, mut pings: EventWriter<Ping>) {
        if plan.bump {
            pings.send(Ping);
        }
        if plan.peek {
            pings.send_batch(std::iter::empty());
        }
    }
    fn before(mut r: ResMut<Runs>) {
        r.changed += 1;
    }
    fn after(mut r: ResMut<Runs>) {
        r.added += 1;
    }
    let mut world = World::new();
    world.insert_resource(Runs::default());
    let mut schedule = Schedule::new();
    // Before the writer, a gate sees a send on its next run; after it, in the same run.
    schedule.add_systems((
        before.run_if(resource_changed::<Events<Ping>>),
        send.after(before),
        after.run_if(resource_changed::<Events<Ping>>).after(send),
    ));
    let mut step = |world: &mut World, plan: Plan| {
        world.insert_resource(plan);
        runs_of(&mut schedule, world)
    };
    // First run: the queue (inserted by the schedule) is new to both conditions.
    assert_eq!(step(&mut world, Plan::default()), Runs { changed: 1, added: 1, ..Runs::default() });
    // Nothing sent: the events aged at the end of the runs changed nothing.
    assert_eq!(step(&mut world, Plan::default()), Runs::default());
    assert_eq!(step(&mut world, Plan::default()), Runs::default());
    let sent = Plan { bump: true, peek: false };
    assert_eq!(step(&mut world, sent), Runs { added: 1, ..Runs::default() });
    assert_eq!(step(&mut world, Plan::default()), Runs { changed: 1, ..Runs::default() });
    // An empty batch sends nothing.
    let empty = Plan { bump: false, peek: true };
    assert_eq!(step(&mut world, empty), Runs::default());
    assert_eq!(step(&mut world, Plan::default()), Runs::default());
}

#[test]
fn or_and_and_combine_conditions_and_keep_each_ones_state() {
    let mut world = World::new();
    world.insert_resource(Runs::default());
    world.insert_resource(Events::<Ping>::default());
    let mut schedule = Schedule::new();
    schedule.add_systems((
        (|mut r: ResMut<Runs>| r.event += 1)
            .run_if(or(on_event::<Ping>, resource_exists::<Paused>)),
        (|mut r: ResMut<Runs>| r.exists += 1)
            .run_if(and(resource_exists::<Score>, not(resource_exists::<Paused>))),
        (|mut r: ResMut<Runs>| r.once += 1).run_if(or(run_once, and(run_once, run_once))),
    ));
    let mut step = |world: &mut World| runs_of(&mut schedule, world);
    assert_eq!(step(&mut world), Runs { once: 1, ..Runs::default() });
    world.resource_mut::<Events<Ping>>().unwrap().send(Ping);
    world.insert_resource(Score(0));
    assert_eq!(step(&mut world), Runs { event: 1, exists: 1, ..Runs::default() });
    // The event was read once, though `or` had its answer from it alone: not seen again.
    assert_eq!(step(&mut world), Runs { exists: 1, ..Runs::default() });
    world.insert_resource(Paused);
    assert_eq!(step(&mut world), Runs { event: 1, ..Runs::default() });

    // No short-circuit: with the first side true, the second still reads its events.
    let mut world = World::new();
    world.insert_resource(Runs::default());
    world.insert_resource(Events::<Ping>::default());
    world.insert_resource(Paused);
    let mut schedule = Schedule::new();
    schedule.add_systems(
        (|mut r: ResMut<Runs>| r.event += 1)
            .run_if(or(resource_exists::<Paused>, on_event::<Ping>)),
    );
    world.resource_mut::<Events<Ping>>().unwrap().send(Ping);
    assert_eq!(runs_of(&mut schedule, &mut world), Runs { event: 1, ..Runs::default() });
    world.remove_resource::<Paused>();
    // The ping is still in its queue (events live two runs), but the condition has read it.
    assert_eq!(runs_of(&mut schedule, &mut world), Runs::default());

    // The access is both conditions': a writer of either is ordered with the system.
    let either = or(resource_exists::<Score>, resource_exists::<Paused>);
    let access = crate::System::access(&either);
    let writes_paused = crate::IntoSystem::into_system(|_: ResMut<Paused>| {});
    assert!(access.conflicts_with(crate::System::access(&writes_paused)));
    assert_eq!(crate::System::name(&either).split('(').next(), Some("or"));
    // A condition that writes is refused inside them too.
    let writes = |mut r: ResMut<Runs>| {
        r.once += 1;
        true
    };
    let refused = Schedule::new().try_add_systems((|| {}).run_if(and(run_once, writes))).err();
    assert!(matches!(refused, Some(crate::ScheduleError::ConditionNotReadOnly { .. })));
}
