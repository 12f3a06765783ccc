//! `pmlab whatif`: what idle polling would have done, from one trace — parse the arguments,
//! call the replay engine (`pmlab_analysis::replay`) and print its report.

use anyhow::{bail, Context};
use pmlab_analysis::replay::{self, Config, HaltpollParams, Policy};
use pmlab_analysis::Options;
use pmlab_report::render::tables;
use std::path::PathBuf;

const EXAMPLES: &str = "Examples:
  pmlab record -o t.dat -- pmlab run pipe --loops 20000
  pmlab whatif t.dat                                   # haltpoll governor, 0..500 µs
  pmlab whatif t.dat --policy fixed --values 0,10us,50us,100us,200us
  pmlab whatif t.dat --policy arm64-poll --values 10us,50us,100us,300us --format mail
  pmlab whatif polling.dat --reverse                   # from polling on, predict it off
  pmlab whatif nopoll.dat --calibrate polling.dat      # poll-path costs from another trace
  pmlab whatif t.dat --json | jq '.values[] | {value_ns, caught, us_per_op}'
  pmlab whatif --run 42                                # a stored run of `compare --trace`

Replays each idle period of the trace (its entry, the interrupts inside it that woke nobody,
and the wake that ended it, with the waker's request time) under a poll policy: a wake
caught by polling costs no IPI and no halt exit. Prints per value: wakes caught, missed and
interrupts during polls, halts avoided, poll CPU time (useful, wasted, share of wall and of
idle), wake latency saved, and for a ping-pong workload the predicted µs/op between the
first-order (trace timestamps) and causal (the chain shifted) replays; then the knee, the
marginal point and the Pareto frontier. Values take units (5us, 0.2ms; a bare number is ns).
Needs sched_waking, ipi_send_cpu, irq_vectors and cpu_idle or sched_switch events
(`pmlab record` records them by default).";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Trace file (trace.dat v6/v7).
    #[arg(required_unless_present = "run")]
    file: Option<PathBuf>,
    /// Replay the trace a stored run recorded (`compare`/`sweep`/`run-spec --trace`) instead
    /// of a file: the run's id, as `pmlab results show ID --runs` lists them.
    #[arg(long, value_name = "RUN", conflicts_with = "file")]
    run: Option<i64>,
    /// The result store --run reads.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "pmlab.db",
        requires = "run"
    )]
    db: PathBuf,
    /// Poll policy: haltpoll (adaptive governor), fixed (constant window), arm64-poll.
    #[arg(long, default_value = "haltpoll", value_name = "POLICY")]
    policy: String,
    /// Poll values, comma-separated, with units (default 0,5us,10us,25us,50us,75us,100us,150us,200us,300us,400us,500us).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    values: Vec<String>,
    /// From a trace recorded with polling on, predict polling off.
    #[arg(long)]
    reverse: bool,
    /// Take the poll-path costs (poll-exit latency, overshoot, exit to task) from this trace,
    /// recorded with polling on on the same machine.
    #[arg(long, value_name = "FILE")]
    calibrate: Option<PathBuf>,
    /// The ping-pong pair for µs/op, as PID,PID (default: detected from the wakes).
    #[arg(long, value_delimiter = ',', value_name = "PID,PID")]
    workload_pids: Vec<i32>,
    /// haltpoll parameters instead of this machine's (or the kernel's defaults):
    /// grow,shrink,grow_start,allow_shrink e.g. 2,2,50us,Y.
    #[arg(long, value_name = "G,S,START,Y|N")]
    haltpoll_params: Option<String>,
    /// Only these CPUs (e.g. 0-3,6).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    #[command(flatten)]
    out: super::FormatArgs,
}

/// A poll value: a duration with a unit, or a bare number of ns.
fn parse_value(s: &str) -> anyhow::Result<u64> {
    use pmlab_workload::units::DurationError;
    pmlab_workload::units::parse_ns(s).map_err(|e| match e {
        DurationError::Negative(_) => {
            anyhow::anyhow!("--values {:?}: a poll value must not be negative", s.trim())
        }
        e => anyhow::anyhow!("--values {:?}: {e}", s.trim()),
    })
}

fn parse_params(s: &str) -> anyhow::Result<HaltpollParams> {
    let p: Vec<&str> = s.split(',').collect();
    let bad = || {
        anyhow::anyhow!(
            "--haltpoll-params {s:?}: expected GROW,SHRINK,GROW_START,Y|N (e.g. 2,2,50us,Y)"
        )
    };
    if p.len() != 4 {
        return Err(bad());
    }
    Ok(HaltpollParams {
        guest_halt_poll_ns: 0,
        grow: p[0].trim().parse().map_err(|_| bad())?,
        shrink: p[1].trim().parse().map_err(|_| bad())?,
        grow_start: parse_value(p[2])?,
        allow_shrink: pmlab_kernel::knob::value::parse_bool(p[3]).ok_or_else(bad)?,
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // Everything the user typed is checked before any trace is read.
    let policy: Policy = args.policy.parse()?;
    let values: Vec<u64> = if args.values.is_empty() {
        replay::DEFAULT_VALUES_NS.to_vec()
    } else {
        args.values
            .iter()
            .map(|v| parse_value(v))
            .collect::<anyhow::Result<_>>()?
    };
    let pingpong = match args.workload_pids.as_slice() {
        [] => None,
        [a, b] if *a > 0 && *b > 0 => Some((*a, *b)),
        _ => bail!("--workload-pids takes two positive PIDs: PID,PID"),
    };
    let cpus = super::analyze::parse_cpus(args.cpus.as_deref())?;
    let (haltpoll, param_note) = match &args.haltpoll_params {
        Some(s) => (parse_params(s)?, None),
        None => {
            let (p, note) = replay::governor::machine_or_default();
            (p, Some(note))
        }
    };
    let opts = Options {
        cpus,
        ..Options::default()
    };
    let calibration = match &args.calibrate {
        Some(p) => {
            let t = pmlab_trace::open(p)
                .with_context(|| format!("cannot read calibration trace {}", p.display()))?;
            let input = replay::prepare(&t, &opts).context("calibration trace")?;
            Some(input.own_calibration.from_other(&p.display().to_string()))
        }
        None => None,
    };
    let file = match (&args.file, args.run) {
        (Some(f), _) => f.clone(),
        (None, Some(run)) => {
            pmlab_store::store::Store::open_existing(&args.db)?.trace_of_run(run)?
        }
        (None, None) => unreachable!("clap requires FILE or --run"),
    };
    // The replay names no kernel symbol: skip parsing kallsyms.
    let load = pmlab_trace::dat::LoadOptions::without_kallsyms();
    let trace = pmlab_trace::open_with(&file, &load)
        .with_context(|| format!("cannot read trace {}", file.display()))?;
    let cfg = Config {
        policy,
        values_ns: values,
        haltpoll,
        reverse: args.reverse,
        pingpong,
        calibration,
        // A one-shot command: the tables the replay is done with go with the process.
        spent: replay::Spent::LeftToExit,
    };
    let mut report = replay::run(&trace, &opts, &cfg)?;
    if let Some(n) = param_note.filter(|_| policy == Policy::Haltpoll) {
        report.notes.push(n.into());
    }
    std::mem::forget(trace);
    print!("{}", tables::whatif(&file, &report, args.out.get())?);
    Ok(())
}
