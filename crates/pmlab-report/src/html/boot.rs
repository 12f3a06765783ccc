//! The boot lab's section from a stored boot experiment: secondary-CPU bring-up against the
//! vCPU count per configuration (mean and 95% CI, failed boots counted), the hotplug steps
//! that took longest at each vCPU count, and VM exits by reason where the host recorded them.

use super::svg::{colour, esc, range, Plot};
use super::table;
use crate::report::{fmt_mean_ci, fmt_num, Report};
use crate::spec::Kind;
use crate::stats::Summary;
use crate::store::StoredExperiment;
use pmlab_kernel::MetricKey;
use std::fmt::Write;

/// How many of the slowest steps the breakdown shows per vCPU count.
const TOP_STEPS: usize = 8;
/// How many exit reasons the exits table shows per vCPU count.
const TOP_REASONS: usize = 8;

/// Is this a stored boot experiment?
pub fn is_boot(e: &StoredExperiment) -> bool {
    e.info.kind == Kind::Boot
}

/// A workload's vCPU count (`boot --vcpus N`).
fn vcpus(argv: &[String]) -> Option<u32> {
    let i = argv.iter().position(|a| a == "--vcpus")?;
    argv.get(i + 1)?.parse().ok()
}

fn total(name: &str) -> MetricKey {
    MetricKey {
        name: name.to_string(),
        cpu: None,
    }
}

/// Mean of a metric over one configuration's boots at one vCPU count.
fn mean(e: &StoredExperiment, w: usize, c: usize, name: &str) -> Option<f64> {
    Summary::of(&e.samples(w, c, total(name))).map(|s| s.mean)
}

/// The metrics `PREFIX…` (totals) of workload `w`, by their largest mean over the
/// configurations, largest first, as (the name after the prefix, that mean).
fn largest(
    e: &StoredExperiment,
    w: usize,
    keys: &[crate::store::MetricInfo],
    prefix: &str,
) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = keys
        .iter()
        .filter(|k| k.cpu.is_none())
        .filter_map(|k| Some((k, k.name.strip_prefix(prefix)?)))
        .map(|(k, s)| {
            let most = (0..e.configurations.len())
                .filter_map(|c| mean(e, w, c, &k.name))
                .fold(0.0, f64::max);
            (s.to_string(), most)
        })
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

/// The section: plot, bring-up table, steps, exits.
pub fn section(e: &StoredExperiment, r: &Report) -> String {
    let mut by_vcpus: Vec<(u32, usize)> = e
        .workloads
        .iter()
        .enumerate()
        .filter_map(|(w, wl)| Some((vcpus(&wl.argv)?, w)))
        .collect();
    by_vcpus.sort();
    let mut s = String::new();
    s.push_str(&plot(e, r, &by_vcpus));
    s.push_str(&bringup_table(e, r, &by_vcpus));
    s.push_str(&steps_table(e, &by_vcpus));
    s.push_str(&exits_table(e, &by_vcpus));
    s
}

fn plot(e: &StoredExperiment, r: &Report, by_vcpus: &[(u32, usize)]) -> String {
    let mut ys = Vec::new();
    for &(_, w) in by_vcpus {
        for row in &r.workloads[w].rows {
            if let Some(p) = &row.primary {
                ys.push(p.mean);
                ys.extend([p.ci_low, p.ci_high].into_iter().filter(|v| v.is_finite()));
            }
        }
    }
    if ys.is_empty() {
        return String::new();
    }
    let mut p = Plot::new(
        "Secondary-CPU bring-up against vCPU count",
        720.0,
        320.0,
        (-0.5, by_vcpus.len() as f64 - 0.5),
        range(ys, true),
    );
    p.y_axis("bring-up (ms)");
    let labels: Vec<String> = by_vcpus.iter().map(|(v, _)| format!("{v} vCPUs")).collect();
    p.x_categories(&labels, "vCPUs of the guest");
    let mut legend = Vec::new();
    for (c, conf) in e.configurations.iter().enumerate() {
        let col = colour(c);
        let dx = (c as f64 - (e.configurations.len() as f64 - 1.0) / 2.0) * 0.08;
        let mut line = Vec::new();
        for (i, &(v, w)) in by_vcpus.iter().enumerate() {
            let Some(row) = r.workloads[w].rows.iter().find(|x| x.label == conf.label) else {
                continue;
            };
            let Some(m) = &row.primary else { continue };
            let x = p.x.at(i as f64 + dx);
            if m.ci_low.is_finite() && m.ci_high.is_finite() {
                let _ = write!(
                    p.body,
                    r#"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="{col}" stroke-width="1.5"/>"#,
                    p.y.at(m.ci_low),
                    p.y.at(m.ci_high)
                );
            }
            let _ = write!(
                p.body,
                r#"<circle cx="{x:.1}" cy="{:.1}" r="4" fill="{col}"><title>{} at {v} vCPUs: {} ms (n={}, {} failed)</title></circle>"#,
                p.y.at(m.mean),
                esc(&conf.label),
                fmt_mean_ci(m),
                m.n,
                row.failed
            );
            line.push(format!("{x:.1},{:.1}", p.y.at(m.mean)));
        }
        if line.len() > 1 {
            let _ = write!(
                p.body,
                r#"<polyline fill="none" stroke="{col}" stroke-width="1.5" points="{}"/>"#,
                line.join(" ")
            );
        }
        legend.push((conf.label.clone(), col));
    }
    p.legend(&legend);
    p.finish()
}

