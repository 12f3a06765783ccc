//! `pmlab run WORKLOAD`: one workload run, its metrics, and side metrics from kernel
//! counters sampled right around the measured part. `--set` applies knobs for the run.

use anyhow::Context;
use pmlab_report::render::run;

const EXAMPLES: &str = "\
Examples:
  pmlab run pipe --loops 100000                      # its two sides on two CPUs (--placement spread)
  pmlab run pipe --loops 20000 --placement any       # the scheduler's choice, as perf; says which regime it got
  pmlab run pipe --set haltpoll.guest_halt_poll_ns=200us --json
  pmlab run messaging --groups 10 --loops 100 --threads
  pmlab run wakeup --interval 1ms --duration 10s --cpus 0-1
  pmlab run spin --cpus 0-3 --work 300000000
  pmlab run idle --duration 10s
  pmlab run idle --duration 10s --meter-stream 'my-meter --watts'   # energy from a meter
  pmlab run cmd -- stress-ng --cpu 1 --timeout 5s
  pmlab run cmd --metric-regex 'ops/sec: ([0-9.]+)' --metric-name ops --higher-is-better -- ./bench";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    pub workload: pmlab_workload::args::WorkloadCmd,
    /// Set a knob for the run, restored afterwards: NAME[@CPUS]=VALUE (repeatable).
    #[arg(long = "set", value_name = "KNOB=VALUE", global = true)]
    pub set: Vec<String>,
    /// Print the result as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// Idle before the run, after the knobs are set, so that pmlab's own start-up has faded
    /// from the scheduler's load tracking [default: 200ms; 0: off].
    #[arg(long, value_name = "DURATION", global = true, value_parser = super::run_spec::settle)]
    pub settle: Option<std::time::Duration>,
    /// After the settle, wait until the machine has been quiet for 0.5 s, at most MAX
    /// [default MAX: 10s]; the wait is in the side metrics (`disturbance.waited_s`).
    #[arg(long, value_name = "MAX", global = true, num_args = 0..=1, default_missing_value = "10s", value_parser = super::run_spec::duration)]
    pub wait_quiet: Option<std::time::Duration>,
    #[command(flatten)]
    pub meter: super::meter::MeterArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let spec = args.workload.to_spec();
    spec.validate()?;
    let set = pmlab_kernel::knob::Assignment::parse_all(&args.set)?;
    let sources = pmlab_lab::lab::Sources {
        trace: None,
        meter: args.meter.spec()?,
        wait_quiet: args
            .wait_quiet
            .map(|max| pmlab_lab::quiet::WaitQuiet { max }),
    };
    let lab = pmlab_lab::lab::Lab::open()?;
    let progress = indicatif::ProgressBar::new_spinner();
    // Drawn once, never ticked: a ticking bar would wake CPUs during the measurement.
    progress.set_message(format!("running {}", spec.describe()));
    progress.tick();
    let settle = args.settle.unwrap_or(pmlab_store::spec::DEFAULT_SETTLE);
    let out = lab.run_once(&spec, &set, settle, &sources);
    progress.finish_and_clear();
    let out = out?;
    for note in &out.notes {
        eprintln!("pmlab: note: {note}");
    }
    write_stdout(&if args.json {
        run::json(&spec, &out.result, &out.side_metrics, &args.set)?
    } else {
        run::text(&spec, &out.result, &out.side_metrics)
    })
}

/// Print to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}
