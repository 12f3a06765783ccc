//! Hotplug steps: CPU offline/online operations from the `cpuhp` tracepoints, each step named
//! by its callback and `hotplug/states`, nested steps resolved, control CPU vs target, the
//! steps' sum checked against each operation's span, and the slowest steps across operations.
//!
//! A step is a `cpuhp_enter`/`cpuhp_multi_enter` … `cpuhp_exit` pair of one task (the idle
//! task is told apart by CPU). A step that runs inside another step's span (the AP thread's
//! steps inside the control CPU's `cpuhp_kick_ap_work` or bring-up) is nested in it; a step's
//! exclusive time is its duration minus its direct children's. An operation is the set of
//! top-level steps of one write: given as time windows by a caller that timed the writes, or
//! inferred from the trace (see [`analyze`]).

use std::collections::HashMap;

use pmlab_trace::{FieldRef, Trace};
use serde::Serialize;

use crate::{Cell, Missing, Table, Tabular};

/// Which way a hotplug operation goes: offline (down, write 0 to `online`) or online (up,
/// write 1). pmlab's one hotplug direction, for the analysis and the hotplug lab alike. It
/// serializes as [`Direction::as_str`]; the lab's tables, JSON and store names use the short
/// word ([`Direction::short`], [`Direction::serialize_short`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Taking a CPU offline (writing 0 to `online`).
    Offline,
    /// Bringing a CPU online (writing 1).
    Online,
}

impl Direction {
    /// "offline" or "online".
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Offline => "offline",
            Direction::Online => "online",
        }
    }
    /// "down" or "up".
    pub fn short(self) -> &'static str {
        match self {
            Direction::Offline => "down",
            Direction::Online => "up",
        }
    }
    /// Serializes as [`Direction::short`] (`#[serde(serialize_with = ...)]`).
    pub fn serialize_short<S: serde::Serializer>(d: &Direction, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(d.short())
    }
    /// The `online` value this operation leads to.
    pub fn online_after(self) -> bool {
        self == Direction::Online
    }
    /// The other direction.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::Offline => Direction::Online,
            Direction::Online => Direction::Offline,
        }
    }
}

/// One callback invocation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Hotplug state number (`idx`).
    pub state: i32,
    /// Its name in `hotplug/states`, when the table was given.
    pub name: Option<String>,
    /// The callback symbol (hex address when the trace has no kallsyms).
    pub callback: String,
    /// From `cpuhp_multi_enter` (one instance of a multi-instance state).
    pub multi: bool,
    /// The CPU and task it ran on.
    pub exec_cpu: u32,
    /// The task's pid.
    pub pid: i32,
    /// Ran on the CPU being plugged (else on the control CPU).
    pub on_target: bool,
    /// Start, trace timestamp (ns).
    pub start_ns: u64,
    /// Duration, ns.
    pub duration_ns: u64,
    /// Duration minus the steps nested directly inside it.
    pub exclusive_ns: u64,
    /// Time its task was switched out during the step (None without `sched_switch`).
    pub off_cpu_ns: Option<u64>,
    /// The callback's return value (non-zero: the step failed).
    pub ret: i32,
    /// Part of the arch bring-up/teardown (kick_ap … ap:online, cpu:teardown).
    pub arch: bool,
    /// Undoing an earlier step after a failure (moves against the operation's direction).
    pub rollback: bool,
    /// Nesting depth: 0 for top-level steps.
    pub depth: u32,
    /// False when the trace ended before its `cpuhp_exit`.
    pub complete: bool,
}

impl Step {
    /// End, trace timestamp (ns).
    pub fn end_ns(&self) -> u64 {
        self.start_ns + self.duration_ns
    }
}

/// One offline or online operation of one CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operation {
    /// The CPU plugged or unplugged.
    pub cpu: u32,
    /// Offline or online.
    pub direction: Direction,
    /// First step's start and last step's end.
    pub start_ns: u64,
    /// Last step's end, trace timestamp (ns).
    pub end_ns: u64,
    /// `end_ns - start_ns`.
    pub span_ns: u64,
    /// Sum of the steps' exclusive times (the span minus the gaps between top-level steps).
    pub steps_sum_ns: u64,
    /// steps_sum / span.
    pub coverage: f64,
    /// Time the control task was switched out between its top-level steps (preempted, so
    /// no step ran for it); None without `sched_switch`.
    pub preempted_ns: Option<u64>,
    /// Time the control CPU spent in interrupts and softirqs between top-level steps; None
    /// without `irq`/`irq_vectors` entry and exit events.
    pub interrupted_ns: Option<u64>,
    /// Exclusive time of steps on the control CPU and on the target.
    pub control_ns: u64,
    /// Exclusive time of steps on the target CPU, ns.
    pub target_ns: u64,
    /// Exclusive time in arch steps, and in the rest.
    pub arch_ns: u64,
    /// Exclusive time of the other steps, ns.
    pub rest_ns: u64,
    /// A step returned an error or was rolled back.
    pub failed: bool,
    /// Every step has its exit.
    pub complete: bool,
    /// The task that made the write (first top-level step's task).
    pub control_pid: i32,
    /// Every step, in start order.
    pub steps: Vec<Step>,
}

impl Operation {
    /// Share of the span accounted for: steps, plus the control task's preemption and the
    /// control CPU's interrupts between them.
    pub fn accounted(&self) -> f64 {
        if self.span_ns == 0 {
            return 1.0;
        }
        let between = self.preempted_ns.unwrap_or(0) + self.interrupted_ns.unwrap_or(0);
        (self.steps_sum_ns + between) as f64 / self.span_ns as f64
    }
    /// The step with the most exclusive time.
    pub fn slowest(&self) -> Option<&Step> {
        self.steps.iter().max_by_key(|s| s.exclusive_ns)
    }
    /// Steps that undo earlier ones after a failure.
    pub fn rollback_steps(&self) -> usize {
        self.steps.iter().filter(|s| s.rollback).count()
    }
    /// When the failure happened: the end of the last forward step before the first rollback
    /// step (the operation's start when none ran before it).
    pub fn failure_ns(&self) -> u64 {
        failure_point(
            self.steps
                .iter()
                .map(|s| (s.start_ns, s.end_ns(), s.rollback)),
            self.start_ns,
        )
    }
}

