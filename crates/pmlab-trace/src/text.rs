//! ftrace text reader: the tracefs `trace` file and `trace-cmd report` output (with or
//! without `-R`, `-t`, latency columns) into the same columnar [`Trace`] as trace.dat.
//!
//! Text has no format files, so each event name gets a synthetic format: the common
//! fields, then one field per `key=value` pair seen on its lines — 8-byte integers when
//! every value of the key is a number, `__data_loc char[]` strings otherwise. Lines without
//! `key=value` pairs keep their text in a `buf` string field. trace-cmd's default
//! `sched_switch`/`sched_wakeup` layouts (`comm:pid [prio] S ==> ...`) are split into the
//! kernel's field names. Task states as letters become the kernel's bits (R=0, S=1, D=2, ...).

use std::collections::HashMap;

use crate::error::Malformed;
use crate::model::{EventFormat, Events, Field, FieldKind, Trace, TraceMeta};

/// One parsed event line.
struct Line<'a> {
    comm: &'a str,
    pid: i32,
    cpu: u32,
    ts: u64,
    name: &'a str,
    fields: Vec<(String, String)>,
}

/// Does `bytes` look like ftrace text (the start of a `trace` file or `trace-cmd report` output)?
pub fn looks_like_text(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(4096)];
    let Ok(s) =
        std::str::from_utf8(head).or_else(|e| std::str::from_utf8(&head[..e.valid_up_to()]))
    else {
        return false;
    };
    s.lines().any(|l| {
        l.starts_with("# tracer:")
            || l.starts_with("cpus=")
            || l.starts_with("version = ")
            || parse_line(l).is_some()
    })
}

/// Parse ftrace text into a columnar trace.
pub fn parse(bytes: &[u8]) -> Result<Trace, Malformed> {
    if !looks_like_text(bytes) {
        return Err(Malformed::new(
            "not a trace.dat file (no \\x17\\x08\\x44tracing magic) and not ftrace text",
        ));
    }
    let text = String::from_utf8_lossy(bytes);
    let mut cpus_reported = 0u32;
    let mut lines = Vec::new();
    // (index of the next event, cpu, lost count)
    let mut lost_marks: Vec<(usize, u32, i64)> = Vec::new();
    for l in text.lines() {
        if let Some(n) = l.strip_prefix("cpus=") {
            cpus_reported = n.trim().parse().unwrap_or(0);
            continue;
        }
        if l.starts_with('#') || l.trim().is_empty() {
            continue;
        }
        if let Some((cpu, n)) = lost_line(l) {
            lost_marks.push((lines.len(), cpu, n));
            continue;
        }
        if let Some(p) = parse_line(l) {
            lines.push(p);
        }
    }
    if lines.is_empty() {
        return Err(Malformed::new(
            "ftrace text with no event lines: empty trace",
        ));
    }
    build(lines, cpus_reported, lost_marks)
}

/// `CPU:3 [LOST 12 EVENTS]` (trace file) or `CPU:3 [12 EVENTS DROPPED]` (trace-cmd).
fn lost_line(l: &str) -> Option<(u32, i64)> {
    let l = l.trim();
    let rest = l.strip_prefix("CPU:")?;
    let (cpu, rest) = rest.split_once(' ')?;
    let cpu = cpu.trim().parse().ok()?;
    let inner = rest.trim().strip_prefix('[')?.strip_suffix(']')?;
    let n = inner
        .split_whitespace()
        .find_map(|w| w.parse::<i64>().ok())
        .unwrap_or(-1);
    (inner.contains("LOST") || inner.contains("DROPPED")).then_some((cpu, n))
}

