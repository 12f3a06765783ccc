//! `WorkloadSpec`: what to run, serialisable (SQLite, TOML spec files) and validated.

use crate::placement::Placement;
use crate::units::{format_duration, serde_duration, serde_opt_duration};
use crate::WorkloadError;
use pmlab_kernel::Nanos;
use serde::{Deserialize, Serialize};

/// Default loops of `pipe` (perf's own default is 1000000; pmlab's is shorter).
pub const DEFAULT_PIPE_LOOPS: u64 = 100_000;
/// `pipe`'s default placement: its sides on two CPUs, the regime where wakeups and idle exits
/// (what power management changes) are part of every round trip.
pub const DEFAULT_PIPE_PLACEMENT: Placement = Placement::Spread;
/// `messaging`'s default placement: the scheduler's, as perf runs it. Its 40 tasks a group
/// outnumber the CPUs, so every CPU stays busy and the balancer's work is part of what it
/// measures; `same` pins every task to one CPU.
pub const DEFAULT_MESSAGING_PLACEMENT: Placement = Placement::Any;
/// Workload names, as `pmlab run` takes them.
pub const KINDS: &[&str] = &["pipe", "messaging", "wakeup", "spin", "idle", "cmd"];

/// One workload and its options. Serialised with a `kind` tag, e.g.
/// `{"kind":"pipe","loops":100000,"threads":false}` or in TOML `kind = "idle"`, `duration = "5s"`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum WorkloadSpec {
    /// Two tasks ping-pong an int over two pipes (`perf bench sched pipe`).
    Pipe {
        /// Round trips (one write each way). Default [`DEFAULT_PIPE_LOOPS`].
        #[serde(default = "default_pipe_loops")]
        loops: u64,
        /// Threads instead of processes.
        #[serde(default)]
        threads: bool,
        /// Two CPUs: the first runs the side that writes first, the second the side that answers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cpus: Option<Vec<u32>>,
        /// Where the two sides run when `cpus` does not say (two CPUs by default).
        #[serde(default = "default_pipe_placement")]
        placement: Placement,
    },
    /// Groups of 20 senders and 20 receivers (`perf bench sched messaging`, hackbench).
    Messaging {
        /// Groups of 20 senders + 20 receivers.
        #[serde(default = "default_groups")]
        groups: u32,
        /// Messages each sender sends to each receiver of its group.
        #[serde(default = "default_messaging_loops")]
        loops: u64,
        /// Pipes instead of socketpairs.
        #[serde(default)]
        pipe: bool,
        /// Threads instead of processes.
        #[serde(default)]
        threads: bool,
        /// The scheduler's choice (default) or every task on one CPU.
        #[serde(default = "default_messaging_placement")]
        placement: Placement,
    },
    /// One thread per CPU sleeping to absolute deadlines (cyclictest-like).
    Wakeup {
        /// CPUs, one measuring thread each (kernel numbering); None: all this process may use.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cpus: Option<Vec<u32>>,
        /// Time between deadlines (default 1 ms).
        #[serde(default = "default_interval", with = "serde_duration")]
        interval: Nanos,
        /// Wakeups per thread; exclusive with `duration`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        loops: Option<u64>,
        /// Run time; exclusive with `loops`. Neither: 10 s.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "serde_opt_duration"
        )]
        duration: Option<Nanos>,
        /// SCHED_FIFO priority of the measuring threads.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rt_prio: Option<u32>,
        /// Hold /dev/cpu_dma_latency at this many µs during the run (off by default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dma_latency: Option<i32>,
    },
    /// Fixed integer work on each selected CPU, pinned.
    Spin {
        /// CPUs to load, one pinned thread each; None: all this process may use.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cpus: Option<Vec<u32>>,
        /// Loop iterations per CPU.
        #[serde(default = "default_work")]
        work: u64,
    },
    /// One blocking sleep: nothing of pmlab's runs while it waits.
    Idle {
        /// How long to sleep (default 10 s).
        #[serde(default = "default_idle_duration", with = "serde_duration")]
        duration: Nanos,
    },
    /// An external program.
    Cmd {
        /// Program and arguments (with `shell`: words joined into one `sh -c` script).
        argv: Vec<String>,
        /// Join `argv` into one `sh -c` script instead of running argv\[0\] directly.
        #[serde(default)]
        shell: bool,
        /// Run as root even when invoked through sudo.
        #[serde(default)]
        as_root: bool,
        /// A metric parsed from the output instead of wall time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metric: Option<CmdMetric>,
    },
}

