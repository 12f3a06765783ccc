//! Perfetto export: a decoded [`Trace`] written as a Perfetto protobuf trace (`.pftrace`),
//! streamed packet by packet: `SystemInfo` (the kernel release, by which Perfetto decodes
//! `prev_state`), per-CPU `FtraceEventBundle`s of at most [`BUNDLE_EVENTS`] events (typed
//! messages for sched_switch, sched_waking, sched_wakeup, cpu_idle, cpu_frequency and print, a
//! `GenericFtraceEvent` for every other event), then a `ProcessTree`. Memory stays bounded by
//! one pending bundle per CPU, whatever the trace's length.

pub(crate) mod proto;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use prost::Message;

use crate::model::{FieldKind, FieldRef, Trace};
use proto::*;

/// Events per `FtraceEventBundle` (traced writes bundles of about a ring-buffer page; a
/// larger bundle only makes fewer packets).
pub const BUNDLE_EVENTS: usize = 1024;

/// All packets are one writer's sequence.
const SEQUENCE_ID: u32 = 1;

/// `clone_flags` bit of `task_newtask` that makes the new task a thread of its creator's process.
const CLONE_THREAD: u64 = 0x0001_0000;

/// Why a Perfetto export failed.
#[derive(Debug, thiserror::Error)]
pub enum PerfettoError {
    /// Writing to the output failed.
    #[error("writing the Perfetto trace: {0}")]
    Write(#[source] io::Error),
    /// The output file could not be created or finished.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportSummary {
    /// `TracePacket`s written.
    pub packets: u64,
    /// Ftrace events written, indexed by CPU.
    pub events_per_cpu: Vec<u64>,
    /// Events written as `GenericFtraceEvent` (no typed message).
    pub generic_events: u64,
    /// Threads in the `ProcessTree`, and processes they group under.
    pub threads: u64,
    /// Processes in the `ProcessTree`.
    pub processes: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Write `trace` as a Perfetto trace to `out` (streamed; `out` is not buffered here).
pub fn export<W: Write>(trace: &Trace, out: W) -> Result<ExportSummary, PerfettoError> {
    Exporter::new(trace, out)
        .run()
        .map_err(PerfettoError::Write)
}

/// [`export`] into the file `path`, written under a temporary name beside it and renamed
/// into place when complete: an error leaves no partial file behind.
pub fn export_to_path(trace: &Trace, path: &Path) -> Result<ExportSummary, PerfettoError> {
    let file_err = |source| PerfettoError::File {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .ok_or_else(|| file_err(io::Error::other("not a file name")))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let file = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let summary = export(trace, &mut w).map_err(|e| match e {
            PerfettoError::Write(e) | PerfettoError::File { source: e, .. } => e,
        })?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(summary)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(file_err)
}

/// How one event id is turned into an `FtraceEvent` payload (fields resolved once).
enum Kind {
    Switch {
        prev_comm: Option<FieldRef>,
        prev_pid: Option<FieldRef>,
        prev_prio: Option<FieldRef>,
        prev_state: Option<FieldRef>,
        next_comm: Option<FieldRef>,
        next_pid: Option<FieldRef>,
        next_prio: Option<FieldRef>,
    },
    Wake {
        waking: bool,
        comm: Option<FieldRef>,
        pid: Option<FieldRef>,
        prio: Option<FieldRef>,
        success: Option<FieldRef>,
        target_cpu: Option<FieldRef>,
    },
    Idle {
        frequency: bool,
        state: Option<FieldRef>,
        cpu_id: Option<FieldRef>,
    },
    Print {
        ip: Option<FieldRef>,
        buf: Option<FieldRef>,
    },
    Generic {
        name: String,
        fields: Vec<GenericSpec>,
        /// `task_newtask`: the fields that say whether a new task is a thread.
        newtask: Option<(FieldRef, FieldRef)>,
    },
}

struct GenericSpec {
    name: String,
    field: FieldRef,
    value: ValueKind,
}

#[derive(Clone, Copy)]
enum ValueKind {
    Signed,
    Unsigned,
    Str,
    /// A non-char array: its elements as `{0x..,0x..}`.
    Array {
        elem: u32,
    },
}

struct Exporter<'a, W: Write> {
    trace: &'a Trace,
    out: W,
    buf: Vec<u8>,
    kinds: HashMap<u16, Kind>,
    pending: Vec<Vec<FtraceEvent>>,
    lost_flagged: Vec<bool>,
    summary: ExportSummary,
    /// pid → comm, from saved cmdlines and every sched_switch.
    names: HashMap<i32, String>,
    /// pid → thread group, where `task_newtask` said.
    tgid: HashMap<i32, i32>,
}

impl<'a, W: Write> Exporter<'a, W> {
    fn new(trace: &'a Trace, out: W) -> Self {
        let kinds = trace
            .formats
            .iter()
            .map(|(&id, f)| {
                let r = |name: &str| trace.field(id, name);
                let kind = match (f.system.as_str(), f.name.as_str()) {
                    ("sched", "sched_switch") => Kind::Switch {
                        prev_comm: r("prev_comm"),
                        prev_pid: r("prev_pid"),
                        prev_prio: r("prev_prio"),
                        prev_state: r("prev_state"),
                        next_comm: r("next_comm"),
                        next_pid: r("next_pid"),
                        next_prio: r("next_prio"),
                    },
                    ("sched", name @ ("sched_waking" | "sched_wakeup")) => Kind::Wake {
                        waking: name == "sched_waking",
                        comm: r("comm"),
                        pid: r("pid"),
                        prio: r("prio"),
                        success: r("success"),
                        target_cpu: r("target_cpu"),
                    },
                    ("power", name @ ("cpu_idle" | "cpu_frequency")) => Kind::Idle {
                        frequency: name == "cpu_frequency",
                        state: r("state"),
                        cpu_id: r("cpu_id"),
                    },
                    ("ftrace", "print") => Kind::Print {
                        ip: r("ip"),
                        buf: r("buf"),
                    },
                    _ => Kind::Generic {
                        name: f.name.clone(),
                        fields: f
                            .fields
                            .iter()
                            .filter(|fd| !fd.common)
                            .filter_map(|fd| {
                                let value = match fd.kind {
                                    FieldKind::Int if fd.signed => ValueKind::Signed,
                                    FieldKind::Int => ValueKind::Unsigned,
                                    FieldKind::Array { is_char: true, .. }
                                    | FieldKind::DataLoc { is_char: true }
                                    | FieldKind::RelLoc { is_char: true } => ValueKind::Str,
                                    FieldKind::Array { elem_size, .. } => {
                                        ValueKind::Array { elem: elem_size }
                                    }
                                    FieldKind::DataLoc { .. } | FieldKind::RelLoc { .. } => {
                                        ValueKind::Array { elem: 1 }
                                    }
                                };
                                Some(GenericSpec {
                                    name: fd.name.clone(),
                                    field: r(&fd.name)?,
                                    value,
                                })
                            })
                            .collect(),
                        newtask: match (f.system.as_str(), f.name.as_str()) {
                            ("task", "task_newtask") => r("pid").zip(r("clone_flags")),
                            _ => None,
                        },
                    },
                };
                (id, kind)
            })
            .collect();
        let names = trace
            .cmdlines
            .iter()
            .map(|(&p, c)| (p, c.clone()))
            .collect();
        Exporter {
            trace,
            out,
            buf: Vec::with_capacity(1 << 16),
            kinds,
            pending: Vec::new(),
            lost_flagged: Vec::new(),
            summary: ExportSummary::default(),
            names,
            tgid: HashMap::new(),
        }
    }

    fn run(mut self) -> io::Result<ExportSummary> {
        self.system_info()?;
        let ev = &self.trace.events;
        for i in 0..ev.len() {
            let cpu = usize::from(ev.cpu[i]);
            if cpu >= self.pending.len() {
                self.pending.resize_with(cpu + 1, Vec::new);
                self.lost_flagged.resize(cpu + 1, false);
                self.summary.events_per_cpu.resize(cpu + 1, 0);
            }
            let e = self.event(i);
            self.pending[cpu].push(e);
            self.summary.events_per_cpu[cpu] += 1;
            if self.pending[cpu].len() >= BUNDLE_EVENTS {
                self.flush(cpu)?;
            }
        }
        for cpu in 0..self.pending.len() {
            self.flush(cpu)?;
        }
        self.process_tree()?;
        self.out.flush()?;
        Ok(self.summary)
    }

    /// One `Trace.packet` (field 1, length-delimited) on the output.
    fn packet(&mut self, p: TracePacket) -> io::Result<()> {
        self.buf.clear();
        prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut self.buf);
        p.encode_length_delimited(&mut self.buf)
            .map_err(io::Error::other)?;
        self.out.write_all(&self.buf)?;
        self.summary.packets += 1;
        self.summary.bytes += self.buf.len() as u64;
        Ok(())
    }

    fn system_info(&mut self) -> io::Result<()> {
        let meta = &self.trace.meta;
        let utsname = meta.uname.as_deref().map(|u| {
            let words: Vec<&str> = u.split_whitespace().collect();
            // "sysname nodename release [version words...] machine"
            Utsname {
                sysname: words.first().map(|s| s.to_string()),
                release: words.get(2).map(|s| s.to_string()),
                version: (words.len() > 4).then(|| words[3..words.len() - 1].join(" ")),
                machine: (words.len() > 3).then(|| words[words.len() - 1].to_string()),
            }
        });
        self.packet(TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            system_info: Some(SystemInfo {
                utsname,
                page_size: Some(self.trace.page_size).filter(|&p| p > 0),
                num_cpus: Some(self.trace.cpus).filter(|&c| c > 0),
            }),
            ..Default::default()
        })
    }

