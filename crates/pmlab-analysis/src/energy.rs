//! Energy from a model applied to residencies: power per idle state and per frequency (OPP),
//! per CPU or per cluster of CPUs, plus energy per wakeup. Models come from TOML (see
//! [`Model::from_toml`]) or LISA's `plat_info.yml` (`nrg-model` CPU nodes). A model whose
//! power does not rise with frequency is refused, naming the entry.

use crate::freq;
use crate::idle::{Period, Periods, IDLE_TASK};
use crate::table::Table;
use crate::{Missing, Options, Tabular};
use pmlab_trace::Trace;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Why an energy model was refused.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The file cannot be read, or is not a model in TOML (or LISA's `plat_info.yml`).
    #[error("{path}: {msg}")]
    Parse {
        /// The file.
        path: String,
        /// The reader's or parser's message.
        msg: String,
    },
    /// The model parses but is not usable (power not rising with frequency, no domain...): the message names the entry.
    #[error("energy model: {0}")]
    Invalid(String),
}

/// One operating point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Opp {
    /// Frequency, kHz.
    pub khz: u64,
    /// Active power at that frequency, mW.
    pub mw: f64,
}

/// A power domain: the CPUs it describes (each with this power), its OPPs and idle states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Domain {
    /// Domain name for tables (`little`, `big`); may be empty.
    #[serde(default)]
    pub name: String,
    /// CPU list ("0-3,6").
    pub cpus: String,
    /// Power per idle state, keyed by cpu_idle state index ("0") or state name ("WFI",
    /// "idle-task" for CPUs whose idle comes from the idle task).
    #[serde(default)]
    pub idle_mw: BTreeMap<String, f64>,
    /// Operating points; active power is looked up by the CPU's frequency.
    #[serde(default)]
    pub opp: Vec<Opp>,
    /// Energy per idle exit, µJ.
    #[serde(default)]
    pub wakeup_uj: f64,
}

/// An energy model.
///
/// TOML:
/// ```toml
/// [[domain]]
/// name = "little"
/// cpus = "0,3-5"
/// wakeup_uj = 2.0
/// idle_mw = { "0" = 5.0, "1" = 1.0, "idle-task" = 5.0 }
/// opp = [ { khz = 450000, mw = 42.0 }, { khz = 850000, mw = 119.0 } ]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The power domains; a CPU belongs to the first domain that lists it.
    pub domain: Vec<Domain>,
}

impl Model {
    /// Parse and validate a TOML model; `path` names it in errors.
    pub fn from_toml(text: &str, path: &str) -> Result<Model, ModelError> {
        let m: Model = toml::from_str(text).map_err(|e| ModelError::Parse {
            path: path.into(),
            msg: e.to_string(),
        })?;
        m.validate()?;
        Ok(m)
    }

    /// Load a TOML model, or a LISA `plat_info.yml` (by extension .yml/.yaml).
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::Parse {
            path: p.clone(),
            msg: e.to_string(),
        })?;
        match path.extension().and_then(|e| e.to_str()) {
            Some("yml" | "yaml") => Model::from_lisa(&text, &p),
            _ => Model::from_toml(&text, &p),
        }
    }

    /// Every domain has CPUs, OPP power rising strictly with frequency, no negative power.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.domain.is_empty() {
            return Err(ModelError::Invalid("no [[domain]] entries".into()));
        }
        let mut owner: BTreeMap<u32, String> = BTreeMap::new();
        for (k, d) in self.domain.iter().enumerate() {
            let name = if d.name.is_empty() {
                format!("domain #{}", k + 1)
            } else {
                format!("domain {:?}", d.name)
            };
            let cpus = pmlab_kernel::cpulist::parse_cpu_list(&d.cpus)
                .map_err(|e| ModelError::Invalid(format!("{name}: cpus {:?}: {e}", d.cpus)))?;
            for c in cpus {
                if let Some(o) = owner.insert(c, name.clone()) {
                    return Err(ModelError::Invalid(format!(
                        "CPU {c} is in both {o} and {name}"
                    )));
                }
            }
            let mut opp = d.opp.clone();
            opp.sort_by_key(|o| o.khz);
            for w in opp.windows(2) {
                if w[0].khz == w[1].khz {
                    return Err(ModelError::Invalid(format!(
                        "{name}: OPP {} kHz is listed twice",
                        w[1].khz
                    )));
                }
                if w[1].mw <= w[0].mw {
                    return Err(ModelError::Invalid(format!(
                        "{name}: power does not rise with frequency: OPP {} kHz has {} mW, not more than {} mW at {} kHz",
                        w[1].khz, w[1].mw, w[0].mw, w[0].khz
                    )));
                }
            }
            for o in &opp {
                if !(o.mw >= 0.0 && o.mw.is_finite()) || o.khz == 0 {
                    return Err(ModelError::Invalid(format!(
                        "{name}: OPP {} kHz: bad power {} mW",
                        o.khz, o.mw
                    )));
                }
            }
            for (s, p) in &d.idle_mw {
                if !(*p >= 0.0 && p.is_finite()) {
                    return Err(ModelError::Invalid(format!(
                        "{name}: idle state {s:?}: bad power {p} mW"
                    )));
                }
            }
            if d.wakeup_uj < 0.0 || !d.wakeup_uj.is_finite() {
                return Err(ModelError::Invalid(format!(
                    "{name}: bad wakeup_uj {}",
                    d.wakeup_uj
                )));
            }
        }
        Ok(())
    }

    fn domain_of(&self, cpu: u32) -> Option<&Domain> {
        self.domain.iter().find(|d| {
            pmlab_kernel::cpulist::parse_cpu_list(&d.cpus).is_ok_and(|v| v.contains(&cpu))
        })
    }
}

