//! The `ssh` client command line for a target (batch mode, public keys only) and the
//! reading of its failures into typed refusals.

use super::{RemoteError, Target};
use std::process::{Command, ExitStatus, Output, Stdio};

/// What ssh itself printed on failure (the cause under a typed refusal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SshSays(pub String);

/// `ssh [options] HOST REMOTE_COMMAND`: never prompts (BatchMode), authenticates by
/// public key only (agent or `-K` key), never accepts an unknown host key.
pub(super) fn command(t: &Target, remote_command: &str) -> Command {
    let mut c = Command::new("ssh");
    if let Some(f) = &t.ssh_config {
        c.arg("-F").arg(f);
    }
    c.args([
        "-o",
        "BatchMode=yes",
        "-o",
        "PreferredAuthentications=publickey",
        "-o",
        "PasswordAuthentication=no",
        "-o",
        "KbdInteractiveAuthentication=no",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "ConnectTimeout=10",
        "-T",
    ]);
    if let Some(p) = t.port {
        c.arg("-p").arg(p.to_string());
    }
    if let Some(u) = &t.user {
        c.arg("-l").arg(u);
    }
    if let Some(k) = &t.key {
        c.arg("-i").arg(k).args(["-o", "IdentitiesOnly=yes"]);
    }
    c.arg("--").arg(&t.host).arg(remote_command);
    c
}

/// Run `script` on the target, capturing its output; ssh's own failures (exit 255) become
/// typed refusals.
pub(super) fn capture(t: &Target, script: &str, stdin: Stdio) -> Result<Output, RemoteError> {
    let out = command(t, script)
        .stdin(stdin)
        .output()
        .map_err(RemoteError::Spawn)?;
    if out.status.code() == Some(255) {
        return Err(classify(t, out.status, &out.stderr));
    }
    Ok(out)
}

/// ssh exits 255 on its own errors; what went wrong is only in its message.
pub(super) fn classify(t: &Target, status: ExitStatus, stderr: &[u8]) -> RemoteError {
    let text = String::from_utf8_lossy(stderr);
    // The last lines say why; earlier ones are warnings and banners.
    let said: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Warning: Permanently added"))
        .collect();
    let ssh = SshSays(said.join("; "));
    let host = t.host.clone();
    let has = |s: &str| text.contains(s);
    if has("Could not resolve hostname") {
        RemoteError::UnknownHost { host, ssh }
    } else if has("Connection refused") {
        RemoteError::ConnectionRefused { host, ssh }
    } else if has("Host key verification failed") || has("REMOTE HOST IDENTIFICATION HAS CHANGED") {
        RemoteError::HostKeyUnverified { host, ssh }
    } else if has("Permission denied (") || has("Too many authentication failures") {
        RemoteError::KeyRejected {
            host,
            user: t.user_name(),
            ssh,
        }
    } else if has("timed out") || has("No route to host") || has("Network is unreachable") {
        RemoteError::Unreachable { host, ssh }
    } else {
        RemoteError::Ssh { host, status, ssh }
    }
}
