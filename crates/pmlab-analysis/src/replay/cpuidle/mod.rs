//! Governor replay (`pmlab whatif --governor`): a trace's idle periods, as the idle analysis
//! found them, replayed through a cpuidle governor model (menu, teo, ladder, haltpoll) onto
//! any state table, with the same figures for the trace as recorded, side by side.
//!
//! First-order, as the poll replay: each idle period keeps its length and its wake; what
//! changes is the state the governor picks, the polls that time out, and the tick wakeups a
//! governor that keeps the tick would add. The time till the next timer is the period's own
//! length when a timer ended it, else the end of the CPU's next timer-ended period.

mod governors;
pub mod states;

use self::governors::{Ctx, Haltpoll, Ladder, Menu, Model, Outcome, Teo, KTIME_MAX};
use crate::idle::{self, Periods, Source, IDLE_TASK, UNKNOWN_STATE};
use crate::replay::governor::HaltpollParams;
use crate::stats::select_percentiles;
use crate::table::{Cell, Table};
use crate::wakeups::{self, CauseKind};
use crate::{Missing, Options, Tabular};
use pmlab_kernel::units::Nanos;
use pmlab_trace::Trace;
use serde::Serialize;
use states::StateTable;
use std::collections::{BTreeMap, HashMap};

pub use governors::NO_LATENCY_LIMIT;

/// The kernel version whose governors are modelled.
pub const MODELLED_KERNEL: KernelVersion = KernelVersion {
    major: 6,
    minor: 18,
};

/// A cpuidle governor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Governor {
    /// menu.
    Menu,
    /// teo (timer events oriented).
    Teo,
    /// ladder.
    Ladder,
    /// haltpoll (KVM guests).
    Haltpoll,
}

impl Governor {
    /// Its kernel name.
    pub fn name(self) -> &'static str {
        match self {
            Governor::Menu => "menu",
            Governor::Teo => "teo",
            Governor::Ladder => "ladder",
            Governor::Haltpoll => "haltpoll",
        }
    }
    /// The first kernel release that has it (menu and ladder came with cpuidle).
    pub fn since(self) -> KernelVersion {
        let (major, minor) = match self {
            Governor::Menu | Governor::Ladder => (2, 24),
            Governor::Teo => (5, 1),
            Governor::Haltpoll => (5, 4),
        };
        KernelVersion { major, minor }
    }
}

/// A governor name none of them has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown governor {0:?}: expected menu, teo, ladder or haltpoll")]
pub struct UnknownGovernor(pub String);

impl std::str::FromStr for Governor {
    type Err = UnknownGovernor;
    fn from_str(s: &str) -> Result<Governor, UnknownGovernor> {
        match s.trim() {
            "menu" => Ok(Governor::Menu),
            "teo" => Ok(Governor::Teo),
            "ladder" => Ok(Governor::Ladder),
            "haltpoll" => Ok(Governor::Haltpoll),
            _ => Err(UnknownGovernor(s.to_string())),
        }
    }
}

/// A kernel version, `MAJOR.MINOR` (2.6.24 is written 2.24: cpuidle's first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct KernelVersion {
    /// Major.
    pub major: u32,
    /// Minor (for 2.6.x kernels, x).
    pub minor: u32,
}

impl std::fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.major == 2 {
            write!(f, "2.6.{}", self.minor)
        } else {
            write!(f, "{}.{}", self.major, self.minor)
        }
    }
}

/// A kernel version that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--kernel {0:?}: expected a version such as 6.18 or 5.4.0-rc1")]
pub struct BadKernelVersion(pub String);

impl std::str::FromStr for KernelVersion {
    type Err = BadKernelVersion;
    fn from_str(s: &str) -> Result<KernelVersion, BadKernelVersion> {
        let bad = || BadKernelVersion(s.to_string());
        let nums: Vec<u32> = s
            .trim()
            .split(|c: char| !c.is_ascii_digit())
            .take(3)
            .map(|p| p.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        match nums.as_slice() {
            [2, 6, x, ..] => Ok(KernelVersion {
                major: 2,
                minor: *x,
            }),
            [major, minor, ..] if *major >= 3 => Ok(KernelVersion {
                major: *major,
                minor: *minor,
            }),
            _ => Err(bad()),
        }
    }
}

/// Whether, and how, the tick runs while idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TickMode {
    /// NO_HZ_IDLE: the tick runs when an idle period begins and the governor may stop it.
    Idle,
    /// Already stopped at every selection (`tick_nohz_tick_stopped()`), as on nohz_full CPUs.
    Stopped,
    /// HZ_PERIODIC: never stopped; it wakes the CPU every tick.
    Periodic,
}

