//! The knob table: every knob name of DESIGN.md §4 declared as data (name pattern, file
//! pattern, value type, unit, scope, writability, where its allowed values come from).

/// What a knob applies to, and so what `@CPUS` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One file for the machine (`@CPUS` is refused).
    Global,
    /// One file per CPU (`{CPU}` in the file pattern).
    Cpu,
    /// One file per cpufreq policy (`{POLICY}`); `@CPUS` picks the policies of those CPUs.
    Policy,
    /// One file per uncore frequency domain (`{DIR}`: a die, legacy or TPMI); `@CPUS` picks
    /// the dies of those CPUs, `@package1`/`@die0` the domains of those units.
    Die,
}

/// The value type, which decides how a value is parsed and compared on read-back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Type {
    /// `on/off/1/0/Y/N/yes/no/true/false`, written as `1`/`0`.
    Bool,
    /// An integer in `unit` (`ns`, `us`, `ms`, `kHz`, or none); values may carry a unit.
    Int,
    /// One word of an allowed list.
    Enum,
    /// Free text (one line).
    Text,
    /// Decided from the parameter: `_ns/_us/_ms` names are Int, `Y/N` values Bool,
    /// integer values Int, the rest Text (module parameters).
    Auto,
}

/// Where the allowed values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    /// Anything the type accepts.
    Any,
    /// An inclusive integer range (in the knob's unit).
    Range(i64, i64),
    /// Integer range read from two files (cpufreq `cpuinfo_min_freq`/`cpuinfo_max_freq`).
    RangeFiles(&'static str, &'static str),
    /// A space-separated list in a kernel file (`available_governors`); entries may be `[x]`.
    ListFile(&'static str),
    /// A list file, or an integer in a range (intel_pstate EPP takes 0-255 too).
    ListFileOrRange(&'static str, i64, i64),
    /// A fixed list of words (intel_pstate `status`: the kernel lists them nowhere).
    Words(&'static [&'static str]),
}

/// What a special word of a knob stands for (pepc's `min`, `max`, `base`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// The number in this file (pattern like the knob's file): `max` = `cpuinfo_max_freq`.
    File(&'static str),
    /// This value: EPB's `performance` = `0`.
    Value(&'static str),
}

/// How a knob's file is read and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Plain sysfs attribute: read = content, write = value.
    File,
    /// `cpuN/online`: hotplug; failures are reported with the hotplug step.
    Online,
    /// debugfs `sched/features`: read = presence of `NAME` vs `NO_NAME`; write `NAME`/`NO_NAME`.
    SchedFeature,
    /// A bit field of an MSR in `/dev/cpu/{CPU}/msr` (Intel only): read = the field's value,
    /// write = read-modify-write of the field; the journal keeps the whole register.
    Msr(crate::msr::Field),
}

/// One knob (or family of knobs) declared as data.
#[derive(Debug, Clone, Copy)]
pub struct KnobDef {
    /// Name pattern; `{STATE}`, `{FEATURE}`, `{MODULE}`, `{PARAM}` match one dot-free word,
    /// `{PATH}` the rest of the name.
    pub name: &'static str,
    /// File pattern (absolute, below the root); `{CPU}`/`{POLICY}` come from the scope.
    pub file: &'static str,
    /// The value type (`Auto`: decided from the file's content).
    pub ty: Type,
    /// Kernel unit of an Int value (`ns`, `us`, `ms`, `kHz`, or empty).
    pub unit: &'static str,
    /// One file for the machine, one per CPU or one per cpufreq policy.
    pub scope: Scope,
    /// pmlab may write it (`false`: listed and read only).
    pub writable: bool,
    /// Which values are accepted (range, list file, ...), checked before any write.
    pub allowed: Allowed,
    /// Literal words accepted besides the type (`n/a` for PM QoS).
    pub words: &'static [&'static str],
    /// How the file is read and written.
    pub access: Access,
    /// Special words and what they stand for, resolved before the value is checked.
    pub specials: &'static [(&'static str, Special)],
    /// A boolean stored inverted (intel_pstate `no_turbo` for `cpufreq.turbo`).
    pub invert: bool,
    /// One line on what the knob does, for `pmlab knob list`.
    pub help: &'static str,
}

