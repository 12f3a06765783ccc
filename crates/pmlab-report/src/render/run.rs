//! `pmlab run`: one workload run for people (its metrics, regime and side metrics as tables
//! of totals and per-CPU values) and as JSON.

use super::RenderError;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, Table};
use pmlab_kernel::{Direction, Metric};
use pmlab_workload::{Regime, WorkloadResult, WorkloadSpec};
use std::collections::BTreeMap;

/// `pmlab run --json`: the workload, its metrics and side metrics, the regime it ran in, the
/// histogram's non-empty buckets and the knobs set for it.
pub fn json(
    spec: &WorkloadSpec,
    r: &WorkloadResult,
    side: &[Metric],
    knobs: &[impl ToString],
) -> Result<String, RenderError> {
    let knobs: Vec<String> = knobs.iter().map(ToString::to_string).collect();
    let out = serde_json::json!({
        "workload": spec,
        "description": spec.describe(),
        "primary": r.primary().name,
        "metrics": r.metrics,
        "side_metrics": side,
        "wall_ns": r.wall.0,
        "placement": spec.placement(),
        "regime": Regime::of_result(&r.metrics),
        "histogram": r.histogram.as_ref().map(|h| serde_json::json!({
            "bucket_ns": h.bucket.0,
            "overflow": h.overflow,
            // [bucket start in ns, samples], non-empty buckets only
            "counts": h.counts.iter().enumerate().filter(|(_, c)| **c > 0)
                .map(|(i, c)| [i as u64 * h.bucket.0, *c]).collect::<Vec<_>>(),
        })),
        "knobs": knobs,
    });
    serde_json::to_string_pretty(&out)
        .map(|s| s + "\n")
        .map_err(|e| RenderError {
            format: "json",
            message: e.to_string(),
        })
}

/// A number for people: 4-5 significant digits, no exponent.
fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if a >= 10_000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

fn direction_word(d: Direction) -> &'static str {
    match d {
        Direction::Lower => "lower is better",
        Direction::Higher => "higher is better",
        Direction::Neutral => "",
    }
}

/// Rows = metric names, columns = total then each CPU.
fn pivot(metrics: &[Metric], total_header: &str, hide_zero_rows: impl Fn(&str) -> bool) -> Table {
    let mut order: Vec<&str> = Vec::new();
    let mut rows: BTreeMap<&str, (Option<&Metric>, BTreeMap<u32, f64>)> = BTreeMap::new();
    let mut cpus: Vec<u32> = Vec::new();
    for m in metrics {
        let (base, cpu) = (m.name.as_str(), m.cpu);
        let row = rows.entry(base).or_insert_with(|| {
            order.push(base);
            (None, BTreeMap::new())
        });
        match cpu {
            Some(c) => {
                row.1.insert(c, m.value);
                if !cpus.contains(&c) {
                    cpus.push(c);
                }
            }
            None => row.0 = Some(m),
        }
    }
    cpus.sort_unstable();
    let unit_of = |base: &str| {
        metrics
            .iter()
            .find(|m| m.name == base)
            .map(|m| m.unit.clone())
            .unwrap_or_default()
    };
    let mut table = Table::new();
    table.load_preset(UTF8_BORDERS_ONLY);
    let mut header = vec![
        Cell::new("metric"),
        Cell::new("unit"),
        Cell::new(total_header),
    ];
    header.extend(cpus.iter().map(|c| Cell::new(format!("cpu{c}"))));
    table.set_header(header);
    for base in order {
        let (total, per_cpu) = &rows[base];
        let all_zero = total.is_none_or(|m| m.value == 0.0) && per_cpu.values().all(|v| *v == 0.0);
        if all_zero && hide_zero_rows(base) {
            continue;
        }
        let mut row = vec![Cell::new(base), Cell::new(unit_of(base))];
        row.push(
            Cell::new(total.map(|m| fmt_value(m.value)).unwrap_or_default())
                .set_alignment(CellAlignment::Right),
        );
        for c in &cpus {
            let text = per_cpu.get(c).map(|v| fmt_value(*v)).unwrap_or_default();
            row.push(Cell::new(text).set_alignment(CellAlignment::Right));
        }
        table.add_row(row);
    }
    table
}

/// `pmlab run` for people: the primary metric, the regime, every metric per CPU, the
/// histogram's extent, and the side metrics over the measured window.
pub fn text(spec: &WorkloadSpec, r: &WorkloadResult, side: &[Metric]) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let p = r.primary();
    let dir = direction_word(p.direction);
    let _ = writeln!(o, "{}", spec.describe());
    let _ = writeln!(
        o,
        "{}: {}{}   (wall {} s)",
        p.name,
        format!("{} {}", fmt_value(p.value), p.unit).trim_end(),
        if dir.is_empty() {
            String::new()
        } else {
            format!("   ({dir})")
        },
        fmt_value(r.wall.0 as f64 / 1e9)
    );
    if let Some(regime) = Regime::of_result(&r.metrics) {
        let _ = writeln!(
            o,
            "regime: {regime}{}",
            match spec.placement() {
                Some(pmlab_workload::Placement::Any) => " (the scheduler's choice)",
                _ => " (pinned)",
            }
        );
    }
    if r.metrics.len() > 1 {
        let _ = writeln!(o, "{}", pivot(&r.metrics, "value", |_| false));
    }
    if let Some(h) = &r.histogram {
        let total: u64 = h.counts.iter().sum::<u64>() + h.overflow;
        let _ = writeln!(
            o,
            "histogram: {} samples in {} µs buckets, {} beyond {} µs (see --json)",
            total,
            h.bucket.0 / 1000,
            h.overflow,
            h.counts.len() as u64 * h.bucket.0 / 1000
        );
    }
    if side.is_empty() {
        return o;
    }
    let window = side
        .iter()
        .find(|m| m.name == "counters.window_s")
        .map(|m| m.value)
        .unwrap_or(0.0);
    let _ = writeln!(
        o,
        "\nside metrics over the measured {} s (kernel counters; all-zero interrupt rows hidden):",
        fmt_value(window)
    );
    let rest: Vec<Metric> = side
        .iter()
        .filter(|m| m.name != "counters.window_s")
        .cloned()
        .collect();
    let _ = writeln!(
        o,
        "{}",
        pivot(&rest, "total", |base| base.starts_with("irq.")
            || base.starts_with("softirq."))
    );
    o
}