/// A tick mode none of them has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--tick {0:?}: expected idle (NO_HZ_IDLE), stopped or periodic")]
pub struct UnknownTickMode(pub String);

impl std::str::FromStr for TickMode {
    type Err = UnknownTickMode;
    fn from_str(s: &str) -> Result<TickMode, UnknownTickMode> {
        match s.trim() {
            "idle" | "nohz" => Ok(TickMode::Idle),
            "stopped" => Ok(TickMode::Stopped),
            "periodic" => Ok(TickMode::Periodic),
            _ => Err(UnknownTickMode(s.to_string())),
        }
    }
}

/// What to replay.
#[derive(Debug, Clone)]
pub struct GovConfig {
    /// The governor.
    pub governor: Governor,
    /// The kernel version asked for (its governor set is checked; the model is 6.18's).
    pub kernel: KernelVersion,
    /// The PM QoS resume latency limit (None: no constraint).
    pub latency_limit: Option<Nanos>,
    /// The tick.
    pub tick: TickMode,
    /// `TICK_NSEC` (1e9 / CONFIG_HZ).
    pub tick_ns: u64,
    /// The haltpoll governor's parameters.
    pub haltpoll: HaltpollParams,
    /// What an idle period whose wake source the trace does not show is taken to be.
    pub unknown_wakes: UnknownWakes,
}

/// What a wake the trace shows no source for is taken to be (traces without irq, IPI and
/// timer events): it decides the time till the next timer the governor is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownWakes {
    /// A timer: the next timer is the period's end (the governor knows the future exactly).
    #[default]
    Timer,
    /// Not a timer, and no timer known: the governor has only its history.
    NoTimer,
}

/// An `--unknown-wakes` value none of them has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--unknown-wakes {0:?}: expected timer or no-timer")]
pub struct BadUnknownWakes(pub String);

impl std::str::FromStr for UnknownWakes {
    type Err = BadUnknownWakes;
    fn from_str(s: &str) -> Result<UnknownWakes, BadUnknownWakes> {
        match s.trim() {
            "timer" => Ok(UnknownWakes::Timer),
            "no-timer" => Ok(UnknownWakes::NoTimer),
            _ => Err(BadUnknownWakes(s.to_string())),
        }
    }
}

impl Default for GovConfig {
    fn default() -> GovConfig {
        GovConfig {
            governor: Governor::Menu,
            kernel: MODELLED_KERNEL,
            latency_limit: None,
            tick: TickMode::Idle,
            tick_ns: 4_000_000,
            haltpoll: HaltpollParams::default(),
            unknown_wakes: UnknownWakes::Timer,
        }
    }
}

/// Why a governor replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum GovReplayError {
    /// The governor is not in the kernel version asked for.
    #[error("the {governor} governor is not in Linux {kernel}: it appeared in {since}")]
    NotInKernel {
        /// The governor's name.
        governor: &'static str,
        /// The version asked for.
        kernel: KernelVersion,
        /// Its first version.
        since: KernelVersion,
    },
    /// The trace has no `cpu_idle` events.
    #[error("governor replay needs the idle states the kernel chose: {0}")]
    NoCpuIdle(Missing),
    /// The state table cannot be used.
    #[error(
        "the haltpoll governor needs a polling state 0 and a halt state 1; the table {0} has not"
    )]
    NotHaltpollTable(String),
}

/// How a replayed idle period ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// A timer other than the tick.
    Timer,
    /// The scheduler tick.
    Tick,
    /// Anything else seen (IPI, device IRQ, polling wakeup).
    Other,
    /// No wake source seen (the trace lacks the events).
    Unknown,
}

/// One stretch of idle on one CPU: consecutive `cpu_idle` periods joined where a polling
/// state timed out into another state.
#[derive(Debug, Clone, Copy)]
struct Sleep {
    start: u64,
    len: u64,
    wake: Wake,
    /// The state the recorded wake found the CPU in (IDLE_TASK on idle-task CPUs).
    rec_state: u32,
    /// Time till the next timer at `start` (KTIME_MAX: none known).
    sleep_length: u64,
}