const CPU: &str = "/sys/devices/system/cpu";

/// `min`, `max`, `base` for a policy's frequency (pepc's words).
const FREQ_SPECIALS: &[(&str, Special)] = &[
    (
        "min",
        Special::File(concat!(
            "/sys/devices/system/cpu/cpufreq/policy{POLICY}",
            "/cpuinfo_min_freq"
        )),
    ),
    (
        "max",
        Special::File(concat!(
            "/sys/devices/system/cpu/cpufreq/policy{POLICY}",
            "/cpuinfo_max_freq"
        )),
    ),
    (
        "base",
        Special::File(concat!(
            "/sys/devices/system/cpu/cpufreq/policy{POLICY}",
            "/base_frequency"
        )),
    ),
];

/// `min`, `max` for an uncore domain: the limits the hardware started with.
const UNCORE_SPECIALS: &[(&str, Special)] = &[
    (
        "min",
        Special::File(concat!(
            "/sys/devices/system/cpu/intel_uncore_frequency/{DIR}",
            "/initial_min_freq_khz"
        )),
    ),
    (
        "max",
        Special::File(concat!(
            "/sys/devices/system/cpu/intel_uncore_frequency/{DIR}",
            "/initial_max_freq_khz"
        )),
    ),
];

/// EPB's words, as the kernel's `energy_perf_bias` takes them.
const EPB_SPECIALS: &[(&str, Special)] = &[
    ("performance", Special::Value("0")),
    ("balance-performance", Special::Value("4")),
    ("normal", Special::Value("6")),
    ("balance-power", Special::Value("8")),
    ("power", Special::Value("15")),
];

/// A knob of one global file.
const fn global(
    name: &'static str,
    file: &'static str,
    ty: Type,
    unit: &'static str,
    allowed: Allowed,
    help: &'static str,
) -> KnobDef {
    KnobDef {
        name,
        file,
        ty,
        unit,
        scope: Scope::Global,
        writable: true,
        allowed,
        words: &[],
        specials: &[],
        invert: false,
        access: Access::File,
        help,
    }
}

