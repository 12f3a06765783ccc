//! Remote targets: pmlab runs on another machine over OpenSSH, agentless. The `ssh`
//! client binary carries every connection (so `~/.ssh/config`, agents, `ProxyJump` and
//! `ControlMaster` work), in batch mode with key authentication only. Before anything is
//! written on the target, one probe reads its architecture, its privileges (root, or
//! passwordless `sudo`) and whether this very binary is already there; only then is
//! pmlab's own executable pushed to `${TMPDIR:-/tmp}/pmlab-HASH/pmlab` (HASH: its SHA-256).

#![forbid(unsafe_code)]

mod job;
mod ssh;
mod workdir;

pub use job::{strip_remote_args, Job};
pub use ssh::SshSays;
pub use workdir::{Bring, Brought, REMOTE_DB};

use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output, Stdio};

/// Environment variable naming an ssh client config file (`ssh -F FILE`) to use instead of
/// `~/.ssh/config` (tests use it for their own sshd's host key and port).
pub const SSH_CONFIG_ENV: &str = "PMLAB_SSH_CONFIG";

/// Why a remote target was refused or failed. Refusals happen before anything is written
/// on the target.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The `--host` value is not `HOST`, `USER@HOST`, `HOST:PORT` or `[V6ADDR]:PORT`.
    #[error("--host {0:?}: not a host name (expected HOST, [USER@]HOST or HOST:PORT)")]
    BadHost(String),
    /// The `--key` file cannot be read.
    #[error("--key {}: not a readable file", .0.display())]
    BadKey(PathBuf),
    /// The host name does not resolve.
    #[error("{host}: unknown host (the name does not resolve)")]
    UnknownHost {
        /// The target's host, as given.
        host: String,
        /// What ssh printed on stderr.
        #[source]
        ssh: SshSays,
    },
    /// Nothing listens for ssh at the host's port.
    #[error("{host}: connection refused (no ssh server listening there)")]
    ConnectionRefused {
        /// The target's host, as given.
        host: String,
        /// What ssh printed on stderr.
        #[source]
        ssh: SshSays,
    },
    /// No route to the host, or the connection timed out.
    #[error("{host}: host unreachable or timed out")]
    Unreachable {
        /// The target's host, as given.
        host: String,
        /// What ssh printed on stderr.
        #[source]
        ssh: SshSays,
    },
    /// The host key is not in known_hosts, or differs from it.
    #[error("{host}: the host key is unknown or changed (add it to known_hosts first; pmlab never accepts one blindly)")]
    HostKeyUnverified {
        /// The target's host, as given.
        host: String,
        /// What ssh printed on stderr.
        #[source]
        ssh: SshSays,
    },
    /// The server refused every key offered.
    #[error("{host}: key not accepted for user {user} (pmlab uses key authentication only, never a password)")]
    KeyRejected {
        /// The target's host, as given.
        host: String,
        /// The login user.
        user: String,
        /// What ssh printed on stderr.
        #[source]
        ssh: SshSays,
    },
    /// ssh failed for another reason.
    #[error("{host}: ssh failed ({status})")]
    Ssh {
        /// The target's host, as given.
        host: String,
        /// ssh's exit status.
        status: ExitStatus,
        /// What ssh printed on stderr.
        #[source]
        ssh: SshSays,
    },
    /// The connection ended while pmlab ran on the target.
    #[error("{host}: the connection was lost")]
    ConnectionLost {
        /// The target's host, as given.
        host: String,
    },
    /// The login user is not root and cannot `sudo -n`.
    #[error("{host}: user {user} is neither root nor allowed passwordless sudo ({why}); pmlab needs root on the target")]
    NoRoot {
        /// The target's host, as given.
        host: String,
        /// The login user.
        user: String,
        /// Why not: no sudo, or sudo asks for a password.
        why: &'static str,
    },
    /// The target's `uname -m` differs from this machine's.
    #[error("{host}: target architecture {remote} differs from this pmlab's {local} (the binary would not run there)")]
    ArchMismatch {
        /// The target's host, as given.
        host: String,
        /// This machine's architecture.
        local: String,
        /// The target's architecture.
        remote: String,
    },
    /// The probe's answer lacks a line or has a bad value.
    #[error("{host}: unexpected answer to the probe: {answer:?}")]
    Probe {
        /// The target's host, as given.
        host: String,
        /// The probe script's whole output.
        answer: String,
    },
    /// Copying pmlab's executable to the target failed.
    #[error("{host}: pushing pmlab to {dir} failed")]
    Push {
        /// The target's host, as given.
        host: String,
        /// The directory on the target it was copied to.
        dir: String,
        /// What ssh printed on stderr.
        #[source]
        ssh: SshSays,
    },
    /// This pmlab's own executable could not be read (to hash and push it).
    #[error("reading this pmlab's own executable")]
    SelfExe(#[source] std::io::Error),
    /// The `ssh` program could not be started.
    #[error("running ssh")]
    Spawn(#[source] std::io::Error),
    /// Making the work directory on the target, or copying files into it, failed.
    #[error("{host}: making or filling a work directory failed")]
    Workdir {
        /// The target's host, as given.
        host: String,
        /// What ssh printed on stderr.
        #[source]
        ssh: SshSays,
    },
    /// Fetching the work directory back from the target failed.
    #[error("{host}: bringing back the results failed")]
    Fetch {
        /// The target's host, as given.
        host: String,
        /// The local I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A local file or directory could not be read or written.
    #[error("{}", .path.display())]
    Local {
        /// The local path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The target's store could not be imported into the local one.
    #[error("importing the target's results")]
    Import(#[from] pmlab_store::store::StoreError),
    /// The command to run remotely is not on the command line.
    #[error("--host: `{0}` not found on the command line")]
    NoCommand(String),
}

/// Where to connect: what `-H/--host`, `-U/--user`, `-K/--key` say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host name, address or `~/.ssh/config` alias.
    pub host: String,
    /// The ssh port; None: ssh's default (config, then 22).
    pub port: Option<u16>,
    /// `None`: ssh's own default (config, then the local user name).
    pub user: Option<String>,
    /// Private key file (`ssh -i`, with `IdentitiesOnly=yes`).
    pub key: Option<PathBuf>,
    /// ssh client config file (`ssh -F`); default from `$PMLAB_SSH_CONFIG`.
    pub ssh_config: Option<PathBuf>,
}

impl Target {
    /// Parse `HOST`, `USER@HOST`, `HOST:PORT`, `[V6ADDR]:PORT`. `user` (`-U`) wins over a
    /// `USER@` in the host.
    pub fn parse(
        spec: &str,
        user: Option<String>,
        key: Option<PathBuf>,
    ) -> Result<Target, RemoteError> {
        let bad = || RemoteError::BadHost(spec.to_string());
        let (at_user, rest) = match spec.rsplit_once('@') {
            Some((u, h)) if !u.is_empty() => (Some(u.to_string()), h),
            Some(_) => return Err(bad()),
            None => (None, spec),
        };
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (addr, tail) = v6.split_once(']').ok_or_else(bad)?;
            let port = match tail.strip_prefix(':') {
                Some(p) => Some(p.parse::<u16>().map_err(|_| bad())?),
                None if tail.is_empty() => None,
                None => return Err(bad()),
            };
            (addr.to_string(), port)
        } else {
            match rest.split_once(':') {
                // One colon: HOST:PORT. More: a bare IPv6 address.
                Some((h, p)) if !p.contains(':') => {
                    (h.to_string(), Some(p.parse::<u16>().map_err(|_| bad())?))
                }
                _ => (rest.to_string(), None),
            }
        };
        if host.is_empty()
            || host.starts_with('-')
            || host.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(bad());
        }
        if let Some(k) = &key {
            if std::fs::File::open(k).is_err() || !k.is_file() {
                return Err(RemoteError::BadKey(k.clone()));
            }
        }
        Ok(Target {
            host,
            port,
            user: user.or(at_user),
            key,
            ssh_config: std::env::var_os(SSH_CONFIG_ENV).map(PathBuf::from),
        })
    }

    /// The user name shown in messages.
    fn user_name(&self) -> String {
        self.user.clone().unwrap_or_else(|| "(ssh default)".into())
    }
}

/// How pmlab gets root on the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Privilege {
    /// Logged in as root.
    Root,
    /// Through `sudo -n` (passwordless).
    Sudo,
}

