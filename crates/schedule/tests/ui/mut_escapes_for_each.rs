//! The item handed to a `for_each_mut` closure lives for that call only: it cannot be stored
//! outside the closure.
use folio_schedule::prelude::*;

struct A(u32);

fn last(mut q: Query<&mut A>) {
    let mut kept = None;
    q.for_each_mut(|a| kept = Some(a));
    if let Some(mut a) = kept {
        a.0 += 1;
    }
}

fn main() {
    let mut schedule = Schedule::new();
    schedule.add_systems(last);
}
