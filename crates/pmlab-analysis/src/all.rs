//! Run a selection of analyses over one trace, sharing the idle periods, and collect their
//! reports, tables and notes. An analysis that lacks events reports `Missing`; the others run.

use crate::crosscheck::{self, CrossReport, Sidecar};
use crate::energy::{self, EnergyReport, Model};
use crate::freq::{self, FreqReport};
use crate::haltpoll::{self, HaltpollReport};
use crate::idle::{self, IdleReport};
use crate::sched::{self, SchedReport};
use crate::table::Table;
use crate::wakeups::{self, WakeupsReport};
use crate::{Missing, Options, Tabular};
use pmlab_trace::Trace;
use serde::Serialize;

/// The analyses `pmlab analyze --only` selects from (hotplug lives in its own module).
pub const KINDS: &[&str] = &[
    "idle", "wakeups", "hotplug", "sched", "freq", "energy", "haltpoll",
];

/// One analysis's outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Outcome<T> {
    Done(T),
    Missing { missing: Missing },
    Skipped { skipped: String },
}

impl<T: Tabular> Outcome<T> {
    pub fn section(&self, name: &str) -> Section {
        match self {
            Outcome::Done(r) => Section {
                name: name.into(),
                tables: r.tables(),
                notes: r.notes(),
                problem: None,
            },
            Outcome::Missing { missing } => Section {
                name: name.into(),
                tables: vec![],
                notes: vec![],
                problem: Some(missing.to_string()),
            },
            Outcome::Skipped { skipped } => Section {
                name: name.into(),
                tables: vec![],
                notes: vec![],
                problem: Some(format!("{name}: {skipped}")),
            },
        }
    }
    pub fn done(&self) -> Option<&T> {
        match self {
            Outcome::Done(r) => Some(r),
            _ => None,
        }
    }
}

/// The value of a finished scoped thread; its panic goes on in this thread.
pub fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
}

fn outcome<T>(r: Result<T, Missing>) -> Outcome<T> {
    match r {
        Ok(v) => Outcome::Done(v),
        Err(m) => Outcome::Missing { missing: m },
    }
}

/// One analysis's tables for people (and export).
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    pub name: String,
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
    /// Why there are no tables (missing events, no model).
    pub problem: Option<String>,
}

/// Everything `pmlab analyze` computed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub source: String,
    pub cpus: u32,
    pub events: usize,
    pub span_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<Outcome<IdleReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<Outcome<WakeupsReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sched: Option<Outcome<SchedReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freq: Option<Outcome<FreqReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<Outcome<EnergyReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub haltpoll: Option<Outcome<HaltpollReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crosscheck: Option<Outcome<CrossReport>>,
}

/// Inputs besides the trace.
#[derive(Default)]
pub struct Extras<'a> {
    pub model: Option<&'a Model>,
    pub sidecar: Option<Result<Sidecar, String>>,
}

/// Run the analyses named in `only` (all of [`KINDS`] when empty).
pub fn run(trace: &Trace, opts: &Options, only: &[String], extras: Extras) -> Report {
    let want = |k: &str| only.is_empty() || only.iter().any(|o| o == k);
    let ev = &trace.events;
    let mut r = Report {
        source: trace.source.clone(),
        cpus: trace.cpus,
        events: ev.len(),
        span_ns: ev.ts.last().copied().unwrap_or(0) - ev.ts.first().copied().unwrap_or(0),
        ..Default::default()
    };
    let needs_periods =
        want("idle") || want("wakeups") || want("energy") || extras.sidecar.is_some();
    let wants_idle_rep = want("idle") || extras.sidecar.is_some();
    // The idle periods, then wakeups beside the idle report, on this thread and one more;
    // sched, freq and haltpoll on another meanwhile.
    let (periods, idle_rep, wake, (sched, freq, haltpoll)) = std::thread::scope(|sc| {
        let others = sc.spawn(|| {
            (
                want("sched").then(|| sched::analyze(trace, opts)),
                want("freq").then(|| freq::analyze(trace, opts)),
                want("haltpoll").then(|| haltpoll::analyze(trace, opts)),
            )
        });
        let periods = needs_periods.then(|| idle::periods(trace, opts));
        let (idle_rep, wake) = std::thread::scope(|sc| {
            // The idle report serves the idle section and the counters cross-check only.
            let idle_rep = sc.spawn(|| {
                periods
                    .as_ref()
                    .filter(|_| wants_idle_rep)
                    .map(|p| match p {
                        Ok(p) => Ok(idle::report(trace, opts, p)),
                        Err(m) => Err(m.clone()),
                    })
            });
            let wake = want("wakeups").then(|| match periods.as_ref().expect("computed") {
                Ok(p) => wakeups::analyze_with(trace, opts, p),
                Err(_) => wakeups::analyze(trace, opts),
            });
            (joined(idle_rep), wake)
        });
        (periods, idle_rep, wake, joined(others))
    });
    if want("idle") {
        r.idle = idle_rep.clone().map(outcome);
    }
    r.wakeups = wake.map(outcome);
    r.sched = sched.map(outcome);
    r.freq = freq.map(outcome);
    r.haltpoll = haltpoll.map(outcome);
    if want("energy") {
        r.energy = Some(match (extras.model, periods.as_ref().expect("computed")) {
            (None, _) => Outcome::Skipped {
                skipped:
                    "no energy model: give --energy-model FILE (TOML, or a LISA plat_info.yml)"
                        .into(),
            },
            (Some(m), Ok(p)) => outcome(energy::analyze(trace, opts, p, m)),
            (Some(_), Err(e)) => Outcome::Missing {
                missing: Missing {
                    analysis: "energy".into(),
                    ..e.clone()
                },
            },
        });
    }
    match (extras.sidecar, idle_rep) {
        (Some(Ok(s)), Some(Ok(ir))) => {
            r.crosscheck = Some(Outcome::Done(crosscheck::check(&ir, &s)))
        }
        (Some(Err(e)), _) => {
            r.crosscheck = Some(Outcome::Skipped {
                skipped: format!("counters sidecar unreadable: {e}"),
            })
        }
        _ => {}
    }
    r
}

