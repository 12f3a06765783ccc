//! Kernel counters sampled around a run, and the side metrics derived from two samples:
//! cpuidle per-state usage/time per CPU, /proc/interrupts (arch kinds and device IRQs by
//! name, per CPU), /proc/softirqs, /proc/stat (context switches, busy/idle per CPU) and
//! RAPL `energy_uj` with `max_energy_range_uj` wrap-around, hwmon energy and power channels
//! (`crate::hwmon`), and the one rule that names the best energy source ([`best_energy`]).
//! Metric names (`idle.POLL.time_ms@cpu1`,
//! `irq.CAL.per_s`, `idle.exits_per_s`, ...) are documented in crates/pmlab-workload/README.md.

use crate::units::{Direction, Metric, Nanos};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why a snapshot could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum CountersError {
    /// A counter file could not be read.
    #[error("{path}")]
    Io {
        /// The file (under the root).
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A counter file's line did not have the expected form.
    #[error("{path}: line {line}: {message}")]
    Parse {
        /// The file (under the root).
        path: PathBuf,
        /// Line number, 1-based (0: the file as a whole).
        line: usize,
        /// What was wrong with it.
        message: String,
    },
}

/// One cpuidle state of one CPU (cumulative counters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleState {
    /// K in `stateK`.
    pub index: u32,
    /// The state's `name` (`POLL`, `C1`, `haltpoll`).
    pub name: String,
    /// Times the state was entered.
    pub usage: u64,
    /// Time spent in the state, µs.
    pub time_us: u64,
    /// Governor misses: the state was too deep (`above`) or too shallow (`below`).
    pub above: Option<u64>,
    /// See `above`; `None` on kernels without these files.
    pub below: Option<u64>,
}

/// One line of /proc/interrupts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IrqLine {
    /// The text before the colon: `LOC`, `CAL`, or an IRQ number.
    pub key: String,
    /// `LOC` for arch lines; the action name (`virtio1-req.0`) for device IRQs, else the number.
    pub name: String,
    /// A device IRQ (the key is a number), not an arch line such as `LOC` or `CAL`.
    pub device: bool,
    /// Count per CPU column; empty for lines with one total (`ERR`, `MIS`).
    pub per_cpu: BTreeMap<u32, u64>,
    /// Sum over all CPUs (or the single count of `ERR`/`MIS`).
    pub total: u64,
}

/// Jiffies per CPU from a /proc/stat `cpuN` line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// Jiffies in user mode.
    pub user: u64,
    /// Jiffies in user mode at low priority (nice > 0).
    pub nice: u64,
    /// Jiffies in kernel mode.
    pub system: u64,
    /// Jiffies idle (not counting iowait).
    pub idle: u64,
    /// Jiffies idle with I/O outstanding.
    pub iowait: u64,
    /// Jiffies servicing hard IRQs.
    pub irq: u64,
    /// Jiffies servicing softirqs.
    pub softirq: u64,
    /// Jiffies stolen by the hypervisor (time this vCPU wanted to run but did not).
    pub steal: u64,
}

impl CpuTimes {
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
    fn idle_all(&self) -> u64 {
        self.idle + self.iowait
    }
}

/// A RAPL (powercap) zone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaplZone {
    /// Directory name: `intel-rapl:0`, `intel-rapl:0:1`.
    pub id: String,
    /// Zone name with its parent's: `package-0`, `package-0/core`.
    pub name: String,
    /// A package zone (`intel-rapl:N`), not a subzone: the sum of top-level zones is the total.
    pub top_level: bool,
    /// The energy counter, µJ (wraps at `max_energy_range_uj`).
    pub energy_uj: u64,
    /// The counter wraps at this value, µJ (0 when the file is missing).
    pub max_energy_range_uj: u64,
}

/// A /proc/softirqs kind with its count per CPU.
pub type SoftirqRow = (String, BTreeMap<u32, u64>);

/// All counters at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC when taken.
    pub at: Nanos,
    /// cpu → its idle states (CPUs without cpuidle are absent).
    pub idle: BTreeMap<u32, Vec<IdleState>>,
    /// /proc/interrupts lines, in file order.
    pub interrupts: Vec<IrqLine>,
    /// softirq kind (in /proc order) → cpu → count.
    pub softirqs: Vec<SoftirqRow>,
    /// Context switches since boot (/proc/stat `ctxt`).
    pub ctxt: u64,
    /// The aggregate `cpu` line.
    pub cpu_total: CpuTimes,
    /// cpu → its /proc/stat `cpuN` line (online CPUs only).
    pub cpu_times: BTreeMap<u32, CpuTimes>,
    /// RAPL zones whose energy was readable (empty without RAPL or without root).
    pub rapl: Vec<RaplZone>,
    /// hwmon energy and power channels.
    #[serde(default)]
    pub hwmon: Vec<crate::hwmon::Channel>,
}

