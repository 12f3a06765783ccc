//! Replay (`pmlab whatif`): a trace's idle periods and their wakes, replayed under an
//! idle-poll policy (a fixed window, the haltpoll governor, arm64 poll-idle) to predict what
//! polling would have caught, burned and saved; first-order and causal (the chain shifted),
//! forward (polling on) and reverse (a trace recorded with polling, predicting it off).
//!
//! The idle periods come from [`crate::idle::periods`] and each period's wake from the
//! wakeups walk ([`crate::wakeups::analyze_detailed`]): no second walk of the events.

pub mod cpuidle;
pub mod governor;
mod report;
#[cfg(test)]
mod tests;

pub use governor::{HaltpollParams, LimitChange};
pub use report::*;

use crate::haltpoll;
use crate::idle::{self, Periods, Source};
use crate::stats::select_percentiles;
use crate::wakeups::{self, WakeClass, WakeDetails, WakeupsReport};
use crate::{Missing, Options};
use pmlab_trace::Trace;
use serde::Serialize;
use std::collections::BTreeMap;

/// The poll policy replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// A constant poll window before each halt (the POLL state with a fixed limit).
    Fixed,
    /// The haltpoll governor: the window grows and shrinks per CPU after each halt, up to
    /// the value (`guest_halt_poll_ns`).
    Haltpoll,
    /// arm64 poll-idle: a fixed limit, the poll ending on the 10 kHz event stream's tick.
    Arm64Poll,
}

/// A policy name that is none of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy {0:?}: expected haltpoll, fixed or arm64-poll")]
pub struct UnknownPolicy(pub String);

impl std::str::FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Policy, UnknownPolicy> {
        match s {
            "fixed" => Ok(Policy::Fixed),
            "haltpoll" => Ok(Policy::Haltpoll),
            "arm64-poll" | "arm64" => Ok(Policy::Arm64Poll),
            _ => Err(UnknownPolicy(s.to_string())),
        }
    }
}

/// Where a calibration value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CalFrom {
    /// Measured on the replayed trace (n samples).
    Trace,
    /// Measured on another trace given for calibration.
    Other(String),
    /// Not measurable here: a default.
    Default,
}

/// One calibration value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibrated {
    /// The value, ns.
    pub ns: u64,
    /// Samples it is the median of (0 for a default).
    pub samples: u64,
    /// Where it comes from.
    pub from: CalFrom,
}

impl Calibrated {
    fn default_ns(ns: u64) -> Calibrated {
        Calibrated {
            ns,
            samples: 0,
            from: CalFrom::Default,
        }
    }
    fn measured(v: &mut [u64]) -> Option<Calibrated> {
        // Fewer samples than this say little about a distribution.
        if v.len() < 5 {
            return None;
        }
        Some(Calibrated {
            ns: select_percentiles(v, [50.0])?[0],
            samples: v.len() as u64,
            from: CalFrom::Trace,
        })
    }
}

/// The poll path's costs, from the polls of a trace recorded with polling on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// A wake's request to the poll's exit (the poller seeing need_resched), p50.
    pub poll_exit: Calibrated,
    /// A poll's exit to the woken task's first event, p50; None when no trace showed it.
    pub poll_resume: Option<Calibrated>,
    /// How far a timed-out poll runs past its limit, p50.
    pub overshoot: Calibrated,
}

/// Default poll-exit latency when no poll is in the trace: a store seen by a spinning CPU
/// (a cache-line transfer) plus the poll loop's exit, about a microsecond.
pub const DEFAULT_POLL_EXIT_NS: u64 = 1_000;

impl Calibration {
    /// The same values, marked as taken from another trace (`--calibrate`).
    pub fn from_other(mut self, name: &str) -> Calibration {
        for c in [&mut self.poll_exit, &mut self.overshoot]
            .into_iter()
            .chain(self.poll_resume.as_mut())
        {
            if c.from == CalFrom::Trace {
                c.from = CalFrom::Other(name.to_string());
            }
        }
        self
    }
}

