//! `pmlab trace info FILE [--json]`: version, compression, CPUs, events by name, time span, lost events.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;

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

fn info(file: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let opts = pmlab_trace::dat::LoadOptions::without_kallsyms();
    let trace = pmlab_trace::open_with(file, &opts).context("cannot read trace")?;
    let s = pmlab_trace::summary::summarize(&trace);
    // The process ends right after printing: skip freeing the columns and formats.
    std::mem::forget(trace);
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", pmlab_report::render::trace::info(file, &s));
    }
    Ok(())
}
