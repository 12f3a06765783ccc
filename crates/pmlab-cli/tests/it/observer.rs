//! pmlab out of its own measurements: `bench/observer` (the one sampler of pmlab's voluntary
//! context switches, read from outside, and of LOC interrupts against `sleep`) run with
//! shorter durations and 3 rounds; it fails when any target is missed.

use crate::util::is_root;
use std::path::PathBuf;

#[test]
fn pmlab_does_not_wake_the_machine_it_measures() {
    if !is_root() || !std::path::Path::new("/sys/devices/system/cpu/cpu1/online").exists() {
        eprintln!("skipped: needs root and a hot-pluggable cpu1 (covered by bench/observer)");
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/observer");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .env("PMLAB", assert_cmd::cargo::cargo_bin("pmlab"))
        .env("DURATION", "4")
        .env("COMPARE_DURATION", "2")
        .env("ROUNDS", "3")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let ratio: f64 = stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("LOC ratio pmlab/sleep: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no ratio line: {stdout}"));
    assert!((0.85..=1.15).contains(&ratio), "LOC ratio {ratio}");
    assert!(
        !stdout.contains("OVER 1/s"),
        "pmlab woke more than once a second during a measured part: {stdout}"
    );
    assert!(out.status.success(), "{stdout}");
}
