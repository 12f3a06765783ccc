//! `cmd`: an external program, without a shell unless asked, as the invoking user (the
//! `SUDO_UID`/`SUDO_GID` of a sudo'ed root) unless `as_root`. Its metric is wall time or a
//! number parsed from its output. It runs in its own process group, which is SIGKILLed
//! when it ends (no stray descendants), on errors, panics and cancellation; the child
//! also has PR_SET_PDEATHSIG.

use crate::spec::CmdMetric;
use crate::{cancel, Probe, WorkloadError, WorkloadResult, WorkloadSpec};
use pmlab_kernel::{Direction, Metric, Nanos};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::Instant;

pub(crate) const PRIMARY_WALL: &str = "wall_s";
/// Output kept per stream (the tail), for the regex and error messages.
const KEEP_BYTES: usize = 16 << 20;
const TAIL_LINES: usize = 20;

/// The uid/gid to run a user's program as: the sudo caller's when root via sudo, else none
/// (as is). The one sudo rule of pmlab (`cmd` workloads, `pmlab record`).
pub fn invoking_user(as_root: bool) -> Result<Option<(u32, u32)>, WorkloadError> {
    if as_root || !pmlab_kernel::sysinfo::item::is_root() {
        return Ok(None);
    }
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (var("SUDO_UID"), var("SUDO_GID")) {
        (Some(u), Some(g)) => {
            let parse = |name: &str, v: &str| {
                v.parse::<u32>()
                    .map_err(|_| WorkloadError::Invalid(format!("{name}={v:?} is not a number")))
            };
            Ok(Some((parse("SUDO_UID", &u)?, parse("SUDO_GID", &g)?)))
        }
        (Some(_), None) => Err(WorkloadError::Invalid(
            "SUDO_UID is set but SUDO_GID is not; use --as-root".into(),
        )),
        _ => Ok(None),
    }
}

/// Kills the command's process group and reaps the command if it is still there.
struct Running {
    child: Child,
    pgid: i32,
    waited: bool,
    _registration: Option<cancel::Registration>,
}

impl Running {
    fn kill_group(&self) {
        cancel::kill_group(self.pgid);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill_group();
        if !self.waited {
            let _ = self.child.wait();
        }
    }
}

fn read_tail(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    kept.extend_from_slice(&buf[..n]);
                    if kept.len() > 2 * KEEP_BYTES {
                        kept.drain(..kept.len() - KEEP_BYTES);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        kept
    })
}

/// The last `n` lines of `text`, or "(no output)".
fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(n)..].join("\n");
    if tail.trim().is_empty() {
        "(no output)".into()
    } else {
        tail
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        _ => format!("ended with {status}"),
    }
}

/// The value of the last match of the metric's regex (its capture group, or the whole match).
fn parse_metric(m: &CmdMetric, program: &str, output: &str) -> Result<f64, WorkloadError> {
    let re = regex::Regex::new(&m.regex)
        .map_err(|e| WorkloadError::Invalid(format!("--metric-regex: {e}")))?;
    let no_match = || WorkloadError::RegexNoMatch {
        regex: m.regex.clone(),
        program: program.to_string(),
        tail: tail_lines(output, 10),
    };
    let caps = re.captures_iter(output).last().ok_or_else(no_match)?;
    let text = caps
        .get(1)
        .or_else(|| caps.get(0))
        .map(|g| g.as_str())
        .unwrap_or("");
    text.trim()
        .parse::<f64>()
        .map_err(|_| WorkloadError::RegexNoMatch {
            regex: m.regex.clone(),
            program: program.to_string(),
            tail: format!(
                "(it matched {text:?}, which is not a number)\n{}",
                tail_lines(output, 10)
            ),
        })
}

