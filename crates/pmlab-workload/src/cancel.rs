//! Cancellation from a signal handler: `request()` is async-signal-safe. It sets a flag,
//! wakes waiters through a self-pipe and SIGKILLs the process groups of running workers.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static PIPE_READ: AtomicI32 = AtomicI32::new(-1);
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
const SLOTS: usize = 64;
static GROUPS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];

/// Create the self-pipe (idempotent). `run` calls it; call it early if installing handlers.
pub fn init() -> io::Result<()> {
    if PIPE_READ.load(Ordering::Acquire) >= 0 {
        return Ok(());
    }
    use rustix::pipe::{pipe_with, PipeFlags};
    use std::os::fd::{AsRawFd, IntoRawFd};
    let (r, w) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    // The pipe lives as long as the process (a signal handler may use it at any time).
    if PIPE_READ
        .compare_exchange(-1, r.as_raw_fd(), Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Ok(());
    }
    let _ = r.into_raw_fd();
    PIPE_WRITE.store(w.into_raw_fd(), Ordering::Release);
    Ok(())
}

/// Ask the running workload to stop: kill its workers and wake its waits. Async-signal-safe.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
    for slot in &GROUPS {
        let pgid = slot.load(Ordering::SeqCst);
        if pgid > 0 {
            kill_group(pgid);
        }
    }
    let fd = PIPE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: the self-pipe's fds are never closed once published.
        let _ = rustix::io::write(unsafe { BorrowedFd::borrow_raw(fd) }, &[1u8]);
    }
}

/// Whether `request()` was called (and not `reset()` since).
pub fn is_requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Forget an earlier request (for a caller that handled it and goes on).
pub fn reset() {
    REQUESTED.store(false, Ordering::SeqCst);
    let fd = PIPE_READ.load(Ordering::SeqCst);
    if fd >= 0 {
        let mut buf = [0u8; 64];
        // SAFETY: as in `request`.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        while rustix::io::read(fd, &mut buf).is_ok_and(|n| n > 0) {}
    }
}

/// The read end of the self-pipe: readable once cancellation was requested.
pub(crate) fn wait_fd() -> RawFd {
    PIPE_READ.load(Ordering::Acquire)
}

/// Register a process group to be SIGKILLed on `request()`; unregistered on drop.
pub(crate) struct Registration(usize);

pub(crate) fn register_group(pgid: i32) -> Option<Registration> {
    for (i, slot) in GROUPS.iter().enumerate() {
        if slot
            .compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            if REQUESTED.load(Ordering::SeqCst) {
                kill_group(pgid);
            }
            return Some(Registration(i));
        }
    }
    None
}

impl Drop for Registration {
    fn drop(&mut self) {
        GROUPS[self.0].store(0, Ordering::SeqCst);
    }
}

/// SIGKILL process group `pgid` (> 0); async-signal-safe, errors ignored (it may be gone).
pub(crate) fn kill_group(pgid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}
