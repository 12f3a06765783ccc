//! The hotplug report: latency per configuration, direction and load (n, p50, p90, p99, max;
//! arch part vs the rest), the steps that make the p99, outliers with their slowest step,
//! mitigations against the baseline with CIs and a verdict, the trace cross-check, and the
//! fault-injection walk. Rendered as terminal tables or serialised as JSON.

use std::collections::BTreeMap;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use pmlab_kernel::Direction as MetricDirection;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::inject::{InjectOutcome, InjectResult};
use super::lab::{LabResult, OpRecord};
use super::sysfs::Direction;
use super::trace::OpTrace;
use super::Mitigation;
use crate::stats;
pub use crate::stats::percentile;
use pmlab_analysis::stats::{DurationSummary, PERCENTILE_NOTE};

/// Steps must sum to within this fraction of the traced span.
pub const COVERAGE_TOLERANCE: f64 = 0.02;
const TOP_STEPS: usize = 5;

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// One line of the latency table.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    pub config: Mitigation,
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    pub load: u32,
    pub n: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Median time from the write to the first step (locks, RCU sync, queueing).
    pub before_steps_p50_ms: Option<f64>,
    /// Median traced span (first step start to last step end).
    pub span_p50_ms: Option<f64>,
    /// Median time from the last step to the write's return (wakeup of the writer).
    pub after_steps_p50_ms: Option<f64>,
    /// Median time in arch steps, and in the rest of the steps.
    pub arch_p50_ms: Option<f64>,
    pub rest_p50_ms: Option<f64>,
}

/// A step among those that make the p99.
#[derive(Debug, Clone, Serialize)]
pub struct TopStep {
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    pub load: u32,
    pub rank: usize,
    pub state: i32,
    pub name: String,
    pub callback: String,
    /// "target" (the CPU being plugged) or "control".
    pub ran_on: &'static str,
    pub arch: bool,
    /// Mean exclusive time in the operations at or above the p99.
    pub mean_ms: f64,
    /// Its share of those operations' wall time.
    pub share: f64,
    /// How many operations that was.
    pub tail_ops: usize,
}

/// An operation flagged by the MAD rule (modified z > 3.5), slow side only.
#[derive(Debug, Clone, Serialize)]
pub struct Outlier {
    pub config: Mitigation,
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    pub load: u32,
    pub round: u32,
    pub wall_ms: f64,
    pub median_ms: f64,
    pub slowest_step: Option<String>,
    pub slowest_step_ms: Option<f64>,
}

pub use crate::stats::QuantileChange as Change;

/// A mitigation against the baseline, one direction and load level.
#[derive(Debug, Clone, Serialize)]
pub struct MitigationRow {
    pub mitigation: Mitigation,
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    pub load: u32,
    pub baseline_p50_ms: f64,
    pub p50_ms: f64,
    pub p50_change: Option<Change>,
    pub baseline_p99_ms: f64,
    pub p99_ms: f64,
    pub p99_change: Option<Change>,
    /// Welch (and Mann-Whitney on skewed data) on all operations; `verdict` says it in words.
    pub comparison: stats::Comparison,
}

/// Steps vs traced span, per operation.
#[derive(Debug, Clone, Serialize)]
pub struct TraceCheck {
    pub traced_ops: usize,
    pub untraced_ops: usize,
    pub within_tolerance: usize,
    pub tolerance: f64,
    pub min_coverage: f64,
    pub max_coverage: f64,
    /// Operations whose writing task was preempted between steps, and for how long in all.
    pub preempted_ops: usize,
    pub preempted_ms: f64,
    /// Interrupt time on the control CPU between steps, in all.
    pub interrupted_ms: f64,
    /// Median of wall − span: syscall entry, locks and work-queueing outside the steps.
    pub outside_steps_p50_ms: f64,
}

/// The latency lab's report.
#[derive(Debug, Clone, Serialize)]
pub struct HotplugReport {
    pub cpus: Vec<u32>,
    pub cycles: u32,
    pub loads: Vec<u32>,
    pub loader: &'static str,
    pub seed: u64,
    pub configurations: Vec<Mitigation>,
    pub latency: Vec<LatencyRow>,
    pub top_steps: Vec<TopStep>,
    pub outliers: Vec<Outlier>,
    pub mitigations: Vec<MitigationRow>,
    pub trace_check: Option<TraceCheck>,
    pub notes: Vec<String>,
    pub operations: Vec<OpRecord>,
}

