//! Trace analyses of a stored run (its trace.dat, recorded by `--trace` or the study): idle
//! residency per CPU and all-CPUs-idle overlap (`pmlab_analysis::idle`), idle exits per
//! second by cause and who wakes whom (`pmlab_analysis::wakeups`), as a plot and tables.

use super::svg::{colour, esc, range, Plot};
use super::table;
use crate::report::fmt_num;
use crate::store::{RunStatus, StoredExperiment};
use pmlab_analysis::idle::IdleReport;
use pmlab_analysis::wakeups::WakeupsReport;
use std::fmt::Write;

/// The analyses of one traced run.
pub struct Traced {
    pub path: String,
    pub idle: Option<IdleReport>,
    pub wakeups: Option<WakeupsReport>,
    pub notes: Vec<String>,
}

/// Analyse the first measured, successful, traced run of workload `w` (reference configuration
/// first). None when no run has a readable trace.
pub fn analyze(e: &StoredExperiment, w: usize) -> Option<Traced> {
    let run = e.runs.iter().find(|r| {
        r.workload == w && !r.warmup && r.status == RunStatus::Ok && r.trace_path.is_some()
    })?;
    let path = run.trace_path.clone()?;
    let mut notes = Vec::new();
    let trace = match pmlab_trace::open(std::path::Path::new(&path)) {
        Ok(t) => t,
        Err(err) => {
            return Some(Traced {
                path,
                idle: None,
                wakeups: None,
                notes: vec![format!("trace unreadable: {err}")],
            })
        }
    };
    let opts = pmlab_analysis::Options::default();
    let idle = pmlab_analysis::idle::analyze(&trace, &opts)
        .map_err(|m| notes.push(format!("idle analysis: {m}")))
        .ok();
    let wakeups = pmlab_analysis::wakeups::analyze(&trace, &opts)
        .map_err(|m| notes.push(format!("wakeups analysis: {m}")))
        .ok();
    Some(Traced {
        path,
        idle,
        wakeups,
        notes,
    })
}

fn cause_label(kind: impl std::fmt::Display, detail: &str) -> String {
    if detail.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {detail}")
    }
}

