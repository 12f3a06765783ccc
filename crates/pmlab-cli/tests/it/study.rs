//! Integration tests for `pmlab study` and `pmlab report`: a real quick study on this machine
//! (asserting what its capabilities make true), a simulated one whose polling summary is
//! recomputed from the store, a partial machine (fake root, non-root), Ctrl-C, and the
//! reports opened in a real headless Chromium (no console errors, no network requests,
//! non-empty SVG plots, a screenshot that is not blank).

use crate::util::{is_root, pmlab};
use pmlab_store::store::Store;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Real-machine tests of this module run one at a time.
static MACHINE: Mutex<()> = Mutex::new(());

/// A finished study: its directory, store, report and `--json` outcome.
struct Ran {
    dir: PathBuf,
    db: PathBuf,
    report: PathBuf,
    json: Value,
    seconds: f64,
}

/// A directory that outlives the test (the study results are shared across tests), under
/// one root per user that the next test process of that user empties first: leftovers never
/// pile up in /tmp, and a root left by another user (root, then `PMLAB_TEST_NO_ROOT=1`) is not
/// in the way.
fn tempdir() -> PathBuf {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let root = ROOT.get_or_init(|| {
        let root = std::env::temp_dir().join(format!(
            "pmlab-study-tests-{}",
            rustix::process::getuid().as_raw()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        root
    });
    let d = tempfile::Builder::new()
        .prefix("pmlab-study-test")
        .tempdir_in(root)
        .unwrap();
    d.keep()
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The registered cpuidle driver (None for `none` or no cpuidle).
fn cpuidle_driver() -> Option<String> {
    Some(read("/sys/devices/system/cpu/cpuidle/current_driver"))
        .filter(|d| !d.is_empty() && d != "none")
}

/// The machine state the study must leave as found.
fn machine_state() -> State {
    let mut files = vec![
        "/sys/module/haltpoll/parameters/guest_halt_poll_ns".to_string(),
        "/sys/kernel/rcu_expedited".to_string(),
        "/sys/devices/system/cpu/online".to_string(),
        "/sys/devices/system/cpu/cpuidle/current_governor".to_string(),
    ];
    for cpu in 0..64 {
        let f = format!("/sys/devices/system/cpu/cpu{cpu}/hotplug/fail");
        if Path::new(&f).exists() {
            files.push(f);
        }
    }
    files
        .into_iter()
        .map(|f| (read(&f), f))
        .map(|(v, f)| (f, v))
        .collect()
}

fn run_study(dir: &Path, extra: &[&str]) -> Ran {
    let db = dir.join("pmlab.db");
    let out = dir.join("report");
    let t = Instant::now();
    let assert = pmlab()
        .current_dir(dir)
        .args(["study", "--quick", "--json", "-q", "--db"])
        .arg(&db)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .timeout(Duration::from_secs(300))
        .assert()
        .success();
    let json: Value = serde_json::from_slice(&assert.get_output().stdout).expect("study --json");
    Ran {
        dir: dir.to_path_buf(),
        db,
        report: out.join("report.html"),
        json,
        seconds: t.elapsed().as_secs_f64(),
    }
}

/// The quick study on this machine, run once and shared (with the state before and after).
/// Knob files and their values.
type State = Vec<(String, String)>;

fn real() -> &'static (Ran, State, State) {
    static REAL: OnceLock<(Ran, State, State)> = OnceLock::new();
    REAL.get_or_init(|| {
        let q = readme_quick_study();
        assert!(
            q.out.status.success(),
            "`pmlab study --quick` failed ({}):\n{}{}",
            q.out.status,
            String::from_utf8_lossy(&q.out.stdout),
            String::from_utf8_lossy(&q.out.stderr)
        );
        let db = q.dir.join("pmlab.db");
        let stdout = String::from_utf8_lossy(&q.out.stdout);
        let report = stdout
            .lines()
            .find_map(|l| l.strip_prefix("report: "))
            .map(|p| q.dir.join(p.trim()))
            .unwrap_or_else(|| panic!("no report line: {stdout}"));
        // Its findings and stages as data, from the store it wrote.
        let json: Value = serde_json::from_str(&crate::util::stdout_of(
            pmlab()
                .current_dir(&q.dir)
                .args(["report", "study", "--format", "json"]),
        ))
        .expect("report --format json");
        let ran = Ran {
            dir: q.dir.clone(),
            db,
            report,
            json,
            seconds: q.seconds,
        };
        (ran, q.before.clone(), q.after.clone())
    })
}

/// README's `pmlab study --quick`, exactly as written (its default store and report directory
/// in a directory of its own), run once and shared: README's example test checks its text
/// against README's, the tests here its stages, findings (`pmlab report study --format json`),
/// report and the machine's state before and after. It is the suite's longest run.
pub(crate) struct QuickStudy {
    pub dir: PathBuf,
    pub out: std::process::Output,
    pub seconds: f64,
    before: State,
    after: State,
}

/// The shared run of README's quick study (see [`QuickStudy`]).
pub(crate) fn readme_quick_study() -> &'static QuickStudy {
    static QUICK: OnceLock<QuickStudy> = OnceLock::new();
    QUICK.get_or_init(|| {
        let _m = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempdir();
        let before = machine_state();
        let t = Instant::now();
        let out = pmlab()
            .current_dir(&dir)
            .args(["study", "--quick"])
            .timeout(Duration::from_secs(300))
            .output()
            .unwrap();
        let seconds = t.elapsed().as_secs_f64();
        QuickStudy {
            dir,
            out,
            seconds,
            before,
            after: machine_state(),
        }
    })
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A fake guest with the haltpoll cpuidle driver (POLL state, poll limit, two governors).
fn haltpoll_tree(root: &Path) {
    write(root, "sys/devices/system/cpu/online", "0-1\n");
    write(root, "sys/devices/system/cpu/cpu1/online", "1\n");
    write(
        root,
        "sys/devices/system/cpu/cpuidle/current_driver",
        "haltpoll\n",
    );
    write(
        root,
        "sys/devices/system/cpu/cpuidle/available_governors",
        "menu haltpoll\n",
    );
    write(
        root,
        "sys/devices/system/cpu/cpuidle/current_governor",
        "haltpoll\n",
    );
    write(
        root,
        "sys/devices/system/cpu/cpu0/cpuidle/state0/name",
        "POLL\n",
    );
    write(
        root,
        "sys/module/haltpoll/parameters/guest_halt_poll_ns",
        "200000\n",
    );
    write(root, "proc/sys/kernel/osrelease", "6.18.0-sim\n");
    write(root, "proc/cpuinfo", "processor\t: 0\nmodel name\t: Simulated CPU\n\nprocessor\t: 1\nmodel name\t: Simulated CPU\n");
}

/// The simulated study on a fake haltpoll guest, run once and shared.
fn sim() -> &'static Ran {
    // The study plans its knob stages from the effective uid, under --simulate too.
    crate::util::need_root("the simulated study plans its knob stages only as root");
    static SIM: OnceLock<Ran> = OnceLock::new();
    SIM.get_or_init(|| {
        let dir = tempdir();
        let root = dir.join("root");
        haltpoll_tree(&root);
        let r = root.to_str().unwrap().to_string();
        run_study(&dir, &["--simulate", "--root", &r, "--seed", "7"])
    })
}

fn stage<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {json}"))
}

