//! Scheduling latency: wakeup latency (`sched_waking` → the `sched_switch` that runs the
//! task) and run-queue waits of preempted tasks (switched out runnable → switched back in),
//! per task and overall, as percentiles; and each task's time on each CPU ([`runtime`]),
//! with the tasks forked from given ones ([`forked_from`]), to name who else ran.

use crate::stats::DurationSummary;
use crate::table::Table;
use crate::{Missing, Options, Tabular};
use pmlab_trace::Trace;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeSet;

/// One task's scheduling latencies (or all tasks').
#[derive(Debug, Clone, Serialize)]
pub struct TaskRow {
    /// `comm:pid`, or "all".
    pub task: String,
    /// Wakeup latency: `sched_waking` to the switch that runs it.
    pub wakeup: DurationSummary,
    /// Run-queue waits: preempted runnable until switched back in.
    pub runq: DurationSummary,
}

/// The scheduling analysis's result.
#[derive(Debug, Clone, Serialize)]
pub struct SchedReport {
    /// All tasks together.
    pub overall: TaskRow,
    /// The tasks with the most wakeups (at most `Options::top`).
    pub tasks: Vec<TaskRow>,
    /// Caveats.
    pub notes: Vec<String>,
}

/// A waiting task's entry in a [`PidMap`]: since when, and whether a wakeup began the wait.
fn wait(ts: u64, wakeup: bool) -> u64 {
    ((ts << 1) | u64::from(wakeup)).wrapping_add(1)
}

fn wait_of(v: u64) -> (u64, bool) {
    let v = v.wrapping_sub(1);
    (v >> 1, v & 1 == 1)
}

/// pid → u64 (0: none). Usual pids (below 2^22) index a zeroed table, without hashing; its
/// pages that no pid touches cost nothing. Other pids go to a map.
#[derive(Default)]
struct PidMap {
    direct: Vec<u64>,
    other: FxHashMap<i32, u64>,
}

const DIRECT_PIDS: usize = 1 << 22;

impl PidMap {
    fn slot(&mut self, pid: i32) -> &mut u64 {
        match usize::try_from(pid) {
            Ok(p) if p < DIRECT_PIDS => {
                if p >= self.direct.len() {
                    let mut grown = vec![0u64; (p + 1).next_power_of_two().max(4096)];
                    grown[..self.direct.len()].copy_from_slice(&self.direct);
                    self.direct = grown;
                }
                &mut self.direct[p]
            }
            _ => self.other.entry(pid).or_default(),
        }
    }
    fn take(&mut self, pid: i32) -> u64 {
        match usize::try_from(pid) {
            Ok(p) if p < DIRECT_PIDS => self.direct.get_mut(p).map_or(0, std::mem::take),
            _ => self.other.remove(&pid).unwrap_or(0),
        }
    }
}

