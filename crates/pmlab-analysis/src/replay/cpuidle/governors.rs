//! The cpuidle governors as state machines: menu, teo, ladder and haltpoll, modelled after
//! Linux 6.18's drivers/cpuidle/governors/{menu,teo,ladder,haltpoll}.c. Each takes what the
//! kernel hands its `select` (the state table, the PM QoS limit, whether the tick is stopped,
//! the time till the next timer with and without the tick) and what `reflect` and the core
//! measure (the residency, a poll that timed out, a tick wakeup).

use super::states::IdleState;
use crate::replay::governor::HaltpollParams;

/// `RESIDENCY_THRESHOLD_NS` (drivers/cpuidle/governors/gov.h).
const RESIDENCY_THRESHOLD_NS: u64 = 15_000;
/// `KTIME_MAX`: no timer known.
pub(crate) const KTIME_MAX: u64 = i64::MAX as u64;
/// `PM_QOS_RESUME_LATENCY_NO_CONSTRAINT` (S32_MAX µs) in ns: no PM QoS limit.
pub const NO_LATENCY_LIMIT: u64 = i32::MAX as u64 * 1000;

/// What a governor's `select` sees.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub states: &'a [IdleState],
    /// `cpuidle_governor_latency_req()`, ns.
    pub latency_req: u64,
    /// `tick_nohz_tick_stopped()`.
    pub tick_stopped: bool,
    /// `TICK_NSEC`.
    pub tick_ns: u64,
    /// `tick_nohz_get_sleep_length()`: time till the next timer ([`KTIME_MAX`]: none).
    pub sleep_length: u64,
    /// Its `delta_next`: time till the next timer or tick, whichever is first.
    pub delta_tick: u64,
}

/// What the core measured after the state was left.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome {
    /// `dev->last_residency_ns`.
    pub residency: u64,
    /// `dev->poll_time_limit`: a polling state ran out of time.
    pub poll_timeout: bool,
    /// `tick_nohz_idle_got_tick()`.
    pub tick_wakeup: bool,
}

/// A governor: `select` returns the state and whether to stop the tick.
pub(crate) trait Model {
    fn select(&mut self, c: &Ctx) -> (usize, bool);
    fn reflect(&mut self, c: &Ctx, idx: usize, o: &Outcome);
    /// The poll limit the governor sets (`dev->poll_limit_ns`), if it sets one.
    fn poll_limit(&self) -> Option<u64> {
        None
    }
}

// ---------------------------------------------------------------- menu

const BUCKETS: usize = 6;
const INTERVALS: usize = 8;
const RESOLUTION: u64 = 1024;
const DECAY: u64 = 8;
const MAX_INTERESTING: u64 = 50_000_000;

/// menu: the next timer scaled by a per-bucket correction factor, or the typical interval
/// of the last 8 idle periods, whichever is shorter.
pub(crate) struct Menu {
    correction: [u32; BUCKETS],
    intervals: [u32; INTERVALS],
    ptr: usize,
    next_timer_ns: u64,
    bucket: usize,
}

impl Menu {
    pub(crate) fn new() -> Menu {
        Menu {
            correction: [(RESOLUTION * DECAY) as u32; BUCKETS],
            intervals: [0; INTERVALS],
            ptr: 0,
            next_timer_ns: 0,
            bucket: 0,
        }
    }

    fn which_bucket(d: u64) -> usize {
        [10_000u64, 100_000, 1_000_000, 10_000_000, 100_000_000]
            .iter()
            .filter(|b| d >= **b)
            .count()
    }

    /// The average of the recent intervals when their spread is small, after discarding
    /// outliers on the side farther from the average; `u32::MAX` when there is none.
    fn typical_interval(&self) -> u32 {
        let (mut min_thresh, mut max_thresh) = (-1i64, u32::MAX as i64);
        loop {
            let (mut max, mut min, mut avg, mut var, mut n) = (0u32, u32::MAX, 0u64, 0u64, 0u64);
            for &raw in &self.intervals {
                let v = raw as i64;
                if v <= min_thresh || v >= max_thresh {
                    continue;
                }
                n += 1;
                avg += raw as u64;
                var = var.wrapping_add(raw as u64 * raw as u64);
                max = max.max(raw);
                min = min.min(raw);
            }
            if max == 0 {
                return u32::MAX;
            }
            avg /= n;
            var /= n;
            let avg_sq = avg * avg;
            var = var.saturating_sub(avg_sq);
            if var <= u64::MAX / 36
                && ((avg_sq > var * 36 && n * 4 >= INTERVALS as u64 * 3) || var <= 400)
            {
                return avg as u32;
            }
            if n * 4 <= INTERVALS as u64 * 3 {
                return u32::MAX;
            }
            if avg - min as u64 > max as u64 - avg {
                min_thresh = min as i64;
            } else {
                max_thresh = max as i64;
            }
        }
    }
}

