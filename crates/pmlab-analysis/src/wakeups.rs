//! Wakeups: idle exits per second per CPU, each attributed to its cause by DESIGN.md §7 — the
//! first wake source on the CPU after its idle period began (timer by hrtimer function, IPI by
//! kind and sender callsite, device IRQ by name, polling wakeup without IPI) — and the tasks
//! whose wakeups ended idle periods ("who woke my idle CPUs").

use crate::idle::{self, Periods, Source};
use crate::table::{Cell, Table};
use crate::{Missing, Options, Tabular};
use pmlab_trace::{FieldRef, Trace};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The kind of wake source that ended an idle period.
///
/// Declared in alphabetical order: tables sort causes by kind, as they did by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CauseKind {
    /// An inter-processor interrupt (reschedule, call function...).
    Ipi,
    /// A device interrupt.
    Irq,
    /// A wakeup of a polling CPU that needed no IPI.
    Polling,
    /// A timer (hrtimer or timer-wheel function).
    Timer,
    /// Nothing seen that explains the exit.
    Unknown,
}

impl CauseKind {
    /// Every kind, in table order.
    pub const ALL: [CauseKind; 5] = [
        CauseKind::Ipi,
        CauseKind::Irq,
        CauseKind::Polling,
        CauseKind::Timer,
        CauseKind::Unknown,
    ];