fn parse_ts(t: &str) -> Option<u64> {
    let (s, f) = t.split_once('.').unwrap_or((t, ""));
    let secs: u64 = s.parse().ok()?;
    if !f.bytes().all(|b| b.is_ascii_digit()) || f.len() > 9 {
        return None;
    }
    let mut frac: u64 = if f.is_empty() { 0 } else { f.parse().ok()? };
    for _ in f.len()..9 {
        frac *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(frac)
}

/// `  comm-pid  (tgid) [cpu] flags ts: name: rest`
fn parse_line(l: &str) -> Option<Line<'_>> {
    let open = l.find(" [")? + 1;
    let close = open + l[open..].find(']')?;
    // Columns hold CPU numbers as u16.
    let cpu = u32::from(l[open + 1..close].trim().parse::<u16>().ok()?);
    let mut task = l[..open].trim_end();
    if task.ends_with(')') {
        // the optional TGID column: `comm-pid (tgid)`
        task = task[..task.rfind('(')?].trim_end();
    }
    let task = task.trim_start();
    let dash = task.rfind('-')?;
    let pid: i32 = task[dash + 1..].parse().ok()?;
    let comm = &task[..dash];
    let mut rest = l[close + 1..].trim_start();
    // optional latency flags (`d..2.`), then `ts:`
    let (first, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let ts = match first.strip_suffix(':').and_then(parse_ts) {
        Some(ts) => {
            rest = after;
            ts
        }
        None => {
            let after = after.trim_start();
            let (t, a) = after.split_once(char::is_whitespace).unwrap_or((after, ""));
            let ts = t.strip_suffix(':').and_then(parse_ts)?;
            rest = a;
            ts
        }
    };
    let rest = rest.trim_start();
    let colon = rest.find(':')?;
    let name = &rest[..colon];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let body = rest[colon + 1..].trim();
    Some(Line {
        comm,
        pid,
        cpu,
        ts,
        name,
        fields: parse_fields(name, body),
    })
}

/// Task state letters as the kernel's report bits.
fn state_bits(s: &str) -> Option<u64> {
    if let Some(n) = parse_int(s) {
        return Some(n as u64);
    }
    let mut v = 0u64;
    for part in s.split('|') {
        v |= match part {
            "R" => 0,
            "R+" => 0x100,
            "S" => 1,
            "D" => 2,
            "T" => 4,
            "t" => 8,
            "X" => 16,
            "Z" => 32,
            "P" => 64,
            "I" => 128,
            _ => return None,
        };
    }
    Some(v)
}

/// `comm:pid [prio]` of trace-cmd's sched plugin.
fn comm_pid_prio(s: &str) -> Option<(String, String, String)> {
    let s = s.trim();
    let (cp, prio) = s.rsplit_once(" [")?;
    let prio = prio.strip_suffix(']')?;
    let (comm, pid) = cp.rsplit_once(':')?;
    pid.parse::<i64>().ok()?;
    Some((comm.to_string(), pid.to_string(), prio.to_string()))
}

fn parse_fields(name: &str, body: &str) -> Vec<(String, String)> {
    // trace-cmd's sched_switch: `prev:pid [prio] S ==> next:pid [prio]`
    if name == "sched_switch" && !body.contains("prev_comm=") {
        if let Some((a, b)) = body.split_once(" ==> ") {
            if let (Some((pc, pp, ppr)), Some((nc, np, npr))) = (
                a.rsplit_once(' ').and_then(|(x, _)| comm_pid_prio(x)),
                comm_pid_prio(b),
            ) {
                let st = a.rsplit_once(' ').map(|(_, s)| s).unwrap_or("");
                let st = state_bits(st).map(|v| v.to_string()).unwrap_or(st.into());
                return vec![
                    ("prev_comm".into(), pc),
                    ("prev_pid".into(), pp),
                    ("prev_prio".into(), ppr),
                    ("prev_state".into(), st),
                    ("next_comm".into(), nc),
                    ("next_pid".into(), np),
                    ("next_prio".into(), npr),
                ];
            }
        }
    }
    // trace-cmd's sched_wakeup: `comm:pid [prio] CPU:002` (optionally ` success=1`)
    if name.starts_with("sched_wak") && !body.contains("comm=") {
        if let Some(i) = body.find("] CPU:") {
            if let Some((c, p, pr)) = comm_pid_prio(&body[..=i]) {
                let cpu = body[i + 6..].split_whitespace().next().unwrap_or("0");
                let cpu = cpu.trim_start_matches('0');
                return vec![
                    ("comm".into(), c),
                    ("pid".into(), p),
                    ("prio".into(), pr),
                    (
                        "target_cpu".into(),
                        if cpu.is_empty() { "0" } else { cpu }.into(),
                    ),
                ];
            }
        }
    }
    // key=value pairs: a key is an identifier after whitespace (or at the start) followed by '='.
    let b = body.as_bytes();
    let mut starts = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t' {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            if j > i && j < b.len() && b[j] == b'=' && !b[i].is_ascii_digit() {
                starts.push((i, j));
                i = j + 1;
                continue;
            }
        }
        i += 1;
    }
    if starts.is_empty() || starts[0].0 != 0 {
        return vec![("buf".into(), body.to_string())];
    }
    let mut out = Vec::with_capacity(starts.len());
    for (k, &(s, e)) in starts.iter().enumerate() {
        let end = starts.get(k + 1).map(|x| x.0).unwrap_or(b.len());
        let mut v = body[e + 1..end].trim();
        if let Some(x) = v.strip_suffix("==>") {
            v = x.trim_end();
        }
        let key = &body[s..e];
        let v = if key.ends_with("_state") {
            state_bits(v).map(|n| n.to_string()).unwrap_or(v.into())
        } else {
            v.to_string()
        };
        out.push((key.to_string(), v));
    }
    out
}

