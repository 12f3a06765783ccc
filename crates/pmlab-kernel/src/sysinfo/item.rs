//! Reading helpers shared by the sysinfo readers: errors that carry the path, and
//! [`Item`], a value or the reason it is not available ("needs root", "absent"...).

use crate::Root;
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why one reader failed, always with the file it failed on.
#[derive(Debug, thiserror::Error)]
pub enum SysinfoError {
    /// The file is not there.
    #[error("{path}: not present")]
    NotFound {
        /// The file (under the root).
        path: PathBuf,
    },
    /// The file is readable by root only.
    #[error("{path}: permission denied")]
    PermissionDenied {
        /// The file (under the root).
        path: PathBuf,
    },
    /// Any other read error.
    #[error("{path}: {source}")]
    Io {
        /// The file (under the root).
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The file was read but its content is not of the expected form.
    #[error("{path}: cannot parse {text:?} as {what}")]
    Parse {
        /// The file (under the root).
        path: PathBuf,
        /// Its content (trimmed).
        text: String,
        /// What was expected (`a CPU list`, `a boolean`).
        what: &'static str,
    },
}

impl SysinfoError {
    /// Classify an I/O error on `path`: not found, permission denied, or other.
    pub(crate) fn from_io(path: &Path, source: io::Error) -> SysinfoError {
        let path = path.to_path_buf();
        match source.kind() {
            io::ErrorKind::NotFound => SysinfoError::NotFound { path },
            io::ErrorKind::PermissionDenied => SysinfoError::PermissionDenied { path },
            _ => SysinfoError::Io { path, source },
        }
    }
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            SysinfoError::NotFound { path }
            | SysinfoError::PermissionDenied { path }
            | SysinfoError::Io { path, .. }
            | SysinfoError::Parse { path, .. } => path,
        }
    }
}

/// Why an item has no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// Readable by root only, and we are not root.
    #[serde(rename = "needs root")]
    NeedsRoot,
    /// The kernel does not have it (file or directory missing).
    #[serde(rename = "absent")]
    Absent,
    /// The filesystem that holds it (debugfs, tracefs) is not mounted.
    #[serde(rename = "not mounted")]
    NotMounted,
    /// Any other failure (see `detail`).
    #[serde(rename = "error")]
    Error,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::NeedsRoot => "needs root",
            Status::Absent => "absent",
            Status::NotMounted => "not mounted",
            Status::Error => "error",
        })
    }
}

/// What stands in for a value that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unavailable {
    /// Why there is no value.
    pub status: Status,
    /// The kernel path (as on the real machine, without the fake root).
    pub path: String,
    /// The error text for [`Status::Error`]; `None` for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.status)?;
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        Ok(())
    }
}

/// A value read from the kernel, or why it is not there. Serializes as the bare value,
/// or as `{"status": "needs root", "path": "..."}` (which [`split_unavailable`] turns into
/// `null` and a separate entry, for `pmlab info --json`).
#[derive(Debug, Clone, PartialEq)]
pub enum Item<T> {
    /// The value read.
    Value(T),
    /// Why there is none.
    Unavailable(Unavailable),
}

impl<T> Item<T> {
    /// The value, if there is one.
    pub fn value(&self) -> Option<&T> {
        match self {
            Item::Value(v) => Some(v),
            Item::Unavailable(_) => None,
        }
    }
    /// The value, if there is one (by value).
    pub fn into_value(self) -> Option<T> {
        match self {
            Item::Value(v) => Some(v),
            Item::Unavailable(_) => None,
        }
    }
    /// Why there is no value; `None` when there is one.
    pub fn status(&self) -> Option<Status> {
        match self {
            Item::Value(_) => None,
            Item::Unavailable(u) => Some(u.status),
        }
    }
    /// Readable by root only and we are not root.
    pub fn needs_root(&self) -> bool {
        self.status() == Some(Status::NeedsRoot)
    }
    /// An item with no value, for `path` (the kernel path), with an optional detail.
    pub fn unavailable(status: Status, path: &str, detail: Option<String>) -> Item<T> {
        Item::Unavailable(Unavailable {
            status,
            path: path.to_string(),
            detail,
        })
    }
    /// Convert the value, keeping the reason when there is none.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Item<U> {
        match self {
            Item::Value(v) => Item::Value(f(v)),
            Item::Unavailable(u) => Item::Unavailable(u),
        }
    }
}

