//! The bring-up analysis on a real guest's results (tests/fixtures/boot: a 2-vCPU 6.12 boot
//! under TCG): the trace extracts and decodes, the secondary CPU reaches `online`, the
//! bring-up agrees with the kernel log and its steps account for it.

use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/boot")
        .join(name)
}

#[test]
fn a_real_guest_boot_is_broken_down_and_agrees_with_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let guest =
        pmlab_boot::bringup::unpack(&fixture("guest-6.12-x86_64-2vcpu.tgz"), dir.path()).unwrap();
    let console = std::fs::read_to_string(fixture("guest-6.12-x86_64-2vcpu.console")).unwrap();
    let out = dir.path().join("boot.dat");
    let b = pmlab_boot::bringup::analyze(&guest, &console, &out).unwrap();
    assert_eq!(b.source, pmlab_boot::bringup::Source::Trace);
    assert_eq!(b.online, vec![0, 1]);
    assert_eq!(b.reached_online, vec![1], "{:?}", b.notes);
    assert_eq!(b.lost_events, 0);
    // The trace is in the log's clock: the log's bring-up is the steps' window plus the
    // CPU hotplug lock's wait before the first step and what follows the last CPU online.
    let log = b.log_span_ns.expect("the log's bring-up lines") as i64;
    let (lead, tail) = (b.log_lead_ns.unwrap(), b.log_tail_ns.unwrap());
    assert!(lead >= 0 && tail >= 0, "lead {lead} tail {tail}");
    assert!(
        (lead + b.span_ns as i64 + tail - log).abs() < 10_000,
        "clocks disagree"
    );
    // On this 2-vCPU boot those two are 18 ms of 233: the steps' window is 92% of the log's.
    let ratio = b.span_ns as f64 / log as f64;
    assert!(
        (0.90..=1.0).contains(&ratio),
        "trace {} ns vs log {log} ns",
        b.span_ns
    );
    assert!(b.coverage() >= 0.9, "steps cover {:.3}", b.coverage());
    assert!(
        b.covered_ns as f64 >= 0.9 * log as f64,
        "steps cover {} of the log's {log} ns",
        b.covered_ns
    );
    assert!(b.init_ns.is_some_and(|i| i > b.span_ns));
    assert!(
        b.steps.iter().any(|s| s.name == "cpu:bringup"),
        "{:?}",
        b.steps
    );
    // The trace.dat it wrote decodes with pmlab's reader: cpuhp events of CPU 1 included.
    let t = pmlab_trace::open(&out).unwrap();
    let enter = t.event_id("cpuhp", "cpuhp_enter").expect("cpuhp_enter");
    let mut n = 0;
    t.events.for_each_of(enter, |_| n += 1);
    assert_eq!(n, 39, "cpuhp_enter events (trace-cmd report counts 39)");
    assert_eq!(t.meta.kernel_release(), Some("6.12.95+deb12-cloud-amd64"));
}

#[test]
fn without_a_trace_the_bring_up_comes_from_the_log_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let guest =
        pmlab_boot::bringup::unpack(&fixture("guest-6.12-x86_64-2vcpu.tgz"), dir.path()).unwrap();
    std::fs::remove_dir_all(guest.join("trace")).unwrap();
    let b = pmlab_boot::bringup::analyze(&guest, "", &dir.path().join("x.dat")).unwrap();
    assert_eq!(b.source, pmlab_boot::bringup::Source::KernelLog);
    assert_eq!(Some(b.span_ns), b.log_span_ns);
    assert!(
        b.notes.iter().any(|n| n.contains("kernel log")),
        "{:?}",
        b.notes
    );
    assert!(!dir.path().join("x.dat").exists());
}
