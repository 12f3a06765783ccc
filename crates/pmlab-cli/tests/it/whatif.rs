//! `pmlab whatif`: the replay on the haltpoll fixtures, its output formats, and bad input
//! refused before any work.

use crate::util::{fixtures, pmlab};
use predicates::prelude::*;

fn off() -> std::path::PathBuf {
    fixtures().join("haltpoll_pipe_off.dat")
}

it_test!(whatif_json_on_the_off_fixture_predicts_caught_wakes_and_bounds);
fn whatif_json_on_the_off_fixture_predicts_caught_wakes_and_bounds() {
    let out = pmlab()
        .args(["whatif", "--json", "--values", "0,50us,200us"])
        .arg(off())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let vals = v["values"].as_array().unwrap();
    assert_eq!(vals.len(), 3);
    // nothing is caught without polling; at 200 µs nearly every IPI wake is
    assert_eq!(vals[0]["caught"], 0);
    let rate = vals[2]["catch_rate"].as_f64().unwrap();
    assert!(rate > 0.9, "{rate}");
    let b = &vals[2]["us_per_op"];
    let (f, c) = (
        b["first_order"].as_f64().unwrap(),
        b["causal"].as_f64().unwrap(),
    );
    let traced = v["pingpong"]["traced_us_per_op"].as_f64().unwrap();
    assert!(c <= f && f < traced, "{c} {f} {traced}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("a default"), "defaults named: {notes}");
}

it_test!(whatif_formats_table_markdown_mail_csv);
fn whatif_formats_table_markdown_mail_csv() {
    for (fmt, needle) in [
        ("table", "knee"),
        ("markdown", "| value_us |"),
        ("mail", "us_per_op_causal"),
        ("csv", "value_us,caught"),
    ] {
        pmlab()
            .args([
                "whatif",
                "--policy",
                "fixed",
                "--values",
                "10us,100us",
                "--format",
                fmt,
            ])
            .arg(off())
            .assert()
            .success()
            .stdout(predicate::str::contains(needle));
    }
}

it_test!(whatif_reverse_on_the_polling_fixture);
fn whatif_reverse_on_the_polling_fixture() {
    pmlab()
        .args(["whatif", "--reverse"])
        .arg(fixtures().join("haltpoll_pipe_200us.dat"))
        .assert()
        .success()
        .stdout(predicate::str::contains("predicted_ipi_wakes"));
}

it_test!(whatif_refuses_negative_and_unparsable_values_before_reading_the_trace);
fn whatif_refuses_negative_and_unparsable_values_before_reading_the_trace() {
    // the trace does not exist: the value error must come first
    for bad in ["-5us", "abc", "10parsecs"] {
        pmlab()
            .args(["whatif", "/nonexistent.dat", "--values"])
            .arg(bad)
            .assert()
            .failure()
            .stderr(predicate::str::contains("--values"));
    }
    pmlab()
        .args(["whatif", "/nonexistent.dat", "--policy", "sometimes"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("unknown policy"));
    pmlab()
        .args(["whatif", "/nonexistent.dat", "--format", "pdf"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("--format"));
    // html is a value of the one format type, but not of a command that prints text.
    pmlab()
        .args(["whatif", "/nonexistent.dat", "--format", "html"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "--format html is not supported by a command that prints text; choose table, markdown, mail, json or csv",
        ));
}

it_test!(whatif_names_missing_events_and_how_to_record_them);
fn whatif_names_missing_events_and_how_to_record_them() {
    // trappy_idle.dat has cpu_idle and sched_switch but no wake events
    pmlab()
        .arg("whatif")
        .arg(fixtures().join("trappy_idle.dat"))
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("sched:sched_waking")
                .and(predicate::str::contains("pmlab record")),
        );
}

/// `pmlab whatif --json` on a trace; the parsed output.
fn whatif_json(trace: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let out = pmlab()
        .args(["whatif", "--json", "--values", "0,50us,200us"])
        .args(extra)
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Record the pipe workload here with haltpoll's limit set by the traced pmlab.
fn record_pipe_here(dir: &std::path::Path, name: &str, poll: &str) -> std::path::PathBuf {
    let out = dir.join(name);
    pmlab()
        .args(["record", "-o"])
        .arg(&out)
        .arg("--")
        .arg(assert_cmd::cargo::cargo_bin("pmlab"))
        .args(["run", "pipe", "--loops", "20000", "--cpus", "0,1", "--set"])
        .arg(format!("haltpoll.guest_halt_poll_ns={poll}"))
        .assert()
        .success();
    out
}

it_test!(whatif_on_a_recording_made_here);
/// On this machine: record the pipe with polling off, predict polling from it, and (where
/// the haltpoll driver lets polling be switched on) set the prediction beside a real
/// recording with polling at 200 µs.
fn whatif_on_a_recording_made_here() {
    let haltpoll = std::path::Path::new("/sys/module/haltpoll/parameters/guest_halt_poll_ns");
    if !crate::util::is_root() || !haltpoll.exists() {
        skip!("needs root and haltpoll's parameters (the fixture tests above cover the replay)");
    }
    let dir = tempfile::tempdir().unwrap();
    let off = record_pipe_here(dir.path(), "off.dat", "0");
    let v = whatif_json(&off, &[]);
    let vals = v["values"].as_array().unwrap();
    assert_eq!(vals[0]["caught"], 0, "nothing is caught without polling");
    let caught: Vec<u64> = vals.iter().map(|x| x["caught"].as_u64().unwrap()).collect();
    assert!(caught[1] > 0 && caught[2] >= caught[1], "{caught:?}");
    let traced = v["pingpong"]["traced_us_per_op"].as_f64().unwrap();
    let b = &vals[2]["us_per_op"];
    let (first, causal) = (
        b["first_order"].as_f64().unwrap(),
        b["causal"].as_f64().unwrap(),
    );
    assert!(
        causal <= first && first < traced,
        "{causal} {first} {traced}"
    );
    let notes = v["notes"].to_string();
    assert!(notes.contains("a default"), "defaults named: {notes}");
    assert!(notes.contains("cannot see"), "limits said: {notes}");
    if crate::util::cpuidle_driver() != "haltpoll" {
        skip!("the polling recording needs the haltpoll cpuidle driver");
    }
    let (on, others) =
        crate::util::others_share(|| record_pipe_here(dir.path(), "on.dat", "200us"));
    let cal = whatif_json(&off, &["--calibrate", on.to_str().unwrap()]);
    let measured = whatif_json(&on, &[])["pingpong"]["traced_us_per_op"]
        .as_f64()
        .unwrap();
    let c = &cal["values"].as_array().unwrap()[2]["us_per_op"];
    eprintln!(
        "traced µs/op: off {traced:.2}; at 200 µs predicted {causal:.2}..{first:.2} (defaults), \
         {:.2}..{:.2} (calibrated); measured {measured:.2}",
        c["causal"].as_f64().unwrap(),
        c["first_order"].as_f64().unwrap()
    );
    // Polling must be predicted to help, and did help: on a quiet machine, where the CPUs
    // idle between round trips (with other work on them they seldom halt, and polling has
    // nothing to catch).
    if measured >= traced && others > 0.05 {
        skip_part!(
            "machine busy: other processes used {:.0}% of CPU time during the polling recording ({measured:.1} µs/op against {traced:.1} off)",
            others * 100.0
        );
    } else {
        assert!(measured < traced, "{measured} {traced}");
    }
    assert!(c["first_order"].as_f64().unwrap() < traced);
}

it_test!(whatif_replays_a_stored_traced_run);
/// `compare --trace` runs are replayed later from the store with `whatif --run`, the same
/// report as on the trace file; a run without a trace, an unknown run and a missing store
/// are refused clearly.
fn whatif_replays_a_stored_traced_run() {
    if !crate::util::is_root() {
        skip!("compare --trace needs root");
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let out = pmlab()
        .args(["compare", "-q", "--db"])
        .arg(&db)
        .args(["--a", "", "--b", "", "--max-runs", "6", "--trace"])
        .args(["pipe", "--loops", "2000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e: serde_json::Value = serde_json::from_slice(
        &pmlab()
            .args(["results", "--db"])
            .arg(&db)
            .args(["export", "1", "--format", "json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let run = e["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["trace_path"].is_string() && r["warmup"] == false)
        .expect("a traced measured run");
    let id = run["id"].as_i64().unwrap();
    let file = std::path::PathBuf::from(run["trace_path"].as_str().unwrap());
    let from_store = pmlab()
        .args(["whatif", "--json", "--values", "0,50us,200us", "--db"])
        .arg(&db)
        .args(["--run", &id.to_string()])
        .output()
        .unwrap();
    assert!(
        from_store.status.success(),
        "{}",
        String::from_utf8_lossy(&from_store.stderr)
    );
    let a: serde_json::Value = serde_json::from_slice(&from_store.stdout).unwrap();
    assert_eq!(a, whatif_json(&file, &[]));
    let refused = |args: &[&str], want: &str| {
        let out = pmlab().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    let db_s = db.display().to_string();
    refused(&["whatif", "--db", &db_s, "--run", "99999"], "no run 99999");
    let untraced = e["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["trace_path"].is_null());
    if let Some(r) = untraced {
        let id = r["id"].as_i64().unwrap().to_string();
        refused(
            &["whatif", "--db", &db_s, "--run", &id],
            "recorded no trace",
        );
    }
    let missing = dir.path().join("none.db").display().to_string();
    refused(
        &["whatif", "--db", &missing, "--run", "1"],
        "no such result store",
    );
    assert!(!dir.path().join("none.db").exists());
}

/// The Juno r0 state table of the LISA fixtures (tests/states/juno_r0.toml).
fn juno() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/states/juno_r0.toml")
}

fn governor_json(args: &[&str], trace: &std::path::Path) -> serde_json::Value {
    let out = pmlab()
        .args(["whatif", "--json"])
        .args(args)
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

it_test!(whatif_governor_on_the_juno_fixture_reports_agreement_per_state);
/// The multi-state ARM fixture replayed under menu onto its own table (Juno r0). The
/// recorded kernel is a 4.x one whose menu differs from 6.18's, and the trace has no wake
/// sources: the agreement is measured and each state's gap is in docs/whatif.md.
fn whatif_governor_on_the_juno_fixture_reports_agreement_per_state() {
    let trace = fixtures().join("lisa_sched_load.dat");
    let j = juno();
    let v = governor_json(
        &["--governor", "menu", "--states", j.to_str().unwrap()],
        &trace,
    );
    assert_eq!(v["periods"], 231);
    let share = v["agreement_share"].as_f64().unwrap();
    let per: Vec<(String, u64, u64)> = v["agreement"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_string(),
                a["periods"].as_u64().unwrap(),
                a["same"].as_u64().unwrap(),
            )
        })
        .collect();
    eprintln!("menu over Juno r0: agreement {:.1}% {per:?}", share * 100.0);
    // every recorded idle period is accounted for, state by state
    assert_eq!(per.iter().map(|p| p.1).sum::<u64>(), 231);
    // WFI, the shallow choice, is reproduced; the deep ones are where the kernels differ
    assert!(per[0].2 as f64 / per[0].1 as f64 > 0.8, "{per:?}");
    assert!(share > 0.4 && share < 0.9, "{share}");
    // recorded figures come from the idle analysis: cpu-sleep-0's misses as the kernel counts them
    let rows = v["states"].as_array().unwrap();
    assert_eq!(rows[1]["recorded"]["entries"], 62);
    assert_eq!(rows[1]["recorded"]["below"], 50);
    let notes = v["notes"].to_string();
    assert!(notes.contains("no wake source"), "{notes}");
}

it_test!(whatif_governor_onto_a_root_tree_and_its_formats);
/// The haltpoll guest's pipe trace replayed onto a 4-state Intel machine's table (a fake
/// sysfs tree given as --root): every format renders, powers absent means no energy.
fn whatif_governor_onto_a_root_tree_and_its_formats() {
    let t = pmlab_kernel::sysinfo::fake::FakeTree::intel_box();
    let root = t.path().to_str().unwrap().to_string();
    let v = governor_json(
        &[
            "--governor",
            "teo",
            "--root",
            &root,
            "--recorded-root",
            pmlab_kernel::sysinfo::fake::FakeTree::haltpoll_guest(true)
                .path()
                .to_str()
                .unwrap(),
        ],
        &off(),
    );
    let rows = v["states"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[3]["name"], "C6");
    let entries: u64 = rows
        .iter()
        .map(|r| r["replayed"]["entries"].as_u64().unwrap())
        .sum();
    assert!(entries >= v["periods"].as_u64().unwrap());
    assert!(v["energy_mj"][1].is_null());
    assert!(v["agreement"].as_array().unwrap().is_empty());
    for (fmt, needle) in [
        ("table", "Per state"),
        ("markdown", "| state | name |"),
        ("mail", "rec_use_pct"),
        ("csv", "state,name,exit_us"),
    ] {
        pmlab()
            .args([
                "whatif",
                "--governor",
                "menu",
                "--root",
                &root,
                "--format",
                fmt,
            ])
            .arg(off())
            .assert()
            .success()
            .stdout(predicate::str::contains(needle));
    }
}

it_test!(whatif_governor_refuses_bad_input_naming_the_fix);
fn whatif_governor_refuses_bad_input_naming_the_fix() {
    let j = juno();
    let j = j.to_str().unwrap();
    // a governor the kernel version lacks
    pmlab()
        .args([
            "whatif",
            "--governor",
            "teo",
            "--kernel",
            "4.19",
            "--states",
            j,
        ])
        .arg(fixtures().join("lisa_sched_load.dat"))
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "teo governor is not in Linux 4.19: it appeared in 5.1",
        ));
    // a state table without exit latencies: TOML, and a root whose states lack `latency`
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[state]]\nname = \"C1\"\ntarget_residency_us = 2\n").unwrap();
    pmlab()
        .args(["whatif", "--governor", "menu", "--states"])
        .arg(&bad)
        .arg(off())
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "has no exit latency (exit_latency_us)",
        ));
    let t = pmlab_kernel::sysinfo::fake::FakeTree::intel_box();
    for c in 0..8 {
        std::fs::remove_file(t.root.path(&format!(
            "/sys/devices/system/cpu/cpu{c}/cpuidle/state2/latency"
        )))
        .unwrap();
    }
    pmlab()
        .args(["whatif", "--governor", "menu", "--root"])
        .arg(t.path())
        .arg(off())
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("state 2 (C1E) has no exit latency")
                .and(predicate::str::contains("cpuidle/state2/latency")),
        );
    // a trace without cpu_idle: the message names what to record
    pmlab()
        .args(["whatif", "--governor", "menu", "--states", j])
        .arg(fixtures().join("lisa_rtapp.dat"))
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("power:cpu_idle")
                .and(predicate::str::contains("pmlab record -e power:cpu_idle")),
        );
    // unknown names and values are refused before the trace is read
    for (flag, val, msg) in [
        ("--governor", "schedutil", "unknown governor"),
        ("--tick", "sometimes", "expected idle (NO_HZ_IDLE)"),
        ("--kernel", "new", "expected a version"),
        ("--disable", "C9", "no such state"),
    ] {
        let mut c = pmlab();
        c.args(["whatif", "--states", j]);
        if flag != "--governor" {
            c.args(["--governor", "menu"]);
        }
        c.args([flag, val])
            .arg("/nonexistent.dat")
            .assert()
            .failure()
            .stderr(predicate::str::contains(msg));
    }
}

