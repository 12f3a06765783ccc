//! Trace analyses of a stored run (its trace.dat, recorded by `--trace` or the study): idle
//! residency per CPU and all-CPUs-idle overlap (`pmlab_analysis::idle`), idle exits per
//! second by cause and who wakes whom (`pmlab_analysis::wakeups`), as a plot and tables; and
//! "polling (predicted)": the trace replayed under the haltpoll governor
//! (`pmlab_analysis::replay`), predicted µs/op and CPU burned against the poll value.

use super::svg::{colour, esc, range, Plot};
use super::table;
use crate::report::fmt_num;
use crate::store::{RunStatus, StoredExperiment};
use pmlab_analysis::idle::IdleReport;
use pmlab_analysis::replay::{self, WhatifReport};
use pmlab_analysis::wakeups::WakeupsReport;
use std::fmt::Write;

/// The share of decided exits that were needless (no task ran before the next idle entry);
/// empty where none could be decided (idle-task CPUs).
fn needless_pct(n: &pmlab_analysis::wakeups::NeedlessSum) -> String {
    if n.exits == 0 {
        String::new()
    } else {
        format!("{:.1}", n.needless as f64 * 100.0 / n.exits as f64)
    }
}

/// One sentence per CPU: needless wakeups per second, or why they cannot be seen there.
fn needless_line(wr: &WakeupsReport) -> String {
    let parts: Vec<String> = wr
        .cpus
        .iter()
        .map(|c| match (&c.needless, c.needless_per_s) {
            (Some(n), Some(v)) => format!(
                "cpu{}: <b>{}</b>/s ({} of {} exits, {:.2} ms of idle cut short)",
                c.cpu,
                fmt_num(v),
                n.needless,
                c.exits,
                n.cut_idle_ns as f64 / 1e6
            ),
            _ => format!("cpu{}: not visible (no cpu_idle events)", c.cpu),
        })
        .collect();
    // Numbers and fixed words only: nothing to escape.
    format!(
        "<p>Needless wakeups (no task ran before the CPU idled again): {}.</p>",
        parts.join("; ")
    )
}

