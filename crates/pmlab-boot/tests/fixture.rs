//! The bring-up analysis on real guests' results (tests/fixtures/boot: 2-vCPU 6.12 boots
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
        pmlab_boot::bringup::unpack(&fixture("guest-6.12-x86_64-2vcpu-printk.tgz"), dir.path())
            .unwrap();
    let console =
        std::fs::read_to_string(fixture("guest-6.12-x86_64-2vcpu-printk.console")).unwrap();
    let out = dir.path().join("boot.dat");
    let b = pmlab_boot::bringup::analyze(&guest, &console, &out).unwrap();
    assert_eq!(b.source, pmlab_boot::bringup::Source::Trace);
    assert_eq!(b.edges, Some(pmlab_boot::bringup::Edges::KernelLines));
    assert_eq!(b.online, vec![0, 1]);
    assert_eq!(b.reached_online, vec![1], "{:?}", b.notes);
    assert_eq!(b.lost_events, 0);
    assert!(
        !b.notes.iter().any(|n| n.contains("printk:console")),
        "{:?}",
        b.notes
    );
    // The kernel's two bring-up lines, as `trace-cmd report` prints them from this trace:
    // 0.679205 and 0.909274 s.
    assert!(
        (b.span_ns as i64 - 230_069_000).abs() <= 1_000,
        "{} ns",
        b.span_ns
    );
    // The log's own stamps (local_clock) of the same lines agree within 5%.
    let log = b.log_span_ns.expect("the log's bring-up lines");
    let ratio = b.span_ns as f64 / log as f64;
    assert!(
        (0.95..=1.05).contains(&ratio),
        "trace {} vs log {log}",
        b.span_ns
    );
    // The steps' window plus what the boot CPU did before the first and after the last.
    let (lead, tail, hotplug) = (
        b.lead_ns.unwrap(),
        b.tail_ns.unwrap(),
        b.hotplug_ns.unwrap(),
    );
    assert!(lead > 0 && tail > 0, "lead {lead} tail {tail}");
    assert_eq!(lead + hotplug as i64 + tail, b.span_ns as i64);
    assert!(b.coverage() >= 0.9, "steps cover {:.3}", b.coverage());
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
fn a_trace_without_the_kernels_lines_is_timed_by_its_steps() {
    // An older boot's results: no `printk:console` in the trace.
    let dir = tempfile::tempdir().unwrap();
    let guest =
        pmlab_boot::bringup::unpack(&fixture("guest-6.12-x86_64-2vcpu.tgz"), dir.path()).unwrap();
    let console = std::fs::read_to_string(fixture("guest-6.12-x86_64-2vcpu.console")).unwrap();
    let b = pmlab_boot::bringup::analyze(&guest, &console, &dir.path().join("b.dat")).unwrap();
    assert_eq!(b.edges, Some(pmlab_boot::bringup::Edges::HotplugSteps));
    assert_eq!(Some(b.span_ns), b.hotplug_ns);
    assert!(
        b.notes.iter().any(|n| n.contains("printk:console")),
        "{:?}",
        b.notes
    );
    // The log's lines then bound it from its stamps (the trace is in the log's clock): the
    // CPU hotplug lock's wait before the first step and what follows the last CPU online,
    // 18 ms of this boot's 233.
    let log = b.log_span_ns.expect("the log's bring-up lines") as i64;
    let (lead, tail) = (b.lead_ns.unwrap(), b.tail_ns.unwrap());
    assert!(lead >= 0 && tail >= 0, "lead {lead} tail {tail}");
    assert!(
        (lead + b.span_ns as i64 + tail - log).abs() < 10_000,
        "clocks disagree"
    );
    assert_eq!(b.reached_online, vec![1]);
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
