//! What else ran during a run's measured part: a [`SideSource`] that reads the kernel's
//! per-CPU accounting (/proc/stat) and the experiment's own CPU time right before and right
//! after it, and reports the CPU time of every other task, per CPU, as side metrics.
//! Nothing is read while the measured part runs: no pmlab wakeup is added to it.
//!
//! Per CPU over the window W between the two reads (see docs/disturbance.md):
//! - busy = W − (idle + iowait): the idle clock is the kernel's nohz idle time, exact to the
//!   moment of reading but printed in clock ticks (10 ms), so one run's value is ±1 tick;
//!   the means over a configuration's runs, which verdicts use, are not biased by it;
//! - the host's share (`steal`) is taken out: with paravirt time accounting the tasks'
//!   runtimes exclude it;
//! - the experiment's own time (pmlab, its threads, its reaped children:
//!   `pmlab_workload::cputime`) is taken out where it ran: on the workload's CPUs first, in
//!   proportion to their busy time, any excess on the other CPUs;
//! - what remains is other tasks, kernel threads and interrupts included.
//!
//! Why not `/proc/PID/stat` of every other task: tasks that start and end within a run (a
//! compiler, a file writer's helpers) would be missed, and they are the usual intruders.

use crate::machine::SideSource;
use pmlab_kernel::counters::{cpu_times_at, CpuTimes, CpuTimesSample};
use pmlab_kernel::{Direction, Metric};
use pmlab_workload::cputime::OwnCpuTime;
use pmlab_workload::ProbeError;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Metric names (`NAME` total, `NAME@cpuN` per CPU).
pub mod names {
    /// Other tasks' CPU time, ms (total: sum over CPUs).
    pub const CPU_MS: &str = "disturbance.cpu_ms";
    /// Other tasks' and the host's share of the window, % (total: mean over CPUs).
    pub const SHARE_PCT: &str = "disturbance.share_pct";
    /// [`SHARE_PCT`] on the workload's CPUs only (per CPU; no total): the verdicts' input.
    pub const WORKLOAD_PCT: &str = pmlab_stats::disturbance::WORKLOAD_PCT;
    /// Mean [`SHARE_PCT`] over the CPUs the workload does not use.
    pub const OTHER_CPUS_PCT: &str = "disturbance.other_cpus_pct";
    /// Time the host ran something else on this vCPU (`steal`), ms.
    pub const STEAL_MS: &str = "disturbance.steal_ms";
    /// Hard-IRQ time, ms (tick-sampled without `CONFIG_IRQ_TIME_ACCOUNTING`).
    pub const IRQ_MS: &str = "disturbance.irq_ms";
    /// Softirq time, ms (as [`IRQ_MS`]).
    pub const SOFTIRQ_MS: &str = "disturbance.softirq_ms";
    /// Idle time with I/O outstanding, ms.
    pub const IOWAIT_MS: &str = "disturbance.iowait_ms";
    /// The experiment's own CPU time, ms.
    pub const OWN_MS: &str = "disturbance.own_ms";
    /// The window the disturbance was measured over, ms.
    pub const WINDOW_MS: &str = "disturbance.window_ms";
    /// How long `--wait-quiet` waited before the run, s.
    pub const WAITED_S: &str = "disturbance.waited_s";
    /// Traced runs: other tasks' time on the workload's CPUs from `sched_switch`, ms.
    pub const TRACED_MS: &str = "disturbance.traced_ms";
    /// Traced runs: `disturbance.task_ms.COMM`, one of the [`TOP_TASKS`](super::TOP_TASKS)
    /// commands whose tasks (all pids of that name) ran longest on the workload's CPUs, ms.
    pub const TASK_MS_PREFIX: &str = "disturbance.task_ms.";
}

/// How many intruders a traced run names.
pub const TOP_TASKS: usize = 5;

/// Both reads of one side of the window.
#[derive(Debug, Clone)]
pub struct Reading {
    /// /proc/stat's per-CPU lines and when they were read.
    pub stat: CpuTimesSample,
    /// The experiment's own CPU time.
    pub own: OwnCpuTime,
}

impl Reading {
    /// Read both now, under `root`: own time first and last around /proc/stat, so that the
    /// reading itself counts as the experiment's.
    pub fn take(root: &std::path::Path) -> Result<Reading, ProbeError> {
        let own = pmlab_workload::cputime::own()?;
        let stat = cpu_times_at(root)?;
        Ok(Reading { stat, own })
    }
}

/// Nanoseconds per /proc/stat clock tick (`USER_HZ`).
pub fn tick_ns() -> u64 {
    1_000_000_000 / rustix::param::clock_ticks_per_second().max(1)
}

