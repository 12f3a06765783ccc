//! Cross-check: trace-derived idle time against counter snapshots taken around the recording.
//!
//! Sidecar format: `FILE.counters.json` next to trace `FILE`, a JSON object
//! `{"before": Snapshot, "after": Snapshot}` where `Snapshot` is
//! `pmlab_kernel::counters::Snapshot` as serde serializes it. Compared per CPU: trace idle
//! time vs the sum of cpuidle `time` deltas (when the CPU has cpuidle states) and vs the
//! `/proc/stat` idle+iowait delta (jiffies, USER_HZ=100 assumed: 10 ms resolution).

use crate::idle::IdleReport;
use crate::table::{Cell, Table};
use crate::Tabular;
use pmlab_kernel::counters::Snapshot;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Counter snapshots taken right before and after a recording (`FILE.counters.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sidecar {
    /// Taken before tracing started.
    pub before: Snapshot,
    /// Taken after tracing stopped.
    pub after: Snapshot,
}

/// The sidecar's path for trace `trace`.
pub fn sidecar_path(trace: &Path) -> PathBuf {
    let mut s = trace.as_os_str().to_os_string();
    s.push(".counters.json");
    PathBuf::from(s)
}

/// A sidecar that is there but cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    /// The sidecar could not be read (the path; the OS error is the source).
    #[error("{0}")]
    Read(PathBuf, #[source] std::io::Error),
    /// The sidecar is not valid JSON of two snapshots (the path; serde's error is the source).
    #[error("{0}")]
    Malformed(PathBuf, #[source] serde_json::Error),
}

/// Read the sidecar of `trace`: None when absent, Err when unreadable or malformed.
pub fn load(trace: &Path) -> Option<Result<Sidecar, SidecarError>> {
    let p = sidecar_path(trace);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(Err(SidecarError::Read(p, e))),
    };
    Some(serde_json::from_str(&text).map_err(|e| SidecarError::Malformed(p, e)))
}

/// One CPU's idle time by the trace and by the counters.
#[derive(Debug, Clone, Serialize)]
pub struct CpuCheck {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// Idle time the trace shows, ns.
    pub trace_idle_ns: u64,
    /// Idle periods the trace shows.
    pub trace_entries: u64,
    /// Sum of cpuidle per-state `time` deltas (None: no cpuidle states for this CPU).
    pub cpuidle_ns: Option<u64>,
    /// Sum of cpuidle per-state `usage` deltas: idle entries by the counters.
    pub cpuidle_usage: Option<u64>,
    /// /proc/stat idle+iowait delta.
    pub stat_idle_ns: Option<u64>,
    /// trace − cpuidle, as a share of the cpuidle value.
    pub gap_cpuidle: Option<f64>,
    /// trace − /proc/stat, as a share of the /proc/stat value.
    pub gap_stat: Option<f64>,
}

/// The cross-check's result.
#[derive(Debug, Clone, Serialize)]
pub struct CrossReport {
    /// Time between the two snapshots, ns.
    pub window_ns: u64,
    /// Per CPU, by CPU.
    pub cpus: Vec<CpuCheck>,
    /// Caveats (jiffy resolution, CPUs missing from a side...).
    pub notes: Vec<String>,
}

const JIFFY_NS: u64 = 10_000_000;

/// Compare the idle analysis's per-CPU idle time with the sidecar's counter deltas.
pub fn check(idle: &IdleReport, s: &Sidecar) -> CrossReport {
    let mut notes = Vec::new();
    let mut cpus = Vec::new();
    for c in &idle.cpus {
        let states = |snap: &Snapshot| snap.idle.get(&c.cpu).cloned();
        let (ci, usage) = match (states(&s.before), states(&s.after)) {
            (Some(b), Some(a)) if !a.is_empty() => {
                let sum =
                    |v: &[pmlab_kernel::counters::IdleState],
                     f: fn(&pmlab_kernel::counters::IdleState) -> u64| {
                        v.iter().map(f).sum::<u64>()
                    };
                let t = sum(&a, |x| x.time_us).saturating_sub(sum(&b, |x| x.time_us));
                let u = sum(&a, |x| x.usage).saturating_sub(sum(&b, |x| x.usage));
                (Some(t * 1000), Some(u))
            }
            _ => (None, None),
        };
        let stat = match (
            s.before.cpu_times.get(&c.cpu),
            s.after.cpu_times.get(&c.cpu),
        ) {
            (Some(b), Some(a)) => {
                Some(((a.idle + a.iowait).saturating_sub(b.idle + b.iowait)) * JIFFY_NS)
            }
            _ => None,
        };
        let gap = |v: Option<u64>| {
            v.filter(|v| *v > 0)
                .map(|v| (c.idle_ns as f64 - v as f64) / v as f64)
        };
        cpus.push(CpuCheck {
            cpu: c.cpu,
            trace_idle_ns: c.idle_ns,
            trace_entries: c.entries,
            cpuidle_ns: ci,
            cpuidle_usage: usage,
            stat_idle_ns: stat,
            gap_cpuidle: gap(ci),
            gap_stat: gap(stat),
        });
    }
    if cpus.iter().all(|c| c.cpuidle_ns.is_none()) {
        notes.push("no cpuidle per-state counters (no cpuidle driver?): compared with /proc/stat idle only".into());
    }
    notes.push("counters cover the snapshot window, the trace its first..last event: a small positive counter surplus is expected".into());
    for c in &cpus {
        if let Some(g) = c.gap_cpuidle.or(c.gap_stat) {
            if g < -0.2 {
                notes.push(format!(
                    "CPU {}: the trace shows {:.0}% less idle time than the counters: the trace is incomplete for this CPU",
                    c.cpu,
                    -g * 100.0
                ));
            }
        }
    }
    CrossReport {
        window_ns: s.after.at.0.saturating_sub(s.before.at.0),
        cpus,
        notes,
    }
}

impl Tabular for CrossReport {
    fn tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            "crosscheck",
            "Trace idle time vs counters",
            &[
                "cpu",
                "trace_ms",
                "cpuidle_ms",
                "gap_cpuidle_pct",
                "stat_ms",
                "gap_stat_pct",
                "trace_entries",
                "cpuidle_usage",
            ],
            1,
        );
        let ms = |v: Option<u64>| v.map_or(Cell::Empty, |v| Cell::Float(v as f64 / 1e6));
        let pct = |v: Option<f64>| v.map_or(Cell::Empty, |v| Cell::Float(v * 100.0));
        for c in &self.cpus {
            t.row(vec![
                c.cpu.into(),
                ms(Some(c.trace_idle_ns)),
                ms(c.cpuidle_ns),
                pct(c.gap_cpuidle),
                ms(c.stat_idle_ns),
                pct(c.gap_stat),
                c.trace_entries.into(),
                c.cpuidle_usage.into(),
            ]);
        }
        vec![t]
    }
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
