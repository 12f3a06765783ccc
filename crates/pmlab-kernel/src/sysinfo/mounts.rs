//! Mount lookup in /proc/mounts (by filesystem type), for debugfs and tracefs status.

use crate::Root;

/// One line of /proc/self/mounts (the fields pmlab needs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Mount point as the kernel lists it (a kernel path, not mapped through the root).
    pub dir: String,
    /// Mounted read-only (`ro` in its options).
    pub read_only: bool,
}

/// The first mount of `fstype` listed in /proc/mounts.
pub fn find(root: &Root, fstype: &str) -> Option<Mount> {
    let text = std::fs::read_to_string(root.path("/proc/mounts")).ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4 && f[2] == fstype).then(|| Mount {
            dir: crate::tracefs::unescape_mount_path(f[1]),
            read_only: f[3].split(',').any(|o| o == "ro"),
        })
    })
}
