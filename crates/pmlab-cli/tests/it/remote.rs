//! Integration tests for `-H/--host` against a real sshd on 127.0.0.1 (tests/it/sshd.rs):
//! `info --json` equal to the local one, `knob set`/`knob restore` round trip on the
//! target, the binary pushed once then reused, and each refusal (unknown host, refused
//! connection, key not accepted, no root, another architecture) clear and changing
//! nothing on the target. Run under `flock /tmp/pmlab-live.lock` (a knob is set).

use crate::sshd::{Options, Sshd};
use crate::util::{pmlab, stdout_of};
use std::path::Path;
use std::process::Command;

/// A refusal: exit 1 and `pmlab: error:` with `want` in it.
fn refused(c: &mut assert_cmd::Command, want: &str) -> String {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("pmlab: error: ") && err.contains(want),
        "{err}"
    );
    err
}

/// Listening TCP sockets on `port` from /proc/net/tcp{,6}: (local address hex, port).
fn listeners(port: u16) -> Vec<String> {
    let mut v = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (local, state) = (cols[1], cols[3]);
            let (addr, p) = local.rsplit_once(':').unwrap();
            if state == "0A" && u16::from_str_radix(p, 16).unwrap() == port {
                v.push(addr.to_string());
            }
        }
    }
    v
}

/// Drop the fields that change from one read to the next (idle and energy counters).
fn steady(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for k in [
                "usage",
                "time_us",
                "above",
                "below",
                "rejected",
                "energy_uj",
            ] {
                m.remove(k);
            }
            m.values_mut().for_each(steady);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(steady),
        _ => {}
    }
}

it_test!(sshd_listens_on_loopback_only);
fn sshd_listens_on_loopback_only() {
    let sshd = Sshd::start(Options::default());
    // 127.0.0.1 in /proc/net/tcp's little-endian hex; nothing on tcp6 or 0.0.0.0.
    assert_eq!(listeners(sshd.port), vec!["0100007F".to_string()]);
}

it_test!(info_json_equals_local_and_the_binary_is_reused);
fn info_json_equals_local_and_the_binary_is_reused() {
    let sshd = Sshd::start(Options::default());
    let remote = stdout_of(sshd.pmlab().args(["info", "--json"]));
    let pushed = sshd.pushed();
    assert_eq!(pushed.len(), 1, "{pushed:?}");
    let bin = pushed[0].join("pmlab");
    let ino = std::fs::metadata(&bin).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    let local = stdout_of(pmlab().args(["info", "--json"]));
    let (mut r, mut l): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&remote).unwrap(),
        serde_json::from_str(&local).unwrap(),
    );
    steady(&mut r);
    steady(&mut l);
    // No field names the connection: the whole document is equal.
    assert_eq!(r, l);
    assert_eq!(r["is_root"], true);
    // The pushed file is this pmlab, byte for byte.
    let me = assert_cmd::cargo::cargo_bin("pmlab");
    assert!(std::fs::read(&bin).unwrap() == std::fs::read(&me).unwrap());
    // A second command reuses it: same file, nothing new.
    let again = stdout_of(sshd.pmlab().args(["info", "--json"]));
    assert!(again.contains("\"capabilities\""));
    assert_eq!(sshd.pushed(), pushed);
    let ino2 = std::fs::metadata(&bin).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    assert_eq!(ino.unwrap(), ino2.unwrap());
    // Remote errors come home with their exit code.
    let err = refused(
        sshd.pmlab().args(["knob", "get", "no.such.knob"]),
        "no.such",
    );
    assert!(!err.contains("preparing the remote target"), "{err}");
}

const POLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/// Restores the target's knobs through pmlab itself if a test stops half-way.
struct RestoreOnDrop<'a>(&'a Path);

impl Drop for RestoreOnDrop<'_> {
    fn drop(&mut self) {
        let _ = pmlab()
            .env("PMLAB_STATE_DIR", self.0)
            .args(["knob", "restore"])
            .output();
    }
}

it_test!(knob_set_then_restore_round_trips_on_the_target);
fn knob_set_then_restore_round_trips_on_the_target() {
    let sshd = Sshd::start(Options::default());
    let Ok(before) = std::fs::read_to_string(POLL_NS) else {
        skip!("no {POLL_NS} here");
    };
    let _guard = RestoreOnDrop(&sshd.state_dir);
    let want = if before.trim() == "123000" {
        "77us"
    } else {
        "123us"
    };
    let want_ns = if want == "77us" { "77000" } else { "123000" };
    stdout_of(
        sshd.pmlab()
            .args(["knob", "set"])
            .arg(format!("haltpoll.guest_halt_poll_ns={want}")),
    );
    assert_eq!(std::fs::read_to_string(POLL_NS).unwrap().trim(), want_ns);
    // The target's journal (its PMLAB_STATE_DIR) holds the original value.
    assert!(std::fs::read_dir(&sshd.state_dir).unwrap().count() > 0);
    let got =
        stdout_of(
            sshd.pmlab()
                .args(["knob", "get", "haltpoll.guest_halt_poll_ns", "--json"]),
        );
    assert!(got.contains(want_ns), "{got}");
    stdout_of(sshd.pmlab().args(["knob", "restore"]));
    assert_eq!(std::fs::read_to_string(POLL_NS).unwrap(), before);
}

