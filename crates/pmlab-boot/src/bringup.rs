//! Secondary-CPU bring-up from what a guest sent back: its boot-time trace, extracted into
//! a trace.dat by pmlab's recorder and broken down by the hotplug analysis (per CPU and per
//! hotplug state), and the kernel log's own time stamps, which are also the fallback when
//! the guest kernel has no tracing.

use crate::boot::{line_time, strip_time};
use crate::BootError;
use pmlab_analysis::hotplug::{self, Direction};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a bring-up time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The guest's cpuhp tracepoints.
    Trace,
    /// The kernel log's time stamps ("smp: Bringing up secondary CPUs" to "smp: Brought up").
    KernelLog,
}

/// One hotplug state's time over all secondary CPUs of one boot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTotal {
    /// cpuhp state number.
    pub state: i32,
    /// Its name in the guest's `hotplug/states`.
    pub name: String,
    /// Invocations (one per CPU, more for multi-instance states).
    pub count: usize,
    /// Sum of exclusive times, ns.
    pub total_ns: u64,
}

/// Where the bring-up's two ends come from, in a traced boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Edges {
    /// The kernel's own "smp: Bringing up secondary CPUs" and "smp: Brought up" lines, as
    /// the trace's `printk:console` events time them: the interval the kernel log measures.
    KernelLines,
    /// The first secondary CPU's first hotplug step to the last CPU online (a trace without
    /// `printk:console` events).
    HotplugSteps,
}

/// What one boot's bring-up was.
#[derive(Debug, Clone, Serialize)]
pub struct BringUp {
    /// Where [`BringUp::span_ns`] comes from.
    pub source: Source,
    /// Where its ends come from (traced boots).
    pub edges: Option<Edges>,
    /// The secondary CPUs' bring-up, ns: see [`Edges`].
    pub span_ns: u64,
    /// The hotplug steps' window: the first secondary CPU's first step to the last CPU's
    /// last step, ns (traced boots).
    pub hotplug_ns: Option<u64>,
    /// The kernel log's bring-up ("Bringing up" to "Brought up"), from its own time stamps,
    /// ns.
    pub log_span_ns: Option<u64>,
    /// Of the kernel's bring-up, the time before the first step (taking the CPU hotplug
    /// lock: an RCU grace period), ns; from the trace's console events, else from the log's
    /// time stamps (the guest traces in the log's clock).
    pub lead_ns: Option<i64>,
    /// Of the kernel's bring-up, the time after the last CPU's last step (the boot CPU
    /// learning it and its calls to the new CPUs), ns; as [`BringUp::lead_ns`].
    pub tail_ns: Option<i64>,
    /// Time from the kernel's start to running init (the kernel log's "Run /init"), ns.
    pub init_ns: Option<u64>,
    /// Per secondary CPU: its bring-up (first step to its last), ns.
    pub per_cpu: Vec<(u32, u64)>,
    /// Secondary CPUs the trace shows reaching the `online` state.
    pub reached_online: Vec<u32>,
    /// CPUs the guest had online at init.
    pub online: Vec<u32>,
    /// Time inside the bring-up covered by at least one step on some CPU, ns.
    pub covered_ns: u64,
    /// Per hotplug state, over all secondary CPUs, slowest first.
    pub steps: Vec<StepTotal>,
    /// Events the guest's buffer lost (its stats and page headers).
    pub lost_events: u64,
    /// The trace.dat written, when the guest traced.
    pub trace: Option<PathBuf>,
    /// What a reader should know.
    pub notes: Vec<String>,
}

impl BringUp {
    /// covered / span.
    pub fn coverage(&self) -> f64 {
        if self.span_ns == 0 {
            0.0
        } else {
            self.covered_ns as f64 / self.span_ns as f64
        }
    }
}