/// When an operation failed, from its steps' `(start, end, rollback)`: the end of the last
/// forward step before the first rollback step, or `op_start_ns` when none ran before it.
pub fn failure_point(
    steps: impl Iterator<Item = (u64, u64, bool)> + Clone,
    op_start_ns: u64,
) -> u64 {
    let first_rollback = steps
        .clone()
        .filter(|s| s.2)
        .map(|s| s.0)
        .min()
        .unwrap_or(u64::MAX);
    steps
        .filter(|s| !s.2 && s.1 <= first_rollback)
        .map(|s| s.1)
        .max()
        .unwrap_or(op_start_ns)
        .max(op_start_ns)
}

/// One step across operations: (cpuhp state, callback).
type StepKey<'a> = (i32, &'a str);

/// A step across operations of one direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepStat {
    /// Offline or online.
    pub direction: Direction,
    /// cpuhp state number.
    pub state: i32,
    /// Its name in `hotplug/states`, when known.
    pub name: Option<String>,
    /// The callback symbol.
    pub callback: String,
    /// Invocations across operations.
    pub count: usize,
    /// Of the exclusive time.
    pub p50_ns: u64,
    /// Largest exclusive time, ns.
    pub max_ns: u64,
    /// Sum of exclusive times, ns.
    pub total_ns: u64,
}

/// Per-direction totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionSummary {
    /// Offline or online.
    pub direction: Direction,
    /// Operations of this direction.
    pub operations: usize,
    /// Those that failed.
    pub failed: usize,
    /// Median span, ns.
    pub p50_span_ns: u64,
    /// Largest span, ns.
    pub max_span_ns: u64,
    /// Median exclusive time on the control CPU, ns.
    pub p50_control_ns: u64,
    /// Median exclusive time on the target CPU, ns.
    pub p50_target_ns: u64,
    /// Median exclusive time in arch steps, ns.
    pub p50_arch_ns: u64,
    /// Operations that did not fail whose steps cover less than `MIN_COVERAGE` of the span.
    pub below_coverage: usize,
    /// The lowest coverage among the operations (∞ when there are none).
    pub min_coverage: f64,
}

/// What [`analyze`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HotplugReport {
    /// Every operation, in time order.
    pub operations: Vec<Operation>,
    /// Totals per direction.
    pub summary: Vec<DirectionSummary>,
    /// Slowest steps per direction by p50 of exclusive time (at most [`TOP_STEPS`] each).
    pub slowest: Vec<StepStat>,
    /// The coverage an operation must reach for its steps to "add up".
    pub min_coverage: f64,
    /// Caveats (steps that do not add up, missing events...).
    pub notes: Vec<String>,
}

/// Steps must cover this share of the span.
pub const MIN_COVERAGE: f64 = 0.98;
/// Slowest steps kept per direction.
pub const TOP_STEPS: usize = 10;

/// An operation's time window, as timed around the write by the caller (same clock as the
/// trace). Steps whose top-level ancestor starts inside it belong to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The CPU written.
    pub cpu: u32,
    /// The write's direction.
    pub direction: Direction,
    /// Before the write, trace timestamp (ns).
    pub start_ns: u64,
    /// After the write returned, trace timestamp (ns).
    pub end_ns: u64,
}

/// Every operation in the trace, inferred: per CPU, top-level steps are split into
/// operations where the control task changes, or where, after a step that succeeded, a step
/// begins a fresh walk: down from the online state (the highest state seen), or up from at or
/// below where a downward walk ended (a rollback re-runs the states above it).
/// `states`: `hotplug/states` as (number, name), for names and the arch part.
pub fn analyze(trace: &Trace, states: Option<&[(u32, String)]>) -> Result<HotplugReport, Missing> {
    let ex = extract(trace, states)?;
    let mut ops = Vec::new();
    for (cpu, steps) in ex.per_cpu {
        ops.extend(infer_operations(cpu, steps));
    }
    fill_between(&mut ops, ex.off.as_ref(), ex.irqs.as_ref());
    Ok(finish(ops, ex.notes))
}

/// Like [`analyze`], with one operation per window (in the windows' order; a window without
/// steps gives no operation).
pub fn analyze_windows(
    trace: &Trace,
    states: Option<&[(u32, String)]>,
    windows: &[Window],
) -> Result<(HotplugReport, Vec<Option<usize>>), Missing> {
    let ex = extract(trace, states)?;
    // Per CPU: window indices sorted by start.
    let mut by_cpu: HashMap<u32, Vec<usize>> = HashMap::new();
    for (k, w) in windows.iter().enumerate() {
        by_cpu.entry(w.cpu).or_default().push(k);
    }
    for v in by_cpu.values_mut() {
        v.sort_by_key(|&k| windows[k].start_ns);
    }
    let mut groups: Vec<Vec<Step>> = vec![Vec::new(); windows.len()];
    for (cpu, steps) in ex.per_cpu {
        let Some(ks) = by_cpu.get(&cpu) else { continue };
        let mut current: Option<usize> = None;
        for s in steps {
            if s.depth == 0 {
                // The last window starting at or before the step, if the step is inside it.
                let n = ks.partition_point(|&k| windows[k].start_ns <= s.start_ns);
                current = n
                    .checked_sub(1)
                    .map(|j| ks[j])
                    .filter(|&k| s.start_ns <= windows[k].end_ns);
            }
            if let Some(k) = current {
                groups[k].push(s);
            }
        }
    }
    let mut ops = Vec::new();
    let mut index = Vec::with_capacity(windows.len());
    for (w, g) in windows.iter().zip(groups) {
        if g.is_empty() {
            index.push(None);
        } else {
            index.push(Some(ops.len()));
            ops.push(operation(w.cpu, Some(w.direction), g));
        }
    }
    fill_between(&mut ops, ex.off.as_ref(), ex.irqs.as_ref());
    let report = finish_ordered(ops, ex.notes);
    Ok((report, index))
}