    fn flush(&mut self, cpu: usize) -> io::Result<()> {
        if self.pending[cpu].is_empty() {
            return Ok(());
        }
        let lost =
            !self.lost_flagged[cpu] && self.trace.lost.get(cpu).copied().flatten().unwrap_or(0) > 0;
        self.lost_flagged[cpu] = true;
        let event = std::mem::take(&mut self.pending[cpu]);
        self.packet(TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            ftrace_events: Some(FtraceEventBundle {
                cpu: Some(cpu as u32),
                event,
                lost_events: lost.then_some(true),
            }),
            ..Default::default()
        })?;
        self.pending[cpu] = Vec::with_capacity(BUNDLE_EVENTS);
        Ok(())
    }

    fn event(&mut self, i: usize) -> FtraceEvent {
        let t = self.trace;
        let ev = &t.events;
        let int = |f: Option<FieldRef>| f.map(|f| t.i64_at(i, f));
        let int32 = |f: Option<FieldRef>| f.map(|f| t.i64_at(i, f) as i32);
        let uint = |f: Option<FieldRef>| f.map(|f| t.u64_at(i, f));
        let text = |f: Option<FieldRef>| f.map(|f| field_str(t, i, f));
        let payload = match self.kinds.get(&ev.id[i]) {
            Some(Kind::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
            }) => {
                let s = SchedSwitchFtraceEvent {
                    prev_comm: text(*prev_comm),
                    prev_pid: int32(*prev_pid),
                    prev_prio: int32(*prev_prio),
                    prev_state: int(*prev_state),
                    next_comm: text(*next_comm),
                    next_pid: int32(*next_pid),
                    next_prio: int32(*next_prio),
                };
                for (pid, comm) in [(s.prev_pid, &s.prev_comm), (s.next_pid, &s.next_comm)] {
                    if let (Some(pid), Some(comm)) = (pid, comm) {
                        if pid != 0 && self.names.get(&pid) != Some(comm) {
                            self.names.insert(pid, comm.clone());
                        }
                    }
                }
                Payload::SchedSwitch(s)
            }
            Some(Kind::Wake {
                waking,
                comm,
                pid,
                prio,
                success,
                target_cpu,
            }) => {
                let w = SchedWakeupFtraceEvent {
                    comm: text(*comm),
                    pid: int32(*pid),
                    prio: int32(*prio),
                    success: int32(*success),
                    target_cpu: int32(*target_cpu),
                };
                if *waking {
                    Payload::SchedWaking(w)
                } else {
                    Payload::SchedWakeup(w)
                }
            }
            Some(Kind::Idle {
                frequency,
                state,
                cpu_id,
            }) => {
                let (state, cpu_id) = (
                    uint(*state).map(|v| v as u32),
                    uint(*cpu_id).map(|v| v as u32),
                );
                let e = CpuStateFtraceEvent { state, cpu_id };
                if *frequency {
                    Payload::CpuFrequency(e)
                } else {
                    Payload::CpuIdle(e)
                }
            }
            Some(Kind::Print { ip, buf }) => Payload::Print(PrintFtraceEvent {
                ip: uint(*ip),
                buf: text(*buf),
            }),
            Some(Kind::Generic {
                name,
                fields,
                newtask,
            }) => {
                self.summary.generic_events += 1;
                if let Some((pid, flags)) = newtask {
                    if t.u64_at(i, *flags) & CLONE_THREAD != 0 {
                        let parent = ev.pid[i];
                        let group = self.tgid.get(&parent).copied().unwrap_or(parent);
                        self.tgid.insert(t.i64_at(i, *pid) as i32, group);
                    }
                }
                Payload::Generic(GenericFtraceEvent {
                    event_name: Some(name.clone()),
                    field: fields
                        .iter()
                        .map(|g| GenericField {
                            name: Some(g.name.clone()),
                            value: Some(match g.value {
                                ValueKind::Signed => GenericValue::Int(t.i64_at(i, g.field)),
                                ValueKind::Unsigned => GenericValue::Uint(t.u64_at(i, g.field)),
                                ValueKind::Str => GenericValue::Str(field_str(t, i, g.field)),
                                ValueKind::Array { elem } => {
                                    GenericValue::Str(array_str(t, i, g.field, elem))
                                }
                            }),
                        })
                        .collect(),
                })
            }
            None => {
                self.summary.generic_events += 1;
                Payload::Generic(GenericFtraceEvent {
                    event_name: Some(format!("unknown_{}", ev.id[i])),
                    field: Vec::new(),
                })
            }
        };
        FtraceEvent {
            timestamp: Some(ev.ts[i]),
            pid: Some(ev.pid[i] as u32),
            common_flags: None,
            payload: Some(payload),
        }
    }

    /// Threads under their processes: a thread's process is its `task_newtask` creator's
    /// (CLONE_THREAD) where the trace has that event, else the thread leads its own.
    fn process_tree(&mut self) -> io::Result<()> {
        let mut pids: Vec<i32> = self.names.keys().copied().filter(|&p| p > 0).collect();
        pids.sort_unstable();
        let group = |p: i32| self.tgid.get(&p).copied().unwrap_or(p);
        let mut leaders: Vec<i32> = pids.iter().map(|&p| group(p)).collect();
        leaders.sort_unstable();
        leaders.dedup();
        let name = |p: i32| self.names.get(&p).cloned().unwrap_or_default();
        let tree = ProcessTree {
            processes: leaders
                .iter()
                .map(|&p| Process {
                    pid: Some(p),
                    ppid: None,
                    cmdline: vec![name(p)],
                    cmdline_is_comm: Some(true),
                })
                .collect(),
            threads: pids
                .iter()
                .map(|&p| Thread {
                    tid: Some(p),
                    name: Some(name(p)),
                    tgid: Some(group(p)),
                })
                .collect(),
        };
        self.summary.processes = tree.processes.len() as u64;
        self.summary.threads = tree.threads.len() as u64;
        let ts = self.trace.events.ts.first().copied();
        self.packet(TracePacket {
            timestamp: ts,
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            process_tree: Some(tree),
            ..Default::default()
        })
    }
}

