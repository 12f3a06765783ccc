//! The findings that open a report: sentences with numbers, derived from the stored runs and
//! from `report`'s summaries, comparisons and knees (never recomputed differently), ranked
//! so that the three that matter most come first.

use super::causes::{cause_name, kinds};
use super::hotplug::{groups, is_hotplug, slowest_steps};
use super::{StageNote, StageStatus, View};
use crate::report::{Report, WorkloadReport};
use crate::stats::percentile;
use crate::stats::Summary;
use crate::store::StoredExperiment;
use pmlab_kernel::MetricKey;
use serde::Serialize;
use std::collections::BTreeMap;

/// One finding: a sentence, its rank and the numbers in it (for tests and JSON readers).
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Higher first.
    pub score: u32,
    /// What it is about (`knee`, `hotplug`, ...).
    pub topic: String,
    /// The sentence.
    pub text: String,
    /// The experiment it comes from, if one.
    pub experiment: Option<i64>,
    /// The numbers in the sentence, by name.
    pub values: BTreeMap<String, serde_json::Value>,
}

impl Finding {
    fn new(score: u32, topic: &str, text: String, experiment: Option<i64>) -> Finding {
        Finding {
            score,
            topic: topic.into(),
            text,
            experiment,
            values: BTreeMap::new(),
        }
    }
    fn with(mut self, k: &str, v: impl Into<serde_json::Value>) -> Finding {
        self.values.insert(k.into(), v.into());
        self
    }
}

/// A number in a sentence: three significant digits (`480`, `29.9`, `9.95`, `0.123`).
pub fn fmt_short(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "-".into()
    } else if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The ratio `a / b` printed as in the findings (`8.7×`).
pub fn fmt_ratio(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}×")
    } else {
        format!("{x:.1}×")
    }
}

/// Poll time per second of a configuration: the mean over measured runs of
/// `idle.POLL.time_ms` divided by the run's counter window (`counters.window_s`, else the run
/// duration), in ms per second. None without poll-time counters.
pub fn poll_ms_per_s(e: &StoredExperiment, w: usize, c: usize) -> Option<f64> {
    let per_run: Vec<f64> = e
        .measured_runs(w, c)
        .filter_map(|r| {
            let get = |n: &str| {
                r.metrics
                    .iter()
                    .find(|m| m.name == n && m.cpu.is_none())
                    .map(|m| m.value)
            };
            let t = get("idle.POLL.time_ms")?;
            let window = get("counters.window_s").unwrap_or(r.duration_ns as f64 / 1e9);
            (window > 0.0).then(|| t / window)
        })
        .collect();
    (!per_run.is_empty()).then(|| per_run.iter().sum::<f64>() / per_run.len() as f64)
}

/// Is this experiment a sweep (or compare) of an idle-polling knob?
pub fn is_polling(e: &StoredExperiment) -> bool {
    let knob = |k: &str| k.contains("guest_halt_poll") || k.contains("POLL");
    e.swept.iter().any(|k| knob(k))
        || e.configurations
            .iter()
            .any(|c| c.knobs.iter().any(|k| knob(k)))
}

fn workload_name(e: &StoredExperiment, w: usize) -> &str {
    e.workloads[w]
        .argv
        .first()
        .map(String::as_str)
        .unwrap_or("")
}

