//! Two members of a `ParamSet` may conflict, so only one can be had at a time: holding the
//! first while taking the second must not compile.
use folio_schedule::prelude::*;

struct Health(u32);

fn both_at_once(mut set: ParamSet<(Query<&mut Health>, Query<&Health>)>) {
    let mut writer = set.p0();
    let reader = set.p1();
    for mut health in writer.iter_mut() {
        health.0 += reader.iter().count() as u32;
    }
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(both_at_once);
}