/// What to replay.
#[derive(Debug, Clone)]
pub struct Config {
    /// Fixed window, haltpoll's adaptive governor, or arm64's poll-idle.
    pub policy: Policy,
    /// Poll values, ns (the window, or haltpoll's `guest_halt_poll_ns`).
    pub values_ns: Vec<u64>,
    /// The haltpoll governor's other parameters (its `guest_halt_poll_ns` is each value).
    pub haltpoll: HaltpollParams,
    /// Predict polling off from a trace recorded with polling on.
    pub reverse: bool,
    /// The ping-pong pair (pids); None: detected from the wake pattern.
    pub pingpong: Option<(i32, i32)>,
    /// Calibration from another trace; None: from this trace, else defaults.
    pub calibration: Option<Calibration>,
    /// What becomes of the tables the preparation no longer needs.
    pub spent: Spent,
}

/// What becomes of the tables (idle periods, the wakeups walk) that the replay's
/// preparation no longer needs. Freeing them takes milliseconds of CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Spent {
    /// Freed on a background thread: for a long-lived process (Python, the lab).
    #[default]
    FreedInBackground,
    /// Left to the process's exit: for a one-shot command, where freeing them would only
    /// take a CPU from the replay's workers.
    LeftToExit,
}

impl Spent {
    fn dispose<T: Send + 'static>(self, t: T) {
        match self {
            Spent::FreedInBackground => {
                std::thread::spawn(move || drop(t));
            }
            Spent::LeftToExit => std::mem::forget(t),
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            policy: Policy::Haltpoll,
            values_ns: DEFAULT_VALUES_NS.to_vec(),
            haltpoll: HaltpollParams::default(),
            reverse: false,
            pingpong: None,
            calibration: None,
            spent: Spent::default(),
        }
    }
}

/// The values swept when none are given: the arm64 cover letter's range and haltpoll's default.
pub const DEFAULT_VALUES_NS: &[u64] = &[
    0, 5_000, 10_000, 25_000, 50_000, 75_000, 100_000, 150_000, 200_000, 300_000, 400_000, 500_000,
];

/// One stretch of idle on one CPU, from entering idle to the wake that ends it, with the
/// interrupts inside it that woke nobody.
#[derive(Debug, Clone, Copy)]
struct Stint {
    cpu: u32,
    start: u64,
    /// The exit of its last idle period.
    end: u64,
    /// Range of its interrupt times in `Input::irqs`.
    irqs: (u32, u32),
    class: WakeClass,
    /// When the final wake arrives: the request for a wake of a task, the source otherwise.
    fin: u64,
    request: u64,
    resume: u64,
    waker: i32,
    wakee: i32,
    /// Halts and poll time in the trace itself.
    trace_halts: u32,
    trace_poll_ns: u64,
}

/// Everything the replay needs from one trace, computed once for any number of configs.
#[derive(Debug, Clone)]
pub struct Input {
    stints: Vec<Stint>,
    irqs: Vec<u64>,
    /// The trace's span, ns.
    pub span_ns: u64,
    /// The replayed CPUs.
    pub cpus: Vec<u32>,
    /// Per CPU: `cpu_idle` periods or idle-task periods.
    pub sources: BTreeMap<u32, Source>,
    /// Idle time per CPU (sum of stints).
    pub idle_ns: BTreeMap<u32, u64>,
    /// `sched_waking` counts by (waker pid, wakee pid), for finding a ping-pong pair.
    pub pairs: Vec<((i32, i32), u64)>,
    /// Poll costs measured on this trace (used unless another trace is given for calibration).
    pub own_calibration: Calibration,
    /// p10 of the exit-to-resume time of the trace's IPI wakes (fastest exit path seen).
    resume_fast_ns: Option<u64>,
    /// p1 of the same: the halt exits as short as a poll's (on the haltpoll fixture, 3.0 µs
    /// against 3.3 µs measured on real polls), when there are enough wakes to have them.
    resume_fastest_ns: Option<u64>,
    /// Median request-to-exit and exit-to-resume of the trace's IPI wakes (reverse mode).
    missed_exit_ns: Option<u64>,
    missed_resume_ns: Option<u64>,
    /// The trace's own `guest_halt_poll_ns` changes per CPU (for the governor check).
    pub trace_limits: BTreeMap<u32, Vec<LimitChange>>,
    /// Halt residencies per CPU of cpuidle CPUs: (exit time, ns).
    pub halts: BTreeMap<u32, Vec<(u64, u64)>>,
    /// Caveats.
    pub notes: Vec<String>,
    /// The cpuidle index of the poll state (`POLL`, or state 0 under haltpoll); None without one.
    pub poll_state: Option<u32>,
    /// Idle stretches cut by the trace's start or end (not replayed).
    pub incomplete: u64,
}

