//! Integration tests for `pmlab knob` on the real machine (as root): set/restore round
//! trip, crash safety (SIGKILL at 20 points, SIGINT/SIGTERM/SIGHUP), bad input written
//! nowhere, a second live owner refused, and hotplug fault injection rolled back.
//! Run under `flock /tmp/pmlab-machine.lock`.

use crate::util::{cpuidle_driver, need_root, pmlab};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

/// The knob tests share the machine's knobs: one at a time.
static MACHINE: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

fn sys(p: &str) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{p}: {e}"))
        .trim()
        .to_string()
}

/// The cpuidle driver of this boot (`none` when no driver registered).
fn has_state(cpu: u32, name: &str) -> bool {
    (0..10).any(|k| {
        std::fs::read_to_string(format!(
            "/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{k}/name"
        ))
        .is_ok_and(|n| n.trim() == name)
    })
}

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("pmlab")
}

/// Values of knobs (`pmlab knob get --json`), as a sorted list.
fn values(dir: &Path, names: &[String]) -> Vec<(String, String)> {
    let out = pmlab()
        .env("PMLAB_STATE_DIR", dir)
        .arg("knob")
        .arg("get")
        .args(names)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut r: Vec<(String, String)> = v
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    r.sort();
    r
}

pub(crate) fn journals(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .count()
        })
        .unwrap_or(0)
}

/// Harmless knobs of this machine with a value different from the current one, enough for
/// 20 writes: (name, new value).
fn many_knobs(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let list = pmlab()
        .env("PMLAB_STATE_DIR", dir)
        .args(["knob", "list", "--all", "--json"])
        .output()
        .unwrap();
    let list: Vec<serde_json::Value> = serde_json::from_slice(&list.stdout).unwrap();
    let value = |n: &str| {
        list.iter()
            .find(|k| k["name"] == n)
            .map(|k| k["value"].as_str().unwrap().to_string())
    };
    for cpu in 0..2 {
        for s in ["POLL", "C1", "haltpoll"] {
            if has_state(cpu, s) {
                let v = value(&format!("cpuidle.{s}.disable@{cpu}")).unwrap();
                out.push((
                    format!("cpuidle.{s}.disable@{cpu}"),
                    if v == "0" { "1" } else { "0" }.into(),
                ));
            }
        }
    }
    let toggles = ["rcu.expedited", "haltpoll.guest_halt_poll_allow_shrink"];
    for n in toggles {
        if let Some(v) = value(n) {
            let on = v == "1" || v == "Y";
            out.push((n.into(), if on { "0" } else { "1" }.into()));
        }
    }
    let bumps = [
        "haltpoll.guest_halt_poll_ns",
        "haltpoll.guest_halt_poll_grow",
        "haltpoll.guest_halt_poll_grow_start",
        "haltpoll.guest_halt_poll_shrink",
        "pmqos.resume_latency_us@0",
        "pmqos.resume_latency_us@1",
        "processor.latency_factor",
        "rcupdate.rcu_cpu_stall_timeout",
        "rcupdate.rcu_task_stall_timeout",
        "rcupdate.rcu_task_stall_info",
        "rcutree.rcu_divisor",
        "rcutree.jiffies_till_first_fqs",
        "rcutree.jiffies_till_next_fqs",
        "workqueue.cpu_intensive_thresh_us",
        "workqueue.watchdog_thresh",
        // harmless elsewhere-module parameters, for machines with few cpuidle states
        "keyboard.brl_timeout",
        "keyboard.brl_nbchords",
        "clocksource.verify_n_cpus",
        "fuse.max_user_congthresh",
    ];
    for n in bumps {
        if let Some(v) = value(n).and_then(|v| v.parse::<i64>().ok()) {
            out.push((n.into(), (v + 1).to_string()));
        }
    }
    out
}

fn assignments(k: &[(String, String)]) -> Vec<String> {
    k.iter().map(|(n, v)| format!("{n}={v}")).collect()
}