fn bringup_table(e: &StoredExperiment, r: &Report, by_vcpus: &[(u32, usize)]) -> String {
    let mut headers = vec!["vCPUs".to_string()];
    headers.extend(e.configurations.iter().map(|c| c.label.clone()));
    headers.push("verdict".into());
    let mut rows = Vec::new();
    for &(v, w) in by_vcpus {
        let wr = &r.workloads[w];
        let mut cells = vec![v.to_string()];
        let mut verdicts = Vec::new();
        for conf in &e.configurations {
            let Some(row) = wr.rows.iter().find(|x| x.label == conf.label) else {
                cells.push("-".into());
                continue;
            };
            let n = if row.failed > 0 {
                format!("{}+{}✗", row.runs - row.failed, row.failed)
            } else {
                row.runs.to_string()
            };
            let m = row
                .primary
                .as_ref()
                .map(fmt_mean_ci)
                .unwrap_or_else(|| "no boot completed".into());
            cells.push(format!("{m} (n={n})"));
            if let (Some(c), Some(vs)) = (&row.comparison, &row.versus) {
                verdicts.push(format!("{} vs {vs}: {}", row.label, c.verdict));
            }
        }
        cells.push(verdicts.join("; "));
        rows.push(cells);
    }
    let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    format!(
        "<h3>Bring-up (ms, mean ± 95% CI; ✗ failed boots)</h3>{}",
        table::plain(&refs, &rows)
    )
}