impl Model for Menu {
    fn select(&mut self, c: &Ctx) -> (usize, bool) {
        let s = c.states;
        let mut predicted = self.typical_interval() as u64 * 1000;
        let (next_timer, delta_tick);
        if predicted > RESIDENCY_THRESHOLD_NS {
            next_timer = c.sleep_length;
            delta_tick = c.delta_tick;
            self.bucket = Menu::which_bucket(next_timer);
            let div = (RESOLUTION * DECAY * 1000) as u128;
            let timer_us =
                (div / 2 + next_timer as u128 * self.correction[self.bucket] as u128) / div;
            predicted = predicted.min((timer_us.min(u32::MAX as u128) as u64) * 1000);
        } else {
            next_timer = KTIME_MAX;
            delta_tick = c.tick_ns / 2;
            self.bucket = BUCKETS - 1;
        }
        self.next_timer_ns = next_timer;
        if s.len() <= 1
            || c.latency_req == 0
            || ((next_timer < s[1].target_residency.0 || c.latency_req < s[1].exit_latency.0)
                && !s[0].disabled)
        {
            return (0, !s[0].polling);
        }
        if c.tick_stopped && predicted < c.tick_ns {
            predicted = (predicted + (predicted >> 2)).min(next_timer);
        }
        let mut idx: Option<usize> = None;
        for (i, st) in s.iter().enumerate() {
            if st.disabled {
                continue;
            }
            let cur = *idx.get_or_insert(i);
            if st.exit_latency.0 > c.latency_req {
                break;
            }
            if st.target_residency.0 <= predicted {
                idx = Some(i);
                continue;
            }
            if s[cur].polling
                && st.target_residency.0 <= next_timer
                && st.exit_latency.0 <= predicted
            {
                predicted = st.target_residency.0;
                idx = Some(i);
                break;
            }
            if predicted < c.tick_ns {
                break;
            }
            if !c.tick_stopped {
                predicted = s[cur].target_residency.0;
                break;
            }
            let mut pick = cur;
            if s[cur].target_residency.0 < c.tick_ns && st.target_residency.0 <= delta_tick {
                pick = i;
            }
            return (pick, true);
        }
        let mut idx = idx.unwrap_or(0);
        let mut stop = true;
        if (s[idx].polling || predicted < c.tick_ns) && !c.tick_stopped {
            stop = false;
            if idx > 0 && s[idx].target_residency.0 > delta_tick {
                for i in (0..idx).rev() {
                    if s[i].disabled {
                        continue;
                    }
                    idx = i;
                    if s[i].target_residency.0 <= delta_tick {
                        break;
                    }
                }
            }
        }
        (idx, stop)
    }

    fn reflect(&mut self, c: &Ctx, idx: usize, o: &Outcome) {
        let next_timer = self.next_timer_ns;
        let st = &c.states[idx];
        let mut measured = if o.tick_wakeup && next_timer > c.tick_ns {
            9 * MAX_INTERESTING / 10
        } else if st.polling && o.poll_timeout {
            next_timer
        } else if o.residency > 2 * st.exit_latency.0 {
            o.residency - st.exit_latency.0
        } else {
            o.residency / 2
        };
        measured = measured.min(next_timer);
        let mut f = self.correction[self.bucket] as u64;
        f -= f / DECAY;
        if next_timer > 0 && measured < MAX_INTERESTING {
            f += RESOLUTION * measured / next_timer;
        } else {
            f += RESOLUTION;
        }
        self.correction[self.bucket] = f as u32;
        // The kernel stores ktime_to_us() in an unsigned int: KTIME_MAX wraps.
        self.intervals[self.ptr] = (measured / 1000) as u32;
        self.ptr = (self.ptr + 1) % INTERVALS;
    }
}

// ---------------------------------------------------------------- teo

const PULSE: u32 = 1024;
const DECAY_SHIFT: u32 = 3;

/// teo: per-state bins of "hits" (woken by the timer the sleep length predicted) and
/// "intercepts" (woken earlier), decaying; a shallower state when intercepts dominate.
pub(crate) struct Teo {
    sleep_length: u64,
    bins: Vec<(u32, u32)>,
    total: u32,
    tick_intercepts: u32,
    short_idles: u32,
}

