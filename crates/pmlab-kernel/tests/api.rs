//! pmlab-kernel through its public API on fake sysfs trees (`sysinfo::fake`): system info,
//! knob validation, a journaled transaction that writes and restores, and CPU lists.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_kernel::knob::{self, Assignment, AssignmentError, KnobId, Transaction};
use pmlab_kernel::sysinfo::fake::FakeTree;
use pmlab_kernel::sysinfo::SystemInfo;
use pmlab_kernel::Root;

const POLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

fn file(t: &FakeTree, abs: &str) -> String {
    std::fs::read_to_string(t.path().join(abs.trim_start_matches('/')))
        .unwrap()
        .trim()
        .to_string()
}

fn s(v: &[&str]) -> Vec<Assignment> {
    Assignment::parse_all(v).unwrap()
}

it_test!(system_info_of_a_haltpoll_guest);
fn system_info_of_a_haltpoll_guest() {
    let t = FakeTree::haltpoll_guest(true);
    let info = SystemInfo::read(&Root::new(t.path()));
    let j = serde_json::to_value(&info).unwrap();
    assert_eq!(j["kernel"]["release"], "6.18.0-test", "{j}");
    assert_eq!(j["cpuidle"]["driver"], "haltpoll", "{}", j["cpuidle"]);
    assert_eq!(j["cpuidle"]["cpus"].as_array().unwrap().len(), 2);
    assert_eq!(j["virt"]["hypervisor"], "KVM", "{}", j["virt"]);
}

it_test!(transaction_writes_then_restores_what_it_found);
fn transaction_writes_then_restores_what_it_found() {
    let t = FakeTree::haltpoll_guest(true);
    let root = Root::new(t.path());
    let before = file(&t, POLL_NS);
    let journals = tempfile::tempdir().unwrap();
    let mut txn = Transaction::begin_in(&root, journals.path()).unwrap();
    txn.apply(&s(&["haltpoll.guest_halt_poll_ns=150us"]))
        .unwrap();
    assert_eq!(file(&t, POLL_NS), "150000");
    assert_eq!(
        knob::read(&root, &KnobId::new("haltpoll.guest_halt_poll_ns")).unwrap(),
        "150000"
    );
    txn.restore().unwrap();
    assert_eq!(file(&t, POLL_NS), before);
    assert!(knob::journal::scan(journals.path()).is_empty());
}

it_test!(bad_assignments_are_refused_before_anything_is_written);
fn bad_assignments_are_refused_before_anything_is_written() {
    let t = FakeTree::haltpoll_guest(true);
    let root = Root::new(t.path());
    let before = file(&t, POLL_NS);
    for bad in [
        "no.such.knob=1",
        "haltpoll.guest_halt_poll_ns=fast",
        "sysfs:/sys/../etc/passwd=1",
    ] {
        assert!(knob::validate(&root, &s(&[bad])).is_err(), "{bad} accepted");
    }
    let journals = tempfile::tempdir().unwrap();
    let mut txn = Transaction::begin_in(&root, journals.path()).unwrap();
    // One bad assignment in a list: nothing of the list is written.
    let e = txn
        .apply(&s(&["haltpoll.guest_halt_poll_ns=150us", "no.such.knob=1"]))
        .unwrap_err();
    assert!(e.to_string().contains("no.such.knob"), "{e}");
    assert_eq!(file(&t, POLL_NS), before);
    txn.restore().unwrap();
}

it_test!(assignments_are_parsed_once_and_applied_typed);
/// Text becomes an `Assignment` once (typed errors for bad text, the same text back from
/// `Display`); the typed constructors pmlab uses itself go through the transaction like any
/// other assignment, and a bad one changes nothing.
fn assignments_are_parsed_once_and_applied_typed() {
    let t = FakeTree::haltpoll_guest(true);
    let root = Root::new(t.path());
    for text in [
        "cpu.online@1=0",
        "cpuidle.POLL.disable@0-1=1",
        "rcu.expedited=on",
    ] {
        let a: Assignment = text.parse().unwrap();
        assert_eq!(a.to_string(), text);
    }
    let e = "cpu.online@one=0".parse::<Assignment>().unwrap_err();
    assert!(matches!(e, AssignmentError::Cpus { .. }), "{e:?}");
    assert!(matches!(
        "rcu.expedited".parse::<Assignment>(),
        Err(AssignmentError::NotAnAssignment { .. })
    ));

    let journals = tempfile::tempdir().unwrap();
    let mut txn = Transaction::begin_in(&root, journals.path()).unwrap();
    txn.apply(&[
        Assignment::rcu_expedited(true),
        Assignment::cpu_online(1, false),
    ])
    .unwrap();
    assert_eq!(file(&t, "/sys/kernel/rcu_expedited"), "1");
    assert_eq!(file(&t, "/sys/devices/system/cpu/cpu1/online"), "0");
    assert_eq!(txn.knobs(), ["rcu.expedited", "cpu.online@1"]);
    // A knob the machine lacks, built by the typed constructor: refused, nothing written.
    let e = txn
        .apply(&[
            Assignment::rcu_expedited(false),
            Assignment::cpu_online(7, true),
        ])
        .unwrap_err();
    assert!(e.to_string().contains("no cpu7"), "{e}");
    assert_eq!(file(&t, "/sys/kernel/rcu_expedited"), "1");
    txn.restore().unwrap();
    assert_eq!(file(&t, "/sys/kernel/rcu_expedited"), "0");
    assert_eq!(file(&t, "/sys/devices/system/cpu/cpu1/online"), "1");
    assert_eq!(
        knob::read(&root, &KnobId::cpu_online(1)).unwrap(),
        "1",
        "read by typed name"
    );
}

it_test!(cpu_lists_round_trip_and_refuse_garbage);
fn cpu_lists_round_trip_and_refuse_garbage() {
    use pmlab_kernel::cpulist::{format_cpu_list, parse_cpu_list};
    let cpus = parse_cpu_list("0-3,5,7-8").unwrap();
    assert_eq!(cpus, vec![0, 1, 2, 3, 5, 7, 8]);
    assert_eq!(format_cpu_list(&cpus), "0-3,5,7-8");
    for bad in ["3-1", "x", "1,,2"] {
        assert!(parse_cpu_list(bad).is_err(), "{bad:?} accepted");
    }
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
