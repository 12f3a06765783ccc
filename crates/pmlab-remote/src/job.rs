//! How a command runs on a `--host` target: its command line there (the remote options and
//! the local paths left out) and what comes back.

use crate::{Bring, RemoteError};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Local files copied into the work directory: (path, name there).
pub type Push = Vec<(PathBuf, String)>;

/// How a command runs on a --host target: which of its arguments name local paths, and
/// what comes back.
#[derive(Debug, Default)]
pub struct Job {
    /// Options whose values are local paths, left out of the remote command line (the
    /// remote pmlab then uses its defaults inside its work directory).
    pub strip_long: &'static [&'static str],
    /// Short options whose values are local paths.
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
    pub fn stores(db: &Path) -> Job {
        Job {
            strip_long: &["--db"],
            bring: Some(Bring {
                db: Some(db.to_path_buf()),
                ..Bring::default()
            }),
            ..Job::default()
        }
    }

    /// The remote command line of `argv` (this process's arguments, program name left out)
    /// running `command`: less the remote options and the local paths this job strips, with
    /// its additions after the command's name and the pushed file under its remote name;
    /// and the files to push.
    pub fn command_line(
        &self,
        command: &str,
        argv: &[OsString],
    ) -> Result<(Vec<OsString>, Push), RemoteError> {
        let mut argv = strip_options(&strip_remote_args(argv), self.strip_long, self.strip_short);
        let at = argv
            .iter()
            .position(|a| a == command)
            .ok_or_else(|| RemoteError::NoCommand(command.to_string()))?;
        argv.splice(at + 1..at + 1, self.add.iter().cloned());
        let mut push = Vec::new();
        if let Some((path, name)) = &self.push {
            if let Some(i) = argv.iter().skip(at + 1).position(|a| a == path.as_os_str()) {
                argv[at + 1 + i] = name.into();
            }
            push.push((path.clone(), name.clone()));
        }
        Ok((argv, push))
    }
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