/// The scheduling latency analysis.
pub fn analyze(trace: &Trace, opts: &Options) -> Result<SchedReport, Missing> {
    let missing = || Missing::new("sched", &["sched:sched_waking", "sched:sched_switch"]);
    let sw = trace
        .event_id("sched", "sched_switch")
        .ok_or_else(missing)?;
    let wk = trace.event_id("sched", "sched_waking");
    let f = |id: u16, n: &str| trace.field(id, n).ok_or_else(missing);
    let (f_prev, f_state, f_next, f_next_comm) = (
        f(sw, "prev_pid")?,
        f(sw, "prev_state")?,
        f(sw, "next_pid")?,
        f(sw, "next_comm")?,
    );
    let wf = match wk {
        Some(id) => Some((id, f(id, "pid")?, f(id, "target_cpu").ok())),
        None => None,
    };
    let ev = &trace.events;
    // pid → since when it waits to run, and whether a wakeup (else a preemption) began it;
    // a wakeup wins over a preemption.
    let mut waiting = PidMap::default();
    // pid → (comm when first run, wakeup latencies, run-queue waits)
    let mut lat: Vec<(i32, String, Vec<u64>, Vec<u64>)> = Vec::new();
    let mut lat_index = PidMap::default();
    // Per CPU, the pid of its last event: a waiting task that logs an event runs, switch
    // logged or not (some kernels drop the switch out of the idle task).
    let mut current = vec![i32::MIN; ev.cpu_slots()];
    let mut unswitched = 0u64;
    let mut record = |pid: i32, comm: &dyn Fn() -> String, since: u64, ts: u64| {
        let k = lat_index.slot(pid);
        if *k == 0 {
            lat.push((pid, comm(), Vec::new(), Vec::new()));
            *k = lat.len() as u64;
        }
        let e = &mut lat[*k as usize - 1];
        let (t, wakeup) = wait_of(since);
        if wakeup {
            e.2.push(ts - t);
        } else {
            e.3.push(ts - t);
        }
    };
    for i in 0..ev.len() {
        ev.prefetch_ahead(i);
        let id = ev.id[i];
        let (c, pid) = (usize::from(ev.cpu[i]), ev.pid[i]);
        if current[c] != pid {
            current[c] = pid;
            if pid != 0 {
                let since = waiting.take(pid);
                if since != 0 {
                    let comm = || trace.comm(pid).unwrap_or("?").to_string();
                    record(pid, &comm, since, ev.ts[i]);
                    unswitched += 1;
                }
            }
        }
        if let Some((wid, fp, ft)) = wf {
            if id == wid {
                let target = ft
                    .map(|f| trace.i64_at(i, f) as u32)
                    .unwrap_or(u32::from(ev.cpu[i]));
                if opts.wants(target) {
                    let w = waiting.slot(trace.i64_at(i, fp) as i32);
                    if *w == 0 || !wait_of(*w).1 {
                        *w = wait(ev.ts[i], true);
                    }
                }
                continue;
            }
        }
        if id != sw {
            continue;
        }
        let ts = ev.ts[i];
        let prev = trace.i64_at(i, f_prev) as i32;
        if prev != 0 {
            // It was running: a wakeup while it ran leaves nothing to wait for.
            let runnable = trace.i64_at(i, f_state) & 0xff == 0 && opts.wants(c as u32);
            *waiting.slot(prev) = if runnable { wait(ts, false) } else { 0 };
        }
        let next = trace.i64_at(i, f_next) as i32;
        current[c] = next;
        if next == 0 {
            continue;
        }
        let since = waiting.take(next);
        if since != 0 {
            let comm = || trace.str_at(i, f_next_comm).to_string();
            record(next, &comm, since, ts);
        }
    }
    // The overall summaries read every task's values in place (no concatenated copy).
    let overall = TaskRow {
        task: "all".into(),
        wakeup: DurationSummary::of_parts(&lat.iter().map(|t| t.2.as_slice()).collect::<Vec<_>>()),
        runq: DurationSummary::of_parts(&lat.iter().map(|t| t.3.as_slice()).collect::<Vec<_>>()),
    };
    let mut tasks: Vec<TaskRow> = lat
        .into_iter()
        .map(|(pid, comm, mut w, mut q)| TaskRow {
            task: format!("{comm}:{pid}"),
            wakeup: DurationSummary::of(&mut w),
            runq: DurationSummary::of(&mut q),
        })
        .collect();
    tasks.sort_by(|a, b| {
        b.wakeup
            .n
            .cmp(&a.wakeup.n)
            .then(b.runq.n.cmp(&a.runq.n))
            .then(a.task.cmp(&b.task))
    });
    tasks.truncate(opts.top());
    let mut notes = Vec::new();
    if unswitched > 0 {
        notes.push(format!(
            "{unswitched} waits end at the task's first event, not at a sched_switch to it: \
             the trace has none (some kernels do not log the switch out of the idle task)"
        ));
    }
    if wk.is_none() {
        notes.push("no sched:sched_waking events: wakeup latency unavailable (`pmlab record -e sched:sched_waking`)".into());
    }
    Ok(SchedReport {
        overall,
        tasks,
        notes,
    })
}

/// One task's time on one CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskRuntime {
    /// The task's pid (thread id).
    pub pid: i32,
    /// Its command name, as the last switch naming it had it.
    pub comm: String,
    /// The CPU.
    pub cpu: u32,
    /// Time on that CPU, ns.
    pub ns: u64,
}