/// Each operation's time between its top-level steps that no step accounts for:
/// `preempted_ns`, the control task's off-CPU time, and `interrupted_ns`, the control CPU's
/// time in interrupts and softirqs (the CPU of the step before the gap).
fn fill_between(ops: &mut [Operation], off: Option<&OffCpu>, irqs: Option<&Interrupts>) {
    for op in ops {
        let mut tops: Vec<(u64, u64, u32)> = op
            .steps
            .iter()
            .filter(|s| s.depth == 0)
            .map(|s| (s.start_ns, s.end_ns(), s.exec_cpu))
            .collect();
        tops.sort_unstable();
        let (mut preempted, mut interrupted) = (0, 0);
        let mut covered_to = op.start_ns;
        let mut cpu = tops.first().map_or(0, |t| t.2);
        for (start, end, exec_cpu) in tops {
            if start > covered_to {
                if let Some(off) = off {
                    preempted += off.during(op.control_pid, covered_to, start);
                }
                if let Some(irqs) = irqs {
                    interrupted += irqs.during(cpu, covered_to, start);
                }
            }
            covered_to = covered_to.max(end);
            cpu = exec_cpu;
        }
        op.preempted_ns = off.map(|_| preempted);
        op.interrupted_ns = irqs.map(|_| interrupted);
    }
}

/// Per CPU, the intervals spent in hard interrupts (`irq_vectors:*_entry`/`*_exit`,
/// `irq_handler_entry`/`exit`) and softirqs (`softirq_entry`/`exit`), nested ones merged.
struct Interrupts {
    by_cpu: HashMap<u32, Vec<(u64, u64)>>,
}

impl Interrupts {
    fn new(trace: &Trace) -> Option<Interrupts> {
        // +1 for an entry event, -1 for an exit event, by event id.
        let mut delta: HashMap<u16, i32> = HashMap::new();
        for f in trace.formats.values() {
            let d = match (f.system.as_str(), f.name.as_str()) {
                ("irq", "irq_handler_entry" | "softirq_entry") => 1,
                ("irq", "irq_handler_exit" | "softirq_exit") => -1,
                ("irq_vectors", n) if n.ends_with("_entry") => 1,
                ("irq_vectors", n) if n.ends_with("_exit") => -1,
                _ => continue,
            };
            delta.insert(f.id, d);
        }
        if !delta.values().any(|&d| d < 0) {
            return None;
        }
        let mut depth: HashMap<u32, (i32, u64)> = HashMap::new();
        let mut by_cpu: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
        let ev = &trace.events;
        for i in 0..ev.len() {
            let Some(&d) = delta.get(&ev.id[i]) else {
                continue;
            };
            let cpu = u32::from(ev.cpu[i]);
            let (level, since) = depth.entry(cpu).or_insert((0, 0));
            if d > 0 {
                if *level == 0 {
                    *since = ev.ts[i];
                }
                *level += 1;
            } else if *level > 0 {
                *level -= 1;
                if *level == 0 {
                    by_cpu.entry(cpu).or_default().push((*since, ev.ts[i]));
                }
            }
        }
        Some(Interrupts { by_cpu })
    }

    fn during(&self, cpu: u32, start: u64, end: u64) -> u64 {
        let Some(v) = self.by_cpu.get(&cpu) else {
            return 0;
        };
        let first = v.partition_point(|&(_, b)| b <= start);
        v[first..]
            .iter()
            .take_while(|&&(a, _)| a < end)
            .map(|&(a, b)| b.min(end).saturating_sub(a.max(start)))
            .sum()
    }
}

struct Extracted {
    per_cpu: std::collections::BTreeMap<u32, Vec<Step>>,
    notes: Vec<String>,
    off: Option<OffCpu>,
    irqs: Option<Interrupts>,
}

struct Fields {
    cpu: FieldRef,
    target: FieldRef,
    idx: FieldRef,
    fun: FieldRef,
}

struct Open {
    step: Step,
    target: i32,
    cpu: u32,
}

