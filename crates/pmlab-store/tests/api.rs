//! pmlab-store through its public API: a fresh store and an old one migrated, an experiment
//! inserted and read back, files that are not stores refused untouched, and a result bundle's
//! round trip into another store.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_kernel::{Direction, Metric};
use pmlab_store::bundle;
use pmlab_store::spec::{Budget, Configuration, Experiment, Kind, SpecError, WorkloadDef};
use pmlab_store::store::{ExperimentStatus, NewRun, RunStatus, Store, StoreError, SCHEMA_VERSION};
use pmlab_store::system::SystemSnapshot;
use std::path::Path;

/// Two configurations × one workload, four measured runs each and one warm-up, in `path`.
fn experiment_in(path: &Path, host: &str) -> i64 {
    let mut s = Store::open(path).unwrap();
    let e = Experiment::new(
        Kind::Compare,
        "poll".into(),
        vec![
            Configuration::parse("A", "").unwrap(),
            Configuration::parse("B", "haltpoll.guest_halt_poll_ns=200000").unwrap(),
        ],
        vec![WorkloadDef::new(vec!["pipe".into(), "--loops".into(), "1000".into()]).unwrap()],
        Some("A"),
    )
    .unwrap();
    let sys = SystemSnapshot {
        hostname: host.into(),
        kernel_release: "6.18.0".into(),
        cpus: 2,
        ..Default::default()
    };
    let ids = s
        .create_experiment(&e, &Budget::default(), "pmlab compare A B", &sys)
        .unwrap();
    assert_eq!(ids.configurations.len(), 2);
    let mut position = 0;
    for round in 0..5 {
        for (c, &conf) in ids.configurations.iter().enumerate() {
            let value = 10.0 + 2.0 * c as f64 + round as f64 * 0.1;
            s.insert_run(&NewRun {
                experiment: ids.experiment,
                configuration: conf,
                workload: ids.workloads[0],
                round,
                position,
                warmup: round == 0,
                started_ns: 1_000 + position as i64,
                duration_ns: 5_000_000,
                status: RunStatus::Ok,
                error: None,
                metrics: vec![Metric::new("roundtrip", value, "us", Direction::Lower)],
                side_metrics: vec![Metric::new("idle_exits", 7.0, "1/s", Direction::Neutral)],
                trace_path: None,
            })
            .unwrap();
            position += 1;
        }
    }
    s.finish_experiment(ids.experiment, ExperimentStatus::Complete, "max runs")
        .unwrap();
    ids.experiment
}

it_test!(a_fresh_store_is_at_the_current_schema);
fn a_fresh_store_is_at_the_current_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let s = Store::open(&path).unwrap();
    assert_eq!(s.path(), path);
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(s.list().unwrap().is_empty());
    assert_eq!(s.latest_id().unwrap(), None);
    drop(s);
    assert_eq!(
        Store::open(&path).unwrap().schema_version().unwrap(),
        SCHEMA_VERSION
    );
}

it_test!(an_old_store_is_migrated_on_open);
fn an_old_store_is_migrated_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let old = Store::create_at_version(&path, 1).unwrap();
    assert_eq!(old.schema_version().unwrap(), 1);
    drop(old);
    let s = Store::open(&path).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    const { assert!(SCHEMA_VERSION > 1) };
}

it_test!(a_file_that_is_not_a_store_is_refused_untouched);
fn a_file_that_is_not_a_store_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let text = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &text).unwrap();
    let e = Store::open(&path).err().expect("refused");
    assert!(matches!(e, StoreError::NotAStore { .. }), "{e:?}");
    assert!(e.to_string().contains("notes.txt"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), text);
}

