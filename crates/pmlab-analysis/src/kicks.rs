//! Idle-balance kicks: the nohz idle-load-balance kick (a CSD running `nohz_csd_func` on the
//! target, sent by IPI or without one to a polling CPU, then SCHED_SOFTIRQ) and the periodic
//! balance in the tick (SCHED_SOFTIRQ with no kick before it); per kick its kicker, its
//! target, whether a task migrated in the softirq and whether the target then ran a task.

use crate::table::{Cell, Table};
use crate::{Missing, Options, Tabular};
use pmlab_trace::Trace;
use serde::Serialize;
use std::collections::BTreeMap;

/// SCHED_SOFTIRQ's number (`include/linux/interrupt.h`, stable since 2.6).
pub const SCHED_SOFTIRQ: u64 = 7;
/// The CSD callback of the nohz idle-balance kick.
pub const NOHZ_CSD_FUNC: &str = "nohz_csd_func";
/// A send older than this is not the kick's (the IPI would have arrived long before).
const SEND_WINDOW_NS: u64 = 100_000_000;

/// How the kick reached its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// A call-function-single IPI (`ipi_send_cpu`).
    Ipi,
    /// No IPI: the target was polling (`sched_wake_idle_without_ipi`).
    NoIpi,
    /// No send seen (events not recorded, or sent before the trace began).
    Unknown,
}

impl Via {
    /// The name tables show: `ipi`, `no-ipi`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Ipi => "ipi",
            Via::NoIpi => "no-ipi",
            Via::Unknown => "unknown",
        }
    }
}

/// What started a SCHED_SOFTIRQ balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BalanceKind {
    /// A nohz idle-balance kick (`nohz_csd_func`).
    Kick,
    /// SCHED_SOFTIRQ with no kick before it: the periodic balance raised from the tick.
    Tick,
}

/// One balance: a kick (with its sender) or a tick's periodic balance.
#[derive(Debug, Clone, Serialize)]
pub struct Kick {
    /// A kick or a tick's periodic balance.
    pub kind: BalanceKind,
    /// The CPU the balance ran on (the kick's target).
    pub cpu: u32,
    /// The CSD's entry (kick) or the softirq's entry (tick).
    pub ts: u64,
    /// The CPU and task that sent the kick (None: not seen; tick balances have none).
    pub kicker_cpu: Option<u32>,
    /// The kicker task (`comm:pid`).
    pub kicker: Option<String>,
    /// How the kick arrived; None for tick balances.
    pub via: Option<Via>,
    /// The target was running the idle task when the kick arrived.
    pub target_idle: bool,
    /// SCHED_SOFTIRQ ran after the CSD (always for tick balances).
    pub softirq: bool,
    /// `sched_migrate_task` events logged on the CPU inside the SCHED_SOFTIRQ.
    pub migrated: u32,
    /// The CPU ran a task after the balance before it idled again (None: trace ended).
    pub then_ran: Option<bool>,
}

/// Kicks and tick balances of one CPU.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CpuKicks {
    /// The CPU (kernel numbering), as the kick's target.
    pub cpu: u32,
    /// Kicks it received.
    pub kicks: u64,
    /// Kicks per second of the trace's span.
    pub kicks_per_s: f64,
    /// Kicks that came by IPI.
    pub via_ipi: u64,
    /// Kicks that came without an IPI (it was polling).
    pub via_no_ipi: u64,
    /// Kicks whose softirq migrated at least one task.
    pub migrated: u64,
    /// Kicks that moved nothing (no migration in their softirq).
    pub moved_nothing: u64,
    /// Kicks after which the target ran a task, and after which it idled again.
    pub then_ran: u64,
    /// See `then_ran`.
    pub then_idle: u64,
    /// Periodic balances from its tick.
    pub tick_balances: u64,
    /// Tick balances per second of the span.
    pub tick_per_s: f64,
    /// Tick balances that migrated a task.
    pub tick_migrated: u64,
}

