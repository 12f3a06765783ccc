//! `pmlab record`: trace a command (or a duration) into a trace.dat v6 file through a
//! private tracefs instance, and print events and lost events per CPU.

use anyhow::{bail, Context};
use pmlab_analysis::crosscheck;
use pmlab_kernel::counters::Snapshot;
use pmlab_kernel::Root;
use pmlab_trace::record::{RecordOptions, RecordSummary, Recorder, DEFAULT_BUFFER_PERCENT};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const EXAMPLES: &str = "Examples:
  pmlab record -- pmlab run pipe --loops 200000
  pmlab record -o idle.dat --duration 3s
  pmlab record -e sched -e irq:irq_handler_entry -o wake.dat -- perf bench sched pipe -l 100000
  pmlab record -e sched:sched_switch --filter 'sched:sched_switch=prev_pid != 0' --duration 1s
  pmlab record --buffer-kb 8192 --reader-cpus 0 -- taskset -c 1 stress-ng --cpu 1 -t 2s
  pmlab record --duration 1s --json

Without -e, records the events pmlab's analyses need (power, sched, ipi, irq,
irq_vectors, timer, cpuhp); events this kernel lacks are skipped with a note.
Counter snapshots taken as tracing starts and stops go to FILE.counters.json, which
`pmlab analyze FILE` uses to cross-check trace idle time against the kernel's counters.
Ctrl-C stops the recording and still writes the file. Open the file with
`trace-cmd report -i FILE`, KernelShark, or `pmlab dump FILE`.";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Event to record: SYSTEM, SYSTEM:EVENT or EVENT (repeatable; default: the analysis set).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    events: Vec<String>,
    /// Event filter as EVENT=EXPRESSION, in the kernel's filter syntax (repeatable).
    #[arg(short = 'f', long = "filter", value_name = "EVENT=EXPR")]
    filters: Vec<String>,
    /// Output file (trace.dat v6).
    #[arg(short = 'o', long, default_value = "trace.dat")]
    output: PathBuf,
    /// Per-CPU ring-buffer size in KiB (default: 4096, less above 16 CPUs: 64 MiB in all).
    #[arg(long, value_name = "N")]
    buffer_kb: Option<u64>,
    /// Wake the readers when a CPU buffer is this full (percent, 1-100).
    #[arg(long, default_value_t = DEFAULT_BUFFER_PERCENT, value_name = "PCT")]
    buffer_percent: u32,
    /// CPUs the reader threads run on (e.g. "0"), to keep them off measured CPUs.
    #[arg(long, value_name = "CPUS")]
    reader_cpus: Option<String>,
    /// Copy pages with read() instead of splice().
    #[arg(long)]
    no_splice: bool,
    /// Stop after this long (e.g. 5s, 500ms); with a command, the command is then terminated.
    #[arg(long, value_name = "TIME")]
    duration: Option<String>,
    /// Run the command as root even when pmlab was started through sudo.
    #[arg(long)]
    as_root: bool,
    /// Print the summary as JSON (the command's stdout then goes to stderr).
    #[arg(long)]
    json: bool,
    /// The command to trace, run without a shell (after `--`).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

enum Event {
    ChildExited(std::io::Result<ExitStatus>),
    Signal(i32),
}

fn parse_filter(s: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('=') {
        Some((ev, expr)) if !ev.trim().is_empty() && !expr.trim().is_empty() => {
            Ok((ev.trim().to_string(), expr.trim().to_string()))
        }
        _ => {
            bail!("filter {s:?} is not EVENT=EXPRESSION (e.g. 'sched:sched_switch=prev_pid != 0')")
        }
    }
}

/// The program's path, found like execvp would (so a bad name fails before tracing starts).
fn find_program(name: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        if executable(&p) {
            return Ok(p);
        }
        bail!("command {name:?} is not an executable file");
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if executable(&p) {
            return Ok(p);
        }
    }
    bail!("command {name:?} not found in PATH")
}