/// One state's figures, recorded or replayed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StateFigures {
    /// Entries.
    pub entries: u64,
    /// Time in the state, ns.
    pub time_ns: u64,
    /// Of all entries.
    pub entries_share: f64,
    /// Of all idle time.
    pub time_share: f64,
    /// Too deep: left before its target residency while a shallower state was enabled.
    pub above: Option<u64>,
    /// Too shallow: a deeper enabled state's target residency would have fit.
    pub below: Option<u64>,
    /// Wakeups that found the CPU in this state.
    pub wakes: u64,
    /// Energy at the state's power, mJ (None without powers).
    pub energy_mj: Option<f64>,
}

/// One row of the side-by-side table.
#[derive(Debug, Clone, Serialize)]
pub struct StateRow {
    /// Index in the replay's table.
    pub index: u32,
    /// Name in the replay's table (and the recorded one's, when it differs).
    pub name: String,
    /// Exit latency in the replay's table, ns.
    pub exit_latency_ns: Option<u64>,
    /// Target residency in the replay's table, ns.
    pub target_residency_ns: Option<u64>,
    /// As recorded (by the trace's state index).
    pub recorded: StateFigures,
    /// As replayed.
    pub replayed: StateFigures,
}

/// Exit latencies paid by wakeups.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LatencyPaid {
    /// Wakeups counted.
    pub wakes: u64,
    /// Median, ns.
    pub p50_ns: Option<u64>,
    /// 99th percentile, ns.
    pub p99_ns: Option<u64>,
    /// Sum, ns.
    pub total_ns: u64,
}

/// Agreement of the replay with the recorded choices, for one recorded state.
#[derive(Debug, Clone, Serialize)]
pub struct Agreement {
    /// The recorded state's index.
    pub state: u32,
    /// Its name.
    pub name: String,
    /// Idle periods whose wake found the CPU in it.
    pub periods: u64,
    /// Of those, the replay chose the same state.
    pub same: u64,
    /// What the replay chose instead, most frequent first: (state name, count).
    pub instead: Vec<(String, u64)>,
}

/// The governor replay's result.
#[derive(Debug, Clone, Serialize)]
pub struct GovernorReport {
    /// The governor replayed.
    pub governor: Governor,
    /// The kernel version whose code is modelled.
    pub modelled_kernel: KernelVersion,
    /// The state table replayed onto.
    pub table: StateTable,
    /// The table the recorded states are read with.
    pub recorded_table: String,
    /// The trace's span, ns.
    pub span_ns: u64,
    /// CPUs replayed.
    pub cpus: Vec<u32>,
    /// Idle periods replayed (recorded polls that timed out joined to what followed).
    pub periods: u64,
    /// Per state, recorded and replayed.
    pub states: Vec<StateRow>,
    /// Exit latency paid by wakeups, as recorded (cpu_idle CPUs only).
    pub recorded_latency: LatencyPaid,
    /// Exit latency paid by wakeups, replayed.
    pub replayed_latency: LatencyPaid,
    /// Energy over all states, mJ, as recorded and replayed (None without powers).
    pub energy_mj: (Option<f64>, Option<f64>),
    /// Polls that ran out of time in the replay.
    pub poll_timeouts: u64,
    /// Tick wakeups the replay adds (the governor kept the tick through a period).
    pub tick_wakeups_added: u64,
    /// Wakeups that would have paid more exit latency than recorded: count, extra ns in all,
    /// the largest extra, ns. Each delays what followed: first-order leaves it unmoved.
    pub slower_wakes: (u64, u64, u64),
    /// Per recorded state, how often the replay chose it again (when both tables are one).
    pub agreement: Vec<Agreement>,
    /// Share of idle periods whose wake found the replay in the recorded state.
    pub agreement_share: Option<f64>,
    /// Caveats.
    pub notes: Vec<String>,
}

