//! Integration tests for experiments (`compare`, `sweep`, `run-spec`) and `results`: with the
//! hidden fake executor for deterministic scheduling/statistics, and on the real machine.

use crate::util::{cpuidle_driver, pmlab};
use serde_json::Value;
use std::path::Path;

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn db_arg(dir: &Path) -> String {
    dir.join("pmlab.db").display().to_string()
}

/// Outcome of the first non-reference row of a report.
fn outcome(report: &Value) -> String {
    report["workloads"][0]["rows"][1]["comparison"]["outcome"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

it_test!(aa_honesty_with_fake_executor);
fn aa_honesty_with_fake_executor() {
    let dir = tempfile::tempdir().unwrap();
    let mut no_change = 0;
    for seed in 1..=20 {
        let out = pmlab()
            .args([
                "compare",
                "--a",
                "",
                "--b",
                "",
                "--fake-executor",
                "sd=2",
                "--format",
                "json",
                "-q",
            ])
            .args([
                "--seed",
                &seed.to_string(),
                "--db",
                &db_arg(dir.path()),
                "pipe",
                "--loops",
                "1000",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        let v = json_of(&out);
        if outcome(&v) == "no_significant_change" {
            no_change += 1;
            let verdict = v["workloads"][0]["rows"][1]["comparison"]["verdict"]
                .as_str()
                .unwrap();
            assert!(
                verdict.starts_with("no significant change (CI straddles 0: "),
                "{verdict}"
            );
        }
    }
    assert!(
        no_change >= 19,
        "A/A: only {no_change}/20 said no significant change"
    );
}

it_test!(interleaving_cancels_linear_drift_but_sequential_does_not);
fn interleaving_cancels_linear_drift_but_sequential_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let run = |order: &str| {
        let out = pmlab()
            .args([
                "compare",
                "--fake-executor",
                "sd=0.5,drift=0.2",
                "--order",
                order,
                "--max-runs",
                "40",
            ])
            .args([
                "--target-ci",
                "0.0001",
                "--no-early-stop",
                "--seed",
                "5",
                "--format",
                "json",
                "-q",
            ])
            .args(["--db", &db_arg(dir.path()), "pipe"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        json_of(&out)
    };
    let interleaved = run("interleaved");
    assert_eq!(
        outcome(&interleaved),
        "no_significant_change",
        "{interleaved}"
    );
    let sequential = run("sequential");
    assert_eq!(
        outcome(&sequential),
        "worse",
        "drift makes B look slower when run after A"
    );
    assert_eq!(sequential["workloads"][0]["rows"][1]["primary"]["n"], 20);
}

it_test!(hooks_and_runs_happen_in_order);
fn hooks_and_runs_happen_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    let l = log.display().to_string();
    let out = pmlab()
        .args([
            "compare",
            "--b",
            "fake.mean=100",
            "--fake-executor",
            &format!("log={l}"),
            "--max-runs",
            "4",
            "-q",
        ])
        .args([
            "--setup",
            &format!("echo SETUP >> {l}"),
            "--prepare",
            &format!("echo PREPARE >> {l}"),
        ])
        .args([
            "--cleanup",
            &format!("echo CLEANUP >> {l}"),
            "--db",
            &db_arg(dir.path()),
            "pipe",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "hook setup");
    assert_eq!(lines[1], "SETUP");
    // Every run: configure, prepare hook (logged, then its output), run.
    let runs: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("run ") || l.starts_with("warmup "))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(runs.len(), 2 + 4, "{text}");
    for i in runs {
        assert!(lines[i - 3].starts_with("configure "), "{text}");
        assert_eq!(lines[i - 2], "hook prepare");
        assert_eq!(lines[i - 1], "PREPARE");
    }
    assert_eq!(
        &lines[lines.len() - 3..],
        ["hook cleanup", "CLEANUP", "restore"]
    );
}

it_test!(failed_run_is_recorded_and_the_experiment_goes_on);
fn failed_run_is_recorded_and_the_experiment_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let out = pmlab()
        .args([
            "compare",
            "--fake-executor",
            "fail_at=3",
            "--max-runs",
            "8",
            "--no-early-stop",
            "--target-ci",
            "0.0001",
            "-q",
        ])
        .args(["--db", &db, "pipe"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("1 of 4 runs failed"),
        "{}",
        stdout_of(&out)
    );
    let out = pmlab()
        .args([
            "results", "--db", &db, "export", "latest", "--format", "json",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 + 8);
    let failed: Vec<&Value> = runs.iter().filter(|r| r["status"] == "failed").collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error"], "fake failure in run 3");
    assert_eq!(v["info"]["status"], "complete");
}

it_test!(bad_input_is_refused_before_anything_runs);
fn bad_input_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pmlab.db");
    let d = db.display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "compare",
                "--fake-executor",
                "",
                "--b",
                "nosuch.knob=1",
                "--db",
                &d,
                "pipe",
            ],
            "unknown knob `nosuch.knob`",
        ),
        (
            vec![
                "compare",
                "--fake-executor",
                "",
                "--b",
                "fake.mean=fast",
                "--db",
                &d,
                "pipe",
            ],
            "is not a number",
        ),
        (
            vec![
                "compare",
                "--fake-executor",
                "",
                "--b",
                "novalue",
                "--db",
                &d,
                "pipe",
            ],
            "is not KNOB=VALUE",
        ),
        (
            vec![
                "sweep",
                "--fake-executor",
                "",
                "--db",
                &d,
                "fake.mean=",
                "pipe",
            ],
            "empty value list in sweep `fake.mean`",
        ),
        (
            vec![
                "sweep",
                "--fake-executor",
                "",
                "--db",
                &d,
                "fake.mean=,,",
                "pipe",
            ],
            "empty value list",
        ),
        (
            vec!["sweep", "--fake-executor", "", "--db", &d, "pipe"],
            "no KNOB=V1,V2,... given",
        ),
        (
            vec!["sweep", "--fake-executor", "", "--db", &d, "fake.mean=1,2"],
            "no workload given",
        ),
        (
            vec![
                "compare",
                "--fake-executor",
                "",
                "--reference",
                "C",
                "--db",
                &d,
                "pipe",
            ],
            "--reference C",
        ),
        (
            vec![
                "compare",
                "--fake-executor",
                "",
                "--target-ci",
                "0",
                "--db",
                &d,
                "pipe",
            ],
            "target CI",
        ),
        (
            vec!["compare", "--fake-executor", "bogus=1", "--db", &d, "pipe"],
            "unknown key",
        ),
    ];
    for (args, message) in cases {
        let out = pmlab().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = stderr_of(&out);
        assert!(
            err.contains(message),
            "{args:?}: expected `{message}` in: {err}"
        );
        assert!(!db.exists(), "{args:?} created the store");
    }
}

it_test!(unknown_knob_on_the_machine_is_refused_before_any_run);
fn unknown_knob_on_the_machine_is_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pmlab.db");
    let out = pmlab()
        .args([
            "compare",
            "--b",
            "nosuch.knob=1",
            "--db",
            &db.display().to_string(),
            "pipe",
            "--loops",
            "100",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr_of(&out).contains("nosuch.knob"),
        "{}",
        stderr_of(&out)
    );
    assert!(!db.exists());
}

it_test!(foreign_store_file_is_refused_and_untouched);
fn foreign_store_file_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.db");
    std::fs::write(&notes, "my notes, not a database\n".repeat(20)).unwrap();
    let before = std::fs::read(&notes).unwrap();
    for args in [
        vec![
            "compare",
            "--fake-executor",
            "",
            "--db",
            notes.to_str().unwrap(),
            "pipe",
        ],
        vec!["results", "--db", notes.to_str().unwrap(), "list"],
    ] {
        let out = pmlab().args(&args).output().unwrap();
        assert!(!out.status.success());
        assert!(
            stderr_of(&out).contains("not a pmlab result store"),
            "{}",
            stderr_of(&out)
        );
        assert_eq!(std::fs::read(&notes).unwrap(), before);
    }
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no -wal/-shm files: {names:?}");
}