/// Kicks by (kicker CPU, kicker task, target).
#[derive(Debug, Clone, Serialize)]
pub struct KickerRow {
    /// The CPU that sent the kicks; None when not seen.
    pub kicker_cpu: Option<u32>,
    /// The task that sent them (`comm:pid`, or `?`).
    pub kicker: String,
    /// The CPU kicked.
    pub target: u32,
    /// Kicks.
    pub kicks: u64,
    /// Those whose softirq migrated nothing.
    pub moved_nothing: u64,
}

/// The kicks analysis's result.
#[derive(Debug, Clone, Serialize)]
pub struct KicksReport {
    /// The trace's span, ns.
    pub span_ns: u64,
    /// Per CPU, by CPU.
    pub cpus: Vec<CpuKicks>,
    /// Per kicker and target, most kicks first.
    pub kickers: Vec<KickerRow>,
    /// Every kick and tick balance, in time order.
    pub kicks: Vec<Kick>,
    /// Caveats (missing events, kallsyms lacking `nohz_csd_func`...).
    pub notes: Vec<String>,
}

impl KicksReport {
    /// The kicks whose target was `cpu`.
    pub fn kicks_on(&self, cpu: u32) -> u64 {
        self.cpus
            .iter()
            .find(|c| c.cpu == cpu)
            .map_or(0, |c| c.kicks)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Ev {
    CsdEntry,
    CsdQueue,
    SendCpu,
    SendMask,
    NoIpi,
    SoftEntry,
    SoftExit,
    Migrate,
    Switch,
    CpuIdle,
    /// A hardware interrupt's entry: on the idle task after a balance, the CPU idled again.
    HardIrq,
}

#[derive(Clone, Copy)]
struct Send {
    ts: u64,
    cpu: u32,
    pid: i32,
}

/// Per-CPU progress.
#[derive(Default)]
struct St {
    /// A kick whose SCHED_SOFTIRQ has not started yet.
    pending: Option<usize>,
    /// The balance whose SCHED_SOFTIRQ is running.
    in_softirq: Option<usize>,
    /// Balances whose outcome (a task ran, or idle again) is still open.
    waiting: Vec<usize>,
    queued: Option<Send>,
    ipi: Option<Send>,
    no_ipi: Option<Send>,
}

fn missing() -> Missing {
    Missing::new(
        "kicks",
        &[
            "csd:csd_function_entry",
            "irq:softirq_entry",
            "irq:softirq_exit",
        ],
    )
}

/// The idle-balance kicks analysis.
pub fn analyze(trace: &Trace, opts: &Options) -> Result<KicksReport, Missing> {
    let mut kinds: Vec<Option<Ev>> = Vec::new();
    for f in trace.formats.values() {
        let k = match (f.system.as_str(), f.name.as_str()) {
            ("csd", "csd_function_entry") => Ev::CsdEntry,
            ("csd", "csd_queue_cpu") => Ev::CsdQueue,
            ("ipi", "ipi_send_cpu") => Ev::SendCpu,
            ("ipi", "ipi_send_cpumask") => Ev::SendMask,
            ("sched", "sched_wake_idle_without_ipi") => Ev::NoIpi,
            ("irq", "softirq_entry") => Ev::SoftEntry,
            ("irq", "softirq_exit") => Ev::SoftExit,
            ("sched", "sched_migrate_task") => Ev::Migrate,
            ("sched", "sched_switch") => Ev::Switch,
            ("power", "cpu_idle") => Ev::CpuIdle,
            ("irq", "irq_handler_entry") | ("ipi", "ipi_entry") => Ev::HardIrq,
            ("irq_vectors", n) if n.ends_with("_entry") => Ev::HardIrq,
            _ => continue,
        };
        let id = f.id as usize;
        if kinds.len() <= id {
            kinds.resize(id + 1, None);
        }
        kinds[id] = Some(k);
    }
    let fld =
        |sys: &str, ev: &str, f: &str| trace.event_id(sys, ev).and_then(|id| trace.field(id, f));
    let f_func = fld("csd", "csd_function_entry", "func");
    let f_vec = fld("irq", "softirq_entry", "vec");
    let f_xvec = fld("irq", "softirq_exit", "vec");
    let (Some(f_func), Some(f_vec)) = (f_func, f_vec) else {
        return Err(missing());
    };
    let f_q_cpu = fld("csd", "csd_queue_cpu", "cpu");
    let f_q_func = fld("csd", "csd_queue_cpu", "func");
    let f_send_cpu = fld("ipi", "ipi_send_cpu", "cpu");
    let f_mask = fld("ipi", "ipi_send_cpumask", "cpumask");
    let f_noipi_cpu = fld("sched", "sched_wake_idle_without_ipi", "cpu");
    let f_next = fld("sched", "sched_switch", "next_pid");
    let f_idle_state = fld("power", "cpu_idle", "state");
    let f_idle_cpu = fld("power", "cpu_idle", "cpu_id");
    let ev = &trace.events;
    // Function pointers resolve through the file's kallsyms, once per distinct address.
    let mut is_nohz: rustc_hash::FxHashMap<u64, bool> = rustc_hash::FxHashMap::default();
    let mut nohz = |a: u64| {
        *is_nohz
            .entry(a)
            .or_insert_with(|| trace.sym(a) == Some(NOHZ_CSD_FUNC))
    };
    let ncpu = (trace.cpus as usize).max(ev.cpu_slots());
    let mut st: Vec<St> = (0..ncpu).map(|_| St::default()).collect();
    let mut kicks: Vec<Kick> = Vec::new();
    let task = |pid: i32| match trace.comm(pid) {
        Some(c) => format!("{c}:{pid}"),
        None if pid == 0 => "swapper:0".into(),
        None => format!("<...>:{pid}"),
    };
    for i in 0..ev.len() {
        let Some(&Some(k)) = kinds.get(ev.id[i] as usize) else {
            continue;
        };
        let (ts, c, pid) = (ev.ts[i], ev.cpu[i] as usize, ev.pid[i]);
        let send = Send {
            ts,
            cpu: c as u32,
            pid,
        };
        let at = |st: &mut Vec<St>, t: usize| -> Option<usize> {
            if t >= 1 << 16 {
                return None;
            }
            if st.len() <= t {
                st.resize_with(t + 1, St::default);
            }
            Some(t)
        };
        match k {
            Ev::CsdQueue => {
                if let (Some(fc), Some(ff)) = (f_q_cpu, f_q_func) {
                    if nohz(trace.u64_at(i, ff)) {
                        if let Some(t) = at(&mut st, trace.u64_at(i, fc) as usize) {
                            st[t].queued = Some(send);
                        }
                    }
                }
                continue;
            }
            Ev::SendCpu => {
                if let Some(t) = f_send_cpu.and_then(|f| at(&mut st, trace.u64_at(i, f) as usize)) {
                    st[t].ipi = Some(send);
                }
                continue;
            }
            Ev::SendMask => {
                if let Some(f) = f_mask {
                    for (bi, b) in trace.bytes_at(i, f).iter().enumerate() {
                        for bit in (0..8).filter(|bit| b & (1 << bit) != 0) {
                            if let Some(t) = at(&mut st, bi * 8 + bit) {
                                st[t].ipi = Some(send);
                            }
                        }
                    }
                }
                continue;
            }
            Ev::NoIpi => {
                if let Some(t) = f_noipi_cpu.and_then(|f| at(&mut st, trace.i64_at(i, f) as usize))
                {
                    st[t].no_ipi = Some(send);
                }
                continue;
            }
            _ => {}
        }
        // Events on CPU c: a task running, or the idle task idling again, settles the
        // outcome of the balances waiting on c (after their softirq).
        let s = &mut st[c];
        let ran = pid != 0 || (k == Ev::Switch && f_next.is_some_and(|f| trace.i64_at(i, f) != 0));
        let idled = pid == 0
            && match k {
                Ev::HardIrq | Ev::CsdEntry => true,
                Ev::CpuIdle => match (f_idle_state, f_idle_cpu) {
                    (Some(fs), Some(fc)) => {
                        trace.u64_at(i, fs) != 0xffff_ffff && trace.u64_at(i, fc) as usize == c
                    }
                    _ => false,
                },
                _ => false,
            };
        if (ran || idled) && !s.waiting.is_empty() {
            for w in s.waiting.drain(..) {
                kicks[w].then_ran = Some(ran);
            }
        }
        match k {
            Ev::CsdEntry => {
                if !nohz(trace.u64_at(i, f_func)) {
                    continue;
                }
                let fresh =
                    |x: Option<Send>| x.filter(|x| ts >= x.ts && ts - x.ts < SEND_WINDOW_NS);
                let queued = fresh(s.queued.take());
                let ipi = fresh(s.ipi.take()).filter(|x| queued.is_none_or(|q| x.ts >= q.ts));
                let no_ipi = fresh(s.no_ipi.take()).filter(|x| queued.is_none_or(|q| x.ts >= q.ts));
                // The latest send after the queueing (if any) is how the kick came.
                let (via, sender) = match (ipi, no_ipi) {
                    (Some(a), Some(b)) if b.ts > a.ts => (Via::NoIpi, Some(b)),
                    (Some(a), _) => (Via::Ipi, Some(a)),
                    (None, Some(b)) => (Via::NoIpi, Some(b)),
                    (None, None) => (Via::Unknown, None),
                };
                let kicker = queued.or(sender);
                if let Some(p) = s.pending.take() {
                    // A kick without its softirq: its outcome is open from here.
                    s.waiting.push(p);
                }
                s.pending = Some(kicks.len());
                kicks.push(Kick {
                    kind: BalanceKind::Kick,
                    cpu: c as u32,
                    ts,
                    kicker_cpu: kicker.map(|x| x.cpu),
                    kicker: kicker.map(|x| task(x.pid)),
                    via: Some(via),
                    target_idle: pid == 0,
                    softirq: false,
                    migrated: 0,
                    then_ran: None,
                });
            }
            Ev::SoftEntry if trace.u64_at(i, f_vec) == SCHED_SOFTIRQ => {
                let b = match s.pending.take() {
                    Some(p) => {
                        kicks[p].softirq = true;
                        p
                    }
                    None => {
                        kicks.push(Kick {
                            kind: BalanceKind::Tick,
                            cpu: c as u32,
                            ts,
                            kicker_cpu: None,
                            kicker: None,
                            via: None,
                            target_idle: pid == 0,
                            softirq: true,
                            migrated: 0,
                            then_ran: None,
                        });
                        kicks.len() - 1
                    }
                };
                if let Some(prev) = s.in_softirq.replace(b) {
                    s.waiting.push(prev);
                }
            }
            Ev::SoftExit if f_xvec.is_some_and(|f| trace.u64_at(i, f) == SCHED_SOFTIRQ) => {
                if let Some(b) = s.in_softirq.take() {
                    s.waiting.push(b);
                }
            }
            Ev::Migrate => {
                if let Some(b) = s.in_softirq {
                    kicks[b].migrated += 1;
                }
            }
            _ => {
                if idled || ran {
                    // No softirq_exit recorded: the balance ended before this event.
                    if let Some(b) = s.in_softirq.take().filter(|_| f_xvec.is_none()) {
                        kicks[b].then_ran = Some(ran);
                    }
                    if let Some(p) = s.pending.take() {
                        kicks[p].then_ran = Some(ran);
                    }
                }
            }
        }
    }
    Ok(report(trace, opts, kicks, &kinds))
}

fn report(trace: &Trace, opts: &Options, kicks: Vec<Kick>, kinds: &[Option<Ev>]) -> KicksReport {
    let (t0, t1) = trace.bounds();
    let span = t1 - t0;
    let secs = (span as f64 / 1e9).max(1e-9);
    let kicks: Vec<Kick> = kicks.into_iter().filter(|k| opts.wants(k.cpu)).collect();
    let mut cpus: BTreeMap<u32, CpuKicks> = BTreeMap::new();
    let mut kickers: BTreeMap<(Option<u32>, String, u32), (u64, u64)> = BTreeMap::new();
    for k in &kicks {
        let r = cpus.entry(k.cpu).or_insert_with(|| CpuKicks {
            cpu: k.cpu,
            ..CpuKicks::default()
        });
        match k.kind {
            BalanceKind::Kick => {
                r.kicks += 1;
                match k.via {
                    Some(Via::Ipi) => r.via_ipi += 1,
                    Some(Via::NoIpi) => r.via_no_ipi += 1,
                    _ => {}
                }
                if k.migrated > 0 {
                    r.migrated += 1;
                } else {
                    r.moved_nothing += 1;
                }
                match k.then_ran {
                    Some(true) => r.then_ran += 1,
                    Some(false) => r.then_idle += 1,
                    None => {}
                }
                let e = kickers
                    .entry((
                        k.kicker_cpu,
                        k.kicker.clone().unwrap_or_else(|| "?".into()),
                        k.cpu,
                    ))
                    .or_default();
                e.0 += 1;
                e.1 += u64::from(k.migrated == 0);
            }
            BalanceKind::Tick => {
                r.tick_balances += 1;
                r.tick_migrated += u64::from(k.migrated > 0);
            }
        }
    }
    for r in cpus.values_mut() {
        r.kicks_per_s = r.kicks as f64 / secs;
        r.tick_per_s = r.tick_balances as f64 / secs;
    }
    let mut kickers: Vec<KickerRow> = kickers
        .into_iter()
        .map(|((kicker_cpu, kicker, target), (n, nothing))| KickerRow {
            kicker_cpu,
            kicker,
            target,
            kicks: n,
            moved_nothing: nothing,
        })
        .collect();
    kickers.sort_by(|a, b| b.kicks.cmp(&a.kicks).then(a.target.cmp(&b.target)));
    kickers.truncate(opts.top());
    let has = |e: Ev| kinds.iter().flatten().any(|k| *k == e);
    let mut notes = Vec::new();
    if !has(Ev::CsdQueue) {
        notes.push(
            "kickers from the IPI sent to the target (csd:csd_queue_cpu not recorded): a \
             call-function IPI carrying several CSDs names the sender of the first"
                .into(),
        );
    }
    if !has(Ev::Migrate) {
        notes.push(
            "sched:sched_migrate_task not recorded: every balance counts as moving nothing".into(),
        );
    }
    if !has(Ev::SoftExit) {
        notes.push(
            "irq:softirq_exit not recorded: a balance's softirq is taken to last until the CPU's next task or interrupt".into(),
        );
    }
    if trace.kallsyms.is_empty() {
        notes.push(
            "the trace has no kallsyms: nohz_csd_func cannot be recognised, so no kick is seen"
                .into(),
        );
    }
    KicksReport {
        span_ns: span,
        cpus: cpus.into_values().collect(),
        kickers,
        kicks,
        notes,
    }
}

impl Tabular for KicksReport {
    fn tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            "kicks_cpus",
            "Idle-balance kicks (nohz_csd_func, then SCHED_SOFTIRQ) and tick balances per target CPU",
            &[
                "cpu",
                "kicks",
                "kicks_per_s",
                "via_ipi",
                "via_no_ipi",
                "migrated",
                "moved_nothing",
                "then_ran_task",
                "then_idle",
                "tick_balances",
                "tick_per_s",
                "tick_migrated",
            ],
            1,
        );
        for r in &self.cpus {
            t.row(vec![
                r.cpu.into(),
                r.kicks.into(),
                r.kicks_per_s.into(),
                r.via_ipi.into(),
                r.via_no_ipi.into(),
                r.migrated.into(),
                r.moved_nothing.into(),
                r.then_ran.into(),
                r.then_idle.into(),
                r.tick_balances.into(),
                r.tick_per_s.into(),
                r.tick_migrated.into(),
            ]);
        }
        let mut k = Table::new(
            "kicks_kickers",
            "Who kicks whom",
            &["kicker_cpu", "kicker", "target", "kicks", "moved_nothing"],
            3,
        );
        for r in &self.kickers {
            k.row(vec![
                r.kicker_cpu.map(Cell::from).unwrap_or(Cell::Empty),
                r.kicker.clone().into(),
                r.target.into(),
                r.kicks.into(),
                r.moved_nothing.into(),
            ]);
        }
        vec![t, k]
    }
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
