//! `pmlab knob list|get|set|restore`: the CLI face of `pmlab_kernel::knob` (validation,
//! journal, restore). `set` keeps its journal so that `restore` undoes it later.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use pmlab_kernel::knob::{self, journal, Assignment, KnobId};
use pmlab_kernel::Root;

const EXAMPLES: &str = "\
Examples:
  pmlab knob list
  pmlab knob list --all --json
  pmlab knob get haltpoll.guest_halt_poll_ns
  pmlab knob get pmqos.resume_latency_us@1 --json
  pmlab knob list --root /tmp/spr1         another machine's snapshot (read only)
  pmlab knob set uncore.max_freq@package1=2GHz cpuidle.C6.disable@all=1 epb@package0=power
  pmlab knob set haltpoll.guest_halt_poll_ns=150us cpuidle.POLL.disable@1=1
  pmlab knob set cpu.online@1=0 rcu.expedited=on
  pmlab knob set sysfs:/sys/kernel/rcu_expedited=1
  pmlab knob restore

Names (NAME[@SCOPE]=VALUE): cpu.online@N, cpuidle.governor, cpuidle.STATE.disable@CPUS
(STATE is a name like POLL or stateK), pmqos.resume_latency_us@CPUS, epb@CPUS, cpufreq.governor,
cpufreq.min_freq, cpufreq.max_freq, cpufreq.epp (per policy), cpufreq.turbo, cpufreq.boost,
intel_pstate.{no_turbo,min_perf_pct,max_perf_pct,status,hwp_dynamic_boost}, amd_pstate.status,
uncore.min_freq, uncore.max_freq (per die), aspm.policy, sched.feature.NAME, rcu.expedited,
MODULE.PARAM (/sys/module/MODULE/parameters/PARAM), sysfs:/sys/PATH.
SCOPE: CPUs (0-3,5), all, or units: package1, die0 (of every package), package0.die1,
module2, core3 (of every package), node0. Values take units (200us, 0.2ms, 2.1GHz, 50%),
booleans (on/off, 1/0, Y/N) and special words (frequencies: min, max, base; EPB:
performance, balance-performance, normal, balance-power, power). See docs/bare-metal.md.
Journals live in $PMLAB_STATE_DIR (default /var/lib/pmlab/journal).";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

impl Args {
    /// Whether it only reads knobs (`list`, `get`), so it may die of SIGPIPE.
    pub fn only_reads(&self) -> bool {
        matches!(self.cmd, Cmd::List { .. } | Cmd::Get { .. })
    }
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Every knob that resolves here, its current value and allowed values.
    #[command(after_help = "Examples:\n  pmlab knob list\n  pmlab knob list --all --json")]
    List {
        /// Also list the parameters of every module (not only power-related ones).
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
        /// Read this directory as the filesystem root (another machine's snapshot).
        #[arg(long, value_name = "DIR")]
        root: Option<std::path::PathBuf>,
    },
    /// Current value of knobs (NAME[@CPUS]).
    #[command(
        after_help = "Examples:\n  pmlab knob get rcu.expedited\n  pmlab knob get cpuidle.POLL.disable@0-1 --json"
    )]
    Get {
        #[arg(required = true, value_name = "NAME[@SCOPE]")]
        names: Vec<String>,
        #[arg(long)]
        json: bool,
        /// Read this directory as the filesystem root (another machine's snapshot).
        #[arg(long, value_name = "DIR")]
        root: Option<std::path::PathBuf>,
    },
    /// Set knobs (all validated before any is written; journaled; `knob restore` undoes).
    #[command(
        after_help = "Examples:\n  pmlab knob set haltpoll.guest_halt_poll_ns=150us cpuidle.POLL.disable@1=1\n  pmlab knob set cpu.online@1=0"
    )]
    Set {
        #[arg(required = true, value_name = "NAME[@CPUS]=VALUE")]
        assignments: Vec<String>,
        /// For tests: write a writable copy of a machine's tree under this directory instead
        /// of `/` (journaled and restored as on the machine). Hidden: users set knobs on the
        /// machine they run on.
        #[arg(long, value_name = "DIR", hide = true)]
        root: Option<std::path::PathBuf>,
    },
    /// Put every knob pmlab changed back to the value it found (kept `knob set`s and
    /// journals of dead pmlab processes).
    #[command(after_help = "Examples:\n  pmlab knob restore")]
    Restore {
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.cmd {
        Cmd::List { all, json, root } => {
            list(&super::info::reading_root(root.as_deref())?, all, json)
        }
        Cmd::Get { names, json, root } => {
            get(&super::info::reading_root(root.as_deref())?, &names, json)
        }
        Cmd::Set { assignments, root } => {
            set(&super::info::reading_root(root.as_deref())?, &assignments)
        }
        Cmd::Restore { json } => restore(json),
    }
}

fn list(root: &Root, all: bool, json: bool) -> anyhow::Result<()> {
    let knobs = knob::list_power(root, all);
    if json {
        println!("{}", serde_json::to_string_pretty(&knobs)?);
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["knob", "scope", "value", "allowed", "writable"]);
    for k in &knobs {
        t.add_row([
            k.name.clone(),
            serde_json::to_value(k.scope)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            k.value.clone(),
            k.allowed.clone(),
            if k.writable { "yes" } else { "no" }.to_string(),
        ]);
    }
    println!("{t}");
    if !all {
        println!("(module parameters of other modules: pmlab knob list --all)");
    }
    Ok(())
}

fn get(root: &Root, names: &[String], json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for n in names {
        rows.extend(knob::read_all(root, &n.parse::<KnobId>()?)?);
    }
    if json {
        let map: serde_json::Map<String, serde_json::Value> = rows
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        println!("{}", serde_json::to_string_pretty(&map)?);
    } else {
        for (k, v) in rows {
            println!("{k} = {v}");
        }
    }
    Ok(())
}

fn set(root: &Root, assignments: &[String]) -> anyhow::Result<()> {
    let assignments = Assignment::parse_all(assignments)?;
    // Zero grace: a signal during the writes restores them and exits at once.
    let lab = pmlab_lab::lab::Lab::at(root.clone(), std::time::Duration::ZERO)?;
    let done = lab.set_knobs(&assignments)?;
    for line in &done.recovered {
        eprintln!("pmlab: {line}");
    }
    for c in &done.changes {
        println!(
            "{} = {} (was {})",
            c.knob,
            c.value,
            c.was.as_deref().unwrap_or("?")
        );
    }
    println!("(journaled: `pmlab knob restore` puts them back)");
    for note in &done.notes {
        eprintln!("pmlab: note: {note}");
    }
    Ok(())
}

fn restore(json: bool) -> anyhow::Result<()> {
    let dir = journal::state_dir();
    let done = journal::restore_all(&dir)?;
    if json {
        println!("{}", serde_json::to_string(&done)?);
        return Ok(());
    }
    if !dir.exists() {
        println!("nothing to restore ({} does not exist)", dir.display());
    } else if done.restored.is_empty() {
        println!("nothing to restore");
    }
    for l in done.restored.iter().chain(&done.live) {
        println!("{l}");
    }
    Ok(())
}
