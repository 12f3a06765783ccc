//! The hotplug report: latency per configuration, direction and load (n, p50, p90, p99, max;
//! arch part vs the rest), the steps that make the p99, outliers with their slowest step,
//! mitigations against the baseline with CIs and a verdict, the trace cross-check, and the
//! fault-injection walk. Both are [`Tabular`] (tables with typed cells, and notes) and
//! serialisable: pmlab-report's `render::sheet` prints them in every text format.

use std::collections::BTreeMap;

use pmlab_analysis::{Cell, Table, Tabular};
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
    /// The configuration (mitigation).
    pub config: Mitigation,
    /// Offline (`down`) or online (`up`).
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    /// Load level: loader instances in the background.
    pub load: u32,
    /// Operations measured.
    pub n: usize,
    /// Median wall time (nearest rank), ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Slowest operation, ms.
    pub max_ms: f64,
    /// Mean wall time, ms.
    pub mean_ms: f64,
    /// Median time from the write to the first step (locks, RCU sync, queueing).
    pub before_steps_p50_ms: Option<f64>,
    /// Median traced span (first step start to last step end).
    pub span_p50_ms: Option<f64>,
    /// Median time from the last step to the write's return (wakeup of the writer).
    pub after_steps_p50_ms: Option<f64>,
    /// Median time in arch steps.
    pub arch_p50_ms: Option<f64>,
    /// Median time in the rest of the steps.
    pub rest_p50_ms: Option<f64>,
}

/// A step among those that make the p99.
#[derive(Debug, Clone, Serialize)]
pub struct TopStep {
    /// Offline (`down`) or online (`up`).
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    /// Load level.
    pub load: u32,
    /// 1 for the step with the most time.
    pub rank: usize,
    /// Its cpuhp state number.
    pub state: i32,
    /// Its state's name (`sched:active`).
    pub name: String,
    /// Its callback (`sched_cpu_deactivate`).
    pub callback: String,
    /// "target" (the CPU being plugged) or "control".
    pub ran_on: &'static str,
    /// An arch step (the part the platform owns).
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
    /// The configuration it ran in.
    pub config: Mitigation,
    /// Offline (`down`) or online (`up`).
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    /// Load level.
    pub load: u32,
    /// Its round, from 0.
    pub round: u32,
    /// Its wall time, ms.
    pub wall_ms: f64,
    /// The sample median of its group, ms.
    pub median_ms: f64,
    /// Its slowest step (`STATE NAME (CALLBACK)`), when traced.
    pub slowest_step: Option<String>,
    /// That step's exclusive time, ms.
    pub slowest_step_ms: Option<f64>,
}

pub use crate::stats::QuantileChange as Change;

/// A mitigation against the baseline, one direction and load level.
#[derive(Debug, Clone, Serialize)]
pub struct MitigationRow {
    /// The mitigation.
    pub mitigation: Mitigation,
    /// Offline (`down`) or online (`up`).
    #[serde(serialize_with = "Direction::serialize_short")]
    pub direction: Direction,
    /// Load level.
    pub load: u32,
    /// The baseline's p50, ms.
    pub baseline_p50_ms: f64,
    /// The mitigation's p50, ms.
    pub p50_ms: f64,
    /// The p50's relative change with its bootstrap 95% CI.
    pub p50_change: Option<Change>,
    /// The baseline's p99, ms.
    pub baseline_p99_ms: f64,
    /// The mitigation's p99, ms.
    pub p99_ms: f64,
    /// The p99's relative change with its bootstrap 95% CI.
    pub p99_change: Option<Change>,
    /// Welch (and Mann-Whitney on skewed data) on all operations; `verdict` says it in words.
    pub comparison: stats::Comparison,
}

/// Steps vs traced span, per operation.
#[derive(Debug, Clone, Serialize)]
pub struct TraceCheck {
    /// Operations with steps in the trace.
    pub traced_ops: usize,
    /// Operations without.
    pub untraced_ops: usize,
    /// Traced operations whose steps sum to within `tolerance` of their span.
    pub within_tolerance: usize,
    /// [`COVERAGE_TOLERANCE`].
    pub tolerance: f64,
    /// Smallest steps/span ratio.
    pub min_coverage: f64,
    /// Largest steps/span ratio.
    pub max_coverage: f64,
    /// Operations whose writing task was preempted between steps.
    pub preempted_ops: usize,
    /// For how long, in all.
    pub preempted_ms: f64,
    /// Interrupt time on the control CPU between steps, in all.
    pub interrupted_ms: f64,
    /// Median of wall − span: syscall entry, locks and work-queueing outside the steps.
    pub outside_steps_p50_ms: f64,
}