it_test!(quick_study_on_this_machine_adapts_and_leaves_it_as_found);
fn quick_study_on_this_machine_adapts_and_leaves_it_as_found() {
    if !is_root() {
        skip!("the real study needs root (the project's machines run tests as root)");
    }
    let (ran, before, after) = real();
    assert!(ran.seconds < 90.0, "quick study took {:.1} s", ran.seconds);
    assert_eq!(before, after, "the machine is as found after the study");
    let size = std::fs::metadata(&ran.report).unwrap().len();
    assert!(size > 10_000 && size < 5_000_000, "report is {size} bytes");
    let polling = stage(&ran.json, "polling");
    match cpuidle_driver() {
        None => {
            assert_eq!(polling["status"], "skipped");
            let reason = polling["reason"].as_str().unwrap();
            assert!(reason.contains("no cpuidle driver"), "{reason}");
            let governors = stage(&ran.json, "governors");
            assert_eq!(governors["status"], "skipped");
            // The summary says so, first thing.
            let top: Vec<&str> = ran.json["findings"]
                .as_array()
                .unwrap()
                .iter()
                .take(3)
                .map(|f| f["text"].as_str().unwrap())
                .collect();
            assert!(
                top.iter().any(|t| t.contains("Polling: not measured")),
                "{top:?}"
            );
        }
        Some(driver) => {
            // With a driver, polling runs when knobs can be set (knob transactions) — or it
            // is skipped with the reason; never silently.
            let status = polling["status"].as_str().unwrap();
            assert!(
                status == "done" || !polling["reason"].as_str().unwrap().is_empty(),
                "driver {driver}: {polling}"
            );
            if status == "done" {
                let f = ran.json["findings"].as_array().unwrap();
                assert!(f.iter().any(|x| x["topic"] == "polling"), "{f:?}");
            }
        }
    }
    // The wakeup stage's trace replayed under the haltpoll governor: a stated prediction,
    // first in the summary where polling itself could not be measured.
    let predicted = stage(&ran.json, "polling-predicted");
    assert_eq!(predicted["status"], "done", "{predicted}");
    let said = predicted["reason"].as_str().unwrap();
    assert!(
        said.starts_with("Polling (predicted, not measured"),
        "{said}"
    );
    assert!(
        said.contains("at 200 µs") || said.contains("catch nothing"),
        "{said}"
    );
    let texts: Vec<&str> = ran.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["text"].as_str().unwrap())
        .collect();
    let rank = texts.iter().position(|t| *t == said).expect("a finding");
    if polling["status"] != "done" {
        assert!(rank < 3, "{texts:?}");
    }
    let hotplug = stage(&ran.json, "hotplug");
    if Path::new("/sys/devices/system/cpu/cpu1/online").exists() {
        assert_eq!(hotplug["status"], "done", "{hotplug}");
    } else {
        assert_eq!(hotplug["status"], "skipped");
    }
    for s in ["idle", "wakeups", "cpu"] {
        assert_eq!(stage(&ran.json, s)["status"], "done", "{s}");
    }
    // Raw data beside the HTML, linked from it.
    let html = std::fs::read_to_string(&ran.report).unwrap();
    let data = ran.report.parent().unwrap().join("data");
    for id in stage(&ran.json, "idle")["experiments"].as_array().unwrap() {
        let csv = format!("experiment-{id}-runs.csv");
        assert!(data.join(&csv).exists());
        assert!(html.contains(&format!("href=\"data/{csv}\"")));
    }
    assert!(data.join("summary.json").exists());
}

