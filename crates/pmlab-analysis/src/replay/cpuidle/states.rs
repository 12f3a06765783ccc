//! Idle-state tables a governor replay runs on: a machine's (`cpuN/cpuidle/stateK` through
//! pmlab-kernel's reader, under any root) or one written by hand in TOML.

use pmlab_kernel::units::Nanos;
use pmlab_kernel::Root;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One idle state as a governor sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleState {
    /// The state's name (`POLL`, `C1`, `WFI`).
    pub name: String,
    /// Exit latency.
    pub exit_latency: Nanos,
    /// Target residency.
    pub target_residency: Nanos,
    /// Power while in the state, mW (for energy), when known.
    pub power_mw: Option<f64>,
    /// A polling state (CPUIDLE_FLAG_POLLING): the CPU spins, up to the poll limit.
    pub polling: bool,
    /// Disabled (by the table's machine or by the replay's input).
    pub disabled: bool,
}

/// A table of idle states, by cpuidle index, and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateTable {
    /// Where it came from (`this machine`, a root's path, a TOML file's path).
    pub source: String,
    /// The states, by index.
    pub states: Vec<IdleState>,
}

/// Why a state table could not be had.
#[derive(Debug, thiserror::Error)]
pub enum StateTableError {
    /// The TOML file cannot be read.
    #[error("cannot read state table {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TOML file does not parse as a state table.
    #[error("state table {path}: {msg}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        msg: String,
    },
    /// A state has no exit latency: a governor cannot choose without one.
    #[error("state table {source_name}: state {index} ({name}) has no exit latency ({field}); every state needs its exit latency and target residency")]
    NoExitLatency {
        /// The table's source.
        source_name: String,
        /// The state's index.
        index: usize,
        /// The state's name.
        name: String,
        /// The file or TOML key that should hold it.
        field: String,
    },
    /// A state has no target residency.
    #[error("state table {source_name}: state {index} ({name}) has no target residency ({field}); every state needs its exit latency and target residency")]
    NoTargetResidency {
        /// The table's source.
        source_name: String,
        /// The state's index.
        index: usize,
        /// The state's name.
        name: String,
        /// The file or TOML key that should hold it.
        field: String,
    },
    /// No CPU under the root has cpuidle states.
    #[error("{0}: no CPU has cpuidle states (no /sys/devices/system/cpu/cpu*/cpuidle/state*): give a state table with --states FILE.toml")]
    NoStates(String),
    /// The table has no states at all.
    #[error("state table {0}: no [[state]] entries")]
    Empty(String),
    /// `--disable` names a state the table does not have.
    #[error("--disable {0:?}: no such state in the table (give a name or an index)")]
    NoSuchState(String),
}

/// The TOML form of one state.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlState {
    name: String,
    exit_latency_us: Option<f64>,
    target_residency_us: Option<f64>,
    power_mw: Option<f64>,
    polling: Option<bool>,
    #[serde(default)]
    disabled: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlTable {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    state: Vec<TomlState>,
}

/// The kernel's name of its polling state.
fn is_poll_name(name: &str) -> bool {
    name == "POLL"
}

fn us_to_ns(us: f64) -> Nanos {
    Nanos((us * 1e3).round() as u64)
}