/// What the probe found on the target, before anything was written there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    /// `uname -m`.
    pub arch: String,
    pub uid: u32,
    pub privilege: Result<Privilege, &'static str>,
    /// `${TMPDIR:-/tmp}` on the target.
    pub tmp: String,
    /// This binary is already at its place, owned by the login user, with the right hash.
    pub have_binary: bool,
}

/// A target that answered, with pmlab in place and root available: runs pmlab there.
#[derive(Debug)]
pub struct Remote {
    target: Target,
    privilege: Privilege,
    /// The pushed binary's absolute path on the target.
    binary: String,
    /// The binary was pushed by this connection (false: reused).
    pub pushed: bool,
}

/// This pmlab's executable and its SHA-256 (hex).
fn self_exe() -> Result<(PathBuf, String), RemoteError> {
    let path = std::env::current_exe().map_err(RemoteError::SelfExe)?;
    let mut f = std::fs::File::open(&path).map_err(RemoteError::SelfExe)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(RemoteError::SelfExe)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok((path, format!("{:x}", h.finalize())))
}

/// This machine's architecture as `uname -m` names it.
pub(crate) fn local_arch() -> String {
    rustix::system::uname()
        .machine()
        .to_string_lossy()
        .into_owned()
}

/// The directory the binary with this hash lives in, under the target's `tmp`.
fn binary_dir(tmp: &str, hash: &str) -> String {
    format!("{}/pmlab-{}", tmp.trim_end_matches('/'), &hash[..16])
}

