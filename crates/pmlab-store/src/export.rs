//! Raw exports of a stored experiment for pandas, polars and DuckDB: a long CSV table (one
//! row per run and metric), JSON (everything stored) and Parquet (one file per table).

use crate::store::StoredExperiment;
use pmlab_analysis::parquet::{self, Column, Table};
use std::path::{Path, PathBuf};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[error("export of experiment {id}: {message}")]
pub struct ExportError {
    /// The experiment's id.
    pub id: i64,
    /// What went wrong.
    pub message: String,
}

/// The CSV header of [`runs_csv`].
pub(crate) const RUNS_CSV_HEADER: &[&str] = &[
    "experiment",
    "run",
    "configuration",
    "knobs",
    "workload",
    "round",
    "order",
    "warmup",
    "started_ns",
    "duration_ns",
    "status",
    "error",
    "metric",
    "value",
    "unit",
    "direction",
    "side",
];

/// One row per run and metric; a run without metrics (failed) gets one row with empty metric fields.
pub fn runs_csv(e: &StoredExperiment) -> Result<Vec<u8>, ExportError> {
    let err = |m: &dyn std::fmt::Display| ExportError {
        id: e.info.id,
        message: m.to_string(),
    };
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(RUNS_CSV_HEADER).map_err(|x| err(&x))?;
    for r in &e.runs {
        let conf = &e.configurations[r.configuration];
        let base = [
            e.info.id.to_string(),
            r.id.to_string(),
            conf.label.clone(),
            conf.knobs.join(" "),
            e.workloads[r.workload].label.clone(),
            r.round.to_string(),
            r.position.to_string(),
            (r.warmup as u8).to_string(),
            r.started_ns.to_string(),
            r.duration_ns.to_string(),
            r.status.as_str().to_string(),
            r.error.clone().unwrap_or_default(),
        ];
        if r.metrics.is_empty() {
            let mut rec = base.to_vec();
            rec.extend(std::iter::repeat_n(String::new(), 5));
            w.write_record(rec).map_err(|x| err(&x))?;
        }
        for m in &r.metrics {
            let mut rec = base.to_vec();
            rec.extend([
                m.label(),
                format!("{}", m.value),
                m.unit.clone(),
                m.direction.as_str().to_string(),
                (m.side as u8).to_string(),
            ]);
            w.write_record(rec).map_err(|x| err(&x))?;
        }
    }
    w.into_inner().map_err(|x| err(&x))
}

/// Everything stored about the experiment, as pretty JSON.
pub fn runs_json(e: &StoredExperiment) -> Result<Vec<u8>, ExportError> {
    let mut v = serde_json::to_vec_pretty(e).map_err(|x| ExportError {
        id: e.info.id,
        message: x.to_string(),
    })?;
    v.push(b'\n');
    Ok(v)
}

