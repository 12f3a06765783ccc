//! From a knob name (`NAME[@CPUS]`) to the kernel files it means on this machine, and from
//! a value to the exact string to write: the generic engine over the table of `table.rs`.

use super::file;
use super::table::{Access, Allowed, KnobDef, Scope, Special, Type, KNOBS};
use super::value::{list_words, parse_bool, parse_int};
use super::KnobError;
use super::KnobId;
use super::{UnitKind, Units};
use crate::cpulist::format_cpu_list;
use crate::sysinfo::power::{self, UncoreKind};
use crate::sysinfo::topology;
use crate::Root;
use std::path::{Component, Path, PathBuf};

/// One kernel file a knob name stands for.
#[derive(Debug, Clone)]
pub struct Target {
    /// Canonical name of this one file: `cpuidle.POLL.disable@1`, `cpufreq.governor@policy0`.
    pub knob: String,
    /// The table entry the name matched.
    pub def: &'static KnobDef,
    /// The file, below the root.
    pub path: PathBuf,
    /// The value type after `Auto` is decided.
    pub ty: Type,
    /// The kernel's unit of the value (`ns`, `us`, `kHz`; empty when none).
    pub unit: String,
    /// The CPU of a per-CPU knob (kernel numbering); `None` for others.
    pub cpu: Option<u32>,
    /// `{POLICY}` for policy knobs.
    pub policy: Option<u32>,
    /// The feature name of a `sched.feature.NAME` knob.
    pub feature: Option<String>,
    /// `{DIR}` of a per-die knob: the uncore domain's directory (`package_00_die_01`).
    pub dir: Option<String>,
}

impl Target {
    /// Which part of the file is this knob's value.
    pub fn part(&self) -> file::Part<'_> {
        match (&self.feature, self.def.access) {
            (Some(f), _) => file::Part::Feature(f),
            (None, Access::Msr(f)) => file::Part::Field(f),
            _ => file::Part::Text,
        }
    }

    /// The MSR (address) this knob is a field of.
    pub fn register(&self) -> Option<u32> {
        match self.def.access {
            Access::Msr(f) => Some(f.addr),
            _ => None,
        }
    }

    /// The file is there: a regular file (sysfs), or for an MSR the msr module's character
    /// device (a regular file in a fake tree).
    pub fn is_present(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(&self.path).is_ok_and(|m| {
            m.is_file() || (self.register().is_some() && m.file_type().is_char_device())
        })
    }

    /// What the journal keeps of the file: the whole register of an MSR field.
    pub fn journal_part(&self) -> file::Part<'_> {
        match self.register() {
            Some(a) => file::Part::Register(a),
            None => self.part(),
        }
    }
}

/// Why an MSR knob cannot be used here (not an Intel CPU, no msr device, the register
/// unreadable), or `None` when it can.
fn msr_refusal(root: &Root, def: &KnobDef, field: crate::msr::Field) -> Option<String> {
    let cpuinfo = std::fs::read_to_string(root.path("/proc/cpuinfo")).unwrap_or_default();
    let vendor = crate::sysinfo::cpu::cpuinfo_field(&cpuinfo, "vendor_id");
    if vendor != Some("GenuineIntel") {
        return Some(format!(
            "`{}` is an Intel MSR ({:#x}); this CPU is {} (/proc/cpuinfo vendor_id)",
            def.name,
            field.addr,
            vendor.unwrap_or("of unknown vendor")
        ));
    }
    let all = cpus(root);
    let first = all.first().copied().unwrap_or(0);
    let Some(cpu) = all
        .iter()
        .copied()
        .find(|c| crate::msr::device(root, *c).exists())
    else {
        return Some(format!(
            "`{}` needs /dev/cpu/{first}/msr: load the msr module (modprobe msr); this \
             machine has none",
            def.name
        ));
    };
    crate::msr::read(&crate::msr::device(root, cpu), field.addr)
        .err()
        .map(|e| format!("`{}` cannot be read: {}", def.name, crate::error_chain(&e)))
}

