//! `pmlab whatif`: what idle polling, or another cpuidle governor, would have done, from one
//! trace — parse the arguments, call the replay engine (`pmlab_analysis::replay`, its
//! `cpuidle` part for `--governor`) and print its report.

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
  pmlab whatif t.dat --governor menu                   # menu on this machine's idle states
  pmlab whatif t.dat --governor teo --root /srv/snap/spr --latency-limit 20us
  pmlab whatif t.dat --governor menu --states states.toml --recorded-states juno.toml
  pmlab whatif t.dat --governor haltpoll --values 200us --disable POLL --tick stopped

Replays each idle period of the trace (its entry, the interrupts inside it that woke nobody,
and the wake that ended it, with the waker's request time) under a poll policy: a wake
caught by polling costs no IPI and no halt exit. Prints per value: wakes caught, missed and
interrupts during polls, halts avoided, poll CPU time (useful, wasted, share of wall and of
idle), wake latency saved, and for a ping-pong workload the predicted µs/op between the
first-order (trace timestamps) and causal (the chain shifted) replays; then the knee, the
marginal point and the Pareto frontier. Values take units (5us, 0.2ms; a bare number is ns).
Needs sched_waking, ipi_send_cpu, irq_vectors and cpu_idle or sched_switch events
(`pmlab record` records them by default).

With --governor, replays each idle period instead through a cpuidle governor (menu, teo,
ladder, haltpoll as in Linux 6.18) onto a state table (this machine's, a --root tree's, or
--states FILE.toml), and prints per state, as recorded and replayed: entries, use and time
shares, above and below, wakeups, energy where the table gives powers; then exit latency
paid by wakeups (p50, p99) and how often the replay chose the recorded state. Needs
power:cpu_idle. See docs/whatif.md.";

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
    policy: Policy,
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
    /// Replay a cpuidle governor instead of a poll policy: menu, teo, ladder or haltpoll
    /// (with haltpoll, one --values value is guest_halt_poll_ns).
    #[arg(long, value_name = "GOV", conflicts_with_all = ["reverse", "calibrate", "workload_pids"])]
    governor: Option<replay::cpuidle::Governor>,
    /// The state table replayed onto, written by hand (TOML: [[state]] name,
    /// exit_latency_us, target_residency_us, power_mw); default this machine's.
    #[arg(
        long,
        value_name = "FILE.toml",
        requires = "governor",
        conflicts_with = "root"
    )]
    states: Option<PathBuf>,
    /// Read the state table replayed onto from this tree (a machine's sysfs snapshot).
    #[arg(long, value_name = "DIR", requires = "governor")]
    root: Option<PathBuf>,
    /// The table the trace's state indices refer to, when the trace was recorded elsewhere
    /// (default: the table replayed onto).
    #[arg(
        long,
        value_name = "FILE.toml",
        requires = "governor",
        conflicts_with = "recorded_root"
    )]
    recorded_states: Option<PathBuf>,
    /// The recorded machine's state table from its sysfs tree.
    #[arg(long, value_name = "DIR", requires = "governor")]
    recorded_root: Option<PathBuf>,
    /// The kernel version whose governor set is checked (the model is Linux 6.18's).
    #[arg(
        long,
        value_name = "VERSION",
        default_value = "6.18",
        requires = "governor"
    )]
    kernel: replay::cpuidle::KernelVersion,
    /// PM QoS resume latency limit (e.g. 20us; 0 allows polling only); default none.
    #[arg(long, value_name = "DURATION", requires = "governor")]
    latency_limit: Option<String>,
    /// The tick: idle (NO_HZ_IDLE: the governor may stop it), stopped (at every selection),
    /// periodic (never stopped).
    #[arg(
        long,
        value_name = "MODE",
        default_value = "idle",
        requires = "governor"
    )]
    tick: replay::cpuidle::TickMode,
    /// CONFIG_HZ of the machine replayed onto (the tick's period).
    #[arg(long, value_name = "HZ", default_value_t = 250, requires = "governor")]
    hz: u64,
    /// States disabled, by name or index (e.g. POLL,3); the table's own stay disabled.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        requires = "governor"
    )]
    disable: Vec<String>,
    /// Where the trace shows no wake source (no irq, IPI or timer events): take each idle
    /// period to end at its next timer (timer), or the governor to know no timer (no-timer).
    #[arg(
        long,
        value_name = "HOW",
        default_value = "timer",
        requires = "governor"
    )]
    unknown_wakes: replay::cpuidle::UnknownWakes,
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
    if args.governor.is_some() {
        return run_governor(args);
    }
    // Everything the user typed is checked before any trace is read.
    let policy = args.policy;
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