it_test!(unknown_host_and_refused_connection_are_refused_clearly);
fn unknown_host_and_refused_connection_are_refused_clearly() {
    refused(
        pmlab().args(["-H", "nosuch.invalid", "info"]),
        "nosuch.invalid: unknown host",
    );
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    refused(
        pmlab().args(["-H", &format!("127.0.0.1:{port}"), "info"]),
        "connection refused",
    );
    refused(
        pmlab().args(["--host=-oProxyCommand=x", "info"]),
        "not a host name",
    );
    refused(
        pmlab().args(["-H", "h", "dump", "x"]),
        "does not run on a remote target",
    );
}

it_test!(a_key_not_accepted_is_refused_without_a_prompt);
fn a_key_not_accepted_is_refused_without_a_prompt() {
    let sshd = Sshd::start(Options::default());
    let other = sshd.dir.path().join("other_key");
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .status()
        .unwrap();
    assert!(ok.success());
    let err = refused(
        sshd.pmlab_with("root", &other).arg("info"),
        "key not accepted for user root",
    );
    assert!(err.contains("Permission denied (publickey)"), "{err}");
    assert!(sshd.pushed().is_empty(), "{:?}", sshd.pushed());
    // An unknown host key is refused too (never accepted blindly).
    let out = pmlab()
        .env("PMLAB_SSH_CONFIG", "/dev/null")
        .args(["-H", &sshd.host(), "-U", "root", "-K"])
        .arg(&sshd.key)
        .arg("info")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("host key is unknown or changed"), "{err}");
    assert!(sshd.pushed().is_empty());
}

