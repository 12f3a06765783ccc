//! cpufreq policies (`cpufreq/policyN`): driver, governor, min/max/cur, EPP and the
//! available governors and EPP values; intel_pstate status and global boost.

use super::cpu::CPU_DIR;
use super::item::{item, numbered, read_bool, read_num, read_text, read_words, Item};
use crate::cpulist::parse_cpu_list;
use crate::{KHz, Root};
use serde::Serialize;

/// The cpufreq sysfs directory (kernel path, mapped through the root).
pub(crate) const CPUFREQ_DIR: &str = "/sys/devices/system/cpu/cpufreq";

/// cpufreq as the kernel shows it; `SystemInfo::cpufreq` is `None` without policies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cpufreq {
    /// The first policy's scaling driver (all policies share one driver).
    pub driver: Option<String>,
    /// /sys/devices/system/cpu/cpufreq/boost.
    pub boost: Option<bool>,
    /// /sys/devices/system/cpu/intel_pstate/status (`active`, `passive`, `off`).
    pub intel_pstate_status: Option<String>,
    /// One entry per `policyN`, by N.
    pub policies: Vec<Policy>,
}

/// One cpufreq policy (`policyN`): the CPUs it drives and its limits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    /// N in `policyN`.
    pub id: u32,
    /// `affected_cpus`: the online CPUs this policy drives.
    pub cpus: Vec<u32>,
    /// `scaling_driver` (`acpi-cpufreq`, `intel_pstate`, `amd-pstate-epp`).
    pub driver: Option<String>,
    /// `scaling_governor`.
    pub governor: Option<String>,
    /// `scaling_available_governors` (empty where the driver has none).
    pub available_governors: Vec<String>,
    /// `scaling_min_freq`, kHz.
    pub min: Option<KHz>,
    /// `scaling_max_freq`, kHz.
    pub max: Option<KHz>,
    /// scaling_cur_freq (world-readable; cpuinfo_cur_freq needs root).
    pub cur: Option<KHz>,
    /// `cpuinfo_min_freq`: the hardware's lowest frequency, kHz.
    pub hw_min: Option<KHz>,
    /// `cpuinfo_max_freq`: the hardware's highest frequency, kHz.
    pub hw_max: Option<KHz>,
    /// energy_performance_preference, where the driver has it.
    pub epp: Option<Item<String>>,
    /// `energy_performance_available_preferences`, where the driver has it.
    pub available_epp: Option<Vec<String>>,
}

fn policy(root: &Root, id: u32) -> Policy {
    let base = format!("{CPUFREQ_DIR}/policy{id}");
    let p = |f: &str| format!("{base}/{f}");
    let text = |f: &str| read_text(root, &p(f)).ok();
    let khz = |f: &str| read_num(root, &p(f)).map(KHz);
    let epp_path = p("energy_performance_preference");
    let epp = root
        .path(&epp_path)
        .exists()
        .then(|| item(root, read_text(root, &epp_path)));
    Policy {
        id,
        cpus: text("affected_cpus")
            .or_else(|| text("related_cpus"))
            .and_then(|t| {
                let t = t.split_whitespace().collect::<Vec<_>>().join(",");
                parse_cpu_list(&t).ok()
            })
            .unwrap_or_default(),
        driver: text("scaling_driver"),
        governor: text("scaling_governor"),
        available_governors: read_words(root, &p("scaling_available_governors"))
            .unwrap_or_default(),
        min: khz("scaling_min_freq"),
        max: khz("scaling_max_freq"),
        cur: khz("scaling_cur_freq"),
        hw_min: khz("cpuinfo_min_freq"),
        hw_max: khz("cpuinfo_max_freq"),
        epp,
        available_epp: read_words(root, &p("energy_performance_available_preferences")).ok(),
    }
}

/// `None` when no cpufreq driver has registered a policy.
pub fn read(root: &Root) -> Option<Cpufreq> {
    let ids = numbered(root, CPUFREQ_DIR, "policy").ok()?;
    if ids.is_empty() {
        return None;
    }
    let policies: Vec<Policy> = ids.into_iter().map(|i| policy(root, i)).collect();
    Some(Cpufreq {
        driver: policies.iter().find_map(|p| p.driver.clone()),
        boost: read_bool(root, &format!("{CPUFREQ_DIR}/boost")).ok(),
        intel_pstate_status: read_text(root, &format!("{CPU_DIR}/intel_pstate/status")).ok(),
        policies,
    })
}
