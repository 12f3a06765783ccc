//! The replay's typed results (per value, per CPU, reverse), the knee, the marginal point and
//! the Pareto frontier, and their tables for people.

use super::{CalFrom, Calibration, Config, CpuOutcome, HaltpollParams, Input, Pass, Policy, Stint};
use crate::table::{Cell, Table};
use crate::wakeups::WakeClass;
use crate::Tabular;
use serde::Serialize;

/// A prediction's two ends: first-order (the trace's timestamps) and causal (a caught wake
/// of the ping-pong chain brings the chain's later wakes forward).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bounds {
    /// Value predicted from the trace's timestamps.
    pub first_order: f64,
    /// Value with caught wakes bringing the ping-pong chain's later wakes forward.
    pub causal: f64,
}

impl Bounds {
    /// The smaller end.
    pub fn low(&self) -> f64 {
        self.first_order.min(self.causal)
    }
    /// The larger end.
    pub fn high(&self) -> f64 {
        self.first_order.max(self.causal)
    }
    /// Whether `x` lies between the two ends.
    pub fn contains(&self, x: f64) -> bool {
        self.low() <= x && x <= self.high()
    }
}

/// One CPU's outcome at one value.
#[derive(Debug, Clone, Serialize)]
pub struct CpuValue {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// The first-order replay's counts (flattened into this row).
    #[serde(flatten)]
    pub first_order: CpuOutcome,
    /// Caught wakes in the causal replay.
    pub causal_caught: u64,
}

/// Everything predicted at one poll value.
#[derive(Debug, Clone, Serialize)]
pub struct ValueResult {
    /// The poll value, ns.
    pub value_ns: u64,
    /// Catchable wakes caught by polling (no IPI, no halt exit).
    pub caught: u64,
    /// Wakes without IPI in the trace already.
    pub already_caught: u64,
    /// Interrupts that arrived during a poll.
    pub irq_during_poll: u64,
    /// Catchable wakes that still need an IPI.
    pub missed: u64,
    /// caught / (caught + missed).
    pub catch_rate: f64,
    /// IPIs polling would avoid (= `caught`).
    pub ipis_avoided: u64,
    /// Predicted halts.
    pub halts: u64,
    /// The trace's halts minus the predicted ones (negative: more halts).
    pub halts_avoided: i64,
    /// Predicted poll time, ns.
    pub poll_ns: u64,
    /// Poll time that ended in a caught wake, ns.
    pub useful_ns: u64,
    /// Poll time that ended in a timeout or an interrupt, ns.
    pub wasted_ns: u64,
    /// Poll time over the replayed CPUs' wall time.
    pub poll_share_wall: f64,
    /// Poll time over their idle time.
    pub poll_share_idle: f64,
    /// Wake latency saved, total and per caught wake (first-order).
    pub saved_ns: u64,
    /// Median saved per caught wake, ns.
    pub saved_p50_ns: u64,
    /// 99th percentile saved per caught wake, ns.
    pub saved_p99_ns: u64,
    /// Catchable wakes within the calibration's margin of the window's edge (could flip).
    pub edge: u64,
    /// Caught wakes in the causal replay.
    pub causal_caught: u64,
    /// Wake latency saved in the causal replay, ns.
    pub causal_saved_ns: u64,
    /// Predicted µs per ping-pong operation (traced, as the trace ran), when one was found.
    pub us_per_op: Option<Bounds>,
    /// Per CPU, by CPU.
    pub per_cpu: Vec<CpuValue>,
}

/// The ping-pong workload found in (or named for) the trace.
#[derive(Debug, Clone, Serialize)]
pub struct PingPong {
    /// The two tasks' pids.
    pub pids: (i32, i32),
    /// Round trips: half the wakes between the pair.
    pub ops: u64,
    /// µs per round trip as traced: the trace's span over `ops`.
    pub traced_us_per_op: f64,
}

/// Reverse replay, one CPU.
#[derive(Debug, Clone, Serialize)]
pub struct ReverseCpu {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// IPI wakes in the trace (catchable wakes that polling missed).
    pub ipi_wakes_trace: u64,
    /// Wakes without IPI in the trace: with polling off, each needs an IPI.
    pub caught_trace: u64,
    /// Predicted IPI wakes with polling off.
    pub predicted_ipi_wakes: u64,
    /// Poll time in the trace, freed with polling off (cpuidle CPUs only).
    pub poll_ns_freed: u64,
}