/// A state table from a TOML file, a root, or this machine.
fn state_table(
    toml: Option<&PathBuf>,
    root: Option<&PathBuf>,
) -> anyhow::Result<replay::cpuidle::states::StateTable> {
    use replay::cpuidle::states::StateTable;
    Ok(match (toml, root) {
        (Some(f), _) => StateTable::load(f)?,
        (None, Some(r)) => StateTable::of_root(&pmlab_kernel::Root::new(r))?,
        (None, None) => StateTable::of_root(&pmlab_kernel::Root::system())?,
    })
}

fn run_governor(args: Args) -> anyhow::Result<()> {
    use replay::cpuidle::{self, GovConfig};
    // Everything typed is checked, and the tables read, before the trace is.
    let governor = args.governor.context("--governor")?;
    let (kernel, tick) = (args.kernel, args.tick);
    let unknown_wakes = args.unknown_wakes;
    if args.hz == 0 || args.hz > 10_000 {
        bail!(
            "--hz {}: expected CONFIG_HZ, e.g. 100, 250, 300 or 1000",
            args.hz
        );
    }
    let latency_limit = args
        .latency_limit
        .as_deref()
        .map(|v| {
            pmlab_workload::units::parse_ns(v)
                .map(pmlab_kernel::units::Nanos)
                .map_err(|e| anyhow::anyhow!("--latency-limit {v:?}: {e}"))
        })
        .transpose()?;
    let mut haltpoll = replay::governor::machine_or_default().0;
    match args.values.as_slice() {
        [] => {}
        [v] => haltpoll.guest_halt_poll_ns = parse_value(v)?,
        _ => bail!("--values with --governor takes one value: haltpoll's guest_halt_poll_ns"),
    }
    if let Some(s) = &args.haltpoll_params {
        let p = parse_params(s)?;
        haltpoll = replay::HaltpollParams {
            guest_halt_poll_ns: haltpoll.guest_halt_poll_ns,
            ..p
        };
    }
    let mut table = state_table(args.states.as_ref(), args.root.as_ref())?;
    table.disable(&args.disable)?;
    let recorded = match (&args.recorded_states, &args.recorded_root) {
        (None, None) => {
            let mut t = table.clone();
            t.states.iter_mut().for_each(|s| s.disabled = false);
            t
        }
        (s, r) => state_table(s.as_ref(), r.as_ref())?,
    };
    let cpus = super::analyze::parse_cpus(args.cpus.as_deref())?;
    let opts = Options {
        cpus,
        ..Options::default()
    };
    let file = match (&args.file, args.run) {
        (Some(f), _) => f.clone(),
        (None, Some(run)) => {
            pmlab_store::store::Store::open_existing(&args.db)?.trace_of_run(run)?
        }
        (None, None) => unreachable!("clap requires FILE or --run"),
    };
    let trace = pmlab_trace::open(&file)
        .with_context(|| format!("cannot read trace {}", file.display()))?;
    let cfg = GovConfig {
        governor,
        kernel,
        latency_limit,
        tick,
        tick_ns: 1_000_000_000 / args.hz,
        haltpoll,
        unknown_wakes,
    };
    let report = cpuidle::replay(&trace, &opts, &cfg, &table, &recorded)?;
    print!(
        "{}",
        tables::whatif_governor(&file, &report, args.out.get())?
    );
    Ok(())
}
