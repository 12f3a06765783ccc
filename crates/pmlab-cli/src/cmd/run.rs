//! `pmlab run WORKLOAD`: one workload run, its metrics, and side metrics from kernel
//! counters sampled right around the measured part. `--set` applies knobs for the run.

use anyhow::Context;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, Table};
use pmlab_kernel::{Direction, Metric};
use pmlab_workload::{Regime, WorkloadResult, WorkloadSpec};
use std::collections::BTreeMap;

const EXAMPLES: &str = "\
Examples:
  pmlab run pipe --loops 100000                      # its two sides on two CPUs (--placement spread)
  pmlab run pipe --loops 20000 --placement any       # the scheduler's choice, as perf; says which regime it got
  pmlab run pipe --set haltpoll.guest_halt_poll_ns=200us --json
  pmlab run messaging --groups 10 --loops 100 --threads
  pmlab run wakeup --interval 1ms --duration 10s --cpus 0-1
  pmlab run spin --cpus 0-3 --work 300000000
  pmlab run idle --duration 10s
  pmlab run idle --duration 10s --meter-stream 'my-meter --watts'   # energy from a meter
  pmlab run cmd -- stress-ng --cpu 1 --timeout 5s
  pmlab run cmd --metric-regex 'ops/sec: ([0-9.]+)' --metric-name ops --higher-is-better -- ./bench";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    pub workload: pmlab_workload::args::WorkloadCmd,
    /// Set a knob for the run, restored afterwards: NAME[@CPUS]=VALUE (repeatable).
    #[arg(long = "set", value_name = "KNOB=VALUE", global = true)]
    pub set: Vec<String>,
    /// Print the result as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// Idle before the run, after the knobs are set, so that pmlab's own start-up has faded
    /// from the scheduler's load tracking [default: 200ms; 0: off].
    #[arg(long, value_name = "DURATION", global = true, value_parser = settle)]
    pub settle: Option<std::time::Duration>,
    #[command(flatten)]
    pub meter: super::meter::MeterArgs,
}

fn settle(s: &str) -> Result<std::time::Duration, String> {
    pmlab_store::spec::parse_settle(s).map_err(|e| pmlab_kernel::error_chain(&e))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let spec = args.workload.to_spec();
    spec.validate()?;
    let set = pmlab_kernel::knob::Assignment::parse_all(&args.set)?;
    let sources = pmlab_lab::lab::Sources {
        trace: None,
        meter: args.meter.spec()?,
    };
    let lab = pmlab_lab::lab::Lab::open()?;
    let progress = indicatif::ProgressBar::new_spinner();
    // Drawn once, never ticked: a ticking bar would wake CPUs during the measurement.
    progress.set_message(format!("running {}", spec.describe()));
    progress.tick();
    let settle = args.settle.unwrap_or(pmlab_store::spec::DEFAULT_SETTLE);
    let out = lab.run_once(&spec, &set, settle, &sources);
    progress.finish_and_clear();
    let out = out?;
    for note in &out.notes {
        eprintln!("pmlab: note: {note}");
    }
    if args.json {
        print_json(&spec, &out.result, &out.side_metrics, &args.set)
    } else {
        write_stdout(&render_human(&spec, &out.result, &out.side_metrics))
    }
}

fn print_json(
    spec: &WorkloadSpec,
    r: &WorkloadResult,
    side: &[Metric],
    knobs: &[String],
) -> anyhow::Result<()> {
    let out = serde_json::json!({
        "workload": spec,
        "description": spec.describe(),
        "primary": r.primary().name,
        "metrics": r.metrics,
        "side_metrics": side,
        "wall_ns": r.wall.0,
        "placement": spec.placement(),
        "regime": Regime::of_result(&r.metrics),
        "histogram": r.histogram.as_ref().map(|h| serde_json::json!({
            "bucket_ns": h.bucket.0,
            "overflow": h.overflow,
            // [bucket start in ns, samples], non-empty buckets only
            "counts": h.counts.iter().enumerate().filter(|(_, c)| **c > 0)
                .map(|(i, c)| [i as u64 * h.bucket.0, *c]).collect::<Vec<_>>(),
        })),
        "knobs": knobs,
    });
    write_stdout(&(serde_json::to_string_pretty(&out)? + "\n"))
}

/// Print to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

/// A number for people: 4-5 significant digits, no exponent.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if a >= 10_000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

