//! The `pmlab` binary: argument parsing and printing only; the work lives in the library crates.

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "pmlab",
    version,
    about = "A lab for CPU power management on Linux: knobs, workloads, traces, experiments.",
    after_help = "Examples:\n  pmlab info\n  pmlab knob set haltpoll.guest_halt_poll_ns=200us\n  pmlab run pipe --loops 100000\n  pmlab study --quick"
)]
struct Cli {
    #[command(flatten)]
    remote: cmd::remote::Args,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// What this machine has, and what pmlab can do on it.
    Info(cmd::info::Args),
    /// List, read, set and restore kernel knobs (journaled, always restorable).
    Knob(cmd::knob::Args),
    /// Run one workload and print its metric and side metrics.
    Run(cmd::run::Args),
    /// Trace a command (or a duration) into a trace.dat file.
    Record(cmd::record::Args),
    /// Who wakes the CPUs, live: idle shares, wakeup causes, needless exits, kicks, power.
    Top(cmd::top::Args),
    /// Print every event of a trace, one per line (as `trace-cmd report -R -t`).
    Dump(cmd::dump::Args),
    /// Facts about a trace file.
    Trace(cmd::trace::Args),
    /// Write a trace in another tool's format (Perfetto).
    Export(cmd::export::Args),
    /// Analyses of a trace: idle, wakeups (needless ones too), kicks, hotplug, sched, freq, energy.
    Analyze(cmd::analyze::Args),
    /// Compare two configurations on one workload, statistically.
    Compare(cmd::compare::Args),
    /// Sweep one or more knobs over values against a workload.
    Sweep(cmd::sweep::Args),
    /// Run an experiment described in a TOML file.
    RunSpec(cmd::run_spec::Args),
    /// The result store: list, show, compare, export.
    Results(cmd::results::Args),
    /// CPU hotplug latency lab.
    Hotplug(cmd::hotplug::Args),
    /// Guests booted per kernel, command line and vCPU count: secondary-CPU bring-up compared.
    Boot(Box<cmd::boot::Args>),
    /// The default battery for this machine, with a report.
    Study(cmd::study::Args),
    /// Render a report for experiments in the store.
    Report(cmd::report::Args),
    /// What idle polling would have done, replayed from one trace.
    Whatif(cmd::whatif::Args),
    /// Results of many hosts and kernels: one report across their result bundles.
    Fleet(cmd::fleet::Args),
    /// Shell completions (bash, zsh, fish, elvish, powershell), generated from this command line.
    Completions(cmd::manual::CompletionsArgs),
    /// Man pages: pmlab.1 on stdout, or one page per command written into a directory.
    Man(cmd::manual::ManArgs),
}

impl Command {
    /// How the command runs on a `--host` target (`None`: it reads local files only).
    fn remote_job(&self) -> Option<cmd::remote::Job> {
        use cmd::remote::Job;
        match self {
            Command::Info(_) | Command::Knob(_) | Command::Run(_) => Some(Job::prints()),
            Command::Compare(a) => Some(Job::stores(&a.opts.db)),
            Command::Sweep(a) => Some(Job::stores(&a.opts.db)),
            Command::RunSpec(a) => Some(a.remote_job()),
            Command::Hotplug(a) => Some(a.remote_job()),
            Command::Study(a) => Some(a.remote_job()),
            Command::Record(a) => Some(a.remote_job()),
            _ => None,
        }
    }

    /// Whether the command only reads (traces, the store, the machine's state): such a
    /// command may die of SIGPIPE when its reader goes away.
    fn only_reads(&self) -> bool {
        matches!(
            self,
            Command::Info(_)
                | Command::Dump(_)
                | Command::Trace(_)
                | Command::Export(_)
                | Command::Analyze(_)
                | Command::Results(_)
                | Command::Report(_)
                | Command::Whatif(_)
                | Command::Fleet(_)
                | Command::Completions(_)
                | Command::Man(_)
        ) || matches!(self, Command::Knob(k) if k.only_reads())
            || matches!(self, Command::Study(s) if s.plan)
    }
}

fn main() {
    let cli = Cli::parse();
    if cli.remote.host.is_none() && cli.command.only_reads() {
        // `pmlab analyze t.dat | head` ends quietly, as `cat` does. Commands that change the
        // machine keep Rust's default (EPIPE is an error), so their knobs are restored first.
        // SAFETY: resetting one signal's disposition before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    pmlab_remote::hang_up_on_eof();
    pmlab_remote::repair_dead_journals();
    // tracefs instances of pmlab processes killed by SIGKILL go with the next command.
    pmlab_kernel::tracefs::sweep_stale_quietly();
    let result = match cli.command {
        // -H: the same command line runs on the target; its exit code is ours.
        _ if cli.remote.host.is_some() => {
            use clap::CommandFactory;
            let m = Cli::command().get_matches();
            let job = cli.command.remote_job();
            cmd::remote::run(&cli.remote, m.subcommand_name().unwrap_or_default(), job)
        }
        Command::Info(a) => cmd::info::run(a),
        Command::Knob(a) => cmd::knob::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Top(a) => cmd::top::run(a),
        Command::Dump(a) => cmd::dump::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Sweep(a) => cmd::sweep::run(a),
        Command::RunSpec(a) => cmd::run_spec::run(a),
        Command::Results(a) => cmd::results::run(a),
        Command::Hotplug(a) => cmd::hotplug::run(a),
        Command::Boot(a) => cmd::boot::run(*a),
        Command::Study(a) => cmd::study::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Whatif(a) => cmd::whatif::run(a),
        Command::Fleet(a) => cmd::fleet::run(a),
        Command::Completions(a) => {
            cmd::manual::completions(a, <Cli as clap::CommandFactory>::command())
        }
        Command::Man(a) => cmd::manual::man(a, <Cli as clap::CommandFactory>::command()),
    };
    if let Err(e) = result {
        eprintln!("pmlab: error: {}", pmlab_kernel::error_chain(e.as_ref()));
        std::process::exit(1);
    }
}
