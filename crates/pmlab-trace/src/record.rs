//! The recorder: traces into a private tracefs instance (`instances/pmlab-<pid>`),
//! moves each CPU's `trace_pipe_raw` pages to a temp file with `splice` (or `read`),
//! counts lost events, and assembles a trace.dat v6 file with [`crate::writer`].
//!
//! Readers sleep in `poll` until the CPU buffer is `buffer_percent` full, so the traced
//! CPUs are woken rarely; they can be pinned (`reader_cpus`) away from measured CPUs.
//! The instance is removed by [`Recorder::stop`], by `Drop`, by
//! [`pmlab_kernel::tracefs::remove_live_instances`] (signal handlers) and, after a
//! SIGKILL, by the stale-instance sweep at the start of the next recording.

use crate::format::{parse_format_opts, parse_header_page, HeaderPage};
use crate::model::{uint, Endian};
use crate::page::{self, Missed, PageLayout};
use crate::writer::{self, CpuData, EventSystem, TraceDatHeader};
use pmlab_kernel::tracefs::{self, Instance, TracefsError};
use pmlab_kernel::Root;
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Events the analyses read: power, sched, ipi, irq, irq_vectors entries, timer expiries,
/// the CSD entry and softirq entry/exit (idle-balance kicks: `nohz_csd_func`, then
/// SCHED_SOFTIRQ, and what it migrated), and cpuhp. Exit events of the vectors,
/// `sched_wakeup` (after `sched_waking`), `csd_queue_cpu` and `csd_function_exit`,
/// `softirq_raise` and `hrtimer_start` are left out: no analysis needs them and each costs
/// time on every wakeup (the observer effect: a cross-CPU pipe on an idle 2-CPU guest logs
/// one CSD entry per remote wakeup, 12% more events; `csd_queue_cpu` would add as many again,
/// and the kick's sender is the `ipi_send_cpu` or `sched_wake_idle_without_ipi` before it).
/// `sched_process_fork` (one event per fork or thread, nothing per wakeup) tells the lab's
/// tasks from the others in a traced run. Entries the machine lacks are skipped with a note.
pub const DEFAULT_EVENTS: &[&str] = &[
    "power:cpu_idle",
    "power:cpu_idle_miss",
    "power:guest_halt_poll_ns",
    "power:cpu_frequency",
    "sched:sched_switch",
    "sched:sched_waking",
    "sched:sched_wake_idle_without_ipi",
    "sched:sched_migrate_task",
    "sched:sched_process_fork",
    "ipi:ipi_send_cpu",
    "ipi:ipi_send_cpumask",
    "irq:irq_handler_entry",
    "irq:irq_handler_exit",
    "irq:softirq_entry",
    "irq:softirq_exit",
    "csd:csd_function_entry",
    "irq_vectors:local_timer_entry",
    "irq_vectors:call_function_entry",
    "irq_vectors:call_function_single_entry",
    "irq_vectors:reschedule_entry",
    "irq_vectors:irq_work_entry",
    "timer:hrtimer_expire_entry",
    "timer:timer_expire_entry",
    "cpuhp",
];

/// Default `buffer_percent`: readers wake when a CPU buffer is half full.
pub const DEFAULT_BUFFER_PERCENT: u32 = 50;

/// Default per-CPU buffer when none is asked for: 4 MiB (the kernel's instance default of
/// 1.4 MiB overflows under load), at most 64 MiB over all CPUs, and never under 1 MiB.
pub fn default_buffer_kb(cpus: usize) -> u64 {
    (65536 / cpus.max(1) as u64).clamp(1024, 4096)
}

/// What to record, and how (see `pmlab record --help`).
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// Event specs: `system`, `system:event` or a bare event name. Empty = [`DEFAULT_EVENTS`].
    pub events: Vec<String>,
    /// (event spec, filter expression), e.g. ("sched:sched_switch", "prev_pid != 0").
    pub filters: Vec<(String, String)>,
    /// Per-CPU buffer size; None keeps the instance default.
    pub buffer_kb: Option<u64>,
    /// The trace.dat file to write.
    pub output: PathBuf,
    /// How full a CPU buffer gets before its reader wakes (1..=100).
    pub buffer_percent: u32,
    /// CPUs the reader threads may run on (None: anywhere).
    pub reader_cpus: Option<Vec<u32>>,
    /// Move pages with splice (true) or read (false).
    pub splice: bool,
    /// A tracer for the instance's `current_tracer` (`function`, `function_graph`, ...);
    /// None keeps `nop`. Checked against the instance's `available_tracers`.
    pub tracer: Option<String>,
    /// Turn on the instance's `stacktrace` option: a `kernel_stack` event after every event.
    pub stacktrace: bool,
    /// The instance's `trace_clock` (`mono`: timestamps comparable with
    /// `CLOCK_MONOTONIC`, as `pmlab top` needs for its interval edges); None keeps `local`.
    pub clock: Option<String>,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            events: Vec::new(),
            filters: Vec::new(),
            buffer_kb: None,
            output: PathBuf::from("trace.dat"),
            buffer_percent: DEFAULT_BUFFER_PERCENT,
            reader_cpus: None,
            splice: true,
            tracer: None,
            stacktrace: false,
            clock: None,
        }
    }
}

