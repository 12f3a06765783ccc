//! CPU topology from `cpuN/topology`: package, die, cluster, core and thread siblings.

use super::cpu::CPU_DIR;
use super::item::{numbered, read_text, SysinfoError};
use crate::cpulist::parse_cpu_list;
use crate::Root;
use serde::Serialize;

/// Where one CPU sits: package, die, cluster, core, siblings (from `cpuN/topology`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuTopology {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// `physical_package_id`; `None` where the file is missing or out of range (-1).
    pub package: Option<u32>,
    /// `die_id`; `None` where missing or out of range.
    pub die: Option<u32>,
    /// `cluster_id` (65535 where the platform has no clusters is reported as None).
    pub cluster: Option<u32>,
    /// `core_id`; `None` where missing or out of range.
    pub core: Option<u32>,
    /// CPUs sharing this CPU's core (SMT siblings, itself included).
    pub thread_siblings: Vec<u32>,
    /// CPUs in the same package.
    pub package_cpus: Vec<u32>,
}

fn id(root: &Root, cpu: u32, name: &str) -> Option<u32> {
    let v: i64 = read_text(root, &format!("{CPU_DIR}/cpu{cpu}/topology/{name}"))
        .ok()?
        .parse()
        .ok()?;
    (0..65535).contains(&v).then_some(v as u32)
}

fn cpus(root: &Root, cpu: u32, name: &str) -> Vec<u32> {
    read_text(root, &format!("{CPU_DIR}/cpu{cpu}/topology/{name}"))
        .ok()
        .and_then(|t| parse_cpu_list(&t).ok())
        .unwrap_or_default()
}

/// Topology of every CPU that has a `topology` directory.
pub fn read(root: &Root) -> Result<Vec<CpuTopology>, SysinfoError> {
    let mut out = Vec::new();
    for cpu in numbered(root, CPU_DIR, "cpu")? {
        if !root.path(&format!("{CPU_DIR}/cpu{cpu}/topology")).is_dir() {
            continue;
        }
        let package_cpus = match cpus(root, cpu, "package_cpus_list") {
            v if v.is_empty() => cpus(root, cpu, "core_siblings_list"),
            v => v,
        };
        out.push(CpuTopology {
            cpu,
            package: id(root, cpu, "physical_package_id"),
            die: id(root, cpu, "die_id"),
            cluster: id(root, cpu, "cluster_id"),
            core: id(root, cpu, "core_id"),
            thread_siblings: cpus(root, cpu, "thread_siblings_list"),
            package_cpus,
        });
    }
    Ok(out)
}
