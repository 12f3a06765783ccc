//! An external power meter as a side source, in two forms. A **counter** command prints
//! cumulative joules: it is run (`sh -c`) right before and right after each measured part,
//! and the difference is the run's energy (wrap-around at a given value, or a clear error
//! when it goes backwards). A **stream** command prints `TIMESTAMP WATTS` lines until SIGINT
//! (TIMESTAMP: Unix seconds, CLOCK_REALTIME, as `date +%s.%N` prints): it is started once
//! and writes into a pipe that pmlab reads only between measured parts (no pmlab thread
//! wakes during one); each run's energy is the trapezoid integral of the samples over the
//! run's window, clipped at its ends by linear interpolation. The window must be covered:
//! a sample at or before its start and one at or after its end, else the run fails.

use pmlab_kernel::{Direction, Metric};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long pmlab waits for a stream's first sample, and after a run for the sample that
/// closes its window.
pub const STREAM_WAIT: Duration = Duration::from_secs(5);

/// The pipe buffer asked for a stream (the meter's lines of one run must fit, or the meter
/// blocks in its writes until pmlab drains after the run): 1 MiB is ~30000 lines, ten
/// minutes at 50 Hz.
const PIPE_SIZE: i32 = 1 << 20;

/// Which meter, and how it is read.
#[derive(Debug, Clone, PartialEq)]
pub enum MeterSpec {
    /// A command printing cumulative joules; `wrap`: the value at which it wraps to 0, J.
    Counter {
        /// The shell command.
        command: String,
        /// Where the counter wraps to 0, J; None: it does not wrap.
        wrap: Option<f64>,
    },
    /// A command printing `TIMESTAMP WATTS` lines until SIGINT.
    Stream {
        /// The shell command.
        command: String,
    },
}

impl MeterSpec {
    /// Refuse an empty command or a wrap value that is not a positive number.
    pub fn validate(&self) -> Result<(), MeterError> {
        let command = match self {
            MeterSpec::Counter { command, wrap } => {
                if let Some(w) = wrap {
                    if !(w.is_finite() && *w > 0.0) {
                        return Err(MeterError::Spec(format!(
                            "the wrap value must be a positive number of joules, not {w}"
                        )));
                    }
                }
                command
            }
            MeterSpec::Stream { command } => command,
        };
        if command.trim().is_empty() {
            return Err(MeterError::Spec("the meter command is empty".into()));
        }
        Ok(())
    }
}

/// Parse a wrap value: joules, with an optional `J`/`kJ`/`MJ` unit.
pub fn parse_wrap(s: &str) -> Result<f64, MeterError> {
    let t = s.trim();
    let (num, scale) = [("MJ", 1e6), ("kJ", 1e3), ("J", 1.0)]
        .iter()
        .find_map(|(u, k)| t.strip_suffix(u).map(|n| (n.trim(), *k)))
        .unwrap_or((t, 1.0));
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => Err(MeterError::Spec(format!(
            "wrap value {s:?}: expected a positive number of joules (e.g. 262143.99, 262kJ)"
        ))),
    }
}