/// The value of each unit kind for one CPU.
fn unit_of(t: &topology::CpuTopology, kind: UnitKind) -> Option<u32> {
    match kind {
        UnitKind::Package => t.package,
        UnitKind::Die => t.die,
        UnitKind::Module => t.module,
        UnitKind::Core => t.core,
        UnitKind::Node => t.node,
    }
}

/// The CPUs of units (`package1.die0`): each named unit must exist here.
pub fn unit_cpus(root: &Root, parts: &[(UnitKind, Vec<u32>)]) -> Result<Vec<u32>, String> {
    let topo = topology::read(root).map_err(|e| format!("cannot read the topology: {e}"))?;
    for (kind, ids) in parts {
        let mut have: Vec<u32> = topo.iter().filter_map(|t| unit_of(t, *kind)).collect();
        have.sort_unstable();
        have.dedup();
        if let Some(missing) = ids.iter().find(|i| !have.contains(i)) {
            return Err(format!(
                "there is no {}{missing} here ({}s: {})",
                kind.as_str(),
                kind.as_str(),
                if have.is_empty() {
                    "none known".to_string()
                } else {
                    format_cpu_list(&have)
                }
            ));
        }
    }
    let cpus: Vec<u32> = topo
        .iter()
        .filter(|t| {
            parts
                .iter()
                .all(|(k, ids)| unit_of(t, *k).is_some_and(|v| ids.contains(&v)))
        })
        .map(|t| t.cpu)
        .collect();
    if cpus.is_empty() {
        return Err(format!("no CPU is in {}", Units::Of(parts.to_vec())));
    }
    Ok(cpus)
}

/// The uncore domains a scope selects, as (directory, canonical scope text).
fn uncore_domains(
    root: &Root,
    cpus: Option<&[u32]>,
    units: Option<&Units>,
) -> Result<Vec<(String, String)>, String> {
    let mut doms = power::uncore(root);
    if doms.iter().any(|d| d.kind == UncoreKind::Tpmi) {
        doms.retain(|d| d.kind == UncoreKind::Tpmi);
    }
    if doms.is_empty() {
        return Err(format!(
            "this machine has no uncore frequency domains ({} is absent: the \
             intel_uncore_frequency driver is not loaded, or the CPU has no uncore control)",
            power::UNCORE_DIR
        ));
    }
    let pairs_of = |cpus: &[u32]| -> Vec<(Option<u32>, Option<u32>)> {
        topology::read(root)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| cpus.contains(&t.cpu))
            .map(|t| (t.package, t.die))
            .collect()
    };
    let keep: Vec<&power::UncoreDomain> = match (cpus, units) {
        (None, None) | (None, Some(Units::All)) => doms.iter().collect(),
        (Some(c), _) => {
            let pairs = pairs_of(c);
            doms.iter()
                .filter(|d| pairs.contains(&(d.package, d.die)))
                .collect()
        }
        (None, Some(Units::Of(parts))) => {
            let mut others = Vec::new();
            let mut sel: Vec<&power::UncoreDomain> = doms.iter().collect();
            for (kind, ids) in parts {
                let field = |d: &power::UncoreDomain| match kind {
                    UnitKind::Package => Some(d.package),
                    UnitKind::Die => Some(d.die),
                    _ => None,
                };
                if matches!(kind, UnitKind::Package | UnitKind::Die) {
                    let mut have: Vec<u32> = doms.iter().filter_map(|d| field(d)?).collect();
                    have.sort_unstable();
                    have.dedup();
                    if let Some(m) = ids.iter().find(|i| !have.contains(i)) {
                        return Err(format!(
                            "there is no {}{m} with an uncore domain here ({}s: {})",
                            kind.as_str(),
                            kind.as_str(),
                            format_cpu_list(&have)
                        ));
                    }
                    sel.retain(|d| field(d).flatten().is_some_and(|v| ids.contains(&v)));
                } else {
                    others.push((*kind, ids.clone()));
                }
            }
            if !others.is_empty() {
                let pairs = pairs_of(&unit_cpus(root, &others)?);
                sel.retain(|d| pairs.contains(&(d.package, d.die)));
            }
            sel
        }
    };
    if keep.is_empty() {
        return Err("no uncore domain holds these CPUs".into());
    }
    Ok(keep
        .into_iter()
        .map(|d| {
            let scope = match (d.package, d.die) {
                (Some(p), Some(x)) => format!("package{p}.die{x}"),
                _ => d.dir.clone(),
            };
            (d.dir.clone(), scope)
        })
        .collect())
}

