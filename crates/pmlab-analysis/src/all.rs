//! Run a selection of analyses over one trace, sharing the idle periods, and collect their
//! reports, tables and notes. An analysis that lacks events reports `Missing`; the others run.

use crate::crosscheck::{self, CrossReport, Sidecar};
use crate::energy::{self, EnergyReport, Model};
use crate::freq::{self, FreqReport};
use crate::haltpoll::{self, HaltpollReport};
use crate::idle::{self, IdleReport};
use crate::kicks::{self, KicksReport};
use crate::kvm::{self, KvmExits};
use crate::replay::{self, WhatifReport};
use crate::sched::{self, SchedReport};
use crate::table::Table;
use crate::wakeups::{self, WakeupsReport};
use crate::{Missing, Options, Tabular};
use pmlab_trace::Trace;
use serde::Serialize;

/// The analyses `pmlab analyze --only` selects from (hotplug lives in its own module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Analysis {
    /// Idle residency ([`crate::idle`]).
    Idle,
    /// Idle exits and their causes ([`crate::wakeups`]).
    Wakeups,
    /// Hotplug steps ([`crate::hotplug`]).
    Hotplug,
    /// Wakeup latency and run-queue waits ([`crate::sched`]).
    Sched,
    /// Frequency residency ([`crate::freq`]).
    Freq,
    /// Energy from a model ([`crate::energy`]).
    Energy,
    /// haltpoll's poll-limit timeline ([`crate::haltpoll`]).
    Haltpoll,
    /// The idle-polling replay ([`crate::replay`]).
    Whatif,
    /// Idle-balance kicks ([`crate::kicks`]).
    Kicks,
    /// VM exits by reason ([`crate::kvm`]): shown unasked only for traces with `kvm_exit`
    /// events.
    Kvm,
}

/// The analyses' names, in [`Analysis::ALL`] order (for listings, e.g. the Python module's).
pub const KINDS: &[&str] = &[
    "idle", "wakeups", "hotplug", "sched", "freq", "energy", "haltpoll", "whatif", "kicks", "kvm",
];

impl Analysis {
    /// Every analysis, in the order reports list them.
    pub const ALL: [Analysis; 10] = [
        Analysis::Idle,
        Analysis::Wakeups,
        Analysis::Hotplug,
        Analysis::Sched,
        Analysis::Freq,
        Analysis::Energy,
        Analysis::Haltpoll,
        Analysis::Whatif,
        Analysis::Kicks,
        Analysis::Kvm,
    ];

    /// The name `--only` takes and reports use (`idle`, `wakeups`, ...).
    pub fn as_str(self) -> &'static str {
        KINDS[self as usize]
    }

    /// Whether a selection (empty: all analyses) includes this one.
    pub fn selected_in(self, only: &[Analysis]) -> bool {
        only.is_empty() || only.contains(&self)
    }
}

/// An `--only` name that is not an analysis: the analyses, close matches first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct UnknownAnalysis(pub pmlab_trace::names::Unknown);

impl std::str::FromStr for Analysis {
    type Err = UnknownAnalysis;
    fn from_str(s: &str) -> Result<Analysis, UnknownAnalysis> {
        Analysis::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| {
                use pmlab_trace::names::{Known, NameKind, Unknown};
                let known = Analysis::ALL.map(|a| Known::new(a.as_str())).to_vec();
                UnknownAnalysis(Unknown::new(NameKind::Analysis, s, "", known))
            })
    }
}

/// One analysis's outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Outcome<T> {
    /// It ran: its report.
    Done(T),
    /// The trace lacks the events it needs.
    Missing {
        /// Which events, and how to record them.
        missing: Missing,
    },
    /// Not run (the energy analysis without a model).
    Skipped {
        /// Why, and what to give.
        skipped: String,
    },
}

impl<T: Tabular> Outcome<T> {
    /// Its tables and notes for people, under the section title `name`.
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
    /// The report, if the analysis ran.
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
    /// Section title (the analysis's name).
    pub name: String,
    /// Its tables (empty when it did not run).
    pub tables: Vec<Table>,
    /// Its caveats.
    pub notes: Vec<String>,
    /// Why there are no tables (missing events, no model).
    pub problem: Option<String>,
}