/// Energy of one CPU, mJ.
#[derive(Debug, Clone, Serialize)]
pub struct CpuEnergy {
    /// The CPU (kernel numbering).
    pub cpu: u32,
    /// Its domain's name.
    pub domain: String,
    /// Time not idle, ms.
    pub active_ms: f64,
    /// Time idle, ms.
    pub idle_ms: f64,
    /// Idle exits (idle periods that ended within the trace).
    pub wakeups: u64,
    /// Energy while active, mJ.
    pub active_mj: f64,
    /// Energy while idle, mJ.
    pub idle_mj: f64,
    /// Energy of its idle exits, mJ.
    pub wakeup_mj: f64,
    /// Active + idle + wakeup energy, mJ.
    pub total_mj: f64,
    /// Average power over the trace's span, mW.
    pub avg_mw: f64,
}

/// The energy analysis's result.
#[derive(Debug, Clone, Serialize)]
pub struct EnergyReport {
    /// The span the energy covers, ns.
    pub span_ns: u64,
    /// Per CPU, by CPU.
    pub cpus: Vec<CpuEnergy>,
    /// Sum over CPUs, mJ.
    pub total_mj: f64,
    /// Average power of all CPUs over the span, mW.
    pub avg_mw: f64,
    /// Caveats (CPUs without frequency events or without a domain...).
    pub notes: Vec<String>,
}

/// Power of the OPP at `khz`: the exact OPP, else the lowest OPP at or above it, else the highest.
fn opp_mw(d: &Domain, khz: u64) -> f64 {
    let mut opp = d.opp.clone();
    opp.sort_by_key(|o| o.khz);
    opp.iter()
        .find(|o| o.khz >= khz)
        .or(opp.last())
        .map_or(0.0, |o| o.mw)
}

/// Non-idle time of `periods` (sorted) inside [a, b).
fn busy_in(periods: &[Period], a: u64, b: u64) -> u64 {
    let idle: u64 = periods
        .iter()
        .filter(|p| p.end > a && p.start < b)
        .map(|p| p.end.min(b) - p.start.max(a))
        .sum();
    (b - a).saturating_sub(idle)
}

