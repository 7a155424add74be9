//! Compile-fail tests: the borrow rules that keep query items from aliasing or dangling.
//!
//! Each `tests/ui/*.rs` must fail to compile with the error in its `.stderr` file (regenerate
//! them with `TRYBUILD=overwrite cargo test -p folio-query --test compile_fail` after a
//! compiler upgrade changes the wording).
// Native only: compile errors through trybuild, which runs cargo; wasm32 runs neither.
#![cfg(not(target_family = "wasm"))]

#[test]
#[cfg_attr(miri, ignore = "trybuild runs rustc")]
fn borrow_rules_are_enforced_at_compile_time() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
