//! `wakeup`: one thread per selected CPU sleeps to absolute deadlines with
//! `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` every interval and records how late
//! each wakeup is, as cyclictest does (missed periods are skipped, not queued). Unlike
//! cyclictest it leaves `/dev/cpu_dma_latency` alone unless asked (`dma_latency`).

use crate::cpus::pin_to;
use crate::gate::Gate;
use crate::spec::DEFAULT_WAKEUP_DURATION;
use crate::{cancel, Histogram, Probe, WorkerError, WorkloadError, WorkloadResult};
use pmlab_kernel::{Direction, Metric, Nanos};
use std::io::Write;
use std::sync::Arc;

pub(crate) const PRIMARY: &str = "latency.p50_us";
/// Histogram buckets are 1 µs wide, up to 10 ms; later samples count as overflow.
const HIST_BUCKET_NS: u64 = 1000;
const HIST_BUCKETS: usize = 10_000;
const DMA_LATENCY_DEV: &str = "/dev/cpu_dma_latency";

pub(crate) struct Options {
    pub cpus: Option<Vec<u32>>,
    pub interval: Nanos,
    pub loops: Option<u64>,
    pub duration: Option<Nanos>,
    pub rt_prio: Option<u32>,
    pub dma_latency: Option<i32>,
}

fn now_ns() -> u64 {
    pmlab_kernel::units::monotonic_ns()
}

fn sleep_until(ns: u64) -> Result<(), WorkerError> {
    use rustix::thread::{clock_nanosleep_absolute, ClockId};
    let ts = rustix::time::Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    };
    loop {
        match clock_nanosleep_absolute(ClockId::Monotonic, &ts) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {
                if cancel::is_requested() {
                    return Err(WorkerError::Interrupted);
                }
            }
            Err(e) => return Err(WorkerError::Sleep(e.into())),
        }
    }
}

/// The measuring loop of one thread: latencies in ns (saturated at u32::MAX).
fn measure(loops: u64, interval: u64, samples: &mut Vec<u32>) -> Result<(), WorkerError> {
    let mut next = now_ns() + interval;
    for _ in 0..loops {
        if cancel::is_requested() {
            return Err(WorkerError::Interrupted);
        }
        sleep_until(next)?;
        let now = now_ns();
        samples.push(now.saturating_sub(next).min(u32::MAX as u64) as u32);
        next += interval;
        while next < now {
            next += interval;
        }
    }
    Ok(())
}

fn set_fifo(prio: u32) -> Result<(), WorkerError> {
    let param = libc::sched_param {
        sched_priority: prio as i32,
    };
    // SAFETY: `param` is a valid sched_param for the call; pid 0 is this thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(WorkerError::Fifo {
            prio,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Nearest-rank percentile of sorted samples (pmlab's one definition; `sorted` is not empty).
fn percentile(sorted: &[u32], q: f64) -> u32 {
    pmlab_kernel::units::percentile(sorted, q).unwrap_or(0)
}

fn us(ns: f64) -> f64 {
    ns / 1000.0
}

pub(crate) fn run(opts: &Options, probe: &mut dyn Probe) -> Result<WorkloadResult, WorkloadError> {
    let cpus = match &opts.cpus {
        Some(c) => c.clone(),
        None => crate::allowed_cpus().map_err(|e| WorkloadError::io("sched_getaffinity", e))?,
    };
    let interval = opts.interval.0;
    let loops = match (opts.loops, opts.duration) {
        (Some(l), _) => l,
        (None, Some(d)) => (d.0 / interval).max(1),
        (None, None) => (DEFAULT_WAKEUP_DURATION.0 / interval).max(1),
    };
    let _dma = match opts.dma_latency {
        Some(v) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(DMA_LATENCY_DEV)
                .map_err(|e| WorkloadError::File {
                    path: DMA_LATENCY_DEV.into(),
                    source: e,
                })?;
            f.write_all(&v.to_ne_bytes())
                .map_err(|e| WorkloadError::File {
                    path: DMA_LATENCY_DEV.into(),
                    source: e,
                })?;
            Some(f)
        }
        None => None,
    };

    let n = cpus.len();
    let gate = Arc::new(Gate::default());
    let capacity = usize::try_from(loops).unwrap_or(usize::MAX).min(1 << 28);
    let mut handles = Vec::with_capacity(n);
    let mut spawn_error = None;
    for &cpu in &cpus {
        let gate = gate.clone();
        let rt_prio = opts.rt_prio;
        let h = std::thread::Builder::new()
            .name(format!("pmlab-wake{cpu}"))
            .spawn(move || -> Result<Vec<u32>, WorkerError> {
                let mut samples = Vec::with_capacity(capacity);
                let prepared = pin_to(cpu)
                    .map_err(|source| WorkerError::Pin { cpu, source })
                    .and_then(|()| match rt_prio {
                        Some(p) => set_fifo(p),
                        None => Ok(()),
                    });
                if !gate.check_in_and_wait(prepared) {
                    return Ok(samples);
                }
                measure(loops, interval, &mut samples).map(|()| samples)
            });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                spawn_error = Some(WorkloadError::io("spawning a wakeup thread", e));
                break;
            }
        }
    }
    gate.ready(&mut handles, spawn_error, probe, "wakeup")?;
    let (per_cpu, wall) = gate.run_and_join(handles, &cpus, probe, "wakeup")?;
    Ok(WorkloadResult {
        metrics: metrics(&per_cpu),
        wall: Nanos(wall.as_nanos() as u64),
        histogram: Some(histogram(&per_cpu)),
    })
}