/// Tables the idle analysis found for the recorded side (by the trace's state index).
fn recorded_figures(
    trace: &Trace,
    opts: &Options,
    p: &Periods,
    rec: &StateTable,
) -> BTreeMap<u32, StateFigures> {
    let o = Options {
        states: Some(rec.infos()),
        ..opts.clone()
    };
    let r = idle::report(trace, &o, p);
    let mut m: BTreeMap<u32, StateFigures> = BTreeMap::new();
    for c in r.cpus.iter().filter(|c| c.source == Source::CpuIdle) {
        for s in c.states.iter().filter(|s| s.state < UNKNOWN_STATE) {
            let f = m.entry(s.state).or_default();
            f.entries += s.entries;
            f.time_ns += s.time_ns;
            f.above = Some(f.above.unwrap_or(0) + s.above.unwrap_or(0));
            f.below = Some(f.below.unwrap_or(0) + s.below.unwrap_or(0));
            if s.above.is_none() {
                f.above = None;
                f.below = None;
            }
        }
    }
    m
}

/// Per CPU, the idle periods joined into sleeps, each with its wake and sleep length.
fn sleeps(
    p: &Periods,
    causes: Option<&HashMap<(u32, u64), Wake>>,
    rec: &StateTable,
    unknown: UnknownWakes,
) -> BTreeMap<u32, Vec<Sleep>> {
    // A poll that timed out and the state entered right after it are one stretch of idle.
    const JOIN_NS: u64 = 5_000;
    let polling = |s: u32| rec.states.get(s as usize).is_some_and(|st| st.polling);
    let mut out = BTreeMap::new();
    for (&cpu, ps) in &p.by_cpu {
        let mut v: Vec<Sleep> = Vec::with_capacity(ps.len());
        let mut prev: Option<(u32, u64)> = None;
        for q in ps
            .iter()
            .filter(|q| q.complete() && q.state != UNKNOWN_STATE)
        {
            let wake = match causes {
                None => Wake::Unknown,
                Some(c) => c.get(&(cpu, q.end)).copied().unwrap_or(Wake::Other),
            };
            let joined = matches!(prev, Some((s, end)) if polling(s) && q.start.saturating_sub(end) < JOIN_NS);
            match v.last_mut() {
                Some(last) if joined => {
                    last.len = q.end - last.start;
                    last.wake = wake;
                    last.rec_state = q.state;
                }
                _ => v.push(Sleep {
                    start: q.start,
                    len: q.len(),
                    wake,
                    rec_state: q.state,
                    sleep_length: KTIME_MAX,
                }),
            }
            prev = Some((q.state, q.end));
        }
        // The time till the next timer: the period's own length when a timer ended it
        // (or, with no wake source seen, when `unknown` says to assume one did); else the end
        // of the CPU's next period a timer ended.
        let mut next_timer = KTIME_MAX;
        for s in v.iter_mut().rev() {
            let end = s.start + s.len;
            s.sleep_length = match s.wake {
                Wake::Timer => s.len,
                Wake::Unknown if unknown == UnknownWakes::Timer => s.len,
                Wake::Tick | Wake::Other if next_timer != KTIME_MAX => next_timer - s.start,
                _ => KTIME_MAX,
            };
            if s.wake == Wake::Timer || (s.wake == Wake::Unknown && unknown == UnknownWakes::Timer)
            {
                next_timer = end;
            }
        }
        out.insert(cpu, v);
    }
    out
}

/// What the replay counts per state.
#[derive(Default, Clone)]
struct Tally {
    entries: u64,
    time: u64,
    above: u64,
    below: u64,
    wakes: u64,
}

/// The kernel's above/below rule (cpuidle_enter_state): too deep when left before the
/// target residency while a shallower state is enabled; too shallow when a deeper enabled
/// state's target residency fits the residency less the exit latency.
fn miss(states: &[states::IdleState], idx: usize, residency: u64) -> (bool, bool) {
    let s = &states[idx];
    if residency < s.target_residency.0 {
        return (states[..idx].iter().any(|x| !x.disabled), false);
    }
    if residency > s.exit_latency.0 {
        if let Some(d) = states[idx + 1..].iter().find(|x| !x.disabled) {
            return (false, residency - s.exit_latency.0 >= d.target_residency.0);
        }
    }
    (false, false)
}

fn latency(mut v: Vec<u64>) -> LatencyPaid {
    let total = v.iter().sum();
    let n = v.len() as u64;
    let pct = select_percentiles(&mut v, [50.0, 99.0]);
    LatencyPaid {
        wakes: n,
        p50_ns: pct.map(|p| p[0]),
        p99_ns: pct.map(|p| p[1]),
        total_ns: total,
    }
}

