//! A program pmlab starts and must never leave behind (a guest's QEMU): its own process
//! group, PR_SET_PDEATHSIG, SIGKILLed by [`crate::cancel::request`] and on drop, and waited
//! for with a deadline by sleeping in `poll` on a pidfd and the cancel pipe (no periodic
//! wake-up while it runs).

use crate::cancel;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How a supervised program's wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited (or was killed by a signal not sent by pmlab).
    Exited(ExitStatus),
    /// The deadline passed first; the program was killed.
    TimedOut,
    /// A signal asked pmlab to stop; the program was killed.
    Cancelled,
}

/// A running program in its own process group (see the module documentation).
pub struct Supervised {
    child: Child,
    pidfd: OwnedFd,
    reaped: bool,
    _registration: Option<cancel::Registration>,
}

impl Supervised {
    /// Start `command` in a new process group that dies with pmlab.
    pub fn spawn(mut command: Command) -> io::Result<Supervised> {
        cancel::init()?;
        let parent = rustix::process::getpid();
        command.process_group(0);
        // SAFETY: runs between fork and exec; only raw syscalls.
        unsafe {
            command.pre_exec(move || {
                crate::children::die_with(parent);
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        let pid = rustix::process::Pid::from_child(&child);
        let pidfd = match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e.into());
            }
        };
        Ok(Supervised {
            _registration: cancel::register_group(child.id() as i32),
            child,
            pidfd,
            reaped: false,
        })
    }

    /// The program's pid (also its process group).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait until it exits, `timeout` passes (then it is killed) or a stop is requested.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<Ended> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(status) = self.child.try_wait()? {
                self.reaped = true;
                return Ok(if cancel::is_requested() {
                    Ended::Cancelled
                } else {
                    Ended::Exited(status)
                });
            }
            if cancel::is_requested() {
                self.kill();
                return Ok(Ended::Cancelled);
            }
            let left = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        self.kill();
                        return Ok(Ended::TimedOut);
                    }
                    Some(d - now)
                }
                None => None,
            };
            let cancel_fd = cancel::wait_fd();
            // SAFETY: the cancel pipe's fds are never closed once published (cancel::init).
            let cancel_fd = (cancel_fd >= 0).then(|| unsafe { BorrowedFd::borrow_raw(cancel_fd) });
            let pidfd = self.pidfd.as_fd();
            let mut fds = vec![rustix::event::PollFd::new(
                &pidfd,
                rustix::event::PollFlags::IN,
            )];
            if let Some(fd) = &cancel_fd {
                fds.push(rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN));
            }
            let ts = left.map(|l| rustix::event::Timespec {
                tv_sec: l.as_secs() as i64,
                tv_nsec: l.subsec_nanos() as i64,
            });
            match rustix::event::poll(&mut fds, ts.as_ref()) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// SIGKILL the program's process group and reap it (safe to repeat).
    pub fn kill(&mut self) {
        if !self.reaped {
            cancel::kill_group(self.child.id() as i32);
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl std::fmt::Debug for Supervised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervised")
            .field("pid", &self.child.id())
            .field("reaped", &self.reaped)
            .finish()
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.kill();
    }
}
