//! `pmlab study`: the default battery for this machine (idle, polling, governors, hotplug,
//! wakeups, cpu), adapted to what it has, ending with a self-contained HTML report.

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pmlab_kernel::knob::{self, Transaction};
use pmlab_kernel::Root;
use pmlab_lab::executor::Executor;
use pmlab_lab::machine::{CounterSource, Knobs, MachineExecutor, SideSource, WorkloadParser};
use pmlab_lab::study::{self, sim::SimExecutor, Host, Stage, StageProgress};
use pmlab_lab::tracing::TraceSource;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

const EXAMPLES: &str = "\
Examples:
  pmlab study --quick                    # under 90 s here; report in ./pmlab-study-N/
  pmlab study                            # the full battery, under 10 minutes
  pmlab study --only idle,hotplug --out /tmp/report --db /tmp/pmlab.db

Stages: idle (baseline: residency, interrupts by kind per CPU), polling (sweep of the
poll limit against pipe, wakeup and idle: knee and poll-time cost), governors (each
cpuidle governor), hotplug (offline/online latency at two load levels), wakeups
(messaging), cpu (spin on every CPU). Stages the machine cannot do are skipped with the
reason. The machine is restored at the end and on Ctrl-C.";

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
    /// Testing: read the machine under this root instead of `/`.
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
    /// Testing: a simulated machine instead of the real workloads.
    #[arg(long, hide = true)]
    pub simulate: bool,
}

/// Knobs through the journaled kernel transaction (begun at the first change).
struct TxKnobs {
    root: Root,
    tx: Option<Transaction>,
}

impl Knobs for TxKnobs {
    fn validate(&self, assignments: &[String]) -> Result<(), String> {
        if assignments.is_empty() {
            return Ok(());
        }
        knob::validate(&self.root, assignments).map_err(|e| e.to_string())
    }
    fn read(&self, names: &[String]) -> Vec<(String, String)> {
        names
            .iter()
            .filter_map(|n| knob::read(&self.root, n).ok().map(|v| (n.clone(), v)))
            .collect()
    }
    fn switch_to(&mut self, assignments: &[String]) -> Result<(), String> {
        if self.tx.is_none() {
            if assignments.is_empty() {
                return Ok(());
            }
            self.tx = Some(Transaction::begin(&self.root).map_err(|e| e.to_string())?);
        }
        let tx = self.tx.as_mut().expect("transaction begun");
        tx.switch_to(assignments).map_err(|e| e.to_string())
    }
    fn restore(&mut self) -> Result<(), String> {
        match self.tx.as_mut() {
            Some(tx) => tx.restore().map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}

struct CliHost {
    db: PathBuf,
    root: PathBuf,
    simulate: bool,
    seed: u64,
    bar: ProgressBar,
}

impl Host for CliHost {
    fn executor(&mut self, trace: bool) -> Result<Box<dyn Executor>, String> {
        if self.simulate {
            self.seed += 1;
            return Ok(Box::new(SimExecutor::new(self.root.clone(), self.seed)));
        }
        let root = Root::new(self.root.clone());
        let knobs = Box::new(TxKnobs {
            root: root.clone(),
            tx: None,
        });
        let parse: WorkloadParser = Box::new(|words: &[String]| {
            crate::cmd::run::workload_from_words(words).map_err(|e| format!("{e:#}"))
        });
        let mut sources: Vec<Box<dyn SideSource>> = Vec::new();
        if trace {
            // The tracer first (started first, stopped last), then the counters.
            sources.push(Box::new(TraceSource::new(root, &self.db, Vec::new())?));
        }
        sources.push(Box::new(CounterSource::new(self.root.clone())));
        Ok(Box::new(MachineExecutor::new(
            self.root.clone(),
            knobs,
            parse,
            sources,
        )))
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

fn install_signals(stop: &Arc<AtomicBool>) -> anyhow::Result<()> {
    pmlab_workload::cancel::init().context("creating the cancellation pipe")?;
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(stop))
            .with_context(|| format!("installing a handler for signal {sig}"))?;
        // SAFETY: cancel::request is async-signal-safe (atomics, kill, write).
        unsafe { signal_hook::low_level::register(sig, pmlab_workload::cancel::request) }
            .with_context(|| format!("installing a handler for signal {sig}"))?;
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let only = args
        .only
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| Stage::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000_000)
            .unwrap_or(1)
    });
    let stop = Arc::new(AtomicBool::new(false));
    install_signals(&stop)?;
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
        stop: stop.clone(),
        command: super::run_spec::command_line(),
    };
    let mut host = CliHost {
        db: args.db.clone(),
        root: args.root.clone(),
        simulate: args.simulate,
        seed,
        bar,
    };
    let started = std::time::Instant::now();
    let outcome = study::run(&opts, &mut host)?;
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
        println!(
            "pmlab study #{} ({:.0} s)",
            rec.id,
            started.elapsed().as_secs_f64()
        );
        for s in &rec.stages {
            let ids: Vec<String> = s.experiments.iter().map(|i| format!("#{i}")).collect();
            println!(
                "  {:<10} {:<11} {:>6.1} s  {} {}",
                s.stage,
                s.status,
                s.seconds,
                ids.join(" "),
                if s.status == "done" {
                    String::new()
                } else {
                    s.reason.clone()
                }
            );
        }
        println!("\nSummary:");
        for (i, f) in outcome.written.findings.iter().take(3).enumerate() {
            println!("  {}. {}", i + 1, f.text);
        }
        println!("\nreport: {}", outcome.written.html.display());
    }
    if rec.interrupted {
        anyhow::bail!(
            "interrupted: the stages done so far are stored (study {}) and in the report; the machine is restored",
            rec.id
        );
    }
    Ok(())
}
