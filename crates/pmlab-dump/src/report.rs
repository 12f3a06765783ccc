//! `pmlab dump`'s formatted view: each event as `trace-cmd report` (3.1) prints it, its
//! print format evaluated (the `printfmt` module) or, for the events libtraceevent's plugins
//! and trace-cmd's ftrace overrides print their own way, as they do (sched_switch,
//! sched_wakeup, hrtimer, function, function_graph, kernel_stack, bprint). Also the raw view (`-R`) with
//! the same line header, and event/CPU selection.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use crate::model::{EventFormat, Trace};
use crate::printfmt::{
    push_hex, push_i64, push_line_prefix, push_u64, BArg, BprintFormat, Env, PrintFormat,
};
use crate::render::{Carry, Renderer};

/// What to print and how.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Raw fields (`trace-cmd report -R`) instead of the print formats.
    pub raw: bool,
    /// Timestamps to the nanosecond (`-t`) instead of the microsecond.
    pub full_ts: bool,
    /// Only events of these CPUs.
    pub cpus: Option<Vec<u32>>,
    /// Only these events: `name` or `system:name`.
    pub events: Vec<String>,
}

/// An event name given to `pmlab dump -e` that the trace does not have.
#[derive(Debug, thiserror::Error)]
#[error("no event {name:?} in this trace; it has: {available}")]
pub struct UnknownEvent {
    /// The name as given.
    pub name: String,
    /// The events the trace has, comma-separated.
    pub available: String,
}

/// An event type whose lines pmlab cannot print as `trace-cmd report` does: pmlab says so
/// once per event type instead of silently printing something else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{system}:{name}: {why}; pmlab's lines for it differ from trace-cmd's")]
pub struct Unsupported {
    /// The event's system.
    pub system: String,
    /// The event's name.
    pub name: String,
    /// What trace-cmd does that pmlab does not.
    pub why: Why,
}

/// Why trace-cmd prints an event type in a way pmlab does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    /// A libtraceevent plugin replaces the event's print format with its own code.
    #[error("trace-cmd's {0} plugin prints it with its own code (pmlab prints its print format)")]
    PluginHandler(&'static str),
    /// The print format calls a function only a libtraceevent plugin defines.
    #[error("its print format calls {0}(), which trace-cmd's {1} plugin defines (pmlab prints [FAILED TO PARSE])")]
    PluginFunction(&'static str, &'static str),
    /// A record is shorter than the event's fixed-size fields and its ring-buffer page ends
    /// before them: libtraceevent reads on past the page buffer into whatever memory
    /// follows it, which the file does not hold.
    #[error("a record's fixed-size fields run past the end of its ring-buffer page, where trace-cmd prints whatever memory follows the page (pmlab prints zeros)")]
    PastPage,
}

/// Events libtraceevent 1.7's plugins print with their own code, pmlab's own renderings
/// aside (sched_switch, sched_wakeup, hrtimer, function): (plugin, system, event).
const PLUGIN_HANDLERS: &[(&str, &str, &str)] = &[
    ("futex", "syscalls", "sys_enter_futex"),
    ("kmem", "kmem", "kfree"),
    ("kmem", "kmem", "kmalloc"),
    ("kmem", "kmem", "kmalloc_node"),
    ("kmem", "kmem", "kmem_cache_alloc"),
    ("kmem", "kmem", "kmem_cache_alloc_node"),
    ("kmem", "kmem", "kmem_cache_free"),
    ("kvm", "kvm", "kvm_exit"),
    ("kvm", "kvm", "kvm_entry"),
    ("kvm", "kvm", "kvm_emulate_insn"),
    ("kvm", "kvm", "kvm_nested_vmexit"),
    ("kvm", "kvm", "kvm_nested_vmexit_inject"),
    ("kvm", "kvmmmu", "kvm_mmu_get_page"),
    ("kvm", "kvmmmu", "kvm_mmu_sync_page"),
    ("kvm", "kvmmmu", "kvm_mmu_unsync_page"),
    ("kvm", "kvmmmu", "kvm_mmu_zap_page"),
    ("kvm", "kvmmmu", "kvm_mmu_prepare_zap_page"),
    ("mac80211", "mac80211", "drv_bss_info_changed"),
    ("tlb", "tlb", "tlb_flush"),
];

/// Print-format functions only libtraceevent 1.7's plugins define: (function, plugin).
const PLUGIN_FUNCTIONS: &[(&str, &str)] = &[
    ("__le16_to_cpup", "cfg80211"),
    ("jbd2_dev_to_name", "jbd2"),
    ("jiffies_to_msecs", "jbd2"),
    ("is_writable_pte", "kvm"),
    ("scsi_trace_parse_cdb", "scsi"),
    ("xen_hypercall_name", "xen"),
];

