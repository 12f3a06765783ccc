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

/// The registered cpuidle driver, or "none" (tests branch on what this boot has).
pub fn cpuidle_driver() -> String {
    pmlab_kernel::knob::resolve::cpuidle_driver(&pmlab_kernel::Root::system())
}