/// Why a recording failed or was refused (refusals happen before tracing starts).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A tracefs operation (instance, event or option file) failed.
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    /// A file of the recording (the output, a per-CPU temp file) failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The kernel refused an event filter.
    #[error("bad filter {filter:?} for {event}: the kernel refused it ({source})")]
    BadFilter {
        /// The event it was given for.
        event: String,
        /// The filter expression.
        filter: String,
        /// The kernel's error.
        source: io::Error,
    },
    /// A filter for an event that is not recorded.
    #[error("filter given for {0:?}, which is not among the recorded events")]
    FilterWithoutEvent(String),
    /// `buffer_percent` outside 1..=100.
    #[error("buffer_percent must be 1..=100, not {0}")]
    BadBufferPercent(u32),
    /// A buffer smaller than 8 KiB per CPU.
    #[error("--buffer-kb must be at least 8, not {0}")]
    BadBufferKb(u64),
    /// Reader CPUs none of which exists here.
    #[error("reader CPUs {0:?} include no CPU of this machine")]
    BadReaderCpus(Vec<u32>),
    /// A tracer this kernel does not have.
    #[error("tracer {name:?} is not available on this kernel (available: {available})")]
    UnknownTracer {
        /// The tracer asked for.
        name: String,
        /// The instance's `available_tracers`.
        available: String,
    },
    /// None of the requested events exists in this kernel.
    #[error("no events to record: none of the requested events exist here")]
    NoEvents,
    /// The output file's directory does not exist.
    #[error("output directory {0} does not exist")]
    NoOutputDir(PathBuf),
    /// A per-CPU reader failed to move pages.
    #[error("reader for CPU {cpu}: {source}")]
    Reader {
        /// The CPU whose reader failed.
        cpu: u32,
        /// The OS error.
        source: io::Error,
    },
    /// The reader thread of this CPU panicked.
    #[error("reader thread for CPU {0} panicked")]
    ReaderPanicked(u32),
    /// Writing the trace.dat file failed.
    #[error(transparent)]
    Write(#[from] writer::WriteError),
    /// The trace clock asked for is not in the instance's `trace_clock` list.
    #[error("trace clock {name:?} is not available on this kernel (available: {available})")]
    UnknownClock {
        /// The clock asked for (`mono`, `local`, ...).
        name: String,
        /// The kernel's list, as `trace_clock` shows it.
        available: String,
    },
    /// The header page format read back from tracefs could not be parsed.
    #[error("reading back the machine's trace header")]
    Header(#[source] crate::error::Malformed),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What a recording produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecordSummary {
    /// The trace.dat file written.
    pub path: PathBuf,
    /// CPU ids, index-aligned with the per-CPU vectors.
    pub cpus: Vec<u32>,
    /// Events recorded per CPU.
    pub events_per_cpu: Vec<u64>,
    /// Lost events per CPU: the larger of the page-header count and the buffer stats.
    pub lost_per_cpu: Vec<u64>,
    /// Lost events per CPU as counted from page headers (missed-events flags).
    pub lost_in_pages_per_cpu: Vec<u64>,
    /// Overrun + commit overrun + dropped events from `per_cpu/cpuN/stats`.
    pub lost_in_stats_per_cpu: Vec<u64>,
    /// Ring-buffer pages moved per CPU.
    pub pages_per_cpu: Vec<u64>,
    /// Events by `system:name`, most frequent first.
    pub events_by_name: Vec<(String, u64)>,
    /// File size in bytes.
    pub bytes: u64,
    /// How long tracing ran, ns.
    pub duration_ns: u64,
    /// Things the user should know (events skipped, CPUs without a buffer).
    pub notes: Vec<String>,
    /// "splice" or "read".
    pub transport: String,
}

impl RecordSummary {
    /// Events recorded on all CPUs.
    pub fn total_events(&self) -> u64 {
        self.events_per_cpu.iter().sum()
    }
    /// Events lost on all CPUs (see `lost_per_cpu`).
    pub fn total_lost(&self) -> u64 {
        self.lost_per_cpu.iter().sum()
    }
}

/// An event to enable: (system, Some(event)), or (system, None) for a whole system.
pub type EventSelection = (String, Option<String>);

/// Resolve event specs (empty: [`DEFAULT_EVENTS`], skipping those the kernel lacks).
/// Returns the selections and notes for the user.
pub fn resolve_events(
    tracefs_dir: &Path,
    specs: &[String],
) -> Result<(Vec<EventSelection>, Vec<String>), RecordError> {
    let mut notes = Vec::new();
    let mut out: Vec<EventSelection> = Vec::new();
    let defaults = specs.is_empty();
    let list: Vec<String> = if defaults {
        DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect()
    } else {
        specs.to_vec()
    };
    let mut skipped = Vec::new();
    for spec in &list {
        match tracefs::resolve_event(tracefs_dir, spec) {
            Ok(r) => {
                if !out.contains(&r) {
                    out.push(r)
                }
            }
            Err(TracefsError::UnknownEvent { .. }) if defaults => skipped.push(spec.clone()),
            Err(e) => return Err(e.into()),
        }
    }
    if !skipped.is_empty() {
        notes.push(format!(
            "this kernel lacks {}; not recorded",
            skipped.join(", ")
        ));
    }
    if out.is_empty() {
        return Err(RecordError::NoEvents);
    }
    // A whole system subsumes its single events.
    let systems: Vec<String> = out
        .iter()
        .filter(|(_, e)| e.is_none())
        .map(|(s, _)| s.clone())
        .collect();
    out.retain(|(s, e)| e.is_none() || !systems.contains(s));
    Ok((out, notes))
}

/// Wakes reader threads (an eventfd) and tracks how many are still running.
struct ReaderControl {
    stop_fd: OwnedFd,
    abort: AtomicBool,
    running: Mutex<usize>,
    all_done: Condvar,
}

impl ReaderControl {
    fn new() -> io::Result<ReaderControl> {
        use rustix::event::{eventfd, EventfdFlags};
        Ok(ReaderControl {
            stop_fd: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            abort: AtomicBool::new(false),
            running: Mutex::new(0),
            all_done: Condvar::new(),
        })
    }

    fn signal_stop(&self) {
        let _ = rustix::io::write(&self.stop_fd, &1u64.to_ne_bytes());
    }

    /// Stop readers without flushing and wait (bounded) until they closed their files.
    fn abort_and_wait(&self, timeout: Duration) {
        self.abort.store(true, Ordering::SeqCst);
        self.signal_stop();
        let guard = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.all_done.wait_timeout_while(guard, timeout, |n| *n > 0);
    }

    fn reader_exited(&self) {
        let mut n = self.running.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.all_done.notify_all();
        }
    }
}

struct ReaderResult {
    splice_used: bool,
}

struct CpuReader {
    cpu: u32,
    tmp: PathBuf,
    handle: Option<JoinHandle<Result<ReaderResult, RecordError>>>,
    /// The mover, owned by the reader thread (its trace_pipe_raw closes with the thread,
    /// before the instance is removed): [`Recorder::take_pages`] flushes through it.
    mover: std::sync::Weak<Mutex<PageMover>>,
    /// Bytes of `tmp` already handed out by [`Recorder::take_pages`].
    taken: u64,
}

