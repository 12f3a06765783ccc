//! `pmlab analyze`: run the trace analyses (idle, wakeups, kicks, hotplug, sched, freq, energy,
//! haltpoll, counter cross-check) over one trace file and print tables, JSON, CSV files, or the
//! differences against a baseline trace.

use anyhow::{bail, Context};
use pmlab_analysis::all::{self, Analysis, Analyzed, Extras};
use pmlab_analysis::energy::Model;
use pmlab_analysis::{baseline, crosscheck, export, Options, StateInfo, Table};
use pmlab_report::render::{tables, Format};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "Examples:
  pmlab analyze trace.dat
  pmlab analyze trace.dat --only idle,wakeups --cpus 0-1
  pmlab analyze trace.dat --only wakeups --json | jq '.wakeups.causes[:5]'
  pmlab analyze polling.dat --baseline nopolling.dat --only idle,wakeups
  pmlab analyze juno.dat --energy-model plat_info.yml --only energy,freq
  pmlab analyze trace.dat --idle-states 0=POLL:0,1=C1:2,2=C1E:20 --only idle
  pmlab analyze hp.dat --only hotplug --hotplug-states /sys/devices/system/cpu/hotplug/states
  pmlab analyze trace.dat --export out/      # one CSV and Parquet file per table
  pmlab analyze t.dat --from 5120.25 --to 5122.25   # a window, in trace seconds

Analyses: idle (residency per CPU and state, governor misses, all-CPUs-idle overlap;
idle-task fallback where cpu_idle is missing), wakeups (idle exits/s by cause: timer
function, IPI kind and sender callsite, device IRQ, polling wakeup without IPI; top
waking tasks), hotplug (offline/online operations split into cpuhp steps, slowest
steps, preemption between steps), sched (wakeup latency, run-queue waits), freq (residency per frequency),
energy (needs --energy-model: TOML or LISA plat_info.yml), haltpoll (guest_halt_poll_ns
timeline), whatif (idle polling replayed under the haltpoll governor; `pmlab whatif` has
the options). An analysis whose events are missing says how to record them; the others run.
A counters sidecar FILE.counters.json ({\"before\": Snapshot, \"after\": Snapshot}) adds a
cross-check of trace idle time against the kernel's counters.
--export writes one CSV and one Parquet file per table.";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Trace file (trace.dat v6/v7).
    file: PathBuf,
    /// Analyses to run, comma-separated: idle,wakeups,hotplug,sched,freq,energy,haltpoll,whatif,kicks (default: all).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    only: Vec<String>,
    /// Only these CPUs (e.g. 0-3,6).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    #[command(flatten)]
    out: super::FormatArgs,
    /// Show differences (absolute and relative) against this trace.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Energy model: TOML, or a LISA plat_info.yml (.yml/.yaml).
    #[arg(long, value_name = "FILE")]
    energy_model: Option<PathBuf>,
    /// Idle-state table for names and governor misses: INDEX=NAME[:TARGET_RESIDENCY_US],...
    #[arg(long, value_name = "TABLE")]
    idle_states: Option<String>,
    /// Hotplug state table (`N: name` lines) to name hotplug steps, e.g. the recording
    /// machine's /sys/devices/system/cpu/hotplug/states (default: callback symbols only).
    #[arg(long, value_name = "FILE")]
    hotplug_states: Option<PathBuf>,
    /// Write one CSV file per table into this directory.
    #[arg(long, value_name = "DIR")]
    export: Option<PathBuf>,
    /// Rows in the "top" tables (waking tasks, sched tasks).
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,
    /// Print every row of long tables (default: the first 40).
    #[arg(long)]
    all_rows: bool,
    /// Only events at or after this trace time (seconds, as `pmlab dump` prints them, to
    /// the ns); the analyses take [--from, --to) as the trace's span (`pmlab top`'s intervals).
    #[arg(long, value_name = "SECONDS")]
    from: Option<String>,
    /// Only events before this trace time (seconds, to the ns).
    #[arg(long, value_name = "SECONDS")]
    to: Option<String>,
}

/// Trace seconds (`5120.123456789`) as ns, exactly (no float rounding).
fn parse_trace_seconds(flag: &str, s: &str) -> anyhow::Result<u64> {
    let bad =
        || anyhow::anyhow!("{flag} {s:?} is not trace seconds (e.g. 5120.25, at most 9 decimals)");
    let (int, frac) = s.trim().split_once('.').unwrap_or((s.trim(), ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 9 {
        return Err(bad());
    }
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return Err(bad());
    }
    let i: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let f: u64 = format!("{frac:0<9}").parse().map_err(|_| bad())?;
    i.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(f))
        .ok_or_else(bad)
}

fn parse_states(s: &str) -> anyhow::Result<BTreeMap<u32, StateInfo>> {
    let mut m = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (idx, rest) = part
            .split_once('=')
            .with_context(|| format!("idle state {part:?} is not INDEX=NAME[:TARGET_US]"))?;
        let idx: u32 = idx
            .trim()
            .parse()
            .with_context(|| format!("idle state index {idx:?}"))?;
        let (name, target) = match rest.split_once(':') {
            Some((n, t)) => {
                let us: f64 = t
                    .trim()
                    .parse()
                    .with_context(|| format!("target residency {t:?} (µs)"))?;
                (n, Some((us * 1e3) as u64))
            }
            None => (rest, None),
        };
        m.insert(
            idx,
            StateInfo {
                name: name.trim().to_string(),
                target_residency_ns: target,
            },
        );
    }
    Ok(m)
}

