//! tracefs status for `pmlab info`: where it is mounted and whether pmlab can write
//! it. Never mounts anything (recording mounts it through [`crate::tracefs`]).

use super::item::is_root;
use super::mounts;
use crate::Root;
use serde::Serialize;
use std::path::Path;

/// tracefs as pmlab sees it: mounted, writable, mountable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TracefsInfo {
    /// tracefs is mounted somewhere.
    pub mounted: bool,
    /// Mount point (kernel path), when mounted.
    pub path: Option<String>,
    /// pmlab can create instances there now (mounted read-write, `instances` writable).
    pub writable: bool,
    /// Mounted, but the directory is unreadable to us (tracefs is root-only).
    pub needs_root: bool,
    /// Not mounted, but pmlab will mount it at /sys/kernel/tracing when run as root.
    pub mountable: bool,
    /// One line for people.
    pub note: String,
}

fn writable(dir: &Path) -> bool {
    use rustix::fs::{accessat, Access, AtFlags, CWD};
    accessat(CWD, dir, Access::WRITE_OK, AtFlags::EACCESS).is_ok()
}

/// Look tracefs up in /proc/self/mounts; never mounts.
pub fn read(root: &Root) -> TracefsInfo {
    let real = root.path("/") == Path::new("/");
    let root_user = is_root();
    let mount = mounts::find(root, "tracefs").or_else(|| {
        mounts::find(root, "debugfs").map(|m| mounts::Mount {
            dir: format!("{}/tracing", m.dir.trim_end_matches('/')),
            ..m
        })
    });
    let found = crate::tracefs::find_tracefs(root);
    match (found, mount) {
        (Some(dir), m) => {
            let ro = m.is_some_and(|m| m.read_only);
            let w = !ro && writable(&dir.join("instances"));
            let path = super::item::kernel_path(root, &dir);
            let note = match (w, ro) {
                (true, _) => format!("mounted at {path}, writable"),
                (false, true) => format!("mounted read-only at {path}"),
                (false, false) if !root_user => format!("mounted at {path}; writing needs root"),
                (false, false) => format!("mounted at {path}, not writable"),
            };
            TracefsInfo {
                mounted: true,
                path: Some(path),
                writable: w,
                needs_root: !w && !root_user,
                mountable: false,
                note,
            }
        }
        (None, Some(m)) if !root_user && m.dir.ends_with("tracing") => TracefsInfo {
            mounted: true,
            note: format!("mounted at {}; needs root", m.dir),
            path: Some(m.dir),
            writable: false,
            needs_root: true,
            mountable: false,
        },
        _ => {
            let mountable = real && root_user;
            let note = if mountable {
                "not mounted; pmlab mounts it at /sys/kernel/tracing when it records".to_string()
            } else {
                "not mounted; pmlab mounts it at /sys/kernel/tracing when run as root".to_string()
            };
            TracefsInfo {
                mounted: false,
                path: None,
                writable: false,
                needs_root: !root_user,
                mountable,
                note,
            }
        }
    }
}
