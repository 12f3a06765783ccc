//! `-H/--host`, `-U/--user`, `-K/--key`: run the command on another machine through
//! `pmlab_lab::remote` (pmlab pushes itself there over OpenSSH and runs the same command
//! line; its output is printed here).

use anyhow::{bail, Context, Result};
use pmlab_lab::remote::{Remote, Target};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Default)]
pub struct Args {
    /// Run on this machine over ssh ([USER@]HOST[:PORT] or a ~/.ssh/config alias; needs
    /// key authentication and root or passwordless sudo there). info, knob and run for now.
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

/// Commands that run on a --host target so far.
pub const SUPPORTED: &[&str] = &["info", "knob", "run"];

/// Run `command` (the subcommand's name) on the target with this process's own arguments
/// less the remote options, and exit with the remote pmlab's exit code (its errors are
/// already printed on stderr); returns only this side's errors.
pub fn run(args: &Args, command: &str) -> Result<()> {
    let Some(host) = &args.host else {
        bail!("no --host given")
    };
    if !SUPPORTED.contains(&command) {
        bail!(
            "--host: `{command}` does not run on a remote target yet (supported: {})",
            SUPPORTED.join(", ")
        );
    }
    let target = Target::parse(host, args.user.clone(), args.key.clone())?;
    let remote = Remote::connect(target).context("preparing the remote target")?;
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let status = remote.run(&strip_remote_args(&argv))?;
    std::process::exit(status.code().unwrap_or(1))
}

/// `argv` without `-H/--host`, `-U/--user`, `-K/--key` and their values (`-H V`, `-HV`,
/// `--host V`, `--host=V`, and as the last letter of a short-flag cluster, `-vH V`);
/// nothing after `--` is touched.
pub fn strip_remote_args(argv: &[OsString]) -> Vec<OsString> {
    const LONG: &[&str] = &["--host", "--user", "--key"];
    let mut out = Vec::with_capacity(argv.len());
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--" {
            out.push(a.clone());
            out.extend(it.cloned());
            break;
        }
        if LONG.contains(&s.as_ref()) {
            it.next();
            continue;
        }
        if LONG.iter().any(|l| s.starts_with(&format!("{l}="))) {
            continue;
        }
        if let Some(cluster) = s.strip_prefix('-').filter(|c| !c.starts_with('-')) {
            if let Some(i) = cluster.find(['H', 'U', 'K']) {
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
