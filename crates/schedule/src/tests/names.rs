//! System names: a function's is its name; a closure's is where it is and the place of the call
//! that added it (`names::{{closure}} (…/names.rs:12:14)`), numbered when one call adds several.

use super::*;
use crate::ScheduleError;

/// `file:line:` of this file, as closure names show it (the column follows).
fn place(line: u32) -> String {
    format!("{}:{line}:", file!())
}

fn boom() {
    panic!("boom");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_panicking_closure_is_named_by_the_line_that_added_it() {
    let mut schedule = Schedule::new();
    let line = line!() + 1;
    schedule.add_systems(|_: Query<&A>| boom());
    let err = schedule.run(&mut World::new()).unwrap_err();
    let ScheduleError::SystemPanicked { system, .. } = &err else { panic!("{err}") };
    assert!(
        system.starts_with("a_panicking_closure_is_named_by_the_line_that_added_it::{{closure}} ("),
        "{err}"
    );
    assert!(system.contains(&place(line)), "{err}");
    assert!(err.to_string().contains(&place(line)), "{err}");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn functions_keep_their_names() {
    fn boom(_: Query<&A>) {
        panic!("fn boom");
    }
    fn exclusive(_: &mut World) {}
    let mut schedule = Schedule::new();
    schedule.add_systems((exclusive, boom.run_if(resource_exists::<u32>)));
    let mut world = World::new();
    world.insert_resource(0u32);
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::SystemPanicked { system, .. } = &err else { panic!("{err}") };
    assert_eq!(system, "boom");
    assert_eq!(schedule.order(&mut world).unwrap(), ["exclusive", "boom"]);
}

#[test]
fn closures_in_a_cycle_are_named_by_their_lines() {
    let a = |_: Query<&A>| {};
    let b = |_: Query<&B>| {};
    let mut schedule = Schedule::new();
    let lines = [line!() + 1, line!() + 2];
    schedule.add_systems(a.after(b));
    schedule.add_systems(b.after(a));
    let err = schedule.run(&mut World::new()).unwrap_err();
    let ScheduleError::Cycle(names) = &err else { panic!("{err}") };
    for line in lines {
        assert!(names.iter().any(|n| n.contains(&place(line))), "{err}");
    }
}

#[test]
fn closures_added_in_one_call_are_numbered() {
    fn named() {}
    let mut schedule = Schedule::new();
    let line = line!() + 1;
    schedule.add_systems((|| {}, named, (|_: &mut World| {}, || {}).chain()));
    let order = schedule.order(&mut World::new()).unwrap();
    assert_eq!(order.len(), 4);
    assert!(order[0].ends_with(", system 1 of 4)") && order[0].contains(&place(line)), "{order:?}");
    assert_eq!(order[1], "named");
    // The chained pair was made by `chain`, on the same line: numbered in the whole call.
    assert!(order[2].ends_with(", system 3 of 4)") && order[2].contains(&place(line)), "{order:?}");
    assert!(order[3].ends_with(", system 4 of 4)"), "{order:?}");
    // One closure alone is not numbered.
    let mut schedule = Schedule::new();
    let line = line!() + 1;
    schedule.add_systems(|| {});
    let order = schedule.order(&mut World::new()).unwrap();
    assert!(order[0].contains(&place(line)) && !order[0].contains("system 1"), "{order:?}");
}

#[test]
fn a_closure_condition_is_named_by_the_run_if_line() {
    fn sys() {}
    let mut schedule = Schedule::new();
    let line = line!() + 1;
    let config = sys.run_if(|mut c: Commands| c.spawn(()) == Entity::PLACEHOLDER);
    let err = schedule.try_add_systems(config).err().unwrap();
    let ScheduleError::ConditionNotReadOnly { condition } = &err else { panic!("{err}") };
    assert!(condition.contains("{{closure}}") && condition.contains(&place(line)), "{err}");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_closure_s_missing_resource_names_its_line() {
    struct Missing;
    let mut schedule = Schedule::new();
    let line = line!() + 1;
    schedule.add_systems(|_: Res<Missing>| {});
    let err = schedule.run(&mut World::new()).unwrap_err();
    let ScheduleError::SystemPanicked { system, message } = &err else { panic!("{err}") };
    assert!(system.contains(&place(line)), "{err}");
    assert!(message.contains(&place(line)) && message.contains("`Res<Missing>`"), "{err}");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn a_removed_event_queue_names_the_system_and_the_parameter() {
    struct Ping;
    fn listen(_: EventReader<Ping>) {}
    let mut world = World::new();
    let mut schedule = Schedule::new();
    schedule.add_systems(listen);
    schedule.run(&mut world).unwrap();
    world.remove_resource::<Events<Ping>>();
    let err = schedule.run(&mut world).unwrap_err();
    let ScheduleError::SystemPanicked { system, message } = &err else { panic!("{err}") };
    assert_eq!(system, "listen");
    assert!(message.contains("system `listen`: parameter `EventReader<Ping>`"), "{err}");
}

#[test]
#[cfg_attr(panic = "abort", ignore = "catches a panic: needs unwinding (wasm32-wasip1 aborts)")]
fn closures_run_on_their_own_are_named_by_the_call() {
    let mut world = World::new();
    let line = line!() + 1;
    let err = world.run_system_once(|_: Query<&A>| boom()).unwrap_err();
    let ScheduleError::SystemPanicked { system, .. } = &err else { panic!("{err}") };
    assert!(system.contains(&place(line)), "{err}");
    let line = line!() + 1;
    let id = world.register_system(|_: &mut World| boom());
    let err = world.run_system(id).unwrap_err();
    let ScheduleError::SystemPanicked { system, .. } = &err else { panic!("{err}") };
    assert!(system.contains(&place(line)), "{err}");
}

#[test]
fn a_conflict_in_one_of_several_closures_names_which() {
    let mut schedule = Schedule::new();
    let line = line!() + 1;
    let err = schedule.try_add_systems((|| {}, |_: Query<&mut A>, _: Query<&A>| {})).err().unwrap();
    let ScheduleError::ConflictingParams { system, .. } = &err else { panic!("{err}") };
    assert!(system.contains(&place(line)) && system.ends_with(", system 2 of 2)"), "{err}");
}