impl Teo {
    pub(crate) fn new(n: usize) -> Teo {
        Teo {
            sleep_length: KTIME_MAX,
            bins: vec![(0, 0); n],
            total: 0,
            tick_intercepts: 0,
            short_idles: 0,
        }
    }

    fn state_ok(c: &Ctx, i: usize) -> bool {
        !c.tick_stopped || c.states[i].target_residency.0 >= c.tick_ns
    }

    fn shallower(c: &Ctx, mut idx: usize, duration: u64) -> usize {
        for i in (0..idx).rev() {
            if c.states[i].disabled {
                continue;
            }
            idx = i;
            if c.states[i].target_residency.0 <= duration {
                break;
            }
        }
        idx
    }
}

impl Model for Teo {
    fn select(&mut self, c: &Ctx) -> (usize, bool) {
        let s = c.states;
        self.sleep_length = KTIME_MAX;
        if s.len() < 2 {
            return (0, false);
        }
        let mut idx: Option<usize> = (!s[0].disabled).then_some(0);
        let (mut idx0, mut constraint_idx) = (0usize, 0usize);
        let (mut isum, mut hsum, mut idx_isum, mut idx_hsum) = (0u32, 0u32, 0u32, 0u32);
        for (i, st) in s.iter().enumerate().skip(1) {
            isum = isum.wrapping_add(self.bins[i - 1].0);
            hsum = hsum.wrapping_add(self.bins[i - 1].1);
            if st.disabled {
                continue;
            }
            if idx.is_none() {
                idx0 = i;
            }
            idx = Some(i);
            if st.exit_latency.0 <= c.latency_req {
                constraint_idx = i;
            }
            idx_isum = isum;
            idx_hsum = hsum;
        }
        let Some(mut idx) = idx else {
            return (0, false);
        };
        let mut duration;
        if idx == idx0 {
            duration = s[idx].target_residency.0;
        } else {
            if 2 * idx_isum as u64 > self.total.wrapping_sub(idx_hsum) as u64 {
                let mut first_suitable = idx;
                let mut sum = 0u32;
                for i in (0..idx).rev() {
                    sum = sum.wrapping_add(self.bins[i].0);
                    if 2 * sum as u64 > idx_isum as u64 {
                        idx = if Teo::state_ok(c, i) && !s[i].disabled {
                            i
                        } else {
                            first_suitable
                        };
                        break;
                    }
                    if s[i].disabled {
                        continue;
                    }
                    if Teo::state_ok(c, i) {
                        first_suitable = i;
                        continue;
                    }
                    if first_suitable == idx {
                        break;
                    }
                }
            }
            idx = idx.min(constraint_idx);
            if (idx == 0 || s[idx].target_residency.0 < RESIDENCY_THRESHOLD_NS)
                && (2 * self.short_idles as u64 >= self.total as u64
                    || c.latency_req < RESIDENCY_THRESHOLD_NS / 2)
            {
                return (idx, false);
            }
            duration = c.sleep_length;
            self.sleep_length = duration;
            if idx == 0 {
                return (idx, false);
            }
            if s[idx].target_residency.0 > duration {
                let i = Teo::shallower(c, idx, duration);
                if Teo::state_ok(c, i) {
                    idx = i;
                }
            }
            if s[idx].target_residency.0 < c.tick_ns
                && self.tick_intercepts > self.total / 2 + self.total / 8
            {
                duration = c.tick_ns / 2;
            }
        }
        if (!s[idx].polling && duration >= c.tick_ns) || c.tick_stopped {
            return (idx, true);
        }
        if idx > idx0 && s[idx].target_residency.0 > c.delta_tick {
            idx = Teo::shallower(c, idx, c.delta_tick);
        }
        (idx, false)
    }

