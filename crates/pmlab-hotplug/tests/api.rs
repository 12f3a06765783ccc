//! pmlab-hotplug through its public API on a fake sysfs tree: refusals before anything is
//! touched, the states table, a latency session and a fault-injection walk stored by the
//! protocol (kinds `hotplug` and `inject`), the machine left as found.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use pmlab_hotplug::lab::NoProgress;
use pmlab_hotplug::{
    check_cpus, run_inject, run_lab, CpuFiles, Direction, InjectOptions, InjectOutcome,
    InjectTarget, InputError, LabOptions, LoaderCommand, LoaderKind, Mitigation, Paths, StateTable,
};
use pmlab_store::spec::Kind;
use pmlab_store::store::{RunStatus, Store};

const STATES: &str = "  0: offline
  1: threads:prepare
 83: cpu:bringup
 87: sched:starting
143: ap:online
235: sched:active
236: online
";

/// A fake root with `ncpus` CPUs (cpu0 without `online`, the others online) and
/// `rcu_expedited` at 0; returns it and its sysfs CPU directory.
fn fake_root(ncpus: u32) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let sys = t.path().join("sys/devices/system/cpu");
    for cpu in 0..ncpus {
        let d = sys.join(format!("cpu{cpu}/hotplug"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("fail"), "-1\n").unwrap();
        std::fs::write(d.join("state"), "236\n").unwrap();
        if cpu > 0 {
            std::fs::write(sys.join(format!("cpu{cpu}/online")), "1\n").unwrap();
        }
    }
    std::fs::write(sys.join("online"), format!("0-{}\n", ncpus - 1)).unwrap();
    std::fs::create_dir_all(sys.join("hotplug")).unwrap();
    std::fs::write(sys.join("hotplug/states"), STATES).unwrap();
    std::fs::create_dir_all(t.path().join("sys/kernel")).unwrap();
    std::fs::write(t.path().join("sys/kernel/rcu_expedited"), "0\n").unwrap();
    (t, sys)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

/// The knob transaction journals under /var/lib/pmlab unless PMLAB_STATE_DIR says where.
fn need_journal() {
    if !pmlab_hotplug::is_root() && std::env::var_os("PMLAB_STATE_DIR").is_none() {
        skip!("the knob journal needs root (or PMLAB_STATE_DIR)");
    }
}

it_test!(refusals_come_before_anything_is_touched);
/// No CPUs, cpu0 without `online`, a missing CPU, an offline one: refused, with the reason,
/// and no file changes.
fn refusals_come_before_anything_is_touched() {
    let (_t, sys) = fake_root(3);
    std::fs::write(sys.join("cpu2/online"), "0\n").unwrap();
    for (cpus, want) in [
        (vec![], "no CPUs given"),
        (vec![0], "cpu0 cannot be hot-unplugged"),
        (vec![7], "does not exist"),
        (vec![2], "offline"),
    ] {
        let e = check_cpus(&sys, &cpus).unwrap_err().to_string();
        assert!(e.contains(want), "{cpus:?}: {e}");
    }
    assert_eq!(read(&sys.join("cpu1/online")), "1");
    assert_eq!(read(&sys.join("cpu2/online")), "0");
    check_cpus(&sys, &[1]).unwrap();
}

it_test!(states_resolve_by_name_or_number);
/// The states table resolves a name or a number; an unknown word is a typed refusal.
fn states_resolve_by_name_or_number() {
    let (_t, sys) = fake_root(2);
    let table = StateTable::read(&sys).unwrap();
    assert_eq!(table.resolve("sched:active").unwrap().number, 235);
    assert_eq!(table.resolve("83").unwrap().name, "cpu:bringup");
    assert!(matches!(
        table.resolve("sched:nonesuch").unwrap_err(),
        InputError::UnknownState { .. }
    ));
    assert_eq!(
        Mitigation::parse("turbo").unwrap_err(),
        InputError::UnknownMitigation("turbo".into())
    );
}

it_test!(a_latency_session_is_a_hotplug_experiment_of_the_protocol);
/// Two cycles of cpu1 with and without rcu-expedited: eight runs, kind `hotplug`, the CPU
/// online and `rcu_expedited` as found afterwards.
fn a_latency_session_is_a_hotplug_experiment_of_the_protocol() {
    need_journal();
    let (t, sys) = fake_root(2);
    let opts = LabOptions {
        paths: Paths::new(t.path()),
        cpus: vec![1],
        cycles: 2,
        loads: vec![0],
        loader: LoaderKind::Spin,
        loader_command: LoaderCommand::system_tool(LoaderKind::Spin),
        configurations: Mitigation::configurations(&[Mitigation::RcuExpedited]),
        seed: 7,
        trace: false,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let mut store = Store::in_memory().unwrap();
    let r = run_lab(&opts, &mut store, "pmlab hotplug", &mut NoProgress).unwrap();
    assert!(!r.interrupted);
    assert_eq!(r.ops.len(), 8);
    let e = store.load(r.experiment).unwrap();
    assert_eq!(e.info.kind, Kind::Hotplug);
    assert_eq!(e.runs.len(), 8);
    assert!(e.runs.iter().all(|run| run.status == RunStatus::Ok));
    assert!(CpuFiles::new(&sys, 1).is_online().unwrap());
    assert_eq!(read(&t.path().join("sys/kernel/rcu_expedited")), "0");
}

it_test!(an_injection_walk_is_an_inject_experiment_of_the_protocol);
/// The walk of one state: one attempt per direction, one stored run each (kind `inject`);
/// a regular file accepts every write, so neither attempt triggers; `fail` back at -1.
fn an_injection_walk_is_an_inject_experiment_of_the_protocol() {
    need_journal();
    let (t, sys) = fake_root(2);
    let table = StateTable::read(&sys).unwrap();
    let opts = InjectOptions {
        paths: Paths::new(t.path()),
        cpus: vec![1],
        target: InjectTarget::One(table.resolve("sched:active").unwrap()),
        trace: false,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let mut store = Store::in_memory().unwrap();
    let r = run_inject(&opts, &mut store, "pmlab hotplug", &mut NoProgress).unwrap();
    let walked: Vec<(Direction, i32)> = r.attempts.iter().map(|a| (a.direction, a.state)).collect();
    assert_eq!(
        walked,
        [(Direction::Offline, 235), (Direction::Online, 235)]
    );
    assert!(r
        .attempts
        .iter()
        .all(|a| a.outcome == InjectOutcome::NotTriggered));
    let e = store.load(r.experiment).unwrap();
    assert_eq!(e.info.kind, Kind::Inject);
    assert_eq!(e.runs.len(), 2);
    let cpu = CpuFiles::new(&sys, 1);
    assert!(cpu.is_online().unwrap());
    assert_eq!(cpu.fail().unwrap(), -1);
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
