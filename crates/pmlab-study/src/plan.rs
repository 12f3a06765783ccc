//! The battery: which experiments each stage runs on this machine (quick or full), with
//! budgets and time estimates, or why the stage is skipped.

use super::detect::{Caps, FrequencyPair};
use crate::spec::{
    sweep_configurations, Budget, Configuration, Experiment, Kind, SweepAxis, WorkloadDef,
};
use pmlab_kernel::knob::KnobId;
use serde::Serialize;
use std::time::Duration;

/// The stages, in run order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// The idle machine: idle residency and wakeups with nothing running.
    Idle,
    /// The idle-polling sweep (`haltpoll.guest_halt_poll_ns`).
    Polling,
    /// The cpuidle governors compared.
    Governors,
    /// CPU hotplug latency under load.
    Hotplug,
    /// Who wakes the idle CPUs, traced.
    Wakeups,
    /// The wakeup stage's trace replayed under the haltpoll governor (`pmlab whatif`).
    #[serde(rename = "polling-predicted")]
    PollingPredicted,
    /// CPU-bound runtime.
    Cpu,
    /// cpufreq compared: EPP performance against balance_power, or governors.
    Frequency,
    /// Uncore frequency: its upper limit at the hardware's lowest against its highest.
    Uncore,
    /// Guests booted under QEMU: secondary-CPU bring-up (`pmlab boot`).
    Boot,
}

impl Stage {
    /// Every stage, in run order.
    pub const ALL: [Stage; 10] = [
        Stage::Idle,
        Stage::Polling,
        Stage::Governors,
        Stage::Hotplug,
        Stage::Wakeups,
        Stage::PollingPredicted,
        Stage::Cpu,
        Stage::Frequency,
        Stage::Uncore,
        Stage::Boot,
    ];
    /// The stage's name (`idle`, `polling-predicted`, ...), as `--only` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Idle => "idle",
            Stage::Polling => "polling",
            Stage::Governors => "governors",
            Stage::Hotplug => "hotplug",
            Stage::Wakeups => "wakeups",
            Stage::PollingPredicted => "polling-predicted",
            Stage::Cpu => "cpu",
            Stage::Frequency => "frequency",
            Stage::Uncore => "uncore",
            Stage::Boot => "boot",
        }
    }
    /// The stage `--only` names; refused when it names none.
    pub fn parse(s: &str) -> Result<Stage, UnknownStage> {
        Stage::ALL
            .iter()
            .copied()
            .find(|x| x.as_str() == s.trim())
            .ok_or_else(|| UnknownStage(s.to_string()))
    }
}

/// A stage name that is none of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown stage `{0}` (stages: {all})", all = Stage::ALL.map(Stage::as_str).join(", "))]
pub struct UnknownStage(pub String);

/// A hotplug session.
#[derive(Debug, Clone)]
pub struct HotplugPlan {
    /// The CPUs offlined and onlined.
    pub cpus: Vec<u32>,
    /// Offline/online cycles per CPU, configuration and load level.
    pub cycles: u32,
    /// Load levels: how many loader instances run in the background.
    pub loads: Vec<u32>,
    /// Record a trace of the cycles.
    pub trace: bool,
}

/// What a stage does.
#[derive(Debug, Clone)]
pub enum Step {
    /// One experiment through the protocol.
    Experiment {
        /// The experiment.
        experiment: Box<Experiment>,
        /// Its budget.
        budget: Budget,
        /// Record a trace of every run (for the trace analyses in the report).
        trace: bool,
    },
    /// A hotplug session through the hotplug lab.
    Hotplug(HotplugPlan),
    /// Replay the wakeup stage's traced run under the haltpoll governor.
    PredictPolling,
    /// Guests booted through the boot lab.
    Boot(BootPlan),
}

/// The boot stage's guests: set-up's default kernel per command line, per vCPU count.
#[derive(Debug, Clone)]
pub struct BootPlan {
    /// The kernel booted.
    pub kernel: std::path::PathBuf,
    /// Each configuration's command-line words.
    pub cmdlines: Vec<String>,
    /// vCPU counts.
    pub vcpus: Vec<u32>,
    /// Its budget.
    pub budget: Budget,
}

