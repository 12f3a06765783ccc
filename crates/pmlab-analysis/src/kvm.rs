//! VM exits by reason, as `perf kvm stat report` gives them, from any trace with
//! `kvm:kvm_exit` events: per reason the samples, their share, and the time from each exit to
//! the next `kvm:kvm_entry` of the same vCPU thread (total, mean, min, max), overall and per
//! vCPU; and the same as metrics keyed `{name, cpu}` for the lab's store.
//!
//! Reasons are named by the event's own print format (the VMX or SVM table of x86's
//! `kvm_exit`, chosen per record by `isa`; arm64's exception class), through the print-format
//! interpreter of `pmlab dump`; ftrace text carries the printed name; otherwise the number.
//! On arm64 an exit that is not a trap is named by its exception type (`IRQ`, ...), as perf
//! does.

use std::collections::{BTreeMap, HashMap};

use pmlab_dump::symbolic::SymbolicField;
use pmlab_kernel::{Direction, Metric, Nanos};
use pmlab_trace::{FieldRef, Trace};
use serde::Serialize;

use crate::{Cell, Missing, Table, Tabular};

/// One exit reason's figures (over all vCPUs, or over one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReasonStat {
    /// The reason as the trace's print format names it (`EXTERNAL_INTERRUPT`, `hlt`,
    /// `DABT_LOW`), or its number when the trace has no name for it.
    pub reason: String,
    /// `kvm_exit` events with this reason.
    pub samples: u64,
    /// `samples` over all exits of the same scope (0 to 1).
    pub share: f64,
    /// Exits closed by a `kvm_entry` of the same thread (the ones with a time).
    pub timed: u64,
    /// Sum of exit→entry times; None when the trace has no `kvm_entry`.
    pub total: Option<Nanos>,
    /// `total` over the scope's total exit→entry time (0 to 1).
    pub time_share: Option<f64>,
    /// Shortest exit→entry time.
    pub min: Option<Nanos>,
    /// Longest exit→entry time.
    pub max: Option<Nanos>,
}

impl ReasonStat {
    /// Mean exit→entry time, µs (None without timed exits).
    pub fn mean_us(&self) -> Option<f64> {
        let total = self.total?;
        (self.timed > 0).then(|| total.0 as f64 / self.timed as f64 / 1e3)
    }
}

/// One vCPU's exits by reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VcpuExits {
    /// The vCPU's index (`vcpu_id` of `kvm_exit`, else of its thread's `kvm_entry`); None
    /// where the trace has no `vcpu_id` field (arm64's `kvm_exit`), then the thread stands
    /// for the vCPU.
    pub vcpu: Option<u32>,
    /// The vCPU thread (pid of the events).
    pub thread: i32,
    /// Another thread of the trace has the same vCPU index (threads of more than one VM).
    pub shared_index: bool,
    /// Exits of this vCPU.
    pub samples: u64,
    /// Its exits by reason, most samples first.
    pub reasons: Vec<ReasonStat>,
}

impl VcpuExits {
    /// `vcpu N`, or `thread PID` where the trace has no vCPU index (both where another
    /// thread has the same index).
    pub fn label(&self) -> String {
        match self.vcpu {
            Some(v) if self.shared_index => format!("vcpu {v} thread {}", self.thread),
            Some(v) => format!("vcpu {v}"),
            None => format!("thread {}", self.thread),
        }
    }
}

/// What [`exits`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KvmExits {
    /// Every `kvm_exit` counted.
    pub samples: u64,
    /// Whether the trace has `kvm_entry` events (exit→entry times).
    pub timed: bool,
    /// Exits with no `kvm_entry` of their thread before the thread's next exit or the
    /// trace's end: counted, not timed (`perf kvm stat` drops them).
    pub untimed: u64,
    /// Sum of all exit→entry times.
    pub total: Option<Nanos>,
    /// Exits by reason over all vCPUs, most samples first.
    pub reasons: Vec<ReasonStat>,
    /// Per vCPU, by vCPU index (then thread).
    pub vcpus: Vec<VcpuExits>,
    /// Only these threads were counted (the caller's filter), when given.
    pub pids: Option<Vec<i32>>,
    /// Caveats.
    pub notes: Vec<String>,
}

