//! `pmlab run-spec FILE.toml`: an experiment (configurations or a sweep, and a battery of
//! workloads) from a file; also the machinery shared by `compare` and `sweep`: experiment
//! options, the progress bar and printing the report (the lab runs the experiment).

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pmlab_lab::lab::{Lab, Sources};
use pmlab_lab::protocol::{self, Observer, Outcome, Progress, ProtocolError};
use pmlab_lab::request::{BudgetRequest, Ran, Request};
use pmlab_report::render::Format;
use pmlab_report::report::{Report, SideSelection};
use pmlab_store::spec::{self, Experiment, Hooks, Order};
use pmlab_store::store::Store;
use std::path::PathBuf;
use std::time::Duration;

const EXAMPLES: &str = "\
Examples:
  pmlab run-spec battery.toml
  pmlab run-spec battery.toml --max-time 10m --format markdown

A spec file:
  name = \"polling before/after\"
  reference = \"before\"          # optional; default: the first configuration
  target_ci = \"1%\"              # optional: target_ci, max_runs, max_time, seed, settle
  [[configuration]]
  label = \"before\"              # no knobs: the machine as found
  [[configuration]]
  label = \"after\"
  knobs = \"haltpoll.guest_halt_poll_ns=200us\"
  [[workload]]
  run = \"pipe --loops 20000\"    # the words of `pmlab run` (pipe: --placement spread)
  [[workload]]
  label = \"msg\"
  run = \"messaging --groups 2\"

Instead of [[configuration]] tables, [[sweep]] tables give a cartesian product:
  [[sweep]]
  knob = \"haltpoll.guest_halt_poll_ns\"
  values = [\"0\", \"50us\", \"200us\"]

Command-line options override the file's.";

/// Run order (hidden; sequential exists to demonstrate drift).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderArg {
    Interleaved,
    Sequential,
}

pub fn duration(s: &str) -> Result<Duration, String> {
    spec::parse_duration(s).map_err(|e| pmlab_kernel::error_chain(&e))
}

pub fn settle(s: &str) -> Result<Duration, String> {
    spec::parse_settle(s).map_err(|e| pmlab_kernel::error_chain(&e))
}

/// Options every experiment takes.
#[derive(clap::Args, Clone, Debug)]
pub struct ExperimentOpts {
    /// The result store (SQLite), created if missing.
    #[arg(long, value_name = "PATH", default_value = "pmlab.db")]
    pub db: PathBuf,
    /// Stop after this many measured runs in total (default: 30 rounds).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_runs: Option<u64>,
    /// Stop after this much wall time (e.g. 90s, 5m).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub max_time: Option<Duration>,
    /// Stop when every configuration's 95% CI half-width is below this share of its mean [default: 1%].
    #[arg(long, value_name = "PCT", value_parser = spec::parse_fraction)]
    pub target_ci: Option<f64>,
    /// Seed of the per-round shuffles (default: from the clock; always recorded).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Idle before each run, after its configuration is applied, so that what ran before
    /// (pmlab's start-up, the previous run) has faded from the scheduler's load [default: 200ms; 0: off].
    #[arg(long, value_name = "DURATION", value_parser = settle)]
    pub settle: Option<Duration>,
    /// After the settle, wait until the machine has been quiet for 0.5 s (no CPU more than 5%
    /// busy with other tasks), at most this long [default MAX: 10s]; the wait is recorded with
    /// each run (`disturbance.waited_s`). See docs/disturbance.md.
    #[arg(long, value_name = "MAX", num_args = 0..=1, default_missing_value = "10s", value_parser = duration)]
    pub wait_quiet: Option<Duration>,
    /// The configuration the others are compared with (a label; default: the first).
    #[arg(long, value_name = "LABEL")]
    pub reference: Option<String>,
    /// Output format: table, markdown, mail, json or csv.
    #[arg(long, value_parser = Format::parse_text, default_value = "table")]
    pub format: Format,
    /// Side metrics to show: default, totals, all, none, or names (a trailing * matches a prefix).
    #[arg(long, value_name = "LIST", default_value = "default")]
    pub side: String,
    /// At least this many rounds before an adaptive stop (3 or more).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u64).range(3..))]
    pub min_rounds: u64,
    /// Only stop on the CI target or the budget, not as soon as every difference is decided.
    #[arg(long)]
    pub no_early_stop: bool,
    /// Record a trace of every run's measured part (STORE.traces/experiment-ID/run-N-LABEL.dat
    /// beside the store; the path is stored with the run).
    #[arg(long)]
    pub trace: bool,
    /// Events traced with --trace (comma-separated `system:event` or `system`; default: the
    /// set the analyses need, as for `pmlab record`).
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "trace")]
    pub trace_events: Vec<String>,
    #[command(flatten)]
    pub meter: super::meter::MeterArgs,
    /// Shell command run once before the warm-up.
    #[arg(long, value_name = "CMD")]
    pub setup: Option<String>,
    /// Shell command run before every run, after the configuration is applied.
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,
    /// Shell command run once after the last run, before the knobs are restored.
    #[arg(long, value_name = "CMD")]
    pub cleanup: Option<String>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Testing: a fake executor instead of the machine (`mean=100,sd=1,drift=0,...`).
    #[arg(long, hide = true, value_name = "SPEC")]
    pub fake_executor: Option<String>,
    /// Testing: run order.
    #[arg(long, hide = true, value_enum, default_value = "interleaved")]
    pub order: OrderArg,
}

