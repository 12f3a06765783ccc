//! Idle residency: idle periods per CPU from `power:cpu_idle` enter/exit pairs, falling back
//! to idle-task (pid 0) periods from `sched:sched_switch` for CPUs without `cpu_idle`; per CPU
//! and state time, share, entries, residency summary, governor misses, all-CPUs-idle overlap.

use crate::stats::DurationSummary;
use crate::table::{Cell, Table};
use crate::{Missing, Options, Tabular};
use pmlab_trace::{FieldRef, Trace};
use serde::Serialize;
use std::collections::BTreeMap;

/// The state of an idle-task period (no cpuidle state known).
pub const IDLE_TASK: u32 = u32::MAX;
/// The state of a `cpu_idle` exit seen without its enter (idle since before the trace began).
pub const UNKNOWN_STATE: u32 = u32::MAX - 1;
const EXIT: u64 = 0xffff_ffff;

/// One idle period of one CPU (24 bytes: a trace has hundreds of thousands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Period {
    /// cpuidle state index, or [`IDLE_TASK`] / [`UNKNOWN_STATE`].
    pub state: u32,
    /// Entry, trace timestamp (ns).
    pub start: u64,
    /// Exit, trace timestamp (ns).
    pub end: u64,
    /// Began before the trace (exit seen without an enter): starts at the trace's first event.
    pub open_start: bool,
    /// No exit before the trace's end: ends at the trace's last event.
    pub open_end: bool,
}

impl Period {
    /// Length, ns.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    /// Zero length.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
    /// Both ends were seen (neither open).
    pub fn complete(&self) -> bool {
        !self.open_start && !self.open_end
    }
}

/// Where a CPU's idle periods come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// `power:cpu_idle` enter/exit pairs.
    CpuIdle,
    /// Idle-task (pid 0) periods from `sched:sched_switch`: `cpu_idle` is missing for this CPU.
    IdleTask,
    /// Neither: no idle information for this CPU.
    None,
}

impl Source {
    /// The name tables show (`cpu_idle`, `idle task (fallback)`, `none`).
    pub fn label(&self) -> &'static str {
        match self {
            Source::CpuIdle => "cpu_idle",
            Source::IdleTask => "idle task (fallback)",
            Source::None => "none",
        }
    }
}

/// The idle periods of a trace, per CPU, with the trace span.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Periods {
    /// The trace's first event's timestamp (ns).
    pub t0: u64,
    /// Its last event's timestamp (ns).
    pub t1: u64,
    /// Per CPU: where its periods come from.
    pub source: BTreeMap<u32, Source>,
    /// Per CPU: its idle periods in time order.
    pub by_cpu: BTreeMap<u32, Vec<Period>>,
    /// Caveats (fallbacks, quirks detected).
    pub notes: Vec<String>,
}

impl Periods {
    /// `t1 - t0`, ns.
    pub fn span(&self) -> u64 {
        self.t1.saturating_sub(self.t0)
    }
}

#[derive(Default, Clone)]
struct Track {
    open: Option<(u64, u32)>,
    seen: bool,
    periods: Vec<Period>,
    /// Idle-task periods: when the idle task (pid 0) last logged an event on this CPU.
    idle_logged: u64,
    /// Idle-task periods ended by a task's event, with no switch out of the idle task.
    unswitched: u64,
}

impl Track {
    fn enter(&mut self, ts: u64, state: u32) {
        if self.open.is_some() {
            self.close(ts, 0);
        }
        self.open = Some((ts, state));
        self.seen = true;
    }
    /// Close the open period at `ts`; an exit seen first means idle since `t0`.
    fn close(&mut self, ts: u64, t0: u64) -> bool {
        if let Some((start, state)) = self.open.take() {
            self.periods.push(Period {
                state,
                start,
                end: ts,
                open_start: false,
                open_end: false,
            });
            true
        } else if !self.seen {
            self.seen = true;
            self.periods.push(Period {
                state: UNKNOWN_STATE,
                start: t0,
                end: ts,
                open_start: true,
                open_end: false,
            });
            true
        } else {
            false
        }
    }
    fn finish(&mut self, t1: u64) {
        if let Some((start, state)) = self.open.take() {
            self.periods.push(Period {
                state,
                start,
                end: t1,
                open_start: false,
                open_end: true,
            });
        }
    }
}