pub(crate) fn run(
    spec: &WorkloadSpec,
    probe: &mut dyn Probe,
) -> Result<WorkloadResult, WorkloadError> {
    let WorkloadSpec::Cmd {
        argv,
        shell,
        as_root,
        metric,
    } = spec
    else {
        unreachable!("cmd::run takes a Cmd spec")
    };
    let display = argv.join(" ");
    let mut command = if *shell {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(&display);
        c
    } else {
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        c
    };
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some((uid, gid)) = invoking_user(*as_root)? {
        command.uid(uid).gid(gid);
    }
    let parent = rustix::process::getpid();
    // SAFETY: runs between fork and exec; only raw syscalls.
    unsafe {
        command.pre_exec(move || {
            crate::children::die_with(parent);
            Ok(())
        });
    }

    probe.before().map_err(WorkloadError::Probe)?;
    let t0 = Instant::now();
    let mut child = command.spawn().map_err(|e| WorkloadError::Spawn {
        program: if *shell {
            "/bin/sh".into()
        } else {
            argv[0].clone()
        },
        source: e,
    })?;
    let pgid = child.id() as i32;
    let stdout = read_tail(child.stdout.take().expect("piped stdout"));
    let stderr = read_tail(child.stderr.take().expect("piped stderr"));
    let mut running = Running {
        child,
        pgid,
        waited: false,
        _registration: cancel::register_group(pgid),
    };
    let status = loop {
        match running.child.wait() {
            Ok(s) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(WorkloadError::io("waiting for the command", e)),
        }
    };
    running.waited = true;
    let wall = t0.elapsed();
    // Descendants left behind would hold the output pipes open and outlive the run.
    running.kill_group();
    drop(running);
    let out = String::from_utf8_lossy(&stdout.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
    if cancel::is_requested() {
        return Err(WorkloadError::Cancelled);
    }
    if !status.success() {
        return Err(WorkloadError::CmdFailed {
            program: display,
            status: describe(status),
            stderr_tail: tail_lines(&err, TAIL_LINES),
        });
    }
    probe.after().map_err(WorkloadError::Probe)?;

    let wall_metric = Metric::new(PRIMARY_WALL, wall.as_secs_f64(), "s", Direction::Lower);
    let metrics = match metric {
        Some(m) => {
            let both = format!("{out}\n{err}");
            let value = parse_metric(m, &display, &both)?;
            let dir = if m.higher_is_better {
                Direction::Higher
            } else {
                Direction::Lower
            };
            vec![
                Metric::new(m.name.clone(), value, m.unit.clone(), dir),
                wall_metric,
            ]
        }
        None => vec![wall_metric],
    };
    Ok(WorkloadResult {
        metrics,
        wall: Nanos(wall.as_nanos() as u64),
        histogram: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoProbe;

    fn cmd(argv: &[&str], shell: bool, metric: Option<CmdMetric>) -> WorkloadSpec {
        WorkloadSpec::Cmd {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            shell,
            as_root: true,
            metric,
        }
    }

    fn metric(regex: &str) -> Option<CmdMetric> {
        Some(CmdMetric {
            regex: regex.into(),
            name: "ops".into(),
            unit: "ops/s".into(),
            higher_is_better: true,
        })
    }

    #[test]
    fn wall_time_of_a_program() {
        let r = run(&cmd(&["true"], false, None), &mut NoProbe).unwrap();
        assert_eq!(r.metrics[0].name, PRIMARY_WALL);
    }

    #[test]
    fn metric_from_output_last_match_wins() {
        let r = run(
            &cmd(
                &["printf 'ops/sec: 1.5\\nops/sec: 42.25\\n'"],
                true,
                metric(r"ops/sec: ([0-9.]+)"),
            ),
            &mut NoProbe,
        )
        .unwrap();
        assert_eq!(r.metrics[0].name, "ops");
        assert_eq!(r.metrics[0].value, 42.25);
        assert_eq!(r.metrics[0].direction, Direction::Higher);
    }

    #[test]
    fn no_match_shows_regex_and_output_tail() {
        let e = run(
            &cmd(
                &["echo", "hello there"],
                false,
                metric(r"ops/sec: ([0-9.]+)"),
            ),
            &mut NoProbe,
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("ops/sec: ([0-9.]+)") && s.contains("hello there"),
            "{s}"
        );
    }

    #[test]
    fn failure_reports_status_and_stderr() {
        let e = run(&cmd(&["echo oops >&2; exit 3"], true, None), &mut NoProbe)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("exited with status 3") && e.contains("oops"),
            "{e}"
        );
    }

    #[test]
    fn missing_program_is_named() {
        let e = run(&cmd(&["/nonexistent/prog"], false, None), &mut NoProbe).unwrap_err();
        let cause = std::error::Error::source(&e)
            .map(|c| c.to_string())
            .unwrap_or_default();
        assert!(
            e.to_string().contains("/nonexistent/prog") && cause.contains("No such file"),
            "{e}: {cause}"
        );
    }

    #[test]
    fn without_shell_metacharacters_are_literal() {
        let r = run(
            &cmd(
                &["echo", "$HOME;", "x"],
                false,
                metric(r"(?m)^\$HOME; (x)$"),
            ),
            &mut NoProbe,
        );
        // "x" is not a number: the error proves the literal text reached the output.
        let e = r.unwrap_err().to_string();
        assert!(e.contains("\"x\""), "{e}");
    }
}
