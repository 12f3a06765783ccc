//! The workloads as command-line words (`pipe --loops 1000`): the clap parser `pmlab run`
//! uses and [`WorkloadSpec::from_words`], which the lab uses to read stored and spec-file
//! workloads. One grammar for both.

use crate::placement::Placement;
use crate::spec::CmdMetric;
use crate::units::parse_duration;
use crate::{WorkloadError, WorkloadSpec};
use clap::Parser;

/// The workloads, as `pmlab run` (and commands that take a workload) parse them.
#[derive(clap::Subcommand, Clone, Debug)]
pub enum WorkloadCmd {
    /// Two tasks ping-pong an int over two pipes (perf bench sched pipe). Metric: µs/op.
    #[command(after_help = "Placement (where the two sides run):\n  \
        spread  two CPUs, pinned (default): every round trip wakes an idle CPU, the regime power management acts on\n  \
        same    one CPU, pinned: context-switch cost, no idle exits\n  \
        any     the scheduler's choice, as perf bench runs; the run reports the regime it got (same_cpu_share)\n\n\
        Examples:\n  pmlab run pipe\n  pmlab run pipe --placement same --loops 20000\n  \
        pmlab run pipe --placement any --loops 20000 --json\n  pmlab run pipe --loops 1000000 --threads --cpus 2,3")]
    Pipe(PipeArgs),
    /// Groups of 20 senders and 20 receivers (perf bench sched messaging). Metric: total seconds.
    #[command(
        after_help = "Placement: any (default, the scheduler's, as perf runs it) or same (every task on one CPU).\n\n\
        Examples:\n  pmlab run messaging\n  pmlab run messaging --groups 4 --loops 1000 --pipe --threads\n  \
        pmlab run messaging --groups 2 --placement same"
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

/// Options of `pmlab run pipe` (see [`WorkloadSpec::Pipe`]).
#[derive(clap::Args, Clone, Debug)]
pub struct PipeArgs {
    /// Round trips.
    #[arg(long, default_value_t = crate::DEFAULT_PIPE_LOOPS, value_parser = positive, allow_negative_numbers = true)]
    pub loops: u64,
    /// Two threads instead of two processes.
    #[arg(long)]
    pub threads: bool,
    /// Pin the sides: A runs the side that writes first, B the side that answers (may be equal).
    #[arg(long, value_name = "A,B", value_parser = cpu_pair)]
    pub cpus: Option<Cpus>,
    /// Where the sides run: spread (two CPUs; default), same (one CPU), any (the scheduler's choice).
    #[arg(long, value_enum)]
    pub placement: Option<Placement>,
}

/// Options of `pmlab run messaging` (see [`WorkloadSpec::Messaging`]).
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
    /// Where the tasks run: any (the scheduler's choice; default) or same (one CPU).
    #[arg(long, value_enum, default_value_t = crate::spec::DEFAULT_MESSAGING_PLACEMENT)]
    pub placement: Placement,
}

/// Options of `pmlab run wakeup` (see [`WorkloadSpec::Wakeup`]).
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

/// Options of `pmlab run spin` (see [`WorkloadSpec::Spin`]).
#[derive(clap::Args, Clone, Debug)]
pub struct SpinArgs {
    /// CPUs to load, one pinned thread each (default: all this process may use).
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    pub cpus: Option<Cpus>,
    /// Loop iterations per CPU.
    #[arg(long, default_value_t = 300_000_000, value_parser = positive, allow_negative_numbers = true)]
    pub work: u64,
}

/// Options of `pmlab run idle` (see [`WorkloadSpec::Idle`]).
#[derive(clap::Args, Clone, Debug)]
pub struct IdleArgs {
    /// How long to sleep.
    #[arg(long, default_value = "10s", value_parser = positive_duration, allow_hyphen_values = true)]
    pub duration: pmlab_kernel::Nanos,
}

/// Options of `pmlab run cmd` (see [`WorkloadSpec::Cmd`]).
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

/// Why a workload option's value was refused (clap prints it after the option's name).
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// Not an integer (the text given).
    #[error("'{0}' is not a whole number")]
    NotWhole(String),
    /// Zero or negative where a count must be at least 1 (the value given).
    #[error("must be greater than zero (got {0})")]
    NotPositive(String),
    /// Does not fit the option's integer type (the text given).
    #[error("'{0}' is too large")]
    TooLarge(String),
    /// Not a duration with a unit.
    #[error(transparent)]
    Duration(#[from] crate::units::DurationError),
    /// A duration of zero where the option needs a positive one (the text given).
    #[error("'{0}': must be greater than zero")]
    ZeroDuration(String),
    /// Not two comma-separated CPU numbers (the text given).
    #[error("'{0}': expected two CPU numbers A,B (e.g. 0,1)")]
    NotAPair(String),
}

fn positive(s: &str) -> Result<u64, ValueError> {
    let v: i128 = s
        .trim()
        .parse()
        .map_err(|_| ValueError::NotWhole(s.into()))?;
    if v <= 0 {
        return Err(ValueError::NotPositive(v.to_string()));
    }
    u64::try_from(v).map_err(|_| ValueError::TooLarge(s.into()))
}

