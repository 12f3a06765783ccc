//! pmlab-lab through its public API with the fake executor (no machine touched): the protocol
//! runs warm-ups then interleaved rounds into the store, the same seed gives the same
//! schedule and values, each configuration measures its own values, a failing run is stored
//! and the experiment goes on, bad specs and unknown knobs are refused with typed errors
//! before anything is stored, and meter settings are checked.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_kernel::knob::{KnobError, KnobId};
use pmlab_lab::executor::{ExecError, FakeExecutor, FakeSpec};
use pmlab_lab::meter::{parse_wrap, MeterError, MeterSpec};
use pmlab_lab::protocol::{run_experiment, ProtocolError, Silent, StopReason};
use pmlab_store::spec::{Budget, Configuration, Experiment, Kind, WorkloadDef};
use pmlab_store::store::{RunStatus, Store};
use std::sync::atomic::AtomicBool;

fn experiment() -> Experiment {
    Experiment::new(
        Kind::Compare,
        "api".into(),
        vec![
            Configuration::parse("a", "").unwrap(),
            Configuration::parse("b", "").unwrap(),
        ],
        vec![WorkloadDef::new(vec!["pipe".into()]).unwrap()],
        None,
    )
    .unwrap()
}

fn budget(seed: u64) -> Budget {
    Budget {
        seed,
        max_runs: Some(10),
        stop_when_decided: false,
        target_ci: 1e-9,
        ..Budget::default()
    }
}

/// Runs the two-configuration experiment on the fake executor into `store`: its id.
fn run_fake(store: &mut Store, seed: u64) -> i64 {
    let mut fake = FakeExecutor::new(FakeSpec::parse("").unwrap(), seed);
    let out = run_experiment(
        store,
        &mut fake,
        &experiment(),
        &budget(seed),
        "api",
        &AtomicBool::new(false),
        &mut Silent,
    )
    .unwrap();
    assert_eq!(out.stop, StopReason::MaxRuns);
    assert_eq!(out.runs, 10);
    out.experiment_id
}

it_test!(fake_experiment_is_stored_and_reads_back_after_reopening);
fn fake_experiment_is_stored_and_reads_back_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("api.db");
    let mut store = Store::open(&db).unwrap();
    let id = run_fake(&mut store, 3);
    let before = store.load(id).unwrap();
    drop(store);
    let e = Store::open(&db).unwrap().load(id).unwrap();
    assert_eq!(e.info.seed, 3);
    assert_eq!(
        e.runs.iter().filter(|r| r.warmup).count(),
        2,
        "a warm-up each"
    );
    for c in 0..2 {
        let s = e.samples(0, c, "fake.time");
        assert_eq!(s.len(), 5, "configuration {c}: {s:?}");
        assert_eq!(s, before.samples(0, c, "fake.time"));
    }
    // Each round runs each configuration once.
    for round in 1..=5 {
        let mut cs: Vec<usize> = e
            .runs
            .iter()
            .filter(|r| r.round == round && !r.warmup)
            .map(|r| r.configuration)
            .collect();
        cs.sort();
        assert_eq!(cs, vec![0, 1], "round {round}");
    }
}

it_test!(same_seed_same_schedule_and_values);
fn same_seed_same_schedule_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("api.db")).unwrap();
    let (a, b) = (run_fake(&mut store, 11), run_fake(&mut store, 11));
    let (a, b) = (store.load(a).unwrap(), store.load(b).unwrap());
    let schedule = |e: &pmlab_store::store::StoredExperiment| {
        e.runs
            .iter()
            .map(|r| (r.round, r.configuration, r.warmup))
            .collect::<Vec<_>>()
    };
    assert_eq!(schedule(&a), schedule(&b));
    assert_eq!(a.samples(0, 1, "fake.time"), b.samples(0, 1, "fake.time"));
}

it_test!(bad_specs_are_refused);
fn bad_specs_are_refused() {
    let Err(e) = FakeSpec::parse("no_such_key=1") else {
        panic!("unknown key accepted");
    };
    assert!(e.to_string().contains("unknown key"), "{e}");
    assert!(
        WorkloadDef::new(vec![]).is_err(),
        "an empty workload accepted"
    );
    let dir = tempfile::tempdir().unwrap();
    let not_a_db = dir.path().join("text.db");
    std::fs::write(
        &not_a_db,
        "not sqlite, just text long enough to have a header",
    )
    .unwrap();
    assert!(
        Store::open(&not_a_db).is_err(),
        "a text file opened as a store"
    );
}

/// The two-configuration experiment with `b`'s knobs replaced.
fn with_b(knobs: &str) -> Experiment {
    let mut e = experiment();
    e.configurations[1] = Configuration::parse("b", knobs).unwrap();
    e
}