/// The slowest hotplug states (mean exclusive ms per boot) per vCPU count and
/// configuration, with the bring-up's parts outside the steps.
fn steps_table(e: &StoredExperiment, by_vcpus: &[(u32, usize)]) -> String {
    let mut rows = Vec::new();
    for &(v, w) in by_vcpus {
        let keys = e.metric_keys(w);
        let steps = largest(e, w, &keys, "boot.step_ms:");
        let parts = [
            ("(before the first step)", "boot.lead_ms"),
            ("(after the last step)", "boot.tail_ms"),
        ];
        let mut add = |what: String, metric: &str| {
            let mut cells = vec![v.to_string(), what];
            for c in 0..e.configurations.len() {
                cells.push(
                    mean(e, w, c, metric)
                        .map(fmt_num)
                        .unwrap_or_else(|| "-".into()),
                );
            }
            rows.push(cells);
        };
        for (name, _) in steps.iter().take(TOP_STEPS) {
            add(name.clone(), &format!("boot.step_ms:{name}"));
        }
        for (what, metric) in parts {
            if keys.iter().any(|k| k.name == metric) {
                add(what.to_string(), metric);
            }
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut headers = vec!["vCPUs".to_string(), "hotplug state".to_string()];
    headers.extend(e.configurations.iter().map(|c| c.label.clone()));
    let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    format!(
        "<h3>Where the bring-up went: the {TOP_STEPS} slowest hotplug states (ms per boot, \
         summed over the secondary CPUs)</h3>{}",
        table::plain(&refs, &rows)
    )
}

/// VM exits by reason (mean per boot, share, mean exit→entry µs) where the host's kvm events
/// were recorded.
fn exits_table(e: &StoredExperiment, by_vcpus: &[(u32, usize)]) -> String {
    let mut rows = Vec::new();
    let mut recorded = false;
    for &(v, w) in by_vcpus {
        let keys = e.metric_keys(w);
        recorded |= keys.iter().any(|k| k.name == "kvm.exits");
        let reasons = largest(e, w, &keys, "kvm.exits:");
        for (reason, _) in reasons.iter().take(TOP_REASONS) {
            let mut cells = vec![v.to_string(), reason.clone()];
            for c in 0..e.configurations.len() {
                let n = mean(e, w, c, &format!("kvm.exits:{reason}"));
                let all = mean(e, w, c, "kvm.exits").filter(|a| *a > 0.0);
                let us = mean(e, w, c, &format!("kvm.exit_us:{reason}"));
                cells.push(match n {
                    Some(n) => format!(
                        "{n:.0} ({}){}",
                        all.map(|a| format!("{:.1}%", 100.0 * n / a))
                            .unwrap_or_else(|| "-".into()),
                        us.map(|u| format!(", {u:.1} µs")).unwrap_or_default()
                    ),
                    None => "-".into(),
                });
            }
            rows.push(cells);
        }
    }
    if !recorded {
        return String::new();
    }
    if rows.is_empty() {
        let accel = e.guests.first().map(|g| g.accel.as_str()).unwrap_or("");
        return format!(
            "<p class=\"sub\">VM exits: the host's kvm events were recorded, and QEMU made no \
             exits ({}).</p>",
            esc(if accel == "tcg" {
                "TCG runs the guest in the emulator"
            } else {
                "none recorded"
            })
        );
    }
    let mut headers = vec!["vCPUs".to_string(), "exit reason".to_string()];
    headers.extend(e.configurations.iter().map(|c| c.label.clone()));
    let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    format!(
        "<h3>VM exits by reason, over the completed boots (per boot: count (share), mean \
         exit→entry time, as perf kvm stat reports them)</h3>{}",
        table::plain(&refs, &rows)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::SideSelection;
    use crate::spec::{Configuration, Experiment, WorkloadDef};
    use crate::store::Store;
    use crate::system::SystemSnapshot;
    use pmlab_kernel::{Direction, Metric};

    /// A boot experiment as the boot lab stores it: two command lines at 2 and 8 vCPUs, the
    /// host's kvm events recorded.
    #[test]
    fn bring_up_by_vcpus_steps_and_exits_per_configuration() {
        let mut store = Store::in_memory().unwrap();
        let conf = |l: &str| Configuration {
            label: l.into(),
            knobs: Vec::new(),
        };
        let wl = |v: &str| WorkloadDef::new(vec!["boot".into(), "--vcpus".into(), v.into()]);
        let exp = Experiment::new(
            Kind::Boot,
            "boot".into(),
            vec![conf("cpuhp.parallel=0"), conf("cpuhp.parallel=1")],
            vec![wl("8").unwrap(), wl("2").unwrap()],
            None,
        )
        .unwrap();
        let outcome = pmlab_lab::scripted::store_scripted(
            &mut store,
            &exp,
            3,
            SystemSnapshot::default(),
            "pmlab boot",
            &mut |p| {
                let vcpus = [8.0, 2.0][p.workload];
                let base = 100.0 * vcpus + 50.0 * p.configuration as f64 + p.round as f64;
                let ms = |n: &str, v: f64| Metric::new(n, v, "ms", Direction::Lower);
                let n = |n: &str, v: f64| Metric::new(n, v, "", Direction::Lower);
                pmlab_lab::executor::RunOutput {
                    metrics: vec![ms("boot.bringup_ms", base)],
                    side_metrics: vec![
                        ms("boot.step_ms:cpu:bringup", base * 0.9),
                        ms("boot.step_ms:cpu:kick_ap", 3.0),
                        ms("boot.lead_ms", 2.0),
                        ms("boot.tail_ms", 4.0),
                        n("kvm.exits", 100.0 * vcpus),
                        n("kvm.exits:HLT", 75.0 * vcpus),
                        n("kvm.exits:MSR_WRITE", 25.0 * vcpus),
                        Metric::new("kvm.exit_us:HLT", 40.0, "us", Direction::Lower),
                    ],
                    trace_path: None,
                }
            },
        )
        .unwrap();
        let e = store.load(outcome.experiment_id).unwrap();
        assert!(is_boot(&e));
        let r = Report::of(&e, None, &SideSelection::Default).unwrap();
        let html = section(&e, &r);
        // vCPU counts in order (the workloads were 8 then 2), one mean per configuration.
        let two = html
            .find("202.0 ± 2.5 (n=3)")
            .expect("2 vCPUs, parallel=0: 201..203");
        let eight = html.find("802.0 ± 2.5 (n=3)").expect("8 vCPUs, parallel=0");
        assert!(two < eight, "rows by vCPU count");
        assert!(html.contains("852.0 ± 2.5 (n=3)"), "8 vCPUs, parallel=1");
        assert!(html.contains("slower by 6.2%"), "the verdict at 8 vCPUs");
        assert!(html.contains("Secondary-CPU bring-up against vCPU count"));
        // The steps, slowest first, and the parts outside them.
        let bringup = html.find("cpu:bringup").unwrap();
        assert!(bringup < html.find("cpu:kick_ap").unwrap());
        assert!(html.contains("(before the first step)") && html.contains("(after the last step)"));
        // Exits: count (share), mean time.
        assert!(html.contains("VM exits by reason"));
        assert!(html.contains("600 (75.0%), 40.0 µs"), "{html}");
        assert!(html.contains("<td class=\"num\">50 (25.0%)</td>"), "{html}");
    }
}