/// One CPU's accounting over the window, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct CpuWindow {
    busy: f64,
    steal: f64,
    irq: f64,
    softirq: f64,
    iowait: f64,
    own: f64,
}

/// The disturbance metrics of the window between `before` and `after`, given the CPUs the
/// workload runs on (empty: every CPU) and the length of a /proc/stat tick.
pub fn metrics(before: &Reading, after: &Reading, workload_cpus: &[u32], tick: u64) -> Vec<Metric> {
    let window = after.stat.at.0.saturating_sub(before.stat.at.0) as f64;
    if window <= 0.0 {
        return Vec::new();
    }
    let ticks = |b: &CpuTimes, a: &CpuTimes, f: fn(&CpuTimes) -> u64| {
        f(a).saturating_sub(f(b)) as f64 * tick as f64
    };
    let mut cpus: BTreeMap<u32, CpuWindow> = BTreeMap::new();
    for (c, a) in &after.stat.cpus {
        let Some(b) = before.stat.cpus.get(c) else {
            continue;
        };
        let idle = ticks(b, a, |t| t.idle + t.iowait).min(window);
        let busy = window - idle;
        cpus.insert(
            *c,
            CpuWindow {
                busy,
                steal: ticks(b, a, |t| t.steal).min(busy),
                irq: ticks(b, a, |t| t.irq),
                softirq: ticks(b, a, |t| t.softirq),
                iowait: ticks(b, a, |t| t.iowait),
                own: 0.0,
            },
        );
    }
    if cpus.is_empty() {
        return Vec::new();
    }
    let own = after.own.total().0.saturating_sub(before.own.total().0) as f64;
    let on_workload = |c: &u32| workload_cpus.is_empty() || workload_cpus.contains(c);
    // The experiment's own time, where it could have run: the workload's CPUs first.
    let mut left = own;
    for first in [true, false] {
        let capacity: f64 = cpus
            .iter()
            .filter(|(c, _)| on_workload(c) == first)
            .map(|(_, w)| (w.busy - w.steal - w.own).max(0.0))
            .sum();
        if capacity <= 0.0 || left <= 0.0 {
            continue;
        }
        let given = left.min(capacity);
        for (_, w) in cpus.iter_mut().filter(|(c, _)| on_workload(c) == first) {
            w.own += given * (w.busy - w.steal - w.own).max(0.0) / capacity;
        }
        left -= given;
    }
    let ms = |ns: f64| ns / 1e6;
    let neutral = |name: &str, v: f64, unit: &str| Metric::new(name, v, unit, Direction::Neutral);
    let on = |name: &str, c: u32, v: f64, unit: &str| neutral(name, v, unit).on_cpu(c);
    let mut out = vec![
        neutral(names::WINDOW_MS, ms(window), "ms"),
        neutral(names::OWN_MS, ms(own), "ms"),
    ];
    let other = |w: &CpuWindow| w.busy - w.steal - w.own;
    let share = |w: &CpuWindow| (other(w) + w.steal) / window * 100.0;
    let sum = |f: &dyn Fn(&CpuWindow) -> f64| cpus.values().map(f).sum::<f64>();
    out.push(neutral(names::CPU_MS, ms(sum(&other)), "ms"));
    out.push(neutral(
        names::SHARE_PCT,
        sum(&share) / cpus.len() as f64,
        "%",
    ));
    let rest: Vec<f64> = cpus
        .iter()
        .filter(|(c, _)| !on_workload(c))
        .map(|(_, w)| share(w))
        .collect();
    if !rest.is_empty() {
        out.push(neutral(
            names::OTHER_CPUS_PCT,
            rest.iter().sum::<f64>() / rest.len() as f64,
            "%",
        ));
    }
    out.push(neutral(names::STEAL_MS, ms(sum(&|w| w.steal)), "ms"));
    out.push(neutral(names::IRQ_MS, ms(sum(&|w| w.irq)), "ms"));
    out.push(neutral(names::SOFTIRQ_MS, ms(sum(&|w| w.softirq)), "ms"));
    out.push(neutral(names::IOWAIT_MS, ms(sum(&|w| w.iowait)), "ms"));
    for (&c, w) in &cpus {
        out.push(on(names::CPU_MS, c, ms(other(w)), "ms"));
        out.push(on(names::SHARE_PCT, c, share(w), "%"));
        if on_workload(&c) {
            out.push(on(names::WORKLOAD_PCT, c, share(w), "%"));
        }
        out.push(on(names::STEAL_MS, c, ms(w.steal), "ms"));
        out.push(on(names::IRQ_MS, c, ms(w.irq), "ms"));
        out.push(on(names::SOFTIRQ_MS, c, ms(w.softirq), "ms"));
        out.push(on(names::IOWAIT_MS, c, ms(w.iowait), "ms"));
    }
    out
}