/// Apply `model` to the trace's idle periods and frequency residency.
pub fn analyze(
    trace: &Trace,
    opts: &Options,
    p: &Periods,
    model: &Model,
) -> Result<EnergyReport, Missing> {
    let tl = freq::timeline(trace, opts).ok();
    let mut notes = Vec::new();
    let mut cpus = Vec::new();
    let mut no_freq = Vec::new();
    let mut no_domain = Vec::new();
    let mut missing_state: BTreeMap<String, ()> = BTreeMap::new();
    for (&cpu, ps) in &p.by_cpu {
        let Some(d) = model.domain_of(cpu) else {
            no_domain.push(cpu);
            continue;
        };
        // idle
        let mut idle_mj = 0.0;
        let mut idle_ns = 0u64;
        for q in ps {
            let name = opts.state_name(q.state);
            let key_idx = q.state.to_string();
            let mw = d
                .idle_mw
                .get(&key_idx)
                .or_else(|| d.idle_mw.get(&name))
                .copied()
                .or_else(|| {
                    if q.state == IDLE_TASK {
                        d.idle_mw.get("idle-task").copied()
                    } else {
                        None
                    }
                });
            let mw = match mw {
                Some(v) => v,
                None => {
                    missing_state.insert(format!("{name} (CPU {cpu})"), ());
                    d.idle_mw
                        .values()
                        .copied()
                        .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))))
                        .unwrap_or(0.0)
                }
            };
            idle_mj += mw * q.len() as f64 / 1e9;
            idle_ns += q.len();
        }
        // active, split by frequency
        let mut active_mj = 0.0;
        let active_ns = p.span().saturating_sub(idle_ns);
        match tl.as_ref().and_then(|t| t.get(&cpu)) {
            Some(ch) if !ch.is_empty() => {
                // before the first change: the first known frequency
                let mut segs = vec![(p.t0, ch[0].1)];
                segs.extend(ch.iter().copied());
                for (k, &(a, khz)) in segs.iter().enumerate() {
                    let b = segs.get(k + 1).map_or(p.t1, |n| n.0);
                    if b > a {
                        active_mj += opp_mw(d, khz) * busy_in(ps, a, b) as f64 / 1e9;
                    }
                }
            }
            _ => {
                no_freq.push(cpu);
                active_mj = d.opp.iter().map(|o| o.mw).fold(0.0, f64::max) * active_ns as f64 / 1e9;
            }
        }
        let wakeups = ps.iter().filter(|q| !q.open_end).count() as u64;
        let wakeup_mj = wakeups as f64 * d.wakeup_uj / 1e3;
        let total = active_mj + idle_mj + wakeup_mj;
        cpus.push(CpuEnergy {
            cpu,
            domain: d.name.clone(),
            active_ms: active_ns as f64 / 1e6,
            idle_ms: idle_ns as f64 / 1e6,
            wakeups,
            active_mj,
            idle_mj,
            wakeup_mj,
            total_mj: total,
            avg_mw: total / (p.span().max(1) as f64 / 1e9),
        });
    }
    let fmt = pmlab_kernel::cpulist::format_cpu_list;
    if !no_freq.is_empty() {
        notes.push(format!(
            "CPU {}: no cpu_frequency events: active power at the highest OPP",
            fmt(&no_freq)
        ));
    }
    if !no_domain.is_empty() {
        notes.push(format!(
            "CPU {}: not in the energy model: left out",
            fmt(&no_domain)
        ));
    }
    if !missing_state.is_empty() {
        let v: Vec<String> = missing_state.into_keys().collect();
        notes.push(format!(
            "idle states without a power in the model (the domain's highest idle power used): {}",
            v.join(", ")
        ));
    }
    if tl.is_some() {
        notes.push(
            "time before a CPU's first cpu_frequency event is charged at its first known frequency"
                .into(),
        );
    }
    let total: f64 = cpus.iter().map(|c| c.total_mj).sum();
    Ok(EnergyReport {
        span_ns: p.span(),
        total_mj: total,
        avg_mw: total / (p.span().max(1) as f64 / 1e9),
        cpus,
        notes,
    })
}

impl Tabular for EnergyReport {
    fn tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            "energy",
            "Energy from the model (mJ)",
            &[
                "cpu",
                "domain",
                "active_ms",
                "idle_ms",
                "wakeups",
                "active_mj",
                "idle_mj",
                "wakeup_mj",
                "total_mj",
                "avg_mw",
            ],
            1,
        );
        for c in &self.cpus {
            t.row(vec![
                c.cpu.into(),
                c.domain.clone().into(),
                c.active_ms.into(),
                c.idle_ms.into(),
                c.wakeups.into(),
                c.active_mj.into(),
                c.idle_mj.into(),
                c.wakeup_mj.into(),
                c.total_mj.into(),
                c.avg_mw.into(),
            ]);
        }
        let s = |f: fn(&CpuEnergy) -> f64| self.cpus.iter().map(f).sum::<f64>();
        t.row(vec![
            "all".into(),
            "".into(),
            s(|c| c.active_ms).into(),
            s(|c| c.idle_ms).into(),
            self.cpus.iter().map(|c| c.wakeups).sum::<u64>().into(),
            s(|c| c.active_mj).into(),
            s(|c| c.idle_mj).into(),
            s(|c| c.wakeup_mj).into(),
            self.total_mj.into(),
            self.avg_mw.into(),
        ]);
        vec![t]
    }
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}