/// The kernel's bring-up lines as the trace's `printk:console` events time them, ns:
/// (Bringing up, Brought up); None without both.
fn console_edges(trace: &pmlab_trace::Trace) -> Option<(u64, u64)> {
    let id = trace.event_id("printk", "console")?;
    let msg = trace.field(id, "msg")?;
    let (mut from, mut to) = (None, None);
    trace.events.for_each_of(id, |i| {
        let line = trace.str_at(i, msg);
        if from.is_none() && line.starts_with("smp: Bringing up secondary CPUs") {
            from = Some(trace.events.ts[i]);
        } else if from.is_some() && to.is_none() && line.starts_with("smp: Brought up") {
            to = Some(trace.events.ts[i]);
        }
    });
    Some((from?, to?))
}

/// Kernel-log times, seconds: bring-up start and end, and init.
pub fn log_times(console: &str) -> (Option<f64>, Option<f64>, Option<f64>) {
    let find = |pat: &str| {
        console
            .lines()
            .find(|l| strip_time(l).starts_with(pat))
            .and_then(line_time)
    };
    (
        find("smp: Bringing up secondary CPUs"),
        find("smp: Brought up"),
        find("Run /init as init process"),
    )
}

fn parse_cpu_list(s: &str) -> Vec<u32> {
    pmlab_kernel::cpulist::parse_cpu_list(s.trim()).unwrap_or_default()
}

/// Unpack a guest's results archive into `dir` (which then holds `pmlab/`).
pub fn unpack(archive: &Path, dir: &Path) -> Result<PathBuf, BootError> {
    let f = std::fs::File::open(archive).map_err(|source| BootError::Io {
        path: archive.to_path_buf(),
        source,
    })?;
    tar::Archive::new(flate2::read::GzDecoder::new(f))
        .unpack(dir)
        .map_err(|source| BootError::Results {
            what: format!("unpacking {}", archive.display()),
            source: Box::new(source),
        })?;
    Ok(dir.join("pmlab"))
}

