//! A real OpenSSH server for the remote tests: `/usr/sbin/sshd` on 127.0.0.1 only, on a
//! free port, with a host key and a user key made for the test in a temp dir, key
//! authentication only, and its own pmlab state and temp directories (set in the sessions
//! by `SetEnv`). Dropping it (also on panic) stops it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub const SSHD: &str = "/usr/sbin/sshd";

/// One running sshd and the client side files to reach it.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    child: Child,
    pub port: u16,
    /// ssh client config (`PMLAB_SSH_CONFIG`): known_hosts with this sshd's host key.
    pub client_config: PathBuf,
    /// The user's private key (`-K`).
    pub key: PathBuf,
    /// `PMLAB_STATE_DIR` of the sessions.
    pub state_dir: PathBuf,
    /// `TMPDIR` of the sessions: where pmlab pushes itself.
    pub remote_tmp: PathBuf,
}

/// What to change in a test sshd.
#[derive(Default)]
pub struct Options {
    /// Directories put first on the sessions' PATH (fake commands).
    pub path_first: Option<PathBuf>,
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen")
        .success();
    assert!(ok, "ssh-keygen {}", path.display());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Sshd {
    /// Start one, or skip the running test with the reason.
    pub fn start(opts: Options) -> Sshd {
        crate::util::need_root("the remote tests run sshd and pmlab as root");
        crate::util::need_path(SSHD, "scripts/setup.sh installs openssh-server");
        let dir = tempfile::Builder::new()
            .prefix("pmlab-sshd")
            .tempdir()
            .unwrap();
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("user_key"));
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).unwrap();
        let (state_dir, remote_tmp) = (d.join("state"), d.join("rtmp"));
        std::fs::create_dir(&state_dir).unwrap();
        std::fs::create_dir(&remote_tmp).unwrap();
        // sshd's privilege-separation directory (Debian's service creates it at boot).
        std::fs::create_dir_all("/run/sshd").unwrap();
        let mut env = format!(
            "PMLAB_STATE_DIR={} TMPDIR={}",
            state_dir.display(),
            remote_tmp.display()
        );
        if let Some(p) = &opts.path_first {
            env += &format!(" PATH={}:/usr/sbin:/usr/bin:/sbin:/bin", p.display());
        }
        for _attempt in 0..5 {
            let port = free_port();
            let config = format!(
                "ListenAddress 127.0.0.1:{port}\nHostKey {d}/host_key\nPidFile none\n\
                 AuthorizedKeysFile {d}/authorized_keys\nAuthenticationMethods publickey\n\
                 PubkeyAuthentication yes\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
                 UsePAM no\nStrictModes no\nX11Forwarding no\nAllowTcpForwarding no\n\
                 PrintMotd no\nSetEnv {env}\n",
                d = d.display()
            );
            std::fs::write(d.join("sshd_config"), config).unwrap();
            let mut child = Command::new(SSHD)
                .args(["-D", "-e", "-f"])
                .arg(d.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("sshd");
            // sshd says when it listens (or why it cannot): read its log until then.
            let mut log = BufReader::new(child.stderr.take().unwrap());
            let mut said = String::new();
            let listening = loop {
                let mut line = String::new();
                if log.read_line(&mut line).unwrap_or(0) == 0 {
                    break false;
                }
                said += &line;
                if line.contains("Server listening on 127.0.0.1") {
                    break true;
                }
            };
            if !listening {
                let _ = child.kill();
                let _ = child.wait();
                if said.contains("Address already in use") {
                    continue;
                }
                panic!("sshd did not start: {said}");
            }
            // Keep draining the log so sshd never blocks on a full pipe.
            std::thread::spawn(move || {
                let mut sink = String::new();
                while log.read_line(&mut sink).unwrap_or(0) > 0 {
                    sink.clear();
                }
            });
            let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
            let host_pub: Vec<&str> = host_pub.split_whitespace().take(2).collect();
            std::fs::write(
                d.join("known_hosts"),
                format!("[127.0.0.1]:{port} {}\n", host_pub.join(" ")),
            )
            .unwrap();
            let client_config = d.join("ssh_config");
            std::fs::write(
                &client_config,
                format!(
                    "Host *\n  UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  IdentityAgent none\n  LogLevel ERROR\n",
                    d = d.display()
                ),
            )
            .unwrap();
            return Sshd {
                key: d.join("user_key"),
                dir,
                child,
                port,
                client_config,
                state_dir,
                remote_tmp,
            };
        }
        panic!("no free port for sshd after 5 attempts");
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `pmlab -H 127.0.0.1:PORT -U USER -K KEY` with this sshd's client config.
    pub fn pmlab_as(&self, user: &str) -> assert_cmd::Command {
        self.pmlab_with(user, &self.key)
    }

    /// `pmlab -H 127.0.0.1:PORT -U USER -K key` with this sshd's client config.
    pub fn pmlab_with(&self, user: &str, key: &Path) -> assert_cmd::Command {
        let mut c = crate::util::pmlab();
        c.env("PMLAB_SSH_CONFIG", &self.client_config)
            .arg("-H")
            .arg(self.host())
            .arg("-U")
            .arg(user)
            .arg("-K")
            .arg(key);
        c
    }

    /// `pmlab -H ... -U root -K ...` as a plain `Command` (to spawn and kill).
    pub fn command(&self) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("pmlab"));
        c.env("PMLAB_SSH_CONFIG", &self.client_config)
            .arg("-H")
            .arg(self.host())
            .args(["-U", "root", "-K"])
            .arg(&self.key);
        c
    }

    /// `pmlab -H ... -U root -K ...`.
    pub fn pmlab(&self) -> assert_cmd::Command {
        self.pmlab_as("root")
    }

    /// Everything pmlab left in the sessions' TMPDIR (what it pushed).
    pub fn pushed(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.remote_tmp)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
