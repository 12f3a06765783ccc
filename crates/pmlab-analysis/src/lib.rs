//! pmlab-analysis: analyses over decoded trace columns and counter deltas — idle residency,
//! wakeup causes and needless wakeups, idle-balance kicks, hotplug steps, scheduling latency, frequency residency, energy, haltpoll, cross-checks.
//! Analyses never touch the machine: they read a `pmlab_trace::Trace` (and optional sidecars).
#![forbid(unsafe_code)]

pub mod all;
pub mod baseline;
pub mod crosscheck;
pub mod energy;
mod energy_lisa;
pub mod export;
pub mod file;
pub mod freq;
pub mod haltpoll;
pub mod hotplug;
pub mod idle;
pub mod kicks;
pub mod kvm;
pub mod missing;
pub mod parquet;
pub mod replay;
pub mod sched;
pub mod stats;
pub mod table;
#[cfg(test)]
mod tests_synth;
#[cfg(test)]
mod testutil;
pub mod wakeups;

pub use missing::Missing;
pub use table::{Cell, Table};

use std::collections::{BTreeMap, BTreeSet};

/// One idle state as the analyses need it (name and target residency), by cpuidle index.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StateInfo {
    /// The state's name (`POLL`, `C1`).
    pub name: String,
    /// Target residency, ns (for governor misses when the trace has no `cpu_idle_miss`).
    pub target_residency_ns: Option<u64>,
}

/// Options shared by all analyses.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only these CPUs (None: every CPU of the trace).
    pub cpus: Option<BTreeSet<u32>>,
    /// Idle states by index (names, target residencies); None when unknown.
    pub states: Option<BTreeMap<u32, StateInfo>>,
    /// How many rows the "top" tables keep.
    pub top: usize,
}

impl Options {
    /// Whether the options select `cpu`.
    pub fn wants(&self, cpu: u32) -> bool {
        match &self.cpus {
            None => true,
            Some(s) => s.contains(&cpu),
        }
    }
    /// Rows the "top" tables keep (10 when unset).
    pub fn top(&self) -> usize {
        if self.top == 0 {
            10
        } else {
            self.top
        }
    }
    /// The display name of idle state `state` (`u32::MAX` is the idle task fallback).
    pub fn state_name(&self, state: u32) -> String {
        if state == idle::IDLE_TASK {
            return "idle-task".into();
        }
        if state == idle::UNKNOWN_STATE {
            return "unknown".into();
        }
        self.states
            .as_ref()
            .and_then(|s| s.get(&state))
            .map(|s| s.name.clone())
            .unwrap_or_else(|| format!("state{state}"))
    }
}

/// Anything with tables and notes for people (and for CSV export and `--baseline`).
pub trait Tabular {
    /// Its tables (data for people, CSV and `--baseline`).
    fn tables(&self) -> Vec<Table>;
    /// Caveats: fallbacks used, quirks detected, what could not be computed.
    fn notes(&self) -> Vec<String>;
}