/// Idle periods of every CPU of the trace (those `opts` selects).
pub fn periods(trace: &Trace, opts: &Options) -> Result<Periods, Missing> {
    let ev = &trace.events;
    let idle_id = trace.event_id("power", "cpu_idle");
    let sw_id = trace.event_id("sched", "sched_switch");
    if idle_id.is_none() && sw_id.is_none() {
        return Err(Missing::new(
            "idle",
            &["power:cpu_idle", "sched:sched_switch"],
        ));
    }
    let f_state = idle_id.and_then(|id| trace.field(id, "state"));
    let f_cpu = idle_id.and_then(|id| trace.field(id, "cpu_id"));
    let f_prev = sw_id.and_then(|id| trace.field(id, "prev_pid"));
    let f_next = sw_id.and_then(|id| trace.field(id, "next_pid"));
    let (t0, t1) = trace.bounds();
    let ncpu = (trace.cpus as usize).max(ev.cpu_slots());
    // One walk: cpu_idle periods of every CPU, and idle-task periods of the CPUs that log
    // no cpu_idle event (none on most machines).
    let logged = count_by_cpu(
        ev,
        ncpu,
        idle_id.map_or(-1, i32::from),
        sw_id.map_or(-1, i32::from),
    );
    let want_it: Vec<bool> = logged.iter().map(|n| n[0] == 0).collect();
    let (mut ci, mut it) = walk(
        trace, ncpu, idle_id, f_cpu, f_state, sw_id, f_prev, f_next, &want_it, &logged,
    );
    // A CPU that logs cpu_idle events only for other CPUs (no kernel seen does): idle-task
    // periods for it too.
    let missed: Vec<bool> = (0..ncpu)
        .map(|c| !want_it[c] && !ci.get(c).is_some_and(|t| t.seen))
        .collect();
    if missed.contains(&true) && sw_id.is_some() {
        let (_, more) = walk(
            trace, ncpu, None, None, None, sw_id, f_prev, f_next, &missed, &logged,
        );
        for (c, t) in more.into_iter().enumerate().filter(|(c, _)| missed[*c]) {
            it[c] = t;
        }
    }
    let mut p = Periods {
        t0,
        t1,
        ..Default::default()
    };
    let n = ci.len().max(it.len());
    let any_cpu_idle = ci.iter().any(|t| t.seen);
    if !any_cpu_idle && !it.iter().any(|t| t.seen) {
        return Err(Missing::new(
            "idle",
            &["power:cpu_idle", "sched:sched_switch"],
        ));
    }
    let mut fallback = Vec::new();
    let mut none = Vec::new();
    let mut unswitched = Vec::new();
    for cpu in 0..n {
        if !opts.wants(cpu as u32) {
            continue;
        }
        let c = cpu as u32;
        let (src, mut track) = if ci.get(cpu).is_some_and(|t| t.seen) {
            (Source::CpuIdle, std::mem::take(&mut ci[cpu]))
        } else if it.get(cpu).is_some_and(|t| t.seen) {
            fallback.push(c);
            (Source::IdleTask, std::mem::take(&mut it[cpu]))
        } else {
            if cpu < trace.cpus as usize || ev.cpu.contains(&(cpu as u16)) {
                none.push(c);
            }
            p.source.insert(c, Source::None);
            continue;
        };
        track.finish(t1);
        if track.unswitched > 0 {
            unswitched.push(format!(
                "CPU {c}: {} of {}",
                track.unswitched,
                track.periods.len()
            ));
        }
        p.source.insert(c, src);
        p.by_cpu.insert(c, track.periods);
    }
    // A CPU with neither cpu_idle nor idle-task periods was simply never idle.
    let never: Vec<u32> = fallback
        .iter()
        .copied()
        .filter(|c| p.by_cpu.get(c).is_some_and(|v| v.is_empty()))
        .collect();
    if !never.is_empty() {
        p.notes.push(format!(
            "CPU {}: never idle during the trace (no cpu_idle events and no switch to the idle task)",
            list(&never)
        ));
        fallback.retain(|c| !never.contains(c));
    }
    if !fallback.is_empty() {
        let why = if any_cpu_idle {
            "power:cpu_idle never fired for them while it did for other CPUs (a kernel quirk)"
        } else {
            "the trace has no power:cpu_idle events"
        };
        p.notes.push(format!(
            "CPU {}: idle time from idle-task (pid 0) periods in sched_switch, because {why} \
             (on this kernel some CPUs never emit cpu_idle); no per-state split there",
            list(&fallback)
        ));
    }
    if !unswitched.is_empty() {
        p.notes.push(format!(
            "{} idle-task periods end with no sched_switch out of the idle task (the kernel \
             did not log it): each ends at the idle task's last event before the CPU's next \
             event from a task",
            unswitched.join("; ")
        ));
    }
    if !none.is_empty() {
        p.notes.push(format!(
            "CPU {}: no cpu_idle and no sched_switch events: idle time unknown (excluded from the all-idle overlap)",
            list(&none)
        ));
    }
    Ok(p)
}