fn missing() -> Missing {
    Missing::new(
        "whatif",
        &[
            "power:cpu_idle or sched:sched_switch",
            "sched:sched_waking",
            "ipi:ipi_send_cpu",
            "irq_vectors",
            "sched:sched_wake_idle_without_ipi",
        ],
    )
}

/// Prepare the replay from a trace: idle periods, then the wakeups walk with detail.
pub fn prepare(trace: &Trace, opts: &Options) -> Result<Input, Missing> {
    prepare_spending(trace, opts, Spent::default())
}

fn prepare_spending(trace: &Trace, opts: &Options, spent: Spent) -> Result<Input, Missing> {
    let p = idle::periods(trace, opts).map_err(|_| missing())?;
    let (rep, d) = prepare_inner(trace, opts, &p, spent, Limits::Read)?;
    // Unmapping the periods' tables takes milliseconds the replay need not wait for.
    spent.dispose((p, rep));
    Ok(d)
}

/// Prepare from already computed idle periods; also returns the wakeups report of the same
/// walk (so `pmlab analyze` pays for one walk).
pub fn prepare_with(
    trace: &Trace,
    opts: &Options,
    p: &Periods,
) -> Result<(WakeupsReport, Input), Missing> {
    prepare_inner(trace, opts, p, Spent::default(), Limits::Read)
}

/// [`prepare_with`] given the haltpoll analysis the caller has read already (its recorded
/// poll limits; None where it found none), so `pmlab analyze` reads it once.
pub fn prepare_with_limits(
    trace: &Trace,
    opts: &Options,
    p: &Periods,
    limits: Option<&haltpoll::HaltpollReport>,
) -> Result<(WakeupsReport, Input), Missing> {
    prepare_inner(trace, opts, p, Spent::default(), Limits::Given(limits))
}

/// The trace's recorded poll limits: read here, or given.
enum Limits<'a> {
    Read,
    Given(Option<&'a haltpoll::HaltpollReport>),
}

fn prepare_inner(
    trace: &Trace,
    opts: &Options,
    p: &Periods,
    spent: Spent,
    limits: Limits,
) -> Result<(WakeupsReport, Input), Missing> {
    let need = [("sched", "sched_waking"), ("ipi", "ipi_send_cpu")];
    let absent: Vec<String> = need
        .iter()
        .filter(|(s, e)| trace.event_id(s, e).is_none())
        .map(|(s, e)| format!("{s}:{e}"))
        .collect();
    // Without the waker's request and the IPI's sender no wake can be called catchable;
    // a trace recorded with polling on may lack ipi_send_cpu only if it has no-IPI wakes.
    let no_ipi = trace
        .event_id("sched", "sched_wake_idle_without_ipi")
        .is_some();
    if absent.iter().any(|a| a == "sched:sched_waking") || (!absent.is_empty() && !no_ipi) {
        let names: Vec<&str> = absent.iter().map(|s| s.as_str()).collect();
        return Err(Missing {
            analysis: "whatif".into(),
            ..Missing::new("whatif", &names)
        });
    }
    // At most one stint per idle period: reserved once, its pages mapped in on another
    // thread during the walk, so the walk takes no page faults of its own.
    let periods: usize = p.by_cpu.values().map(|v| v.len()).sum();
    let stints: Vec<Stint> = pmlab_trace::dat::huge_vec(periods);
    // The haltpoll timeline does not depend on the wakeups walk: it is read beside it.
    let (walked, read) = std::thread::scope(|sc| {
        let fill = sc.spawn(pmlab_trace::dat::populate_job(&stints));
        let h = matches!(limits, Limits::Read)
            .then(|| sc.spawn(|| haltpoll::analyze(trace, opts).ok()));
        let w = wakeups::analyze_detailed(trace, opts, p);
        crate::all::joined(fill);
        (w, h.and_then(crate::all::joined))
    });
    let limits = match limits {
        Limits::Given(l) => l,
        Limits::Read => read.as_ref(),
    };
    let (rep, d) = walked.map_err(|_| missing())?;
    let input = build(trace, opts, p, &d, limits, stints);
    // As in `prepare`: the walk's detail is freed off the replay's path.
    spent.dispose(d);
    Ok((rep, input))
}

