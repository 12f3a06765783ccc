//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The `pmlab` binary under test.
pub fn pmlab() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("pmlab").expect("pmlab binary")
}

/// The trace fixtures from other machines (`tests/fixtures`, a copy of the shared set), or
/// `$PMLAB_FIXTURES`.
pub fn fixtures() -> PathBuf {
    if let Ok(p) = std::env::var("PMLAB_FIXTURES") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// True when running as root (the project's machines always are).
pub fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

pub const CPU1_ONLINE: &str = "/sys/devices/system/cpu/cpu1/online";

/// Brings cpu1 back online on drop, whatever happened.
pub struct Cpu1Online;

impl Drop for Cpu1Online {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::read_to_string(CPU1_ONLINE)
                .map(|s| s.trim() == "1")
                .unwrap_or(true)
            {
                return;
            }
            let _ = std::fs::write(CPU1_ONLINE, "1");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// One hotplug operation's JSON (`steps_sum_ns`, `preempted_ns`, `interrupted_ns`,
/// `span_ns`): its steps, with the preemption and interrupts between them, cover the span
/// within 2%.
pub fn assert_steps_cover_span(t: &serde_json::Value) {
    let f = |k: &str| t[k].as_f64().unwrap();
    let (sum, between, span) = (
        f("steps_sum_ns"),
        f("preempted_ns") + f("interrupted_ns"),
        f("span_ns"),
    );
    assert!(
        ((sum + between) / span - 1.0).abs() <= 0.02,
        "steps {sum} + preempted/interrupted {between} vs span {span}: {t}"
    );
}

/// The registered cpuidle driver, or "none" (tests branch on what this boot has).
pub fn cpuidle_driver() -> String {
    pmlab_kernel::knob::resolve::cpuidle_driver(&pmlab_kernel::Root::system())
}