it_test!(simulated_summary_states_knee_and_cost_recomputed_from_the_store);
fn simulated_summary_states_knee_and_cost_recomputed_from_the_store() {
    let ran = sim();
    let f = ran.json["findings"].as_array().unwrap();
    let first = &f[0];
    assert_eq!(first["topic"], "polling", "{first}");
    assert_eq!(first["values"]["workload"], "pipe");
    let text = first["text"].as_str().unwrap();
    let id = first["experiment"].as_i64().unwrap();
    // Recompute from the store: the pipe samples per configuration, the knee (first value
    // within the noise margin of the best), the speed-up and the poll time per second.
    let store = Store::open(&ran.db).unwrap();
    let e = store.load(id).unwrap();
    let w = e
        .workloads
        .iter()
        .position(|w| w.argv[0] == "pipe")
        .unwrap();
    let samples: Vec<Vec<f64>> = (0..e.configurations.len())
        .map(|c| e.samples(w, c, "us_per_op"))
        .collect();
    let knee = pmlab_stats::stats::knee(&samples, pmlab_kernel::Direction::Lower, e.info.target_ci)
        .unwrap();
    let label = &e.configurations[knee.index].label;
    assert_eq!(first["values"]["knee"], label.as_str());
    assert!(
        text.contains(&format!("Polling up to {label} (the knee)")),
        "{text}"
    );
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let ratio = mean(&samples[0]) / mean(&samples[knee.index]);
    let stored = first["values"]["ratio"].as_f64().unwrap();
    assert!((stored - ratio).abs() < 1e-9 * ratio, "{stored} vs {ratio}");
    assert!(
        text.contains(&format!("{ratio:.1}×")),
        "{text} lacks {ratio:.1}×"
    );
    let mut per_run = Vec::new();
    for r in e.runs.iter().filter(|r| {
        r.workload == w && r.configuration == knee.index && !r.warmup && r.status.as_str() == "ok"
    }) {
        let get = |n: &str| r.metrics.iter().find(|m| m.name == n).unwrap().value;
        per_run.push(get("idle.POLL.time_ms") / get("counters.window_s"));
    }
    let cost = mean(&per_run);
    let stored = first["values"]["poll_ms_per_s"].as_f64().unwrap();
    assert!(
        (stored - cost).abs() < 1e-9 * cost.max(1.0),
        "{stored} vs {cost}"
    );
    let shown = pmlab_report::html::findings::fmt_short(cost);
    assert!(
        text.contains(&format!("cost of {shown} ms of poll time per second")),
        "{text}"
    );
    assert!(text.contains("on an idle system"), "{text}");
    // The knee is marked in the report's sweep plot.
    let html = std::fs::read_to_string(&ran.report).unwrap();
    assert!(html.contains("<g class=\"knee\">"));
    assert!(html.contains(text.split(" (").next().unwrap()));
}