fn metrics(per_cpu: &[(u32, Vec<u32>)]) -> Vec<Metric> {
    let lat = |name: &str, ns: f64| Metric::new(name, us(ns), "us", Direction::Lower);
    let mut all: Vec<u32> = per_cpu
        .iter()
        .flat_map(|(_, s)| s.iter().copied())
        .collect();
    all.sort_unstable();
    let mean = |s: &[u32]| s.iter().map(|&v| v as f64).sum::<f64>() / s.len() as f64;
    let mut m = vec![
        lat(PRIMARY, percentile(&all, 0.5) as f64),
        lat("latency.min_us", all[0] as f64),
        lat("latency.p90_us", percentile(&all, 0.9) as f64),
        lat("latency.p99_us", percentile(&all, 0.99) as f64),
        lat("latency.p99.9_us", percentile(&all, 0.999) as f64),
        lat("latency.max_us", *all.last().unwrap() as f64),
        lat("latency.mean_us", mean(&all)),
        Metric::new("wakeups", all.len() as f64, "count", Direction::Neutral),
    ];
    for (cpu, s) in per_cpu {
        let mut s = s.clone();
        s.sort_unstable();
        m.push(lat("latency.p50_us", percentile(&s, 0.5) as f64).on_cpu(*cpu));
        m.push(lat("latency.p99_us", percentile(&s, 0.99) as f64).on_cpu(*cpu));
        m.push(lat("latency.max_us", *s.last().unwrap() as f64).on_cpu(*cpu));
        m.push(lat("latency.mean_us", mean(&s)).on_cpu(*cpu));
    }
    m
}

fn histogram(per_cpu: &[(u32, Vec<u32>)]) -> Histogram {
    let mut counts = vec![0u64; HIST_BUCKETS];
    let mut overflow = 0;
    for v in per_cpu.iter().flat_map(|(_, s)| s.iter()) {
        let b = (*v as u64 / HIST_BUCKET_NS) as usize;
        if b < HIST_BUCKETS {
            counts[b] += 1;
        } else {
            overflow += 1;
        }
    }
    let used = counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
    counts.truncate(used);
    Histogram {
        bucket: Nanos(HIST_BUCKET_NS),
        counts,
        overflow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoProbe;

    #[test]
    fn percentiles_use_nearest_rank() {
        let s: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&s, 0.5), 50);
        assert_eq!(percentile(&s, 0.99), 99);
        assert_eq!(percentile(&s, 0.999), 100);
        assert_eq!(percentile(&[7], 0.5), 7);
    }

    #[test]
    fn histogram_trims_and_counts_overflow() {
        let h = histogram(&[(0, vec![500, 1500, 1999, 20_000_000])]);
        assert_eq!(h.counts, vec![1, 2]);
        assert_eq!(h.overflow, 1);
    }

    #[test]
    fn measures_every_cpu_and_orders_metrics() {
        let cpus = crate::allowed_cpus().unwrap();
        let opts = Options {
            cpus: Some(cpus.clone()),
            interval: Nanos(200_000),
            loops: Some(50),
            duration: None,
            rt_prio: None,
            dma_latency: None,
        };
        let r = run(&opts, &mut NoProbe).unwrap();
        assert_eq!(r.metrics[0].name, PRIMARY);
        let wakeups = r
            .metrics
            .iter()
            .find(|m| m.name == "wakeups")
            .unwrap()
            .value;
        assert_eq!(wakeups as usize, 50 * cpus.len());
        let get = |n: &str| r.metrics.iter().find(|m| m.name == n).unwrap().value;
        assert!(get("latency.min_us") <= get(PRIMARY) && get(PRIMARY) <= get("latency.max_us"));
        let h = r.histogram.unwrap();
        assert_eq!(
            h.counts.iter().sum::<u64>() + h.overflow,
            50 * cpus.len() as u64
        );
    }
}