fn polling(e: &StoredExperiment, r: &Report) -> Vec<Finding> {
    let mut out = Vec::new();
    for (w, wr) in r.workloads.iter().enumerate() {
        let (Some(knee), Some(first)) = (&wr.knee, wr.rows.first()) else {
            continue;
        };
        let Some(k) = wr.rows.iter().position(|x| x.label == knee.label) else {
            continue;
        };
        let (Some(s0), Some(sk)) = (&first.primary, &wr.rows[k].primary) else {
            continue;
        };
        let name = workload_name(e, w);
        let what = match name {
            "pipe" => "pipe round-trip latency".to_string(),
            "wakeup" => "wakeup latency (p50)".to_string(),
            n => format!(
                "{n} {}",
                wr.primary.as_ref().map(|p| p.name.as_str()).unwrap_or("")
            ),
        };
        let ratio = s0.mean / sk.mean;
        let mut text = if k == 0 {
            format!(
                "Polling does not help {what} here: the first value ({}) is already within the noise margin of the best ({}).",
                first.label, knee.best
            )
        } else {
            format!(
                "Polling up to {} (the knee) cuts {what} {}",
                knee.label,
                fmt_ratio(ratio)
            )
        };
        let mut f = Finding::new(
            if name == "pipe" { 100 } else { 95 },
            "polling",
            String::new(),
            Some(e.info.id),
        )
        .with("workload", name)
        .with("knee", knee.label.clone())
        .with("reference", first.label.clone())
        .with("ratio", ratio);
        if k > 0 {
            let unit = wr.primary.as_ref().map(|p| p.unit.as_str()).unwrap_or("");
            let mut paren = format!("{} → {} {unit}", fmt_short(s0.mean), fmt_short(sk.mean));
            if let Some(rel) = wr.rows[k]
                .comparison
                .as_ref()
                .and_then(|c| c.relative.as_ref())
            {
                let (lo, hi) = (1.0 / (1.0 + rel.high), 1.0 / (1.0 + rel.low));
                if lo.is_finite() && hi.is_finite() && lo > 0.0 {
                    paren = format!("95% CI {:.1}–{:.1}×; {paren}", lo.min(hi), hi.max(lo));
                    f = f
                        .with("ratio_low", lo.min(hi))
                        .with("ratio_high", hi.max(lo));
                }
            }
            text.push_str(&format!(" ({paren})"));
            let c_knee = e.configurations.iter().position(|c| c.label == knee.label);
            match c_knee.and_then(|c| poll_ms_per_s(e, w, c)) {
                Some(cost) => {
                    text.push_str(&format!(
                        " at a cost of {} ms of poll time per second (all CPUs)",
                        fmt_short(cost)
                    ));
                    f = f.with("poll_ms_per_s", cost);
                }
                None => text.push_str(" (no poll-time counters here to price it)"),
            }
            if let Some(idle) = idle_effect(e, r, &first.label, &knee.label) {
                text.push_str(&format!("; {idle}"));
            }
            text.push('.');
        }
        f.text = text;
        out.push(f);
    }
    out
}

/// "idle residency on an idle system changes by …" between two configurations, from the
/// experiment's `idle` workload.
fn idle_effect(e: &StoredExperiment, r: &Report, a: &str, b: &str) -> Option<String> {
    let w = (0..e.workloads.len()).find(|&w| workload_name(e, w) == "idle")?;
    let wr: &WorkloadReport = r.workloads.get(w)?;
    let (ca, cb) = (
        e.configurations.iter().position(|c| c.label == a)?,
        e.configurations.iter().position(|c| c.label == b)?,
    );
    for (metric, words) in [
        ("idle.POLL.share_pct", "polling share of time"),
        ("idle.share_pct", "idle residency"),
    ] {
        let sa = Summary::of(&e.samples(w, ca, metric));
        let sb = Summary::of(&e.samples(w, cb, metric));
        if let (Some(sa), Some(sb)) = (sa, sb) {
            let _ = wr;
            return Some(format!(
                "on an idle system the {words} goes from {}% to {}% ({:+.1} points)",
                fmt_short(sa.mean),
                fmt_short(sb.mean),
                sb.mean - sa.mean
            ));
        }
    }
    None
}

