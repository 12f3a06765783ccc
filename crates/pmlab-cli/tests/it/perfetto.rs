//! `pmlab export --perfetto`: the export of every fixture and of a fresh pipe recording
//! decodes with the `perfetto` PyPI package's protobuf classes (tests/perfetto_check.py):
//! per-CPU and per-event counts equal `pmlab trace info`'s, timestamps ordered per CPU,
//! sched_switch fields equal `pmlab dump`'s; bad input leaves no output file.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{fixtures, need_root, pmlab};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared fixtures beside the repository (`../shared/fixtures` of a clone, or of the
/// parent of a worktree directory), or `$PMLAB_SHARED_FIXTURES`.
fn shared_fixtures() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("PMLAB_SHARED_FIXTURES") {
        return Some(PathBuf::from(p));
    }
    let r = repo().canonicalize().ok()?;
    [
        r.join("../shared/fixtures"),
        r.join("../../shared/fixtures"),
    ]
    .into_iter()
    .find(|p| p.is_dir())
}

/// Exports `trace` and runs the checker on it; returns the checker's summary line.
fn export_and_check(trace: &Path, extra: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.pftrace");
    pmlab()
        .args(["export", "--perfetto"])
        .arg(&out)
        .arg(trace)
        .assert()
        .success();
    crate::util::need_python(
        &["perfetto.protos.perfetto.trace.perfetto_trace_pb2"],
        "scripts/setup.sh installs perfetto",
    );
    let check = Command::new("python3")
        .arg(repo().join("tests/perfetto_check.py"))
        .arg(assert_cmd::cargo::cargo_bin("pmlab"))
        .arg(trace)
        .arg(&out)
        .args(extra)
        .output()
        .expect("python3");
    assert!(
        check.status.success(),
        "{}: {}{}",
        trace.display(),
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    String::from_utf8_lossy(&check.stdout).trim().to_string()
}

it_test!(
    perfetto_export_of_every_fixture_decodes_and_matches,
    fixture
);
fn perfetto_export_of_every_fixture_decodes_and_matches() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [Some(fixtures()), shared_fixtures()].into_iter().flatten() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_owned();
            if p.extension().is_some_and(|x| x == "dat")
                && !files.iter().any(|f| f.file_name() == Some(&name))
            {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 4, "fixtures: {files:?}");
    for f in &files {
        eprintln!("{}: {}", f.display(), export_and_check(f, &[]));
    }
    if shared_fixtures().is_none() {
        skip_part!("the shared fixtures (haltpoll_pipe_*.dat) are not beside the repo");
    }
}

it_test!(perfetto_export_of_a_pipe_recording_groups_threads_and_names_the_kernel);
fn perfetto_export_of_a_pipe_recording_groups_threads_and_names_the_kernel() {
    need_root("recording needs root (the project's machines run tests as root)");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("pipe.dat");
    let bin = assert_cmd::cargo::cargo_bin("pmlab");
    // Two threads: task_newtask (CLONE_THREAD) puts the second under the first's process.
    pmlab()
        .args(["record", "-e", "sched", "-e", "power", "-e", "task", "-o"])
        .arg(&file)
        .arg("--")
        .arg(&bin)
        .args(["run", "pipe", "--threads", "--loops", "20000"])
        .assert()
        .success();
    let release = String::from_utf8(Command::new("uname").arg("-r").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let line = export_and_check(&file, &["--release", &release, "--grouped"]);
    eprintln!("{line}");
}

it_test!(perfetto_export_of_bad_input_fails_and_writes_nothing);
fn perfetto_export_of_bad_input_fails_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.pftrace");
    // A missing trace.
    pmlab()
        .args(["export", "--perfetto"])
        .arg(&out)
        .arg(tmp.path().join("missing.dat"))
        .assert()
        .failure()
        .stderr(predicates::str::contains("missing.dat"));
    // A truncated trace: every cut of a fixture's headers and first pages.
    let whole = std::fs::read(fixtures().join("trappy_idle.dat")).unwrap();
    let cut = tmp.path().join("cut.dat");
    for len in [0, 100, 4096, whole.len() / 3] {
        std::fs::write(&cut, &whole[..len]).unwrap();
        pmlab()
            .args(["export", "--perfetto"])
            .arg(&out)
            .arg(&cut)
            .assert()
            .failure()
            .stderr(predicates::str::contains("cut.dat"));
    }
    // A directory as the trace, and an output directory that does not exist.
    pmlab()
        .args(["export", "--perfetto"])
        .arg(&out)
        .arg(tmp.path())
        .assert()
        .failure();
    pmlab()
        .args(["export", "--perfetto"])
        .arg(tmp.path().join("no/dir/out.pftrace"))
        .arg(fixtures().join("trappy_idle.dat"))
        .assert()
        .failure()
        .stderr(predicates::str::contains("out.pftrace"));
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "cut.dat")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