/// Why a knob of the table has no file here: the platform or its driver lacks it.
fn lacks(root: &Root, def: &KnobDef, file: &str) -> String {
    let driver = std::fs::read_to_string(
        root.path("/sys/devices/system/cpu/cpufreq/policy0/scaling_driver"),
    )
    .map(|s| s.trim().to_string())
    .unwrap_or_else(|_| "none".into());
    let why =
        if file.contains("intel_pstate") || file.contains("amd_pstate") || file.contains("cpufreq")
        {
            format!(" (cpufreq driver here: {driver})")
        } else {
            String::new()
        };
    format!("this machine lacks `{}`: {file} is absent{why}", def.name)
}

/// Match a name against a pattern; captures of `{X}` in order.
fn match_pattern(pattern: &str, name: &str) -> Option<Vec<(String, String)>> {
    if let Some(prefix) = pattern.strip_suffix("{PATH}") {
        let rest = name.strip_prefix(prefix)?;
        return Some(vec![("PATH".into(), rest.to_string())]);
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let n: Vec<&str> = name.split('.').collect();
    if p.len() != n.len() {
        return None;
    }
    let mut caps = Vec::new();
    for (ps, ns) in p.iter().zip(&n) {
        if let Some(key) = ps.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            if ns.is_empty() || ns.contains('/') {
                return None;
            }
            caps.push((key.to_string(), ns.to_string()));
        } else if ps != ns {
            return None;
        }
    }
    Some(caps)
}

fn fill(pattern: &str, caps: &[(String, String)]) -> String {
    let mut s = pattern.to_string();
    for (k, v) in caps {
        s = s.replace(&format!("{{{k}}}"), v);
    }
    s
}

