//! Integration tests for the energy meter options: fake meters with a known power profile
//! (a stream at ~40 Hz, a wrapping counter that logs when it was read) give each run's
//! energy within 1% of the profile's integral; `compare` shows energy per configuration
//! with its CI; a meter that dies or prints garbage fails the run, knobs restored; bad
//! meter options change nothing.

use crate::util::{is_root, pmlab, stdout_of};
use serde_json::Value;

const RCU_EXPEDITED: &str = "/sys/kernel/rcu_expedited";

/// A stream meter: a triangle wave between 7 and 9 W (period 1 s) at ~40 Hz.
fn triangle_stream(dir: &std::path::Path) -> String {
    let script = dir.join("stream.sh");
    std::fs::write(
        &script,
        "while :; do t=$(date +%s.%N)\n\
         echo \"$t $(echo \"$t\" | awk '{f=$1-int($1); d=2*f-1; if (d<0) d=-d; printf \"%.6f\", 7+2*d}')\"\n\
         sleep 0.02; done\n",
    )
    .unwrap();
    format!("sh {}", script.display())
}

fn triangle_integral(start: f64, window: f64) -> f64 {
    let p = |t: f64| 7.0 + 2.0 * (2.0 * (t - t.floor()) - 1.0).abs();
    let steps = 200_000;
    let dt = window / steps as f64;
    (0..steps)
        .map(|k| p(start + (k as f64 + 0.5) * dt) * dt)
        .sum()
}