/// `--cpus LIST` of the trace commands: None means every CPU.
pub(crate) fn parse_cpus(
    list: Option<&str>,
) -> anyhow::Result<Option<std::collections::BTreeSet<u32>>> {
    match list {
        Some(l) => Ok(Some(
            pmlab_kernel::cpulist::parse_cpu_list(l)
                .map_err(|e| anyhow::anyhow!("--cpus {l:?}: {e}"))?
                .into_iter()
                .collect(),
        )),
        None => Ok(None),
    }
}

/// `last`: no other file follows, so the trace is not freed (the process ends soon).
fn analyze_file(
    path: &Path,
    opts: &Options,
    only: &[Analysis],
    model: Option<&Model>,
    hotplug_states: Option<&[(u32, String)]>,
    last: bool,
    window: Option<(u64, u64)>,
) -> anyhow::Result<Analyzed> {
    // Only wakeups and hotplug name kernel symbols; the others skip parsing kallsyms.
    let load = pmlab_trace::dat::LoadOptions {
        kallsyms: all::needs_kallsyms(only),
        ..Default::default()
    };
    let trace = pmlab_trace::open_with(path, &load)
        .with_context(|| format!("cannot read trace {}", path.display()))?;
    let trace = match window {
        // An open end (`--from` alone) ends after the last event.
        Some((from, u64::MAX)) => {
            let last = trace.events.ts.last().map_or(from, |&t| t + 1);
            trace.window(from, last.max(from + 1))
        }
        Some((from, to)) => trace.window(from, to),
        None => trace,
    };
    let extras = Extras {
        model,
        // The counters cover the whole recording, not a window of it.
        sidecar: window.is_none().then(|| crosscheck::load(path)).flatten(),
        serial: false,
    };
    let analyzed = all::analyze(&trace, opts, only, extras, hotplug_states);
    if last {
        // The process ends after printing: skip freeing the columns (the OS frees them).
        std::mem::forget(trace);
    }
    Ok(analyzed)
}

/// `N: name` lines of a hotplug/states file.
fn read_hotplug_states(path: &Path) -> anyhow::Result<Vec<(u32, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read hotplug states {}", path.display()))?;
    let states: Vec<(u32, String)> = pmlab_kernel::sysinfo::hotplug_states::parse(&text)
        .into_iter()
        .filter_map(|s| Some((u32::try_from(s.number).ok()?, s.name)))
        .collect();
    if states.is_empty() {
        bail!(
            "{} has no `N: name` lines (expected a copy of /sys/devices/system/cpu/hotplug/states)",
            path.display()
        );
    }
    Ok(states)
}

/// The formats of `pmlab analyze`: its tables are many and differ in columns, so CSV is one
/// file per table (`--export`), not one stream.
const ANALYZE_FORMATS: &[Format] = &[Format::Table, Format::Markdown, Format::Json];

