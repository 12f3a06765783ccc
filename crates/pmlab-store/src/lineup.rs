//! One experiment lined up across kernels or hosts: the store's experiments of the same
//! name, kind, configurations and workloads, grouped by the machine identity they ran on
//! (kernel release and build, or host), each group's runs pooled, for `Report::lined_up`.

use crate::store::{Store, StoreError, StoredExperiment};

/// What the runs are lined up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineUpBy {
    /// Kernel release and build (`uname -r`, `uname -v`): a patch's before and after.
    Kernel,
    /// Host name.
    Host,
    /// Host and kernel: one group per machine and kernel of a fleet.
    Machine,
}

impl LineUpBy {
    /// The grouping in words, for messages (`kernel`, `host`, `host and kernel`).
    pub fn as_str(self) -> &'static str {
        match self {
            LineUpBy::Kernel => "kernel",
            LineUpBy::Host => "host",
            LineUpBy::Machine => "host and kernel",
        }
    }
}

/// Why experiments cannot be lined up.
#[derive(Debug, thiserror::Error)]
pub enum LineUpError {
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Every run of the experiment (and of the others given) falls in one group.
    #[error("experiment {id} ({name:?}): every run of it{others} is on one {by} ({key}); nothing to line up (run it on another {by} first, or import that {by}'s results)", by = .by.as_str())]
    OneGroup {
        /// The experiment's id.
        id: i64,
        /// The experiment's name.
        name: String,
        /// `" and of experiments ..."` when others were given, else empty.
        others: String,
        /// The grouping asked for.
        by: LineUpBy,
        /// The one group's key (the kernel, host, or both).
        key: String,
    },
}

/// The runs of one kernel or host.
#[derive(Debug, Clone)]
pub struct Group {
    /// The kernel release (with its build when two groups share a release) or host name.
    pub label: String,
    /// The group's experiments pooled: the first one's description, every one's runs.
    pub pooled: StoredExperiment,
    /// The pooled experiments' ids.
    pub ids: Vec<i64>,
    /// What the group shares (kernel release and build, or host), in full.
    pub key: String,
}

/// Whether `b` is the same experiment as `a` (another run of it, elsewhere).
fn same_experiment(a: &StoredExperiment, b: &StoredExperiment) -> bool {
    let labels = |e: &StoredExperiment| -> (Vec<String>, Vec<String>) {
        (
            e.configurations.iter().map(|c| c.label.clone()).collect(),
            e.workloads.iter().map(|w| w.label.clone()).collect(),
        )
    };
    a.info.kind == b.info.kind && a.info.name == b.info.name && labels(a) == labels(b)
}

fn key(e: &StoredExperiment, by: LineUpBy) -> (String, String) {
    let s = e.system.clone().unwrap_or_default();
    match by {
        LineUpBy::Kernel => (s.kernel_release, s.kernel_build),
        LineUpBy::Host => (s.hostname, String::new()),
        LineUpBy::Machine => (
            s.hostname,
            format!("{} {}", s.kernel_release, s.kernel_build),
        ),
    }
}

/// The experiments of the store that are `id` run again, grouped by `by`, oldest group
/// first; at least two groups.
pub fn groups(store: &Store, id: i64, by: LineUpBy) -> Result<Vec<Group>, LineUpError> {
    let groups = all_groups(store, id, by)?;
    if groups.len() >= 2 {
        return Ok(groups);
    }
    let name = store.load(id)?.info.name;
    let (key, ids) = groups
        .first()
        .map(|g| (g.key.clone(), g.ids.clone()))
        .unwrap_or_default();
    let others: Vec<String> = ids
        .iter()
        .filter(|&&x| x != id)
        .map(|x| x.to_string())
        .collect();
    Err(LineUpError::OneGroup {
        id,
        name,
        others: if others.is_empty() {
            String::new()
        } else {
            format!(" and of experiments {}", others.join(", "))
        },
        by,
        key,
    })
}

/// [`groups`], however many there are (one, for an experiment run on one machine only).
pub fn all_groups(store: &Store, id: i64, by: LineUpBy) -> Result<Vec<Group>, LineUpError> {
    let base = store.load(id)?;
    let mut all = Vec::new();
    for info in store.list()? {
        if info.kind != base.info.kind || info.name != base.info.name || info.runs == 0 {
            continue;
        }
        let e = if info.id == id {
            base.clone()
        } else {
            store.load(info.id)?
        };
        if same_experiment(&base, &e) {
            all.push(e);
        }
    }
    all.sort_by_key(|e| e.info.created_ns);
    let mut keyed: Vec<((String, String), Group)> = Vec::new();
    for e in all {
        let k = key(&e, by);
        match keyed.iter_mut().find(|(x, _)| *x == k) {
            Some((_, g)) => {
                g.ids.push(e.info.id);
                g.pooled.info.runs += e.info.runs;
                g.pooled.info.failed_runs += e.info.failed_runs;
                g.pooled.runs.extend(e.runs);
            }
            None => keyed.push((
                k.clone(),
                Group {
                    label: String::new(),
                    key: format!("{} {}", k.0, k.1).trim().to_string(),

                    ids: vec![e.info.id],
                    pooled: e,
                },
            )),
        }
    }
    let shared = |release: &str| keyed.iter().filter(|((r, _), _)| r == release).count() > 1;
    let labels: Vec<String> = keyed
        .iter()
        .map(|((a, b), _)| {
            let a = if a.is_empty() { "unknown" } else { a.as_str() };
            match by {
                LineUpBy::Kernel if shared(a) => format!("{a} ({b})"),
                LineUpBy::Machine => {
                    let release = b.split_whitespace().next().unwrap_or("");
                    format!("{a} · {release}")
                }
                _ => a.to_string(),
            }
        })
        .collect();
    Ok(keyed
        .into_iter()
        .zip(labels)
        .map(|((_, mut g), label)| {
            g.label = label;
            g
        })
        .collect())
}
