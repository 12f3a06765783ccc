//! `pmlab boot`: guests booted under QEMU per kernel, command line and vCPU count, with
//! secondary-CPU bring-up from each guest's own trace, compared as `compare` compares.

use super::run_spec::{execute_on, ExperimentOpts};
use anyhow::bail;
use pmlab_boot::lab::{default_kernel, BootLab, BootOptions, GuestConfig};
use pmlab_boot::{Accel, GuestArch, KernelImage};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  pmlab boot --vcpus 2,8,16 --a 'cpuhp.parallel=0' --b 'cpuhp.parallel=1'
  pmlab boot --kernel-a old/bzImage --kernel-b new/bzImage --vcpus 16 --max-runs 20
  pmlab boot --vcpus 8 --format mail          # one configuration: the default guest
  pmlab boot --kernel vmlinuz-6.1.0-arm64 --vcpus 2,8 --a '' --b 'cpuhp.parallel=0'

A configuration is a kernel (--kernel, or --kernel-a/--kernel-b) and its own command-line
words (--a/--b); labels come from what differs. Without --kernel the default guest is
set-up's (Debian's cloud kernel under /var/cache/pmlab/guest, PMLAB_GUEST_DIR). Each run is
one boot, its bring-up read from the guest's cpuhp trace (the kernel log where it has none).
The accelerator is KVM where a probe boot succeeds, else TCG (emulated CPUs: times are the
emulator's), and is said with every result. Under KVM the host's kvm:* events are
recorded per boot (--kvm-exits) for VM exits by reason: `--side 'kvm.*'`. Boots that panic, crash or hang are failed
runs, counted per configuration with their last console lines. No QEMU outlives pmlab.";

fn memory(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix(['G', 'g']) {
        (n, 1024)
    } else if let Some(n) = t.strip_suffix(['M', 'm']) {
        (n, 1)
    } else {
        (t, 1)
    };
    num.trim()
        .parse::<u32>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{s:?} is not a memory size (e.g. 512M, 2G)"))
}

fn vcpus(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?} is not a vCPU count (1 or more)")),
    }
}

fn boot_timeout(s: &str) -> Result<std::time::Duration, String> {
    pmlab_store::spec::parse_duration(s).map_err(|e| pmlab_kernel::error_chain(&e))
}

/// The accelerator.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccelArg {
    /// KVM where a probe boot succeeds, else TCG.
    Auto,
    /// KVM only.
    Kvm,
    /// QEMU's emulator.
    Tcg,
}

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The kernel of every configuration (default: set-up's guest kernel).
    #[arg(long, value_name = "PATH")]
    pub kernel: Option<PathBuf>,
    /// The kernel of configuration A ("without the patch").
    #[arg(long, value_name = "PATH")]
    pub kernel_a: Option<PathBuf>,
    /// The kernel of configuration B ("with").
    #[arg(long, value_name = "PATH")]
    pub kernel_b: Option<PathBuf>,
    /// Command-line words of configuration A (e.g. 'cpuhp.parallel=0').
    #[arg(long = "a", value_name = "WORDS", allow_hyphen_values = true)]
    pub a: Option<String>,
    /// Command-line words of configuration B.
    #[arg(long = "b", value_name = "WORDS", allow_hyphen_values = true)]
    pub b: Option<String>,
    /// Label of A (default: from what differs).
    #[arg(long)]
    pub label_a: Option<String>,
    /// Label of B.
    #[arg(long)]
    pub label_b: Option<String>,
    /// vCPU counts, each a workload (e.g. 2,8,16).
    #[arg(long, value_delimiter = ',', value_parser = vcpus, default_value = "2")]
    pub vcpus: Vec<u32>,
    /// Guest memory (e.g. 512M, 2G).
    #[arg(long, value_parser = memory, default_value = "512M")]
    pub memory: u32,
    /// Guest architecture when no kernel is given (the default guest's).
    #[arg(long, value_enum, default_value = "x86-64")]
    pub arch: ArchArg,
    /// QEMU machine type (default: pc for x86_64, virt,gic-version=3 for arm64).
    #[arg(long)]
    pub machine: Option<String>,
    /// QEMU CPU model with options (default under TCG: max,la57=off,cx16=off on x86_64).
    #[arg(long)]
    pub cpu: Option<String>,
    /// Accelerator.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelArg,
    /// The accelerator's own options (default under TCG: thread=multi).
    #[arg(long, value_name = "OPTS")]
    pub accel_options: Option<String>,
    /// The QEMU binary (default: qemu-system-x86_64 or qemu-system-aarch64 from PATH).
    #[arg(long, value_name = "PATH")]
    pub qemu: Option<PathBuf>,
    /// A static busybox for the guest's initramfs.
    #[arg(long, value_name = "PATH")]
    pub busybox: Option<PathBuf>,
    /// Per-boot deadline (default: 60s + 4s per vCPU under TCG).
    #[arg(long, value_name = "DURATION", value_parser = boot_timeout)]
    pub boot_timeout: Option<std::time::Duration>,
    /// Do not trace the guest: bring-up from the kernel log's time stamps.
    #[arg(long)]
    pub no_guest_trace: bool,
    /// The guest's trace buffer per CPU, KiB.
    #[arg(long, value_name = "KIB", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(64..))]
    pub trace_buf_kb: u32,
    /// Record the host's kvm:* events per boot and report VM exits by reason (perf kvm
    /// stat's table) for QEMU's threads: auto = where KVM runs the guests.
    #[arg(long, value_enum, default_value = "auto")]
    pub kvm_exits: KvmExitsArg,
    /// Run a discarded warm-up boot per configuration and vCPU count first.
    #[arg(long)]
    pub warmup: bool,
    #[command(flatten)]
    pub opts: ExperimentOpts,
}

