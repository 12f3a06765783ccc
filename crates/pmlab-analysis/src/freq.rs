//! Frequency residency: time per frequency per CPU from `power:cpu_frequency`, and the
//! time-weighted average frequency. Time before a CPU's first event is "unknown".

use crate::table::Table;
use crate::{Missing, Options, Tabular};
use pmlab_trace::Trace;
use serde::Serialize;
use std::collections::BTreeMap;

/// Per CPU: (timestamp, kHz) changes in time order.
pub type Timeline = BTreeMap<u32, Vec<(u64, u64)>>;

/// Frequency changes per CPU; Err when the trace has no `cpu_frequency` event.
pub fn timeline(trace: &Trace, opts: &Options) -> Result<Timeline, Missing> {
    let missing = || Missing::new("freq", &["power:cpu_frequency"]);
    let id = trace
        .event_id("power", "cpu_frequency")
        .ok_or_else(missing)?;
    let (Some(fs), Some(fc)) = (trace.field(id, "state"), trace.field(id, "cpu_id")) else {
        return Err(missing());
    };
    let mut t = Timeline::new();
    let ev = &trace.events;
    ev.for_each_of(id, |i| {
        let cpu = trace.u64_at(i, fc) as u32;
        if opts.wants(cpu) {
            t.entry(cpu)
                .or_default()
                .push((ev.ts[i], trace.u64_at(i, fs)));
        }
    });
    if t.is_empty() {
        return Err(missing());
    }
    Ok(t)
}

/// Time at one frequency.
#[derive(Debug, Clone, Serialize)]
pub struct FreqRow {
    /// Frequency, kHz.
    pub khz: u64,
    /// Time at it, ns.
    pub time_ns: u64,
    /// Of the CPU's known time (after its first event).
    pub share: f64,
}

/// One CPU's frequency residency.
#[derive(Debug, Clone, Serialize)]
pub struct CpuFreq {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// `cpu_frequency` events on it.
    pub changes: u64,
    /// Time before the first event, when the frequency is unknown.
    pub unknown_ns: u64,
    /// Time-weighted mean frequency over its known time, kHz.
    pub avg_khz: f64,
    /// Time per frequency.
    pub residency: Vec<FreqRow>,
}

/// The frequency analysis's result.
#[derive(Debug, Clone, Serialize)]
pub struct FreqReport {
    /// The trace's span, ns.
    pub span_ns: u64,
    /// Per CPU, by CPU.
    pub cpus: Vec<CpuFreq>,
    /// Caveats.
    pub notes: Vec<String>,
}

/// The frequency analysis.
pub fn analyze(trace: &Trace, opts: &Options) -> Result<FreqReport, Missing> {
    let tl = timeline(trace, opts)?;
    let t0 = trace.events.ts.first().copied().unwrap_or(0);
    let t1 = trace.events.ts.last().copied().unwrap_or(0);
    let mut cpus = Vec::new();
    for (&cpu, ch) in &tl {
        let mut res: BTreeMap<u64, u64> = BTreeMap::new();
        for (k, &(ts, khz)) in ch.iter().enumerate() {
            let end = ch.get(k + 1).map_or(t1, |n| n.0);
            *res.entry(khz).or_default() += end - ts;
        }
        let known: u64 = res.values().sum();
        let avg = if known > 0 {
            res.iter().map(|(k, t)| *k as f64 * *t as f64).sum::<f64>() / known as f64
        } else {
            ch.last().map_or(0.0, |c| c.1 as f64)
        };
        cpus.push(CpuFreq {
            cpu,
            changes: ch.len() as u64,
            unknown_ns: ch[0].0 - t0,
            avg_khz: avg,
            residency: res
                .into_iter()
                .map(|(khz, t)| FreqRow {
                    khz,
                    time_ns: t,
                    share: t as f64 / known.max(1) as f64,
                })
                .collect(),
        });
    }
    let mut notes = Vec::new();
    if cpus.iter().any(|c| c.unknown_ns > 0) {
        notes.push("time before a CPU's first cpu_frequency event is unknown and left out of its residency".into());
    }
    Ok(FreqReport {
        span_ns: t1 - t0,
        cpus,
        notes,
    })
}

impl Tabular for FreqReport {
    fn tables(&self) -> Vec<Table> {
        let mut a = Table::new(
            "freq_cpus",
            "Average frequency per CPU",
            &["cpu", "avg_mhz", "changes", "unknown_ms"],
            1,
        );
        let mut r = Table::new(
            "freq_residency",
            "Frequency residency per CPU",
            &["cpu", "mhz", "time_ms", "share_pct"],
            2,
        );
        for c in &self.cpus {
            a.row(vec![
                c.cpu.into(),
                (c.avg_khz / 1e3).into(),
                c.changes.into(),
                (c.unknown_ns as f64 / 1e6).into(),
            ]);
            for f in &c.residency {
                r.row(vec![
                    c.cpu.into(),
                    (f.khz as f64 / 1e3).into(),
                    (f.time_ns as f64 / 1e6).into(),
                    (f.share * 100.0).into(),
                ]);
            }
        }
        vec![a, r]
    }
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
