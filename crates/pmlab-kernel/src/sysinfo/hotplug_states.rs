//! The CPU hotplug state table, /sys/devices/system/cpu/hotplug/states (`N: name`).

use super::item::{read_text, SysinfoError};
use crate::Root;
use serde::Serialize;

pub const STATES: &str = "/sys/devices/system/cpu/hotplug/states";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HotplugState {
    pub number: i32,
    pub name: String,
}

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

pub fn read(root: &Root) -> Result<Vec<HotplugState>, SysinfoError> {
    Ok(parse(&read_text(root, STATES)?))
}
