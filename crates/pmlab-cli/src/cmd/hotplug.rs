//! `pmlab hotplug`: CPU offline/online latency under load, step by step, with mitigations
//! compared as interleaved configurations, or a fault-injection walk (`--inject-fail`).

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use pmlab_hotplug::lab::Progress;
use pmlab_hotplug::report::HotplugReport;
use pmlab_hotplug::{
    self as hotplug, check_cpus, parse_cpu_list, HotplugLab, InjectOptions, InjectTarget,
    LabOptions, LoaderKind, Mitigation, Paths, StateTable,
};
use pmlab_lab::lab::Lab;
use pmlab_report::render::{sheet::sheet, Format};
use pmlab_store::store::Store;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  pmlab hotplug --cpus 1 --cycles 20 --load 0,2
  pmlab hotplug --cpus 1 --load 0,1,2,4 --loader spin --mitigate rcu-expedited
  pmlab hotplug --cpus 1 --mitigate rcu-expedited,kthread-boost --json > hotplug.json
  pmlab hotplug --cpus 1 --load 0,2 --format csv > latency.csv
  pmlab hotplug --cpus 1 --inject-fail all
  pmlab hotplug --cpus 1 --inject-fail sched:active")]
pub struct Args {
    /// CPUs to cycle, one at a time (default: every online hot-pluggable CPU but one).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Offline/online cycles per CPU, configuration and load level.
    #[arg(long, default_value_t = 20, value_name = "N")]
    cycles: u32,
    /// Load levels: how many loader instances run in the background.
    #[arg(long, default_value = "0", value_name = "N,N,...")]
    load: String,
    /// The background loader.
    #[arg(long, default_value = "wakeup", value_parser = ["wakeup", "spin", "messaging"])]
    loader: String,
    /// Mitigations compared with the baseline, interleaved round by round.
    #[arg(long, value_delimiter = ',', value_name = "M", value_parser = ["rcu-expedited", "kthread-boost", "none"])]
    mitigate: Vec<String>,
    /// Walk fault injection instead: a state from hotplug/states (name or number), or `all`.
    #[arg(long, value_name = "STATE|all")]
    inject_fail: Option<String>,
    /// Seed of the per-round shuffles (default: from the clock; always printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Do not trace (wall times only: no steps, no rollback times).
    #[arg(long)]
    no_trace: bool,
    /// Result store.
    #[arg(long, default_value = "pmlab.db", value_name = "PATH")]
    db: std::path::PathBuf,
    /// Do not save the results in the store.
    #[arg(long)]
    no_store: bool,
    /// Output format: table, markdown, mail, json or csv (csv: the latency table, or the
    /// walk's attempts).
    #[arg(long, value_parser = super::text_format, default_value = "table")]
    format: Format,
    /// Same as --format json.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// On a --host target: the sessions come back into --db (unless --no-store).
    pub fn remote_job(&self) -> super::remote::Job {
        if self.no_store {
            super::remote::Job::prints()
        } else {
            super::remote::Job::stores(&self.db)
        }
    }
}

struct Bar(Option<ProgressBar>);

impl Progress for Bar {
    fn begin(&mut self, total: u64) {
        let pb = ProgressBar::new(total);
        pb.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} ops · ETA {eta} · {msg}")
                .expect("template"),
        );
        self.0 = Some(pb);
    }
    fn step(&mut self, message: &str) {
        if let Some(pb) = &self.0 {
            pb.set_message(message.to_string());
            pb.inc(1);
        }
    }
    fn finish(&mut self) {
        if let Some(pb) = self.0.take() {
            pb.finish_and_clear();
        }
    }
}

fn parse_loads(s: &str) -> Result<Vec<u32>> {
    let mut v = Vec::new();
    for p in s.split(',') {
        let n: u32 = p.trim().parse().with_context(|| {
            format!("bad --load {s:?}: {p:?} is not a number of loader instances")
        })?;
        if n > 64 {
            bail!("bad --load {s:?}: at most 64 loader instances per level");
        }
        if !v.contains(&n) {
            v.push(n);
        }
    }
    Ok(v)
}