type GroupKey = (Mitigation, Direction, u32);

fn groups(ops: &[OpRecord]) -> BTreeMap<GroupKey, Vec<&OpRecord>> {
    let mut g: BTreeMap<GroupKey, Vec<&OpRecord>> = BTreeMap::new();
    for o in ops {
        g.entry((o.config, o.direction, o.load))
            .or_default()
            .push(o);
    }
    g
}

fn walls(ops: &[&OpRecord]) -> Vec<f64> {
    ops.iter().map(|o| o.wall_ns as f64).collect()
}

/// The wall times' summary (n, mean, p50, p99, max) and their p90, nearest rank.
fn wall_summary(ops: &[&OpRecord]) -> (DurationSummary, u64) {
    let mut v: Vec<u64> = ops.iter().map(|o| o.wall_ns).collect();
    v.sort_unstable();
    let p90 = pmlab_kernel::units::percentile(&v, 0.9).unwrap_or(0);
    (DurationSummary::of(&mut v), p90)
}

impl HotplugReport {
    pub fn build(r: &LabResult) -> HotplugReport {
        let g = groups(&r.ops);
        let mut latency = Vec::new();
        for ((config, direction, load), ops) in &g {
            let (w, p90) = wall_summary(ops);
            let traced: Vec<(&OpRecord, &OpTrace)> = ops
                .iter()
                .filter_map(|o| o.trace.as_ref().map(|t| (*o, t)))
                .collect();
            let med = |f: &dyn Fn(&OpRecord, &OpTrace) -> u64| {
                if traced.is_empty() {
                    None
                } else {
                    let v: Vec<f64> = traced.iter().map(|(o, t)| f(o, t) as f64).collect();
                    Some(ms(percentile(&v, 0.5)))
                }
            };
            latency.push(LatencyRow {
                config: *config,
                direction: *direction,
                load: *load,
                n: w.n as usize,
                p50_ms: ms(w.p50_ns as f64),
                p90_ms: ms(p90 as f64),
                p99_ms: ms(w.p99_ns as f64),
                max_ms: ms(w.max_ns as f64),
                mean_ms: ms(w.mean_ns),
                before_steps_p50_ms: med(&|o, t| t.first_ns.saturating_sub(o.start_ns)),
                span_p50_ms: med(&|_, t| t.span_ns),
                after_steps_p50_ms: med(&|o, t| o.end_ns.saturating_sub(t.last_ns)),
                arch_p50_ms: med(&|_, t| t.arch_ns),
                rest_p50_ms: med(&|_, t| t.steps_sum_ns - t.arch_ns),
            });
        }

        // The steps behind the p99, baseline only.
        let mut top_steps = Vec::new();
        for ((config, direction, load), ops) in &g {
            if *config != Mitigation::None {
                continue;
            }
            let p99 = wall_summary(ops).0.p99_ns as f64;
            let tail: Vec<&&OpRecord> = ops
                .iter()
                .filter(|o| o.wall_ns as f64 >= p99 - 0.5 && o.trace.is_some())
                .collect();
            if tail.is_empty() {
                continue;
            }
            let tail_wall: f64 = tail.iter().map(|o| o.wall_ns as f64).sum();
            let mut by_step: BTreeMap<(i32, String, bool), (f64, String, bool)> = BTreeMap::new();
            for o in &tail {
                for s in &o.trace.as_ref().unwrap().steps {
                    let e = by_step
                        .entry((s.state, s.callback.clone(), s.on_target))
                        .or_insert((0.0, s.name.clone(), s.arch));
                    e.0 += s.exclusive_ns as f64;
                }
            }
            let mut v: Vec<_> = by_step.into_iter().collect();
            v.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
            for (rank, ((state, callback, on_target), (total, name, arch))) in
                v.into_iter().take(TOP_STEPS).enumerate()
            {
                top_steps.push(TopStep {
                    direction: *direction,
                    load: *load,
                    rank: rank + 1,
                    state,
                    name,
                    callback,
                    ran_on: if on_target { "target" } else { "control" },
                    arch,
                    mean_ms: ms(total / tail.len() as f64),
                    share: total / tail_wall,
                    tail_ops: tail.len(),
                });
            }
        }

        let mut outliers = Vec::new();
        for ((config, direction, load), ops) in &g {
            let w = walls(ops);
            // The sample median the MAD rule measures from (middle two averaged), not the
            // nearest-rank p50: an outlier is slow against the centre its z-score used.
            let median = stats::median(&w);
            for i in stats::mad_outliers(&w) {
                if w[i] <= median {
                    continue;
                }
                let slow = ops[i].trace.as_ref().and_then(|t| t.slowest());
                outliers.push(Outlier {
                    config: *config,
                    direction: *direction,
                    load: *load,
                    round: ops[i].round,
                    wall_ms: ms(w[i]),
                    median_ms: ms(median),
                    slowest_step: slow.map(|s| format!("{} {} ({})", s.state, s.name, s.callback)),
                    slowest_step_ms: slow.map(|s| ms(s.exclusive_ns as f64)),
                });
            }
        }

        let mut rng = ChaCha8Rng::seed_from_u64(r.seed ^ 0x5eed);
        let mut mitigations = Vec::new();
        for ((config, direction, load), ops) in &g {
            if *config == Mitigation::None {
                continue;
            }
            let Some(base) = g.get(&(Mitigation::None, *direction, *load)) else {
                continue;
            };
            let (a, b) = (walls(base), walls(ops));
            mitigations.push(MitigationRow {
                mitigation: *config,
                direction: *direction,
                load: *load,
                baseline_p50_ms: ms(percentile(&a, 0.5)),
                p50_ms: ms(percentile(&b, 0.5)),
                p50_change: stats::quantile_change(&a, &b, 0.5, &mut rng),
                baseline_p99_ms: ms(percentile(&a, 0.99)),
                p99_ms: ms(percentile(&b, 0.99)),
                p99_change: stats::quantile_change(&a, &b, 0.99, &mut rng),
                comparison: stats::compare(&a, &b, MetricDirection::Lower, false),
            });
        }

        let trace_check = if r.traced {
            let traced: Vec<(&OpRecord, &OpTrace)> = r
                .ops
                .iter()
                .filter_map(|o| o.trace.as_ref().map(|t| (o, t)))
                .collect();
            let cov: Vec<f64> = traced.iter().map(|(_, t)| t.accounted()).collect();
            let outside: Vec<f64> = traced
                .iter()
                .map(|(o, t)| o.wall_ns.saturating_sub(t.span_ns) as f64)
                .collect();
            Some(TraceCheck {
                traced_ops: traced.len(),
                untraced_ops: r.ops.len() - traced.len(),
                within_tolerance: cov
                    .iter()
                    .filter(|c| (**c - 1.0).abs() <= COVERAGE_TOLERANCE)
                    .count(),
                tolerance: COVERAGE_TOLERANCE,
                min_coverage: cov.iter().copied().fold(f64::NAN, f64::min),
                max_coverage: cov.iter().copied().fold(f64::NAN, f64::max),
                preempted_ops: traced.iter().filter(|(_, t)| t.preempted_ns > 0).count(),
                preempted_ms: ms(traced.iter().map(|(_, t)| t.preempted_ns).sum::<u64>() as f64),
                interrupted_ms: ms(traced.iter().map(|(_, t)| t.interrupted_ns).sum::<u64>() as f64),
                outside_steps_p50_ms: ms(percentile(&outside, 0.5)),
            })
        } else {
            None
        };

        let latency_empty = latency.is_empty();
        HotplugReport {
            cpus: r.cpus.clone(),
            cycles: r.cycles,
            loads: r.loads.clone(),
            loader: r.loader.as_str(),
            seed: r.seed,
            configurations: r.configurations.clone(),
            latency,
            top_steps,
            outliers,
            mitigations,
            trace_check,
            notes: r
                .notes
                .iter()
                .cloned()
                .chain((!latency_empty).then(|| PERCENTILE_NOTE.to_string()))
                .collect(),
            operations: r.ops.clone(),
        }
    }

