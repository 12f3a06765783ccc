//! `pmlab study`: the default battery for this machine (idle, polling, governors, hotplug,
//! wakeups, polling-predicted, cpu, frequency, uncore, boot), adapted to what it has, ending
//! with a self-contained HTML report.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pmlab_kernel::Root;
use pmlab_lab::executor::Executor;
use pmlab_lab::lab::{Lab, Sources};
use pmlab_study::{self as study, sim::SimExecutor, Host, Stage, StageProgress, StudyLab};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  pmlab study --quick                    # the short battery; report in ./pmlab-study-N/
  pmlab study                            # the full battery, under 10 minutes
  pmlab study --only idle,hotplug --out /tmp/report --db /tmp/pmlab.db
  pmlab study --plan --root /tmp/spr1     # what it would run there; runs and writes nothing

Stages: idle (baseline: residency, interrupts by kind per CPU), polling (sweep of the
poll limit against pipe on two CPUs, wakeup and idle: knee and poll-time cost), governors
(each cpuidle governor), hotplug (offline/online latency at two load levels), wakeups
(traced messaging), polling-predicted (the wakeup trace replayed under the haltpoll
governor, as `pmlab whatif` does: a prediction where polling cannot be switched on, a
cross-check where it can), cpu (spin on every CPU), frequency (EPP performance against
balance_power where the cpufreq driver offers both, else the governor performance against
schedutil or powersave), uncore (the uncore's upper limit at its highest against its
lowest), boot (guests under QEMU). Stages the machine cannot do are skipped with the reason. The machine is restored at the end and on Ctrl-C.";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Short runs (under 90 s on a small guest).
    #[arg(long)]
    pub quick: bool,
    /// Only these stages (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "STAGES")]
    pub only: Vec<String>,
    /// Report directory (default: ./pmlab-study-ID).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The result store (SQLite), created if missing.
    #[arg(long, value_name = "PATH", default_value = "pmlab.db")]
    pub db: PathBuf,
    /// Seed of the per-round shuffles (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub meter: super::meter::MeterArgs,
    /// Print what the study would run on this machine (or on the snapshot under --root)
    /// and stop: nothing runs and nothing is written.
    #[arg(long)]
    pub plan: bool,
    /// Read the machine under this root instead of `/` (with --plan: another machine's
    /// /sys and /proc snapshot).
    #[arg(long, default_value = "/", value_name = "DIR")]
    pub root: PathBuf,
    /// Testing: a simulated machine instead of the real workloads.
    #[arg(long, hide = true)]
    pub simulate: bool,
}

impl Args {
    /// On a --host target: the experiments come back into --db, the report directory to
    /// --out (or, under its own name, here).
    pub fn remote_job(&self) -> super::remote::Job {
        let mut job = super::remote::Job::stores(&self.db);
        job.strip_long = &["--db", "--out"];
        let bring = job.bring.as_mut().expect("stores brings");
        match &self.out {
            Some(out) => {
                job.add = vec!["--out".into(), "study".into()];
                bring.files.push(("study".into(), out.clone()));
            }
            None => bring.rest = Some(PathBuf::from(".")),
        }
        job
    }
}

struct CliHost {
    lab: Lab,
    db: PathBuf,
    root: PathBuf,
    simulate: bool,
    seed: u64,
    bar: ProgressBar,
    meter: Option<pmlab_lab::meter::MeterSpec>,
}

impl Host for CliHost {
    fn executor(&mut self, trace: bool) -> Result<Box<dyn Executor>, pmlab_lab::lab::LabError> {
        if self.simulate {
            self.seed += 1;
            return Ok(Box::new(SimExecutor::new(self.root.clone(), self.seed)));
        }
        let sources = Sources {
            trace: trace.then(|| (self.db.clone(), Vec::new())),
            meter: self.meter.clone(),
            ..Sources::default()
        };
        Ok(Box::new(self.lab.machine_executor(&sources)?))
    }
    fn progress(&mut self, p: &StageProgress) {
        self.bar.set_position((p.done * 1000.0) as u64);
        self.bar.set_prefix(format!(
            "stage {}/{} {:<9}",
            p.index + 1,
            p.total,
            p.stage.as_str()
        ));
        let s = p.eta.as_secs();
        self.bar
            .set_message(format!("ETA {}m{:02}s  {}", s / 60, s % 60, p.message));
    }
    fn note(&mut self, line: &str) {
        self.bar.println(format!("pmlab: {line}"));
    }
    fn real_machine(&self) -> bool {
        !self.simulate
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let only = args
        .only
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| Stage::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let seed = args.seed.unwrap_or_else(pmlab_lab::request::clock_seed);
    if args.plan {
        return print_plan(&args, &only, seed);
    }
    let lab = Lab::at(Root::new(args.root.clone()), pmlab_lab::lab::GRACE)?;
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr())
    };
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:24}] {elapsed}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let opts = study::Options {
        root: args.root.clone(),
        db: args.db.clone(),
        out: args.out.clone(),
        quick: args.quick,
        only,
        seed,
        stop: lab.stop_token(),
        command: super::run_spec::command_line(),
    };
    let mut host = CliHost {
        lab: lab.clone(),
        db: args.db.clone(),
        root: args.root.clone(),
        simulate: args.simulate,
        seed,
        bar,
        meter: args.meter.spec()?,
    };
    let started = std::time::Instant::now();
    let outcome = lab.study(opts, &mut host)?;
    host.bar.finish_and_clear();
    let rec = &outcome.record;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "study": rec.id,
                "report": outcome.written.html,
                "bytes": outcome.written.bytes,
                "seconds": started.elapsed().as_secs_f64(),
                "stages": rec.stages,
                "findings": outcome.written.findings,
            }))?
        );
    } else {
        let secs = started.elapsed().as_secs_f64();
        let text = pmlab_report::render::study::text(rec.id, secs, &rec.stages, &outcome.written);
        print!("{text}");
    }
    if rec.interrupted {
        anyhow::bail!(
            "interrupted: the stages done so far are stored (study {}) and in the report; the machine is restored",
            rec.id
        );
    }
    Ok(())
}

/// `--plan`: the battery for the machine under --root, printed; nothing runs or is written.
fn print_plan(args: &Args, only: &[study::Stage], seed: u64) -> anyhow::Result<()> {
    // Refuses a --root that is not a directory, as every reading command does.
    super::info::reading_root(Some(&args.root))?;
    let dry = study::plan::dry_run(&args.root, args.quick, only, seed);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&dry)?);
        return Ok(());
    }
    println!("machine ({}):", args.root.display());
    for (k, v) in &dry.machine {
        println!("  {k}: {v}");
    }
    let total: f64 = dry.stages.iter().map(|s| s.estimate_s).sum();
    println!(
        "stages ({}, about {:.0} s):",
        if args.quick { "quick" } else { "full" },
        total
    );
    for s in &dry.stages {
        match &s.skip {
            Some(why) => println!("  {}: skipped: {why}", s.stage.as_str()),
            None => {
                println!("  {} (about {:.0} s):", s.stage.as_str(), s.estimate_s);
                for step in &s.steps {
                    println!("    {step}");
                }
                for n in &s.notes {
                    println!("    note: {n}");
                }
            }
        }
    }
    Ok(())
}
