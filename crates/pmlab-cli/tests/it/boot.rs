//! `pmlab boot` on real QEMU guests (the default guest of set-up, 2 vCPUs: a few seconds a
//! boot under TCG): the guest's trace comes back and decodes, its secondary CPU reaches
//! `online`, a panicking command line is a failed boot with its panic line, and no QEMU or
//! work directory is left after success, Ctrl-C or SIGKILL. Bad input is refused clearly
//! before anything runs. The analysis itself is covered on a real guest's results by
//! pmlab-boot's fixture test.

use crate::util::{need_path, need_program, pmlab};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn guest_dir() -> PathBuf {
    std::env::var_os("PMLAB_GUEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/pmlab/guest"))
        .join("x86_64")
}

/// Skips unless QEMU, busybox and set-up's default guest kernel are here.
fn need_guest() {
    need_program(
        "qemu-system-x86_64",
        "scripts/setup.sh installs qemu-system-x86",
    );
    need_path("/bin/busybox", "scripts/setup.sh installs busybox-static");
    let has_kernel = std::fs::read_dir(guest_dir())
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("vmlinuz-"))
        })
        .unwrap_or(false);
    if !has_kernel {
        skip!(
            "no default guest kernel in {} (scripts/guest.sh fetches it)",
            guest_dir().display()
        );
    }
}

/// QEMU processes booting a pmlab guest (their initramfs is in a `pmlab-boot-` directory).
fn guest_qemus() -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd);
        if cmd.contains("qemu-system") && cmd.contains("pmlab-boot-") {
            v.push(pid);
        }
    }
    v
}