/// The section: plot of idle exits/s by cause per CPU, and tables.
pub fn section(label: &str, t: &Traced) -> String {
    let mut s = format!(
        "<h3>{}: from the trace</h3><p class=\"sub\">analysed: <code>{}</code></p>",
        esc(label),
        esc(&t.path)
    );
    if let Some(i) = &t.idle {
        let rows: Vec<Vec<String>> = i
            .cpus
            .iter()
            .map(|c| {
                vec![
                    format!("cpu{}", c.cpu),
                    c.source.label().to_string(),
                    format!("{:.1}", c.share * 100.0),
                    c.entries.to_string(),
                    c.states
                        .iter()
                        .map(|st| format!("{} {:.1}%", st.name, st.share * 100.0))
                        .collect::<Vec<_>>()
                        .join(", "),
                ]
            })
            .collect();
        let _ = write!(
            s,
            "<p>All CPUs idle at once: <b>{:.1}%</b> of {:.2} s (CPUs {}).</p>",
            i.all_idle_share * 100.0,
            i.span_ns as f64 / 1e9,
            esc(&crate::hotplug::format_cpu_list(&i.all_idle_cpus))
        );
        s.push_str(&table::plain(
            &["CPU", "idle from", "idle %", "idle periods", "states"],
            &rows,
        ));
    }
    if let Some(wr) = &t.wakeups {
        s.push_str(&causes_plot(label, wr).unwrap_or_default());
        let rows: Vec<Vec<String>> = wr
            .causes
            .iter()
            .filter(|c| c.cpu != u32::MAX)
            .map(|c| {
                vec![
                    format!("cpu{}", c.cpu),
                    cause_label(c.cause.kind, &c.cause.detail),
                    fmt_num(c.per_s),
                    format!("{:.1}", c.share * 100.0),
                    c.origin
                        .as_ref()
                        .map(|(o, n)| format!("{o} ({n})"))
                        .unwrap_or_default(),
                ]
            })
            .take(40)
            .collect();
        s.push_str(&table::plain(
            &[
                "CPU",
                "cause of idle exit",
                "per s",
                "% of exits",
                "top originator",
            ],
            &rows,
        ));
        if !wr.wakers.is_empty() {
            let rows: Vec<Vec<String>> = wr
                .wakers
                .iter()
                .take(15)
                .map(|w| {
                    vec![
                        w.waker.clone(),
                        w.wakee.clone(),
                        format!("cpu{}", w.cpu),
                        w.count.to_string(),
                        fmt_num(w.per_s),
                    ]
                })
                .collect();
            s.push_str("<p>Who wakes whom:</p>");
            s.push_str(&table::plain(
                &["waker", "wakee", "on CPU", "wakeups", "per s"],
                &rows,
            ));
        }
    }
    let mut notes: Vec<&String> = t
        .notes
        .iter()
        .chain(t.idle.iter().flat_map(|i| i.notes.iter()))
        .chain(t.wakeups.iter().flat_map(|w| w.notes.iter()))
        .collect();
    let mut seen = std::collections::HashSet::new();
    notes.retain(|n| seen.insert(n.as_str()));
    if !notes.is_empty() {
        s.push_str("<ul class=\"sub\">");
        for n in notes {
            let _ = write!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>");
    }
    s
}

fn causes_plot(label: &str, wr: &WakeupsReport) -> Option<String> {
    let rows: Vec<_> = wr.causes.iter().filter(|c| c.cpu != u32::MAX).collect();
    if rows.is_empty() {
        return None;
    }
    let mut cpus: Vec<u32> = rows.iter().map(|c| c.cpu).collect();
    cpus.sort();
    cpus.dedup();
    let mut names: Vec<String> = Vec::new();
    for c in &rows {
        let n = cause_label(c.cause.kind, &c.cause.detail);
        if !names.contains(&n) && names.len() < 9 {
            names.push(n);
        }
    }
    let known = names.clone();
    let name_of = |c: &pmlab_analysis::wakeups::CauseRow| {
        let n = cause_label(c.cause.kind, &c.cause.detail);
        if known.contains(&n) {
            n
        } else {
            "other".to_string()
        }
    };
    if rows.iter().any(|c| name_of(c) == "other") {
        names.push("other".into());
    }
    let totals: Vec<f64> = cpus
        .iter()
        .map(|cpu| rows.iter().filter(|c| c.cpu == *cpu).map(|c| c.per_s).sum())
        .collect();
    let mut p = Plot::new(
        &format!("{label}: idle exits per second by cause (trace)"),
        720.0,
        300.0,
        (-0.5, cpus.len() as f64 - 0.5),
        range(totals.iter().copied(), true),
    );
    p.y_axis("idle exits per second");
    let labels: Vec<String> = cpus.iter().map(|c| format!("cpu{c}")).collect();
    p.x_categories(&labels, "CPU");
    let w = ((p.x.at(1.0) - p.x.at(0.0)) * 0.5).min(60.0);
    for (i, cpu) in cpus.iter().enumerate() {
        let mut acc = 0.0;
        for (k, n) in names.iter().enumerate() {
            let x: f64 = rows
                .iter()
                .filter(|c| c.cpu == *cpu && &name_of(c) == n)
                .map(|c| c.per_s)
                .sum();
            if x <= 0.0 {
                continue;
            }
            let (y0, y1) = (p.y.at(acc), p.y.at(acc + x));
            let _ = write!(
                p.body,
                r#"<rect x="{:.1}" y="{y1:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>cpu{cpu}: {} {}/s</title></rect>"#,
                p.x.at(i as f64) - w / 2.0,
                (y0 - y1).max(0.0),
                colour(k),
                esc(n),
                fmt_num(x)
            );
            acc += x;
        }
    }
    let legend: Vec<(String, &str)> = names
        .iter()
        .enumerate()
        .map(|(k, n)| (n.clone(), colour(k)))
        .collect();
    p.legend(&legend);
    Some(p.finish())
}
