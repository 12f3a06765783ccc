//! `pipe`: two tasks ping-pong an int over two pipes, as `perf bench sched pipe` does.
//! Like perf, the timed part includes creating the second task (fork or threads) and
//! reaping it; in process mode both sides are forked, single-threaded children.
//! Where the two sides run is an input (`crate::placement`): pinned to two CPUs, to one, or
//! left to the scheduler as perf does, in which case the run's `same_cpu_share` says which
//! regime it measured.

use crate::children::{raw, ChildGroup};
use crate::cpus::pin_to;
use crate::{cancel, Probe, WorkerError, WorkloadError, WorkloadResult};
use pmlab_kernel::{Direction, Metric, Nanos};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

pub(crate) const PRIMARY: &str = "us_per_op";

/// Round trips between two notes of where each side runs.
const SAMPLE_EVERY: u64 = 1024;

/// Where the two sides ran: each notes its CPU (plus one; 0 is "not noted") every
/// [`SAMPLE_EVERY`] round trips, at the same round trip as the other side, in a shared
/// anonymous mapping a forked child writes too. The share of notes with both sides on one
/// CPU says which regime a run measured: on one CPU a round trip takes a few µs; on two,
/// with a wakeup IPI and an idle exit each way, several times that. Which one a short run
/// gets is the scheduler's choice, for perf's pipe bench as for this one.
struct CpuNotes {
    at: std::ptr::NonNull<AtomicU32>,
    slots: usize,
}

// SAFETY: the mapping is only reached through atomics.
unsafe impl Send for CpuNotes {}
// SAFETY: as for Send: shared references only load and store atomics.
unsafe impl Sync for CpuNotes {}

impl CpuNotes {
    fn new(loops: u64) -> Result<CpuNotes, WorkloadError> {
        let slots = loops.div_ceil(SAMPLE_EVERY).max(1) as usize;
        use rustix::mm::{MapFlags, ProtFlags};
        // SAFETY: a fresh anonymous mapping, zero-filled, unmapped only by Drop.
        let p = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                2 * slots * 4,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
            )
        }
        .map_err(|e| WorkloadError::io("mmap", e.into()))?;
        let at = std::ptr::NonNull::new(p.cast::<AtomicU32>()).expect("mmap returns non-null");
        Ok(CpuNotes { at, slots })
    }

    /// One side's notes.
    fn side(&self, initiator: bool) -> &[AtomicU32] {
        let first = if initiator { 0 } else { self.slots };
        // SAFETY: `2 * slots` zero-initialised AtomicU32 (all-zero bits are valid) live as
        // long as `self`.
        unsafe { std::slice::from_raw_parts(self.at.as_ptr().add(first), self.slots) }
    }

    /// The share of round trips noted by both sides with both on one CPU.
    fn same_cpu_share(&self) -> Option<f64> {
        let (mut both, mut same) = (0u32, 0u32);
        for (a, b) in self.side(true).iter().zip(self.side(false)) {
            let (a, b) = (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
            if a != 0 && b != 0 {
                both += 1;
                same += u32::from(a == b);
            }
        }
        (both > 0).then(|| f64::from(same) / f64::from(both))
    }
}

impl Drop for CpuNotes {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, with its length; no reference outlives `self`.
        unsafe {
            let _ = rustix::mm::munmap(self.at.as_ptr().cast(), 2 * self.slots * 4);
        }
    }
}

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
    notes: &[AtomicU32],
) -> Result<(), WorkerError> {
    let mut m = [0u8; 4];
    for i in 0..loops {
        if check_cancel && cancel::is_requested() {
            return Err(WorkerError::Interrupted);
        }
        if i % SAMPLE_EVERY == 0 {
            if let Some(n) = notes.get((i / SAMPLE_EVERY) as usize) {
                // The vDSO's getcpu: no system call, async-signal-safe in the forked child.
                n.store(rustix::thread::sched_getcpu() as u32 + 1, Ordering::Relaxed);
            }
        }
        if initiator {
            if !raw::write_full(write_fd, &m) {
                return Err(WorkerError::PeerWrite);
            }
            if !raw::read_full(read_fd, &mut m) {
                return Err(WorkerError::PeerClosed);
            }
        } else {
            if !raw::read_full(read_fd, &mut m) {
                return Err(WorkerError::PeerClosed);
            }
            if !raw::write_full(write_fd, &m) {
                return Err(WorkerError::PeerWrite);
            }
        }
    }
    Ok(())
}

