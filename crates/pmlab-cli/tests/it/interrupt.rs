//! One interrupt policy, checked per command on the real machine: Ctrl-C (SIGINT) during
//! `compare`, `sweep`, `run-spec`, `study`, `hotplug` and `run --set` stops the running
//! workload within 1 s, puts every knob back, and keeps the finished runs in the store.
//! Also: a pmlab option written after the workload is named as pmlab's.

use crate::util::{need_path, need_root, pmlab, Cpu1Online};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const RCU: &str = "/sys/kernel/rcu_expedited";

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Skips the running test unless this machine can run the live interrupt tests (root,
/// rcu_expedited).
fn live() {
    need_root("the interrupt tests hold a knob");
    need_path(RCU, "the interrupt tests hold rcu_expedited");
}

/// Experiments in the store, as `pmlab results list --json` shows them.
fn experiments(db: &Path) -> Vec<Value> {
    if !db.exists() {
        return Vec::new();
    }
    let out = pmlab()
        .args([
            "results",
            "--db",
            &db.display().to_string(),
            "list",
            "--json",
        ])
        .output()
        .unwrap();
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

fn stored_runs(db: &Path) -> u64 {
    experiments(db)
        .iter()
        .map(|e| e["runs"].as_u64().unwrap_or(0))
        .sum()
}

/// Start `pmlab ARGS`, wait until `ready()` (at most 60 s), let the next run start, send
/// SIGINT; returns the output and how long the process took to exit after the signal.
fn interrupt(args: &[&str], dir: &Path, ready: impl Fn() -> bool) -> (Output, Duration) {
    let child = Command::new(assert_cmd::cargo::cargo_bin("pmlab"))
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !ready() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{args:?}: never got ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Into the next run, well before it would end by itself.
    std::thread::sleep(Duration::from_millis(300));
    crate::util::kill(child.id() as i32, libc::SIGINT);
    let sent = Instant::now();
    let out = child.wait_with_output().unwrap();
    (out, sent.elapsed())
}

/// The interrupted experiment: a failure naming the interruption, quick, the knob as found,
/// the finished runs stored and the experiment marked incomplete.
fn check_experiment(what: &str, out: &Output, took: Duration, db: &Path, rcu: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: {err}");
    assert!(err.contains("interrupted"), "{what}: {err}");
    assert!(
        took < Duration::from_secs(1),
        "{what}: exited {took:?} after SIGINT; the 2 s run should have been cancelled"
    );
    assert_eq!(read(RCU), rcu, "{what}: rcu_expedited restored");
    let list = experiments(db);
    assert!(
        list.iter().any(|e| e["status"] == "incomplete"),
        "{what}: {list:?}"
    );
    assert!(stored_runs(db) >= 1, "{what}: finished runs kept: {list:?}");
}

/// `compare`/`sweep`/`run-spec` with B (or the second value) at rcu.expedited=1, on 2 s idle
/// runs: interrupted in the run after the first measured one.
fn experiment_case(what: &str, args: &[&str]) {
    let rcu = read(RCU);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let mut full: Vec<&str> = args.to_vec();
    let db_s = db.display().to_string();
    full.splice(1..1, ["--db", db_s.as_str(), "-q"]);
    let (out, took) = interrupt(&full, dir.path(), || stored_runs(&db) >= 1);
    check_experiment(what, &out, took, &db, &rcu);
}

it_test!(ctrl_c_during_compare);
fn ctrl_c_during_compare() {
    live();
    experiment_case(
        "compare",
        &[
            "compare",
            "--a",
            "",
            "--b",
            "rcu.expedited=1",
            "idle",
            "--duration",
            "2s",
        ],
    );
}

it_test!(ctrl_c_during_sweep);
fn ctrl_c_during_sweep() {
    live();
    experiment_case(
        "sweep",
        &["sweep", "rcu.expedited=0,1", "idle", "--duration", "2s"],
    );
}

it_test!(ctrl_c_during_run_spec);
fn ctrl_c_during_run_spec() {
    live();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("s.toml");
    std::fs::write(
        &spec,
        "[[configuration]]\nlabel = \"found\"\n[[configuration]]\nlabel = \"exp\"\n\
         knobs = \"rcu.expedited=1\"\n[[workload]]\nrun = \"idle --duration 2s\"\n",
    )
    .unwrap();
    experiment_case("run-spec", &["run-spec", &spec.display().to_string()]);
}

it_test!(ctrl_c_during_study);
fn ctrl_c_during_study() {
    live();
    let rcu = read(RCU);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let db_s = db.display().to_string();
    let (out, took) = interrupt(
        &[
            "study", "--quick", "--only", "idle", "-q", "--db", &db_s, "--out", "r",
        ],
        dir.path(),
        || stored_runs(&db) >= 1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    // The study writes its report of what was done after the stop: allow for that.
    assert!(
        took < Duration::from_secs(3),
        "study exited {took:?} after SIGINT"
    );
    assert_eq!(read(RCU), rcu);
    assert!(stored_runs(&db) >= 1, "finished runs kept");
}

it_test!(ctrl_c_during_hotplug);
fn ctrl_c_during_hotplug() {
    live();
    crate::util::need_hotplug_cpu1();
    let _cpu = Cpu1Online;
    let rcu = read(RCU);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let db_s = db.display().to_string();
    let child = Command::new(assert_cmd::cargo::cargo_bin("pmlab"))
        .args([
            "hotplug",
            "--cpus",
            "1",
            "--cycles",
            "2000",
            "--load",
            "1",
            "--loader",
            "spin",
            "--mitigate",
            "rcu-expedited",
            "--no-trace",
            "--db",
            &db_s,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ready once the loader runs and cpu1 has gone offline (the cycles have begun).
    let children = || {
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
            .map(|s| s.split_whitespace().count())
            .unwrap_or(0)
    };
    let t0 = Instant::now();
    while children() == 0 || read(crate::util::CPU1_ONLINE) != "0" {
        assert!(t0.elapsed() < Duration::from_secs(60), "never got ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    crate::util::kill(child.id() as i32, libc::SIGINT);
    let sent = Instant::now();
    // The running work (cycles and loader) stops within 1 s; saving may take longer on a
    // busy disk.
    while children() > 0 && sent.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopped = sent.elapsed();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        stopped < Duration::from_secs(1),
        "the loader ran {stopped:?} after SIGINT"
    );
    assert_eq!(read(crate::util::CPU1_ONLINE), "1");
    assert_eq!(read(RCU), rcu);
    assert!(
        err.contains("saved as experiment"),
        "the cycles done are stored: {err}"
    );
}

it_test!(ctrl_c_during_run_set);
fn ctrl_c_during_run_set() {
    live();
    let rcu = read(RCU);
    let want = if rcu == "1" { "0" } else { "1" };
    let dir = tempfile::tempdir().unwrap();
    let set = format!("rcu.expedited={want}");
    let (out, took) = interrupt(
        &["run", "idle", "--duration", "30s", "--set", &set],
        dir.path(),
        || read(RCU) == want,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        took < Duration::from_secs(1),
        "run exited {took:?} after SIGINT"
    );
    assert_eq!(read(RCU), rcu);
}

it_test!(a_pmlab_option_after_the_workload_is_named_as_pmlabs);
fn a_pmlab_option_after_the_workload_is_named_as_pmlabs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let db_s = db.display().to_string();
    for (cmd, rest) in [
        (
            "compare",
            vec![
                "--a",
                "",
                "--b",
                "",
                "pipe",
                "--loops",
                "5000",
                "--max-runs",
                "8",
            ],
        ),
        (
            "sweep",
            vec!["fake.mean=1,2", "pipe", "--loops", "5000", "--max-runs=8"],
        ),
    ] {
        let out = pmlab()
            .current_dir(dir.path())
            .args([cmd, "--db", &db_s])
            .args(&rest)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd}: {err}");
        assert!(
            err.contains(&format!("`--max-runs` is an option of `pmlab {cmd}`"))
                && err.contains("put it before the workload"),
            "{cmd}: {err}"
        );
        assert!(!db.exists(), "{cmd}: bad input changes nothing");
    }
    // An option the workload has is still the workload's.
    let out = pmlab()
        .current_dir(dir.path())
        .args([
            "compare",
            "--fake-executor",
            "sd=1",
            "-q",
            "--max-runs",
            "4",
        ])
        .args(["--db", &db.display().to_string(), "--a", "", "--b", ""])
        .args(["pipe", "--loops", "10"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