/// A stage's plan: its steps and an estimate, or a reason to skip it.
#[derive(Debug, Clone)]
pub enum StagePlan {
    /// The stage runs.
    Run {
        /// Its steps, in order.
        steps: Vec<Step>,
        /// Estimated wall time.
        estimate: Duration,
        /// Notes for the report (what was chosen and why).
        notes: Vec<String>,
    },
    /// The stage is skipped, for this reason.
    Skip(String),
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn workload(s: &str) -> WorkloadDef {
    WorkloadDef::new(words(s)).expect("built-in workload words")
}

fn budget(seed: u64, max_runs: usize, max_time: Duration, warmup: bool) -> Budget {
    Budget {
        target_ci: 0.02,
        max_runs: Some(max_runs),
        max_time: Some(max_time),
        seed,
        warmup,
        ..Budget::default()
    }
}

fn single(name: &str, w: Vec<WorkloadDef>) -> Experiment {
    Experiment::new(
        Kind::RunSpec,
        name.into(),
        vec![Configuration::parse("as found", "").expect("empty configuration")],
        w,
        None,
    )
    .expect("study experiment")
}

/// The plan of one stage.
pub fn plan(stage: Stage, caps: &Caps, quick: bool, seed: u64) -> StagePlan {
    let secs = |s: f64| Duration::from_secs_f64(s);
    match stage {
        Stage::Idle => {
            let d = pick(quick, 2, 10);
            let runs = pick(quick, 2, 3);
            let e = single(
                "study: idle baseline",
                vec![workload(&format!("idle --duration {d}s"))],
            );
            StagePlan::Run {
                steps: vec![Step::Experiment {
                    experiment: Box::new(e),
                    budget: budget(seed, runs, secs((d * runs) as f64 + 10.0), false),
                    trace: caps.tracefs,
                }],
                estimate: secs((d * runs) as f64 + 0.5),
                notes: vec![],
            }
        }
        Stage::Polling => {
            if let Some(why) = caps.polling_unavailable() {
                // Where the wakeup stage records a trace, the report predicts polling from it.
                return StagePlan::Skip(if caps.tracefs {
                    format!("{why}; the polling-predicted stage replays the wakeup stage's trace under the haltpoll governor instead")
                } else {
                    why
                });
            }
            let values = pick(
                quick,
                "0,25us,100us,200us",
                "0,10us,25us,50us,100us,200us,400us",
            );
            let (knob, values) = if let Some(k) = &caps.polling_knob {
                (KnobId::new(k.as_str()), values)
            } else if caps.haltpoll_poll_ns.is_some()
                && caps.cpuidle_driver.as_deref() == Some("haltpoll")
            {
                (KnobId::new("haltpoll.guest_halt_poll_ns"), values)
            } else {
                (KnobId::new("cpuidle.POLL.disable"), "1,0")
            };
            let axes = vec![SweepAxis::new(knob, values).expect("sweep axis")];
            let configs = sweep_configurations(&axes).expect("sweep values");
            let ws = wake_workloads(caps, quick);
            let mut e = Experiment::new(
                Kind::Sweep,
                "study: polling sweep".into(),
                configs,
                ws,
                None,
            )
            .expect("sweep experiment");
            e.swept = axes.iter().map(|a| a.knob.to_string()).collect();
            let t = pick(quick, 35.0, 200.0);
            StagePlan::Run {
                steps: vec![Step::Experiment {
                    experiment: Box::new(e),
                    budget: budget(seed, pick(quick, 48, 140), secs(t), true),
                    trace: false,
                }],
                estimate: secs(t),
                notes: vec![],
            }
        }
        Stage::Governors => {
            if let Some(why) = caps.governors_unavailable() {
                return StagePlan::Skip(why);
            }
            let configs: Vec<Configuration> = caps
                .governors
                .iter()
                .map(|g| Configuration {
                    label: g.clone(),
                    knobs: vec![KnobId::new("cpuidle.governor").set(g.as_str())],
                })
                .collect();
            compare_stage(
                "study: cpuidle governors",
                configs,
                caps.current_governor.clone(),
                wake_workloads(caps, quick),
                seed,
                quick,
                vec![],
            )
        }
        Stage::Hotplug => {
            if let Some(why) = caps.hotplug_unavailable() {
                return StagePlan::Skip(why);
            }
            let cycles = 10;
            let cpus = vec![caps.hotpluggable[0]];
            let mut notes = Vec::new();
            if !caps.tracefs {
                notes.push("tracefs unavailable: wall times only, no per-step waterfall".into());
            }
            StagePlan::Run {
                steps: vec![Step::Hotplug(HotplugPlan {
                    cpus,
                    cycles,
                    loads: vec![0, 2],
                    trace: caps.tracefs,
                })],
                estimate: secs(cycles as f64 * 4.0 * 0.25 + 2.0),
                notes,
            }
        }
        Stage::Wakeups => {
            let e = single(
                "study: wakeups (messaging)",
                vec![workload(pick(
                    quick,
                    "messaging --groups 1 --loops 50",
                    "messaging --groups 2 --loops 100",
                ))],
            );
            let runs = pick(quick, 3, 8);
            StagePlan::Run {
                steps: vec![Step::Experiment {
                    experiment: Box::new(e),
                    budget: budget(seed, runs, secs(pick(quick, 15.0, 60.0)), true),
                    trace: caps.tracefs,
                }],
                estimate: secs(pick(quick, 3.0, 15.0)),
                notes: vec!["who wakes whom by originator needs a traced run and pmlab-analysis; counters give interrupts by kind per CPU".into()],
            }
        }
        Stage::PollingPredicted => {
            if !caps.tracefs {
                return StagePlan::Skip(
                    "the prediction replays the wakeup stage's trace, and recording needs root and tracefs".into(),
                );
            }
            StagePlan::Run {
                steps: vec![Step::PredictPolling],
                estimate: secs(0.5),
                notes: vec![],
            }
        }
        Stage::Cpu => {
            let e = single(
                "study: cpu-bound runtime (spin)",
                vec![workload(pick(
                    quick,
                    "spin --work 20000000",
                    "spin --work 100000000",
                ))],
            );
            let runs = pick(quick, 3, 10);
            let mut notes = Vec::new();
            if !caps.cpufreq {
                notes.push("no cpufreq policies: no frequency residency".into());
            }
            StagePlan::Run {
                steps: vec![Step::Experiment {
                    experiment: Box::new(e),
                    budget: budget(seed, runs, secs(pick(quick, 15.0, 90.0)), false),
                    trace: false,
                }],
                estimate: secs(pick(quick, 2.0, 15.0)),
                notes,
            }
        }
        Stage::Frequency => {
            let pair = match caps.frequency_pair() {
                Ok(p) => p,
                Err(why) => return StagePlan::Skip(why),
            };
            let mut notes = Vec::new();
            let (configs, found) = match pair {
                FrequencyPair::Epp => {
                    // intel_pstate and amd-pstate refuse an EPP but performance under the
                    // performance governor: both sides run under powersave.
                    let mut first = Vec::new();
                    if caps.cpufreq_governor.as_deref() != Some("powersave")
                        && caps.cpufreq_governors.iter().any(|g| g == "powersave")
                    {
                        first.push(KnobId::new("cpufreq.governor").set("powersave"));
                        notes.push(format!(
                            "the governor is {} as found, under which the driver keeps EPP at performance: both sides set the powersave governor first",
                            caps.cpufreq_governor.as_deref().unwrap_or("unknown")
                        ));
                    }
                    let configs = ["performance", "balance_power"]
                        .map(|w| Configuration {
                            label: format!("epp {w}"),
                            knobs: first
                                .iter()
                                .cloned()
                                .chain([KnobId::new("cpufreq.epp").set(w)])
                                .collect(),
                        })
                        .to_vec();
                    (configs, caps.epp.as_ref().map(|e| format!("epp {e}")))
                }
                FrequencyPair::Governor(other) => {
                    notes.push(format!(
                        "no policy offers both EPP performance and balance_power here (EPP: {}): the cpufreq governors are compared",
                        if caps.epp_words.is_empty() { "none".to_string() } else { caps.epp_words.join(", ") }
                    ));
                    let configs = ["performance", other.as_str()]
                        .map(|g| Configuration {
                            label: g.to_string(),
                            knobs: vec![KnobId::new("cpufreq.governor").set(g)],
                        })
                        .to_vec();
                    (configs, caps.cpufreq_governor.clone())
                }
            };
            let ws = vec![
                workload(pick(quick, "spin --work 20000000", "spin --work 100000000")),
                pipe_workload(caps, quick),
            ];
            compare_stage(
                "study: cpufreq (frequency driver)",
                configs,
                found,
                ws,
                seed,
                quick,
                notes,
            )
        }
        Stage::Uncore => {
            if let Some(why) = caps.uncore_unavailable() {
                return StagePlan::Skip(why);
            }
            // The lower limit goes to the hardware's lowest on both sides, so that the upper
            // one can be written below a raised lower limit.
            let configs = ["max", "min"]
                .map(|v| Configuration {
                    label: format!("uncore {v}"),
                    knobs: vec![
                        KnobId::new("uncore.min_freq").set("min"),
                        KnobId::new("uncore.max_freq").set(v),
                    ],
                })
                .to_vec();
            let ws = vec![
                pipe_workload(caps, quick),
                workload(pick(
                    quick,
                    "messaging --groups 1 --loops 50",
                    "messaging --groups 2 --loops 100",
                )),
            ];
            compare_stage(
                "study: uncore frequency",
                configs,
                None,
                ws,
                seed,
                quick,
                vec![format!(
                    "{} uncore domain(s): the upper limit at the hardware's highest against its lowest, on every domain",
                    caps.uncore_domains
                )],
            )
        }
        Stage::Boot => {
            let Some(kernel) = caps.guest_kernel.clone() else {
                return StagePlan::Skip(
                    caps.no_guest
                        .clone()
                        .unwrap_or_else(|| "no guest to boot was detected".into()),
                );
            };
            // Quick: one 2-vCPU boot (bring-up and its steps) fits the quick study's 90 s.
            // Full: serial against parallel bring-up (cpuhp.parallel, 6.5+) at 2, 4 and 8
            // vCPUs, three rounds.
            let (cmdlines, vcpus, runs, max) = if quick {
                (vec![String::new()], vec![2], 1, 60.0)
            } else {
                (
                    vec![
                        "cpuhp.parallel=0".to_string(),
                        "cpuhp.parallel=1".to_string(),
                    ],
                    vec![2, 4, 8],
                    18,
                    600.0,
                )
            };
            StagePlan::Run {
                steps: vec![Step::Boot(BootPlan {
                    kernel,
                    cmdlines,
                    vcpus,
                    budget: budget(seed, runs, secs(max), false),
                })],
                estimate: secs(pick(quick, 15.0, 360.0)),
                notes: vec![],
            }
        }
    }
}

/// A stage that compares `configs` on `workloads` (the reference: the one labelled `found`,
/// else the first), with the governor stage's budget.
fn compare_stage(
    name: &str,
    configs: Vec<Configuration>,
    found: Option<String>,
    workloads: Vec<WorkloadDef>,
    seed: u64,
    quick: bool,
    notes: Vec<String>,
) -> StagePlan {
    let mut e = Experiment::new(Kind::Compare, name.into(), configs, workloads, None)
        .expect("study compare experiment");
    if let Some(found) = found {
        e.reference = e
            .configurations
            .iter()
            .position(|c| c.label == found)
            .unwrap_or(0);
    }
    let t = pick(quick, 25.0, 150.0);
    StagePlan::Run {
        steps: vec![Step::Experiment {
            experiment: Box::new(e),
            budget: budget(seed, pick(quick, 36, 120), Duration::from_secs_f64(t), true),
            trace: false,
        }],
        estimate: Duration::from_secs_f64(t),
        notes,
    }
}

/// The pipe ping-pong with its two sides on two CPUs where there are two.
fn pipe_workload(caps: &Caps, quick: bool) -> WorkloadDef {
    // Polling acts on wakes across CPUs: the pipe's two sides go on two CPUs (placement
    // spread), so a run cannot land in the one-CPU regime where no wake crosses (and
    // polling is moot). A one-CPU machine has only that regime.
    let loops = pick(quick, "5000", "20000");
    let placement = if caps.cpus_online.len() >= 2 {
        "spread"
    } else {
        "same"
    };
    workload(&format!("pipe --loops {loops} --placement {placement}"))
}

/// The workloads the polling and governor stages compare configurations on: a pipe
/// ping-pong, timer wakeups and an idle system.
fn wake_workloads(caps: &Caps, quick: bool) -> Vec<WorkloadDef> {
    vec![
        pipe_workload(caps, quick),
        workload(pick(
            quick,
            "wakeup --duration 300ms",
            "wakeup --duration 1s",
        )),
        workload(pick(quick, "idle --duration 1s", "idle --duration 2s")),
    ]
}

/// The quick or the full value.
fn pick<T>(quick: bool, a: T, b: T) -> T {
    if quick {
        a
    } else {
        b
    }
}

/// What the study would run on a machine, written down and run nowhere (`study --plan`).
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    /// The machine as the plan saw it: the facts that shape the battery.
    pub machine: Vec<(String, String)>,
    /// Each stage: its steps, or why it is skipped.
    pub stages: Vec<DryStage>,
}