    /// Terminal tables.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out += &format!(
            "CPU hotplug latency: cpus {} · {} cycles · loads {} ({} loader) · seed {}\n\n",
            super::format_cpu_list(&self.cpus),
            self.cycles,
            self.loads
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(","),
            self.loader,
            self.seed
        );
        let mut t = table(&[
            "config", "dir", "load", "n", "p50 ms", "p90 ms", "p99 ms", "max ms", "before",
            "steps", "after", "arch", "rest",
        ]);
        for r in &self.latency {
            let opt = |v: Option<f64>| v.map_or("-".to_string(), f2);
            t.add_row(vec![
                Cell::new(r.config.as_str()),
                Cell::new(r.direction.short()),
                num(r.load.to_string()),
                num(r.n.to_string()),
                num(f2(r.p50_ms)),
                num(f2(r.p90_ms)),
                num(f2(r.p99_ms)),
                num(f2(r.max_ms)),
                num(opt(r.before_steps_p50_ms)),
                num(opt(r.span_p50_ms)),
                num(opt(r.after_steps_p50_ms)),
                num(opt(r.arch_p50_ms)),
                num(opt(r.rest_p50_ms)),
            ]);
        }
        out += &format!(
            "Latency per direction and load (wall time around the write; the last five columns are \
             medians: before the first step, traced steps span, after the last step, and the span \
             split into arch steps and the rest)\n{t}\n\n"
        );

        if !self.top_steps.is_empty() {
            let mut t = table(&[
                "dir", "load", "#", "state", "callback", "ran on", "arch", "ms", "share",
            ]);
            for s in &self.top_steps {
                t.add_row(vec![
                    Cell::new(s.direction.short()),
                    num(s.load.to_string()),
                    num(s.rank.to_string()),
                    Cell::new(format!("{} {}", s.state, s.name)),
                    Cell::new(&s.callback),
                    Cell::new(s.ran_on),
                    Cell::new(if s.arch { "yes" } else { "" }),
                    num(f2(s.mean_ms)),
                    num(format!("{:.0}%", 100.0 * s.share)),
                ]);
            }
            out += &format!(
                "Steps contributing most to the p99 (baseline; mean exclusive time in the operations at or above p99)\n{t}\n\n"
            );
        }

        if self.outliers.is_empty() {
            out += "Outliers (MAD, slow side): none\n\n";
        } else {
            let mut t = table(&[
                "config",
                "dir",
                "load",
                "round",
                "ms",
                "median",
                "slowest step",
                "its ms",
            ]);
            for o in &self.outliers {
                t.add_row(vec![
                    Cell::new(o.config.as_str()),
                    Cell::new(o.direction.short()),
                    num(o.load.to_string()),
                    num(o.round.to_string()),
                    num(f2(o.wall_ms)),
                    num(f2(o.median_ms)),
                    Cell::new(o.slowest_step.clone().unwrap_or_else(|| "-".into())),
                    num(o.slowest_step_ms.map_or("-".into(), f2)),
                ]);
            }
            out += &format!("Outliers (MAD, slow side)\n{t}\n\n");
        }

        if !self.mitigations.is_empty() {
            let mut t = table(&[
                "mitigation",
                "dir",
                "load",
                "p50 ms",
                "Δp50 [95% CI]",
                "p99 ms",
                "Δp99 [95% CI]",
                "verdict (all ops)",
            ]);
            for m in &self.mitigations {
                t.add_row(vec![
                    Cell::new(m.mitigation.as_str()),
                    Cell::new(m.direction.short()),
                    num(m.load.to_string()),
                    num(format!("{} → {}", f2(m.baseline_p50_ms), f2(m.p50_ms))),
                    num(change(m.p50_change)),
                    num(format!("{} → {}", f2(m.baseline_p99_ms), f2(m.p99_ms))),
                    num(change(m.p99_change)),
                    Cell::new(&m.comparison.verdict),
                ]);
            }
            out += &format!(
                "Mitigations against the baseline (interleaved; Δ CIs by bootstrap; verdict by Welch, and Mann-Whitney when skewed)\n{t}\n\n"
            );
        }

        if let Some(c) = &self.trace_check {
            out += &format!(
                "Trace check: {}/{} traced operations have steps summing to within {:.0}% of their span \
                 (coverage {:.3}–{:.3}){}{}; median time outside the steps (wall − span) {} ms{}\n",
                c.within_tolerance,
                c.traced_ops,
                100.0 * c.tolerance,
                c.min_coverage,
                c.max_coverage,
                if c.preempted_ops > 0 {
                    format!(
                        ", counting {} ms in {} operation(s) where the writing task was preempted between steps",
                        f2(c.preempted_ms),
                        c.preempted_ops
                    )
                } else {
                    String::new()
                },
                if c.interrupted_ms > 0.0 {
                    format!(
                        ", and {} ms of interrupts on the control CPU between steps",
                        f2(c.interrupted_ms)
                    )
                } else {
                    String::new()
                },
                f2(c.outside_steps_p50_ms),
                if c.untraced_ops > 0 {
                    format!("; {} operations untraced", c.untraced_ops)
                } else {
                    String::new()
                }
            );
        }
        for n in &self.notes {
            out += &format!("note: {n}\n");
        }
        out
    }
}

