//! Running pmlab on a target in a work directory of its own, then bringing back what it
//! wrote there: the remote store's experiments into the local store (their traces beside
//! it), and named files (a recording, a study's report) to their local places.

use super::{ssh, Privilege, Remote, RemoteError};
use pmlab_store::store::{traces_dir, Imported, Store};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

/// The store file a remote command writes in its work directory (`--db`'s default there).
pub const REMOTE_DB: &str = "pmlab.db";

/// What to bring back from the work directory, and where to.
#[derive(Debug, Default, Clone)]
pub struct Bring {
    /// The local store that receives the experiments of the remote `pmlab.db`.
    pub db: Option<PathBuf>,
    /// An entry of the work directory (file or directory) → its local path.
    pub files: Vec<(String, PathBuf)>,
    /// Every other entry the command left goes into this local directory, under its own
    /// name (`NAME-HOST` if that is taken).
    pub rest: Option<PathBuf>,
}

/// What came back.
#[derive(Debug, Default)]
pub struct Brought {
    /// The experiments imported into the local store from the target's `pmlab.db`.
    pub experiments: Vec<Imported>,
    /// Local paths of the files and directories placed.
    pub files: Vec<PathBuf>,
}

impl Remote {
    /// Run pmlab with `args` on the target with a fresh work directory as its current
    /// directory, the local files of `push` copied into it first (local path → name there);
    /// then fetch the directory (also after a failed command: an interrupted experiment's
    /// finished runs are kept), remove it on the target and place its contents as `bring`
    /// says.
    pub fn run_bringing_back(
        &self,
        args: &[OsString],
        push: &[(PathBuf, String)],
        bring: &Bring,
    ) -> Result<(ExitStatus, Brought), RemoteError> {
        let host = || self.target.host.clone();
        let bin_dir = Path::new(&self.binary)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "/tmp".into());
        let made = ssh::capture(
            &self.target,
            &format!("mktemp -d {}/run.XXXXXX", quote(&bin_dir)),
            Stdio::null(),
        )?;
        let workdir = String::from_utf8_lossy(&made.stdout).trim().to_string();
        if !made.status.success() || !workdir.starts_with('/') {
            return Err(RemoteError::Workdir {
                host: host(),
                ssh: super::SshSays(String::from_utf8_lossy(&made.stderr).trim().to_string()),
            });
        }
        for (local, name) in push {
            let file = std::fs::File::open(local).map_err(|source| RemoteError::Local {
                path: local.clone(),
                source,
            })?;
            let out = ssh::capture(
                &self.target,
                &format!("cat > {}/{}", quote(&workdir), quote(name)),
                Stdio::from(file),
            )?;
            if !out.status.success() {
                return Err(RemoteError::Workdir {
                    host: host(),
                    ssh: super::SshSays(String::from_utf8_lossy(&out.stderr).trim().to_string()),
                });
            }
        }
        let status = self.run_in(Some(&workdir), args);
        let fetched = self.fetch(&workdir);
        let status = status?;
        let dir = fetched?;
        let brought = place(dir.path(), &workdir, bring, &self.target.host)?;
        Ok((status, brought))
    }

    /// Stream the work directory here as a tar archive (under the command's privilege: the
    /// remote pmlab wrote it as root), unpack it into a temporary directory, and remove it
    /// on the target.
    fn fetch(&self, workdir: &str) -> Result<tempfile::TempDir, RemoteError> {
        let sudo = if self.privilege == Privilege::Sudo {
            "sudo -n "
        } else {
            ""
        };
        let w = quote(workdir);
        let script = format!("{sudo}tar -C {w} -cf - .; s=$?; {sudo}rm -rf {w}; exit $s");
        let local = |source| RemoteError::Local {
            path: std::env::temp_dir(),
            source,
        };
        let dir = tempfile::tempdir().map_err(local)?;
        let mut child = ssh::command(&self.target, &script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(RemoteError::Spawn)?;
        let stdout = child.stdout.take().expect("piped");
        let unpacked = tar::Archive::new(stdout).unpack(dir.path());
        let out = child.wait_with_output().map_err(RemoteError::Spawn)?;
        if out.status.code() == Some(255) {
            return Err(ssh::classify(&self.target, out.status, &out.stderr));
        }
        if !out.status.success() {
            return Err(RemoteError::Workdir {
                host: self.target.host.clone(),
                ssh: super::SshSays(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            });
        }
        unpacked.map_err(|source| RemoteError::Fetch {
            host: self.target.host.clone(),
            source,
        })?;
        Ok(dir)
    }
}

fn quote(s: &str) -> String {
    shell_words::quote(s).into_owned()
}

/// Place the fetched work directory `dir` (which was `workdir` on the target).
fn place(dir: &Path, workdir: &str, bring: &Bring, host: &str) -> Result<Brought, RemoteError> {
    let mut brought = Brought::default();
    let remote_db = dir.join(REMOTE_DB);
    let mut taken: Vec<String> = vec![
        REMOTE_DB.into(),
        format!("{REMOTE_DB}-wal"),
        format!("{REMOTE_DB}-shm"),
        format!("{REMOTE_DB}.traces"),
    ];
    if let (Some(db), true) = (&bring.db, remote_db.is_file()) {
        let mut store = Store::open(db)?;
        let local_traces = traces_dir(db);
        let mut failed = None;
        brought.experiments = store.import(&remote_db, None, &mut |id, remote_path| {
            let rel = Path::new(remote_path).strip_prefix(workdir).ok()?;
            let from = dir.join(rel);
            let to = local_traces
                .join(format!("experiment-{id}"))
                .join(from.file_name()?);
            match move_path(&from, &to) {
                Ok(()) => Some(to.display().to_string()),
                Err(e) => {
                    failed.get_or_insert(e);
                    None
                }
            }
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    for (name, to) in &bring.files {
        let from = dir.join(name);
        if from.exists() {
            move_path(&from, to)?;
            brought.files.push(to.clone());
        }
        taken.push(name.clone());
    }
    if let Some(rest) = &bring.rest {
        let entries = std::fs::read_dir(dir).map_err(|source| RemoteError::Local {
            path: dir.to_path_buf(),
            source,
        })?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if taken.contains(&name) {
                continue;
            }
            let mut to = rest.join(&name);
            if to.exists() {
                to = rest.join(format!("{name}-{host}"));
            }
            move_path(&entry.path(), &to)?;
            brought.files.push(to);
        }
    }
    Ok(brought)
}

/// Move a file or directory, across file systems too (copy, then remove).
fn move_path(from: &Path, to: &Path) -> Result<(), RemoteError> {
    let local = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RemoteError::Local { path, source }
    };
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(local(parent))?;
    }
    if std::fs::rename(from, to).is_ok() {
        return Ok(());
    }
    if from.is_dir() {
        std::fs::create_dir_all(to).map_err(local(to))?;
        for entry in std::fs::read_dir(from).map_err(local(from))? {
            let entry = entry.map_err(local(from))?;
            move_path(&entry.path(), &to.join(entry.file_name()))?;
        }
        std::fs::remove_dir(from).map_err(local(from))
    } else {
        std::fs::copy(from, to).map_err(local(to))?;
        std::fs::remove_file(from).map_err(local(from))
    }
}