it_test!(two_experiments_on_one_store_at_once_both_succeed);
fn two_experiments_on_one_store_at_once_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let spawn = |seed: &str| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("pmlab"))
            .args([
                "compare",
                "--fake-executor",
                "sleep_ms=5",
                "--max-runs",
                "60",
                "--no-early-stop",
                "--target-ci",
                "0.0001",
            ])
            .args(["-q", "--seed", seed, "--db", &db, "pipe"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("1"), spawn("2"));
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
    }
    let out = pmlab()
        .args(["results", "--db", &db, "list", "--json"])
        .output()
        .unwrap();
    let list = json_of(&out);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert!(
        list.iter()
            .all(|e| e["runs"] == 60 && e["status"] == "complete"),
        "{list:?}"
    );
}

it_test!(sigint_keeps_the_runs_so_far_and_marks_the_experiment_incomplete);
fn sigint_keeps_the_runs_so_far_and_marks_the_experiment_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pmlab"))
        .args([
            "sweep",
            "--fake-executor",
            "sleep_ms=100",
            "-q",
            "--db",
            &db,
            "fake.mean=1,2,3",
            "pipe",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    crate::util::kill(child.id() as i32, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr_of(&out).contains("interrupted"),
        "{}",
        stderr_of(&out)
    );
    assert!(
        stdout_of(&out).contains("[incomplete]"),
        "the partial report is printed: {}",
        stdout_of(&out)
    );
    let out = pmlab()
        .args(["results", "--db", &db, "list", "--json"])
        .output()
        .unwrap();
    let list = json_of(&out);
    assert_eq!(list[0]["status"], "incomplete");
    let runs = list[0]["runs"].as_u64().unwrap();
    assert!((3..20).contains(&runs), "{runs} runs stored");
}

it_test!(sweep_formats_and_knee);
fn sweep_formats_and_knee() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let out = pmlab()
        .args([
            "sweep",
            "--fake-executor",
            "sd=0.5",
            "--seed",
            "3",
            "-q",
            "--db",
            &db,
        ])
        .args(["fake.mean=150,120,100.2,100,100.4", "pipe", "--loops", "10"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    assert!(text.contains("knee: 100.2"), "{text}");
    assert!(text.contains("faster by"), "{text}");
    for (format, check) in [
        ("markdown", "| config |"),
        ("mail", "knee: 100.2"),
        ("csv", "experiment,workload,configuration"),
        ("json", "\"knee\""),
    ] {
        let out = pmlab()
            .args(["results", "--db", &db, "show", "latest", "--format", format])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        let text = stdout_of(&out);
        assert!(text.contains(check), "{format}: {text}");
        if format == "mail" {
            assert!(text.lines().all(|l| l.chars().count() <= 72), "{text}");
        }
    }
    let out = pmlab()
        .args([
            "results",
            "--db",
            &db,
            "show",
            "1",
            "--reference",
            "100",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(
        v["workloads"][0]["rows"][0]["comparison"]["outcome"],
        "worse"
    );
}

it_test!(results_compare_and_export);
fn results_compare_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    for (mean, seed) in [("100", "1"), ("90", "2")] {
        let out = pmlab()
            .args([
                "compare",
                "--fake-executor",
                &format!("mean={mean}"),
                "--seed",
                seed,
                "-q",
                "--db",
                &db,
                "pipe",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
    }
    let out = pmlab()
        .args(["results", "--db", &db, "compare", "1", "2", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    let rows = v["workloads"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[2]["label"], "#2 A");
    assert_eq!(rows[2]["versus"], "#1 A");
    assert_eq!(rows[2]["comparison"]["outcome"], "better");

    let out = pmlab()
        .args(["results", "--db", &db, "export", "2", "--format", "csv"])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("experiment,run,configuration,knobs,workload,round,order,warmup"));
    assert!(lines.count() >= 3 * 4, "{text}");

    // Parquet: one file per table, read back by pyarrow (scripts/setup.sh installs it) and
    // checked against the CSV export's metric rows.
    let pq = dir.path().join("pq");
    let out = pmlab()
        .args([
            "results", "--db", &db, "export", "2", "--format", "parquet", "-o",
        ])
        .arg(&pq)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out).lines().count(), 4, "{}", stdout_of(&out));
    let csv_metric_rows = text
        .lines()
        .skip(1)
        .filter(|l| !l.contains(",,,,,"))
        .count();
    let script = r#"
import sys, pyarrow.parquet as pq
d, n = sys.argv[1], int(sys.argv[2])
e = pq.read_table(f"{d}/experiment-2-experiment.parquet").to_pylist()
assert len(e) == 1 and e[0]["experiment"] == 2 and e[0]["kind"] == "compare", e
c = pq.read_table(f"{d}/experiment-2-configurations.parquet").to_pylist()
assert [r["configuration"] for r in c] == ["A", "B"] and c[0]["knob"] is None, c
r = pq.read_table(f"{d}/experiment-2-runs.parquet").to_pydict()
assert r["warmup"][:2] == [True, True] and set(r["status"]) == {"ok"}, r
m = pq.read_table(f"{d}/experiment-2-metrics.parquet").to_pydict()
assert len(m["value"]) == n, (len(m["value"]), n)
assert set(m["run"]) <= set(r["run"]) and all(v == v for v in m["value"])
print("ok")
"#;
    crate::util::need_python(&["pyarrow"], "scripts/setup.sh installs it");
    let py = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&pq)
        .arg(csv_metric_rows.to_string())
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "pyarrow read (scripts/setup.sh installs it): {}",
        String::from_utf8_lossy(&py.stderr)
    );

    let out = pmlab()
        .args(["results", "--db", &db, "show", "99"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr_of(&out).contains("no experiment 99"));
    let out = pmlab()
        .args([
            "results",
            "--db",
            &dir.path().join("none.db").display().to_string(),
            "list",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!dir.path().join("none.db").exists());
}

it_test!(run_spec_battery);
fn run_spec_battery() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("battery.toml");
    std::fs::write(
        &spec,
        r#"
name = "battery"
reference = "after"
max_runs = 12
[[configuration]]
label = "before"
knobs = "fake.mean=100"
[[configuration]]
label = "after"
knobs = ["fake.mean=90"]
[[workload]]
run = "pipe --loops 10"
[[workload]]
label = "msg"
run = ["messaging", "--groups", "1"]
"#,
    )
    .unwrap();
    let out = pmlab()
        .args([
            "run-spec",
            spec.to_str().unwrap(),
            "--fake-executor",
            "",
            "--seed",
            "4",
            "--no-early-stop",
            "-q",
        ])
        .args(["--format", "json", "--db", &db_arg(dir.path())])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert_eq!(v["workloads"].as_array().unwrap().len(), 2);
    assert_eq!(v["workloads"][1]["label"], "msg");
    assert_eq!(v["header"]["runs"], 12);
    assert_eq!(v["workloads"][0]["rows"][0]["versus"], "after");
    assert_eq!(
        v["workloads"][0]["rows"][0]["comparison"]["outcome"],
        "worse"
    );

    std::fs::write(&spec, "[[workload]]\nrun = \"pipe\"\nbogus = 1\n").unwrap();
    let out = pmlab()
        .args(["run-spec", spec.to_str().unwrap(), "--fake-executor", ""])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr_of(&out).contains("battery.toml"),
        "{}",
        stderr_of(&out)
    );
}

it_test!(help_has_examples);
fn help_has_examples() {
    for cmd in ["compare", "sweep", "run-spec", "results"] {
        let out = pmlab().args([cmd, "--help"]).output().unwrap();
        assert!(stdout_of(&out).contains("Examples:"), "{cmd}");
        assert!(
            !stdout_of(&out).contains("fake-executor"),
            "{cmd}: the fake executor stays hidden"
        );
    }
}

it_test!(real_compare_as_found_measures_pipe_with_counter_side_metrics);
fn real_compare_as_found_measures_pipe_with_counter_side_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let out = pmlab()
        .args([
            "compare",
            "--a",
            "",
            "--b",
            "",
            "--max-runs",
            "6",
            "--seed",
            "9",
            "--format",
            "json",
            "-q",
        ])
        .args(["--db", &db, "pipe", "--loops", "2000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    let w = &v["workloads"][0];
    assert_eq!(w["primary"]["direction"], "lower");
    assert_eq!(w["rows"][0]["primary"]["n"], 3);
    assert_eq!(w["rows"][1]["primary"]["n"], 3);
    let side: Vec<&str> = w["side_metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(
        side.contains(&"irq.CAL.per_s") && side.contains(&"ctxt.per_s"),
        "{side:?}"
    );
    assert!(!v["systems"][0]["kernel_release"]
        .as_str()
        .unwrap()
        .is_empty());
    let out = pmlab()
        .args(["results", "--db", &db, "show", "latest", "--runs"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(stdout_of(&out).contains("warm-up"), "{}", stdout_of(&out));
}

it_test!(real_compare_with_trace_stores_a_trace_per_run);
/// The machine's cpuidle driver (`none` when there is none: idle is the arch default).
fn real_compare_with_trace_stores_a_trace_per_run() {
    crate::util::need_root("recording a trace");
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let out = pmlab()
        .args(["compare", "--trace", "--max-runs", "2", "--seed", "3", "-q"])
        .args(["--format", "json", "--side", "trace.*"])
        .args(["--db", &db, "pipe", "--loops", "1000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    let side: Vec<&str> = v["workloads"][0]["side_metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    for name in [
        "trace.events",
        "trace.lost",
        "trace.idle.share_pct",
        "trace.wakeups.per_s",
    ] {
        assert!(side.contains(&name), "{name} missing in {side:?}");
    }
    let out = pmlab()
        .args([
            "results", "--db", &db, "export", "latest", "--format", "json",
        ])
        .output()
        .unwrap();
    let e = json_of(&out);
    let runs = e["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "2 warm-ups + 2 runs");
    for r in runs {
        let p = Path::new(r["trace_path"].as_str().expect("trace path stored"));
        assert!(
            p.starts_with(dir.path().join("pmlab.db.traces/experiment-1")),
            "{p:?}"
        );
        let head = std::fs::read(p).unwrap();
        assert_eq!(
            &head[..10],
            b"\x17\x08\x44tracing",
            "{p:?} is not a trace.dat"
        );
    }
    let events = runs[2]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "trace.events")
        .unwrap()["value"]
        .as_f64()
        .unwrap();
    assert!(events > 1000.0, "{events} events for 1000 pipe loops");
    let instances = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(instances, 0, "a tracefs instance was left behind");
}

it_test!(real_polling_ab_verdict_within_five_rounds_or_no_driver_said);
/// A/B power: polling 0 vs 200 µs on pipe. With a cpuidle driver that polls (haltpoll) the
/// difference is significant within 5 rounds; without a cpuidle driver the knob does nothing
/// and the report must say so (and must not invent a difference).
fn real_polling_ab_verdict_within_five_rounds_or_no_driver_said() {
    crate::util::need_root("setting haltpoll's poll limit");
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let out = pmlab()
        .args(["compare", "--a", "haltpoll.guest_halt_poll_ns=0"])
        .args([
            "--b",
            "haltpoll.guest_halt_poll_ns=200us",
            "--max-runs",
            "10",
        ])
        .args(["--seed", "5", "--format", "json", "-q", "--db", &db])
        .args(["pipe", "--loops", "20000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    let notes = v["notes"].to_string();
    let driver = cpuidle_driver();
    if driver == "none" {
        assert!(
            notes.contains("no cpuidle driver on this machine"),
            "{notes}"
        );
    } else if driver == "haltpoll" {
        assert!(!notes.contains("no cpuidle driver"), "{notes}");
        let o = outcome(&v);
        // Polling changes how a CPU leaves idle: on a machine busy with other work the CPUs
        // seldom idle, and the lab must say so rather than invent a difference.
        let verdict = v["workloads"][0]["rows"][1]["comparison"]["verdict"].to_string();
        if o == "better" || o == "worse" {
            assert!(v["header"]["rounds"].as_u64().unwrap() <= 5);
        } else if verdict.contains("machine busy") {
            skip_part!("the verdict within 5 rounds: the machine was busy ({verdict})");
        } else {
            panic!("no verdict in 5 rounds on a quiet machine: {o}: {verdict}");
        }
    }
}