/// Split `KNOBS... WORKLOAD [OPTIONS]` words: leading `K=V` words, then the workload.
pub fn split_workload(words: &[String]) -> (Vec<String>, Vec<String>) {
    let n = words
        .iter()
        .take_while(|w| w.contains('=') && !w.starts_with('-'))
        .count();
    (words[..n].to_vec(), words[n..].to_vec())
}

/// Refuse an option of the command (`--max-runs`, `--db`, ...) written among the workload's
/// words, where the workload's parser would only call it unexpected: name it as pmlab's and
/// say to put it before the workload. `command` is the subcommand's clap definition.
pub fn check_misplaced_options(command: clap::Command, workload: &[String]) -> anyhow::Result<()> {
    let Some(kind) = workload.first() else {
        return Ok(());
    };
    let own = pmlab_workload::args::long_options(kind);
    let name = command.get_name().to_string();
    for word in workload[1..].iter().take_while(|w| *w != "--") {
        let Some(long) = word.strip_prefix("--") else {
            continue;
        };
        let long = long.split_once('=').map_or(long, |(n, _)| n);
        if own.iter().any(|o| o == long) {
            continue;
        }
        if command.get_arguments().any(|a| a.get_long() == Some(long)) {
            bail!(
                "`--{long}` is an option of `pmlab {name}`, not of the workload `{kind}`: put it \
                 before the workload (e.g. `pmlab {name} --{long} ... {kind} ...`)"
            );
        }
    }
    Ok(())
}

/// The command line, for the store.
pub fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(char::is_whitespace) {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The progress bar: drawn between runs only (never ticking during a measurement).
struct Bar {
    bar: ProgressBar,
}

impl Bar {
    fn new(quiet: bool) -> Bar {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr())
        };
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:24}] {pos}/{len} runs  {elapsed}  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        Bar { bar }
    }
}

impl Observer for Bar {
    fn progress(&mut self, p: &Progress) {
        self.bar.set_length(p.max_runs as u64);
        self.bar.set_position(p.runs as u64);
        self.bar.set_prefix(p.stage());
        self.bar.set_message(p.status());
    }

    fn run_failed(&mut self, label: &str, error: &str) {
        let first = error.lines().next().unwrap_or("");
        self.bar
            .println(format!("pmlab: run of {label} failed: {first}"));
    }
}