fn extract(trace: &Trace, states: Option<&[(u32, String)]>) -> Result<Extracted, Missing> {
    let enter = trace.event_id("cpuhp", "cpuhp_enter");
    let multi = trace.event_id("cpuhp", "cpuhp_multi_enter");
    let exit = trace.event_id("cpuhp", "cpuhp_exit");
    let (Some(enter), Some(exit)) = (enter, exit) else {
        return Err(Missing::new(
            "hotplug",
            &["cpuhp:cpuhp_enter", "cpuhp:cpuhp_exit"],
        ));
    };
    let enter_fields = |id: u16| -> Option<Fields> {
        Some(Fields {
            cpu: trace.field(id, "cpu")?,
            target: trace.field(id, "target")?,
            idx: trace.field(id, "idx")?,
            fun: trace.field(id, "fun")?,
        })
    };
    let bad = |what: &str| {
        Missing::new(
            "hotplug",
            &[&format!(
                "{what} (with fields cpu, target, idx, fun / state, ret)"
            )],
        )
    };
    let ef = enter_fields(enter).ok_or_else(|| bad("cpuhp:cpuhp_enter"))?;
    let mf = multi.and_then(enter_fields);
    let (x_cpu, x_idx, x_ret) = (
        trace
            .field(exit, "cpu")
            .ok_or_else(|| bad("cpuhp:cpuhp_exit"))?,
        trace
            .field(exit, "idx")
            .ok_or_else(|| bad("cpuhp:cpuhp_exit"))?,
        trace
            .field(exit, "ret")
            .ok_or_else(|| bad("cpuhp:cpuhp_exit"))?,
    );
    let names: HashMap<i32, &str> = states
        .unwrap_or(&[])
        .iter()
        .map(|(n, s)| (*n as i32, s.as_str()))
        .collect();
    let arch = ArchPart::new(states);
    let ev = &trace.events;
    let last_ts = ev.ts.last().copied().unwrap_or(0);
    // Open steps per task; the idle task (pid 0) is one per CPU.
    let mut open: HashMap<(i32, u32), Vec<Open>> = HashMap::new();
    let mut done: Vec<(Step, i32, u32)> = Vec::new();
    let mut orphan_exits = 0usize;
    let mut cache: HashMap<u64, String> = HashMap::new();
    // Most traces have the formats but no cpuhp event: skip the walk (a vectorized search).
    let any = ev.has_any(&[enter, exit, multi.unwrap_or(enter)]);
    let walked = if any { ev.len() } else { 0 };
    for i in 0..walked {
        let id = ev.id[i];
        let task = (
            ev.pid[i],
            if ev.pid[i] == 0 {
                u32::from(ev.cpu[i])
            } else {
                u32::MAX
            },
        );
        if id == enter || Some(id) == multi {
            let f = if id == enter {
                &ef
            } else {
                mf.as_ref().unwrap_or(&ef)
            };
            let addr = trace.u64_at(i, f.fun);
            let callback = cache
                .entry(addr)
                .or_insert_with(|| match trace.sym(addr) {
                    Some(s) => s.to_string(),
                    None => format!("{addr:#x}"),
                })
                .clone();
            let state = trace.i64_at(i, f.idx) as i32;
            open.entry(task).or_default().push(Open {
                target: trace.i64_at(i, f.target) as i32,
                cpu: trace.u64_at(i, f.cpu) as u32,
                step: Step {
                    state,
                    name: names.get(&state).map(|s| s.to_string()),
                    callback,
                    multi: id != enter,
                    exec_cpu: u32::from(ev.cpu[i]),
                    pid: ev.pid[i],
                    on_target: false,
                    start_ns: ev.ts[i],
                    duration_ns: 0,
                    exclusive_ns: 0,
                    off_cpu_ns: None,
                    ret: 0,
                    arch: false,
                    rollback: false,
                    depth: 0,
                    complete: false,
                },
            });
        } else if id == exit {
            let state = trace.i64_at(i, x_idx) as i32;
            let cpu = trace.u64_at(i, x_cpu) as u32;
            let stack = open.entry(task).or_default();
            match stack
                .iter()
                .rposition(|o| o.step.state == state && o.cpu == cpu)
            {
                Some(k) => {
                    // Anything opened after it by the same task lost its exit: drop it.
                    let mut o = stack.remove(k);
                    stack.truncate(k);
                    o.step.duration_ns = ev.ts[i].saturating_sub(o.step.start_ns);
                    o.step.ret = trace.i64_at(i, x_ret) as i32;
                    o.step.complete = true;
                    done.push((o.step, o.target, o.cpu));
                }
                None => orphan_exits += 1,
            }
        }
    }
    let mut notes = Vec::new();
    let mut unfinished = 0;
    for (_, stack) in open {
        for mut o in stack {
            o.step.duration_ns = last_ts.saturating_sub(o.step.start_ns);
            unfinished += 1;
            done.push((o.step, o.target, o.cpu));
        }
    }
    if unfinished > 0 {
        notes.push(format!(
            "{unfinished} step(s) have no cpuhp_exit (the trace ends first); their duration runs to the trace's end and their operations are marked incomplete"
        ));
    }
    if orphan_exits > 0 {
        notes.push(format!(
            "{orphan_exits} cpuhp_exit event(s) without their enter (the trace began mid-step) were ignored"
        ));
    }
    let pids: std::collections::HashSet<i32> = done.iter().map(|d| d.0.pid).collect();
    let done_any = !done.is_empty();
    let off = if done.is_empty() {
        None
    } else {
        OffCpu::new(trace, &pids)
    };
    let mut per_cpu: std::collections::BTreeMap<u32, Vec<(Step, i32)>> = Default::default();
    for (mut s, target, cpu) in done {
        s.on_target = s.exec_cpu == cpu;
        s.arch = arch.contains(s.state, &s.callback);
        s.off_cpu_ns = off
            .as_ref()
            .map(|o| o.during(s.pid, s.start_ns, s.end_ns()));
        per_cpu.entry(cpu).or_default().push((s, target));
    }
    let per_cpu = per_cpu.into_iter().map(|(cpu, v)| (cpu, nest(v))).collect();
    let irqs = if done_any {
        Interrupts::new(trace)
    } else {
        None
    };
    Ok(Extracted {
        per_cpu,
        notes,
        off,
        irqs,
    })
}

/// Sort by start, set depth, exclusive times and the rollback marks' raw material (a step
/// moving down has target < state). Returns steps with `rollback` holding "moves down".
fn nest(mut v: Vec<(Step, i32)>) -> Vec<Step> {
    v.sort_by(|a, b| {
        a.0.start_ns
            .cmp(&b.0.start_ns)
            .then(b.0.duration_ns.cmp(&a.0.duration_ns))
    });
    let mut steps: Vec<Step> = Vec::with_capacity(v.len());
    let mut stack: Vec<usize> = Vec::new();
    let mut child_sum = vec![0u64; v.len()];
    for (i, (mut s, target)) in v.into_iter().enumerate() {
        while let Some(&top) = stack.last() {
            if steps[top].end_ns() <= s.start_ns {
                stack.pop();
            } else {
                break;
            }
        }
        if let Some(&top) = stack.last() {
            if s.end_ns() <= steps[top].end_ns() {
                child_sum[top] += s.duration_ns;
                s.depth = steps[top].depth + 1;
            } else {
                // Overlaps without being contained: not nested, but keep the stack honest.
                stack.clear();
            }
        }
        // Temporarily: rollback = "moves down" (target below its state).
        s.rollback = target < s.state;
        steps.push(s);
        stack.push(i);
    }
    for (s, c) in steps.iter_mut().zip(child_sum) {
        s.exclusive_ns = s.duration_ns.saturating_sub(c);
    }
    steps
}

fn moves_down(s: &Step) -> bool {
    s.rollback
}

/// Split a CPU's steps (in start order) into operations.
fn infer_operations(cpu: u32, steps: Vec<Step>) -> Vec<Operation> {
    let online_state = steps.iter().map(|s| s.state).max().unwrap_or(0);
    let mut groups: Vec<Vec<Step>> = Vec::new();
    let mut prev: Option<Step> = None;
    for s in steps {
        if s.depth > 0 {
            if let Some(g) = groups.last_mut() {
                g.push(s);
            } else {
                groups.push(vec![s]);
            }
            continue;
        }
        let fresh = match &prev {
            None => true,
            Some(a) => {
                a.pid != s.pid
                    || (a.ret == 0
                        && ((moves_down(&s) && s.state == online_state)
                            || (!moves_down(&s) && moves_down(a) && s.state <= a.state)))
            }
        };
        if fresh {
            groups.push(Vec::new());
        }
        prev = Some(s.clone());
        groups.last_mut().expect("a group").push(s);
    }
    groups
        .into_iter()
        .map(|g| operation(cpu, None, g))
        .collect()
}

