//! Import of LISA's `plat_info.yml` energy model (`nrg-model`: CPU nodes with `cpus`,
//! `active_states` frequency → [capacity, power] and `idle_states` name → power, in order).
//! The file's aliases form cycles (node → parent → children → node), so aliases are turned
//! into plain strings before parsing and the CPU nodes are collected where they are defined.

use crate::energy::{Domain, Model, ModelError, Opp};
use serde_norway::Value;
use std::collections::BTreeMap;

fn untag(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => untag(&t.value),
        v => v,
    }
}

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match untag(v) {
        Value::Mapping(m) => m.get(key).map(untag),
        _ => None,
    }
}

/// Find `key` anywhere in the document.
fn find<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match untag(v) {
        Value::Mapping(m) => {
            if let Some(x) = m.get(key) {
                return Some(untag(x));
            }
            m.values().find_map(|x| find(x, key))
        }
        Value::Sequence(s) => s.iter().find_map(|x| find(x, key)),
        _ => None,
    }
}

/// An omap: a sequence of one-entry mappings, in order.
fn omap(v: &Value) -> Vec<(&Value, &Value)> {
    match untag(v) {
        Value::Sequence(s) => s
            .iter()
            .filter_map(|e| match untag(e) {
                Value::Mapping(m) => m.iter().next().map(|(k, v)| (untag(k), untag(v))),
                _ => None,
            })
            .collect(),
        Value::Mapping(m) => m.iter().map(|(k, v)| (untag(k), untag(v))).collect(),
        _ => Vec::new(),
    }
}

fn num(v: &Value) -> Option<f64> {
    match untag(v) {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

impl Model {
    /// Import the energy model of a LISA `plat_info.yml`.
    pub fn from_lisa(text: &str, path: &str) -> Result<Model, ModelError> {
        let err = |msg: String| ModelError::Parse {
            path: path.into(),
            msg,
        };
        let doc: Value = serde_norway::from_str(&unalias(text)).map_err(|e| err(e.to_string()))?;
        let nrg = find(&doc, "nrg-model")
            .ok_or_else(|| err("no nrg-model (energy model) in this plat_info".into()))?;
        let mut nodes = Vec::new();
        collect_cpu_nodes(
            get(nrg, "cpu_nodes").ok_or_else(|| err("nrg-model has no cpu_nodes".into()))?,
            &mut nodes,
        );
        if nodes.is_empty() {
            return Err(err("nrg-model: no CPU nodes with active states".into()));
        }
        let mut domains = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (k, n) in nodes.into_iter().enumerate() {
            let name = get(n, "name")
                .and_then(|v| v.as_str())
                .map_or(format!("node{k}"), str::to_string);
            let cpus: Vec<u32> = match (get(n, "cpu").and_then(num), get(n, "cpus")) {
                (Some(c), _) => vec![c as u32],
                (None, Some(Value::Sequence(s))) => {
                    s.iter().filter_map(|c| num(c).map(|c| c as u32)).collect()
                }
                _ => Vec::new(),
            };
            if cpus.is_empty() {
                return Err(err(format!("cpu node {name}: no cpus")));
            }
            if !seen.insert(cpus.clone()) {
                continue;
            }
            let mut opp = Vec::new();
            for (f, st) in omap(get(n, "active_states").unwrap_or(&Value::Null)) {
                let khz = num(f).ok_or_else(|| {
                    err(format!("{name}: active state key {f:?} is not a frequency"))
                })?;
                let mw = match untag(st) {
                    Value::Sequence(s) if s.len() >= 2 => num(&s[1]),
                    v => get(v, "power").and_then(num),
                }
                .ok_or_else(|| err(format!("{name}: active state {khz}: no power")))?;
                opp.push(Opp {
                    khz: khz as u64,
                    mw,
                });
            }
            let mut idle_mw = BTreeMap::new();
            for (i, (s, p)) in omap(get(n, "idle_states").unwrap_or(&Value::Null))
                .into_iter()
                .enumerate()
            {
                let p = num(p).ok_or_else(|| err(format!("{name}: idle state {s:?}: no power")))?;
                if let Some(s) = s.as_str() {
                    idle_mw.insert(s.to_string(), p);
                }
                idle_mw.insert(i.to_string(), p);
            }
            domains.push(Domain {
                name,
                cpus: pmlab_kernel::cpulist::format_cpu_list(&cpus),
                idle_mw,
                opp,
                wakeup_uj: 0.0,
            });
        }
        let m = Model { domain: domains };
        m.validate()?;
        Ok(m)
    }
}

/// Replace YAML aliases (`*id001`) by strings, so that cyclic documents parse as trees.
fn unalias(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let prev_ok = i == 0 || matches!(b[i - 1], b' ' | b'\n' | b'[' | b',');
        if b[i] == b'*'
            && prev_ok
            && i + 1 < b.len()
            && (b[i + 1].is_ascii_alphanumeric() || b[i + 1] == b'_')
        {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b'-') {
                j += 1;
            }
            out.push_str("\"alias:");
            out.push_str(&text[i + 1..j]);
            out.push('"');
            i = j;
        } else {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Every mapping under `v` that is a CPU node (has a `cpu` number and `active_states`).
fn collect_cpu_nodes<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match untag(v) {
        Value::Mapping(m) => {
            let is_node = get(v, "cpu").and_then(num).is_some()
                && get(v, "active_states").is_some_and(|a| !matches!(a, Value::Null));
            if is_node {
                out.push(v);
            }
            for (_, x) in m {
                collect_cpu_nodes(x, out);
            }
        }
        Value::Sequence(s) => s.iter().for_each(|x| collect_cpu_nodes(x, out)),
        _ => {}
    }
}
