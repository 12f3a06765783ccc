//! `pmlab analyze`: run the trace analyses (idle, wakeups, kicks, hotplug, sched, freq, energy,
//! haltpoll, counter cross-check) over one trace file and print tables, JSON, CSV files, or the
//! differences against a baseline trace.

use anyhow::{bail, Context};
use pmlab_analysis::all::Analysis;
use pmlab_analysis::energy::Model;
use pmlab_analysis::file::{self, FileRequest};
use pmlab_analysis::{export, Options, Table};
use pmlab_report::render::{tables, Format};
use std::io::Write;
use std::path::PathBuf;

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
    /// Analyses to run, comma-separated: idle,wakeups,hotplug,sched,freq,energy,haltpoll,whatif,kicks,kvm (default: all; kvm only for traces with kvm_exit events).
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
    let model = match &args.energy_model {
        Some(p) => Some(Model::load(p).context("cannot use the energy model")?),
        None => None,
    };
    let req = FileRequest {
        opts: Options {
            cpus: parse_cpus(args.cpus.as_deref())?,
            states: args
                .idle_states
                .as_deref()
                .map(file::parse_states)
                .transpose()?,
            top: args.top,
        },
        only,
        model: model.as_ref(),
        hotplug_states: args
            .hotplug_states
            .as_deref()
            .map(file::read_hotplug_states)
            .transpose()?,
        window: file::window(args.from.as_deref(), args.to.as_deref())?,
    };
    let analyzed = file::analyze_file(&args.file, &req, args.baseline.is_none())?;
    let base = match &args.baseline {
        Some(b) => Some(file::analyze_file(b, &req, true)?),
        None => None,
    };
    let sections = analyzed.sections();
    let diffs = match &base {
        Some(b) => file::diff_sections(&sections, &b.sections()),
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
        // Written straight out: the haltpoll timeline alone is megabytes.
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
    } else {
        let limit = if args.all_rows { usize::MAX } else { 40 };
        let diffs = base.is_some().then_some(diffs.as_slice());
        print!(
            "{}",
            tables::analyze(&args.file, &analyzed, diffs, format, limit)
        );
    }
    if sections.iter().all(|s| s.tables.is_empty()) {
        bail!("no analysis could run on {}", args.file.display());
    }
    Ok(())
}
