//! `messaging`: groups of 20 senders and 20 receivers, as `perf bench sched messaging`
//! (hackbench) does. Every sender writes `loops` 100-byte messages to each receiver of its
//! group. All workers are created and ready before the clock starts; the timed part is
//! from the "go" byte to the last worker reaped.

use crate::children::{raw, ChildGroup};
use crate::{cancel, Probe, WorkerError, WorkloadError, WorkloadResult};
use pmlab_kernel::{Direction, Metric, Nanos};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub(crate) const PRIMARY: &str = "total_s";
const FDS_PER_GROUP: usize = 20;
const DATASIZE: usize = 100;

fn fd_pair(use_pipes: bool) -> Result<(OwnedFd, OwnedFd), WorkloadError> {
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    if use_pipes {
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|e| WorkloadError::io("pipe", e.into()))
    } else {
        socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| WorkloadError::io("socketpair", e.into()))
    }
}

/// Tell the parent we are ready, then block until the go byte (or hang-up) arrives.
fn ready(ready_out: BorrowedFd<'_>, wake_in: BorrowedFd<'_>) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    if !raw::write_full(ready_out, &[0u8]) {
        return false;
    }
    let mut pfd = [PollFd::new(&wake_in, PollFlags::IN)];
    loop {
        match poll(&mut pfd, None) {
            Ok(1) => return true,
            Err(rustix::io::Errno::INTR) => continue,
            _ => return false,
        }
    }
}

fn sender(loops: u64, out_fds: &[BorrowedFd<'_>], check_cancel: bool) -> bool {
    let data = [0u8; DATASIZE];
    for _ in 0..loops {
        for &fd in out_fds {
            if check_cancel && cancel::is_requested() {
                return false;
            }
            if !raw::write_full(fd, &data) {
                return false;
            }
        }
    }
    true
}

fn receiver(packets: u64, in_fd: BorrowedFd<'_>, check_cancel: bool) -> bool {
    let mut data = [0u8; DATASIZE];
    for _ in 0..packets {
        if check_cancel && cancel::is_requested() {
            return false;
        }
        if !raw::read_full(in_fd, &mut data) {
            return false;
        }
    }
    true
}

/// Raise the soft open-files limit to the hard one (thread mode holds every fd at once).
fn raise_nofile_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current < lim.maximum {
        lim.current = lim.maximum;
        let _ = setrlimit(Resource::Nofile, lim);
    }
}

pub(crate) fn run(
    groups: u32,
    loops: u64,
    use_pipes: bool,
    threads: bool,
    probe: &mut dyn Probe,
) -> Result<WorkloadResult, WorkloadError> {
    let (ready_in, ready_out) = fd_pair(use_pipes)?;
    let (wake_in, wake_out) = fd_pair(use_pipes)?;
    let total = groups as usize * FDS_PER_GROUP * 2;
    let packets = FDS_PER_GROUP as u64 * loops;

    let wall = if threads {
        raise_nofile_limit();
        run_threads(
            groups, loops, packets, use_pipes, &ready_in, ready_out, wake_in, wake_out, total,
            probe,
        )?
    } else {
        run_processes(
            groups, loops, packets, use_pipes, &ready_in, ready_out, wake_in, wake_out, total,
            probe,
        )?
    };
    let secs = wall.as_secs_f64();
    Ok(WorkloadResult {
        metrics: vec![Metric::new(PRIMARY, secs, "s", Direction::Lower)],
        wall: Nanos(wall.as_nanos() as u64),
        histogram: None,
    })
}