fn parse_int(v: &str) -> Option<i64> {
    if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok().map(|x| x as i64);
    }
    if let Ok(x) = v.parse::<i64>() {
        return Some(x);
    }
    v.parse::<u64>().ok().map(|x| x as i64)
}

/// The subsystem an event name belongs to (text does not say): by name, for the events
/// pmlab's analyses read; `ftrace` for the rest.
pub fn system_of(name: &str) -> &'static str {
    const POWER: &[&str] = &[
        "cpu_idle",
        "cpu_idle_miss",
        "cpu_frequency",
        "cpu_frequency_limits",
        "guest_halt_poll_ns",
        "pstate_sample",
        "powernv_throttle",
        "suspend_resume",
        "clock_enable",
        "clock_disable",
        "clock_set_rate",
        "device_pm_callback_start",
        "device_pm_callback_end",
        "wakeup_source_activate",
        "wakeup_source_deactivate",
        "pm_qos_update_target",
        "dev_pm_qos_add_request",
    ];
    const VECTORS: &[&str] = &[
        "local_timer",
        "reschedule",
        "call_function",
        "call_function_single",
        "irq_work",
        "error_apic",
        "spurious_apic",
        "x86_platform_ipi",
        "thermal_apic",
        "threshold_apic",
        "deferred_error_apic",
        "vector",
    ];
    if POWER.contains(&name) {
        return "power";
    }
    if let Some(base) = name
        .strip_suffix("_entry")
        .or_else(|| name.strip_suffix("_exit"))
    {
        if VECTORS.contains(&base) {
            return "irq_vectors";
        }
    }
    match name {
        "print" | "bprint" | "bputs" | "function" | "funcgraph_entry" | "funcgraph_exit"
        | "kernel_stack" | "user_stack" | "raw_data" | "osnoise" | "timerlat" => "ftrace",
        n if n.starts_with("sched_") => "sched",
        n if n.starts_with("irq_handler_") || n.starts_with("softirq_") => "irq",
        n if n.starts_with("ipi_") => "ipi",
        n if n.starts_with("hrtimer_") || n.starts_with("timer_") || n.starts_with("itimer_") => {
            "timer"
        }
        "tick_stop" => "timer",
        n if n.starts_with("cpuhp_") => "cpuhp",
        n if n.starts_with("workqueue_") => "workqueue",
        n if n.starts_with("rcu_") => "rcu",
        _ => "ftrace",
    }
}

const COMMON: [(&str, &str, u32, u32, bool); 4] = [
    ("common_type", "unsigned short", 0, 2, false),
    ("common_flags", "unsigned char", 2, 1, false),
    ("common_preempt_count", "unsigned char", 3, 1, false),
    ("common_pid", "int", 4, 4, true),
];
const COMMON_SIZE: u32 = 8;

struct Synth {
    id: u16,
    /// Field names in first-seen order with (is_int, signed).
    fields: Vec<(String, bool, bool)>,
    index: HashMap<String, usize>,
}