/// The bring-up of one boot from its unpacked results (`guest`: the `pmlab/` directory) and
/// console; the trace.dat is written to `trace_out` when the guest traced.
pub fn analyze(guest: &Path, console: &str, trace_out: &Path) -> Result<BringUp, BootError> {
    // The guest's whole log (its console shows only what `quiet` lets through).
    let dmesg = std::fs::read_to_string(guest.join("dmesg")).unwrap_or_default();
    let (l0, l1, init) = match log_times(&dmesg) {
        (Some(a), Some(b), i) => (Some(a), Some(b), i),
        _ => log_times(console),
    };
    let log_span_ns = match (l0, l1) {
        (Some(a), Some(b)) if b >= a => Some(((b - a) * 1e9).round() as u64),
        _ => None,
    };
    let init_ns = init.map(|t| (t * 1e9).round() as u64);
    let online = std::fs::read_to_string(guest.join("online"))
        .map(|s| parse_cpu_list(&s))
        .unwrap_or_default();
    let mut notes = Vec::new();
    let dir = guest.join("trace");
    let traced = dir.join("events/header_page").is_file()
        && std::fs::read_dir(dir.join("events"))
            .map(|d| d.flatten().any(|e| e.file_name() == "cpuhp"))
            .unwrap_or(false);
    let fallback = |mut notes: Vec<String>, why: &str| -> Result<BringUp, BootError> {
        notes.push(format!("{why}: bring-up from the kernel log's time stamps"));
        let span_ns = log_span_ns.ok_or_else(|| BootError::Results {
            what: "the guest's kernel log".into(),
            source:
                "neither a cpuhp trace nor the log's `smp: Bringing up` / `smp: Brought up` lines"
                    .into(),
        })?;
        Ok(BringUp {
            source: Source::KernelLog,
            edges: None,
            span_ns,
            hotplug_ns: None,
            log_span_ns,
            lead_ns: None,
            tail_ns: None,
            init_ns,
            per_cpu: Vec::new(),
            reached_online: Vec::new(),
            online: online.clone(),
            covered_ns: 0,
            steps: Vec::new(),
            lost_events: 0,
            trace: None,
            notes,
        })
    };
    if !traced {
        return fallback(notes, "the guest kernel recorded no cpuhp events");
    }
    let uname = std::fs::read_to_string(guest.join("uname"))
        .ok()
        .map(|s| s.trim().to_string());
    let opts = pmlab_trace::record::ExtractOptions {
        uname,
        ..Default::default()
    };
    let summary =
        pmlab_trace::record::extract(&dir, trace_out, &opts).map_err(|e| BootError::Results {
            what: "extracting the guest's trace".into(),
            source: Box::new(e),
        })?;
    let lost_events = summary.total_lost();
    let trace = pmlab_trace::open(trace_out).map_err(|e| BootError::Results {
        what: format!("decoding {}", trace_out.display()),
        source: Box::new(e),
    })?;
    let states = pmlab_analysis::file::read_hotplug_states(&guest.join("states")).ok();
    let names: BTreeMap<i32, String> = states
        .iter()
        .flatten()
        .map(|(n, s)| (*n as i32, s.clone()))
        .collect();
    let online_state = names
        .iter()
        .find(|(_, n)| n.as_str() == "online")
        .map(|(n, _)| *n);
    let report = match hotplug::analyze(&trace, states.as_deref()) {
        Ok(r) => r,
        Err(m) => return fallback(notes, &format!("the guest's trace: {m}")),
    };
    let ops: Vec<&hotplug::Operation> = report
        .operations
        .iter()
        .filter(|o| o.direction == Direction::Online && o.cpu != 0)
        .collect();
    if ops.is_empty() {
        return fallback(notes, "the guest's trace has no secondary CPU coming up");
    }
    // Per CPU: its first walk up. A parallel bring-up runs each CPU's walk in two phases,
    // which the analysis may see as two operations; and states installed later in the boot
    // (a driver's `cpuhp_setup_state`) run their callback on every online CPU, after the
    // walk, from a lower state than it reached: the walk ends before the first such step.
    let mut by_cpu: BTreeMap<u32, Vec<&hotplug::Step>> = BTreeMap::new();
    for o in &ops {
        by_cpu.entry(o.cpu).or_default().extend(o.steps.iter());
    }
    let mut per: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut reached = Vec::new();
    let mut totals: BTreeMap<i32, (usize, u64)> = BTreeMap::new();
    let mut intervals = Vec::new();
    for (cpu, mut steps) in by_cpu {
        steps.sort_by_key(|s| (s.start_ns, s.depth));
        let (mut top, mut top_end) = (i32::MIN, 0u64);
        let (mut first, mut last) = (u64::MAX, 0u64);
        for s in steps {
            if s.state < top && s.start_ns >= top_end && !s.rollback {
                break;
            }
            if s.state > top {
                top = s.state;
                top_end = s.end_ns();
            }
            first = first.min(s.start_ns);
            last = last.max(s.end_ns());
            let t = totals.entry(s.state).or_default();
            t.0 += 1;
            t.1 += s.exclusive_ns;
            if s.depth == 0 {
                intervals.push((s.start_ns, s.end_ns()));
            }
        }
        if last > first {
            per.insert(cpu, (first, last));
        }
    }
    // A CPU is up when the kernel says so: a `cpuhp_exit` leaving it in the `online` state
    // (which has no callback of its own, so no step is named after it).
    if let (Some(online_state), Some(id)) = (online_state, trace.event_id("cpuhp", "cpuhp_exit")) {
        if let (Some(fc), Some(fs)) = (trace.field(id, "cpu"), trace.field(id, "state")) {
            trace.events.for_each_of(id, |i| {
                if trace.i64_at(i, fs) == i64::from(online_state) {
                    reached.push(trace.u64_at(i, fc) as u32);
                }
            });
        }
    }
    reached.retain(|c| *c != 0);
    reached.sort_unstable();
    reached.dedup();
    let first = per.values().map(|p| p.0).min().unwrap_or(0);
    let last = per.values().map(|p| p.1).max().unwrap_or(0);
    let hotplug_ns = last.saturating_sub(first);
    let (edges, start, end) = match console_edges(&trace) {
        Some((a, b)) if a <= first && b >= last => (Edges::KernelLines, a, b),
        found => {
            notes.push(match found {
                Some(_) => "the trace's bring-up lines do not enclose its hotplug steps: \
                            bring-up is the first hotplug step to the last CPU online"
                    .to_string(),
                None => "the trace has no `printk:console` bring-up lines: bring-up is the \
                         first hotplug step to the last CPU online"
                    .to_string(),
            });
            (Edges::HotplugSteps, first, last)
        }
    };
    let span_ns = end - start;
    let covered_ns = union_len(&mut intervals, start, end);
    // The kernel's lines bound the bring-up: from the trace's console events, else from the
    // log's stamps (the guest traces in the log's clock).
    let (lead_ns, tail_ns) = match edges {
        Edges::KernelLines => (
            Some(first as i64 - start as i64),
            Some(end as i64 - last as i64),
        ),
        Edges::HotplugSteps => (
            l0.map(|t| first as i64 - (t * 1e9).round() as i64),
            l1.map(|t| (t * 1e9).round() as i64 - last as i64),
        ),
    };
    let mut steps: Vec<StepTotal> = totals
        .into_iter()
        .map(|(state, (count, total_ns))| StepTotal {
            state,
            name: names
                .get(&state)
                .cloned()
                .unwrap_or_else(|| format!("state {state}")),
            count,
            total_ns,
        })
        .collect();
    steps.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.state.cmp(&b.state)));
    for &cpu in online.iter().filter(|&&c| c != 0) {
        if !reached.contains(&cpu) {
            notes.push(format!(
                "cpu{cpu} is online in the guest but its trace does not reach the `online` state"
            ));
        }
    }
    if lost_events > 0 {
        notes.push(format!(
            "the guest's trace buffer lost {lost_events} events (trace_buf_size too small)"
        ));
    }
    notes.extend(report.notes.iter().cloned());
    Ok(BringUp {
        source: Source::Trace,
        edges: Some(edges),
        span_ns,
        hotplug_ns: Some(hotplug_ns),
        log_span_ns,
        lead_ns,
        tail_ns,
        init_ns,
        per_cpu: per.into_iter().map(|(c, (a, b))| (c, b - a)).collect(),
        reached_online: reached,
        online,
        covered_ns,
        steps,
        lost_events,
        trace: Some(trace_out.to_path_buf()),
        notes,
    })
}

/// Length of the union of `intervals` clipped to `[from, to]`.
fn union_len(intervals: &mut [(u64, u64)], from: u64, to: u64) -> u64 {
    intervals.sort_unstable();
    let (mut total, mut cur): (u64, Option<(u64, u64)>) = (0, None);
    for &(a, b) in intervals.iter() {
        let (a, b) = (a.max(from), b.min(to));
        if b <= a {
            continue;
        }
        cur = match cur {
            Some((ca, cb)) if a <= cb => Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += cb - ca;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    if let Some((a, b)) = cur {
        total += b - a;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_merges_overlaps_and_clips() {
        let mut v = vec![(0, 10), (5, 15), (20, 30), (28, 40)];
        assert_eq!(union_len(&mut v, 2, 35), 13 + 15);
    }

    #[test]
    fn log_times_find_bring_up_and_init() {
        let c = "[    0.865108] smp: Bringing up secondary CPUs ...\n[    1.109548] smp: Brought up 1 node, 2 CPUs\n[    2.5] Run /init as init process\n";
        let (a, b, i) = log_times(c);
        assert_eq!((a, b, i), (Some(0.865108), Some(1.109548), Some(2.5)));
    }
}