/// Reverse replay: polling switched off.
#[derive(Debug, Clone, Serialize)]
pub struct ReverseResult {
    /// Per CPU, by CPU.
    pub per_cpu: Vec<ReverseCpu>,
    /// Latency added per converted wake (the trace's IPI wakes' median minus the caught
    /// wake's own), total.
    pub added_ns: u64,
    /// Predicted µs per ping-pong operation with polling off.
    pub us_per_op: Option<Bounds>,
}

/// The replay's report.
#[derive(Debug, Clone, Serialize)]
pub struct WhatifReport {
    /// The replayed policy.
    pub policy: Policy,
    /// The haltpoll governor's parameters (for the haltpoll policy).
    pub haltpoll: HaltpollParams,
    /// The trace's span, ns.
    pub span_ns: u64,
    /// The poll costs used.
    pub calibration: Calibration,
    /// The ping-pong pair, when one was found or named.
    pub pingpong: Option<PingPong>,
    /// One result per poll value, in the order asked.
    pub values: Vec<ValueResult>,
    /// Smallest value reaching 95% of the best latency saved.
    pub knee_ns: Option<u64>,
    /// The value after which one more ns of poll CPU saves less than one ns of latency.
    pub marginal_ns: Option<u64>,
    /// Values on the frontier of latency saved against CPU burned.
    pub pareto_ns: Vec<u64>,
    /// Polling switched off, when asked for.
    pub reverse: Option<ReverseResult>,
    /// Caveats.
    pub notes: Vec<String>,
}

impl WhatifReport {
    /// The result at poll value `ns`, if it was replayed.
    pub fn value(&self, ns: u64) -> Option<&ValueResult> {
        self.values.iter().find(|v| v.value_ns == ns)
    }
}

fn pingpong(input: &Input, pair: Option<(i32, i32)>) -> Option<PingPong> {
    let (a, b) = pair?;
    let n = |x: i32, y: i32| {
        input
            .pairs
            .iter()
            .find(|p| p.0 == (x, y))
            .map_or(0, |p| p.1)
    };
    let ops = (n(a, b) + n(b, a)) / 2;
    (ops > 0).then(|| PingPong {
        pids: (a, b),
        ops,
        traced_us_per_op: input.span_ns as f64 / ops as f64 / 1e3,
    })
}

pub(super) fn value_result(
    input: &Input,
    _stints: &[Stint],
    value: u64,
    fo: Pass,
    ca: Pass,
    has_pair: bool,
) -> ValueResult {
    let sum = |f: &dyn Fn(&CpuOutcome) -> u64| fo.per_cpu.values().map(f).sum::<u64>();
    let caught = sum(&|o| o.caught);
    let missed = sum(&|o| o.missed);
    let poll = sum(&|o| o.poll_ns);
    let halts = sum(&|o| o.halts);
    let trace_halts = sum(&|o| o.trace_halts);
    let saved_ns = fo.saved_sum;
    let dist = &fo.saved;
    let wall = input.span_ns as f64 * fo.per_cpu.len().max(1) as f64;
    let idle: u64 = input.idle_ns.values().sum();
    let ops = pingpong(input, None).map(|p| p.ops);
    let _ = ops;
    ValueResult {
        value_ns: value,
        caught,
        already_caught: sum(&|o| o.already),
        irq_during_poll: sum(&|o| o.irq_during_poll),
        missed,
        catch_rate: if caught + missed > 0 {
            caught as f64 / (caught + missed) as f64
        } else {
            0.0
        },
        ipis_avoided: caught,
        halts,
        halts_avoided: trace_halts as i64 - halts as i64,
        poll_ns: poll,
        useful_ns: sum(&|o| o.useful_ns),
        wasted_ns: sum(&|o| o.wasted_ns),
        poll_share_wall: poll as f64 / wall.max(1.0),
        poll_share_idle: poll as f64 / idle.max(1) as f64,
        saved_ns,
        saved_p50_ns: dist.p50_ns,
        saved_p99_ns: dist.p99_ns,
        edge: fo.edge,
        causal_caught: ca.per_cpu.values().map(|o| o.caught).sum(),
        causal_saved_ns: ca.saved_sum,
        us_per_op: has_pair.then_some(Bounds {
            first_order: fo.chain_saved_ns as f64,
            causal: ca.chain_saved_ns as f64,
        }),
        per_cpu: fo
            .per_cpu
            .iter()
            .map(|(cpu, o)| CpuValue {
                cpu: *cpu,
                first_order: o.clone(),
                causal_caught: ca.per_cpu.get(cpu).map_or(0, |c| c.caught),
            })
            .collect(),
    }
}