    /// The name tables show: `ipi`, `irq`, `polling`, `timer`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::Ipi => "ipi",
            CauseKind::Irq => "irq",
            CauseKind::Polling => "polling",
            CauseKind::Timer => "timer",
            CauseKind::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for CauseKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<&str> for CauseKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Maps keyed by kind are looked up by its name (the order of names and kinds agree).
impl std::borrow::Borrow<str> for CauseKind {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// What ended one idle period.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Cause {
    /// The kind of source.
    pub kind: CauseKind,
    /// Timer function, IPI kind and purpose, IRQ name.
    pub detail: String,
}

impl Cause {
    fn new(kind: CauseKind, detail: impl Into<String>) -> Cause {
        Cause {
            kind,
            detail: detail.into(),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Ev {
    LocalTimer,
    Hrtimer,
    Irq,
    IrqExit,
    Vector(usize),
    ArmIpi,
    NoIpi,
    SendCpu,
    SendMask,
    Waking,
    Switch,
}

/// A cause as found in the event loop: borrowed from the trace, resolved to a [`Cause`]
/// (symbols, strings) once per distinct key when aggregating.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key<'a> {
    LocalTimer,
    /// hrtimer function address.
    Hrtimer(u64),
    Irq(&'a str),
    ArmIpi(&'a str),
    /// A vector entry that is not an IPI, or an IPI whose sender is unknown.
    Vector(usize),
    /// An IPI vector joined to its sender's callsite and callback addresses.
    Ipi(usize, u64, u64),
    NoIpi,
    Unknown,
}

/// No cause found (yet) for a period.
const NONE: u32 = u32::MAX;
/// A cause without an originator.
const NO_ORIGIN: i32 = i32::MIN;

/// Causes numbered in order of first sight; each CPU's last one is remembered, as a CPU's
/// consecutive wakeups mostly have the same cause.
#[derive(Default)]
struct Interner<'a> {
    keys: Vec<Key<'a>>,
    ids: FxHashMap<Key<'a>, u32>,
    last: Vec<Option<(Key<'a>, u32)>>,
}

impl<'a> Interner<'a> {
    fn id(&mut self, cpu: u32, k: Key<'a>) -> u32 {
        let cpu = cpu as usize;
        if let Some(Some((lk, id))) = self.last.get(cpu) {
            if *lk == k {
                return *id;
            }
        }
        let next = self.keys.len() as u32;
        let id = *self.ids.entry(k).or_insert(next);
        if id == next {
            self.keys.push(k);
        }
        if self.last.len() <= cpu {
            self.last.resize(cpu + 1, None);
        }
        self.last[cpu] = Some((k, id));
        id
    }
}

/// A C string's bytes up to its first NUL.
fn until_nul(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

/// Sums over keys that come in runs: a run is added to the map when it ends.
struct Counter<K, V = u64> {
    map: FxHashMap<K, V>,
    run: Option<(K, V)>,
}

impl<K, V> Default for Counter<K, V> {
    fn default() -> Self {
        Counter {
            map: FxHashMap::default(),
            run: None,
        }
    }
}

impl<K: std::hash::Hash + Eq + Copy, V: std::ops::AddAssign + Default + Copy> Counter<K, V> {
    fn add(&mut self, k: K, v: V) {
        match &mut self.run {
            Some((rk, n)) if *rk == k => *n += v,
            run => {
                if let Some((rk, n)) = run.replace((k, v)) {
                    *self.map.entry(rk).or_default() += n;
                }
            }
        }
    }
    fn finish(mut self) -> FxHashMap<K, V> {
        if let Some((k, n)) = self.run.take() {
            *self.map.entry(k).or_default() += n;
        }
        self.map
    }
}

/// Exits of one (cause, originator): all of them, and the sums over those decided.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    n: u64,
    s: NeedlessSum,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.n += o.n;
        self.s += o.s;
    }
}

#[derive(Clone, Copy)]
struct Sent {
    ts: u64,
    pid: i32,
    callsite: u64,
    callback: u64,
    /// Sent to a CPU mask (`ipi_send_cpumask`), not to one CPU.
    mask: bool,
}

/// Per-CPU progress through its idle periods.
#[derive(Default)]
struct CpuState {
    next: usize,
    /// Index of the period that may still be attributed.
    cand: Option<usize>,
    /// The cause found for `cand` may still be refined by a following hrtimer (timer IRQ).
    refine: bool,
    waker: bool,
    /// A task was woken onto the CPU since the candidate's last wake source (replay detail).
    woke_since_source: bool,
    /// The next period whose resume (first task event after it) is still unknown.
    resume_next: usize,
    /// Periods whose end is at or before the last event seen on the CPU (the gap after
    /// period `gap_next - 1` is the one events may fall in).
    gap_next: usize,
    /// A task has been running since this time in the current gap.
    running_since: Option<u64>,
}

/// No task ran after an idle exit (yet).
const NO_TASK: i32 = -1;

/// What the CPU did between one idle exit and its next idle entry, as the walk finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct After {
    /// The first task that ran (`NO_TASK`: none).
    pid: i32,
    /// Time tasks ran in the gap.
    run_ns: u64,
}

impl Default for After {
    fn default() -> Self {
        After {
            pid: NO_TASK,
            run_ns: 0,
        }
    }
}

/// What the CPU did after one idle exit, before it idled again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Afterwards {
    /// Only interrupt, softirq and timer handlers ran: a needless wakeup.
    Needless,
    /// A task ran: the first one, and how long tasks ran before the CPU idled again.
    Task {
        /// The first task's `comm`.
        task: String,
        /// Its pid.
        pid: i32,
        /// Time tasks ran before the CPU idled again, ns.
        run_ns: u64,
    },
    /// The trace ended before the CPU idled again, and no task had run.
    Unfinished,
    /// The CPU's idle periods are idle-task periods (no `cpu_idle`): each ends when a task
    /// runs, so an exit after which only handlers ran is not seen at all.
    Undecidable,
}

/// One idle exit and what followed it.
#[derive(Debug, Clone, Serialize)]
pub struct Exit {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// The idle period's start and end (the exit).
    pub idle_start: u64,
    /// The exit, trace timestamp (ns).
    pub exit: u64,
    /// The CPU's next idle entry (None: not within the trace).
    pub next_idle: Option<u64>,
    /// What ended the idle period.
    pub cause: Cause,
    /// The cause's originator (IPI sender task, polling waker), if known.
    pub origin: Option<String>,
    /// What the CPU did next.
    pub afterwards: Afterwards,
}

/// Sums over idle exits: how many, how many needless, the idle time those cut short and
/// the busy time they cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct NeedlessSum {
    /// Idle exits counted.
    pub exits: u64,
    /// Those that were needless (only handlers ran before the next idle entry).
    pub needless: u64,
    /// Lengths of the idle periods that needless exits ended.
    pub cut_idle_ns: u64,
    /// Time from each needless exit to the next idle entry (handlers only).
    pub busy_ns: u64,
}

impl std::ops::AddAssign for NeedlessSum {
    fn add_assign(&mut self, o: NeedlessSum) {
        self.exits += o.exits;
        self.needless += o.needless;
        self.cut_idle_ns += o.cut_idle_ns;
        self.busy_ns += o.busy_ns;
    }
}

/// Idle exits of one cause on one CPU (CPU `u32::MAX`: all CPUs).
#[derive(Debug, Clone, Serialize)]
pub struct CauseRow {
    /// The CPU (kernel numbering), or `u32::MAX` for all.
    pub cpu: u32,
    /// The cause.
    pub cause: Cause,
    /// Exits it caused.
    pub exits: u64,
    /// Exits per second of the trace's span.
    pub per_s: f64,
    /// Of the CPU's idle exits.
    pub share: f64,
    /// The most frequent originator (IPI sender task, polling waker), with its count.
    pub origin: Option<(String, u64)>,
    /// Needless exits among those whose sequel could be decided (`needless.exits` of them).
    pub needless: NeedlessSum,
}

/// Idle exits of one originator on one CPU (CPU `u32::MAX`: all CPUs).
#[derive(Debug, Clone, Serialize)]
pub struct OriginRow {
    /// The CPU (kernel numbering), or `u32::MAX` for all.
    pub cpu: u32,
    /// The originator (`comm:pid` of an IPI sender or polling waker).
    pub origin: String,
    /// Exits it caused.
    pub exits: u64,
    /// Needless ones among them.
    pub needless: NeedlessSum,
}

/// What ran after a CPU's idle exits: a task (by its first task after the exit) or nothing.
#[derive(Debug, Clone, Serialize)]
pub struct AfterRow {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// The task (`comm:pid`); None: no task, only handlers (needless exits).
    pub task: Option<String>,
    /// Exits followed by that task (or by nothing).
    pub exits: u64,
    /// Time tasks ran after those exits, before the CPU idled again.
    pub run_ns: u64,
    /// Time from those exits to the next idle entry.
    pub busy_ns: u64,
}

/// One CPU's idle exits.
#[derive(Debug, Clone, Serialize)]
pub struct CpuRow {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// Where its idle periods come from.
    pub source: Source,
    /// Idle exits.
    pub exits: u64,
    /// Idle exits per second of the trace's span.
    pub per_s: f64,
    /// Exits per cause kind.
    pub by_kind: BTreeMap<CauseKind, u64>,
    /// Needless exits; None where they cannot be seen (idle-task periods, no `cpu_idle`).
    pub needless: Option<NeedlessSum>,
    /// Needless exits per second (None as above).
    pub needless_per_s: Option<f64>,
}

/// Who woke which task onto a CPU (`sched_waking` with that target CPU).
#[derive(Debug, Clone, Serialize)]
pub struct WakerRow {
    /// The waking task (`comm:pid`).
    pub waker: String,
    /// The woken task (`comm:pid`, `?` when unknown).
    pub wakee: String,
    /// The target CPU.
    pub cpu: u32,
    /// Wakeups.
    pub count: u64,
    /// Wakeups per second of the trace's span.
    pub per_s: f64,
}

/// The wakeups analysis's result.
#[derive(Debug, Clone, Serialize)]
pub struct WakeupsReport {
    /// The trace's span, ns.
    pub span_ns: u64,
    /// Per CPU, by CPU.
    pub cpus: Vec<CpuRow>,
    /// Sorted by CPU, then exits (descending); CPU `u32::MAX` rows are all CPUs together.
    pub causes: Vec<CauseRow>,
    /// Top wakers per target CPU, most wakeups first.
    pub wakers: Vec<WakerRow>,
    /// Originators of idle exits and their needless exits, by CPU then exits (descending).
    pub origins: Vec<OriginRow>,
    /// What ran after idle exits, per CPU, most frequent first (at most `top` a CPU).
    pub after: Vec<AfterRow>,
    /// Caveats (fallbacks, missing events...).
    pub notes: Vec<String>,
}

/// What ended an idle period, as the idle-poll replay (`crate::replay`) sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WakeClass {
    /// A single-target IPI (reschedule, call-function-single from `ipi_send_cpu`): a CPU
    /// polling at that moment would have seen the wakeup without it.
    Catchable,
    /// A timer, a device IRQ, an IPI to a mask or of another kind: polling cannot avoid it.
    NotCatchable,
    /// A wakeup without IPI (`sched_wake_idle_without_ipi`): the CPU was polling already.
    Caught,
    /// No wake source seen (a poll that timed out into a halt, or events missing).
    #[default]
    Unknown,
}

