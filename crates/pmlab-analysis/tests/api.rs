//! pmlab-analysis through its public API on the repo's fixtures: idle residency within the
//! trace's span, wakeup causes that add up to each CPU's share, and an analysis whose events
//! a trace lacks refused with the events it needs (a typed `Missing`).

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_analysis::Options;
use std::path::PathBuf;

fn fixture(name: &str) -> pmlab_trace::Trace {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    pmlab_trace::open(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

it_test!(idle_residency_stays_within_the_span);
fn idle_residency_stays_within_the_span() {
    let t = fixture("trappy_idle.dat");
    let r = pmlab_analysis::idle::analyze(&t, &Options::default()).unwrap();
    assert!(!r.cpus.is_empty());
    for c in &r.cpus {
        assert!(
            c.idle_ns <= r.span_ns,
            "cpu{}: {} > {}",
            c.cpu,
            c.idle_ns,
            r.span_ns
        );
        let want = c.idle_ns as f64 / r.span_ns as f64;
        assert!(
            (c.share - want).abs() < 1e-9,
            "cpu{}: share {} of {want}",
            c.cpu,
            c.share
        );
    }
    // All-idle time is an overlap of the CPUs with idle information: at most each one's.
    assert!(!r.all_idle_cpus.is_empty());
    for c in r.cpus.iter().filter(|c| r.all_idle_cpus.contains(&c.cpu)) {
        assert!(
            r.all_idle_ns <= c.idle_ns,
            "cpu{}: {} < {}",
            c.cpu,
            c.idle_ns,
            r.all_idle_ns
        );
    }
}

it_test!(wakeup_causes_add_up_per_cpu);
fn wakeup_causes_add_up_per_cpu() {
    let t = fixture("haltpoll_pipe_off.dat");
    let r = pmlab_analysis::wakeups::analyze(&t, &Options::default()).unwrap();
    let cpus: std::collections::BTreeSet<u32> = r
        .causes
        .iter()
        .map(|c| c.cpu)
        .filter(|&c| c != u32::MAX)
        .collect();
    assert!(!cpus.is_empty(), "no causes");
    for cpu in cpus {
        let rows: Vec<_> = r.causes.iter().filter(|c| c.cpu == cpu).collect();
        let share: f64 = rows.iter().map(|c| c.share).sum();
        assert!(
            (share - 1.0).abs() < 1e-9,
            "cpu{cpu}: shares sum to {share}"
        );
    }
}

it_test!(an_analysis_without_its_events_names_them);
fn an_analysis_without_its_events_names_them() {
    // trappy's idle trace has no IPI or wakeup events: the idle-poll replay cannot run.
    let t = fixture("trappy_idle.dat");
    let Err(m) = pmlab_analysis::replay::prepare(&t, &Options::default()) else {
        panic!("a replay without IPI events");
    };
    assert!(
        m.events.iter().any(|e| e == "ipi:ipi_send_cpu"),
        "{:?}",
        m.events
    );
    assert!(m.hint.starts_with("pmlab record"), "{}", m.hint);
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
