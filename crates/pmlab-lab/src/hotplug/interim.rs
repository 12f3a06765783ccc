//! TEMPORARY adapters, to be deleted when the crates they stand in for land:
//! a cpuhp tracer on a private tracefs instance (→ `pmlab_trace::record::Recorder`),
//! its text parser (→ `pmlab_trace::open`), the per-operation step breakdown
//! (→ `pmlab_analysis::hotplug`) and loader commands (→ `pmlab run KIND`).

use std::fs;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::loaders::{LoaderCommand, LoaderKind};
use super::states::{ArchRange, StateTable};
use super::sysfs::write_value;
use super::sysfs::Direction;
use super::trace::{OpTrace, StepTime};
use super::HotplugError;

/// Loader commands from system tools, until `pmlab run` exists.
pub fn loader_command(kind: LoaderKind) -> LoaderCommand {
    let sh = |script: &str| LoaderCommand {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
    };
    match kind {
        LoaderKind::Spin => sh("while :; do :; done"),
        LoaderKind::Wakeup => LoaderCommand {
            program: "cyclictest".into(),
            args: ["-q", "-t", "1", "-i", "1000"].map(String::from).to_vec(),
        },
        LoaderKind::Messaging => LoaderCommand {
            program: "perf".into(),
            args: ["bench", "sched", "messaging", "-g", "1", "-l", "100000000"]
                .map(String::from)
                .to_vec(),
        },
    }
}

/// A private tracefs instance recording cpuhp events with the mono clock; removed on drop.
pub struct InterimTracer {
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<String>>,
}

impl InterimTracer {
    pub fn start(tracefs: &Path) -> Result<InterimTracer, HotplugError> {
        let dir = tracefs.join(format!("instances/pmlab-hotplug-{}", std::process::id()));
        fs::create_dir(&dir).map_err(|source| HotplugError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut t = InterimTracer {
            dir: dir.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
        };
        write_value(&dir.join("trace_clock"), "mono")?;
        write_value(&dir.join("buffer_size_kb"), "4096")?;
        write_value(&dir.join("events/cpuhp/enable"), "1")?;
        write_value(&dir.join("tracing_on"), "1")?;
        let pipe = dir.join("trace_pipe");
        let stop = t.stop.clone();
        let mut f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe)
            .map_err(|source| HotplugError::Io { path: pipe, source })?;
        t.reader = Some(std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match f.read(&mut buf) {
                    Ok(0) => {}
                    Ok(n) => {
                        out.extend_from_slice(&buf[..n]);
                        continue;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break,
                }
                if stop.load(Ordering::Acquire) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            String::from_utf8_lossy(&out).into_owned()
        }));
        Ok(t)
    }

    /// Stop, drain, remove the instance and return the events.
    pub fn stop(mut self) -> Result<Vec<CpuhpEvent>, HotplugError> {
        let text = self.finish();
        Ok(parse_text(&text))
    }

    fn finish(&mut self) -> String {
        let _ = write_value(&self.dir.join("tracing_on"), "0");
        // Let the reader drain what is buffered.
        std::thread::sleep(Duration::from_millis(50));
        self.stop.store(true, Ordering::Release);
        let text = self
            .reader
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let _ = write_value(&self.dir.join("events/cpuhp/enable"), "0");
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        text
    }
}

impl Drop for InterimTracer {
    fn drop(&mut self) {
        if self.reader.is_some() {
            self.finish();
        }
    }
}

/// One cpuhp tracepoint hit. `cpu` is the CPU being plugged; `exec_cpu` where it ran.
#[derive(Debug, Clone, PartialEq)]
pub enum CpuhpEvent {
    Enter {
        ts: u64,
        exec_cpu: u32,
        pid: i32,
        cpu: u32,
        target: i32,
        step: i32,
        callback: String,
    },
    Exit {
        ts: u64,
        exec_cpu: u32,
        pid: i32,
        cpu: u32,
        state: i32,
        step: i32,
        ret: i32,
    },
}

impl CpuhpEvent {
    fn ts(&self) -> u64 {
        match self {
            CpuhpEvent::Enter { ts, .. } | CpuhpEvent::Exit { ts, .. } => *ts,
        }
    }
    fn cpu(&self) -> u32 {
        match self {
            CpuhpEvent::Enter { cpu, .. } | CpuhpEvent::Exit { cpu, .. } => *cpu,
        }
    }
}