/// The probe script: reads only, writes nothing. `HASH` is the binary's SHA-256.
fn probe_script(hash: &str) -> String {
    format!(
        r#"t="${{TMPDIR:-/tmp}}"; d="$t/pmlab-{short}"
echo "arch=$(uname -m)"; echo "uid=$(id -u)"; echo "tmp=$t"
if [ "$(id -u)" = 0 ]; then echo priv=root
elif ! command -v sudo >/dev/null 2>&1; then echo priv=nosudo
elif sudo -n true >/dev/null 2>&1; then echo priv=sudo
else echo priv=sudopw; fi
if [ -f "$d/pmlab" ] && [ "$(stat -c %u "$d")" = "$(id -u)" ] && [ -z "$(find "$d" "$d/pmlab" -maxdepth 0 -perm /022)" ] \
  && echo "{hash}  $d/pmlab" | sha256sum -c --status 2>/dev/null; then echo have=yes; else echo have=no; fi
"#,
        short = &hash[..16],
    )
}

fn parse_probe(host: &str, answer: &str) -> Result<Probe, RemoteError> {
    let bad = || RemoteError::Probe {
        host: host.to_string(),
        answer: answer.to_string(),
    };
    let get = |k: &str| {
        answer
            .lines()
            .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            .map(str::to_string)
    };
    let arch = get("arch").filter(|a| !a.is_empty()).ok_or_else(bad)?;
    let uid = get("uid").and_then(|u| u.parse().ok()).ok_or_else(bad)?;
    let tmp = get("tmp").filter(|t| t.starts_with('/')).ok_or_else(bad)?;
    let privilege = match get("priv").as_deref() {
        Some("root") => Ok(Privilege::Root),
        Some("sudo") => Ok(Privilege::Sudo),
        Some("nosudo") => Err("sudo is not installed"),
        Some("sudopw") => Err("sudo -n true asks for a password or is not allowed"),
        _ => return Err(bad()),
    };
    let have_binary = get("have").as_deref() == Some("yes");
    Ok(Probe {
        arch,
        uid,
        privilege,
        tmp,
        have_binary,
    })
}

impl Remote {
    /// Connect: probe (read-only), refuse on another architecture or without root, then
    /// push this binary unless the same one is already there.
    pub fn connect(target: Target) -> Result<Remote, RemoteError> {
        let (exe, hash) = self_exe()?;
        let answer = ssh::capture(&target, &probe_script(&hash), Stdio::null())?;
        let probe = parse_probe(&target.host, &String::from_utf8_lossy(&answer.stdout))?;
        let local = local_arch();
        if probe.arch != local {
            return Err(RemoteError::ArchMismatch {
                host: target.host.clone(),
                local,
                remote: probe.arch,
            });
        }
        let privilege = probe.privilege.map_err(|why| RemoteError::NoRoot {
            host: target.host.clone(),
            user: target.user_name(),
            why,
        })?;
        let dir = binary_dir(&probe.tmp, &hash);
        let binary = format!("{dir}/pmlab");
        let pushed = !probe.have_binary;
        if pushed {
            push(&target, &exe, &hash, &dir)?;
        }
        Ok(Remote {
            target,
            privilege,
            binary,
            pushed,
        })
    }

    /// Where this remote connects.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// How pmlab gets root on the target.
    pub fn privilege(&self) -> Privilege {
        self.privilege
    }

    /// The pushed binary's path on the target.
    pub fn binary(&self) -> &str {
        &self.binary
    }

    /// The remote command line running pmlab with `args` (shell-quoted for ssh), in
    /// directory `cwd` when given.
    fn command_line(&self, cwd: Option<&str>, args: &[OsString]) -> String {
        let mut words: Vec<String> = Vec::with_capacity(args.len() + 6);
        if let Some(dir) = cwd {
            words.extend([
                "cd".into(),
                shell_words::quote(dir).into_owned(),
                "&&".into(),
            ]);
        }
        words.push("exec".into());
        if self.privilege == Privilege::Sudo {
            words.extend(["sudo".into(), "-n".into()]);
        }
        // After sudo, which resets the environment: the remote pmlab hangs up on EOF.
        words.extend(["env".into(), format!("{HANGUP_ON_EOF}=1")]);
        words.push(shell_words::quote(&self.binary).into_owned());
        words.extend(
            args.iter()
                .map(|a| shell_words::quote(&a.to_string_lossy()).into_owned()),
        );
        words.join(" ")
    }

