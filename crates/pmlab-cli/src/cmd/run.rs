//! `pmlab run WORKLOAD`: one workload run, its metrics, and side metrics from kernel
//! counters sampled right around the measured part. `--set` applies knobs for the run.

use anyhow::{bail, Context};
use clap::Parser;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, Table};
use pmlab_kernel::{Direction, Metric};
use pmlab_workload::spec::CmdMetric;
use pmlab_workload::units::parse_duration;
use pmlab_workload::{CounterProbe, WorkloadError, WorkloadResult, WorkloadSpec};
use std::collections::BTreeMap;

const EXAMPLES: &str = "\
Examples:
  pmlab run pipe --loops 100000 --cpus 0,1
  pmlab run pipe --set haltpoll.guest_halt_poll_ns=200us --json
  pmlab run messaging --groups 10 --loops 100 --threads
  pmlab run wakeup --interval 1ms --duration 10s --cpus 0-1
  pmlab run spin --cpus 0-3 --work 300000000
  pmlab run idle --duration 10s
  pmlab run cmd -- stress-ng --cpu 1 --timeout 5s
  pmlab run cmd --metric-regex 'ops/sec: ([0-9.]+)' --metric-name ops --higher-is-better -- ./bench";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    pub workload: WorkloadCmd,
    /// Set a knob for the run, restored afterwards: NAME[@CPUS]=VALUE (repeatable).
    #[arg(long = "set", value_name = "KNOB=VALUE", global = true)]
    pub set: Vec<String>,
    /// Print the result as JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The workloads, as `pmlab run` (and commands that take a workload) parse them.
#[derive(clap::Subcommand, Clone, Debug)]
pub enum WorkloadCmd {
    /// Two tasks ping-pong an int over two pipes (perf bench sched pipe). Metric: µs/op.
    #[command(
        after_help = "Examples:\n  pmlab run pipe\n  pmlab run pipe --loops 1000000 --threads --cpus 0,1"
    )]
    Pipe(PipeArgs),
    /// Groups of 20 senders and 20 receivers (perf bench sched messaging). Metric: total seconds.
    #[command(
        after_help = "Examples:\n  pmlab run messaging\n  pmlab run messaging --groups 4 --loops 1000 --pipe --threads"
    )]
    Messaging(MessagingArgs),
    /// One thread per CPU wakes at absolute deadlines (cyclictest-like). Metric: wakeup latency.
    #[command(
        after_help = "Examples:\n  pmlab run wakeup --duration 10s\n  pmlab run wakeup --interval 200us --loops 10000 --cpus 1 --rt-prio 50"
    )]
    Wakeup(WakeupArgs),
    /// Fixed integer work on each CPU, pinned. Metric: runtime mean ± stddev across CPUs.
    #[command(
        after_help = "Examples:\n  pmlab run spin\n  pmlab run spin --cpus 1 --work 1000000000"
    )]
    Spin(SpinArgs),
    /// Sleep without waking any CPU (side metrics show what the idle machine does).
    #[command(
        after_help = "Examples:\n  pmlab run idle --duration 5s\n  pmlab run idle --set haltpoll.guest_halt_poll_ns=200us"
    )]
    Idle(IdleArgs),
    /// An external program (no shell unless --shell), as the invoking user. Metric: wall time or parsed.
    #[command(
        after_help = "Examples:\n  pmlab run cmd -- make -j2\n  pmlab run cmd --shell -- 'cd /src && make'\n  \
        pmlab run cmd --metric-regex 'ops/sec: ([0-9.]+)' --metric-name ops --higher-is-better -- ./bench"
    )]
    Cmd(CmdArgs),
}

#[derive(clap::Args, Clone, Debug)]
pub struct PipeArgs {
    /// Round trips.
    #[arg(long, default_value_t = pmlab_workload::DEFAULT_PIPE_LOOPS, value_parser = positive, allow_negative_numbers = true)]
    pub loops: u64,
    /// Two threads instead of two processes.
    #[arg(long)]
    pub threads: bool,
    /// Pin the sides: A runs the side that writes first, B the side that answers (may be equal).
    #[arg(long, value_name = "A,B", value_parser = cpu_pair)]
    pub cpus: Option<Cpus>,
}

#[derive(clap::Args, Clone, Debug)]
pub struct MessagingArgs {
    /// Groups of 20 senders + 20 receivers.
    #[arg(long, default_value_t = 10, value_parser = positive_u32, allow_negative_numbers = true)]
    pub groups: u32,
    /// Messages from each sender to each receiver of its group.
    #[arg(long, default_value_t = 100, value_parser = positive, allow_negative_numbers = true)]
    pub loops: u64,
    /// Pipes instead of socketpairs.
    #[arg(long)]
    pub pipe: bool,
    /// Threads instead of processes.
    #[arg(long)]
    pub threads: bool,
}

