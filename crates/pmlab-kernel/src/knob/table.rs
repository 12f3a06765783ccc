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
    /// One line on what the knob does, for `pmlab knob list`.
    pub help: &'static str,
}

const CPU: &str = "/sys/devices/system/cpu";

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
        access: Access::File,
        help: "energy/performance preference of a policy (intel_pstate, amd-pstate)",
    },
    KnobDef {
        name: "rcu.expedited",
        file: "/sys/kernel/rcu_expedited",
        ty: Type::Bool,
        unit: "",
        scope: Scope::Global,
        writable: true,
        allowed: Allowed::Any,
        words: &[],
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
        access: Access::File,
        help: "module parameter",
    },
];

/// The sysfs directory of the CPUs.
pub const CPU_DIR: &str = CPU;