fn operation(cpu: u32, direction: Option<Direction>, mut steps: Vec<Step>) -> Operation {
    steps.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.duration_ns)));
    let first_top = steps.iter().find(|s| s.depth == 0).unwrap_or(&steps[0]);
    let direction = direction.unwrap_or(if moves_down(first_top) {
        Direction::Offline
    } else {
        Direction::Online
    });
    let control_pid = first_top.pid;
    for s in &mut steps {
        let down = moves_down(s);
        s.rollback = match direction {
            Direction::Offline => !down,
            Direction::Online => down,
        };
    }
    let start_ns = steps.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let end_ns = steps.iter().map(|s| s.end_ns()).max().unwrap_or(start_ns);
    let sum = |f: &dyn Fn(&Step) -> bool| -> u64 {
        steps.iter().filter(|s| f(s)).map(|s| s.exclusive_ns).sum()
    };
    let steps_sum_ns = sum(&|_| true);
    let span_ns = end_ns - start_ns;
    Operation {
        cpu,
        direction,
        start_ns,
        end_ns,
        span_ns,
        steps_sum_ns,
        coverage: if span_ns == 0 {
            1.0
        } else {
            steps_sum_ns as f64 / span_ns as f64
        },
        preempted_ns: None,
        interrupted_ns: None,
        control_ns: sum(&|s| !s.on_target),
        target_ns: sum(&|s| s.on_target),
        arch_ns: sum(&|s| s.arch),
        rest_ns: sum(&|s| !s.arch),
        failed: steps.iter().any(|s| s.ret != 0 || s.rollback),
        complete: steps.iter().all(|s| s.complete),
        control_pid,
        steps,
    }
}

fn finish(mut ops: Vec<Operation>, notes: Vec<String>) -> HotplugReport {
    ops.sort_by_key(|o| (o.start_ns, o.cpu));
    finish_ordered(ops, notes)
}

fn finish_ordered(ops: Vec<Operation>, mut notes: Vec<String>) -> HotplugReport {
    let mut summary = Vec::new();
    let mut slowest = Vec::new();
    for dir in [Direction::Offline, Direction::Online] {
        let mine: Vec<&Operation> = ops.iter().filter(|o| o.direction == dir).collect();
        if mine.is_empty() {
            continue;
        }
        let p50 = |f: &dyn Fn(&Operation) -> u64| {
            let mut v: Vec<u64> = mine.iter().map(|o| f(o)).collect();
            median(&mut v)
        };
        // A failed operation has an untraced gap where the failure happened: not counted.
        let below = mine
            .iter()
            .filter(|o| !o.failed && o.accounted() < MIN_COVERAGE)
            .count();
        let preempted: Vec<u64> = mine
            .iter()
            .filter_map(|o| o.preempted_ns)
            .filter(|&p| p > 0)
            .collect();
        if !preempted.is_empty() {
            notes.push(format!(
                "{} {} operation(s): the writing task was preempted between steps for {:.3} ms in all (CPU contention; counted as time accounted for, not as a step)",
                preempted.len(),
                dir.as_str(),
                preempted.iter().sum::<u64>() as f64 / 1e6
            ));
        }
        let interrupted: u64 = mine.iter().filter_map(|o| o.interrupted_ns).sum();
        if interrupted > 0 {
            notes.push(format!(
                "{} operations: the control CPU spent {:.3} ms in interrupts and softirqs between steps (counted as time accounted for, not as a step)",
                dir.as_str(),
                interrupted as f64 / 1e6
            ));
        }
        summary.push(DirectionSummary {
            direction: dir,
            operations: mine.len(),
            failed: mine.iter().filter(|o| o.failed).count(),
            p50_span_ns: p50(&|o| o.span_ns),
            max_span_ns: mine.iter().map(|o| o.span_ns).max().unwrap_or(0),
            p50_control_ns: p50(&|o| o.control_ns),
            p50_target_ns: p50(&|o| o.target_ns),
            p50_arch_ns: p50(&|o| o.arch_ns),
            below_coverage: below,
            min_coverage: mine
                .iter()
                .map(|o| o.coverage)
                .fold(f64::INFINITY, f64::min),
        });
        if below > 0 {
            notes.push(format!(
                "{below} {} operation(s) have steps (with preemption between them) covering less than {:.0}% of their span",
                dir.as_str(),
                MIN_COVERAGE * 100.0
            ));
        }
        let mut by: HashMap<StepKey, (Option<String>, Vec<u64>)> = HashMap::new();
        for o in &mine {
            for s in &o.steps {
                by.entry((s.state, s.callback.as_str()))
                    .or_insert_with(|| (s.name.clone(), Vec::new()))
                    .1
                    .push(s.exclusive_ns);
            }
        }
        let mut stats: Vec<StepStat> = by
            .into_iter()
            .map(|((state, cb), (name, mut v))| StepStat {
                direction: dir,
                state,
                name,
                callback: cb.to_string(),
                count: v.len(),
                total_ns: v.iter().sum(),
                max_ns: v.iter().copied().max().unwrap_or(0),
                p50_ns: median(&mut v),
            })
            .collect();
        stats.sort_by(|a, b| {
            b.p50_ns
                .cmp(&a.p50_ns)
                .then(b.max_ns.cmp(&a.max_ns))
                .then(a.state.cmp(&b.state))
        });
        stats.truncate(TOP_STEPS);
        slowest.extend(stats);
    }
    HotplugReport {
        operations: ops,
        summary,
        slowest,
        min_coverage: MIN_COVERAGE,
        notes,
    }
}

