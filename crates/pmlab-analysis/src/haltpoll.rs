//! Haltpoll: the `guest_halt_poll_ns` grow/shrink timeline (`power:guest_halt_poll_ns`) and
//! the poll limit's distribution (time at each limit) per CPU.

use crate::table::Table;
use crate::{Missing, Options, Tabular};
use pmlab_trace::Trace;
use serde::Serialize;
use std::collections::BTreeMap;

/// One `guest_halt_poll_ns` change the haltpoll governor logged.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// Seconds since the trace's first event.
    pub at_s: f64,
    /// The CPU whose poll limit changed.
    pub cpu: u32,
    /// Grown (else shrunk).
    pub grow: bool,
    /// The limit before, ns.
    pub old_ns: u64,
    /// The limit after, ns.
    pub new_ns: u64,
}

/// One CPU's poll-limit changes.
#[derive(Debug, Clone, Serialize)]
pub struct CpuLimits {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// Times the limit grew.
    pub grows: u64,
    /// Times it shrank.
    pub shrinks: u64,
    /// Poll limit (ns) → time at that limit (ns), from the first event's `old` value onward.
    pub time_at: BTreeMap<u64, u64>,
}

/// The haltpoll analysis's result.
#[derive(Debug, Clone, Serialize)]
pub struct HaltpollReport {
    /// Every change, in time order.
    pub timeline: Vec<Change>,
    /// Per CPU, by CPU.
    pub cpus: Vec<CpuLimits>,
    /// Caveats.
    pub notes: Vec<String>,
}

/// The poll-limit timeline of `trace`; `Missing` without `power:guest_halt_poll_ns` events.
pub fn analyze(trace: &Trace, opts: &Options) -> Result<HaltpollReport, Missing> {
    let missing = || Missing::new("haltpoll", &["power:guest_halt_poll_ns"]);
    let id = trace
        .event_id("power", "guest_halt_poll_ns")
        .ok_or_else(missing)?;
    let f = |n| trace.field(id, n).ok_or_else(missing);
    let (fg, fnew, fold) = (f("grow")?, f("new")?, f("old")?);
    let ev = &trace.events;
    let t0 = ev.ts.first().copied().unwrap_or(0);
    let t1 = ev.ts.last().copied().unwrap_or(0);
    let mut timeline = Vec::new();
    let mut cur: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut cpus: BTreeMap<u32, CpuLimits> = BTreeMap::new();
    ev.for_each_of(id, |i| {
        if !opts.wants(u32::from(ev.cpu[i])) {
            return;
        }
        let (cpu, ts) = (u32::from(ev.cpu[i]), ev.ts[i]);
        let (grow, new, old) = (
            trace.u64_at(i, fg) != 0,
            trace.u64_at(i, fnew),
            trace.u64_at(i, fold),
        );
        let c = cpus.entry(cpu).or_insert_with(|| CpuLimits {
            cpu,
            grows: 0,
            shrinks: 0,
            time_at: BTreeMap::new(),
        });
        let (since, val) = cur.get(&cpu).copied().unwrap_or((t0, old));
        *c.time_at.entry(val).or_default() += ts - since;
        cur.insert(cpu, (ts, new));
        if grow {
            c.grows += 1;
        } else {
            c.shrinks += 1;
        }
        timeline.push(Change {
            at_s: (ts - t0) as f64 / 1e9,
            cpu,
            grow,
            old_ns: old,
            new_ns: new,
        });
    });
    for (cpu, (since, val)) in cur {
        if let Some(c) = cpus.get_mut(&cpu) {
            *c.time_at.entry(val).or_default() += t1 - since;
        }
    }
    let mut notes = Vec::new();
    if timeline.is_empty() {
        notes.push(
            "no guest_halt_poll_ns changes: the event fires only while the haltpoll cpuidle driver is active \
             (see /sys/devices/system/cpu/cpuidle/current_driver)"
                .into(),
        );
    }
    Ok(HaltpollReport {
        timeline,
        cpus: cpus.into_values().collect(),
        notes,
    })
}

impl Tabular for HaltpollReport {
    fn tables(&self) -> Vec<Table> {
        let mut d = Table::new(
            "haltpoll_limits",
            "Haltpoll poll limit distribution (time at each limit)",
            &[
                "cpu",
                "limit_us",
                "time_ms",
                "share_pct",
                "grows",
                "shrinks",
            ],
            2,
        );
        for c in &self.cpus {
            let total: u64 = c.time_at.values().sum::<u64>().max(1);
            for (lim, t) in &c.time_at {
                d.row(vec![
                    c.cpu.into(),
                    (*lim as f64 / 1e3).into(),
                    (*t as f64 / 1e6).into(),
                    (*t as f64 * 100.0 / total as f64).into(),
                    c.grows.into(),
                    c.shrinks.into(),
                ]);
            }
        }
        let mut t = Table::new(
            "haltpoll_timeline",
            "Haltpoll grow/shrink timeline",
            &["at_s", "cpu", "change", "old_us", "new_us"],
            2,
        );
        for c in &self.timeline {
            t.row(vec![
                c.at_s.into(),
                c.cpu.into(),
                (if c.grow { "grow" } else { "shrink" }).into(),
                (c.old_ns as f64 / 1e3).into(),
                (c.new_ns as f64 / 1e3).into(),
            ]);
        }
        vec![d, t]
    }
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