/// The disturbance around each run's measured part, as a side source. Put it last in the
/// list: sources start in order and stop in reverse, so its window holds the least of the
/// other sources' own work.
pub struct DisturbanceSource {
    root: PathBuf,
    workload_cpus: Vec<u32>,
    before: Option<Reading>,
    tick: u64,
}

impl DisturbanceSource {
    /// Read under `root` (`/`, or a fake tree).
    pub fn new(root: PathBuf) -> Self {
        DisturbanceSource {
            root,
            workload_cpus: Vec::new(),
            before: None,
            tick: tick_ns(),
        }
    }
}

impl SideSource for DisturbanceSource {
    fn workload_cpus(&mut self, cpus: &[u32]) {
        self.workload_cpus = cpus.to_vec();
    }
    fn before(&mut self) -> Result<(), ProbeError> {
        self.before = Some(Reading::take(&self.root)?);
        Ok(())
    }
    fn after(&mut self) -> Result<Vec<Metric>, ProbeError> {
        let after = Reading::take(&self.root)?;
        Ok(match self.before.take() {
            Some(b) => metrics(&b, &after, &self.workload_cpus, self.tick),
            None => Vec::new(),
        })
    }
}

/// Who else ran, from a traced run: every task that is not one of `own` (the experiment's
/// tasks, their forks included: `pmlab_analysis::sched::forked_from`), by its time on the
/// workload's CPUs (empty: every CPU) from `sched_switch`. Metrics: [`names::TRACED_MS`] (and
/// per CPU), and the [`TOP_TASKS`] longest-running commands as
/// `disturbance.task_ms.COMM`. Nothing when the trace lacks `sched_switch` or
/// `sched_process_fork` (then the experiment's workers could not be told from the others).
pub fn intruders(trace: &pmlab_trace::Trace, own: &[i32], workload_cpus: &[u32]) -> Vec<Metric> {
    let Ok(ours) = pmlab_analysis::sched::forked_from(trace, own) else {
        return Vec::new();
    };
    let opts = pmlab_analysis::Options {
        cpus: (!workload_cpus.is_empty()).then(|| workload_cpus.iter().copied().collect()),
        ..pmlab_analysis::Options::default()
    };
    let Ok(tasks) = pmlab_analysis::sched::runtime(trace, &opts) else {
        return Vec::new();
    };
    let mut per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
    let mut per_comm: BTreeMap<String, u64> = BTreeMap::new();
    for t in tasks.iter().filter(|t| !ours.contains(&t.pid)) {
        *per_cpu.entry(t.cpu).or_default() += t.ns;
        *per_comm.entry(metric_safe(&t.comm)).or_default() += t.ns;
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    let neutral = |name: String, ns: u64| Metric::new(name, ms(ns), "ms", Direction::Neutral);
    let mut out = vec![neutral(names::TRACED_MS.into(), per_cpu.values().sum())];
    for cpu in opts.cpus.iter().flatten() {
        let ns = per_cpu.get(cpu).copied().unwrap_or(0);
        out.push(neutral(names::TRACED_MS.into(), ns).on_cpu(*cpu));
    }
    let mut top: Vec<(String, u64)> = per_comm.into_iter().filter(|(_, ns)| *ns > 0).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (comm, ns) in top.into_iter().take(TOP_TASKS) {
        out.push(neutral(format!("{}{comm}", names::TASK_MS_PREFIX), ns));
    }
    out
}

/// A command name as part of a metric name: no `@` (the CPU suffix), `,` or `*` (side
/// selections), spaces or control characters.
fn metric_safe(comm: &str) -> String {
    let s: String = comm
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_./:+#".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "_".into()
    } else {
        s
    }
}