impl<T: Serialize> Serialize for Item<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Item::Value(v) => v.serialize(s),
            Item::Unavailable(u) => u.serialize(s),
        }
    }
}

/// One JSON shape per item, present or not: each [`Unavailable`] in `v` (as [`Item`]
/// serializes it) becomes `null` where the value would be, and is returned under the
/// item's dotted path (`cpuidle.driver`, `cpufreq.policies.3.epp`,
/// `haltpoll.parameters.guest_halt_poll_ns`), so that a key is always its value or `null`.
pub fn split_unavailable(v: &mut serde_json::Value) -> BTreeMap<String, Unavailable> {
    fn walk(v: &mut serde_json::Value, at: &str, out: &mut BTreeMap<String, Unavailable>) {
        let join = |k: &dyn std::fmt::Display| {
            if at.is_empty() {
                k.to_string()
            } else {
                format!("{at}.{k}")
            }
        };
        if v.get("status").is_some() {
            if let Ok(u) = serde_json::from_value::<Unavailable>(v.clone()) {
                out.insert(at.to_string(), u);
                *v = serde_json::Value::Null;
                return;
            }
        }
        match v {
            serde_json::Value::Object(map) => {
                for (k, x) in map.iter_mut() {
                    walk(x, &join(k), out);
                }
            }
            serde_json::Value::Array(xs) => {
                for (i, x) in xs.iter_mut().enumerate() {
                    walk(x, &join(&i), out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    walk(v, "", &mut out);
    out
}

/// Is this process root (effective uid 0)?
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The kernel path of `full` (strip the fake root) for display.
pub fn kernel_path(root: &Root, full: &Path) -> String {
    let base = root.path("/");
    match full.strip_prefix(&base) {
        Ok(rel) => format!("/{}", rel.display()),
        Err(_) => full.display().to_string(),
    }
}

/// Turn a reader's result into an [`Item`]: permission denied becomes "needs root"
/// when we are not root, a missing file "absent".
pub fn item<T>(root: &Root, r: Result<T, SysinfoError>) -> Item<T> {
    match r {
        Ok(v) => Item::Value(v),
        Err(e) => Item::Unavailable(unavailable(root, &e)),
    }
}

/// The [`Unavailable`] describing an error.
pub fn unavailable(root: &Root, e: &SysinfoError) -> Unavailable {
    let path = kernel_path(root, e.path());
    let (status, detail) = match e {
        SysinfoError::NotFound { .. } => (Status::Absent, None),
        SysinfoError::PermissionDenied { .. } if !is_root() => (Status::NeedsRoot, None),
        SysinfoError::PermissionDenied { .. } => {
            (Status::Error, Some("permission denied".to_string()))
        }
        SysinfoError::Io { source, .. } => (Status::Error, Some(source.to_string())),
        SysinfoError::Parse { text, what, .. } => (
            Status::Error,
            Some(format!("cannot parse {text:?} as {what}")),
        ),
    };
    Unavailable {
        status,
        path,
        detail,
    }
}

/// Read a file under `root` as trimmed text.
pub fn read_text(root: &Root, abs: &str) -> Result<String, SysinfoError> {
    read_path(&root.path(abs))
}

/// Read a file (full path) as trimmed text.
pub fn read_path(path: &Path) -> Result<String, SysinfoError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim_end_matches(['\n', ' ', '\0']).trim().to_string())
        .map_err(|e| SysinfoError::from_io(path, e))
}

/// Read a file, `None` if it does not exist.
pub fn read_opt(root: &Root, abs: &str) -> Result<Option<String>, SysinfoError> {
    match read_text(root, abs) {
        Ok(s) => Ok(Some(s)),
        Err(SysinfoError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Read and parse a file.
pub fn read_parse<T: std::str::FromStr>(
    root: &Root,
    abs: &str,
    what: &'static str,
) -> Result<T, SysinfoError> {
    let text = read_text(root, abs)?;
    text.parse().map_err(|_| SysinfoError::Parse {
        path: root.path(abs),
        text,
        what,
    })
}

/// Read and parse a file; missing or unparsable gives `None` (for optional attributes).
pub fn read_num(root: &Root, abs: &str) -> Option<u64> {
    read_parse(root, abs, "a number").ok()
}

/// Read a kernel boolean (`Y`/`N`, `1`/`0`).
pub fn read_bool(root: &Root, abs: &str) -> Result<bool, SysinfoError> {
    let text = read_text(root, abs)?;
    parse_bool(&text).ok_or(SysinfoError::Parse {
        path: root.path(abs),
        text,
        what: "a boolean",
    })
}

/// A kernel boolean (`Y`/`N`, `1`/`0`, `on`/`off`); `None` for anything else.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim() {
        "Y" | "y" | "1" | "on" => Some(true),
        "N" | "n" | "0" | "off" => Some(false),
        _ => None,
    }
}

/// Names in a directory, sorted; `NotFound` if the directory is missing.
pub fn list_names(root: &Root, abs: &str) -> Result<Vec<String>, SysinfoError> {
    let dir = root.path(abs);
    let mut v = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(|e| SysinfoError::from_io(&dir, e))? {
        let e = e.map_err(|e| SysinfoError::from_io(&dir, e))?;
        v.push(e.file_name().to_string_lossy().into_owned());
    }
    v.sort();
    Ok(v)
}

/// Numbered entries `PREFIXn` of a directory (`cpu0`, `state1`, `policy2`), sorted by n.
pub fn numbered(root: &Root, abs: &str, prefix: &str) -> Result<Vec<u32>, SysinfoError> {
    let mut v: Vec<u32> = list_names(root, abs)?
        .iter()
        .filter_map(|n| n.strip_prefix(prefix)?.parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Whitespace-separated words of a file (`available_governors`).
pub fn read_words(root: &Root, abs: &str) -> Result<Vec<String>, SysinfoError> {
    Ok(read_text(root, abs)?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_statuses_with_the_kernel_path() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let r: Item<String> = item(&root, read_text(&root, "/sys/nope"));
        let u = match r {
            Item::Unavailable(u) => u,
            _ => panic!(),
        };
        assert_eq!(u.status, Status::Absent);
        assert_eq!(u.path, "/sys/nope");
        let denied = SysinfoError::PermissionDenied {
            path: root.path("/sys/kernel/debug/sched/features"),
        };
        let u = unavailable(&root, &denied);
        assert_eq!(u.path, "/sys/kernel/debug/sched/features");
        let want = if is_root() {
            Status::Error
        } else {
            Status::NeedsRoot
        };
        assert_eq!(u.status, want);
        let j =
            serde_json::to_value(Item::<u32>::unavailable(Status::NeedsRoot, "/x", None)).unwrap();
        assert_eq!(j["status"], "needs root");
        assert_eq!(serde_json::to_value(Item::Value(3)).unwrap(), 3);
    }

    #[test]
    fn unavailable_items_become_null_with_their_reason_apart() {
        let gone = |p: &str| Item::<String>::unavailable(Status::Absent, p, None);
        let mut v = serde_json::json!({
            "driver": gone("/sys/devices/system/cpu/cpuidle/current_driver"),
            "governor": Item::Value("menu".to_string()),
            "policies": [
                {"id": 0, "epp": Item::<String>::unavailable(Status::Error, "/e", Some("bad".into()))},
            ],
            // intel_pstate's `status` is a plain string beside other keys: not an item.
            "intel_pstate": {"status": "active", "no_turbo": false},
            // The same keys with a word no status has: not an item either.
            "odd": {"status": "fine", "path": "/x"},
        });
        let split = split_unavailable(&mut v);
        assert_eq!(v["driver"], serde_json::Value::Null);
        assert_eq!(v["governor"], "menu");
        assert_eq!(v["policies"][0]["epp"], serde_json::Value::Null);
        assert_eq!(v["intel_pstate"]["status"], "active");
        assert_eq!(v["odd"]["status"], "fine");
        let keys: Vec<&str> = split.keys().map(String::as_str).collect();
        assert_eq!(keys, ["driver", "policies.0.epp"]);
        assert_eq!(split["driver"].status, Status::Absent);
        assert_eq!(split["policies.0.epp"].detail.as_deref(), Some("bad"));
    }
}