/// A recording in progress. `stop()` finishes it; dropping it aborts and cleans up.
pub struct Recorder {
    instance: Option<Instance>,
    tracefs_dir: PathBuf,
    kallsyms: PathBuf,
    opts: RecordOptions,
    enabled: Vec<EventSelection>,
    readers: Vec<CpuReader>,
    control: Arc<ReaderControl>,
    notes: Vec<String>,
    page_size: u32,
    started: Instant,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("instance", &self.instance)
            .field("output", &self.opts.output)
            .finish()
    }
}

fn page_size_of(instance: &Instance) -> u32 {
    instance
        .read("buffer_subbuf_size_kb")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or_else(|| rustix::param::page_size() as u32)
}

fn temp_path(output: &Path, cpu: u32) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace.dat".into());
    output.with_file_name(format!(".{name}.{}.cpu{cpu}.tmp", std::process::id()))
}

impl Recorder {
    /// Start recording: sweep stale instances, create ours, enable events and filters,
    /// size the buffer, start one reader per CPU, then turn tracing on.
    pub fn start(root: &Root, opts: RecordOptions) -> Result<Recorder, RecordError> {
        if !(1..=100).contains(&opts.buffer_percent) {
            return Err(RecordError::BadBufferPercent(opts.buffer_percent));
        }
        if let Some(kb) = opts.buffer_kb {
            if kb < 8 {
                return Err(RecordError::BadBufferKb(kb));
            }
        }
        let out_dir = match opts.output.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !out_dir.is_dir() {
            return Err(RecordError::NoOutputDir(out_dir));
        }
        let tracefs_dir = tracefs::tracefs_dir(root)?;
        let mut notes = Vec::new();
        let stale = tracefs::remove_stale_instances(root, &tracefs_dir)?;
        if !stale.is_empty() {
            notes.push(format!(
                "removed stale instance(s) of dead pmlab processes: {}",
                stale.join(", ")
            ));
        }
        if let Some(name) = &opts.tracer {
            let available =
                tracefs::read_file(&tracefs_dir.join("available_tracers")).unwrap_or_default();
            if !available.split_whitespace().any(|t| t == name) {
                return Err(RecordError::UnknownTracer {
                    name: name.clone(),
                    available: available.trim().to_string(),
                });
            }
        }
        if let Some(name) = &opts.clock {
            let available =
                tracefs::read_file(&tracefs_dir.join("trace_clock")).unwrap_or_default();
            let names = available
                .split_whitespace()
                .map(|w| w.trim_matches(['[', ']']));
            if !names.clone().any(|c| c == name) {
                return Err(RecordError::UnknownClock {
                    name: name.clone(),
                    available: names.collect::<Vec<_>>().join(" "),
                });
            }
        }
        let (enabled, ev_notes) = resolve_events(&tracefs_dir, &opts.events)?;
        notes.extend(ev_notes);
        let mut filters = Vec::new();
        for (spec, filter) in &opts.filters {
            let r = tracefs::resolve_event(&tracefs_dir, spec)?;
            let covered = enabled
                .iter()
                .any(|(s, e)| *s == r.0 && (e.is_none() || *e == r.1));
            if !covered {
                return Err(RecordError::FilterWithoutEvent(spec.clone()));
            }
            filters.push((r, filter.clone()));
        }
        let reader_cpus = match &opts.reader_cpus {
            Some(list) => {
                let online = online_cpus(root);
                let ok: Vec<u32> = list
                    .iter()
                    .copied()
                    .filter(|c| online.contains(c))
                    .collect();
                if ok.is_empty() {
                    return Err(RecordError::BadReaderCpus(list.clone()));
                }
                Some(ok)
            }
            None => None,
        };

        let instance = Instance::create(&tracefs_dir)?;
        let control = Arc::new(ReaderControl::new().map_err(io_err(instance.dir()))?);
        let hook_control = control.clone();
        instance.set_abort_hook(Arc::new(move || {
            hook_control.abort_and_wait(Duration::from_secs(2))
        }));
        let page_size = page_size_of(&instance);
        let mut rec = Recorder {
            instance: Some(instance),
            tracefs_dir,
            kallsyms: root.path("/proc/kallsyms"),
            opts,
            enabled,
            readers: Vec::new(),
            control,
            notes,
            page_size,
            started: Instant::now(),
        };
        rec.configure(&filters)?;
        rec.instance().set_tracing_on(true)?;
        rec.mark_each_cpu();
        rec.start_readers(reader_cpus)?;
        rec.started = Instant::now();
        Ok(rec)
    }

    fn instance(&self) -> &Instance {
        self.instance
            .as_ref()
            .expect("instance present while recording")
    }

    fn configure(&mut self, filters: &[(EventSelection, String)]) -> Result<(), RecordError> {
        let inst = self.instance();
        inst.set_tracing_on(false)?;
        let kb = match self.opts.buffer_kb {
            Some(kb) => kb,
            None => default_buffer_kb(inst.cpus()?.len()),
        };
        inst.set_buffer_kb(kb)?;
        inst.set_buffer_percent(self.opts.buffer_percent)?;
        inst.set_poll_waits()?;
        for (sys, ev) in &self.enabled {
            inst.enable_event(sys, ev.as_deref())?;
        }
        if self.opts.stacktrace {
            inst.write("options/stacktrace", "1")?;
        }
        if let Some(t) = &self.opts.tracer {
            inst.write("current_tracer", t)?;
        }
        if let Some(c) = &self.opts.clock {
            inst.write("trace_clock", c)?;
        }
        for ((sys, ev), filter) in filters {
            if let Err(e) = inst.set_filter(sys, ev.as_deref(), filter) {
                let name = match ev {
                    Some(ev) => format!("{sys}:{ev}"),
                    None => sys.clone(),
                };
                return Err(match e {
                    TracefsError::Write { source, .. } => RecordError::BadFilter {
                        event: name,
                        filter: filter.clone(),
                        source,
                    },
                    other => other.into(),
                });
            }
        }
        Ok(())
    }