impl Report {
    /// The sections in display order (analyses that ran).
    pub fn sections(&self) -> Vec<Section> {
        let mut v = Vec::new();
        if let Some(o) = &self.idle {
            v.push(o.section("idle"));
        }
        if let Some(o) = &self.crosscheck {
            v.push(o.section("crosscheck"));
        }
        if let Some(o) = &self.wakeups {
            v.push(o.section("wakeups"));
        }
        if let Some(o) = &self.sched {
            v.push(o.section("sched"));
        }
        if let Some(o) = &self.freq {
            v.push(o.section("freq"));
        }
        if let Some(o) = &self.energy {
            v.push(o.section("energy"));
        }
        if let Some(o) = &self.haltpoll {
            v.push(o.section("haltpoll"));
        }
        v
    }
}

/// Whether the analyses in `only` (all when empty) name kernel symbols, so the trace must
/// be opened with kallsyms: only wakeups and hotplug do.
pub fn needs_kallsyms(only: &[String]) -> bool {
    only.is_empty() || only.iter().any(|o| o == "wakeups" || o == "hotplug")
}

/// What `pmlab analyze` computes for one trace: the analyses of [`run`], and hotplug steps.
pub struct Analyzed {
    pub report: Report,
    pub hotplug: Option<Outcome<crate::hotplug::HotplugReport>>,
}

impl Analyzed {
    /// The sections in display order, hotplug last.
    pub fn sections(&self) -> Vec<Section> {
        let mut v = self.report.sections();
        v.extend(self.hotplug.as_ref().map(|h| h.section("hotplug")));
        v
    }
    /// Every table of every section, as `pmlab analyze --export` writes them.
    pub fn tables(&self) -> Vec<Table> {
        self.sections().into_iter().flat_map(|s| s.tables).collect()
    }
    /// The report as JSON, with hotplug beside the others.
    pub fn json(&self) -> serde_json::Result<serde_json::Value> {
        let mut v = serde_json::to_value(&self.report)?;
        if let (Some(h), Some(m)) = (&self.hotplug, v.as_object_mut()) {
            m.insert("hotplug".into(), serde_json::to_value(h)?);
        }
        Ok(v)
    }
}

/// [`run`] and the hotplug analysis beside it (when selected), as `pmlab analyze` runs them;
/// `hotplug_states` names the cpuhp steps (`N: name` of the recording machine).
pub fn analyze(
    trace: &Trace,
    opts: &Options,
    only: &[String],
    extras: Extras,
    hotplug_states: Option<&[(u32, String)]>,
) -> Analyzed {
    let wants_hotplug = only.is_empty() || only.iter().any(|o| o == "hotplug");
    let (report, hotplug) = std::thread::scope(|sc| {
        let hotplug = sc.spawn(|| {
            wants_hotplug.then(|| outcome(crate::hotplug::analyze(trace, hotplug_states)))
        });
        (run(trace, opts, only, extras), joined(hotplug))
    });
    Analyzed { report, hotplug }
}
