//! The boot lab as an executor of the lab's protocol: a configuration is a guest (kernel,
//! command line, machine), a workload is a vCPU count, a run is one boot. Everything is
//! checked and the accelerator chosen (a KVM probe boot where `/dev/kvm` is usable) before
//! the store is opened; the session's work directory (initramfs, consoles, results) is
//! removed when the lab is dropped, and no QEMU outlives a run.

use crate::boot::{self, Outcome};
use crate::bringup::{self, BringUp};
use crate::guest;
use crate::image::KernelImage;
use crate::qemu::{self, BootCommand, Qemu};
use crate::BootError;
use pmlab_kernel::{Direction, Metric};
use pmlab_lab::executor::{ExecError, Executor, RunContext, RunError, RunOutput};
use pmlab_store::spec::{
    Accel, Configuration, Experiment, GuestArch, GuestSpec, Kind, WorkloadDef,
};
use pmlab_store::system::SystemSnapshot;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The primary metric: secondary-CPU bring-up, ms.
pub const BRINGUP_METRIC: &str = "boot.bringup_ms";

/// Events the guest traces from its command line: hotplug steps, IPIs, interrupts and the
/// scheduler's switches (the bring-up's gaps: preemption, interrupts).
pub fn guest_events(arch: GuestArch) -> &'static str {
    match arch {
        GuestArch::X86_64 => {
            "cpuhp:*,ipi:*,irq_vectors:*,irq:irq_handler_entry,irq:irq_handler_exit,irq:softirq_entry,irq:softirq_exit,sched:sched_switch,printk:console"
        }
        GuestArch::Arm64 => {
            "cpuhp:*,ipi:*,irq:irq_handler_entry,irq:irq_handler_exit,irq:softirq_entry,irq:softirq_exit,sched:sched_switch,printk:console"
        }
    }
}

/// One configuration: what it boots.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestConfig {
    /// Its label (None: from what varies between the configurations).
    pub label: Option<String>,
    /// The kernel image.
    pub kernel: PathBuf,
    /// Its own command-line words.
    pub cmdline: String,
}

/// A boot experiment as asked.
#[derive(Debug, Clone)]
pub struct BootOptions {
    /// The configurations (at least one).
    pub configs: Vec<GuestConfig>,
    /// vCPU counts (the workloads).
    pub vcpus: Vec<u32>,
    /// Guest memory, MiB.
    pub memory_mib: u32,
    /// QEMU machine type (None: the architecture's default).
    pub machine: Option<String>,
    /// QEMU CPU model (None: the accelerator's default).
    pub cpu: Option<String>,
    /// The accelerator (None: KVM where a probe boot succeeds, else TCG).
    pub accel: Option<Accel>,
    /// The accelerator's options (None: `thread=multi` for TCG).
    pub accel_options: Option<String>,
    /// The QEMU binary (None: from PATH).
    pub qemu: Option<PathBuf>,
    /// A static busybox for the guest (None: the architecture's usual place).
    pub busybox: Option<PathBuf>,
    /// Per-boot deadline (None: 60 s + 4 s per vCPU under TCG, 60 s under KVM).
    pub timeout: Option<Duration>,
    /// Trace the guest's boot (off: the kernel log's time stamps only).
    pub trace: bool,
    /// The guest's trace buffer per CPU, KiB.
    pub trace_buf_kb: u32,
    /// Record the host's `kvm:*` events per boot for VM exits by reason (None: under KVM).
    pub kvm_exits: Option<bool>,
    /// The store (traces go beside it).
    pub db: PathBuf,
}

impl Default for BootOptions {
    fn default() -> Self {
        BootOptions {
            configs: Vec::new(),
            vcpus: vec![2],
            memory_mib: 512,
            machine: None,
            cpu: None,
            accel: None,
            accel_options: None,
            qemu: None,
            busybox: None,
            timeout: None,
            trace: true,
            trace_buf_kb: 1024,
            kvm_exits: None,
            db: PathBuf::from("pmlab.db"),
        }
    }
}