/// Why `f`'s formatted lines differ from trace-cmd's, if pmlab knows they do.
fn unsupported(f: &EventFormat) -> Option<Why> {
    if let Some((plugin, ..)) = PLUGIN_HANDLERS
        .iter()
        .find(|(_, sys, name)| f.system == *sys && f.name == *name)
    {
        return Some(Why::PluginHandler(plugin));
    }
    let calls = |func: &str| {
        f.print_fmt.match_indices(func).any(|(at, _)| {
            let before = f.print_fmt[..at].bytes().next_back();
            let after = f.print_fmt[at + func.len()..].trim_start();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                && after.starts_with('(')
        })
    };
    PLUGIN_FUNCTIONS
        .iter()
        .find(|(func, _)| calls(func))
        .map(|(func, plugin)| Why::PluginFunction(func, plugin))
}

/// How one event type is printed.
enum Kind {
    Print(PrintFormat),
    /// libtraceevent could not parse the print format: `[FAILED TO PARSE]` and the raw fields.
    Failed,
    SchedSwitch {
        prev_pid: F,
        prev_comm: Option<F>,
        prev_prio: Option<F>,
        prev_state: Option<F>,
        next_pid: F,
        next_comm: Option<F>,
        next_prio: Option<F>,
        states: Vec<u8>,
    },
    SchedWakeup {
        pid: F,
        comm: Option<F>,
        prio: Option<F>,
        success: Option<F>,
        target_cpu: Option<F>,
    },
    HrtimerExpire {
        timer: Option<F>,
        now: Option<F>,
        function: Option<F>,
    },
    HrtimerStart {
        timer: Option<F>,
        function: Option<F>,
        expires: Option<F>,
        softexpires: Option<F>,
    },
    Function {
        ip: F,
        parent_ip: F,
    },
    KernelStack {
        caller: usize,
    },
    Bprint {
        ip: F,
        fmt: F,
        buf: usize,
    },
    /// function_graph's entry (trace-cmd's ftrace override): a leaf when the next record
    /// is its own exit, which is then printed on this line and not on its own.
    FgraphEntry {
        func: F,
        depth: F,
        exit: Option<FgraphExit>,
    },
    FgraphExit(FgraphExit),
}

/// funcgraph_exit's id and fields.
#[derive(Clone, Copy)]
struct FgraphExit {
    id: u16,
    func: F,
    depth: F,
    calltime: F,
    rettime: F,
}

fn fgraph_exit(trace: &Trace) -> Option<FgraphExit> {
    let f = trace
        .formats
        .values()
        .find(|f| f.system == "ftrace" && f.name == "funcgraph_exit")?;
    Some(FgraphExit {
        id: f.id,
        func: field(f, "func")?,
        depth: field(f, "depth")?,
        calltime: field(f, "calltime")?,
        rettime: field(f, "rettime")?,
    })
}

/// (offset, size) of a field; `tep_read_number_field` reads sizes 1, 2, 4 and 8 only.
#[derive(Clone, Copy)]
struct F(usize, usize);

fn field(f: &EventFormat, name: &str) -> Option<F> {
    f.fields
        .iter()
        .find(|x| x.name == name && !x.common)
        .map(|x| F(x.offset as usize, x.size as usize))
}

/// The task-state letters of sched_switch's `prev_state` by bit, as libtraceevent 1.7's
/// sched_switch plugin has them (1.8 and later read them from the format's `__print_flags`,
/// [`switch_states`]; trace-cmd 3.1 of Debian 12 links 1.7).
const STATES: &[u8] = b"SDTtZXxW";

