//! Kernel knobs (DESIGN.md §4-5): names declared as data ([`table`]), one generic engine
//! ([`resolve`]), validation of every assignment before any write, and the journaled,
//! always-restored [`Transaction`].

mod assign;
pub mod file;
pub mod haltpoll;
pub mod journal;
pub mod resolve;
pub mod signal;
pub mod table;
mod txn;
pub mod value;

#[cfg(test)]
mod tests;

pub use assign::{Assignment, AssignmentError, KnobId, UnitKind, Units};
pub use resolve::Target;
pub use signal::{has_live_journals, request_stop, restore_live_and_exit, stop_requested};
pub use table::{Access, Allowed, KnobDef, Scope, Type, KNOBS};
pub use txn::Transaction;

use crate::Root;
use std::path::PathBuf;

/// Why a knob operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum KnobError {
    /// A bad assignment or name; nothing was written.
    #[error("`{assignment}`: {reason}")]
    Invalid {
        /// The assignment as given.
        assignment: String,
        /// Why it was refused.
        reason: String,
    },
    /// A name that matches no knob here.
    #[error("unknown knob `{name}`{hint}")]
    Unknown {
        /// The knob as given.
        name: Box<KnobId>,
        /// Close matches or a note, with its leading separator (may be empty).
        hint: String,
    },
    /// Another live pmlab process has this knob in its journal.
    #[error("{knob} is in use by pmlab process {pid} (journal {journal}); nothing was written")]
    Busy {
        /// The knob's canonical name.
        knob: String,
        /// PID of the live pmlab process holding it.
        pid: i32,
        /// That process's journal file.
        journal: String,
    },
    /// A write failed; the knobs of this call already written were put back.
    #[error("{knob}: {step} failed: {reason}; {rollback}")]
    Write {
        /// The knob's canonical name.
        knob: String,
        /// What was being done when it failed (reading the original value, writing, a hotplug step).
        step: String,
        /// Why it failed.
        reason: String,
        /// What happened to the knobs already written (all put back, or which were not).
        rollback: String,
    },
    /// The journal could not be written, read or removed: knobs are not changed without it.
    #[error("journal {path}: {reason}")]
    Journal {
        /// The journal file (or its directory).
        path: String,
        /// What failed.
        reason: String,
    },
    /// Some knobs could not be put back (each named with its reason).
    #[error("restore incomplete: {0}")]
    Restore(String),
    /// A stop signal arrived during the operation; the lab restores and exits.
    #[error("interrupted by a signal: knobs are being restored")]
    Interrupted,
}

/// One resolved write: a target and the exact string for it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file to write.
    pub target: Target,
    /// The exact string written to the kernel file (in the kernel's unit).
    pub value: String,
    /// The assignment it came from.
    pub assignment: Assignment,
}

/// A knob that resolves here, for `pmlab knob list`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KnobInfo {
    /// Canonical name (`cpuidle.POLL.disable@1`).
    pub name: String,
    /// The kernel file, below the root.
    pub file: PathBuf,
    /// Its current content (trimmed), or why it could not be read.
    pub value: String,
    /// What it accepts, for people (`0..4294967295 ns`, `menu|teo|haltpoll`).
    pub allowed: String,
    /// The kernel's unit of the value (`ns`, `us`, `kHz`; empty when none).
    pub unit: String,
    /// One file for the machine, per CPU, or per cpufreq policy.
    pub scope: Scope,
    /// pmlab may write it and its mode has a write bit (the kernel may still refuse a value).
    pub writable: bool,
    /// One line on what the knob does.
    pub help: String,
}

/// Notes on what assignments do beyond their value: haltpoll's parameters only act through
/// the haltpoll cpuidle driver (with another driver, or none, they change a number and not
/// the idle loop), and under it their writes restart the per-CPU windows ([`haltpoll`]).
pub fn effect_notes(root: &Root, assignments: &[Assignment]) -> Vec<String> {
    let driver = resolve::cpuidle_driver(root);
    let touches_haltpoll = assignments
        .iter()
        .any(|a| a.knob().name().starts_with("haltpoll."));
    if !touches_haltpoll {
        Vec::new()
    } else if driver != "haltpoll" {
        vec![format!(
            "haltpoll.* parameters have no effect here: the cpuidle driver is {driver}, not \
             haltpoll, so idle does not poll whatever they say"
        )]
    } else if std::fs::read_to_string(root.path("/sys/devices/system/cpu/cpuidle/current_governor"))
        .is_ok_and(|g| g.trim() == "haltpoll")
    {
        vec![
            "haltpoll.* writes restart every CPU's adaptive poll window at 0 (pmlab switches \
              the cpuidle governor away and back), so a configuration never inherits the \
              previous one's windows"
                .to_string(),
        ]
    } else {
        Vec::new()
    }
}