/// Every task's time on each CPU `opts` wants, from `sched_switch`: a task runs from the
/// switch to it until the switch away. A CPU's first switch's previous task ran since the
/// trace began, its last switch's next task until the trace ends. Interrupts count as the
/// time of the task they interrupted. The idle task (pid 0) is left out. Sorted by time,
/// longest first.
pub fn runtime(trace: &Trace, opts: &Options) -> Result<Vec<TaskRuntime>, Missing> {
    let missing = || Missing::new("sched", &["sched:sched_switch"]);
    let sw = trace
        .event_id("sched", "sched_switch")
        .ok_or_else(missing)?;
    let f = |n: &str| trace.field(sw, n).ok_or_else(missing);
    let (f_prev, f_prev_comm, f_next, f_next_comm) = (
        f("prev_pid")?,
        f("prev_comm")?,
        f("next_pid")?,
        f("next_comm")?,
    );
    let (t0, t1) = trace.bounds();
    let ev = &trace.events;
    // Per CPU: the running task, since when, and the event that named it.
    let mut running: Vec<Option<(i32, u64, usize)>> = vec![None; ev.cpu_slots()];
    let mut time: FxHashMap<(i32, u32), (u64, String)> = FxHashMap::default();
    let mut add = |pid: i32, cpu: u32, ns: u64, comm: &str| {
        if pid == 0 || !opts.wants(cpu) {
            return;
        }
        let e = time.entry((pid, cpu)).or_default();
        e.0 += ns;
        if e.1 != comm {
            e.1 = comm.to_string();
        }
    };
    ev.for_each_of(sw, |i| {
        let (c, ts) = (usize::from(ev.cpu[i]), ev.ts[i]);
        let since = running[c].map_or(t0, |r| r.1);
        let prev = trace.i64_at(i, f_prev) as i32;
        add(
            prev,
            c as u32,
            ts.saturating_sub(since),
            trace.str_at(i, f_prev_comm),
        );
        running[c] = Some((trace.i64_at(i, f_next) as i32, ts, i));
    });
    for (c, r) in running.iter().enumerate() {
        if let Some((pid, since, i)) = *r {
            add(
                pid,
                c as u32,
                t1.saturating_sub(since),
                trace.str_at(i, f_next_comm),
            );
        }
    }
    let mut out: Vec<TaskRuntime> = time
        .into_iter()
        .map(|((pid, cpu), (ns, comm))| TaskRuntime { pid, comm, cpu, ns })
        .collect();
    out.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then(a.pid.cmp(&b.pid))
            .then(a.cpu.cmp(&b.cpu))
    });
    Ok(out)
}

/// `roots` and every task (process or thread) forked from them or from their descendants
/// while the trace ran, from `sched_process_fork`; `Missing` when the trace lacks that event.
pub fn forked_from(trace: &Trace, roots: &[i32]) -> Result<BTreeSet<i32>, Missing> {
    let missing = || Missing::new("sched", &["sched:sched_process_fork"]);
    let id = trace
        .event_id("sched", "sched_process_fork")
        .ok_or_else(missing)?;
    let (fp, fc) = (
        trace.field(id, "parent_pid").ok_or_else(missing)?,
        trace.field(id, "child_pid").ok_or_else(missing)?,
    );
    let mut tasks: BTreeSet<i32> = roots.iter().copied().collect();
    // Events are in time order: a parent is in the set before its children are forked.
    trace.events.for_each_of(id, |i| {
        if tasks.contains(&(trace.i64_at(i, fp) as i32)) {
            tasks.insert(trace.i64_at(i, fc) as i32);
        }
    });
    Ok(tasks)
}

impl Tabular for SchedReport {
    fn tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            "sched_latency",
            "Scheduling latency (µs): wakeup = sched_waking → running; runq = preempted → running again",
            &["task", "kind", "n", "min_us", "mean_us", "p50_us", "p99_us", "max_us"],
            2,
        );
        for r in std::iter::once(&self.overall).chain(&self.tasks) {
            for (kind, s) in [("wakeup", &r.wakeup), ("runq", &r.runq)] {
                if s.n == 0 && r.task != "all" {
                    continue;
                }
                t.row(vec![
                    r.task.clone().into(),
                    kind.into(),
                    s.n.into(),
                    (s.min_ns as f64 / 1e3).into(),
                    (s.mean_ns / 1e3).into(),
                    (s.p50_ns as f64 / 1e3).into(),
                    (s.p99_ns as f64 / 1e3).into(),
                    (s.max_ns as f64 / 1e3).into(),
                ]);
            }
        }
        vec![t]
    }
    fn notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        notes.push(crate::stats::PERCENTILE_NOTE.into());
        notes
    }
}