/// Walks the events once: per CPU, `cpu_idle` periods (by the event's `cpu_id`; none when
/// `idle_id` is None), and idle-task periods from `sched_switch` where `want_it`.
/// `logged` (events per logging CPU) sizes the period lists: a CPU's period takes two events.
#[allow(clippy::too_many_arguments)]
fn walk(
    trace: &Trace,
    ncpu: usize,
    idle_id: Option<u16>,
    f_cpu: Option<FieldRef>,
    f_state: Option<FieldRef>,
    sw_id: Option<u16>,
    f_prev: Option<FieldRef>,
    f_next: Option<FieldRef>,
    want_it: &[bool],
    logged: &[[u32; 2]],
) -> (Vec<Track>, Vec<Track>) {
    let ev = &trace.events;
    let t0 = trace.bounds().0;
    let sized = |n: u32| Track {
        periods: Vec::with_capacity(n as usize / 2 + 1),
        ..Track::default()
    };
    let mut ci: Vec<Track> = (0..ncpu)
        .map(|c| sized(if idle_id.is_some() { logged[c][0] } else { 0 }))
        .collect();
    let mut it: Vec<Track> = (0..ncpu)
        .map(|c| sized(if want_it[c] { logged[c][1] } else { 0 }))
        .collect();
    // An id no event has stands for a missing event or field.
    let idle_id = match (idle_id, f_cpu, f_state) {
        (Some(id), Some(_), Some(_)) => i32::from(id),
        _ => -1,
    };
    let sw_id = match (sw_id, f_prev, f_next, want_it.contains(&true)) {
        (Some(id), Some(_), Some(_), true) => i32::from(id),
        _ => -1,
    };
    if idle_id < 0 && sw_id < 0 {
        return (ci, it);
    }
    for i in 0..ev.len() {
        ev.prefetch_ahead(i);
        let id = i32::from(ev.id[i]);
        if sw_id >= 0 {
            let c = ev.cpu[i] as usize;
            let t = &mut it[c];
            if let (Some((start, _)), true) = (t.open, want_it[c]) {
                if ev.pid[i] == 0 {
                    t.idle_logged = ev.ts[i];
                } else {
                    // A task runs, yet no switch out of the idle task was logged (a kernel
                    // that drops it): the period ends at the idle task's last event, if any.
                    let end = if t.idle_logged >= start {
                        t.idle_logged
                    } else {
                        ev.ts[i]
                    };
                    t.close(end, t0);
                    t.unswitched += 1;
                }
            }
        }
        if id == idle_id {
            let (Some(fc), Some(fs)) = (f_cpu, f_state) else {
                continue;
            };
            let cpu = trace.u64_at(i, fc) as usize;
            if cpu >= ci.len() {
                ci.resize(cpu + 1, Track::default());
            }
            let state = trace.u64_at(i, fs);
            if state == EXIT {
                ci[cpu].close(ev.ts[i], t0);
            } else {
                ci[cpu].enter(ev.ts[i], state as u32);
            }
        } else if id == sw_id {
            let c = ev.cpu[i] as usize;
            let (Some(fp), Some(fnx), true) = (f_prev, f_next, want_it[c]) else {
                continue;
            };
            if trace.i64_at(i, fp) == 0 {
                it[c].close(ev.ts[i], t0);
            }
            it[c].seen = true;
            if trace.i64_at(i, fnx) == 0 {
                it[c].enter(ev.ts[i], IDLE_TASK);
            }
        }
    }
    (ci, it)
}

