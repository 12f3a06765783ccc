//! Power-management facts beyond cpuidle and cpufreq, as pepc reads them: PM QoS resume
//! latency and EPB per CPU, ACPI CPPC per CPU, PCIe ASPM policy, uncore frequency domains
//! (legacy `package_PP_die_DD` and TPMI `uncoreNN`), and intel_idle's C1 demotion and
//! low-power-idle residencies.

use super::cpu::CPU_DIR;
use super::item::{list_names, numbered, read_num, read_text};
use crate::knob::value::list_words;
use crate::{KHz, Root};
use serde::Serialize;

/// CPUs that read the same value of a per-CPU file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuValues<T> {
    /// The value, as read (trimmed).
    pub value: T,
    /// The CPUs with that value.
    pub cpus: Vec<u32>,
}

/// Group `(cpu, value)` pairs by value, groups ordered by their first CPU.
pub fn group<T: PartialEq + Clone>(pairs: impl IntoIterator<Item = (u32, T)>) -> Vec<CpuValues<T>> {
    let mut out: Vec<CpuValues<T>> = Vec::new();
    for (cpu, v) in pairs {
        match out.iter_mut().find(|g| g.value == v) {
            Some(g) => g.cpus.push(cpu),
            None => out.push(CpuValues {
                value: v,
                cpus: vec![cpu],
            }),
        }
    }
    out
}

fn per_cpu(root: &Root, rel: &str) -> Vec<CpuValues<String>> {
    group(
        numbered(root, CPU_DIR, "cpu")
            .unwrap_or_default()
            .into_iter()
            .filter_map(|c| Some((c, read_text(root, &format!("{CPU_DIR}/cpu{c}/{rel}")).ok()?))),
    )
}

/// ACPI CPPC values of one CPU (`cpuN/acpi_cppc/*`); a field is `None` where absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cppc {
    /// `highest_perf`.
    pub highest_perf: Option<u64>,
    /// `nominal_perf`.
    pub nominal_perf: Option<u64>,
    /// `lowest_nonlinear_perf`.
    pub lowest_nonlinear_perf: Option<u64>,
    /// `lowest_perf`.
    pub lowest_perf: Option<u64>,
    /// `guaranteed_perf`.
    pub guaranteed_perf: Option<u64>,
    /// `reference_perf`.
    pub reference_perf: Option<u64>,
    /// `nominal_freq`, MHz.
    pub nominal_freq_mhz: Option<u64>,
    /// `lowest_freq`, MHz.
    pub lowest_freq_mhz: Option<u64>,
}

/// The PCIe ASPM policy (`/sys/module/pcie_aspm/parameters/policy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Aspm {
    /// The policy in force (the bracketed word).
    pub policy: Option<String>,
    /// Every policy the kernel offers.
    pub available: Vec<String>,
}

/// Which sysfs interface an uncore domain comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UncoreKind {
    /// `intel_uncore_frequency/package_PP_die_DD` (one per die).
    Legacy,
    /// `intel_uncore_frequency/uncoreNN` with `package_id`/`domain_id` (TPMI).
    Tpmi,
}

/// One uncore frequency domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UncoreDomain {
    /// Its directory under `/sys/devices/system/cpu/intel_uncore_frequency`.
    pub dir: String,
    /// Legacy or TPMI.
    pub kind: UncoreKind,
    /// Package.
    pub package: Option<u32>,
    /// Die (legacy) or TPMI `domain_id`.
    pub die: Option<u32>,
    /// `min_freq_khz`.
    pub min: Option<KHz>,
    /// `max_freq_khz`.
    pub max: Option<KHz>,
    /// `initial_min_freq_khz`: the lowest the hardware allows.
    pub hw_min: Option<KHz>,
    /// `initial_max_freq_khz`: the highest the hardware allows.
    pub hw_max: Option<KHz>,
    /// `current_freq_khz`.
    pub cur: Option<KHz>,
    /// TPMI `agent_types` (`core`, `cache`, `io`...).
    pub agent_types: Option<String>,
}

/// The uncore sysfs directory.
pub const UNCORE_DIR: &str = "/sys/devices/system/cpu/intel_uncore_frequency";

/// `package_PP_die_DD` → (PP, DD).
pub fn legacy_ids(dir: &str) -> Option<(u32, u32)> {
    let rest = dir.strip_prefix("package_")?;
    let (p, d) = rest.split_once("_die_")?;
    Some((p.parse().ok()?, d.parse().ok()?))
}

