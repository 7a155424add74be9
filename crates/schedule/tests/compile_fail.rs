//! Compile-fail tests at the schedule level: non-`Send`/non-`Sync` data is rejected where it
//! would be shared with other threads (components, resources, `Local`s, closure systems), and
//! nothing borrowed from the world (query items, `Res`, `Commands`, events) can outlive the
//! system that got it; and a system set is a typed `SystemSet`, never a string.
//!
//! Each `tests/ui/*.rs` must fail to compile with the error in its `.stderr` file (regenerate
//! them with `TRYBUILD=overwrite cargo test -p folio-schedule --test compile_fail` after a
//! compiler upgrade changes the wording, and read each one: it must still name the intended
//! error).
// Native only: compile errors through trybuild, which runs cargo; wasm32 runs neither.
#![cfg(not(target_family = "wasm"))]

#[test]
#[cfg_attr(miri, ignore = "trybuild runs rustc")]
fn thread_safety_and_borrow_rules_are_enforced_at_compile_time() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