/// Everything `pmlab analyze` computed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// What was analysed (trace.dat v6, ftrace text...).
    pub source: String,
    /// CPUs in the trace.
    pub cpus: u32,
    /// Events in the trace.
    pub events: usize,
    /// Last event's timestamp minus the first's, ns.
    pub span_ns: u64,
    /// Idle residency, when selected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<Outcome<IdleReport>>,
    /// Idle exits and their causes, when selected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<Outcome<WakeupsReport>>,
    /// Scheduling latency, when selected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sched: Option<Outcome<SchedReport>>,
    /// Frequency residency, when selected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freq: Option<Outcome<FreqReport>>,
    /// Energy, when selected (skipped without a model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<Outcome<EnergyReport>>,
    /// haltpoll's poll-limit timeline, when selected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub haltpoll: Option<Outcome<HaltpollReport>>,
    /// Trace idle time against the counters, when a sidecar was there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crosscheck: Option<Outcome<CrossReport>>,
    /// What idle polling would have done (the haltpoll governor over the default values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub whatif: Option<Outcome<WhatifReport>>,
    /// Idle-balance kicks and tick balances.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kicks: Option<Outcome<KicksReport>>,
    /// VM exits by reason: when selected by name, or unasked when the trace has `kvm_exit`
    /// events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kvm: Option<Outcome<KvmExits>>,
}

/// Inputs besides the trace.
#[derive(Default)]
pub struct Extras<'a> {
    /// The energy model for the energy analysis; None skips it.
    pub model: Option<&'a Model>,
    /// The counter sidecar for the cross-check: None when absent, Err when unusable.
    pub sidecar: Option<Result<Sidecar, crate::crosscheck::SidecarError>>,
    /// Run every analysis on the calling thread (`pmlab top`: no thread is started and
    /// joined, which would be a wakeup of pmlab's per interval); the results are the same.
    pub serial: bool,
}

/// An analysis started on a scoped thread, or already done on this one ([`Extras::serial`]).
enum Job<'s, T> {
    Done(T),
    Running(std::thread::ScopedJoinHandle<'s, T>),
}

impl<'s, T: Send + 's> Job<'s, T> {
    fn start<'e>(
        sc: &'s std::thread::Scope<'s, 'e>,
        serial: bool,
        f: impl FnOnce() -> T + Send + 's,
    ) -> Job<'s, T> {
        if serial {
            Job::Done(f())
        } else {
            Job::Running(sc.spawn(f))
        }
    }
    fn join(self) -> T {
        match self {
            Job::Done(v) => v,
            Job::Running(h) => joined(h),
        }
    }
}

