//! The result store as tables for people: the experiments it holds (`pmlab results list`) and
//! one experiment's runs (`pmlab results show --runs`).

use crate::store::{format_time, ExperimentInfo, StoredExperiment};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

/// The experiments of a store, one row each, as a terminal table (without a final newline).
pub fn experiments(infos: &[ExperimentInfo]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "id",
        "started (UTC)",
        "kind",
        "name",
        "configs",
        "runs",
        "failed",
        "status",
    ]);
    for i in infos {
        t.add_row([
            i.id.to_string(),
            format_time(i.created_ns),
            i.kind.as_str().to_string(),
            i.name.clone(),
            i.configurations.to_string(),
            i.runs.to_string(),
            i.failed_runs.to_string(),
            i.status.as_str().to_string(),
        ]);
    }
    t.to_string()
}

/// The runs of an experiment in run order, warm-ups included, as a terminal table (without a
/// final newline): round, position, configuration, workload, duration, status, the primary
/// metric and the first line of an error.
pub fn runs(e: &StoredExperiment) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "run",
        "round",
        "order",
        "configuration",
        "workload",
        "duration",
        "status",
        "primary",
        "error",
    ]);
    for r in &e.runs {
        let primary = r
            .metrics
            .iter()
            .find(|m| !m.side)
            .map(|m| format!("{} {}", crate::report::fmt_num(m.value), m.unit))
            .unwrap_or_default();
        t.add_row([
            r.id.to_string(),
            if r.warmup {
                "warm-up".into()
            } else {
                r.round.to_string()
            },
            r.position.to_string(),
            e.configurations[r.configuration].label.clone(),
            e.workloads[r.workload].label.clone(),
            format!("{:.3}s", r.duration_ns as f64 / 1e9),
            r.status.as_str().to_string(),
            primary,
            r.error
                .clone()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
        ]);
    }
    t.to_string()
}
