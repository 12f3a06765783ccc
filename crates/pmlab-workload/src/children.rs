//! Forked worker processes in one process group, killed and reaped on every exit path:
//! the group is SIGKILLed on drop and on cancellation, and each child has PR_SET_PDEATHSIG.

use crate::cancel;
use std::io;

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
        let parent = libc::getpid();
        let pgid = self.pgid;
        let pid = libc::fork();
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            libc::setpgid(0, pgid);
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                libc::signal(sig, libc::SIG_DFL);
            }
            let code = body();
            libc::_exit(code);
        }
        // Also from the parent, so the group exists before we register or kill it.
        libc::setpgid(pid, if pgid == 0 { pid } else { pgid });
        if self.pgid == 0 {
            self.pgid = pid;
            self.registration = cancel::register_group(pid);
        }
        self.pids.push(pid);
        self.reaped.push(false);
        Ok(pid)
    }

    /// Wait for every child; an exit status other than 0 or a signal is an error.
    pub(crate) fn wait_all(&mut self) -> Result<(), String> {
        let mut first_error = None;
        for i in 0..self.pids.len() {
            if self.reaped[i] {
                continue;
            }
            let status = wait_pid(self.pids[i]).map_err(|e| format!("waitpid: {e}"))?;
            self.reaped[i] = true;
            if let Some(msg) = describe_failure(status) {
                first_error.get_or_insert(format!("worker process {}: {msg}", self.pids[i]));
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
            unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
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

pub(crate) fn wait_pid(pid: i32) -> io::Result<i32> {
    let mut status = 0;
    loop {
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `None` for exit status 0, else a description ("exited with status 3", "killed by signal 9").
pub(crate) fn describe_failure(status: i32) -> Option<String> {
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => None,
            c => Some(format!("exited with status {c}")),
        }
    } else if libc::WIFSIGNALED(status) {
        Some(format!("killed by signal {}", libc::WTERMSIG(status)))
    } else {
        Some(format!("ended with wait status {status:#x}"))
    }
}

/// Async-signal-safe helpers for forked children.
pub(crate) mod raw {
    /// Read exactly `buf.len()` bytes; false on error or EOF.
    pub(crate) fn read_full(fd: i32, buf: &mut [u8]) -> bool {
        let mut done = 0;
        while done < buf.len() {
            let r = unsafe { libc::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
            if r > 0 {
                done += r as usize;
            } else if r < 0 && errno() == libc::EINTR {
                continue;
            } else {
                return false;
            }
        }
        true
    }

    /// Write all of `buf`; false on error.
    pub(crate) fn write_full(fd: i32, buf: &[u8]) -> bool {
        let mut done = 0;
        while done < buf.len() {
            let r = unsafe { libc::write(fd, buf[done..].as_ptr().cast(), buf.len() - done) };
            if r > 0 {
                done += r as usize;
            } else if r < 0 && errno() == libc::EINTR {
                continue;
            } else {
                return false;
            }
        }
        true
    }

    pub(crate) fn errno() -> i32 {
        unsafe { *libc::__errno_location() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_of_a_child_is_reported_and_others_are_reaped() {
        let mut g = ChildGroup::new();
        unsafe {
            g.fork(|| 0).unwrap();
            g.fork(|| 3).unwrap();
            g.fork(|| {
                libc::pause();
                0
            })
            .unwrap();
        }
        let e = g.wait_all().unwrap_err();
        assert!(e.contains("exited with status 3"), "{e}");
    }

    #[test]
    fn drop_kills_blocked_children() {
        let pid;
        {
            let mut g = ChildGroup::new();
            pid = unsafe {
                g.fork(|| {
                    libc::pause();
                    0
                })
                .unwrap()
            };
        }
        assert_eq!(
            unsafe { libc::kill(pid, 0) },
            -1,
            "child {pid} survived its group's drop"
        );
    }
}
