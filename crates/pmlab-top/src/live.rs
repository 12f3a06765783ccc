//! The live loop of `pmlab top`: the recorder in streaming mode (its per-CPU readers wake
//! on data; this thread flushes them once per refresh), the interval engine, the counters
//! (power where a source exists), pmlab's own wakeups, and the lab's signal watcher. The
//! only periodic wake is the refresh on this (the drawing) thread.

use crate::engine::{Engine, EngineError, Interval};
use pmlab_analysis::{Options, StateInfo};
use pmlab_kernel::counters::{best_energy, delta_metrics, Snapshot};
use pmlab_kernel::units::monotonic_ns;
use pmlab_lab::lab::Lab;
use pmlab_lab::meter::{MeterError, MeterSource, MeterSpec};
use pmlab_trace::record::{RecordError, RecordOptions, RecordSummary, Recorder};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How `pmlab top` runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Time between refreshes (the interval length).
    pub refresh: Duration,
    /// Stop after this long (None: until quit or a signal).
    pub duration: Option<Duration>,
    /// Stop after the first interval.
    pub once: bool,
    /// Keep what was seen as a trace.dat v6 file here.
    pub record: Option<PathBuf>,
    /// Pin the drawing (main) thread to this CPU.
    pub ui_cpu: Option<u32>,
    /// CPUs the recorder's reader threads may run on.
    pub reader_cpus: Option<Vec<u32>>,
    /// Per-CPU ring buffer size (None: the recorder's default).
    pub buffer_kb: Option<u64>,
    /// An external energy meter, read around every interval (it wins over hwmon and RAPL).
    pub meter: Option<MeterSpec>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            refresh: Duration::from_secs(2),
            duration: None,
            once: false,
            record: None,
            ui_cpu: None,
            reader_cpus: None,
            buffer_kb: None,
            meter: None,
        }
    }
}

