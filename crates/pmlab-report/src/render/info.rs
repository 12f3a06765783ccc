//! `pmlab info` for people and for programs: one document (one section per area, idle states
//! as a table, and the "what pmlab can do here" list) rendered in every text format, and the
//! JSON form.

use super::{Format, RenderError};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use pmlab_kernel::cpulist::format_cpu_list;
use pmlab_kernel::sysinfo::cpufreq::Policy;
use pmlab_kernel::sysinfo::cpuidle::IdleState;
use pmlab_kernel::sysinfo::{Capabilities, Capability, Item, SystemInfo};
use std::fmt::{Display, Write};

fn show<T: Display>(i: &Item<T>) -> String {
    match i {
        Item::Value(v) => v.to_string(),
        Item::Unavailable(u) => u.to_string(),
    }
}

fn show_list(i: &Item<Vec<u32>>) -> String {
    match i {
        Item::Value(v) if v.is_empty() => "-".into(),
        Item::Value(v) => format_cpu_list(v),
        Item::Unavailable(u) => u.to_string(),
    }
}

fn opt<T: Display>(o: &Option<T>) -> String {
    o.as_ref().map_or("-".into(), |v| v.to_string())
}

fn head(d: &mut Doc, title: &str) {
    d.0.push(Block::Head(title.to_string()));
}

fn kv(d: &mut Doc, k: &str, v: impl Display) {
    d.0.push(Block::Kv(k.to_string(), v.to_string()));
}

/// Wrap words into lines of at most ~76 columns, indented.
fn wrap(words: &[String]) -> String {
    let mut lines = vec![String::new()];
    for w in words {
        let cur = lines.last_mut().unwrap();
        if !cur.is_empty() && cur.len() + w.len() + 1 > 74 {
            lines.push(w.clone());
        } else {
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(w);
        }
    }
    lines
        .iter()
        .map(|l| format!("    {l}\n"))
        .collect::<String>()
}

fn seconds(us: Option<u64>) -> String {
    us.map_or("-".into(), |t| format!("{:.3}", t as f64 / 1e6))
}

const STATE_HEADER: [&str; 13] = [
    "cpu",
    "state",
    "name",
    "desc",
    "latency µs",
    "residency µs",
    "usage",
    "time s",
    "above",
    "below",
    "rejected",
    "disabled",
    "default",
];

/// One row per state index, counters summed over CPUs; `disabled` is true when any CPU
/// disables it.
fn summed_states(ci: &pmlab_kernel::sysinfo::cpuidle::Cpuidle) -> Vec<IdleState> {
    let mut out: Vec<IdleState> = Vec::new();
    let add = |a: &mut Option<u64>, b: Option<u64>| {
        *a = match (*a, b) {
            (Some(x), Some(y)) => Some(x + y),
            (x, y) => x.or(y),
        }
    };
    for cpu in &ci.cpus {
        for s in &cpu.states {
            match out.iter_mut().find(|o| o.index == s.index) {
                None => out.push(s.clone()),
                Some(o) => {
                    add(&mut o.usage, s.usage);
                    add(&mut o.time_us, s.time_us);
                    add(&mut o.above, s.above);
                    add(&mut o.below, s.below);
                    add(&mut o.rejected, s.rejected);
                    if s.disabled == Item::Value(true) {
                        o.disabled = Item::Value(true);
                    }
                }
            }
        }
    }
    out
}

fn state_row(t: &mut Tab, cpu: &str, s: &IdleState) {
    let n = |v: Option<u64>| v.map_or("-".into(), |x| x.to_string());
    let disabled = match &s.disabled {
        Item::Value(true) => "yes".to_string(),
        Item::Value(false) => "no".to_string(),
        Item::Unavailable(u) => u.to_string(),
    };
    t.add_row(vec![
        cpu.to_string(),
        format!("state{}", s.index),
        s.name.clone(),
        s.desc.clone(),
        n(s.latency_us),
        n(s.residency_us),
        n(s.usage),
        seconds(s.time_us),
        n(s.above),
        n(s.below),
        n(s.rejected),
        disabled,
        opt(&s.default_status),
    ]);
}