fn work_dirs() -> Vec<PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("pmlab-boot-"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

fn wait_until(what: &str, limit: Duration, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn side(row: &Value, name: &str) -> Option<f64> {
    row["side"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name && c["cpu"].is_null())?["summary"]["mean"]
        .as_f64()
}

it_test!(boot_a_2_vcpu_guest_brings_its_trace_back_and_a_panic_is_a_failed_boot);
fn boot_a_2_vcpu_guest_brings_its_trace_back_and_a_panic_is_a_failed_boot() {
    need_guest();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let dirs_before = work_dirs().len();
    // The host's kvm events are recorded too where the kvm module has them (VM exits: 0
    // under TCG; QEMU's threads found from their forks).
    let host = Path::new("/sys/kernel/tracing/events/kvm/kvm_exit").exists();
    let out = pmlab()
        .args(["boot", "--vcpus", "2", "--a", "", "--b", "rdinit=/nope"])
        .args(["--kvm-exits", if host { "on" } else { "off" }])
        .args([
            "--max-runs",
            "2",
            "--format",
            "json",
            "--side",
            "all",
            "-q",
            "--db",
        ])
        .arg(&db)
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["workloads"][0]["rows"].as_array().unwrap().clone();
    let (a, b) = (&rows[0], &rows[1]);
    assert_eq!(a["label"], "(default cmdline)");
    assert_eq!(b["label"], "rdinit=/nope");
    // A booted: bring-up from its trace, the secondary CPU online, steps account for it.
    assert_eq!(a["failed"], 0, "{a}");
    let bringup = a["primary"]["mean"].as_f64().unwrap();
    assert!(bringup > 0.0);
    assert_eq!(side(a, "boot.secondaries_online"), Some(1.0), "{a}");
    assert!(side(a, "boot.steps_covered_pct").unwrap() >= 90.0, "{a}");
    // The bring-up is the kernel's own (its two log lines, timed in the trace): the steps'
    // window plus what comes before and after; and the log's stamps agree with it.
    let log = side(a, "boot.log_bringup_ms").unwrap();
    let (hotplug, lead, tail) = (
        side(a, "boot.hotplug_ms").unwrap(),
        side(a, "boot.lead_ms").unwrap(),
        side(a, "boot.tail_ms").unwrap(),
    );
    assert!(lead >= 0.0 && tail >= 0.0, "lead {lead} tail {tail}");
    assert!(
        (lead + hotplug + tail - bringup).abs() < 0.01,
        "{lead} + {hotplug} + {tail} vs {bringup}"
    );
    assert!(
        (bringup / log - 1.0).abs() < 0.05,
        "trace {bringup} ms vs the log's {log} ms"
    );
    // B panicked: a failed run with the panic line, no verdict.
    assert_eq!(b["failed"], 1, "{b}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("Kernel panic - not syncing"), "{notes}");
    assert!(notes.contains("TCG") || notes.contains("KVM"), "{notes}");
    // The trace decodes.
    let traces: Vec<PathBuf> = std::fs::read_dir(dir.path().join("b.db.traces/experiment-1"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let guest: Vec<&PathBuf> = traces
        .iter()
        .filter(|p| !p.to_string_lossy().ends_with("-host.dat"))
        .collect();
    assert_eq!(guest.len(), 1, "{traces:?}");
    let info = crate::util::stdout_of(pmlab().args(["trace", "info"]).arg(guest[0]));
    assert!(info.contains("cpuhp_enter"), "{info}");
    if host {
        // One host trace, of the boot that completed; QEMU's main thread and a thread per
        // vCPU at least; no exits under TCG, and no tracefs instance left.
        assert_eq!(traces.len(), 2, "{traces:?}");
        assert!(side(a, "boot.qemu_threads").unwrap() >= 3.0, "{a}");
        assert_eq!(side(a, "kvm.exits"), Some(0.0), "{a}");
        let info = crate::util::stdout_of(
            pmlab().args(["trace", "info"]).arg(
                traces
                    .iter()
                    .find(|p| p.to_string_lossy().ends_with("-host.dat"))
                    .unwrap(),
            ),
        );
        assert!(info.contains("sched_process_fork"), "{info}");
        let instances: Vec<_> = std::fs::read_dir("/sys/kernel/tracing/instances")
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().starts_with("pmlab"))
            .collect();
        assert!(instances.is_empty(), "{instances:?}");
    } else {
        skip_part!("the host's kvm events: this kernel has no kvm:kvm_exit tracepoint");
    }
    // Nothing left behind.
    assert!(guest_qemus().is_empty());
    assert_eq!(work_dirs().len(), dirs_before, "{:?}", work_dirs());
}

fn start_boot(db: &Path) -> std::process::Child {
    Command::new(assert_cmd::cargo::cargo_bin("pmlab"))
        .args(["boot", "--vcpus", "2", "--max-runs", "6", "-q", "--db"])
        .arg(db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

it_test!(boot_leaves_no_qemu_after_ctrl_c_or_sigkill);
fn boot_leaves_no_qemu_after_ctrl_c_or_sigkill() {
    need_guest();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    assert!(guest_qemus().is_empty(), "a guest QEMU is already running");
    // Ctrl-C: the boot is cancelled, QEMU killed, the experiment kept as interrupted.
    let child = start_boot(&db);
    wait_until("a guest QEMU", Duration::from_secs(60), || {
        !guest_qemus().is_empty()
    });
    crate::util::kill(child.id() as i32, libc::SIGINT);
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(guest_qemus().is_empty(), "QEMU left after Ctrl-C");
    // SIGKILL: QEMU dies with pmlab (PR_SET_PDEATHSIG); the next boot sweeps the work dir.
    let mut child = start_boot(&db);
    wait_until("a guest QEMU", Duration::from_secs(60), || {
        !guest_qemus().is_empty()
    });
    let pid = child.id();
    crate::util::kill(pid as i32, libc::SIGKILL);
    let _ = child.wait();
    wait_until("QEMU gone after SIGKILL", Duration::from_secs(5), || {
        guest_qemus().is_empty()
    });
    let mine = |d: &PathBuf| {
        d.file_name().is_some_and(|n| {
            n.to_string_lossy()
                .starts_with(&format!("pmlab-boot-{pid}-"))
        })
    };
    assert!(
        work_dirs().iter().any(mine),
        "the killed session's work dir"
    );
    let out = pmlab()
        .args(["boot", "--vcpus", "100000", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        !work_dirs().iter().any(mine),
        "not swept: {:?}",
        work_dirs()
    );
}

/// A file with an x86 bzImage setup header: a kernel as far as the checks before QEMU go.
fn fake_bzimage(dir: &Path) -> PathBuf {
    let p = dir.join("bzImage");
    let mut b = vec![0u8; 0x1000];
    b[0x202..0x206].copy_from_slice(b"HdrS");
    std::fs::write(&p, &b).unwrap();
    p
}

fn refused(args: &[&str], env_path: Option<&str>, dir: &Path, says: &str) {
    let db = dir.join("refused.db");
    let mut c = pmlab();
    c.arg("boot").args(args).arg("--db").arg(&db);
    if let Some(p) = env_path {
        c.env("PATH", p);
    }
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} was accepted");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
    assert!(!db.exists(), "{args:?} created the store");
    assert!(guest_qemus().is_empty());
}

it_test!(boot_refuses_bad_input_before_anything_runs);
fn boot_refuses_bad_input_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a kernel\n").unwrap();
    let t = text.to_str().unwrap();
    refused(&["--kernel", t], None, dir.path(), "is not a kernel");
    let bz = fake_bzimage(dir.path());
    let bz = bz.to_str().unwrap();
    refused(
        &["--kernel", bz],
        Some("/nonexistent"),
        dir.path(),
        "QEMU (qemu-system-x86_64) for x86_64 guests not found",
    );
    refused(
        &["--kernel", bz, "--memory", "12M"],
        None,
        dir.path(),
        "too small",
    );
    refused(
        &["--kernel", bz, "--vcpus", "0"],
        None,
        dir.path(),
        "not a vCPU count",
    );
    refused(
        &["--kernel", bz, "--kernel-a", bz],
        None,
        dir.path(),
        "either --kernel or --kernel-a/--kernel-b",
    );
    if std::fs::metadata("/usr/bin/qemu-system-x86_64").is_err() {
        skip_part!("qemu-system-x86_64 missing: the vCPU limit needs QEMU's machine list");
        return;
    }
    refused(
        &["--kernel", bz, "--vcpus", "2,300"],
        None,
        dir.path(),
        "300 vCPUs is over QEMU's limit for machine `pc` (255)",
    );
}