#[derive(clap::Args, Clone, Debug)]
pub struct WakeupArgs {
    /// CPUs, one measuring thread each (default: all this process may use).
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    pub cpus: Option<Cpus>,
    /// Time between deadlines.
    #[arg(long, default_value = "1ms", value_parser = positive_duration, allow_hyphen_values = true)]
    pub interval: pmlab_kernel::Nanos,
    /// Run time (default 10s when --loops is not given).
    #[arg(long, value_parser = positive_duration, allow_hyphen_values = true, conflicts_with = "loops")]
    pub duration: Option<pmlab_kernel::Nanos>,
    /// Wakeups per thread.
    #[arg(long, value_parser = positive, allow_negative_numbers = true)]
    pub loops: Option<u64>,
    /// SCHED_FIFO priority of the measuring threads (1-99).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u32).range(1..=99))]
    pub rt_prio: Option<u32>,
    /// Hold /dev/cpu_dma_latency at N µs during the run (cyclictest's default is 0; pmlab's is not to touch it).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..))]
    pub dma_latency: Option<i32>,
}

#[derive(clap::Args, Clone, Debug)]
pub struct SpinArgs {
    /// CPUs to load, one pinned thread each (default: all this process may use).
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    pub cpus: Option<Cpus>,
    /// Loop iterations per CPU.
    #[arg(long, default_value_t = 300_000_000, value_parser = positive, allow_negative_numbers = true)]
    pub work: u64,
}

#[derive(clap::Args, Clone, Debug)]
pub struct IdleArgs {
    /// How long to sleep.
    #[arg(long, default_value = "10s", value_parser = positive_duration, allow_hyphen_values = true)]
    pub duration: pmlab_kernel::Nanos,
}

#[derive(clap::Args, Clone, Debug)]
pub struct CmdArgs {
    /// Run the words as one `sh -c` script.
    #[arg(long)]
    pub shell: bool,
    /// Run as root even when pmlab was started through sudo (default: as SUDO_UID/SUDO_GID).
    #[arg(long)]
    pub as_root: bool,
    /// Take the metric from the output: the regex's capture group (last match wins).
    #[arg(long, value_name = "REGEX")]
    pub metric_regex: Option<String>,
    /// Name of the parsed metric.
    #[arg(
        long,
        value_name = "NAME",
        requires = "metric_regex",
        default_value = "value"
    )]
    pub metric_name: String,
    /// Unit of the parsed metric.
    #[arg(
        long,
        value_name = "UNIT",
        requires = "metric_regex",
        default_value = ""
    )]
    pub metric_unit: String,
    /// The parsed metric improves upwards (default: lower is better).
    #[arg(long, requires = "metric_regex")]
    pub higher_is_better: bool,
    /// The program and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM ARGS"
    )]
    pub argv: Vec<String>,
}

fn positive(s: &str) -> Result<u64, String> {
    let v: i128 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number"))?;
    if v <= 0 {
        return Err(format!("must be greater than zero (got {v})"));
    }
    u64::try_from(v).map_err(|_| format!("'{s}' is too large"))
}

fn positive_u32(s: &str) -> Result<u32, String> {
    u32::try_from(positive(s)?).map_err(|_| format!("'{s}' is too large"))
}

fn positive_duration(s: &str) -> Result<pmlab_kernel::Nanos, String> {
    let d = parse_duration(s)?;
    if d.0 == 0 {
        return Err(format!("'{s}': must be greater than zero"));
    }
    Ok(d)
}

/// A CPU list option value.
#[derive(Clone, Debug, PartialEq)]
pub struct Cpus(pub Vec<u32>);

fn cpu_list(s: &str) -> Result<Cpus, String> {
    pmlab_workload::parse_cpu_list(s).map(Cpus)
}

fn cpu_pair(s: &str) -> Result<Cpus, String> {
    let cpus: Vec<u32> = s
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<u32>()
                .map_err(|_| format!("'{s}': expected two CPU numbers A,B (e.g. 0,1)"))
        })
        .collect::<Result<_, _>>()?;
    if cpus.len() != 2 {
        return Err(format!("'{s}': expected two CPU numbers A,B (e.g. 0,1)"));
    }
    Ok(Cpus(cpus))
}