/// Idle states: a row per CPU and state, counters right-aligned.
fn states_table() -> Tab {
    Tab {
        right: 4..11,
        key: 2,
        ..table(&STATE_HEADER)
    }
}

fn table(header: &[&str]) -> Tab {
    Tab {
        header: header.iter().map(|h| h.to_string()).collect(),
        rows: Vec::new(),
        right: 0..0,
        key: 1,
    }
}

/// The info document, format-neutral: sections of items, tables and lists.
#[derive(Default)]
struct Doc(Vec<Block>);

enum Block {
    /// A section's title.
    Head(String),
    /// An item and its value.
    Kv(String, String),
    /// A remark under the section.
    Line(String),
    /// A list of words (features, states), after an optional line of its own.
    Words {
        item: &'static str,
        label: Option<String>,
        words: Vec<String>,
    },
    Table(Tab),
    /// "What pmlab can do here".
    Caps(Vec<Capability>),
}

/// A table: its first `key` columns name a row; the columns in `right` are numbers.
struct Tab {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    right: std::ops::Range<usize>,
    key: usize,
}

impl Tab {
    fn add_row(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The terminal form (comfy-table), indented by two spaces.
    fn text(&self) -> String {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED)
            .set_header(self.header.clone());
        for r in &self.rows {
            t.add_row(r.iter().enumerate().map(|(i, c)| {
                let cell = Cell::new(c);
                if self.right.contains(&i) {
                    cell.set_alignment(CellAlignment::Right)
                } else {
                    cell
                }
            }));
        }
        t.to_string().lines().map(|l| format!("  {l}\n")).collect()
    }