/// Whether to record the host's kvm events.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvmExitsArg {
    /// Where KVM runs the guests.
    Auto,
    /// Always (under TCG a QEMU makes no VM exits: the count is 0).
    On,
    /// Never.
    Off,
}

/// Guest architecture.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchArg {
    /// x86-64.
    #[value(name = "x86-64", alias = "x86_64")]
    X86_64,
    /// arm64.
    #[value(alias = "aarch64")]
    Arm64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // What a killed session left (its QEMU died with it) goes first, as knob journals do.
    pmlab_boot::lab::sweep_stale_work();
    if args.opts.trace || args.opts.meter.spec()?.is_some() {
        bail!(
            "pmlab boot records each guest's own trace; --trace and meters (the host's) do not \
             apply to boots"
        );
    }
    if args.opts.fake_executor.is_some() {
        bail!("pmlab boot has no fake executor");
    }
    if args.kernel.is_some() && (args.kernel_a.is_some() || args.kernel_b.is_some()) {
        bail!("give either --kernel or --kernel-a/--kernel-b, not both");
    }
    let arch = match args.arch {
        ArchArg::X86_64 => GuestArch::X86_64,
        ArchArg::Arm64 => GuestArch::Arm64,
    };
    let given = args
        .kernel
        .clone()
        .or(args.kernel_a.clone())
        .or(args.kernel_b.clone());
    let arch = match &given {
        Some(k) => KernelImage::inspect(k)?.arch,
        None => arch,
    };
    let kernel_of = |k: &Option<PathBuf>| -> anyhow::Result<PathBuf> {
        Ok(match k.clone().or(args.kernel.clone()) {
            Some(k) => k,
            None => default_kernel(arch)?,
        })
    };
    let two = args.b.is_some() || args.kernel_b.is_some() || args.label_b.is_some();
    let mut configs = vec![GuestConfig {
        label: args.label_a.clone(),
        kernel: kernel_of(&args.kernel_a)?,
        cmdline: args.a.clone().unwrap_or_default(),
    }];
    if two {
        configs.push(GuestConfig {
            label: args.label_b.clone(),
            kernel: kernel_of(&args.kernel_b)?,
            cmdline: args.b.clone().unwrap_or_default(),
        });
    }
    let opts = BootOptions {
        configs,
        vcpus: args.vcpus.clone(),
        memory_mib: args.memory,
        machine: args.machine.clone(),
        cpu: args.cpu.clone(),
        accel: match args.accel {
            AccelArg::Auto => None,
            AccelArg::Kvm => Some(Accel::Kvm),
            AccelArg::Tcg => Some(Accel::Tcg),
        },
        accel_options: args.accel_options.clone(),
        qemu: args.qemu.clone(),
        busybox: args.busybox.clone(),
        timeout: args.boot_timeout,
        trace: !args.no_guest_trace,
        trace_buf_kb: args.trace_buf_kb,
        kvm_exits: match args.kvm_exits {
            KvmExitsArg::Auto => None,
            KvmExitsArg::On => Some(true),
            KvmExitsArg::Off => Some(false),
        },
        db: args.opts.db.clone(),
    };
    let lab = pmlab_lab::lab::Lab::open()?;
    if !args.opts.quiet {
        eprintln!("pmlab: checking QEMU and the guest; a KVM probe boot may take a moment");
    }
    let prepared = lab.prepare_boot(&opts)?;
    if let Some(g) = prepared.experiment.guests.first() {
        if !args.opts.quiet {
            eprintln!(
                "pmlab: {} on {} ({}): {}",
                g.arch,
                g.accel.as_str().to_uppercase(),
                g.qemu,
                g.accel_reason
            );
        }
    }
    execute_on(
        prepared.experiment,
        &args.opts,
        None,
        Some(Box::new(prepared.executor)),
        Some(args.warmup),
    )
}
