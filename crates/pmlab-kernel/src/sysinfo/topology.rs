//! CPU topology as pepc gives it: package, die, module/cluster, core and NUMA node of every
//! CPU, from `cpuN/topology` and, where sysfs lacks a file, from `/proc/cpuinfo` (package,
//! core) and the L2 cache (module); hybrid core types (`/sys/devices/cpu_core/cpus`...),
//! NUMA nodes, caches, and the counts. Each level says which source it came from.

use super::cpu::CPU_DIR;
use super::item::{list_names, numbered, read_text, SysinfoError};
use crate::cpulist::parse_cpu_list;
use crate::Root;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Where one CPU sits: package, die, cluster, core, siblings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuTopology {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// Package: `physical_package_id`, else `physical id` of /proc/cpuinfo.
    pub package: Option<u32>,
    /// `die_id` (numbered within the package); `None` where missing or out of range.
    pub die: Option<u32>,
    /// `cluster_id` (65535 where the platform has no clusters is reported as None).
    pub cluster: Option<u32>,
    /// Core: `core_id`, else `core id` of /proc/cpuinfo (numbered within the package).
    pub core: Option<u32>,
    /// CPUs sharing this CPU's core (SMT siblings, itself included).
    pub thread_siblings: Vec<u32>,
    /// CPUs in the same package.
    pub package_cpus: Vec<u32>,
    /// Module (CPUs sharing an L2 cache, pepc's "module"): `cluster_id`, else the id of the
    /// L2 cache (`cache/indexK/id` of the level-2 index).
    pub module: Option<u32>,
    /// NUMA node (`/sys/devices/system/node/nodeN/cpulist`).
    pub node: Option<u32>,
    /// Hybrid core type (`core`, `atom`, `lowpower`, from `/sys/devices/cpu_TYPE/cpus`).
    pub core_type: Option<String>,
}

/// Where a topology level was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Source {
    /// `cpuN/topology/*` (or the sysfs file named in the field's doc).
    #[serde(rename = "sysfs")]
    Sysfs,
    /// `/proc/cpuinfo` (sysfs lacked the file).
    #[serde(rename = "/proc/cpuinfo")]
    Cpuinfo,
    /// The level-2 cache's id (`cpuN/cache/indexK`).
    #[serde(rename = "L2 cache")]
    L2Cache,
    /// Nowhere: no CPU has it.
    #[serde(rename = "none")]
    None,
}

/// Which source each level came from (the first CPU that has the level decides).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sources {
    /// Package ids.
    pub package: Source,
    /// Die ids.
    pub die: Source,
    /// Module ids.
    pub module: Source,
    /// Core ids.
    pub core: Source,
    /// NUMA nodes.
    pub node: Source,
}

/// How many of each unit the machine has (CPUs with sysfs directories).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// CPUs (with a `cpuN` directory).
    pub cpus: u32,
    /// Packages.
    pub packages: u32,
    /// Dies (package, die) pairs.
    pub dies: u32,
    /// Modules (CPUs sharing an L2 cache).
    pub modules: u32,
    /// Cores (package, core) pairs.
    pub cores: u32,
    /// The most CPUs any core has.
    pub threads_per_core: u32,
    /// NUMA nodes with CPUs.
    pub nodes: u32,
}

/// One hybrid core type and its CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoreType {
    /// `core`, `atom`, `lowpower` (from `/sys/devices/cpu_TYPE`).
    pub name: String,
    /// Its CPUs.
    pub cpus: Vec<u32>,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// N of `nodeN`.
    pub id: u32,
    /// Its CPUs (may be empty: memory-only nodes).
    pub cpus: Vec<u32>,
}

/// One cache instance, shared by `cpus`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// K of `cache/indexK`.
    pub index: u32,
    /// `level` (1, 2, 3), where the kernel shows it.
    pub level: Option<u32>,
    /// `type` (`Data`, `Instruction`, `Unified`), where shown.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `size` as the kernel writes it (`48K`), where shown.
    pub size: Option<String>,
    /// `id`.
    pub id: Option<u32>,
    /// `shared_cpu_list`.
    pub cpus: Vec<u32>,
}

/// The machine's layout: counts, sources, hybrid types, nodes, caches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// How many of each.
    pub counts: Counts,
    /// Where each level came from.
    pub sources: Sources,
    /// Hybrid core types (empty on machines with one type).
    pub core_types: Vec<CoreType>,
    /// NUMA nodes (`/sys/devices/system/node`); empty where absent.
    pub nodes: Vec<Node>,
    /// Cache instances, one per (index, shared CPU list).
    pub caches: Vec<Cache>,
}

