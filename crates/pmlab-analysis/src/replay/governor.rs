//! Poll-window rules of the kernel, as data and pure functions: the haltpoll governor's
//! grow/shrink (drivers/cpuidle/governors/haltpoll.c, `adjust_poll_limit`) and the arm64
//! poll-idle window (poll_idle() ended by the 10 kHz event stream).

use serde::Serialize;

/// The haltpoll governor's module parameters (`/sys/module/haltpoll/parameters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HaltpollParams {
    /// `guest_halt_poll_ns`: the largest poll window, ns.
    pub guest_halt_poll_ns: u64,
    /// `guest_halt_poll_grow`: multiplication factor.
    pub grow: u64,
    /// `guest_halt_poll_shrink`: division factor (0: shrink to 0).
    pub shrink: u64,
    /// `guest_halt_poll_grow_start`: the first non-zero window, ns.
    pub grow_start: u64,
    /// `guest_halt_poll_allow_shrink`.
    pub allow_shrink: bool,
}

impl HaltpollParams {
    /// This machine's parameters (`/sys/module/haltpoll/parameters`, the kernel's default for
    /// any unreadable one), or `None` without the haltpoll module.
    pub fn of_machine() -> Option<HaltpollParams> {
        let h = pmlab_kernel::sysinfo::haltpoll::read(&pmlab_kernel::Root::system())?;
        let num = |n: &str| h.param(n)?.trim().parse::<u64>().ok();
        let d = HaltpollParams::default();
        Some(HaltpollParams {
            guest_halt_poll_ns: num("guest_halt_poll_ns").unwrap_or(d.guest_halt_poll_ns),
            grow: num("guest_halt_poll_grow").unwrap_or(d.grow),
            shrink: num("guest_halt_poll_shrink").unwrap_or(d.shrink),
            grow_start: num("guest_halt_poll_grow_start").unwrap_or(d.grow_start),
            allow_shrink: h
                .param("guest_halt_poll_allow_shrink")
                .and_then(pmlab_kernel::knob::value::parse_bool)
                .unwrap_or(d.allow_shrink),
        })
    }
}

/// The parameters a replay uses when none are given: this machine's, else the kernel's
/// defaults; with the note that says which.
pub fn machine_or_default() -> (HaltpollParams, &'static str) {
    match HaltpollParams::of_machine() {
        Some(p) => (
            p,
            "haltpoll parameters read from this machine's /sys/module/haltpoll/parameters",
        ),
        None => (
            HaltpollParams::default(),
            "haltpoll parameters: the kernel's defaults (no haltpoll module here)",
        ),
    }
}

impl Default for HaltpollParams {
    /// The kernel's defaults.
    fn default() -> Self {
        HaltpollParams {
            guest_halt_poll_ns: 200_000,
            grow: 2,
            shrink: 2,
            grow_start: 50_000,
            allow_shrink: true,
        }
    }
}

/// One `guest_halt_poll_ns` change the governor makes (as the tracepoint logs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LimitChange {
    /// When, trace timestamp (ns).
    pub ts: u64,
    /// Grown (else shrunk).
    pub grow: bool,
    /// The new limit, ns.
    pub new_ns: u64,
    /// The old limit, ns.
    pub old_ns: u64,
}

impl HaltpollParams {
    /// `adjust_poll_limit()` after a halt of `block_ns`: the new per-CPU poll limit and
    /// whether the kernel emits a grow (Some(true)) or shrink (Some(false)) event.
    pub fn adjust(&self, limit: u64, block_ns: u64) -> (u64, Option<bool>) {
        // The kernel keeps these in `unsigned int`.
        let clamp32 = |v: u64| v & 0xffff_ffff;
        if block_ns > limit && block_ns <= self.guest_halt_poll_ns {
            let mut val = clamp32(limit * self.grow);
            if val < self.grow_start {
                val = self.grow_start;
            }
            if val > self.guest_halt_poll_ns {
                val = self.guest_halt_poll_ns;
            }
            (val, Some(true))
        } else if block_ns > self.guest_halt_poll_ns && self.allow_shrink {
            // shrink 0 means "to 0"; below grow_start the kernel resets to 0
            let val = match limit.checked_div(self.shrink) {
                Some(v) if v >= self.grow_start => v,
                _ => 0,
            };
            (val, Some(false))
        } else {
            (limit, None)
        }
    }

    /// Replays halt residencies `(end time, block_ns)` from `start_limit`, returning every
    /// change the governor would log.
    pub fn replay_halts(
        &self,
        start_limit: u64,
        halts: impl IntoIterator<Item = (u64, u64)>,
    ) -> Vec<LimitChange> {
        let mut limit = start_limit;
        let mut out = Vec::new();
        for (ts, block) in halts {
            let (new, ev) = self.adjust(limit, block);
            if let Some(grow) = ev {
                out.push(LimitChange {
                    ts,
                    grow,
                    new_ns: new,
                    old_ns: limit,
                });
            }
            limit = new;
        }
        out
    }
}

/// The arm64 event stream's period (10 kHz): a poll waiting in WFE re-checks its time limit
/// only when the stream (or a store to the watched line) wakes it.
pub const ARM64_EVENT_STREAM_NS: u64 = 100_000;

/// The end of an arm64 poll that began at `start` with limit `limit`: the first event-stream
/// tick at or after `start + limit` (ticks at multiples of the period of the trace clock: the
/// stream's real phase is not in the trace).
pub fn arm64_poll_end(start: u64, limit: u64) -> u64 {
    let t = start + limit;
    t.div_ceil(ARM64_EVENT_STREAM_NS) * ARM64_EVENT_STREAM_NS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grow_from_zero_starts_at_grow_start_and_caps_at_max() {
        let p = HaltpollParams::default();
        assert_eq!(p.adjust(0, 30_000), (50_000, Some(true)));
        assert_eq!(p.adjust(50_000, 60_000), (100_000, Some(true)));
        assert_eq!(p.adjust(100_000, 150_000), (200_000, Some(true)));
        assert_eq!(p.adjust(200_000, 200_000), (200_000, None));
        // a halt within the window changes nothing
        assert_eq!(p.adjust(100_000, 80_000), (100_000, None));
    }

    #[test]
    fn shrink_halves_and_drops_to_zero_below_grow_start() {
        let p = HaltpollParams::default();
        assert_eq!(p.adjust(200_000, 300_000), (100_000, Some(false)));
        assert_eq!(p.adjust(100_000, 300_000), (50_000, Some(false)));
        assert_eq!(p.adjust(50_000, 300_000), (0, Some(false)));
        // the kernel logs a shrink even from 0
        assert_eq!(p.adjust(0, 300_000), (0, Some(false)));
        let no = HaltpollParams {
            allow_shrink: false,
            ..p
        };
        assert_eq!(no.adjust(200_000, 300_000), (200_000, None));
    }

    #[test]
    fn arm64_poll_ends_on_an_event_stream_tick() {
        assert_eq!(arm64_poll_end(0, 100_000), 100_000);
        assert_eq!(arm64_poll_end(10_000, 100_000), 200_000);
        assert_eq!(arm64_poll_end(250_000, 10_000), 300_000);
    }
}
