//! `pmlab dump FILE [--json]`: every event of a trace, one per line, as `trace-cmd report -R -t` prints it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  pmlab dump trace.dat\n  pmlab dump trace.dat | diff - <(trace-cmd report -R -t -i trace.dat)\n  pmlab dump --json trace.dat | head"
)]
pub struct Args {
    /// A trace.dat (v6/v7) or ftrace text file.
    pub file: PathBuf,
    /// One JSON object per event instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // JSON prints no symbols: kallsyms are not read for it.
    let opts = if args.json {
        pmlab_trace::dat::LoadOptions::without_kallsyms()
    } else {
        pmlab_trace::dat::LoadOptions::default()
    };
    let trace = pmlab_trace::open_with(&args.file, &opts).context("cannot read trace")?;
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    let res = if args.json {
        pmlab_trace::json::dump_json(&trace, &mut lock)
    } else {
        pmlab_trace::render::dump(&trace, &mut lock)
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