/// One idle period's wake, for the replay: its class by the *last* wake source of the
/// period (earlier sources that woke nobody are in [`WakeDetails::inner`]).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Wake {
    /// The wake's class.
    pub class: WakeClass,
    /// The wake source's time (IRQ or IPI entry, wakeup without IPI); 0 when none.
    pub source: u64,
    /// When the wake was asked for: the first `sched_waking` aimed at the CPU during the
    /// period, else the IPI's `ipi_send_cpu`; 0 when unknown.
    pub request: u64,
    /// The task that asked (the waker's pid), or -1.
    pub waker: i32,
    /// The task woken, or -1.
    pub wakee: i32,
    /// A task was woken onto the CPU during the period (false: the interrupt woke nobody).
    pub woke: bool,
    /// The first event of a task on the CPU after the period's end and before the next
    /// period (the woken task running); 0 when none (the CPU went straight back to idle).
    pub resume: u64,
}

impl Wake {
    fn none() -> Wake {
        Wake {
            waker: -1,
            wakee: -1,
            ..Wake::default()
        }
    }
}

/// Per-period wakes of a trace (aligned with [`Periods::by_cpu`]), for the replay.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WakeDetails {
    /// Per CPU: one wake per idle period, aligned with the periods.
    pub by_cpu: BTreeMap<u32, Vec<Wake>>,
    /// Per CPU: interrupts inside a period that woke nobody and were followed by another
    /// wake source in the same period, as (period index, time).
    pub inner: BTreeMap<u32, Vec<(u32, u64)>>,
    /// `sched_waking` counts by (waker pid, wakee pid), idle target or not.
    pub pairs: Vec<((i32, i32), u64)>,
    /// Every idle exit and what followed it (only when asked for, by [`exits`]).
    pub exits: Vec<Exit>,
}

fn task(trace: &Trace, pid: i32) -> String {
    match trace.comm(pid) {
        Some(c) => format!("{c}:{pid}"),
        None if pid == 0 => "swapper:0".into(),
        None => format!("<...>:{pid}"),
    }
}

/// The purpose of an IPI from its sender's callsite and callback symbols.
pub fn ipi_purpose(callsite: &str, callback: &str) -> Option<&'static str> {
    let has = |s: &str| callsite.starts_with(s) || callback.starts_with(s);
    if has("ttwu_queue_wakelist") || has("sched_ttwu_pending") {
        Some("remote wakeup")
    } else if has("nohz_csd_func") || has("kick_ilb") {
        Some("idle balance kick")
    } else if has("flush_tlb_func") || has("native_flush_tlb_multi") {
        Some("TLB shootdown")
    } else {
        None
    }
}

fn missing_sources() -> Missing {
    Missing::new(
        "wakeups",
        &[
            "irq_vectors",
            "irq:irq_handler_entry",
            "timer:hrtimer_expire_entry",
            "sched:sched_wake_idle_without_ipi",
        ],
    )
}

const IPI_VECTORS: &[&str] = &[
    "reschedule",
    "call_function",
    "call_function_single",
    "irq_work",
];

/// Remember the last IPI sent to CPU `t` (a CPU number beyond any machine is ignored).
fn send_to(sent: &mut Vec<Option<Sent>>, t: usize, s: Sent) {
    if t >= 1 << 16 {
        return;
    }
    if sent.len() <= t {
        sent.resize(t + 1, None);
    }
    sent[t] = Some(s);
}

/// The wakeups analysis.
pub fn analyze(trace: &Trace, opts: &Options) -> Result<WakeupsReport, Missing> {
    let p = idle::periods(trace, opts).map_err(|_| {
        Missing::new(
            "wakeups",
            &[
                "power:cpu_idle or sched:sched_switch",
                "irq_vectors",
                "irq",
                "ipi",
                "timer",
            ],
        )
    })?;
    analyze_with(trace, opts, &p)
}

/// The wakeups analysis over already computed idle periods.
pub fn analyze_with(trace: &Trace, opts: &Options, p: &Periods) -> Result<WakeupsReport, Missing> {
    walk(trace, opts, p, false, false).map(|r| r.0)
}

/// Every idle exit of the trace (periods `p`), its cause, and what the CPU did after it
/// before it idled again: the same walk as the report's.
pub fn exits(trace: &Trace, opts: &Options, p: &Periods) -> Result<Vec<Exit>, Missing> {
    walk(trace, opts, p, false, true).map(|r| r.1.exits)
}

/// The wakeups analysis with each period's wake as the replay needs it (request time,
/// class by the last source, resume time, interrupts that woke nobody): the same walk.
pub fn analyze_detailed(
    trace: &Trace,
    opts: &Options,
    p: &Periods,
) -> Result<(WakeupsReport, WakeDetails), Missing> {
    walk(trace, opts, p, true, false)
}