/// Why the meter could not be used, or a run's energy could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum MeterError {
    /// The meter settings are invalid, in words.
    #[error("meter: {0}")]
    Spec(String),
    /// The meter command could not be started.
    #[error("meter command `{command}` could not start")]
    Start {
        /// The command, as given.
        command: String,
        /// Why it could not start.
        #[source]
        source: std::io::Error,
    },
    /// The counter command exited unsuccessfully.
    #[error("meter command `{command}` failed: {status}")]
    Failed {
        /// The command, as given.
        command: String,
        /// Its exit status, in words.
        status: String,
    },
    /// The meter printed something that is not a number (or `TIMESTAMP WATTS`).
    #[error("meter command `{command}` printed {text:?}: expected {expected}")]
    Garbage {
        /// The command, as given.
        command: String,
        /// What it printed.
        text: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The counter read less after the run than before (give a wrap value if it wraps).
    #[error(
        "meter counter went backwards ({before} J before the run, {after} J after): give \
         --meter-wrap J if it wraps"
    )]
    Backwards {
        /// The reading before the run, J.
        before: f64,
        /// The reading after the run, J.
        after: f64,
    },
    /// The counter read more than its wrap value.
    #[error("meter counter read {value} J, beyond its wrap value {wrap} J")]
    BeyondWrap {
        /// The reading, J.
        value: f64,
        /// The wrap value, J.
        wrap: f64,
    },
    /// The stream command exited while it should have been running.
    #[error("meter stream `{command}` exited ({status}) {when}")]
    Exited {
        /// The command, as given.
        command: String,
        /// Its exit status, in words.
        status: String,
        /// When (e.g. `before the run`).
        when: &'static str,
    },
    /// The stream printed no sample in time.
    #[error("meter stream `{command}`: no sample within {waited:?} {when}")]
    Silent {
        /// The command, as given.
        command: String,
        /// How long pmlab waited.
        waited: Duration,
        /// When (e.g. `after the run`).
        when: &'static str,
    },
    /// The stream's timestamps went backwards.
    #[error("meter stream: timestamps go backwards ({previous} then {next})")]
    Unordered {
        /// The earlier sample's time, Unix s.
        previous: f64,
        /// The next sample's time, Unix s.
        next: f64,
    },
    #[error(
        "meter stream: samples ({first}..{last}, Unix s) do not cover the run's window \
         ({start}..{end}); is TIMESTAMP Unix seconds (date +%s.%N)?"
    )]
    /// The stream's samples do not cover the run's window.
    Uncovered {
        /// First sample's time, Unix s.
        first: f64,
        /// Last sample's time, Unix s.
        last: f64,
        /// The run's start, Unix s.
        start: f64,
        /// The run's end, Unix s.
        end: f64,
    },
    /// Reading the stream failed.
    #[error("reading the meter stream")]
    Read(#[source] std::io::Error),
}

/// One stream sample: Unix seconds, watts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Time, Unix s.
    pub t: f64,
    /// Power, W.
    pub watts: f64,
}

/// A window's integral.
#[derive(Debug, Clone, PartialEq)]
pub struct Integral {
    /// Energy over the window, J.
    pub joules: f64,
    /// Samples inside the window.
    pub samples: usize,
    /// The longest time between two samples used, s.
    pub max_gap_s: f64,
    /// Samples per second over the samples used.
    pub sample_hz: f64,
}

/// Energy over `[start, end]` from samples ordered by time: the trapezoid rule over the
/// samples inside, the ends interpolated linearly from the samples around them. The
/// samples must cover the window (one at or before `start`, one at or after `end`).
pub(crate) fn integrate(samples: &[Sample], start: f64, end: f64) -> Result<Integral, MeterError> {
    let uncovered = || MeterError::Uncovered {
        first: samples.first().map_or(f64::NAN, |s| s.t),
        last: samples.last().map_or(f64::NAN, |s| s.t),
        start,
        end,
    };
    let lo = samples
        .iter()
        .rposition(|s| s.t <= start)
        .ok_or_else(uncovered)?;
    let hi = samples[lo..]
        .iter()
        .position(|s| s.t >= end.max(start))
        .map(|i| i + lo)
        .ok_or_else(uncovered)?;
    let at = |t: f64, a: &Sample, b: &Sample| {
        if b.t == a.t {
            a.watts
        } else {
            a.watts + (b.watts - a.watts) * (t - a.t) / (b.t - a.t)
        }
    };
    // The points of the clipped polyline: start, the samples strictly inside, end.
    let mut points = Vec::with_capacity(hi - lo + 2);
    points.push((
        start,
        at(start, &samples[lo], &samples[lo + 1.min(hi - lo)]),
    ));
    points.extend(
        samples[lo..=hi]
            .iter()
            .filter(|s| s.t > start && s.t < end)
            .map(|s| (s.t, s.watts)),
    );
    let before_end = &samples[hi.saturating_sub(1).max(lo)];
    points.push((end, at(end, before_end, &samples[hi])));
    let joules = points
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
        .sum();
    let used = &samples[lo..=hi];
    let max_gap_s = used.windows(2).map(|w| w[1].t - w[0].t).fold(0.0, f64::max);
    let span = used[used.len() - 1].t - used[0].t;
    Ok(Integral {
        joules,
        samples: points.len() - 2,
        max_gap_s,
        sample_hz: if span > 0.0 {
            (used.len() - 1) as f64 / span
        } else {
            0.0
        },
    })
}

