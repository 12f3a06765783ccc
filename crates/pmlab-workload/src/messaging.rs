//! `messaging`: groups of 20 senders and 20 receivers, as `perf bench sched messaging`
//! (hackbench) does. Every sender writes `loops` 100-byte messages to each receiver of its
//! group. All workers are created and ready before the clock starts; the timed part is
//! from the "go" byte to the last worker reaped.

use crate::children::{raw, ChildGroup};
use crate::{cancel, Probe, WorkloadError, WorkloadResult};
use pmlab_kernel::{Direction, Metric, Nanos};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub(crate) const PRIMARY: &str = "total_s";
const FDS_PER_GROUP: usize = 20;
const DATASIZE: usize = 100;

fn fd_pair(use_pipes: bool) -> Result<(OwnedFd, OwnedFd), WorkloadError> {
    let mut fds = [0; 2];
    let r = unsafe {
        if use_pipes {
            libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC)
        } else {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        }
    };
    if r != 0 {
        return Err(WorkloadError::last_os(if use_pipes {
            "pipe"
        } else {
            "socketpair"
        }));
    }
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Tell the parent we are ready, then block until the go byte (or hang-up) arrives.
fn ready(ready_out: i32, wake_in: i32) -> bool {
    if !raw::write_full(ready_out, &[0u8]) {
        return false;
    }
    let mut pfd = libc::pollfd {
        fd: wake_in,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        let r = unsafe { libc::poll(&mut pfd, 1, -1) };
        if r == 1 {
            return true;
        }
        if r < 0 && raw::errno() == libc::EINTR {
            continue;
        }
        return false;
    }
}

fn sender(loops: u64, out_fds: &[i32], check_cancel: bool) -> bool {
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

fn receiver(packets: u64, in_fd: i32, check_cancel: bool) -> bool {
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
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
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
    if !raw::read_full(ready_in.as_raw_fd(), &mut buf) {
        if cancel::is_requested() {
            return Err(WorkloadError::Cancelled);
        }
        return Err(WorkloadError::Worker(
            "messaging: a worker died before it was ready".into(),
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
    let (ro, wi) = (ready_out.as_raw_fd(), wake_in.as_raw_fd());
    for _ in 0..groups {
        let mut out_fds: Vec<OwnedFd> = Vec::with_capacity(FDS_PER_GROUP);
        for _ in 0..FDS_PER_GROUP {
            let (rd, wr) = fd_pair(use_pipes)?;
            let (rd_raw, wr_raw) = (rd.as_raw_fd(), wr.as_raw_fd());
            // SAFETY: the child only makes raw syscalls.
            unsafe {
                children.fork(move || {
                    libc::close(wr_raw);
                    if !ready(ro, wi) || !receiver(packets, rd_raw, false) {
                        return 1;
                    }
                    0
                })
            }
            .map_err(|e| WorkloadError::io("fork", e))?;
            drop(rd);
            out_fds.push(wr);
        }
        let raw_out: Vec<i32> = out_fds.iter().map(|f| f.as_raw_fd()).collect();
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
    if !raw::write_full(wake_out.as_raw_fd(), &[0u8]) {
        return Err(WorkloadError::last_os("messaging: writing the go byte"));
    }
    let reaped = children.wait_all();
    let wall = t0.elapsed();
    if cancel::is_requested() {
        return Err(WorkloadError::Cancelled);
    }
    reaped.map_err(|e| WorkloadError::Worker(format!("messaging: {e}")))?;
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
                            if !ready(ro.as_raw_fd(), wi.as_raw_fd()) || !go.load(Ordering::Acquire)
                            {
                                return false;
                            }
                            receiver(packets, rd.as_raw_fd(), true)
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
                            let fds: Vec<i32> = out.iter().map(|f| f.as_raw_fd()).collect();
                            if !ready(ro.as_raw_fd(), wi.as_raw_fd()) || !go.load(Ordering::Acquire)
                            {
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
    if !raw::write_full(wake_out.as_raw_fd(), &[0u8]) {
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
        return Err(WorkloadError::Worker(
            "messaging: a worker thread failed".into(),
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