/// A metric a `cmd` prints: the regex's first capture group (or whole match), last match wins.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CmdMetric {
    /// The regex, searched in the program's output; its first capture group (or whole match) is the value.
    pub regex: String,
    /// The metric's name in results (e.g. `ops`).
    pub name: String,
    /// The metric's unit as printed (free text; empty when none).
    #[serde(default)]
    pub unit: String,
    /// Larger values are better (default: lower is better).
    #[serde(default)]
    pub higher_is_better: bool,
}

fn default_pipe_loops() -> u64 {
    DEFAULT_PIPE_LOOPS
}
fn default_pipe_placement() -> Placement {
    DEFAULT_PIPE_PLACEMENT
}
fn default_messaging_placement() -> Placement {
    DEFAULT_MESSAGING_PLACEMENT
}
fn default_groups() -> u32 {
    10
}
fn default_messaging_loops() -> u64 {
    100
}
fn default_interval() -> Nanos {
    Nanos(1_000_000)
}
fn default_work() -> u64 {
    300_000_000
}
fn default_idle_duration() -> Nanos {
    Nanos(10_000_000_000)
}

/// The default run time of `wakeup` when neither loops nor duration is given.
pub const DEFAULT_WAKEUP_DURATION: Nanos = Nanos(10_000_000_000);

impl WorkloadSpec {
    /// A spec with every option at its default (`cmd` gets an empty argv, which does not validate).
    pub fn default_for(kind: &str) -> Option<WorkloadSpec> {
        Some(match kind {
            "pipe" => WorkloadSpec::Pipe {
                loops: DEFAULT_PIPE_LOOPS,
                threads: false,
                cpus: None,
                placement: DEFAULT_PIPE_PLACEMENT,
            },
            "messaging" => WorkloadSpec::Messaging {
                groups: default_groups(),
                loops: default_messaging_loops(),
                pipe: false,
                threads: false,
                placement: DEFAULT_MESSAGING_PLACEMENT,
            },
            "wakeup" => WorkloadSpec::Wakeup {
                cpus: None,
                interval: default_interval(),
                loops: None,
                duration: None,
                rt_prio: None,
                dma_latency: None,
            },
            "spin" => WorkloadSpec::Spin {
                cpus: None,
                work: default_work(),
            },
            "idle" => WorkloadSpec::Idle {
                duration: default_idle_duration(),
            },
            "cmd" => WorkloadSpec::Cmd {
                argv: vec![],
                shell: false,
                as_root: false,
                metric: None,
            },
            _ => return None,
        })
    }