/// The sudo caller's uid/gid when pmlab runs as root through sudo.
fn invoking_user() -> anyhow::Result<Option<(u32, u32)>> {
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    match (var("SUDO_UID"), var("SUDO_GID")) {
        (Some(u), Some(g)) => Ok(Some((
            u.parse()
                .with_context(|| format!("SUDO_UID={u:?} is not a number"))?,
            g.parse()
                .with_context(|| format!("SUDO_GID={g:?} is not a number"))?,
        ))),
        _ => Ok(None),
    }
}

fn human_bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

fn print_summary(s: &RecordSummary) {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    t.set_header(vec!["CPU", "events", "lost", "pages"]);
    for i in 0..s.cpus.len() {
        t.add_row(vec![
            s.cpus[i].to_string(),
            s.events_per_cpu[i].to_string(),
            s.lost_per_cpu[i].to_string(),
            s.pages_per_cpu[i].to_string(),
        ]);
    }
    t.add_row(vec![
        "all".to_string(),
        s.total_events().to_string(),
        s.total_lost().to_string(),
        s.pages_per_cpu.iter().sum::<u64>().to_string(),
    ]);
    println!("{t}");
    println!(
        "{}: {} ({} events in {:.2} s, {} lost, pages moved by {})",
        s.path.display(),
        human_bytes(s.bytes),
        s.total_events(),
        s.duration_ns as f64 / 1e9,
        s.total_lost(),
        s.transport
    );
    if !s.events_by_name.is_empty() {
        let top: Vec<String> = s
            .events_by_name
            .iter()
            .take(8)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        println!("top events: {}", top.join(", "));
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let duration = match &args.duration {
        Some(d) => {
            let ns = pmlab_workload::units::parse_duration(d)
                .map_err(anyhow::Error::msg)
                .context("--duration")?;
            if ns.0 == 0 {
                bail!("--duration must be greater than zero");
            }
            Some(Duration::from_nanos(ns.0))
        }
        None => None,
    };
    let reader_cpus = match &args.reader_cpus {
        Some(s) => Some(
            pmlab_workload::parse_cpu_list(s)
                .map_err(anyhow::Error::msg)
                .context("--reader-cpus")?,
        ),
        None => None,
    };
    let filters = args
        .filters
        .iter()
        .map(|f| parse_filter(f))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let program = match args.command.first() {
        Some(name) => Some(find_program(name)?),
        None => None,
    };
    let user = if args.as_root { None } else { invoking_user()? };

    let lab = pmlab_lab::lab::Lab::open()?;
    let lab_signals = lab.signals();
    let (tx, rx) = mpsc::channel::<Event>();
    let sig_tx = tx.clone();
    // Blocks until a signal (the lab's watcher forwards it): no periodic wake.
    std::thread::spawn(move || {
        for sig in lab_signals {
            if sig_tx.send(Event::Signal(sig)).is_err() {
                break;
            }
        }
    });

    let opts = RecordOptions {
        events: args.events.clone(),
        filters,
        buffer_kb: args.buffer_kb,
        output: args.output.clone(),
        buffer_percent: args.buffer_percent,
        reader_cpus,
        splice: !args.no_splice,
    };
    let recorder = Recorder::start(&Root::system(), opts).context("starting the recording")?;
    for n in recorder.notes() {
        eprintln!("pmlab: note: {n}");
    }
    // Counter snapshots around the recording, for `pmlab analyze`'s cross-check.
    let counters_before = Snapshot::take_at(std::path::Path::new("/"));

    let mut child_pid = None;
    if let (Some(program), Some(_)) = (&program, args.command.first()) {
        let mut cmd = Command::new(program);
        cmd.arg0(&args.command[0]).args(&args.command[1..]);
        if let Some((uid, gid)) = user {
            cmd.uid(uid).gid(gid);
        }
        if args.json {
            // stdout carries the JSON summary; the command's output goes to stderr
            use std::os::fd::AsFd;
            let err = std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .context("duplicating stderr")?;
            cmd.stdout(std::process::Stdio::from(err));
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {:?}", args.command[0]))?;
        child_pid = Some(child.id() as i32);
        let child_tx = tx.clone();
        std::thread::spawn(move || {
            let _ = child_tx.send(Event::ChildExited(child.wait()));
        });
    }
    drop(tx);

    let progress = progress_bar(duration, args.json);
    let started = Instant::now();
    let deadline = duration.map(|d| started + d);
    let mut status = None;
    let mut interrupted = None;
    let mut child_running = child_pid.is_some();
    let mut kill_deadline: Option<Instant> = None;
    let mut duration_over = false;
    loop {
        let wait_until = [
            deadline.filter(|_| interrupted.is_none() && kill_deadline.is_none()),
            kill_deadline,
        ]
        .into_iter()
        .flatten()
        .min();
        let ev = match wait_until {
            Some(t) => match rx.recv_timeout(t.saturating_duration_since(Instant::now())) {
                Ok(ev) => Some(ev),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            },
            None => match rx.recv() {
                Ok(ev) => Some(ev),
                Err(_) => break,
            },
        };
        match ev {
            Some(Event::ChildExited(st)) => {
                status = Some(st.context("waiting for the command")?);
                break;
            }
            Some(Event::Signal(sig)) => {
                interrupted.get_or_insert(sig);
                match child_pid.filter(|_| child_running) {
                    Some(pid) => {
                        unsafe { libc::kill(pid, sig) };
                        kill_deadline.get_or_insert(Instant::now() + Duration::from_secs(5));
                    }
                    None => break,
                }
            }
            None => match child_pid.filter(|_| child_running) {
                // duration over (first) or the command ignored SIGTERM for 5 s (then)
                Some(pid) if kill_deadline.is_none() => {
                    duration_over = true;
                    unsafe { libc::kill(pid, libc::SIGTERM) };
                    kill_deadline = Some(Instant::now() + Duration::from_secs(5));
                }
                Some(pid) => {
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    child_running = false;
                    kill_deadline = None;
                    // the wait thread still reports the exit
                }
                None => break,
            },
        }
    }
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let counters_after = Snapshot::take_at(std::path::Path::new("/"));
    let summary = recorder.stop().context("finishing the recording")?;
    let sidecar = crosscheck::sidecar_path(&summary.path);
    match (counters_before, counters_after) {
        (Ok(before), Ok(after)) => {
            let side = crosscheck::Sidecar { before, after };
            let written = serde_json::to_vec(&side)
                .map_err(anyhow::Error::from)
                .and_then(|b| Ok(std::fs::write(&sidecar, b)?));
            if let Err(e) = written {
                eprintln!("pmlab: warning: cannot write {}: {e}", sidecar.display());
            }
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("pmlab: warning: no counters cross-check for this trace: {e}");
            let _ = std::fs::remove_file(&sidecar);
        }
    }

    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_summary(&summary);
        for n in &summary.notes {
            if !n.starts_with("removed stale") && !n.starts_with("this kernel lacks") {
                eprintln!("pmlab: note: {n}");
            }
        }
    }
    if summary.total_lost() > 0 {
        eprintln!(
            "pmlab: warning: {} events lost; try a bigger --buffer-kb or a lower --buffer-percent",
            summary.total_lost()
        );
    }
    if let Some(sig) = interrupted {
        let name = match sig {
            libc::SIGINT => "SIGINT",
            libc::SIGTERM => "SIGTERM",
            _ => "SIGHUP",
        };
        if child_pid.is_some() || duration.is_some() || sig != libc::SIGINT {
            bail!(
                "interrupted by {name}; the trace up to then is in {}",
                summary.path.display()
            );
        }
    }
    if let Some(st) = status {
        if !st.success() && !duration_over {
            bail!(
                "{:?} {st}; the trace is in {}",
                args.command[0],
                summary.path.display()
            );
        }
    }
    Ok(())
}

fn progress_bar(duration: Option<Duration>, json: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if json || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = match duration {
        Some(d) => {
            let b = indicatif::ProgressBar::new(d.as_millis() as u64);
            b.set_message(format!("{:.3} s", d.as_secs_f64()));
            b.set_style(
                indicatif::ProgressStyle::with_template("recording for {msg} (Ctrl-C stops)")
                    .ok()?,
            );
            b
        }
        None => {
            let b = indicatif::ProgressBar::new_spinner();
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "recording until the command exits (Ctrl-C stops)",
                )
                .ok()?,
            );
            b
        }
    };
    // Drawn once, never ticked: a ticking bar would wake the CPUs being traced.
    bar.tick();
    Some(bar)
}
