//! One trace file analysed as `pmlab analyze` and Python's `pmlab.analyze` do: the inputs as
//! people type them (idle-state tables, hotplug state files, a window in trace seconds), the
//! trace loaded with kallsyms only where an analysis names symbols, the counter sidecar, and
//! the differences against a baseline.

use crate::all::{self, Analysis, Analyzed, Extras, Section};
use crate::energy::Model;
use crate::{baseline, crosscheck, Options, StateInfo, Table};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Input refused before or while a trace is read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The trace cannot be read.
    #[error("cannot read trace {}", .path.display())]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Why.
        #[source]
        source: pmlab_trace::TraceError,
    },
    /// The hotplug state file cannot be read.
    #[error("cannot read hotplug states {}", .path.display())]
    HotplugStates {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The hotplug state file has no states in it.
    #[error("{}: has no `N: name` lines (expected a copy of /sys/devices/system/cpu/hotplug/states)", .0.display())]
    NoHotplugStates(PathBuf),
    /// An idle-state table entry that is not `INDEX=NAME[:TARGET_US]`.
    #[error("idle state {0:?} is not INDEX=NAME[:TARGET_US] (an index, a name, a target residency in µs)")]
    BadState(String),
    /// A time that is not trace seconds.
    #[error("{flag} {given:?} is not trace seconds (e.g. 5120.25, at most 9 decimals)")]
    BadSeconds {
        /// The option (`--from`).
        flag: &'static str,
        /// What was given.
        given: String,
    },
    /// A window that ends before it begins.
    #[error("--to must be after --from")]
    EmptyWindow,
}

/// What to compute for a trace file.
#[derive(Default)]
pub struct FileRequest<'a> {
    /// CPUs, idle states, top rows.
    pub opts: Options,
    /// The analyses (empty: all).
    pub only: Vec<Analysis>,
    /// The energy model, for the energy analysis.
    pub model: Option<&'a Model>,
    /// `N: name` of the recording machine's hotplug states, to name cpuhp steps.
    pub hotplug_states: Option<Vec<(u32, String)>>,
    /// Only events in [from, to) ns; `to == u64::MAX`: to the end.
    pub window: Option<(u64, u64)>,
}

/// Analyse the trace at `path`. `last`: nothing follows in this process, so the trace's
/// columns are left to the process's exit instead of being freed.
pub fn analyze_file(path: &Path, req: &FileRequest, last: bool) -> Result<Analyzed, InputError> {
    let load = pmlab_trace::dat::LoadOptions {
        kallsyms: all::needs_kallsyms(&req.only),
        ..Default::default()
    };
    let trace = pmlab_trace::open_with(path, &load).map_err(|source| InputError::Trace {
        path: path.to_path_buf(),
        source,
    })?;
    let trace = match req.window {
        // An open end (`--from` alone) ends after the last event.
        Some((from, u64::MAX)) => {
            let last = trace.events.ts.last().map_or(from, |&t| t + 1);
            trace.window(from, last.max(from + 1))
        }
        Some((from, to)) => trace.window(from, to),
        None => trace,
    };
    let extras = Extras {
        model: req.model,
        // The counters cover the whole recording, not a window of it.
        sidecar: req
            .window
            .is_none()
            .then(|| crosscheck::load(path))
            .flatten(),
        serial: false,
    };
    let hp = req.hotplug_states.as_deref();
    let analyzed = all::analyze(&trace, &req.opts, &req.only, extras, hp);
    if last {
        std::mem::forget(trace);
    }
    Ok(analyzed)
}

/// Each section's tables against the baseline's section of the same name.
pub fn diff_sections(cur: &[Section], base: &[Section]) -> Vec<(String, Vec<Table>)> {
    cur.iter()
        .map(|s| {
            let bt = base
                .iter()
                .find(|x| x.name == s.name)
                .map(|x| x.tables.clone())
                .unwrap_or_default();
            (s.name.clone(), baseline::diff_all(&s.tables, &bt))
        })
        .collect()
}

/// An idle-state table: `INDEX=NAME[:TARGET_RESIDENCY_US],...`.
pub fn parse_states(s: &str) -> Result<BTreeMap<u32, StateInfo>, InputError> {
    let mut m = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || InputError::BadState(part.to_string());
        let (idx, rest) = part.split_once('=').ok_or_else(bad)?;
        let idx: u32 = idx.trim().parse().map_err(|_| bad())?;
        let (name, target) = match rest.split_once(':') {
            Some((n, t)) => {
                let us: f64 = t.trim().parse().map_err(|_| bad())?;
                (n, Some((us * 1e3) as u64))
            }
            None => (rest, None),
        };
        let name = name.trim().to_string();
        m.insert(
            idx,
            StateInfo {
                name,
                target_residency_ns: target,
            },
        );
    }
    Ok(m)
}

/// `N: name` lines of a hotplug/states file.
pub fn read_hotplug_states(path: &Path) -> Result<Vec<(u32, String)>, InputError> {
    let text = std::fs::read_to_string(path).map_err(|source| InputError::HotplugStates {
        path: path.to_path_buf(),
        source,
    })?;
    let states: Vec<(u32, String)> = pmlab_kernel::sysinfo::hotplug_states::parse(&text)
        .into_iter()
        .filter_map(|s| Some((u32::try_from(s.number).ok()?, s.name)))
        .collect();
    if states.is_empty() {
        return Err(InputError::NoHotplugStates(path.to_path_buf()));
    }
    Ok(states)
}

/// Trace seconds (`5120.123456789`) as ns, exactly (no float rounding).
pub fn parse_trace_seconds(flag: &'static str, s: &str) -> Result<u64, InputError> {
    let bad = || InputError::BadSeconds {
        flag,
        given: s.to_string(),
    };
    let (int, frac) = s.trim().split_once('.').unwrap_or((s.trim(), ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 9 {
        return Err(bad());
    }
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return Err(bad());
    }
    let i: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let f: u64 = format!("{frac:0<9}").parse().map_err(|_| bad())?;
    i.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(f))
        .ok_or_else(bad)
}

/// `--from`/`--to` in trace seconds as a window in ns (`None`: the whole trace).
pub fn window(from: Option<&str>, to: Option<&str>) -> Result<Option<(u64, u64)>, InputError> {
    if from.is_none() && to.is_none() {
        return Ok(None);
    }
    let from = from.map(|s| parse_trace_seconds("--from", s)).transpose()?;
    let to = to.map(|s| parse_trace_seconds("--to", s)).transpose()?;
    let (from, to) = (from.unwrap_or(0), to.unwrap_or(u64::MAX));
    if to <= from {
        return Err(InputError::EmptyWindow);
    }
    Ok(Some((from, to)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_as_typed_parse_or_are_refused() {
        assert_eq!(
            parse_trace_seconds("--from", "5120.25").unwrap(),
            5_120_250_000_000
        );
        assert_eq!(parse_trace_seconds("--to", ".000000001").unwrap(), 1);
        assert!(parse_trace_seconds("--to", "1.0000000001").is_err());
        assert!(parse_trace_seconds("--to", "-1").is_err());
        assert!(matches!(
            window(Some("2"), Some("1")),
            Err(InputError::EmptyWindow)
        ));
        assert_eq!(
            window(Some("1"), None).unwrap(),
            Some((1_000_000_000, u64::MAX))
        );
        let s = parse_states("0=POLL:0, 1=C1:2").unwrap();
        assert_eq!(s[&1].name, "C1");
        assert_eq!(s[&1].target_residency_ns, Some(2000));
        assert!(parse_states("x=C1").is_err() && parse_states("1").is_err());
    }
}