fn kind_of(f: &EventFormat, trace: &Trace) -> Kind {
    let long_size = trace.long_size;
    let sys = f.system.as_str();
    match (sys, f.name.as_str()) {
        ("ftrace", "funcgraph_entry") => {
            if let (Some(func), Some(depth)) = (field(f, "func"), field(f, "depth")) {
                return Kind::FgraphEntry {
                    func,
                    depth,
                    exit: fgraph_exit(trace),
                };
            }
        }
        ("ftrace", "funcgraph_exit") => {
            if let Some(x) = fgraph_exit(trace) {
                return Kind::FgraphExit(x);
            }
        }
        ("sched", "sched_switch") => {
            if let (Some(prev_pid), Some(next_pid)) = (field(f, "prev_pid"), field(f, "next_pid")) {
                return Kind::SchedSwitch {
                    prev_pid,
                    prev_comm: field(f, "prev_comm"),
                    prev_prio: field(f, "prev_prio"),
                    prev_state: field(f, "prev_state"),
                    next_pid,
                    next_comm: field(f, "next_comm"),
                    next_prio: field(f, "next_prio"),
                    states: STATES.to_vec(),
                };
            }
        }
        ("sched", "sched_wakeup" | "sched_wakeup_new") => {
            if let Some(pid) = field(f, "pid") {
                return Kind::SchedWakeup {
                    pid,
                    comm: field(f, "comm"),
                    prio: field(f, "prio"),
                    success: field(f, "success"),
                    target_cpu: field(f, "target_cpu"),
                };
            }
        }
        ("timer", "hrtimer_expire_entry") => {
            return Kind::HrtimerExpire {
                timer: field(f, "timer").or_else(|| field(f, "hrtimer")),
                now: field(f, "now"),
                function: field(f, "function"),
            }
        }
        ("timer", "hrtimer_start") => {
            return Kind::HrtimerStart {
                timer: field(f, "timer").or_else(|| field(f, "hrtimer")),
                function: field(f, "function"),
                expires: field(f, "expires"),
                softexpires: field(f, "softexpires"),
            }
        }
        ("ftrace", "function") => {
            if let (Some(ip), Some(parent_ip)) = (field(f, "ip"), field(f, "parent_ip")) {
                return Kind::Function { ip, parent_ip };
            }
        }
        ("ftrace", "kernel_stack") => {
            if let Some(c) = f.fields.iter().find(|x| x.name == "caller") {
                return Kind::KernelStack {
                    caller: c.offset as usize,
                };
            }
        }
        ("ftrace", "bprint") => {
            if let (Some(ip), Some(fmt), Some(buf)) =
                (field(f, "ip"), field(f, "fmt"), field(f, "buf"))
            {
                return Kind::Bprint {
                    ip,
                    fmt,
                    buf: buf.0,
                };
            }
        }
        _ => {}
    }
    match PrintFormat::parse(f, long_size) {
        Ok(mut p) if !crate::render::print_fmt_fails(f) => {
            p.resolve_names(&trace.kallsyms);
            Kind::Print(p)
        }
        _ => Kind::Failed,
    }
}

/// Task names by pid, for the line header (libtraceevent's cmdlines): a table indexed by
/// pid (a hash lookup per event cost more than the rest of the header).
pub(crate) struct Comms {
    /// pid → index into `names` + 1 (0: unknown), for pids below the table's length.
    index: Vec<u32>,
    names: Vec<Box<[u8]>>,
    /// Pids beyond the table (none on a real trace: pid_max is at most 4M).
    other: HashMap<i32, Box<[u8]>>,
}

impl Comms {
    pub(crate) fn new(trace: &Trace) -> Comms {
        let max_pid = trace
            .cmdlines
            .keys()
            .chain(trace.events.pid.iter())
            .copied()
            .filter(|&p| p >= 0)
            .max()
            .unwrap_or(0)
            .min(1 << 22) as usize;
        let mut c = Comms {
            index: vec![0; max_pid + 1],
            names: Vec::new(),
            other: HashMap::new(),
        };
        for (&pid, name) in &trace.cmdlines {
            c.learn(pid, name.as_bytes());
        }
        c
    }

    #[inline]
    pub(crate) fn get(&self, pid: i32) -> &[u8] {
        if pid == 0 {
            return b"<idle>";
        }
        let k = match usize::try_from(pid).ok().and_then(|p| self.index.get(p)) {
            Some(&k) => k,
            None => return self.other.get(&pid).map_or(b"<...>", |c| c),
        };
        if k == 0 {
            b"<...>"
        } else {
            &self.names[k as usize - 1]
        }
    }

    /// Remember `comm` for `pid` unless it has a name already.
    #[inline]
    fn learn(&mut self, pid: i32, comm: &[u8]) {
        if pid == 0 {
            return;
        }
        match usize::try_from(pid)
            .ok()
            .and_then(|p| self.index.get_mut(p))
        {
            Some(k) if *k == 0 => {
                self.names.push(comm.into());
                *k = self.names.len() as u32;
            }
            Some(_) => {}
            None => {
                self.other.entry(pid).or_insert_with(|| comm.into());
            }
        }
    }
}

