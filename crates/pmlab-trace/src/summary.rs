//! A one-pass summary of a decoded trace (events by name, per-CPU counts, time span,
//! lost events): what `pmlab trace info` prints. It reads every event's columns.

use serde::Serialize;

use crate::model::Trace;

/// How many events of one kind the trace holds.
#[derive(Debug, Clone, Serialize)]
pub struct EventCount {
    /// Event system (`sched`).
    pub system: String,
    /// Event name (`sched_switch`).
    pub name: String,
    /// Events of this kind.
    pub count: u64,
}

/// One CPU's share of a trace.
#[derive(Debug, Clone, Serialize)]
pub struct CpuSummary {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// Events recorded on it.
    pub events: u64,
    /// Events lost as the page headers tell; None when the kernel did not store the count.
    pub lost: Option<u64>,
}

/// What `pmlab trace info` prints: where the trace came from, its layout, counts and span.
#[derive(Debug, Clone, Serialize)]
pub struct TraceSummary {
    /// What was read: `trace.dat v6`, `trace.dat v7 (zstd)`, `ftrace text`.
    pub source: String,
    /// trace.dat version (6 or 7); 0 for ftrace text.
    pub version: u32,
    /// Section compression of a v7 file (`zstd`, `zlib`); None when uncompressed.
    pub compression: Option<String>,
    /// Trace clock (`local`, `global`, ...), when the file says.
    pub clock: Option<String>,
    /// Byte order of the traced machine: `little` or `big`.
    pub endian: String,
    /// The traced kernel's `long` size, bytes.
    pub long_size: u32,
    /// Ring-buffer page size, bytes.
    pub page_size: u32,
    /// Number of CPUs (see [`Trace::cpus`](crate::Trace::cpus)).
    pub cpus: u32,
    /// Buffer (instance) names; "" is the top buffer.
    pub buffers: Vec<String>,
    /// Events in the trace.
    pub events: u64,
    /// Events whose id has no format in the file.
    pub unknown_events: u64,
    /// First timestamp, in the trace clock's unit; None for an empty trace.
    pub first_ts: Option<u64>,
    /// Last timestamp; None for an empty trace.
    pub last_ts: Option<u64>,
    /// last - first, in the trace clock's unit (ns for the usual clocks).
    pub span: u64,
    /// Timestamps that go backwards in the merged order (should be 0).
    pub out_of_order: u64,
    /// Counts per event kind, most frequent first.
    pub by_event: Vec<EventCount>,
    /// Counts per CPU, by CPU.
    pub per_cpu: Vec<CpuSummary>,
}

/// Summarize `trace`, touching every event.
pub fn summarize(trace: &Trace) -> TraceSummary {
    let ev = &trace.events;
    // Counts indexed by a u16 in arrays of 2^16: no bounds checks.
    let mut by_id: Box<[u64; 1 << 16]> = vec![0u64; 1 << 16].try_into().unwrap();
    let mut by_cpu: Box<[u64; 1 << 16]> = vec![0u64; 1 << 16].try_into().unwrap();
    for (&id, &cpu) in ev.id.iter().zip(ev.cpu.iter()) {
        by_id[id as usize] += 1;
        by_cpu[cpu as usize] += 1;
    }
    let per_cpu: Vec<u64> = (0..trace.cpus.max(1) as usize)
        .map(|c| by_cpu.get(c).copied().unwrap_or(0))
        .collect();
    // The timestamps in a separate pass, which vectorizes.
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut out_of_order = 0u64;
    if let Some(&t0) = ev.ts.first() {
        (first, last) = (t0, t0);
        for (&prev, &ts) in ev.ts.iter().zip(&ev.ts[1..]) {
            first = first.min(ts);
            last = last.max(ts);
            out_of_order += (ts < prev) as u64;
        }
    }
    let mut by_event = Vec::new();
    let mut unknown_events = 0;
    for (id, &n) in by_id.iter().enumerate() {
        if n == 0 {
            continue;
        }
        match trace.formats.get(&(id as u16)) {
            Some(f) => by_event.push(EventCount {
                system: f.system.clone(),
                name: f.name.clone(),
                count: n,
            }),
            None => unknown_events += n,
        }
    }
    by_event.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
    let per_cpu = per_cpu
        .iter()
        .enumerate()
        .map(|(cpu, &events)| CpuSummary {
            cpu: cpu as u32,
            events,
            lost: trace.lost.get(cpu).copied().flatten(),
        })
        .collect();
    let empty = ev.is_empty();
    TraceSummary {
        source: trace.source.clone(),
        version: trace.meta.version,
        compression: trace.meta.compression.clone(),
        clock: trace.meta.clock.clone(),
        endian: format!("{:?}", trace.endian).to_lowercase(),
        long_size: trace.long_size,
        page_size: trace.page_size,
        cpus: trace.cpus,
        buffers: trace.meta.buffers.clone(),
        events: ev.len() as u64,
        unknown_events,
        first_ts: (!empty).then_some(first),
        last_ts: (!empty).then_some(last),
        span: if empty { 0 } else { last - first },
        out_of_order,
        by_event,
        per_cpu,
    }
}
