//! Scheduler features from debugfs `sched/features` (`NAME` on, `NO_NAME` off).
//! Needs debugfs mounted and root; never mounts anything.

use super::item::{is_root, read_path, unavailable, Item, Status};
use super::mounts;
use crate::Root;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchedFeature {
    pub name: String,
    pub enabled: bool,
}

pub fn parse(text: &str) -> Vec<SchedFeature> {
    text.split_whitespace()
        .map(|w| match w.strip_prefix("NO_") {
            Some(n) => SchedFeature {
                name: n.to_string(),
                enabled: false,
            },
            None => SchedFeature {
                name: w.to_string(),
                enabled: true,
            },
        })
        .collect()
}

pub fn read(root: &Root) -> Item<Vec<SchedFeature>> {
    let Some(m) = mounts::find(root, "debugfs") else {
        let (status, detail) = if is_root() {
            (
                Status::NotMounted,
                "debugfs is not mounted: mount -t debugfs none /sys/kernel/debug",
            )
        } else {
            (
                Status::NeedsRoot,
                "debugfs is not mounted, and both mounting and reading it need root",
            )
        };
        return Item::unavailable(
            status,
            "/sys/kernel/debug/sched/features",
            Some(detail.into()),
        );
    };
    let path = root.path(&format!("{}/sched/features", m.dir.trim_end_matches('/')));
    match read_path(&path) {
        Ok(t) => Item::Value(parse(&t)),
        Err(e) => Item::Unavailable(unavailable(root, &e)),
    }
}