/// Writes events as `trace-cmd report` does.
pub struct Report<'t> {
    trace: &'t Trace,
    env: Env<'t>,
    raw: Renderer<'t>,
    /// What the raw fields printed so far leave for the next ones.
    raw_carry: Carry,
    /// Event kinds by id.
    kinds: Vec<Option<Kind>>,
    /// Per event id: ` name: ` and the padding to 20 columns, as the line shows it.
    names: Vec<Option<Box<[u8]>>>,
    /// Task names by pid: the saved cmdlines, then those the sched plugins learn from
    /// printed events (libtraceevent's `tep_register_comm`: only pids not known yet).
    comms: Comms,
    bprint: HashMap<u64, BprintFormat>,
    bargs: Vec<BArg>,
    opts: ReportOptions,
    buffer_width: usize,
    /// Selected event ids (None: all).
    ids: Option<HashSet<u16>>,
    /// An event already printed as part of an earlier line (a function_graph leaf's exit).
    consumed: Option<usize>,
    /// Per CPU, the function plugin's guess of the call stack (names by depth).
    fstacks: Vec<Vec<Option<&'t [u8]>>>,
    /// Ids of the event types the trace has events of.
    present: Vec<u16>,
}

impl<'t> Report<'t> {
    /// A writer for `trace`; fails when `opts.events` names an event the trace lacks.
    pub fn new(trace: &'t Trace, opts: ReportOptions) -> Result<Report<'t>, UnknownEvent> {
        let max = trace.formats.keys().copied().max().unwrap_or(0) as usize;
        let mut kinds: Vec<Option<Kind>> = (0..=max).map(|_| None).collect();
        let mut names: Vec<Option<Box<[u8]>>> = (0..=max).map(|_| None).collect();
        for (id, f) in &trace.formats {
            let mut col = format!(" {}: ", f.name).into_bytes();
            col.resize(col.len() + 20usize.saturating_sub(f.name.len()), b' ');
            names[*id as usize] = Some(col.into());
            // Kinds of events the file has (formats of other events are never used).
            kinds[*id as usize] = Some(Kind::Failed);
        }
        let mut seen = vec![false; max + 1];
        for &id in &trace.events.id {
            if let Some(s) = seen.get_mut(id as usize) {
                *s = true;
            }
        }
        let present: Vec<u16> = (0..=max as u16).filter(|&id| seen[id as usize]).collect();
        for id in &present {
            if let Some(f) = trace.formats.get(id) {
                kinds[*id as usize] = Some(kind_of(f, trace));
            }
        }
        let ids = if opts.events.is_empty() {
            None
        } else {
            let mut set = HashSet::new();
            for spec in &opts.events {
                let (sys, name) = match spec.split_once(':') {
                    Some((s, n)) => (s, n),
                    None => ("", spec.as_str()),
                };
                let hits: Vec<u16> = trace
                    .formats
                    .values()
                    .filter(|f| f.name == name && (sys.is_empty() || f.system == sys))
                    .map(|f| f.id)
                    .collect();
                if hits.is_empty() {
                    let mut have: Vec<String> = present
                        .iter()
                        .filter_map(|id| trace.formats.get(id))
                        .map(|f| format!("{}:{}", f.system, f.name))
                        .collect();
                    have.sort();
                    return Err(UnknownEvent {
                        name: spec.clone(),
                        available: have.join(", "),
                    });
                }
                set.extend(hits);
            }
            Some(set)
        };
        let buffer_width = trace
            .meta
            .buffers
            .iter()
            .map(|b| b.len())
            .max()
            .unwrap_or(0);
        Ok(Report {
            trace,
            env: Env::new(
                trace.endian == crate::model::Endian::Big,
                trace.long_size,
                &trace.kallsyms,
                &trace.printk_formats,
            ),
            raw: Renderer::new(trace),
            raw_carry: Carry::default(),
            kinds,
            names,
            comms: Comms::new(trace),
            consumed: None,
            fstacks: Vec::new(),
            bprint: HashMap::new(),
            bargs: Vec::new(),
            opts,
            buffer_width,
            ids,
            present,
        })
    }

    /// The selected event types the trace has whose lines pmlab cannot print as trace-cmd
    /// does: those trace-cmd's plugins print (not in the raw view: plugins do not change raw
    /// fields), and those whose raw fields run past a page ([`Why::PastPage`]; in the
    /// formatted view only where it prints raw fields, after `[FAILED TO PARSE]`).
    pub fn unsupported(&self) -> Vec<Unsupported> {
        let past = self.raw.ids_past_page();
        let mut v: Vec<Unsupported> = self
            .present
            .iter()
            .filter(|id| self.ids.as_ref().is_none_or(|s| s.contains(id)))
            .filter_map(|id| self.trace.formats.get(id))
            .filter_map(|f| {
                let raw_fields = self.opts.raw
                    || matches!(self.kinds.get(f.id as usize), Some(Some(Kind::Failed)));
                let why = if self.opts.raw { None } else { unsupported(f) };
                let why = why.or((raw_fields && past.contains(&f.id)).then_some(Why::PastPage));
                why.map(|why| Unsupported {
                    system: f.system.clone(),
                    name: f.name.clone(),
                    why,
                })
            })
            .collect();
        v.sort_by(|a, b| (&a.system, &a.name).cmp(&(&b.system, &b.name)));
        v
    }

    /// Whether event `i` is selected by the options (and not printed already).
    #[inline]
    pub fn selected(&self, i: usize) -> bool {
        if self.consumed == Some(i) {
            return false;
        }
        let ev = &self.trace.events;
        if let Some(c) = &self.opts.cpus {
            if !c.contains(&u32::from(ev.cpu[i])) {
                return false;
            }
        }
        match &self.ids {
            Some(ids) => ids.contains(&ev.id[i]),
            None => true,
        }
    }

    /// The lines before the events.
    pub fn header(&self, out: &mut Vec<u8>) {
        self.raw.header(out);
    }

    /// Append event `i` as `trace-cmd report` prints it (with its newline, and any
    /// "EVENTS DROPPED" line before it).
    pub fn event(&mut self, i: usize, missed: Option<i64>, out: &mut Vec<u8>) {
        let ev = &self.trace.events;
        let cpu = ev.cpu[i];
        push_line_prefix(self.trace, self.buffer_width, i, missed, out);
        let id = ev.id[i] as usize;
        if self.names.get(id).is_none_or(|n| n.is_none()) {
            out.extend_from_slice(
                b"[UNKNOWN EVENT][UNKNOWN EVENT] (NULL):               [UNKNOWN EVENT]\n",
            );
            return;
        }
        let pid = ev.pid[i];
        let ts = ev.ts[i];
        // "%16s-%-5d [%03d]"
        let comm = self.comms.get(pid);
        if comm.len() < 16 {
            out.resize(out.len() + 16 - comm.len(), b' ');
        }
        out.extend_from_slice(comm);
        out.push(b'-');
        let mut ib = itoa::Buffer::new();
        let p = ib.format(pid).as_bytes();
        out.extend_from_slice(p);
        if p.len() < 5 {
            out.resize(out.len() + 5 - p.len(), b' ');
        }
        out.extend_from_slice(b" [");
        if cpu < 10 {
            out.extend_from_slice(b"00");
        } else if cpu < 100 {
            out.push(b'0');
        }
        push_u64(out, cpu as u64);
        out.push(b']');
        self.time(ts, out);
        if let Some(Some(col)) = self.names.get(id) {
            out.extend_from_slice(col);
        }
        let body = out.len();
        if self.opts.raw {
            self.raw.raw_fields(i, &mut self.raw_carry, out);
        } else {
            self.info(i, id, out);
        }
        if out.len() > body && out[out.len() - 1] == b'\n' {
            out.pop();
        }
        out.push(b'\n');
    }

    /// " %5llu.%06llu:" (rounded to the microsecond), " %5llu.%09llu:" with `-t`, and
    /// "%5llu.%012llu:" for clocks that do not count nanoseconds.
    fn time(&self, ts: u64, out: &mut Vec<u8>) {
        let meta = &self.trace.meta;
        let (secs, frac, digits) = if meta.ts_in_ns || meta.version == 0 {
            out.push(b' ');
            if self.opts.full_ts {
                (ts / 1_000_000_000, ts % 1_000_000_000, 9)
            } else {
                let us = (ts + 500) / 1000;
                (us / 1_000_000, us % 1_000_000, 6)
            }
        } else {
            (ts / 1_000_000_000_000, ts % 1_000_000_000_000, 12)
        };
        let mut ib = itoa::Buffer::new();
        let t = ib.format(secs).as_bytes();
        if t.len() < 5 {
            out.resize(out.len() + 5 - t.len(), b' ');
        }
        out.extend_from_slice(t);
        out.push(b'.');
        let t = ib.format(frac).as_bytes();
        if t.len() < digits {
            out.resize(out.len() + digits - t.len(), b'0');
        }
        out.extend_from_slice(t);
        out.push(b':');
    }

    fn info(&mut self, i: usize, id: usize, out: &mut Vec<u8>) {
        let Report {
            trace,
            env,
            raw,
            raw_carry,
            kinds,
            comms,
            bprint,
            bargs,
            consumed,
            fstacks,
            ..
        } = self;
        let trace: &Trace = trace;
        let rec = trace.events.record(i);
        let env: &Env<'t> = env;
        let mut learn = |pid: u64, comm: &[u8]| comms.learn(pid as i32, comm);
        let rd = |f: F| env.read(rec, f.0, f.1);
        let comm_of = |f: F| {
            let b = rec.get(f.0..f.0 + f.1).unwrap_or(&[]);
            &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
        };
        match kinds.get(id).and_then(|k| k.as_ref()) {
            Some(Kind::Print(p)) => p.write(env, rec, out),
            None | Some(Kind::Failed) => {
                out.extend_from_slice(b"[FAILED TO PARSE]");
                raw.raw_fields(i, raw_carry, out);
            }
            Some(Kind::SchedSwitch {
                prev_pid,
                prev_comm,
                prev_prio,
                prev_state,
                next_pid,
                next_comm,
                next_prio,
                states,
            }) => {
                let (pp, np) = (rd(*prev_pid), rd(*next_pid));
                let (pc, nc) = (prev_comm.map(comm_of), next_comm.map(comm_of));
                if let Some(c) = pc {
                    out.extend_from_slice(c);
                    out.push(b':');
                }
                push_i64(out, pp as i64);
                out.push(b' ');
                if let Some(f) = prev_prio {
                    out.push(b'[');
                    push_i64(out, rd(*f) as i32 as i64);
                    out.extend_from_slice(b"] ");
                }
                if let Some(f) = prev_state {
                    // 1.7 passes the state as an int.
                    let v = rd(*f) as u32 as u64;
                    let mut found = false;
                    for (k, &c) in states.iter().enumerate() {
                        if v & (1u64 << k) != 0 {
                            if found {
                                out.push(b'|');
                            }
                            found = true;
                            out.push(c);
                        }
                    }
                    if !found {
                        out.push(b'R');
                    }
                }
                out.extend_from_slice(b" ==> ");
                if let Some(c) = nc {
                    out.extend_from_slice(c);
                    out.push(b':');
                }
                push_i64(out, np as i64);
                if let Some(f) = next_prio {
                    out.extend_from_slice(b" [");
                    push_i64(out, rd(*f) as i32 as i64);
                    out.push(b']');
                }
                if let Some(c) = pc {
                    learn(pp, c);
                }
                if let Some(c) = nc {
                    learn(np, c);
                }
            }
            Some(Kind::SchedWakeup {
                pid,
                comm,
                prio,
                success,
                target_cpu,
            }) => {
                let p = rd(*pid);
                let c = comm.map(comm_of);
                if let Some(c) = c {
                    out.extend_from_slice(c);
                    out.push(b':');
                }
                push_i64(out, p as i64);
                if let Some(f) = prio {
                    out.extend_from_slice(b" [");
                    push_i64(out, rd(*f) as i64);
                    out.push(b']');
                }
                if let Some(f) = success {
                    out.extend_from_slice(b" success=");
                    push_i64(out, rd(*f) as i64);
                }
                if let Some(f) = target_cpu {
                    out.extend_from_slice(b" CPU:");
                    let s = out.len();
                    push_u64(out, rd(*f));
                    let n = out.len() - s;
                    if n < 3 {
                        let old = out.len();
                        out.resize(old + 3 - n, b'0');
                        out.copy_within(s..old, s + 3 - n);
                        out[s..s + 3 - n].fill(b'0');
                    }
                }
                if let Some(c) = c {
                    learn(p, c);
                }
            }
            Some(Kind::HrtimerExpire {
                timer,
                now,
                function,
            }) => {
                out.extend_from_slice(b"hrtimer=");
                num_field(out, rec, env, *timer, NumFmt::Hex, "hrtimer");
                out.extend_from_slice(b" now=");
                num_field(out, rec, env, *now, NumFmt::Dec, "now");
                func_field(out, rec, env, *function);
            }
            Some(Kind::HrtimerStart {
                timer,
                function,
                expires,
                softexpires,
            }) => {
                out.extend_from_slice(b"hrtimer=");
                num_field(out, rec, env, *timer, NumFmt::Hex, "hrtimer");
                func_field(out, rec, env, *function);
                out.extend_from_slice(b" expires=");
                num_field(out, rec, env, *expires, NumFmt::Dec, "expires");
                out.extend_from_slice(b" softexpires=");
                num_field(out, rec, env, *softexpires, NumFmt::Dec, "softexpires");
            }
            Some(Kind::Function { ip, parent_ip }) => {
                // libtraceevent's function plugin (it replaces trace-cmd's `func <-- parent`):
                // the function indented 3 spaces a level, the levels guessed per CPU from
                // the parents seen; no parent (its `parent` option is off by default).
                let (a, p) = (rd(*ip), rd(*parent_ip));
                let func = env.function_at(a).map(|x| x.1);
                let mut index = 0;
                if let Some((_, parent)) = env.function_at(p) {
                    let cpu = usize::from(trace.events.cpu[i]);
                    if fstacks.len() <= cpu {
                        fstacks.resize_with(cpu + 1, Vec::new);
                    }
                    index = add_and_get_index(&mut fstacks[cpu], parent, func);
                }
                out.resize(out.len() + index * 3, b' ');
                match func {
                    Some(name) => out.extend_from_slice(name),
                    None => {
                        out.extend_from_slice(b"0x");
                        push_hex(out, a);
                    }
                }
            }
            Some(Kind::KernelStack { caller }) => {
                out.extend_from_slice(b"<stack trace >\n");
                let ls = env.long_size as usize;
                let mut at = *caller;
                while at + ls <= rec.len() && ls > 0 {
                    let a = env.read(rec, at, ls);
                    if (ls == 8 && a == u64::MAX) || a as u32 == u32::MAX {
                        break;
                    }
                    match env.function_at(a) {
                        Some((_, name)) => {
                            out.extend_from_slice(b"=> ");
                            out.extend_from_slice(name);
                            out.extend_from_slice(b" (");
                            push_hex(out, a);
                            out.extend_from_slice(b")\n");
                        }
                        None => {
                            out.extend_from_slice(b"=> ");
                            push_hex(out, a);
                            out.push(b'\n');
                        }
                    }
                    at += ls;
                }
            }
            Some(Kind::FgraphEntry { func, depth, exit }) => {
                let (f, d) = (rd(*func), rd(*depth));
                let pid = trace.events.pid[i];
                // trace-cmd 3.1 peeks at the next record of any CPU.
                let leaf = exit.filter(|x| {
                    let n = i + 1;
                    n < trace.events.len()
                        && trace.events.id[n] == x.id
                        && trace.events.pid[n] == pid
                        && env.read(trace.events.record(n), x.func.0, x.func.1) == f
                });
                match leaf {
                    Some(x) => {
                        let next = trace.events.record(i + 1);
                        let dur = env
                            .read(next, x.rettime.0, x.rettime.1)
                            .wrapping_sub(env.read(next, x.calltime.0, x.calltime.1));
                        graph_duration(out, dur);
                        indent(out, d);
                        match env.function_at(f) {
                            Some((_, name)) => out.extend_from_slice(name),
                            None => push_hex(out, f),
                        }
                        out.extend_from_slice(b"();");
                        *consumed = Some(i + 1);
                    }
                    None => {
                        out.extend_from_slice(b"  ");
                        out.extend_from_slice(b"           |  ");
                        indent(out, d);
                        match env.function_at(f) {
                            Some((_, name)) => out.extend_from_slice(name),
                            None => push_hex(out, f),
                        }
                        out.extend_from_slice(b"() {");
                    }
                }
            }
            Some(Kind::FgraphExit(x)) => {
                let dur = rd(x.rettime).wrapping_sub(rd(x.calltime));
                graph_duration(out, dur);
                indent(out, rd(x.depth));
                out.push(b'}');
            }
            Some(Kind::Bprint { ip, fmt, buf }) => {
                let (ip, addr, buf) = (rd(*ip), rd(*fmt), *buf);
                let long_size = env.long_size;
                let f =
                    bprint
                        .entry(addr)
                        .or_insert_with(|| match trace.printk_formats.get(&addr) {
                            Some(s) => BprintFormat::parse(s.as_bytes(), long_size),
                            None => {
                                let mut t = b"(NO FORMAT FOUND at ".to_vec();
                                push_hex(&mut t, addr);
                                t.extend_from_slice(b")\\n");
                                BprintFormat::parse(&t, long_size)
                            }
                        });
                f.args(env, rec, buf, ip, bargs);
                f.write(env, rec, bargs, out);
            }
        }
    }
}

/// The function plugin's `add_and_get_index`: the depth of `parent` in this CPU's stack
/// (0 and a new stack when absent); `child` goes one deeper. Deeper entries are kept.
fn add_and_get_index<'a>(
    stack: &mut Vec<Option<&'a [u8]>>,
    parent: &'a [u8],
    child: Option<&'a [u8]>,
) -> usize {
    fn set<'a>(stack: &mut Vec<Option<&'a [u8]>>, pos: usize, name: Option<&'a [u8]>) {
        if let Some(n) = name {
            if stack.len() <= pos {
                stack.resize(pos + 1, None);
            }
            stack[pos] = Some(n);
        }
    }
    let found = stack
        .iter()
        .take_while(|e| e.is_some())
        .position(|e| *e == Some(parent));
    match found {
        Some(k) => {
            set(stack, k + 1, child);
            k
        }
        None => {
            set(stack, 0, Some(parent));
            set(stack, 1, child);
            0
        }
    }
}

