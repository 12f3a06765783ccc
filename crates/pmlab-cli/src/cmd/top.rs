//! `pmlab top`: the live view of who wakes the CPUs (flags, then pmlab-top's live loop
//! with its terminal UI or JSON lines).

use anyhow::Context;
use pmlab_lab::lab::Lab;
use pmlab_top::live::{self, Config};
use pmlab_top::ui::{JsonView, TermView};
use std::path::PathBuf;

const EXAMPLES: &str = "Examples:
  pmlab top                                   # the live view; s sorts the wakeups, q quits
  pmlab top --refresh 1s --ui-cpu 0           # refresh every second, draw from CPU 0
  pmlab top --json --duration 6s --record t.dat | jq -c '{interval, events, own_wakeups_per_s}'
  pmlab top --once --json                     # one interval, for scripts
  pmlab top --meter-counter 'cat /run/meter/energy_j'   # power from a meter, per interval
  pmlab analyze t.dat --only idle,wakeups,kicks --from 5120.25 --to 5122.25   # one interval again

Per refresh and CPU: idle share by state and polling share, idle exits per second by cause
with the top originator, the needless share (exits after which no task ran), the tasks and
IRQs waking idle CPUs, idle-balance kicks, power (hwmon or RAPL) where the machine has it,
and pmlab's own wakeups per second. An interval is the events stamped in [from, to) (trace
clock mono); `--json` prints from_ns/to_ns so `pmlab analyze --from --to` can check it.";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Time between refreshes (an interval), e.g. 2s, 500ms.
    #[arg(long, default_value = "2s", value_name = "TIME")]
    refresh: String,
    /// Stop after this long (default: until q, Ctrl-C or SIGTERM).
    #[arg(long, value_name = "TIME")]
    duration: Option<String>,
    /// Show one interval and stop.
    #[arg(long)]
    once: bool,
    /// One JSON object per interval on stdout instead of the terminal UI.
    #[arg(long)]
    json: bool,
    /// Keep what top saw as a trace.dat v6 file.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Pin the drawing thread to this CPU.
    #[arg(long, value_name = "CPU")]
    ui_cpu: Option<u32>,
    /// CPUs the per-CPU trace readers may run on (e.g. 0).
    #[arg(long, value_name = "LIST")]
    reader_cpus: Option<String>,
    /// Per-CPU trace buffer, KiB (default 4096).
    #[arg(long, value_name = "KB")]
    buffer_kb: Option<u64>,
    #[command(flatten)]
    meter: super::meter::MeterArgs,
}

fn time(flag: &str, s: &str) -> anyhow::Result<std::time::Duration> {
    let ns = pmlab_workload::units::parse_duration(s).with_context(|| flag.to_string())?;
    Ok(std::time::Duration::from_nanos(ns.0))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = Config {
        refresh: time("--refresh", &args.refresh)?,
        duration: args
            .duration
            .as_deref()
            .map(|d| time("--duration", d))
            .transpose()?,
        once: args.once,
        record: args.record.clone(),
        ui_cpu: args.ui_cpu,
        reader_cpus: match &args.reader_cpus {
            Some(s) => Some(pmlab_workload::parse_cpu_list(s).context("--reader-cpus")?),
            None => None,
        },
        buffer_kb: args.buffer_kb,
        meter: args.meter.spec()?,
    };
    let lab = Lab::open()?;
    live::check(&lab, &cfg)?;
    let ended = if args.json {
        live::run(&lab, &cfg, &mut JsonView::new(std::io::stdout().lock()))?
    } else {
        let mut view = TermView::new().context("cannot take over the terminal")?;
        // A second Ctrl-C exits at once: the terminal goes back first.
        lab.at_forced_exit(pmlab_top::ui::restore_terminal);
        let ended = live::run(&lab, &cfg, &mut view);
        drop(view); // the terminal is back before anything is printed
        ended?
    };
    for n in &ended.notes {
        eprintln!("pmlab: note: {n}");
    }
    if let Some(s) = &ended.recorded {
        eprintln!(
            "pmlab: wrote {} ({} events, {} lost)",
            s.path.display(),
            s.total_events(),
            s.total_lost()
        );
    }
    Ok(())
}