/// Render the fault-injection walk.
pub fn render_inject(r: &InjectResult) -> String {
    let mut out = String::new();
    let mut t = table(&[
        "cpu",
        "dir",
        "state",
        "outcome",
        "errno",
        "wall ms",
        "rollback ms",
        "rb steps",
        "after",
    ]);
    for a in &r.attempts {
        let (outcome, detail) = match &a.outcome {
            InjectOutcome::RolledBack => ("failed, rolled back", None),
            InjectOutcome::NotTriggered => ("not triggered (no callback this way)", None),
            InjectOutcome::Unexpected(d) => ("UNEXPECTED", Some(d.clone())),
        };
        t.add_row(vec![
            num(a.cpu.to_string()),
            Cell::new(a.direction.short()),
            Cell::new(format!("{} {}", a.state, a.name)),
            Cell::new(detail.map_or(outcome.to_string(), |d| format!("{outcome}: {d}"))),
            Cell::new(a.errno.map_or("-".into(), errno_name)),
            num(f2(ms(a.wall_ns as f64))),
            num(a.rollback_ns.map_or("-".into(), |n| f2(ms(n as f64)))),
            num(a.rollback_steps.map_or("-".into(), |n| n.to_string())),
            Cell::new(format!(
                "online={} state={} fail={}",
                a.online_after as u8, a.state_after, a.fail_after
            )),
        ]);
    }
    out += &format!("Fault injection through hotplug/fail\n{t}\n");
    for (cpu, dir, acc) in &r.accepted {
        out += &format!(
            "cpu{cpu} {}: {} states accept injection\n",
            dir.short(),
            acc.len()
        );
    }
    let rolled = r.count(|o| *o == InjectOutcome::RolledBack);
    let untrig = r.count(|o| *o == InjectOutcome::NotTriggered);
    let bad = r.count(|o| matches!(o, InjectOutcome::Unexpected(_)));
    out += &format!(
        "{} attempts: {rolled} failed and rolled back, {untrig} not triggered (the state has no callback in that direction), {bad} unexpected\n",
        r.attempts.len()
    );
    for n in &r.notes {
        out += &format!("note: {n}\n");
    }
    out
}