fn idle_baseline(e: &StoredExperiment, w: usize) -> Option<Finding> {
    let v = View::new(e, w);
    let cpus = v.cpus();
    let busy: Vec<(u32, f64)> = cpus
        .iter()
        .filter_map(|&cpu| {
            v.mean(0, MetricKey::on_cpu("cpu.busy_pct", cpu))
                .map(|b| (cpu, b))
        })
        .collect();
    if busy.is_empty() {
        return None;
    }
    let idle_all = 100.0 - busy.iter().map(|b| b.1).sum::<f64>() / busy.len() as f64;
    let per_cpu: Vec<String> = busy
        .iter()
        .map(|(c, b)| format!("cpu{c} {}%", fmt_short(100.0 - b)))
        .collect();
    let mut text = if idle_all >= 50.0 {
        format!(
            "On an idle system the CPUs are idle {}% of the time ({}; kernel counters)",
            fmt_short(idle_all),
            per_cpu.join(", ")
        )
    } else {
        format!(
            "The machine was not quiet: during the idle baseline the CPUs were idle only {}% of the time ({}) because other processes kept them busy",
            fmt_short(idle_all),
            per_cpu.join(", ")
        )
    };
    let total = v.mean(0, "irq.total.per_s");
    if let Some(t) = total {
        let ks = kinds(&v);
        let mut by_kind: Vec<(String, f64)> = ks
            .iter()
            .filter_map(|k| {
                v.mean(0, MetricKey::new(format!("irq.{k}.per_s")))
                    .map(|x| (k.clone(), x))
            })
            .collect();
        by_kind.sort_by(|a, b| b.1.total_cmp(&a.1));
        text.push_str(&format!("; they take {} interrupts/s in all", fmt_short(t)));
        if let Some((k, x)) = by_kind.first() {
            if t > 0.0 {
                text.push_str(&format!(
                    ", {:.0}% of them {}",
                    x / t * 100.0,
                    cause_name(k)
                ));
            }
        }
    }
    let mut overlap = None;
    if let Some(t) = super::traced::analyze(e, w) {
        if let Some(i) = &t.idle {
            overlap = Some(i.all_idle_share * 100.0);
            // The trace's own per-CPU shares, so that the overlap is read against numbers from
            // the same source (the counters above have tick resolution).
            let traced: Vec<String> = i
                .cpus
                .iter()
                .map(|c| format!("cpu{} {}%", c.cpu, fmt_short(c.share * 100.0)))
                .collect();
            text.push_str(&format!(
                "; in the trace the CPUs are idle {} and all of them at once {}% of the time",
                traced.join(", "),
                fmt_short(i.all_idle_share * 100.0)
            ));
        }
        if let Some(wr) = &t.wakeups {
            let per_cpu: Vec<String> = wr
                .cpus
                .iter()
                .map(|c| format!("cpu{} {}/s", c.cpu, fmt_short(c.per_s)))
                .collect();
            if !per_cpu.is_empty() {
                text.push_str(&format!(", idle exits {}", per_cpu.join(", ")));
            }
            if let Some(top) = wr
                .causes
                .iter()
                .filter(|c| c.cpu == u32::MAX)
                .max_by(|a, b| a.per_s.total_cmp(&b.per_s))
            {
                text.push_str(&format!(
                    ", most often for {} {} ({:.0}%)",
                    top.cause.kind,
                    top.cause.detail,
                    top.share * 100.0
                ));
            }
        }
    }
    text.push('.');
    Some(
        Finding::new(70, "idle", text, Some(e.info.id))
            .with("all_idle_pct", overlap.unwrap_or(f64::NAN))
            .with("idle_pct", idle_all)
            .with("irq_per_s", total.unwrap_or(f64::NAN)),
    )
}

fn hotplug(e: &StoredExperiment) -> Option<Finding> {
    let g = groups(e);
    let reference = e.configurations.first()?.label.clone();
    let pick = |dir: &str| -> Vec<(u32, Vec<f64>)> {
        let mut v: Vec<(u32, Vec<f64>)> = g
            .iter()
            .filter(|x| x.0 == dir && x.2 == reference)
            .map(|x| (x.1, x.3.clone()))
            .collect();
        v.sort_by_key(|x| x.0);
        v
    };
    let (down, up) = (pick("down"), pick("up"));
    let (d0, u0) = (down.first()?, up.first()?);
    let mut text = format!(
        "CPU hotplug: offlining takes {} ms at p50 ({} ms at p99) and onlining {} ms ({} ms at p99) with {} background loaders",
        fmt_short(percentile(&d0.1, 0.5)),
        fmt_short(percentile(&d0.1, 0.99)),
        fmt_short(percentile(&u0.1, 0.5)),
        fmt_short(percentile(&u0.1, 0.99)),
        d0.0
    );
    if let (Some(dl), Some(ul)) = (down.last(), up.last()) {
        if dl.0 != d0.0 {
            text.push_str(&format!(
                "; with {} loaders, offline {} ms and online {} ms at p50 ({} and {} the unloaded p50)",
                dl.0,
                fmt_short(percentile(&dl.1, 0.5)),
                fmt_short(percentile(&ul.1, 0.5)),
                fmt_ratio(percentile(&dl.1, 0.5) / percentile(&d0.1, 0.5)),
                fmt_ratio(percentile(&ul.1, 0.5) / percentile(&u0.1, 0.5)),
            ));
        }
    }
    if let Some((what, total, steps)) = slowest_steps(e) {
        if let Some(s) = steps.iter().max_by(|a, b| a.2.total_cmp(&b.2)) {
            text.push_str(&format!(
                ". The slowest operation ({what}, {} ms) spent {} ms in {} {}",
                fmt_short(total),
                fmt_short(s.2),
                s.0,
                s.1
            ));
        }
    }
    text.push('.');
    Some(
        Finding::new(80, "hotplug", text, Some(e.info.id))
            .with("offline_p50_ms", percentile(&d0.1, 0.5))
            .with("online_p50_ms", percentile(&u0.1, 0.5)),
    )
}