    /// The workload's name (`pipe`, `messaging`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadSpec::Pipe { .. } => "pipe",
            WorkloadSpec::Messaging { .. } => "messaging",
            WorkloadSpec::Wakeup { .. } => "wakeup",
            WorkloadSpec::Spin { .. } => "spin",
            WorkloadSpec::Idle { .. } => "idle",
            WorkloadSpec::Cmd { .. } => "cmd",
        }
    }

    /// One line for people: `pipe loops=100000 processes cpus=0,1`.
    pub fn describe(&self) -> String {
        let cpus_str = |c: &Option<Vec<u32>>| match c {
            Some(v) => format!(
                " cpus={}",
                v.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            None => String::new(),
        };
        let mode = |t: bool| if t { "threads" } else { "processes" };
        match self {
            WorkloadSpec::Pipe {
                loops,
                threads,
                cpus,
                placement,
            } => {
                format!(
                    "pipe loops={loops} {} placement={placement}{}",
                    mode(*threads),
                    cpus_str(cpus)
                )
            }
            WorkloadSpec::Messaging {
                groups,
                loops,
                pipe,
                threads,
                placement,
            } => format!(
                "messaging groups={groups} loops={loops} {} {} placement={placement}",
                if *pipe { "pipes" } else { "sockets" },
                mode(*threads)
            ),
            WorkloadSpec::Wakeup {
                cpus,
                interval,
                loops,
                duration,
                rt_prio,
                dma_latency,
            } => {
                let mut s = format!("wakeup interval={}", format_duration(*interval));
                if let Some(l) = loops {
                    s += &format!(" loops={l}");
                }
                if let Some(d) = duration {
                    s += &format!(" duration={}", format_duration(*d));
                }
                s += &cpus_str(cpus);
                if let Some(p) = rt_prio {
                    s += &format!(" rt-prio={p}");
                }
                if let Some(d) = dma_latency {
                    s += &format!(" dma-latency={d}");
                }
                s
            }
            WorkloadSpec::Spin { cpus, work } => format!("spin work={work}{}", cpus_str(cpus)),
            WorkloadSpec::Idle { duration } => {
                format!("idle duration={}", format_duration(*duration))
            }
            WorkloadSpec::Cmd { argv, shell, .. } => {
                format!(
                    "cmd{} -- {}",
                    if *shell { " --shell" } else { "" },
                    argv.join(" ")
                )
            }
        }
    }

    /// Check every option; a bad spec changes nothing and says what is wrong.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Invalid(m));
        match self {
            WorkloadSpec::Pipe {
                loops,
                cpus,
                placement,
                ..
            } => {
                positive("pipe loops", *loops)?;
                if let Some(c) = cpus {
                    if c.len() != 2 {
                        return bad(format!(
                            "pipe cpus: expected two CPUs (one per side), got {}",
                            c.len()
                        ));
                    }
                    let implied = if c[0] == c[1] {
                        Placement::Same
                    } else {
                        Placement::Spread
                    };
                    if *placement != implied {
                        return bad(format!(
                            "pipe: --cpus {},{} puts the sides on {}, which contradicts --placement \
                             {placement} (give one or the other)",
                            c[0],
                            c[1],
                            if implied == Placement::Same {
                                "one CPU"
                            } else {
                                "two CPUs"
                            }
                        ));
                    }
                    check_cpus("pipe", c)?;
                }
                self.pipe_sides()?;
            }
            WorkloadSpec::Messaging {
                groups,
                loops,
                placement,
                ..
            } => {
                positive("messaging groups", u64::from(*groups))?;
                positive("messaging loops", *loops)?;
                if *placement == Placement::Spread {
                    return bad(
                        "messaging --placement spread: not supported (its 40 tasks a group \
                         outnumber the CPUs; use any, the scheduler's choice, or same, one CPU)"
                            .into(),
                    );
                }
            }
            WorkloadSpec::Wakeup {
                cpus,
                interval,
                loops,
                duration,
                rt_prio,
                dma_latency,
            } => {
                positive("wakeup interval", interval.0)?;
                if let Some(l) = loops {
                    positive("wakeup loops", *l)?;
                }
                if let Some(d) = duration {
                    positive("wakeup duration", d.0)?;
                    if d.0 < interval.0 {
                        return bad(format!(
                            "wakeup duration {} is shorter than the interval {}",
                            format_duration(*d),
                            format_duration(*interval)
                        ));
                    }
                }
                if loops.is_some() && duration.is_some() {
                    return bad("wakeup: give --loops or --duration, not both".into());
                }
                if let Some(p) = rt_prio {
                    if !(1..=99).contains(p) {
                        return bad(format!("wakeup rt-prio must be 1..99, got {p}"));
                    }
                }
                if let Some(d) = dma_latency {
                    if *d < 0 {
                        return bad(format!("wakeup dma-latency must be >= 0 µs, got {d}"));
                    }
                }
                if let Some(c) = cpus {
                    check_cpus("wakeup", c)?;
                }
            }
            WorkloadSpec::Spin { cpus, work } => {
                positive("spin work", *work)?;
                if let Some(c) = cpus {
                    check_cpus("spin", c)?;
                }
            }
            WorkloadSpec::Idle { duration } => positive("idle duration", duration.0)?,
            WorkloadSpec::Cmd { argv, metric, .. } => {
                if argv.is_empty() || argv[0].is_empty() {
                    return bad("cmd: no program given (pmlab run cmd -- PROGRAM ARGS)".into());
                }
                if let Some(m) = metric {
                    let re = regex::Regex::new(&m.regex).map_err(|e| {
                        WorkloadError::Invalid(format!("cmd --metric-regex '{}': {e}", m.regex))
                    })?;
                    if re.captures_len() > 2 {
                        return bad(format!(
                            "cmd --metric-regex '{}': use at most one capture group",
                            m.regex
                        ));
                    }
                    if m.name.trim().is_empty() {
                        return bad("cmd --metric-name must not be empty".into());
                    }
                }
            }
        }
        Ok(())
    }
}

impl WorkloadSpec {
    /// The placement of a workload that has one (`pipe`, `messaging`).
    pub fn placement(&self) -> Option<Placement> {
        match self {
            WorkloadSpec::Pipe { placement, .. } | WorkloadSpec::Messaging { placement, .. } => {
                Some(*placement)
            }
            _ => None,
        }
    }