    /// Writes one marker into each CPU's buffer before the readers first poll. The kernel
    /// arms a reader's `buffer_percent` watermark only when its poll finds the buffer
    /// non-empty; polled empty, the reader is woken when the first page fills, which on an
    /// idle CPU is seconds later, in the middle of the measured part. This thread moves to
    /// each CPU in turn (CPUs it may not run on keep that one early wakeup), then back.
    fn mark_each_cpu(&self) {
        use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
        use std::io::Write;
        let (Ok(cpus), Ok(path), Ok(home)) = (
            self.instance().cpus(),
            self.instance().file("trace_marker"),
            sched_getaffinity(None),
        ) else {
            return;
        };
        let Ok(mut marker) = OpenOptions::new().write(true).open(path) else {
            return;
        };
        for cpu in cpus.into_iter().filter(|&c| (c as usize) < CpuSet::MAX_CPU) {
            let mut one = CpuSet::new();
            one.set(cpu as usize);
            if sched_setaffinity(None, &one).is_ok() {
                let _ = marker.write_all(format!("pmlab: recording CPU {cpu}\n").as_bytes());
            }
        }
        let _ = sched_setaffinity(None, &home);
    }

    fn start_readers(&mut self, reader_cpus: Option<Vec<u32>>) -> Result<(), RecordError> {
        let cpus = self.instance().cpus()?;
        for cpu in cpus {
            let raw = self
                .instance()
                .file(&format!("per_cpu/cpu{cpu}/trace_pipe_raw"))?;
            let trace = match OpenOptions::new()
                .read(true)
                .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
                .open(&raw)
            {
                Ok(f) => f,
                Err(e) => {
                    self.notes.push(format!(
                        "CPU {cpu} has no trace buffer ({}: {e}); not recorded",
                        raw.display()
                    ));
                    continue;
                }
            };
            let tmp = temp_path(&self.opts.output, cpu);
            // Read too: take_pages hands out what the mover wrote.
            let out = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(io_err(&tmp))?;
            let watch = trace.try_clone().map_err(io_err(&raw))?;
            let page = self.page_size as usize;
            let pipe = if self.opts.splice {
                let (r, w) = make_pipe(1 << 20).map_err(io_err(&raw))?;
                let cap = pipe_capacity(&w);
                Some((r, w, cap))
            } else {
                None
            };
            let mover = Arc::new(Mutex::new(PageMover {
                trace,
                out,
                page,
                pipe,
                buf: vec![0u8; page],
            }));
            let ctl = self.control.clone();
            let pin = reader_cpus.clone();
            let shared = mover;
            let mover = Arc::downgrade(&shared);
            *ctl.running.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            let handle = std::thread::Builder::new()
                .name(format!("pmlab-rec-cpu{cpu}"))
                .spawn(move || {
                    let r = read_cpu(&watch, &shared, pin.as_deref(), &ctl)
                        .map_err(|source| RecordError::Reader { cpu, source });
                    ctl.reader_exited();
                    r
                })
                .map_err(io_err(&raw))?;
            self.readers.push(CpuReader {
                cpu,
                tmp,
                handle: Some(handle),
                mover,
                taken: 0,
            });
        }
        Ok(())
    }

    /// The pages recorded since the last call, per CPU (whole pages, the partial page the
    /// kernel was writing included): the streaming mode `pmlab top` reads its intervals
    /// from. This thread flushes each CPU through the reader's own mover (the readers are not
    /// woken), so every event committed before the call is in the pages. Without `keep`
    /// the handed-out bytes are freed from the temp files (a hole is punched), and
    /// [`Recorder::stop`] then writes a trace.dat without them.
    pub fn take_pages(&mut self, keep: bool) -> Result<Vec<(u32, Vec<u8>)>, RecordError> {
        use std::os::unix::fs::FileExt;
        let mut out = Vec::with_capacity(self.readers.len());
        for r in &mut self.readers {
            let Some(mover) = r.mover.upgrade() else {
                // The reader ended (an error that stop() reports): nothing more comes.
                out.push((r.cpu, Vec::new()));
                continue;
            };
            let mut m = mover.lock().unwrap_or_else(|e| e.into_inner());
            m.flush()
                .map_err(|source| RecordError::Reader { cpu: r.cpu, source })?;
            let len = m.out.metadata().map_err(io_err(&r.tmp))?.len();
            let mut pages = vec![0u8; (len - r.taken.min(len)) as usize];
            m.out
                .read_exact_at(&mut pages, r.taken)
                .map_err(io_err(&r.tmp))?;
            if !keep && len > 0 {
                use rustix::fs::{fallocate, FallocateFlags};
                // Best effort: a file system without holes keeps the bytes.
                let _ = fallocate(
                    &m.out,
                    FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
                    0,
                    len,
                );
            }
            r.taken = len;
            out.push((r.cpu, pages));
        }
        Ok(out)
    }

    /// A trace without events that has this recording's formats, symbols, names, clock
    /// and page layout: what [`crate::dat::decode_pages`] decodes [`Recorder::take_pages`]'
    /// batches against. Built by reading back the header [`Recorder::stop`] would write.
    pub fn skeleton(&self) -> Result<(crate::model::Trace, PageLayout), RecordError> {
        let mut header = self.machine_header()?;
        header.trace_clock = self.instance().read("trace_clock").ok();
        header.cmdlines = merged_cmdlines(&self.tracefs_dir, &BTreeMap::new());
        let cpus = self.readers.iter().map(|r| r.cpu + 1).max().unwrap_or(0);
        let bytes = writer::encode_without_events(&header, cpus)?;
        let trace =
            crate::dat::parse(&bytes, &crate::dat::LoadOptions::default()).map_err(|e| {
                RecordError::Header(match e {
                    crate::dat::DatError::Malformed(m) => m,
                    crate::dat::DatError::Format(f) => crate::error::Malformed(f.to_string()),
                })
            })?;
        Ok((trace, page_layout(&header)))
    }

    /// Notes so far (skipped events, stale instances removed).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Path of the instance directory (for tests and diagnostics).
    pub fn instance_dir(&self) -> Option<&Path> {
        self.instance.as_ref().map(|i| i.dir())
    }

