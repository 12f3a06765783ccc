//! Scheduling latency: wakeup latency (`sched_waking` → the `sched_switch` that runs the
//! task) and run-queue waits of preempted tasks (switched out runnable → switched back in),
//! per task and overall, as percentiles.

use crate::fxhash::FxHashMap;
use crate::stats::Summary;
use crate::table::Table;
use crate::{Missing, Options, Tabular};
use pmlab_trace::Trace;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct TaskRow {
    /// `comm:pid`, or "all".
    pub task: String,
    pub wakeup: Summary,
    pub runq: Summary,
}

#[derive(Debug, Clone, Serialize)]
pub struct SchedReport {
    pub overall: TaskRow,
    /// The tasks with the most wakeups (at most `Options::top`).
    pub tasks: Vec<TaskRow>,
    pub notes: Vec<String>,
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
    let mut waiting: FxHashMap<i32, (u64, bool)> = FxHashMap::default();
    // pid → (comm when first run, wakeup latencies, run-queue waits)
    let mut lat: Vec<(i32, String, Vec<u64>, Vec<u64>)> = Vec::new();
    let mut lat_index: FxHashMap<i32, usize> = FxHashMap::default();
    // The last pids seen, by their low bits: a few tasks take most switches.
    let mut recent = [(i32::MIN, 0usize); 64];
    // Per CPU, the pid of its last event: a waiting task that logs an event runs, switch
    // logged or not (some kernels drop the switch out of the idle task).
    let ncpu = ev
        .cpu
        .iter()
        .map(|&c| usize::from(c) + 1)
        .max()
        .unwrap_or(0);
    let mut current = vec![i32::MIN; ncpu];
    let mut unswitched = 0u64;
    let mut record = |pid: i32, comm: &dyn Fn() -> String, waited: u64, wakeup: bool| {
        let slot = &mut recent[pid as usize % 64];
        if slot.0 != pid {
            let k = *lat_index.entry(pid).or_insert_with(|| {
                lat.push((pid, comm(), Vec::new(), Vec::new()));
                lat.len() - 1
            });
            *slot = (pid, k);
        }
        let e = &mut lat[slot.1];
        if wakeup {
            e.2.push(waited);
        } else {
            e.3.push(waited);
        }
    };
    for i in 0..ev.len() {
        ev.prefetch_ahead(i);
        let id = ev.id[i];
        let (c, pid) = (usize::from(ev.cpu[i]), ev.pid[i]);
        if current[c] != pid {
            current[c] = pid;
            if pid != 0 {
                if let Some((t, wakeup)) = waiting.remove(&pid) {
                    let comm = || trace.comm(pid).unwrap_or("?").to_string();
                    record(pid, &comm, ev.ts[i] - t, wakeup);
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
                    let w = waiting
                        .entry(trace.i64_at(i, fp) as i32)
                        .or_insert((ev.ts[i], true));
                    if !w.1 {
                        *w = (ev.ts[i], true);
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
            waiting.remove(&prev);
            if trace.i64_at(i, f_state) & 0xff == 0 && opts.wants(c as u32) {
                waiting.insert(prev, (ts, false));
            }
        }
        let next = trace.i64_at(i, f_next) as i32;
        current[c] = next;
        if next == 0 {
            continue;
        }
        if let Some((t, wakeup)) = waiting.remove(&next) {
            let comm = || trace.str_at(i, f_next_comm).to_string();
            record(next, &comm, ts - t, wakeup);
        }
    }
    let mut all_w = Vec::with_capacity(lat.iter().map(|t| t.2.len()).sum());
    let mut all_q = Vec::with_capacity(lat.iter().map(|t| t.3.len()).sum());
    let mut tasks: Vec<TaskRow> = lat
        .into_iter()
        .map(|(pid, comm, mut w, mut q)| {
            all_w.extend_from_slice(&w);
            all_q.extend_from_slice(&q);
            TaskRow {
                task: format!("{comm}:{pid}"),
                wakeup: Summary::of(&mut w),
                runq: Summary::of(&mut q),
            }
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
        overall: TaskRow {
            task: "all".into(),
            wakeup: Summary::of(&mut all_w),
            runq: Summary::of(&mut all_q),
        },
        tasks,
        notes,
    })
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
        self.notes.clone()
    }
}