/// CPU numbers that have a `cpuN` directory.
pub fn cpus(root: &Root) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_dir(root.path("/sys/devices/system/cpu"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_prefix("cpu")?
                        .parse::<u32>()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_unstable();
    out
}

/// cpufreq policies: (policy number, its CPUs).
pub fn policies(root: &Root) -> Vec<(u32, Vec<u32>)> {
    let dir = root.path("/sys/devices/system/cpu/cpufreq");
    let mut out: Vec<(u32, Vec<u32>)> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let n = e
                        .file_name()
                        .to_str()?
                        .strip_prefix("policy")?
                        .parse::<u32>()
                        .ok()?;
                    let cpus = ["related_cpus", "affected_cpus"]
                        .iter()
                        .find_map(|f| std::fs::read_to_string(e.path().join(f)).ok())
                        .map(|t| {
                            t.split_whitespace()
                                .filter_map(|w| w.parse().ok())
                                .collect()
                        })
                        .unwrap_or_else(|| vec![n]);
                    Some((n, cpus))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The registered cpuidle driver, or "none".
pub fn cpuidle_driver(root: &Root) -> String {
    std::fs::read_to_string(root.path("/sys/devices/system/cpu/cpuidle/current_driver"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "none".into())
}

/// The idle states of `cpu` as (K of `stateK`, name), by K; an unreadable name is empty.
/// None when the CPU has no cpuidle directory.
pub(crate) fn idle_states(root: &Root, cpu: u32) -> Option<Vec<(u32, String)>> {
    let dir = root.path(&format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle"));
    let mut states: Vec<(u32, String)> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let k = e
                .file_name()
                .to_str()?
                .strip_prefix("state")?
                .parse()
                .ok()?;
            let n = std::fs::read_to_string(e.path().join("name")).unwrap_or_default();
            Some((k, n.trim().to_string()))
        })
        .collect();
    states.sort();
    Some(states)
}

/// The `stateK` directory of idle state `name` (by name, or `stateK` itself) on `cpu`.
fn idle_state_dir(root: &Root, cpu: u32, name: &str) -> Result<String, String> {
    let mut names = Vec::new();
    let Some(states) = idle_states(root, cpu) else {
        let driver = cpuidle_driver(root);
        return Err(format!(
            "cpu{cpu} has no idle states (cpuidle driver: {driver}; idle is the arch default, \
             idle-state knobs do not exist here)"
        ));
    };
    for (k, n) in &states {
        if name == format!("state{k}") || n == name {
            return Ok(format!("state{k}"));
        }
        names.push(n.clone());
    }
    if let Some((k, _)) = states.iter().find(|(_, n)| n.eq_ignore_ascii_case(name)) {
        return Ok(format!("state{k}"));
    }
    Err(format!(
        "cpu{cpu} has no idle state `{name}` (states: {})",
        names.join(", ")
    ))
}

/// Mount debugfs on /sys/kernel/debug when it is not there (only on the real root, as
/// root), for as long as this process runs: it is unmounted at exit, so reading a sched
/// feature leaves the machine as found.
pub fn ensure_debugfs(root: &Root) {
    if *root != Root::system() || root.path("/sys/kernel/debug/sched").exists() {
        return;
    }
    if !crate::sysinfo::item::is_root() {
        return;
    }
    use rustix::mount::{mount, MountFlags};
    let mounted = mount(
        "debugfs",
        "/sys/kernel/debug",
        "debugfs",
        MountFlags::empty(),
        None,
    )
    .is_ok();
    static UNMOUNT_AT_EXIT: std::sync::Once = std::sync::Once::new();
    if mounted {
        UNMOUNT_AT_EXIT.call_once(|| {
            extern "C" fn unmount() {
                // Lazy: files still open in this process do not keep it mounted.
                let _ = rustix::mount::unmount(
                    c"/sys/kernel/debug",
                    rustix::mount::UnmountFlags::DETACH,
                );
            }
            // SAFETY: registering a plain extern "C" function.
            unsafe { libc::atexit(unmount) };
        });
    }
}

/// Lexically normalise `/sys/...`; `None` when it leaves /sys.
fn normalise_sys(path: &str) -> Option<PathBuf> {
    let mut out: Vec<String> = Vec::new();
    let p = Path::new(path);
    if !p.is_absolute() {
        return None;
    }
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::Normal(s) => out.push(s.to_string_lossy().into_owned()),
            Component::Prefix(_) => return None,
        }
    }
    if out.first().map(String::as_str) != Some("sys") || out.len() < 2 {
        return None;
    }
    Some(PathBuf::from(format!("/{}", out.join("/"))))
}

/// Resolve `sysfs:/sys/PATH`: normalised, inside /sys even after following symlinks.
fn resolve_sysfs(root: &Root, name: &str, path: &str) -> Result<Target, KnobError> {
    let bad = |reason: String| KnobError::Invalid {
        assignment: name.into(),
        reason,
    };
    let norm = normalise_sys(path).ok_or_else(|| {
        bad(format!(
            "`{path}` is not a path under /sys after normalisation"
        ))
    })?;
    let full = root.path(&norm.to_string_lossy());
    let real = full
        .canonicalize()
        .map_err(|e| bad(format!("{}: {}", norm.display(), file::describe(&e))))?;
    let sys_root = root
        .path("/sys")
        .canonicalize()
        .map_err(|e| bad(format!("/sys: {e}")))?;
    if !real.starts_with(&sys_root) {
        return Err(bad(format!(
            "`{}` leads out of /sys (to {}) through a symlink",
            norm.display(),
            real.display()
        )));
    }
    if !real.is_file() {
        return Err(bad(format!("`{}` is not a file", norm.display())));
    }
    Ok(Target {
        knob: format!("sysfs:{}", norm.display()),
        def: KNOBS.iter().find(|d| d.name == "sysfs:{PATH}").unwrap(),
        path: real,
        ty: Type::Text,
        unit: String::new(),
        cpu: None,
        policy: None,
        feature: None,
        dir: None,
    })
}

/// Decide the type of a module parameter from its name and current value.
fn auto_type(name: &str, current: &str) -> (Type, String) {
    for unit in ["ns", "us", "ms"] {
        if name.ends_with(&format!("_{unit}")) {
            return (Type::Int, unit.into());
        }
    }
    if current == "Y" || current == "N" {
        (Type::Bool, String::new())
    } else if current.parse::<i64>().is_ok() {
        (Type::Int, String::new())
    } else {
        (Type::Text, String::new())
    }
}

