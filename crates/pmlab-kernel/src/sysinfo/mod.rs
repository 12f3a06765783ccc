//! `SystemInfo`: a read-only picture of the machine for `pmlab info` and the study —
//! one reader per file here, each under a [`Root`], none of them writing or mounting.
//! Unreadable items are kept as [`Item::Unavailable`] ("needs root", "absent", ...).

pub mod caps;
pub mod cpu;
pub mod cpufreq;
pub mod cpuidle;
pub mod emul;
pub mod haltpoll;
pub mod hotplug_states;
pub mod item;
pub mod kernel;
pub mod mounts;
pub mod power;
pub mod powercap;
pub mod sched_features;
pub mod topology;
pub mod tracefs;
pub mod virt;

pub mod fake;
#[cfg(test)]
mod tests;

pub use caps::{Capabilities, Capability};
pub use item::{Item, Status, SysinfoError, Unavailable};

use crate::Root;
use serde::Serialize;

/// What `pmlab info` shows: the machine's power-management picture, read without writing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemInfo {
    /// The root read (`/` on the machine).
    pub root: String,
    /// pmlab runs as root (effective UID 0).
    pub is_root: bool,
    /// Release, version, command line.
    pub kernel: kernel::Kernel,
    /// CPU model and CPU lists.
    pub cpus: cpu::Cpus,
    /// Virtualisation: hypervisor, clocksource, KVM CPUID.
    pub virt: virt::Virt,
    /// Per-CPU package/die/module/core/node/core type and siblings.
    pub topology: Item<Vec<topology::CpuTopology>>,
    /// Counts of packages, dies, modules, cores, threads per core, nodes; where each level
    /// came from; hybrid core types, NUMA nodes and caches.
    pub layout: topology::Layout,
    /// PM QoS, EPB, ACPI CPPC, ASPM, uncore, C1 demotion.
    pub power: power::Power,
    /// cpuidle driver, governor and states.
    pub cpuidle: cpuidle::Cpuidle,
    /// `None` when the haltpoll module is absent.
    pub haltpoll: Option<haltpoll::Haltpoll>,
    /// `None` when no cpufreq driver is registered.
    pub cpufreq: Option<cpufreq::Cpufreq>,
    /// powercap zones with energy counters (RAPL and others); empty when none.
    pub powercap: Vec<powercap::PowercapZone>,
    /// tracefs: mounted where, writable by us.
    pub tracefs: tracefs::TracefsInfo,
    /// debugfs `sched/features` (needs debugfs and root).
    pub sched_features: Item<Vec<sched_features::SchedFeature>>,
    /// The cpuhp state table (named hotplug steps).
    pub hotplug_states: Item<Vec<hotplug_states::HotplugState>>,
}

impl SystemInfo {
    /// Read everything under `root`. Never fails: what cannot be read is marked.
    pub fn read(root: &Root) -> SystemInfo {
        let cpus = cpu::read(root);
        SystemInfo {
            root: root.path("/").display().to_string(),
            is_root: item::is_root(),
            kernel: kernel::read(root),
            virt: virt::read(root, cpus.hypervisor_flag),
            cpus,
            topology: item::item(root, topology::read(root)),
            layout: topology::layout(root),
            power: power::read(root),
            cpuidle: cpuidle::read(root),
            haltpoll: haltpoll::read(root),
            cpufreq: cpufreq::read(root),
            powercap: powercap::read(root),
            tracefs: tracefs::read(root),
            sched_features: sched_features::read(root),
            hotplug_states: item::item(root, hotplug_states::read(root)),
        }
    }
}