fn run(store: &mut Store, e: &Experiment, spec: &str) -> Result<i64, ProtocolError> {
    let mut fake = FakeExecutor::new(FakeSpec::parse(spec).unwrap(), 5);
    run_experiment(
        store,
        &mut fake,
        e,
        &budget(5),
        "api",
        &AtomicBool::new(false),
        &mut Silent,
    )
    .map(|o| o.experiment_id)
}

it_test!(an_unknown_knob_is_refused_before_anything_is_stored);
fn an_unknown_knob_is_refused_before_anything_is_stored() {
    let mut store = Store::in_memory().unwrap();
    let e = run(&mut store, &with_b("cpuidle.governor=menu"), "").unwrap_err();
    // Refused as the real executor refuses it (KnobError::Unknown, typed), naming the
    // configuration, and the knobs the fake executor knows.
    match &e {
        ProtocolError::Invalid(ExecError::Configuration {
            label,
            source: KnobError::Unknown { name, hint },
        }) => {
            assert_eq!(label, "b");
            assert_eq!(**name, KnobId::new("cpuidle.governor"));
            assert!(hint.contains("fake.mean"), "{hint}");
        }
        other => panic!("{other:?}"),
    }
    assert!(store.list().unwrap().is_empty());
}

it_test!(each_configuration_measures_its_own_values);
/// `fake.mean=150` on `b`: its samples sit around 150 and `a`'s around the default 100.
fn each_configuration_measures_its_own_values() {
    let mut store = Store::in_memory().unwrap();
    let id = run(&mut store, &with_b("fake.mean=150"), "sd=1").unwrap();
    let e = store.load(id).unwrap();
    let mean = |c| {
        let xs = e.samples(0, c, "fake.time");
        assert_eq!(xs.len(), 5, "configuration {c}");
        xs.iter().sum::<f64>() / xs.len() as f64
    };
    assert!((mean(0) - 100.0).abs() < 3.0, "{}", mean(0));
    assert!((mean(1) - 150.0).abs() < 3.0, "{}", mean(1));
}

it_test!(a_failing_run_is_stored_failed_and_the_experiment_goes_on);
fn a_failing_run_is_stored_failed_and_the_experiment_goes_on() {
    let mut store = Store::in_memory().unwrap();
    let id = run(&mut store, &experiment(), "fail_at=3").unwrap();
    let e = store.load(id).unwrap();
    let failed: Vec<_> = e
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Failed)
        .collect();
    assert_eq!(failed.len(), 1, "{:?}", e.runs);
    assert!(failed[0].error.is_some());
    assert_eq!(e.info.failed_runs, 1);
    assert_eq!(e.info.runs, 10, "the budget's runs, the failed one counted");
}

it_test!(meter_settings_are_checked);
fn meter_settings_are_checked() {
    assert_eq!(parse_wrap("262143.99").unwrap(), 262143.99);
    assert_eq!(parse_wrap("262kJ").unwrap(), 262_000.0);
    assert_eq!(parse_wrap("1 MJ").unwrap(), 1e6);
    for bad in ["", "0", "-5J", "lots", "inf"] {
        assert!(
            matches!(parse_wrap(bad), Err(MeterError::Spec(_))),
            "{bad:?}"
        );
    }
    let counter = |command: &str, wrap| MeterSpec::Counter {
        command: command.into(),
        wrap,
    };
    assert!(counter("cat /sys/x", Some(10.0)).validate().is_ok());
    assert!(counter("  ", None).validate().is_err());
    assert!(counter("cat /sys/x", Some(-1.0)).validate().is_err());
    let stream = MeterSpec::Stream {
        command: String::new(),
    };
    assert!(matches!(stream.validate(), Err(MeterError::Spec(_))));
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}

it_test!(scripted_values_are_stored_per_configuration_and_round);
/// `store_scripted`: exactly the rounds asked for, no warm-up, each run holding the value given
/// for its configuration and round.
fn scripted_values_are_stored_per_configuration_and_round() {
    use pmlab_kernel::{Direction, Metric};
    use pmlab_lab::executor::RunOutput;
    use pmlab_lab::scripted::store_scripted;
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("s.db")).unwrap();
    let out = store_scripted(
        &mut store,
        &experiment(),
        4,
        Default::default(),
        "scripted",
        &mut |p| RunOutput {
            metrics: vec![Metric::new(
                "x",
                (p.configuration * 10 + p.round) as f64,
                "u",
                Direction::Lower,
            )],
            side_metrics: vec![],
            trace_path: None,
        },
    )
    .unwrap();
    assert_eq!((out.rounds, out.runs, out.failed), (4, 8, 0));
    let e = store.load(out.experiment_id).unwrap();
    assert!(e.runs.iter().all(|r| !r.warmup));
    for c in 0..2 {
        let mut s = e.samples(0, c, "x");
        s.sort_by(f64::total_cmp);
        let want: Vec<f64> = (1..=4).map(|r| (c * 10 + r) as f64).collect();
        assert_eq!(s, want, "configuration {c}");
    }
}