pub(crate) fn run(
    loops: u64,
    threads: bool,
    cpus: Option<[u32; 2]>,
    probe: &mut dyn Probe,
) -> Result<WorkloadResult, WorkloadError> {
    // pipe 1 carries initiator → responder, pipe 2 responder → initiator.
    let (r1, w1) = pipe_pair()?;
    let (r2, w2) = pipe_pair()?;
    let cpu_initiator = cpus.map(|c| c[0]);
    let cpu_responder = cpus.map(|c| c[1]);

    let placement = std::sync::Arc::new(CpuNotes::new(loops)?);
    probe.before().map_err(WorkloadError::Probe)?;
    let t0 = Instant::now();
    if threads {
        let at = placement.clone();
        let responder = std::thread::Builder::new()
            .name("pmlab-pipe-b".into())
            .spawn(move || -> Result<(), WorkerError> {
                if let Some(cpu) = cpu_responder {
                    pin_to(cpu).map_err(|source| WorkerError::Pin { cpu, source })?;
                }
                let r = side_loop(loops, false, r1.as_fd(), w2.as_fd(), true, at.side(false));
                drop((r1, w2));
                r
            })
            .map_err(|e| WorkloadError::io("spawning a pipe thread", e))?;
        let at = placement.clone();
        let initiator = std::thread::Builder::new()
            .name("pmlab-pipe-a".into())
            .spawn(move || -> Result<(), WorkerError> {
                if let Some(cpu) = cpu_initiator {
                    pin_to(cpu).map_err(|source| WorkerError::Pin { cpu, source })?;
                }
                let r = side_loop(loops, true, r2.as_fd(), w1.as_fd(), true, at.side(true));
                drop((r2, w1));
                r
            })
            .map_err(|e| WorkloadError::io("spawning a pipe thread", e))?;
        let panicked = |_| WorkloadError::worker("pipe", None, WorkerError::Panicked);
        let a = initiator.join().map_err(panicked)?;
        let b = responder.join().map_err(panicked)?;
        if cancel::is_requested() {
            return Err(WorkloadError::Cancelled);
        }
        a.and(b)
            .map_err(|e| WorkloadError::worker("pipe", None, e))?;
    } else {
        // Both sides are forked children, single-threaded as perf's two processes are: the
        // C library's read and write take a slower path in a multi-threaded process (pmlab's
        // own), which made pipe on one CPU 14% slower than perf here (bench/pipe-vs-perf).
        let mut group = ChildGroup::new();
        let (r1_owned, w1_owned, r2_owned, w2_owned) = (r1, w1, r2, w2);
        let (r1, w1, r2, w2) = (
            r1_owned.as_raw_fd(),
            w1_owned.as_raw_fd(),
            r2_owned.as_raw_fd(),
            w2_owned.as_raw_fd(),
        );
        for (initiator, cpu, (read, write), (other_read, other_write)) in [
            (false, cpu_responder, (r1, w2), (r2, w1)),
            (true, cpu_initiator, (r2, w1), (r1, w2)),
        ] {
            let notes = placement.side(initiator);
            // SAFETY: the child only makes async-signal-safe calls on fds and data prepared
            // before the fork.
            unsafe {
                group.fork(move || {
                    // The child's copies of the other side's ends.
                    rustix::io::close(other_read);
                    rustix::io::close(other_write);
                    if let Some(c) = cpu {
                        if pin_to(c).is_err() {
                            return 2;
                        }
                    }
                    let (read, write) =
                        (BorrowedFd::borrow_raw(read), BorrowedFd::borrow_raw(write));
                    match side_loop(loops, initiator, read, write, false, notes) {
                        Ok(()) => 0,
                        Err(_) => 1,
                    }
                })
            }
            .map_err(|e| WorkloadError::io("fork", e))?;
        }
        // The parent's copies: each side sees the other's end close when it exits.
        drop((r1_owned, w1_owned, r2_owned, w2_owned));
        let reaped = group.wait_all();
        if cancel::is_requested() {
            return Err(WorkloadError::Cancelled);
        }
        reaped.map_err(|e| WorkloadError::worker("pipe", None, e))?;
    }
    let wall = t0.elapsed();
    probe.after().map_err(WorkloadError::Probe)?;

    let secs = wall.as_secs_f64();
    let mut metrics = vec![
        Metric::new(PRIMARY, secs * 1e6 / loops as f64, "us", Direction::Lower),
        Metric::new("ops_per_s", loops as f64 / secs, "ops/s", Direction::Higher),
    ];
    if let Some(share) = placement.same_cpu_share() {
        metrics.push(Metric::new(
            crate::placement::SAME_CPU_SHARE,
            share,
            "",
            Direction::Neutral,
        ));
    }
    Ok(WorkloadResult {
        metrics,
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

    fn same_cpu_share(r: &WorkloadResult) -> f64 {
        r.metrics
            .iter()
            .find(|m| m.name == "same_cpu_share")
            .expect("the placement metric")
            .value
    }

    #[test]
    fn pinned_to_the_same_cpu() {
        let cpu = crate::allowed_cpus().unwrap()[0];
        for threads in [false, true] {
            let r = run(5000, threads, Some([cpu, cpu]), &mut NoProbe).unwrap();
            assert_eq!(same_cpu_share(&r), 1.0, "threads: {threads}");
        }
    }

    // Two CPUs: tests/api.rs (pipe_pinned_to_two_cpus_is_never_on_one), which can say it
    // skipped where only one CPU is allowed.
}