/// The scope of the knob named `name` (without `@…`), from the table; None for a name the
/// table does not have (or a `sysfs:` path, whose scope is its file).
pub fn scope_of(name: &str) -> Option<Scope> {
    KNOBS
        .iter()
        .filter(|d| !d.name.starts_with("sysfs:"))
        .find(|d| match_pattern(d.name, name).is_some())
        .map(|d| d.scope)
}

/// An assignment as typed (`NAME[@SCOPE]=VALUE`) with its scope said: a knob of CPUs,
/// policies or dies written without `@` applies to all of them, and reads `NAME@all=VALUE`;
/// anything else is returned as it is.
pub fn with_scope(assignment: &str) -> String {
    let Some((name, value)) = assignment.split_once('=') else {
        return assignment.to_string();
    };
    match scope_of(name.trim()) {
        Some(Scope::Cpu | Scope::Policy | Scope::Die) if !name.contains('@') => {
            format!("{}@all={value}", name.trim())
        }
        _ => assignment.to_string(),
    }
}

/// The kernel files of a knob (`NAME[@CPUS]`).
pub fn resolve(root: &Root, id: &KnobId) -> Result<Vec<Target>, KnobError> {
    let full_name = &id.to_string();
    if let Some(path) = id.sysfs_path() {
        return Ok(vec![resolve_sysfs(root, full_name, path)?]);
    }
    let name = id.name();
    let (first, _) = KNOBS
        .iter()
        .filter(|d| !d.name.starts_with("sysfs:"))
        .find_map(|d| match_pattern(d.name, name).map(|c| (d, c)))
        .ok_or_else(|| unknown(root, id))?;
    // Entries of one name are alternatives: the first whose files exist here is the knob.
    let alternatives: Vec<&'static KnobDef> =
        KNOBS.iter().filter(|d| d.name == first.name).collect();
    if alternatives.len() == 1 {
        return resolve_def(root, id, first);
    }
    let mut missing = Vec::new();
    for d in &alternatives {
        match resolve_def(root, id, d) {
            Ok(t) => return Ok(t),
            Err(e) => missing.push((d.file, e)),
        }
    }
    // An alternative whose file exists failed for another reason (a bad scope): say that.
    if let Some(i) = missing.iter().position(|(f, _)| {
        root.path(&fill(f, &[("POLICY".into(), "0".into())]))
            .exists()
    }) {
        return Err(missing.swap_remove(i).1);
    }
    Err(KnobError::Invalid {
        assignment: full_name.clone(),
        reason: lacks(
            root,
            first,
            &alternatives
                .iter()
                .map(|d| d.file.replace("{POLICY}", "N"))
                .collect::<Vec<_>>()
                .join(", nor "),
        ),
    })
}