/// Parse one stream line; `None` for a blank or `#` comment line.
fn parse_line(command: &str, line: &str) -> Result<Option<Sample>, MeterError> {
    let l = line.trim();
    if l.is_empty() || l.starts_with('#') {
        return Ok(None);
    }
    let mut it = l.split_whitespace();
    let t = it.next().and_then(|x| x.parse::<f64>().ok());
    let w = it.next().and_then(|x| x.parse::<f64>().ok());
    match (t, w, it.next()) {
        (Some(t), Some(watts), None) if t.is_finite() && watts.is_finite() && watts >= 0.0 => {
            Ok(Some(Sample { t, watts }))
        }
        _ => Err(MeterError::Garbage {
            command: command.into(),
            text: line.into(),
            expected: "`TIMESTAMP WATTS` (Unix seconds, watts >= 0)",
        }),
    }
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Process groups of running stream meters, killed by the signal path before it exits.
static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Kill every running stream meter (the signal path calls this before exiting).
pub(crate) fn kill_live() {
    for pgid in LIVE.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        signal_group(pgid, rustix::process::Signal::KILL);
    }
}

/// Send `sig` to process group `pgid` (> 0); a group already gone is not an error.
fn signal_group(pgid: i32, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, sig);
    }
}

/// A started stream meter.
struct Stream {
    command: String,
    child: Child,
    out: ChildStdout,
    partial: Vec<u8>,
    samples: Vec<Sample>,
    eof: bool,
    start: Option<f64>,
}