fn cal_note(name: &str, c: &super::Calibrated) -> String {
    match &c.from {
        CalFrom::Trace => format!(
            "{name} {:.2} µs: measured on this trace ({} samples)",
            c.ns as f64 / 1e3,
            c.samples
        ),
        CalFrom::Other(t) => format!(
            "{name} {:.2} µs: measured on {t} ({} samples)",
            c.ns as f64 / 1e3,
            c.samples
        ),
        CalFrom::Default => format!(
            "{name} {:.2} µs: a default (no poll in the trace)",
            c.ns as f64 / 1e3
        ),
    }
}

fn common_notes(input: &Input, cal: &Calibration, notes: &mut Vec<String>) {
    if input.stints.is_empty() {
        notes.push(
            "no idle period ended by a wake in this trace: nothing for polling to catch (a \
             ping-pong on one CPU never idles; try `pmlab run pipe --cpus 0,1`)"
                .into(),
        );
    }
    notes.extend(input.notes.iter().cloned());
    notes.push(cal_note("poll-exit latency", &cal.poll_exit));
    notes.push(cal_note("poll overshoot", &cal.overshoot));
    match &cal.poll_resume {
        Some(r) => notes.push(cal_note("exit to the woken task after a poll", r)),
        None => notes.push(match input.resume_fast_ns {
            Some(f) => format!(
                "exit to the woken task after a poll: not in the trace; it is bounded by the \
                 trace's fastest halt exits (as short as a poll's): first-order takes their \
                 fastest decile ({:.2} µs), causal their fastest percentile ({:.2} µs); give \
                 --calibrate ON.dat (a trace with polling on, same machine) to measure it",
                f as f64 / 1e3,
                input.resume_fastest_ns.unwrap_or(f) as f64 / 1e3
            ),
            None => "exit to the woken task after a poll: not in the trace; each wake keeps its own exit path".into(),
        }),
    }
    notes.push(
        "the model cannot see host steal time, SMT siblings, the host's own halt polling or \
         the tracing overhead: the prediction is of the traced run"
            .into(),
    );
}

pub(super) fn finish(
    input: &Input,
    _stints: &[Stint],
    cfg: &Config,
    cal: Calibration,
    pair: Option<(i32, i32)>,
    mut values: Vec<ValueResult>,
) -> WhatifReport {
    let pp = pingpong(input, pair);
    if let Some(p) = &pp {
        let span = input.span_ns as f64;
        for v in &mut values {
            if let Some(b) = &mut v.us_per_op {
                let f = |saved: f64| (span - saved).max(0.0) / p.ops as f64 / 1e3;
                *b = Bounds {
                    first_order: f(b.first_order),
                    causal: f(b.causal),
                };
            }
        }
    } else {
        for v in &mut values {
            v.us_per_op = None;
        }
    }
    let mut sorted: Vec<&ValueResult> = values.iter().collect();
    sorted.sort_by_key(|v| v.value_ns);
    let best = sorted.iter().map(|v| v.saved_ns).max().unwrap_or(0);
    let knee_ns = (best > 0)
        .then(|| {
            sorted
                .iter()
                .find(|v| v.saved_ns as f64 >= 0.95 * best as f64)
                .map(|v| v.value_ns)
        })
        .flatten();
    let marginal_ns = sorted.windows(2).find_map(|w| {
        let dc = w[1].poll_ns as f64 - w[0].poll_ns as f64;
        let ds = w[1].saved_ns as f64 - w[0].saved_ns as f64;
        (dc > 0.0 && ds / dc < 1.0).then_some(w[0].value_ns)
    });
    let pareto_ns = sorted
        .iter()
        .filter(|v| {
            !sorted.iter().any(|o| {
                o.saved_ns >= v.saved_ns
                    && o.poll_ns <= v.poll_ns
                    && (o.saved_ns > v.saved_ns || o.poll_ns < v.poll_ns)
            })
        })
        .map(|v| v.value_ns)
        .collect();
    let mut notes = Vec::new();
    match (&pp, cfg.pingpong) {
        (Some(p), None) => notes.push(format!(
            "ping-pong detected: pids {} and {} ({} round trips, {:.2} µs/op traced); µs/op is \
             predicted as the trace's span minus the latency saved on their wakes",
            p.pids.0, p.pids.1, p.ops, p.traced_us_per_op
        )),
        (None, None) => notes.push(
            "no ping-pong pair in the wake pattern: no µs/op prediction (name one with --workload-pids)".into(),
        ),
        _ => {}
    }
    if cfg.policy == Policy::Haltpoll {
        notes.push(format!(
            "haltpoll governor: grow {}, shrink {}, grow_start {} ns, allow_shrink {}; each CPU starts at a poll limit of 0, as the kernel does",
            cfg.haltpoll.grow, cfg.haltpoll.shrink, cfg.haltpoll.grow_start, cfg.haltpoll.allow_shrink
        ));
    }
    if cfg.policy == Policy::Arm64Poll {
        notes.push("arm64-poll: a poll ends on the first 10 kHz event-stream tick after its limit (the stream's phase is not in the trace)".into());
    }
    common_notes(input, &cal, &mut notes);
    WhatifReport {
        policy: cfg.policy,
        haltpoll: cfg.haltpoll,
        span_ns: input.span_ns,
        calibration: cal,
        pingpong: pp,
        values,
        knee_ns,
        marginal_ns,
        pareto_ns,
        reverse: None,
        notes,
    }
}