/// Run an experiment with the shared options and print its report.
pub fn execute(
    experiment: Experiment,
    opts: &ExperimentOpts,
    file_budget: Option<&spec::RunSpec>,
) -> anyhow::Result<()> {
    execute_on(experiment, opts, file_budget, None, None)
}

/// [`execute`] on another lab's executor (the boot lab's guests), with its warm-up choice.
pub fn execute_on(
    experiment: Experiment,
    opts: &ExperimentOpts,
    file_budget: Option<&spec::RunSpec>,
    executor: Option<Box<dyn pmlab_lab::executor::Executor + '_>>,
    warmup: Option<bool>,
) -> anyhow::Result<()> {
    let request = Request {
        db: opts.db.clone(),
        reference: opts.reference.clone(),
        hooks: Hooks {
            setup: opts.setup.clone(),
            prepare: opts.prepare.clone(),
            cleanup: opts.cleanup.clone(),
        },
        budget: BudgetRequest {
            target_ci: opts.target_ci,
            max_runs: opts.max_runs.map(|n| n as usize),
            max_time: opts.max_time,
            seed: opts.seed,
            settle: opts.settle,
            min_rounds: opts.min_rounds as usize,
            order: match opts.order {
                OrderArg::Interleaved => Order::Interleaved,
                OrderArg::Sequential => Order::Sequential,
            },
            stop_when_decided: !opts.no_early_stop,
            warmup,
        },
        sources: Sources {
            trace: opts
                .trace
                .then(|| (opts.db.clone(), opts.trace_events.clone())),
            meter: opts.meter.spec()?,
            wait_quiet: opts
                .wait_quiet
                .map(|max| pmlab_lab::quiet::WaitQuiet { max }),
        },
        fake_executor: opts.fake_executor.clone(),
    };
    let side = SideSelection::parse(&opts.side);
    let lab = Lab::open()?;
    let mut bar = Bar::new(opts.quiet);
    let ran = lab.run_request_on(
        experiment,
        &request,
        file_budget,
        &command_line(),
        &mut bar,
        executor,
    );
    bar.bar.finish_and_clear();
    let Ran { store, result, .. } = ran?;
    let outcome: Outcome = match result {
        Ok(o) => o,
        Err(ProtocolError::Restore { error, outcome }) => {
            print_report(&store, outcome.experiment_id, &side, opts.format)?;
            bail!(
                "experiment {} ran, but restoring the machine failed: {error}",
                outcome.experiment_id
            );
        }
        Err(e) => return Err(e.into()),
    };
    print_report(&store, outcome.experiment_id, &side, opts.format)?;
    match outcome.stop {
        protocol::StopReason::Interrupted => bail!(
            "interrupted: {} measured runs are stored in experiment {} (marked incomplete) in {}; knobs restored",
            outcome.runs,
            outcome.experiment_id,
            opts.db.display()
        ),
        protocol::StopReason::Error(e) => bail!("experiment {} stopped on an error: {e}", outcome.experiment_id),
        _ => {
            eprintln!("pmlab: experiment {} stored in {} ({})", outcome.experiment_id, opts.db.display(), outcome.stop_description);
            Ok(())
        }
    }
}

fn print_report(
    store: &Store,
    id: i64,
    side: &SideSelection,
    format: Format,
) -> anyhow::Result<()> {
    let e = store.load(id)?;
    let report = Report::of(&e, None, side)?;
    print!("{}", format.renderer().render(&report)?);
    Ok(())
}

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The spec file (TOML).
    pub file: PathBuf,
    #[command(flatten)]
    pub opts: ExperimentOpts,
}

impl Args {
    /// On a --host target: the spec file goes along, the runs come back into --db.
    pub fn remote_job(&self) -> super::remote::Job {
        super::remote::Job {
            push: Some((self.file.clone(), "spec.toml".into())),
            ..super::remote::Job::stores(&self.opts.db)
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let spec = spec::parse_run_spec(&args.file, &text)?;
    execute(spec.experiment.clone(), &args.opts, Some(&spec))
}