fn walk(
    trace: &Trace,
    opts: &Options,
    p: &Periods,
    detail: bool,
    want_exits: bool,
) -> Result<(WakeupsReport, WakeDetails), Missing> {
    let mut kinds: Vec<Option<Ev>> = Vec::new();
    let mut vec_names: Vec<String> = Vec::new();
    for f in trace.formats.values() {
        let k = match (f.system.as_str(), f.name.as_str()) {
            ("irq_vectors", "local_timer_entry") => Ev::LocalTimer,
            ("irq_vectors", n) if n.ends_with("_entry") => {
                vec_names.push(n.trim_end_matches("_entry").to_string());
                Ev::Vector(vec_names.len() - 1)
            }
            ("timer", "hrtimer_expire_entry") => Ev::Hrtimer,
            ("irq", "irq_handler_entry") => Ev::Irq,
            ("irq", "irq_handler_exit") => Ev::IrqExit,
            ("ipi", "ipi_entry") => Ev::ArmIpi,
            ("ipi", "ipi_send_cpu") => Ev::SendCpu,
            ("ipi", "ipi_send_cpumask") => Ev::SendMask,
            ("sched", "sched_wake_idle_without_ipi") => Ev::NoIpi,
            ("sched", "sched_waking") => Ev::Waking,
            ("sched", "sched_switch") => Ev::Switch,
            _ => continue,
        };
        let id = f.id as usize;
        if kinds.len() <= id {
            kinds.resize(id + 1, None);
        }
        kinds[id] = Some(k);
    }
    let vec_is_ipi: Vec<bool> = vec_names
        .iter()
        .map(|n| IPI_VECTORS.contains(&n.as_str()))
        .collect();
    let sources = [Ev::LocalTimer, Ev::Hrtimer, Ev::Irq, Ev::ArmIpi, Ev::NoIpi];
    // Without wake sources the report cannot say what woke the CPUs; the exits list still
    // says what followed each exit (with an unknown cause).
    if !want_exits
        && !kinds
            .iter()
            .flatten()
            .any(|k| sources.contains(k) || matches!(k, Ev::Vector(_)))
    {
        return Err(missing_sources());
    }
    let fld =
        |sys: &str, ev: &str, f: &str| trace.event_id(sys, ev).and_then(|id| trace.field(id, f));
    let f_hr_fn = fld("timer", "hrtimer_expire_entry", "function");
    let f_irq_name = fld("irq", "irq_handler_entry", "name");
    let f_arm_reason = fld("ipi", "ipi_entry", "reason");
    let f_noipi_cpu = fld("sched", "sched_wake_idle_without_ipi", "cpu");
    let f_send_cpu = fld("ipi", "ipi_send_cpu", "cpu");
    let f_send_site = fld("ipi", "ipi_send_cpu", "callsite");
    let f_send_cb = fld("ipi", "ipi_send_cpu", "callback");
    let f_mask = fld("ipi", "ipi_send_cpumask", "cpumask");
    let f_mask_site = fld("ipi", "ipi_send_cpumask", "callsite");
    let f_mask_cb = fld("ipi", "ipi_send_cpumask", "callback");
    let f_wk_target = fld("sched", "sched_waking", "target_cpu");
    let f_wk_comm = fld("sched", "sched_waking", "comm");
    let f_wk_pid = fld("sched", "sched_waking", "pid");
    let sw_id = trace.event_id("sched", "sched_switch");
    let f_next = fld("sched", "sched_switch", "next_pid");

    let cpus: Vec<u32> = p.by_cpu.keys().copied().collect();
    let ncpu = cpus.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let periods: Vec<&[idle::Period]> = (0..ncpu as u32)
        .map(|c| p.by_cpu.get(&c).map(|v| v.as_slice()).unwrap_or(&[]))
        .collect();
    let mut st: Vec<CpuState> = (0..ncpu).map(|_| CpuState::default()).collect();
    // Needless exits can be seen only where periods come from cpu_idle: an idle-task period
    // ends when a task runs. Per period: what ran after its end, before the next one.
    let decide: Vec<bool> = (0..ncpu as u32)
        .map(|c| p.source.get(&c) == Some(&Source::CpuIdle))
        .collect();
    let mut after: Vec<Vec<After>> = periods
        .iter()
        .zip(&decide)
        .map(|(ps, &d)| {
            if d {
                vec![After::default(); ps.len()]
            } else {
                Vec::new()
            }
        })
        .collect();
    // Per period: its cause as an index into `keys` (NONE until found) and the cause's
    // originator (NO_ORIGIN when none): 8 bytes a period, as fresh memory is dear.
    let mut keys = Interner::default();
    let mut causes: Vec<Vec<u32>> = periods.iter().map(|ps| vec![NONE; ps.len()]).collect();
    let mut origins: Vec<Vec<i32>> = periods.iter().map(|ps| vec![NO_ORIGIN; ps.len()]).collect();
    // Replay detail (only when asked: `analyze` itself does not pay for it).
    let mut wakes: Vec<Vec<Wake>> = periods
        .iter()
        .map(|ps| {
            if detail {
                vec![Wake::none(); ps.len()]
            } else {
                Vec::new()
            }
        })
        .collect();
    let mut inner: Vec<Vec<(u32, u64)>> = vec![Vec::new(); ncpu];
    let mut pairs: FxHashMap<(i32, i32), u64> = FxHashMap::default();
    // (waker pid, wakee comm, wakee pid, cpu) → count
    let mut wakers: Vec<Counter<(i32, &[u8], i64)>> =
        (0..ncpu).map(|_| Counter::default()).collect();
    let mut sent: Vec<Option<Sent>> = Vec::new();
    let addr = |i: usize, f: Option<FieldRef>| f.map_or(0, |f| trace.u64_at(i, f));
    let ev = &trace.events;
    // Bring cpu `c`'s candidate up to `ts`: the last period that began at or before it.
    let advance = |s: &mut CpuState, ps: &[idle::Period], ts: u64| {
        while s.next < ps.len() && ps[s.next].start <= ts {
            s.cand = Some(s.next);
            s.refine = false;
            s.waker = false;
            s.woke_since_source = false;
            s.next += 1;
        }
    };
    let mut seen_sources = 0u64;
    for i in 0..ev.len() {
        ev.prefetch_ahead(i);
        // What the logging CPU does after its idle exits: a task's event, or a switch to a
        // task, between an exit and the next idle entry means a task ran.
        let oc = ev.cpu[i] as usize;
        if decide.get(oc) == Some(&true) {
            let (ps, ts, s) = (periods[oc], ev.ts[i], &mut st[oc]);
            while s.gap_next < ps.len() && ps[s.gap_next].end <= ts {
                if let (Some(t), Some(g)) = (s.running_since.take(), s.gap_next.checked_sub(1)) {
                    after[oc][g].run_ns += ps[s.gap_next].start.saturating_sub(t);
                }
                s.gap_next += 1;
            }
            if let Some(g) = s.gap_next.checked_sub(1) {
                if ps.get(g + 1).is_none_or(|q| ts < q.start) {
                    let a = &mut after[oc][g];
                    let pid = ev.pid[i];
                    if pid != 0 {
                        if a.pid == NO_TASK {
                            a.pid = pid;
                        }
                        s.running_since.get_or_insert(ts);
                    }
                    if let (true, Some(f)) = (Some(ev.id[i]) == sw_id, f_next) {
                        let next = trace.i64_at(i, f) as i32;
                        if next != 0 {
                            if a.pid == NO_TASK {
                                a.pid = next;
                            }
                            s.running_since.get_or_insert(ts);
                        } else if let Some(t) = s.running_since.take() {
                            a.run_ns += ts - t;
                        }
                    }
                }
            }
        }
        if detail && ev.pid[i] != 0 {
            // A task's event: the resume of the CPU's periods that ended before it.
            let oc = ev.cpu[i] as usize;
            if let Some(ps) = periods.get(oc).copied() {
                let (ts, s) = (ev.ts[i], &mut st[oc]);
                while s.resume_next < ps.len() && ps[s.resume_next].end <= ts {
                    let r = s.resume_next;
                    if ps.get(r + 1).is_none_or(|q| ts < q.start) {
                        wakes[oc][r].resume = ts;
                    }
                    s.resume_next += 1;
                }
            }
        }
        let Some(&Some(k)) = kinds.get(ev.id[i] as usize) else {
            continue;
        };
        let ts = ev.ts[i];
        if sources.contains(&k) || matches!(k, Ev::Vector(_)) {
            seen_sources += 1;
        }
        let target = match k {
            Ev::NoIpi => f_noipi_cpu.map(|f| trace.i64_at(i, f) as u32),
            Ev::Waking => {
                if detail {
                    if let Some(fp) = f_wk_pid {
                        *pairs
                            .entry((ev.pid[i], trace.i64_at(i, fp) as i32))
                            .or_default() += 1;
                    }
                }
                f_wk_target.map(|f| trace.i64_at(i, f) as u32)
            }
            Ev::SendCpu => {
                let Some(fc) = f_send_cpu else { continue };
                let s = Sent {
                    ts,
                    pid: ev.pid[i],
                    callsite: addr(i, f_send_site),
                    callback: addr(i, f_send_cb),
                    mask: false,
                };
                send_to(&mut sent, trace.u64_at(i, fc) as usize, s);
                continue;
            }
            Ev::SendMask => {
                let Some(fm) = f_mask else { continue };
                let s = Sent {
                    ts,
                    pid: ev.pid[i],
                    callsite: addr(i, f_mask_site),
                    callback: addr(i, f_mask_cb),
                    mask: true,
                };
                for (bi, b) in trace.bytes_at(i, fm).iter().enumerate() {
                    for bit in 0..8 {
                        if b & (1 << bit) != 0 {
                            send_to(&mut sent, bi * 8 + bit, s);
                        }
                    }
                }
                continue;
            }
            _ => Some(u32::from(ev.cpu[i])),
        };
        let Some(c) = target else { continue };
        let Some(ps) = periods.get(c as usize).copied() else {
            continue;
        };
        let s = &mut st[c as usize];
        advance(s, ps, ts);
        let Some(pi) = s.cand else { continue };
        let period = ps[pi];
        if k == Ev::Switch {
            // A switch after the period's end closes it: later events are not its wake source.
            if ts >= period.end {
                s.cand = None;
            }
            continue;
        }
        if k == Ev::Waking {
            if detail && ts <= period.end {
                let w = &mut wakes[c as usize][pi];
                if !w.woke {
                    w.woke = true;
                    if w.request == 0 {
                        w.request = ts;
                    }
                    w.waker = ev.pid[i];
                    w.wakee = f_wk_pid.map_or(-1, |f| trace.i64_at(i, f) as i32);
                }
                s.woke_since_source = true;
            }
            if !s.waker {
                s.waker = true;
                let wakee = match (f_wk_comm, f_wk_pid) {
                    (Some(fc), Some(fp)) => (until_nul(trace.bytes_at(i, fc)), trace.i64_at(i, fp)),
                    _ => (&b"?"[..], i64::MIN),
                };
                wakers[c as usize].add((ev.pid[i], wakee.0, wakee.1), 1);
            }
            continue;
        }
        if k == Ev::IrqExit {
            s.refine = false;
            continue;
        }
        let slot = &mut causes[c as usize][pi];
        if *slot != NONE {
            if s.refine && k == Ev::Hrtimer {
                *slot = keys.id(c, Key::Hrtimer(addr(i, f_hr_fn)));
                origins[c as usize][pi] = NO_ORIGIN;
                s.refine = false;
            } else if detail && ts <= period.end && k != Ev::Hrtimer {
                // A later source in the same period: the earlier one woke nobody (or the
                // wake is already known); the report keeps the first, the replay the last.
                let w = &mut wakes[c as usize][pi];
                if !s.woke_since_source
                    && !matches!(w.class, WakeClass::Catchable | WakeClass::Caught)
                {
                    inner[c as usize].push((pi as u32, w.source));
                    let snd = if matches!(k, Ev::Vector(v) if vec_is_ipi[v]) {
                        sent.get_mut(c as usize).and_then(Option::take)
                    } else {
                        None
                    };
                    let (class, req) = classify(k, &vec_names, snd, ts);
                    w.class = class;
                    w.source = ts;
                    if w.request == 0 || class == WakeClass::NotCatchable {
                        w.request = req;
                    }
                    if k == Ev::NoIpi {
                        w.waker = ev.pid[i];
                    }
                }
            }
            continue;
        }
        let mut sender = None;
        let cause = match k {
            Ev::LocalTimer => {
                s.refine = true;
                (Key::LocalTimer, None)
            }
            Ev::Hrtimer => (Key::Hrtimer(addr(i, f_hr_fn)), None),
            Ev::Irq => {
                let name = f_irq_name.map(|f| trace.str_at(i, f)).unwrap_or("?");
                s.refine = name.contains("timer");
                (Key::Irq(name), None)
            }
            Ev::ArmIpi => (
                Key::ArmIpi(f_arm_reason.map(|f| trace.str_at(i, f)).unwrap_or("?")),
                None,
            ),
            Ev::Vector(v) => {
                if !vec_is_ipi[v] {
                    (Key::Vector(v), None)
                } else {
                    let snd = sent
                        .get_mut(c as usize)
                        .and_then(Option::take)
                        .filter(|x| ts >= x.ts && ts - x.ts < 100_000_000);
                    sender = snd;
                    match snd {
                        Some(x) => (Key::Ipi(v, x.callsite, x.callback), Some(x.pid)),
                        None => (Key::Vector(v), None),
                    }
                }
            }
            Ev::NoIpi => (Key::NoIpi, Some(ev.pid[i])),
            _ => continue,
        };
        *slot = keys.id(c, cause.0);
        origins[c as usize][pi] = cause.1.unwrap_or(NO_ORIGIN);
        if detail {
            let w = &mut wakes[c as usize][pi];
            let (class, req) = classify(k, &vec_names, sender, ts);
            w.class = class;
            w.source = ts;
            if w.request == 0 || class == WakeClass::NotCatchable {
                w.request = req;
            }
            if k == Ev::NoIpi && w.waker < 0 {
                w.waker = ev.pid[i];
            }
            s.woke_since_source = false;
        }
    }

    if seen_sources == 0 && !want_exits {
        return Err(missing_sources());
    }
    // A task still running at the next idle entry (or the trace's end).
    for c in 0..ncpu {
        if let (true, Some(t), Some(g)) = (
            decide[c],
            st[c].running_since.take(),
            st[c].gap_next.checked_sub(1),
        ) {
            let end = periods[c].get(g + 1).map_or(p.t1, |q| q.start);
            after[c][g].run_ns += end.saturating_sub(t);
        }
    }
    // Aggregate.
    let secs = (p.span() as f64 / 1e9).max(1e-9);
    let symbol = |a: u64| -> String {
        if a == 0 {
            String::new()
        } else {
            trace.sym(a).unwrap_or("?").to_string()
        }
    };
    let resolve = |k: &Key| -> Cause {
        match *k {
            Key::LocalTimer => Cause::new(CauseKind::Timer, "local timer"),
            Key::Hrtimer(a) => Cause::new(CauseKind::Timer, symbol(a)),
            Key::Irq(name) => Cause::new(CauseKind::Irq, name),
            Key::ArmIpi(r) => Cause::new(CauseKind::Ipi, r.trim_end_matches(" interrupts")),
            Key::Vector(v) if IPI_VECTORS.contains(&vec_names[v].as_str()) => {
                Cause::new(CauseKind::Ipi, vec_names[v].clone())
            }
            Key::Vector(v) => Cause::new(CauseKind::Irq, format!("vector {}", vec_names[v])),
            Key::Ipi(v, site, cb) => {
                let (site, cb) = (symbol(site), symbol(cb));
                let name = &vec_names[v];
                let detail = match ipi_purpose(&site, &cb) {
                    Some(pu) => format!("{name}: {pu} ({site})"),
                    None => format!("{name} from {site}"),
                };
                Cause::new(CauseKind::Ipi, detail)
            }
            Key::NoIpi => Cause::new(CauseKind::Polling, "wakeup without IPI"),
            Key::Unknown => Cause::new(CauseKind::Unknown, ""),
        }
    };
    // Count by (cpu, key) first; distinct keys become causes (and merge) once, into their
    // CPU's row and the all-CPUs row.
    let unknown = keys.id(0, Key::Unknown);
    let mut by_key: FxHashMap<(u32, Key), (Tally, FxHashMap<i32, Tally>)> = FxHashMap::default();
    let mut cpu_rows = Vec::new();
    // Per CPU, what ran after its exits: first task (NO_TASK: none) → (exits, run, busy).
    let mut after_rows: Vec<AfterRow> = Vec::new();
    let mut exit_list = Vec::new();
    for &c in &cpus {
        let ci = c as usize;
        let ps = periods[ci];
        let mut exits = 0;
        let mut sum = NeedlessSum::default();
        // (cause, origin) → tally, by runs: one CPU's exits mostly repeat one cause.
        let mut counts: Counter<(u32, i32), Tally> = Counter::default();
        let mut ran: FxHashMap<i32, (u64, u64, u64)> = FxHashMap::default();
        for (k, ((q, &cause), &origin)) in ps.iter().zip(&causes[ci]).zip(&origins[ci]).enumerate()
        {
            if q.open_end {
                continue;
            }
            exits += 1;
            let next = ps.get(k + 1).map(|n| n.start);
            let (t, afterwards) = match (decide[ci], after.get(ci).and_then(|v| v.get(k)), next) {
                (false, ..) | (true, None, _) => (
                    Tally {
                        n: 1,
                        ..Tally::default()
                    },
                    None,
                ),
                (true, Some(a), _) if a.pid != NO_TASK => {
                    let busy = next.unwrap_or(p.t1).saturating_sub(q.end);
                    let e = ran.entry(a.pid).or_default();
                    *e = (e.0 + 1, e.1 + a.run_ns, e.2 + busy);
                    let s = NeedlessSum {
                        exits: 1,
                        ..NeedlessSum::default()
                    };
                    (Tally { n: 1, s }, Some(*a))
                }
                (true, Some(_), None) => (
                    Tally {
                        n: 1,
                        ..Tally::default()
                    },
                    None,
                ),
                (true, Some(a), Some(n)) => {
                    let s = NeedlessSum {
                        exits: 1,
                        needless: 1,
                        cut_idle_ns: q.len(),
                        busy_ns: n - q.end,
                    };
                    let e = ran.entry(NO_TASK).or_default();
                    *e = (e.0 + 1, e.1, e.2 + s.busy_ns);
                    (Tally { n: 1, s }, Some(*a))
                }
            };
            sum += t.s;
            let cause = if cause == NONE { unknown } else { cause };
            counts.add((cause, origin), t);
            if want_exits {
                exit_list.push(Exit {
                    cpu: c,
                    idle_start: q.start,
                    exit: q.end,
                    next_idle: next,
                    cause: resolve(&keys.keys[cause as usize]),
                    origin: (origin != NO_ORIGIN).then(|| task(trace, origin)),
                    afterwards: match afterwards {
                        _ if !decide[ci] => Afterwards::Undecidable,
                        None => Afterwards::Unfinished,
                        Some(a) if a.pid == NO_TASK => Afterwards::Needless,
                        Some(a) => Afterwards::Task {
                            task: task(trace, a.pid),
                            pid: a.pid,
                            run_ns: a.run_ns,
                        },
                    },
                });
            }
        }
        for ((cause, origin), t) in counts.finish() {
            let e = by_key.entry((c, keys.keys[cause as usize])).or_default();
            e.0 += t;
            if origin != NO_ORIGIN {
                *e.1.entry(origin).or_default() += t;
            }
        }
        let mut rows: Vec<AfterRow> = ran
            .into_iter()
            .map(|(pid, (n, run, busy))| AfterRow {
                cpu: c,
                task: (pid != NO_TASK).then(|| task(trace, pid)),
                exits: n,
                run_ns: run,
                busy_ns: busy,
            })
            .collect();
        rows.sort_by(|a, b| b.exits.cmp(&a.exits).then(a.task.cmp(&b.task)));
        rows.truncate(opts.top());
        after_rows.extend(rows);
        let d = decide[ci];
        cpu_rows.push(CpuRow {
            cpu: c,
            source: p.source.get(&c).copied().unwrap_or(Source::None),
            exits,
            per_s: exits as f64 / secs,
            by_kind: BTreeMap::new(),
            needless: d.then_some(sum),
            needless_per_s: d.then(|| sum.needless as f64 / secs),
        });
    }
    let mut names: FxHashMap<Key, Cause> = FxHashMap::default();
    let mut rows: BTreeMap<(u32, Cause), (Tally, HashMap<String, Tally>)> = BTreeMap::new();
    let mut by_origin: BTreeMap<(u32, String), Tally> = BTreeMap::new();
    for ((cpu, key), (t, origins)) in by_key {
        let cause = names.entry(key).or_insert_with(|| resolve(&key)).clone();
        if let Some(r) = cpu_rows.iter_mut().find(|r| r.cpu == cpu) {
            *r.by_kind.entry(cause.kind).or_default() += t.n;
        }
        let origins: Vec<(String, Tally)> = origins
            .into_iter()
            .map(|(pid, m)| (task(trace, pid), m))
            .collect();
        for (name, m) in &origins {
            for c in [cpu, u32::MAX] {
                *by_origin.entry((c, name.clone())).or_default() += *m;
            }
        }
        for row in [(cpu, cause.clone()), (u32::MAX, cause)] {
            let e = rows.entry(row).or_default();
            e.0 += t;
            for (name, m) in &origins {
                *e.1.entry(name.clone()).or_default() += *m;
            }
        }
    }
    let total: u64 = cpu_rows.iter().map(|r| r.exits).sum();
    let mut causes_out: Vec<CauseRow> = rows
        .into_iter()
        .map(|((cpu, cause), (t, origins))| {
            let denom = if cpu == u32::MAX {
                total
            } else {
                cpu_rows
                    .iter()
                    .find(|r| r.cpu == cpu)
                    .map_or(0, |r| r.exits)
            };
            let origin = origins
                .into_iter()
                .map(|(o, m)| (o, m.n))
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
            CauseRow {
                cpu,
                cause,
                exits: t.n,
                per_s: t.n as f64 / secs,
                share: t.n as f64 / denom.max(1) as f64,
                origin,
                needless: t.s,
            }
        })
        .collect();
    let mut origins_out: Vec<OriginRow> = by_origin
        .into_iter()
        .map(|((cpu, origin), t)| OriginRow {
            cpu,
            origin,
            exits: t.n,
            needless: t.s,
        })
        .collect();
    origins_out.sort_by(|a, b| {
        a.cpu
            .cmp(&b.cpu)
            .then(b.exits.cmp(&a.exits))
            .then(a.origin.cmp(&b.origin))
    });
    causes_out.sort_by(|a, b| {
        a.cpu
            .cmp(&b.cpu)
            .then(b.exits.cmp(&a.exits))
            .then(a.cause.cmp(&b.cause))
    });
    let mut wk: Vec<WakerRow> = wakers
        .into_iter()
        .enumerate()
        .flat_map(|(cpu, w)| w.finish().into_iter().map(move |k| (cpu as u32, k)))
        .map(|(cpu, ((waker, comm, pid), count))| WakerRow {
            waker: task(trace, waker),
            wakee: if pid == i64::MIN {
                "?".into()
            } else {
                format!("{}:{pid}", std::str::from_utf8(comm).unwrap_or(""))
            },
            cpu,
            count,
            per_s: count as f64 / secs,
        })
        .collect();
    wk.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.cpu.cmp(&b.cpu))
            .then(a.waker.cmp(&b.waker))
            .then(a.wakee.cmp(&b.wakee))
    });
    wk.truncate(opts.top());
    let mut notes = p.notes.clone();
    let undecided: Vec<u32> = cpu_rows
        .iter()
        .filter(|r| r.needless.is_none())
        .map(|r| r.cpu)
        .collect();
    if p.source.values().any(|s| *s == Source::IdleTask) {
        notes.push(
            "wakeups on idle-task CPUs count idle-task periods (switches to and from pid 0), not every exit from the idle instruction".into(),
        );
    }
    if !undecided.is_empty() {
        notes.push(format!(
            "needless wakeups on CPU {}: not decidable: the kernel logged no cpu_idle there, so an \
             idle period ends only when a task runs; exits after which only interrupt, softirq \
             and timer handlers ran (needless ones) are invisible, not zero. Their causes and \
             the tasks woken are still counted",
            pmlab_kernel::cpulist::format_cpu_list(&undecided)
        ));
    }
    if !kinds
        .iter()
        .flatten()
        .any(|k| matches!(k, Ev::SendCpu | Ev::SendMask))
    {
        notes.push("IPI senders unknown: record ipi:ipi_send_cpu and ipi:ipi_send_cpumask (`pmlab record -e ipi`)".into());
    }
    let details = WakeDetails {
        by_cpu: cpus
            .iter()
            .map(|&c| (c, std::mem::take(&mut wakes[c as usize])))
            .collect(),
        inner: cpus
            .iter()
            .map(|&c| (c, std::mem::take(&mut inner[c as usize])))
            .filter(|(_, v)| !v.is_empty())
            .collect(),
        pairs: {
            let mut v: Vec<_> = pairs.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            v
        },
        exits: exit_list,
    };
    Ok((
        WakeupsReport {
            span_ns: p.span(),
            cpus: cpu_rows,
            causes: causes_out,
            wakers: wk,
            origins: origins_out,
            after: after_rows,
            notes,
        },
        details,
    ))
}