/// The latency lab's report.
#[derive(Debug, Clone, Serialize)]
pub struct HotplugReport {
    /// CPUs cycled.
    pub cpus: Vec<u32>,
    /// Measured cycles per CPU, configuration and load level.
    pub cycles: u32,
    /// Load levels.
    pub loads: Vec<u32>,
    /// The background loader's word.
    pub loader: &'static str,
    /// Seed of the per-round shuffles.
    pub seed: u64,
    /// Configurations, baseline first.
    pub configurations: Vec<Mitigation>,
    /// Per configuration, direction and load.
    pub latency: Vec<LatencyRow>,
    /// The baseline's steps behind the p99, per direction and load.
    pub top_steps: Vec<TopStep>,
    /// Slow outliers.
    pub outliers: Vec<Outlier>,
    /// Each mitigation against the baseline.
    pub mitigations: Vec<MitigationRow>,
    /// Steps against spans, when traced.
    pub trace_check: Option<TraceCheck>,
    /// What a reader should know.
    pub notes: Vec<String>,
    /// Every operation, in run order.
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
    /// The report of a session.
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

    /// The line above the tables: what ran.
    pub fn head(&self) -> Vec<String> {
        vec![format!(
            "CPU hotplug latency: cpus {} · {} cycles · loads {} ({} loader) · seed {}",
            super::format_cpu_list(&self.cpus),
            self.cycles,
            self.loads
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(","),
            self.loader,
            self.seed
        )]
    }
}

