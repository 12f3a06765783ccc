//! Integration tests for `pmlab dump`'s formatted view against `trace-cmd report` (the
//! formatted view, not `-R`), line by line: every fixture as found (v6) and converted to
//! v7 zstd; the flags (`-R`, `-t`, `--cpu`, `-e`) against trace-cmd's own; bad flags; and
//! fresh recordings of this machine (root, tracefs): pipe with the default event set,
//! a hotplug cycle, 3 s idle, `sched_waking` with `--stacktrace`, and the function and
//! function_graph tracers where the kernel lets them run.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::record::machine;
use crate::trace::{convert_v7, fixture_dats, has_trace_cmd, normalized};
use crate::util::{is_root, pmlab, Cpu1Online};

/// Line kinds (event names) where pmlab's line may differ from trace-cmd's. None today:
/// every line of every file here is equal. A kind listed here must say why in README.
const MAY_DIFFER: &[&str] = &[];

/// The event name of a report line (`comm-pid [cpu] ts: NAME: ...`), or the whole line.
fn kind(line: &str) -> &str {
    line.split(": ")
        .nth(1)
        .filter(|_| line.contains("] "))
        .unwrap_or(line)
}

/// `pmlab dump ARGS FILE` against `trace-cmd report TC_ARGS -i FILE`, line by line with
/// whitespace runs collapsed. Lines of the kinds in MAY_DIFFER may differ; nothing else.
/// Returns the number of lines.
fn assert_formatted(file: &Path, ours_args: &[&str], theirs_args: &[&str]) -> usize {
    let ours = pmlab()
        .arg("dump")
        .args(ours_args)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        ours.status.success(),
        "pmlab dump {ours_args:?} {}: {}",
        file.display(),
        String::from_utf8_lossy(&ours.stderr)
    );
    let theirs = Command::new("trace-cmd")
        .arg("report")
        .args(theirs_args)
        .arg("-i")
        .arg(file)
        .output()
        .expect("running trace-cmd report");
    assert!(theirs.status.success(), "trace-cmd report failed");
    let (a, b) = (normalized(&ours.stdout), normalized(&theirs.stdout));
    assert_eq!(
        a.len(),
        b.len(),
        "{} {ours_args:?}: pmlab printed {} lines, trace-cmd {}",
        file.display(),
        a.len(),
        b.len()
    );
    let mut differ = 0;
    for (n, (x, y)) in a.iter().zip(b.iter()).enumerate() {
        if x != y {
            assert!(
                MAY_DIFFER.contains(&kind(y)),
                "{} {ours_args:?}: line {} differs (pmlab first, trace-cmd second)\n{x}\n{y}",
                file.display(),
                n + 1
            );
            differ += 1;
        }
    }
    if differ > 0 {
        eprintln!("{}: {differ} lines of known kinds differ", file.display());
    }
    a.len()
}

/// The formatted view, then the flags, of one file.
fn check(file: &Path) -> usize {
    let n = assert_formatted(file, &[], &[]);
    assert!(n > 1, "{}: no events", file.display());
    n
}

#[test]
fn formatted_dump_equals_trace_cmd_report_on_every_fixture_v6_and_v7() {
    assert!(has_trace_cmd(), "trace-cmd is needed for the oracle test");
    let tmp = tempfile::tempdir().unwrap();
    for f in fixture_dats() {
        let n = check(&f);
        let v7 = tmp.path().join(f.file_name().unwrap());
        let v7 = convert_v7(&f, "zstd", &v7).expect("trace-cmd convert to v7 zstd");
        assert_eq!(check(&v7), n, "{}: v7 differs from v6", f.display());
    }
}

#[test]
fn flags_print_what_trace_cmds_flags_print() {
    assert!(has_trace_cmd(), "trace-cmd is needed for the oracle test");
    for name in [
        "haltpoll_pipe_200us.dat",
        "lisa_rtapp.dat",
        "trappy_trace.dat",
    ] {
        let f = crate::util::fixtures().join(name);
        assert_formatted(&f, &["-R"], &["-R"]);
        assert_formatted(&f, &["-t"], &["-t"]);
        assert_formatted(&f, &["-R", "-t"], &["-R", "-t"]);
        assert_formatted(&f, &["--cpu", "1"], &["--cpu", "1"]);
        assert_formatted(&f, &["--cpu", "0,2-3"], &["--cpu", "0,2-3"]);
    }
    let f = crate::util::fixtures().join("haltpoll_pipe_off.dat");
    let n = assert_formatted(
        &f,
        &["-e", "sched_switch", "-e", "power:cpu_idle"],
        &["-F", "sched_switch,cpu_idle"],
    );
    let all = assert_formatted(&f, &[], &[]);
    assert!(1 < n && n < all, "-e selected {n} of {all} lines");
}