it_test!(an_experiment_reads_back_as_inserted);
fn an_experiment_reads_back_as_inserted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let id = experiment_in(&path, "box");
    let s = Store::open(&path).unwrap();
    assert_eq!(s.latest_id().unwrap(), Some(id));
    let e = s.load(id).unwrap();
    assert_eq!(e.info.kind, pmlab_store::spec::Kind::Compare);
    assert_eq!(e.info.name, "poll");
    assert_eq!(e.info.status, ExperimentStatus::Complete);
    assert_eq!(e.info.stop_reason.as_deref(), Some("max runs"));
    // `runs` counts measured runs; the warm-ups are stored too.
    assert_eq!(
        (e.info.configurations, e.info.workloads, e.info.runs),
        (2, 1, 8)
    );
    assert_eq!(e.runs.len(), 10);
    assert_eq!(
        e.configurations[1].knobs,
        ["haltpoll.guest_halt_poll_ns=200000"]
    );
    assert!(e.workloads[0].argv.starts_with(&["pipe".to_string()]));
    assert_eq!(e.system.as_ref().unwrap().hostname, "box");
    // Warm-ups (round 0) are kept but not measured.
    assert_eq!(e.runs.iter().filter(|r| r.warmup).count(), 2);
    let b = e.samples(0, 1, "roundtrip");
    assert_eq!(b.len(), 4);
    assert!(
        (b[0] - 12.1).abs() < 1e-9 && (b[3] - 12.4).abs() < 1e-9,
        "{b:?}"
    );
    let side = e.runs[0]
        .metrics
        .iter()
        .find(|m| m.name == "idle_exits")
        .unwrap();
    assert!(side.side && side.unit == "1/s");
    let primary = e.primary_metric(0).unwrap();
    assert_eq!(
        (primary.name.as_str(), primary.direction),
        ("roundtrip", Direction::Lower)
    );

    let missing = s.load(id + 100).unwrap_err();
    assert!(matches!(missing, StoreError::NoSuchExperiment { id: i, .. } if i == id + 100));
}

it_test!(bad_specs_are_refused_before_any_store);
fn bad_specs_are_refused_before_any_store() {
    assert!(matches!(
        WorkloadDef::new(vec![]),
        Err(SpecError::NoWorkload)
    ));
    assert!(matches!(
        Configuration::parse("A", "noequals"),
        Err(SpecError::NotAnAssignment(a)) if a == "noequals"
    ));
    let w = vec![WorkloadDef::new(vec!["idle".into()]).unwrap()];
    let c = |l: &str| Configuration::parse(l, "").unwrap();
    let e = Experiment::new(
        Kind::Compare,
        "x".into(),
        vec![c("A"), c("A")],
        w.clone(),
        None,
    );
    assert!(matches!(e, Err(SpecError::DuplicateLabel(l)) if l == "A"));
    let e = Experiment::new(Kind::Compare, "x".into(), vec![c("A")], w, Some("Z"));
    assert!(matches!(e, Err(SpecError::UnknownReference(r, _)) if r == "Z"));
}

it_test!(a_bundle_round_trips_into_another_store_once);
fn a_bundle_round_trips_into_another_store_once() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a.db");
    let id = experiment_in(&src, "box a");
    let store = Store::open(&src).unwrap();
    let root = dir.path().join("bundles");
    let b = bundle::export(&store, id, &root).unwrap();
    assert!(b.written && b.dir.starts_with(&root));
    assert!(b.dir.join(bundle::MANIFEST).is_file());
    assert_eq!(
        bundle::find(&root).unwrap(),
        vec![b.dir.join(bundle::STORE_FILE)]
    );
    let original = store.load(id).unwrap();

    let mut dst = Store::open(&dir.path().join("fleet.db")).unwrap();
    let got = bundle::import(&mut dst, std::slice::from_ref(&root)).unwrap();
    assert_eq!(got.len(), 1);
    let copy = dst.load(got[0].id.expect("imported")).unwrap();
    assert_eq!(copy.info.uid, original.info.uid);
    for c in 0..2 {
        assert_eq!(
            copy.samples(0, c, "roundtrip"),
            original.samples(0, c, "roundtrip")
        );
    }
    assert_eq!(copy.system, original.system);
    let again = bundle::import(&mut dst, &[root]).unwrap();
    assert_eq!(again[0].id, None, "already held: nothing written");
    assert_eq!(dst.list().unwrap().len(), 1);

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(
        bundle::import(&mut dst, &[empty]),
        Err(bundle::BundleError::NoBundle(_))
    ));
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