/// Start `pmlab knob set ASSIGN` (which may begin with `--root TREE`) paused after write
/// `n`; returns once it is paused.
pub(crate) fn start_paused(dir: &Path, assign: &[String], n: usize) -> Child {
    let mut child = Command::new(bin())
        .env("PMLAB_STATE_DIR", dir)
        .env("PMLAB_TEST_PAUSE_AFTER_WRITE", n.to_string())
        .arg("knob")
        .arg("set")
        .args(assign)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("pmlab ended before pausing at write {n}: {said}");
        }
        if line.contains("test hook: paused") {
            break;
        }
        said.push_str(&line);
    }
    // Keep draining stderr so the child never blocks on it.
    std::thread::spawn(move || for _ in err.lines() {});
    child
}

pub(crate) fn kill(child: &Child, sig: i32) {
    assert_eq!(crate::util::kill(child.id() as i32, sig), 0);
}

it_test!(knob_set_then_restore_round_trip);
fn knob_set_then_restore_round_trip() {
    need_root("the knob tests run as root on the real machine");
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let hp = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
    let hp0 = sys(hp);
    let (second, file) = if has_state(1, "POLL") {
        let f = (0..10)
            .map(|k| format!("/sys/devices/system/cpu/cpu1/cpuidle/state{k}"))
            .find(|d| sys(&format!("{d}/name")) == "POLL")
            .unwrap();
        ("cpuidle.POLL.disable@1=1", format!("{f}/disable"))
    } else {
        // No cpuidle driver on this boot: pmlab says so, and a per-CPU PM QoS knob stands in.
        pmlab()
            .env("PMLAB_STATE_DIR", dir.path())
            .args([
                "knob",
                "set",
                "haltpoll.guest_halt_poll_ns=150us",
                "cpuidle.POLL.disable@1=1",
            ])
            .assert()
            .failure()
            .stderr(predicates::str::contains(
                "cpu1 has no idle states (cpuidle driver: none",
            ));
        assert_eq!(sys(hp), hp0);
        (
            "pmqos.resume_latency_us@1=20us",
            "/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us".to_string(),
        )
    };
    let f0 = sys(&file);
    pmlab()
        .env("PMLAB_STATE_DIR", dir.path())
        .args(["knob", "set", "haltpoll.guest_halt_poll_ns=150us", second])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "haltpoll.guest_halt_poll_ns = 150000",
        ));
    assert_eq!(sys(hp), "150000");
    assert_ne!(sys(&file), f0);
    assert_eq!(journals(dir.path()), 1);
    pmlab()
        .env("PMLAB_STATE_DIR", dir.path())
        .args(["knob", "restore"])
        .assert()
        .success()
        .stdout(predicates::str::contains("restored 2 knob(s)"));
    assert_eq!(sys(hp), hp0);
    assert_eq!(sys(&file), f0);
    assert_eq!(journals(dir.path()), 0);
    // Idempotent.
    pmlab()
        .env("PMLAB_STATE_DIR", dir.path())
        .args(["knob", "restore"])
        .assert()
        .success()
        .stdout(predicates::str::contains("nothing to restore"));
}