    /// Stop tracing, flush every CPU's remaining pages, remove the instance and write
    /// the trace.dat file.
    pub fn stop(mut self) -> Result<RecordSummary, RecordError> {
        let duration = self.started.elapsed();
        self.instance().set_tracing_on(false)?;
        self.control.signal_stop();
        let mut splice_used = self.opts.splice;
        let mut first_err = None;
        for r in &mut self.readers {
            match r.handle.take().map(|h| h.join()) {
                Some(Ok(Ok(res))) => splice_used &= res.splice_used,
                Some(Ok(Err(e))) => {
                    first_err.get_or_insert(e);
                }
                Some(Err(_)) => {
                    first_err.get_or_insert(RecordError::ReaderPanicked(r.cpu));
                }
                None => {}
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        let stats: Vec<u64> = self
            .readers
            .iter()
            .map(|r| self.stats_lost(r.cpu))
            .collect();
        let trace_clock = self.instance().read("trace_clock").ok();
        let cpu_stats: Vec<String> = self
            .readers
            .iter()
            .map(|r| {
                let s = self
                    .instance()
                    .read(&format!("per_cpu/cpu{}/stats", r.cpu))
                    .unwrap_or_default();
                format!("CPU: {}\n{s}", r.cpu)
            })
            .collect();
        if let Some(mut inst) = self.instance.take() {
            inst.remove()?;
        }

        let mut header = self.machine_header()?;
        header.trace_clock = trace_clock;
        header.cpu_stats = cpu_stats;
        let buffers: Vec<(u32, &Path, u64)> = self
            .readers
            .iter()
            .zip(&stats)
            .map(|(r, lost)| (r.cpu, r.tmp.as_path(), *lost))
            .collect();
        let summary = assemble(
            &self.opts.output,
            header,
            &buffers,
            self.page_size,
            &self.tracefs_dir,
        );
        self.remove_temps();
        let mut summary = summary?;
        summary.duration_ns = duration.as_nanos() as u64;
        summary.notes = self.notes.clone();
        summary.transport = if splice_used {
            "splice".into()
        } else {
            "read".into()
        };
        Ok(summary)
    }

    /// Overrun + commit overrun + dropped events of one CPU buffer.
    fn stats_lost(&self, cpu: u32) -> u64 {
        let text = self
            .instance()
            .read(&format!("per_cpu/cpu{cpu}/stats"))
            .unwrap_or_default();
        parse_stats_lost(&text)
    }

    /// The machine's metadata for the events we enabled.
    fn machine_header(&self) -> Result<TraceDatHeader, RecordError> {
        let mut h = tracefs_header(&self.tracefs_dir, self.page_size, &self.enabled)?;
        h.kallsyms = tracefs::read_bytes(&self.kallsyms).unwrap_or_default();
        h.uname = uname();
        Ok(h)
    }

    fn remove_temps(&self) {
        for r in &self.readers {
            let _ = fs::remove_file(&r.tmp);
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.instance.is_some() || self.readers.iter().any(|r| r.handle.is_some()) {
            if let Some(i) = &self.instance {
                let _ = i.set_tracing_on(false);
            }
            self.control.abort.store(true, Ordering::SeqCst);
            self.control.signal_stop();
            for r in &mut self.readers {
                if let Some(h) = r.handle.take() {
                    let _ = h.join();
                }
            }
            if let Some(mut i) = self.instance.take() {
                let _ = i.remove();
            }
        }
        self.remove_temps();
    }
}

/// A trace.dat header from a tracefs directory: its header files, `ftrace` formats, the
/// formats of the `enabled` events (a whole system when the event is None) and
/// `printk_formats`. The caller adds kallsyms, uname, clock and stats.
fn tracefs_header(
    t: &Path,
    page_size: u32,
    enabled: &[EventSelection],
) -> Result<TraceDatHeader, RecordError> {
    let rd = |p: PathBuf| tracefs::read_bytes(&p);
    let mut h = TraceDatHeader {
        page_size,
        header_page: rd(t.join("events/header_page"))?,
        header_event: rd(t.join("events/header_event"))?,
        ..TraceDatHeader::default()
    };
    for ev in tracefs::system_events(t, "ftrace").unwrap_or_default() {
        if let Ok(f) = tracefs::read_bytes(&t.join("events/ftrace").join(&ev).join("format")) {
            h.ftrace_formats.push(f);
        }
    }
    let mut systems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (sys, ev) in enabled {
        let list = systems.entry(sys.clone()).or_default();
        match ev {
            Some(e) => list.push(e.clone()),
            None => list.extend(tracefs::system_events(t, sys)?),
        }
    }
    for (sys, mut evs) in systems {
        evs.sort();
        evs.dedup();
        let mut formats = Vec::new();
        for ev in evs {
            let p = t.join("events").join(&sys).join(&ev).join("format");
            formats.push(rd(p)?);
        }
        h.event_systems.push(EventSystem { name: sys, formats });
    }
    h.printk_formats = tracefs::read_bytes(&t.join("printk_formats")).unwrap_or_default();
    Ok(h)
}

/// Scan each CPU's page file (CPU, pages, loss from its stats), write the trace.dat file and
/// say what it holds. The one tail of a live recording ([`Recorder::stop`]) and an
/// extraction ([`extract`]); duration, notes and transport are the caller's.
fn assemble(
    output: &Path,
    mut header: TraceDatHeader,
    buffers: &[(u32, &Path, u64)],
    page_size: u32,
    tracefs_dir: &Path,
) -> Result<RecordSummary, RecordError> {
    let layout = page_layout(&header);
    let names = EventNames::from_header(&header);
    let max_cpu = buffers.iter().map(|b| b.0).max().unwrap_or(0);
    let mut cpus = Vec::new();
    let (mut events, mut lost, mut lost_pages, mut pages) = (vec![], vec![], vec![], vec![]);
    let mut by_id: HashMap<u16, u64> = HashMap::new();
    let mut comms: BTreeMap<i32, String> = BTreeMap::new();
    for &(cpu, file, stat_lost) in buffers {
        let scan = scan_file(
            file,
            page_size as usize,
            &layout,
            &names,
            &mut by_id,
            &mut comms,
        )?;
        cpus.push(cpu);
        events.push(scan.events);
        lost_pages.push(scan.lost);
        lost.push(scan.lost.max(stat_lost));
        pages.push(scan.pages);
    }
    header.cmdlines = merged_cmdlines(tracefs_dir, &comms);
    let mut sources: Vec<Option<&Path>> = vec![None; max_cpu as usize + 1];
    for &(cpu, file, _) in buffers {
        sources[cpu as usize] = Some(file);
    }
    let data: Vec<CpuData> = sources
        .iter()
        .map(|s| s.map(CpuData::File).unwrap_or(CpuData::Bytes(&[])))
        .collect();
    let bytes = writer::write_trace_dat_v6(output, &header, &data)?;
    let mut events_by_name: Vec<(String, u64)> = by_id
        .into_iter()
        .map(|(id, n)| (names.name(id), n))
        .collect();
    events_by_name.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(RecordSummary {
        path: output.to_path_buf(),
        cpus,
        events_per_cpu: events,
        lost_per_cpu: lost,
        lost_in_pages_per_cpu: lost_pages,
        lost_in_stats_per_cpu: buffers.iter().map(|b| b.2).collect(),
        pages_per_cpu: pages,
        events_by_name,
        bytes,
        duration_ns: 0,
        notes: Vec::new(),
        transport: String::new(),
    })
}

/// The machine a copied tracefs tree came from, where it differs from this one.
#[derive(Debug, Clone)]
pub struct ExtractOptions {
    /// The traced machine is big-endian.
    pub big_endian: bool,
    /// Size of the traced machine's `long` (4 or 8).
    pub long_size: u8,
    /// `uname` as "sysname nodename release machine", when known.
    pub uname: Option<String>,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        let h = TraceDatHeader::default();
        ExtractOptions {
            big_endian: h.big_endian,
            long_size: h.long_size,
            uname: None,
        }
    }
}

/// Extract mode: write the trace.dat of a tracefs tree copied from another kernel (a guest's
/// boot-time buffer). `dir` holds what the copier took from the global buffer:
/// `events/header_page`, `events/header_event`, `events/SYSTEM/EVENT/format` of the events
/// it recorded (and of `ftrace`), `per_cpu/cpuN/trace_pipe_raw` (its pages, as read) and
/// `per_cpu/cpuN/stats`, and optionally `trace_clock`, `saved_cmdlines`, `printk_formats`,
/// `kallsyms` and `buffer_subbuf_size_kb` (default page size: 4096). Lost events are counted
/// from the pages and the stats, as for a live recording.
pub fn extract(
    dir: &Path,
    output: &Path,
    opts: &ExtractOptions,
) -> Result<RecordSummary, RecordError> {
    let page_size = tracefs::read_file(&dir.join("buffer_subbuf_size_kb"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(4096);
    let mut enabled = Vec::new();
    for sys in tracefs::event_systems(dir)? {
        if sys == "ftrace" {
            continue;
        }
        for ev in tracefs::system_events(dir, &sys)? {
            if dir
                .join("events")
                .join(&sys)
                .join(&ev)
                .join("format")
                .is_file()
            {
                enabled.push((sys.clone(), Some(ev)));
            }
        }
    }
    let mut header = tracefs_header(dir, page_size, &enabled)?;
    header.big_endian = opts.big_endian;
    header.long_size = opts.long_size;
    header.uname = opts.uname.clone();
    header.kallsyms = tracefs::read_bytes(&dir.join("kallsyms")).unwrap_or_default();
    header.trace_clock = tracefs::read_file(&dir.join("trace_clock")).ok();
    let mut found: Vec<(u32, PathBuf, String)> = Vec::new();
    let per_cpu = dir.join("per_cpu");
    for e in fs::read_dir(&per_cpu).map_err(io_err(&per_cpu))? {
        let e = e.map_err(io_err(&per_cpu))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(cpu) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let raw = e.path().join("trace_pipe_raw");
        if raw.is_file() {
            let stats = tracefs::read_file(&e.path().join("stats")).unwrap_or_default();
            found.push((cpu, raw, stats));
        }
    }
    found.sort_by_key(|f| f.0);
    header.cpu_stats = found
        .iter()
        .map(|(cpu, _, s)| format!("CPU: {cpu}\n{s}"))
        .collect();
    let buffers: Vec<(u32, &Path, u64)> = found
        .iter()
        .map(|(cpu, raw, s)| (*cpu, raw.as_path(), parse_stats_lost(s)))
        .collect();
    let mut summary = assemble(output, header, &buffers, page_size, dir)?;
    summary.transport = "extract".into();
    Ok(summary)
}

/// Sum of the loss counters in a `per_cpu/cpuN/stats` file.
pub fn parse_stats_lost(text: &str) -> u64 {
    let mut lost = 0;
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if matches!(k.trim(), "overrun" | "commit overrun" | "dropped events") {
                lost += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    lost
}

fn online_cpus(root: &Root) -> Vec<u32> {
    let text = fs::read_to_string(root.path("/sys/devices/system/cpu/online")).unwrap_or_default();
    let mut v = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            v.extend(a..=b);
        }
    }
    v
}

fn uname() -> Option<String> {
    let u = rustix::system::uname();
    let s = |f: &std::ffi::CStr| f.to_string_lossy().into_owned();
    Some(format!(
        "{} {} {} {}",
        s(u.sysname()),
        s(u.nodename()),
        s(u.release()),
        s(u.machine())
    ))
}

/// Readers run at nice -10 (when allowed): they sleep until a buffer is half full, and then
/// must win the CPU against the traced load before the buffer overflows.
fn raise_reader_priority() {
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), -10);
}

fn pin_current_thread(cpus: &[u32]) {
    use rustix::thread::CpuSet;
    let mut set = CpuSet::new();
    for &c in cpus.iter().filter(|&&c| (c as usize) < CpuSet::MAX_CPU) {
        set.set(c as usize);
    }
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

fn make_pipe(size: usize) -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // Best effort: a bigger pipe moves more pages per splice.
    let _ = rustix::pipe::fcntl_setpipe_size(&w, size);
    Ok((r, w))
}

fn pipe_capacity(fd: &OwnedFd) -> usize {
    rustix::pipe::fcntl_getpipe_size(fd)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or(65536)
}

/// Mover of pages from one trace_pipe_raw to a file.
struct PageMover {
    trace: File,
    out: File,
    page: usize,
    pipe: Option<(OwnedFd, OwnedFd, usize)>,
    buf: Vec<u8>,
}

impl PageMover {
    /// Move everything the buffer holds, the page the kernel is still writing included.
    fn flush(&mut self) -> io::Result<()> {
        while self.step(false)? {}
        while self.step(true)? {}
        Ok(())
    }