/// Per logging CPU: how many `cpu_idle` and `sched_switch` events it logged.
fn count_by_cpu(ev: &pmlab_trace::Events, ncpu: usize, idle_id: i32, sw_id: i32) -> Vec<[u32; 2]> {
    let mut n = vec![[0u32; 2]; ncpu];
    for (&e, &c) in ev.id.iter().zip(&ev.cpu) {
        let e = i32::from(e);
        if e == idle_id || e == sw_id {
            n[c as usize][usize::from(e == sw_id)] += 1;
        }
    }
    n
}

fn list(cpus: &[u32]) -> String {
    pmlab_kernel::cpulist::format_cpu_list(cpus)
}

/// One idle state of one CPU.
#[derive(Debug, Clone, Serialize)]
pub struct StateRow {
    /// cpuidle state index (see [`Period::state`]).
    pub state: u32,
    /// The state's name (`POLL`, `C1`, `state2` when unknown).
    pub name: String,
    /// Time in it, ns.
    pub time_ns: u64,
    /// Of the trace's span.
    pub share: f64,
    /// Periods entered during the trace.
    pub entries: u64,
    /// Residency of complete periods (entered and exited within the trace).
    pub residency: DurationSummary,
    /// Governor misses: too deep (`above`) and too shallow (`below`); None when unknown.
    pub above: Option<u64>,
    /// See `above`.
    pub below: Option<u64>,
}

/// One CPU's idle time.
#[derive(Debug, Clone, Serialize)]
pub struct CpuRow {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// Where its idle periods come from.
    pub source: Source,
    /// Idle time, ns.
    pub idle_ns: u64,
    /// Of the trace's span.
    pub share: f64,
    /// Idle periods entered during the trace.
    pub entries: u64,
    /// Per state, by index.
    pub states: Vec<StateRow>,
}

/// The idle analysis's result.
#[derive(Debug, Clone, Serialize)]
pub struct IdleReport {
    /// The trace's span, ns.
    pub span_ns: u64,
    /// Per CPU, by CPU.
    pub cpus: Vec<CpuRow>,
    /// Time during which every CPU with idle information was idle at once.
    pub all_idle_ns: u64,
    /// `all_idle_ns` over the span.
    pub all_idle_share: f64,
    /// The CPUs counted for `all_idle_ns` (those with idle information).
    pub all_idle_cpus: Vec<u32>,
    /// Where the miss counts come from: "cpu_idle_miss", "target residencies" or "unavailable".
    pub misses_from: String,
    /// Caveats (fallbacks, quirks detected, counters disagreeing).
    pub notes: Vec<String>,
}