fn build(
    trace: &Trace,
    opts: &Options,
    p: &Periods,
    d: &WakeDetails,
    limits: Option<&haltpoll::HaltpollReport>,
    mut stints: Vec<Stint>,
) -> Input {
    let mut notes = Vec::new();
    // The poll state: named POLL, else state 0 where the haltpoll driver is seen.
    let poll_state = opts
        .states
        .as_ref()
        .and_then(|s| s.iter().find(|(_, i)| i.name == "POLL").map(|(k, _)| *k))
        .or_else(|| trace.event_id("power", "guest_halt_poll_ns").map(|_| 0u32));
    let mut trace_limits: BTreeMap<u32, Vec<LimitChange>> = BTreeMap::new();
    if let Some(h) = limits {
        for c in &h.timeline {
            trace_limits.entry(c.cpu).or_default().push(LimitChange {
                ts: p.t0 + (c.at_s * 1e9).round() as u64,
                grow: c.grow,
                new_ns: c.new_ns,
                old_ns: c.old_ns,
            });
        }
    }
    let mut irqs: Vec<u64> = Vec::new();
    let mut halts: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    let mut idle_ns: BTreeMap<u32, u64> = BTreeMap::new();
    let (mut exit_s, mut resume_s, mut over_s) = (Vec::new(), Vec::new(), Vec::new());
    let (mut miss_exit, mut miss_resume) = (Vec::new(), Vec::new());
    let mut incomplete = 0u64;
    let empty = Vec::new();
    for (&cpu, ps) in &p.by_cpu {
        let ws = d.by_cpu.get(&cpu).unwrap_or(&empty);
        if ws.len() != ps.len() {
            continue;
        }
        let inner = d.inner.get(&cpu).map_or(&[][..], |v| v.as_slice());
        // Looked up once per CPU, not per period.
        let cpu_idle = p.source.get(&cpu) == Some(&Source::CpuIdle);
        let is_poll = |st: u32| cpu_idle && poll_state == Some(st);
        let mut idle_here: Option<u64> = None;
        let lim = trace_limits.get(&cpu).map_or(&[][..], |v| v.as_slice());
        let limit_at = |ts: u64| -> Option<u64> {
            // the limit in force at ts: the last change before it, else the first's old value
            let k = lim.partition_point(|c| c.ts <= ts);
            if k > 0 {
                Some(lim[k - 1].new_ns)
            } else {
                lim.first().map(|c| c.old_ns)
            }
        };
        let mut k = 0usize;
        let mut cur: Option<(u64, u32, u32, u64, bool)> = None; // start, irq begin, halts, poll ns, open
        let hv = halts.entry(cpu).or_default();
        for (i, (q, w)) in ps.iter().zip(ws).enumerate() {
            let (start, ib, mut nh, mut pns, mut open) =
                cur.take()
                    .unwrap_or((q.start, irqs.len() as u32, 0, 0, false));
            open |= q.open_start || q.open_end;
            while k < inner.len() && inner[k].0 as usize <= i {
                if inner[k].0 as usize == i && inner[k].1 != 0 {
                    irqs.push(inner[k].1);
                    nh += 1;
                }
                k += 1;
            }
            let poll = is_poll(q.state);
            if poll {
                pns += q.len();
            } else {
                nh += 1;
                if cpu_idle && q.complete() {
                    hv.push((q.end, q.len()));
                }
            }
            // A timed-out poll: the next period (a halt) follows without a wake.
            if poll
                && w.class == WakeClass::Unknown
                && w.resume == 0
                && q.complete()
                && ps.get(i + 1).is_some_and(|n| !is_poll(n.state))
            {
                if let Some(l) = limit_at(q.start).filter(|l| *l > 0) {
                    over_s.push(q.len().saturating_sub(l));
                }
            }
            let last = i + 1 == ps.len();
            let ends = w.woke
                || w.resume != 0
                || last
                || matches!(w.class, WakeClass::Catchable | WakeClass::Caught);
            if !ends {
                if w.class == WakeClass::NotCatchable && w.source != 0 {
                    irqs.push(w.source);
                }
                cur = Some((start, ib, nh, pns, open));
                continue;
            }
            if open {
                incomplete += 1;
                irqs.truncate(ib as usize);
                continue;
            }
            let fin = match w.class {
                WakeClass::Catchable | WakeClass::Caught if w.request != 0 => w.request,
                WakeClass::Unknown => q.end,
                _ if w.source != 0 => w.source,
                _ => q.end,
            }
            .clamp(start, q.end);
            // the idle-task fallback sees one period per stint: a wake without IPI halted
            // nothing, any other wake ended a halt
            if !is_poll(q.state)
                && w.class == WakeClass::Caught
                && p.source.get(&cpu) != Some(&Source::CpuIdle)
            {
                nh = nh.saturating_sub(1);
            }
            let s = Stint {
                cpu,
                start,
                end: q.end,
                irqs: (ib, irqs.len() as u32),
                class: w.class,
                fin,
                request: w.request,
                resume: w.resume,
                waker: w.waker,
                wakee: w.wakee,
                trace_halts: nh,
                trace_poll_ns: pns,
            };
            *idle_here.get_or_insert(0) += q.end - start;
            if w.request != 0 && w.request <= q.end {
                match w.class {
                    WakeClass::Caught if poll => {
                        exit_s.push(q.end - w.request);
                        if w.resume != 0 {
                            resume_s.push(w.resume - q.end);
                        }
                    }
                    WakeClass::Catchable => {
                        miss_exit.push(q.end - w.request);
                        if w.resume != 0 {
                            miss_resume.push(w.resume - q.end);
                        }
                    }
                    _ => {}
                }
            }
            stints.push(s);
        }
        if let Some(ns) = idle_here {
            idle_ns.insert(cpu, ns);
        }
    }
    let own = Calibration {
        poll_exit: Calibrated::measured(&mut exit_s)
            .unwrap_or_else(|| Calibrated::default_ns(DEFAULT_POLL_EXIT_NS)),
        poll_resume: Calibrated::measured(&mut resume_s),
        overshoot: Calibrated::measured(&mut over_s).unwrap_or_else(|| Calibrated::default_ns(0)),
    };
    let n = miss_resume.len();
    let [r1, r10, r50] = select_percentiles(&mut miss_resume, [1.0, 10.0, 50.0]).unwrap_or([0; 3]);
    let resume_fast_ns = (n >= 5).then_some(r10);
    let resume_fastest_ns = (n >= 100).then_some(r1);
    let missed_resume_ns = (n >= 5).then_some(r50);
    let missed_exit_ns = (miss_exit.len() >= 5)
        .then(|| select_percentiles(&mut miss_exit, [50.0]))
        .flatten()
        .map(|[p]| p);
    if incomplete > 0 {
        notes.push(format!(
            "{incomplete} idle stretches cut by the trace's start or end are not replayed"
        ));
    }
    if p.source.values().any(|s| *s == Source::IdleTask) {
        notes.push(
            "CPUs without cpu_idle (idle-task fallback): a stretch is one idle-task period; its \
             exit is the idle task's last event, and whether it polled is not in the trace"
                .into(),
        );
    }
    // In the replay's order (by exit, then CPU), so the passes read them in sequence.
    stints.sort_by_key(|s| (s.end, s.cpu));
    halts.retain(|_, v| !v.is_empty());
    Input {
        stints,
        irqs,
        span_ns: p.span(),
        cpus: p.by_cpu.keys().copied().collect(),
        sources: p.source.clone(),
        idle_ns,
        pairs: d.pairs.clone(),
        own_calibration: own,
        resume_fast_ns,
        resume_fastest_ns,
        missed_exit_ns,
        missed_resume_ns,
        trace_limits,
        halts,
        notes,
        poll_state,
        incomplete,
    }
}