impl Tabular for HotplugReport {
    /// Latency (the CSV form's table), the steps behind the p99, outliers, mitigations and
    /// the trace check.
    fn tables(&self) -> Vec<Table> {
        let mut latency = Table::new(
            "latency",
            "Latency per direction and load (wall time around the write; the last five columns are \
             medians: before the first step, traced steps span, after the last step, and the span \
             split into arch steps and the rest)",
            &[
                "config", "dir", "load", "n", "p50 ms", "p90 ms", "p99 ms", "max ms", "before",
                "steps", "after", "arch", "rest",
            ],
            3,
        );
        for r in &self.latency {
            latency.row(vec![
                r.config.as_str().into(),
                r.direction.short().into(),
                r.load.into(),
                r.n.into(),
                fin(r.p50_ms),
                fin(r.p90_ms),
                fin(r.p99_ms),
                fin(r.max_ms),
                r.before_steps_p50_ms.into(),
                r.span_p50_ms.into(),
                r.after_steps_p50_ms.into(),
                r.arch_p50_ms.into(),
                r.rest_p50_ms.into(),
            ]);
        }
        let mut tables = vec![latency];

        if !self.top_steps.is_empty() {
            let mut t = Table::new(
                "top_steps",
                "Steps contributing most to the p99 (baseline; mean exclusive time in the operations at or above p99)",
                &[
                    "dir", "load", "#", "state", "callback", "ran on", "arch", "ms", "share %",
                ],
                3,
            );
            for s in &self.top_steps {
                t.row(vec![
                    s.direction.short().into(),
                    s.load.into(),
                    s.rank.into(),
                    format!("{} {}", s.state, s.name).into(),
                    s.callback.as_str().into(),
                    s.ran_on.into(),
                    if s.arch { "yes" } else { "" }.into(),
                    fin(s.mean_ms),
                    (100.0 * s.share).into(),
                ]);
            }
            tables.push(t);
        }

        let mut t = Table::new(
            "outliers",
            "Outliers (MAD, slow side)",
            &[
                "config",
                "dir",
                "load",
                "round",
                "ms",
                "median",
                "slowest step",
                "its ms",
            ],
            4,
        );
        for o in &self.outliers {
            t.row(vec![
                o.config.as_str().into(),
                o.direction.short().into(),
                o.load.into(),
                o.round.into(),
                fin(o.wall_ms),
                fin(o.median_ms),
                o.slowest_step.clone().into(),
                o.slowest_step_ms.into(),
            ]);
        }
        tables.push(t);

        if !self.mitigations.is_empty() {
            let mut t = Table::new(
                "mitigations",
                "Mitigations against the baseline (interleaved; Δ CIs by bootstrap; verdict by Welch, and Mann-Whitney when skewed)",
                &[
                    "mitigation",
                    "dir",
                    "load",
                    "base p50 ms",
                    "p50 ms",
                    "Δp50 [95% CI]",
                    "base p99 ms",
                    "p99 ms",
                    "Δp99 [95% CI]",
                    "verdict (all ops)",
                ],
                3,
            );
            for m in &self.mitigations {
                t.row(vec![
                    m.mitigation.as_str().into(),
                    m.direction.short().into(),
                    m.load.into(),
                    fin(m.baseline_p50_ms),
                    fin(m.p50_ms),
                    change(m.p50_change),
                    fin(m.baseline_p99_ms),
                    fin(m.p99_ms),
                    change(m.p99_change),
                    m.comparison.verdict.as_str().into(),
                ]);
            }
            tables.push(t);
        }

        if let Some(c) = &self.trace_check {
            let mut t = Table::new(
                "trace_check",
                &format!(
                    "Trace check: operations whose steps sum to within {:.0}% of their span; \
                     time outside the steps (wall − span: syscall entry, locks, queueing), \
                     the writing task preempted and the control CPU interrupted between steps",
                    100.0 * c.tolerance
                ),
                &[
                    "traced",
                    "within",
                    "coverage min %",
                    "coverage max %",
                    "outside p50 ms",
                    "preempted ops",
                    "preempted ms",
                    "interrupted ms",
                    "untraced",
                ],
                0,
            );
            t.row(vec![
                c.traced_ops.into(),
                c.within_tolerance.into(),
                fin(100.0 * c.min_coverage),
                fin(100.0 * c.max_coverage),
                fin(c.outside_steps_p50_ms),
                c.preempted_ops.into(),
                fin(c.preempted_ms),
                fin(c.interrupted_ms),
                c.untraced_ops.into(),
            ]);
            tables.push(t);
        }
        tables
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

impl InjectResult {
    /// The lines above the tables: what was walked, and how the attempts ended.
    pub fn head(&self) -> Vec<String> {
        let rolled = self.count(|o| *o == InjectOutcome::RolledBack);
        let untrig = self.count(|o| *o == InjectOutcome::NotTriggered);
        let bad = self.count(|o| matches!(o, InjectOutcome::Unexpected(_)));
        vec![
            format!(
                "Fault injection through hotplug/fail: cpus {}",
                super::format_cpu_list(&self.cpus)
            ),
            format!(
                "{} attempts: {rolled} failed and rolled back, {untrig} not triggered (the state has no callback in that direction), {bad} unexpected",
                self.attempts.len()
            ),
        ]
    }
}

impl Tabular for InjectResult {
    /// The attempts (the CSV form's table), and the states each CPU accepts per direction.
    fn tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            "attempts",
            "Attempts, in walk order",
            &[
                "cpu",
                "dir",
                "state",
                "outcome",
                "errno",
                "wall ms",
                "rollback ms",
                "rb steps",
                "online after",
                "state after",
                "fail after",
            ],
            3,
        );
        for a in &self.attempts {
            let outcome = match &a.outcome {
                InjectOutcome::RolledBack => "failed, rolled back".to_string(),
                InjectOutcome::NotTriggered => "not triggered (no callback this way)".to_string(),
                InjectOutcome::Unexpected(d) => format!("UNEXPECTED: {d}"),
            };
            t.row(vec![
                a.cpu.into(),
                a.direction.short().into(),
                format!("{} {}", a.state, a.name).into(),
                outcome.into(),
                a.errno.map(errno_name).into(),
                ms(a.wall_ns as f64).into(),
                a.rollback_ns.map(|n| ms(n as f64)).into(),
                a.rollback_steps.into(),
                u32::from(a.online_after).into(),
                i64::from(a.state_after).into(),
                i64::from(a.fail_after).into(),
            ]);
        }
        let mut acc = Table::new(
            "accepted",
            "States that accept injection",
            &["cpu", "dir", "states"],
            2,
        );
        for (cpu, dir, states) in &self.accepted {
            acc.row(vec![(*cpu).into(), dir.short().into(), states.len().into()]);
        }
        vec![t, acc]
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
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

/// A number, or an empty cell for NaN (a percentile of nothing).
fn fin(x: f64) -> Cell {
    if x.is_finite() {
        Cell::Float(x)
    } else {
        Cell::Empty
    }
}

/// A relative change with its 95% CI, in percent (empty without one).
fn change(c: Option<Change>) -> Cell {
    match c {
        None => Cell::Empty,
        Some(c) => format!(
            "{:+.1}% [{:+.1}, {:+.1}]",
            100.0 * c.change,
            100.0 * c.low,
            100.0 * c.high
        )
        .into(),
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
        let tables = rep.tables();
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["latency", "top_steps", "outliers", "trace_check"],
            "no mitigation compared"
        );
        assert_eq!(tables[0].rows[0][6], Cell::Float(400.0), "p99 ms");
        assert_eq!(tables[2].rows.len(), 1);
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
