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
    /// Turbo as the driver shows it: not `intel_pstate/no_turbo`, else `cpufreq/boost`,
    /// else every policy's `boost` (amd-pstate); `None` where no file says.
    pub turbo: Option<bool>,
    /// intel_pstate's global files, where the driver is intel_pstate.
    pub intel_pstate: Option<IntelPstate>,
    /// /sys/devices/system/cpu/amd_pstate/status (`active`, `passive`, `guided`).
    pub amd_pstate_status: Option<String>,
    /// One entry per `policyN`, by N.
    pub policies: Vec<Policy>,
}

/// intel_pstate's global files (`/sys/devices/system/cpu/intel_pstate/*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntelPstate {
    /// `status`: `active`, `passive` or `off`.
    pub status: Option<String>,
    /// `no_turbo`: turbo is off.
    pub no_turbo: Option<bool>,
    /// `min_perf_pct`.
    pub min_perf_pct: Option<u64>,
    /// `max_perf_pct`.
    pub max_perf_pct: Option<u64>,
    /// `hwp_dynamic_boost`.
    pub hwp_dynamic_boost: Option<bool>,
    /// `turbo_pct`: share of P-states that are turbo.
    pub turbo_pct: Option<u64>,
    /// `num_pstates`.
    pub num_pstates: Option<u64>,
    /// `energy_efficiency` (some Xeons).
    pub energy_efficiency: Option<bool>,
}

fn intel_pstate(root: &Root) -> Option<IntelPstate> {
    let d = format!("{CPU_DIR}/intel_pstate");
    if !root.path(&d).is_dir() {
        return None;
    }
    let f = |n: &str| format!("{d}/{n}");
    Some(IntelPstate {
        status: read_text(root, &f("status")).ok(),
        no_turbo: read_bool(root, &f("no_turbo")).ok(),
        min_perf_pct: read_num(root, &f("min_perf_pct")),
        max_perf_pct: read_num(root, &f("max_perf_pct")),
        hwp_dynamic_boost: read_bool(root, &f("hwp_dynamic_boost")).ok(),
        turbo_pct: read_num(root, &f("turbo_pct")),
        num_pstates: read_num(root, &f("num_pstates")),
        energy_efficiency: read_bool(root, &f("energy_efficiency")).ok(),
    })
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
    /// `base_frequency` (intel_pstate), kHz.
    pub base: Option<KHz>,
    /// `cpuinfo_avg_freq`: the average frequency over the last tick, kHz.
    pub avg: Option<KHz>,
    /// The policy's `boost` (acpi-cpufreq, amd-pstate), where it has one.
    pub boost: Option<bool>,
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
        base: khz("base_frequency"),
        avg: khz("cpuinfo_avg_freq"),
        boost: read_bool(root, &p("boost")).ok(),
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
    let boost = read_bool(root, &format!("{CPUFREQ_DIR}/boost")).ok();
    let intel_pstate = intel_pstate(root);
    let policy_boost = policies
        .iter()
        .map(|p| p.boost)
        .collect::<Option<Vec<bool>>>()
        .filter(|b| !b.is_empty() && b.iter().all(|x| *x == b[0]))
        .map(|b| b[0]);
    Some(Cpufreq {
        driver: policies.iter().find_map(|p| p.driver.clone()),
        turbo: intel_pstate
            .as_ref()
            .and_then(|i| i.no_turbo.map(|n| !n))
            .or(boost)
            .or(policy_boost),
        intel_pstate,
        amd_pstate_status: read_text(root, &format!("{CPU_DIR}/amd_pstate/status")).ok(),
        boost,
        intel_pstate_status: read_text(root, &format!("{CPU_DIR}/intel_pstate/status")).ok(),
        policies,
    })
}