    /// Move what is available: full pages by splice (or read); `partial` also takes the
    /// page the kernel is still writing (read only).
    fn step(&mut self, partial: bool) -> io::Result<bool> {
        if !partial {
            if let Some((r, w, cap)) = &self.pipe {
                let len = (*cap / self.page).max(1) * self.page;
                use rustix::io::Errno;
                use rustix::pipe::{splice, SpliceFlags};
                // No offsets: the file positions move.
                let n = match splice(
                    &self.trace,
                    None,
                    w,
                    None,
                    len,
                    SpliceFlags::NONBLOCK | SpliceFlags::MOVE,
                ) {
                    Ok(n) => n,
                    Err(Errno::AGAIN | Errno::INTR) => return Ok(false),
                    Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
                        self.pipe = None; // no splice here: fall back to read
                        return self.step(partial);
                    }
                    Err(e) => return Err(e.into()),
                };
                if n == 0 {
                    return Ok(false);
                }
                let mut left = n;
                while left > 0 {
                    let m = match splice(r, None, &self.out, None, left, SpliceFlags::MOVE) {
                        Ok(m) => m,
                        Err(Errno::INTR) => continue,
                        Err(e) => return Err(e.into()),
                    };
                    if m == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "splice to file moved nothing",
                        ));
                    }
                    left -= m;
                }
                return Ok(true);
            }
        }
        // read(): one page per call, the partial page included.
        use std::io::{Read, Write};
        let mut total = 0;
        loop {
            match self.trace.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    let mut chunk = &self.buf[..n];
                    // a short read is a page tail; keep whole pages in the file
                    let padded;
                    if n < self.page {
                        let mut v = chunk.to_vec();
                        v.resize(self.page, 0);
                        padded = v;
                        chunk = &padded;
                    }
                    self.out.write_all(chunk)?;
                    total += chunk.len();
                    if !partial && total >= 64 * self.page {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(total > 0)
    }
}