fn wait_ready(ready_in: &OwnedFd, total: usize) -> Result<(), WorkloadError> {
    let mut buf = vec![0u8; total];
    if !raw::read_full(ready_in.as_fd(), &mut buf) {
        if cancel::is_requested() {
            return Err(WorkloadError::Cancelled);
        }
        return Err(WorkloadError::worker(
            "messaging",
            None,
            WorkerError::DiedBeforeReady,
        ));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_processes(
    groups: u32,
    loops: u64,
    packets: u64,
    use_pipes: bool,
    ready_in: &OwnedFd,
    ready_out: OwnedFd,
    wake_in: OwnedFd,
    wake_out: OwnedFd,
    total: usize,
    probe: &mut dyn Probe,
) -> Result<std::time::Duration, WorkloadError> {
    let mut children = ChildGroup::new();
    let (ro, wi) = (ready_out.as_fd(), wake_in.as_fd());
    for _ in 0..groups {
        let mut out_fds: Vec<OwnedFd> = Vec::with_capacity(FDS_PER_GROUP);
        for _ in 0..FDS_PER_GROUP {
            let (rd, wr) = fd_pair(use_pipes)?;
            let (rd_fd, wr_raw) = (rd.as_fd(), wr.as_raw_fd());
            // SAFETY: the child only makes raw syscalls.
            unsafe {
                children.fork(move || {
                    rustix::io::close(wr_raw);
                    if !ready(ro, wi) || !receiver(packets, rd_fd, false) {
                        return 1;
                    }
                    0
                })
            }
            .map_err(|e| WorkloadError::io("fork", e))?;
            drop(rd);
            out_fds.push(wr);
        }
        let raw_out: Vec<BorrowedFd<'_>> = out_fds.iter().map(|f| f.as_fd()).collect();
        for _ in 0..FDS_PER_GROUP {
            let fds = raw_out.as_slice();
            // SAFETY: the child only makes raw syscalls and reads memory allocated before the fork.
            unsafe {
                children.fork(move || {
                    if !ready(ro, wi) || !sender(loops, fds, false) {
                        return 1;
                    }
                    0
                })
            }
            .map_err(|e| WorkloadError::io("fork", e))?;
        }
        drop(out_fds);
    }
    drop(ready_out);
    wait_ready(ready_in, total)?;

    probe.before().map_err(WorkloadError::Probe)?;
    let t0 = Instant::now();
    if !raw::write_full(wake_out.as_fd(), &[0u8]) {
        return Err(WorkloadError::last_os("messaging: writing the go byte"));
    }
    let reaped = children.wait_all();
    let wall = t0.elapsed();
    if cancel::is_requested() {
        return Err(WorkloadError::Cancelled);
    }
    reaped.map_err(|e| WorkloadError::worker("messaging", None, e))?;
    probe.after().map_err(WorkloadError::Probe)?;
    drop((wake_in, wake_out));
    Ok(wall)
}

#[allow(clippy::too_many_arguments)]
fn run_threads(
    groups: u32,
    loops: u64,
    packets: u64,
    use_pipes: bool,
    ready_in: &OwnedFd,
    ready_out: OwnedFd,
    wake_in: OwnedFd,
    wake_out: OwnedFd,
    total: usize,
    probe: &mut dyn Probe,
) -> Result<std::time::Duration, WorkloadError> {
    let go = Arc::new(AtomicBool::new(false));
    let ready_out = Arc::new(ready_out);
    let wake_in = Arc::new(wake_in);
    let mut handles = Vec::with_capacity(total);

    let spawn_all =
        |handles: &mut Vec<std::thread::JoinHandle<bool>>| -> Result<(), WorkloadError> {
            let spawn = |name: &str, f: Box<dyn FnOnce() -> bool + Send>| {
                std::thread::Builder::new()
                    .name(name.into())
                    .stack_size(64 * 1024)
                    .spawn(f)
                    .map_err(|e| WorkloadError::io("spawning a messaging thread", e))
            };
            for _ in 0..groups {
                let mut out_fds = Vec::with_capacity(FDS_PER_GROUP);
                for _ in 0..FDS_PER_GROUP {
                    let (rd, wr) = fd_pair(use_pipes)?;
                    out_fds.push(wr);
                    let (ro, wi, go) = (ready_out.clone(), wake_in.clone(), go.clone());
                    handles.push(spawn(
                        "pmlab-msg-rx",
                        Box::new(move || {
                            if !ready(ro.as_fd(), wi.as_fd()) || !go.load(Ordering::Acquire) {
                                return false;
                            }
                            receiver(packets, rd.as_fd(), true)
                        }),
                    )?);
                }
                let out_fds = Arc::new(out_fds);
                for _ in 0..FDS_PER_GROUP {
                    let (ro, wi, go, out) = (
                        ready_out.clone(),
                        wake_in.clone(),
                        go.clone(),
                        out_fds.clone(),
                    );
                    handles.push(spawn(
                        "pmlab-msg-tx",
                        Box::new(move || {
                            let fds: Vec<BorrowedFd<'_>> = out.iter().map(|f| f.as_fd()).collect();
                            if !ready(ro.as_fd(), wi.as_fd()) || !go.load(Ordering::Acquire) {
                                return false;
                            }
                            sender(loops, &fds, true)
                        }),
                    )?);
                }
            }
            Ok(())
        };

    let joined = |handles: Vec<std::thread::JoinHandle<bool>>| -> bool {
        let mut ok = true;
        for h in handles {
            ok &= h.join().unwrap_or(false);
        }
        ok
    };

    let started = spawn_all(&mut handles).and_then(|()| wait_ready(ready_in, total));
    if let Err(e) = started {
        // Release the workers waiting for "go": hang up the wake fd with `go` still false.
        drop(wake_out);
        joined(handles);
        return Err(e);
    }
    drop(ready_out);

    probe.before().map_err(WorkloadError::Probe)?;
    let t0 = Instant::now();
    go.store(true, Ordering::Release);
    if !raw::write_full(wake_out.as_fd(), &[0u8]) {
        let e = WorkloadError::last_os("messaging: writing the go byte");
        go.store(false, Ordering::Release);
        drop(wake_out);
        joined(handles);
        return Err(e);
    }
    let ok = joined(handles);
    let wall = t0.elapsed();
    if cancel::is_requested() {
        return Err(WorkloadError::Cancelled);
    }
    if !ok {
        return Err(WorkloadError::worker(
            "messaging",
            None,
            WorkerError::ThreadFailed,
        ));
    }
    probe.after().map_err(WorkloadError::Probe)?;
    drop(wake_out);
    Ok(wall)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoProbe;

    #[test]
    fn every_mode_completes() {
        for (pipes, threads) in [(false, false), (true, false), (false, true), (true, true)] {
            let r = run(2, 5, pipes, threads, &mut NoProbe).unwrap();
            assert_eq!(r.metrics[0].name, PRIMARY);
            assert!(r.metrics[0].value > 0.0);
        }
    }
}