fn model(cfg: &GovConfig, table: &StateTable) -> Box<dyn Model> {
    match cfg.governor {
        Governor::Menu => Box::new(Menu::new()),
        Governor::Teo => Box::new(Teo::new(table.states.len())),
        Governor::Ladder => Box::new(Ladder::new(&table.states)),
        Governor::Haltpoll => Box::new(Haltpoll::new(cfg.haltpoll)),
    }
}

/// `cpuidle_poll_time()` when the governor sets no limit: TICK_NSEC/16, or the target
/// residency of the first enabled non-polling state when that is shorter (and ≥ 10 µs).
fn default_poll_limit(table: &StateTable, tick_ns: u64) -> u64 {
    let mut limit = tick_ns / 16;
    if let Some(s) = table
        .states
        .iter()
        .skip(1)
        .filter(|s| !s.disabled)
        .find(|s| s.target_residency.0 >= 10_000)
    {
        limit = limit.min(s.target_residency.0);
    }
    limit.max(1)
}

/// Replay `trace` under `cfg` onto `table`; `recorded` is the table the trace's state indices
/// refer to (the recorded machine's).
pub fn replay(
    trace: &Trace,
    opts: &Options,
    cfg: &GovConfig,
    table: &StateTable,
    recorded: &StateTable,
) -> Result<GovernorReport, GovReplayError> {
    let since = cfg.governor.since();
    if cfg.kernel < since {
        return Err(GovReplayError::NotInKernel {
            governor: cfg.governor.name(),
            kernel: cfg.kernel,
            since,
        });
    }
    if cfg.governor == Governor::Haltpoll && (table.states.len() < 2 || !table.states[0].polling) {
        return Err(GovReplayError::NotHaltpollTable(table.source.clone()));
    }
    let no_cpu_idle =
        || GovReplayError::NoCpuIdle(Missing::new("governor replay", &["power:cpu_idle"]));
    let p = idle::periods(trace, opts).map_err(|_| no_cpu_idle())?;
    if !p.source.values().any(|s| *s == Source::CpuIdle) {
        return Err(no_cpu_idle());
    }
    let mut notes = Vec::new();
    if cfg.kernel != MODELLED_KERNEL {
        notes.push(format!(
            "the {} governor modelled is Linux {MODELLED_KERNEL}'s; Linux {}'s differs in detail",
            cfg.governor.name(),
            cfg.kernel
        ));
    }
    let causes = match wakeups::exits(trace, opts, &p) {
        Ok(exits) => Some(
            exits
                .into_iter()
                .map(|e| {
                    let w = match e.cause.kind {
                        CauseKind::Timer if e.cause.detail.contains("tick_sched_timer") => {
                            Wake::Tick
                        }
                        CauseKind::Timer => Wake::Timer,
                        CauseKind::Unknown => Wake::Unknown,
                        _ => Wake::Other,
                    };
                    ((e.cpu, e.exit), w)
                })
                .collect::<HashMap<_, _>>(),
        ),
        Err(m) => {
            notes.push(format!(
                "wake causes unknown ({m}): every idle period is taken to end at its next timer, \
                 which makes the sleep length exact: the replay then knows more than a governor does"
            ));
            None
        }
    };
    if causes
        .as_ref()
        .is_some_and(|c| c.values().all(|w| *w == Wake::Unknown))
    {
        notes.push(
            match cfg.unknown_wakes {
                UnknownWakes::Timer => {
                    "no wake source in the trace (record irq, irq_vectors and timer \
                 events): every idle period is taken to end at its next timer, which makes the \
                 sleep length exact: the replay knows more than a governor does \
                 (--unknown-wakes no-timer for the other bound)"
                }
                UnknownWakes::NoTimer => {
                    "no wake source in the trace (record irq, irq_vectors and \
                 timer events): no timer is known to the governor, which has only its history \
                 (--unknown-wakes timer for the other bound)"
                }
            }
            .into(),
        );
    }
    let mut all = sleeps(&p, causes.as_ref(), recorded, cfg.unknown_wakes);
    // CPUs without cpu_idle have no recorded states to stand beside: replayed only when named.
    let fallback: Vec<u32> = p
        .source
        .iter()
        .filter(|(_, s)| **s == Source::IdleTask)
        .map(|(c, _)| *c)
        .collect();
    if !fallback.is_empty() {
        let list = pmlab_kernel::cpulist::format_cpu_list(&fallback);
        if opts.cpus.is_some() {
            notes.push(format!(
                "CPU {list}: no cpu_idle events; their idle-task periods are replayed, but the \
                 recorded columns and the agreement leave them out"
            ));
        } else {
            all.retain(|c, _| !fallback.contains(c));
            notes.push(format!(
                "CPU {list}: no cpu_idle events (no recorded states to compare): left out; \
                 name them with --cpus to replay their idle-task periods"
            ));
        }
    }
    let same_table = table.states.len() == recorded.states.len()
        && table
            .states
            .iter()
            .zip(&recorded.states)
            .all(|(a, b)| a.name == b.name);
    let latency_req = cfg.latency_limit.map_or(NO_LATENCY_LIMIT, |n| n.0);
    let n = table.states.len();
    let mut tally = vec![Tally::default(); n];
    let (mut rep_lat, mut rec_lat) = (Vec::new(), Vec::new());
    let (mut timeouts, mut ticks) = (0u64, 0u64);
    let (mut slower, mut slower_ns, mut slower_max) = (0u64, 0u64, 0u64);
    let mut agree: BTreeMap<u32, (u64, u64, BTreeMap<usize, u64>)> = BTreeMap::new();
    let mut periods = 0u64;
    let fixed_poll = default_poll_limit(table, cfg.tick_ns);
    for (&cpu, v) in &all {
        let cpu_idle = p.source.get(&cpu) == Some(&Source::CpuIdle);
        let mut m = model(cfg, table);
        for s in v {
            periods += 1;
            let (mut t, mut rem) = (s.start, s.len);
            let mut stopped = cfg.tick == TickMode::Stopped;
            let last = loop {
                let since_start = t - s.start;
                let sl = if s.sleep_length == KTIME_MAX {
                    KTIME_MAX
                } else {
                    s.sleep_length.saturating_sub(since_start)
                };
                let next_tick = (t / cfg.tick_ns + 1) * cfg.tick_ns - t;
                let c = Ctx {
                    states: &table.states,
                    latency_req,
                    tick_stopped: stopped,
                    tick_ns: cfg.tick_ns,
                    sleep_length: sl,
                    delta_tick: if stopped { sl } else { sl.min(next_tick) },
                };
                let (idx, mut stop) = m.select(&c);
                if cfg.tick == TickMode::Periodic {
                    stop = false;
                }
                let st = &table.states[idx];
                let poll = if st.polling {
                    m.poll_limit().unwrap_or(fixed_poll)
                } else {
                    u64::MAX
                };
                let tick = if !stop && !stopped {
                    next_tick
                } else {
                    u64::MAX
                };
                let seg = rem.min(poll).min(tick);
                let (timeout, tick_wake) = (seg < rem && seg == poll, seg < rem && seg != poll);
                let e = &mut tally[idx];
                e.entries += 1;
                e.time += seg;
                let (a, b) = miss(&table.states, idx, seg);
                e.above += u64::from(a);
                e.below += u64::from(b);
                m.reflect(
                    &c,
                    idx,
                    &Outcome {
                        residency: seg,
                        poll_timeout: timeout,
                        tick_wakeup: tick_wake || (seg == rem && s.wake == Wake::Tick),
                    },
                );
                timeouts += u64::from(timeout);
                ticks += u64::from(tick_wake);
                if seg == rem {
                    break idx;
                }
                if stop {
                    stopped = true;
                }
                rem -= seg;
                t += seg;
            };
            tally[last].wakes += 1;
            let paid = table.states[last].exit_latency.0;
            rep_lat.push(paid);
            if !cpu_idle || s.rec_state == IDLE_TASK {
                continue;
            }
            let was = recorded
                .states
                .get(s.rec_state as usize)
                .map(|x| x.exit_latency.0);
            if let Some(was) = was {
                rec_lat.push(was);
                if paid > was {
                    slower += 1;
                    slower_ns += paid - was;
                    slower_max = slower_max.max(paid - was);
                }
            }
            if same_table {
                let a = agree.entry(s.rec_state).or_default();
                a.0 += 1;
                if last as u32 == s.rec_state {
                    a.1 += 1;
                } else {
                    *a.2.entry(last).or_default() += 1;
                }
            }
        }
    }
    // Recorded wakes per state, by the trace's index.
    let mut rec = recorded_figures(trace, opts, &p, recorded);
    for (&cpu, v) in &all {
        if p.source.get(&cpu) != Some(&Source::CpuIdle) {
            continue;
        }
        for s in v {
            rec.entry(s.rec_state).or_default().wakes += 1;
        }
    }
    let energy = |t: &StateTable, k: usize, ns: u64| {
        t.states
            .get(k)
            .and_then(|s| s.power_mw)
            .map(|mw| mw * ns as f64 / 1e9)
    };
    let rec_total: (u64, u64) = rec
        .values()
        .fold((0, 0), |a, f| (a.0 + f.entries, a.1 + f.time_ns));
    for (k, f) in rec.iter_mut() {
        f.entries_share = f.entries as f64 / rec_total.0.max(1) as f64;
        f.time_share = f.time_ns as f64 / rec_total.1.max(1) as f64;
        f.energy_mj = energy(recorded, *k as usize, f.time_ns);
    }
    let rep_total: (u64, u64) = tally
        .iter()
        .fold((0, 0), |a, t| (a.0 + t.entries, a.1 + t.time));
    let mut rows = Vec::new();
    let keys: std::collections::BTreeSet<u32> = (0..n as u32).chain(rec.keys().copied()).collect();
    for k in keys {
        let st = table.states.get(k as usize);
        let rec_name = recorded.states.get(k as usize).map(|s| s.name.as_str());
        let name = match (st, rec_name) {
            (Some(s), Some(r)) if s.name != r => format!("{} (recorded: {r})", s.name),
            (Some(s), _) => s.name.clone(),
            (None, Some(r)) => format!("(recorded: {r})"),
            (None, None) => format!("(recorded: state{k})"),
        };
        let replayed = match tally.get(k as usize) {
            Some(t) => StateFigures {
                entries: t.entries,
                time_ns: t.time,
                entries_share: t.entries as f64 / rep_total.0.max(1) as f64,
                time_share: t.time as f64 / rep_total.1.max(1) as f64,
                above: Some(t.above),
                below: Some(t.below),
                wakes: t.wakes,
                energy_mj: energy(table, k as usize, t.time),
            },
            None => StateFigures::default(),
        };
        rows.push(StateRow {
            index: k,
            name,
            exit_latency_ns: st.map(|s| s.exit_latency.0),
            target_residency_ns: st.map(|s| s.target_residency.0),
            recorded: rec.get(&k).cloned().unwrap_or_default(),
            replayed,
        });
    }
    let sum_energy = |f: &dyn Fn(&StateRow) -> Option<f64>| -> Option<f64> {
        rows.iter()
            .filter(|r| f(r).is_some() || r.replayed.entries + r.recorded.entries > 0)
            .map(f)
            .sum()
    };
    let energy_mj = (
        if recorded.has_powers() {
            sum_energy(&|r| r.recorded.energy_mj.or(Some(0.0)))
        } else {
            None
        },
        if table.has_powers() {
            sum_energy(&|r| r.replayed.energy_mj.or(Some(0.0)))
        } else {
            None
        },
    );
    if slower > 0 {
        notes.push(format!(
            "{slower} wakeups would have paid more exit latency than recorded ({:.1} µs in all, \
             at most {:.1} µs each): each would have delayed what followed it on that CPU, which \
             a first-order replay leaves where it was",
            slower_ns as f64 / 1e3,
            slower_max as f64 / 1e3
        ));
    }
    if !same_table {
        notes.push(format!(
            "the replay's table ({}) is not the recorded one ({}): no agreement is computed",
            table.source, recorded.source
        ));
    }
    let names = |k: usize| {
        table
            .states
            .get(k)
            .map_or_else(|| format!("state{k}"), |s| s.name.clone())
    };
    let agreement: Vec<Agreement> = agree
        .into_iter()
        .map(|(k, (n, same, other))| {
            let mut instead: Vec<(String, u64)> =
                other.into_iter().map(|(i, c)| (names(i), c)).collect();
            instead.sort_by_key(|x| std::cmp::Reverse(x.1));
            Agreement {
                state: k,
                name: names(k as usize),
                periods: n,
                same,
                instead,
            }
        })
        .collect();
    let (an, asame) = agreement
        .iter()
        .fold((0, 0), |a, x| (a.0 + x.periods, a.1 + x.same));
    Ok(GovernorReport {
        governor: cfg.governor,
        modelled_kernel: MODELLED_KERNEL,
        table: table.clone(),
        recorded_table: recorded.source.clone(),
        span_ns: p.span(),
        cpus: all.keys().copied().collect(),
        periods,
        states: rows,
        recorded_latency: latency(rec_lat),
        replayed_latency: latency(rep_lat),
        energy_mj,
        poll_timeouts: timeouts,
        tick_wakeups_added: ticks,
        slower_wakes: (slower, slower_ns, slower_max),
        agreement_share: (an > 0).then(|| asame as f64 / an as f64),
        agreement,
        notes,
    })
}