/// The ping-pong pair of a trace: the most frequent waker→wakee pair whose reverse is at
/// least half as frequent, making at least a fifth of all wakes.
pub fn detect_pingpong(pairs: &[((i32, i32), u64)]) -> Option<(i32, i32)> {
    let total: u64 = pairs.iter().map(|p| p.1).sum();
    let count = |a: i32, b: i32| pairs.iter().find(|p| p.0 == (a, b)).map_or(0, |p| p.1);
    pairs
        .iter()
        .filter(|((a, b), _)| a != b && *a != 0 && *b != 0)
        .find(|((a, b), n)| {
            let back = count(*b, *a);
            back * 2 >= *n && (n + back) * 5 >= total && n + back >= 20
        })
        .map(|p| p.0)
}

/// The haltpoll governor replayed over a trace's own halts, per CPU, from the limit in force
/// at the trace's first `guest_halt_poll_ns` change: the changes it would log.
pub fn governor_check(input: &Input, params: &HaltpollParams) -> BTreeMap<u32, Vec<LimitChange>> {
    input
        .trace_limits
        .iter()
        .filter_map(|(cpu, lim)| {
            let first = lim.first()?;
            let halts = input.halts.get(cpu)?;
            Some((
                *cpu,
                params.replay_halts(first.old_ns, halts.iter().copied()),
            ))
        })
        .collect()
}