    /// The CPUs the workload's tasks may run on, sorted and without repeats: its pinned CPUs
    /// (`pipe`'s sides, `spin`'s and `wakeup`'s CPUs, `messaging --placement same`'s one CPU),
    /// else every CPU pmlab may use (`idle`: none, it runs nothing). What the lab's disturbance
    /// measurement calls "the workload's CPUs".
    pub fn cpus(&self) -> Result<Vec<u32>, WorkloadError> {
        let allowed =
            || crate::cpus::allowed_cpus().map_err(|e| WorkloadError::io("sched_getaffinity", e));
        let mut cpus = match self {
            WorkloadSpec::Pipe { .. } => match self.pipe_sides()? {
                Some(sides) => sides.to_vec(),
                None => allowed()?,
            },
            WorkloadSpec::Spin { cpus: Some(c), .. }
            | WorkloadSpec::Wakeup { cpus: Some(c), .. } => c.clone(),
            WorkloadSpec::Messaging {
                placement: Placement::Same,
                ..
            } => allowed()?.into_iter().take(1).collect(),
            WorkloadSpec::Idle { .. } => Vec::new(),
            _ => allowed()?,
        };
        cpus.sort_unstable();
        cpus.dedup();
        Ok(cpus)
    }

    /// The CPUs `pipe`'s two sides are pinned to (writer first), or None for the scheduler's
    /// choice: `cpus` as given, else chosen by the placement among the CPUs pmlab may use.
    pub fn pipe_sides(&self) -> Result<Option<[u32; 2]>, WorkloadError> {
        let WorkloadSpec::Pipe {
            cpus, placement, ..
        } = self
        else {
            return Ok(None);
        };
        if let Some(c) = cpus {
            return Ok(Some([c[0], c[1]]));
        }
        let allowed =
            crate::cpus::allowed_cpus().map_err(|e| WorkloadError::io("sched_getaffinity", e))?;
        match placement {
            Placement::Any => Ok(None),
            Placement::Same => Ok(allowed.first().map(|&c| [c, c])),
            Placement::Spread => {
                crate::placement::spread_pair(&allowed, crate::placement::thread_siblings)
                    .map(Some)
                    .ok_or_else(|| {
                        WorkloadError::Invalid(format!(
                            "pipe --placement spread needs two CPUs; pmlab may use only {} \
                         (use --placement same)",
                            crate::cpus::format_cpu_list(&allowed)
                        ))
                    })
            }
        }
    }
}

fn positive(what: &str, v: u64) -> Result<(), WorkloadError> {
    if v == 0 {
        return Err(WorkloadError::Invalid(format!(
            "{what} must be greater than zero"
        )));
    }
    Ok(())
}

