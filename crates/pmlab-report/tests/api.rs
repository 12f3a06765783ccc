//! pmlab-report through its public API: an experiment stored in a small SQLite store (through
//! the lab's protocol, with scripted run values), loaded
//! back and rendered in every `--format`; formats a caller cannot produce are refused by name;
//! analysis tables rendered as text, markdown and CSV.

#[macro_use]
#[path = "../../../tests/support/harness.rs"]
mod harness;

use pmlab_analysis::{Cell, Table};
use pmlab_kernel::{Direction, Metric};
use pmlab_lab::executor::RunOutput;
use pmlab_lab::scripted::store_scripted;
use pmlab_report::render::{tables, Format};
use pmlab_report::report::{Report, SideSelection};
use pmlab_store::spec::{Configuration, Experiment, Kind, WorkloadDef};
use pmlab_store::store::{Store, StoredExperiment};
use pmlab_store::system::SystemSnapshot;

/// A two-configuration compare of `pipe` with five rounds, stored, finished and loaded.
fn stored_report(dir: &std::path::Path) -> Report {
    let e = stored(dir);
    Report::of(&e, None, &SideSelection::Default).unwrap()
}

/// The experiment of [`stored_report`], as the store loads it.
fn stored(dir: &std::path::Path) -> StoredExperiment {
    let mut store = Store::open(&dir.join("r.db")).unwrap();
    let configs: Vec<Configuration> = ["off", "on"]
        .iter()
        .zip(["0", "200us"])
        .map(|(l, v)| Configuration::parse(l, &format!("haltpoll.guest_halt_poll_ns={v}")).unwrap())
        .collect();
    let exp = Experiment::new(
        Kind::Compare,
        "poll on/off".into(),
        configs,
        vec![WorkloadDef::new(vec!["pipe".into()]).unwrap()],
        None,
    )
    .unwrap();
    let sys = SystemSnapshot {
        kernel_release: "6.18.0".into(),
        cpu_model: "Test CPU".into(),
        cpus: 2,
        virtualization: "KVM".into(),
        cpuidle_driver: "haltpoll".into(),
        ..Default::default()
    };
    // "on" is a third faster than "off", far outside the round-to-round noise.
    let noise = [0.1, -0.1, 0.05, -0.05, 0.0];
    let outcome = store_scripted(&mut store, &exp, 5, sys, "pmlab compare", &mut |p| {
        RunOutput {
            metrics: vec![Metric::new(
                "pipe.us_per_op",
                [30.0, 20.0][p.configuration] + noise[p.round - 1],
                "us/op",
                Direction::Lower,
            )],
            side_metrics: vec![],
            trace_path: None,
        }
    })
    .unwrap();
    store.load(outcome.experiment_id).unwrap()
}

it_test!(a_stored_experiment_renders_in_every_text_format);
fn a_stored_experiment_renders_in_every_text_format() {
    let dir = tempfile::tempdir().unwrap();
    let report = stored_report(dir.path());
    for &f in Format::TEXT {
        let out = f.renderer().render(&report).unwrap();
        assert!(out.contains("pipe"), "{f}: {out}");
        match f {
            Format::Json => {
                let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
                assert!(v.is_object(), "{f}");
            }
            Format::Csv => {
                let mut r = csv::Reader::from_reader(out.as_bytes());
                let head = r.headers().unwrap().clone();
                assert_eq!(&head[0], "experiment");
                let rows: Vec<_> = r.records().map(|x| x.unwrap()).collect();
                // One row per configuration of the one metric.
                assert!(rows.iter().any(|x| x.iter().any(|c| c == "on")), "{out}");
            }
            Format::Markdown => assert!(out.contains("|"), "{out}"),
            Format::Mail => assert!(
                out.lines().all(|l| l.chars().count() <= 72),
                "mail lines ≤ 72:\n{out}"
            ),
            _ => {}
        }
    }
}

it_test!(formats_a_command_cannot_produce_are_refused_by_name);
fn formats_a_command_cannot_produce_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let report = stored_report(dir.path());
    let e = Format::Html.renderer().render(&report).unwrap_err();
    assert!(e.to_string().contains("pmlab report"), "{e}");
    let e = Format::Csv
        .check(
            "pmlab report",
            &[Format::Html, Format::Mail, Format::Markdown],
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "--format csv is not supported by pmlab report; choose html, mail or markdown"
    );
    assert_eq!(Format::Json.check("x", Format::TEXT), Ok(Format::Json));
}

it_test!(analysis_tables_render_as_text_markdown_and_csv);
fn analysis_tables_render_as_text_markdown_and_csv() {
    let mut t = Table::new("t", "Title", &["cpu", "name", "ms"], 2);
    t.row(vec![0u32.into(), "a,\"b\"".into(), 1.26.into()]);
    t.row(vec![1u32.into(), "c".into(), Cell::Empty]);
    let text = tables::text(&t, 1);
    assert!(text.contains("a,\"b\"") && text.contains("1.3"), "{text}");
    let md = tables::markdown(&t, 2);
    assert!(
        md.starts_with("**Title**\n\n| cpu | name | ms |\n|---|---|---|\n"),
        "{md}"
    );
    assert!(md.contains("| 0 | a,\"b\" | 1.26 |"), "{md}");
    // CSV keeps full precision and quotes what needs it; a CSV reader gets the cells back.
    let csv_text = t.to_csv();
    let mut r = csv::Reader::from_reader(csv_text.as_bytes());
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    assert_eq!(&rows[0][1], "a,\"b\"");
    assert_eq!(&rows[0][2], "1.26");
    assert_eq!(&rows[1][2], "");
    let plain = tables::plain(&t, &["cpu", "ms", "absent"], 1);
    assert_eq!(plain, "  cpu  ms\n    0 1.3\n    1    \n");
}

it_test!(the_store_lists_experiments_and_runs_as_tables);
fn the_store_lists_experiments_and_runs_as_tables() {
    let dir = tempfile::tempdir().unwrap();
    let e = stored(dir.path());
    let runs = pmlab_report::render::store::runs(&e);
    // One line per run (10), each naming its workload.
    let rows = runs.lines().filter(|l| l.contains("pipe")).count();
    assert_eq!(rows, e.runs.len(), "{runs}");
    assert!(runs.contains("us/op") && runs.contains("ok"), "{runs}");
    let store = Store::open(&dir.path().join("r.db")).unwrap();
    let list = pmlab_report::render::store::experiments(&store.list().unwrap());
    assert!(
        list.contains("poll on/off") && list.contains("compare"),
        "{list}"
    );
}

fn main() -> std::process::ExitCode {
    harness::main(vec![harness::source_check(
        "harness::every_test_is_registered",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
    )])
}