/// Validate assignments without writing anything.
pub fn validate(root: &Root, assignments: &[Assignment]) -> Result<(), KnobError> {
    plan(root, assignments).map(|_| ())
}

fn is_writable(t: &Target) -> bool {
    use std::os::unix::fs::PermissionsExt;
    t.def.writable
        && t.is_present()
        && std::fs::metadata(&t.path).is_ok_and(|m| m.permissions().mode() & 0o222 != 0)
}

/// Resolve and check every assignment: names, CPUs, values, writability, duplicates,
/// and that at least one CPU stays online. Nothing is written.
pub fn plan(root: &Root, assignments: &[Assignment]) -> Result<Vec<Plan>, KnobError> {
    let mut plans: Vec<Plan> = Vec::new();
    for a in assignments {
        let (name, value) = (a.knob().to_string(), a.value());
        for t in resolve::resolve(root, a.knob())? {
            let bad = |reason: String| KnobError::Invalid {
                assignment: a.to_string(),
                reason,
            };
            if !is_writable(&t) {
                return Err(bad(format!("{} is not writable", t.path.display())));
            }
            let v = resolve::kernel_value(root, &t, value).map_err(|r| {
                bad(if t.knob == name {
                    r
                } else {
                    format!("{}: {r}", t.knob)
                })
            })?;
            if let Some(p) = plans.iter().find(|p| {
                p.target.path == t.path
                    && p.target.feature == t.feature
                    && p.target.def.access == t.def.access
            }) {
                if p.value != v {
                    return Err(bad(format!(
                        "{} is also set by `{}` to another value",
                        t.knob, p.assignment
                    )));
                }
                continue;
            }
            plans.push(Plan {
                target: t,
                value: v,
                assignment: a.clone(),
            });
        }
    }
    check_online(root, &plans)?;
    Ok(plans)
}

/// Refuse plans that would leave no CPU online.
fn check_online(root: &Root, plans: &[Plan]) -> Result<(), KnobError> {
    let mut online: Vec<(u32, bool)> = resolve::cpus(root)
        .into_iter()
        .map(|c| {
            let f = root.path(&format!("/sys/devices/system/cpu/cpu{c}/online"));
            let on = std::fs::read_to_string(f).map_or(true, |s| s.trim() != "0");
            (c, on)
        })
        .collect();
    let mut last = None;
    for p in plans
        .iter()
        .filter(|p| p.target.def.access == Access::Online)
    {
        if let Some(e) = online.iter_mut().find(|e| Some(e.0) == p.target.cpu) {
            e.1 = p.value == "1";
            if p.value == "0" {
                last = Some(p);
            }
        }
    }
    match last {
        Some(p) if !online.iter().any(|e| e.1) => Err(KnobError::Invalid {
            assignment: p.assignment.to_string(),
            reason: format!(
                "offlining {} would leave no CPU online",
                p.target.knob.replace("cpu.online@", "cpu")
            ),
        }),
        _ => Ok(()),
    }
}

/// Current value of one resolved file, as shown to people (`1`/`0` for sched features).
pub fn read_target(t: &Target) -> Result<String, KnobError> {
    let raw = file::read_part(&t.path, t.part()).map_err(|e| KnobError::Invalid {
        assignment: t.knob.clone(),
        reason: format!("reading {}: {}", t.path.display(), file::describe(&e)),
    })?;
    Ok(match &t.feature {
        Some(f) if raw == *f => "1".into(),
        Some(_) => "0".into(),
        None if t.def.invert => match value::parse_bool(&raw) {
            Some(b) => u8::from(!b).to_string(),
            None => raw,
        },
        None => raw,
    })
}

/// Values of every file a knob stands for: (`knob@cpu`, value).
pub fn read_all(root: &Root, knob: &KnobId) -> Result<Vec<(String, String)>, KnobError> {
    resolve::resolve(root, knob)?
        .iter()
        .map(|t| Ok((t.knob.clone(), read_target(t)?)))
        .collect()
}

