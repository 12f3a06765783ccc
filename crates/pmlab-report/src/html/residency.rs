//! Stacked idle-residency bars per CPU and configuration: per-state shares where the cpuidle
//! counters give them (`idle.STATE.share_pct@cpuN`), else idle vs busy from `/proc/stat`
//! (`cpu.busy_pct@cpuN`), said in the plot title.

use super::svg::{colour, esc, Plot};
use super::table;
use super::View;
use crate::report::fmt_num;
use pmlab_kernel::MetricKey;
use std::fmt::Write;

/// (segment name, share in percent) per bar.
type Bar = (String, Vec<(String, f64)>);

fn bars(v: &View) -> (Vec<Bar>, bool) {
    let mut out = Vec::new();
    let states = v.per_cpu_middles("idle.", ".share_pct");
    let per_state = !states.is_empty();
    for (c, conf) in v.e.configurations.iter().enumerate() {
        for cpu in v.cpus() {
            let mut segs = Vec::new();
            if per_state {
                for s in &states {
                    if let Some(x) =
                        v.mean(c, MetricKey::on_cpu(format!("idle.{s}.share_pct"), cpu))
                    {
                        segs.push((s.clone(), x));
                    }
                }
            } else if let Some(busy) = v.mean(c, MetricKey::on_cpu("cpu.busy_pct", cpu)) {
                segs.push((
                    "idle (no per-state data)".to_string(),
                    (100.0 - busy).max(0.0),
                ));
            }
            if segs.is_empty() {
                continue;
            }
            let idle: f64 = segs.iter().map(|s| s.1).sum();
            segs.push(("busy".into(), (100.0 - idle).max(0.0)));
            out.push((format!("{} cpu{cpu}", conf.label), segs));
        }
    }
    (out, per_state)
}

/// The plot and its table; None without residency data.
pub fn plot(v: &View) -> Option<String> {
    let (bars, per_state) = bars(v);
    if bars.is_empty() {
        return None;
    }
    let mut names: Vec<String> = Vec::new();
    for (_, segs) in &bars {
        for (n, _) in segs {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let title = if per_state {
        format!("{}: idle-state residency per CPU (% of time)", v.label())
    } else {
        format!(
            "{}: idle vs busy per CPU (% of time; no cpuidle per-state counters here)",
            v.label()
        )
    };
    let n = bars.len();
    let mut p = Plot::new(&title, 720.0, 300.0, (-0.5, n as f64 - 0.5), (0.0, 100.0));
    p.y_axis("% of time");
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    p.x_categories(&labels, "configuration and CPU");
    let w = ((p.x.at(1.0) - p.x.at(0.0)) * 0.6).min(60.0);
    for (i, (label, segs)) in bars.iter().enumerate() {
        let mut acc = 0.0;
        for (name, share) in segs {
            let k = names.iter().position(|x| x == name).unwrap_or(0);
            let fill = if name == "busy" {
                "#bbbbbb"
            } else {
                colour(k + 2)
            };
            let (y0, y1) = (p.y.at(acc), p.y.at(acc + share));
            let _ = write!(
                p.body,
                r#"<rect x="{:.1}" y="{y1:.1}" width="{w:.1}" height="{:.1}" fill="{fill}"><title>{}: {} {}%</title></rect>"#,
                p.x.at(i as f64) - w / 2.0,
                (y0 - y1).max(0.0),
                esc(label),
                esc(name),
                fmt_num(*share)
            );
            acc += share;
        }
    }
    let legend: Vec<(String, &str)> = names
        .iter()
        .enumerate()
        .map(|(k, n)| {
            (
                n.clone(),
                if n == "busy" {
                    "#bbbbbb"
                } else {
                    colour(k + 2)
                },
            )
        })
        .collect();
    p.legend(&legend);
    let mut headers = vec!["configuration, CPU".to_string()];
    headers.extend(names.iter().map(|n| format!("{n} %")));
    let rows: Vec<Vec<String>> = bars
        .iter()
        .map(|(l, segs)| {
            let mut r = vec![l.clone()];
            r.extend(names.iter().map(|n| {
                segs.iter()
                    .find(|s| &s.0 == n)
                    .map(|s| fmt_num(s.1))
                    .unwrap_or("-".into())
            }));
            r
        })
        .collect();
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    Some(format!("{}{}", p.finish(), table::plain(&h, &rows)))
}
