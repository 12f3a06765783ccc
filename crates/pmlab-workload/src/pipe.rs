//! `pipe`: two tasks ping-pong an int over two pipes, as `perf bench sched pipe` does.
//! Like perf, the timed part includes creating the second task (fork or threads) and
//! reaping it; in process mode the calling process is the side that writes first.
//! Where the two sides run (one CPU, ~4-6 µs/op here, or two, ~11 µs/op) is the kernel's
//! choice, as for perf: another process starting beside a short run (a JSON parser reading
//! our output through a pipe) tips it to one CPU, so callers parse after the run ends.

use crate::children::{raw, ChildGroup};
use crate::cpus::{pin_to, AffinityGuard};
use crate::{cancel, Probe, WorkloadError, WorkloadResult};
use pmlab_kernel::{Direction, Metric, Nanos};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Instant;

pub(crate) const PRIMARY: &str = "us_per_op";

pub(crate) fn pipe_pair() -> Result<(OwnedFd, OwnedFd), WorkloadError> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| WorkloadError::io("pipe", e.into()))
}

/// One side's loop. The initiator writes then reads; the responder reads then writes.
fn side_loop(
    loops: u64,
    initiator: bool,
    read_fd: BorrowedFd<'_>,
    write_fd: BorrowedFd<'_>,
    check_cancel: bool,
) -> Result<(), &'static str> {
    let mut m = [0u8; 4];
    for _ in 0..loops {
        if check_cancel && cancel::is_requested() {
            return Err("interrupted");
        }
        if initiator {
            if !raw::write_full(write_fd, &m) {
                return Err("write to the peer's pipe failed");
            }
            if !raw::read_full(read_fd, &mut m) {
                return Err("peer closed its pipe");
            }
        } else {
            if !raw::read_full(read_fd, &mut m) {
                return Err("peer closed its pipe");
            }
            if !raw::write_full(write_fd, &m) {
                return Err("write to the peer's pipe failed");
            }
        }
    }
    Ok(())
}

pub(crate) fn run(
    loops: u64,
    threads: bool,
    cpus: Option<&[u32]>,
    probe: &mut dyn Probe,
) -> Result<WorkloadResult, WorkloadError> {
    // pipe 1 carries initiator → responder, pipe 2 responder → initiator.
    let (r1, w1) = pipe_pair()?;
    let (r2, w2) = pipe_pair()?;
    let cpu_initiator = cpus.map(|c| c[0]);
    let cpu_responder = cpus.map(|c| c[1]);

    probe.before().map_err(WorkloadError::Probe)?;
    let t0 = Instant::now();
    if threads {
        let responder = std::thread::Builder::new()
            .name("pmlab-pipe-b".into())
            .spawn(move || -> Result<(), String> {
                if let Some(c) = cpu_responder {
                    pin_to(c).map_err(|e| format!("pinning to CPU {c}: {e}"))?;
                }
                let r = side_loop(loops, false, r1.as_fd(), w2.as_fd(), true);
                drop((r1, w2));
                r.map_err(String::from)
            })
            .map_err(|e| WorkloadError::io("spawning a pipe thread", e))?;
        let initiator = std::thread::Builder::new()
            .name("pmlab-pipe-a".into())
            .spawn(move || -> Result<(), String> {
                if let Some(c) = cpu_initiator {
                    pin_to(c).map_err(|e| format!("pinning to CPU {c}: {e}"))?;
                }
                let r = side_loop(loops, true, r2.as_fd(), w1.as_fd(), true);
                drop((r2, w1));
                r.map_err(String::from)
            })
            .map_err(|e| WorkloadError::io("spawning a pipe thread", e))?;
        let a = initiator
            .join()
            .map_err(|_| WorkloadError::Worker("pipe thread panicked".into()))?;
        let b = responder
            .join()
            .map_err(|_| WorkloadError::Worker("pipe thread panicked".into()))?;
        if cancel::is_requested() {
            return Err(WorkloadError::Cancelled);
        }
        a.and(b).map_err(WorkloadError::Worker)?;
    } else {
        let mut group = ChildGroup::new();
        let (rr, rw, ir, iw) = (r1.as_fd(), w2.as_fd(), r2.as_raw_fd(), w1.as_raw_fd());
        // SAFETY: the child only makes raw syscalls on fds and data prepared before the fork.
        unsafe {
            group.fork(move || {
                // The child's copies of the initiator's ends.
                rustix::io::close(ir);
                rustix::io::close(iw);
                if let Some(c) = cpu_responder {
                    if pin_to(c).is_err() {
                        return 2;
                    }
                }
                match side_loop(loops, false, rr, rw, false) {
                    Ok(()) => 0,
                    Err(_) => 1,
                }
            })
        }
        .map_err(|e| WorkloadError::io("fork", e))?;
        drop((r1, w2));
        let result = {
            let _restore =
                AffinityGuard::save().map_err(|e| WorkloadError::io("sched_getaffinity", e))?;
            if let Some(c) = cpu_initiator {
                pin_to(c).map_err(|e| WorkloadError::io(format!("pinning to CPU {c}"), e))?;
            }
            side_loop(loops, true, r2.as_fd(), w1.as_fd(), true)
        };
        drop((r2, w1));
        if cancel::is_requested() {
            return Err(WorkloadError::Cancelled);
        }
        let reaped = group.wait_all();
        result.map_err(|e| WorkloadError::Worker(format!("pipe: {e}")))?;
        reaped.map_err(WorkloadError::Worker)?;
    }
    let wall = t0.elapsed();
    probe.after().map_err(WorkloadError::Probe)?;

    let secs = wall.as_secs_f64();
    Ok(WorkloadResult {
        metrics: vec![
            Metric::new(PRIMARY, secs * 1e6 / loops as f64, "us", Direction::Lower),
            Metric::new("ops_per_s", loops as f64 / secs, "ops/s", Direction::Higher),
        ],
        wall: Nanos(wall.as_nanos() as u64),
        histogram: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoProbe;

    #[test]
    fn processes_and_threads_complete() {
        for threads in [false, true] {
            let r = run(2000, threads, None, &mut NoProbe).unwrap();
            assert_eq!(r.metrics[0].name, PRIMARY);
            let us = r.metrics[0].value;
            let ops = r.metrics[1].value;
            assert!(us > 0.0 && ops > 0.0);
            assert!((us * ops / 1e6 - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn pinned_to_the_same_cpu() {
        let cpu = crate::allowed_cpus().unwrap()[0];
        run(500, false, Some(&[cpu, cpu]), &mut NoProbe).unwrap();
    }
}