/// The Parquet tables of an experiment: `experiment` (one row, with the system snapshot),
/// `configurations` (one row per knob assignment; none for the machine as found gives one
/// row with a null knob), `runs` and `metrics` (one row per run and metric). Tables join on
/// `experiment`, `configuration` (label) and `run`.
pub fn parquet_tables(e: &StoredExperiment) -> Vec<(&'static str, Table)> {
    let id = e.info.id;
    let sys = e.system.clone().unwrap_or_default();
    let i = &e.info;
    let experiment = Table::new()
        .with("experiment", Column::int64([id]))
        .with("kind", Column::utf8([i.kind.as_str()]))
        .with("name", Column::utf8([i.name.as_str()]))
        .with("command", Column::utf8([i.command.as_str()]))
        .with("created_ns", Column::int64([i.created_ns]))
        .with("finished_ns", Column::Int64(vec![i.finished_ns]))
        .with("status", Column::utf8([i.status.as_str()]))
        .with("stop_reason", Column::Utf8(vec![i.stop_reason.clone()]))
        .with("seed", Column::utf8([i.seed.to_string()]))
        .with("target_ci", Column::double([i.target_ci]))
        .with("max_runs", Column::Int64(vec![i.max_runs]))
        .with("max_time_s", Column::Double(vec![i.max_time_s]))
        .with("settle_s", Column::Double(vec![i.settle_s]))
        .with(
            "reference",
            Column::utf8([e
                .configurations
                .get(i.reference)
                .map_or("", |c| c.label.as_str())]),
        )
        .with("swept", Column::utf8([e.swept.join(" ")]))
        .with("kernel_release", Column::utf8([sys.kernel_release]))
        .with("cmdline", Column::utf8([sys.cmdline]))
        .with("cpu_model", Column::utf8([sys.cpu_model]))
        .with("cpus", Column::int64([sys.cpus as i64]))
        .with("virtualization", Column::utf8([sys.virtualization]))
        .with("hostname", Column::utf8([sys.hostname]))
        .with("boot_id", Column::utf8([sys.boot_id]))
        .with(
            "knobs_as_found",
            Column::utf8([sys
                .knobs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")]),
        );

    let (mut c_label, mut c_index, mut c_knob, mut c_value) = (vec![], vec![], vec![], vec![]);
    for (n, c) in e.configurations.iter().enumerate() {
        let pairs: Vec<(Option<String>, Option<String>)> = if c.knobs.is_empty() {
            vec![(None, None)]
        } else {
            c.knobs
                .iter()
                .map(|k| match k.split_once('=') {
                    Some((a, b)) => (Some(a.to_string()), Some(b.to_string())),
                    None => (Some(k.clone()), None),
                })
                .collect()
        };
        for (k, v) in pairs {
            c_label.push(c.label.clone());
            c_index.push(n as i64);
            c_knob.push(k);
            c_value.push(v);
        }
    }
    let configurations = Table::new()
        .with("experiment", Column::int64(c_index.iter().map(|_| id)))
        .with("configuration", Column::utf8(c_label))
        .with("index", Column::int64(c_index))
        .with("knob", Column::Utf8(c_knob))
        .with("value", Column::Utf8(c_value));

    let runs = &e.runs;
    let conf = |r: &crate::store::StoredRun| e.configurations[r.configuration].label.clone();
    let work = |r: &crate::store::StoredRun| e.workloads[r.workload].label.clone();
    let runs_t = Table::new()
        .with("experiment", Column::int64(runs.iter().map(|_| id)))
        .with("run", Column::int64(runs.iter().map(|r| r.id)))
        .with("configuration", Column::utf8(runs.iter().map(conf)))
        .with("workload", Column::utf8(runs.iter().map(work)))
        .with("round", Column::int64(runs.iter().map(|r| r.round as i64)))
        .with(
            "order",
            Column::int64(runs.iter().map(|r| r.position as i64)),
        )
        .with("warmup", Column::bool(runs.iter().map(|r| r.warmup)))
        .with(
            "started_ns",
            Column::int64(runs.iter().map(|r| r.started_ns)),
        )
        .with(
            "duration_ns",
            Column::int64(runs.iter().map(|r| r.duration_ns)),
        )
        .with(
            "status",
            Column::utf8(runs.iter().map(|r| r.status.as_str())),
        )
        .with(
            "error",
            Column::Utf8(runs.iter().map(|r| r.error.clone()).collect()),
        )
        .with(
            "trace",
            Column::Utf8(runs.iter().map(|r| r.trace_path.clone()).collect()),
        );

    let rows: Vec<_> = runs
        .iter()
        .flat_map(|r| r.metrics.iter().map(move |m| (r, m)))
        .collect();
    let metrics = Table::new()
        .with("experiment", Column::int64(rows.iter().map(|_| id)))
        .with("run", Column::int64(rows.iter().map(|(r, _)| r.id)))
        .with(
            "configuration",
            Column::utf8(rows.iter().map(|(r, _)| conf(r))),
        )
        .with("workload", Column::utf8(rows.iter().map(|(r, _)| work(r))))
        .with("warmup", Column::bool(rows.iter().map(|(r, _)| r.warmup)))
        .with(
            "status",
            Column::utf8(rows.iter().map(|(r, _)| r.status.as_str())),
        )
        .with(
            "metric",
            Column::Utf8(rows.iter().map(|(_, m)| Some(m.label())).collect()),
        )
        .with("value", Column::double(rows.iter().map(|(_, m)| m.value)))
        .with(
            "unit",
            Column::utf8(rows.iter().map(|(_, m)| m.unit.as_str())),
        )
        .with(
            "direction",
            Column::utf8(rows.iter().map(|(_, m)| m.direction.as_str())),
        )
        .with("side", Column::bool(rows.iter().map(|(_, m)| m.side)));
    vec![
        ("experiment", experiment),
        ("configurations", configurations),
        ("runs", runs_t),
        ("metrics", metrics),
    ]
}

/// Write [`parquet_tables`] into `dir` as `experiment-ID-TABLE.parquet`; returns the paths.
pub fn write_parquet(e: &StoredExperiment, dir: &Path) -> Result<Vec<PathBuf>, ExportError> {
    write_parquet_named(e, dir, &format!("experiment-{}-", e.info.id))
}

/// Write [`parquet_tables`] into `dir` as `PREFIXTABLE.parquet`; returns the paths.
pub(crate) fn write_parquet_named(
    e: &StoredExperiment,
    dir: &Path,
    prefix: &str,
) -> Result<Vec<PathBuf>, ExportError> {
    let err = |m: String| ExportError {
        id: e.info.id,
        message: m,
    };
    std::fs::create_dir_all(dir).map_err(|x| err(format!("{}: {x}", dir.display())))?;
    let mut out = Vec::new();
    for (name, table) in parquet_tables(e) {
        let path = dir.join(format!("{prefix}{name}.parquet"));
        parquet::write(&path, &table).map_err(|x| err(format!("{}: {x}", path.display())))?;
        out.push(path);
    }
    Ok(out)
}
