//! pmlab-lab through its public API with the fake executor (no machine touched): the protocol
//! runs warm-ups then interleaved rounds into the store, the same seed gives the same
//! schedule and values, and bad specs are refused with typed errors.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_lab::executor::{FakeExecutor, FakeSpec};
use pmlab_lab::protocol::{run_experiment, Silent, StopReason};
use pmlab_store::spec::{Budget, Configuration, Experiment, Kind, WorkloadDef};
use pmlab_store::store::Store;
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

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