fn direction_word(d: Direction) -> &'static str {
    match d {
        Direction::Lower => "lower is better",
        Direction::Higher => "higher is better",
        Direction::Neutral => "",
    }
}

/// Rows = metric names, columns = total then each CPU.
fn pivot(metrics: &[Metric], total_header: &str, hide_zero_rows: impl Fn(&str) -> bool) -> Table {
    let mut order: Vec<&str> = Vec::new();
    let mut rows: BTreeMap<&str, (Option<&Metric>, BTreeMap<u32, f64>)> = BTreeMap::new();
    let mut cpus: Vec<u32> = Vec::new();
    for m in metrics {
        let (base, cpu) = (m.name.as_str(), m.cpu);
        let row = rows.entry(base).or_insert_with(|| {
            order.push(base);
            (None, BTreeMap::new())
        });
        match cpu {
            Some(c) => {
                row.1.insert(c, m.value);
                if !cpus.contains(&c) {
                    cpus.push(c);
                }
            }
            None => row.0 = Some(m),
        }
    }
    cpus.sort_unstable();
    let unit_of = |base: &str| {
        metrics
            .iter()
            .find(|m| m.name == base)
            .map(|m| m.unit.clone())
            .unwrap_or_default()
    };
    let mut table = Table::new();
    table.load_preset(UTF8_BORDERS_ONLY);
    let mut header = vec![
        Cell::new("metric"),
        Cell::new("unit"),
        Cell::new(total_header),
    ];
    header.extend(cpus.iter().map(|c| Cell::new(format!("cpu{c}"))));
    table.set_header(header);
    for base in order {
        let (total, per_cpu) = &rows[base];
        let all_zero = total.is_none_or(|m| m.value == 0.0) && per_cpu.values().all(|v| *v == 0.0);
        if all_zero && hide_zero_rows(base) {
            continue;
        }
        let mut row = vec![Cell::new(base), Cell::new(unit_of(base))];
        row.push(
            Cell::new(total.map(|m| fmt_value(m.value)).unwrap_or_default())
                .set_alignment(CellAlignment::Right),
        );
        for c in &cpus {
            let text = per_cpu.get(c).map(|v| fmt_value(*v)).unwrap_or_default();
            row.push(Cell::new(text).set_alignment(CellAlignment::Right));
        }
        table.add_row(row);
    }
    table
}

fn render_human(spec: &WorkloadSpec, r: &WorkloadResult, side: &[Metric]) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let p = r.primary();
    let dir = direction_word(p.direction);
    let _ = writeln!(o, "{}", spec.describe());
    let _ = writeln!(
        o,
        "{}: {}{}   (wall {} s)",
        p.name,
        format!("{} {}", fmt_value(p.value), p.unit).trim_end(),
        if dir.is_empty() {
            String::new()
        } else {
            format!("   ({dir})")
        },
        fmt_value(r.wall.0 as f64 / 1e9)
    );
    if let Some(regime) = Regime::of_result(&r.metrics) {
        let _ = writeln!(
            o,
            "regime: {regime}{}",
            match spec.placement() {
                Some(pmlab_workload::Placement::Any) => " (the scheduler's choice)",
                _ => " (pinned)",
            }
        );
    }
    if r.metrics.len() > 1 {
        let _ = writeln!(o, "{}", pivot(&r.metrics, "value", |_| false));
    }
    if let Some(h) = &r.histogram {
        let total: u64 = h.counts.iter().sum::<u64>() + h.overflow;
        let _ = writeln!(
            o,
            "histogram: {} samples in {} µs buckets, {} beyond {} µs (see --json)",
            total,
            h.bucket.0 / 1000,
            h.overflow,
            h.counts.len() as u64 * h.bucket.0 / 1000
        );
    }
    if side.is_empty() {
        return o;
    }
    let window = side
        .iter()
        .find(|m| m.name == "counters.window_s")
        .map(|m| m.value)
        .unwrap_or(0.0);
    let _ = writeln!(
        o,
        "\nside metrics over the measured {} s (kernel counters; all-zero interrupt rows hidden):",
        fmt_value(window)
    );
    let rest: Vec<Metric> = side
        .iter()
        .filter(|m| m.name != "counters.window_s")
        .cloned()
        .collect();
    let _ = writeln!(
        o,
        "{}",
        pivot(&rest, "total", |base| base.starts_with("irq.")
            || base.starts_with("softirq."))
    );
    o
}