impl Tabular for HotplugReport {
    fn tables(&self) -> Vec<Table> {
        let ms = |ns: u64| Cell::from(ns as f64 / 1e6);
        let mut ops = Table::new(
            "hotplug_operations",
            "CPU hotplug operations per direction (traced span, medians split by where and what)",
            &[
                "direction",
                "n",
                "failed",
                "p50_ms",
                "max_ms",
                "control_ms",
                "target_ms",
                "arch_ms",
                "below_98pct",
                "min_coverage",
            ],
            1,
        );
        for d in &self.summary {
            ops.row(vec![
                d.direction.as_str().into(),
                d.operations.into(),
                d.failed.into(),
                ms(d.p50_span_ns),
                ms(d.max_span_ns),
                ms(d.p50_control_ns),
                ms(d.p50_target_ns),
                ms(d.p50_arch_ns),
                d.below_coverage.into(),
                d.min_coverage.into(),
            ]);
        }
        let mut steps = Table::new(
            "hotplug_slowest_steps",
            "Slowest hotplug steps (exclusive time across operations)",
            &[
                "direction",
                "state",
                "name",
                "callback",
                "n",
                "p50_ms",
                "max_ms",
                "total_ms",
            ],
            3,
        );
        for s in &self.slowest {
            steps.row(vec![
                s.direction.as_str().into(),
                Cell::Int(s.state as i64),
                s.name.clone().into(),
                s.callback.clone().into(),
                s.count.into(),
                ms(s.p50_ns),
                ms(s.max_ns),
                ms(s.total_ns),
            ]);
        }
        vec![ops, steps]
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

/// Nearest-rank median (the lower middle value), 0 when empty.
fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    crate::stats::percentile(v, 50.0)
}

/// Which states are the arch part: `cpu:kick_ap` (or `cpu:bringup`) through `ap:online`, and
/// `cpu:teardown`; without the table, the bring-up/teardown callbacks by name.
struct ArchPart {
    range: Option<(i32, i32)>,
    teardown: Option<i32>,
}

impl ArchPart {
    fn new(states: Option<&[(u32, String)]>) -> ArchPart {
        let Some(st) = states else {
            return ArchPart {
                range: None,
                teardown: None,
            };
        };
        let num = |name: &str| st.iter().find(|(_, s)| s == name).map(|(n, _)| *n as i32);
        let first = num("cpu:kick_ap").or_else(|| num("cpu:bringup"));
        let last = num("ap:online");
        ArchPart {
            range: first.zip(last),
            teardown: num("cpu:teardown"),
        }
    }
    fn contains(&self, state: i32, callback: &str) -> bool {
        match self.range {
            Some((a, b)) => (a..=b).contains(&state) || self.teardown == Some(state),
            None => matches!(
                callback,
                "cpuhp_kick_ap_alive" | "cpuhp_bringup_ap" | "bringup_cpu" | "takedown_cpu"
            ),
        }
    }
}

/// Off-CPU intervals per task from `sched_switch`.
struct OffCpu {
    intervals: HashMap<i32, Vec<(u64, u64)>>,
}

impl OffCpu {
    /// Off-CPU intervals of the tasks in `pids` (the ones that ran steps).
    fn new(trace: &Trace, pids: &std::collections::HashSet<i32>) -> Option<OffCpu> {
        let id = trace.event_id("sched", "sched_switch")?;
        let prev = trace.field(id, "prev_pid")?;
        let next = trace.field(id, "next_pid")?;
        let mut out_at: HashMap<i32, u64> = HashMap::new();
        let mut intervals: HashMap<i32, Vec<(u64, u64)>> = HashMap::new();
        let ev = &trace.events;
        for i in 0..ev.len() {
            if ev.id[i] != id {
                continue;
            }
            let (p, n) = (trace.i64_at(i, prev) as i32, trace.i64_at(i, next) as i32);
            if p != 0 && pids.contains(&p) {
                out_at.insert(p, ev.ts[i]);
            }
            if n != 0 && pids.contains(&n) {
                if let Some(t) = out_at.remove(&n) {
                    intervals.entry(n).or_default().push((t, ev.ts[i]));
                }
            }
        }
        Some(OffCpu { intervals })
    }

    fn during(&self, pid: i32, start: u64, end: u64) -> u64 {
        if pid == 0 {
            return 0;
        }
        self.intervals
            .get(&pid)
            .map(|v| {
                v.iter()
                    .map(|&(a, b)| b.min(end).saturating_sub(a.max(start)))
                    .sum()
            })
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmlab_trace::format::parse_format;

    const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
";

    fn fmt(name: &str, id: u16, fields: &str) -> pmlab_trace::EventFormat {
        let text =
            format!("name: {name}\nID: {id}\nformat:\n{COMMON}\n{fields}\nprint fmt: \"x\"\n");
        let mut f = parse_format(&text).unwrap();
        f.system = if name.starts_with("sched") {
            "sched"
        } else {
            "cpuhp"
        }
        .into();
        f
    }

    const ENTER: &str = "\tfield:unsigned int cpu;\toffset:8;\tsize:4;\tsigned:0;
\tfield:int target;\toffset:12;\tsize:4;\tsigned:1;
\tfield:int idx;\toffset:16;\tsize:4;\tsigned:1;
\tfield:void * fun;\toffset:24;\tsize:8;\tsigned:0;
";
    const EXIT: &str = "\tfield:unsigned int cpu;\toffset:8;\tsize:4;\tsigned:0;
\tfield:int state;\toffset:12;\tsize:4;\tsigned:1;
\tfield:int idx;\toffset:16;\tsize:4;\tsigned:1;
\tfield:int ret;\toffset:20;\tsize:4;\tsigned:1;
";
    const SWITCH: &str = "\tfield:int prev_pid;\toffset:8;\tsize:4;\tsigned:1;
\tfield:int next_pid;\toffset:12;\tsize:4;\tsigned:1;
";

    /// Builds a trace event by event (timestamps must rise).
    struct B {
        t: Trace,
    }

    impl B {
        fn new(with_switch: bool) -> B {
            let mut t = Trace::default();
            for f in [
                fmt("cpuhp_enter", 210, ENTER),
                fmt("cpuhp_multi_enter", 209, ENTER),
                fmt("cpuhp_exit", 208, EXIT),
            ] {
                t.formats.insert(f.id, f);
            }
            if with_switch {
                let f = fmt("sched_switch", 300, SWITCH);
                t.formats.insert(f.id, f);
            }
            let syms = [
                (0x1000, "cpuhp_kick_ap_work"),
                (0x2000, "sched_cpu_deactivate"),
                (0x3000, "virtnet_cpu_down_prep"),
                (0x4000, "takedown_cpu"),
                (0x5000, "page_alloc_cpu_dead"),
                (0x6000, "smpboot_create_threads"),
                (0x7000, "cpuhp_bringup_ap"),
                (0x8000, "kvm_online_cpu"),
                (0x9000, "smpcfd_prepare_cpu"),
            ];
            t.kallsyms = pmlab_trace::Kallsyms::from_pairs(syms);
            B { t }
        }
        fn push(&mut self, ts: u64, cpu: u32, pid: i32, id: u16, body: &[u8]) {
            let e = &mut self.t.events;
            let mut rec = vec![0u8; 8];
            rec[..2].copy_from_slice(&id.to_le_bytes());
            rec[4..8].copy_from_slice(&pid.to_le_bytes());
            rec.extend_from_slice(body);
            let off = e.raw.len();
            e.raw.extend_from_slice(&rec);
            e.push(ts, cpu as u16, pid, id, off, rec.len());
        }
        #[allow(clippy::too_many_arguments)]
        fn enter(&mut self, ts: u64, on: u32, pid: i32, cpu: u32, target: i32, idx: i32, fun: u64) {
            let mut b = Vec::new();
            for v in [cpu as i32, target, idx, 0] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&fun.to_le_bytes());
            self.push(ts, on, pid, 210, &b);
        }
        fn exit(&mut self, ts: u64, on: u32, pid: i32, cpu: u32, idx: i32, ret: i32) {
            let mut b = Vec::new();
            for v in [cpu as i32, idx - 1, idx, ret] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            self.push(ts, on, pid, 208, &b);
        }
        fn switch(&mut self, ts: u64, on: u32, prev: i32, next: i32) {
            let mut b = Vec::new();
            b.extend_from_slice(&prev.to_le_bytes());
            b.extend_from_slice(&next.to_le_bytes());
            self.push(ts, on, prev, 300, &b);
        }
        /// An offline of cpu1 by pid 9 on cpu0 at `t`: kick_ap_work wrapping two AP steps
        /// (pid 20 on cpu1), then takedown and one dead step on the control CPU.
        fn offline(&mut self, t: u64) {
            self.enter(t + 100, 0, 9, 1, 144, 236, 0x1000);
            self.enter(t + 200, 1, 20, 1, 144, 235, 0x2000);
            self.exit(t + 500, 1, 20, 1, 235, 0);
            self.enter(t + 510, 1, 20, 1, 144, 202, 0x3000);
            self.exit(t + 900, 1, 20, 1, 202, 0);
            self.exit(t + 1000, 0, 9, 1, 236, 0);
            self.enter(t + 1005, 0, 9, 1, 0, 144, 0x4000);
            self.exit(t + 1500, 0, 9, 1, 144, 0);
            self.enter(t + 1501, 0, 9, 1, 0, 30, 0x5000);
            self.exit(t + 1600, 0, 9, 1, 30, 0);
        }
        /// An online of cpu1 by `pid` on cpu0 at `t`: two control steps, the bring-up wrapping
        /// an AP step.
        fn online(&mut self, t: u64, pid: i32) {
            self.enter(t, 0, pid, 1, 236, 1, 0x6000);
            self.exit(t + 10, 0, pid, 1, 1, 0);
            self.enter(t + 11, 0, pid, 1, 236, 83, 0x7000);
            self.enter(t + 100, 1, 20, 1, 236, 147, 0x8000);
            self.exit(t + 500, 1, 20, 1, 147, 0);
            self.exit(t + 1000, 0, pid, 1, 83, 0);
        }
    }

