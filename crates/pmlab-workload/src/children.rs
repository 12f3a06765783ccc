//! Forked worker processes in one process group, killed and reaped on every exit path:
//! the group is SIGKILLed on drop and on cancellation, and each child has PR_SET_PDEATHSIG.
//! fork, `_exit` and signal dispositions stay libc calls: rustix has no stable API for them.

use crate::{cancel, ProcessEnd, WorkerError};
use rustix::process::{Pid, WaitOptions, WaitStatus};
use std::io;

/// In a child after fork: die with the parent (PR_SET_PDEATHSIG), and now if it is already
/// gone. Async-signal-safe.
pub(crate) fn die_with(parent: Pid) {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if rustix::process::getppid() != Some(parent) {
        // SAFETY: _exit is async-signal-safe and ends the child at once.
        unsafe { libc::_exit(1) };
    }
}

pub(crate) struct ChildGroup {
    pgid: i32,
    pids: Vec<i32>,
    reaped: Vec<bool>,
    registration: Option<cancel::Registration>,
}

impl ChildGroup {
    pub(crate) fn new() -> Self {
        ChildGroup {
            pgid: 0,
            pids: Vec::new(),
            reaped: Vec::new(),
            registration: None,
        }
    }

    /// Fork a child that runs `body` and exits with its return value.
    ///
    /// # Safety
    /// `body` runs in a forked copy of a possibly multi-threaded process: it must only make
    /// async-signal-safe calls (raw syscalls), never allocate, lock, print or panic.
    pub(crate) unsafe fn fork<F: FnOnce() -> i32>(&mut self, body: F) -> io::Result<i32> {
        let parent = rustix::process::getpid();
        let pgid = self.pgid;
        // SAFETY: the child runs only `body` and async-signal-safe calls before `_exit`
        // (this function's contract).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            let _ = rustix::process::setpgid(None, Pid::from_raw(pgid));
            die_with(parent);
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                // SAFETY: resetting a disposition to the default is async-signal-safe.
                unsafe { libc::signal(sig, libc::SIG_DFL) };
            }
            let code = body();
            // SAFETY: _exit is async-signal-safe and ends the child at once.
            unsafe { libc::_exit(code) };
        }
        // Also from the parent, so the group exists before we register or kill it.
        let _ = rustix::process::setpgid(
            Pid::from_raw(pid),
            Pid::from_raw(pgid).or(Pid::from_raw(pid)),
        );
        if self.pgid == 0 {
            self.pgid = pid;
            self.registration = cancel::register_group(pid);
        }
        self.pids.push(pid);
        self.reaped.push(false);
        Ok(pid)
    }

    /// Wait for every child; an exit status other than 0 or a signal is an error.
    pub(crate) fn wait_all(&mut self) -> Result<(), WorkerError> {
        let mut first_error = None;
        for i in 0..self.pids.len() {
            if self.reaped[i] {
                continue;
            }
            let status = wait_pid(self.pids[i]).map_err(WorkerError::Wait)?;
            self.reaped[i] = true;
            if let Some(end) = ProcessEnd::of(status) {
                first_error.get_or_insert(WorkerError::Process {
                    pid: self.pids[i],
                    end,
                });
                // One failed: stop the others rather than wait for peers that will never come.
                self.kill();
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// SIGKILL the whole group (safe to repeat).
    pub(crate) fn kill(&self) {
        if self.pgid > 0 && self.reaped.iter().any(|r| !r) {
            cancel::kill_group(self.pgid);
        }
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        self.kill();
        for i in 0..self.pids.len() {
            if !self.reaped[i] {
                let _ = wait_pid(self.pids[i]);
                self.reaped[i] = true;
            }
        }
        self.registration.take();
    }
}

pub(crate) fn wait_pid(pid: i32) -> io::Result<WaitStatus> {
    let pid = Pid::from_raw(pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        match rustix::process::waitpid(Some(pid), WaitOptions::empty()) {
            Ok(Some((_, status))) => return Ok(status),
            Ok(None) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// `None` for exit status 0, else a description ("exited with status 3", "killed by signal 9").
impl ProcessEnd {
    /// None for an exit with status 0.
    pub(crate) fn of(status: WaitStatus) -> Option<ProcessEnd> {
        match (status.exit_status(), status.terminating_signal()) {
            (Some(0), _) => None,
            (Some(c), _) => Some(ProcessEnd::Exit(c)),
            (None, Some(sig)) => Some(ProcessEnd::Signal(sig)),
            (None, None) => Some(ProcessEnd::Status(status.as_raw())),
        }
    }
}

/// Async-signal-safe helpers for forked children (no allocation).
///
/// The reads and writes go through the C library's `read` and `write`, as `perf bench sched
/// pipe` and `messaging` make theirs, not as inline system calls: after every context switch
/// each code page a round trip touches may cost a TLB refill, which a VM can make expensive.
/// On this project's 2-vCPU guest, pipe on one CPU with inline calls (rustix's) took 0.82-0.95
/// of perf's and of a plain C ping-pong's time per round trip; the same C program with inline
/// system calls took what pmlab did (bench/pipe-vs-perf).
pub(crate) mod raw {
    use std::os::fd::{AsRawFd, BorrowedFd};

    /// One `read(2)` or `write(2)` through libc: bytes moved, or None on error; EINTR is
    /// retried.
    fn retry(mut call: impl FnMut() -> isize) -> Option<usize> {
        loop {
            let n = call();
            if n >= 0 {
                return Some(n as usize);
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return None;
            }
        }
    }

    /// Read exactly `buf.len()` bytes; false on error or EOF.
    pub(crate) fn read_full(fd: BorrowedFd<'_>, buf: &mut [u8]) -> bool {
        let mut done = 0;
        while done < buf.len() {
            let rest = &mut buf[done..];
            // SAFETY: `rest` is valid for writes of its length while the call runs.
            match retry(|| unsafe {
                libc::read(fd.as_raw_fd(), rest.as_mut_ptr().cast(), rest.len())
            }) {
                Some(0) | None => return false,
                Some(n) => done += n,
            }
        }
        true
    }

    /// Write all of `buf`; false on error.
    pub(crate) fn write_full(fd: BorrowedFd<'_>, buf: &[u8]) -> bool {
        let mut done = 0;
        while done < buf.len() {
            let rest = &buf[done..];
            // SAFETY: `rest` is valid for reads of its length while the call runs.
            match retry(|| unsafe { libc::write(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) })
            {
                Some(0) | None => return false,
                Some(n) => done += n,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_of_a_child_is_reported_and_others_are_reaped() {
        let mut g = ChildGroup::new();
        // SAFETY: the bodies return a constant or pause: no allocation, lock or print.
        unsafe {
            g.fork(|| 0).unwrap();
            g.fork(|| 3).unwrap();
            g.fork(|| {
                rustix::event::pause();
                0
            })
            .unwrap();
        }
        let e = g.wait_all().unwrap_err();
        assert!(
            matches!(
                e,
                WorkerError::Process {
                    end: ProcessEnd::Exit(3),
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("exited with status 3"), "{e}");
    }

    #[test]
    fn drop_kills_blocked_children() {
        let pid;
        {
            let mut g = ChildGroup::new();
            // SAFETY: the body only pauses.
            pid = unsafe {
                g.fork(|| {
                    rustix::event::pause();
                    0
                })
                .unwrap()
            };
        }
        assert!(
            rustix::process::test_kill_process(Pid::from_raw(pid).unwrap()).is_err(),
            "child {pid} survived its group's drop"
        );
    }
}
