//! A trace for people: `pmlab trace info`'s facts and tables, and `pmlab record`'s summary.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use pmlab_trace::record::RecordSummary;
use pmlab_trace::summary::TraceSummary;
use std::fmt::Write;
use std::path::Path;

fn human_bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// `pmlab record`'s summary for people: events, lost events and pages per CPU, the file, and
/// the most frequent events.
pub fn recording(s: &RecordSummary) -> String {
    let mut o = String::new();
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    t.set_header(vec!["CPU", "events", "lost", "pages"]);
    for i in 0..s.cpus.len() {
        t.add_row(vec![
            s.cpus[i].to_string(),
            s.events_per_cpu[i].to_string(),
            s.lost_per_cpu[i].to_string(),
            s.pages_per_cpu[i].to_string(),
        ]);
    }
    t.add_row(vec![
        "all".to_string(),
        s.total_events().to_string(),
        s.total_lost().to_string(),
        s.pages_per_cpu.iter().sum::<u64>().to_string(),
    ]);
    let _ = writeln!(o, "{t}");
    let _ = writeln!(
        o,
        "{}: {} ({} events in {:.2} s, {} lost, pages moved by {})",
        s.path.display(),
        human_bytes(s.bytes),
        s.total_events(),
        s.duration_ns as f64 / 1e9,
        s.total_lost(),
        s.transport
    );
    if !s.events_by_name.is_empty() {
        let top: Vec<String> = s
            .events_by_name
            .iter()
            .take(8)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        let _ = writeln!(o, "top events: {}", top.join(", "));
    }
    o
}

fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// `pmlab trace info FILE` for people: the header's facts, then events by name and per CPU.
pub fn info(file: &Path, s: &TraceSummary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "file:        {}", file.display());
    let _ = writeln!(o, "format:      {}", s.source);
    let _ = writeln!(
        o,
        "compression: {}",
        s.compression.as_deref().unwrap_or("none")
    );
    let _ = writeln!(
        o,
        "clock:       {}",
        s.clock.as_deref().unwrap_or("unknown")
    );
    let _ = writeln!(
        o,
        "layout:      {} endian, {}-byte long, {}-byte pages",
        s.endian, s.long_size, s.page_size
    );
    let _ = writeln!(o, "cpus:        {}", s.cpus);
    if s.buffers.len() > 1 {
        let names: Vec<&str> = s
            .buffers
            .iter()
            .map(|b| if b.is_empty() { "(top)" } else { b.as_str() })
            .collect();
        let _ = writeln!(o, "buffers:     {}", names.join(", "));
    }
    let _ = writeln!(o, "events:      {}", s.events);
    let _ = match (s.first_ts, s.last_ts) {
        (Some(a), Some(b)) => writeln!(
            o,
            "time span:   {} .. {} ({} s)",
            secs(a),
            secs(b),
            secs(s.span)
        ),
        _ => writeln!(o, "time span:   (no events)"),
    };
    if s.out_of_order > 0 {
        let _ = writeln!(o, "warning:     {} timestamps go backwards", s.out_of_order);
    }
    if s.unknown_events > 0 {
        let _ = writeln!(
            o,
            "warning:     {} events have no format in the file",
            s.unknown_events
        );
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(vec!["event", "count"]);
    for e in &s.by_event {
        t.add_row(vec![
            format!("{}:{}", e.system, e.name),
            e.count.to_string(),
        ]);
    }
    let _ = writeln!(o, "{t}");
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(vec!["cpu", "events", "lost"]);
    for c in &s.per_cpu {
        t.add_row(vec![
            c.cpu.to_string(),
            c.events.to_string(),
            c.lost
                .map(|l| l.to_string())
                .unwrap_or_else(|| "unknown (not stored)".into()),
        ]);
    }
    let _ = writeln!(o, "{t}");
    o
}
