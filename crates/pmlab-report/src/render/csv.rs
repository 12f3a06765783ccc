//! CSV output: one row per workload × configuration × metric with its summary and its
//! comparison against the baseline (for spreadsheets; raw runs come from `results export`).

use super::{Render, RenderError};
use crate::report::Report;
use crate::stats::{Comparison, Summary};

pub struct CsvRender;

const HEADERS: &[&str] = &[
    "experiment",
    "workload",
    "configuration",
    "knobs",
    "metric",
    "unit",
    "side",
    "n",
    "mean",
    "median",
    "stddev",
    "cv",
    "ci_low",
    "ci_high",
    "min",
    "max",
    "outliers",
    "versus",
    "change",
    "change_low",
    "change_high",
    "welch_p",
    "mann_whitney_p",
    "verdict",
    "regime",
];

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        String::new()
    }
}

fn record(
    prefix: &[String],
    s: Option<&Summary>,
    versus: Option<&String>,
    c: Option<&Comparison>,
    regime: String,
) -> Vec<String> {
    let mut r = prefix.to_vec();
    match s {
        Some(s) => r.extend([
            s.n.to_string(),
            num(s.mean),
            num(s.median),
            num(s.stddev),
            num(s.cv),
            num(s.ci_low),
            num(s.ci_high),
            num(s.min),
            num(s.max),
            s.outliers.len().to_string(),
        ]),
        None => r.extend(std::iter::repeat_n(String::new(), 10)),
    }
    r.push(versus.cloned().unwrap_or_default());
    let rel = c.and_then(|c| c.relative);
    r.extend([
        rel.map(|x| num(x.change)).unwrap_or_default(),
        rel.map(|x| num(x.low)).unwrap_or_default(),
        rel.map(|x| num(x.high)).unwrap_or_default(),
        c.and_then(|c| c.welch)
            .map(|w| num(w.p))
            .unwrap_or_default(),
        c.and_then(|c| c.mann_whitney)
            .map(|m| num(m.p))
            .unwrap_or_default(),
        c.map(|c| c.verdict.clone()).unwrap_or_default(),
        regime,
    ]);
    r
}

impl Render for CsvRender {
    fn render(&self, report: &Report) -> Result<String, RenderError> {
        let err = |e: &dyn std::fmt::Display| RenderError {
            format: "csv",
            message: e.to_string(),
        };
        let mut w = ::csv::Writer::from_writer(Vec::new());
        w.write_record(HEADERS).map_err(|e| err(&e))?;
        let ids = report
            .header
            .ids
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("+");
        for wl in &report.workloads {
            for row in &wl.rows {
                if let Some(p) = &wl.primary {
                    let prefix = [
                        ids.clone(),
                        wl.label.clone(),
                        row.label.clone(),
                        row.knobs.clone(),
                        p.label(),
                        p.unit.clone(),
                        "0".into(),
                    ];
                    w.write_record(record(
                        &prefix,
                        row.primary.as_ref(),
                        row.versus.as_ref(),
                        row.comparison.as_ref(),
                        row.population.describe(),
                    ))
                    .map_err(|e| err(&e))?;
                }
                for cell in &row.side {
                    let prefix = [
                        ids.clone(),
                        wl.label.clone(),
                        row.label.clone(),
                        row.knobs.clone(),
                        cell.label(),
                        cell.unit.clone(),
                        "1".into(),
                    ];
                    w.write_record(record(
                        &prefix,
                        cell.summary.as_ref(),
                        row.versus.as_ref(),
                        cell.comparison.as_ref(),
                        String::new(),
                    ))
                    .map_err(|e| err(&e))?;
                }
            }
        }
        let bytes = w.into_inner().map_err(|e| err(&e))?;
        String::from_utf8(bytes).map_err(|e| err(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_one_row_per_configuration_and_metric() {
        let r = super::super::tests::sample_report();
        let text = CsvRender.render(&r).unwrap();
        let mut reader = ::csv::Reader::from_reader(text.as_bytes());
        let rows: Vec<::csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
        assert_eq!(
            rows.len(),
            3 * 3,
            "3 configurations × (primary + 2 side metrics)"
        );
        assert!(rows.iter().all(|r| r.len() == HEADERS.len()));
        assert_eq!(&rows[3][2], "50us");
        assert!(rows[3][23].starts_with("faster by"));
    }
}