/// function_graph's overhead mark and duration column (trace-cmd's
/// `print_graph_overhead` and `print_graph_duration`): `+ 12.345 us   |  `.
fn graph_duration(out: &mut Vec<u8>, dur: u64) {
    out.extend_from_slice(match dur {
        d if d > 1_000_000_000 => b"$ ",
        d if d > 1_000_000 => b"# ",
        d if d > 100_000 => b"! ",
        d if d > 10_000 => b"+ ",
        _ => b"  ",
    });
    let s = out.len();
    push_u64(out, dur / 1000);
    if out.len() - s < 7 {
        out.push(b'.');
        let r = dur % 1000;
        out.extend_from_slice(&[
            b'0' + (r / 100) as u8,
            b'0' + (r / 10 % 10) as u8,
            b'0' + (r % 10) as u8,
        ]);
    }
    let len = out.len() - s;
    out.extend_from_slice(b" us ");
    if len < 7 {
        out.resize(out.len() + 7 - len, b' ');
    }
    out.extend_from_slice(b"|  ");
}

/// Two spaces per call depth (trace-cmd loops `(int)(depth * 2)` times).
fn indent(out: &mut Vec<u8>, depth: u64) {
    let n = depth.wrapping_mul(2) as i32;
    if n > 0 {
        out.resize(out.len() + n as usize, b' ');
    }
}