/// Running figures of one reason.
#[derive(Default, Clone)]
struct Acc {
    samples: u64,
    timed: u64,
    total: u64,
    min: u64,
    max: u64,
}

impl Acc {
    fn time(&mut self, d: u64) {
        if self.timed == 0 || d < self.min {
            self.min = d;
        }
        self.max = self.max.max(d);
        self.timed += 1;
        self.total += d;
    }
}

/// Reasons by name, accumulated, as sorted stats (most samples first, then by name).
fn stats(accs: &HashMap<String, Acc>, timed: bool) -> Vec<ReasonStat> {
    let all: u64 = accs.values().map(|a| a.samples).sum();
    let time: u64 = accs.values().map(|a| a.total).sum();
    let frac = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
    let mut v: Vec<ReasonStat> = accs
        .iter()
        .map(|(reason, a)| {
            let has = timed && a.timed > 0;
            ReasonStat {
                reason: reason.clone(),
                samples: a.samples,
                share: frac(a.samples, all),
                timed: a.timed,
                total: timed.then_some(Nanos(a.total)),
                time_share: timed.then(|| frac(a.total, time)),
                min: has.then_some(Nanos(a.min)),
                max: has.then_some(Nanos(a.max)),
            }
        })
        .collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.reason.cmp(&b.reason)));
    v
}

/// Where a reason's name comes from, per event.
enum Namer<'t> {
    /// The print format: the exception type first where the event has one (arm64's
    /// `ret`/`idx`: a trap is named by its class, anything else by its type), then the reason.
    Format {
        kind: Option<Box<(SymbolicField<'t>, FieldRef)>>,
        reason: Box<SymbolicField<'t>>,
        /// The fields the names depend on, read to cache one name per distinct tuple.
        keys: Vec<FieldRef>,
    },
    /// ftrace text: the line as printed (`vcpu 0 reason HLT rip ...`, `TRAP: HSR_EC: 0x0024
    /// (DABT_LOW), PC: ...`).
    Text(FieldRef),
    /// The reason's number (no print format, e.g. `trace-cmd report -R` text).
    Number(FieldRef),
}

/// The reason printed in a `kvm_exit` line of ftrace text.
fn reason_in_text(line: &str) -> Option<String> {
    if let Some(rest) = line
        .split(" reason ")
        .nth(1)
        .or(line.strip_prefix("reason "))
    {
        return rest.split_whitespace().next().map(str::to_string);
    }
    // arm64: `TYPE: HSR_EC: 0xNN (CLASS), PC: ...`
    let (kind, rest) = line.split_once(": HSR_EC: ")?;
    if kind.trim() != "TRAP" {
        return Some(kind.trim().to_string());
    }
    let class = rest.split_once('(')?.1.split_once(')')?.0;
    Some(class.to_string())
}

/// `vcpu N` at the start of a printed `kvm_exit`/`kvm_entry` line.
fn vcpu_in_text(line: &str) -> Option<u32> {
    let n = line.strip_prefix("vcpu ")?.split([' ', ',']).next()?;
    n.parse().ok()
}

/// The event `name` of the `kvm` system (ftrace text does not name systems: any system).
fn kvm_event(trace: &Trace, name: &str) -> Option<u16> {
    trace
        .event_id("kvm", name)
        .or_else(|| trace.event_id("ftrace", name))
}

/// Whether the trace has any `kvm_exit` event (the analysis has something to say).
pub fn has_exits(trace: &Trace) -> bool {
    kvm_event(trace, "kvm_exit").is_some_and(|id| trace.events.has_any(&[id]))
}

/// A vCPU thread's state: the exit waiting for its entry (time, reason index).
struct Thread {
    open: Option<(u64, usize)>,
    vcpu: Option<u32>,
    by_reason: HashMap<usize, Acc>,
}

