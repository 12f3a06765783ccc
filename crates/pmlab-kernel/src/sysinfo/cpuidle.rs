//! cpuidle: driver, governor, available governors, and every CPU's idle-state table
//! (name, desc, latency, residency, usage, time, above, below, rejected, disable,
//! default_status) from `cpuN/cpuidle/stateK`.

use super::cpu::CPU_DIR;
use super::item::{item, numbered, read_bool, read_num, read_text, read_words, Item};
use crate::Root;
use serde::Serialize;

/// The cpuidle sysfs directory (kernel path, mapped through the root).
pub(crate) const CPUIDLE_DIR: &str = "/sys/devices/system/cpu/cpuidle";

/// cpuidle as the kernel shows it: driver, governor and per-CPU state tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cpuidle {
    /// /sys/devices/system/cpu/cpuidle exists (the kernel has CPU_IDLE).
    pub present: bool,
    /// `current_driver`; the kernel writes `none` when no driver registered.
    pub driver: Item<String>,
    /// `current_governor` (or `current_governor_ro` on kernels without the switch).
    pub governor: Item<String>,
    /// `available_governors` (the switchable ones).
    pub available_governors: Item<Vec<String>>,
    /// `cpuidle.off=1` on the command line (/sys/module/cpuidle/parameters/off).
    pub off: Option<bool>,
    /// Per-CPU state tables (CPUs without a `cpuidle` directory are left out).
    pub cpus: Vec<CpuIdle>,
}

impl Cpuidle {
    /// The registered driver's name, `None` when there is none.
    pub fn driver_name(&self) -> Option<&str> {
        self.driver
            .value()
            .map(String::as_str)
            .filter(|d| !d.is_empty() && *d != "none")
    }
    /// State names of the first CPU that has states.
    pub fn state_names(&self) -> Vec<String> {
        self.cpus
            .iter()
            .find(|c| !c.states.is_empty())
            .map(|c| c.states.iter().map(|s| s.name.clone()).collect())
            .unwrap_or_default()
    }
}

/// One CPU's idle states.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuIdle {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// Its states, by index.
    pub states: Vec<IdleState>,
}

/// One idle state's description (`cpuN/cpuidle/stateK`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleState {
    /// K in `stateK`.
    pub index: u32,
    /// `name` (`POLL`, `C1`, `haltpoll`).
    pub name: String,
    /// `desc`, the driver's description.
    pub desc: String,
    /// Exit latency, µs.
    pub latency_us: Option<u64>,
    /// Target residency, µs.
    pub residency_us: Option<u64>,
    /// Times entered.
    pub usage: Option<u64>,
    /// Time spent in the state, µs.
    pub time_us: Option<u64>,
    /// Entered, but the idle period was shorter than the target residency.
    pub above: Option<u64>,
    /// Entered, but a deeper state would have fit.
    pub below: Option<u64>,
    /// Entry attempts the driver rejected.
    pub rejected: Option<u64>,
    /// `disable` (true = disabled by the user).
    pub disabled: Item<bool>,
    /// `default_status`: `enabled` or `disabled` by the driver.
    pub default_status: Option<String>,
}

fn state(root: &Root, cpu: u32, k: u32) -> IdleState {
    let base = format!("{CPU_DIR}/cpu{cpu}/cpuidle/state{k}");
    let text = |f: &str| read_text(root, &format!("{base}/{f}")).unwrap_or_default();
    let num = |f: &str| read_num(root, &format!("{base}/{f}"));
    IdleState {
        index: k,
        name: text("name"),
        desc: text("desc"),
        latency_us: num("latency"),
        residency_us: num("residency"),
        usage: num("usage"),
        time_us: num("time"),
        above: num("above"),
        below: num("below"),
        rejected: num("rejected"),
        disabled: item(root, read_bool(root, &format!("{base}/disable"))),
        default_status: read_text(root, &format!("{base}/default_status")).ok(),
    }
}

/// Read cpuidle's picture; never fails (each part says why it is missing).
pub fn read(root: &Root) -> Cpuidle {
    let f = |name: &str| format!("{CPUIDLE_DIR}/{name}");
    let present = root.path(CPUIDLE_DIR).is_dir();
    let governor = match read_text(root, &f("current_governor")) {
        Ok(g) => Item::Value(g),
        Err(_) => item(root, read_text(root, &f("current_governor_ro"))),
    };
    let mut cpus = Vec::new();
    for cpu in numbered(root, CPU_DIR, "cpu").unwrap_or_default() {
        let dir = format!("{CPU_DIR}/cpu{cpu}/cpuidle");
        let Ok(ks) = numbered(root, &dir, "state") else {
            continue;
        };
        cpus.push(CpuIdle {
            cpu,
            states: ks.into_iter().map(|k| state(root, cpu, k)).collect(),
        });
    }
    Cpuidle {
        present,
        driver: item(root, read_text(root, &f("current_driver"))),
        governor,
        available_governors: item(root, read_words(root, &f("available_governors"))),
        off: read_bool(root, "/sys/module/cpuidle/parameters/off").ok(),
        cpus,
    }
}
