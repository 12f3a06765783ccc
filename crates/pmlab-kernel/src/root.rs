//! The filesystem root every reader and writer works under: "/" on the machine,
//! a temp dir holding a fake sysfs/procfs tree in tests.

use std::path::PathBuf;

/// Filesystem root: "/" in production, a tempdir in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    base: PathBuf,
}

impl Root {
    /// The machine's own root, `/`.
    pub fn system() -> Root {
        Root {
            base: PathBuf::from("/"),
        }
    }
    /// A fake tree rooted at `path` (tests); kernel paths are mapped below it.
    pub fn new(path: impl Into<PathBuf>) -> Root {
        Root { base: path.into() }
    }
    /// Whether this is the machine's own "/" (not a fake tree).
    pub fn is_system(&self) -> bool {
        self.base == std::path::Path::new("/")
    }
    /// Map an absolute path onto this root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.base.join(abs.trim_start_matches('/'))
    }
}
