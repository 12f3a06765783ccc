//! Wakeup-cause bars: per configuration and CPU, interrupts per second by kind (timer, IPIs by
//! kind, device IRQs) from the interrupt counters, stacked — what pulls a CPU out of idle.

use super::svg::{colour, esc, range, Plot};
use super::table;
use super::View;
use crate::report::fmt_num;
use pmlab_kernel::MetricKey;
use std::fmt::Write;

/// People's names of interrupt kinds.
pub fn cause_name(kind: &str) -> String {
    match kind {
        "LOC" => "timer (LOC)".into(),
        "RES" => "resched IPI (RES)".into(),
        "CAL" => "function-call IPI (CAL)".into(),
        "TLB" => "TLB shootdown (TLB)".into(),
        "device" => "device IRQs".into(),
        k => k.to_string(),
    }
}

/// Kinds shown: arch interrupt kinds (upper-case names) and `device`, with ≥ 0.5/s somewhere.
pub fn kinds(v: &View) -> Vec<String> {
    v.per_cpu_middles("irq.", ".per_s")
        .into_iter()
        .filter(|k| k == "device" || (k != "total" && k.chars().all(|c| c.is_ascii_uppercase())))
        .filter(|k| {
            (0..v.e.configurations.len()).any(|c| {
                v.cpus().iter().any(|cpu| {
                    v.mean(c, MetricKey::on_cpu(format!("irq.{k}.per_s"), *cpu))
                        .is_some_and(|x| x >= 0.5)
                })
            })
        })
        .collect()
}

/// The plot and its table; None without interrupt counters.
pub fn plot(v: &View) -> Option<String> {
    let kinds = kinds(v);
    if kinds.is_empty() {
        return None;
    }
    let mut bars: Vec<(String, Vec<f64>)> = Vec::new();
    for (c, conf) in v.e.configurations.iter().enumerate() {
        for cpu in v.cpus() {
            let vals: Vec<f64> = kinds
                .iter()
                .map(|k| {
                    v.mean(c, MetricKey::on_cpu(format!("irq.{k}.per_s"), cpu))
                        .unwrap_or(0.0)
                })
                .collect();
            bars.push((format!("{} cpu{cpu}", conf.label), vals));
        }
    }
    let n = bars.len();
    let yr = range(bars.iter().map(|b| b.1.iter().sum::<f64>()), true);
    let mut p = Plot::new(
        &format!("{}: what wakes the CPUs — interrupts/s by kind", v.label()),
        720.0,
        300.0,
        (-0.5, n as f64 - 0.5),
        yr,
    );
    p.y_axis("interrupts per second");
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    p.x_categories(&labels, "configuration and CPU");
    let w = ((p.x.at(1.0) - p.x.at(0.0)) * 0.6).min(60.0);
    for (i, (label, vals)) in bars.iter().enumerate() {
        let mut acc = 0.0;
        for (k, x) in vals.iter().enumerate() {
            let (y0, y1) = (p.y.at(acc), p.y.at(acc + x));
            let _ = write!(
                p.body,
                r#"<rect x="{:.1}" y="{y1:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{}: {} {}/s</title></rect>"#,
                p.x.at(i as f64) - w / 2.0,
                (y0 - y1).max(0.0),
                colour(k),
                esc(label),
                esc(&cause_name(&kinds[k])),
                fmt_num(*x)
            );
            acc += x;
        }
    }
    let legend: Vec<(String, &str)> = kinds
        .iter()
        .enumerate()
        .map(|(k, n)| (cause_name(n), colour(k)))
        .collect();
    p.legend(&legend);
    let mut headers = vec!["configuration, CPU".to_string()];
    headers.extend(kinds.iter().map(|k| format!("{} /s", cause_name(k))));
    let rows: Vec<Vec<String>> = bars
        .iter()
        .map(|(l, vals)| {
            let mut r = vec![l.clone()];
            r.extend(vals.iter().map(|x| fmt_num(*x)));
            r
        })
        .collect();
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    Some(format!("{}{}", p.finish(), table::plain(&h, &rows)))
}