/// Reverse: every wake without IPI becomes an IPI wake with the trace's missed-wake latency.
pub(super) fn reverse(
    input: &Input,
    stints: &[Stint],
    cfg: &Config,
    cal: &Calibration,
    pair: Option<(i32, i32)>,
) -> WhatifReport {
    let mut per: std::collections::BTreeMap<u32, ReverseCpu> = std::collections::BTreeMap::new();
    let (mut added, mut chain_added) = (0u64, 0u64);
    for s in stints {
        let r = per.entry(s.cpu).or_insert(ReverseCpu {
            cpu: s.cpu,
            ipi_wakes_trace: 0,
            caught_trace: 0,
            predicted_ipi_wakes: 0,
            poll_ns_freed: 0,
        });
        r.poll_ns_freed += s.trace_poll_ns;
        match s.class {
            WakeClass::Catchable => {
                r.ipi_wakes_trace += 1;
                r.predicted_ipi_wakes += 1;
            }
            WakeClass::Caught => {
                r.caught_trace += 1;
                r.predicted_ipi_wakes += 1;
                let own = s.end.saturating_sub(s.request.max(s.start));
                let mut add = input.missed_exit_ns.unwrap_or(own).saturating_sub(own);
                if let (Some(m), true) = (input.missed_resume_ns, s.resume > s.end) {
                    add += m.saturating_sub(s.resume - s.end);
                }
                added += add;
                if s.chain(pair) {
                    chain_added += add;
                }
            }
            _ => {}
        }
    }
    let pp = pingpong(input, pair);
    let us = pp.as_ref().map(|p| {
        let f = |x: u64| (input.span_ns + x) as f64 / p.ops as f64 / 1e3;
        Bounds {
            first_order: f(chain_added),
            causal: f(chain_added),
        }
    });
    let mut notes = vec![
        "reverse: each wake without IPI becomes an IPI wake and a halt exit, its request-to-exit \
         and exit-to-task times drawn from the medians of this trace's IPI wakes"
            .into(),
    ];
    if input.missed_exit_ns.is_none() {
        notes.push("too few IPI wakes in the trace to draw their latency: no latency added".into());
    }
    common_notes(input, cal, &mut notes);
    WhatifReport {
        policy: cfg.policy,
        haltpoll: cfg.haltpoll,
        span_ns: input.span_ns,
        calibration: cal.clone(),
        pingpong: pp,
        values: vec![],
        knee_ns: None,
        marginal_ns: None,
        pareto_ns: vec![],
        reverse: Some(ReverseResult {
            per_cpu: per.into_values().collect(),
            added_ns: added,
            us_per_op: us,
        }),
        notes,
    }
}

fn ms(ns: u64) -> Cell {
    Cell::Float(ns as f64 / 1e6)
}
fn usf(ns: u64) -> Cell {
    Cell::Float(ns as f64 / 1e3)
}

