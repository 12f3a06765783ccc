//! `-H/--host`, `-U/--user`, `-K/--key`: run the command on another machine through
//! `pmlab_remote` (pmlab pushes itself there over OpenSSH and runs the same command
//! line; its output is printed here).

use anyhow::{bail, Context, Result};
use pmlab_remote::{Bring, Remote, Target};
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

/// How a command runs on a --host target: which of its arguments name local paths, and
/// what comes back.
#[derive(Debug, Default)]
pub struct Job {
    /// Options whose values are local paths, left out of the remote command line (the
    /// remote pmlab then uses its defaults inside its work directory).
    pub strip_long: &'static [&'static str],
    pub strip_short: &'static [char],
    /// Added right after the subcommand's name.
    pub add: Vec<OsString>,
    /// A local file copied into the work directory: (path, name there); the argument that
    /// named it is replaced by the name.
    pub push: Option<(PathBuf, String)>,
    /// What comes back; `None`: nothing (the command only prints).
    pub bring: Option<Bring>,
}

impl Job {
    /// A command that only prints (info, knob, run).
    pub fn prints() -> Job {
        Job::default()
    }

    /// A command that writes the store at `db` (given with `--db`).
    pub fn stores(db: &std::path::Path) -> Job {
        Job {
            strip_long: &["--db"],
            bring: Some(Bring {
                db: Some(db.to_path_buf()),
                ..Bring::default()
            }),
            ..Job::default()
        }
    }
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
    let mut argv = strip_options(&strip_remote_args(&argv), job.strip_long, job.strip_short);
    let Some(at) = argv.iter().position(|a| a == command) else {
        bail!("--host: `{command}` not found on the command line");
    };
    argv.splice(at + 1..at + 1, job.add.iter().cloned());
    let mut push = Vec::new();
    if let Some((path, name)) = &job.push {
        if let Some(i) = argv.iter().skip(at + 1).position(|a| a == path.as_os_str()) {
            argv[at + 1 + i] = name.into();
        }
        push.push((path.clone(), name.clone()));
    }
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

/// `argv` without `-H/--host`, `-U/--user`, `-K/--key` and their values (`-H V`, `-HV`,
/// `--host V`, `--host=V`, and as the last letter of a short-flag cluster, `-vH V`);
/// nothing after `--` is touched.
pub fn strip_remote_args(argv: &[OsString]) -> Vec<OsString> {
    strip_options(argv, &["--host", "--user", "--key"], &['H', 'U', 'K'])
}

/// `argv` without the options `long` and `short` and their values, in the forms
/// [`strip_remote_args`] lists; nothing after `--` is touched.
fn strip_options(argv: &[OsString], long: &[&str], short: &[char]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(argv.len());
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--" {
            out.push(a.clone());
            out.extend(it.cloned());
            break;
        }
        if long.contains(&s.as_ref()) {
            it.next();
            continue;
        }
        if long.iter().any(|l| s.starts_with(&format!("{l}="))) {
            continue;
        }
        if let Some(cluster) = s.strip_prefix('-').filter(|c| !c.starts_with('-')) {
            if let Some(i) = cluster.find(short) {
                if i > 0 {
                    out.push(format!("-{}", &cluster[..i]).into());
                }
                if i + 1 == cluster.len() {
                    it.next();
                }
                continue;
            }
        }
        out.push(a.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::strip_remote_args;

    fn strip(s: &str) -> String {
        let v: Vec<std::ffi::OsString> = s.split(' ').map(Into::into).collect();
        let out: Vec<String> = strip_remote_args(&v)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        out.join(" ")
    }

    #[test]
    fn remote_options_are_stripped() {
        assert_eq!(strip("-H box info --json"), "info --json");
        assert_eq!(strip("--host=box -U root info"), "info");
        assert_eq!(strip("info --json -Hbox --key k --user=u"), "info --json");
        assert_eq!(strip("info -vH box"), "info -v");
        assert_eq!(
            strip("knob set rcu.expedited=1 -K /k -H h"),
            "knob set rcu.expedited=1"
        );
        assert_eq!(strip("record -H h -- cmd -H x"), "record -- cmd -H x");
    }
}