it_test!(whatif_governor_live_replay_matches_the_kernels_counters);
/// On this machine: record `idle` under menu, replay it under ladder, run `idle` under ladder
/// and compare per-state use and time shares with the kernel's counters on CPU 0 (the
/// governors set only through `pmlab run --set`, restored after each run). The fixture tests
/// above cover the replay where this cannot run; bench/whatif-governors covers every pair and
/// workload.
fn whatif_governor_live_replay_matches_the_kernels_counters() {
    if !crate::util::is_root() {
        skip!("needs root (to switch the cpuidle governor)");
    }
    let avail = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/available_governors")
        .unwrap_or_default();
    if !avail.contains("menu") || !avail.contains("ladder") {
        skip!("needs the menu and ladder cpuidle governors");
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("idle-menu.dat");
    pmlab()
        .args(["record", "-o"])
        .arg(&rec)
        .arg("--")
        .arg(assert_cmd::cargo::cargo_bin("pmlab"))
        .args([
            "run",
            "--set",
            "cpuidle.governor=menu",
            "idle",
            "--duration",
            "2s",
        ])
        .assert()
        .success();
    let out = pmlab()
        .args(["whatif", "--governor", "ladder", "--cpus", "0", "--json"])
        .arg(&rec)
        .output()
        .unwrap();
    if !out.status.success() {
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("power:cpu_idle"), "{e}");
        skip!("CPU 0 never idled during the recording (a busy machine): nothing to replay");
    }
    let pred: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let meas: serde_json::Value = serde_json::from_slice(
        &pmlab()
            .args(["run", "--set", "cpuidle.governor=ladder", "--json", "idle"])
            .args(["--duration", "2s"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let side = meas["side_metrics"].as_array().unwrap();
    let counter = |state: &str, what: &str| -> f64 {
        let key: String = state
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("_");
        side.iter()
            .find(|m| m["name"] == format!("idle.{key}.{what}") && m["cpu"] == 0)
            .and_then(|m| m["value"].as_f64())
            .unwrap_or(0.0)
    };
    let rows = pred["states"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let uses: Vec<f64> = names.iter().map(|n| counter(n, "usage")).collect();
    let times: Vec<f64> = names.iter().map(|n| counter(n, "time_ms")).collect();
    let (tu, tt) = (uses.iter().sum::<f64>(), times.iter().sum::<f64>());
    if tu == 0.0 {
        skip!("CPU 0 never idled during the run under ladder (a busy machine)");
    }
    for (k, r) in rows.iter().enumerate() {
        let pu = 100.0 * r["replayed"]["entries_share"].as_f64().unwrap();
        let pt = 100.0 * r["replayed"]["time_share"].as_f64().unwrap();
        let (mu, mt) = (100.0 * uses[k] / tu, 100.0 * times[k] / tt.max(1e-9));
        eprintln!(
            "{}: use {pu:.1}% predicted, {mu:.1}% kernel; time {pt:.1}% predicted, {mt:.1}% kernel",
            names[k]
        );
        assert!(
            (pu - mu).abs() <= 10.0 && (pt - mt).abs() <= 10.0,
            "{}",
            names[k]
        );
    }
}

it_test!(whatif_governor_haltpoll_reproduces_the_recorded_haltpoll_choices);
/// The 200 µs haltpoll fixture (recorded under the haltpoll governor, POLL + halt states)
/// replayed under the haltpoll model with the recording's parameters: the recorded state is
/// chosen again on nearly every idle period of CPU 0 (the CPU with cpu_idle events), and the
/// time shares match.
fn whatif_governor_haltpoll_reproduces_the_recorded_haltpoll_choices() {
    let t = pmlab_kernel::sysinfo::fake::FakeTree::haltpoll_guest(true);
    let v = governor_json(
        &[
            "--governor",
            "haltpoll",
            "--values",
            "200us",
            "--haltpoll-params",
            "2,2,50us,Y",
            "--root",
            t.path().to_str().unwrap(),
            "--cpus",
            "0",
        ],
        &fixtures().join("haltpoll_pipe_200us.dat"),
    );
    let share = v["agreement_share"].as_f64().unwrap();
    eprintln!(
        "haltpoll over the 200 µs fixture: agreement {:.2}%",
        share * 100.0
    );
    assert!(share >= 0.99, "{share}");
    for r in v["states"].as_array().unwrap() {
        let (a, b) = (
            r["recorded"]["time_share"].as_f64().unwrap(),
            r["replayed"]["time_share"].as_f64().unwrap(),
        );
        assert!((a - b).abs() < 0.02, "{}: {a} {b}", r["name"]);
    }
    assert!(v["poll_timeouts"].as_u64().unwrap() > 0);
}