/// The idle analysis.
pub fn analyze(trace: &Trace, opts: &Options) -> Result<IdleReport, Missing> {
    let p = periods(trace, opts)?;
    Ok(report(trace, opts, &p))
}

/// One state's time, entries and complete residencies.
type StateTally = (u64, u64, Vec<u64>);

/// The idle report from already computed periods.
pub fn report(trace: &Trace, opts: &Options, p: &Periods) -> IdleReport {
    let span = p.span().max(1);
    let mut notes = p.notes.clone();
    let (miss_counts, misses_from) = misses(trace, opts, p);
    let mut cpus = Vec::new();
    for (&cpu, src) in &p.source {
        let periods = p.by_cpu.get(&cpu).map(|v| v.as_slice()).unwrap_or(&[]);
        // Per state: time, entries, residencies. A CPU uses few states, mostly one after
        // another: a short list and the last one used, rather than a map lookup a period.
        let mut by_state: Vec<(u32, StateTally)> = Vec::new();
        let mut last = usize::MAX;
        for q in periods {
            if by_state.get(last).is_none_or(|e| e.0 != q.state) {
                last = match by_state.iter().position(|e| e.0 == q.state) {
                    Some(k) => k,
                    None => {
                        // Capacity never used is never touched.
                        by_state.push((q.state, (0, 0, Vec::with_capacity(periods.len()))));
                        by_state.len() - 1
                    }
                };
            }
            let e = &mut by_state[last].1;
            e.0 += q.len();
            e.1 += u64::from(!q.open_start);
            if q.complete() {
                e.2.push(q.len());
            }
        }
        by_state.sort_unstable_by_key(|e| e.0);
        let mut states = Vec::new();
        for (state, (time, entries, mut res)) in by_state {
            let m = miss_counts
                .as_ref()
                .map(|m| m.get(&(cpu, state)).copied().unwrap_or_default());
            states.push(StateRow {
                state,
                name: if state == UNKNOWN_STATE {
                    "unknown (began before trace)".into()
                } else {
                    opts.state_name(state)
                },
                time_ns: time,
                share: time as f64 / span as f64,
                entries,
                residency: DurationSummary::of(&mut res),
                above: m.map(|m| m.0),
                below: m.map(|m| m.1),
            });
        }
        let idle: u64 = states.iter().map(|s| s.time_ns).sum();
        cpus.push(CpuRow {
            cpu,
            source: *src,
            idle_ns: idle,
            share: idle as f64 / span as f64,
            entries: states.iter().map(|s| s.entries).sum(),
            states,
        });
    }
    let all: Vec<u32> = p
        .source
        .iter()
        .filter(|(_, s)| **s != Source::None)
        .map(|(c, _)| *c)
        .collect();
    let all_idle = overlap(p, &all);
    if misses_from == "unavailable" {
        notes.push(
            "governor misses: the trace has no power:cpu_idle_miss and no idle-state table with target residencies was given".into(),
        );
    }
    IdleReport {
        span_ns: p.span(),
        cpus,
        all_idle_ns: all_idle,
        all_idle_share: all_idle as f64 / span as f64,
        all_idle_cpus: all,
        misses_from: misses_from.into(),
        notes,
    }
}

/// Time during which all of `cpus` are idle at once.
pub fn overlap(p: &Periods, cpus: &[u32]) -> u64 {
    if cpus.is_empty() {
        return 0;
    }
    let lists: Vec<&[Period]> = cpus
        .iter()
        .map(|c| p.by_cpu.get(c).map_or(&[][..], |v| v.as_slice()))
        .collect();
    // Each CPU's periods follow each other (as `periods` builds them from a time-ordered
    // trace): intersect the CPUs' ordered interval lists, one linear pass per CPU.
    if lists.iter().all(|ps| in_order(ps)) {
        // The last intersection is only summed, not stored (two CPUs store nothing).
        let Some((last, rest)) = lists.split_last() else {
            return 0;
        };
        let mut total = 0;
        match rest {
            [] => return last.iter().map(|q| q.len()).sum(),
            [first] => intersect_each(first, last, |s, e| total += e - s),
            [first, second, middle @ ..] => {
                let mut common = intersect(first, second);
                for ps in middle {
                    common = intersect(&common, ps);
                }
                intersect_each(&common, last, |s, e| total += e - s);
            }
        }
        return total;
    }
    sweep(&lists)
}

