//! `idle`: one blocking wait for the whole duration (a single `ppoll` on the cancellation
//! pipe), so that pmlab itself wakes no CPU while the machine idles.

use crate::{cancel, Probe, WorkloadError, WorkloadResult};
use pmlab_kernel::{Direction, Metric, Nanos};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::time::Instant;

pub(crate) const PRIMARY: &str = "idle_s";

/// Block until `deadline` elapses or cancellation is requested; true when cancelled.
pub(crate) fn wait(duration: Nanos) -> Result<bool, WorkloadError> {
    let t0 = Instant::now();
    // SAFETY: the cancellation pipe is never closed once created.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(cancel::wait_fd()) };
    let mut pfd = [PollFd::new(&fd, PollFlags::IN)];
    loop {
        let left = duration.0.saturating_sub(t0.elapsed().as_nanos() as u64);
        if left == 0 {
            return Ok(false);
        }
        let ts = Timespec {
            tv_sec: (left / 1_000_000_000) as i64,
            tv_nsec: (left % 1_000_000_000) as i64,
        };
        match poll(&mut pfd, Some(&ts)) {
            Ok(n) if n > 0 => return Ok(true),
            _ if cancel::is_requested() => return Ok(true),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(WorkloadError::io("ppoll", e.into())),
        }
    }
}

pub(crate) fn run(duration: Nanos, probe: &mut dyn Probe) -> Result<WorkloadResult, WorkloadError> {
    probe.before().map_err(WorkloadError::Probe)?;
    let t0 = Instant::now();
    let cancelled = wait(duration)?;
    let wall = t0.elapsed();
    if cancelled {
        return Err(WorkloadError::Cancelled);
    }
    probe.after().map_err(WorkloadError::Probe)?;
    Ok(WorkloadResult {
        metrics: vec![Metric::new(
            PRIMARY,
            wall.as_secs_f64(),
            "s",
            Direction::Neutral,
        )],
        wall: Nanos(wall.as_nanos() as u64),
        histogram: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoProbe;

    #[test]
    fn sleeps_at_least_the_duration() {
        crate::cancel::init().unwrap();
        let r = run(Nanos(50_000_000), &mut NoProbe).unwrap();
        assert!(r.wall.0 >= 50_000_000);
    }
}
