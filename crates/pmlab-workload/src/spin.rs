//! `spin`: a fixed amount of integer work (a dependent xorshift chain) on each selected
//! CPU, one pinned thread per CPU, all released at once. Each thread times its own work.

use crate::cpus::pin_to;
use crate::gate::Gate;
use crate::{cancel, Probe, WorkerError, WorkloadError, WorkloadResult};
use pmlab_kernel::{Direction, Metric, Nanos};
use std::sync::Arc;
use std::time::Instant;

pub(crate) const PRIMARY: &str = "runtime_mean_ms";
const CHUNK: u64 = 1 << 20;

/// `iters` xorshift steps; checks for cancellation every 2^20 steps.
#[inline(never)]
fn spin_work(iters: u64) -> Result<u64, ()> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut done = 0;
    while done < iters {
        let n = (iters - done).min(CHUNK);
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        x = std::hint::black_box(x);
        done += n;
        if cancel::is_requested() {
            return Err(());
        }
    }
    Ok(x)
}

pub(crate) fn run(
    cpus: Option<&[u32]>,
    work: u64,
    probe: &mut dyn Probe,
) -> Result<WorkloadResult, WorkloadError> {
    let cpus = match cpus {
        Some(c) => c.to_vec(),
        None => crate::allowed_cpus().map_err(|e| WorkloadError::io("sched_getaffinity", e))?,
    };
    let gate = Arc::new(Gate::default());
    let mut handles = Vec::with_capacity(cpus.len());
    let mut spawn_error = None;
    for &cpu in &cpus {
        let gate = gate.clone();
        let h = std::thread::Builder::new()
            .name(format!("pmlab-spin{cpu}"))
            .spawn(move || -> Result<f64, WorkerError> {
                let pinned = pin_to(cpu).map_err(|source| WorkerError::Pin { cpu, source });
                if !gate.check_in_and_wait(pinned) {
                    return Ok(0.0);
                }
                let t0 = Instant::now();
                spin_work(work).map_err(|()| WorkerError::Interrupted)?;
                Ok(t0.elapsed().as_secs_f64() * 1e3)
            });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                spawn_error = Some(WorkloadError::io("spawning a spin thread", e));
                break;
            }
        }
    }
    gate.ready(&mut handles, spawn_error, probe, "spin")?;
    let (runtimes, wall) = gate.run_and_join(handles, &cpus, probe, "spin")?;
    Ok(WorkloadResult {
        metrics: metrics(&runtimes),
        wall: Nanos(wall.as_nanos() as u64),
        histogram: None,
    })
}

fn metrics(runtimes: &[(u32, f64)]) -> Vec<Metric> {
    let ms = |name: String, v: f64| Metric::new(name, v, "ms", Direction::Lower);
    let values: Vec<f64> = runtimes.iter().map(|r| r.1).collect();
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let stddev = if values.len() > 1 {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let mut m = vec![
        ms(PRIMARY.into(), mean),
        ms("runtime_stddev_ms".into(), stddev),
        ms(
            "runtime_min_ms".into(),
            values.iter().copied().fold(f64::INFINITY, f64::min),
        ),
        ms(
            "runtime_max_ms".into(),
            values.iter().copied().fold(0.0, f64::max),
        ),
    ];
    m.extend(
        runtimes
            .iter()
            .map(|(cpu, v)| ms("runtime_ms".into(), *v).on_cpu(*cpu)),
    );
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoProbe;

    #[test]
    fn mean_and_sample_stddev() {
        let m = metrics(&[(0, 10.0), (1, 14.0)]);
        assert_eq!(m[0].value, 12.0);
        assert!((m[1].value - 8f64.sqrt()).abs() < 1e-12);
        assert_eq!(m[4].key().to_string(), "runtime_ms@cpu0");
    }

    #[test]
    fn runs_on_every_cpu() {
        let r = run(None, 1_000_000, &mut NoProbe).unwrap();
        let n = crate::allowed_cpus().unwrap().len();
        assert_eq!(
            r.metrics
                .iter()
                .filter(|m| m.key().to_string().starts_with("runtime_ms@"))
                .count(),
            n
        );
    }
}