fn pct(x: f64) -> Cell {
    Cell::Float(x * 100.0)
}

fn us(ns: Option<u64>) -> Cell {
    ns.map_or(Cell::Empty, |v| Cell::Float(v as f64 / 1e3))
}

fn opt_f(v: Option<f64>) -> Cell {
    v.map_or(Cell::Empty, Cell::Float)
}

impl Tabular for GovernorReport {
    fn tables(&self) -> Vec<Table> {
        let mut s = Table::new(
            "whatif_governor_states",
            &format!(
                "Per state: recorded (rec_) and replayed under {} (Linux {}) onto {}",
                self.governor.name(),
                self.modelled_kernel,
                self.table.source
            ),
            &[
                "state",
                "name",
                "exit_us",
                "target_us",
                "rec_entries",
                "entries",
                "rec_use_pct",
                "use_pct",
                "rec_time_pct",
                "time_pct",
                "rec_above",
                "above",
                "rec_below",
                "below",
                "rec_wakes",
                "wakes",
                "rec_energy_mj",
                "energy_mj",
            ],
            2,
        );
        for r in &self.states {
            s.row(vec![
                r.index.into(),
                r.name.as_str().into(),
                us(r.exit_latency_ns),
                us(r.target_residency_ns),
                r.recorded.entries.into(),
                r.replayed.entries.into(),
                pct(r.recorded.entries_share),
                pct(r.replayed.entries_share),
                pct(r.recorded.time_share),
                pct(r.replayed.time_share),
                r.recorded.above.into(),
                r.replayed.above.into(),
                r.recorded.below.into(),
                r.replayed.below.into(),
                r.recorded.wakes.into(),
                r.replayed.wakes.into(),
                opt_f(r.recorded.energy_mj),
                opt_f(r.replayed.energy_mj),
            ]);
        }
        let mut sum = Table::new(
            "whatif_governor_summary",
            "Summary: as recorded and replayed",
            &["metric", "recorded", "replayed"],
            1,
        );
        let lat = |l: &LatencyPaid| [l.wakes.into(), us(l.p50_ns), us(l.p99_ns)];
        let (r, q) = (lat(&self.recorded_latency), lat(&self.replayed_latency));
        for (k, (a, b)) in ["wakes", "exit_latency_p50_us", "exit_latency_p99_us"]
            .into_iter()
            .zip(r.into_iter().zip(q))
        {
            sum.row(vec![k.into(), a, b]);
        }
        sum.row(vec![
            "energy_mj".into(),
            opt_f(self.energy_mj.0),
            opt_f(self.energy_mj.1),
        ]);
        sum.row(vec![
            "poll_timeouts".into(),
            Cell::Empty,
            self.poll_timeouts.into(),
        ]);
        sum.row(vec![
            "tick_wakeups_added".into(),
            Cell::Empty,
            self.tick_wakeups_added.into(),
        ]);
        sum.row(vec![
            "slower_wakes".into(),
            Cell::Empty,
            self.slower_wakes.0.into(),
        ]);
        sum.row(vec![
            "agreement_pct".into(),
            Cell::Empty,
            self.agreement_share.map_or(Cell::Empty, pct),
        ]);
        let mut out = vec![s, sum];
        if !self.agreement.is_empty() {
            let mut a = Table::new(
                "whatif_governor_agreement",
                "Agreement: per recorded state, the replay's choice for the same idle periods",
                &["state", "name", "periods", "same", "same_pct", "instead"],
                1,
            );
            for g in &self.agreement {
                a.row(vec![
                    g.state.into(),
                    g.name.as_str().into(),
                    g.periods.into(),
                    g.same.into(),
                    pct(g.same as f64 / g.periods.max(1) as f64),
                    g.instead
                        .iter()
                        .map(|(n, c)| format!("{n} {c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                        .into(),
                ]);
            }
            out.push(a);
        }
        out
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

#[cfg(test)]
mod tests;