/// A wake source's replay class and request time (the IPI's send time where known).
fn classify(k: Ev, vec_names: &[String], snd: Option<Sent>, ts: u64) -> (WakeClass, u64) {
    match k {
        Ev::NoIpi => (WakeClass::Caught, ts),
        Ev::Vector(v) => match (vec_names[v].as_str(), snd) {
            ("reschedule" | "call_function_single", Some(x)) if !x.mask => {
                (WakeClass::Catchable, x.ts)
            }
            _ => (WakeClass::NotCatchable, ts),
        },
        // arm64 `ipi_entry` carries a reason, not a sender: single-target IPIs are the
        // reschedule and call-function ones.
        _ => (WakeClass::NotCatchable, ts),
    }
}

impl WakeupsReport {
    /// Share of `cpu`'s idle exits whose cause kind is `kind` and whose detail contains `detail`.
    pub fn share(&self, cpu: u32, kind: &str, detail: &str) -> f64 {
        self.causes
            .iter()
            .filter(|r| r.cpu == cpu && r.cause.kind == kind && r.cause.detail.contains(detail))
            .map(|r| r.share)
            .sum()
    }
}

fn cpu_label(cpu: u32) -> Cell {
    if cpu == u32::MAX {
        "all".into()
    } else {
        cpu.into()
    }
}

