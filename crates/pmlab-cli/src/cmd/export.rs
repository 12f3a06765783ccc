//! `pmlab export --perfetto OUT TRACE`: a trace written in another tool's format (Perfetto's
//! protobuf trace, opened by ui.perfetto.dev and trace_processor).

use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  pmlab export --perfetto trace.pftrace trace.dat\n  pmlab export --perfetto out.pftrace --json trace.dat\n\nOpen the file at https://ui.perfetto.dev (\"Open trace file\", or drag it onto the page):\nthe file is read in the browser and not uploaded. Events get one track per CPU; sched_switch,\nsched_waking/wakeup, cpu_idle, cpu_frequency and print are typed, every other event is\nshown by name with its fields (Perfetto's \"generic\" ftrace events).\nThe file is written under a temporary name and renamed when complete."
)]
pub struct Args {
    /// Write a Perfetto protobuf trace (.pftrace) to this file.
    #[arg(long, value_name = "OUT", required = true)]
    pub perfetto: PathBuf,
    /// A trace.dat (v6/v7) or ftrace text file.
    pub trace: PathBuf,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let opts = pmlab_trace::dat::LoadOptions::without_kallsyms();
    let trace = pmlab_trace::open_with(&args.trace, &opts).context("cannot read trace")?;
    let summary = pmlab_trace::perfetto::export_to_path(&trace, &args.perfetto)
        .context("cannot write the Perfetto trace")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let events: u64 = summary.events_per_cpu.iter().sum();
        println!(
            "{}: {} events on {} CPUs ({} generic), {} threads in {} processes, {} packets, {} bytes",
            args.perfetto.display(),
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