fn id(root: &Root, cpu: u32, name: &str) -> Option<u32> {
    let v: i64 = read_text(root, &format!("{CPU_DIR}/cpu{cpu}/topology/{name}"))
        .ok()?
        .parse()
        .ok()?;
    (0..65535).contains(&v).then_some(v as u32)
}

fn list(root: &Root, abs: &str) -> Option<Vec<u32>> {
    let t = read_text(root, abs).ok()?;
    if t.is_empty() {
        return Some(Vec::new());
    }
    parse_cpu_list(&t).ok()
}

fn cpus(root: &Root, cpu: u32, name: &str) -> Vec<u32> {
    list(root, &format!("{CPU_DIR}/cpu{cpu}/topology/{name}")).unwrap_or_default()
}

/// `processor` → (`physical id`, `core id`) of /proc/cpuinfo (x86 names).
pub fn cpuinfo_ids(root: &Root) -> BTreeMap<u32, (Option<u32>, Option<u32>)> {
    let text = read_text(root, "/proc/cpuinfo").unwrap_or_default();
    let mut out = BTreeMap::new();
    for block in text.split("\n\n") {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().parse::<u32>().ok())?
            })
        };
        if let Some(p) = field("processor") {
            out.insert(p, (field("physical id"), field("core id")));
        }
    }
    out
}

/// The `indexK` directories of `cpu`'s caches, with their level (from `level`, or on x86
/// without it the usual layout: index0/1 = L1, index2 = L2, index3 = L3).
fn cache_indices(root: &Root, cpu: u32) -> Vec<(u32, Option<u32>)> {
    let dir = format!("{CPU_DIR}/cpu{cpu}/cache");
    numbered(root, &dir, "index")
        .unwrap_or_default()
        .into_iter()
        .map(|k| {
            let level = read_text(root, &format!("{dir}/index{k}/level"))
                .ok()
                .and_then(|l| l.parse().ok())
                .or(match k {
                    0 | 1 => Some(1),
                    2 => Some(2),
                    3 => Some(3),
                    _ => None,
                });
            (k, level)
        })
        .collect()
}

fn l2_id(root: &Root, cpu: u32) -> Option<u32> {
    let (k, _) = cache_indices(root, cpu)
        .into_iter()
        .find(|(_, l)| *l == Some(2))?;
    read_text(root, &format!("{CPU_DIR}/cpu{cpu}/cache/index{k}/id"))
        .ok()?
        .parse()
        .ok()
}

/// NUMA nodes; empty when `/sys/devices/system/node` is absent.
pub fn nodes(root: &Root) -> Vec<Node> {
    let dir = "/sys/devices/system/node";
    numbered(root, dir, "node")
        .unwrap_or_default()
        .into_iter()
        .map(|id| Node {
            id,
            cpus: list(root, &format!("{dir}/node{id}/cpulist")).unwrap_or_default(),
        })
        .collect()
}

/// Hybrid core types from `/sys/devices/cpu_TYPE/cpus`; empty on one-type machines.
pub fn core_types(root: &Root) -> Vec<CoreType> {
    let mut v: Vec<CoreType> = list_names(root, "/sys/devices")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| {
            let name = n.strip_prefix("cpu_")?.to_string();
            let cpus = list(root, &format!("/sys/devices/{n}/cpus"))?;
            Some(CoreType { name, cpus })
        })
        .collect();
    v.sort_by_key(|t| t.cpus.first().copied());
    v
}

/// Every cache instance, once per (index, shared CPU list).
pub fn caches(root: &Root, cpu_ids: &[u32]) -> Vec<Cache> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for &cpu in cpu_ids {
        for (k, level) in cache_indices(root, cpu) {
            let base = format!("{CPU_DIR}/cpu{cpu}/cache/index{k}");
            let shared = list(root, &format!("{base}/shared_cpu_list")).unwrap_or_default();
            if !seen.insert((k, shared.clone())) {
                continue;
            }
            let text = |f: &str| read_text(root, &format!("{base}/{f}")).ok();
            out.push(Cache {
                index: k,
                level: text("level").and_then(|l| l.parse().ok()).or(level),
                kind: text("type"),
                size: text("size"),
                id: text("id").and_then(|l| l.parse().ok()),
                cpus: shared,
            });
        }
    }
    out.sort_by_key(|c| (c.index, c.cpus.first().copied()));
    out
}