/// The experiment's live tasks: this process's threads (`/proc/self/task`).
pub fn own_tasks() -> Vec<i32> {
    let mut out = vec![std::process::id() as i32];
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        out.extend(
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()),
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether a metric is one of the disturbance's (for reports that show them apart).
pub fn is_disturbance(name: &str) -> bool {
    name.starts_with("disturbance.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmlab_kernel::Nanos;

    fn reading(at_ms: u64, own_ms: u64, cpus: &[(u32, CpuTimes)]) -> Reading {
        Reading {
            stat: CpuTimesSample {
                at: Nanos(at_ms * 1_000_000),
                cpus: cpus.iter().copied().collect(),
            },
            own: OwnCpuTime {
                process: Nanos(own_ms * 1_000_000),
                children: Nanos(0),
            },
        }
    }

    fn idle(idle: u64, iowait: u64, steal: u64) -> CpuTimes {
        CpuTimes {
            idle,
            iowait,
            steal,
            ..CpuTimes::default()
        }
    }

    fn get(ms: &[Metric], name: &str, cpu: Option<u32>) -> f64 {
        ms.iter()
            .find(|m| m.name == name && m.cpu == cpu)
            .unwrap_or_else(|| panic!("{name} {cpu:?} in {ms:?}"))
            .value
    }

    const TICK: u64 = 10_000_000;

    #[test]
    fn own_time_is_taken_out_on_the_workloads_cpus_and_the_rest_is_others() {
        // 1 s window, 1 ms ticks... in 10 ms ticks: CPU 0 idle 100 ticks of 100 (quiet),
        // CPU 1 idle 20 ticks (800 ms busy), of which the experiment used 600 ms.
        let b = reading(0, 50, &[(0, idle(0, 0, 0)), (1, idle(0, 0, 0))]);
        let a = reading(1000, 650, &[(0, idle(100, 0, 0)), (1, idle(15, 5, 0))]);
        let m = metrics(&b, &a, &[1], TICK);
        assert_eq!(get(&m, names::OWN_MS, None), 600.0);
        assert!((get(&m, names::CPU_MS, Some(1)) - 200.0).abs() < 1e-9);
        assert!((get(&m, names::CPU_MS, Some(0))).abs() < 1e-9);
        assert!((get(&m, names::WORKLOAD_PCT, Some(1)) - 20.0).abs() < 1e-9);
        assert!(m
            .iter()
            .all(|x| !(x.name == names::WORKLOAD_PCT && x.cpu == Some(0))));
        assert_eq!(get(&m, names::IOWAIT_MS, Some(1)), 50.0);
        assert_eq!(get(&m, names::OTHER_CPUS_PCT, None), 0.0);
        assert!((get(&m, names::SHARE_PCT, None) - 10.0).abs() < 1e-9);
    }

    #[test]
    fn own_time_beyond_the_workloads_cpus_goes_to_the_others_and_steal_is_the_hosts() {
        // CPU 1 fully busy, 100 ms of it stolen by the host; CPU 0 half busy. Own 1200 ms:
        // 900 on CPU 1 (its busy minus steal), 300 on CPU 0, leaving 200 ms of others there.
        let b = reading(0, 0, &[(0, idle(0, 0, 0)), (1, idle(0, 0, 0))]);
        let a = reading(1000, 1200, &[(0, idle(50, 0, 0)), (1, idle(0, 0, 10))]);
        let m = metrics(&b, &a, &[1], TICK);
        assert!((get(&m, names::CPU_MS, Some(1))).abs() < 1e-9);
        assert!((get(&m, names::CPU_MS, Some(0)) - 200.0).abs() < 1e-9);
        assert_eq!(get(&m, names::STEAL_MS, Some(1)), 100.0);
        // The host's share counts as disturbance of the workload's CPU.
        assert!((get(&m, names::WORKLOAD_PCT, Some(1)) - 10.0).abs() < 1e-9);
        assert!((get(&m, names::OTHER_CPUS_PCT, None) - 20.0).abs() < 1e-9);
    }

    #[test]
    fn no_window_or_no_common_cpu_gives_nothing() {
        let b = reading(5, 0, &[(0, idle(0, 0, 0))]);
        assert!(metrics(&b, &b, &[], TICK).is_empty());
        let a = reading(10, 0, &[(1, idle(0, 0, 0))]);
        assert!(metrics(&b, &a, &[], TICK).is_empty());
    }

    #[test]
    fn a_live_reading_of_this_machine_has_every_cpu() {
        let root = PathBuf::from("/");
        let mut s = DisturbanceSource::new(root);
        s.workload_cpus(&[0]);
        s.before().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let m = s.after().unwrap();
        let n = pmlab_workload::allowed_cpus().unwrap().len();
        assert!(
            m.iter()
                .filter(|x| x.name == names::CPU_MS && x.cpu.is_some())
                .count()
                >= n.min(1)
        );
        assert!(get(&m, names::WINDOW_MS, None) >= 30.0);
    }

    #[test]
    fn a_missing_proc_stat_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DisturbanceSource::new(dir.path().to_path_buf());
        let e = pmlab_kernel::error_chain(&*s.before().unwrap_err());
        assert!(e.contains("proc/stat"), "{e}");
    }
}
