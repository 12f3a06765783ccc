//! `-H/--host`, `-U/--user`, `-K/--key`: run the command on another machine through
//! `pmlab_remote` (pmlab pushes itself there over OpenSSH and runs the same command
//! line; its output is printed here).

use anyhow::{bail, Context, Result};
pub use pmlab_remote::Job;
use pmlab_remote::{Remote, Target};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Default)]
pub struct Args {
    /// Run on this machine over ssh ([USER@]HOST[:PORT] or a ~/.ssh/config alias; needs
    /// key authentication and root or passwordless sudo there). Stored results, recordings
    /// and reports come back here.
    #[arg(short = 'H', long, global = true, value_name = "HOST")]
    pub host: Option<String>,
    /// ssh user on the --host target (default: ssh's own, from ~/.ssh/config).
    #[arg(
        short = 'U',
        long,
        global = true,
        value_name = "USER",
        requires = "host"
    )]
    pub user: Option<String>,
    /// Private key for the --host target (default: ssh's own keys and agent).
    #[arg(
        short = 'K',
        long,
        global = true,
        value_name = "FILE",
        requires = "host"
    )]
    pub key: Option<PathBuf>,
}

/// Run `command` (the subcommand's name) on the target with this process's own arguments
/// less the remote options (and `job`'s local paths), bring back what `job` says, and
/// exit with the remote pmlab's exit code (its errors are already printed on stderr);
/// returns only this side's errors.
pub fn run(args: &Args, command: &str, job: Option<Job>) -> Result<()> {
    let Some(host) = &args.host else {
        bail!("no --host given")
    };
    let Some(job) = job else {
        bail!("--host: `{command}` does not run on a remote target: it reads local files or the local store only; run it without --host");
    };
    let target = Target::parse(host, args.user.clone(), args.key.clone())?;
    let remote = Remote::connect(target).context("preparing the remote target")?;
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let (argv, push) = job.command_line(command, &argv)?;
    let status = match &job.bring {
        None => remote.run(&argv)?,
        Some(bring) => {
            let (status, brought) = remote.run_bringing_back(&argv, &push, bring)?;
            for e in &brought.experiments {
                let db = bring.db.as_deref().unwrap_or(std::path::Path::new(""));
                match e.id {
                    Some(id) => eprintln!(
                        "pmlab: {host}'s experiment {} is experiment {id} in {}",
                        e.source_id,
                        db.display()
                    ),
                    None => eprintln!(
                        "pmlab: {host}'s experiment {} was already in {}",
                        e.source_id,
                        db.display()
                    ),
                }
            }
            for f in &brought.files {
                eprintln!("pmlab: brought back {}", f.display());
            }
            status
        }
    };
    std::process::exit(status.code().unwrap_or(1))
}