    /// The mail form: plain fixed-width columns, numbers right-aligned, indented by two spaces.
    fn plain(&self) -> String {
        let all = || std::iter::once(&self.header).chain(&self.rows);
        let w: Vec<usize> = (0..self.header.len())
            .map(|i| all().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for r in all() {
            let cells: Vec<String> = r
                .iter()
                .zip(&w)
                .enumerate()
                .map(|(i, (c, w))| match self.right.contains(&i) {
                    true => format!("{c:>w$}"),
                    false => format!("{c:<w$}"),
                })
                .collect();
            let _ = writeln!(out, "  {}", cells.join(" ").trim_end());
        }
        out
    }

    /// The markdown form.
    fn markdown(&self) -> String {
        let mut out = format!("| {} |\n", self.header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(self.header.len()));
        for r in &self.rows {
            let cells: Vec<String> = r.iter().map(|c| md_cell(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out
    }

    /// One (item, value) per cell but the key ones: `cpu 0, state state1: usage`.
    fn items(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for r in &self.rows {
            let key: Vec<String> = (0..self.key)
                .map(|i| format!("{} {}", self.header[i], r[i]))
                .collect();
            for (h, v) in self.header.iter().zip(r).skip(self.key) {
                out.push((format!("{}: {h}", key.join(", ")), v.clone()));
            }
        }
        out
    }
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn caps_tab(caps: &[Capability]) -> Tab {
    let mut t = table(&["area", "usable", "summary", "reason"]);
    for c in caps {
        let ok = if c.ok { "yes" } else { "no" };
        t.add_row(vec![
            c.area.into(),
            ok.into(),
            c.summary.clone(),
            c.reason.clone(),
        ]);
    }
    t
}

impl Doc {
    /// The terminal form (`mail`: tables in plain columns, no box drawing).
    fn text(&self, mail: bool) -> String {
        let mut o = String::new();
        for b in &self.0 {
            match b {
                Block::Head(t) if o.is_empty() => {
                    let _ = writeln!(o, "{t}");
                }
                Block::Head(t) => {
                    let _ = writeln!(o, "\n{t}");
                }
                Block::Kv(k, v) => {
                    let _ = writeln!(o, "  {k:<28} {v}");
                }
                Block::Line(l) => {
                    let _ = writeln!(o, "  {l}");
                }
                Block::Words { label, words, .. } => {
                    if let Some(l) = label {
                        let _ = writeln!(o, "  {l}");
                    }
                    o.push_str(&wrap(words));
                }
                Block::Table(t) if mail => o.push_str(&t.plain()),
                Block::Table(t) => o.push_str(&t.text()),
                Block::Caps(caps) => {
                    for i in caps {
                        let mark = if i.ok { "+" } else { "-" };
                        let _ = writeln!(o, "  {mark} {:<15} {}", i.area, i.summary);
                        let _ = writeln!(o, "  {:<17} {}", "", i.reason);
                    }
                }
            }
        }
        o
    }

    /// Markdown: a heading per section, its items as a two-column table, its tables.
    fn markdown(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut in_kv = false;
        for b in &self.0 {
            let kv = matches!(b, Block::Kv(..));
            let part = match b {
                Block::Head(t) => format!("### {t}\n"),
                Block::Kv(k, v) => {
                    let row = format!("| {} | {} |\n", md_cell(k), md_cell(v));
                    if in_kv {
                        parts.last_mut().expect("a kv table").push_str(&row);
                        continue;
                    }
                    format!("| item | value |\n|---|---|\n{row}")
                }
                Block::Line(l) => format!("{l}\n"),
                Block::Words { item, words, .. } => format!("{item}: {}\n", words.join(" ")),
                Block::Table(t) => t.markdown(),
                Block::Caps(caps) => caps_tab(caps).markdown(),
            };
            in_kv = kv;
            parts.push(part);
        }
        parts.join("\n")
    }

    /// CSV through the `csv` crate: one `section,item,value` record per item and table cell.
    fn csv(&self) -> Result<String, RenderError> {
        let err = |e: &dyn std::error::Error| RenderError {
            format: "csv",
            message: e.to_string(),
        };
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(["section", "item", "value"])
            .map_err(|e| err(&e))?;
        let mut section = String::new();
        for b in &self.0 {
            let items = match b {
                Block::Head(t) => {
                    section = t.clone();
                    continue;
                }
                Block::Kv(k, v) => vec![(k.clone(), v.clone())],
                Block::Line(l) => vec![("note".into(), l.clone())],
                Block::Words { item, words, .. } => vec![(item.to_string(), words.join(" "))],
                Block::Table(t) => t.items(),
                Block::Caps(caps) => caps_tab(caps).items(),
            };
            for (k, v) in items {
                w.write_record([section.as_str(), &k, &v])
                    .map_err(|e| err(&e))?;
            }
        }
        let bytes = w.into_inner().map_err(|e| err(e.error()))?;
        String::from_utf8(bytes).map_err(|e| err(&e))
    }
}

/// `pmlab info` in `format` (every format but HTML); `verbose` lists every hotplug state and
/// sched feature, and the idle states of every CPU (JSON always holds everything).
pub fn render(
    si: &SystemInfo,
    caps: &Capabilities,
    verbose: bool,
    format: Format,
) -> Result<String, RenderError> {
    let d = || doc(si, caps, verbose);
    match format {
        Format::Table => Ok(d().text(false)),
        Format::Mail => Ok(d().text(true)),
        Format::Markdown => Ok(d().markdown()),
        Format::Csv => d().csv(),
        Format::Json => json(si, caps).map(|j| j + "\n"),
        Format::Html => Err(RenderError {
            format: "html",
            message: "`pmlab info` prints text: choose table, markdown, mail, json or csv".into(),
        }),
    }
}

/// The JSON form: the [`SystemInfo`] with its [`Capabilities`] under `capabilities`, pretty.
/// One shape per key: an item that could not be read is `null` where its value would be,
/// and why is under `unavailable`, by the item's dotted path.
fn json(si: &SystemInfo, caps: &Capabilities) -> Result<String, RenderError> {
    #[derive(serde::Serialize)]
    struct Out<'a> {
        #[serde(flatten)]
        info: &'a SystemInfo,
        capabilities: &'a Capabilities,
    }
    let err = |e: serde_json::Error| RenderError {
        format: "json",
        message: e.to_string(),
    };
    let mut v = serde_json::to_value(Out {
        info: si,
        capabilities: caps,
    })
    .map_err(err)?;
    let unavailable = pmlab_kernel::sysinfo::item::split_unavailable(&mut v);
    if let serde_json::Value::Object(map) = &mut v {
        map.insert(
            "unavailable".into(),
            serde_json::to_value(unavailable).map_err(err)?,
        );
    }
    serde_json::to_string_pretty(&v).map_err(err)
}

/// The document; `verbose` lists every hotplug state and sched feature, and the idle
/// states of every CPU.
fn doc(si: &SystemInfo, caps: &Capabilities, verbose: bool) -> Doc {
    let mut o = Doc::default();
    head(&mut o, "System");
    kv(&mut o, "kernel", show(&si.kernel.release));
    kv(&mut o, "cmdline", show(&si.kernel.cmdline));
    let mut cpu = show(&si.cpus.model);
    if let (Some(v), Some(f), Some(m)) = (&si.cpus.vendor, si.cpus.family, si.cpus.model_number) {
        let _ = write!(cpu, " ({v}, family {f} model {m}");
        if let Some(s) = si.cpus.stepping {
            let _ = write!(cpu, " stepping {s}");
        }
        cpu.push(')');
    }
    kv(&mut o, "cpu", cpu);
    kv(
        &mut o,
        "user",
        if si.is_root {
            "root"
        } else {
            "not root (some items need root)"
        },
    );
    if si.root != "/" {
        kv(&mut o, "root", &si.root);
    }

    head(&mut o, "Virtualization");
    let v = &si.virt;
    kv(
        &mut o,
        "hypervisor",
        match (&v.hypervisor, &v.hypervisor_source) {
            (Some(h), Some(s)) => format!("{h} (from {s})"),
            (Some(h), None) => h.clone(),
            _ => "none (bare metal)".into(),
        },
    );
    kv(
        &mut o,
        "hypervisor flag",
        if v.hypervisor_flag { "yes" } else { "no" },
    );
    kv(
        &mut o,
        "clocksource",
        format!(
            "{} (available: {})",
            opt(&v.clocksource),
            v.available_clocksources.join(" ")
        ),
    );
    if let Some(k) = &v.kvm_cpuid {
        kv(&mut o, "KVM CPUID base", &k.base);
        o.0.push(Block::Words {
            item: "KVM features",
            label: Some(format!("KVM features ({}):", k.features_raw)),
            words: k.features.clone(),
        });
        let hints = if k.hints.is_empty() {
            "none".into()
        } else {
            k.hints.join(" ")
        };
        kv(&mut o, "KVM hints", hints);
    } else if let Some(n) = &v.kvm_cpuid_note {
        kv(&mut o, "KVM CPUID", n);
    }
    if let Some(d) = &v.dmi_vendor {
        kv(&mut o, "DMI", format!("{d} {}", opt(&v.dmi_product)));
    }
    if v.is_guest() {
        let fpr = match &v.free_page_reporting {
            Some(r) => format!(
                "on{}: the host takes free memory back, so pmlab asks for no huge pages",
                r.order.map_or(String::new(), |o| format!(
                    " (free blocks of order {o} and up)"
                ))
            ),
            None => "off".into(),
        };
        kv(&mut o, "free page reporting", fpr);
    }

    head(&mut o, "CPUs");
    let c = &si.cpus;
    kv(&mut o, "present", show_list(&c.present));
    kv(&mut o, "online", show_list(&c.online));
    kv(
        &mut o,
        "offline",
        if c.offline.is_empty() {
            "-".into()
        } else {
            format_cpu_list(&c.offline)
        },
    );
    kv(
        &mut o,
        "hot-pluggable",
        if c.hotpluggable.is_empty() {
            "none".into()
        } else {
            format_cpu_list(&c.hotpluggable)
        },
    );
    if let Some(s) = &c.smt_control {
        kv(&mut o, "smt control", s);
    }
    let lc = &si.layout.counts;
    if lc.cpus > 0 {
        kv(
            &mut o,
            "counts",
            format!(
                "{} packages, {} dies, {} modules, {} cores, {} threads per core, {} NUMA nodes",
                lc.packages, lc.dies, lc.modules, lc.cores, lc.threads_per_core, lc.nodes
            ),
        );
        let src = serde_json::to_value(&si.layout.sources).unwrap_or_default();
        let word = |k: &str| src[k].as_str().unwrap_or("?").to_string();
        kv(
            &mut o,
            "read from",
            format!(
                "package: {}, die: {}, module: {}, core: {}, node: {}",
                word("package"),
                word("die"),
                word("module"),
                word("core"),
                word("node")
            ),
        );
    }
    for ct in &si.layout.core_types {
        kv(
            &mut o,
            &format!("{} cores", ct.name),
            format_cpu_list(&ct.cpus),
        );
    }
    match &si.topology {
        Item::Value(topo) if !topo.is_empty() => {
            let mut t = table(&[
                "cpu",
                "package",
                "die",
                "cluster",
                "core",
                "thread siblings",
            ]);
            for x in topo {
                t.add_row(vec![
                    x.cpu.to_string(),
                    opt(&x.package),
                    opt(&x.die),
                    opt(&x.cluster),
                    opt(&x.core),
                    format_cpu_list(&x.thread_siblings),
                ]);
            }
            o.0.push(Block::Table(t));
        }
        other => kv(&mut o, "topology", show(&other.clone().map(|_| "-"))),
    }

    head(&mut o, "cpuidle");
    let ci = &si.cpuidle;
    kv(&mut o, "driver", show(&ci.driver));
    kv(&mut o, "governor", show(&ci.governor));
    kv(
        &mut o,
        "available governors",
        show(&ci.available_governors.clone().map(|g| g.join(" "))),
    );
    if ci.off == Some(true) {
        kv(&mut o, "cpuidle.off", "1 (disabled on the command line)");
    }
    let rows: usize = ci.cpus.iter().map(|c| c.states.len()).sum();
    if ci.cpus.is_empty() {
        kv(&mut o, "idle states", "none");
    } else if verbose || rows <= 16 {
        let mut t = states_table();
        for cpu in &ci.cpus {
            for s in &cpu.states {
                let label = if si.cpus.offline.contains(&cpu.cpu) {
                    format!("{} (offline)", cpu.cpu)
                } else {
                    cpu.cpu.to_string()
                };
                state_row(&mut t, &label, s);
            }
        }
        o.0.push(Block::Table(t));
    } else {
        let cpus: Vec<u32> = ci.cpus.iter().map(|c| c.cpu).collect();
        let mut t = states_table();
        for s in summed_states(ci) {
            state_row(&mut t, &format_cpu_list(&cpus), &s);
        }
        o.0.push(Block::Table(t));
        o.0.push(Block::Line(
            "(counters summed over CPUs; -v shows each CPU)".into(),
        ));
    }

    if let Some(h) = &si.haltpoll {
        head(&mut o, "haltpoll (/sys/module/haltpoll/parameters)");
        for (k, v) in &h.parameters {
            kv(&mut o, k, show(v));
        }
        if let Some(f) = h.driver_force {
            kv(&mut o, "cpuidle_haltpoll.force", if f { "Y" } else { "N" });
        }
    }

    head(&mut o, "cpufreq");
    match &si.cpufreq {
        None => kv(&mut o, "driver", "none"),
        Some(cf) => {
            kv(&mut o, "driver", opt(&cf.driver));
            if let Some(s) = &cf.intel_pstate_status {
                kv(&mut o, "intel_pstate", s);
            }
            if let Some(b) = cf.boost {
                kv(&mut o, "boost", if b { "on" } else { "off" });
            }
            if let Some(b) = cf.turbo {
                kv(&mut o, "turbo", if b { "on" } else { "off" });
            }
            if let Some(ip) = &cf.intel_pstate {
                if let (Some(a), Some(b)) = (ip.min_perf_pct, ip.max_perf_pct) {
                    kv(&mut o, "intel_pstate perf %", format!("{a}..{b}"));
                }
                if let Some(h) = ip.hwp_dynamic_boost {
                    kv(&mut o, "hwp_dynamic_boost", if h { "on" } else { "off" });
                }
            }
            if let Some(s) = &cf.amd_pstate_status {
                kv(&mut o, "amd_pstate", s);
            }
            if let Some(b) = cf.policies.first().and_then(|p| p.base) {
                kv(&mut o, "base frequency", format!("{} MHz", b.mhz()));
            }
            if let Some(p) = cf.policies.first() {
                kv(
                    &mut o,
                    "available governors",
                    p.available_governors.join(" "),
                );
                if let Some(e) = &p.available_epp {
                    kv(&mut o, "available EPP", e.join(" "));
                }
            }
            let mut t = table(&[
                "policies", "cpus", "governor", "min MHz", "max MHz", "cur MHz", "EPP",
            ]);
            let mhz = |k: Option<pmlab_kernel::KHz>| k.map_or("-".into(), |k| k.mhz().to_string());
            let epp = |p: &Policy| p.epp.as_ref().map_or("-".into(), show);
            // group policies that share governor, limits and EPP (unless -v)
            let mut groups: Vec<Vec<&Policy>> = Vec::new();
            for p in &cf.policies {
                let same = |q: &Policy| {
                    q.governor == p.governor && q.min == p.min && q.max == p.max && epp(q) == epp(p)
                };
                match groups.iter_mut().find(|g| !verbose && same(g[0])) {
                    Some(g) => g.push(p),
                    None => groups.push(vec![p]),
                }
            }
            for g in groups {
                let ids: Vec<u32> = g.iter().map(|p| p.id).collect();
                let mut cpus: Vec<u32> = g.iter().flat_map(|p| p.cpus.clone()).collect();
                cpus.sort_unstable();
                let curs: Vec<u64> = g.iter().filter_map(|p| p.cur.map(|k| k.mhz())).collect();
                let cur = match (curs.iter().min(), curs.iter().max()) {
                    (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
                    (Some(a), _) => format!("{a}"),
                    _ => "-".into(),
                };
                t.add_row(vec![
                    format_cpu_list(&ids),
                    format_cpu_list(&cpus),
                    opt(&g[0].governor),
                    mhz(g[0].min),
                    mhz(g[0].max),
                    cur,
                    epp(g[0]),
                ]);
            }
            o.0.push(Block::Table(t));
        }
    }

    head(&mut o, "Power (PM QoS, EPB, ASPM, uncore)");
    let pw = &si.power;
    let grouped = |g: &[pmlab_kernel::sysinfo::power::CpuValues<String>]| {
        if g.is_empty() {
            return "absent".to_string();
        }
        g.iter()
            .map(|x| format!("{} on {}", x.value, format_cpu_list(&x.cpus)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    kv(
        &mut o,
        "PM QoS resume latency µs",
        grouped(&pw.pmqos_resume_latency_us),
    );
    kv(&mut o, "EPB", grouped(&pw.epb));
    if let Some(a) = &pw.aspm {
        kv(
            &mut o,
            "PCIe ASPM policy",
            format!("{} (of {})", opt(&a.policy), a.available.join(" ")),
        );
    }
    if let Some(d) = &pw.c1_demotion {
        kv(&mut o, "intel_c1_demotion", d);
    }
    if !pw.cppc.is_empty() {
        kv(
            &mut o,
            "ACPI CPPC",
            format!("{} groups of CPUs (see --json)", pw.cppc.len()),
        );
    }
    if !pw.uncore.is_empty() {
        let mut t = table(&[
            "uncore",
            "kind",
            "package",
            "die",
            "min MHz",
            "max MHz",
            "hw range MHz",
            "cur MHz",
        ]);
        let mhz = |k: Option<pmlab_kernel::KHz>| k.map_or("-".into(), |k| k.mhz().to_string());
        for d in &pw.uncore {
            t.add_row(vec![
                d.dir.clone(),
                serde_json::to_value(d.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                opt(&d.package),
                opt(&d.die),
                mhz(d.min),
                mhz(d.max),
                format!("{}-{}", mhz(d.hw_min), mhz(d.hw_max)),
                mhz(d.cur),
            ]);
        }
        o.0.push(Block::Table(t));
    }

    head(&mut o, "powercap");
    if si.powercap.is_empty() {
        kv(&mut o, "zones", "none (no RAPL)");
    } else {
        let mut t = table(&["zone", "name", "energy_uj", "max range µJ"]);
        for z in &si.powercap {
            t.add_row(vec![
                z.id.clone(),
                z.name.clone(),
                show(&z.energy_uj),
                opt(&z.max_energy_range_uj),
            ]);
        }
        o.0.push(Block::Table(t));
    }

    head(&mut o, "Tracing and scheduler");
    kv(&mut o, "tracefs", &si.tracefs.note);
    match &si.sched_features {
        Item::Value(f) => {
            let off: Vec<&str> = f
                .iter()
                .filter(|x| !x.enabled)
                .map(|x| x.name.as_str())
                .collect();
            kv(
                &mut o,
                "sched features",
                format!("{} ({} off: {})", f.len(), off.len(), off.join(" ")),
            );
            if verbose {
                let words: Vec<String> = f
                    .iter()
                    .map(|x| {
                        if x.enabled {
                            x.name.clone()
                        } else {
                            format!("NO_{}", x.name)
                        }
                    })
                    .collect();
                o.0.push(Block::Words {
                    item: "sched features, each",
                    label: None,
                    words,
                });
            }
        }
        other => kv(&mut o, "sched features", show(&other.clone().map(|_| ""))),
    }
    kv(
        &mut o,
        "rcu_expedited",
        show(
            &si.kernel
                .rcu_expedited
                .clone()
                .map(|b| if b { 1 } else { 0 }),
        ),
    );
    match &si.hotplug_states {
        Item::Value(s) => {
            let first = s
                .first()
                .map(|x| format!("{} {}", x.number, x.name))
                .unwrap_or_default();
            let last = s
                .last()
                .map(|x| format!("{} {}", x.number, x.name))
                .unwrap_or_default();
            kv(
                &mut o,
                "hotplug states",
                format!(
                    "{} ({first} … {last}){}",
                    s.len(),
                    if verbose { "" } else { "; -v lists them" }
                ),
            );
            if verbose {
                let words: Vec<String> = s
                    .iter()
                    .map(|x| format!("{}:{}", x.number, x.name))
                    .collect();
                o.0.push(Block::Words {
                    item: "hotplug states, each",
                    label: None,
                    words,
                });
            }
        }
        other => kv(&mut o, "hotplug states", show(&other.clone().map(|_| ""))),
    }

    head(&mut o, "What pmlab can do here");
    o.0.push(Block::Caps(caps.items.clone()));
    o
}