#[derive(Clone, Copy)]
enum NumFmt {
    Hex,
    Dec,
}

/// libtraceevent's `tep_print_num_field` ("0x%llx" or "%llu"), or its error text.
fn num_field(out: &mut Vec<u8>, rec: &[u8], env: &Env, f: Option<F>, fmt: NumFmt, name: &str) {
    match f.filter(|f| matches!(f.1, 1 | 2 | 4 | 8)) {
        Some(f) => {
            let v = env.read(rec, f.0, f.1);
            match fmt {
                NumFmt::Hex => {
                    out.extend_from_slice(b"0x");
                    push_hex(out, v);
                }
                NumFmt::Dec => push_u64(out, v),
            }
        }
        None => {
            out.extend_from_slice(b"CAN'T FIND FIELD \"");
            out.extend_from_slice(name.as_bytes());
            out.push(b'"');
        }
    }
}

/// libtraceevent's `tep_print_func_field(" function=%s")`: `name/0x(start - addr)`.
fn func_field(out: &mut Vec<u8>, rec: &[u8], env: &Env, f: Option<F>) {
    let Some(f) = f.filter(|f| matches!(f.1, 1 | 2 | 4 | 8)) else {
        return;
    };
    let v = env.read(rec, f.0, f.1);
    out.extend_from_slice(b" function=");
    match env.function_at(v) {
        Some((a, name)) => {
            out.extend_from_slice(name);
            out.extend_from_slice(b"/0x");
            push_hex(out, a.wrapping_sub(v));
        }
        None => {
            out.extend_from_slice(b"0x");
            let s = out.len();
            push_hex(out, v);
            let n = out.len() - s;
            if n < 8 {
                let old = out.len();
                out.resize(old + 8 - n, b'0');
                out.copy_within(s..old, s + 8 - n);
                out[s..s + 8 - n].fill(b'0');
            }
        }
    }
}