fn spin(e: &StoredExperiment, w: usize) -> Option<Finding> {
    let v = View::new(e, w);
    let bars = super::cpu::per_cpu(&v);
    if bars.is_empty() {
        return None;
    }
    let parts: Vec<String> = bars
        .iter()
        .map(|(l, s)| {
            format!(
                "{l} {} ± {} ms",
                fmt_short(s.mean),
                fmt_short(if s.stddev.is_finite() { s.stddev } else { 0.0 })
            )
        })
        .collect();
    let means: Vec<f64> = bars.iter().map(|b| b.1.mean).collect();
    let (lo, hi) = (
        means.iter().cloned().fold(f64::INFINITY, f64::min),
        means.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    );
    Some(
        Finding::new(
            40,
            "cpu",
            format!(
                "CPU-bound runtime (spin, mean ± stddev over {} runs): {}; the slowest CPU takes {:.1}% longer than the fastest.",
                bars[0].1.n,
                parts.join(", "),
                (hi / lo - 1.0) * 100.0
            ),
            Some(e.info.id),
        )
        .with("spread_pct", (hi / lo - 1.0) * 100.0),
    )
}

fn comparisons(e: &StoredExperiment, r: &Report) -> Vec<Finding> {
    let mut out = Vec::new();
    for wr in &r.workloads {
        for row in &wr.rows {
            if let (Some(c), Some(v)) = (&row.comparison, &row.versus) {
                out.push(Finding::new(
                    60,
                    "compare",
                    format!("{} vs {v} on {}: {}.", row.label, wr.label, c.verdict),
                    Some(e.info.id),
                ));
            }
        }
    }
    out
}

fn messaging(e: &StoredExperiment, w: usize) -> Option<Finding> {
    let v = View::new(e, w);
    let ctxt = v.mean(0, "ctxt.per_s")?;
    let ipis: Vec<String> = ["RES", "CAL", "TLB"]
        .iter()
        .filter_map(|k| {
            v.mean(0, MetricKey::new(format!("irq.{k}.per_s")))
                .map(|x| format!("{} {}/s", cause_name(k), fmt_short(x)))
        })
        .collect();
    let mut whom = String::new();
    if let Some(wr) = super::traced::analyze(e, w).and_then(|t| t.wakeups) {
        if let Some(top) = wr.wakers.first() {
            whom = format!(
                " The trace says {} wakes {} most ({}/s on cpu{}).",
                top.waker,
                top.wakee,
                fmt_short(top.per_s),
                top.cpu
            );
        }
    }
    Some(Finding::new(
        50,
        "wakeups",
        format!(
            "Messaging ({}): {} context switches/s; IPIs: {}.{whom}",
            e.workloads[w].label,
            fmt_short(ctxt),
            if ipis.is_empty() {
                "no counters".into()
            } else {
                ipis.join(", ")
            }
        ),
        Some(e.info.id),
    ))
}

/// Every finding of the given experiments (with their reports) and study stages, best first.
pub fn findings(items: &[(&StoredExperiment, &Report)], stages: &[StageNote]) -> Vec<Finding> {
    let mut out = Vec::new();
    for (e, r) in items {
        if is_hotplug(e) {
            out.extend(hotplug(e));
            continue;
        }
        if is_polling(e) {
            out.extend(polling(e, r));
        } else if e.configurations.len() >= 2 {
            out.extend(comparisons(e, r));
        }
        for w in 0..e.workloads.len() {
            match workload_name(e, w) {
                "idle" if e.configurations.len() == 1 => out.extend(idle_baseline(e, w)),
                "spin" => out.extend(spin(e, w)),
                "messaging" if e.configurations.len() == 1 => out.extend(messaging(e, w)),
                _ => {}
            }
        }
    }
    let polling_measured = stages
        .iter()
        .any(|s| s.stage == "polling" && s.status == StageStatus::Done);
    for s in stages {
        let (stage, reason) = (&s.stage, &s.reason);
        if s.status == StageStatus::Skipped {
            let score = if stage == "polling" { 90 } else { 20 };
            out.push(Finding::new(
                score,
                stage,
                format!("{}: not measured — {reason}.", capitalise(stage)),
                None,
            ));
        } else if s.status == StageStatus::Done && stage == "polling-predicted" {
            // Where polling was measured the prediction is a cross-check, not the answer.
            let score = if polling_measured { 30 } else { 88 };
            out.push(Finding::new(score, stage, reason.clone(), None));
        }
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.score));
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