impl WorkloadCmd {
    /// The spec this command line describes (not yet validated against the machine).
    pub fn to_spec(&self) -> WorkloadSpec {
        match self.clone() {
            WorkloadCmd::Pipe(a) => WorkloadSpec::Pipe {
                loops: a.loops,
                threads: a.threads,
                cpus: a.cpus.map(|c| c.0),
            },
            WorkloadCmd::Messaging(a) => WorkloadSpec::Messaging {
                groups: a.groups,
                loops: a.loops,
                pipe: a.pipe,
                threads: a.threads,
            },
            WorkloadCmd::Wakeup(a) => WorkloadSpec::Wakeup {
                cpus: a.cpus.map(|c| c.0),
                interval: a.interval,
                loops: a.loops,
                duration: a.duration,
                rt_prio: a.rt_prio,
                dma_latency: a.dma_latency,
            },
            WorkloadCmd::Spin(a) => WorkloadSpec::Spin {
                cpus: a.cpus.map(|c| c.0),
                work: a.work,
            },
            WorkloadCmd::Idle(a) => WorkloadSpec::Idle {
                duration: a.duration,
            },
            WorkloadCmd::Cmd(a) => WorkloadSpec::Cmd {
                argv: a.argv,
                shell: a.shell,
                as_root: a.as_root,
                metric: a.metric_regex.map(|regex| CmdMetric {
                    regex,
                    name: a.metric_name,
                    unit: a.metric_unit,
                    higher_is_better: a.higher_is_better,
                }),
            },
        }
    }
}

/// Parse a workload written as words, e.g. `["pipe", "--loops", "1000"]` (for commands
/// that take a workload as an option value).
#[allow(dead_code)] // for commands that take a workload as an option (compare, sweep)
pub fn workload_from_words(words: &[String]) -> anyhow::Result<WorkloadSpec> {
    #[derive(Parser)]
    #[command(name = "workload", no_binary_name = true)]
    struct Words {
        #[command(subcommand)]
        workload: WorkloadCmd,
    }
    let parsed = Words::try_parse_from(words)
        .map_err(|e| anyhow::anyhow!("workload {:?}: {}", words.join(" "), e))?;
    let spec = parsed.workload.to_spec();
    spec.validate()?;
    Ok(spec)
}

/// SIGINT/SIGTERM/SIGHUP stop the workload (its workers are killed) and let `run` unwind.
fn install_signal_handlers() -> anyhow::Result<()> {
    pmlab_workload::cancel::init().context("creating the cancellation pipe")?;
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        // SAFETY: cancel::request is async-signal-safe (atomics, kill, write).
        unsafe { signal_hook::low_level::register(sig, pmlab_workload::cancel::request) }
            .with_context(|| format!("installing a handler for signal {sig}"))?;
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let spec = args.workload.to_spec();
    spec.validate()?;
    install_signal_handlers()?;
    // Knobs for the run: journaled, restored after it (on errors, signals and panics too).
    let mut knobs = None;
    if !args.set.is_empty() {
        let root = pmlab_kernel::Root::system();
        pmlab_kernel::knob::validate(&root, &args.set)?;
        pmlab_kernel::knob::install_signal_restore(std::time::Duration::from_secs(5))?;
        let mut t = pmlab_kernel::knob::Transaction::begin(&root)
            .context("starting a knob transaction (needs root)")?;
        for line in &t.recovered {
            eprintln!("pmlab: {line}");
        }
        t.apply(&args.set)?;
        for note in pmlab_kernel::knob::effect_notes(&root, &args.set) {
            eprintln!("pmlab: note: {note}");
        }
        knobs = Some(t);
    }

    let progress = indicatif::ProgressBar::new_spinner();
    // Drawn once, never ticked: a ticking bar would wake CPUs during the measurement.
    progress.set_message(format!("running {}", spec.describe()));
    progress.tick();
    let mut probe = CounterProbe::new("/");
    let result = pmlab_workload::run(&spec, &mut probe);
    progress.finish_and_clear();
    if let Some(mut t) = knobs.take() {
        t.restore().context("restoring the knobs set for the run")?;
    }
    let result = match result {
        Ok(r) => r,
        Err(WorkloadError::Cancelled) => bail!("interrupted: the workload's workers were killed"),
        Err(e) => return Err(e.into()),
    };
    let side = probe.side_metrics();
    if args.json {
        print_json(&spec, &result, &side, &args.set)
    } else {
        write_stdout(&render_human(&spec, &result, &side))
    }
}

fn print_json(
    spec: &WorkloadSpec,
    r: &WorkloadResult,
    side: &[Metric],
    knobs: &[String],
) -> anyhow::Result<()> {
    let out = serde_json::json!({
        "workload": spec,
        "description": spec.describe(),
        "primary": r.primary().name,
        "metrics": r.metrics,
        "side_metrics": side,
        "wall_ns": r.wall.0,
        "histogram": r.histogram.as_ref().map(|h| serde_json::json!({
            "bucket_ns": h.bucket.0,
            "overflow": h.overflow,
            // [bucket start in ns, samples], non-empty buckets only
            "counts": h.counts.iter().enumerate().filter(|(_, c)| **c > 0)
                .map(|(i, c)| [i as u64 * h.bucket.0, *c]).collect::<Vec<_>>(),
        })),
        "knobs": knobs,
    });
    write_stdout(&(serde_json::to_string_pretty(&out)? + "\n"))
}