    fn reflect(&mut self, c: &Ctx, idx: usize, o: &Outcome) {
        let artificial = o.poll_timeout || (o.tick_wakeup && self.sleep_length > c.tick_ns);
        self.short_idles -= self.short_idles >> DECAY_SHIFT;
        let measured = if artificial {
            u64::MAX
        } else {
            let lat = c.states[idx].exit_latency.0;
            let mut m = o.residency;
            if m >= lat {
                m -= lat / 2;
                if m < RESIDENCY_THRESHOLD_NS {
                    self.short_idles += PULSE;
                }
            } else {
                m /= 2;
                self.short_idles += PULSE;
            }
            m
        };
        let (mut idx_timer, mut idx_duration) = (0, 0);
        for (i, st) in c.states.iter().enumerate() {
            let b = &mut self.bins[i];
            b.0 -= b.0 >> DECAY_SHIFT;
            b.1 -= b.1 >> DECAY_SHIFT;
            if st.target_residency.0 <= self.sleep_length {
                idx_timer = i;
                if st.target_residency.0 <= measured {
                    idx_duration = i;
                }
            }
        }
        self.tick_intercepts -= self.tick_intercepts >> DECAY_SHIFT;
        if idx_timer == idx_duration {
            self.bins[idx_timer].1 += PULSE;
        } else {
            self.bins[idx_duration].0 += PULSE;
            if measured < c.tick_ns {
                self.tick_intercepts += PULSE;
            }
        }
        self.total -= self.total >> DECAY_SHIFT;
        self.total += PULSE;
    }
}

// ---------------------------------------------------------------- ladder

const PROMOTION_COUNT: u32 = 4;
const DEMOTION_COUNT: u32 = 1;

/// ladder: one step deeper after 4 residencies above the state's exit latency, one step
/// shallower after one below; never the polling state unless the PM QoS limit is 0.
pub(crate) struct Ladder {
    last_idx: usize,
    last_residency: u64,
    promotions: Vec<u32>,
    demotions: Vec<u32>,
}

impl Ladder {
    pub(crate) fn new(states: &[IdleState]) -> Ladder {
        Ladder {
            last_idx: Ladder::first_idx(states),
            last_residency: 0,
            promotions: vec![0; states.len()],
            demotions: vec![0; states.len()],
        }
    }
    fn first_idx(states: &[IdleState]) -> usize {
        usize::from(states.first().is_some_and(|s| s.polling))
    }
    fn go(&mut self, old: usize, new: usize) -> (usize, bool) {
        self.promotions[old] = 0;
        self.demotions[old] = 0;
        self.last_idx = new;
        (new, true)
    }
}

impl Model for Ladder {
    fn select(&mut self, c: &Ctx) -> (usize, bool) {
        let s = c.states;
        let last = self.last_idx;
        if c.latency_req == 0 {
            return self.go(last, 0);
        }
        let first = Ladder::first_idx(s);
        let last_res = self.last_residency as i64 - s[last].exit_latency.0 as i64;
        // thresholds: promotion above the state's exit latency (not for the deepest),
        // demotion below it (not for the first usable state)
        if last + 1 < s.len()
            && !s[last + 1].disabled
            && last_res > s[last].exit_latency.0 as i64
            && s[last + 1].exit_latency.0 <= c.latency_req
        {
            self.promotions[last] += 1;
            self.demotions[last] = 0;
            if self.promotions[last] >= PROMOTION_COUNT {
                return self.go(last, last + 1);
            }
        }
        if last > first && (s[last].disabled || s[last].exit_latency.0 > c.latency_req) {
            let mut i = last - 1;
            while i > first {
                if s[i].exit_latency.0 <= c.latency_req {
                    break;
                }
                i -= 1;
            }
            return self.go(last, i);
        }
        if last > first && last_res < s[last].exit_latency.0 as i64 {
            self.demotions[last] += 1;
            self.promotions[last] = 0;
            if self.demotions[last] >= DEMOTION_COUNT {
                return self.go(last, last - 1);
            }
        }
        (last, true)
    }

    fn reflect(&mut self, _c: &Ctx, idx: usize, o: &Outcome) {
        if idx > 0 {
            self.last_idx = idx;
        }
        self.last_residency = o.residency;
    }
}

// ---------------------------------------------------------------- haltpoll

/// haltpoll: poll (up to an adaptive limit) after every halt, halt after a poll that timed
/// out; the limit grows and shrinks with each halt's length (`adjust_poll_limit`).
pub(crate) struct Haltpoll {
    params: HaltpollParams,
    limit: u64,
    last_idx: usize,
    poll_timeout: bool,
}

impl Haltpoll {
    pub(crate) fn new(params: HaltpollParams) -> Haltpoll {
        Haltpoll {
            params,
            limit: 0,
            last_idx: 0,
            poll_timeout: false,
        }
    }
}

impl Model for Haltpoll {
    fn select(&mut self, c: &Ctx) -> (usize, bool) {
        if c.states.is_empty() || c.latency_req == 0 {
            return (0, false);
        }
        if self.limit == 0 {
            return (1.min(c.states.len() - 1), true);
        }
        if self.last_idx == 0 && self.poll_timeout {
            return (1.min(c.states.len() - 1), true);
        }
        (0, false)
    }