fn build(
    lines: Vec<Line<'_>>,
    cpus_reported: u32,
    lost_marks: Vec<(usize, u32, i64)>,
) -> Result<Trace, Malformed> {
    // pass 1: the synthetic formats
    let mut synth: HashMap<&str, Synth> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for l in &lines {
        let n = synth.len();
        let s = synth.entry(l.name).or_insert_with(|| {
            order.push(l.name);
            Synth {
                id: n as u16 + 1,
                fields: Vec::new(),
                index: HashMap::new(),
            }
        });
        for (k, v) in &l.fields {
            let num = parse_int(v);
            match s.index.get(k) {
                Some(&i) => {
                    let f = &mut s.fields[i];
                    f.1 &= num.is_some();
                    f.2 |= num.is_some_and(|x| x < 0) && !v.starts_with("0x");
                }
                None => {
                    s.index.insert(k.clone(), s.fields.len());
                    s.fields.push((
                        k.clone(),
                        num.is_some(),
                        num.is_some_and(|x| x < 0) && !v.starts_with("0x"),
                    ));
                }
            }
        }
        if synth.len() > u16::MAX as usize - 1 {
            return Err(Malformed::new(
                "ftrace text with more than 65534 event names",
            ));
        }
    }
    let mut formats = HashMap::new();
    for name in &order {
        let s = &synth[name];
        let mut fields: Vec<Field> = COMMON
            .iter()
            .map(|&(n, t, o, sz, sg)| Field {
                name: n.into(),
                type_name: t.into(),
                offset: o,
                size: sz,
                signed: sg,
                kind: FieldKind::Int,
                common: true,
            })
            .collect();
        let mut off = COMMON_SIZE;
        for (fname, is_int, signed) in &s.fields {
            let (type_name, size, kind) = if *is_int {
                (if *signed { "s64" } else { "u64" }, 8, FieldKind::Int)
            } else {
                ("__data_loc char[]", 4, FieldKind::DataLoc { is_char: true })
            };
            fields.push(Field {
                name: fname.clone(),
                type_name: type_name.into(),
                offset: off,
                size,
                signed: *signed,
                kind,
                common: false,
            });
            off += size;
        }
        formats.insert(
            s.id,
            EventFormat {
                id: s.id,
                system: system_of(name).to_string(),
                name: name.to_string(),
                fields,
                print_fmt: String::new(),
            },
        );
    }

    // pass 2: records
    let n = lines.len();
    let mut ev = Events {
        ts: Vec::with_capacity(n),
        cpu: Vec::with_capacity(n),
        pid: Vec::with_capacity(n),
        id: Vec::with_capacity(n),
        loc: Vec::with_capacity(n),
        raw: Default::default(),
    };
    let mut raw: Vec<u8> = Vec::new();
    let mut cmdlines = HashMap::new();
    let mut max_cpu = 0;
    let mut order_idx: Vec<usize> = (0..n).collect();
    // text is in time order per CPU; merge to global order (stable)
    order_idx.sort_by_key(|&i| lines[i].ts);
    let mut new_pos = vec![0usize; n];
    for (pos, &i) in order_idx.iter().enumerate() {
        new_pos[i] = pos;
    }
    for &i in &order_idx {
        let l = &lines[i];
        let s = &synth[l.name];
        let start = raw.len();
        let fixed = COMMON_SIZE as usize
            + s.fields
                .iter()
                .map(|f| if f.1 { 8 } else { 4 })
                .sum::<usize>();
        raw.resize(start + fixed, 0);
        raw[start..start + 2].copy_from_slice(&s.id.to_le_bytes());
        raw[start + 4..start + 8].copy_from_slice(&l.pid.to_le_bytes());
        let mut dynamic: Vec<u8> = Vec::new();
        let mut offs = Vec::with_capacity(s.fields.len());
        let mut o = COMMON_SIZE as usize;
        for f in &s.fields {
            offs.push(o);
            o += if f.1 { 8 } else { 4 };
        }
        let mut set = vec![false; s.fields.len()];
        for (k, v) in &l.fields {
            let fi = s.index[k];
            if set[fi] {
                continue;
            }
            set[fi] = true;
            let at = start + offs[fi];
            if s.fields[fi].1 {
                let x = parse_int(v).unwrap_or(0);
                raw[at..at + 8].copy_from_slice(&x.to_le_bytes());
            } else {
                let rel = fixed + dynamic.len();
                let len = v.len() + 1;
                if rel > 0xffff || len > 0xffff {
                    continue;
                }
                dynamic.extend_from_slice(v.as_bytes());
                dynamic.push(0);
                let loc = ((len as u32) << 16) | rel as u32;
                raw[at..at + 4].copy_from_slice(&loc.to_le_bytes());
            }
        }
        raw.extend_from_slice(&dynamic);
        ev.push(l.ts, l.cpu as u16, l.pid, s.id, start, raw.len() - start);
        max_cpu = max_cpu.max(l.cpu);
        if l.comm != "<...>" && !l.comm.is_empty() {
            cmdlines.entry(l.pid).or_insert_with(|| l.comm.to_string());
        }
    }
    ev.raw = raw.into();
    let cpus = cpus_reported.max(max_cpu + 1);
    let mut lost = vec![None; cpus as usize];
    let mut missed_before = Vec::new();
    for (idx, cpu, count) in lost_marks {
        if let Some(slot) = lost.get_mut(cpu as usize) {
            if count >= 0 {
                *slot = Some(slot.unwrap_or(0) + count as u64);
            }
        }
        let pos = if idx < n { new_pos[idx] } else { n };
        missed_before.push((pos, count));
    }
    missed_before.sort();
    Ok(Trace {
        endian: crate::model::Endian::Little,
        long_size: 8,
        page_size: 4096,
        cpus,
        formats,
        events: ev,
        cmdlines,
        kallsyms: Default::default(),
        printk_formats: HashMap::new(),
        lost,
        source: "ftrace text".into(),
        meta: TraceMeta {
            version: 0,
            cpus_reported: cpus,
            buffers: vec![String::new()],
            ts_in_ns: true,
            ..Default::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE_FILE: &str = "# tracer: nop
#
# entries-in-buffer/entries-written: 4/4   #P:2
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
          <idle>-0       [001] d..1.   100.000001: cpu_idle: state=1 cpu_id=1
 kworker/0:1 H-12       [000] d..2.   100.000002: sched_switch: prev_comm=kworker/0:1 H prev_pid=12 prev_prio=120 prev_state=I ==> next_comm=swapper/0 next_pid=0 next_prio=120
CPU:1 [LOST 7 EVENTS]
          <idle>-0       [001] dN.1.   100.000500: cpu_idle: state=4294967295 cpu_id=1
            bash-99      [000] .....   100.001000: tracing_mark_write: hello world
";

    #[test]
    fn trace_file_into_columns() {
        let t = parse(TRACE_FILE.as_bytes()).unwrap();
        assert_eq!(t.events.len(), 4);
        assert_eq!(t.cpus, 2);
        let idle = t.event_id("power", "cpu_idle").unwrap();
        let state = t.field(idle, "state").unwrap();
        let first = (0..4).find(|&i| t.events.id[i] == idle).unwrap();
        assert_eq!(t.u64_at(first, state), 1);
        assert_eq!(t.events.ts[0], 100_000_001_000);
        let sw = t.event_id("sched", "sched_switch").unwrap();
        let i = (0..4).find(|&i| t.events.id[i] == sw).unwrap();
        assert_eq!(
            t.str_at(i, t.field(sw, "prev_comm").unwrap()),
            "kworker/0:1 H"
        );
        assert_eq!(t.u64_at(i, t.field(sw, "prev_state").unwrap()), 128);
        assert_eq!(t.u64_at(i, t.field(sw, "next_pid").unwrap()), 0);
        assert_eq!(t.comm(12), Some("kworker/0:1 H"));
        assert_eq!(t.lost[1], Some(7));
        let mark = t.event_id("", "tracing_mark_write").unwrap();
        let i = (0..4).find(|&i| t.events.id[i] == mark).unwrap();
        assert_eq!(t.str_at(i, t.field(mark, "buf").unwrap()), "hello world");
    }

    #[test]
    fn trace_cmd_report_output() {
        let text = "cpus=6
       trace-cmd-6244  [005] 162534.215742: sched_switch:         trace-cmd:6244 [120] S ==> swapper/5:0 [120]
          <idle>-0     [005] 162534.215764: cpu_idle:             state=2 cpu_id=5
          <idle>-0     [002] 162534.216010: sched_wakeup:         sh:6243 [120] CPU:002
";
        let t = parse(text.as_bytes()).unwrap();
        assert_eq!(t.cpus, 6);
        assert_eq!(t.events.len(), 3);
        let sw = t.event_id("sched", "sched_switch").unwrap();
        assert_eq!(t.str_at(0, t.field(sw, "next_comm").unwrap()), "swapper/5");
        assert_eq!(t.u64_at(0, t.field(sw, "prev_pid").unwrap()), 6244);
        assert_eq!(t.u64_at(0, t.field(sw, "prev_state").unwrap()), 1);
        let wk = t.event_id("sched", "sched_wakeup").unwrap();
        assert_eq!(t.u64_at(2, t.field(wk, "target_cpu").unwrap()), 2);
        assert_eq!(t.u64_at(2, t.field(wk, "pid").unwrap()), 6243);
    }

    #[test]
    fn empty_and_garbage_are_errors() {
        let e = parse(b"# tracer: nop\n#\n").unwrap_err();
        assert!(e.0.contains("empty trace"), "{e}");
        let e = parse(b"\x00\x01\x02garbage").unwrap_err();
        assert!(e.0.contains("not ftrace text"), "{e}");
        assert!(parse(b"").is_err());
    }
}
