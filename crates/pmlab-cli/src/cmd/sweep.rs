//! `pmlab sweep KNOB=V1,V2,... [KNOB2=...] WORKLOAD ...`: the cartesian product of knob values,
//! interleaved and repeated, with CIs, verdicts against the first value, and the knee.

use super::run_spec::{execute, split_workload, ExperimentOpts};
use anyhow::bail;
use pmlab_store::spec::{sweep_configurations, Experiment, Kind, SweepAxis, WorkloadDef};

const EXAMPLES: &str = "\
Examples:
  pmlab sweep haltpoll.guest_halt_poll_ns=0,10us,25us,50us,100us,200us,400us pipe --loops 20000
  pmlab sweep cpuidle.POLL.disable=0,1 haltpoll.guest_halt_poll_ns=0,200us messaging --groups 2
  pmlab sweep pmqos.resume_latency_us@1=0,10,100 --max-time 10m --format markdown wakeup --duration 2s

Several KNOB=V1,V2 words sweep their cartesian product (the first knob varies slowest).
The knee is the first value whose metric is within the noise margin of the best one:
the larger of the best's 95% CI half-width and --target-ci, tested with the CI of the
change against the best. The workload and its options come last, as for `pmlab run`.";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub opts: ExperimentOpts,
    /// KNOB=V1,V2,... (one or more), then the workload and its options.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "KNOB=VALUES... WORKLOAD"
    )]
    pub words: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (sweeps, workload) = split_workload(&args.words);
    if sweeps.is_empty() {
        bail!(
            "no KNOB=V1,V2,... given before the workload `{}`",
            workload.first().map(String::as_str).unwrap_or("")
        );
    }
    let axes = sweeps
        .iter()
        .map(|s| SweepAxis::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    if workload.is_empty() {
        bail!("no workload given after the knob values (e.g. `pipe --loops 20000`)");
    }
    super::run_spec::check_misplaced_options(
        <Args as clap::Args>::augment_args(clap::Command::new("sweep")),
        &workload,
    )?;
    let configurations = sweep_configurations(&axes)?;
    let workload = WorkloadDef::new(workload)?;
    let name = format!(
        "sweep {}: {}",
        axes.iter()
            .map(|a| a.knob.to_string())
            .collect::<Vec<_>>()
            .join(" × "),
        workload.label
    );
    let mut experiment = Experiment::new(Kind::Sweep, name, configurations, vec![workload], None)?;
    experiment.swept = axes.iter().map(|a| a.knob.to_string()).collect();
    execute(experiment, &args.opts, None)
}