fn read(path: &Path) -> Result<String, CountersError> {
    std::fs::read_to_string(path).map_err(|e| CountersError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}

/// A file's text, trimmed.
pub(crate) fn read_text(path: &Path) -> Result<String, CountersError> {
    read(path).map(|t| t.trim().to_string())
}

pub(crate) fn read_u64(path: &Path) -> Result<u64, CountersError> {
    let text = read(path)?;
    text.trim().parse().map_err(|_| CountersError::Parse {
        path: path.to_path_buf(),
        line: 1,
        message: format!("not a number: {:?}", text.trim()),
    })
}

fn read_opt_u64(path: &Path) -> Result<Option<u64>, CountersError> {
    if !path.exists() {
        return Ok(None);
    }
    read_u64(path).map(Some)
}

/// Numbered entries `PREFIXn` of a directory, sorted by number; empty if the directory is absent.
pub(crate) fn numbered(dir: &Path, prefix: &str) -> Result<Vec<(u32, PathBuf)>, CountersError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => {
            return Err(CountersError::Io {
                path: dir.to_path_buf(),
                source: e,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        if let Ok(n) = rest.parse::<u32>() {
            out.push((n, entry.path()));
        }
    }
    out.sort_by_key(|e| e.0);
    Ok(out)
}

fn now_monotonic() -> Nanos {
    Nanos(crate::units::monotonic_ns())
}

impl Snapshot {
    /// Read every counter under the filesystem root `root_dir` ("/" in production).
    pub fn take_at(root_dir: &Path) -> Result<Snapshot, CountersError> {
        let at = now_monotonic();
        let p = |abs: &str| root_dir.join(abs.trim_start_matches('/'));
        let stat_path = p("/proc/stat");
        let (ctxt, cpu_total, cpu_times) = parse_stat(&stat_path, &read(&stat_path)?)?;
        let irq_path = p("/proc/interrupts");
        let interrupts = parse_interrupts(&irq_path, &read(&irq_path)?)?;
        let soft_path = p("/proc/softirqs");
        let softirqs = parse_softirqs(&soft_path, &read(&soft_path)?)?;
        Ok(Snapshot {
            at,
            idle: read_cpuidle(&p("/sys/devices/system/cpu"))?,
            interrupts,
            softirqs,
            ctxt,
            cpu_total,
            cpu_times,
            rapl: read_rapl(&p("/sys/class/powercap"))?,
            hwmon: crate::hwmon::read(&crate::Root::new(root_dir))?,
        })
    }
}

/// /proc/stat's per-CPU times alone, with when they were read: what the lab's disturbance
/// measurement reads right around a run's measured part (a [`Snapshot`] reads many files).
#[derive(Debug, Clone, PartialEq)]
pub struct CpuTimesSample {
    /// CLOCK_MONOTONIC when read.
    pub at: Nanos,
    /// cpu → its `cpuN` line (online CPUs only), in clock ticks (`USER_HZ`).
    pub cpus: BTreeMap<u32, CpuTimes>,
}

/// Read /proc/stat under `root_dir` ("/" in production): its `cpuN` lines.
pub fn cpu_times_at(root_dir: &Path) -> Result<CpuTimesSample, CountersError> {
    let path = root_dir.join("proc/stat");
    let text = read(&path)?;
    let at = now_monotonic();
    let (_, _, cpus) = parse_stat(&path, &text)?;
    Ok(CpuTimesSample { at, cpus })
}

fn read_cpuidle(cpu_dir: &Path) -> Result<BTreeMap<u32, Vec<IdleState>>, CountersError> {
    let mut out = BTreeMap::new();
    for (cpu, dir) in numbered(cpu_dir, "cpu")? {
        let mut states = Vec::new();
        for (index, sdir) in numbered(&dir.join("cpuidle"), "state")? {
            states.push(IdleState {
                index,
                name: read(&sdir.join("name"))?.trim().to_string(),
                usage: read_u64(&sdir.join("usage"))?,
                time_us: read_u64(&sdir.join("time"))?,
                above: read_opt_u64(&sdir.join("above"))?,
                below: read_opt_u64(&sdir.join("below"))?,
            });
        }
        if !states.is_empty() {
            out.insert(cpu, states);
        }
    }
    Ok(out)
}

fn read_rapl(powercap: &Path) -> Result<Vec<RaplZone>, CountersError> {
    let entries = match std::fs::read_dir(powercap) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => {
            return Err(CountersError::Io {
                path: powercap.to_path_buf(),
                source: e,
            })
        }
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().join("energy_uj").exists())
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .collect();
    ids.sort();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut zones = Vec::new();
    for id in ids {
        let dir = powercap.join(&id);
        let own = read(&dir.join("name"))?.trim().to_string();
        // `intel-rapl:0:1` is a subzone of `intel-rapl:0`.
        let parent = id.rfind(':').map(|i| &id[..i]).filter(|p| p.contains(':'));
        let name = match parent.and_then(|p| names.get(p)) {
            Some(pn) => format!("{pn}/{own}"),
            None => own,
        };
        names.insert(id.clone(), name.clone());
        let energy_uj = match read_u64(&dir.join("energy_uj")) {
            Ok(v) => v,
            // energy_uj is root-only since CVE-2020-8694: skip the zone rather than fail the run.
            Err(CountersError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        zones.push(RaplZone {
            top_level: parent.is_none(),
            id,
            name,
            energy_uj,
            max_energy_range_uj: read_opt_u64(&dir.join("max_energy_range_uj"))?.unwrap_or(0),
        });
    }
    Ok(zones)
}

/// CPU numbers from a `CPU0 CPU1 ...` header line.
fn header_cpus(path: &Path, header: Option<&str>) -> Result<Vec<u32>, CountersError> {
    let header = header.ok_or_else(|| CountersError::Parse {
        path: path.to_path_buf(),
        line: 1,
        message: "empty file".into(),
    })?;
    header
        .split_whitespace()
        .map(|t| {
            t.strip_prefix("CPU")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| CountersError::Parse {
                    path: path.to_path_buf(),
                    line: 1,
                    message: format!("expected CPUn columns, found {t:?}"),
                })
        })
        .collect()
}

fn is_trigger_token(t: &str) -> bool {
    let l = t.to_ascii_lowercase();
    l.ends_with("-edge")
        || l.ends_with("-level")
        || l.ends_with("-fasteoi")
        || l == "edge"
        || l == "level"
}

pub(crate) fn parse_interrupts(path: &Path, text: &str) -> Result<Vec<IrqLine>, CountersError> {
    let mut lines = text.lines();
    let cpus = header_cpus(path, lines.next())?;
    let mut out: Vec<IrqLine> = Vec::new();
    for (i, line) in lines.enumerate() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_string();
        if key.is_empty() {
            continue;
        }
        let tokens: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = tokens
            .iter()
            .take(cpus.len())
            .map_while(|t| t.parse().ok())
            .collect();
        if counts.is_empty() {
            return Err(CountersError::Parse {
                path: path.to_path_buf(),
                line: i + 2,
                message: format!("no counts for {key}"),
            });
        }
        let per_cpu: BTreeMap<u32, u64> = if counts.len() == cpus.len() {
            cpus.iter().copied().zip(counts.iter().copied()).collect()
        } else {
            BTreeMap::new()
        };
        let desc = &tokens[counts.len()..];
        let device = key.chars().all(|c| c.is_ascii_digit());
        let name = if device {
            let after = match desc.iter().rposition(|t| is_trigger_token(t)) {
                Some(i) => &desc[i + 1..],
                None if desc.len() > 1 => &desc[desc.len() - 1..],
                None => &[][..],
            };
            let n = after.join(" ");
            if n.is_empty() {
                key.clone()
            } else {
                n
            }
        } else {
            key.clone()
        };
        out.push(IrqLine {
            total: counts.iter().sum(),
            key,
            name,
            device,
            per_cpu,
        });
    }
    Ok(out)
}

pub(crate) fn parse_softirqs(path: &Path, text: &str) -> Result<Vec<SoftirqRow>, CountersError> {
    let mut lines = text.lines();
    let cpus = header_cpus(path, lines.next())?;
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let Some((kind, rest)) = line.split_once(':') else {
            continue;
        };
        let counts: Result<Vec<u64>, _> =
            rest.split_whitespace().map(|t| t.parse::<u64>()).collect();
        let counts = counts.map_err(|_| CountersError::Parse {
            path: path.to_path_buf(),
            line: i + 2,
            message: format!("bad count in {line:?}"),
        })?;
        out.push((
            kind.trim().to_string(),
            cpus.iter().copied().zip(counts).collect(),
        ));
    }
    Ok(out)
}