it_test!(partial_machine_nonroot_skips_stages_with_reasons_and_still_reports);
fn partial_machine_nonroot_skips_stages_with_reasons_and_still_reports() {
    let dir = tempdir();
    let root = dir.join("root");
    write(&root, "sys/devices/system/cpu/online", "0-1\n");
    write(&root, "sys/devices/system/cpu/cpu1/online", "1\n");
    write(
        &root,
        "sys/devices/system/cpu/cpuidle/current_driver",
        "none\n",
    );
    write(&root, "proc/sys/kernel/osrelease", "6.18.0-partial\n");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    // A real non-root user where we can switch to one, else the test switch.
    let nobody = is_root() && Path::new("/usr/bin/setpriv").exists();
    if nobody {
        for d in [&dir, &work] {
            std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o777))
                .unwrap();
        }
    }
    let bin = assert_cmd::cargo::cargo_bin("pmlab");
    let mut cmd = if nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        let mut c = Command::new(&bin);
        c.env("PMLAB_ASSUME_NONROOT", "1");
        c
    };
    let out = cmd
        .current_dir(&work)
        .args(["study", "--quick", "--json", "-q", "--simulate", "--root"])
        .arg(&root)
        .args(["--db", "p.db", "--out", "r"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = |s: &str| stage(&json, s)["reason"].as_str().unwrap().to_string();
    assert_eq!(stage(&json, "polling")["status"], "skipped");
    assert!(reason("polling").contains("no cpuidle driver and no idle-polling knob"));
    assert_eq!(stage(&json, "governors")["status"], "skipped");
    assert_eq!(stage(&json, "hotplug")["status"], "skipped");
    assert!(
        reason("hotplug").contains("needs root"),
        "{}",
        reason("hotplug")
    );
    for s in ["idle", "wakeups", "cpu"] {
        assert_eq!(stage(&json, s)["status"], "done", "{s}");
    }
    let html = std::fs::read_to_string(work.join("r/report.html")).unwrap();
    assert!(html.contains("needs root"));
    assert!(html.contains("<svg"));
}

it_test!(report_command_html_compare_mail_markdown);
fn report_command_html_compare_mail_markdown() {
    let ran = sim();
    let t = Instant::now();
    let out = ran.dir.join("again");
    let a = pmlab()
        .args(["report", "study", "--db"])
        .arg(&ran.db)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "report took {:?}",
        t.elapsed()
    );
    let stdout = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(stdout.contains("Polling up to"), "{stdout}");
    assert!(out.join("report.html").exists());
    // Compare mode: the polling sweep against itself re-run (same store, two experiments).
    let ids: Vec<i64> = ["polling", "governors"]
        .iter()
        .map(|s| stage(&ran.json, s)["experiments"][0].as_i64().unwrap())
        .collect();
    let cmp = ran.dir.join("cmp");
    pmlab()
        .args(["report", &ids[0].to_string(), &ids[0].to_string(), "--db"])
        .arg(&ran.db)
        .arg("--out")
        .arg(&cmp)
        .assert()
        .success();
    let html = std::fs::read_to_string(cmp.join("report.html")).unwrap();
    assert!(html.contains("Compare: experiment"), "compare section");
    assert!(html.contains("no significant change"));
    for (fmt, marker) in [("mail", "Summary:"), ("markdown", "## Summary")] {
        let a = pmlab()
            .args(["report", "study", "--format", fmt, "--db"])
            .arg(&ran.db)
            .assert()
            .success();
        let s = String::from_utf8_lossy(&a.get_output().stdout).to_string();
        assert!(s.contains(marker), "{fmt}: {s}");
        assert!(s.contains("Polling up to"), "{fmt}");
        assert!(s.contains("knee"), "{fmt}");
        if fmt == "mail" {
            assert!(
                s.lines().all(|l| l.chars().count() <= 72),
                "mail lines ≤ 72:\n{s}"
            );
        }
    }
    pmlab()
        .args(["report", "study:999", "--db"])
        .arg(&ran.db)
        .assert()
        .failure()
        .stderr(predicates::str::contains("pmlab: error: no such study"));
}

