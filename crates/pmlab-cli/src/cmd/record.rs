//! `pmlab record`: trace a command (or a duration) into a trace.dat v6 file through a
//! private tracefs instance (the lab records and supervises the command), and print events
//! and lost events per CPU.

use anyhow::{bail, Context};
use pmlab_lab::lab::Lab;
use pmlab_lab::recording::{RecordRequest, Recording};
use pmlab_trace::record::{RecordOptions, DEFAULT_BUFFER_PERCENT};
use std::path::PathBuf;
use std::time::Duration;

const EXAMPLES: &str = "Examples:
  pmlab record -- pmlab run pipe --loops 200000
  pmlab record -o idle.dat --duration 3s
  pmlab record -e sched -e irq:irq_handler_entry -o wake.dat -- perf bench sched pipe -l 100000
  pmlab record -e sched:sched_switch --filter 'sched:sched_switch=prev_pid != 0' --duration 1s
  pmlab record --buffer-kb 8192 --reader-cpus 0 -- taskset -c 1 stress-ng --cpu 1 -t 2s
  pmlab record --duration 1s --json
  pmlab record --tracer function -e sched:sched_switch -o fn.dat -- sleep 0.01
  pmlab record -e sched:sched_waking --stacktrace -o stack.dat -- sleep 0.1

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
    /// Also run this ftrace tracer in the instance (e.g. `function`; see the kernel's
    /// available_tracers); its lines come out in `pmlab dump` as in `trace-cmd report`.
    #[arg(long, value_name = "NAME")]
    tracer: Option<String>,
    /// Record the kernel stack after every event (the `stacktrace` trace option).
    #[arg(long)]
    stacktrace: bool,
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

impl Args {
    /// On a --host target: the recording comes back to -o.
    pub fn remote_job(&self) -> super::remote::Job {
        super::remote::Job {
            strip_long: &["--output"],
            strip_short: &['o'],
            bring: Some(pmlab_remote::Bring {
                files: vec![("trace.dat".into(), self.output.clone())],
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let duration = match &args.duration {
        Some(d) => {
            let ns = pmlab_workload::units::parse_duration(d).context("--duration")?;
            if ns.0 == 0 {
                bail!("--duration must be greater than zero");
            }
            Some(Duration::from_nanos(ns.0))
        }
        None => None,
    };
    let reader_cpus = match &args.reader_cpus {
        Some(s) => Some(pmlab_workload::parse_cpu_list(s).context("--reader-cpus")?),
        None => None,
    };
    let filters = args
        .filters
        .iter()
        .map(|f| parse_filter(f))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let lab = Lab::open()?;
    let request = RecordRequest {
        options: RecordOptions {
            events: args.events.clone(),
            filters,
            buffer_kb: args.buffer_kb,
            output: args.output.clone(),
            buffer_percent: args.buffer_percent,
            reader_cpus,
            splice: !args.no_splice,
            tracer: args.tracer.clone(),
            stacktrace: args.stacktrace,
            clock: None,
        },
        command: args.command.clone(),
        duration,
        as_root: args.as_root,
        // stdout carries the JSON summary; the command's output goes to stderr
        stdout_to_stderr: args.json,
    };
    let progress = progress_bar(duration, args.json);
    let recording = lab.record(request);
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let Recording {
        summary,
        start_notes,
        warnings,
        interrupted,
        status,
        duration_over,
    } = recording?;
    for n in &start_notes {
        eprintln!("pmlab: note: {n}");
    }
    for w in &warnings {
        eprintln!("pmlab: warning: {w}");
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", pmlab_report::render::trace::recording(&summary));
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
        if !args.command.is_empty() || duration.is_some() || sig != libc::SIGINT {
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