type StatParts = (u64, CpuTimes, BTreeMap<u32, CpuTimes>);

pub(crate) fn parse_stat(path: &Path, text: &str) -> Result<StatParts, CountersError> {
    let mut ctxt = None;
    let mut total = CpuTimes::default();
    let mut per_cpu = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let Some(label) = it.next() else { continue };
        let bad = |m: &str| CountersError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            message: m.to_string(),
        };
        if label == "ctxt" {
            ctxt = Some(
                it.next()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad("bad ctxt"))?,
            );
        } else if let Some(cpu) = label.strip_prefix("cpu") {
            let v: Vec<u64> = it
                .map(|t| t.parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|_| bad("bad cpu times"))?;
            if v.len() < 4 {
                return Err(bad("too few cpu time fields"));
            }
            let f = |k: usize| v.get(k).copied().unwrap_or(0);
            let times = CpuTimes {
                user: f(0),
                nice: f(1),
                system: f(2),
                idle: f(3),
                iowait: f(4),
                irq: f(5),
                softirq: f(6),
                steal: f(7),
            };
            if cpu.is_empty() {
                total = times;
            } else {
                per_cpu.insert(cpu.parse().map_err(|_| bad("bad cpu number"))?, times);
            }
        }
    }
    let ctxt = ctxt.ok_or_else(|| CountersError::Parse {
        path: path.to_path_buf(),
        line: 0,
        message: "no ctxt line".into(),
    })?;
    Ok((ctxt, total, per_cpu))
}

/// A metric-name-safe form of a state, IRQ or zone name (whitespace → `_`).
pub fn metric_safe(name: &str) -> String {
    name.split_whitespace().collect::<Vec<_>>().join("_")
}

