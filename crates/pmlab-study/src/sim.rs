//! A simulated guest for tests of the study (hidden `--simulate`): a deterministic model in
//! which polling up to ~50 µs speeds up pipe and wakeups and costs poll time, with per-CPU
//! counters shaped like the real ones. Nothing on the machine is read or changed except the
//! system snapshot under the given root.

use crate::executor::{ExecError, Executor, RunContext, RunError, RunOutput};
use crate::spec::{Configuration, Experiment, WorkloadDef};
use crate::system::SystemSnapshot;
use pmlab_kernel::knob::{Assignment, KnobError};
use pmlab_kernel::{Direction, Metric};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;

/// The simulated machine.
pub struct SimExecutor {
    root: PathBuf,
    rng: ChaCha8Rng,
    poll_us: f64,
    governor_penalty: f64,
}

impl SimExecutor {
    /// A simulated machine whose system snapshot is read under `root`; `seed` makes its noise.
    pub fn new(root: PathBuf, seed: u64) -> SimExecutor {
        SimExecutor {
            root,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5157),
            poll_us: 0.0,
            governor_penalty: 0.0,
        }
    }
}

/// A poll limit in µs from a knob value (`25us`, `0.2ms`, or ns).
fn poll_us(v: &str) -> Option<f64> {
    let v = v.trim();
    if let Some(x) = v.strip_suffix("us") {
        x.parse().ok()
    } else if let Some(x) = v.strip_suffix("ms") {
        x.parse::<f64>().ok().map(|x| x * 1000.0)
    } else if let Some(x) = v.strip_suffix("ns") {
        x.parse::<f64>().ok().map(|x| x / 1000.0)
    } else {
        v.parse::<f64>().ok().map(|x| x / 1000.0)
    }
}

/// The knobs the model knows (on all CPUs: none takes `@CPUS` here).
fn check(a: &Assignment) -> Result<(), KnobError> {
    let value = a.value();
    match (a.knob().name(), a.knob().cpus()) {
        ("haltpoll.guest_halt_poll_ns", None) => {
            poll_us(value).map(|_| ()).ok_or(KnobError::Invalid {
                assignment: a.to_string(),
                reason: format!("bad value {value}"),
            })
        }
        ("cpuidle.governor" | "cpuidle.POLL.disable", None) => Ok(()),
        _ => Err(KnobError::Unknown {
            name: Box::new(a.knob().clone()),
            hint: " on the simulated machine".into(),
        }),
    }
}

fn m(name: impl Into<String>, v: f64, unit: &str, d: Direction) -> Metric {
    Metric::new(name, v, unit, d)
}

impl SimExecutor {
    fn noise(&mut self, sd: f64) -> f64 {
        // Sum of uniforms: close enough to normal for a model.
        let u: f64 = (0..6).map(|_| self.rng.random::<f64>()).sum::<f64>() - 3.0;
        u * sd / (0.5f64).sqrt()
    }

    fn counters(&mut self, window: f64, busy: [f64; 2], poll_share: f64) -> Vec<Metric> {
        let n = Direction::Neutral;
        let mut v = vec![m("counters.window_s", window, "s", n)];
        let poll_ms = poll_share / 100.0 * window * 1000.0 * 2.0;
        v.push(m("idle.POLL.time_ms", poll_ms.max(0.0), "ms", n));
        let mut total = 0.0;
        let mut res_all = 0.0;
        for (cpu, b) in busy.iter().enumerate() {
            let loc = 250.0 + self.noise(5.0);
            let res = 20.0 + b * 3.0 + self.noise(2.0);
            let cal = (15.0 - poll_share * 0.5).max(1.0) + self.noise(1.0);
            let dev = if cpu == 0 { 6.0 } else { 0.0 };
            for (k, x) in [("LOC", loc), ("RES", res), ("CAL", cal), ("device", dev)] {
                v.push(m(format!("irq.{k}.per_s"), x.max(0.0), "/s", n).on_cpu(cpu as u32));
            }
            total += loc + res + cal + dev;
            res_all += res;
            v.push(m("cpu.busy_pct", *b, "%", n).on_cpu(cpu as u32));
            let idle = 100.0 - b;
            let poll = poll_share.min(idle);
            v.push(m("idle.POLL.share_pct", poll, "%", n).on_cpu(cpu as u32));
            v.push(m("idle.C1.share_pct", idle - poll, "%", n).on_cpu(cpu as u32));
        }
        v.push(m("irq.total.per_s", total, "/s", n));
        v.push(m("irq.RES.per_s", res_all, "/s", n));
        v.push(m("idle.POLL.share_pct", poll_share, "%", n));
        v.push(m(
            "idle.share_pct",
            100.0 - (busy[0] + busy[1]) / 2.0,
            "%",
            n,
        ));
        v
    }
}