impl Stream {
    fn start(command: &str) -> Result<Stream, MeterError> {
        // Its own process group: the terminal's ^C is pmlab's to handle, and stopping the
        // meter reaches every process the shell started.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|source| MeterError::Start {
                command: command.into(),
                source,
            })?;
        let out = child.stdout.take().expect("piped stdout");
        // A failed resize leaves the default size; non-blocking so a drain never waits.
        let _ = rustix::pipe::fcntl_setpipe_size(&out, PIPE_SIZE as usize);
        let flags = rustix::fs::fcntl_getfl(&out).map_err(|e| MeterError::Start {
            command: command.into(),
            source: e.into(),
        })?;
        rustix::fs::fcntl_setfl(&out, flags | rustix::fs::OFlags::NONBLOCK).map_err(|e| {
            MeterError::Start {
                command: command.into(),
                source: e.into(),
            }
        })?;
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id() as i32);
        let mut s = Stream {
            command: command.into(),
            child,
            out,
            partial: Vec::new(),
            samples: Vec::new(),
            eof: false,
            start: None,
        };
        s.wait_for(None, "before its first sample")?;
        Ok(s)
    }

    /// Read what the pipe holds, without blocking.
    fn drain(&mut self) -> Result<(), MeterError> {
        let mut buf = [0u8; 65536];
        loop {
            match self.out.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.partial.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(MeterError::Read(e)),
            }
        }
        while let Some(i) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=i).collect();
            let line = String::from_utf8_lossy(&line).into_owned();
            if let Some(s) = parse_line(&self.command, &line)? {
                if let Some(p) = self.samples.last() {
                    if s.t < p.t {
                        return Err(MeterError::Unordered {
                            previous: p.t,
                            next: s.t,
                        });
                    }
                }
                self.samples.push(s);
            }
        }
        Ok(())
    }

    fn exited(&mut self, when: &'static str) -> MeterError {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => s.to_string(),
            _ => "closed its output".into(),
        };
        MeterError::Exited {
            command: self.command.clone(),
            status,
            when,
        }
    }

    /// Block (in poll(2), woken by data only) until a sample at or after `until` (any
    /// sample when `None`) has arrived, the meter exits, or [`STREAM_WAIT`] passes.
    fn wait_for(&mut self, until: Option<f64>, when: &'static str) -> Result<(), MeterError> {
        let deadline = Instant::now() + STREAM_WAIT;
        loop {
            self.drain()?;
            let done = match (until, self.samples.last()) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(t), Some(s)) => s.t >= t,
            };
            if done {
                return Ok(());
            }
            if self.eof {
                return Err(self.exited(when));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(MeterError::Silent {
                    command: self.command.clone(),
                    waited: STREAM_WAIT,
                    when,
                });
            }
            use rustix::event::{poll, PollFd, PollFlags, Timespec};
            let mut pfd = [PollFd::new(&self.out, PollFlags::IN)];
            let ts = Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: left.subsec_nanos().max(1) as i64,
            };
            let _ = poll(&mut pfd, Some(&ts));
        }
    }

    fn before(&mut self) -> Result<(), MeterError> {
        self.drain()?;
        if self.eof {
            return Err(self.exited("before the run"));
        }
        // Keep the last sample: it opens the window.
        let keep = self.samples.len().saturating_sub(1);
        self.samples.drain(..keep);
        if self.samples.is_empty() {
            self.wait_for(None, "before the run")?;
        }
        self.start = Some(now_unix());
        Ok(())
    }

    fn after(&mut self) -> Result<Vec<Metric>, MeterError> {
        let end = now_unix();
        let Some(start) = self.start.take() else {
            return Ok(Vec::new());
        };
        self.wait_for(Some(end), "before the end of the run")?;
        let i = integrate(&self.samples, start, end)?;
        let window = end - start;
        Ok(vec![
            Metric::new("energy.meter.J", i.joules, "J", Direction::Lower),
            Metric::new("power.meter.W", i.joules / window, "W", Direction::Lower),
            Metric::new("meter.window_s", window, "s", Direction::Neutral),
            Metric::new("meter.start_unix_s", start, "s", Direction::Neutral),
            Metric::new("meter.samples", i.samples as f64, "", Direction::Neutral),
            Metric::new("meter.sample_hz", i.sample_hz, "Hz", Direction::Neutral),
            Metric::new(
                "meter.max_gap_ms",
                i.max_gap_s * 1e3,
                "ms",
                Direction::Neutral,
            ),
        ])
    }
}

impl Drop for Stream {
    /// SIGINT to the meter's group, then SIGKILL after a second; always reaped.
    fn drop(&mut self) {
        let pgid = self.child.id() as i32;
        signal_group(pgid, rustix::process::Signal::INT);
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        signal_group(pgid, rustix::process::Signal::KILL);
        let _ = self.child.wait();
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| *p != pgid);
    }
}

