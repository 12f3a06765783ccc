//! Per-CPU runtime of the `spin` workload: mean ± standard deviation over runs, per CPU and
//! configuration, as bars with whiskers.

use super::svg::{colour, esc, range, Plot};
use super::table;
use super::View;
use crate::report::fmt_num;
use crate::stats::Summary;
use pmlab_kernel::MetricKey;
use std::fmt::Write;

/// (label, summary of runtime_ms@cpuN over runs).
pub fn per_cpu(v: &View) -> Vec<(String, Summary)> {
    let mut out = Vec::new();
    for (c, conf) in v.e.configurations.iter().enumerate() {
        for cpu in v.cpus() {
            let xs = v.e.samples(v.w, c, MetricKey::on_cpu("runtime_ms", cpu));
            if let Some(s) = Summary::of(&xs) {
                out.push((format!("{} cpu{cpu}", conf.label), s));
            }
        }
    }
    out
}

/// The plot and its table; None when the workload has no per-CPU runtimes.
pub fn plot(v: &View) -> Option<String> {
    let bars = per_cpu(v);
    if bars.is_empty() {
        return None;
    }
    let n = bars.len();
    let sd = |s: &Summary| if s.stddev.is_finite() { s.stddev } else { 0.0 };
    let yr = range(bars.iter().map(|b| b.1.mean + sd(&b.1)), true);
    let mut p = Plot::new(
        &format!("{}: runtime per CPU (mean ± stddev over runs)", v.label()),
        720.0,
        300.0,
        (-0.5, n as f64 - 0.5),
        yr,
    );
    p.y_axis("runtime (ms)");
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    p.x_categories(&labels, "configuration and CPU");
    let w = ((p.x.at(1.0) - p.x.at(0.0)) * 0.5).min(50.0);
    for (i, (label, s)) in bars.iter().enumerate() {
        let x = p.x.at(i as f64);
        let (y0, ym) = (p.y.at(0.0), p.y.at(s.mean));
        let _ = write!(
            p.body,
            r#"<g><title>{}: {} ± {} ms (n = {})</title><rect x="{:.1}" y="{ym:.1}" width="{w:.1}" height="{:.1}" fill="{}"/><line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="black" stroke-width="1.5"/></g>"#,
            esc(label),
            fmt_num(s.mean),
            fmt_num(sd(s)),
            s.n,
            x - w / 2.0,
            (y0 - ym).max(0.0),
            colour(i / v.cpus().len().max(1)),
            p.y.at(s.mean - sd(s)),
            p.y.at(s.mean + sd(s)),
        );
    }
    let rows: Vec<Vec<String>> = bars
        .iter()
        .map(|(l, s)| {
            vec![
                l.clone(),
                s.n.to_string(),
                fmt_num(s.mean),
                fmt_num(sd(s)),
                format!("{:.1}%", s.cv * 100.0),
                fmt_num(s.min),
                fmt_num(s.max),
            ]
        })
        .collect();
    Some(format!(
        "{}{}",
        p.finish(),
        table::plain(
            &[
                "configuration, CPU",
                "n",
                "mean ms",
                "stddev ms",
                "CV",
                "min",
                "max"
            ],
            &rows
        )
    ))
}