fn side(v: &Value, name: &str) -> f64 {
    v["side_metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name && m.get("cpu").is_none_or(|c| c.is_null()))
        .unwrap_or_else(|| panic!("no side metric {name} in {v}"))["value"]
        .as_f64()
        .unwrap()
}

it_test!(run_idle_with_a_stream_meter_is_within_1pct_of_the_integral);
fn run_idle_with_a_stream_meter_is_within_1pct_of_the_integral() {
    let d = tempfile::tempdir().unwrap();
    let out = stdout_of(pmlab().args([
        "run",
        "idle",
        "--duration",
        "1s",
        "--json",
        "--meter-stream",
        &triangle_stream(d.path()),
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let (start, window) = (side(&v, "meter.start_unix_s"), side(&v, "meter.window_s"));
    assert!((0.99..1.5).contains(&window), "window {window}");
    let exact = triangle_integral(start, window);
    let j = side(&v, "energy.meter.J");
    assert!(
        ((j - exact) / exact).abs() < 0.01,
        "meter {j} J, profile {exact} J"
    );
    assert_eq!(side(&v, "energy.J"), j, "the meter is the best source");
    assert_eq!(side(&v, "energy.source.meter"), 1.0);
    let hz = side(&v, "meter.sample_hz");
    assert!((10.0..60.0).contains(&hz), "sample rate {hz}");
}

it_test!(compare_with_a_wrapping_counter_meter_shows_energy_per_configuration_with_its_ci);
fn compare_with_a_wrapping_counter_meter_shows_energy_per_configuration_with_its_ci() {
    if !is_root() {
        skip!("needs root (configuration B sets rcu.expedited)");
    }
    let found = std::fs::read_to_string(RCU_EXPEDITED).unwrap();
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("reads");
    let db = d.path().join("e.db");
    // 5 W, wrapping at 7 J (every 1.4 s): runs of 0.8 s often cross a wrap.
    let counter = format!(
        "t=$(date +%s.%N); echo $t >> {}; echo $t | awk '{{printf \"%.9f\\n\", ($1*5) % 7}}'",
        log.display()
    );
    let out = stdout_of(pmlab().args([
        "compare",
        "--db",
        db.to_str().unwrap(),
        "--a",
        "",
        "--b",
        "rcu.expedited=1",
        "--max-runs",
        "6",
        "--quiet",
        "--format",
        "json",
        "--side",
        "energy.J,power.W",
        "--meter-counter",
        &counter,
        "--meter-wrap",
        "7J",
        "idle",
        "--duration",
        "800ms",
    ]));
    assert_eq!(std::fs::read_to_string(RCU_EXPEDITED).unwrap(), found);
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows = v["workloads"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        let e = row["side"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "energy.J")
            .unwrap_or_else(|| panic!("no energy.J beside {row}"));
        let s = &e["summary"];
        assert_eq!(s["n"], 3);
        let (lo, hi, mean) = (
            s["ci_low"].as_f64().unwrap(),
            s["ci_high"].as_f64().unwrap(),
            s["mean"].as_f64().unwrap(),
        );
        assert!(lo < mean && mean < hi, "{s}");
        // 5 W over ~0.8 s.
        assert!((3.5..5.0).contains(&mean), "{s}");
    }
    // Each run's energy equals 5 W times the time between the meter's own two reads (from
    // its log: the first read checks the command, then one pair per run), wraps included.
    let reads: Vec<f64> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let csv = stdout_of(pmlab().args([
        "results",
        "export",
        "--db",
        db.to_str().unwrap(),
        "latest",
        "--format",
        "csv",
    ]));
    let energies: Vec<f64> = csv
        .lines()
        .filter(|l| l.contains(",energy.meter.J,"))
        .map(|l| l.split(',').nth(13).unwrap().parse().unwrap())
        .collect();
    assert_eq!(energies.len(), 8, "2 warm-up and 6 measured runs");
    assert_eq!(reads.len(), 1 + 2 * energies.len());
    for (k, j) in energies.iter().enumerate() {
        let (b, a) = (reads[1 + 2 * k], reads[2 + 2 * k]);
        let expected = 5.0 * (a - b);
        assert!(
            (j - expected).abs() < 1e-4,
            "run {k}: {j} J, expected {expected}"
        );
    }
    // Mean power over the window pmlab estimates (between the middles of the two reads):
    // within 1% plus the reads' own length, which pmlab records as meter.read_ms.
    let of = |name: &str| -> Vec<f64> {
        csv.lines()
            .filter(|l| l.contains(&format!(",{name},")))
            .map(|l| l.split(',').nth(13).unwrap().parse().unwrap())
            .collect()
    };
    let (watts, read_ms, window) = (
        of("power.meter.W"),
        of("meter.read_ms"),
        of("meter.window_s"),
    );
    assert_eq!(watts.len(), 8);
    for k in 0..watts.len() {
        let slack = 0.01 + read_ms[k] / 1e3 / window[k];
        assert!(
            (watts[k] - 5.0).abs() < 5.0 * slack,
            "run {k}: {} W, the meter's is 5 W (reads took {} ms)",
            watts[k],
            read_ms[k]
        );
    }
}

it_test!(a_meter_that_dies_or_prints_garbage_fails_the_run_and_knobs_are_restored);
fn a_meter_that_dies_or_prints_garbage_fails_the_run_and_knobs_are_restored() {
    if !is_root() {
        skip!("needs root (the run sets rcu.expedited)");
    }
    let found = std::fs::read_to_string(RCU_EXPEDITED).unwrap();
    for (meter, says) in [
        (
            "for i in 1 2 3 4 5; do echo \"$(date +%s.%N) 5\"; sleep 0.05; done; exit 3",
            "exited",
        ),
        (
            "for i in 1 2 3 4 5; do echo \"$(date +%s.%N) 5\"; sleep 0.05; done; echo oops; sleep 10",
            "oops",
        ),
    ] {
        let out = pmlab()
            .args([
                "run",
                "--set",
                "rcu.expedited=1",
                "--meter-stream",
                meter,
                "idle",
                "--duration",
                "1s",
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "a dead meter is no result: {err}");
        assert!(err.contains("pmlab: error") && err.contains(says), "{err}");
        assert_eq!(
            std::fs::read_to_string(RCU_EXPEDITED).unwrap(),
            found,
            "rcu_expedited restored"
        );
    }
    // In an experiment, the run is stored failed with the meter's error.
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("e.db");
    let count = d.path().join("n");
    let counter = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); echo $((n+1)) > {c}; \
         if [ $n -lt 4 ]; then echo $n; else echo garbage; fi",
        c = count.display()
    );
    let out = pmlab()
        .args([
            "compare",
            "--db",
            db.to_str().unwrap(),
            "--b",
            "rcu.expedited=1",
            "--max-runs",
            "4",
            "--quiet",
            "--meter-counter",
            &counter,
            "idle",
            "--duration",
            "100ms",
        ])
        .output()
        .unwrap();
    assert_eq!(std::fs::read_to_string(RCU_EXPEDITED).unwrap(), found);
    let csv = stdout_of(pmlab().args([
        "results",
        "export",
        "--db",
        db.to_str().unwrap(),
        "latest",
        "--format",
        "csv",
    ]));
    assert!(
        csv.lines()
            .any(|l| l.contains(",failed,") && l.contains("garbage")),
        "a failed run with the meter's output: {csv}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !csv.lines()
            .any(|l| l.contains(",energy.meter.J,0,") || l.contains(",energy.J,0,")),
        "never a silent zero"
    );
}

it_test!(bad_meter_options_are_refused_before_anything_runs);
fn bad_meter_options_are_refused_before_anything_runs() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("e.db");
    let dbs = db.to_str().unwrap();
    for (args, says) in [
        (vec!["--meter-counter", " "], "meter command is empty"),
        (
            vec!["--meter-counter", "cat x", "--meter-wrap", "-1"],
            "positive number",
        ),
        (vec!["--meter-wrap", "5"], "--meter-counter"),
        (
            vec!["--meter-counter", "echo 1", "--meter-stream", "echo"],
            "cannot be used with",
        ),
        (vec!["--meter-counter", "echo lots"], "cumulative joules"),
        (vec!["--meter-stream", "echo nope"], "TIMESTAMP WATTS"),
        // A bad knob is refused before the meter starts (it would print its error).
        (
            vec![
                "--meter-counter",
                "echo started >&2; echo 1",
                "--b",
                "no.such.knob=1",
            ],
            "no.such.knob",
        ),
    ] {
        let mut c = pmlab();
        c.args(["compare", "--db", dbs, "--quiet"])
            .args(&args)
            .args(["idle", "--duration", "10ms"]);
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
        assert!(!db.exists(), "{args:?}: nothing stored");
    }
}

/// Live processes (not zombies) whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'));
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if !zombie && cmd.contains(needle) {
            found.push(cmd);
        }
    }
    found
}

it_test!(ctrl_c_stops_a_stream_meter_and_restores_knobs);
fn ctrl_c_stops_a_stream_meter_and_restores_knobs() {
    if !is_root() {
        skip!("needs root (the run sets rcu.expedited)");
    }
    let found = std::fs::read_to_string(RCU_EXPEDITED).unwrap();
    let d = tempfile::tempdir().unwrap();
    let meter = triangle_stream(d.path());
    let needle = d.path().join("stream.sh").display().to_string();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pmlab"))
        .args(["run", "--set", "rcu.expedited=1", "--meter-stream", &meter])
        .args(["idle", "--duration", "10s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(!processes_with(&needle).is_empty(), "the meter runs");
    crate::util::kill(child.id() as i32, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interrupted"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(RCU_EXPEDITED).unwrap(), found);
    let left = processes_with(&needle);
    assert!(left.is_empty(), "meter processes left: {left:?}");
}