it_test!(knob_sigkill_at_20_points_then_next_command_restores);
fn knob_sigkill_at_20_points_then_next_command_restores() {
    need_root("the knob tests write knobs");
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let knobs = many_knobs(dir.path());
    assert!(
        knobs.len() >= 20,
        "only {} harmless knobs here: {knobs:?}",
        knobs.len()
    );
    let names: Vec<String> = knobs.iter().map(|k| k.0.clone()).collect();
    let before = values(dir.path(), &names);
    let assign = assignments(&knobs);
    for n in 1..=20 {
        let mut child = start_paused(dir.path(), &assign, n);
        let now = values(dir.path(), &names);
        let changed = before.iter().zip(&now).filter(|(a, b)| a != b).count();
        assert_eq!(changed, n, "after write {n}");
        kill(&child, libc::SIGKILL);
        child.wait().unwrap();
        assert_eq!(journals(dir.path()), 1);
        // The next mutating command restores the dead owner's journal first.
        if n % 2 == 0 {
            pmlab()
                .env("PMLAB_STATE_DIR", dir.path())
                .args(["knob", "restore"])
                .assert()
                .success()
                .stdout(predicates::str::contains("dead pmlab process"));
        } else {
            let (k, v) = before.iter().find(|(k, _)| *k == "rcu.expedited").unwrap();
            pmlab()
                .env("PMLAB_STATE_DIR", dir.path())
                .args(["knob", "set", &format!("{k}={v}")])
                .assert()
                .success()
                .stderr(predicates::str::contains("dead pmlab process"));
            assert_eq!(
                values(dir.path(), &names),
                before,
                "after kill at write {n}"
            );
            pmlab()
                .env("PMLAB_STATE_DIR", dir.path())
                .args(["knob", "restore"])
                .assert()
                .success();
        }
        assert_eq!(
            values(dir.path(), &names),
            before,
            "after kill at write {n}"
        );
        assert_eq!(journals(dir.path()), 0);
    }
}

it_test!(knob_sigint_sigterm_sighup_restore_without_a_second_command);
fn knob_sigint_sigterm_sighup_restore_without_a_second_command() {
    need_root("the knob tests write knobs");
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let knobs = many_knobs(dir.path());
    let names: Vec<String> = knobs.iter().map(|k| k.0.clone()).collect();
    let before = values(dir.path(), &names);
    let assign = assignments(&knobs);
    for (sig, n) in [
        (libc::SIGINT, 3),
        (libc::SIGTERM, 7),
        (libc::SIGHUP, 11),
        (libc::SIGINT, knobs.len().min(20)),
    ] {
        let mut child = start_paused(dir.path(), &assign, n);
        assert_ne!(values(dir.path(), &names), before);
        kill(&child, sig);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(128 + sig), "signal {sig}");
        assert_eq!(
            values(dir.path(), &names),
            before,
            "signal {sig} at write {n}"
        );
        assert_eq!(journals(dir.path()), 0);
    }
}