/// Time during which every list has a period, by sorting all period edges.
fn sweep(lists: &[&[Period]]) -> u64 {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for ps in lists {
        for q in ps.iter() {
            edges.push((q.start, 1));
            edges.push((q.end, -1));
        }
    }
    // at equal times, ends before starts: touching periods do not overlap
    edges.sort_unstable();
    let (mut n, mut since, mut total) = (0i32, 0u64, 0u64);
    for (ts, d) in edges {
        if n == lists.len() as i32 {
            total += ts - since;
        }
        n += d;
        since = ts;
    }
    total
}

/// Periods that do not go back in time nor overlap (they may touch).
fn in_order(ps: &[Period]) -> bool {
    ps.iter().all(|q| q.start <= q.end) && ps.windows(2).all(|w| w[0].end <= w[1].start)
}

/// An interval of time: an idle period, or an intersection of them.
trait Span {
    fn span(&self) -> (u64, u64);
}

impl Span for Period {
    fn span(&self) -> (u64, u64) {
        (self.start, self.end)
    }
}

impl Span for (u64, u64) {
    fn span(&self) -> (u64, u64) {
        *self
    }
}

/// The non-empty intersections of two ordered lists of disjoint intervals, in order.
fn intersect(a: &[impl Span], b: &[impl Span]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    intersect_each(a, b, |s, e| out.push((s, e)));
    out
}

/// Calls `f(start, end)` for each non-empty intersection of two ordered lists of disjoint
/// intervals, in order.
fn intersect_each(a: &[impl Span], b: &[impl Span], mut f: impl FnMut(u64, u64)) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let ((a0, a1), (b0, b1)) = (a[i].span(), b[j].span());
        let (s, e) = (a0.max(b0), a1.min(b1));
        if s < e {
            f(s, e);
        }
        if a1 < b1 {
            i += 1;
        } else {
            j += 1;
        }
    }
}

type MissMap = BTreeMap<(u32, u32), (u64, u64)>;

fn misses(trace: &Trace, opts: &Options, p: &Periods) -> (Option<MissMap>, &'static str) {
    if let Some(id) = trace.event_id("power", "cpu_idle_miss") {
        let (Some(fc), Some(fs), Some(fb)) = (
            trace.field(id, "cpu_id"),
            trace.field(id, "state"),
            trace.field(id, "below"),
        ) else {
            return (None, "unavailable");
        };
        let mut m = MissMap::new();
        trace.events.for_each_of(id, |i| {
            let e = m
                .entry((trace.u64_at(i, fc) as u32, trace.u64_at(i, fs) as u32))
                .or_default();
            if trace.u64_at(i, fb) != 0 {
                e.1 += 1;
            } else {
                e.0 += 1;
            }
        });
        return (Some(m), "cpu_idle_miss");
    }
    let Some(states) = &opts.states else {
        return (None, "unavailable");
    };
    let targets: Vec<(u32, u64)> = states
        .iter()
        .filter_map(|(k, s)| s.target_residency_ns.map(|t| (*k, t)))
        .collect();
    if targets.is_empty() {
        return (None, "unavailable");
    }
    let mut m = MissMap::new();
    for (cpu, ps) in &p.by_cpu {
        for q in ps
            .iter()
            .filter(|q| q.complete() && q.state < UNKNOWN_STATE)
        {
            let e = m.entry((*cpu, q.state)).or_default();
            let r = q.len();
            if targets.iter().any(|(s, t)| *s == q.state && r < *t) {
                e.0 += 1;
            } else if targets.iter().any(|(s, t)| *s > q.state && r >= *t) {
                e.1 += 1;
            }
        }
    }
    (Some(m), "target residencies")
}