/// Run the analyses named in `only` (all of them when empty; hotplug is the caller's).
pub fn run(trace: &Trace, opts: &Options, only: &[Analysis], extras: Extras) -> Report {
    let want = |a: Analysis| a.selected_in(only);
    let ev = &trace.events;
    let mut r = Report {
        source: trace.source.clone(),
        cpus: trace.cpus,
        events: ev.len(),
        span_ns: trace.bounds().1 - trace.bounds().0,
        ..Default::default()
    };
    let needs_periods = want(Analysis::Idle)
        || want(Analysis::Wakeups)
        || want(Analysis::Whatif)
        || want(Analysis::Energy)
        || extras.sidecar.is_some();
    let wants_idle_rep = want(Analysis::Idle) || extras.sidecar.is_some();
    // The idle periods, then wakeups beside the idle report, on this thread and one more;
    // sched and freq on another meanwhile, and haltpoll on a third: read once, for its
    // section and for the replay's recorded poll limits.
    let serial = extras.serial;
    let (periods, idle_rep, wake, (sched, freq, kicks), haltpoll) = std::thread::scope(|sc| {
        let haltpoll = (want(Analysis::Haltpoll) || want(Analysis::Whatif))
            .then(|| Job::start(sc, serial, || haltpoll::analyze(trace, opts)));
        let others = Job::start(sc, serial, || {
            (
                want(Analysis::Sched).then(|| sched::analyze(trace, opts)),
                want(Analysis::Freq).then(|| freq::analyze(trace, opts)),
                want(Analysis::Kicks).then(|| kicks::analyze(trace, opts)),
            )
        });
        let periods = needs_periods.then(|| idle::periods(trace, opts));
        let haltpoll = haltpoll.map(Job::join);
        let limits = haltpoll.as_ref().and_then(|h| h.as_ref().ok());
        let (idle_rep, wake) = std::thread::scope(|sc| {
            // The idle report serves the idle section and the counters cross-check only.
            let idle_rep = Job::start(sc, serial, || {
                periods
                    .as_ref()
                    .filter(|_| wants_idle_rep)
                    .map(|p| match p {
                        Ok(p) => Ok(idle::report(trace, opts, p)),
                        Err(m) => Err(m.clone()),
                    })
            });
            // The replay's input comes from the same wakeups walk, with detail.
            let wake = (want(Analysis::Wakeups) || want(Analysis::Whatif)).then(|| {
                match periods.as_ref().expect("computed") {
                    Ok(p) if want(Analysis::Whatif) => {
                        match replay::prepare_with_limits(trace, opts, p, limits) {
                            Ok((w, input)) => (Ok(w), Some(Ok(input))),
                            Err(m) => (wakeups::analyze_with(trace, opts, p), Some(Err(m))),
                        }
                    }
                    Ok(p) => (wakeups::analyze_with(trace, opts, p), None),
                    Err(_) => (
                        wakeups::analyze(trace, opts),
                        want(Analysis::Whatif).then(|| replay::prepare(trace, opts)),
                    ),
                }
            });
            (idle_rep.join(), wake)
        });
        (periods, idle_rep, wake, others.join(), haltpoll)
    });
    let haltpoll = haltpoll.filter(|_| want(Analysis::Haltpoll));
    if want(Analysis::Idle) {
        r.idle = idle_rep.clone().map(outcome);
    }
    let (wake, input) = match wake {
        Some((w, i)) => (Some(w), i),
        None => (None, None),
    };
    if want(Analysis::Wakeups) {
        r.wakeups = wake.map(outcome);
    }
    r.whatif = input.map(|i| outcome(i.map(|i| replay::replay(&i, &replay::Config::default()))));
    r.sched = sched.map(outcome);
    r.freq = freq.map(outcome);
    r.kicks = kicks.map(outcome);
    // Unasked, only where there is something to say: most traces have no VM exits.
    let wants_kvm = only.contains(&Analysis::Kvm) || (only.is_empty() && kvm::has_exits(trace));
    r.kvm = wants_kvm.then(|| outcome(kvm::exits(trace, None)));
    r.haltpoll = haltpoll.map(outcome);
    if want(Analysis::Energy) {
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
                skipped: format!(
                    "counters sidecar unreadable: {}",
                    pmlab_kernel::error_chain(&e)
                ),
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
        if let Some(o) = &self.kicks {
            v.push(o.section("kicks"));
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
        if let Some(o) = &self.whatif {
            v.push(o.section("whatif"));
        }
        if let Some(o) = &self.kvm {
            v.push(o.section("kvm"));
        }
        v
    }
}

/// Whether the analyses in `only` (all when empty) name kernel symbols, so the trace must
/// be opened with kallsyms: only wakeups, kicks and hotplug do.
pub fn needs_kallsyms(only: &[Analysis]) -> bool {
    Analysis::Wakeups.selected_in(only)
        || Analysis::Hotplug.selected_in(only)
        || Analysis::Kicks.selected_in(only)
}

/// What `pmlab analyze` computes for one trace: the analyses of [`run`], and hotplug steps.
/// As JSON: the report's sections with hotplug beside them, written straight out (no value
/// tree first: the haltpoll timeline alone is megabytes).
#[derive(Serialize)]
pub struct Analyzed {
    /// The analyses of [`run`].
    #[serde(flatten)]
    pub report: Report,
    /// Hotplug operations, when selected.
    #[serde(skip_serializing_if = "Option::is_none")]
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
}

/// [`run`] and the hotplug analysis beside it (when selected), as `pmlab analyze` runs them;
/// `hotplug_states` names the cpuhp steps (`N: name` of the recording machine).
pub fn analyze(
    trace: &Trace,
    opts: &Options,
    only: &[Analysis],
    extras: Extras,
    hotplug_states: Option<&[(u32, String)]>,
) -> Analyzed {
    let wants_hotplug = Analysis::Hotplug.selected_in(only);
    let (report, hotplug) = std::thread::scope(|sc| {
        let hotplug = sc.spawn(|| {
            wants_hotplug.then(|| outcome(crate::hotplug::analyze(trace, hotplug_states)))
        });
        (run(trace, opts, only, extras), joined(hotplug))
    });
    Analyzed { report, hotplug }
}