    fn states() -> Vec<(u32, String)> {
        [
            (0, "offline"),
            (1, "threads:prepare"),
            (30, "mm/page_alloc:pcp"),
            (40, "smpcfd:prepare"),
            (82, "cpu:kick_ap"),
            (83, "cpu:bringup"),
            (143, "ap:online"),
            (144, "cpu:teardown"),
            (147, "kvm/cpu:online"),
            (202, "virtio/net:online"),
            (235, "sched:active"),
            (236, "online"),
        ]
        .iter()
        .map(|(n, s)| (*n, s.to_string()))
        .collect()
    }

    #[test]
    fn nested_steps_make_one_offline_and_one_online_operation() {
        let mut b = B::new(false);
        b.offline(0);
        b.online(5000, 30);
        let st = states();
        let r = analyze(&b.t, Some(&st)).unwrap();
        assert_eq!(r.operations.len(), 2, "{:#?}", r.operations);
        let off = &r.operations[0];
        assert_eq!(off.direction, Direction::Offline);
        assert_eq!((off.start_ns, off.end_ns, off.span_ns), (100, 1600, 1500));
        assert_eq!(off.steps.len(), 5);
        let kick = &off.steps[0];
        assert_eq!(kick.callback, "cpuhp_kick_ap_work");
        assert_eq!(kick.name.as_deref(), Some("online"));
        assert_eq!(
            (kick.duration_ns, kick.exclusive_ns, kick.depth),
            (900, 900 - 300 - 390, 0)
        );
        let deact = &off.steps[1];
        assert_eq!(deact.name.as_deref(), Some("sched:active"));
        assert!(deact.on_target && deact.depth == 1 && !kick.on_target);
        // Gaps of 5 and 1 ns between the top-level steps.
        assert_eq!(off.steps_sum_ns, 1494);
        assert!(off.coverage > MIN_COVERAGE);
        assert_eq!(off.target_ns, 690);
        assert_eq!(off.control_ns, 1494 - 690);
        // cpu:teardown is arch; nothing else here is.
        assert_eq!(off.arch_ns, 495);
        assert!(!off.failed && off.complete);
        let on = &r.operations[1];
        assert_eq!(on.direction, Direction::Online);
        assert_eq!(on.span_ns, 1000);
        assert_eq!(on.steps_sum_ns, 999);
        assert_eq!(on.arch_ns, 989 - 400);
        assert_eq!(on.control_pid, 30);
        assert_eq!(on.slowest().unwrap().callback, "cpuhp_bringup_ap");
        assert_eq!(r.summary.len(), 2);
        let top = r
            .slowest
            .iter()
            .find(|s| s.direction == Direction::Offline)
            .unwrap();
        assert_eq!((top.callback.as_str(), top.p50_ns), ("takedown_cpu", 495));
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    #[test]
    fn repeated_cycles_by_one_task_split_into_operations() {
        let mut b = B::new(false);
        for k in 0..3u64 {
            b.offline(k * 10_000);
            b.online(k * 10_000 + 5000, 9);
        }
        let r = analyze(&b.t, None).unwrap();
        let dirs: Vec<Direction> = r.operations.iter().map(|o| o.direction).collect();
        assert_eq!(dirs.len(), 6, "{:#?}", r.operations);
        assert!(dirs
            .chunks(2)
            .all(|c| c == [Direction::Offline, Direction::Online]));
        // Without the table, the arch part comes from the callback names.
        assert_eq!(r.operations[0].arch_ns, 495);
        let s = &r.summary[0];
        assert_eq!(
            (s.operations, s.p50_span_ns, s.below_coverage),
            (3, 1500, 0)
        );
    }

    #[test]
    fn a_missing_exit_at_the_end_marks_the_operation_incomplete() {
        let mut b = B::new(true);
        b.offline(0);
        b.enter(5000, 0, 30, 1, 236, 1, 0x6000);
        b.exit(5010, 0, 30, 1, 1, 0);
        b.enter(5011, 0, 30, 1, 236, 83, 0x7000);
        b.switch(9000, 1, 0, 5);
        let r = analyze(&b.t, None).unwrap();
        assert_eq!(r.operations.len(), 2);
        let on = &r.operations[1];
        assert!(!on.complete && r.operations[0].complete);
        let last = on.steps.last().unwrap();
        assert!(!last.complete);
        assert_eq!(last.duration_ns, 9000 - 5011);
        assert!(
            r.notes.iter().any(|n| n.contains("no cpuhp_exit")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn a_rolled_back_online_stays_one_failed_operation() {
        let mut b = B::new(false);
        // Up to 40, the injected failure, then back down to 1 (target 0), then a fresh online.
        b.enter(100, 0, 30, 1, 236, 1, 0x6000);
        b.exit(110, 0, 30, 1, 1, 0);
        b.enter(111, 0, 30, 1, 236, 40, 0x9000);
        b.exit(120, 0, 30, 1, 40, 0);
        b.enter(130, 0, 30, 1, 0, 40, 0x9000);
        b.exit(140, 0, 30, 1, 40, 0);
        b.enter(141, 0, 30, 1, 0, 1, 0x6000);
        b.exit(150, 0, 30, 1, 1, 0);
        b.online(1000, 30);
        let r = analyze(&b.t, None).unwrap();
        assert_eq!(r.operations.len(), 2, "{:#?}", r.operations);
        let failed = &r.operations[0];
        assert!(failed.failed);
        assert_eq!(failed.rollback_steps(), 2);
        assert_eq!(failed.failure_ns(), 120);
        assert!(!r.operations[1].failed);
    }

    #[test]
    fn windows_decide_the_operations() {
        let mut b = B::new(false);
        b.offline(0);
        b.online(5000, 9);
        let w = |start, end, direction| Window {
            cpu: 1,
            direction,
            start_ns: start,
            end_ns: end,
        };
        let windows = [
            w(0, 4000, Direction::Offline),
            w(4000, 7000, Direction::Online),
            w(8000, 9000, Direction::Offline),
        ];
        let (r, index) = analyze_windows(&b.t, None, &windows).unwrap();
        assert_eq!(index, vec![Some(0), Some(1), None]);
        assert_eq!(r.operations[0].steps.len(), 5);
        assert_eq!(r.operations[1].steps.len(), 3);
    }

    #[test]
    fn off_cpu_time_comes_from_sched_switch() {
        let mut b = B::new(true);
        b.enter(100, 0, 9, 1, 144, 236, 0x1000);
        b.enter(200, 1, 20, 1, 144, 235, 0x2000);
        b.switch(250, 1, 20, 0);
        b.switch(450, 1, 0, 20);
        b.exit(500, 1, 20, 1, 235, 0);
        b.exit(600, 0, 9, 1, 236, 0);
        let r = analyze(&b.t, None).unwrap();
        let s = &r.operations[0].steps[1];
        assert_eq!(s.off_cpu_ns, Some(200));
        assert_eq!(r.operations[0].steps[0].off_cpu_ns, Some(0));
    }

    #[test]
    fn preemption_between_steps_is_accounted_for_but_is_not_a_step() {
        let mut b = B::new(true);
        // Two top-level steps by pid 9 with a 400 ns gap; pid 9 is switched out for 300 of it.
        b.enter(100, 0, 9, 1, 236, 1, 0x6000);
        b.exit(200, 0, 9, 1, 1, 0);
        b.switch(250, 0, 9, 77);
        b.switch(550, 0, 77, 9);
        b.enter(600, 0, 9, 1, 236, 40, 0x9000);
        b.exit(700, 0, 9, 1, 40, 0);
        let r = analyze(&b.t, None).unwrap();
        let op = &r.operations[0];
        assert_eq!((op.span_ns, op.steps_sum_ns), (600, 200));
        assert_eq!(op.preempted_ns, Some(300));
        assert!((op.accounted() - 500.0 / 600.0).abs() < 1e-12);
        assert!(r
            .notes
            .iter()
            .any(|n| n.contains("preempted between steps")));
        // Without sched_switch nothing is known about preemption.
        let mut b = B::new(false);
        b.online(0, 9);
        let r = analyze(&b.t, None).unwrap();
        assert_eq!(r.operations[0].preempted_ns, None);
    }

    #[test]
    fn interrupts_between_steps_are_accounted_for_on_the_control_cpu() {
        let mut b = B::new(true);
        for f in [
            fmt(
                "local_timer_entry",
                400,
                "\tfield:int vector;\toffset:8;\tsize:4;\tsigned:1;\n",
            ),
            fmt(
                "local_timer_exit",
                401,
                "\tfield:int vector;\toffset:8;\tsize:4;\tsigned:1;\n",
            ),
        ] {
            let mut f = f;
            f.system = "irq_vectors".into();
            b.t.formats.insert(f.id, f);
        }
        b.enter(100, 0, 9, 1, 236, 1, 0x6000);
        b.exit(200, 0, 9, 1, 1, 0);
        // 250 ns of timer interrupt on cpu0 in the gap; one on cpu1 does not count.
        b.push(300, 0, 9, 400, &[0; 4]);
        b.push(310, 1, 0, 400, &[0; 4]);
        b.push(550, 0, 9, 401, &[0; 4]);
        b.push(560, 1, 0, 401, &[0; 4]);
        b.enter(600, 0, 9, 1, 236, 40, 0x9000);
        b.exit(700, 0, 9, 1, 40, 0);
        let r = analyze(&b.t, None).unwrap();
        let op = &r.operations[0];
        assert_eq!(op.interrupted_ns, Some(250));
        assert_eq!(op.preempted_ns, Some(0));
        assert!((op.accounted() - 450.0 / 600.0).abs() < 1e-12);
        // Without the events nothing is known.
        let mut b = B::new(false);
        b.online(0, 9);
        assert_eq!(
            analyze(&b.t, None).unwrap().operations[0].interrupted_ns,
            None
        );
    }

    #[test]
    fn a_trace_without_cpuhp_events_says_what_to_record() {
        let t = Trace::default();
        let e = analyze(&t, None).unwrap_err();
        assert_eq!(e.events, vec!["cpuhp:cpuhp_enter", "cpuhp:cpuhp_exit"]);
        assert!(e.to_string().contains("pmlab record -e cpuhp"), "{e}");
        let empty = analyze(&B::new(false).t, None).unwrap();
        assert_eq!(empty.tables().len(), 2);
        assert!(empty.operations.is_empty() && empty.summary.is_empty());
    }
}
