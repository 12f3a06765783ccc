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
    let on = record_pipe_here(dir.path(), "on.dat", "200us");
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
    // Polling must be predicted to help, and did help.
    assert!(measured < traced, "{measured} {traced}");
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
