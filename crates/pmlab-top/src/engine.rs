//! The interval engine: each refresh's new ring-buffer pages are decoded (the trace
//! reader's page decoder and merge), cut at the interval's end by timestamp, and the
//! analyses `pmlab analyze --only idle,wakeups,kicks --from --to` runs are run over the
//! interval's window. An interval is the events with timestamps in `[from, to)`: an idle
//! exit belongs to the interval its `cpu_idle` exit (or the idle task's end) falls in.

use pmlab_analysis::all::{self, Analysis, Extras, Report};
use pmlab_analysis::Options;
use pmlab_trace::page::PageLayout;
use pmlab_trace::{Events, Trace};
use serde::Serialize;

/// The analyses of every interval, as `pmlab analyze --only idle,wakeups,kicks` names them.
pub const ANALYSES: [Analysis; 3] = [Analysis::Idle, Analysis::Wakeups, Analysis::Kicks];

/// What went wrong decoding an interval's pages.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The pages do not decode (a damaged page, an unknown layout).
    #[error("decoding the interval's pages")]
    Decode(#[source] pmlab_trace::error::Malformed),
    /// An interval must end after it began.
    #[error("interval end {to} ns is not after its start {from} ns")]
    Backwards {
        /// The interval's start (trace ns).
        from: u64,
        /// The asked end (trace ns).
        to: u64,
    },
}

/// [`ANALYSES`] over the window `[from, to)` of a whole trace: what `pmlab analyze --only
/// idle,wakeups,kicks --from FROM --to TO` computes, and what each [`Interval`] holds.
pub fn analyze_window(trace: &Trace, from: u64, to: u64, opts: &Options) -> Report {
    all::run(&trace.window(from, to), opts, &ANALYSES, Extras::default())
}

/// One interval: its window and what the analyses found in it.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// Counts from 0.
    pub index: u64,
    /// Start of the window, trace ns (inclusive).
    pub from_ns: u64,
    /// End of the window, trace ns (exclusive).
    pub to_ns: u64,
    /// Events in the window.
    pub events: usize,
    /// Events that arrived after their interval had closed (timestamp before `from_ns`):
    /// left out of every interval. 0 unless an event was committed long after it was stamped.
    pub late: u64,
    /// Events the kernel lost in this interval's pages (missed-events flags).
    pub lost: u64,
    /// The analyses over the window.
    pub report: Report,
}

/// Turns batches of pages (or decoded events) into intervals; see the module documentation.
pub struct Engine {
    /// Formats, symbols and names; its events are the interval's while the analyses run.
    trace: Trace,
    layout: PageLayout,
    opts: Options,
    /// Events stamped at or after the last interval's end, held for the next one.
    pending: Events,
    from: u64,
    index: u64,
}

impl Engine {
    /// An engine decoding against `skeleton` (a trace without events: the recording's
    /// formats, symbols and names) whose first interval starts at `start` (trace ns).
    pub fn new(skeleton: Trace, layout: PageLayout, opts: Options, start: u64) -> Engine {
        Engine {
            trace: skeleton,
            layout,
            opts,
            pending: Events::default(),
            from: start,
            index: 0,
        }
    }

    /// The options the analyses run with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Decodes one batch of pages per CPU (`(cpu, whole pages)`, as
    /// `Recorder::take_pages` hands them out) and closes the interval at `to` (trace ns).
    /// Events stamped at or after `to` wait for the next interval.
    pub fn push_pages(
        &mut self,
        batch: &[(u32, Vec<u8>)],
        to: u64,
    ) -> Result<Interval, EngineError> {
        if to <= self.from {
            return Err(EngineError::Backwards {
                from: self.from,
                to,
            });
        }
        let (events, lost) = pmlab_trace::dat::decode_pages(&self.trace, self.layout, batch)
            .map_err(EngineError::Decode)?;
        let lost = lost.iter().map(|l| l.unwrap_or(0)).sum();
        self.close(events, lost, to)
    }

    /// Closes the interval at `to` with `events` (in time order) added: the decoded form
    /// of [`Engine::push_pages`].
    pub fn push_events(&mut self, events: Events, to: u64) -> Result<Interval, EngineError> {
        if to <= self.from {
            return Err(EngineError::Backwards {
                from: self.from,
                to,
            });
        }
        self.close(events, 0, to)
    }

    fn close(&mut self, new: Events, lost: u64, to: u64) -> Result<Interval, EngineError> {
        let held = std::mem::take(&mut self.pending);
        // Held events first on equal timestamps: they were committed first.
        let mut order: Vec<(u64, bool, usize)> = (0..held.len())
            .map(|i| (held.ts[i], false, i))
            .chain((0..new.len()).map(|i| (new.ts[i], true, i)))
            .collect();
        order.sort_by_key(|&(ts, from_new, i)| (ts, from_new, i));
        let (mut now, mut later) = (Events::default(), Events::default());
        let (mut now_raw, mut later_raw) = (Vec::new(), Vec::new());
        let mut late = 0;
        for (ts, from_new, i) in order {
            let ev = if from_new { &new } else { &held };
            if ts < self.from {
                late += 1;
                continue;
            }
            let (out, raw) = if ts < to {
                (&mut now, &mut now_raw)
            } else {
                (&mut later, &mut later_raw)
            };
            let r = ev.record(i);
            let off = raw.len();
            raw.extend_from_slice(r);
            out.push(ts, ev.cpu[i], ev.pid[i], ev.id[i], off, r.len());
        }
        now.raw = now_raw.into();
        later.raw = later_raw.into();
        self.pending = later;
        self.trace.events = now;
        self.trace.meta.window = Some((self.from, to));
        learn_comms(&mut self.trace);
        // On this thread: a thread started and joined per interval would be two more wakeups.
        let extras = Extras {
            serial: true,
            ..Extras::default()
        };
        let report = all::run(&self.trace, &self.opts, &ANALYSES, extras);
        let interval = Interval {
            index: self.index,
            from_ns: self.from,
            to_ns: to,
            events: self.trace.events.len(),
            late,
            lost,
            report,
        };
        self.trace.events = Events::default();
        self.from = to;
        self.index += 1;
        Ok(interval)
    }
}

/// Task names the sched events of the trace's events show, over its saved names (as the
/// recorder names tasks in the file it writes): a task started after top began is named.
fn learn_comms(trace: &mut Trace) {
    let mut seen = Vec::new();
    for (sys, name, pairs) in [
        (
            "sched",
            "sched_switch",
            &[("prev_comm", "prev_pid"), ("next_comm", "next_pid")][..],
        ),
        ("sched", "sched_waking", &[("comm", "pid")][..]),
    ] {
        let Some(id) = trace.event_id(sys, name) else {
            continue;
        };
        for &(c, p) in pairs {
            let (Some(fc), Some(fp)) = (trace.field(id, c), trace.field(id, p)) else {
                continue;
            };
            trace.events.for_each_of(id, |i| {
                let pid = trace.i64_at(i, fp) as i32;
                let comm = trace.str_at(i, fc);
                if pid > 0 && !comm.is_empty() {
                    seen.push((pid, comm.to_string()));
                }
            });
        }
    }
    for (pid, comm) in seen {
        trace.cmdlines.insert(pid, comm);
    }
}