/// Run the replay on a trace.
pub fn run(trace: &Trace, opts: &Options, cfg: &Config) -> Result<WhatifReport, Missing> {
    let input = prepare_spending(trace, opts, cfg.spent)?;
    let report = replay(&input, cfg);
    cfg.spent.dispose(input);
    Ok(report)
}

/// Per-CPU governor state of one pass.
#[derive(Clone, Copy, Default)]
struct Gov {
    limit: u64,
}

/// One value's outcome of one pass (first-order or causal).
#[derive(Debug, Clone, Default)]
struct Pass {
    per_cpu: BTreeMap<u32, CpuOutcome>,
    /// Latency saved per caught wake, summarised in the worker (first-order passes only: the
    /// percentiles are theirs).
    saved: crate::stats::DurationSummary,
    saved_sum: u64,
    chain_saved_ns: u64,
    edge: u64,
}

/// Replay every configured value, first-order and causal.
pub fn replay(input: &Input, cfg: &Config) -> WhatifReport {
    let cal = cfg
        .calibration
        .clone()
        .unwrap_or_else(|| input.own_calibration.clone());
    let pair = cfg.pingpong.or_else(|| detect_pingpong(&input.pairs));
    let stints = &input.stints;
    if cfg.reverse {
        return report::reverse(input, stints, cfg, &cal, pair);
    }
    // Every value's first-order and causal passes are independent jobs: a few workers
    // take them in turn (the causal ones are slower, so fixed pairs would wait).
    let jobs: Vec<(u64, bool)> = cfg
        .values_ns
        .iter()
        .flat_map(|&v| [(v, true), (v, false)])
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, jobs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, Pass)> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (cal, jobs, next) = (&cal, &jobs, &next);
                sc.spawn(move || {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(v, causal)) = jobs.get(i) else {
                            return mine;
                        };
                        mine.push((i, pass(input, stints, cfg, cal, pair, v, causal)));
                    }
                })
            })
            .collect();
        hs.into_iter().flat_map(crate::all::joined).collect()
    });
    done.sort_by_key(|(i, _)| *i);
    let mut passes = done.into_iter().map(|(_, p)| p);
    let mut values = Vec::new();
    for &v in &cfg.values_ns {
        let (ca, fo) = (
            passes.next().expect("causal pass"),
            passes.next().expect("first-order pass"),
        );
        values.push(report::value_result(
            input,
            stints,
            v,
            fo,
            ca,
            pair.is_some(),
        ));
    }
    report::finish(input, stints, cfg, cal, pair, values)
}

impl Stint {
    /// Whether its final wake is between the ping-pong pair.
    fn chain(&self, pair: Option<(i32, i32)>) -> bool {
        pair.is_some_and(|(a, b)| {
            (self.waker, self.wakee) == (a, b) || (self.waker, self.wakee) == (b, a)
        })
    }
}

