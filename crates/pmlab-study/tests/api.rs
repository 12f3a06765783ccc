//! pmlab-study through its public API: the battery planned for fake machines' capabilities
//! (what runs, what is skipped and why), and the simulated machine run through the
//! experiment protocol into a store.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_lab::executor::ExecError;
use pmlab_lab::protocol::{self, ProtocolError, Silent};
use pmlab_store::spec::{Configuration, Experiment, Kind, WorkloadDef};
use pmlab_store::store::Store;
use pmlab_study::detect::Caps;
use pmlab_study::plan::{self, Stage, StagePlan, Step};
use pmlab_study::sim::SimExecutor;
use std::sync::atomic::AtomicBool;

/// A haltpoll KVM guest like this one, as root: two CPUs, cpu1 hot-pluggable, tracefs.
fn guest() -> Caps {
    Caps {
        root: true,
        cpus_online: vec![0, 1],
        cpuidle_driver: Some("haltpoll".into()),
        governors: vec!["menu".into(), "haltpoll".into()],
        current_governor: Some("haltpoll".into()),
        haltpoll_poll_ns: Some("0".into()),
        polling_knob: Some("haltpoll.guest_halt_poll_ns".into()),
        hotpluggable: vec![1],
        tracefs: true,
        guest_kernel: Some("/var/cache/pmlab/guest/x86_64/vmlinuz-6.12".into()),
        ..Caps::default()
    }
}

fn skip_reason(p: &StagePlan) -> Option<&str> {
    match p {
        StagePlan::Skip(why) => Some(why),
        StagePlan::Run { .. } => None,
    }
}

/// The one experiment step of a stage that runs one.
fn experiment_of(p: StagePlan) -> (Experiment, pmlab_store::spec::Budget, bool) {
    match p {
        StagePlan::Run { mut steps, .. } => match (steps.pop(), steps.is_empty()) {
            (
                Some(Step::Experiment {
                    experiment,
                    budget,
                    trace,
                }),
                true,
            ) => (*experiment, budget, trace),
            other => panic!("{other:?}"),
        },
        StagePlan::Skip(why) => panic!("skipped: {why}"),
    }
}

it_test!(stage_names_parse_and_unknown_ones_are_refused);
fn stage_names_parse_and_unknown_ones_are_refused() {
    for s in Stage::ALL {
        assert_eq!(Stage::parse(s.as_str()), Ok(s));
    }
    let e = Stage::parse("polling-sweep").unwrap_err();
    assert!(e.to_string().contains("polling-predicted"), "{e}");
}

it_test!(the_boot_stage_boots_a_guest_where_one_is_found_and_says_why_not_elsewhere);
fn the_boot_stage_boots_a_guest_where_one_is_found_and_says_why_not_elsewhere() {
    let caps = guest();
    match plan::plan(Stage::Boot, &caps, false, 7) {
        StagePlan::Run { steps, .. } => match steps.as_slice() {
            [Step::Boot(b)] => {
                assert_eq!(b.cmdlines, ["cpuhp.parallel=0", "cpuhp.parallel=1"]);
                assert_eq!(b.vcpus, [2, 4, 8]);
            }
            s => panic!("{s:?}"),
        },
        p => panic!("{p:?}"),
    }
    match plan::plan(Stage::Boot, &caps, true, 7) {
        StagePlan::Run { steps, .. } => match steps.as_slice() {
            [Step::Boot(b)] => {
                assert_eq!((b.vcpus.as_slice(), b.budget.max_runs), (&[2][..], Some(1)))
            }
            s => panic!("{s:?}"),
        },
        p => panic!("{p:?}"),
    }
    let none = Caps {
        guest_kernel: None,
        no_guest: Some(
            "QEMU (qemu-system-x86_64) not found: apt-get install qemu-system-x86".into(),
        ),
        ..guest()
    };
    let p = plan::plan(Stage::Boot, &none, true, 7);
    assert!(skip_reason(&p).is_some_and(|r| r.contains("QEMU")), "{p:?}");
}