/// The analyses of one traced run.
pub struct Traced {
    /// The trace file.
    pub path: String,
    /// Idle residency, if its events were recorded.
    pub idle: Option<IdleReport>,
    /// Wakeup causes, if their events were recorded.
    pub wakeups: Option<WakeupsReport>,
    /// What idle polling would have done (a prediction, with bounds).
    pub whatif: Option<WhatifReport>,
    /// What the analyses said about the trace.
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
                whatif: None,
                notes: vec![format!("trace unreadable: {err}")],
            })
        }
    };
    let opts = pmlab_analysis::Options::default();
    let periods = pmlab_analysis::idle::periods(&trace, &opts);
    let idle = match &periods {
        Ok(p) => Some(pmlab_analysis::idle::report(&trace, &opts, p)),
        Err(m) => {
            notes.push(format!("idle analysis: {m}"));
            None
        }
    };
    // The wakeups report and the replay's input come from one walk.
    let (wakeups, whatif) = match &periods {
        Ok(p) => match replay::prepare_with(&trace, &opts, p) {
            Ok((w, input)) => (
                Some(w),
                Some(replay::replay(&input, &replay::Config::default())),
            ),
            Err(m) => {
                notes.push(format!("polling (predicted): {m}"));
                let w = pmlab_analysis::wakeups::analyze_with(&trace, &opts, p);
                (
                    w.map_err(|m| notes.push(format!("wakeups analysis: {m}")))
                        .ok(),
                    None,
                )
            }
        },
        Err(_) => (
            pmlab_analysis::wakeups::analyze(&trace, &opts)
                .map_err(|m| notes.push(format!("wakeups analysis: {m}")))
                .ok(),
            None,
        ),
    };
    Some(Traced {
        path,
        idle,
        wakeups,
        whatif,
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
            esc(&pmlab_kernel::cpulist::format_cpu_list(&i.all_idle_cpus))
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
                    needless_pct(&c.needless),
                ]
            })
            .take(40)
            .collect();
        s.push_str(&needless_line(wr));
        s.push_str(&table::plain(
            &[
                "CPU",
                "cause of idle exit",
                "per s",
                "% of exits",
                "top originator",
                "% needless",
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
    if let Some(wi) = &t.whatif {
        s.push_str(&polling_predicted(label, wi));
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

/// "Polling (predicted)": predicted µs/op (first-order .. causal) and poll CPU burned against
/// the poll value, the knee marked; a table of the same.
fn polling_predicted(label: &str, w: &WhatifReport) -> String {
    let mut s = format!(
        "<h4>polling (predicted): {}</h4><p class=\"sub\">A prediction, not a measurement: \
         this trace's idle periods replayed under the haltpoll governor at each \
         <code>guest_halt_poll_ns</code> (<code>pmlab whatif</code>); bounds from the \
         first-order and causal replays.</p>",
        esc(label)
    );
    if w.values.is_empty() {
        return s;
    }
    let labels: Vec<String> = w
        .values
        .iter()
        .map(|v| format!("{}us", v.value_ns / 1000))
        .collect();
    let n = w.values.len() as f64;
    let knee = w
        .knee_ns
        .and_then(|k| w.values.iter().position(|v| v.value_ns == k));
    let mark_knee = |p: &mut Plot| {
        if let Some(i) = knee {
            let x = p.x.at(i as f64);
            let (_, _, t, b) = p.area();
            let _ = write!(
                p.body,
                r#"<g class="knee"><title>knee: {} (95% of the best latency saved)</title><line x1="{x:.1}" x2="{x:.1}" y1="{t:.1}" y2="{b:.1}" stroke="dimgray" stroke-dasharray="5,4"/><text class="tick" x="{:.1}" y="{:.1}">knee</text></g>"#,
                esc(&labels[i]),
                x + 4.0,
                t + 12.0
            );
        }
    };
    let series = |p: &mut Plot, pts: &[(usize, f64)], k: usize, what: &str| {
        let line: Vec<String> = pts
            .iter()
            .map(|(i, y)| format!("{:.1},{:.1}", p.x.at(*i as f64), p.y.at(*y)))
            .collect();
        let _ = write!(
            p.body,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
            line.join(" "),
            c = colour(k)
        );
        for (i, y) in pts {
            let _ = write!(
                p.body,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{}"><title>{}: {what} {}</title></circle>"#,
                p.x.at(*i as f64),
                p.y.at(*y),
                colour(k),
                esc(&labels[*i]),
                fmt_num(*y)
            );
        }
    };
    let ops: Vec<(usize, f64, f64)> = w
        .values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.us_per_op.map(|b| (i, b.first_order, b.causal)))
        .collect();
    if !ops.is_empty() {
        let mut p = Plot::new(
            &format!("{label}: predicted µs/op against the poll value"),
            720.0,
            280.0,
            (-0.5, n - 0.5),
            range(ops.iter().flat_map(|o| [o.1, o.2]), true),
        );
        p.y_axis("µs/op (predicted, traced)");
        p.x_categories(&labels, "guest_halt_poll_ns");
        let fo: Vec<(usize, f64)> = ops.iter().map(|o| (o.0, o.1)).collect();
        let ca: Vec<(usize, f64)> = ops.iter().map(|o| (o.0, o.2)).collect();
        series(&mut p, &fo, 0, "first-order µs/op");
        series(&mut p, &ca, 1, "causal µs/op");
        mark_knee(&mut p);
        p.legend(&[
            ("first-order".to_string(), colour(0)),
            ("causal".to_string(), colour(1)),
        ]);
        s.push_str(&p.finish());
    }
    let cpu: Vec<(usize, f64)> = w
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| (i, v.poll_share_wall * 100.0))
        .collect();
    let mut p = Plot::new(
        &format!("{label}: poll CPU burned against the poll value (predicted)"),
        720.0,
        240.0,
        (-0.5, n - 0.5),
        range(cpu.iter().map(|c| c.1), true),
    );
    p.y_axis("poll time, % of wall");
    p.x_categories(&labels, "guest_halt_poll_ns");
    series(&mut p, &cpu, 2, "poll % of wall");
    mark_knee(&mut p);
    s.push_str(&p.finish());
    let rows: Vec<Vec<String>> = w
        .values
        .iter()
        .zip(&labels)
        .map(|(v, l)| {
            vec![
                l.clone(),
                format!("{:.1}", v.catch_rate * 100.0),
                v.halts_avoided.to_string(),
                format!("{:.1}", v.poll_share_wall * 100.0),
                fmt_num(v.saved_ns as f64 / 1e6),
                v.us_per_op
                    .map(|b| format!("{} .. {}", fmt_num(b.causal), fmt_num(b.first_order)))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    s.push_str(&table::plain(
        &[
            "poll value",
            "wakes caught %",
            "halts avoided",
            "poll % of wall",
            "latency saved ms",
            "µs/op (predicted)",
        ],
        &rows,
    ));
    s
}