/// The steps of one operation on `cpu` whose events fall in `[start_ns, end_ns]`: enter/exit
/// pairs matched per task, nesting (AP steps inside the control CPU's kick) resolved into
/// exclusive times, rollback steps marked.
pub fn breakdown(
    events: &[CpuhpEvent],
    cpu: u32,
    dir: Direction,
    start_ns: u64,
    end_ns: u64,
    table: &StateTable,
) -> Option<OpTrace> {
    let arch: ArchRange = table.arch_range();
    let mut open: Vec<(i32, i32, u64, u32, i32, String)> = Vec::new(); // pid, step, ts, exec_cpu, target, cb
    let mut steps: Vec<StepTime> = Vec::new();
    for e in events
        .iter()
        .filter(|e| e.cpu() == cpu && e.ts() >= start_ns && e.ts() <= end_ns)
    {
        match e {
            CpuhpEvent::Enter {
                ts,
                exec_cpu,
                pid,
                target,
                step,
                callback,
                ..
            } => open.push((*pid, *step, *ts, *exec_cpu, *target, callback.clone())),
            CpuhpEvent::Exit {
                ts, pid, step, ret, ..
            } => {
                let Some(i) = open.iter().rposition(|o| o.0 == *pid && o.1 == *step) else {
                    continue;
                };
                let (_, step, start, exec_cpu, target, callback) = open.remove(i);
                let rollback = match dir {
                    Direction::Down => target > step,
                    Direction::Up => target < step,
                };
                steps.push(StepTime {
                    state: step,
                    name: table.name_of(step).unwrap_or("?").to_string(),
                    callback,
                    exec_cpu,
                    on_target: exec_cpu == cpu,
                    start_ns: start,
                    duration_ns: ts.saturating_sub(start),
                    exclusive_ns: 0,
                    ret: *ret,
                    arch: arch.contains(step),
                    rollback,
                    nested: false,
                });
            }
        }
    }
    if steps.is_empty() {
        return None;
    }
    steps.sort_by_key(|s| s.start_ns);
    // Exclusive time: a step minus the steps nested inside it (other tasks, inside its span).
    let n = steps.len();
    let mut parent: Vec<Option<usize>> = vec![None; n];
    for i in 0..n {
        let (s, e) = (steps[i].start_ns, steps[i].start_ns + steps[i].duration_ns);
        let mut best: Option<usize> = None;
        for j in 0..n {
            if i == j {
                continue;
            }
            let (ps, pe) = (steps[j].start_ns, steps[j].start_ns + steps[j].duration_ns);
            let contains = ps <= s && e <= pe && (pe - ps > e - s || (pe - ps == e - s && j < i));
            if contains && best.is_none_or(|b| steps[b].duration_ns > pe - ps) {
                best = Some(j);
            }
        }
        parent[i] = best;
    }
    let mut child_sum = vec![0u64; n];
    for i in 0..n {
        if let Some(p) = parent[i] {
            child_sum[p] += steps[i].duration_ns;
        }
    }
    for i in 0..n {
        steps[i].exclusive_ns = steps[i].duration_ns.saturating_sub(child_sum[i]);
        steps[i].nested = parent[i].is_some();
    }
    let first = steps.iter().map(|s| s.start_ns).min().unwrap_or(start_ns);
    let last = steps
        .iter()
        .map(|s| s.start_ns + s.duration_ns)
        .max()
        .unwrap_or(end_ns);
    Some(OpTrace::new(first, last, steps))
}

/// Parse `cpuhp_*` lines of ftrace text output.
pub fn parse_text(text: &str) -> Vec<CpuhpEvent> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<CpuhpEvent> {
    let (head, rest) = line.split_once(": cpuhp_")?;
    let (event, fields) = rest.split_once(':')?;
    let open = head.find('[')?;
    let close = head[open..].find(']')? + open;
    let task = head[..open].trim();
    let pid: i32 = task.rsplit_once('-')?.1.parse().ok()?;
    let exec_cpu: u32 = head[open + 1..close].trim().parse().ok()?;
    let ts_text = head[close + 1..].split_whitespace().last()?;
    let (sec, frac) = ts_text.split_once('.')?;
    let mut frac = frac.to_string();
    while frac.len() < 9 {
        frac.push('0');
    }
    let ts = sec.parse::<u64>().ok()? * 1_000_000_000 + frac[..9].parse::<u64>().ok()?;
    let toks: Vec<&str> = fields.split_whitespace().collect();
    let field = |name: &str| -> Option<i64> {
        let i = toks.iter().position(|t| *t == name)?;
        toks.get(i + 1)?.parse().ok()
    };
    let cpu = field("cpu:")? as u32;
    let step = field("step:")? as i32;
    match event {
        "enter" | "multi_enter" => {
            let callback = fields
                .rsplit_once('(')
                .map(|(_, f)| f.trim_end().trim_end_matches(')').to_string())
                .unwrap_or_default();
            Some(CpuhpEvent::Enter {
                ts,
                exec_cpu,
                pid,
                cpu,
                target: field("target:")? as i32,
                step,
                callback,
            })
        }
        "exit" => Some(CpuhpEvent::Exit {
            ts,
            exec_cpu,
            pid,
            cpu,
            state: field("state:")? as i32,
            step,
            ret: field("ret:")? as i32,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_enter_multi_and_exit_lines() {
        let text = "     kworker/0:2-12642   [000] .....  7300.592197: cpuhp_enter: cpu: 0001 target: 144 step: 236 (cpuhp_kick_ap_work)
         cpuhp/1-20      [001] .....  7300.616249: cpuhp_multi_enter: cpu: 0001 target: 144 step: 202 (virtnet_cpu_down_prep)
         cpuhp/1-20      [001] .....  7300.600311: cpuhp_exit:  cpu: 0001  state: 234 step: 235 ret: 0
# comment
";
        let ev = parse_text(text);
        assert_eq!(ev.len(), 3);
        match &ev[0] {
            CpuhpEvent::Enter {
                ts,
                exec_cpu,
                pid,
                cpu,
                target,
                step,
                callback,
            } => {
                assert_eq!(*ts, 7_300_592_197_000);
                assert_eq!(
                    (*exec_cpu, *pid, *cpu, *target, *step),
                    (0, 12642, 1, 144, 236)
                );
                assert_eq!(callback, "cpuhp_kick_ap_work");
            }
            e => panic!("{e:?}"),
        }
        assert!(matches!(&ev[1], CpuhpEvent::Enter { step: 202, .. }));
        assert!(matches!(
            &ev[2],
            CpuhpEvent::Exit {
                state: 234,
                step: 235,
                ret: 0,
                ..
            }
        ));
    }
}