/// Current value of a knob: the value when all its files agree, else
/// `knob@0=a knob@1=b`.
pub fn read(root: &Root, knob: &KnobId) -> Result<String, KnobError> {
    let all = read_all(root, knob)?;
    if all.iter().all(|(_, v)| *v == all[0].1) {
        Ok(all[0].1.clone())
    } else {
        Ok(all
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "))
    }
}

/// A description of the allowed values of a target.
pub fn allowed_text(root: &Root, t: &Target) -> String {
    let fill = |p: &str| root.path(&resolve::fill_target(t, p));
    let read = |p: &str| std::fs::read_to_string(fill(p)).unwrap_or_default();
    let mut s = match (t.ty, t.def.allowed) {
        (Type::Bool, _) => "0|1".to_string(),
        (_, Allowed::Range(a, b)) => format!("{a}..{b} {}", t.unit),
        (_, Allowed::RangeFiles(a, b)) => {
            format!("{}..{} {}", read(a).trim(), read(b).trim(), t.unit)
        }
        (_, Allowed::ListFile(p)) => value::list_words(&read(p)).join("|"),
        (_, Allowed::Words(w)) => w.join("|"),
        (_, Allowed::ListFileOrRange(p, a, b)) => {
            format!("{}|{a}..{b}", value::list_words(&read(p)).join("|"))
        }
        (Type::Int, _) if t.unit.is_empty() => "integer".into(),
        (Type::Int, _) => format!("0.. {}", t.unit),
        _ => "text".into(),
    };
    for w in t
        .def
        .words
        .iter()
        .chain(t.def.specials.iter().map(|(w, _)| w))
    {
        s.push('|');
        s.push_str(w);
    }
    s.trim().to_string()
}

/// Modules whose parameters [`list_power`] keeps: idle, frequency, RCU, workqueue and KVM.
pub const POWER_MODULES: &[&str] = &[
    "haltpoll",
    "cpuidle",
    "cpuidle_haltpoll",
    "intel_idle",
    "processor",
    "intel_pstate",
    "amd_pstate",
    "cpufreq",
    "rcutree",
    "rcupdate",
    "workqueue",
    "kvm",
    "kvm_intel",
    "kvm_amd",
];

/// [`list`], with module parameters only of [`POWER_MODULES`] unless `all`.
pub fn list_power(root: &Root, all: bool) -> Vec<KnobInfo> {
    list(root)
        .into_iter()
        .filter(|k| {
            all || k.help != "module parameter"
                || POWER_MODULES.contains(&k.name.split('.').next().unwrap_or(""))
        })
        .collect()
}

/// Every knob that resolves here (one entry per file), with its value and allowed values.
pub fn list(root: &Root) -> Vec<KnobInfo> {
    // Names read from the machine are taken as they are (`KnobId::of`): they are not parsed.
    let mut targets: Vec<Target> = Vec::new();
    let mut names: Vec<KnobId> = Vec::new();
    for d in KNOBS {
        match d.name {
            "cpuidle.{STATE}.disable" => {
                for cpu in resolve::cpus(root) {
                    let states = resolve::idle_states(root, cpu).unwrap_or_default();
                    for (k, n) in states {
                        let n = if n.is_empty() || n.contains('.') {
                            format!("state{k}")
                        } else {
                            n
                        };
                        names.push(KnobId::of(format!("cpuidle.{n}.disable"), Some(vec![cpu])));
                    }
                }
            }
            "sched.feature.{FEATURE}" => {
                if *root == Root::system() {
                    resolve::ensure_debugfs(root);
                }
                let text = std::fs::read_to_string(root.path(d.file)).unwrap_or_default();
                for w in text.split_whitespace() {
                    let f = w.strip_prefix("NO_").unwrap_or(w);
                    names.push(KnobId::of(format!("sched.feature.{f}"), None));
                }
            }
            "sysfs:{PATH}" => {}
            "{MODULE}.{PARAM}" => {
                let mods = std::fs::read_dir(root.path("/sys/module"))
                    .map(|rd| rd.flatten().collect::<Vec<_>>())
                    .unwrap_or_default();
                let mut found = Vec::new();
                for m in mods {
                    let Ok(params) = std::fs::read_dir(m.path().join("parameters")) else {
                        continue;
                    };
                    for p in params.flatten() {
                        use std::os::unix::fs::PermissionsExt;
                        let w = p
                            .metadata()
                            .is_ok_and(|x| x.permissions().mode() & 0o200 != 0);
                        let (mn, pn) = (m.file_name(), p.file_name());
                        let (mn, pn) = (mn.to_string_lossy(), pn.to_string_lossy());
                        if w && !mn.contains('.') && !pn.contains('.') {
                            found.push(format!("{mn}.{pn}"));
                        }
                    }
                }
                found.sort();
                names.extend(found.into_iter().map(|n| KnobId::of(n, None)));
            }
            n => names.push(KnobId::of(n.to_string(), None)),
        }
    }
    for n in names {
        if let Ok(ts) = resolve::resolve(root, &n) {
            targets.extend(ts);
        }
    }
    let mut out = Vec::new();
    for t in targets {
        if out.iter().any(|k: &KnobInfo| k.name == t.knob) {
            continue;
        }
        out.push(KnobInfo {
            value: read_target(&t).unwrap_or_else(|e| format!("({e})")),
            allowed: allowed_text(root, &t),
            writable: is_writable(&t),
            unit: t.unit.clone(),
            scope: t.def.scope,
            help: t.def.help.into(),
            file: t.path.clone(),
            name: t.knob,
        });
    }
    out
}