/// A string field (char array or `__data_loc char[]`), cut at the first NUL; a flexible
/// `char buf[]` (size 0, as `print` has) runs to the record's end.
fn field_str(t: &Trace, i: usize, f: FieldRef) -> String {
    let b = t.flexible_bytes_at(i, f);
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A non-char array as `{0x1,0x2}`, elements of `elem` bytes in the trace's byte order.
fn array_str(t: &Trace, i: usize, f: FieldRef, elem: u32) -> String {
    let b = t.flexible_bytes_at(i, f);
    let elem = (elem.clamp(1, 8)) as usize;
    let big = t.endian == crate::model::Endian::Big;
    let mut s = String::from("{");
    for (k, c) in b.chunks_exact(elem).enumerate() {
        let v = if big {
            c.iter().fold(0u64, |v, &x| v << 8 | u64::from(x))
        } else {
            c.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x))
        };
        if k > 0 {
            s.push(',');
        }
        s.push_str(&format!("{v:#x}"));
    }
    s.push('}');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet decodes back to what was encoded, zeros included (proto2 presence).
    #[test]
    fn sched_switch_with_zero_pid_round_trips() {
        let p = TracePacket {
            ftrace_events: Some(FtraceEventBundle {
                cpu: Some(0),
                event: vec![FtraceEvent {
                    timestamp: Some(5),
                    pid: Some(0),
                    common_flags: None,
                    payload: Some(Payload::SchedSwitch(SchedSwitchFtraceEvent {
                        prev_comm: Some("swapper/0".into()),
                        prev_pid: Some(0),
                        prev_prio: Some(120),
                        prev_state: Some(0),
                        next_comm: Some("x".into()),
                        next_pid: Some(7),
                        next_prio: Some(120),
                    })),
                }],
                lost_events: None,
            }),
            ..Default::default()
        };
        let bytes = p.encode_to_vec();
        assert_eq!(TracePacket::decode(&bytes[..]).unwrap(), p);
        // prev_pid = 0 is on the wire: field 2 varint 0 inside the switch message.
        assert!(bytes.windows(2).any(|w| w == [0x10, 0x00]));
    }

    #[test]
    fn export_of_an_empty_trace_has_system_info_and_process_tree() {
        let mut t = Trace::default();
        t.meta.uname = Some("Linux host 6.18.0 #1 SMP x86_64".into());
        let mut out = Vec::new();
        let s = export(&t, &mut out).unwrap();
        assert_eq!(s.packets, 2);
        assert_eq!(s.bytes, out.len() as u64);
        // First packet: key of Trace.packet, then SystemInfo with the release inside.
        assert_eq!(out[0], 0x0a);
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("6.18.0"));
        assert!(text.contains("#1 SMP"));
    }

    #[test]
    fn export_to_path_leaves_nothing_when_the_directory_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/dir/out.pftrace");
        let err = export_to_path(&Trace::default(), &path).unwrap_err();
        assert!(err.to_string().contains("out.pftrace"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
