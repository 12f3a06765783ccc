//! CPUs: model and vendor from /proc/cpuinfo; possible/present/online/offline lists;
//! which CPUs can be hot-plugged (those with a `cpuN/online` file).

use super::item::{item, read_text, Item, SysinfoError};
use crate::cpulist::parse_cpu_list;
use crate::Root;
use serde::Serialize;

/// The CPU sysfs directory (kernel path, mapped through the root).
pub(crate) const CPU_DIR: &str = "/sys/devices/system/cpu";

/// The CPUs: model, and which are possible, present, online and hotpluggable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cpus {
    /// `model name` of the first processor (or `Model`/`cpu model` on other arches).
    pub model: Item<String>,
    /// `vendor_id` (`AuthenticAMD`, `GenuineIntel`) where /proc/cpuinfo has it.
    pub vendor: Option<String>,
    /// x86 family/model/stepping where /proc/cpuinfo has them.
    pub family: Option<u32>,
    /// x86 model number (see `family`).
    pub model_number: Option<u32>,
    /// x86 stepping (see `family`).
    pub stepping: Option<u32>,
    /// `flags` contains `hypervisor`.
    pub hypervisor_flag: bool,
    /// `possible` CPU list (kernel numbering).
    pub possible: Item<Vec<u32>>,
    /// `present` CPU list.
    pub present: Item<Vec<u32>>,
    /// `online` CPU list.
    pub online: Item<Vec<u32>>,
    /// Present CPUs that are not online.
    pub offline: Vec<u32>,
    /// Present CPUs with a `cpuN/online` file: these can be taken offline.
    pub hotpluggable: Vec<u32>,
    /// SMT control (`on`, `off`, `notsupported`, ...).
    pub smt_control: Option<String>,
    /// `processor` entries in /proc/cpuinfo: the CPUs online when it was read.
    #[serde(skip)]
    pub processors: u32,
}

fn list(root: &Root, name: &str) -> Result<Vec<u32>, SysinfoError> {
    let abs = format!("{CPU_DIR}/{name}");
    let text = read_text(root, &abs)?;
    if text.is_empty() {
        return Ok(Vec::new());
    }
    parse_cpu_list(&text).map_err(|_| SysinfoError::Parse {
        path: root.path(&abs),
        text,
        what: "a CPU list",
    })
}

/// `key : value` of the first processor block of /proc/cpuinfo.
pub fn cpuinfo_field<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// Read the CPUs' picture; never fails (each part says why it is missing).
pub fn read(root: &Root) -> Cpus {
    let cpuinfo = read_text(root, "/proc/cpuinfo");
    let text = cpuinfo.as_deref().unwrap_or("");
    let field = |k: &str| cpuinfo_field(text, k).map(str::to_string);
    let num = |k: &str| cpuinfo_field(text, k).and_then(|v| v.parse().ok());
    let model = match &cpuinfo {
        Ok(_) => match field("model name")
            .or_else(|| field("Model"))
            .or_else(|| field("cpu model"))
        {
            Some(m) => Item::Value(m),
            None => Item::unavailable(
                super::item::Status::Absent,
                "/proc/cpuinfo",
                Some("no model name".into()),
            ),
        },
        Err(e) => Item::Unavailable(super::item::unavailable(root, e)),
    };
    let hypervisor_flag = cpuinfo_field(text, "flags")
        .is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor"));
    let present = item(root, list(root, "present"));
    let hotpluggable = present
        .value()
        .map(|p| {
            p.iter()
                .copied()
                .filter(|c| root.path(&format!("{CPU_DIR}/cpu{c}/online")).is_file())
                .collect()
        })
        .unwrap_or_default();
    Cpus {
        model,
        vendor: field("vendor_id"),
        family: num("cpu family"),
        model_number: num("model"),
        stepping: num("stepping"),
        hypervisor_flag,
        possible: item(root, list(root, "possible")),
        present,
        online: item(root, list(root, "online")),
        offline: list(root, "offline").unwrap_or_default(),
        hotpluggable,
        smt_control: read_text(root, &format!("{CPU_DIR}/smt/control")).ok(),
        processors: text
            .lines()
            .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
            .count() as u32,
    }
}
