//! `pmlab compare --a KNOBS --b KNOBS WORKLOAD ...`: two configurations, interleaved and
//! repeated until the answer is clear, with a verdict.

use super::run_spec::{execute, ExperimentOpts};
use pmlab_store::spec::{Configuration, Experiment, Kind, WorkloadDef};

const EXAMPLES: &str = "\
Examples:
  pmlab compare --a '' --b 'haltpoll.guest_halt_poll_ns=200us' pipe --loops 20000
  pmlab compare --a 'cpuidle.POLL.disable=1' --label-a nopoll --label-b poll messaging
  pmlab compare --a '' --b '' pipe                  # A/A: expect \"no significant change\"
  pmlab compare --b 'pmqos.resume_latency_us@1=0' --format mail --max-time 5m wakeup --duration 2s

`--a ''` (or no --a) is the machine as found; knobs are written NAME[@CPUS]=VALUE, several
separated by spaces. The workload and its options come last, as for `pmlab run`.
The machine is restored after the experiment, on errors and on Ctrl-C.";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Knobs of configuration A (space-separated NAME[@CPUS]=VALUE; '' = as found).
    #[arg(
        long = "a",
        value_name = "KNOBS",
        default_value = "",
        allow_hyphen_values = true
    )]
    pub a: String,
    /// Knobs of configuration B.
    #[arg(
        long = "b",
        value_name = "KNOBS",
        default_value = "",
        allow_hyphen_values = true
    )]
    pub b: String,
    /// Label of A.
    #[arg(long, default_value = "A")]
    pub label_a: String,
    /// Label of B.
    #[arg(long, default_value = "B")]
    pub label_b: String,
    #[command(flatten)]
    pub opts: ExperimentOpts,
    /// The workload and its options, as for `pmlab run` (e.g. `pipe --loops 20000`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "WORKLOAD"
    )]
    pub workload: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    super::run_spec::check_misplaced_options(
        <Args as clap::Args>::augment_args(clap::Command::new("compare")),
        &args.workload,
    )?;
    let configurations = vec![
        Configuration::parse(&args.label_a, &args.a)?,
        Configuration::parse(&args.label_b, &args.b)?,
    ];
    let workload = WorkloadDef::new(args.workload.clone())?;
    let name = format!("{} vs {}: {}", args.label_a, args.label_b, workload.label);
    let experiment = Experiment::new(Kind::Compare, name, configurations, vec![workload], None)?;
    execute(experiment, &args.opts, None)
}
