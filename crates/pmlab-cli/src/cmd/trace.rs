//! `pmlab trace info FILE [--json]`: version, compression, CPUs, events by name, time span, lost events.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  pmlab trace info trace.dat\n  pmlab trace info --json trace.dat | jq .by_event"
)]
pub struct Args {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Facts about a trace: version, compression, CPUs, events and counts, time span, lost events.
    #[command(
        after_help = "Examples:\n  pmlab trace info trace.dat\n  pmlab trace info --json trace.dat"
    )]
    Info {
        /// A trace.dat (v6/v7) or ftrace text file.
        file: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        TraceCommand::Info { file, json } => info(&file, json),
    }
}

fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

fn info(file: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let opts = pmlab_trace::dat::LoadOptions::without_kallsyms();
    let trace = pmlab_trace::open_with(file, &opts).context("cannot read trace")?;
    let s = pmlab_trace::summary::summarize(&trace);
    // The process ends right after printing: skip freeing the columns and formats.
    std::mem::forget(trace);
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!("file:        {}", file.display());
    println!("format:      {}", s.source);
    println!(
        "compression: {}",
        s.compression.as_deref().unwrap_or("none")
    );
    println!("clock:       {}", s.clock.as_deref().unwrap_or("unknown"));
    println!(
        "layout:      {} endian, {}-byte long, {}-byte pages",
        s.endian, s.long_size, s.page_size
    );
    println!("cpus:        {}", s.cpus);
    if s.buffers.len() > 1 {
        let names: Vec<&str> = s
            .buffers
            .iter()
            .map(|b| if b.is_empty() { "(top)" } else { b.as_str() })
            .collect();
        println!("buffers:     {}", names.join(", "));
    }
    println!("events:      {}", s.events);
    match (s.first_ts, s.last_ts) {
        (Some(a), Some(b)) => println!(
            "time span:   {} .. {} ({} s)",
            secs(a),
            secs(b),
            secs(s.span)
        ),
        _ => println!("time span:   (no events)"),
    }
    if s.out_of_order > 0 {
        println!("warning:     {} timestamps go backwards", s.out_of_order);
    }
    if s.unknown_events > 0 {
        println!(
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
    println!("{t}");
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
    println!("{t}");
    Ok(())
}