pub fn run(args: Args) -> anyhow::Result<()> {
    let format = args
        .out
        .get()
        .check("pmlab analyze (CSV: --export DIR)", ANALYZE_FORMATS)?;
    let only: Vec<Analysis> = args
        .only
        .iter()
        .map(|o| o.parse())
        .collect::<Result<_, _>>()?;
    let cpus = parse_cpus(args.cpus.as_deref())?;
    let states = args.idle_states.as_deref().map(parse_states).transpose()?;
    let opts = Options {
        cpus,
        states,
        top: args.top,
    };
    let model = match &args.energy_model {
        Some(p) => Some(Model::load(p).context("cannot use the energy model")?),
        None => None,
    };
    let hp_states = args
        .hotplug_states
        .as_deref()
        .map(read_hotplug_states)
        .transpose()?;
    let hp = hp_states.as_deref();
    let window = match (&args.from, &args.to) {
        (None, None) => None,
        (from, to) => {
            let from = from
                .as_deref()
                .map(|s| parse_trace_seconds("--from", s))
                .transpose()?;
            let to = to
                .as_deref()
                .map(|s| parse_trace_seconds("--to", s))
                .transpose()?;
            let (from, to) = (from.unwrap_or(0), to.unwrap_or(u64::MAX));
            if to <= from {
                bail!("--to must be after --from");
            }
            Some((from, to))
        }
    };
    let last = args.baseline.is_none();
    let analyzed = analyze_file(&args.file, &opts, &only, model.as_ref(), hp, last, window)?;
    let base = match &args.baseline {
        Some(b) => Some(analyze_file(
            b,
            &opts,
            &only,
            model.as_ref(),
            hp,
            true,
            window,
        )?),
        None => None,
    };
    let sections = analyzed.sections();
    let report = &analyzed.report;
    let diffs: Vec<(String, Vec<Table>)> = match &base {
        Some(b) => {
            let bs = b.sections();
            sections
                .iter()
                .map(|s| {
                    let bt = bs
                        .iter()
                        .find(|x| x.name == s.name)
                        .map(|x| x.tables.clone())
                        .unwrap_or_default();
                    (s.name.clone(), baseline::diff_all(&s.tables, &bt))
                })
                .collect()
        }
        None => Vec::new(),
    };
    if let Some(dir) = &args.export {
        let mut tables: Vec<Table> = sections.iter().flat_map(|s| s.tables.clone()).collect();
        tables.extend(diffs.iter().flat_map(|d| d.1.clone()));
        let csv = export::write_csv(dir, &tables)
            .with_context(|| format!("cannot export to {}", dir.display()))?;
        let parquet = export::write_parquet(dir, &tables)
            .with_context(|| format!("cannot export to {}", dir.display()))?;
        eprintln!(
            "pmlab: wrote {} CSV and {} Parquet files to {}",
            csv.len(),
            parquet.len(),
            dir.display()
        );
    }
    if format == Format::Json {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        match &base {
            Some(b) => {
                let diff: Vec<&Table> = diffs.iter().flat_map(|d| &d.1).collect();
                let v = serde_json::json!({ "report": &analyzed, "baseline": b, "diff": diff });
                serde_json::to_writer_pretty(&mut out, &v)?;
            }
            None => serde_json::to_writer_pretty(&mut out, &analyzed)?,
        }
        writeln!(out)?;
        out.flush()?;
    } else if format == Format::Markdown {
        println!(
            "### pmlab analyze {}\n\n{} events, {} CPUs, {:.6} s{}",
            args.file.display(),
            report.events,
            report.cpus,
            report.span_ns as f64 / 1e9,
            base.as_ref()
                .map(|_| " (differences against the baseline)")
                .unwrap_or("")
        );
        for s in &sections {
            let diff = diffs.iter().find(|d| d.0 == s.name).map(|d| d.1.as_slice());
            print!("{}", tables::analyze_section_markdown(s, diff));
        }
    } else {
        println!(
            "{}: {} events, {} CPUs, {:.6} s{}",
            args.file.display(),
            report.events,
            report.cpus,
            report.span_ns as f64 / 1e9,
            base.as_ref()
                .map(|_| "  (differences against the baseline)")
                .unwrap_or("")
        );
        let limit = if args.all_rows { usize::MAX } else { 40 };
        for s in &sections {
            let diff = diffs.iter().find(|d| d.0 == s.name).map(|d| d.1.as_slice());
            print!("{}", tables::analyze_section(s, diff, limit));
        }
    }
    if sections.iter().all(|s| s.tables.is_empty()) {
        bail!("no analysis could run on {}", args.file.display());
    }
    Ok(())
}