/// VM exits by reason from `kvm:kvm_exit` … the next `kvm:kvm_entry` of the same thread.
/// `pids`: only these threads (the QEMU process's); None: every thread of the trace.
pub fn exits(trace: &Trace, pids: Option<&[i32]>) -> Result<KvmExits, Missing> {
    let missing = || Missing::new("kvm", &["kvm:kvm_exit", "kvm:kvm_entry"]);
    let exit = kvm_event(trace, "kvm_exit").ok_or_else(missing)?;
    let entry = kvm_event(trace, "kvm_entry");
    let field = |id: u16, names: &[&str]| names.iter().find_map(|n| trace.field(id, n));
    let reason_names = ["exit_reason", "esr_ec"];
    let namer = match field(exit, &reason_names) {
        Some(reason_ref) => {
            let reason_name = reason_names
                .iter()
                .find(|n| trace.field(exit, n).is_some())
                .expect("found above");
            match SymbolicField::new(trace, exit, reason_name) {
                Some(reason) => {
                    let kind = ["ret", "idx"].iter().find_map(|n| {
                        let named = SymbolicField::new(trace, exit, n)?;
                        Some(Box::new((named, trace.field(exit, n)?)))
                    });
                    let mut keys = vec![reason_ref];
                    keys.extend(trace.field(exit, "isa"));
                    keys.extend(kind.as_ref().map(|k| k.1));
                    Namer::Format {
                        kind,
                        reason: Box::new(reason),
                        keys,
                    }
                }
                None => Namer::Number(reason_ref),
            }
        }
        None => match field(exit, &["buf"]) {
            Some(buf) => Namer::Text(buf),
            None => return Err(missing()),
        },
    };
    let exit_vcpu = field(exit, &["vcpu_id"]);
    let entry_vcpu = entry.and_then(|e| field(e, &["vcpu_id"]));
    let entry_buf = entry.and_then(|e| field(e, &["buf"]));
    let exit_buf = match namer {
        Namer::Text(b) => Some(b),
        _ => None,
    };

    let ev = &trace.events;
    let wanted = |pid: i32| pids.is_none_or(|p| p.contains(&pid));
    let mut reasons: Vec<String> = Vec::new();
    let mut reason_index: HashMap<String, usize> = HashMap::new();
    // At most three fields (reason, isa, exception type): a fixed key, no allocation per exit.
    let mut cache: HashMap<[u64; 3], usize> = HashMap::new();
    let mut threads: BTreeMap<i32, Thread> = BTreeMap::new();
    let (mut untimed, mut samples) = (0u64, 0u64);
    let mut intern = |name: String, reasons: &mut Vec<String>| -> usize {
        *reason_index.entry(name).or_insert_with_key(|n| {
            reasons.push(n.clone());
            reasons.len() - 1
        })
    };
    let ids = [exit, entry.unwrap_or(exit)];
    let walked = if ev.has_any(&ids) { ev.len() } else { 0 };
    for i in 0..walked {
        let id = ev.id[i];
        if id != exit && Some(id) != entry {
            continue;
        }
        let pid = ev.pid[i];
        if !wanted(pid) {
            continue;
        }
        let t = threads.entry(pid).or_insert_with(|| Thread {
            open: None,
            vcpu: None,
            by_reason: HashMap::new(),
        });
        let ts = ev.ts[i];
        if id == exit {
            let r = match &namer {
                Namer::Format { kind, reason, keys } => {
                    let mut key = [0u64; 3];
                    for (k, &f) in key.iter_mut().zip(keys) {
                        *k = trace.u64_at(i, f);
                    }
                    match cache.get(&key) {
                        Some(&r) => r,
                        None => {
                            let rec = ev.record(i);
                            let name = kind
                                .as_ref()
                                .map(|k| k.0.name(rec))
                                .filter(|k| k != "TRAP")
                                .unwrap_or_else(|| reason.name(rec));
                            let r = intern(name, &mut reasons);
                            cache.insert(key, r);
                            r
                        }
                    }
                }
                Namer::Text(buf) => {
                    let line = trace.str_at(i, *buf);
                    let name = reason_in_text(line).unwrap_or_else(|| "unknown".into());
                    intern(name, &mut reasons)
                }
                Namer::Number(f) => intern(trace.u64_at(i, *f).to_string(), &mut reasons),
            };
            if let Some(v) = exit_vcpu
                .map(|f| trace.u64_at(i, f) as u32)
                .or_else(|| exit_buf.and_then(|b| vcpu_in_text(trace.str_at(i, b))))
            {
                t.vcpu = Some(v);
            }
            if t.open.is_some() {
                untimed += 1;
            }
            t.open = Some((ts, r));
            t.by_reason.entry(r).or_default().samples += 1;
            samples += 1;
        } else {
            if t.vcpu.is_none() {
                t.vcpu = entry_vcpu
                    .map(|f| trace.u64_at(i, f) as u32)
                    .or_else(|| entry_buf.and_then(|b| vcpu_in_text(trace.str_at(i, b))));
            }
            if let Some((at, r)) = t.open.take() {
                t.by_reason
                    .get_mut(&r)
                    .expect("counted at the exit")
                    .time(ts - at);
            }
        }
    }
    if samples == 0 {
        return Err(missing());
    }
    untimed += threads.values().filter(|t| t.open.is_some()).count() as u64;
    let timed = entry.is_some_and(|e| ev.has_any(&[e]));

    let mut overall: HashMap<String, Acc> = HashMap::new();
    let mut vcpus = Vec::new();
    for (&pid, t) in &threads {
        let mut mine: HashMap<String, Acc> = HashMap::new();
        for (&r, a) in &t.by_reason {
            mine.insert(reasons[r].clone(), a.clone());
            let o = overall.entry(reasons[r].clone()).or_default();
            if o.timed == 0 || (a.timed > 0 && a.min < o.min) {
                o.min = a.min;
            }
            o.max = o.max.max(a.max);
            o.samples += a.samples;
            o.timed += a.timed;
            o.total += a.total;
        }
        let n: u64 = mine.values().map(|a| a.samples).sum();
        if n == 0 {
            continue;
        }
        vcpus.push(VcpuExits {
            vcpu: t.vcpu,
            thread: pid,
            shared_index: false,
            samples: n,
            reasons: stats(&mine, timed),
        });
    }
    vcpus.sort_by_key(|v| (v.vcpu.is_none(), v.vcpu, v.thread));
    let mut per_index: HashMap<u32, usize> = HashMap::new();
    for v in &vcpus {
        *per_index.entry(v.vcpu.unwrap_or(u32::MAX)).or_default() += 1;
    }
    for v in &mut vcpus {
        v.shared_index = v.vcpu.is_some_and(|i| per_index[&i] > 1);
    }
    let reasons = stats(&overall, timed);
    let total = timed.then(|| Nanos(overall.values().map(|a| a.total).sum()));

    let mut notes = Vec::new();
    if !timed {
        notes.push(
            "the trace has no kvm:kvm_entry events: exits are counted, but have no exit→entry \
             times (record -e kvm:kvm_entry as well)"
                .to_string(),
        );
    } else if untimed > 0 {
        notes.push(format!(
            "{untimed} of {samples} exits have no kvm_entry of their thread before its next \
             exit or the trace's end: counted, not timed (perf kvm stat leaves them out)"
        ));
    }
    let lost: u64 = trace.lost.iter().flatten().sum();
    if lost > 0 {
        notes.push(format!(
            "{lost} events were lost while recording: exits and entries around the losses \
             may be missing"
        ));
    }
    if matches!(namer, Namer::Number(_)) {
        notes.push(
            "the trace has no print format naming kvm_exit's reasons: reasons are numbers"
                .to_string(),
        );
    }
    if vcpus.iter().any(|v| v.shared_index) {
        notes.push(
            "threads of more than one VM share vCPU indices: per-vCPU rows name the thread, \
             and per-vCPU metrics leave them out (filter by the VM's threads)"
                .to_string(),
        );
    }
    if vcpus.iter().any(|v| v.vcpu.is_none()) {
        notes.push("kvm_exit has no vcpu_id field in this trace: a vCPU is its thread".to_string());
    }
    Ok(KvmExits {
        samples,
        timed,
        untimed,
        total,
        reasons,
        vcpus,
        pids: pids.map(<[i32]>::to_vec),
        notes,
    })
}