/// Every uncore domain, TPMI first: a TPMI machine shows both kinds, its `uncoreNN` domains
/// and a legacy `package_PP_die_00` per package (the knobs set the TPMI ones).
pub fn uncore(root: &Root) -> Vec<UncoreDomain> {
    let mut out = Vec::new();
    for dir in list_names(root, UNCORE_DIR).unwrap_or_default() {
        let base = format!("{UNCORE_DIR}/{dir}");
        let khz = |f: &str| read_num(root, &format!("{base}/{f}")).map(KHz);
        let (kind, package, die) = if let Some((p, d)) = legacy_ids(&dir) {
            (UncoreKind::Legacy, Some(p), Some(d))
        } else if dir.starts_with("uncore") {
            let n = |f: &str| read_num(root, &format!("{base}/{f}")).map(|v| v as u32);
            (UncoreKind::Tpmi, n("package_id"), n("domain_id"))
        } else {
            continue;
        };
        out.push(UncoreDomain {
            kind,
            package,
            die,
            min: khz("min_freq_khz"),
            max: khz("max_freq_khz"),
            hw_min: khz("initial_min_freq_khz"),
            hw_max: khz("initial_max_freq_khz"),
            cur: khz("current_freq_khz"),
            agent_types: read_text(root, &format!("{base}/agent_types")).ok(),
            dir,
        });
    }
    out.sort_by_key(|d| (d.kind != UncoreKind::Tpmi, d.package, d.die));
    out
}

/// Power facts of the machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Power {
    /// `cpuN/power/pm_qos_resume_latency_us` (µs; `0` = no limit, `n/a`), grouped.
    pub pmqos_resume_latency_us: Vec<CpuValues<String>>,
    /// `cpuN/power/energy_perf_bias` (0 performance .. 15 power), grouped.
    pub epb: Vec<CpuValues<String>>,
    /// `cpuN/acpi_cppc/*`, grouped.
    pub cppc: Vec<CpuValues<Cppc>>,
    /// PCIe ASPM policy; `None` where the kernel has no pcie_aspm.
    pub aspm: Option<Aspm>,
    /// Uncore frequency domains (empty where the driver is absent).
    pub uncore: Vec<UncoreDomain>,
    /// `cpuidle/intel_c1_demotion` (intel_idle), where present.
    pub c1_demotion: Option<String>,
    /// `cpuidle/low_power_idle_cpu_residency_us`, where present.
    pub lpi_cpu_residency_us: Option<u64>,
    /// `cpuidle/low_power_idle_system_residency_us`, where present.
    pub lpi_system_residency_us: Option<u64>,
}

/// Read the power facts; never fails (absent parts are empty or `None`).
pub fn read(root: &Root) -> Power {
    let cppc = group(
        numbered(root, CPU_DIR, "cpu")
            .unwrap_or_default()
            .into_iter()
            .filter(|c| root.path(&format!("{CPU_DIR}/cpu{c}/acpi_cppc")).is_dir())
            .map(|c| {
                let n = |f: &str| read_num(root, &format!("{CPU_DIR}/cpu{c}/acpi_cppc/{f}"));
                (
                    c,
                    Cppc {
                        highest_perf: n("highest_perf"),
                        nominal_perf: n("nominal_perf"),
                        lowest_nonlinear_perf: n("lowest_nonlinear_perf"),
                        lowest_perf: n("lowest_perf"),
                        guaranteed_perf: n("guaranteed_perf"),
                        reference_perf: n("reference_perf"),
                        nominal_freq_mhz: n("nominal_freq"),
                        lowest_freq_mhz: n("lowest_freq"),
                    },
                )
            }),
    );
    let aspm = read_text(root, "/sys/module/pcie_aspm/parameters/policy")
        .ok()
        .map(|t| Aspm {
            policy: selected_word(&t),
            available: list_words(&t),
        });
    let idle = "/sys/devices/system/cpu/cpuidle";
    Power {
        pmqos_resume_latency_us: per_cpu(root, "power/pm_qos_resume_latency_us"),
        epb: per_cpu(root, "power/energy_perf_bias"),
        cppc,
        aspm,
        uncore: uncore(root),
        c1_demotion: read_text(root, &format!("{idle}/intel_c1_demotion")).ok(),
        lpi_cpu_residency_us: read_num(root, &format!("{idle}/low_power_idle_cpu_residency_us")),
        lpi_system_residency_us: read_num(
            root,
            &format!("{idle}/low_power_idle_system_residency_us"),
        ),
    }
}

/// The bracketed word of a kernel list file (`[default] performance` → `default`).
pub fn selected_word(text: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']').map(str::to_string))
}