/// The files of `id` under one table entry.
fn resolve_def(root: &Root, id: &KnobId, def: &'static KnobDef) -> Result<Vec<Target>, KnobError> {
    let full_name = &id.to_string();
    let bad = |reason: String| KnobError::Invalid {
        assignment: full_name.clone(),
        reason,
    };
    let name = id.name();
    let caps = match_pattern(def.name, name).unwrap_or_default();
    let units = id.units();
    let strict = id.cpus().is_some();
    let asked: Option<Vec<u32>> = match (id.cpus(), units) {
        (Some(c), _) => Some(c.to_vec()),
        (None, Some(Units::Of(parts))) if !matches!(def.scope, Scope::Global | Scope::Die) => {
            Some(unit_cpus(root, parts).map_err(bad)?)
        }
        (None, Some(Units::Of(_))) if def.scope == Scope::Global => {
            return Err(bad(format!(
                "`{name}` is one setting for the machine: it takes no @{}",
                units.unwrap()
            )))
        }
        _ => None,
    };
    if def.access == Access::SchedFeature {
        ensure_debugfs(root);
    }
    if let Access::Msr(field) = def.access {
        if let Some(why) = msr_refusal(root, def, field) {
            return Err(bad(why));
        }
    }
    let mut targets = Vec::new();
    let base = |cpu: Option<u32>, policy: Option<u32>, file: String| Target {
        knob: String::new(),
        def,
        path: root.path(&file),
        ty: def.ty,
        unit: def.unit.into(),
        cpu,
        policy,
        feature: caps
            .iter()
            .find(|(k, _)| k == "FEATURE")
            .map(|(_, v)| v.clone()),
        dir: None,
    };
    match def.scope {
        Scope::Global => {
            if asked.is_some() {
                return Err(bad(format!(
                    "`{name}` is one setting for the machine: it takes no @CPUS"
                )));
            }
            let mut t = base(None, None, fill(def.file, &caps));
            t.knob = name.to_string();
            if !t.path.is_file() {
                return Err(match def.access {
                    Access::SchedFeature => bad(format!(
                        "no sched features file ({}): debugfs is not mounted or not readable",
                        def.file
                    )),
                    _ if !def.name.contains('{') => bad(lacks(root, def, def.file)),
                    _ => unknown(root, id),
                });
            }
            if let Some(f) = &t.feature {
                let text = std::fs::read_to_string(&t.path).map_err(|e| {
                    let why = if e.raw_os_error() == Some(libc::EPERM) {
                        "; kernel lockdown blocks writable debugfs files, even for root"
                    } else {
                        ""
                    };
                    bad(format!(
                        "sched features cannot be read here ({}: {}{why})",
                        def.file,
                        file::describe(&e)
                    ))
                })?;
                if file::feature_state(&text, f).is_none() {
                    return Err(unknown(root, id));
                }
            }
            if def.ty == Type::Auto {
                let cur = file::read_raw(&t.path, None).unwrap_or_default();
                let param = caps.last().map(|c| c.1.as_str()).unwrap_or("");
                (t.ty, t.unit) = auto_type(param, &cur);
            }
            targets.push(t);
        }
        Scope::Cpu => {
            let all = cpus(root);
            let list = asked.clone().unwrap_or_else(|| all.clone());
            for cpu in list {
                if !all.contains(&cpu) {
                    return Err(bad(format!(
                        "there is no cpu{cpu} (CPUs here: {})",
                        format_cpu_list(&all)
                    )));
                }
                let mut caps = caps.clone();
                if let Some(state) = caps.iter_mut().find(|(k, _)| k == "STATE") {
                    match idle_state_dir(root, cpu, &state.1) {
                        Ok(dir) => state.1 = dir,
                        Err(e) if strict => return Err(bad(e)),
                        Err(_) => continue,
                    }
                }
                caps.push(("CPU".into(), cpu.to_string()));
                let mut t = base(Some(cpu), None, fill(def.file, &caps));
                t.knob = format!("{name}@{cpu}");
                if !t.is_present() {
                    if !strict {
                        continue;
                    }
                    return Err(bad(match def.access {
                        Access::Online => format!(
                            "cpu{cpu} has no `online` file: it cannot be taken offline or \
                             online (not hot-pluggable)"
                        ),
                        _ => format!("cpu{cpu} has no {}", fill(def.file, &caps)),
                    }));
                }
                targets.push(t);
            }
            if targets.is_empty() {
                return Err(match def.name {
                    "cpuidle.{STATE}.disable" => {
                        let state = caps.iter().find(|c| c.0 == "STATE").unwrap();
                        bad(
                            idle_state_dir(root, all.first().copied().unwrap_or(0), &state.1)
                                .err()
                                .unwrap_or_else(|| "no CPU has this idle state".into()),
                        )
                    }
                    _ if !def.name.contains('{') => bad(lacks(root, def, def.file)),
                    _ => bad(format!("no CPU here has {}", def.file)),
                });
            }
        }
        Scope::Policy => {
            let pols = policies(root);
            if pols.is_empty() {
                return Err(bad("no cpufreq policies here (no cpufreq driver)".into()));
            }
            let asked = asked.clone();
            for (p, pcpus) in &pols {
                if let Some(a) = &asked {
                    if !pcpus.iter().any(|c| a.contains(c)) {
                        continue;
                    }
                }
                let mut caps = caps.clone();
                caps.push(("POLICY".into(), p.to_string()));
                let mut t = base(None, Some(*p), fill(def.file, &caps));
                t.knob = format!("{name}@{}", format_cpu_list(pcpus));
                if !t.path.is_file() {
                    if !strict {
                        continue;
                    }
                    return Err(bad(format!("policy{p} has no {}", fill(def.file, &caps))));
                }
                targets.push(t);
            }
            if targets.is_empty() && !def.name.contains('{') && asked.is_none() {
                return Err(bad(lacks(root, def, def.file)));
            }
            if targets.is_empty() {
                return Err(bad(format!(
                    "no cpufreq policy {} has {}",
                    asked
                        .map(|a| format!("of CPUs {}", format_cpu_list(&a)))
                        .unwrap_or_default(),
                    def.file.rsplit('/').next().unwrap_or("")
                )));
            }
        }
        Scope::Die => {
            for (dir, scope) in uncore_domains(root, id.cpus(), units).map_err(bad)? {
                let mut caps = caps.clone();
                caps.push(("DIR".into(), dir.clone()));
                let mut t = base(None, None, fill(def.file, &caps));
                t.knob = format!("{name}@{scope}");
                t.dir = Some(dir);
                if !t.path.is_file() {
                    return Err(bad(format!("{} is absent", fill(def.file, &caps))));
                }
                targets.push(t);
            }
        }
    }
    Ok(targets)
}