/// Why `pmlab top` refused or stopped.
#[derive(Debug, thiserror::Error)]
pub enum TopError {
    /// Tracing needs root.
    #[error(
        "pmlab top needs root (it traces through a private tracefs instance); run it with sudo"
    )]
    NotRoot,
    /// A refresh of zero.
    #[error("--refresh must be greater than zero")]
    ZeroRefresh,
    /// A duration of zero.
    #[error("--duration must be greater than zero")]
    ZeroDuration,
    /// The drawing thread's CPU is not an online CPU.
    #[error("--ui-cpu {cpu}: not an online CPU of this machine (online: {online})")]
    BadUiCpu {
        /// The CPU asked for.
        cpu: u32,
        /// The online CPUs, as a list.
        online: String,
    },
    /// The energy meter could not start, died or printed garbage.
    #[error("energy meter")]
    Meter(#[from] MeterError),
    /// The recorder failed (no tracefs, a refused setting, a reader's error).
    #[error("tracing")]
    Record(#[from] RecordError),
    /// The lab's signal watcher could not be installed.
    #[error(transparent)]
    Lab(#[from] pmlab_lab::lab::LabError),
    /// An interval's pages did not decode.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Drawing or printing failed.
    #[error("writing the view")]
    Output(#[source] std::io::Error),
}

/// One refresh: the interval and what was measured beside the trace.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// The interval and its analyses.
    pub interval: Interval,
    /// pmlab's own voluntary context switches (times a thread went to sleep) per second,
    /// all its threads together, counted from /proc/self/task.
    pub own_wakeups_per_s: f64,
    /// The same per thread name, as counts in this interval.
    pub own_wakeups: BTreeMap<String, u64>,
    /// Average power over the interval, W, from the best source present (hwmon, RAPL).
    pub power_w: Option<f64>,
    /// That source's name.
    pub power_source: Option<String>,
    /// The machine's idle states as `pmlab analyze --idle-states` takes them.
    pub idle_states: String,
}

/// What a view does with samples and keys.
pub trait View {
    /// Shows one interval.
    fn sample(&mut self, s: &Sample) -> std::io::Result<()>;
    /// Whether the view reads keys (the terminal UI); a thread then blocks reading them.
    fn wants_keys(&self) -> bool {
        false
    }
    /// A key (or a resize: None); returns false to quit.
    fn key(&mut self, _key: Option<ratatui::crossterm::event::KeyEvent>) -> std::io::Result<bool> {
        Ok(true)
    }
}

/// How a live session ended.
#[derive(Debug)]
pub struct Ended {
    /// Intervals shown.
    pub intervals: u64,
    /// The signal that stopped it, if one did.
    pub signal: Option<i32>,
    /// The recording written with `record`.
    pub recorded: Option<RecordSummary>,
    /// The recorder's notes (events this kernel lacks, ...).
    pub notes: Vec<String>,
}

enum Msg {
    Key(Option<ratatui::crossterm::event::KeyEvent>),
    Signal(i32),
}

/// The machine's idle states (CPU 0's, by index) as the analyses name them, and the
/// `--idle-states` text that gives `pmlab analyze` the same names.
pub fn idle_states(lab: &Lab) -> (BTreeMap<u32, StateInfo>, String) {
    let idle = pmlab_kernel::sysinfo::cpuidle::read(lab.root());
    let mut map = BTreeMap::new();
    let mut spec = Vec::new();
    if let Some(cpu) = idle.cpus.first() {
        for s in &cpu.states {
            map.insert(
                s.index,
                StateInfo {
                    name: s.name.clone(),
                    target_residency_ns: s.residency_us.map(|us| us * 1000),
                },
            );
            spec.push(match s.residency_us {
                Some(us) => format!("{}={}:{us}", s.index, s.name),
                None => format!("{}={}", s.index, s.name),
            });
        }
    }
    (map, spec.join(","))
}

/// Checks what can be checked before anything is touched: root, the refresh, the
/// duration, the drawing thread's CPU.
pub fn check(lab: &Lab, cfg: &Config) -> Result<(), TopError> {
    if cfg.refresh.is_zero() {
        return Err(TopError::ZeroRefresh);
    }
    if cfg.duration.is_some_and(|d| d.is_zero()) {
        return Err(TopError::ZeroDuration);
    }
    if let Some(cpu) = cfg.ui_cpu {
        let online = std::fs::read_to_string(lab.root().path("/sys/devices/system/cpu/online"))
            .unwrap_or_default();
        let cpus = pmlab_kernel::cpulist::parse_cpu_list(online.trim()).unwrap_or_default();
        if !cpus.contains(&cpu) {
            return Err(TopError::BadUiCpu {
                cpu,
                online: online.trim().to_string(),
            });
        }
    }
    if !rustix::process::geteuid().is_root() {
        return Err(TopError::NotRoot);
    }
    Ok(())
}

/// Voluntary context switches of each thread of this process, by thread id.
fn own_switches() -> BTreeMap<u32, (String, u64)> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let n = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        out.insert(tid, (comm.trim().to_string(), n));
    }
    out
}