impl StateTable {
    /// A table written by hand:
    ///
    /// ```toml
    /// name = "Juno r0"          # optional
    /// [[state]]
    /// name = "WFI"
    /// exit_latency_us = 1
    /// target_residency_us = 1
    /// power_mw = 100.0          # optional
    /// polling = false           # optional: default true only for a state named POLL
    /// ```
    pub fn from_toml(text: &str, path: &Path) -> Result<StateTable, StateTableError> {
        let t: TomlTable = toml::from_str(text).map_err(|e| StateTableError::Parse {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?;
        let source = match t.name {
            Some(n) => format!("{n} ({})", path.display()),
            None => path.display().to_string(),
        };
        if t.state.is_empty() {
            return Err(StateTableError::Empty(source));
        }
        let mut states = Vec::new();
        for (index, s) in t.state.into_iter().enumerate() {
            let exit = s
                .exit_latency_us
                .ok_or_else(|| StateTableError::NoExitLatency {
                    source_name: source.clone(),
                    index,
                    name: s.name.clone(),
                    field: "exit_latency_us".into(),
                })?;
            let target =
                s.target_residency_us
                    .ok_or_else(|| StateTableError::NoTargetResidency {
                        source_name: source.clone(),
                        index,
                        name: s.name.clone(),
                        field: "target_residency_us".into(),
                    })?;
            if exit < 0.0 || target < 0.0 || s.power_mw.is_some_and(|p| p < 0.0) {
                return Err(StateTableError::Parse {
                    path: path.to_path_buf(),
                    msg: format!("state {index} ({}): negative value", s.name),
                });
            }
            states.push(IdleState {
                polling: s.polling.unwrap_or_else(|| is_poll_name(&s.name)),
                name: s.name,
                exit_latency: us_to_ns(exit),
                target_residency: us_to_ns(target),
                power_mw: s.power_mw,
                disabled: s.disabled,
            });
        }
        Ok(StateTable { source, states })
    }

    /// Load a TOML table.
    pub fn load(path: &Path) -> Result<StateTable, StateTableError> {
        let text = std::fs::read_to_string(path).map_err(|source| StateTableError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        StateTable::from_toml(&text, path)
    }

    /// The table of the first CPU with cpuidle states under `root` (this machine's with
    /// [`Root::system`]), each state's `disable` kept.
    pub fn of_root(root: &Root) -> Result<StateTable, StateTableError> {
        let source = if root.is_system() {
            "this machine".to_string()
        } else {
            root.path("/").display().to_string()
        };
        let ci = pmlab_kernel::sysinfo::cpuidle::read(root);
        let cpu = ci
            .cpus
            .iter()
            .find(|c| !c.states.is_empty())
            .ok_or_else(|| StateTableError::NoStates(source.clone()))?;
        let file = |k: u32, f: &str| {
            format!(
                "/sys/devices/system/cpu/cpu{}/cpuidle/state{k}/{f}",
                cpu.cpu
            )
        };
        let mut states = Vec::new();
        for (index, s) in cpu.states.iter().enumerate() {
            let exit = s.latency_us.ok_or_else(|| StateTableError::NoExitLatency {
                source_name: source.clone(),
                index,
                name: s.name.clone(),
                field: file(s.index, "latency"),
            })?;
            let target = s
                .residency_us
                .ok_or_else(|| StateTableError::NoTargetResidency {
                    source_name: source.clone(),
                    index,
                    name: s.name.clone(),
                    field: file(s.index, "residency"),
                })?;
            states.push(IdleState {
                polling: is_poll_name(&s.name),
                name: s.name.clone(),
                exit_latency: Nanos(exit * 1000),
                target_residency: Nanos(target * 1000),
                power_mw: None,
                disabled: s.disabled.value().copied().unwrap_or(false),
            });
        }
        Ok(StateTable { source, states })
    }

    /// Disable states by name or index (the replay's input; the table's own stay disabled).
    pub fn disable(&mut self, which: &[String]) -> Result<(), StateTableError> {
        for w in which {
            let w = w.trim();
            let k = self
                .states
                .iter()
                .position(|s| s.name == w)
                .or_else(|| {
                    w.trim_start_matches("state")
                        .parse::<usize>()
                        .ok()
                        .filter(|k| *k < self.states.len())
                })
                .ok_or_else(|| StateTableError::NoSuchState(w.to_string()))?;
            self.states[k].disabled = true;
        }
        Ok(())
    }

    /// Whether every state has a power (energy can be computed).
    pub fn has_powers(&self) -> bool {
        self.states.iter().all(|s| s.power_mw.is_some())
    }

    /// The analyses' view of the table (names and target residencies by index).
    pub fn infos(&self) -> std::collections::BTreeMap<u32, crate::StateInfo> {
        self.states
            .iter()
            .enumerate()
            .map(|(k, s)| {
                (
                    k as u32,
                    crate::StateInfo {
                        name: s.name.clone(),
                        target_residency_ns: Some(s.target_residency.0),
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_table_parses_and_refuses_a_state_without_exit_latency() {
        let p = Path::new("t.toml");
        let t = StateTable::from_toml(
            "[[state]]\nname = \"POLL\"\nexit_latency_us = 0\ntarget_residency_us = 0\n\
             [[state]]\nname = \"C1\"\nexit_latency_us = 2\ntarget_residency_us = 2.5\npower_mw = 10\n",
            p,
        )
        .unwrap();
        assert!(t.states[0].polling && !t.states[1].polling);
        assert_eq!(t.states[1].target_residency, Nanos(2500));
        assert!(!t.has_powers());
        let e = StateTable::from_toml("[[state]]\nname = \"C1\"\ntarget_residency_us = 2\n", p)
            .unwrap_err();
        assert!(matches!(e, StateTableError::NoExitLatency { .. }));
        assert!(e.to_string().contains("exit_latency_us"), "{e}");
        assert!(matches!(
            StateTable::from_toml("name = \"x\"\n", p),
            Err(StateTableError::Empty(_))
        ));
        assert!(matches!(
            StateTable::from_toml("[[state]]\nname = 3\n", p),
            Err(StateTableError::Parse { .. })
        ));
    }

    #[test]
    fn disable_by_name_or_index() {
        let mut t = StateTable::from_toml(
            "[[state]]\nname = \"POLL\"\nexit_latency_us = 0\ntarget_residency_us = 0\n\
             [[state]]\nname = \"C1\"\nexit_latency_us = 2\ntarget_residency_us = 2\n",
            Path::new("t.toml"),
        )
        .unwrap();
        t.disable(&["POLL".into()]).unwrap();
        assert!(t.states[0].disabled);
        t.disable(&["1".into()]).unwrap();
        assert!(t.states[1].disabled);
        assert!(matches!(
            t.disable(&["C6".into()]),
            Err(StateTableError::NoSuchState(_))
        ));
    }
}