/// One stage of a [`DryRun`].
#[derive(Debug, Clone, Serialize)]
pub struct DryStage {
    /// The stage.
    pub stage: Stage,
    /// `None` when it runs; else why it is skipped.
    pub skip: Option<String>,
    /// Its steps, one line each (experiment, configurations, workloads, runs).
    pub steps: Vec<String>,
    /// Estimated wall time, seconds.
    pub estimate_s: f64,
    /// What was chosen and why.
    pub notes: Vec<String>,
}

/// The battery for the machine under `root`, without running or writing anything.
pub fn dry_run(root: &std::path::Path, quick: bool, only: &[Stage], seed: u64) -> DryRun {
    let caps = Caps::detect(root);
    let info = pmlab_kernel::sysinfo::SystemInfo::read(&pmlab_kernel::Root::new(root));
    let mut machine = caps.facts();
    machine.push(("idle states".into(), info.cpuidle.state_names().join(" ")));
    let c = &info.layout.counts;
    machine.push((
        "topology".into(),
        format!(
            "{} CPUs, {} packages, {} dies, {} cores, {} threads per core",
            c.cpus, c.packages, c.dies, c.cores, c.threads_per_core
        ),
    ));
    let stages = Stage::ALL
        .iter()
        .copied()
        .filter(|s| only.is_empty() || only.contains(s))
        .map(|s| match plan(s, &caps, quick, seed) {
            StagePlan::Skip(why) => DryStage {
                stage: s,
                skip: Some(why),
                steps: Vec::new(),
                estimate_s: 0.0,
                notes: Vec::new(),
            },
            StagePlan::Run {
                steps,
                estimate,
                notes,
            } => DryStage {
                stage: s,
                skip: None,
                steps: steps.iter().map(describe_step).collect(),
                estimate_s: estimate.as_secs_f64(),
                notes,
            },
        })
        .collect();
    DryRun { machine, stages }
}