impl Executor for SimExecutor {
    fn validate(&mut self, experiment: &Experiment) -> Result<(), ExecError> {
        for c in &experiment.configurations {
            for k in &c.knobs {
                check(k).map_err(|source| ExecError::Configuration {
                    label: c.label.clone(),
                    source,
                })?;
            }
        }
        Ok(())
    }
    fn snapshot(&mut self, _: &Experiment) -> SystemSnapshot {
        let mut s = SystemSnapshot::read(&self.root);
        s.knobs = vec![("haltpoll.guest_halt_poll_ns".into(), "200000".into())];
        s
    }
    fn configure(&mut self, c: &Configuration) -> Result<(), ExecError> {
        self.poll_us = 0.0;
        self.governor_penalty = 0.0;
        for a in &c.knobs {
            let value = a.value();
            match (a.knob().name(), a.knob().cpus()) {
                ("haltpoll.guest_halt_poll_ns", None) => {
                    self.poll_us = poll_us(value).unwrap_or(0.0)
                }
                ("cpuidle.governor", None) => {
                    self.governor_penalty = if value == "ladder" { 2.0 } else { 0.0 }
                }
                _ => {}
            }
        }
        Ok(())
    }
    fn run(&mut self, w: &WorkloadDef, _: &RunContext) -> Result<RunOutput, RunError> {
        let p = self.poll_us.min(50.0) / 50.0;
        let lower = Direction::Lower;
        let (metrics, busy, poll_share, window) = match w.argv.first().map(String::as_str) {
            Some("pipe") => {
                let us = 30.0 - 20.0 * p + self.governor_penalty + self.noise(0.15);
                (
                    vec![
                        m("us_per_op", us, "us/op", lower),
                        m("ops_per_s", 1e6 / us, "/s", Direction::Higher),
                    ],
                    [55.0, 55.0],
                    self.poll_us.min(60.0) * 0.4,
                    0.5,
                )
            }
            Some("wakeup") => {
                let base = 60.0 - 30.0 * p + self.governor_penalty;
                let mut v = Vec::new();
                for (name, f) in [
                    ("p50", 1.0),
                    ("min", 0.6),
                    ("p90", 1.2),
                    ("p99", 1.6),
                    ("p99.9", 2.2),
                    ("max", 3.0),
                    ("mean", 1.05),
                ] {
                    v.push(m(
                        format!("latency.{name}_us"),
                        base * f + self.noise(0.3),
                        "us",
                        lower,
                    ));
                }
                (v, [3.0, 3.0], self.poll_us.min(60.0) * 0.3, 0.3)
            }
            Some("idle") => (
                vec![m("idle_s", 1.0, "s", Direction::Neutral)],
                [1.0 + self.noise(0.05).abs(), 0.5],
                self.poll_us.min(200.0) * 0.01,
                1.0,
            ),
            Some("spin") => {
                let (a, b) = (280.0 + self.noise(3.0), 300.0 + self.noise(3.0));
                (
                    vec![
                        m("runtime_mean_ms", (a + b) / 2.0, "ms", lower),
                        m("runtime_ms", a, "ms", lower).on_cpu(0),
                        m("runtime_ms", b, "ms", lower).on_cpu(1),
                    ],
                    [100.0, 100.0],
                    0.0,
                    0.3,
                )
            }
            Some("messaging") => (
                vec![m("total_s", 0.05 + self.noise(0.001), "s", lower)],
                [80.0, 80.0],
                0.0,
                0.05,
            ),
            other => {
                return Err(RunError::Simulated(format!(
                    "workload {other:?} is not simulated"
                )))
            }
        };
        let mut side = self.counters(window, busy, poll_share);
        side.push(m(
            "ctxt.per_s",
            40000.0 + self.noise(500.0),
            "/s",
            Direction::Neutral,
        ));
        Ok(RunOutput {
            metrics,
            side_metrics: side,
            trace_path: None,
        })
    }
    fn restore(&mut self) -> Result<(), ExecError> {
        self.poll_us = 0.0;
        Ok(())
    }
}
