//! The one integration-test binary: runs the real `pmlab` binary, and on a machine
//! that has them, the real kernel interfaces (tracefs, cpuidle, haltpoll, hotplug).
//! Its harness (tests/support/harness.rs) reports a test that cannot run here as ignored
//! with the reason: a test is `it_test!(NAME);` above `fn NAME()`, and skips with
//! `skip!("REASON")` or the `util::need_*` preconditions.

#[macro_use]
#[path = "../../../../tests/support/harness.rs"]
mod harness;

mod sshd;
mod util;

mod analyze;
mod boot;
mod bundle;
mod disturbance;
mod docs;
mod dump;
mod energy;
mod fleet;
mod golden;
mod hotplug;
mod info;
mod interrupt;
mod knob;
mod kvm;
mod lab;
mod layering;
mod lineup;
mod load;
mod manual;
mod metal;
mod needless;
mod observer;
mod perfetto;
mod placement;
mod record;
mod remote;
mod run;
mod study;
mod top;
mod trace;
mod whatif;
mod wild;

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it"),
    )])
}
