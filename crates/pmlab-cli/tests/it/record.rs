//! Integration tests for `pmlab record` on the real kernel (root): recordings of this
//! machine (pipe with polling on, hotplug cycles under load, 3 s idle) lose nothing, open
//! in trace-cmd without warnings and dump exactly as trace-cmd reports them (v6 and v7);
//! the private instance is gone after every exit (incl. SIGINT, SIGTERM, SIGKILL + the next
//! pmlab command) and the global tracefs state is untouched.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::trace::{assert_dump_matches_trace_cmd, convert_v7, trace_cmd_report};
use crate::util::{need_root, pmlab, Cpu1Online, CPU1_ONLINE};

/// The recording tests share the machine's tracefs and CPUs: one at a time.
static MACHINE: Mutex<()> = Mutex::new(());

pub fn machine() -> std::sync::MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

const HALTPOLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

fn tracefs_mount() -> Option<PathBuf> {
    let m = std::fs::read_to_string("/proc/mounts").ok()?;
    m.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == "tracefs").then(|| PathBuf::from(f[1]))
    })
}

/// tracefs, mounted by pmlab itself when it is not mounted yet.
fn tracefs() -> PathBuf {
    need_root("the recording tests need root (the project's machines run them as root)");
    if let Some(p) = tracefs_mount() {
        return p;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = pmlab()
        .args(["record", "--duration", "100ms", "-o"])
        .arg(tmp.path().join("m.dat"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tracefs_mount().expect("pmlab record mounts tracefs when it is not mounted")
}

/// The global (top) tracefs state a recording must leave untouched.
fn global_state(t: &Path) -> Vec<(String, String)> {
    [
        "set_event",
        "tracing_on",
        "current_tracer",
        "buffer_size_kb",
        "trace_clock",
        "events/enable",
        "set_event_pid",
    ]
    .iter()
    .map(|f| {
        (
            f.to_string(),
            std::fs::read_to_string(t.join(f)).unwrap_or_default(),
        )
    })
    .collect()
}

/// pmlab's instances whose owner is gone (`pmlab-PID`): left behind. A live owner's is
/// another pmlab's recording on this machine (a test's children have all exited when it
/// checks).
fn pmlab_instances(t: &Path) -> Vec<String> {
    std::fs::read_dir(t.join("instances"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.strip_prefix("pmlab-").is_some_and(|pid| {
                        !Path::new("/proc").join(pid).exists() || pid.parse::<u32>().is_err()
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Checks before/after a recording: no pmlab instance left, global state unchanged.
struct Untouched {
    tracefs: PathBuf,
    before: Vec<(String, String)>,
}

impl Untouched {
    fn new() -> Untouched {
        let t = tracefs();
        Untouched {
            before: global_state(&t),
            tracefs: t,
        }
    }
    fn check(&self) {
        assert_eq!(
            pmlab_instances(&self.tracefs),
            Vec::<String>::new(),
            "a pmlab instance was left behind"
        );
        assert_eq!(
            global_state(&self.tracefs),
            self.before,
            "the global tracefs state changed"
        );
    }
}

/// Sets haltpoll's poll limit and puts the value found back on drop.
struct HaltpollGuard(Option<String>);

impl HaltpollGuard {
    fn set(ns: u64) -> HaltpollGuard {
        let original = std::fs::read_to_string(HALTPOLL_NS).ok();
        if original.is_some() {
            std::fs::write(HALTPOLL_NS, ns.to_string()).expect("writing guest_halt_poll_ns");
        }
        HaltpollGuard(original)
    }
}

impl Drop for HaltpollGuard {
    fn drop(&mut self) {
        if let Some(v) = &self.0 {
            let _ = std::fs::write(HALTPOLL_NS, v.trim());
        }
    }
}

/// `pmlab record --json ARGS`: the summary.
fn record_json(args: &[&str]) -> Value {
    let out = pmlab()
        .arg("record")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pmlab record {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "summary JSON: {e}\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn total(j: &Value, key: &str) -> u64 {
    j[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

fn count_of(j: &Value, name: &str) -> u64 {
    j["events_by_name"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e[0] == name)
        .map(|e| e[1].as_u64().unwrap())
        .unwrap_or(0)
}

/// The file opens in trace-cmd without a warning, and dumps as trace-cmd reports it,
/// as v6 and converted to v7 zstd.
fn check_file(file: &Path) -> usize {
    let (_, stderr) = trace_cmd_report(file);
    assert!(
        stderr.trim().is_empty(),
        "trace-cmd report {} warned: {stderr}",
        file.display()
    );
    let n = assert_dump_matches_trace_cmd(file);
    let v7 = file.with_extension("v7.dat");
    convert_v7(file, "zstd", &v7).expect("trace-cmd convert to v7 zstd");
    assert_eq!(assert_dump_matches_trace_cmd(&v7), n);
    n
}

it_test!(pipe_with_polling_on_loses_nothing_and_matches_trace_cmd);
fn pipe_with_polling_on_loses_nothing_and_matches_trace_cmd() {
    let _m = machine();
    let untouched = Untouched::new();
    let _poll = HaltpollGuard::set(200_000);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("pipe.dat");
    let pmlab_bin = assert_cmd::cargo::cargo_bin("pmlab");
    let j = record_json(&[
        "-o",
        file.to_str().unwrap(),
        "--",
        pmlab_bin.to_str().unwrap(),
        "run",
        "pipe",
        "--loops",
        "100000",
    ]);
    untouched.check();
    assert_eq!(
        total(&j, "lost_per_cpu"),
        0,
        "events lost with the default buffer: {j}"
    );
    let events = total(&j, "events_per_cpu");
    // each op is a wakeup and two switches at least
    assert!(events >= 300_000, "only {events} events");
    assert!(count_of(&j, "sched:sched_switch") >= 200_000);
    assert!(count_of(&j, "sched:sched_waking") >= 100_000);
    assert_eq!(
        j["lost_per_cpu"].as_array().unwrap().len(),
        j["cpus"].as_array().unwrap().len()
    );
    let n = check_file(&file);
    assert_eq!(n as u64, events);
}

it_test!(hotplug_cycles_under_load_and_the_named_events);
fn hotplug_cycles_under_load_and_the_named_events() {
    let _m = machine();
    let untouched = Untouched::new();
    let _cpu1 = Cpu1Online;
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("hotplug.dat");
    let script = format!(
        "yes > /dev/null & Y=$!; sleep 0.2; for i in 1 2 3; do echo 0 > {CPU1_ONLINE}; sleep 0.2; echo 1 > {CPU1_ONLINE}; sleep 0.2; done; kill $Y"
    );
    let j = record_json(&[
        "-o",
        file.to_str().unwrap(),
        "-e",
        "power",
        "-e",
        "sched",
        "-e",
        "ipi",
        "-e",
        "irq",
        "-e",
        "irq_vectors",
        "-e",
        "timer",
        "-e",
        "cpuhp",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(std::fs::read_to_string(CPU1_ONLINE).unwrap().trim(), "1");
    untouched.check();
    assert_eq!(total(&j, "lost_per_cpu"), 0, "{j}");
    // 3 offline + 3 online walks of the hotplug state machine
    assert!(
        count_of(&j, "cpuhp:cpuhp_enter") >= 6,
        "cpuhp events: {}",
        count_of(&j, "cpuhp:cpuhp_enter")
    );
    assert!(count_of(&j, "cpuhp:cpuhp_exit") >= 6);
    check_file(&file);
    // The named events are recorded (their formats are in the file) and every one that
    // fired decodes as trace-cmd reports it (checked above). cpu_idle_miss and
    // guest_halt_poll_ns only fire with a cpuidle driver (haltpoll) registered.
    let trace = pmlab_trace::open(&file).unwrap();
    for (sys, name) in [
        ("power", "cpu_idle_miss"),
        ("power", "guest_halt_poll_ns"),
        ("ipi", "ipi_send_cpumask"),
        ("irq", "irq_handler_entry"),
    ] {
        assert!(
            trace.event_id(sys, name).is_some(),
            "{sys}:{name} is not in the recording's formats"
        );
    }
    let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
        .unwrap_or_default();
    let ipi_mask = count_of(&j, "ipi:ipi_send_cpumask");
    eprintln!(
        "cpuidle driver {:?}; ipi_send_cpumask {ipi_mask}, irq_handler_entry {}, cpu_idle_miss {}, guest_halt_poll_ns {}",
        driver.trim(),
        count_of(&j, "irq:irq_handler_entry"),
        count_of(&j, "power:cpu_idle_miss"),
        count_of(&j, "power:guest_halt_poll_ns"),
    );
    // Bringing a CPU down and up sends function-call IPIs. With two CPUs every remote call
    // targets one CPU, which the kernel traces as ipi_send_cpu, not ipi_send_cpumask.
    let ipis = ipi_mask + count_of(&j, "ipi:ipi_send_cpu");
    assert!(ipis > 0, "no IPI sent during hotplug cycles");
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    if online.trim() != "0-1" {
        assert!(ipi_mask > 0, "no ipi_send_cpumask on CPUs {online}");
    }
}

it_test!(three_seconds_of_idle_without_a_command);
fn three_seconds_of_idle_without_a_command() {
    let _m = machine();
    let untouched = Untouched::new();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("idle.dat");
    let t0 = Instant::now();
    let j = record_json(&["-o", file.to_str().unwrap(), "--duration", "3s"]);
    let wall = t0.elapsed();
    untouched.check();
    assert!(
        wall >= Duration::from_secs(3) && wall < Duration::from_secs(8),
        "{wall:?}"
    );
    let d = j["duration_ns"].as_u64().unwrap();
    assert!((2_900_000_000..4_000_000_000).contains(&d), "duration {d}");
    assert_eq!(total(&j, "lost_per_cpu"), 0);
    assert!(
        total(&j, "events_per_cpu") > 0,
        "an idle machine still has timer ticks"
    );
    check_file(&file);
}

it_test!(events_filters_and_buffer_size_apply_to_the_private_instance);
fn events_filters_and_buffer_size_apply_to_the_private_instance() {
    let _m = machine();
    let untouched = Untouched::new();
    let t = untouched.tracefs.clone();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("filtered.dat");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("pmlab"))
        .args([
            "record",
            "-e",
            "sched:sched_switch",
            "-e",
            "irq_handler_entry",
        ])
        .args([
            "-f",
            "sched:sched_switch=prev_pid != 0",
            "--buffer-kb",
            "1024",
        ])
        .args(["--duration", "2s", "-o"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let inst = wait_for_instance(&t, child.id());
    let read = |f: &str| std::fs::read_to_string(inst.join(f)).unwrap_or_default();
    // the kernel rounds the size up to whole sub-buffers
    let kb: u64 = read("buffer_size_kb").trim().parse().unwrap();
    assert!((1024..1100).contains(&kb), "buffer_size_kb {kb}");
    let set: Vec<String> = read("set_event").lines().map(String::from).collect();
    assert!(set.contains(&"sched:sched_switch".to_string()), "{set:?}");
    assert!(
        set.contains(&"irq:irq_handler_entry".to_string()),
        "{set:?}"
    );
    assert_eq!(set.len(), 2, "{set:?}");
    assert!(read("events/sched/sched_switch/filter").contains("prev_pid != 0"));
    // the global buffer is not used
    assert_eq!(
        std::fs::read_to_string(t.join("set_event")).unwrap(),
        untouched.before[0].1
    );
    let st = child.wait().unwrap();
    assert!(st.success());
    untouched.check();
    let dump = pmlab()
        .args(["dump", "-R", "-t"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    let (mut switches, mut markers) = (0, 0);
    for l in text.lines().skip(1) {
        // One start marker per CPU (it arms the readers' buffer_percent watermark).
        if l.contains(" print: ") && l.contains("pmlab: recording CPU ") {
            markers += 1;
            continue;
        }
        assert!(
            l.contains("sched_switch:") || l.contains("irq_handler_entry:"),
            "unexpected event: {l}"
        );
        if l.contains("sched_switch:") {
            switches += 1;
            assert!(!l.contains(" prev_pid=0 "), "the filter let through: {l}");
        }
    }
    assert!(switches > 0, "no sched_switch in 2 s");
    assert_eq!(
        markers,
        crate::util::online_cpus().len(),
        "start markers:\n{text}"
    );
    check_file(&file);

    // bad event, bad filter: clear errors, nothing left behind
    for args in [
        vec!["-e", "nosuchsystem:nosuchevent"],
        vec![
            "-e",
            "sched:sched_switch",
            "-f",
            "sched:sched_switch=nosuchfield == 1",
        ],
        vec!["--buffer-kb", "1"],
    ] {
        let out = pmlab()
            .arg("record")
            .args(&args)
            .args(["--duration", "100ms", "-o"])
            .arg(tmp.path().join("bad.dat"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.starts_with("pmlab: error: "), "{err}");
        untouched.check();
    }
}

/// The instance `pmlab-<pid>` of a running pmlab record.
fn wait_for_instance(t: &Path, pid: u32) -> PathBuf {
    let dir = t.join("instances").join(format!("pmlab-{pid}"));
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        // recording has begun once tracing_on is set in the instance
        if std::fs::read_to_string(dir.join("tracing_on"))
            .map(|s| s.trim() == "1")
            .unwrap_or(false)
        {
            std::thread::sleep(Duration::from_millis(300));
            return dir;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} did not appear", dir.display());
}

fn start_record(file: &Path, extra: &[&str]) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("pmlab"))
        .args(["record", "-o"])
        .arg(file)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

it_test!(instance_is_removed_after_sigint_sigterm_and_sigkill);
fn instance_is_removed_after_sigint_sigterm_and_sigkill() {
    let _m = machine();
    let untouched = Untouched::new();
    let t = untouched.tracefs.clone();
    let tmp = tempfile::tempdir().unwrap();
    for (sig, extra) in [
        (libc::SIGINT, vec!["--duration", "60s"]),
        (libc::SIGTERM, vec!["--duration", "60s"]),
        (libc::SIGINT, vec!["--", "sleep", "60"]),
        (libc::SIGTERM, vec!["--", "sleep", "60"]),
    ] {
        let file = tmp.path().join(format!("sig{sig}.dat"));
        let mut child = start_record(&file, &extra);
        let inst = wait_for_instance(&t, child.id());
        crate::util::kill(child.id() as i32, sig);
        let t0 = Instant::now();
        let out = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "pmlab record ignored signal {sig}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        use std::io::Read;
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            !out.success(),
            "an interrupted recording exits non-zero: {err}"
        );
        assert!(err.contains("interrupted"), "{err}");
        assert!(!inst.exists(), "{} left after signal {sig}", inst.display());
        untouched.check();
        // the trace up to the signal is written and opens in trace-cmd
        let (_, warn) = trace_cmd_report(&file);
        assert!(warn.trim().is_empty(), "{warn}");
    }

    // SIGKILL leaves the instance; the next pmlab command removes it (its owner is dead).
    let file = tmp.path().join("killed.dat");
    let mut child = start_record(&file, &["--duration", "60s"]);
    let inst = wait_for_instance(&t, child.id());
    crate::util::kill(child.id() as i32, libc::SIGKILL);
    child.wait().unwrap();
    assert!(
        inst.exists(),
        "SIGKILL cannot clean up: the instance should still be there"
    );
    let out = pmlab()
        .args(["record", "--duration", "100ms", "-o"])
        .arg(tmp.path().join("next.dat"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !inst.exists(),
        "the next pmlab command did not sweep {}",
        inst.display()
    );
    // the global state is still untouched (the killed recorder never used it)
    untouched.check();
}

/// Bytes of every file under `dir` (a recording's output, growing as its readers move pages).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|es| {
            es.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The bytes a CPU buffer of the instance holds when its readers are woken: its
/// `buffer_size_kb` times its `buffer_percent`.
fn watermark_bytes(inst: &std::path::Path) -> u64 {
    let first = |f: &str| {
        std::fs::read_to_string(inst.join(f)).ok().and_then(|t| {
            t.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
    };
    let kb = first("buffer_size_kb").unwrap_or(1408);
    let pct = first("buffer_percent").unwrap_or(50);
    kb * 1024 * pct / 100
}

/// Voluntary context switches of a process's threads whose name starts with `prefix`.
fn thread_switches(pid: u32, prefix: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    let mut n = 0;
    for t in tasks.flatten() {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let name = status.lines().next().unwrap_or("");
        if !name.trim_start_matches("Name:").trim().starts_with(prefix) {
            continue;
        }
        n += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    n
}

/// The global `block` option, set to `on` for the guard's life, then as it was.
struct BlockOption {
    path: PathBuf,
    before: String,
}

impl BlockOption {
    fn set(t: &Path, on: bool) -> Option<BlockOption> {
        let path = t.join("options/block");
        let before = std::fs::read_to_string(&path).ok()?;
        std::fs::write(&path, if on { "1" } else { "0" }).ok()?;
        Some(BlockOption { path, before })
    }
}

impl Drop for BlockOption {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, self.before.trim());
    }
}

it_test!(a_global_block_option_does_not_make_the_readers_spin);
fn a_global_block_option_does_not_make_the_readers_spin() {
    let _m = machine();
    let untouched = Untouched::new();
    let t = untouched.tracefs.clone();
    // With `block` on, poll on trace_pipe_raw always says readable: a reader that trusted it
    // would wake without end. The recorder turns it off in its own instance.
    let Some(_block) = BlockOption::set(&t, true) else {
        skip!("this kernel has no `block` trace option");
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("pmlab"))
        .args(["record", "--duration", "3s", "-o"])
        .arg(tmp.path().join("block.dat"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let inst = wait_for_instance(&t, child.id());
    let block = std::fs::read_to_string(inst.join("options/block")).unwrap_or_default();
    // A reader wakes on data: when its CPU's buffer is `buffer_percent` full. On a machine
    // other tasks keep busy, the events they cause are data; what the readers moved to disk
    // in the window bounds the wakeups it can justify.
    let watermark = watermark_bytes(&inst);
    let a = (
        thread_switches(child.id(), "pmlab-rec-"),
        dir_bytes(tmp.path()),
    );
    std::thread::sleep(Duration::from_millis(1500));
    let b = (
        thread_switches(child.id(), "pmlab-rec-"),
        dir_bytes(tmp.path()),
    );
    assert!(child.wait().unwrap().success());
    drop(_block);
    untouched.check();
    assert_eq!(block.trim(), "0", "the instance's block option");
    let moved = b.1.saturating_sub(a.1);
    let on_data = moved / watermark.max(1);
    assert!(
        b.0 - a.0 <= 2 + on_data,
        "the readers woke {} times in 1.5 s of an idle recording, with {} KiB of events \
         (at most {on_data} wakeups on data at {} KiB a watermark)",
        b.0 - a.0,
        moved / 1024,
        watermark / 1024
    );
}