fn errno_name(e: i32) -> String {
    match e {
        libc::EAGAIN => "EAGAIN".into(),
        libc::EBUSY => "EBUSY".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EIO => "EIO".into(),
        other => format!("errno {other}"),
    }
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(header.to_vec());
    t
}

fn num(s: String) -> Cell {
    Cell::new(s).set_alignment(CellAlignment::Right)
}

fn f2(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2}")
    }
}

fn change(c: Option<Change>) -> String {
    match c {
        None => "-".into(),
        Some(c) => format!(
            "{:+.1}% [{:+.1}, {:+.1}]",
            100.0 * c.change,
            100.0 * c.low,
            100.0 * c.high
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::LoaderKind;
    use crate::trace::StepTime;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(percentile(&v, 0.5), 3.0);
        assert_eq!(percentile(&v, 1.0), 5.0);
        // Nearest rank: a value of the sample (interpolation would give 4.6).
        assert_eq!(percentile(&v, 0.9), 5.0);
        assert_eq!(percentile(&v, 0.8), 4.0);
        assert!(percentile(&[], 0.5).is_nan());
    }

    fn op(config: Mitigation, dir: Direction, wall_ms: f64, round: u32) -> OpRecord {
        let wall = (wall_ms * 1e6) as u64;
        let steps = vec![
            StepTime {
                state: 235,
                name: "sched:active".into(),
                callback: "sched_cpu_deactivate".into(),
                exec_cpu: 1,
                on_target: true,
                start_ns: 0,
                duration_ns: wall * 8 / 10,
                exclusive_ns: wall * 8 / 10,
                ret: 0,
                arch: false,
                rollback: false,
                nested: false,
            },
            StepTime {
                state: 144,
                name: "cpu:teardown".into(),
                callback: "takedown_cpu".into(),
                exec_cpu: 0,
                on_target: false,
                start_ns: wall * 8 / 10,
                duration_ns: wall / 10,
                exclusive_ns: wall / 10,
                ret: 0,
                arch: true,
                rollback: false,
                nested: false,
            },
        ];
        OpRecord {
            cpu: 1,
            direction: dir,
            load: 0,
            config,
            round,
            start_ns: 0,
            end_ns: wall,
            wall_ns: wall,
            trace: Some(OpTrace::new(0, wall * 9 / 10, steps)),
        }
    }

    fn result(ops: Vec<OpRecord>, configs: Vec<Mitigation>) -> LabResult {
        LabResult {
            experiment: 0,
            cpus: vec![1],
            cycles: 20,
            loads: vec![0],
            loader: LoaderKind::Spin,
            configurations: configs,
            seed: 7,
            boost_mode: None,
            traced: true,
            interrupted: false,
            ops,
            notes: vec![],
            states: Default::default(),
        }
    }

    #[test]
    fn builds_tables_top_steps_and_outliers() {
        let mut ops: Vec<OpRecord> = (0..20)
            .map(|i| {
                op(
                    Mitigation::None,
                    Direction::Offline,
                    30.0 + (i % 5) as f64,
                    i,
                )
            })
            .collect();
        ops.push(op(Mitigation::None, Direction::Offline, 400.0, 20));
        let rep = HotplugReport::build(&result(ops, vec![Mitigation::None]));
        assert_eq!(rep.latency.len(), 1);
        let row = &rep.latency[0];
        assert_eq!(row.n, 21);
        assert_eq!(row.max_ms, 400.0);
        // Nearest rank: 30..34 four times each and 400; p90 is the 19th of 21, p99 the max.
        assert_eq!((row.p50_ms, row.p90_ms, row.p99_ms), (32.0, 34.0, 400.0));
        assert!(rep.notes.iter().any(|n| n == PERCENTILE_NOTE));
        assert!(row.arch_p50_ms.unwrap() < row.rest_p50_ms.unwrap());
        assert_eq!(rep.top_steps[0].callback, "sched_cpu_deactivate");
        assert_eq!(rep.top_steps[0].ran_on, "target");
        assert_eq!(rep.outliers.len(), 1);
        assert!(rep.outliers[0]
            .slowest_step
            .as_ref()
            .unwrap()
            .contains("sched_cpu_deactivate"));
        let c = rep.trace_check.as_ref().unwrap();
        assert_eq!(c.within_tolerance, 21);
        let text = rep.render();
        assert!(text.contains("p99 ms") && text.contains("Outliers"));
        // The lab writes directions as down/up (the analysis, same type, as offline/online).
        let j = serde_json::to_value(&rep).unwrap();
        for part in ["latency", "top_steps", "outliers", "operations"] {
            assert_eq!(j[part][0]["direction"], "down", "{part}");
        }
    }

    #[test]
    fn no_effect_is_not_claimed_without_significance() {
        let mut ops = Vec::new();
        for i in 0..20 {
            let noise = [0.0, 3.0, -2.0, 1.0, -1.0][i % 5];
            ops.push(op(
                Mitigation::None,
                Direction::Offline,
                30.0 + noise,
                i as u32,
            ));
            ops.push(op(
                Mitigation::RcuExpedited,
                Direction::Offline,
                30.0 - noise,
                i as u32,
            ));
        }
        let rep = HotplugReport::build(&result(
            ops,
            vec![Mitigation::None, Mitigation::RcuExpedited],
        ));
        let m = &rep.mitigations[0];
        assert_eq!(m.comparison.outcome, stats::Outcome::NoSignificantChange);
        assert!(m.comparison.verdict.contains("no significant change"));
    }

    #[test]
    fn a_real_effect_is_reported_with_ci() {
        let mut ops = Vec::new();
        for i in 0..20 {
            let noise = [0.0, 1.0, -1.0, 0.5, -0.5][i % 5];
            ops.push(op(
                Mitigation::None,
                Direction::Offline,
                30.0 + noise,
                i as u32,
            ));
            ops.push(op(
                Mitigation::RcuExpedited,
                Direction::Offline,
                10.0 + noise,
                i as u32,
            ));
        }
        let rep = HotplugReport::build(&result(
            ops,
            vec![Mitigation::None, Mitigation::RcuExpedited],
        ));
        let m = &rep.mitigations[0];
        assert_eq!(m.comparison.outcome, stats::Outcome::Better);
        let c = m.p50_change.unwrap();
        assert!(c.high < 0.0 && c.change < -0.5, "{c:?}");
    }
}