impl Tabular for IdleReport {
    fn tables(&self) -> Vec<Table> {
        let mut cpu = Table::new(
            "idle_cpus",
            "Idle per CPU",
            &[
                "cpu",
                "source",
                "idle_ms",
                "share_pct",
                "entries",
                "entries_per_s",
            ],
            1,
        );
        let secs = self.span_ns as f64 / 1e9;
        for c in &self.cpus {
            cpu.row(vec![
                c.cpu.into(),
                c.source.label().into(),
                (c.idle_ns as f64 / 1e6).into(),
                (c.share * 100.0).into(),
                c.entries.into(),
                if secs > 0.0 {
                    Cell::Float(c.entries as f64 / secs)
                } else {
                    Cell::Empty
                },
            ]);
        }
        cpu.row(vec![
            "all".into(),
            "overlap".into(),
            (self.all_idle_ns as f64 / 1e6).into(),
            (self.all_idle_share * 100.0).into(),
            Cell::Empty,
            Cell::Empty,
        ]);
        let mut st = Table::new(
            "idle_states",
            "Idle residency per CPU and state (µs)",
            &[
                "cpu",
                "state",
                "time_ms",
                "share_pct",
                "entries",
                "min_us",
                "mean_us",
                "p50_us",
                "p99_us",
                "max_us",
                "above",
                "below",
            ],
            2,
        );
        for c in &self.cpus {
            for s in &c.states {
                let r = &s.residency;
                let some = r.n > 0;
                let u = |v: f64| {
                    if some {
                        Cell::Float(v / 1e3)
                    } else {
                        Cell::Empty
                    }
                };
                st.row(vec![
                    c.cpu.into(),
                    s.name.clone().into(),
                    (s.time_ns as f64 / 1e6).into(),
                    (s.share * 100.0).into(),
                    s.entries.into(),
                    u(r.min_ns as f64),
                    u(r.mean_ns),
                    u(r.p50_ns as f64),
                    u(r.p99_ns as f64),
                    u(r.max_ns as f64),
                    s.above.into(),
                    s.below.into(),
                ]);
            }
        }
        vec![cpu, st]
    }
    fn notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        notes.push(crate::stats::PERCENTILE_NOTE.into());
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(start: u64, end: u64) -> Period {
        Period {
            state: 1,
            start,
            end,
            open_start: false,
            open_end: false,
        }
    }

    /// The ordered-list intersection gives the edge sweep's result, touching and empty
    /// periods included; out-of-order periods take the sweep.
    #[test]
    fn overlap_intersection_matches_sweep() {
        let mut x = 12345u64;
        let mut rnd = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for round in 0..200 {
            let ncpu = 1 + round % 4;
            let mut p = Periods::default();
            for c in 0..ncpu {
                let (mut t, mut v) = (rnd(5), Vec::new());
                for _ in 0..rnd(30) {
                    let s = t + rnd(3);
                    let e = s + rnd(4);
                    v.push(period(s, e));
                    t = e;
                }
                p.by_cpu.insert(c, v);
            }
            let cpus: Vec<u32> = (0..ncpu).collect();
            let lists: Vec<&[Period]> = cpus.iter().map(|c| p.by_cpu[c].as_slice()).collect();
            assert_eq!(overlap(&p, &cpus), sweep(&lists), "round {round}");
        }
        let mut p = Periods::default();
        p.by_cpu.insert(0, vec![period(10, 20), period(0, 15)]);
        p.by_cpu.insert(1, vec![period(5, 30)]);
        // CPU 0's own periods overlap in 10..15: the sweep counts them twice there
        assert_eq!(overlap(&p, &[0, 1]), 10);
        assert_eq!(overlap(&p, &[1, 2]), 0);
    }
}