fn describe_step(step: &Step) -> String {
    match step {
        Step::Experiment {
            experiment,
            budget,
            trace,
        } => format!(
            "{}: configurations [{}] × workloads [{}], up to {} runs{}",
            experiment.name,
            experiment
                .configurations
                .iter()
                .map(|c| c.describe())
                .collect::<Vec<_>>()
                .join("; "),
            experiment
                .workloads
                .iter()
                .map(|w| w.label.clone())
                .collect::<Vec<_>>()
                .join("; "),
            budget.max_runs.map_or("?".into(), |n| n.to_string()),
            if *trace { ", traced" } else { "" }
        ),
        Step::Hotplug(h) => format!(
            "hotplug: CPUs {:?}, {} cycles, loads {:?}{}",
            h.cpus,
            h.cycles,
            h.loads,
            if h.trace { ", traced" } else { "" }
        ),
        Step::PredictPolling => "replay the wakeup trace under the haltpoll governor".into(),
        Step::Boot(b) => format!(
            "boot {}: command lines [{}] × vCPUs {:?}, up to {} boots",
            b.kernel.display(),
            b.cmdlines
                .iter()
                .map(|c| if c.is_empty() {
                    "(default)"
                } else {
                    c.as_str()
                })
                .collect::<Vec<_>>()
                .join("; "),
            b.vcpus,
            b.budget.max_runs.map_or("?".into(), |n| n.to_string())
        ),
    }
}
