//! Sweep and compare curves: each configuration's mean with its 95% CI (a band for sweeps,
//! whiskers for compares), the knee marked, relative change vs the reference on hover.

use super::svg::{colour, esc, range, Plot};
use crate::report::{fmt_mean_ci, WorkloadReport};
use std::fmt::Write;

/// The curve of one workload over its configurations; None without data.
pub fn curve(w: &WorkloadReport, sweep: bool) -> Option<String> {
    let unit = w
        .primary
        .as_ref()
        .map(|p| p.unit.clone())
        .unwrap_or_default();
    let name = w
        .primary
        .as_ref()
        .map(|p| p.name.clone())
        .unwrap_or_default();
    let pts: Vec<(usize, f64, f64, f64)> = w
        .rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let s = r.primary.as_ref()?;
            let (lo, hi) = if s.ci_low.is_finite() {
                (s.ci_low, s.ci_high)
            } else {
                (s.mean, s.mean)
            };
            Some((i, s.mean, lo, hi))
        })
        .collect();
    if pts.is_empty() {
        return None;
    }
    let n = w.rows.len();
    let yr = range(pts.iter().flat_map(|p| [p.2, p.3]), true);
    let title = if sweep {
        format!("{}: {name} per value (95% CI band)", w.label)
    } else {
        format!("{}: {name} per configuration (95% CI)", w.label)
    };
    let mut p = Plot::new(&title, 720.0, 300.0, (-0.5, n as f64 - 0.5), yr);
    p.y_axis(&format!("{name} ({unit})"));
    let labels: Vec<String> = w.rows.iter().map(|r| r.label.clone()).collect();
    p.x_categories(&labels, if sweep { "value" } else { "configuration" });
    if sweep && pts.len() >= 2 {
        let mut band = String::new();
        for (i, _, _, hi) in &pts {
            let _ = write!(band, "{:.1},{:.1} ", p.x.at(*i as f64), p.y.at(*hi));
        }
        for (i, _, lo, _) in pts.iter().rev() {
            let _ = write!(band, "{:.1},{:.1} ", p.x.at(*i as f64), p.y.at(*lo));
        }
        let line: Vec<String> = pts
            .iter()
            .map(|(i, m, _, _)| format!("{:.1},{:.1}", p.x.at(*i as f64), p.y.at(*m)))
            .collect();
        let _ = write!(
            p.body,
            r#"<polygon class="band" points="{}" fill="{c}" fill-opacity="0.18"/><polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
            band.trim(),
            line.join(" "),
            c = colour(0)
        );
    }
    for (i, m, lo, hi) in &pts {
        let r = &w.rows[*i];
        let x = p.x.at(*i as f64);
        let c = if sweep { colour(0) } else { colour(*i) };
        let mut hover = format!(
            "{}: {} {unit}",
            r.label,
            r.primary.as_ref().map(fmt_mean_ci).unwrap_or_default()
        );
        if let (Some(cmp), Some(v)) = (&r.comparison, &r.versus) {
            let _ = write!(hover, "; vs {v}: {}", cmp.verdict);
        }
        let _ = write!(
            p.body,
            r#"<g><title>{}</title><line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="2"/><circle cx="{x:.1}" cy="{:.1}" r="5" fill="{c}"/></g>"#,
            esc(&hover),
            p.y.at(*lo),
            p.y.at(*hi),
            p.y.at(*m)
        );
    }
    if let Some(k) = &w.knee {
        if let Some(i) = w.rows.iter().position(|r| r.label == k.label) {
            let x = p.x.at(i as f64);
            let (_, _, t, b) = p.area();
            let _ = write!(
                p.body,
                r#"<g class="knee"><title>knee: {} (within {:.1}% of the best, {})</title><line x1="{x:.1}" x2="{x:.1}" y1="{t:.1}" y2="{b:.1}" stroke="dimgray" stroke-dasharray="5,4"/><text class="tick" x="{:.1}" y="{:.1}">knee</text></g>"#,
                esc(&k.label),
                k.margin * 100.0,
                esc(&k.best),
                x + 4.0,
                t + 12.0
            );
        }
    }
    Some(p.finish())
}

/// Hover text per row (relative change vs the reference), for the table under the plot.
pub fn row_hover(w: &WorkloadReport) -> Vec<String> {
    w.rows
        .iter()
        .map(|r| match (&r.comparison, &r.versus) {
            (Some(c), Some(v)) => format!("{} vs {v}: {}", r.label, c.verdict),
            _ => String::new(),
        })
        .collect()
}
