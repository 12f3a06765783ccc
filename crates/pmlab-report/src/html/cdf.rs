//! Latency CDFs for the `wakeup` workload: per configuration, the stored percentiles (min,
//! p50, p90, p99, p99.9, max; averaged over runs) on a "nines" scale, overlaid.

use super::svg::{colour, esc, range, Plot};
use super::table;
use super::View;
use crate::report::fmt_num;
use std::fmt::Write;

/// Percentile metrics and their probability.
const POINTS: &[(&str, f64, &str)] = &[
    ("latency.min_us", 0.0, "min"),
    ("latency.p50_us", 0.5, "p50"),
    ("latency.p90_us", 0.9, "p90"),
    ("latency.p99_us", 0.99, "p99"),
    ("latency.p99.9_us", 0.999, "p99.9"),
    ("latency.max_us", 1.0, "max"),
];

/// Position of a probability on the nines scale (p99 = 2, max = 4).
fn nines(p: f64) -> f64 {
    if p >= 1.0 {
        4.0
    } else {
        -(1.0 - p).log10()
    }
}

/// The CDF plot and its table; None when the workload has no latency percentiles.
pub fn plot(v: &View) -> Option<String> {
    let series: Vec<(String, Vec<(f64, f64)>)> = (0..v.e.configurations.len())
        .map(|c| {
            let pts = POINTS
                .iter()
                .filter_map(|(m, p, _)| v.mean(c, *m).map(|x| (x, nines(*p))))
                .collect();
            (v.e.configurations[c].label.clone(), pts)
        })
        .filter(|(_, p): &(String, Vec<(f64, f64)>)| p.len() >= 2)
        .collect();
    if series.is_empty() {
        return None;
    }
    let xr = range(series.iter().flat_map(|s| s.1.iter().map(|p| p.0)), true);
    let mut p = Plot::new(
        &format!(
            "{}: wakeup latency CDF (percentiles, mean over runs)",
            v.label()
        ),
        720.0,
        300.0,
        xr,
        (0.0, 4.2),
    );
    p.x_axis("wakeup latency (µs)");
    let (l, _, _, _) = p.area();
    for (_, prob, name) in POINTS.iter().skip(1) {
        let y = p.y.at(nines(*prob));
        let _ = write!(
            p.body,
            r#"<line class="grid" x1="{l:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{name}</text>"#,
            p.width - 16.0,
            l - 6.0,
            y + 4.0
        );
    }
    for (i, (label, pts)) in series.iter().enumerate() {
        let line: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", p.x.at(*x), p.y.at(*y)))
            .collect();
        let _ = write!(
            p.body,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"><title>{}</title></polyline>"#,
            line.join(" "),
            colour(i),
            esc(label)
        );
        for (x, y) in pts {
            let _ = write!(
                p.body,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"><title>{}: {} µs</title></circle>"#,
                p.x.at(*x),
                p.y.at(*y),
                colour(i),
                esc(label),
                fmt_num(*x)
            );
        }
    }
    let legend: Vec<(String, &str)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.0.clone(), colour(i)))
        .collect();
    p.legend(&legend);
    let mut headers = vec!["configuration"];
    headers.extend(POINTS.iter().map(|x| x.2));
    let rows: Vec<Vec<String>> = (0..v.e.configurations.len())
        .map(|c| {
            let mut r = vec![v.e.configurations[c].label.clone()];
            r.extend(
                POINTS
                    .iter()
                    .map(|(m, _, _)| v.mean(c, *m).map(fmt_num).unwrap_or("-".into())),
            );
            r
        })
        .collect();
    Some(format!("{}{}", p.finish(), table::plain(&headers, &rows)))
}