fn positive_u32(s: &str) -> Result<u32, ValueError> {
    u32::try_from(positive(s)?).map_err(|_| ValueError::TooLarge(s.into()))
}

fn positive_duration(s: &str) -> Result<pmlab_kernel::Nanos, ValueError> {
    let d = parse_duration(s)?;
    if d.0 == 0 {
        return Err(ValueError::ZeroDuration(s.into()));
    }
    Ok(d)
}

/// A CPU list option value.
#[derive(Clone, Debug, PartialEq)]
pub struct Cpus(pub Vec<u32>);

fn cpu_list(s: &str) -> Result<Cpus, pmlab_kernel::cpulist::CpuListError> {
    crate::parse_cpu_list(s).map(Cpus)
}

fn cpu_pair(s: &str) -> Result<Cpus, ValueError> {
    let cpus: Vec<u32> = s
        .split(',')
        .map(|p| p.trim().parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| ValueError::NotAPair(s.into()))?;
    if cpus.len() != 2 {
        return Err(ValueError::NotAPair(s.into()));
    }
    Ok(Cpus(cpus))
}

impl WorkloadCmd {
    /// The spec this command line describes (not yet validated against the machine).
    pub fn to_spec(&self) -> WorkloadSpec {
        match self.clone() {
            WorkloadCmd::Pipe(a) => {
                // `--cpus` alone implies its placement; neither: the default.
                let placement = a.placement.unwrap_or(match &a.cpus {
                    Some(c) if c.0[0] == c.0[1] => Placement::Same,
                    _ => crate::spec::DEFAULT_PIPE_PLACEMENT,
                });
                WorkloadSpec::Pipe {
                    loops: a.loops,
                    threads: a.threads,
                    cpus: a.cpus.map(|c| c.0),
                    placement,
                }
            }
            WorkloadCmd::Messaging(a) => WorkloadSpec::Messaging {
                groups: a.groups,
                loops: a.loops,
                pipe: a.pipe,
                threads: a.threads,
                placement: a.placement,
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

#[derive(Parser)]
#[command(name = "workload", no_binary_name = true)]
struct Words {
    #[command(subcommand)]
    workload: WorkloadCmd,
}

impl WorkloadSpec {
    /// Parse a workload written as words, e.g. `["pipe", "--loops", "1000"]`, and validate it.
    pub fn from_words(words: &[String]) -> Result<WorkloadSpec, WorkloadError> {
        let spec = parse_words(words)?;
        spec.validate()?;
        Ok(spec)
    }
}

fn parse_words(words: &[String]) -> Result<WorkloadSpec, WorkloadError> {
    let parsed = Words::try_parse_from(words).map_err(|e| WorkloadError::Words {
        words: words.join(" "),
        message: e.to_string().trim_end().to_string(),
    })?;
    Ok(parsed.workload.to_spec())
}

/// The words with the placement they run under written out (`pipe --loops 20000` →
/// `pipe --loops 20000 --placement spread`), so that labels and stores say it; words that
/// do not parse, or name a workload without a placement, come back as they are.
pub fn with_placement(words: &[String]) -> Vec<String> {
    let mut out = words.to_vec();
    let given = words
        .iter()
        .any(|w| w == "--placement" || w.starts_with("--placement="));
    if let (false, Ok(Some(p))) = (given, parse_words(words).map(|s| s.placement())) {
        out.extend(["--placement".to_string(), p.as_str().to_string()]);
    }
    out
}

/// The long options (without `--`) a workload kind takes, e.g. `["loops", "threads", "cpus"]`.
pub fn long_options(kind: &str) -> Vec<String> {
    use clap::CommandFactory;
    let cmd = Words::command();
    cmd.find_subcommand(kind)
        .map(|s| {
            s.get_arguments()
                .filter_map(|a| a.get_long().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_parse_into_specs() {
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let spec = WorkloadSpec::from_words(&w("pipe --loops 1000 --threads")).unwrap();
        assert_eq!(
            spec,
            WorkloadSpec::Pipe {
                loops: 1000,
                threads: true,
                cpus: None,
                placement: Placement::Spread,
            }
        );
        let spec = WorkloadSpec::from_words(&w("pipe --loops 1000 --cpus 0,0")).unwrap();
        assert_eq!(spec.placement(), Some(Placement::Same));
        assert_eq!(
            with_placement(&w("pipe --loops 1000")),
            w("pipe --loops 1000 --placement spread")
        );
        assert_eq!(
            with_placement(&w("pipe --placement any")),
            w("pipe --placement any")
        );
        assert_eq!(
            with_placement(&w("messaging --groups 2")),
            w("messaging --groups 2 --placement any")
        );
        assert_eq!(with_placement(&w("idle")), w("idle"));
        assert_eq!(with_placement(&w("nap")), w("nap"));
        assert!(WorkloadSpec::from_words(&w("pipe --loops 0")).is_err());
        assert!(WorkloadSpec::from_words(&w("nap")).is_err());
        assert!(long_options("pipe").contains(&"loops".to_string()));
        assert!(long_options("nap").is_empty());
    }
}