/// One CPU's reader: sleep in poll until the buffer reaches `buffer_percent` (or stop
/// is signalled), move full pages, and on stop flush everything including the last
/// partial page. `watch` is the mover's trace_pipe_raw (a second descriptor of it) for
/// polling outside the mover's lock, which [`Recorder::take_pages`] takes to flush.
fn read_cpu(
    watch: &File,
    mover: &Mutex<PageMover>,
    pin: Option<&[u32]>,
    ctl: &ReaderControl,
) -> io::Result<ReaderResult> {
    raise_reader_priority();
    if let Some(cpus) = pin {
        pin_current_thread(cpus);
    }
    let lock = || mover.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        use rustix::event::{poll, PollFd, PollFlags};
        let (trace_flags, stopped) = {
            let mut fds = [
                PollFd::new(watch, PollFlags::IN),
                PollFd::new(&ctl.stop_fd, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            (fds[0].revents(), !fds[1].revents().is_empty())
        };
        if stopped || ctl.abort.load(Ordering::SeqCst) {
            break;
        }
        if trace_flags.intersects(PollFlags::ERR | PollFlags::NVAL) {
            return Err(io::Error::other("poll error on trace_pipe_raw"));
        }
        let mut m = lock();
        let mut moved = false;
        while m.step(false)? {
            moved = true;
        }
        if !moved {
            // Readable without a full page (the watermark and the pages disagree, as on a
            // tiny buffer): take the partial page too, so the next poll waits rather than
            // returns at once. A wake on data, never a sleep on a clock.
            m.step(true)?;
        }
    }
    let mut m = lock();
    if !ctl.abort.load(Ordering::SeqCst) {
        m.flush()?;
    }
    m.out.sync_data().ok();
    Ok(ReaderResult {
        splice_used: m.pipe.is_some(),
    })
}

/// How the recorded pages are laid out: the machine's `header_page`, read by the trace
/// reader's own parser (the kernel's long size when it cannot be read).
fn page_layout(h: &TraceDatHeader) -> PageLayout {
    let header = parse_header_page(&String::from_utf8_lossy(&h.header_page))
        .unwrap_or_else(|_| HeaderPage::for_long_size(u32::from(h.long_size)));
    let endian = if h.big_endian {
        Endian::Big
    } else {
        Endian::Little
    };
    PageLayout::new(endian, &header)
}

/// (offset, size) of a field in an event record.
type FieldSpan = (usize, usize);

/// Event names by id, and the fields used to learn task names from sched events.
struct EventNames {
    names: HashMap<u16, String>,
    /// id → list of (comm field, pid field) pairs.
    comm_fields: HashMap<u16, Vec<(FieldSpan, FieldSpan)>>,
}

impl EventNames {
    /// From the event formats, parsed by the trace reader's format parser.
    fn from_header(h: &TraceDatHeader) -> EventNames {
        let mut names = HashMap::new();
        let mut comm_fields = HashMap::new();
        let all = h.ftrace_formats.iter().map(|f| ("ftrace", f)).chain(
            h.event_systems
                .iter()
                .flat_map(|s| s.formats.iter().map(move |f| (s.name.as_str(), f))),
        );
        for (sys, f) in all {
            let text = String::from_utf8_lossy(f);
            let Ok(format) = parse_format_opts(&text, u32::from(h.long_size), false) else {
                continue;
            };
            names.insert(format.id, format!("{sys}:{}", format.name));
            let span = |name: &str| {
                format
                    .field(name)
                    .map(|f| (f.offset as usize, f.size as usize))
            };
            let mut pairs = Vec::new();
            for (c, p) in [
                ("prev_comm", "prev_pid"),
                ("next_comm", "next_pid"),
                ("comm", "pid"),
            ] {
                if let (Some(cf), Some(pf)) = (span(c), span(p)) {
                    pairs.push((cf, pf));
                }
            }
            if !pairs.is_empty() {
                comm_fields.insert(format.id, pairs);
            }
        }
        EventNames { names, comm_fields }
    }

    fn name(&self, id: u16) -> String {
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("id {id}"))
    }
}

/// Counts from one CPU's pages.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct PageScan {
    pages: u64,
    events: u64,
    lost: u64,
}

/// Walk one ring-buffer page with the trace reader's page decoder; calls `on_record` with
/// each event's payload. Returns (events, lost): lost is the stored missed count, or 1 when
/// only flagged. A corrupt page counts what it holds up to the damage.
fn scan_page(page: &[u8], l: &PageLayout, mut on_record: impl FnMut(&[u8])) -> (u64, u64) {
    let lost = match page::read_header(l, page) {
        Ok(h) => match h.missed {
            Missed::None => 0,
            Missed::Unknown => 1,
            Missed::Count(n) => n.max(1),
        },
        Err(_) => return (0, 0),
    };
    let mut events = 0;
    let _ = page::for_each_record(l, page, |r| {
        if let Some(payload) = page.get(r.offset as usize..(r.offset + r.len) as usize) {
            events += 1;
            on_record(payload);
        }
    });
    (events, lost)
}

