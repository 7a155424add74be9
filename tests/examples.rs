//! Runs every example, so `cargo test` fails when one stops working. Each example asserts its
//! own claims; these tests check that it ran to the end (and, for the arena, what it wrote).
//!
//! `cargo test` builds the examples before it runs the tests; they are found in the first
//! `examples/` folder above the test binary (`target/<profile>/examples/`). (`cargo test --test
//! examples` alone does not rebuild them: run plain `cargo test`.)

use std::path::PathBuf;
use std::process::{Command, Output};

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/<name>; cargo's newer
    // build-dir layout (nightly's default) puts the test binary deeper, in
    // target/<profile>/build/folio/<hash>/out/, so look in each ancestor's `examples/`.
    let found =
        exe.ancestors().skip(1).map(|dir| dir.join("examples").join(&file)).find(|p| p.exists());
    found.unwrap_or_else(|| {
        let deps = exe.parent().and_then(|deps| deps.parent()).expect("inside target/<profile>");
        deps.join("examples").join(&file)
    })
}

fn run(name: &str, args: &[&str]) -> Output {
    run_on(name, args, None)
}

/// Runs example `name` with `args`, on `threads` rayon threads if given.
fn run_on(name: &str, args: &[&str], threads: Option<usize>) -> Output {
    let path = example(name);
    assert!(path.exists(), "{} is not built (cargo test builds the examples)", path.display());
    let mut command = Command::new(&path);
    if let Some(threads) = threads {
        command.env("RAYON_NUM_THREADS", threads.to_string());
    }
    let output = command.args(args).output().expect("the example starts");
    assert!(
        output.status.success(),
        "example {name} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn small_examples_run_and_hold_their_claims() {
    for name in [
        "hello",
        "hybrid_storage",
        "parallel_schedule",
        "change_detection",
        "events",
        "commands",
        "hierarchy",
        "storage_demo",
    ] {
        let out = stdout(&run(name, &[]));
        assert!(out.lines().any(|l| l.starts_with("ok:")), "{name} printed no `ok:` line:\n{out}");
    }
}

#[test]
fn transforms_propagate_incrementally_and_match_a_full_walk() {
    let out = stdout(&run("transforms", &["--nodes", "3000", "--frames", "55"]));
    assert!(out.contains("ok: 55 frames, every one equal to a full recomputation"), "{out}");
    for event in [
        "re-parented 10 subtrees",
        "disabled a subtree",
        "enabled the subtree",
        "despawned a subtree",
    ] {
        assert!(out.contains(event), "the run did not reach `{event}`:\n{out}");
    }
}

#[test]
fn rollback_matches_the_run_without_rollback() {
    let out = stdout(&run("rollback", &[]));
    assert!(out.contains("every frame matches the run without rollback"), "{out}");
}

#[test]
fn arena_runs_and_draws_its_final_world() {
    let svg = std::env::temp_dir().join(format!("folio-arena-test-{}.svg", std::process::id()));
    let out =
        run("arena", &["--entities", "2000", "--frames", "60", "--out", svg.to_str().unwrap()]);
    let summary = stdout(&out);
    assert!(summary.contains("60 frames"), "{summary}");
    let alive: usize = summary
        .split(" alive")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the summary names the agents alive");
    let picture = std::fs::read_to_string(&svg).expect("the picture was written");
    let _ = std::fs::remove_file(&svg);
    assert!(picture.starts_with("<svg") && picture.trim_end().ends_with("</svg>"));
    assert!(picture.contains(&format!("population {alive}")), "the title names the population");
    // Every agent is a circle; the burning ones get a second ring, the legend has four dots.
    let circles = picture.matches("<circle").count();
    assert!(circles >= alive + 4, "{circles} circles for {alive} agents");
}

#[test]
fn arena_is_deterministic_across_thread_counts_and_rejects_bad_arguments() {
    let args = ["--entities", "500", "--frames", "40", "--seed", "7", "--out"];
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let (a, b) = (
        dir.join(format!("folio-arena-{pid}-a.svg")),
        dir.join(format!("folio-arena-{pid}-b.svg")),
    );
    let checksum = |out: &Output| {
        stdout(out).lines().find(|l| l.contains("checksum")).map(str::to_owned).expect("a checksum")
    };
    // The same world on one thread and on four.
    let one = run_on("arena", &[&args[..], &[a.to_str().unwrap()]].concat(), Some(1));
    let four = run_on("arena", &[&args[..], &[b.to_str().unwrap()]].concat(), Some(4));
    assert_eq!(checksum(&one), checksum(&four));
    assert_eq!(std::fs::read(&a).ok(), std::fs::read(&b).ok(), "the same picture");
    let _ = (std::fs::remove_file(a), std::fs::remove_file(b));

    for bad in [&["--entities", "many"][..], &["--frames"], &["--fast"], &["--entities", "0"]] {
        let out = Command::new(example("arena")).args(bad).output().expect("starts");
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: arena"), "{bad:?}");
    }
}
