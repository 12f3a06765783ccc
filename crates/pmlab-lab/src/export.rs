//! Raw exports of a stored experiment for pandas, polars and DuckDB: a long CSV table (one
//! row per run and metric) and JSON (everything stored).

use crate::store::StoredExperiment;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[error("export of experiment {id}: {message}")]
pub struct ExportError {
    pub id: i64,
    pub message: String,
}

/// The CSV header of [`runs_csv`].
pub const RUNS_CSV_HEADER: &[&str] = &[
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
                m.name.clone(),
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
