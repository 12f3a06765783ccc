//! `pmlab export --perfetto OUT TRACE` and `pmlab export --parquet DIR --layout lisa TRACE`:
//! a trace written in another tool's format (Perfetto's protobuf trace, opened by
//! ui.perfetto.dev and trace_processor; LISA's Parquet directory, read by LISA's loader).

use std::path::PathBuf;

use anyhow::Context;

/// Parquet layouts the CLI writes (pmlab's own is Python's `t.to_parquet(dir)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// LISA's `trace-dump parquet`: common_ts, common_cpu, every field, meta.json.
    Lisa,
}

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  pmlab export --perfetto trace.pftrace trace.dat\n  pmlab export --perfetto out.pftrace --json trace.dat\n  pmlab export --parquet out/ --layout lisa trace.dat\n  pmlab export --parquet out/ --layout lisa --events sched_switch,sched_wakeup trace.dat\n\nOpen the file at https://ui.perfetto.dev (\"Open trace file\", or drag it onto the page):\nthe file is read in the browser and not uploaded. Events get one track per CPU; sched_switch,\nsched_waking/wakeup, cpu_idle, cpu_frequency and print are typed, every other event is\nshown by name with its fields (Perfetto's \"generic\" ftrace events).\nThe file is written under a temporary name and renamed when complete.\n\n--parquet writes one EVENT.parquet per event and meta.json, as LISA's trace-dump does\n(columns common_ts, common_cpu, then every field of the event's format; see docs/traces.md)."
)]
#[command(group(clap::ArgGroup::new("out").required(true).args(["perfetto", "parquet"])))]
pub struct Args {
    /// Write a Perfetto protobuf trace (.pftrace) to this file.
    #[arg(long, value_name = "OUT")]
    pub perfetto: Option<PathBuf>,
    /// Write one Parquet file per event into this directory.
    #[arg(long, value_name = "DIR", requires = "layout")]
    pub parquet: Option<PathBuf>,
    /// The Parquet layout (with --parquet).
    #[arg(long, value_enum)]
    pub layout: Option<Layout>,
    /// Only these events (with --parquet), comma-separated: NAME or SYSTEM:NAME.
    #[arg(long, value_delimiter = ',', requires = "parquet")]
    pub events: Vec<String>,
    /// A trace.dat (v6/v7) or ftrace text file.
    pub trace: PathBuf,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(dir) = &args.parquet {
        return parquet(&args, dir);
    }
    let out = args
        .perfetto
        .as_ref()
        .context("--perfetto OUT or --parquet DIR")?;
    let opts = pmlab_trace::dat::LoadOptions::without_kallsyms();
    let trace = pmlab_trace::open_with(&args.trace, &opts).context("cannot read trace")?;
    let summary = pmlab_dump::perfetto::export_to_path(&trace, out)
        .context("cannot write the Perfetto trace")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let events: u64 = summary.events_per_cpu.iter().sum();
        println!(
            "{}: {} events on {} CPUs ({} generic), {} threads in {} processes, {} packets, {} bytes",
            out.display(),
            events,
            summary.events_per_cpu.len(),
            summary.generic_events,
            summary.threads,
            summary.processes,
            summary.packets,
            summary.bytes
        );
    }
    std::mem::forget(trace);
    Ok(())
}

/// `--parquet DIR --layout lisa`: every event asked for is checked before anything is written.
fn parquet(args: &Args, dir: &std::path::Path) -> anyhow::Result<()> {
    let trace = pmlab_trace::open(&args.trace).context("cannot read trace")?;
    let events: Option<Vec<(String, u16)>> = if args.events.is_empty() {
        None
    } else {
        Some(
            args.events
                .iter()
                .map(|e| Ok((e.clone(), trace.event_by_name(e)?)))
                .collect::<Result<_, pmlab_trace::names::Unknown>>()
                .with_context(|| format!("{}", args.trace.display()))?,
        )
    };
    let written = pmlab_dump::lisa::write_dir(&trace, &trace.kallsyms, dir, events.as_deref())
        .with_context(|| format!("cannot write LISA's layout into {}", dir.display()))?;
    if args.json {
        let files: Vec<String> = written
            .files
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let v = serde_json::json!({"files": files, "meta": written.meta.display().to_string()});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{}: {} Parquet files and meta.json (LISA's layout)",
            dir.display(),
            written.files.len()
        );
    }
    std::mem::forget(trace);
    Ok(())
}
