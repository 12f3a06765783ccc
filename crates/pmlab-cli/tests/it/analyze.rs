//! Integration tests for `pmlab analyze`: fixtures from other machines checked against an
//! independent computation over `trace-cmd report`, energy models (good and malformed),
//! missing events, export and baseline, and real recordings of the pipe workload here.

use crate::util::{
    assert_ops_cover_spans, cpuidle_driver, fixtures, need_root, pmlab, Cpu1Online, CPU1_ONLINE,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    let p = fixtures().join(name);
    assert!(
        p.exists(),
        "fixture {} missing (set PMLAB_FIXTURES)",
        p.display()
    );
    p
}

fn json(args: &[&str]) -> Value {
    let out = pmlab()
        .arg("analyze")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Idle time per CPU computed independently: trace-cmd report piped into a short script.
/// Same rules as pmlab: enter..exit; an exit first means idle since the trace's first event;
/// an enter while idle closes the previous period; an open period ends at the last event.
const IDLE_SCRIPT: &str = r#"
import re, sys, collections
first = last = None
open_, seen, idle = {}, set(), collections.defaultdict(int)
pat = re.compile(r'\s(\d+)\.(\d+):\s+(\S+):\s+(.*)$')
for line in sys.stdin:
    m = pat.search(line)
    if not m:
        continue
    ts = int(m.group(1)) * 10**9 + int(m.group(2).ljust(9, '0'))
    first = ts if first is None else first
    last = ts
    if m.group(3) != 'cpu_idle':
        continue
    f = dict(kv.split('=') for kv in m.group(4).split())
    cpu, state = int(f['cpu_id']), int(f['state'])
    if cpu in open_:
        idle[cpu] += ts - open_.pop(cpu)
    elif state == 4294967295 and cpu not in seen:
        idle[cpu] += ts - first
    if state != 4294967295:
        open_[cpu] = ts
    seen.add(cpu)
for cpu, t in open_.items():
    idle[cpu] += last - t
for cpu in sorted(idle):
    print(cpu, idle[cpu])
"#;

fn trace_cmd_report(file: &Path) -> String {
    String::from_utf8(crate::util::trace_cmd_report(&["-t"], file).stdout.clone()).unwrap()
}

it_test!(analyze_lisa_idle_matches_independent_script);
fn analyze_lisa_idle_matches_independent_script() {
    let f = fixture("lisa_sched_load.dat");
    let report = trace_cmd_report(&f);
    let mut py = Command::new("python3")
        .args(["-c", IDLE_SCRIPT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    py.stdin
        .take()
        .unwrap()
        .write_all(report.as_bytes())
        .unwrap();
    let out = py.wait_with_output().unwrap();
    assert!(out.status.success());
    let want: BTreeMap<u64, f64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (c, t) = l.split_once(' ').unwrap();
            (c.parse().unwrap(), t.parse().unwrap())
        })
        .collect();
    assert_eq!(want.len(), 6, "the script found every CPU");
    let v = json(&[f.to_str().unwrap(), "--only", "idle"]);
    let cpus = v["idle"]["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 6);
    for c in cpus {
        let cpu = c["cpu"].as_u64().unwrap();
        let got = c["idle_ns"].as_f64().unwrap();
        let w = want[&cpu];
        assert!(
            (got - w).abs() <= w * 0.001,
            "CPU {cpu}: pmlab {got} ns, script {w} ns"
        );
        assert_eq!(c["source"], "cpu-idle");
    }
}

it_test!(analyze_lisa_freq_for_every_cpu_with_cpu_frequency);
fn analyze_lisa_freq_for_every_cpu_with_cpu_frequency() {
    let f = fixture("lisa_sched_load.dat");
    let want: std::collections::BTreeSet<u64> = trace_cmd_report(&f)
        .lines()
        .filter(|l| l.contains(" cpu_frequency: "))
        .filter_map(|l| {
            l.split("cpu_id=")
                .nth(1)
                .and_then(|s| s.trim().parse().ok())
        })
        .collect();
    assert!(!want.is_empty());
    let v = json(&[f.to_str().unwrap(), "--only", "freq"]);
    let got: std::collections::BTreeSet<u64> = v["freq"]["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(got, want);
    for c in v["freq"]["cpus"].as_array().unwrap() {
        let res = c["residency"].as_array().unwrap();
        assert!(!res.is_empty());
        let share: f64 = res.iter().map(|r| r["share"].as_f64().unwrap()).sum();
        assert!((share - 1.0).abs() < 1e-9);
        let avg = c["avg_khz"].as_f64().unwrap();
        assert!((450_000.0..=1_100_000.0).contains(&avg), "{avg}");
    }
}

it_test!(analyze_lisa_energy_from_plat_info);
fn analyze_lisa_energy_from_plat_info() {
    let f = fixture("lisa_sched_load.dat");
    let m = fixture("lisa_sched_load_plat_info.yml");
    let v = json(&[
        f.to_str().unwrap(),
        "--only",
        "energy",
        "--energy-model",
        m.to_str().unwrap(),
    ]);
    let e = &v["energy"];
    assert_eq!(e["cpus"].as_array().unwrap().len(), 6);
    let total = e["total_mj"].as_f64().unwrap();
    let sum: f64 = e["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["total_mj"].as_f64().unwrap())
        .sum();
    assert!(total > 0.0 && (total - sum).abs() < 1e-9);
    // tables for people too
    pmlab()
        .args([
            "analyze",
            f.to_str().unwrap(),
            "--only",
            "energy",
            "--energy-model",
            m.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stdout(predicates::str::contains("Energy from the model"));
}

it_test!(analyze_refuses_malformed_and_non_monotonic_energy_models);
fn analyze_refuses_malformed_and_non_monotonic_energy_models() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture("lisa_sched_load.dat");
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[domain]]\ncpus = \"0-5\"\nopp = [ { khz = 450000 } ]\n",
    )
    .unwrap();
    pmlab()
        .args([
            "analyze",
            f.to_str().unwrap(),
            "--energy-model",
            bad.to_str().unwrap(),
        ])
        .assert()
        .failure()
        .stderr(predicates::str::starts_with(
            "pmlab: error: cannot use the energy model",
        ))
        .stderr(predicates::str::contains("bad.toml"))
        .stderr(predicates::str::contains("mw"));
    let down = dir.path().join("down.toml");
    std::fs::write(
        &down,
        "[[domain]]\nname = \"little\"\ncpus = \"0-5\"\nopp = [ { khz = 450000, mw = 50.0 }, { khz = 850000, mw = 40.0 } ]\n",
    )
    .unwrap();
    pmlab()
        .args([
            "analyze",
            f.to_str().unwrap(),
            "--energy-model",
            down.to_str().unwrap(),
        ])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "domain \"little\": power does not rise with frequency: OPP 850000 kHz",
        ));
}

it_test!(analyze_names_missing_events_and_still_runs_the_others);
fn analyze_names_missing_events_and_still_runs_the_others() {
    // lisa_rtapp.dat: sched_switch and cpu_frequency, no cpu_idle, no IRQ or IPI events
    let f = fixture("lisa_rtapp.dat");
    let out = pmlab()
        .args(["analyze", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("idle task (fallback)"), "{s}");
    assert!(s.contains("idle-task (pid 0) periods"), "{s}");
    assert!(
        s.contains("pmlab record -e power:guest_halt_poll_ns -- CMD"),
        "{s}"
    );
    assert!(s.contains("wakeups: the trace has no"), "{s}");
    assert!(s.contains("Frequency residency per CPU"), "{s}");
    // a trace with none of the needed events: every analysis says so, and the command fails
    let f = fixture("trappy_trace.dat");
    pmlab()
        .args(["analyze", f.to_str().unwrap(), "--only", "idle,freq"])
        .assert()
        .failure()
        .stdout(predicates::str::contains("pmlab record -e power:cpu_idle"))
        .stdout(predicates::str::contains(
            "pmlab record -e power:cpu_frequency",
        ))
        .stderr(predicates::str::contains(
            "pmlab: error: no analysis could run",
        ));
    pmlab()
        .args(["analyze", f.to_str().unwrap(), "--only", "idle,bogus"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("no analysis \"bogus\""));
}

it_test!(analyze_exports_csv_and_diffs_against_a_baseline);
fn analyze_exports_csv_and_diffs_against_a_baseline() {
    let f = fixture("lisa_sched_load.dat");
    let dir = tempfile::tempdir().unwrap();
    pmlab()
        .args([
            "analyze",
            f.to_str().unwrap(),
            "--only",
            "idle,freq",
            "--export",
        ])
        .arg(dir.path())
        .assert()
        .success();
    let csv = std::fs::read_to_string(dir.path().join("idle_cpus.csv")).unwrap();
    assert!(
        csv.starts_with("cpu,source,idle_ms,share_pct,entries,entries_per_s\n"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 1 + 6 + 1);
    assert!(dir.path().join("freq_residency.csv").exists());
    // the Parquet twin, read by DuckDB: same rows and the same idle time as the CSV
    let pq = dir.path().join("idle_cpus.parquet");
    crate::util::need_python(&["duckdb"], "scripts/setup.sh installs it");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import duckdb,sys; print(duckdb.sql(f\"SELECT count(*), round(sum(idle_ms), 3) FROM '{sys.argv[1]}'\").fetchall()[0])",
        ])
        .arg(&pq)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv_idle: f64 = csv
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(2)?.parse::<f64>().ok())
        .sum();
    let got = String::from_utf8_lossy(&out.stdout).to_string();
    let expect = format!("(7, {})", (csv_idle * 1000.0).round() / 1000.0);
    assert_eq!(got.trim(), expect, "DuckDB read of {}", pq.display());
    // against itself: every difference is zero
    let v = json(&[
        f.to_str().unwrap(),
        "--only",
        "idle",
        "--baseline",
        f.to_str().unwrap(),
    ]);
    let diff = v["diff"].as_array().unwrap();
    let t = diff
        .iter()
        .find(|t| t["name"] == "idle_cpus_vs_baseline")
        .unwrap();
    let col = t["columns"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| c == "idle_ms_diff")
        .unwrap();
    for r in t["rows"].as_array().unwrap() {
        assert_eq!(r[col].as_f64(), Some(0.0), "{r}");
    }
    // against another trace: the table shows both values
    let other = fixture("trappy_idle.dat");
    pmlab()
        .args([
            "analyze",
            f.to_str().unwrap(),
            "--only",
            "idle",
            "--baseline",
            other.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stdout(predicates::str::contains("idle_ms_base"))
        .stdout(predicates::str::contains("vs baseline"));
}

it_test!(analyze_reads_a_counters_sidecar);
fn analyze_reads_a_counters_sidecar() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.dat");
    std::fs::copy(fixture("lisa_sched_load.dat"), &f).unwrap();
    let snap = |idle_jiffies: u64, at: u64| {
        serde_json::json!({
            "at": at, "idle": {}, "interrupts": [], "softirqs": [], "ctxt": 0,
            "cpu_total": {"user":0,"nice":0,"system":0,"idle":0,"iowait":0,"irq":0,"softirq":0,"steal":0},
            "cpu_times": {"0": {"user":0,"nice":0,"system":0,"idle":idle_jiffies,"iowait":0,"irq":0,"softirq":0,"steal":0}},
            "rapl": []
        })
    };
    let side = serde_json::json!({"before": snap(100, 0), "after": snap(141, 430_000_000)});
    std::fs::write(dir.path().join("t.dat.counters.json"), side.to_string()).unwrap();
    let v = json(&[f.to_str().unwrap(), "--only", "idle"]);
    let c0 = &v["crosscheck"]["cpus"][0];
    assert_eq!(c0["stat_idle_ns"].as_u64(), Some(410_000_000));
    assert!(c0["gap_stat"].as_f64().unwrap().abs() < 0.02, "{c0}");
    assert!(v["crosscheck"]["notes"]
        .to_string()
        .contains("/proc/stat idle only"));
}

// ---- real recordings on this machine ----

const HALTPOLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/// Record the pipe workload on CPUs 0,1 and analyze idle and wakeups on CPU 0.
/// haltpoll's limit (ns) is set by the traced pmlab, which restarts the per-CPU windows.
fn record_pipe(dir: &Path, name: &str, poll_ns: u64) -> Value {
    let out = dir.join(name);
    let exe = assert_cmd::cargo::cargo_bin("pmlab");
    let mut cmd = pmlab();
    cmd.args(["record", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .args(["run", "pipe", "--loops", "20000", "--cpus", "0,1"]);
    if Path::new(HALTPOLL_NS).exists() {
        cmd.arg("--set")
            .arg(format!("haltpoll.guest_halt_poll_ns={poll_ns}"));
    }
    cmd.assert().success();
    json(&[
        out.to_str().unwrap(),
        "--only",
        "idle,wakeups,haltpoll",
        "--cpus",
        "0",
    ])
}

/// (idle exits of CPU 0, share of them by remote-wakeup IPIs, share by polling wakeups).
fn cpu0_shares(v: &Value) -> (u64, f64, f64) {
    let exits = v["wakeups"]["cpus"][0]["exits"].as_u64().unwrap();
    let share = |pred: &dyn Fn(&Value) -> bool| -> f64 {
        v["wakeups"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["cpu"] == 0 && pred(&r["cause"]))
            .map(|r| r["share"].as_f64().unwrap())
            .sum()
    };
    let remote =
        share(&|c| c["kind"] == "ipi" && c["detail"].as_str().unwrap().contains("remote wakeup"));
    let polling = share(&|c| c["kind"] == "polling");
    (exits, remote, polling)
}

/// The share of CPU 0's cpuidle entries into the POLL state during recording `trace`, from
/// the counters sidecar `pmlab record` writes beside it.
fn poll_entry_share(trace: &Path) -> f64 {
    let mut side = trace.as_os_str().to_owned();
    side.push(".counters.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(side).unwrap()).unwrap();
    let usage = |snap: &str, poll: bool| -> u64 {
        v[snap]["idle"]["0"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| (s["name"] == "POLL") == poll)
            .map(|s| s["usage"].as_u64().unwrap())
            .sum()
    };
    let polls = usage("after", true) - usage("before", true);
    let others = usage("after", false) - usage("before", false);
    polls as f64 / (polls + others).max(1) as f64
}

/// Enough idle exits on CPU 0 to judge shares; a machine saturated by other work has none.
const MIN_EXITS: u64 = 200;

/// Other processes' share of the CPUs above which the machine is busy for these checks.
const BUSY: f64 = 0.05;

it_test!(analyze_pipe_recordings_attribute_idle_exits);
fn analyze_pipe_recordings_attribute_idle_exits() {
    need_root("the pipe recordings (the project machine runs the tests as root)");
    let dir = tempfile::tempdir().unwrap();
    let driver = cpuidle_driver();
    // polling off
    let (off, others) = crate::util::others_share(|| record_pipe(dir.path(), "off.dat", 0));
    let (n, remote, off_polling) = cpu0_shares(&off);
    eprintln!(
        "polling off: CPU0 {n} idle exits, {:.1}% remote-wakeup IPIs, {:.1}% polling",
        remote * 100.0,
        off_polling * 100.0
    );
    let idle_share = off["idle"]["cpus"][0]["share"].as_f64().unwrap();
    // Both CPUs, with the counters cross-check `pmlab record` writes beside the trace.
    let both = json(&[
        dir.path().join("off.dat").to_str().unwrap(),
        "--only",
        "idle",
    ]);
    let share = |c: usize| both["idle"]["cpus"][c]["share"].as_f64().unwrap();
    let sources = (
        both["idle"]["cpus"][0]["source"].clone(),
        both["idle"]["cpus"][1]["source"].clone(),
    );
    eprintln!(
        "polling off: idle share CPU0 {:.1}% ({}), CPU1 {:.1}% ({})",
        share(0) * 100.0,
        sources.0,
        share(1) * 100.0,
        sources.1
    );
    assert_eq!(
        both["crosscheck"]["cpus"].as_array().map(|a| a.len()),
        Some(2),
        "the recording's counters sidecar gives a cross-check per CPU: {}",
        both["crosscheck"]
    );
    // CPU1 runs one side of every round trip: it is not idle most of the time, whatever
    // source its idle time has (on this machine neither cpu_idle nor the switch out of the
    // idle task is logged for it; counting the busy time as idle gave 99.99%).
    assert!(
        share(1) < 0.85,
        "pipe on CPUs 0,1: CPU1 idle {:.3} (CPU0 {:.3})",
        share(1),
        share(0)
    );
    if n >= MIN_EXITS && remote < 0.9 && others > BUSY {
        // Other work's wakeups on CPU 0 are exits too: the share is the pipe's only when
        // nothing else ran.
        skip_part!(
            "the remote-IPI share ({:.1}%): other processes used {:.0}% of the CPUs' time \
             during the recording",
            remote * 100.0,
            others * 100.0
        );
    } else if n >= MIN_EXITS {
        assert!(
            remote >= 0.9,
            "polling off: {:.1}% of CPU0's idle exits are remote-wakeup IPIs (others used \
             {:.1}% of the CPUs)",
            remote * 100.0,
            others * 100.0
        );
    } else {
        // saturated machine: then CPU0 was (almost) never idle, and the report must agree
        eprintln!(
            "machine saturated (CPU0 idle {:.2}%): too few idle exits to judge the causes",
            idle_share * 100.0
        );
        assert!(
            idle_share < 0.05,
            "few exits but CPU0 idle {:.1}%",
            idle_share * 100.0
        );
    }
    // polling at 200 µs
    let on = record_pipe(dir.path(), "on.dat", 200_000);
    let (n, remote, polling) = cpu0_shares(&on);
    eprintln!(
        "polling 200us (driver {driver}): CPU0 {n} idle exits, {:.1}% remote IPIs, {:.1}% polling",
        remote * 100.0,
        polling * 100.0
    );
    let notes = on["haltpoll"].to_string();
    if driver == "haltpoll" {
        // What pmlab controls is checked against the kernel's own per-state counters (the
        // sidecar `pmlab record` writes): with the limit at 0 CPU0 never enters POLL, at
        // 200 µs it polls before (almost) every halt.
        let off_poll = poll_entry_share(&dir.path().join("off.dat"));
        let on_poll = poll_entry_share(&dir.path().join("on.dat"));
        eprintln!(
            "kernel POLL entries on CPU0: off {:.1}%, 200us {:.1}%",
            off_poll * 100.0,
            on_poll * 100.0
        );
        assert!(
            off_poll < 0.05,
            "limit 0, yet CPU0 entered POLL: {off_poll:.3}"
        );
        // Polling happens before a halt: a saturated CPU0 (few idle entries) has too few
        // halts for a share to mean anything.
        if n >= MIN_EXITS {
            assert!(on_poll > 0.5, "limit 200 µs, CPU0 polled only {on_poll:.3}");
        } else {
            skip_part!(
                "the 200 µs POLL share: the machine was saturated ({n} idle exits of CPU0 \
                 in the recording)"
            );
        }
        // Polling off, the analysis must find no polling wakeups.
        assert!(
            off_polling < 0.05,
            "polling off, yet {:.1}% of CPU0's wakeups needed no IPI",
            off_polling * 100.0
        );
        // How many wakes land while the polling flag is up depends on the host's timing:
        // standalone 72-99.8% (the fixture, from another haltpoll guest: about 98%), in the
        // CI suite 36-41%. The analysis must find them, whatever their share.
        if n >= MIN_EXITS {
            assert!(
                polling > 0.2 && polling + remote > 0.9,
                "polling at 200 µs: {:.1}% of CPU0's wakeups needed no IPI, {:.1}% were \
                 remote IPIs (off {:.1}%)",
                polling * 100.0,
                remote * 100.0,
                off_polling * 100.0
            );
        }
    } else {
        // No haltpoll cpuidle driver: the poll limit has no effect and pmlab must say so.
        assert!(
            polling < 0.1,
            "no cpuidle driver, yet {:.1}% polling wakeups",
            polling * 100.0
        );
        assert!(notes.contains("haltpoll cpuidle driver"), "{notes}");
    }
    if let Ok(v) = std::fs::read_to_string(HALTPOLL_NS) {
        eprintln!("haltpoll restored to {}", v.trim());
    }
}

it_test!(analyze_hotplug_recording_gives_ten_operations_each_way_with_their_steps);
fn analyze_hotplug_recording_gives_ten_operations_each_way_with_their_steps() {
    need_root("the hotplug recording (the project's machines run it as root)");
    let _back = Cpu1Online;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hotplug10.dat");
    let o = CPU1_ONLINE;
    pmlab()
        .args([
            "record",
            "-e",
            "cpuhp",
            "-e",
            "sched:sched_switch",
            "-e",
            "irq_vectors",
        ])
        .args([
            "-e",
            "irq:irq_handler_entry",
            "-e",
            "irq:irq_handler_exit",
            "-o",
        ])
        .arg(&file)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "for i in 1 2 3 4 5 6 7 8 9 10; do echo 0 > {o} && echo 1 > {o} || exit 1; done"
        ))
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(o).unwrap().trim(), "1");
    let v = json(&[
        file.to_str().unwrap(),
        "--only",
        "hotplug",
        "--hotplug-states",
        "/sys/devices/system/cpu/hotplug/states",
    ]);
    let ops = v["hotplug"]["operations"].as_array().unwrap();
    let count = |d: &str| ops.iter().filter(|op| op["direction"] == d).count();
    assert_eq!((count("offline"), count("online")), (10, 10), "{ops:?}");
    assert_ops_cover_spans(ops);
    // Steps are named from hotplug/states; sched_cpu_deactivate is among the slowest offline ones.
    let slow: Vec<&Value> = v["hotplug"]["slowest"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["direction"] == "offline")
        .take(5)
        .collect();
    assert!(
        slow.iter()
            .any(|s| s["callback"] == "sched_cpu_deactivate" && s["name"] == "sched:active"),
        "{slow:?}"
    );
}

it_test!(reading_commands_end_quietly_on_a_closed_pipe);
/// `pmlab analyze t.dat | head -1`: reading commands end quietly when their reader goes away
/// (killed by SIGPIPE, as `cat` is), never with a panic.
fn reading_commands_end_quietly_on_a_closed_pipe() {
    let t = fixture("haltpoll_pipe_off.dat");
    let t = t.to_str().unwrap();
    for args in [
        vec!["analyze", t],
        vec!["whatif", t],
        vec!["trace", "info", t],
        vec!["dump", t],
    ] {
        crate::util::assert_quiet_on_closed_pipe(&args);
    }
}

it_test!(analyze_format_markdown_and_refused_formats);
/// `--format markdown` gives markdown tables; formats analyze cannot produce are refused before
/// the trace is read, naming the ones it can (CSV is `--export`).
fn analyze_format_markdown_and_refused_formats() {
    let f = fixture("trappy_idle.dat");
    let a = pmlab()
        .args(["analyze", "--only", "idle", "--format", "markdown"])
        .arg(&f)
        .assert()
        .success();
    let md = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(md.starts_with("### pmlab analyze "), "{md}");
    assert!(md.contains("#### idle") && md.contains("|---|"), "{md}");
    assert!(!md.contains('┆'), "no terminal table in markdown: {md}");
    for fmt in ["csv", "mail"] {
        pmlab()
            .args(["analyze", "/nonexistent.dat", "--format", fmt])
            .assert()
            .failure()
            .stderr(predicates::str::contains(format!(
                "--format {fmt} is not supported by pmlab analyze (CSV: --export DIR); choose table, markdown or json"
            )));
    }
}