it_test!(a_guest_with_haltpoll_runs_every_stage);
fn a_guest_with_haltpoll_runs_every_stage() {
    let caps = guest();
    for s in Stage::ALL {
        let p = plan::plan(s, &caps, true, 7);
        assert_eq!(skip_reason(&p), None, "{s:?}");
    }
    let (sweep, budget, trace) = experiment_of(plan::plan(Stage::Polling, &caps, true, 7));
    assert_eq!(sweep.kind, Kind::Sweep);
    assert_eq!(sweep.swept, ["haltpoll.guest_halt_poll_ns"]);
    assert_eq!(sweep.configurations.len(), 4, "quick: 0,25us,100us,200us");
    assert_eq!(budget.seed, 7);
    assert!(!trace);
    // The pipe's two sides on two CPUs: polling acts on wakes across CPUs.
    assert!(
        sweep.workloads[0].label.contains("--placement spread"),
        "{:?}",
        sweep.workloads
    );
    let full = experiment_of(plan::plan(Stage::Polling, &caps, false, 7)).0;
    assert!(full.configurations.len() > sweep.configurations.len());

    let (gov, _, _) = experiment_of(plan::plan(Stage::Governors, &caps, true, 7));
    assert_eq!(
        gov.configurations[gov.reference].label, "haltpoll",
        "the governor as found"
    );
    match plan::plan(Stage::Hotplug, &caps, true, 7) {
        StagePlan::Run { steps, .. } => match steps.as_slice() {
            [Step::Hotplug(h)] => assert_eq!((h.cpus.as_slice(), h.trace), (&[1][..], true)),
            other => panic!("{other:?}"),
        },
        StagePlan::Skip(why) => panic!("{why}"),
    }
    assert!(
        experiment_of(plan::plan(Stage::Wakeups, &caps, true, 7)).2,
        "traced"
    );
}

it_test!(a_machine_without_root_or_cpuidle_skips_with_reasons);
fn a_machine_without_root_or_cpuidle_skips_with_reasons() {
    let bare = Caps {
        cpus_online: vec![0],
        ..Caps::default()
    };
    let why = |s| skip_reason(&plan::plan(s, &bare, true, 1)).map(str::to_string);
    assert!(why(Stage::Polling).unwrap().contains("no cpuidle driver"));
    assert!(why(Stage::Governors).unwrap().contains("no cpuidle driver"));
    assert!(why(Stage::Hotplug).unwrap().contains("needs root"));
    assert!(why(Stage::PollingPredicted).unwrap().contains("tracefs"));
    assert_eq!(why(Stage::Idle), None);
    assert_eq!(why(Stage::Cpu), None);
    // The guest as a user: polling knobs exist but cannot be changed.
    let guest_as_user = Caps {
        root: false,
        ..guest()
    };
    let p = plan::plan(Stage::Polling, &guest_as_user, true, 1);
    assert!(skip_reason(&p).unwrap().contains("needs root"), "{p:?}");
    let (idle, _, trace) = experiment_of(plan::plan(Stage::Idle, &bare, true, 1));
    assert!(!trace, "no tracefs: not traced");
    assert!(idle.workloads[0].argv.starts_with(&["idle".to_string()]));
}

it_test!(the_simulated_machine_runs_the_polling_sweep_into_a_store);
/// The model speeds the pipe up with polling: the 25 µs configuration measures faster than
/// polling off, and the experiment is stored complete with its runs.
fn the_simulated_machine_runs_the_polling_sweep_into_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let (sweep, budget, _) = experiment_of(plan::plan(Stage::Polling, &guest(), true, 3));
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let mut sim = SimExecutor::new(dir.path().to_path_buf(), 3);
    let stop = AtomicBool::new(false);
    let out = protocol::run_experiment(
        &mut store,
        &mut sim,
        &sweep,
        &budget,
        "test",
        &stop,
        &mut Silent,
    )
    .unwrap();
    assert!(out.runs > 0 && out.failed == 0, "{out:?}");
    let e = store.load(out.experiment_id).unwrap();
    assert_eq!(e.configurations.len(), 4);
    let mean = |c: usize| {
        let xs = e.samples(0, c, "us_per_op");
        assert!(xs.len() >= 2, "configuration {c}: {xs:?}");
        xs.iter().sum::<f64>() / xs.len() as f64
    };
    assert!(mean(1) < mean(0), "25us {} vs off {}", mean(1), mean(0));
}

it_test!(the_simulated_machine_refuses_knobs_it_does_not_have);
fn the_simulated_machine_refuses_knobs_it_does_not_have() {
    let dir = tempfile::tempdir().unwrap();
    let e = Experiment::new(
        Kind::Compare,
        "x".into(),
        vec![
            Configuration::parse("A", "").unwrap(),
            Configuration::parse("B", "cpufreq.governor=performance").unwrap(),
        ],
        vec![WorkloadDef::new(vec!["idle".into()]).unwrap()],
        None,
    )
    .unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let mut sim = SimExecutor::new(dir.path().to_path_buf(), 1);
    let err = protocol::run_experiment(
        &mut store,
        &mut sim,
        &e,
        &Default::default(),
        "test",
        &AtomicBool::new(false),
        &mut Silent,
    )
    .unwrap_err();
    assert!(
        matches!(
            &err,
            ProtocolError::Invalid(ExecError::Configuration { label, .. }) if label == "B"
        ),
        "{err:?}"
    );
    assert!(
        store.list().unwrap().is_empty(),
        "refused before anything was stored"
    );
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