#[test]
fn bad_flags_fail_clearly_and_print_nothing() {
    let f = crate::util::fixtures().join("trappy_idle.dat");
    let out = pmlab()
        .args(["dump", "-e", "nosuch"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "printed before failing");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no event \"nosuch\"") && err.contains("sched:sched_switch"),
        "{err}"
    );
    for bad in ["x", "1-", "3-1"] {
        let out = pmlab()
            .args(["dump", "--cpu", bad])
            .arg(&f)
            .output()
            .unwrap();
        assert!(!out.status.success(), "--cpu {bad} accepted");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--cpu"), "--cpu {bad}: {err}");
    }
    let out = pmlab()
        .args(["dump", "--json", "-R"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(!out.status.success(), "--json with -R accepted");
}

// ---------------------------------------------------------------------------
// Fresh recordings of this machine.

/// Why this machine cannot record, if it cannot.
fn cannot_record() -> Option<&'static str> {
    if !is_root() {
        return Some("not root");
    }
    if !has_trace_cmd() {
        return Some("no trace-cmd");
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let tracefs = mounts.lines().any(|l| l.contains(" tracefs "))
        || Path::new("/sys/kernel/tracing").is_dir();
    (!tracefs).then_some("no tracefs")
}

/// `pmlab record ARGS -o FILE`: Ok(file), or Err(stderr) when pmlab refused or failed.
fn record(dir: &Path, name: &str, args: &[&str]) -> Result<PathBuf, String> {
    let file = dir.join(name);
    let out = pmlab()
        .args(["record", "-o"])
        .arg(&file)
        .args(args)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(file)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn live(name: &str, args: &[&str]) {
    if let Some(why) = cannot_record() {
        eprintln!("skipped: {why}");
        return;
    }
    let _m = machine();
    let tmp = tempfile::tempdir().unwrap();
    let file = record(tmp.path(), name, args).unwrap_or_else(|e| panic!("{name}: {e}"));
    check(&file);
}

#[test]
fn live_pipe_with_the_default_events() {
    let bin = assert_cmd::cargo::cargo_bin("pmlab");
    live(
        "pipe.dat",
        &[
            "--",
            bin.to_str().unwrap(),
            "run",
            "pipe",
            "--loops",
            "5000",
        ],
    );
}

#[test]
fn live_hotplug_cycle() {
    let _cpu1 = Cpu1Online;
    let online = "/sys/devices/system/cpu/cpu1/online";
    if is_root() && !Path::new(online).exists() {
        eprintln!("skipped: cpu1 is not hot-pluggable");
        return;
    }
    let cmd = format!("echo 0 > {online}; echo 1 > {online}");
    live("hotplug.dat", &["--", "sh", "-c", &cmd]);
}

#[test]
fn live_three_seconds_idle() {
    live("idle.dat", &["--duration", "3s"]);
}

#[test]
fn live_sched_waking_with_stacktrace() {
    live(
        "stack.dat",
        &[
            "-e",
            "sched:sched_waking",
            "--stacktrace",
            "--",
            "sleep",
            "0.2",
        ],
    );
}

/// A tracer over a short command, where the kernel has it and lets it run (this guest's
/// kernel refuses the function tracer with EPERM and has no function_graph).
fn live_tracer(tracer: &str) {
    if let Some(why) = cannot_record() {
        eprintln!("skipped: {why}");
        return;
    }
    let _m = machine();
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--tracer",
        tracer,
        "-e",
        "sched:sched_switch",
        "--buffer-kb",
        "8192",
        "--",
        "sleep",
        "0.01",
    ];
    match record(tmp.path(), &format!("{tracer}.dat"), &args) {
        Ok(file) => {
            check(&file);
        }
        Err(e) if e.contains("not available") || e.contains("Operation not permitted") => {
            eprintln!("skipped: {tracer} tracer: {}", e.trim());
        }
        Err(e) => panic!("record --tracer {tracer}: {e}"),
    }
}

#[test]
fn live_function_tracer() {
    live_tracer("function");
}

#[test]
fn live_function_graph_tracer() {
    live_tracer("function_graph");
}

#[test]
fn an_unknown_tracer_is_refused_before_anything_changes() {
    if let Some(why) = cannot_record() {
        eprintln!("skipped: {why}");
        return;
    }
    let _m = machine();
    let tmp = tempfile::tempdir().unwrap();
    let before = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| d.count())
        .unwrap_or(0);
    let err = record(tmp.path(), "x.dat", &["--tracer", "nosuch", "--", "true"])
        .expect_err("an unknown tracer was accepted");
    assert!(
        err.contains("tracer \"nosuch\" is not available") && err.contains("nop"),
        "{err}"
    );
    let after = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(before, after, "an instance was left behind");
    assert!(!tmp.path().join("x.dat").exists());
}