fn scan_file(
    path: &Path,
    page: usize,
    l: &PageLayout,
    names: &EventNames,
    by_id: &mut HashMap<u16, u64>,
    comms: &mut BTreeMap<i32, String>,
) -> Result<PageScan, RecordError> {
    let f = File::open(path).map_err(io_err(path))?;
    let len = f.metadata().map_err(io_err(path))?.len() as usize;
    let mut s = PageScan::default();
    if len == 0 {
        return Ok(s);
    }
    // SAFETY: the temp file is ours and no longer written.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(io_err(path))?;
    for p in map.chunks_exact(page) {
        s.pages += 1;
        let (ev, lost) = scan_page(p, l, |rec| {
            if rec.len() < 2 {
                return;
            }
            let id = uint(&rec[..2], l.endian == Endian::Big) as u16;
            *by_id.entry(id).or_insert(0) += 1;
            if let Some(pairs) = names.comm_fields.get(&id) {
                for &((co, cs), (po, ps)) in pairs {
                    if co + cs <= rec.len() && po + ps <= rec.len() && ps == 4 {
                        let pid = uint(&rec[po..po + 4], l.endian == Endian::Big) as u32 as i32;
                        let c = &rec[co..co + cs];
                        let c = &c[..c.iter().position(|&b| b == 0).unwrap_or(c.len())];
                        if pid > 0 && !c.is_empty() {
                            comms.insert(pid, String::from_utf8_lossy(c).into_owned());
                        }
                    }
                }
            }
        });
        s.events += ev;
        s.lost += lost;
    }
    Ok(s)
}

/// saved_cmdlines of the machine, overridden by the names seen in the recorded events.
fn merged_cmdlines(tracefs_dir: &Path, seen: &BTreeMap<i32, String>) -> Vec<u8> {
    let mut all: BTreeMap<i32, String> = BTreeMap::new();
    if let Ok(text) = tracefs::read_file(&tracefs_dir.join("saved_cmdlines")) {
        for line in text.lines() {
            if let Some((pid, comm)) = line.split_once(' ') {
                if let Ok(pid) = pid.trim().parse::<i32>() {
                    all.insert(pid, comm.to_string());
                }
            }
        }
    }
    for (pid, comm) in seen {
        all.insert(*pid, comm.clone());
    }
    let mut out = String::new();
    for (pid, comm) in all {
        out.push_str(&format!("{pid} {comm}\n"));
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> PageLayout {
        PageLayout::new(Endian::Little, &HeaderPage::for_long_size(8))
    }

    fn page_with(records: &[Vec<u8>], flags: u64, missed: Option<u64>) -> Vec<u8> {
        let mut data = Vec::new();
        for r in records {
            assert_eq!(r.len() % 4, 0);
            let type_len = (r.len() / 4) as u32;
            data.extend_from_slice(&(type_len | (5 << 5)).to_le_bytes());
            data.extend_from_slice(r);
        }
        // a time extend, then a long record (type_len 0)
        data.extend_from_slice(&(30u32 | (1 << 5)).to_le_bytes());
        data.extend_from_slice(&7u32.to_le_bytes());
        let long = vec![9u8; 120];
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&(long.len() as u32 + 4).to_le_bytes());
        data.extend_from_slice(&long);
        let mut page = vec![0u8; 4096];
        page[16..16 + data.len()].copy_from_slice(&data);
        let mut commit = data.len() as u64 | flags;
        if let Some(m) = missed {
            page[16 + data.len()..24 + data.len()].copy_from_slice(&m.to_le_bytes());
            commit |= 1 << 30;
        }
        page[8..16].copy_from_slice(&commit.to_le_bytes());
        page
    }

    #[test]
    fn default_buffer_is_4_mib_per_cpu_up_to_64_mib_in_all() {
        assert_eq!(default_buffer_kb(0), 4096);
        assert_eq!(default_buffer_kb(2), 4096);
        assert_eq!(default_buffer_kb(16), 4096);
        assert_eq!(default_buffer_kb(32), 2048);
        assert_eq!(default_buffer_kb(256), 1024);
    }

    #[test]
    fn scan_counts_records_of_all_sizes() {
        let p = page_with(&[vec![1, 0, 0, 0, 0, 0, 0, 0], vec![2, 0, 0, 0]], 0, None);
        let mut ids = Vec::new();
        let (n, lost) = scan_page(&p, &layout(), |r| ids.push((r[0], r.len())));
        assert_eq!(n, 3);
        assert_eq!(lost, 0);
        assert_eq!(ids, vec![(1, 8), (2, 4), (9, 120)]);
    }

    #[test]
    fn scan_reads_missed_event_counts() {
        let p = page_with(&[vec![1, 0, 0, 0]], 1 << 31, Some(42));
        assert_eq!(scan_page(&p, &layout(), |_| {}), (2, 42));
        let p = page_with(&[vec![1, 0, 0, 0]], 1 << 31, None);
        assert_eq!(scan_page(&p, &layout(), |_| {}).1, 1);
    }

    #[test]
    fn scan_survives_garbage() {
        let mut p = vec![0xffu8; 4096];
        p[8..16].copy_from_slice(&4000u64.to_le_bytes());
        let _ = scan_page(&p, &layout(), |_| {});
        let _ = scan_page(&p[..10], &layout(), |_| {});
    }

    #[test]
    fn format_fields_are_found() {
        let t = "name: x\nID: 372\nformat:\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n";
        let h = TraceDatHeader {
            long_size: 8,
            header_page: "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n".into(),
            event_systems: vec![EventSystem {
                name: "sched".into(),
                formats: vec![t.into()],
            }],
            ..TraceDatHeader::default()
        };
        let names = EventNames::from_header(&h);
        assert_eq!(names.comm_fields[&372], vec![((8, 16), (24, 4))]);
        assert_eq!(names.name(372), "sched:x");
        let l = page_layout(&h);
        assert_eq!((l.commit_size, l.data_offset), (8, 16));
    }

    #[test]
    fn stats_loss_sums_overruns_and_drops() {
        let s = "entries: 5\noverrun: 3\ncommit overrun: 1\nbytes: 9\ndropped events: 2\nread events: 7\n";
        assert_eq!(parse_stats_lost(s), 6);
    }
}