/// The unknown-knob error, with the nearest known name.
fn unknown(root: &Root, id: &KnobId) -> KnobError {
    let base = id.name();
    thread_local!(static LISTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    let mut names: Vec<String> = Vec::new();
    if !LISTING.with(|l| l.replace(true)) {
        names = super::list(root).into_iter().map(|k| k.name).collect();
        LISTING.with(|l| l.set(false));
    }
    names.extend(
        KNOBS
            .iter()
            .filter(|d| !d.name.contains('{'))
            .map(|d| d.name.to_string()),
    );
    let best = names
        .iter()
        .map(|n| {
            let n = n.split('@').next().unwrap_or(n).to_string();
            (super::value::distance(base, &n), n)
        })
        .min();
    let hint = match best {
        Some((d, n)) if d <= base.len().max(4) / 2 + 2 => format!(" (did you mean `{n}`?)"),
        _ => " (see `pmlab knob list`)".into(),
    };
    KnobError::Unknown {
        name: Box::new(id.clone()),
        hint,
    }
}

/// The exact string to write for `value` into `t`, checked against the type, range and the
/// kernel's allowed list.
/// (The reason is a sentence for `KnobError::Invalid`, which names the assignment.)
pub(crate) fn kernel_value(root: &Root, t: &Target, value: &str) -> Result<String, String> {
    if t.def.words.contains(&value) {
        return Ok(value.to_string());
    }
    let fill_p = |p: &str| fill_target(t, p);
    let special;
    let value = match t.def.specials.iter().find(|(w, _)| *w == value) {
        Some((w, Special::File(p))) => {
            special = std::fs::read_to_string(root.path(&fill_p(p)))
                .map(|s| s.trim().to_string())
                .map_err(|_| format!("`{w}`: this machine has no {}", fill_p(p)))?;
            special.as_str()
        }
        Some((_, Special::Value(v))) => v,
        None => value,
    };
    let read_list = |p: &str| {
        std::fs::read_to_string(root.path(&fill_p(p)))
            .map(|s| list_words(&s))
            .unwrap_or_default()
    };
    let out = match t.ty {
        Type::Bool => match parse_bool(value) {
            Some(b) => u8::from(b != t.def.invert).to_string(),
            None => return Err(format!("`{value}` is not a boolean (on/off, 1/0, Y/N)")),
        },
        Type::Int => {
            let v = parse_int(value, &t.unit)?;
            let range = match t.def.allowed {
                Allowed::Range(a, b) => Some((a, b)),
                Allowed::RangeFiles(a, b) => {
                    let num = |p: &str| {
                        std::fs::read_to_string(root.path(&fill_p(p)))
                            .ok()
                            .and_then(|s| s.trim().parse::<i64>().ok())
                    };
                    num(a).zip(num(b))
                }
                _ if !t.unit.is_empty() => Some((0, i64::MAX)),
                _ => None,
            };
            if let Some((a, b)) = range {
                if v < a || v > b {
                    let u = &t.unit;
                    return Err(format!("{v}{u} is out of range {a}{u}..{b}{u}"));
                }
            }
            v.to_string()
        }
        Type::Enum => {
            let (list, range) = match t.def.allowed {
                Allowed::Words(w) => (w.iter().map(|s| s.to_string()).collect(), None),
                Allowed::ListFile(p) => (read_list(p), None),
                Allowed::ListFileOrRange(p, a, b) => (read_list(p), Some((a, b))),
                _ => (Vec::new(), None),
            };
            if list.iter().any(|w| w == value) {
                value.to_string()
            } else if let (Some((a, b)), Ok(n)) = (range, value.parse::<i64>()) {
                if n < a || n > b {
                    return Err(format!("{n} is out of range {a}..{b}"));
                }
                n.to_string()
            } else {
                return Err(format!(
                    "`{value}` is not one of the kernel's allowed values: {}",
                    if list.is_empty() {
                        "(none listed)".to_string()
                    } else {
                        list.join(", ")
                    }
                ));
            }
        }
        Type::Text | Type::Auto => {
            if value.is_empty() || value.contains('\n') {
                return Err("the value must be one non-empty line".into());
            }
            value.to_string()
        }
    };
    if let Access::Msr(f) = t.def.access {
        // A locked field is refused here, before anything of the call is journaled or written.
        let reg = crate::msr::read(&t.path, f.addr).map_err(|e| crate::error_chain(&e))?;
        if let (true, Some(bit)) = (f.is_locked(reg), f.lock) {
            if out.parse::<u64>().ok() != Some(f.get(reg)) {
                return Err(format!(
                    "MSR {:#x} of cpu{} is locked (bit {bit} is set, by the firmware): {} \
                     cannot be changed until reset",
                    f.addr,
                    t.cpu.unwrap_or(0),
                    t.def.name
                ));
            }
        }
    }
    Ok(match &t.feature {
        Some(f) if out == "1" => f.clone(),
        Some(f) => format!("NO_{f}"),
        None => out,
    })
}

/// A file pattern of the table filled in for one target (`{POLICY}`, `{CPU}`, `{DIR}`).
pub fn fill_target(t: &Target, p: &str) -> String {
    p.replace("{POLICY}", &t.policy.unwrap_or(0).to_string())
        .replace("{CPU}", &t.cpu.unwrap_or(0).to_string())
        .replace("{DIR}", t.dir.as_deref().unwrap_or(""))
}

/// Whether a read-back `got` shows that `want` was written (formats differ: `Y` vs `1`).
pub fn same_value(t: &Target, want: &str, got: &str) -> bool {
    if want == got {
        return true;
    }
    match t.ty {
        _ if t.feature.is_some() => false,
        Type::Bool => parse_bool(want).is_some() && parse_bool(want) == parse_bool(got),
        Type::Int => {
            want.parse::<i64>().ok().is_some() && want.parse::<i64>().ok() == got.parse().ok()
        }
        _ => got.split_whitespace().any(|w| w == format!("[{want}]")),
    }
}

#[cfg(test)]
mod scope_tests {
    use super::*;

    #[test]
    fn an_unscoped_knob_of_cpus_reads_at_all() {
        assert_eq!(
            with_scope("cpufreq.epp=performance"),
            "cpufreq.epp@all=performance"
        );
        assert_eq!(
            with_scope("cpuidle.POLL.disable=1"),
            "cpuidle.POLL.disable@all=1"
        );
        assert_eq!(
            with_scope("cpufreq.max_freq@package1=2GHz"),
            "cpufreq.max_freq@package1=2GHz"
        );
        assert_eq!(
            with_scope("haltpoll.guest_halt_poll_ns=200us"),
            "haltpoll.guest_halt_poll_ns=200us"
        );
        assert_eq!(with_scope("no such knob=1"), "no such knob=1");
    }
}