fn pin_to(cpu: u32) {
    use rustix::thread::{sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    set.set(cpu as usize);
    let _ = sched_setaffinity(None, &set);
}

/// Runs `pmlab top` until quit, a signal, `once` or the duration, showing each interval
/// on `view`. Checks [`check`] first; the tracefs instance is removed on every path (the
/// recorder's stop or drop, and the lab's watcher on signals).
pub fn run(lab: &Lab, cfg: &Config, view: &mut dyn View) -> Result<Ended, TopError> {
    check(lab, cfg)?;
    let (tx, rx) = mpsc::channel::<Msg>();
    let signals = lab.signals();
    let sig_tx = tx.clone();
    // Blocks until the lab's watcher forwards a signal: no periodic wake.
    std::thread::Builder::new()
        .name("pmlab-top-sig".into())
        .spawn(move || {
            for sig in signals {
                if sig_tx.send(Msg::Signal(sig)).is_err() {
                    break;
                }
            }
        })
        .map_err(TopError::Output)?;
    if view.wants_keys() {
        let key_tx = tx.clone();
        // A blocking read: wakes only on a key or a resize.
        std::thread::Builder::new()
            .name("pmlab-top-keys".into())
            .spawn(move || {
                use ratatui::crossterm::event::{read, Event, KeyEventKind};
                while let Ok(ev) = read() {
                    let msg = match ev {
                        Event::Key(k) if k.kind != KeyEventKind::Release => Msg::Key(Some(k)),
                        Event::Resize(..) => Msg::Key(None),
                        _ => continue,
                    };
                    if key_tx.send(msg).is_err() {
                        break;
                    }
                }
            })
            .map_err(TopError::Output)?;
    }
    drop(tx);
    let keep = cfg.record.is_some();
    let output = cfg.record.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("pmlab-top-{}.dat", std::process::id()))
    });
    let (states, states_spec) = idle_states(lab);
    let opts = Options {
        cpus: None,
        states: Some(states).filter(|s| !s.is_empty()),
        top: 10,
    };
    let start = monotonic_ns();
    let mut rec = Recorder::start(
        lab.root(),
        RecordOptions {
            output,
            clock: Some("mono".into()),
            reader_cpus: cfg.reader_cpus.clone(),
            buffer_kb: cfg.buffer_kb,
            ..RecordOptions::default()
        },
    )?;
    let notes = rec.notes().to_vec();
    let (skeleton, layout) = rec.skeleton()?;
    // Pinned after the readers started: they keep the CPUs they were given (or any).
    if let Some(cpu) = cfg.ui_cpu {
        pin_to(cpu);
    }
    let mut engine = Engine::new(skeleton, layout, opts, start);
    let root_dir = lab.root().path("/");
    // Started before the first interval; each interval is one metered window.
    let mut meter = cfg.meter.as_ref().map(MeterSource::start).transpose()?;
    if let Some(m) = &mut meter {
        m.before()?;
    }
    let mut counters = Snapshot::take_at(&root_dir).ok();
    let mut own = own_switches();
    let began = Instant::now();
    let mut deadline = began + cfg.refresh;
    let mut intervals = 0;
    let mut signal = None;
    loop {
        let msg = match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(m) => Some(m),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
        };
        match msg {
            Some(Msg::Signal(s)) => {
                signal = Some(s);
                break;
            }
            Some(Msg::Key(k)) => {
                if !view.key(k).map_err(TopError::Output)? {
                    break;
                }
                continue;
            }
            None => {}
        }
        let to = monotonic_ns();
        let batch = rec.take_pages(keep)?;
        let interval = engine.push_pages(&batch, to)?;
        let secs = (interval.to_ns - interval.from_ns) as f64 / 1e9;
        let now_counters = Snapshot::take_at(&root_dir).ok();
        let (power_w, power_source) = match (&mut meter, &counters, &now_counters) {
            (Some(m), _, _) => {
                let metrics = m.after()?;
                m.before()?;
                let w = metrics.iter().find(|x| x.name == "power.meter.W");
                (w.map(|x| x.value), Some("meter".to_string()))
            }
            (None, Some(a), Some(b)) => power(a, b),
            _ => (None, None),
        };
        counters = now_counters;
        let now_own = own_switches();
        let mut own_wakeups = BTreeMap::new();
        for (tid, (name, n)) in &now_own {
            let before = own.get(tid).map_or(0, |o| o.1);
            *own_wakeups.entry(name.clone()).or_insert(0) += n.saturating_sub(before);
        }
        own = now_own;
        let total: u64 = own_wakeups.values().sum();
        let sample = Sample {
            interval,
            own_wakeups_per_s: total as f64 / secs.max(1e-9),
            own_wakeups,
            power_w,
            power_source,
            idle_states: states_spec.clone(),
        };
        view.sample(&sample).map_err(TopError::Output)?;
        intervals += 1;
        if cfg.once
            || cfg
                .duration
                .is_some_and(|d| began.elapsed() + cfg.refresh / 2 >= d)
        {
            break;
        }
        deadline += cfg.refresh;
    }
    let recorded = if keep { Some(rec.stop()?) } else { None };
    Ok(Ended {
        intervals,
        signal,
        recorded,
        notes,
    })
}

/// Average power between two snapshots from the best source present (hwmon, RAPL).
fn power(a: &Snapshot, b: &Snapshot) -> (Option<f64>, Option<String>) {
    let mut m = delta_metrics(a, b);
    best_energy(&mut m);
    let watts = m
        .iter()
        .find(|x| x.cpu.is_none() && x.name == "power.W")
        .map(|x| x.value);
    let source = m
        .iter()
        .find_map(|x| x.name.strip_prefix("energy.source.").map(String::from));
    (watts, source)
}