/// Side metrics between two snapshots, per CPU (`NAME` with its `cpu`) and in total (`NAME`).
pub fn delta_metrics(before: &Snapshot, after: &Snapshot) -> Vec<Metric> {
    let window_s = after.at.0.saturating_sub(before.at.0) as f64 / 1e9;
    let mut out = vec![Metric::new(
        "counters.window_s",
        window_s,
        "s",
        Direction::Neutral,
    )];
    if window_s <= 0.0 {
        return out;
    }
    let neutral = |name: String, v: f64, unit: &str| Metric::new(name, v, unit, Direction::Neutral);
    let neutral_on = |name: &str, cpu: u32, v: f64, unit: &str| {
        Metric::new(name, v, unit, Direction::Neutral).on_cpu(cpu)
    };
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
    let window_us = window_s * 1e6;

    // cpuidle
    let cpus: Vec<u32> = after
        .idle
        .keys()
        .copied()
        .filter(|c| before.idle.contains_key(c))
        .collect();
    if !cpus.is_empty() {
        let mut state_names: Vec<String> = Vec::new();
        for c in &cpus {
            for s in &after.idle[c] {
                if !state_names.contains(&s.name) {
                    state_names.push(s.name.clone());
                }
            }
        }
        struct PerCpu {
            share: f64,
            exits: f64,
            above: Option<f64>,
            below: Option<f64>,
            states: BTreeMap<String, (f64, f64)>, // name → (time_us, usage)
        }
        let mut per: Vec<(u32, PerCpu)> = Vec::new();
        for &c in &cpus {
            let (b, a) = (&before.idle[&c], &after.idle[&c]);
            let mut pc = PerCpu {
                share: 0.0,
                exits: 0.0,
                above: None,
                below: None,
                states: BTreeMap::new(),
            };
            for sa in a {
                let Some(sb) = b.iter().find(|s| s.index == sa.index) else {
                    continue;
                };
                let (t, u) = (d(sb.time_us, sa.time_us), d(sb.usage, sa.usage));
                pc.share += t;
                pc.exits += u;
                if let (Some(x), Some(y)) = (sb.above, sa.above) {
                    *pc.above.get_or_insert(0.0) += d(x, y);
                }
                if let (Some(x), Some(y)) = (sb.below, sa.below) {
                    *pc.below.get_or_insert(0.0) += d(x, y);
                }
                let e = pc.states.entry(sa.name.clone()).or_insert((0.0, 0.0));
                e.0 += t;
                e.1 += u;
            }
            pc.share = pc.share / window_us * 100.0;
            per.push((c, pc));
        }
        let n = per.len() as f64;
        let mut push_family = |base: &str, unit: &str, total: f64, values: Vec<(u32, f64)>| {
            out.push(neutral(base.to_string(), total, unit));
            for (c, v) in values {
                out.push(neutral_on(base, c, v, unit));
            }
        };
        let share: Vec<(u32, f64)> = per.iter().map(|(c, p)| (*c, p.share)).collect();
        push_family(
            "idle.share_pct",
            "%",
            share.iter().map(|v| v.1).sum::<f64>() / n,
            share,
        );
        let exits: Vec<(u32, f64)> = per.iter().map(|(c, p)| (*c, p.exits / window_s)).collect();
        push_family(
            "idle.exits_per_s",
            "/s",
            exits.iter().map(|v| v.1).sum(),
            exits,
        );
        for name in &state_names {
            let safe = metric_safe(name);
            let get = |p: &PerCpu| p.states.get(name).copied().unwrap_or((0.0, 0.0));
            let time: Vec<(u32, f64)> = per.iter().map(|(c, p)| (*c, get(p).0 / 1000.0)).collect();
            let tot_time: f64 = time.iter().map(|v| v.1).sum();
            push_family(&format!("idle.{safe}.time_ms"), "ms", tot_time, time);
            let sh: Vec<(u32, f64)> = per
                .iter()
                .map(|(c, p)| (*c, get(p).0 / window_us * 100.0))
                .collect();
            push_family(
                &format!("idle.{safe}.share_pct"),
                "%",
                sh.iter().map(|v| v.1).sum::<f64>() / n,
                sh,
            );
            let usage: Vec<(u32, f64)> = per.iter().map(|(c, p)| (*c, get(p).1)).collect();
            push_family(
                &format!("idle.{safe}.usage"),
                "count",
                usage.iter().map(|v| v.1).sum(),
                usage,
            );
        }
        for (label, pick) in [("idle.above", 0usize), ("idle.below", 1)] {
            let vals: Vec<(u32, f64)> = per
                .iter()
                .filter_map(|(c, p)| if pick == 0 { p.above } else { p.below }.map(|v| (*c, v)))
                .collect();
            if !vals.is_empty() {
                push_family(label, "count", vals.iter().map(|v| v.1).sum(), vals);
            }
        }
    }

    // /proc/interrupts
    let mut all_total = 0.0;
    let mut dev_total = 0.0;
    let mut all_cpu: BTreeMap<u32, f64> = BTreeMap::new();
    let mut dev_cpu: BTreeMap<u32, f64> = BTreeMap::new();
    let mut irq_rows: Vec<Metric> = Vec::new();
    let mut used_names: Vec<String> = Vec::new();
    for a in &after.interrupts {
        let Some(b) = before.interrupts.iter().find(|l| l.key == a.key) else {
            continue;
        };
        let total = d(b.total, a.total);
        all_total += total;
        if a.device {
            dev_total += total;
        }
        let per: Vec<(u32, f64)> = a
            .per_cpu
            .iter()
            .filter_map(|(c, v)| b.per_cpu.get(c).map(|bv| (*c, d(*bv, *v))))
            .collect();
        for (c, v) in &per {
            *all_cpu.entry(*c).or_default() += v;
            if a.device {
                *dev_cpu.entry(*c).or_default() += v;
            }
        }
        if a.device && total == 0.0 {
            continue;
        }
        let mut name = metric_safe(&a.name);
        if used_names.contains(&name) {
            name = format!("{name}#{}", a.key);
        }
        used_names.push(name.clone());
        let base = format!("irq.{name}.per_s");
        irq_rows.push(neutral(base.clone(), total / window_s, "/s"));
        for (c, v) in per {
            irq_rows.push(neutral_on(&base, c, v / window_s, "/s"));
        }
    }
    if !after.interrupts.is_empty() {
        out.push(neutral(
            "irq.total.per_s".into(),
            all_total / window_s,
            "/s",
        ));
        out.extend(
            all_cpu
                .iter()
                .map(|(c, v)| neutral_on("irq.total.per_s", *c, v / window_s, "/s")),
        );
        out.push(neutral(
            "irq.device.per_s".into(),
            dev_total / window_s,
            "/s",
        ));
        out.extend(
            dev_cpu
                .iter()
                .map(|(c, v)| neutral_on("irq.device.per_s", *c, v / window_s, "/s")),
        );
        out.extend(irq_rows);
    }

    // /proc/softirqs
    let mut soft_total = 0.0;
    let mut soft_cpu: BTreeMap<u32, f64> = BTreeMap::new();
    let mut soft_rows = Vec::new();
    for (kind, a) in &after.softirqs {
        let Some((_, b)) = before.softirqs.iter().find(|(k, _)| k == kind) else {
            continue;
        };
        let per: Vec<(u32, f64)> = a
            .iter()
            .filter_map(|(c, v)| b.get(c).map(|bv| (*c, d(*bv, *v))))
            .collect();
        let total: f64 = per.iter().map(|v| v.1).sum();
        soft_total += total;
        let base = format!("softirq.{}.per_s", metric_safe(kind));
        soft_rows.push(neutral(base.clone(), total / window_s, "/s"));
        for (c, v) in per {
            *soft_cpu.entry(c).or_default() += v;
            soft_rows.push(neutral_on(&base, c, v / window_s, "/s"));
        }
    }
    if !after.softirqs.is_empty() {
        out.push(neutral(
            "softirq.total.per_s".into(),
            soft_total / window_s,
            "/s",
        ));
        out.extend(
            soft_cpu
                .iter()
                .map(|(c, v)| neutral_on("softirq.total.per_s", *c, v / window_s, "/s")),
        );
        out.extend(soft_rows);
    }

    // /proc/stat
    out.push(neutral(
        "ctxt.per_s".into(),
        d(before.ctxt, after.ctxt) / window_s,
        "/s",
    ));
    let busy = |b: &CpuTimes, a: &CpuTimes| {
        let total = d(b.total(), a.total());
        (total > 0.0).then(|| (total - d(b.idle_all(), a.idle_all())) / total * 100.0)
    };
    if let Some(v) = busy(&before.cpu_total, &after.cpu_total) {
        out.push(neutral("cpu.busy_pct".into(), v, "%"));
    }
    for (c, a) in &after.cpu_times {
        if let Some(v) = before.cpu_times.get(c).and_then(|b| busy(b, a)) {
            out.push(neutral_on("cpu.busy_pct", *c, v, "%"));
        }
    }
    // Without cpuidle counters (no driver), idle residency is the idle task's time in
    // /proc/stat: the same quantity at tick resolution.
    if cpus.is_empty() {
        if let Some(v) = busy(&before.cpu_total, &after.cpu_total) {
            out.push(neutral("idle.share_pct".into(), 100.0 - v, "%"));
        }
        for (c, a) in &after.cpu_times {
            if let Some(v) = before.cpu_times.get(c).and_then(|b| busy(b, a)) {
                out.push(neutral_on("idle.share_pct", *c, 100.0 - v, "%"));
            }
        }
    }

    // RAPL
    let mut energy_total = 0.0;
    let mut any_package = false;
    let mut zone_rows = Vec::new();
    for a in &after.rapl {
        let Some(b) = before.rapl.iter().find(|z| z.id == a.id) else {
            continue;
        };
        let uj = if a.energy_uj >= b.energy_uj {
            a.energy_uj - b.energy_uj
        } else {
            // The counter wrapped at max_energy_range_uj.
            (a.max_energy_range_uj.saturating_sub(b.energy_uj)).saturating_add(a.energy_uj)
        };
        let joules = uj as f64 / 1e6;
        let name = metric_safe(&a.name);
        zone_rows.push(Metric::new(
            format!("energy.{name}.J"),
            joules,
            "J",
            Direction::Lower,
        ));
        zone_rows.push(Metric::new(
            format!("power.{name}.W"),
            joules / window_s,
            "W",
            Direction::Lower,
        ));
        if a.top_level && a.name.starts_with("package") {
            any_package = true;
        }
    }
    for a in after.rapl.iter().filter(|z| z.top_level) {
        let counts = if any_package {
            a.name.starts_with("package")
        } else {
            true
        };
        if counts {
            if let Some(m) = zone_rows
                .iter()
                .find(|m| m.name == format!("energy.{}.J", metric_safe(&a.name)))
            {
                energy_total += m.value;
            }
        }
    }
    if !zone_rows.is_empty() {
        out.push(Metric::new(
            "energy.rapl.J",
            energy_total,
            "J",
            Direction::Lower,
        ));
        out.push(Metric::new(
            "power.rapl.W",
            energy_total / window_s,
            "W",
            Direction::Lower,
        ));
        out.extend(zone_rows);
    }
    out.extend(hwmon_metrics(before, after, window_s));
    best_energy(&mut out);
    out
}

