//! What else ran, in every run and every verdict: the disturbance side metrics in `run
//! --json`, `results show`, the HTML report and the store, and "inconclusive: machine busy"
//! when the disturbance alone could explain a difference (docs/disturbance.md).

use crate::load::{CpuHog, SmallFileWriter};
use crate::util::{online_cpus, pmlab, stdout_of};
use serde_json::Value;
use std::time::Duration;

fn verdict_of(v: &Value, label: &str) -> (String, String) {
    let row = v["workloads"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["label"] == label)
        .unwrap();
    let c = &row["comparison"];
    (
        c["outcome"].as_str().unwrap_or("").to_string(),
        c["verdict"].as_str().unwrap_or("").to_string(),
    )
}

it_test!(a_difference_the_disturbance_could_cause_is_inconclusive_machine_busy);
/// Scripted: B's runs from the 7th on lose 40% of CPU 1 to others (and run 1/0.6 as long),
/// run sequentially as if a hog started halfway through B's runs. The verdict says the
/// machine was busy, never "slower".
fn a_difference_the_disturbance_could_cause_is_inconclusive_machine_busy() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db").to_string_lossy().into_owned();
    let out = stdout_of(pmlab().args([
        "compare",
        "--fake-executor",
        "sd=1,disturb_from=7",
        "--order",
        "sequential",
        "--a",
        "fake.disturb=0",
        "--b",
        "fake.disturb=40",
        "--max-runs",
        "20",
        "--settle",
        "0",
        "--format",
        "json",
        "-q",
        "--db",
        &db,
        "pipe",
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let (outcome, verdict) = verdict_of(&v, "B");
    assert_eq!(outcome, "inconclusive", "{verdict}");
    assert!(
        verdict.starts_with("inconclusive: machine busy (other tasks used")
            && verdict.contains("of CPU 1 during B's runs"),
        "{verdict}"
    );
    // The table says it too.
    let id = v["header"]["ids"][0].as_i64().unwrap().to_string();
    let table = stdout_of(pmlab().args(["results", "show", &id, "--db", &db]));
    assert!(table.contains("machine busy"), "{table}");
}

it_test!(every_run_reports_its_disturbance_in_json_results_and_the_html_report);
/// A real run reports what other tasks took of each CPU; a stored compare shows it in
/// `results show` and its HTML report.
fn every_run_reports_its_disturbance_in_json_results_and_the_html_report() {
    let cpu = online_cpus()[0].to_string();
    let pair = format!("{cpu},{cpu}");
    let out = stdout_of(pmlab().args([
        "run", "--json", "--settle", "0", "pipe", "--loops", "2000", "--cpus", &pair,
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let side = v["side_metrics"].as_array().unwrap();
    let has = |name: &str, cpu: Option<u64>| {
        side.iter()
            .any(|m| m["name"] == name && m["cpu"].as_u64() == cpu)
    };
    let c: u64 = cpu.parse().unwrap();
    for n in [
        "disturbance.cpu_ms",
        "disturbance.share_pct",
        "disturbance.iowait_ms",
    ] {
        assert!(has(n, None) && has(n, Some(c)), "{n} in {out}");
    }
    assert!(has("disturbance.workload_pct", Some(c)), "{out}");
    assert!(has("disturbance.own_ms", None), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").to_string_lossy().into_owned();
    let out = stdout_of(pmlab().args([
        "compare",
        "--a",
        "",
        "--b",
        "",
        "--max-runs",
        "6",
        "--settle",
        "0",
        "--format",
        "json",
        "-q",
        "--db",
        &db,
        "pipe",
        "--loops",
        "2000",
        "--cpus",
        &pair,
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let id = v["header"]["ids"][0].as_i64().unwrap().to_string();
    let shown = stdout_of(pmlab().args([
        "results",
        "show",
        &id,
        "--db",
        &db,
        "--side",
        "disturbance*",
    ]));
    assert!(shown.contains("disturbance.workload_pct@cpu"), "{shown}");
    let html = dir.path().join("html");
    stdout_of(
        pmlab()
            .args(["report", &id, "--db", &db, "--out"])
            .arg(&html),
    );
    let page = std::fs::read_to_string(html.join("report.html")).unwrap();
    assert!(page.contains("disturbance.share_pct"), "the HTML report");
}

it_test!(an_aa_compare_loaded_halfway_through_one_side_is_never_a_difference);
/// A/A, sequential (all of A's runs, then B's): a CPU hog and the small-file writer start
/// halfway through A's runs. A's first runs are quiet and the rest loaded: whatever
/// difference that makes, and whatever "no change" it hides, must come out as "inconclusive:
/// machine busy", never as a verdict.
fn an_aa_compare_loaded_halfway_through_one_side_is_never_a_difference() {
    if online_cpus().len() < 2 {
        skip!("one CPU online");
    }
    let cpus = online_cpus();
    let pair = format!("{},{}", cpus[0], cpus[1]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("aa.db").to_string_lossy().into_owned();
    let fifo = dir.path().join("go");
    let count = dir.path().join("n");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::fs::write(&count, "0").unwrap();
    // Prepare hook calls: 2 warm-ups, then A's 8 runs: the 7th call is before A's 5th run.
    let hook = format!(
        "n=$(($(cat {c}) + 1)); echo $n > {c}; if [ $n -eq 7 ]; then echo go > {f}; fi",
        c = count.display(),
        f = fifo.display()
    );
    let starter = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            // Blocks until the hook writes: no polling.
            let _ = std::fs::read(&fifo);
            (
                CpuHog::start(0),
                SmallFileWriter::start(450_000, Duration::from_secs(300)),
            )
        })
    };
    let out = pmlab()
        .args(["compare", "--a", "", "--b", "", "--order", "sequential"])
        .args(["--max-runs", "16", "--settle", "0", "--prepare", &hook])
        .args(["--format", "json", "-q", "--db", &db])
        .args(["pipe", "--loops", "5000", "--cpus", &pair])
        .output()
        .unwrap();
    // If the hook never fired, unblock the starter so the test ends (non-blocking: when it
    // did fire, nobody reads the FIFO any more and a plain open would wait forever).
    let _ = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
    };
    let (hog, writer) = starter.join().unwrap();
    let written = writer.written();
    drop((hog, writer));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (outcome, verdict) = verdict_of(&v, "B");
    eprintln!("A/A loaded halfway through A ({written} files written): {outcome}: {verdict}");
    assert_eq!(outcome, "inconclusive", "{verdict}");
    assert!(
        verdict.starts_with("inconclusive: machine busy"),
        "{verdict}"
    );
}

it_test!(a_traced_run_names_a_hog_on_its_cpu_and_not_its_own_workers);
/// A CPU hog pinned to the workload's CPU is named among a traced run's intruders, with about
/// its share of the CPU; pmlab's own forked workers (named `pmlab` too) are not intruders.
fn a_traced_run_names_a_hog_on_its_cpu_and_not_its_own_workers() {
    crate::util::need_root("recording a trace");
    let cpu = *online_cpus().last().unwrap();
    let pair = format!("{cpu},{cpu}");
    let _hog = CpuHog::start_on(0, cpu);
    // stress-ng forks its worker before the run starts.
    std::thread::sleep(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db").to_string_lossy().into_owned();
    stdout_of(
        pmlab()
            .args([
                "compare",
                "--trace",
                "--a",
                "",
                "--b",
                "",
                "--max-runs",
                "2",
            ])
            .args(["--settle", "0", "-q", "--db", &db])
            .args(["pipe", "--loops", "20000", "--cpus", &pair]),
    );
    let out = stdout_of(pmlab().args([
        "results", "--db", &db, "export", "latest", "--format", "json",
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    // The last run: measured, not a warm-up.
    let side = v["runs"].as_array().unwrap().last().unwrap()["metrics"]
        .as_array()
        .unwrap();
    let get = |name: &str| {
        side.iter()
            .find(|m| m["name"] == name && m["cpu"].is_null())
            .and_then(|m| m["value"].as_f64())
    };
    let window = get("disturbance.window_ms").expect("the disturbance window");
    let named: Vec<(&str, f64)> = side
        .iter()
        .filter_map(|m| {
            let n = m["name"].as_str()?.strip_prefix("disturbance.task_ms.")?;
            Some((n, m["value"].as_f64()?))
        })
        .collect();
    eprintln!("window {window:.1} ms, intruders {named:?}");
    assert!(named.len() <= 5, "{named:?}");
    let hog = get("disturbance.task_ms.stress-ng-cpu").unwrap_or(0.0);
    assert!(
        hog >= 0.1 * window,
        "the hog: {hog} ms of {window} ms; {named:?}"
    );
    // The experiment's own workers would take about as much as the hog if they were counted.
    let own = get("disturbance.task_ms.pmlab").unwrap_or(0.0);
    assert!(
        own < 0.25 * window,
        "pmlab's own tasks named: {own} ms; {named:?}"
    );
    let traced = side
        .iter()
        .find(|m| m["name"] == "disturbance.traced_ms" && m["cpu"].as_u64() == Some(cpu as u64))
        .and_then(|m| m["value"].as_f64())
        .expect("traced_ms on the workload's CPU");
    assert!(traced >= hog - 1e-6, "{traced} < {hog}");
    let shown = stdout_of(pmlab().args([
        "results",
        "show",
        "latest",
        "--db",
        &db,
        "--side",
        "disturbance.task_ms*",
    ]));
    assert!(
        shown.contains("disturbance.task_ms.stress-ng-cpu"),
        "{shown}"
    );
}
