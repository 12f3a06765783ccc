//! Cancellation from a signal handler: `request()` is async-signal-safe. It sets a flag,
//! wakes waiters through a self-pipe and SIGKILLs the process groups of running workers.

use std::io;
use std::os::fd::RawFd;
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
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if PIPE_READ
        .compare_exchange(-1, fds[0], Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        return Ok(());
    }
    PIPE_WRITE.store(fds[1], Ordering::Release);
    Ok(())
}

/// Ask the running workload to stop: kill its workers and wake its waits. Async-signal-safe.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
    for slot in &GROUPS {
        let pgid = slot.load(Ordering::SeqCst);
        if pgid > 0 {
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    let fd = PIPE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        let b = 1u8;
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
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
        while unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
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
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
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