/// hwmon: energy channels as deltas (`energy.hwmon.CHIP.LABEL.J`, their power over the window,
/// and the total `energy.hwmon.J`, see `hwmon::counts_in_total`); power channels as the mean
/// of the readings before and after (`power.hwmon.CHIP.LABEL.W`: two readings, not an
/// integral, so they give no energy). A counter that went backwards gives no metric.
fn hwmon_metrics(before: &Snapshot, after: &Snapshot, window_s: f64) -> Vec<Metric> {
    use crate::hwmon::{counts_in_total, ChannelKind};
    let mut out = Vec::new();
    let mut total = None;
    for a in &after.hwmon {
        let Some(b) = before.hwmon.iter().find(|b| b.id() == a.id()) else {
            continue;
        };
        let name = a.metric_name();
        match a.kind {
            ChannelKind::Energy => {
                let Some(uj) = a.value.checked_sub(b.value) else {
                    continue;
                };
                let joules = uj as f64 / 1e6;
                out.push(Metric::new(
                    format!("energy.hwmon.{name}.J"),
                    joules,
                    "J",
                    Direction::Lower,
                ));
                out.push(Metric::new(
                    format!("power.hwmon.{name}.W"),
                    joules / window_s,
                    "W",
                    Direction::Lower,
                ));
                if counts_in_total(a, &after.hwmon) {
                    *total.get_or_insert(0.0) += joules;
                }
            }
            ChannelKind::Power | ChannelKind::PowerAverage => out.push(Metric::new(
                format!("power.hwmon.{name}.W"),
                (a.value + b.value) as f64 / 2e6,
                "W",
                Direction::Lower,
            )),
        }
    }
    if let Some(j) = total {
        out.push(Metric::new("energy.hwmon.J", j, "J", Direction::Lower));
        out.push(Metric::new(
            "power.hwmon.W",
            j / window_s,
            "W",
            Direction::Lower,
        ));
    }
    out
}