/// The formatted view as a [`crate::lines::Lines`]: one pass in order (its plugins'
/// state, task names learned from sched events and function call stacks, is not a carry).
struct InOrder<'t>(std::sync::Mutex<Report<'t>>);

impl crate::lines::Lines for InOrder<'_> {
    type Carry = ();
    fn lines(&self, range: std::ops::Range<usize>, _: &mut (), out: &mut Vec<u8>) {
        let Ok(mut r) = self.0.lock() else { return };
        let missed = &r.trace.meta.missed_before;
        let mut mi = missed.partition_point(|m| m.0 < range.start);
        for i in range {
            let mut m = None;
            while mi < missed.len() && missed[mi].0 <= i {
                if missed[mi].0 == i {
                    m = Some(missed[mi].1);
                }
                mi += 1;
            }
            if r.selected(i) {
                r.event(i, m, out);
            }
        }
    }
    fn merge(_: &mut (), _: &()) {}
    fn parallel(&self) -> bool {
        false
    }
}

/// Write the selected events of `trace` as `trace-cmd report` does (formatted, or raw with
/// `opts.raw`), header first (the text views' one output path, [`crate::lines::write`]).
pub fn dump<W: Write>(trace: &Trace, opts: ReportOptions, w: &mut W) -> std::io::Result<()> {
    let r = Report::new(trace, opts)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut head = Vec::new();
    r.header(&mut head);
    let view = InOrder(std::sync::Mutex::new(r));
    crate::lines::write(&view, trace.events.len(), &head, w)
}