/// Run a counter command once: its joules and when it ran (the middle of the call, Unix s).
fn read_counter(command: &str) -> Result<(f64, f64, Duration), MeterError> {
    let t0 = now_unix();
    let began = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| MeterError::Start {
            command: command.into(),
            source,
        })?;
    let took = began.elapsed();
    if !out.status.success() {
        return Err(MeterError::Failed {
            command: command.into(),
            status: out.status.to_string(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match text.trim().parse::<f64>() {
        Ok(j) if j.is_finite() && j >= 0.0 => Ok((j, t0 + took.as_secs_f64() / 2.0, took)),
        _ => Err(MeterError::Garbage {
            command: command.into(),
            text,
            expected: "one number: cumulative joules",
        }),
    }
}

enum Kind {
    Counter {
        command: String,
        wrap: Option<f64>,
        before: Option<(f64, f64, Duration)>,
    },
    Stream(Box<Stream>),
}

/// The meter as a side source (`crate::machine::SideSource`).
pub struct MeterSource {
    kind: Kind,
}

impl MeterSource {
    /// Check the spec and start the meter: a counter is read once (it must print a number),
    /// a stream is started and must print a valid first sample within [`STREAM_WAIT`].
    pub fn start(spec: &MeterSpec) -> Result<MeterSource, MeterError> {
        spec.validate()?;
        let kind = match spec {
            MeterSpec::Counter { command, wrap } => {
                let (j, _, _) = read_counter(command)?;
                if let Some(w) = wrap {
                    if j >= *w {
                        return Err(MeterError::BeyondWrap { value: j, wrap: *w });
                    }
                }
                Kind::Counter {
                    command: command.clone(),
                    wrap: *wrap,
                    before: None,
                }
            }
            MeterSpec::Stream { command } => Kind::Stream(Box::new(Stream::start(command)?)),
        };
        Ok(MeterSource { kind })
    }

    /// Read the meter right before a measured part.
    pub fn before(&mut self) -> Result<(), MeterError> {
        match &mut self.kind {
            Kind::Counter {
                command, before, ..
            } => {
                *before = Some(read_counter(command)?);
                Ok(())
            }
            Kind::Stream(s) => s.before(),
        }
    }

    /// Read the meter right after a measured part: the run's energy and how it was measured.
    pub fn after(&mut self) -> Result<Vec<Metric>, MeterError> {
        match &mut self.kind {
            Kind::Counter {
                command,
                wrap,
                before,
            } => {
                let Some((b, tb, took_b)) = before.take() else {
                    return Ok(Vec::new());
                };
                let (a, ta, took_a) = read_counter(command)?;
                let joules = match (a >= b, wrap) {
                    (true, _) => a - b,
                    (false, Some(w)) if a < *w && b < *w => *w - b + a,
                    (false, Some(w)) => {
                        return Err(MeterError::BeyondWrap {
                            value: a.max(b),
                            wrap: *w,
                        })
                    }
                    (false, None) => {
                        return Err(MeterError::Backwards {
                            before: b,
                            after: a,
                        })
                    }
                };
                let window = ta - tb;
                Ok(vec![
                    Metric::new("energy.meter.J", joules, "J", Direction::Lower),
                    Metric::new("power.meter.W", joules / window, "W", Direction::Lower),
                    Metric::new("meter.window_s", window, "s", Direction::Neutral),
                    Metric::new("meter.start_unix_s", tb, "s", Direction::Neutral),
                    Metric::new(
                        "meter.read_ms",
                        took_a.max(took_b).as_secs_f64() * 1e3,
                        "ms",
                        Direction::Neutral,
                    ),
                ])
            }
            Kind::Stream(s) => s.after(),
        }
    }
}

impl crate::machine::SideSource for MeterSource {
    fn before(&mut self) -> Result<(), pmlab_workload::ProbeError> {
        Ok(MeterSource::before(self)?)
    }
    fn after(&mut self) -> Result<Vec<Metric>, pmlab_workload::ProbeError> {
        Ok(MeterSource::after(self)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64, watts: f64) -> Sample {
        Sample { t, watts }
    }

    #[test]
    fn trapezoid_is_exact_on_a_piecewise_linear_profile_and_clips_the_ends() {
        // 0 W at t=0 rising to 10 W at t=1, then flat: ∫ over [0.5, 2] = 0.5*(5+10)/2 + 10.
        let v = [s(0.0, 0.0), s(1.0, 10.0), s(2.0, 10.0), s(3.0, 10.0)];
        let i = integrate(&v, 0.5, 2.0).unwrap();
        assert!((i.joules - 13.75).abs() < 1e-12, "{}", i.joules);
        assert_eq!(i.samples, 1, "t=1 inside; t=2 is the end itself");
        assert_eq!(i.max_gap_s, 1.0);
        // A window inside one interval.
        let i = integrate(&v, 0.25, 0.75).unwrap();
        assert!((i.joules - 2.5).abs() < 1e-12, "{}", i.joules);
        assert_eq!(i.samples, 0);
    }

    #[test]
    fn a_sine_at_50_hz_integrates_within_a_tenth_of_a_percent() {
        let p = |t: f64| 10.0 + 5.0 * (t * 3.0).sin();
        let v: Vec<Sample> = (0..200)
            .map(|k| s(k as f64 / 50.0, p(k as f64 / 50.0)))
            .collect();
        let (a, b): (f64, f64) = (0.313, 3.171);
        let exact = 10.0 * (b - a) - 5.0 / 3.0 * ((3.0 * b).cos() - (3.0 * a).cos());
        let i = integrate(&v, a, b).unwrap();
        assert!(
            ((i.joules - exact) / exact).abs() < 1e-3,
            "{} vs {exact}",
            i.joules
        );
        assert!((i.sample_hz - 50.0).abs() < 1e-6);
    }

    #[test]
    fn samples_that_do_not_cover_the_window_are_refused() {
        let v = [s(1.0, 5.0), s(2.0, 5.0)];
        for (a, b) in [(0.5, 1.5), (1.5, 2.5), (0.0, 3.0)] {
            let e = integrate(&v, a, b).unwrap_err();
            assert!(matches!(e, MeterError::Uncovered { .. }), "{e}");
        }
        assert!(integrate(&[], 0.0, 1.0).is_err());
        assert_eq!(integrate(&v, 1.0, 2.0).unwrap().joules, 5.0);
    }

    #[test]
    fn lines_parse_or_are_refused() {
        assert_eq!(
            parse_line("m", "1764230000.25 12.5\n").unwrap(),
            Some(s(1764230000.25, 12.5))
        );
        assert_eq!(parse_line("m", "# watts\n").unwrap(), None);
        assert_eq!(parse_line("m", "\n").unwrap(), None);
        for bad in ["12.5\n", "t 12\n", "1 2 3\n", "1 -2\n", "1 nan\n"] {
            let e = parse_line("m", bad).unwrap_err().to_string();
            assert!(e.contains("TIMESTAMP WATTS"), "{bad}: {e}");
        }
    }

    #[test]
    fn specs_and_wrap_values_are_checked() {
        assert!(MeterSpec::Stream {
            command: " ".into()
        }
        .validate()
        .is_err());
        let c = |w| MeterSpec::Counter {
            command: "cat f".into(),
            wrap: Some(w),
        };
        assert!(c(0.0).validate().is_err());
        assert!(c(f64::NAN).validate().is_err());
        assert!(c(5.0).validate().is_ok());
        assert_eq!(parse_wrap("262kJ").unwrap(), 262_000.0);
        assert_eq!(parse_wrap("100 J").unwrap(), 100.0);
        assert!(parse_wrap("-1").is_err());
        assert!(parse_wrap("lots").is_err());
    }

    fn counter_file(j: &str) -> (tempfile::TempDir, String) {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("j");
        std::fs::write(&f, j).unwrap();
        let cmd = format!("cat {}", f.display());
        (d, cmd)
    }

    #[test]
    fn a_counter_wraps_at_its_wrap_value_and_refuses_going_backwards_without_one() {
        let (d, cmd) = counter_file("90\n");
        let f = d.path().join("j");
        let mut m = MeterSource::start(&MeterSpec::Counter {
            command: cmd.clone(),
            wrap: Some(100.0),
        })
        .unwrap();
        m.before().unwrap();
        std::fs::write(&f, "5\n").unwrap();
        let out = m.after().unwrap();
        assert_eq!(out[0].name, "energy.meter.J");
        assert!((out[0].value - 15.0).abs() < 1e-9, "{}", out[0].value);

        std::fs::write(&f, "90\n").unwrap();
        let mut m = MeterSource::start(&MeterSpec::Counter {
            command: cmd.clone(),
            wrap: None,
        })
        .unwrap();
        m.before().unwrap();
        std::fs::write(&f, "5\n").unwrap();
        let e = m.after().unwrap_err().to_string();
        assert!(
            e.contains("went backwards") && e.contains("--meter-wrap"),
            "{e}"
        );

        std::fs::write(&f, "ninety\n").unwrap();
        let e = MeterSource::start(&MeterSpec::Counter {
            command: cmd,
            wrap: None,
        })
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("ninety") && e.contains("cumulative joules"),
            "{e}"
        );
        let e = MeterSource::start(&MeterSpec::Counter {
            command: "exit 3".into(),
            wrap: None,
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("exit status: 3"), "{e}");
    }

    #[test]
    fn a_stream_that_dies_or_prints_garbage_fails_the_run() {
        // Two good samples, then garbage.
        let mut m = MeterSource::start(&MeterSpec::Stream {
            command: "echo \"$(date +%s.%N) 5\"; sleep 0.2; echo 'oops'; sleep 5".into(),
        })
        .unwrap();
        m.before().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let e = m.after().unwrap_err().to_string();
        assert!(e.contains("oops"), "{e}");
        // One sample, then it exits.
        let mut m = MeterSource::start(&MeterSpec::Stream {
            command: "echo \"$(date +%s.%N) 5\"; sleep 0.1; exit 4".into(),
        })
        .unwrap();
        m.before().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let e = m.after().unwrap_err().to_string();
        assert!(e.contains("exited") && e.contains("before the end"), "{e}");
        // Never a sample.
        let e = MeterSource::start(&MeterSpec::Stream {
            command: "exit 0".into(),
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("exited") && e.contains("first sample"), "{e}");
    }

    #[test]
    fn a_stream_is_integrated_over_the_run_window_and_stopped_at_the_end() {
        // ~40 Hz, a triangle wave between 7 and 9 W with a 1 s period.
        let script = "while :; do t=$(date +%s.%N); \
            echo \"$t $(echo \"$t\" | awk '{f=$1-int($1); d=2*f-1; if (d<0) d=-d; \
            printf \"%.6f\", 7+2*d}')\"; sleep 0.025; done";
        let mut m = MeterSource::start(&MeterSpec::Stream {
            command: script.into(),
        })
        .unwrap();
        let pid = match &m.kind {
            Kind::Stream(s) => s.child.id() as i32,
            _ => unreachable!(),
        };
        m.before().unwrap();
        std::thread::sleep(Duration::from_millis(700));
        let out = m.after().unwrap();
        let get = |n: &str| out.iter().find(|x| x.name == n).unwrap().value;
        let (start, window) = (get("meter.start_unix_s"), get("meter.window_s"));
        let p = |t: f64| 7.0 + 2.0 * (2.0 * (t - t.floor()) - 1.0).abs();
        let steps = 100_000;
        let dt = window / steps as f64;
        let exact: f64 = (0..steps)
            .map(|k| p(start + (k as f64 + 0.5) * dt) * dt)
            .sum();
        let j = get("energy.meter.J");
        assert!((j - exact).abs() < exact * 0.01, "{j} vs {exact}");
        assert!(get("meter.sample_hz") > 10.0);
        drop(m);
        let alive =
            rustix::process::test_kill_process(rustix::process::Pid::from_raw(pid).expect("a pid"))
                .is_ok();
        assert!(!alive, "the meter was stopped and reaped");
    }
}