/// Energy sources in order of trust: an external meter, hwmon energy channels, RAPL.
/// (The energy model applies to traces only: `pmlab analyze --energy-model`.)
pub const ENERGY_SOURCES: &[&str] = &["meter", "hwmon", "rapl"];

/// Name the best energy source present among `metrics`: set `energy.J` and `power.W` to its
/// `energy.SOURCE.J` / `power.SOURCE.W` and mark it with `energy.source.SOURCE` = 1 (replacing
/// what an earlier call set). Where RAPL and a meter both measured, `energy.rapl_per_meter`
/// is their ratio (a cross-check). Nothing is added without a source.
pub fn best_energy(metrics: &mut Vec<Metric>) {
    metrics.retain(|m| {
        m.cpu.is_some()
            || !(m.name == "energy.J"
                || m.name == "power.W"
                || m.name == "energy.rapl_per_meter"
                || m.name.starts_with("energy.source."))
    });
    let total = |metrics: &[Metric], name: &str| {
        metrics
            .iter()
            .find(|m| m.cpu.is_none() && m.name == name)
            .map(|m| m.value)
    };
    let Some(source) = ENERGY_SOURCES
        .iter()
        .find(|s| total(metrics, &format!("energy.{s}.J")).is_some())
    else {
        return;
    };
    let joules = total(metrics, &format!("energy.{source}.J")).unwrap_or(0.0);
    let watts = total(metrics, &format!("power.{source}.W")).unwrap_or(0.0);
    if let (Some(m), Some(r)) = (
        total(metrics, "energy.meter.J"),
        total(metrics, "energy.rapl.J"),
    ) {
        if m > 0.0 {
            metrics.push(Metric::new(
                "energy.rapl_per_meter",
                r / m,
                "",
                Direction::Neutral,
            ));
        }
    }
    metrics.push(Metric::new("energy.J", joules, "J", Direction::Lower));
    metrics.push(Metric::new("power.W", watts, "W", Direction::Lower));
    metrics.push(Metric::new(
        format!("energy.source.{source}"),
        1.0,
        "",
        Direction::Neutral,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Tree {
        dir: tempfile::TempDir,
    }

    impl Tree {
        fn new() -> Self {
            Tree {
                dir: tempfile::tempdir().unwrap(),
            }
        }
        fn write(&self, rel: &str, text: &str) {
            let p = self.dir.path().join(rel.trim_start_matches('/'));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        fn state(&self, cpu: u32, idx: u32, name: &str, usage: u64, time: u64) {
            let base = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{idx}");
            self.write(&format!("{base}/name"), &format!("{name}\n"));
            self.write(&format!("{base}/usage"), &format!("{usage}\n"));
            self.write(&format!("{base}/time"), &format!("{time}\n"));
            self.write(&format!("{base}/above"), "0\n");
            self.write(&format!("{base}/below"), &format!("{}\n", usage / 10));
        }
        fn procs(
            &self,
            loc: [u64; 2],
            cal: [u64; 2],
            virtio: u64,
            sched: [u64; 2],
            ctxt: u64,
            idle: [u64; 2],
        ) {
            self.write(
                "/proc/interrupts",
                &format!(
                    "           CPU0       CPU1       \n\
                     \x20 0:         36          0   IO-APIC   2-edge      timer\n\
                     \x20 7:          0          0   IO-APIC   7-fasteoi\n\
                     \x2036:          0   {virtio:8}  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
                     \x2011:          5          6     GICv3  27 Level     arch_timer\n\
                     NMI:          0          0   Non-maskable interrupts\n\
                     LOC: {:10} {:10}   Local timer interrupts\n\
                     CAL: {:10} {:10}   Function call interrupts\n\
                     ERR:          0\n",
                    loc[0], loc[1], cal[0], cal[1]
                ),
            );
            self.write(
                "/proc/softirqs",
                &format!(
                    "                    CPU0       CPU1       \n\
                     \x20         HI:          0          0\n\
                     \x20      SCHED: {:10} {:10}\n",
                    sched[0], sched[1]
                ),
            );
            self.write(
                "/proc/stat",
                &format!(
                    "cpu  100 0 100 {} 0 0 0 0 0 0\ncpu0 50 0 50 {} 0 0 0 0 0 0\ncpu1 50 0 50 {} 0 0 0 0 0 0\n\
                     intr 1 2 3\nctxt {ctxt}\nbtime 1\n",
                    idle[0] + idle[1],
                    idle[0],
                    idle[1]
                ),
            );
        }
        fn rapl(&self, id: &str, name: &str, uj: u64, max: u64) {
            let base = format!("/sys/class/powercap/{id}");
            self.write(&format!("{base}/name"), &format!("{name}\n"));
            self.write(&format!("{base}/energy_uj"), &format!("{uj}\n"));
            self.write(&format!("{base}/max_energy_range_uj"), &format!("{max}\n"));
        }
        fn take(&self, at_s: u64) -> Snapshot {
            let mut s = Snapshot::take_at(self.dir.path()).unwrap();
            s.at = Nanos(at_s * 1_000_000_000);
            s
        }
    }

    fn get(m: &[Metric], name: &str) -> f64 {
        m.iter()
            .find(|x| x.key().to_string() == name)
            .unwrap_or_else(|| panic!("no metric {name}"))
            .value
    }

    #[test]
    fn parses_interrupt_lines() {
        let t = Tree::new();
        t.procs([10, 20], [1, 2], 7, [0, 0], 0, [0, 0]);
        let s = t.take(0);
        let by_key = |k: &str| s.interrupts.iter().find(|l| l.key == k).unwrap();
        assert_eq!(by_key("0").name, "timer");
        assert_eq!(by_key("7").name, "7");
        assert_eq!(by_key("36").name, "virtio1-req.0");
        assert_eq!(by_key("36").per_cpu[&1], 7);
        assert_eq!(by_key("11").name, "arch_timer");
        assert_eq!(by_key("LOC").per_cpu[&1], 20);
        assert!(!by_key("CAL").device);
        assert!(by_key("ERR").per_cpu.is_empty());
    }

    #[test]
    fn deltas_per_cpu_and_total() {
        let t = Tree::new();
        t.state(0, 0, "POLL", 0, 0);
        t.state(0, 1, "haltpoll idle", 100, 1_000_000);
        t.state(1, 0, "POLL", 0, 0);
        t.state(1, 1, "haltpoll idle", 100, 1_000_000);
        t.procs([100, 100], [10, 10], 5, [1, 1], 1000, [100, 100]);
        let before = t.take(10);
        // 2 s later: cpu0 idle 1.5 s in halt + 0.4 s polling; cpu1 idle 1 s.
        t.state(0, 0, "POLL", 40, 400_000);
        t.state(0, 1, "haltpoll idle", 300, 2_500_000);
        t.state(1, 1, "haltpoll idle", 200, 2_000_000);
        t.procs([600, 300], [10, 2010], 25, [11, 1], 5000, [290, 150]);
        let after = t.take(12);
        let m = delta_metrics(&before, &after);
        assert_eq!(get(&m, "counters.window_s"), 2.0);
        assert!((get(&m, "idle.share_pct@cpu0") - 95.0).abs() < 1e-9);
        assert!((get(&m, "idle.share_pct@cpu1") - 50.0).abs() < 1e-9);
        assert!((get(&m, "idle.share_pct") - 72.5).abs() < 1e-9);
        assert_eq!(get(&m, "idle.POLL.time_ms@cpu0"), 400.0);
        assert_eq!(get(&m, "idle.POLL.time_ms"), 400.0);
        assert_eq!(get(&m, "idle.POLL.usage@cpu0"), 40.0);
        assert_eq!(get(&m, "idle.haltpoll_idle.time_ms@cpu1"), 1000.0);
        assert!((get(&m, "idle.POLL.share_pct@cpu0") - 20.0).abs() < 1e-9);
        assert_eq!(get(&m, "idle.exits_per_s@cpu0"), 120.0);
        assert_eq!(get(&m, "idle.exits_per_s"), 170.0);
        assert_eq!(get(&m, "idle.below@cpu0"), 24.0);
        assert_eq!(get(&m, "irq.CAL.per_s@cpu1"), 1000.0);
        assert_eq!(get(&m, "irq.CAL.per_s"), 1000.0);
        assert_eq!(get(&m, "irq.LOC.per_s@cpu0"), 250.0);
        assert_eq!(get(&m, "irq.virtio1-req.0.per_s@cpu1"), 10.0);
        assert_eq!(get(&m, "irq.device.per_s"), 10.0);
        assert_eq!(
            get(&m, "irq.total.per_s"),
            (500.0 + 200.0 + 2000.0 + 20.0) / 2.0
        );
        assert!(
            m.iter().all(|x| x.name != "irq.timer.per_s"),
            "zero-delta device IRQs are left out"
        );
        assert_eq!(get(&m, "softirq.SCHED.per_s@cpu0"), 5.0);
        assert_eq!(get(&m, "softirq.total.per_s"), 5.0);
        assert_eq!(get(&m, "ctxt.per_s"), 2000.0);
        // cpu0: 190 idle jiffies of 190 total → 0 % busy; cpu1: 50 idle of 50.
        assert_eq!(get(&m, "cpu.busy_pct@cpu0"), 0.0);
        assert!(
            m.iter().all(|x| !x.name.starts_with("energy")),
            "no RAPL, no energy metrics"
        );
    }

    #[test]
    fn rapl_wraps_and_sums_packages() {
        let t = Tree::new();
        t.procs([0, 0], [0, 0], 0, [0, 0], 0, [0, 0]);
        t.rapl("intel-rapl:0", "package-0", 999_000_000, 1_000_000_000);
        t.rapl("intel-rapl:0:0", "core", 10, 1_000_000_000);
        t.rapl("intel-rapl:1", "psys", 0, 1_000_000_000);
        let before = t.take(0);
        t.rapl("intel-rapl:0", "package-0", 4_000_000, 1_000_000_000);
        t.rapl("intel-rapl:0:0", "core", 3_000_010, 1_000_000_000);
        t.rapl("intel-rapl:1", "psys", 9_000_000, 1_000_000_000);
        let after = t.take(5);
        let m = delta_metrics(&before, &after);
        assert_eq!(get(&m, "energy.package-0.J"), 5.0);
        assert_eq!(get(&m, "energy.package-0/core.J"), 3.0);
        assert_eq!(get(&m, "power.package-0.W"), 1.0);
        assert_eq!(
            get(&m, "energy.J"),
            5.0,
            "psys overlaps the packages and is not added"
        );
        assert_eq!(
            m.iter().find(|x| x.name == "power.W").unwrap().direction,
            Direction::Lower
        );
        assert_eq!(get(&m, "energy.rapl.J"), 5.0);
        assert_eq!(get(&m, "energy.source.rapl"), 1.0);
    }

    #[test]
    fn hwmon_energy_beats_rapl_and_sockets_are_not_counted_twice() {
        let t = Tree::new();
        t.procs([0, 0], [0, 0], 0, [0, 0], 0, [0, 0]);
        t.rapl("intel-rapl:0", "package-0", 0, 1_000_000_000);
        let hw = |core: u64, socket: u64, power: u64| {
            t.write("/sys/class/hwmon/hwmon1/name", "amd_energy\n");
            t.write(
                "/sys/class/hwmon/hwmon1/energy1_input",
                &format!("{core}\n"),
            );
            t.write("/sys/class/hwmon/hwmon1/energy1_label", "Ecore000\n");
            t.write(
                "/sys/class/hwmon/hwmon1/energy9_input",
                &format!("{socket}\n"),
            );
            t.write("/sys/class/hwmon/hwmon1/energy9_label", "Esocket0\n");
            t.write("/sys/class/hwmon/hwmon2/name", "ina226\n");
            t.write(
                "/sys/class/hwmon/hwmon2/power1_input",
                &format!("{power}\n"),
            );
        };
        hw(1_000_000, 10_000_000, 3_000_000);
        let before = t.take(0);
        hw(3_000_000, 22_500_000, 5_000_000);
        t.rapl("intel-rapl:0", "package-0", 10_000_000, 1_000_000_000);
        let after = t.take(5);
        let m = delta_metrics(&before, &after);
        assert_eq!(get(&m, "energy.hwmon.amd_energy.Ecore000.J"), 2.0);
        assert_eq!(get(&m, "energy.hwmon.amd_energy.Esocket0.J"), 12.5);
        assert_eq!(get(&m, "energy.hwmon.J"), 12.5, "the socket only");
        assert_eq!(get(&m, "power.hwmon.ina226.power1.W"), 4.0);
        assert_eq!(get(&m, "energy.J"), 12.5, "hwmon before RAPL");
        assert_eq!(get(&m, "power.W"), 2.5);
        assert_eq!(get(&m, "energy.source.hwmon"), 1.0);
        assert!(m.iter().all(|x| x.name != "energy.source.rapl"));
        assert_eq!(get(&m, "energy.rapl.J"), 10.0);
    }

    #[test]
    fn best_energy_prefers_a_meter_and_cross_checks_rapl() {
        let mut m = vec![
            Metric::new("energy.rapl.J", 9.0, "J", Direction::Lower),
            Metric::new("power.rapl.W", 9.0, "W", Direction::Lower),
            Metric::new("energy.J", 9.0, "J", Direction::Lower),
            Metric::new("energy.source.rapl", 1.0, "", Direction::Neutral),
            Metric::new("energy.meter.J", 12.0, "J", Direction::Lower),
            Metric::new("power.meter.W", 12.0, "W", Direction::Lower),
        ];
        best_energy(&mut m);
        assert_eq!(get(&m, "energy.J"), 12.0);
        assert_eq!(get(&m, "power.W"), 12.0);
        assert_eq!(get(&m, "energy.rapl_per_meter"), 0.75);
        assert_eq!(get(&m, "energy.source.meter"), 1.0);
        assert_eq!(m.iter().filter(|x| x.name == "energy.J").count(), 1);
        assert!(m.iter().all(|x| x.name != "energy.source.rapl"));
        let mut none = vec![Metric::new("ctxt.per_s", 1.0, "/s", Direction::Neutral)];
        best_energy(&mut none);
        assert_eq!(none.len(), 1, "no source, no energy");
    }

    #[test]
    fn without_cpuidle_idle_share_comes_from_proc_stat() {
        let t = Tree::new();
        t.procs([0, 0], [0, 0], 0, [0, 0], 0, [0, 0]);
        let before = t.take(0);
        // cpu0 +100 idle jiffies (its busy fields stay), cpu1 +300: totals 100+100 busy
        t.procs([0, 0], [0, 0], 0, [0, 0], 0, [100, 300]);
        let after = t.take(4);
        let m = delta_metrics(&before, &after);
        assert_eq!(get(&m, "idle.share_pct@cpu0"), 100.0);
        assert_eq!(get(&m, "idle.share_pct@cpu1"), 100.0);
        assert!(m.iter().all(|x| !x.name.starts_with("idle.exits")));
    }

    #[test]
    fn missing_proc_file_names_its_path() {
        let t = Tree::new();
        let e = Snapshot::take_at(t.dir.path()).unwrap_err().to_string();
        assert!(e.contains("proc/stat"), "{e}");
        t.procs([0, 0], [0, 0], 0, [0, 0], 0, [0, 0]);
        t.write("/proc/softirqs", "CPU0 CPU1\nHI: x y\n");
        let e = Snapshot::take_at(t.dir.path()).unwrap_err().to_string();
        assert!(e.contains("softirqs") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn real_machine_snapshot_parses() {
        let s = Snapshot::take_at(Path::new("/")).unwrap();
        assert!(s.interrupts.iter().any(|l| !l.device));
        assert!(!s.cpu_times.is_empty());
    }
}
