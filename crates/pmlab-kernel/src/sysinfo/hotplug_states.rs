//! The CPU hotplug state table, /sys/devices/system/cpu/hotplug/states (`N: name`).

use super::item::{read_text, SysinfoError};
use crate::Root;
use serde::Serialize;

/// The kernel's cpuhp state table (kernel path; `number: name` lines).
pub const STATES: &str = "/sys/devices/system/cpu/hotplug/states";

/// One cpuhp state: the step a CPU passes through when plugged or unplugged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HotplugState {
    /// The state's number (its order in bring-up).
    pub number: i32,
    /// The state's name (`sched:active`, `ap:online`...).
    pub name: String,
}

/// Parse the `states` file's text (lines that do not parse are skipped).
pub fn parse(text: &str) -> Vec<HotplugState> {
    text.lines()
        .filter_map(|l| {
            let (n, name) = l.split_once(':')?;
            Some(HotplugState {
                number: n.trim().parse().ok()?,
                name: name.trim().to_string(),
            })
        })
        .collect()
}

/// Read and parse the state table.
pub fn read(root: &Root) -> Result<Vec<HotplugState>, SysinfoError> {
    Ok(parse(&read_text(root, STATES)?))
}