/// The default guest kernel (set-up's): the newest `vmlinuz-*` under [`crate::cache_dir`].
pub fn default_kernel(arch: GuestArch) -> Result<PathBuf, BootError> {
    let dir = crate::cache_dir().join(match arch {
        GuestArch::X86_64 => "x86_64",
        GuestArch::Arm64 => "arm64",
    });
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().ok_or_else(|| BootError::Missing {
        what: format!("a default {arch} guest kernel in {}", dir.display()),
        hint: "run scripts/setup.sh (it unpacks Debian's cloud kernel there), or give --kernel"
            .into(),
    })
}

/// The default guest this machine can boot, or why none: QEMU for x86_64 in PATH, a static
/// busybox, and set-up's guest kernel (what `pmlab study` checks before its boot stage).
pub fn available_guest() -> Result<PathBuf, BootError> {
    let name = qemu::binary_name(GuestArch::X86_64);
    if qemu::in_path(name).is_none() {
        return Err(BootError::Missing {
            what: format!("QEMU ({name})"),
            hint: "apt-get install qemu-system-x86 (scripts/setup.sh installs it)".into(),
        });
    }
    guest::busybox(GuestArch::X86_64, None)?;
    default_kernel(GuestArch::X86_64)
}

/// Labels from what varies: the command line when only it differs, the kernel's release
/// (or file name) when only the kernel does, both otherwise; given labels are kept.
pub fn labels(configs: &[GuestConfig], kernels: &[KernelImage]) -> Vec<String> {
    let same_kernel = configs.windows(2).all(|w| w[0].kernel == w[1].kernel);
    let same_cmdline = configs.windows(2).all(|w| w[0].cmdline == w[1].cmdline);
    configs
        .iter()
        .zip(kernels)
        .map(|(c, k)| {
            if let Some(l) = &c.label {
                return l.clone();
            }
            let kernel = k.release.clone().unwrap_or_else(|| {
                c.kernel
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
            let cmdline = if c.cmdline.trim().is_empty() {
                "(default cmdline)".to_string()
            } else {
                c.cmdline.trim().to_string()
            };
            match (same_kernel, same_cmdline) {
                (true, false) => cmdline,
                (false, true) => kernel,
                (true, true) => cmdline,
                (false, false) => format!("{kernel} {cmdline}"),
            }
        })
        .collect()
}

/// Everything checked, the accelerator chosen, the initramfs written: an experiment and its
/// executor.
pub struct Prepared {
    /// The experiment to run (kind `boot`).
    pub experiment: Experiment,
    /// Its executor.
    pub executor: BootExecutor,
}

/// Boots as runs of the protocol.
pub struct BootExecutor {
    qemu: Qemu,
    guests: Vec<GuestSpec>,
    vcpus: Vec<u32>,
    work: tempfile::TempDir,
    initrd: PathBuf,
    trace: bool,
    trace_buf_kb: u32,
    timeout: Option<Duration>,
    db: PathBuf,
    kvm_exits: bool,
}

/// The boot lab on the lab object.
pub trait BootLab {
    /// Check `opts`, find QEMU and busybox, choose the accelerator and build the experiment.
    fn prepare_boot(&self, opts: &BootOptions) -> Result<Prepared, BootError>;
}

impl BootLab for pmlab_lab::lab::Lab {
    fn prepare_boot(&self, opts: &BootOptions) -> Result<Prepared, BootError> {
        prepare(opts)
    }
}

/// The session work directories' prefix in the temp directory: `pmlab-boot-PID-…`.
pub const WORK_PREFIX: &str = "pmlab-boot-";

/// Remove the work directories of pmlab processes that died without removing theirs
/// (SIGKILL); their QEMU died with them (PR_SET_PDEATHSIG).
pub fn sweep_stale_work() {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(WORK_PREFIX)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// See [`BootLab::prepare_boot`].
pub fn prepare(opts: &BootOptions) -> Result<Prepared, BootError> {
    if opts.configs.is_empty() {
        return Err(BootError::Invalid("no configuration to boot".into()));
    }
    if opts.vcpus.is_empty() || opts.vcpus.contains(&0) {
        return Err(BootError::Invalid(
            "--vcpus needs one or more counts of at least 1".into(),
        ));
    }
    if opts.memory_mib < 64 {
        return Err(BootError::Invalid(format!(
            "--memory {} MiB is too small for a guest (64 MiB at least)",
            opts.memory_mib
        )));
    }
    let kernels = opts
        .configs
        .iter()
        .map(|c| KernelImage::inspect(&c.kernel))
        .collect::<Result<Vec<_>, _>>()?;
    let arch = kernels[0].arch;
    if let Some(k) = kernels.iter().find(|k| k.arch != arch) {
        return Err(BootError::Invalid(format!(
            "{} is an {} kernel but {} is {}: one experiment boots one architecture",
            k.path.display(),
            k.arch,
            kernels[0].path.display(),
            arch
        )));
    }
    let qemu = Qemu::find(arch, opts.qemu.as_deref())?;
    let busybox = guest::busybox(arch, opts.busybox.as_deref())?;
    let work = tempfile::Builder::new()
        .prefix(&format!("{WORK_PREFIX}{}-", std::process::id()))
        .tempdir()
        .map_err(|source| BootError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    let initrd = work.path().join("initramfs.cpio");
    guest::write_initramfs(&busybox, &initrd)?;
    // The vCPU limit of the machine asked for (or the default one, the same for both
    // accelerators) is checked before any probe boot.
    let asked_machine = opts
        .machine
        .as_deref()
        .unwrap_or(qemu::defaults(arch, Accel::Tcg).0);
    let max = qemu.max_cpus(asked_machine)?;
    if let Some(v) = opts.vcpus.iter().find(|&&v| v > max) {
        return Err(BootError::Invalid(format!(
            "{v} vCPUs is over QEMU's limit for machine `{asked_machine}` ({max}); choose \
             another machine (--machine) or fewer vCPUs"
        )));
    }
    let (accel, accel_reason) = match opts.accel {
        Some(a) => (a, "asked for".to_string()),
        None => choose_accel(&qemu, &kernels[0], &initrd, work.path()),
    };
    let (machine0, cpu0) = qemu::defaults(arch, accel);
    let machine = opts.machine.clone().unwrap_or_else(|| machine0.to_string());
    let cpu = opts.cpu.clone().unwrap_or_else(|| cpu0.to_string());
    let accel_options = opts.accel_options.clone().unwrap_or_else(|| match accel {
        Accel::Tcg => "thread=multi".into(),
        Accel::Kvm => String::new(),
    });
    // VM exits need the host's kvm events: recorded by default wherever KVM runs the guests.
    let kvm_exits = opts.kvm_exits.unwrap_or(accel == Accel::Kvm);
    if kvm_exits {
        crate::host::check()?;
    }
    let host_kvm = match accel {
        Accel::Kvm => crate::host::kvm_parameters(),
        Accel::Tcg => Vec::new(),
    };
    let labels = labels(&opts.configs, &kernels);
    for (i, l) in labels.iter().enumerate() {
        if labels[..i].contains(l) {
            return Err(BootError::Invalid(format!(
                "two configurations would both be labelled `{l}`: they boot the same kernel \
                 with the same command line"
            )));
        }
    }
    let guests: Vec<GuestSpec> = opts
        .configs
        .iter()
        .zip(&kernels)
        .map(|(c, k)| GuestSpec {
            arch,
            kernel: std::fs::canonicalize(&c.kernel).unwrap_or_else(|_| c.kernel.clone()),
            kernel_release: k.release.clone(),
            cmdline: c.cmdline.trim().to_string(),
            memory_mib: opts.memory_mib,
            machine: machine.clone(),
            cpu_model: cpu.clone(),
            accel,
            accel_options: accel_options.clone(),
            accel_reason: accel_reason.clone(),
            qemu: qemu.version.clone(),
            host_kvm: host_kvm.clone(),
            kvm_exits,
        })
        .collect();
    let configurations = labels
        .iter()
        .map(|l| Configuration {
            label: l.clone(),
            knobs: Vec::new(),
        })
        .collect();
    let workloads = opts
        .vcpus
        .iter()
        .map(|v| {
            WorkloadDef::new(vec!["boot".into(), "--vcpus".into(), v.to_string()])
                .map_err(|e| BootError::Invalid(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let name = format!(
        "boot {}: {} ({}, {})",
        labels.join(" vs "),
        opts.vcpus
            .iter()
            .map(|v| format!("{v} vCPUs"))
            .collect::<Vec<_>>()
            .join(", "),
        arch,
        accel.as_str().to_uppercase()
    );
    let mut experiment = Experiment::new(Kind::Boot, name, configurations, workloads, None)
        .map_err(|e| BootError::Invalid(e.to_string()))?;
    experiment.guests = guests.clone();
    Ok(Prepared {
        experiment,
        executor: BootExecutor {
            qemu,
            guests,
            vcpus: opts.vcpus.clone(),
            initrd,
            work,
            trace: opts.trace,
            trace_buf_kb: opts.trace_buf_kb,
            timeout: opts.timeout,
            db: opts.db.clone(),
            kvm_exits,
        },
    })
}

/// KVM where `/dev/kvm` is usable and a one-vCPU probe boot of the guest reaches init;
/// otherwise TCG, with the reason.
fn choose_accel(qemu: &Qemu, kernel: &KernelImage, initrd: &Path, work: &Path) -> (Accel, String) {
    let kvm = Path::new("/dev/kvm");
    if !kvm.exists() {
        return (Accel::Tcg, "no /dev/kvm on this machine".into());
    }
    if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(kvm)
        .is_err()
    {
        return (Accel::Tcg, "/dev/kvm is not usable by this user".into());
    }
    let (machine, cpu) = qemu::defaults(kernel.arch, Accel::Kvm);
    let console = work.join("probe.log");
    let output = work.join("probe.out");
    let cmd = BootCommand {
        qemu,
        accel: Accel::Kvm,
        accel_options: "",
        machine,
        cpu,
        vcpus: 1,
        memory_mib: 256,
        kernel: &kernel.path,
        initrd,
        append: format!(
            "console={} panic=-1 pmlab.probe",
            qemu::console_device(kernel.arch)
        ),
        console: &console,
        output: &output,
    };
    let pvm = Path::new("/sys/module/kvm_pvm").exists();
    let why = match boot::boot(&cmd, Duration::from_secs(60)) {
        Ok(b) if b.console.contains("PMLAB-INIT") => {
            return (Accel::Kvm, "a probe boot under KVM reached init".into())
        }
        Ok(b) => b.outcome.describe(),
        Err(e) => pmlab_kernel::error_chain(&e),
    };
    let pvm = if pvm {
        " (this host's KVM is a PVM backend, kvm_pvm, which runs only kernels built as PVM guests)"
    } else {
        ""
    };
    (
        Accel::Tcg,
        format!("KVM could not boot the guest: {why}{pvm}"),
    )
}

fn exec_err(e: BootError) -> ExecError {
    ExecError::Boot(Box::new(e))
}

impl BootExecutor {
    fn append(&self, g: &GuestSpec) -> String {
        let mut words = vec![
            format!("console={}", qemu::console_device(g.arch)),
            "panic=-1".to_string(),
            // Each console line costs milliseconds over an emulated UART, inside what is
            // measured: info lines stay in the log (read from the guest's dmesg); panics,
            // oopses and BUGs still reach the console. A configuration's `loglevel=` wins.
            "quiet".to_string(),
        ];
        if g.accel == Accel::Tcg {
            // An emulator on a busy host delivers the timer late: the kernel's IO-APIC timer
            // check then panics ("IO-APIC + timer doesn't work!"), a failure of the host, not
            // of what is compared.
            words.push("no_timer_check".into());
        }
        if self.trace {
            words.push(format!("trace_event={}", guest_events(g.arch)));
            words.push(format!("trace_buf_size={}K", self.trace_buf_kb));
            // The bring-up is at the start: a full buffer drops the newest events, not it.
            words.push("trace_options=nooverwrite".into());
            // The kernel log's clock (local_clock): while a guest's sched_clock is unstable
            // (always under TCG) the default `local` trace clock runs apart from it.
            words.push("trace_clock=global".into());
        }
        if !g.cmdline.is_empty() {
            words.push(g.cmdline.clone());
        }
        words.join(" ")
    }

    fn timeout(&self, g: &GuestSpec, vcpus: u32) -> Duration {
        self.timeout.unwrap_or(match g.accel {
            Accel::Tcg => Duration::from_secs(60 + 4 * u64::from(vcpus)),
            Accel::Kvm => Duration::from_secs(60),
        })
    }

    /// The metrics of a completed boot.
    fn metrics(b: &BringUp, wall: Duration) -> (Vec<Metric>, Vec<Metric>) {
        let ms = |ns: u64| ns as f64 / 1e6;
        let primary = vec![Metric::new(
            BRINGUP_METRIC,
            ms(b.span_ns),
            "ms",
            Direction::Lower,
        )];
        let mut side = Vec::new();
        if let Some(l) = b.log_span_ns {
            side.push(Metric::new(
                "boot.log_bringup_ms",
                ms(l),
                "ms",
                Direction::Lower,
            ));
        }
        if let Some(h) = b.hotplug_ns {
            side.push(Metric::new(
                "boot.hotplug_ms",
                ms(h),
                "ms",
                Direction::Lower,
            ));
        }
        for (name, v) in [("boot.lead_ms", b.lead_ns), ("boot.tail_ms", b.tail_ns)] {
            if let Some(v) = v {
                side.push(Metric::new(name, v as f64 / 1e6, "ms", Direction::Lower));
            }
        }
        if let Some(i) = b.init_ns {
            side.push(Metric::new("boot.init_ms", ms(i), "ms", Direction::Lower));
        }
        side.push(Metric::new(
            "boot.qemu_wall_s",
            wall.as_secs_f64(),
            "s",
            Direction::Lower,
        ));
        if b.source == bringup::Source::Trace {
            side.push(Metric::new(
                "boot.steps_covered_pct",
                100.0 * b.coverage(),
                "%",
                Direction::Higher,
            ));
            side.push(Metric::new(
                "boot.secondaries_online",
                b.reached_online.len() as f64,
                "CPUs",
                Direction::Higher,
            ));
            side.push(Metric::new(
                "boot.lost_events",
                b.lost_events as f64,
                "events",
                Direction::Lower,
            ));
            for &(cpu, ns) in &b.per_cpu {
                side.push(
                    Metric::new("boot.cpu_bringup_ms", ms(ns), "ms", Direction::Lower).on_cpu(cpu),
                );
            }
            for s in &b.steps {
                side.push(Metric::new(
                    format!("boot.step_ms:{}", s.name),
                    ms(s.total_ns),
                    "ms",
                    Direction::Lower,
                ));
            }
        }
        (primary, side)
    }
}

impl Executor for BootExecutor {
    fn validate(&mut self, experiment: &Experiment) -> Result<(), ExecError> {
        if experiment.configurations.len() != self.guests.len() {
            return Err(ExecError::Invalid(
                "a boot experiment needs one guest per configuration".into(),
            ));
        }
        Ok(())
    }

    fn snapshot(&mut self, _: &Experiment) -> SystemSnapshot {
        SystemSnapshot::read(Path::new("/"))
    }

    fn configure(&mut self, _: &Configuration) -> Result<(), ExecError> {
        // A configuration is the guest a run boots (by index): nothing of this machine changes.
        Ok(())
    }

    fn run(&mut self, _: &WorkloadDef, context: &RunContext) -> Result<RunOutput, RunError> {
        let g = self.guests[context.configuration].clone();
        let vcpus = self.vcpus[context.workload];
        let seq = context.sequence + 1;
        let console = self.work.path().join(format!("console-{seq}.log"));
        let output = self.work.path().join(format!("results-{seq}.tgz"));
        let cmd = BootCommand {
            qemu: &self.qemu,
            accel: g.accel,
            accel_options: &g.accel_options,
            machine: &g.machine,
            cpu: &g.cpu_model,
            vcpus,
            memory_mib: g.memory_mib,
            kernel: &g.kernel,
            initrd: &self.initrd,
            append: self.append(&g),
            console: &console,
            output: &output,
        };
        let label = context_label(&g, vcpus);
        let trace_out = pmlab_lab::tracing::run_trace_path(&self.db, context, &label);
        // The host's side starts before QEMU, so that every thread QEMU forks is seen.
        let host_path = self.kvm_exits.then(|| {
            trace_out.with_file_name(format!(
                "{}-host.dat",
                trace_out
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ))
        });
        let host = match &host_path {
            Some(p) => Some(
                crate::host::HostRecording::start(p).map_err(|e| RunError::Exec(exec_err(e)))?,
            ),
            None => None,
        };
        let booted = boot::boot(&cmd, self.timeout(&g, vcpus));
        let exits = match (host, &booted) {
            (Some(h), Ok(b)) => Some(h.finish(b.pid)),
            _ => None,
        };
        let booted = booted.map_err(|e| RunError::Exec(exec_err(e)))?;
        let result = (|| {
            if booted.outcome != Outcome::Completed {
                let mut outcome = booted.outcome.describe();
                if !matches!(
                    booted.outcome,
                    Outcome::Panicked { .. } | Outcome::Cancelled
                ) {
                    let tail = booted.tail();
                    if !tail.is_empty() {
                        outcome.push_str("; console's last lines:\n  ");
                        outcome.push_str(&tail.join("\n  "));
                    }
                }
                return Err(BootError::Failed { outcome });
            }
            let archive = booted.results.as_deref().ok_or(BootError::Failed {
                outcome: Outcome::NoResults.describe(),
            })?;
            let unpacked = self.work.path().join(format!("results-{seq}"));
            let guest_dir = bringup::unpack(archive, &unpacked)?;
            if let Some(parent) = trace_out.parent() {
                std::fs::create_dir_all(parent).map_err(|source| BootError::Io {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            let b = bringup::analyze(&guest_dir, &booted.console, &trace_out);
            let _ = std::fs::remove_dir_all(&unpacked);
            b
        })();
        for p in [&console, &output, &console.with_extension("stderr")] {
            let _ = std::fs::remove_file(p);
        }
        if result.is_err() {
            // A failed boot keeps no files: only its outcome is stored.
            if let Some(p) = &host_path {
                let _ = std::fs::remove_file(p);
            }
        }
        let b = result.map_err(|e| RunError::Exec(exec_err(e)))?;
        let (metrics, mut side_metrics) = Self::metrics(&b, booted.wall);
        if let Some(exits) = exits {
            side_metrics.extend(exits.map_err(|e| RunError::Exec(exec_err(e)))?);
        }
        Ok(RunOutput {
            metrics,
            side_metrics,
            trace_path: b.trace.clone(),
        })
    }

    fn restore(&mut self) -> Result<(), ExecError> {
        Ok(())
    }
}

fn context_label(g: &GuestSpec, vcpus: u32) -> String {
    format!(
        "{}-{}vcpu",
        g.kernel_release.as_deref().unwrap_or("kernel"),
        vcpus
    )
}