fn check_cpus(what: &str, cpus: &[u32]) -> Result<(), WorkloadError> {
    if cpus.is_empty() {
        return Err(WorkloadError::Invalid(format!("{what}: empty CPU list")));
    }
    let allowed =
        crate::cpus::allowed_cpus().map_err(|e| WorkloadError::io("sched_getaffinity", e))?;
    for c in cpus {
        if !allowed.contains(c) {
            return Err(WorkloadError::Invalid(format!(
                "{what}: CPU {c} is offline, absent or not allowed for pmlab (usable: {})",
                crate::cpus::format_cpu_list(&allowed)
            )));
        }
    }
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != cpus.len() && what != "pipe" {
        return Err(WorkloadError::Invalid(format!("{what}: CPU listed twice")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_with_defaults() {
        let s: WorkloadSpec = serde_json::from_str(r#"{"kind":"pipe"}"#).unwrap();
        assert_eq!(s, WorkloadSpec::default_for("pipe").unwrap());
        let w: WorkloadSpec =
            serde_json::from_str(r#"{"kind":"wakeup","interval":"500us","loops":10}"#).unwrap();
        match &w {
            WorkloadSpec::Wakeup {
                interval, loops, ..
            } => {
                assert_eq!(*interval, Nanos(500_000));
                assert_eq!(*loops, Some(10));
            }
            _ => panic!(),
        }
        let text = serde_json::to_string(&w).unwrap();
        assert!(text.contains(r#""interval":"500us""#), "{text}");
        assert_eq!(serde_json::from_str::<WorkloadSpec>(&text).unwrap(), w);
    }

    #[test]
    fn duration_accepts_integer_nanoseconds() {
        let s: WorkloadSpec =
            serde_json::from_str(r#"{"kind":"idle","duration":5000000000}"#).unwrap();
        assert_eq!(
            s,
            WorkloadSpec::Idle {
                duration: Nanos(5_000_000_000)
            }
        );
    }

    #[test]
    fn unknown_fields_and_kinds_are_refused() {
        assert!(serde_json::from_str::<WorkloadSpec>(r#"{"kind":"pipe","lops":3}"#).is_err());
        assert!(serde_json::from_str::<WorkloadSpec>(r#"{"kind":"nap"}"#).is_err());
    }

    #[test]
    fn zero_values_are_refused() {
        for json in [
            r#"{"kind":"pipe","loops":0}"#,
            r#"{"kind":"messaging","groups":0}"#,
            r#"{"kind":"messaging","loops":0}"#,
            r#"{"kind":"wakeup","interval":"0ms"}"#,
            r#"{"kind":"wakeup","loops":0}"#,
            r#"{"kind":"wakeup","duration":"0s"}"#,
            r#"{"kind":"spin","work":0}"#,
            r#"{"kind":"idle","duration":"0s"}"#,
            r#"{"kind":"cmd","argv":[]}"#,
        ] {
            let s: WorkloadSpec = serde_json::from_str(json).unwrap();
            let e = s.validate().unwrap_err().to_string();
            assert!(
                e.contains("greater than zero") || e.contains("no program"),
                "{json}: {e}"
            );
        }
    }

    #[test]
    fn negative_values_do_not_deserialize() {
        assert!(serde_json::from_str::<WorkloadSpec>(r#"{"kind":"pipe","loops":-1}"#).is_err());
        assert!(
            serde_json::from_str::<WorkloadSpec>(r#"{"kind":"idle","duration":"-1s"}"#).is_err()
        );
    }

    #[test]
    fn pipe_needs_two_cpus_and_cpus_must_exist() {
        let s = WorkloadSpec::Pipe {
            loops: 1,
            threads: false,
            cpus: Some(vec![0]),
            placement: Placement::Spread,
        };
        assert!(s.validate().unwrap_err().to_string().contains("two CPUs"));
        let s = WorkloadSpec::Spin {
            cpus: Some(vec![4095]),
            work: 1,
        };
        assert!(s.validate().unwrap_err().to_string().contains("CPU 4095"));
    }

    #[test]
    fn placements_that_contradict_the_cpus_are_refused() {
        let pipe = |cpus: Option<Vec<u32>>, placement| WorkloadSpec::Pipe {
            loops: 1,
            threads: false,
            cpus,
            placement,
        };
        for (cpus, placement) in [
            (vec![0, 0], Placement::Spread),
            (vec![0, 0], Placement::Any),
            (vec![0, 1], Placement::Same),
            (vec![0, 1], Placement::Any),
        ] {
            let e = pipe(Some(cpus.clone()), placement).validate().unwrap_err();
            assert!(
                e.to_string().contains("contradicts"),
                "{cpus:?} {placement}: {e}"
            );
        }
        let m = WorkloadSpec::Messaging {
            groups: 1,
            loops: 1,
            pipe: false,
            threads: false,
            placement: Placement::Spread,
        };
        assert!(m
            .validate()
            .unwrap_err()
            .to_string()
            .contains("not supported"));
    }

    #[test]
    fn placement_picks_the_sides() {
        let allowed = crate::allowed_cpus().unwrap();
        let pipe = |placement| WorkloadSpec::Pipe {
            loops: 1,
            threads: false,
            cpus: None,
            placement,
        };
        assert_eq!(pipe(Placement::Any).pipe_sides().unwrap(), None);
        assert_eq!(
            pipe(Placement::Same).pipe_sides().unwrap(),
            Some([allowed[0], allowed[0]])
        );
        match pipe(Placement::Spread).pipe_sides() {
            Ok(Some([a, b])) => assert!(a != b && allowed.contains(&a) && allowed.contains(&b)),
            Ok(None) => panic!("spread must pin"),
            Err(e) => assert_eq!(allowed.len(), 1, "{e}"),
        }
    }

    #[test]
    fn bad_regex_and_exclusive_options() {
        let s = WorkloadSpec::Cmd {
            argv: vec!["true".into()],
            shell: false,
            as_root: false,
            metric: Some(CmdMetric {
                regex: "(".into(),
                name: "x".into(),
                unit: String::new(),
                higher_is_better: false,
            }),
        };
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--metric-regex"));
        let s = WorkloadSpec::Wakeup {
            cpus: None,
            interval: Nanos(1000),
            loops: Some(3),
            duration: Some(Nanos(1_000_000)),
            rt_prio: None,
            dma_latency: None,
        };
        assert!(s.validate().unwrap_err().to_string().contains("not both"));
    }
}