impl KvmExits {
    /// The figures as metrics: per reason `kvm.exits:REASON` (count) and `kvm.exit_us:REASON`
    /// (mean exit→entry time, where timed), and `kvm.exits`, `kvm.exit_us` over all reasons;
    /// overall without a CPU, and per vCPU with the vCPU's index as the CPU (vCPUs without
    /// an index, or whose index another thread shares, are in the overall figures only).
    pub fn metrics(&self) -> Vec<Metric> {
        let mut out = Vec::new();
        let mut scope = |cpu: Option<u32>, samples: u64, reasons: &[ReasonStat]| {
            let on = |m: Metric| match cpu {
                Some(c) => m.on_cpu(c),
                None => m,
            };
            out.push(on(Metric::new(
                "kvm.exits",
                samples as f64,
                "",
                Direction::Lower,
            )));
            let timed: u64 = reasons.iter().map(|r| r.timed).sum();
            let total: Option<u64> = reasons.iter().map(|r| r.total.map(|t| t.0)).sum();
            if let Some(total) = total.filter(|_| timed > 0) {
                out.push(on(Metric::new(
                    "kvm.exit_us",
                    total as f64 / timed as f64 / 1e3,
                    "us",
                    Direction::Lower,
                )));
            }
            for r in reasons {
                out.push(on(Metric::new(
                    format!("kvm.exits:{}", r.reason),
                    r.samples as f64,
                    "",
                    Direction::Lower,
                )));
                if let Some(us) = r.mean_us() {
                    out.push(on(Metric::new(
                        format!("kvm.exit_us:{}", r.reason),
                        us,
                        "us",
                        Direction::Lower,
                    )));
                }
            }
        };
        scope(None, self.samples, &self.reasons);
        for v in &self.vcpus {
            if v.vcpu.is_some() && !v.shared_index {
                scope(v.vcpu, v.samples, &v.reasons);
            }
        }
        out
    }
}