    fn reflect(&mut self, _c: &Ctx, idx: usize, o: &Outcome) {
        self.last_idx = idx;
        self.poll_timeout = o.poll_timeout;
        if idx != 0 {
            self.limit = self.params.adjust(self.limit, o.residency).0;
        }
    }

    fn poll_limit(&self) -> Option<u64> {
        (self.limit > 0).then_some(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmlab_kernel::units::Nanos;

    fn st(name: &str, exit_us: u64, target_us: u64) -> IdleState {
        IdleState {
            name: name.into(),
            exit_latency: Nanos(exit_us * 1000),
            target_residency: Nanos(target_us * 1000),
            power_mw: None,
            polling: name == "POLL",
            disabled: false,
        }
    }

    fn ctx(states: &[IdleState], sleep: u64) -> Ctx<'_> {
        Ctx {
            states,
            latency_req: NO_LATENCY_LIMIT,
            tick_stopped: false,
            tick_ns: 4_000_000,
            sleep_length: sleep,
            delta_tick: sleep.min(4_000_000),
        }
    }

    fn three() -> Vec<IdleState> {
        vec![st("POLL", 0, 0), st("C1", 2, 2), st("C6", 100, 400)]
    }

    #[test]
    fn menu_learns_short_intervals_and_picks_a_shallow_state() {
        let s = three();
        let mut m = Menu::new();
        // first selection: no history, a far timer: the deepest state
        let c = ctx(&s, 10_000_000);
        assert_eq!(m.select(&c).0, 2);
        // woken after 50 µs every time: the typical interval wins
        for _ in 0..8 {
            let (i, _) = m.select(&c);
            m.reflect(
                &c,
                i,
                &Outcome {
                    residency: 50_000,
                    poll_timeout: false,
                    tick_wakeup: false,
                },
            );
        }
        assert_eq!(m.select(&c), (1, false));
        // a PM QoS limit below C1's exit latency leaves POLL
        let q = Ctx {
            latency_req: 1_000,
            ..c
        };
        assert_eq!(m.select(&q).0, 0);
    }

    #[test]
    fn teo_turns_shallow_when_intercepts_dominate() {
        let s = three();
        let mut t = Teo::new(3);
        let c = ctx(&s, 10_000_000);
        assert_eq!(t.select(&c).0, 2);
        for _ in 0..20 {
            let (i, _) = t.select(&c);
            t.reflect(
                &c,
                i,
                &Outcome {
                    residency: 30_000,
                    poll_timeout: false,
                    tick_wakeup: false,
                },
            );
        }
        assert_eq!(t.select(&c).0, 1);
    }

    #[test]
    fn ladder_promotes_after_four_and_demotes_after_one() {
        let s = vec![st("POLL", 0, 0), st("C1", 2, 2), st("C6", 100, 400)];
        let mut l = Ladder::new(&s);
        let c = ctx(&s, KTIME_MAX);
        let long = Outcome {
            residency: 1_000_000,
            poll_timeout: false,
            tick_wakeup: false,
        };
        let mut picks = Vec::new();
        for _ in 0..6 {
            let (i, _) = l.select(&c);
            picks.push(i);
            l.reflect(&c, i, &long);
        }
        assert_eq!(picks, vec![1, 1, 1, 1, 2, 2]);
        let short = Outcome {
            residency: 50_000,
            ..long
        };
        l.reflect(&c, 2, &short);
        assert_eq!(l.select(&c).0, 1);
    }

    #[test]
    fn haltpoll_polls_after_a_halt_once_the_limit_grew() {
        let s = vec![st("POLL", 0, 0), st("haltpoll", 1, 1)];
        let mut h = Haltpoll::new(HaltpollParams::default());
        let c = ctx(&s, KTIME_MAX);
        assert_eq!(h.select(&c), (1, true));
        // a 30 µs halt grows the limit to grow_start (50 µs): poll next
        h.reflect(
            &c,
            1,
            &Outcome {
                residency: 30_000,
                poll_timeout: false,
                tick_wakeup: false,
            },
        );
        assert_eq!(h.poll_limit(), Some(50_000));
        assert_eq!(h.select(&c), (0, false));
        h.reflect(
            &c,
            0,
            &Outcome {
                residency: 50_000,
                poll_timeout: true,
                tick_wakeup: false,
            },
        );
        assert_eq!(h.select(&c), (1, true));
    }
}