it_test!(study_sigint_restores_the_machine_and_keeps_what_was_done);
fn study_sigint_restores_the_machine_and_keeps_what_was_done() {
    if !is_root() || !Path::new("/sys/devices/system/cpu/cpu1/online").exists() {
        skip!("needs root and a hot-pluggable cpu1");
    }
    real(); // never overlap the shared study
    let _m = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let before = machine_state();
    let dir = tempdir();
    let bin = assert_cmd::cargo::cargo_bin("pmlab");
    let child = Command::new(bin)
        .current_dir(&dir)
        .args([
            "study",
            "--quick",
            "--only",
            "idle,hotplug",
            "-q",
            "--db",
            "p.db",
            "--out",
            "r",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Idle takes ~4 s; interrupt during the hotplug cycles.
    std::thread::sleep(Duration::from_millis(4600));
    crate::util::kill(child.id() as i32, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(before, machine_state(), "machine as found after Ctrl-C");
    assert!(
        dir.join("r/report.html").exists(),
        "a report of what was done"
    );
}

// --- headless Chromium ----------------------------------------------------------------------

fn chromium() -> PathBuf {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        for d in ["/usr/bin", "/usr/local/bin", "/snap/bin"] {
            let p = Path::new(d).join(c);
            if p.exists() {
                return p;
            }
        }
    }
    skip!("no chromium (scripts/setup.sh installs Debian's chromium)");
}

/// Headless Chromium on `page` with every HTTP(S) request sent to a local proxy we watch.
/// Returns (stdout, stderr, requests seen by the proxy).
pub(crate) fn browse(page: &Path, mode: &[&str]) -> (String, String, Vec<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (s2, d2) = (seen.clone(), done.clone());
    let t = std::thread::spawn(move || {
        while !d2.load(std::sync::atomic::Ordering::SeqCst) {
            match listener.accept() {
                Ok((c, _)) => {
                    c.set_read_timeout(Some(Duration::from_millis(500))).ok();
                    let mut line = String::new();
                    BufReader::new(c).read_line(&mut line).ok();
                    s2.lock().unwrap().push(line.trim().to_string());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--proxy-server=http://127.0.0.1:{port}"))
        .arg("--proxy-bypass-list=<-loopback>")
        .args(mode)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    t.join().unwrap();
    let requests = seen.lock().unwrap().clone();
    (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
        requests,
    )
}

/// Requests made by the page (Chromium's own Google-service traffic left out).
pub(crate) fn page_requests(requests: &[String]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| {
            !["google.com", "googleapis.com", "gstatic.com", "gvt1.com"]
                .iter()
                .any(|h| r.contains(h))
        })
        .cloned()
        .collect()
}

pub(crate) fn console_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect()
}

/// Decode an 8-bit RGB/RGBA PNG (inflate by python3's zlib, unfilter here); count distinct
/// colours and the share of non-white pixels.
fn png_stats(path: &Path) -> (usize, f64) {
    let d = std::fs::read(path).unwrap();
    assert_eq!(&d[..8], b"\x89PNG\r\n\x1a\n");
    let (mut i, mut idat, mut w, mut h, mut ct) = (8, Vec::new(), 0usize, 0usize, 0u8);
    while i + 8 <= d.len() {
        let n = u32::from_be_bytes(d[i..i + 4].try_into().unwrap()) as usize;
        let kind = &d[i + 4..i + 8];
        let body = &d[i + 8..i + 8 + n];
        if kind == b"IHDR" {
            w = u32::from_be_bytes(body[0..4].try_into().unwrap()) as usize;
            h = u32::from_be_bytes(body[4..8].try_into().unwrap()) as usize;
            assert_eq!(body[8], 8, "8-bit PNG");
            ct = body[9];
        } else if kind == b"IDAT" {
            idat.extend_from_slice(body);
        }
        i += 12 + n;
    }
    let bpp = if ct == 6 { 4 } else { 3 };
    let mut py = Command::new("python3")
        .args([
            "-c",
            "import sys,zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = py.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&idat));
    let mut raw = Vec::new();
    py.stdout.take().unwrap().read_to_end(&mut raw).unwrap();
    writer.join().unwrap().unwrap();
    py.wait().unwrap();
    let stride = w * bpp;
    assert_eq!(raw.len(), h * (stride + 1));
    let mut prev = vec![0u8; stride];
    let mut colours = std::collections::HashSet::new();
    let mut non_white = 0usize;
    for y in 0..h {
        let f = raw[y * (stride + 1)];
        let mut line = raw[y * (stride + 1) + 1..(y + 1) * (stride + 1)].to_vec();
        for x in 0..stride {
            let a = if x >= bpp { line[x - bpp] as i32 } else { 0 };
            let b = prev[x] as i32;
            let c = if x >= bpp { prev[x - bpp] as i32 } else { 0 };
            let add = match f {
                0 => 0,
                1 => a,
                2 => b,
                3 => (a + b) / 2,
                4 => {
                    let p = a + b - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                _ => panic!("bad PNG filter {f}"),
            };
            line[x] = (line[x] as i32 + add) as u8;
        }
        for px in line.chunks(bpp) {
            colours.insert((px[0], px[1], px[2]));
            if px[..3] != [255, 255, 255] {
                non_white += 1;
            }
        }
        prev = line;
    }
    (colours.len(), non_white as f64 / (w * h) as f64)
}

/// Every `<svg class="plot">` in a DOM: (title, data elements inside).
pub(crate) fn plots(dom: &str) -> Vec<(String, usize)> {
    dom.split("<svg class=\"plot\"")
        .skip(1)
        .map(|s| {
            let body = s.split("</svg>").next().unwrap_or("");
            let title = body
                .split("aria-label=\"")
                .nth(1)
                .and_then(|t| t.split('"').next())
                .unwrap_or("")
                .to_string();
            let marks = ["<rect", "<circle", "<polyline", "<polygon"]
                .iter()
                .map(|m| body.matches(m).count())
                .sum();
            (title, marks)
        })
        .collect()
}

it_test!(reports_load_in_headless_chromium_without_errors_or_network);
fn reports_load_in_headless_chromium_without_errors_or_network() {
    // Control: the method sees a console error and a network request when a page makes them.
    let dir = tempdir();
    let bad = dir.join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><img src=\"http://example.invalid/x.png\"><script>console.error('boom')</script>",
    )
    .unwrap();
    let (_, err, req) = browse(&bad, &["--dump-dom"]);
    assert!(
        !console_lines(&err).is_empty(),
        "control: console error seen"
    );
    assert!(
        page_requests(&req)
            .iter()
            .any(|r| r.contains("example.invalid")),
        "control: request seen: {req:?}"
    );

    let mut pages = vec![(sim().report.clone(), 6)];
    if is_root() {
        pages.push((real().0.report.clone(), 3));
    }
    for (page, min_plots) in pages {
        let (dom, err, req) = browse(&page, &["--dump-dom"]);
        assert!(
            console_lines(&err).is_empty(),
            "{}: console: {:?}",
            page.display(),
            console_lines(&err)
        );
        assert!(
            page_requests(&req).is_empty(),
            "{}: network: {:?}",
            page.display(),
            page_requests(&req)
        );
        let p = plots(&dom);
        assert!(
            p.len() >= min_plots,
            "{}: {} plots: {p:?}",
            page.display(),
            p.len()
        );
        for (title, marks) in &p {
            assert!(*marks > 0, "plot `{title}` is empty");
        }
        assert!(dom.contains("Summary"));
        let shot = page.with_file_name("shot.png");
        let t = Instant::now();
        let (_, err, _) = browse(
            &page,
            &[
                "--window-size=1000,1400",
                &format!("--screenshot={}", shot.display()),
            ],
        );
        assert!(shot.exists(), "screenshot written: {err}");
        eprintln!("{}: loaded and shot in {:?}", page.display(), t.elapsed());
        let (colours, ink) = png_stats(&shot);
        assert!(colours > 50, "{colours} distinct colours");
        assert!(ink > 0.02, "{:.1}% non-white", ink * 100.0);
    }
}