it_test!(knob_bad_input_is_refused_before_any_write);
fn knob_bad_input_is_refused_before_any_write() {
    need_root("the knob tests write knobs");
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let rcu0 = sys("/sys/kernel/rcu_expedited");
    let flip = if rcu0 == "0" { "1" } else { "0" };
    let good = format!("rcu.expedited={flip}");
    let mut cases: Vec<(&str, String)> = vec![
        (
            "haltpoll.guest_halt_pol_ns=1",
            "did you mean `haltpoll.guest_halt_poll_ns`".into(),
        ),
        ("pmqos.resume_latency_us@1=-5", "out of range".into()),
        (
            "cpuidle.governor=fast",
            "not one of the kernel's allowed values".into(),
        ),
        ("haltpoll.guest_halt_poll_ns=2GHz", "frequency unit".into()),
        ("rcu.expedited@1=1", "takes no @CPUS".into()),
        ("sysfs:/sys/../etc/passwd=x", "not a path under /sys".into()),
        (
            "sysfs:/sys/kernel/../../etc/passwd=x",
            "not a path under /sys".into(),
        ),
        ("cpu.online@7=0", "there is no cpu7".into()),
        // Text that is no assignment: refused where it is parsed, with the typed cause.
        (
            "cpu.online@x=0",
            "bad CPUs after `@`: 'x' is not a CPU list".into(),
        ),
        ("rcu.expedited", "expected NAME[@CPUS]=VALUE".into()),
    ];
    if !Path::new("/sys/devices/system/cpu/cpu0/online").exists() {
        cases.push(("cpu.online@0=0", "cpu0 has no `online` file".into()));
    } else {
        cases.push(("cpu.online=0", "would leave no CPU online".into()));
    }
    if cpuidle_driver() == "none" {
        cases.push(("cpuidle.POLL.disable@1=1", "no idle states".into()));
    } else {
        cases.push((
            "cpuidle.NOSUCH.disable@1=1",
            "has no idle state `NOSUCH`".into(),
        ));
    }
    for (bad, msg) in &cases {
        pmlab()
            .env("PMLAB_STATE_DIR", dir.path())
            .args(["knob", "set", &good, bad])
            .assert()
            .failure()
            .stderr(predicates::str::contains("pmlab: error:"))
            .stderr(predicates::str::contains(msg.as_str()));
        assert_eq!(sys("/sys/kernel/rcu_expedited"), rcu0, "{bad} wrote {good}");
        assert_eq!(journals(dir.path()), 0, "{bad}");
    }
    pmlab()
        .args(["knob", "get", "cpufreq.governr"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("unknown knob"));
}

it_test!(knob_second_live_owner_is_refused);
fn knob_second_live_owner_is_refused() {
    need_root("the knob tests write knobs");
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let hp = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
    let hp0 = sys(hp);
    let mut first = start_paused(dir.path(), &["haltpoll.guest_halt_poll_ns=100us".into()], 1);
    assert_eq!(sys(hp), "100000");
    pmlab()
        .env("PMLAB_STATE_DIR", dir.path())
        .args(["knob", "set", "haltpoll.guest_halt_poll_ns=50us"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(format!(
            "haltpoll.guest_halt_poll_ns is in use by pmlab process {}",
            first.id()
        )));
    assert_eq!(sys(hp), "100000");
    kill(&first, libc::SIGTERM);
    first.wait().unwrap();
    assert_eq!(sys(hp), hp0);
    assert_eq!(journals(dir.path()), 0);
}

it_test!(knob_hotplug_fault_is_rolled_back_with_the_step);
fn knob_hotplug_fault_is_rolled_back_with_the_step() {
    need_root("the knob tests write knobs");
    let _g = serial();
    let cpu1 = "/sys/devices/system/cpu/cpu1";
    if !Path::new(&format!("{cpu1}/online")).exists() {
        // Not hot-pluggable here: pmlab must refuse.
        pmlab()
            .args(["knob", "set", "cpu.online@1=0"])
            .assert()
            .failure()
            .stderr(predicates::str::contains("no `online` file"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let states = sys("/sys/devices/system/cpu/hotplug/states");
    let step = ["padata:online", "workqueue:online", "x86/cpuid:online"]
        .iter()
        .find_map(|n| {
            states.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (v.trim() == *n).then(|| k.trim().to_string())
            })
        })
        .expect("a hotplug state to inject a fault into");
    let rcu0 = sys("/sys/kernel/rcu_expedited");
    let flip = if rcu0 == "0" { "1" } else { "0" };
    std::fs::write(format!("{cpu1}/hotplug/fail"), &step).unwrap();
    let out = pmlab()
        .env("PMLAB_STATE_DIR", dir.path())
        .args([
            "knob",
            "set",
            &format!("rcu.expedited={flip}"),
            "cpu.online@1=0",
        ])
        .output()
        .unwrap();
    let fail_after = sys(&format!("{cpu1}/hotplug/fail"));
    if fail_after != "-1" {
        std::fs::write(format!("{cpu1}/hotplug/fail"), "-1").unwrap();
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&format!("at hotplug step {step}")), "{err}");
    assert!(err.contains("rolled back rcu.expedited"), "{err}");
    assert_eq!(sys(&format!("{cpu1}/online")), "1");
    assert_eq!(
        fail_after, "-1",
        "the kernel resets fail after the injected failure"
    );
    assert_eq!(sys("/sys/kernel/rcu_expedited"), rcu0);
    assert_eq!(journals(dir.path()), 0);
}