    /// Run pmlab on the target with `args`, its stdout and stderr going to ours. Returns
    /// the remote pmlab's exit status; a lost connection is an error. The remote stdin is a
    /// pipe held open until the command ends: when this side or the connection goes away,
    /// the remote pmlab reads EOF and stops as on SIGHUP, restoring its knobs by itself.
    pub fn run(&self, args: &[OsString]) -> Result<ExitStatus, RemoteError> {
        self.run_in(None, args)
    }

    /// [`Remote::run`] in directory `cwd` on the target.
    fn run_in(&self, cwd: Option<&str>, args: &[OsString]) -> Result<ExitStatus, RemoteError> {
        let mut child = ssh::command(&self.target, &self.command_line(cwd, args))
            .stdin(Stdio::piped())
            .spawn()
            .map_err(RemoteError::Spawn)?;
        let _held_open = child.stdin.take();
        let status = child.wait().map_err(RemoteError::Spawn)?;
        if status.code() == Some(255) {
            return Err(RemoteError::ConnectionLost {
                host: self.target.host.clone(),
            });
        }
        Ok(status)
    }

    /// Run pmlab on the target with `args` and capture its output.
    pub fn output(&self, args: &[OsString]) -> Result<Output, RemoteError> {
        let out = ssh::command(&self.target, &self.command_line(None, args))
            .stdin(Stdio::null())
            .output()
            .map_err(RemoteError::Spawn)?;
        if out.status.code() == Some(255) {
            return Err(ssh::classify(&self.target, out.status, &out.stderr));
        }
        Ok(out)
    }
}

/// Set (to 1) in the environment of a pmlab started by `-H`: it watches its stdin and takes
/// EOF as SIGHUP (ssh gives the remote side no signal when the connection drops).
pub const HANGUP_ON_EOF: &str = "PMLAB_HANGUP_ON_EOF";

/// In a pmlab started by `-H` (see [`HANGUP_ON_EOF`]): one thread blocks reading stdin and
/// on EOF sends this process SIGHUP, so the lab's one interrupt path stops the workload and
/// restores the knobs. No-op otherwise.
pub fn hang_up_on_eof() {
    if std::env::var_os(HANGUP_ON_EOF).is_none() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("pmlab-stdin-eof".into())
        .spawn(|| {
            use std::io::Read;
            let mut buf = [0u8; 256];
            let mut stdin = std::io::stdin().lock();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let me = rustix::process::getpid();
            let _ = rustix::process::kill_process(me, rustix::process::Signal::HUP);
        });
}

/// In a pmlab started by `-H`: restore the journals of dead pmlab processes on this machine
/// first (one SIGKILLed earlier, or cut off before its restore ran), and say so on stderr;
/// kept `knob set`s stay. No-op otherwise, and without root (nothing could be restored).
pub fn repair_dead_journals() {
    if std::env::var_os(HANGUP_ON_EOF).is_none() || !pmlab_kernel::sysinfo::item::is_root() {
        return;
    }
    let dir = pmlab_kernel::knob::journal::state_dir();
    if !dir.is_dir() {
        return;
    }
    let host =
        pmlab_kernel::sysinfo::kernel::hostname(&pmlab_kernel::Root::system()).unwrap_or_default();
    match pmlab_kernel::knob::journal::sweep(&dir, false) {
        Ok(lines) => {
            for l in lines {
                eprintln!("pmlab: on {host}: {l}");
            }
        }
        Err(e) => eprintln!("pmlab: warning: repairing leftover journals: {e}"),
    }
}

/// Copy `exe` into `dir` on the target: written under a temporary name, its hash checked
/// there, then renamed, so a broken transfer never leaves a binary that looks right.
fn push(target: &Target, exe: &Path, hash: &str, dir: &str) -> Result<(), RemoteError> {
    let q = |s: &str| shell_words::quote(s).into_owned();
    let script = format!(
        r#"set -e; umask 077; d={d}
mkdir -p "$d"; [ "$(stat -c %u "$d")" = "$(id -u)" ] || {{ echo "$d belongs to another user" >&2; exit 3; }}
chmod 700 "$d"; f="$d/pmlab.$$"; cat > "$f"; chmod 700 "$f"
echo {hash}"  $f" | sha256sum -c --status || {{ rm -f "$f"; echo "checksum mismatch after transfer" >&2; exit 4; }}
mv -f "$f" "$d/pmlab""#,
        d = q(dir),
        hash = q(hash),
    );
    let file = std::fs::File::open(exe).map_err(RemoteError::SelfExe)?;
    let out = ssh::capture(target, &script, Stdio::from(file))?;
    if !out.status.success() {
        return Err(RemoteError::Push {
            host: target.host.clone(),
            dir: dir.to_string(),
            ssh: SshSays(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