/// Every online CPU with an `online` file, leaving the first such one online if all are.
fn default_cpus(paths: &Paths) -> Result<Vec<u32>> {
    let sys = paths.sys_cpu();
    let online = hotplug::sysfs::online_cpus(&sys)?;
    let pluggable: Vec<u32> = online
        .iter()
        .copied()
        .filter(|&c| hotplug::CpuFiles::new(&sys, c).has_online_file())
        .collect();
    let mut v = pluggable.clone();
    if v.len() == online.len() && !v.is_empty() {
        v.remove(0);
    }
    if v.is_empty() {
        bail!("no CPU can be hot-unplugged here (no cpuN/online file on any online CPU but one)");
    }
    Ok(v)
}

pub fn run(args: Args) -> Result<()> {
    let format = if args.json { Format::Json } else { args.format };
    // Refusals, before anything is touched.
    if !hotplug::is_root() {
        bail!("pmlab hotplug needs root (it writes /sys/devices/system/cpu/cpuN/online); nothing was changed");
    }
    let paths = Paths::new("/");
    let lab = Lab::open()?;
    // Repair what a killed session left (its journal) before looking at the CPUs.
    for line in lab.hotplug_repair().context("reading the knob journal")? {
        eprintln!("pmlab: repaired what a killed pmlab session left: {line}");
    }
    let cpus = match &args.cpus {
        Some(s) => parse_cpu_list(s)?,
        None => default_cpus(&paths)?,
    };
    check_cpus(&paths.sys_cpu(), &cpus)?;
    if args.cycles == 0 {
        bail!("--cycles must be at least 1");
    }
    let loads = parse_loads(&args.load)?;
    let loader = LoaderKind::parse(&args.loader)?;
    let mitigations: Vec<Mitigation> = args
        .mitigate
        .iter()
        .map(|m| Mitigation::parse(m))
        .collect::<Result<_, _>>()?;
    let table = StateTable::read(&paths.sys_cpu())?;
    let inject = match args.inject_fail.as_deref() {
        None => None,
        Some("all") => Some(InjectTarget::All),
        Some(s) => Some(InjectTarget::One(table.resolve(s)?)),
    };
    if inject.is_some() && !mitigations.is_empty() {
        bail!("--inject-fail walks fault injection; it does not combine with --mitigate");
    }

    let stop = lab.stop_token();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut bar = Bar(None);
    let mut store = if args.no_store {
        Store::in_memory()?
    } else {
        Store::open(&args.db)?
    };

    if let Some(target) = inject {
        let opts = InjectOptions {
            paths: paths.clone(),
            cpus: cpus.clone(),
            target,
            trace: !args.no_trace,
            stop: stop.clone(),
        };
        let result = lab.hotplug_inject(opts, &mut store, &command, &mut bar)?;
        if !args.no_store {
            eprintln!(
                "pmlab: saved as experiment {} in {}",
                result.experiment,
                args.db.display()
            );
        }
        print!("{}", sheet(&result.head(), &result, format)?);
        if !result.all_as_expected() {
            bail!("some injected faults did not behave as expected (see UNEXPECTED rows)");
        }
        return Ok(());
    }

    let seed = args.seed.unwrap_or_else(hotplug::clock_seed);
    let opts = LabOptions {
        paths: paths.clone(),
        cpus,
        cycles: args.cycles,
        loads,
        loader,
        loader_command: hotplug::LoaderCommand::system_tool(loader),
        configurations: Mitigation::configurations(&mitigations),
        seed,
        trace: !args.no_trace,
        stop: stop.clone(),
    };
    let result = lab.hotplug(opts, &mut store, &command, &mut bar)?;
    if !args.no_store {
        eprintln!(
            "pmlab: saved as experiment {} in {}",
            result.experiment,
            args.db.display()
        );
    }
    let report = HotplugReport::build(&result);
    print!("{}", sheet(&report.head(), &report, format)?);
    if result.interrupted {
        bail!("interrupted; the CPUs are back online, knobs restored and loaders stopped");
    }
    Ok(())
}