/// Topology of every CPU with a `cpuN` directory, and where each level came from.
pub fn read_with_sources(root: &Root) -> Result<(Vec<CpuTopology>, Sources), SysinfoError> {
    let all = numbered(root, CPU_DIR, "cpu")?;
    let info = cpuinfo_ids(root);
    let nodes = nodes(root);
    let types = core_types(root);
    let mut src = Sources {
        package: Source::None,
        die: Source::None,
        module: Source::None,
        core: Source::None,
        node: Source::None,
    };
    let note = |slot: &mut Source, s: Source| {
        if *slot == Source::None {
            *slot = s;
        }
    };
    let mut out = Vec::new();
    for cpu in all {
        // An offline CPU has no topology directory: it has no place to report.
        if !root.path(&format!("{CPU_DIR}/cpu{cpu}/topology")).is_dir() {
            continue;
        }
        let from_info = info.get(&cpu).copied().unwrap_or((None, None));
        let pick = |sys: Option<u32>, alt: Option<u32>, slot: &mut Source| match (sys, alt) {
            (Some(v), _) => {
                note(slot, Source::Sysfs);
                Some(v)
            }
            (None, Some(v)) => {
                note(slot, Source::Cpuinfo);
                Some(v)
            }
            _ => None,
        };
        let package = pick(
            id(root, cpu, "physical_package_id"),
            from_info.0,
            &mut src.package,
        );
        let core = pick(id(root, cpu, "core_id"), from_info.1, &mut src.core);
        let die = id(root, cpu, "die_id");
        if die.is_some() {
            note(&mut src.die, Source::Sysfs);
        }
        let cluster = id(root, cpu, "cluster_id");
        let module = match cluster {
            Some(c) => {
                note(&mut src.module, Source::Sysfs);
                Some(c)
            }
            None => l2_id(root, cpu).inspect(|_| note(&mut src.module, Source::L2Cache)),
        };
        let node = nodes.iter().find(|n| n.cpus.contains(&cpu)).map(|n| n.id);
        if node.is_some() {
            note(&mut src.node, Source::Sysfs);
        }
        out.push(CpuTopology {
            cpu,
            package,
            die,
            cluster,
            core,
            thread_siblings: cpus(root, cpu, "thread_siblings_list"),
            package_cpus: match cpus(root, cpu, "package_cpus_list") {
                v if v.is_empty() => cpus(root, cpu, "core_siblings_list"),
                v => v,
            },
            module,
            node,
            core_type: types
                .iter()
                .find(|t| t.cpus.contains(&cpu))
                .map(|t| t.name.clone()),
        });
    }
    // Siblings sysfs did not give: from the (package, core) and package ids.
    let ids: Vec<(u32, Option<u32>, Option<u32>)> =
        out.iter().map(|t| (t.cpu, t.package, t.core)).collect();
    for t in &mut out {
        if t.thread_siblings.is_empty() && t.core.is_some() && t.package.is_some() {
            t.thread_siblings = ids
                .iter()
                .filter(|(_, p, c)| *p == t.package && *c == t.core)
                .map(|x| x.0)
                .collect();
        }
        if t.package_cpus.is_empty() && t.package.is_some() {
            t.package_cpus = ids
                .iter()
                .filter(|(_, p, _)| *p == t.package)
                .map(|x| x.0)
                .collect();
        }
    }
    Ok((out, src))
}

/// Topology of every CPU with a `cpuN` directory (see [`read_with_sources`]).
pub fn read(root: &Root) -> Result<Vec<CpuTopology>, SysinfoError> {
    read_with_sources(root).map(|(t, _)| t)
}

/// Counts of a topology.
pub fn counts(topo: &[CpuTopology], nodes: &[Node]) -> Counts {
    let set = |f: &dyn Fn(&CpuTopology) -> Option<(u32, u32)>| {
        topo.iter().filter_map(f).collect::<BTreeSet<_>>().len() as u32
    };
    let mut per_core: BTreeMap<(u32, u32), u32> = BTreeMap::new();
    for t in topo {
        if let (Some(p), Some(c)) = (t.package, t.core) {
            *per_core.entry((p, c)).or_default() += 1;
        }
    }
    Counts {
        cpus: topo.len() as u32,
        packages: set(&|t| t.package.map(|p| (p, 0))),
        dies: set(&|t| Some((t.package.unwrap_or(0), t.die?))),
        modules: set(&|t| t.module.map(|m| (m, 0))),
        cores: per_core.len() as u32,
        threads_per_core: per_core.values().copied().max().unwrap_or(0),
        nodes: nodes.iter().filter(|n| !n.cpus.is_empty()).count() as u32,
    }
}

/// The layout: counts, sources, hybrid types, NUMA nodes and caches.
pub fn layout(root: &Root) -> Layout {
    let (topo, sources) = read_with_sources(root).unwrap_or_else(|_| {
        (
            Vec::new(),
            Sources {
                package: Source::None,
                die: Source::None,
                module: Source::None,
                core: Source::None,
                node: Source::None,
            },
        )
    });
    let nodes = nodes(root);
    let ids: Vec<u32> = topo.iter().map(|t| t.cpu).collect();
    Layout {
        counts: counts(&topo, &nodes),
        sources,
        core_types: core_types(root),
        caches: caches(root, &ids),
        nodes,
    }
}
