//! pmlab-trace through its public API on the repo's fixtures (tests/fixtures): every trace
//! opens and its summary adds up, events decode through their format's fields, and files that
//! are not traces are refused with a typed error naming the path.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_trace::summary::summarize;
use pmlab_trace::TraceError;
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

const TRACES: [&str; 6] = [
    "haltpoll_pipe_200us.dat",
    "haltpoll_pipe_off.dat",
    "lisa_rtapp.dat",
    "lisa_sched_load.dat",
    "trappy_idle.dat",
    "trappy_trace.dat",
];

it_test!(every_fixture_opens_and_its_summary_adds_up);
fn every_fixture_opens_and_its_summary_adds_up() {
    for name in TRACES {
        let t = pmlab_trace::open(&fixtures().join(name)).unwrap();
        let s = summarize(&t);
        assert!(s.events > 0, "{name}: no events");
        assert_eq!(s.events, t.events.len() as u64, "{name}");
        let by_event: u64 = s.by_event.iter().map(|e| e.count).sum();
        assert_eq!(by_event + s.unknown_events, s.events, "{name}: by event");
        let by_cpu: u64 = s.per_cpu.iter().map(|c| c.events).sum();
        assert_eq!(by_cpu, s.events, "{name}: by CPU");
        assert_eq!(s.out_of_order, 0, "{name}: timestamps go back");
        assert_eq!(s.span, s.last_ts.unwrap() - s.first_ts.unwrap(), "{name}");
    }
}

it_test!(sched_switch_fields_decode_by_name);
fn sched_switch_fields_decode_by_name() {
    let t = pmlab_trace::open(&fixtures().join("haltpoll_pipe_200us.dat")).unwrap();
    let id = t.event_id("sched", "sched_switch").expect("sched_switch");
    let next_pid = t.field(id, "next_pid").expect("next_pid");
    let next_comm = t.field(id, "next_comm").expect("next_comm");
    let mut seen = 0;
    t.events.for_each_of(id, |i| {
        let pid = t.i64_at(i, next_pid);
        let comm = t.str_at(i, next_comm);
        assert!(pid >= 0, "pid {pid}");
        // pid 0 is the idle task, named swapper/N.
        assert_eq!(pid == 0, comm.starts_with("swapper"), "{pid} {comm}");
        seen += 1;
    });
    assert!(seen > 1000, "{seen} switches");
}

it_test!(files_that_are_not_traces_are_refused_naming_the_path);
fn files_that_are_not_traces_are_refused_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.dat");
    match pmlab_trace::open(&missing) {
        Err(TraceError::Io { path, .. }) => assert_eq!(path, missing),
        other => panic!("{:?}", other.map(|t| t.events.len())),
    }
    let garbage = dir.path().join("garbage.dat");
    std::fs::write(&garbage, b"\x17\x08\x44tracing6garbage that ends here").unwrap();
    let Err(e) = pmlab_trace::open(&garbage) else {
        panic!("garbage accepted");
    };
    assert!(e.to_string().contains("garbage.dat"), "{e}");
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
