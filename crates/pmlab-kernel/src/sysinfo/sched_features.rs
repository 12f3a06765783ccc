//! Scheduler features from debugfs `sched/features` (`NAME` on, `NO_NAME` off).
//! Needs debugfs mounted and root; never mounts anything.

use super::item::{is_root, read_path, unavailable, Item, Status};
use super::mounts;
use crate::Root;
use serde::Serialize;

/// One scheduler feature from debugfs `sched/features`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchedFeature {
    /// The feature's name (`TTWU_QUEUE`), without `NO_`.
    pub name: String,
    /// On (listed as `NAME`) or off (listed as `NO_NAME`).
    pub enabled: bool,
}

/// Parse the `sched/features` text (words, `NO_` prefix for off).
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

/// Read `sched/features`; unavailable without debugfs or root, or under lockdown.
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
        Err(e) => {
            let mut u = unavailable(root, &e);
            if u.status == Status::Error && u.detail.as_deref() == Some("permission denied") {
                u.detail = Some(lockdown_note(root));
            }
            Item::Unavailable(u)
        }
    }
}

/// Why root cannot read a writable debugfs file: kernel lockdown (`integrity` or
/// `confidentiality`) blocks them. Names the mode when securityfs shows it.
fn lockdown_note(root: &Root) -> String {
    let mode = read_path(&root.path("/sys/kernel/security/lockdown"))
        .ok()
        .and_then(|t| lockdown_mode(&t));
    match mode {
        Some(m) => format!(
            "permission denied as root: kernel lockdown ({m}) blocks writable debugfs files"
        ),
        None => "permission denied as root: kernel lockdown most likely blocks writable \
                 debugfs files (CONFIG_SECURITY_LOCKDOWN_LSM)"
            .into(),
    }
}

/// The active mode in securityfs `lockdown` (`none [integrity] confidentiality`).
pub fn lockdown_mode(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockdown_mode_is_the_bracketed_word() {
        assert_eq!(
            lockdown_mode("none [integrity] confidentiality\n").as_deref(),
            Some("integrity")
        );
        assert_eq!(lockdown_mode("none integrity"), None);
    }
}
