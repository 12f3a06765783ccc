//! `pmlab dump FILE`: every event of a trace, one per line, as `trace-cmd report` prints it
//! (formatted; `-R` raw fields, `-t` nanosecond timestamps, `--cpu`, `-e`), or as JSON.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  pmlab dump trace.dat\n  pmlab dump trace.dat | diff - <(trace-cmd report -i trace.dat)\n  pmlab dump -R -t trace.dat | diff - <(trace-cmd report -R -t -i trace.dat)\n  pmlab dump --cpu 1 -e sched_switch -e irq:irq_handler_entry trace.dat\n  pmlab dump --json trace.dat | head"
)]
pub struct Args {
    /// A trace.dat (v6/v7) or ftrace text file.
    pub file: PathBuf,
    /// Raw fields (` name=value`) instead of each event's print format, as `trace-cmd report -R`.
    #[arg(short = 'R', long)]
    pub raw: bool,
    /// Timestamps to the nanosecond (default: the microsecond, as trace-cmd report).
    #[arg(short = 't', long = "full-ts")]
    pub full_ts: bool,
    /// Only events of these CPUs (e.g. 0,2-3).
    #[arg(long, value_name = "LIST")]
    pub cpu: Option<String>,
    /// Only this event: NAME or SYSTEM:NAME (repeatable).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    pub events: Vec<String>,
    /// One JSON object per event instead of text.
    #[arg(long, conflicts_with_all = ["raw", "full_ts", "cpu", "events"])]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let cpus = match &args.cpu {
        Some(s) => Some(pmlab_workload::parse_cpu_list(s).context("--cpu")?),
        None => None,
    };
    // JSON prints no symbols: kallsyms are not read for it.
    let load = if args.json {
        pmlab_trace::dat::LoadOptions::without_kallsyms()
    } else {
        pmlab_trace::dat::LoadOptions::default()
    };
    let trace = pmlab_trace::open_with(&args.file, &load).context("cannot read trace")?;
    let opts = pmlab_dump::report::ReportOptions {
        raw: args.raw,
        full_ts: args.full_ts,
        cpus,
        events: args.events.clone(),
    };
    // Checked before anything is written: a bad -e prints nothing but the error.
    if !args.json {
        let r = pmlab_dump::report::Report::new(&trace, opts.clone())?;
        // Once per event type, before the lines: where they differ from trace-cmd's.
        for u in r.unsupported() {
            eprintln!("pmlab dump: warning: {u}");
        }
    }
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    let res = if args.json {
        pmlab_dump::json::dump_json(&trace, &mut lock)
    } else if opts.raw && opts.full_ts && opts.cpus.is_none() && opts.events.is_empty() {
        // Byte for byte what `trace-cmd report -R -t` prints (tests rely on it).
        pmlab_dump::render::dump(&trace, &mut lock)
    } else {
        pmlab_dump::report::dump(&trace, opts, &mut lock)
    };
    match res {
        Ok(()) => Ok(()),
        // `pmlab dump FILE | head` is fine.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).context("writing to stdout"),
    }?;
    let _ = lock.flush();
    // The process ends right after: skip freeing the columns and formats.
    std::mem::forget(trace);
    Ok(())
}