/// Simulated outcome of one stint.
#[derive(Debug, Clone, Copy, Default)]
struct Sim {
    in_poll: bool,
    poll_ns: u64,
    wasted_ns: u64,
    halts: u32,
    irq_in_poll: u32,
    edge: bool,
}

/// Simulate one stint under the policy: `irqs` and `fin` are offsets from its start.
#[allow(clippy::too_many_arguments)]
fn simulate(
    policy: Policy,
    params: &HaltpollParams,
    gov: &mut Gov,
    value: u64,
    overshoot: u64,
    margin: u64,
    start: u64,
    irqs: &[u64],
    fin: u64,
    changes: &mut u64,
) -> Sim {
    let mut sim = Sim::default();
    let (mut t, mut k) = (0u64, 0usize);
    loop {
        let limit = match policy {
            Policy::Haltpoll => gov.limit,
            Policy::Fixed | Policy::Arm64Poll => value,
        };
        if limit > 0 {
            let pend = match policy {
                Policy::Arm64Poll => governor::arm64_poll_end(start + t, limit) - start,
                _ => t + limit + overshoot,
            };
            while k < irqs.len() && irqs[k] < pend.min(fin) {
                sim.irq_in_poll += 1;
                k += 1;
            }
            if fin <= pend {
                sim.in_poll = true;
                sim.poll_ns += fin - t;
                sim.edge |= pend - fin <= margin;
                return sim;
            }
            sim.edge |= fin - pend <= margin;
            sim.poll_ns += pend - t;
            sim.wasted_ns += pend - t;
            t = pend;
        }
        // halt until the next interrupt or the final wake
        sim.halts += 1;
        while k < irqs.len() && irqs[k] < t {
            k += 1;
        }
        let next = if k < irqs.len() {
            irqs[k].min(fin)
        } else {
            fin
        };
        if policy == Policy::Haltpoll {
            let p = HaltpollParams {
                guest_halt_poll_ns: value,
                ..*params
            };
            let (new, ev) = p.adjust(gov.limit, next - t);
            *changes += u64::from(ev.is_some());
            gov.limit = new;
        }
        if next >= fin {
            return sim;
        }
        k += 1;
        t = next;
    }
}

