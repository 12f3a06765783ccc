//! Wakeups: idle exits per second per CPU, each attributed to its cause by DESIGN.md §7 — the
//! first wake source on the CPU after its idle period began (timer by hrtimer function, IPI by
//! kind and sender callsite, device IRQ by name, polling wakeup without IPI) — and the tasks
//! whose wakeups ended idle periods ("who woke my idle CPUs").

use crate::idle::{self, Periods, Source};
use crate::table::{Cell, Table};
use crate::{Missing, Options, Tabular};
use pmlab_trace::{FieldRef, Trace};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// What ended one idle period.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Cause {
    /// "timer", "ipi", "irq", "polling" or "unknown".
    pub kind: String,
    /// Timer function, IPI kind and purpose, IRQ name.
    pub detail: String,
}

impl Cause {
    fn new(kind: &str, detail: impl Into<String>) -> Cause {
        Cause {
            kind: kind.into(),
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

/// A cause and its originator (IPI sender task, polling waker).
type Attributed = (Cause, Option<String>);

struct Sent {
    ts: u64,
    pid: i32,
    callsite: String,
    callback: String,
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
}

#[derive(Debug, Clone, Serialize)]
pub struct CauseRow {
    pub cpu: u32,
    pub cause: Cause,
    pub exits: u64,
    pub per_s: f64,
    /// Of the CPU's idle exits.
    pub share: f64,
    /// The most frequent originator (IPI sender task, polling waker), with its count.
    pub origin: Option<(String, u64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CpuRow {
    pub cpu: u32,
    pub source: Source,
    pub exits: u64,
    pub per_s: f64,
    pub by_kind: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WakerRow {
    pub waker: String,
    pub wakee: String,
    pub cpu: u32,
    pub count: u64,
    pub per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WakeupsReport {
    pub span_ns: u64,
    pub cpus: Vec<CpuRow>,
    /// Sorted by CPU, then exits (descending); CPU `u32::MAX` rows are all CPUs together.
    pub causes: Vec<CauseRow>,
    pub wakers: Vec<WakerRow>,
    pub notes: Vec<String>,
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
    let mut kinds: HashMap<u16, Ev> = HashMap::new();
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
        kinds.insert(f.id, k);
    }
    let sources = [Ev::LocalTimer, Ev::Hrtimer, Ev::Irq, Ev::ArmIpi, Ev::NoIpi];
    if !kinds
        .values()
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

    let cpus: Vec<u32> = p.by_cpu.keys().copied().collect();
    let ncpu = cpus.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let periods: Vec<&[idle::Period]> = (0..ncpu as u32)
        .map(|c| p.by_cpu.get(&c).map(|v| v.as_slice()).unwrap_or(&[]))
        .collect();
    let mut st: Vec<CpuState> = (0..ncpu).map(|_| CpuState::default()).collect();
    let mut causes: Vec<Vec<Option<Attributed>>> =
        periods.iter().map(|ps| vec![None; ps.len()]).collect();
    let mut wakers: HashMap<(String, String, u32), u64> = HashMap::new();
    let mut sent: HashMap<u32, Sent> = HashMap::new();
    let sym = |i: usize, f: Option<FieldRef>| -> String {
        f.map(|f| trace.u64_at(i, f))
            .map(|a| {
                if a == 0 {
                    String::new()
                } else {
                    trace.sym(a).unwrap_or("?").to_string()
                }
            })
            .unwrap_or_default()
    };
    let ev = &trace.events;
    // Bring cpu `c`'s candidate up to `ts`: the last period that began at or before it.
    let advance = |s: &mut CpuState, ps: &[idle::Period], ts: u64| {
        while s.next < ps.len() && ps[s.next].start <= ts {
            s.cand = Some(s.next);
            s.refine = false;
            s.waker = false;
            s.next += 1;
        }
    };
    let mut seen_sources = 0u64;
    for i in 0..ev.len() {
        let Some(&k) = kinds.get(&ev.id[i]) else {
            continue;
        };
        let ts = ev.ts[i];
        if sources.contains(&k) || matches!(k, Ev::Vector(_)) {
            seen_sources += 1;
        }
        let target = match k {
            Ev::NoIpi => f_noipi_cpu.map(|f| trace.i64_at(i, f) as u32),
            Ev::Waking => f_wk_target.map(|f| trace.i64_at(i, f) as u32),
            Ev::SendCpu => {
                let (Some(fc), true) = (f_send_cpu, true) else {
                    continue;
                };
                let t = trace.u64_at(i, fc) as u32;
                let s = Sent {
                    ts,
                    pid: ev.pid[i],
                    callsite: sym(i, f_send_site),
                    callback: sym(i, f_send_cb),
                };
                sent.insert(t, s);
                continue;
            }
            Ev::SendMask => {
                let Some(fm) = f_mask else { continue };
                let bytes = trace.bytes_at(i, fm);
                let (site, cb) = (sym(i, f_mask_site), sym(i, f_mask_cb));
                for (bi, b) in bytes.iter().enumerate() {
                    for bit in 0..8 {
                        if b & (1 << bit) != 0 {
                            let t = (bi * 8 + bit) as u32;
                            let s = Sent {
                                ts,
                                pid: ev.pid[i],
                                callsite: site.clone(),
                                callback: cb.clone(),
                            };
                            sent.insert(t, s);
                        }
                    }
                }
                continue;
            }
            _ => Some(ev.cpu[i]),
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
            if !s.waker {
                s.waker = true;
                let wakee = match (f_wk_comm, f_wk_pid) {
                    (Some(fc), Some(fp)) => {
                        format!("{}:{}", trace.str_at(i, fc), trace.i64_at(i, fp))
                    }
                    _ => "?".into(),
                };
                *wakers
                    .entry((task(trace, ev.pid[i]), wakee, c))
                    .or_default() += 1;
            }
            continue;
        }
        if k == Ev::IrqExit {
            s.refine = false;
            continue;
        }
        let slot = &mut causes[c as usize][pi];
        if slot.is_some() {
            if s.refine && k == Ev::Hrtimer {
                *slot = Some((Cause::new("timer", sym(i, f_hr_fn)), None));
                s.refine = false;
            }
            continue;
        }
        let cause = match k {
            Ev::LocalTimer => {
                s.refine = true;
                (Cause::new("timer", "local timer"), None)
            }
            Ev::Hrtimer => (Cause::new("timer", sym(i, f_hr_fn)), None),
            Ev::Irq => {
                let name = f_irq_name
                    .map(|f| trace.str_at(i, f))
                    .unwrap_or("?")
                    .to_string();
                s.refine = name.contains("timer");
                (Cause::new("irq", name), None)
            }
            Ev::ArmIpi => {
                let r = f_arm_reason.map(|f| trace.str_at(i, f)).unwrap_or("?");
                (
                    Cause::new("ipi", r.trim_end_matches(" interrupts").to_string()),
                    None,
                )
            }
            Ev::Vector(v) => {
                let name = &vec_names[v];
                if !IPI_VECTORS.contains(&name.as_str()) {
                    (Cause::new("irq", format!("vector {name}")), None)
                } else {
                    let snd = sent
                        .remove(&c)
                        .filter(|x| ts >= x.ts && ts - x.ts < 100_000_000);
                    match snd {
                        Some(x) => {
                            let purpose = ipi_purpose(&x.callsite, &x.callback);
                            let detail = match purpose {
                                Some(pu) => format!("{name}: {pu} ({})", x.callsite),
                                None => format!("{name} from {}", x.callsite),
                            };
                            (Cause::new("ipi", detail), Some(task(trace, x.pid)))
                        }
                        None => (Cause::new("ipi", name.clone()), None),
                    }
                }
            }
            Ev::NoIpi => (
                Cause::new("polling", "wakeup without IPI"),
                Some(task(trace, ev.pid[i])),
            ),
            _ => continue,
        };
        *slot = Some(cause);
    }

    if seen_sources == 0 {
        return Err(missing_sources());
    }
    // Aggregate.
    let secs = (p.span() as f64 / 1e9).max(1e-9);
    let mut rows: BTreeMap<(u32, Cause), (u64, HashMap<String, u64>)> = BTreeMap::new();
    let mut cpu_rows = Vec::new();
    for &c in &cpus {
        let ps = periods[c as usize];
        let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
        let mut exits = 0;
        for (q, cause) in ps.iter().zip(&causes[c as usize]) {
            if q.open_end {
                continue;
            }
            exits += 1;
            let (cause, origin) = cause.clone().unwrap_or((Cause::new("unknown", ""), None));
            *by_kind.entry(cause.kind.clone()).or_default() += 1;
            for key in [c, u32::MAX] {
                let e = rows.entry((key, cause.clone())).or_default();
                e.0 += 1;
                if let Some(o) = &origin {
                    *e.1.entry(o.clone()).or_default() += 1;
                }
            }
        }
        cpu_rows.push(CpuRow {
            cpu: c,
            source: p.source.get(&c).copied().unwrap_or(Source::None),
            exits,
            per_s: exits as f64 / secs,
            by_kind,
        });
    }
    let total: u64 = cpu_rows.iter().map(|r| r.exits).sum();
    let mut causes_out: Vec<CauseRow> = rows
        .into_iter()
        .map(|((cpu, cause), (n, origins))| {
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
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
            CauseRow {
                cpu,
                cause,
                exits: n,
                per_s: n as f64 / secs,
                share: n as f64 / denom.max(1) as f64,
                origin,
            }
        })
        .collect();
    causes_out.sort_by(|a, b| {
        a.cpu
            .cmp(&b.cpu)
            .then(b.exits.cmp(&a.exits))
            .then(a.cause.cmp(&b.cause))
    });
    let mut wk: Vec<WakerRow> = wakers
        .into_iter()
        .map(|((waker, wakee, cpu), count)| WakerRow {
            waker,
            wakee,
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
    });
    wk.truncate(opts.top());
    let mut notes = p.notes.clone();
    if p.source.values().any(|s| *s == Source::IdleTask) {
        notes.push(
            "wakeups on idle-task CPUs count idle-task periods (switches to and from pid 0), not every exit from the idle instruction".into(),
        );
    }
    if !kinds
        .values()
        .any(|k| matches!(k, Ev::SendCpu | Ev::SendMask))
    {
        notes.push("IPI senders unknown: record ipi:ipi_send_cpu and ipi:ipi_send_cpumask (`pmlab record -e ipi`)".into());
    }
    Ok(WakeupsReport {
        span_ns: p.span(),
        cpus: cpu_rows,
        causes: causes_out,
        wakers: wk,
        notes,
    })
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

impl Tabular for WakeupsReport {
    fn tables(&self) -> Vec<Table> {
        let kinds = ["timer", "ipi", "irq", "polling", "unknown"];
        let mut cols = vec!["cpu", "source", "idle_exits", "exits_per_s"];
        cols.extend(kinds);
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
            t.row(row);
        }
        let mut c = Table::new(
            "wakeups_causes",
            "Who woke my idle CPUs",
            &[
                "cpu",
                "cause",
                "detail",
                "exits",
                "per_s",
                "share_pct",
                "top_origin",
            ],
            3,
        );
        for r in &self.causes {
            c.row(vec![
                cpu_label(r.cpu),
                r.cause.kind.clone().into(),
                r.cause.detail.clone().into(),
                r.exits.into(),
                r.per_s.into(),
                (r.share * 100.0).into(),
                r.origin.as_ref().map(|(o, n)| format!("{o} ({n})")).into(),
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
        vec![t, c, w]
    }
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