/// pepc's knobs: turbo, intel_pstate and amd-pstate, EPB, uncore, ASPM. The three
/// `cpufreq.turbo` entries are alternatives: the first whose file exists here is the knob.
const PEPC_KNOBS: [KnobDef; 14] = [
    KnobDef {
        invert: true,
        ..global(
            "cpufreq.turbo",
            "/sys/devices/system/cpu/intel_pstate/no_turbo",
            Type::Bool,
            "",
            Allowed::Any,
            "turbo on/off (intel_pstate: the inverse of no_turbo)",
        )
    },
    global(
        "cpufreq.turbo",
        "/sys/devices/system/cpu/cpufreq/boost",
        Type::Bool,
        "",
        Allowed::Any,
        "turbo on/off (cpufreq boost: acpi-cpufreq, amd-pstate)",
    ),
    KnobDef {
        scope: Scope::Policy,
        ..global(
            "cpufreq.turbo",
            concat!("/sys/devices/system/cpu/cpufreq/policy{POLICY}", "/boost"),
            Type::Bool,
            "",
            Allowed::Any,
            "turbo on/off of a policy (amd-pstate per-policy boost)",
        )
    },
    global(
        "cpufreq.boost",
        "/sys/devices/system/cpu/cpufreq/boost",
        Type::Bool,
        "",
        Allowed::Any,
        "cpufreq boost (acpi-cpufreq, amd-pstate)",
    ),
    global(
        "intel_pstate.no_turbo",
        "/sys/devices/system/cpu/intel_pstate/no_turbo",
        Type::Bool,
        "",
        Allowed::Any,
        "intel_pstate: 1 = turbo off",
    ),
    global(
        "intel_pstate.min_perf_pct",
        "/sys/devices/system/cpu/intel_pstate/min_perf_pct",
        Type::Int,
        "%",
        Allowed::Range(0, 100),
        "intel_pstate: lowest performance, % of the highest",
    ),
    global(
        "intel_pstate.max_perf_pct",
        "/sys/devices/system/cpu/intel_pstate/max_perf_pct",
        Type::Int,
        "%",
        Allowed::Range(0, 100),
        "intel_pstate: highest performance, % of the highest",
    ),
    global(
        "intel_pstate.status",
        "/sys/devices/system/cpu/intel_pstate/status",
        Type::Enum,
        "",
        Allowed::Words(&["active", "passive", "off"]),
        "intel_pstate mode (active: HWP/EPP, passive: a cpufreq governor drives it)",
    ),
    global(
        "intel_pstate.hwp_dynamic_boost",
        "/sys/devices/system/cpu/intel_pstate/hwp_dynamic_boost",
        Type::Bool,
        "",
        Allowed::Any,
        "intel_pstate: raise the HWP floor for tasks woken from I/O",
    ),
    global(
        "amd_pstate.status",
        "/sys/devices/system/cpu/amd_pstate/status",
        Type::Enum,
        "",
        Allowed::Words(&["active", "passive", "guided", "disable"]),
        "amd-pstate mode",
    ),
    KnobDef {
        scope: Scope::Cpu,
        specials: EPB_SPECIALS,
        ..global(
            "epb",
            "/sys/devices/system/cpu/cpu{CPU}/power/energy_perf_bias",
            Type::Int,
            "",
            Allowed::Range(0, 15),
            "energy/performance bias (0 performance .. 15 power; words: performance, \
             balance-performance, normal, balance-power, power)",
        )
    },
    KnobDef {
        scope: Scope::Die,
        specials: UNCORE_SPECIALS,
        ..global(
            "uncore.min_freq",
            concat!(
                "/sys/devices/system/cpu/intel_uncore_frequency/{DIR}",
                "/min_freq_khz"
            ),
            Type::Int,
            "kHz",
            Allowed::RangeFiles(
                concat!(
                    "/sys/devices/system/cpu/intel_uncore_frequency/{DIR}",
                    "/initial_min_freq_khz"
                ),
                concat!(
                    "/sys/devices/system/cpu/intel_uncore_frequency/{DIR}",
                    "/initial_max_freq_khz"
                ),
            ),
            "lowest uncore frequency of a die (legacy or TPMI uncore sysfs)",
        )
    },
    KnobDef {
        scope: Scope::Die,
        specials: UNCORE_SPECIALS,
        ..global(
            "uncore.max_freq",
            concat!(
                "/sys/devices/system/cpu/intel_uncore_frequency/{DIR}",
                "/max_freq_khz"
            ),
            Type::Int,
            "kHz",
            Allowed::RangeFiles(
                concat!(
                    "/sys/devices/system/cpu/intel_uncore_frequency/{DIR}",
                    "/initial_min_freq_khz"
                ),
                concat!(
                    "/sys/devices/system/cpu/intel_uncore_frequency/{DIR}",
                    "/initial_max_freq_khz"
                ),
            ),
            "highest uncore frequency of a die (legacy or TPMI uncore sysfs)",
        )
    },
    global(
        "aspm.policy",
        "/sys/module/pcie_aspm/parameters/policy",
        Type::Enum,
        "",
        Allowed::ListFile("/sys/module/pcie_aspm/parameters/policy"),
        "PCIe ASPM policy",
    ),
];

/// pepc's MSR features (Intel): a bit field of one register per CPU, through the msr module.
const fn msr_knob(
    name: &'static str,
    field: crate::msr::Field,
    ty: Type,
    allowed: Allowed,
    help: &'static str,
) -> KnobDef {
    KnobDef {
        scope: Scope::Cpu,
        access: Access::Msr(field),
        ..global(name, "/dev/cpu/{CPU}/msr", ty, "", allowed, help)
    }
}