/// The columns after a table's keys: perf kvm stat's, times in µs.
const COLUMNS: [&str; 8] = [
    "samples",
    "samples_pct",
    "time_pct",
    "total_us",
    "mean_us",
    "min_us",
    "max_us",
    "untimed",
];

fn cells(r: &ReasonStat) -> Vec<Cell> {
    let us = |n: Option<Nanos>| Cell::from(n.map(|n| n.0 as f64 / 1e3));
    vec![
        r.samples.into(),
        (r.share * 100.0).into(),
        r.time_share.map(|s| s * 100.0).into(),
        us(r.total),
        r.mean_us().into(),
        us(r.min),
        us(r.max),
        // Without kvm_entry events every exit is untimed: the note says so once.
        r.total.map(|_| r.samples - r.timed).into(),
    ]
}

impl Tabular for KvmExits {
    fn tables(&self) -> Vec<Table> {
        let cols = |keys: &[&'static str]| -> Vec<&'static str> {
            keys.iter().copied().chain(COLUMNS).collect()
        };
        let mut all = Table::new(
            "kvm_exits",
            "VM exits by reason (kvm_exit to the next kvm_entry of the same vCPU thread)",
            &cols(&["reason"]),
            1,
        );
        for r in &self.reasons {
            let mut row = vec![Cell::from(r.reason.as_str())];
            row.extend(cells(r));
            all.row(row);
        }
        let mut per = Table::new(
            "kvm_exits_vcpu",
            "VM exits by vCPU and reason (shares within each vCPU)",
            &cols(&["vcpu", "reason", "thread"]),
            2,
        );
        for v in &self.vcpus {
            for r in &v.reasons {
                let mut row = vec![
                    Cell::from(v.label()),
                    r.reason.as_str().into(),
                    i64::from(v.thread).into(),
                ];
                row.extend(cells(r));
                per.row(row);
            }
        }
        vec![all, per]
    }
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{s, Builder, Ty, V};

    #[test]
    fn text_lines_give_reasons_and_vcpus() {
        let x86 = "vcpu 3 reason EPT_VIOLATION rip 0xffffffff81000000 info1 0x0";
        assert_eq!(reason_in_text(x86).as_deref(), Some("EPT_VIOLATION"));
        assert_eq!(vcpu_in_text(x86), Some(3));
        assert_eq!(vcpu_in_text("vcpu 12, rip 0x1"), Some(12));
        let old = "reason MSR_READ rip 0xffffffff8104d8e8 info 0 0";
        assert_eq!(reason_in_text(old).as_deref(), Some("MSR_READ"));
        let arm = "TRAP: HSR_EC: 0x0024 (DABT_LOW), PC: 0xffff800010000000";
        assert_eq!(reason_in_text(arm).as_deref(), Some("DABT_LOW"));
        let irq = "IRQ: HSR_EC: 0x0000 (UNKNOWN), PC: 0xffff800010000000";
        assert_eq!(reason_in_text(irq).as_deref(), Some("IRQ"));
        assert_eq!(reason_in_text("PC: 0x1"), None);
    }

    /// Two vCPU threads, exits with and without entries, numbers as reasons (no print format).
    #[test]
    fn pairs_exits_with_the_next_entry_of_their_thread() {
        let mut b = Builder::new(2);
        let exit = b.event(
            "kvm",
            "kvm_exit",
            &[("exit_reason", Ty::U32), ("vcpu_id", Ty::U32)],
        );
        let entry = b.event("kvm", "kvm_entry", &[("vcpu_id", Ty::U32)]);
        let other = b.event("sched", "sched_waking", &[("comm", Ty::Comm)]);
        let (t0, t1) = (100, 101);
        b.push(1_000, 0, t0, exit, &[V::U(12), V::U(0)]);
        b.push(1_500, 1, t1, exit, &[V::U(30), V::U(1)]);
        b.push(3_000, 0, t0, entry, &[V::U(0)]); // HLT on vcpu 0: 2 µs
        b.push(3_100, 0, 7, other, &[s("x")]);
        b.push(4_000, 0, t0, exit, &[V::U(12), V::U(0)]);
        b.push(4_500, 1, t1, entry, &[V::U(1)]); // 30 on vcpu 1: 3 µs
        b.push(8_000, 0, t0, entry, &[V::U(0)]); // HLT: 4 µs
        b.push(9_000, 1, t1, exit, &[V::U(12), V::U(1)]); // never entered: untimed
        let t = b.build();
        let r = exits(&t, None).unwrap();
        assert_eq!((r.samples, r.untimed, r.timed), (4, 1, true));
        let hlt = &r.reasons[0];
        assert_eq!((hlt.reason.as_str(), hlt.samples, hlt.timed), ("12", 3, 2));
        assert_eq!(
            (hlt.min, hlt.max, hlt.total),
            (Some(Nanos(2_000)), Some(Nanos(4_000)), Some(Nanos(6_000)))
        );
        assert_eq!(hlt.mean_us(), Some(3.0));
        assert!((hlt.share - 0.75).abs() < 1e-12);
        assert!((hlt.time_share.unwrap() - 6.0 / 9.0).abs() < 1e-12);
        assert_eq!(r.vcpus.len(), 2);
        assert_eq!(
            (r.vcpus[1].vcpu, r.vcpus[1].thread, r.vcpus[1].samples),
            (Some(1), t1, 2)
        );
        assert!(
            r.notes.iter().any(|n| n.contains("1 of 4 exits")),
            "{:?}",
            r.notes
        );
        let m = r.metrics();
        let get = |name: &str, cpu: Option<u32>| {
            m.iter()
                .find(|x| x.name == name && x.cpu == cpu)
                .map(|x| x.value)
        };
        assert_eq!(get("kvm.exits:12", None), Some(3.0));
        assert_eq!(get("kvm.exit_us:12", None), Some(3.0));
        assert_eq!(get("kvm.exit_us:30", Some(1)), Some(3.0));
        assert_eq!(get("kvm.exits", Some(0)), Some(2.0));
        assert_eq!(get("kvm.exit_us", None), Some(3.0));
        // The pid filter: only vcpu 1's thread.
        let one = exits(&t, Some(&[t1])).unwrap();
        assert_eq!((one.samples, one.vcpus.len()), (2, 1));
        assert!(exits(&t, Some(&[7])).is_err());
        let tables = r.tables();
        assert_eq!(tables[0].find(&["12"]).unwrap()[1], Cell::Int(3));
        let mean = tables[1].col("mean_us").unwrap();
        assert_eq!(
            tables[1].find(&["vcpu 1", "30"]).unwrap()[mean],
            Cell::Float(3.0)
        );
    }

    #[test]
    fn exit_only_traces_count_and_say_why_times_are_missing() {
        let mut b = Builder::new(1);
        let exit = b.event("kvm", "kvm_exit", &[("exit_reason", Ty::U32)]);
        b.push(1_000, 0, 5, exit, &[V::U(1)]);
        b.push(2_000, 0, 5, exit, &[V::U(1)]);
        let r = exits(&b.build(), None).unwrap();
        assert_eq!((r.samples, r.timed, r.reasons[0].samples), (2, false, 2));
        assert_eq!((r.reasons[0].total, r.reasons[0].mean_us()), (None, None));
        assert!(r.notes.iter().any(|n| n.contains("no kvm:kvm_entry")));
        assert!(r.notes.iter().any(|n| n.contains("a vCPU is its thread")));
        assert!(!r
            .metrics()
            .iter()
            .any(|m| m.name.starts_with("kvm.exit_us")));
        let t = &r.tables()[0];
        assert_eq!(t.rows[0][t.col("untimed").unwrap()], Cell::Empty);
        let none = Builder::new(1).build();
        let m = exits(&none, None).unwrap_err();
        assert!(m.to_string().contains("kvm:kvm_exit"), "{m}");
    }

    /// arm64: a trap is named by its exception class, anything else by its type (`IRQ`), both
    /// from the event's print format, as `perf kvm stat` on arm64 keys them.
    #[test]
    fn arm64_reasons_come_from_the_print_format() {
        let mut b = Builder::new(1);
        let exit = b.event(
            "kvm",
            "kvm_exit",
            &[("ret", Ty::I32), ("esr_ec", Ty::U32), ("vcpu_pc", Ty::U64)],
        );
        let entry = b.event("kvm", "kvm_entry", &[("vcpu_pc", Ty::U64)]);
        let pc = V::U(0xffff_8000_1000_0000);
        for (k, (ret, ec)) in [(1, 0x24), (0, 0), (1, 0x01), (1, 0x24), (1, 0x3f)]
            .into_iter()
            .enumerate()
        {
            let at = 10_000 * k as u64;
            b.push(at, 0, 9, exit, &[V::I(ret), V::U(ec), pc.clone()]);
            b.push(
                at + 1_000 * (k as u64 + 1),
                0,
                9,
                entry,
                std::slice::from_ref(&pc),
            );
        }
        let mut t = b.build();
        t.formats.get_mut(&exit).unwrap().print_fmt = concat!(
            r#""%s: HSR_EC: 0x%04x (%s), PC: 0x%016lx", "#,
            r#"__print_symbolic(REC->ret, { 0, "IRQ" }, { 1, "TRAP" }, { 2, "HYP_GONE" }), "#,
            r#"REC->esr_ec, __print_symbolic(REC->esr_ec, { 0x01, "WFx" }, { 0x24, "DABT_LOW" }), "#,
            r#"REC->vcpu_pc"#
        )
        .into();
        let r = exits(&t, None).unwrap();
        let got: Vec<(&str, u64)> = r
            .reasons
            .iter()
            .map(|x| (x.reason.as_str(), x.samples))
            .collect();
        assert_eq!(got, [("DABT_LOW", 2), ("0x3f", 1), ("IRQ", 1), ("WFx", 1)]);
        let dabt = &r.reasons[0];
        assert_eq!(
            (dabt.min, dabt.max),
            (Some(Nanos(1_000)), Some(Nanos(4_000)))
        );
        assert_eq!(
            (r.vcpus[0].vcpu, r.vcpus[0].label()),
            (None, "thread 9".into())
        );
    }
}
