//! `pmlab whatif`: the replay on the haltpoll fixtures, its output formats, and bad input
//! refused before any work.

use crate::util::{fixtures, pmlab};
use predicates::prelude::*;

fn off() -> std::path::PathBuf {
    fixtures().join("haltpoll_pipe_off.dat")
}

#[test]
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

#[test]
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

#[test]
fn whatif_reverse_on_the_polling_fixture() {
    pmlab()
        .args(["whatif", "--reverse"])
        .arg(fixtures().join("haltpoll_pipe_200us.dat"))
        .assert()
        .success()
        .stdout(predicate::str::contains("predicted_ipi_wakes"));
}

#[test]
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
}

#[test]
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