const MSR_KNOBS: [KnobDef; 3] = {
    use crate::msr::{Field, PKG_CST_CONFIG_CONTROL, POWER_CTL};
    [
        msr_knob(
            "msr.pkg_cstate_limit",
            Field::new(PKG_CST_CONFIG_CONTROL, 0, 4).locked_by(15),
            Type::Int,
            Allowed::Range(0, 15),
            "deepest package C-state (MSR 0xe2 bits 0-3, a model-specific code; \
             refused when the firmware locked it, bit 15)",
        ),
        msr_knob(
            "msr.c1_demotion",
            Field::new(PKG_CST_CONFIG_CONTROL, 26, 1),
            Type::Bool,
            Allowed::Any,
            "C1 demotion: the CPU may turn a deeper C-state request into C1 (MSR 0xe2 bit 26)",
        ),
        msr_knob(
            "msr.c1e_autopromote",
            Field::new(POWER_CTL, 1, 1),
            Type::Bool,
            Allowed::Any,
            "C1E autopromote: C1 requests enter C1E (MSR 0x1fc bit 1)",
        ),
    ]
};

/// Every knob of DESIGN.md §4. Order matters: the first pattern that matches wins, so the
/// fixed names come before the `{MODULE}.{PARAM}` catch-all.
pub const KNOBS: &[KnobDef] = &[
    KnobDef {
        name: "cpu.online",
        file: "/sys/devices/system/cpu/cpu{CPU}/online",
        ty: Type::Bool,
        unit: "",
        scope: Scope::Cpu,
        writable: true,
        allowed: Allowed::Any,
        words: &[],
        specials: &[],
        invert: false,
        access: Access::Online,
        help: "CPU hotplug: 1 online, 0 offline",
    },
    KnobDef {
        name: "cpuidle.governor",
        file: "/sys/devices/system/cpu/cpuidle/current_governor",
        ty: Type::Enum,
        unit: "",
        scope: Scope::Global,
        writable: true,
        allowed: Allowed::ListFile("/sys/devices/system/cpu/cpuidle/available_governors"),
        words: &[],
        specials: &[],
        invert: false,
        access: Access::File,
        help: "cpuidle governor",
    },
    KnobDef {
        name: "cpuidle.{STATE}.disable",
        file: "/sys/devices/system/cpu/cpu{CPU}/cpuidle/{STATE}/disable",
        ty: Type::Bool,
        unit: "",
        scope: Scope::Cpu,
        writable: true,
        allowed: Allowed::Any,
        words: &[],
        specials: &[],
        invert: false,
        access: Access::File,
        help: "disable an idle state (by name, e.g. POLL, or stateK)",
    },
    KnobDef {
        name: "pmqos.resume_latency_us",
        file: "/sys/devices/system/cpu/cpu{CPU}/power/pm_qos_resume_latency_us",
        ty: Type::Int,
        unit: "us",
        scope: Scope::Cpu,
        writable: true,
        allowed: Allowed::Range(0, i32::MAX as i64),
        words: &["n/a"],
        specials: &[],
        invert: false,
        access: Access::File,
        help: "per-CPU resume latency limit (0 = none, n/a = no idle states but polling)",
    },
    KnobDef {
        name: "cpufreq.governor",
        file: "/sys/devices/system/cpu/cpufreq/policy{POLICY}/scaling_governor",
        ty: Type::Enum,
        unit: "",
        scope: Scope::Policy,
        writable: true,
        allowed: Allowed::ListFile(
            "/sys/devices/system/cpu/cpufreq/policy{POLICY}/scaling_available_governors",
        ),
        words: &[],
        specials: &[],
        invert: false,
        access: Access::File,
        help: "cpufreq governor of a policy",
    },
    KnobDef {
        name: "cpufreq.min_freq",
        file: "/sys/devices/system/cpu/cpufreq/policy{POLICY}/scaling_min_freq",
        ty: Type::Int,
        unit: "kHz",
        scope: Scope::Policy,
        writable: true,
        allowed: Allowed::RangeFiles(
            "/sys/devices/system/cpu/cpufreq/policy{POLICY}/cpuinfo_min_freq",
            "/sys/devices/system/cpu/cpufreq/policy{POLICY}/cpuinfo_max_freq",
        ),
        words: &[],
        specials: FREQ_SPECIALS,
        invert: false,
        access: Access::File,
        help: "lowest frequency of a policy",
    },
    KnobDef {
        name: "cpufreq.max_freq",
        file: "/sys/devices/system/cpu/cpufreq/policy{POLICY}/scaling_max_freq",
        ty: Type::Int,
        unit: "kHz",
        scope: Scope::Policy,
        writable: true,
        allowed: Allowed::RangeFiles(
            "/sys/devices/system/cpu/cpufreq/policy{POLICY}/cpuinfo_min_freq",
            "/sys/devices/system/cpu/cpufreq/policy{POLICY}/cpuinfo_max_freq",
        ),
        words: &[],
        specials: FREQ_SPECIALS,
        invert: false,
        access: Access::File,
        help: "highest frequency of a policy",
    },
    KnobDef {
        name: "cpufreq.epp",
        file: "/sys/devices/system/cpu/cpufreq/policy{POLICY}/energy_performance_preference",
        ty: Type::Enum,
        unit: "",
        scope: Scope::Policy,
        writable: true,
        allowed: Allowed::ListFileOrRange(
            "/sys/devices/system/cpu/cpufreq/policy{POLICY}/energy_performance_available_preferences",
            0,
            255,
        ),
        words: &[],
        specials: &[],
        invert: false,
        access: Access::File,
        help: "energy/performance preference of a policy (intel_pstate, amd-pstate)",
    },
    PEPC_KNOBS[0],
    PEPC_KNOBS[1],
    PEPC_KNOBS[2],
    PEPC_KNOBS[3],
    PEPC_KNOBS[4],
    PEPC_KNOBS[5],
    PEPC_KNOBS[6],
    PEPC_KNOBS[7],
    PEPC_KNOBS[8],
    PEPC_KNOBS[9],
    PEPC_KNOBS[10],
    PEPC_KNOBS[11],
    PEPC_KNOBS[12],
    PEPC_KNOBS[13],
    MSR_KNOBS[0],
    MSR_KNOBS[1],
    MSR_KNOBS[2],
    KnobDef {
        name: "rcu.expedited",
        file: "/sys/kernel/rcu_expedited",
        ty: Type::Bool,
        unit: "",
        scope: Scope::Global,
        writable: true,
        allowed: Allowed::Any,
        words: &[],
        specials: &[],
        invert: false,
        access: Access::File,
        help: "expedited RCU grace periods",
    },
    KnobDef {
        name: "sched.feature.{FEATURE}",
        file: "/sys/kernel/debug/sched/features",
        ty: Type::Bool,
        unit: "",
        scope: Scope::Global,
        writable: true,
        allowed: Allowed::Any,
        words: &[],
        specials: &[],
        invert: false,
        access: Access::SchedFeature,
        help: "scheduler feature (debugfs; NAME on, NO_NAME off)",
    },
    KnobDef {
        name: "sysfs:{PATH}",
        file: "{PATH}",
        ty: Type::Text,
        unit: "",
        scope: Scope::Global,
        writable: true,
        allowed: Allowed::Any,
        words: &[],
        specials: &[],
        invert: false,
        access: Access::File,
        help: "any writable file under /sys",
    },
    KnobDef {
        name: "{MODULE}.{PARAM}",
        file: "/sys/module/{MODULE}/parameters/{PARAM}",
        ty: Type::Auto,
        unit: "",
        scope: Scope::Global,
        writable: true,
        allowed: Allowed::Any,
        words: &[],
        specials: &[],
        invert: false,
        access: Access::File,
        help: "module parameter",
    },
];

/// The sysfs directory of the CPUs.
pub const CPU_DIR: &str = CPU;