/// A login user made for the test (no sudo rights), removed at the end.
struct TestUser(&'static str);

impl TestUser {
    fn create(name: &'static str) -> Option<TestUser> {
        let _ = Command::new("userdel").arg(name).output();
        // `-p '*'`: no password, but not a locked account (sshd refuses locked ones).
        let ok = Command::new("useradd")
            .args(["-M", "-d", "/nonexistent", "-s", "/bin/sh", "-p", "*", name])
            .status()
            .ok()?
            .success();
        ok.then_some(TestUser(name))
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(self.0).output();
    }
}

it_test!(a_user_without_root_or_passwordless_sudo_is_refused);
fn a_user_without_root_or_passwordless_sudo_is_refused() {
    let sshd = Sshd::start(Options::default());
    let Some(user) = TestUser::create("pmlabnoroot") else {
        skip!("useradd failed");
    };
    let err = refused(
        sshd.pmlab_as(user.0).arg("info"),
        "user pmlabnoroot is neither root nor allowed passwordless sudo",
    );
    assert!(err.contains("sudo"), "{err}");
    assert!(sshd.pushed().is_empty(), "{:?}", sshd.pushed());
}

it_test!(a_target_of_another_architecture_is_refused_before_pushing);
fn a_target_of_another_architecture_is_refused_before_pushing() {
    // The target's `uname -m` says aarch64 (a fake first on the sessions' PATH).
    let fake = tempfile::tempdir().unwrap();
    let uname = fake.path().join("uname");
    std::fs::write(&uname, "#!/bin/sh\necho aarch64\n").unwrap();
    std::fs::set_permissions(&uname, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let sshd = Sshd::start(Options {
        path_first: Some(fake.path().to_path_buf()),
    });
    let local =
        String::from_utf8(Command::new("uname").arg("-m").output().unwrap().stdout).unwrap();
    refused(
        sshd.pmlab().arg("info"),
        &format!(
            "target architecture aarch64 differs from this pmlab's {}",
            local.trim()
        ),
    );
    assert!(sshd.pushed().is_empty(), "{:?}", sshd.pushed());
}

it_test!(run_on_the_target_reports_the_same_metrics_as_here);
fn run_on_the_target_reports_the_same_metrics_as_here() {
    let sshd = Sshd::start(Options::default());
    let names = |out: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(out).unwrap();
        let mut n: Vec<String> = v["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    let args = ["run", "--json", "idle", "--duration", "1s"];
    let there = stdout_of(sshd.pmlab().args(args));
    let here = stdout_of(pmlab().args(args));
    assert_eq!(names(&there), names(&here));
}

const RCU: &str = "/sys/kernel/rcu_expedited";

/// Start `-H ... compare` with both configurations at rcu.expedited=FLIPPED on 60 s idle
/// runs (in its own process group) and return once the knob reads flipped on the target;
/// (child, value found).
fn remote_compare_holding_rcu(sshd: &Sshd) -> (std::process::Child, String) {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let Ok(before) = std::fs::read_to_string(RCU) else {
        skip!("no {RCU} here");
    };
    let flipped = if before.trim() == "0" { "1" } else { "0" };
    let child = sshd
        .command()
        .arg("compare")
        .arg("--db")
        .arg(sshd.dir.path().join("local.db"))
        .args(["--a", &format!("rcu.expedited={flipped}")])
        .args(["--b", &format!("rcu.expedited={flipped}")])
        .args(["idle", "--duration", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while std::fs::read_to_string(RCU).unwrap().trim() != flipped {
        assert!(t0.elapsed() < Duration::from_secs(20), "knob never set");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, before)
}

it_test!(lost_connection_restores_the_targets_knobs_by_itself);
/// The connection drops (the local pmlab and its ssh client are SIGKILLed) while a remote
/// run holds a knob: the remote pmlab reads EOF, stops as on SIGHUP and restores the knob
/// with no further command.
fn lost_connection_restores_the_targets_knobs_by_itself() {
    use std::time::{Duration, Instant};
    let sshd = Sshd::start(Options::default());
    let _guard = RestoreOnDrop(&sshd.state_dir);
    let (mut local, before) = remote_compare_holding_rcu(&sshd);
    // The local pmlab and its ssh client: the whole process group.
    assert_eq!(crate::util::kill(-(local.id() as i32), libc::SIGKILL), 0);
    let _ = local.wait();
    let t1 = Instant::now();
    while std::fs::read_to_string(RCU).unwrap() != before {
        assert!(
            t1.elapsed() < Duration::from_secs(10),
            "rcu_expedited not restored on the target 10 s after the connection dropped"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "restored {:.2} s after the connection dropped",
        t1.elapsed().as_secs_f64()
    );
}

it_test!(next_command_repairs_a_killed_remote_pmlabs_journal);
/// The remote pmlab is SIGKILLed while it holds a knob: nothing can restore it then, and the
/// next `-H` command (even `info`) restores the dead process's journal first and says so.
fn next_command_repairs_a_killed_remote_pmlabs_journal() {
    let sshd = Sshd::start(Options::default());
    let _guard = RestoreOnDrop(&sshd.state_dir);
    let (mut local, before) = remote_compare_holding_rcu(&sshd);
    let flipped = std::fs::read_to_string(RCU).unwrap();
    // The pmlab running from the target's push directory.
    let remote: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let exe = std::fs::read_link(e.path().join("exe")).ok()?;
            exe.starts_with(&sshd.remote_tmp).then_some(pid)
        })
        .collect();
    assert_eq!(remote.len(), 1, "one remote pmlab: {remote:?}");
    assert_eq!(crate::util::kill(remote[0], libc::SIGKILL), 0);
    let _ = local.wait();
    assert_eq!(std::fs::read_to_string(RCU).unwrap(), flipped, "left set");
    let out = sshd.pmlab().args(["info", "--json"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(std::fs::read_to_string(RCU).unwrap(), before, "{err}");
    assert!(err.contains("rcu.expedited"), "the repair is said: {err}");
}

/// `results list --json` of a local store.
fn stored(db: &Path) -> Vec<serde_json::Value> {
    let out = stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(db)
            .args(["list", "--json"]),
    );
    serde_json::from_str(&out).unwrap()
}

it_test!(compare_on_the_target_stores_its_runs_and_traces_here);
/// `-H ... compare --trace` stores its runs in the local store, with the target's identity
/// and its traces beside the local store; a second experiment lands beside the first.
fn compare_on_the_target_stores_its_runs_and_traces_here() {
    let sshd = Sshd::start(Options::default());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("local.db");
    let args = |c: &mut assert_cmd::Command| {
        c.arg("compare")
            .arg("--db")
            .arg(&db)
            .args([
                "--a",
                "",
                "--b",
                "",
                "--max-runs",
                "6",
                "--trace",
                "--format",
                "json",
            ])
            .args(["idle", "--duration", "2s"]);
    };
    let mut c = sshd.pmlab();
    args(&mut c);
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("experiment 1 is experiment 1 in"), "{err}");
    let list = stored(&db);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["runs"], 6);
    let e: serde_json::Value = serde_json::from_str(&stdout_of(
        pmlab()
            .args(["results", "--db"])
            .arg(&db)
            .args(["export", "1", "--format", "json"]),
    ))
    .unwrap();
    let sys = &e["system"];
    let file = |p: &str| std::fs::read_to_string(p).unwrap().trim().to_string();
    assert_eq!(sys["hostname"], file("/proc/sys/kernel/hostname"));
    assert_eq!(sys["boot_id"], file("/proc/sys/kernel/random/boot_id"));
    assert_eq!(sys["kernel_build"], file("/proc/sys/kernel/version"));
    assert_eq!(sys["pmlab_version"], env!("CARGO_PKG_VERSION"));
    let traces: Vec<&str> = e["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["trace_path"].as_str())
        .collect();
    assert!(traces.len() >= 6, "{traces:?}");
    for t in &traces {
        let p = Path::new(t);
        assert!(
            p.starts_with(dir.path().join("local.db.traces/experiment-1")),
            "{t}"
        );
        assert!(std::fs::metadata(p).unwrap().len() > 4096, "{t}");
    }
    // Nothing is left in the target's work directories.
    let left: Vec<_> = sshd
        .pushed()
        .iter()
        .flat_map(|d| {
            std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name())
        })
        .filter(|n| n.to_string_lossy().starts_with("run."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The stored traces analyse here.
    stdout_of(pmlab().arg("analyze").arg(traces[0]));
}

it_test!(record_on_the_target_brings_the_trace_back);
/// `-H ... record` brings the trace back to -o; it reads the same with `pmlab dump` as with
/// `trace-cmd report` (the target is this machine, so its trace-cmd is the target's).
fn record_on_the_target_brings_the_trace_back() {
    let sshd = Sshd::start(Options::default());
    crate::util::need_program("trace-cmd", "scripts/setup.sh installs it");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("remote.dat");
    let out = sshd
        .pmlab()
        .args(["record", "-o"])
        .arg(&file)
        .args(["--duration", "1s", "-e", "sched", "-e", "irq"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = crate::trace::assert_dump_matches_trace_cmd(&file);
    assert!(n > 0);
}

it_test!(run_spec_on_the_target_takes_the_local_spec);
/// `-H ... run-spec FILE`: the local spec file goes to the target; a missing one is refused
/// before anything runs there.
fn run_spec_on_the_target_takes_the_local_spec() {
    let sshd = Sshd::start(Options::default());
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("s.toml");
    std::fs::write(
        &spec,
        "name = \"remote-spec\"\n[[configuration]]\nlabel = \"found\"\n[[configuration]]\nlabel = \"again\"\n\
         [[workload]]\nrun = \"idle --duration 500ms\"\n",
    )
    .unwrap();
    let db = dir.path().join("r.db");
    stdout_of(
        sshd.pmlab()
            .arg("run-spec")
            .arg(&spec)
            .arg("--db")
            .arg(&db)
            .args(["--max-runs", "6"]),
    );
    let list = stored(&db);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "remote-spec");
    refused(
        sshd.pmlab()
            .arg("run-spec")
            .arg(dir.path().join("missing.toml"))
            .arg("--db")
            .arg(&db),
        "missing.toml",
    );
    assert_eq!(stored(&db).len(), 1);
}

it_test!(study_and_hotplug_on_the_target_come_back_here);
/// `-H ... study --out DIR` and `-H ... hotplug`: the study's report directory lands at the
/// local --out and both commands' experiments in the local store, the CPU back online.
fn study_and_hotplug_on_the_target_come_back_here() {
    let sshd = Sshd::start(Options::default());
    let online = "/sys/devices/system/cpu/cpu1/online";
    if !Path::new(online).exists() {
        skip!("cpu1 is not hot-pluggable here");
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = dir.path().join("box-study");
    let err = String::from_utf8(
        sshd.pmlab()
            .args(["study", "--quick", "--only", "idle", "-q", "--db"])
            .arg(&db)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
            .stderr,
    )
    .unwrap();
    assert!(out.join("report.html").is_file(), "{err}");
    assert!(
        err.contains(&format!("brought back {}", out.display())),
        "{err}"
    );
    stdout_of(
        sshd.pmlab()
            .args([
                "hotplug",
                "--cpus",
                "1",
                "--cycles",
                "2",
                "--no-trace",
                "--db",
            ])
            .arg(&db),
    );
    let names: Vec<String> = stored(&db)
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("study: idle")),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n.starts_with("hotplug")), "{names:?}");
    assert_eq!(std::fs::read_to_string(online).unwrap().trim(), "1");
}
