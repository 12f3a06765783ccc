//! `pmlab info`: what this machine has (kernel, CPUs, virtualization, topology, idle
//! states, haltpoll, cpufreq, RAPL, tracefs, sched features, hotplug states) and what
//! pmlab can do on it. Read-only; works without root ("needs root" where it must).

use anyhow::{bail, Result};
use pmlab_kernel::sysinfo::SystemInfo;
use pmlab_kernel::Root;
use pmlab_report::render::info;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  pmlab info                     sections for people, ending with what pmlab can do here
  pmlab info -v                  also every hotplug state and sched feature
  pmlab info --json | jq .capabilities     (JSON: the SystemInfo, plus `capabilities`)
  pmlab info --json | jq '.cpuidle.cpus[1].states[] | {name, usage}'
  pmlab info --format markdown   for an issue; csv: one section,item,value record per item
  pmlab info --root /tmp/spr1    another machine's /sys + /proc tree (a snapshot)

Nothing is written or mounted. Items only root can read are shown as \"needs root\".")]
pub struct Args {
    #[command(flatten)]
    out: super::FormatArgs,
    /// List every hotplug state and sched feature, and idle states of all CPUs.
    #[arg(short, long)]
    verbose: bool,
    /// Read this directory as the filesystem root (a snapshot of another machine's
    /// /sys and /proc); nothing is written under it.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
}

/// The root a reading command's `--root DIR` names (`/` without it); refused when DIR is
/// not a directory. Reading commands never write under it.
pub fn reading_root(dir: Option<&std::path::Path>) -> Result<Root> {
    Ok(match dir {
        Some(d) if !d.is_dir() => bail!("--root {}: not a directory", d.display()),
        Some(d) => Root::new(d),
        None => Root::system(),
    })
}

pub fn run(args: Args) -> Result<()> {
    let root = reading_root(args.root.as_deref())?;
    let info = SystemInfo::read(&root);
    let caps = info.capabilities();
    print!(
        "{}",
        info::render(&info, &caps, args.verbose, args.out.get())?
    );
    Ok(())
}