/// One pass over all stints for one value.
fn pass(
    input: &Input,
    stints: &[Stint],
    cfg: &Config,
    cal: &Calibration,
    pair: Option<(i32, i32)>,
    value: u64,
    causal: bool,
) -> Pass {
    // Per CPU by index (a map lookup per stint would dominate the replay).
    let ncpu = input
        .cpus
        .iter()
        .map(|&c| c as usize + 1)
        .max()
        .unwrap_or(0);
    let mut gov: Vec<Gov> = vec![Gov::default(); ncpu];
    let mut per_cpu: Vec<Option<CpuOutcome>> = vec![None; ncpu];
    let mut out = Pass::default();
    let mut saved_each: Vec<u64> = Vec::with_capacity(if causal { 0 } else { stints.len() });
    let mut rel: Vec<u64> = Vec::new();
    // chain savings so far, by exit time: (end, cumulative saved); causal passes only
    let mut cum: Vec<(u64, u64)> = Vec::new();
    // Queries are for times near the newest entries (the stint's own start and wake, and
    // `cum` is in order of exit): search back from the end, doubling the step.
    let saved_before = |cum: &[(u64, u64)], t: u64| -> u64 {
        let (mut lo, mut hi, mut step) = (cum.len(), cum.len(), 1);
        while lo > 0 && cum[lo - 1].0 >= t {
            hi = lo - 1;
            lo = lo.saturating_sub(step);
            step *= 2;
        }
        let k = lo + cum[lo..hi].partition_point(|e| e.0 < t);
        if k == 0 {
            0
        } else {
            cum[k - 1].1
        }
    };
    let margin = cal.overshoot.ns.max(cal.poll_exit.ns).max(1_000);
    // Unmeasured, the poll's exit path is bounded by the trace's fast halt exits: the
    // fastest decile at the slow end, the fastest percentile at the fast end.
    let resume_poll = cal.poll_resume.as_ref().map(|c| c.ns).or(if causal {
        input.resume_fastest_ns.or(input.resume_fast_ns)
    } else {
        input.resume_fast_ns
    });
    for s in stints {
        let irqs = &input.irqs[s.irqs.0 as usize..s.irqs.1 as usize];
        let mut fin = s.fin - s.start;
        let chain = s.chain(pair);
        if causal && chain {
            let shift = saved_before(&cum, s.fin) - saved_before(&cum, s.start);
            fin = fin.saturating_sub(shift);
        }
        rel.clear();
        rel.extend(
            irqs.iter()
                .map(|t| t.saturating_sub(s.start))
                .filter(|t| *t < fin),
        );
        let g = &mut gov[s.cpu as usize];
        let o = per_cpu[s.cpu as usize].get_or_insert_with(CpuOutcome::default);
        let sim = simulate(
            cfg.policy,
            &cfg.haltpoll,
            g,
            value,
            cal.overshoot.ns,
            margin,
            s.start,
            &rel,
            fin,
            &mut o.limit_changes,
        );
        o.poll_ns += sim.poll_ns;
        o.irq_during_poll += u64::from(sim.irq_in_poll);
        o.trace_halts += u64::from(s.trace_halts);
        out.edge += u64::from(sim.edge && s.class == WakeClass::Catchable);
        match s.class {
            WakeClass::Catchable if sim.in_poll => {
                o.caught += 1;
                o.useful_ns += sim.poll_ns - sim.wasted_ns;
                o.wasted_ns += sim.wasted_ns;
                o.halts += u64::from(sim.halts);
                let lat = s.end.saturating_sub(s.request.max(s.start));
                let mut saved = lat.saturating_sub(cal.poll_exit.ns);
                if let (Some(rp), true) = (resume_poll, s.resume > s.end) {
                    saved += (s.resume - s.end).saturating_sub(rp);
                }
                out.saved_sum += saved;
                if !causal {
                    saved_each.push(saved);
                }
                if chain {
                    out.chain_saved_ns += saved;
                    if causal {
                        let c = cum.last().map_or(0, |e| e.1);
                        cum.push((s.end, c + saved));
                    }
                }
            }
            WakeClass::Catchable => {
                o.missed += 1;
                o.wasted_ns += sim.wasted_ns;
                o.halts += u64::from(sim.halts);
            }
            WakeClass::Caught => {
                // A wake without IPI in the trace stays one: the CPU was polling, or had not
                // halted yet. Its poll time counts; no halt is added for it.
                o.already += 1;
                o.useful_ns += sim.poll_ns - sim.wasted_ns;
                o.wasted_ns += sim.wasted_ns;
                o.halts += u64::from(sim.halts.saturating_sub(u32::from(!sim.in_poll)));
            }
            WakeClass::NotCatchable | WakeClass::Unknown => {
                if sim.in_poll {
                    o.irq_during_poll += 1;
                }
                o.not_catchable += 1;
                o.wasted_ns += sim.poll_ns;
                o.halts += u64::from(sim.halts);
            }
        }
    }
    // p50 and p99 are selected, not sorted for.
    out.saved = crate::stats::DurationSummary::of(&mut saved_each);
    out.per_cpu = per_cpu
        .into_iter()
        .enumerate()
        .filter_map(|(c, o)| Some((c as u32, o?)))
        .collect();
    out
}

/// Per-CPU counts of one pass.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CpuOutcome {
    /// Catchable wakes that arrived while polling.
    pub caught: u64,
    /// Wakes without IPI in the trace (the CPU polled already).
    pub already: u64,
    /// Catchable wakes that arrived after the poll gave up (an IPI and a halt exit).
    pub missed: u64,
    /// Timer, device IRQ and mask-IPI wakes, and interrupts inside idle that woke nobody.
    pub not_catchable: u64,
    /// Interrupts that arrived while polling.
    pub irq_during_poll: u64,
    /// Halts (and so, in a VM, halt exits).
    pub halts: u64,
    /// Halts in the trace itself.
    pub trace_halts: u64,
    /// Predicted poll time, ns.
    pub poll_ns: u64,
    /// Poll time that ended in a caught wake.
    pub useful_ns: u64,
    /// Poll time that ended in a timeout or an interrupt.
    pub wasted_ns: u64,
    /// `guest_halt_poll_ns` changes the governor would log (haltpoll).
    pub limit_changes: u64,
}