/// Print to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

/// A number for people: 4-5 significant digits, no exponent.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if a >= 10_000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

fn direction_word(d: Direction) -> &'static str {
    match d {
        Direction::Lower => "lower is better",
        Direction::Higher => "higher is better",
        Direction::Neutral => "",
    }
}

/// Rows = metric names, columns = total then each CPU.
fn pivot(metrics: &[Metric], total_header: &str, hide_zero_rows: impl Fn(&str) -> bool) -> Table {
    let mut order: Vec<&str> = Vec::new();
    let mut rows: BTreeMap<&str, (Option<&Metric>, BTreeMap<u32, f64>)> = BTreeMap::new();
    let mut cpus: Vec<u32> = Vec::new();
    for m in metrics {
        let (base, cpu) = (m.name.as_str(), m.cpu);
        let row = rows.entry(base).or_insert_with(|| {
            order.push(base);
            (None, BTreeMap::new())
        });
        match cpu {
            Some(c) => {
                row.1.insert(c, m.value);
                if !cpus.contains(&c) {
                    cpus.push(c);
                }
            }
            None => row.0 = Some(m),
        }
    }
    cpus.sort_unstable();
    let unit_of = |base: &str| {
        metrics
            .iter()
            .find(|m| m.name == base)
            .map(|m| m.unit.clone())
            .unwrap_or_default()
    };
    let mut table = Table::new();
    table.load_preset(UTF8_BORDERS_ONLY);
    let mut header = vec![
        Cell::new("metric"),
        Cell::new("unit"),
        Cell::new(total_header),
    ];
    header.extend(cpus.iter().map(|c| Cell::new(format!("cpu{c}"))));
    table.set_header(header);
    for base in order {
        let (total, per_cpu) = &rows[base];
        let all_zero = total.is_none_or(|m| m.value == 0.0) && per_cpu.values().all(|v| *v == 0.0);
        if all_zero && hide_zero_rows(base) {
            continue;
        }
        let mut row = vec![Cell::new(base), Cell::new(unit_of(base))];
        row.push(
            Cell::new(total.map(|m| fmt_value(m.value)).unwrap_or_default())
                .set_alignment(CellAlignment::Right),
        );
        for c in &cpus {
            let text = per_cpu.get(c).map(|v| fmt_value(*v)).unwrap_or_default();
            row.push(Cell::new(text).set_alignment(CellAlignment::Right));
        }
        table.add_row(row);
    }
    table
}

fn render_human(spec: &WorkloadSpec, r: &WorkloadResult, side: &[Metric]) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let p = r.primary();
    let dir = direction_word(p.direction);
    let _ = writeln!(o, "{}", spec.describe());
    let _ = writeln!(
        o,
        "{}: {}{}   (wall {} s)",
        p.name,
        format!("{} {}", fmt_value(p.value), p.unit).trim_end(),
        if dir.is_empty() {
            String::new()
        } else {
            format!("   ({dir})")
        },
        fmt_value(r.wall.0 as f64 / 1e9)
    );
    if r.metrics.len() > 1 {
        let _ = writeln!(o, "{}", pivot(&r.metrics, "value", |_| false));
    }
    if let Some(h) = &r.histogram {
        let total: u64 = h.counts.iter().sum::<u64>() + h.overflow;
        let _ = writeln!(
            o,
            "histogram: {} samples in {} µs buckets, {} beyond {} µs (see --json)",
            total,
            h.bucket.0 / 1000,
            h.overflow,
            h.counts.len() as u64 * h.bucket.0 / 1000
        );
    }
    if side.is_empty() {
        return o;
    }
    let window = side
        .iter()
        .find(|m| m.name == "counters.window_s")
        .map(|m| m.value)
        .unwrap_or(0.0);
    let _ = writeln!(
        o,
        "\nside metrics over the measured {} s (kernel counters; all-zero interrupt rows hidden):",
        fmt_value(window)
    );
    let rest: Vec<Metric> = side
        .iter()
        .filter(|m| m.name != "counters.window_s")
        .cloned()
        .collect();
    let _ = writeln!(
        o,
        "{}",
        pivot(&rest, "total", |base| base.starts_with("irq.")
            || base.starts_with("softirq."))
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_parse_into_specs() {
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let spec = workload_from_words(&w("pipe --loops 1000 --threads")).unwrap();
        assert_eq!(
            spec,
            WorkloadSpec::Pipe {
                loops: 1000,
                threads: true,
                cpus: None
            }
        );
        assert!(workload_from_words(&w("pipe --loops 0")).is_err());
        assert!(workload_from_words(&w("nap")).is_err());
    }
}
