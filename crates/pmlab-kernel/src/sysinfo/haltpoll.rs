//! haltpoll: the governor's `guest_halt_poll_*` module parameters
//! (/sys/module/haltpoll/parameters) and the cpuidle-haltpoll driver's `force`.

use super::item::{item, list_names, read_bool, read_text, Item};
use crate::Root;
use serde::Serialize;
use std::collections::BTreeMap;

/// The haltpoll governor's parameters (kernel path).
pub(crate) const PARAMS_DIR: &str = "/sys/module/haltpoll/parameters";
/// The haltpoll cpuidle driver's `force` parameter (kernel path).
pub(crate) const DRIVER_FORCE: &str = "/sys/module/cpuidle_haltpoll/parameters/force";

/// The haltpoll governor's parameters (`guest_halt_poll_ns`, `_grow`, `_shrink`, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Haltpoll {
    /// Every file under /sys/module/haltpoll/parameters, by name.
    pub parameters: BTreeMap<String, Item<String>>,
    /// `cpuidle_haltpoll.force`: the driver registers even without KVM_HINTS_REALTIME.
    pub driver_force: Option<bool>,
}

impl Haltpoll {
    /// The value of one parameter (`guest_halt_poll_ns`); `None` when absent or unreadable.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.parameters.get(name)?.value().map(String::as_str)
    }
}

/// `None` when the haltpoll module (governor) is not in the kernel.
pub fn read(root: &Root) -> Option<Haltpoll> {
    let names = list_names(root, PARAMS_DIR).ok()?;
    let parameters = names
        .into_iter()
        .map(|n| {
            let v = item(root, read_text(root, &format!("{PARAMS_DIR}/{n}")));
            (n, v)
        })
        .collect();
    Some(Haltpoll {
        parameters,
        driver_force: read_bool(root, DRIVER_FORCE).ok(),
    })
}