impl Tabular for WhatifReport {
    fn tables(&self) -> Vec<Table> {
        let mut out = Vec::new();
        if !self.values.is_empty() {
            let mut t = Table::new(
                "whatif_values",
                &format!(
                    "What {} polling would have done, per poll value",
                    match self.policy {
                        Policy::Fixed => "fixed-window",
                        Policy::Haltpoll => "haltpoll (adaptive)",
                        Policy::Arm64Poll => "arm64 poll-idle",
                    }
                ),
                &[
                    "value_us",
                    "caught",
                    "already",
                    "irq_in_poll",
                    "missed",
                    "catch_pct",
                    "halts_avoided",
                    "poll_ms",
                    "wasted_ms",
                    "poll_wall_pct",
                    "poll_idle_pct",
                    "saved_ms",
                    "saved_p50_us",
                    "saved_p99_us",
                    "edge",
                    "causal_caught",
                    "us_per_op_first",
                    "us_per_op_causal",
                ],
                1,
            );
            for v in &self.values {
                let (a, b) = v.us_per_op.map_or((Cell::Empty, Cell::Empty), |b| {
                    (Cell::Float(b.first_order), Cell::Float(b.causal))
                });
                t.row(vec![
                    usf(v.value_ns),
                    v.caught.into(),
                    v.already_caught.into(),
                    v.irq_during_poll.into(),
                    v.missed.into(),
                    (v.catch_rate * 100.0).into(),
                    v.halts_avoided.into(),
                    ms(v.poll_ns),
                    ms(v.wasted_ns),
                    (v.poll_share_wall * 100.0).into(),
                    (v.poll_share_idle * 100.0).into(),
                    ms(v.saved_ns),
                    usf(v.saved_p50_ns),
                    usf(v.saved_p99_ns),
                    v.edge.into(),
                    v.causal_caught.into(),
                    a,
                    b,
                ]);
            }
            out.push(t);
            let mut c = Table::new(
                "whatif_cpus",
                "Per CPU (first-order)",
                &[
                    "value_us",
                    "cpu",
                    "caught",
                    "already",
                    "missed",
                    "not_catchable",
                    "halts",
                    "trace_halts",
                    "poll_ms",
                    "limit_changes",
                    "causal_caught",
                ],
                2,
            );
            for v in &self.values {
                for p in &v.per_cpu {
                    let o = &p.first_order;
                    c.row(vec![
                        usf(v.value_ns),
                        p.cpu.into(),
                        o.caught.into(),
                        o.already.into(),
                        o.missed.into(),
                        o.not_catchable.into(),
                        o.halts.into(),
                        o.trace_halts.into(),
                        ms(o.poll_ns),
                        o.limit_changes.into(),
                        p.causal_caught.into(),
                    ]);
                }
            }
            out.push(c);
        }
        if let Some(r) = &self.reverse {
            let mut t = Table::new(
                "whatif_reverse",
                "Polling off, predicted from a trace with polling on",
                &[
                    "cpu",
                    "ipi_wakes_trace",
                    "no_ipi_wakes_trace",
                    "predicted_ipi_wakes",
                    "poll_ms_freed",
                ],
                1,
            );
            for c in &r.per_cpu {
                t.row(vec![
                    c.cpu.into(),
                    c.ipi_wakes_trace.into(),
                    c.caught_trace.into(),
                    c.predicted_ipi_wakes.into(),
                    ms(c.poll_ns_freed),
                ]);
            }
            out.push(t);
        }
        out
    }
    fn notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        if let Some(k) = self.knee_ns {
            n.push(format!(
                "knee: {:.1} µs (smallest value reaching 95% of the best latency saved)",
                k as f64 / 1e3
            ));
        }
        if let Some(m) = self.marginal_ns {
            n.push(format!(
                "beyond {:.1} µs one more µs of poll CPU saves less than one µs of wake latency",
                m as f64 / 1e3
            ));
        }
        if !self.pareto_ns.is_empty() {
            let v: Vec<String> = self
                .pareto_ns
                .iter()
                .map(|v| format!("{:.0}", *v as f64 / 1e3))
                .collect();
            n.push(format!(
                "Pareto frontier (latency saved vs CPU burned), µs: {}",
                v.join(", ")
            ));
        }
        if let Some(p) = &self.pingpong {
            if let Some(v) = self.values.iter().rev().find(|v| v.us_per_op.is_some()) {
                let b = v.us_per_op.unwrap_or(Bounds {
                    first_order: 0.0,
                    causal: 0.0,
                });
                n.push(format!(
                    "µs/op: {:.2} traced; at {:.0} µs predicted {:.2} .. {:.2} (first-order .. causal)",
                    p.traced_us_per_op,
                    v.value_ns as f64 / 1e3,
                    b.first_order,
                    b.causal
                ));
            }
        }
        if let Some(r) = &self.reverse {
            if let Some(b) = r.us_per_op {
                n.push(format!(
                    "µs/op with polling off: predicted {:.2}",
                    b.first_order
                ));
            }
        }
        n.extend(self.notes.iter().cloned());
        n
    }
}