/// The needless columns of a sum (empty when nothing was decidable).
fn needless_cells(s: Option<&NeedlessSum>) -> [Cell; 4] {
    match s {
        Some(s) if s.exits > 0 => [
            s.needless.into(),
            (s.needless as f64 * 100.0 / s.exits as f64).into(),
            (s.cut_idle_ns as f64 / 1e6).into(),
            (s.busy_ns as f64 / 1e6).into(),
        ],
        _ => [Cell::Empty, Cell::Empty, Cell::Empty, Cell::Empty],
    }
}

const NEEDLESS_COLS: [&str; 4] = [
    "needless",
    "needless_pct",
    "cut_idle_ms",
    "needless_busy_ms",
];

impl Tabular for WakeupsReport {
    fn tables(&self) -> Vec<Table> {
        let kinds = ["timer", "ipi", "irq", "polling", "unknown"];
        let mut cols = vec!["cpu", "source", "idle_exits", "exits_per_s"];
        cols.extend(kinds);
        cols.push("needless_per_s");
        cols.extend(NEEDLESS_COLS);
        let mut t = Table::new("wakeups_cpus", "Idle exits per CPU, by cause", &cols, 1);
        for r in &self.cpus {
            let mut row = vec![
                r.cpu.into(),
                r.source.label().into(),
                r.exits.into(),
                r.per_s.into(),
            ];
            row.extend(
                kinds
                    .iter()
                    .map(|k| Cell::from(r.by_kind.get(*k).copied().unwrap_or(0))),
            );
            row.push(r.needless_per_s.into());
            row.extend(needless_cells(r.needless.as_ref()));
            t.row(row);
        }
        let mut cols = vec![
            "cpu",
            "cause",
            "detail",
            "exits",
            "per_s",
            "share_pct",
            "top_origin",
        ];
        cols.extend(NEEDLESS_COLS);
        let mut c = Table::new("wakeups_causes", "Who woke my idle CPUs", &cols, 3);
        for r in &self.causes {
            let mut row = vec![
                cpu_label(r.cpu),
                r.cause.kind.as_str().into(),
                r.cause.detail.clone().into(),
                r.exits.into(),
                r.per_s.into(),
                (r.share * 100.0).into(),
                r.origin.as_ref().map(|(o, n)| format!("{o} ({n})")).into(),
            ];
            row.extend(needless_cells(Some(&r.needless)));
            c.row(row);
        }
        let mut cols = vec!["cpu", "origin", "exits"];
        cols.extend(NEEDLESS_COLS);
        let mut o = Table::new(
            "wakeups_origins",
            "Originators of idle exits (IPI senders, polling wakers) and their needless exits",
            &cols,
            2,
        );
        for r in &self.origins {
            let mut row = vec![cpu_label(r.cpu), r.origin.clone().into(), r.exits.into()];
            row.extend(needless_cells(Some(&r.needless)));
            o.row(row);
        }
        let mut a = Table::new(
            "wakeups_after",
            "What ran after idle exits, before the CPU idled again (cpu_idle CPUs)",
            &["cpu", "then_ran", "exits", "run_ms", "busy_ms"],
            2,
        );
        for r in &self.after {
            a.row(vec![
                r.cpu.into(),
                r.task
                    .clone()
                    .unwrap_or_else(|| "(no task: handlers only, needless)".into())
                    .into(),
                r.exits.into(),
                (r.run_ns as f64 / 1e6).into(),
                (r.busy_ns as f64 / 1e6).into(),
            ]);
        }
        let mut w = Table::new(
            "wakeups_wakers",
            "Top tasks waking idle CPUs (sched_waking target_cpu)",
            &["waker", "wakee", "cpu", "count", "per_s"],
            3,
        );
        for r in &self.wakers {
            w.row(vec![
                r.waker.clone().into(),
                r.wakee.clone().into(),
                r.cpu.into(),
                r.count.into(),
                r.per_s.into(),
            ]);
        }
        vec![t, c, o, a, w]
    }
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
