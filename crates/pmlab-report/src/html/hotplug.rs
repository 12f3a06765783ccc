//! Hotplug plots from a stored hotplug experiment: operation latency against load (a scatter,
//! offline and online, with p50 and p99 lines) and the per-step waterfall of the slowest
//! operation (from its `step_ms:STATE:CALLBACK` side metrics).

use super::svg::{colour, esc, range, shorten, Plot};
use super::table;
use crate::report::fmt_num;
use crate::spec::{Kind, HOTPLUG_WALL_METRIC as WALL_METRIC};
use crate::stats::percentile;
use crate::store::{StoredExperiment, StoredRun};
use std::fmt::Write;

/// Is this a stored hotplug latency session? (Stores older than schema 7 stored it as
/// `run-spec`; opening one migrates it to `hotplug`.)
pub fn is_hotplug(e: &StoredExperiment) -> bool {
    e.info.kind == Kind::Hotplug
        && e.runs
            .iter()
            .any(|r| r.metrics.iter().any(|m| m.name == WALL_METRIC))
}

/// (direction, load) of a hotplug workload.
pub fn workload_key(argv: &[String]) -> (String, u32) {
    let dir = argv.get(1).cloned().unwrap_or_default();
    let load = argv
        .iter()
        .position(|a| a == "--load")
        .and_then(|i| argv.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (dir, load)
}

/// Per (direction, load, configuration): the wall times in ms.
pub fn groups(e: &StoredExperiment) -> Vec<(String, u32, String, Vec<f64>)> {
    let mut out = Vec::new();
    for (w, wl) in e.workloads.iter().enumerate() {
        let (dir, load) = workload_key(&wl.argv);
        // The wall metric carries the CPU the workload writes (`Metric.cpu`).
        let Some(key) = e
            .metric_keys(w)
            .into_iter()
            .find(|k| k.name == WALL_METRIC)
            .map(|k| k.key())
        else {
            continue;
        };
        for (c, conf) in e.configurations.iter().enumerate() {
            let xs = e.samples(w, c, key.clone());
            if !xs.is_empty() {
                out.push((dir.clone(), load, conf.label.clone(), xs));
            }
        }
    }
    out
}

fn wall(r: &StoredRun) -> f64 {
    r.metrics
        .iter()
        .find(|m| m.name == WALL_METRIC)
        .map(|m| m.value)
        .unwrap_or(f64::NAN)
}

/// The CPU an operation wrote: its wall metric's CPU.
fn cpu(r: &StoredRun) -> Option<u32> {
    r.metrics
        .iter()
        .find(|m| m.name == WALL_METRIC)
        .and_then(|m| m.cpu)
}

/// The scatter with p50/p99 lines, and its table.
pub fn scatter(e: &StoredExperiment) -> Option<String> {
    let g = groups(e);
    if g.is_empty() {
        return None;
    }
    let mut loads: Vec<u32> = g.iter().map(|x| x.1).collect();
    loads.sort();
    loads.dedup();
    let dirs = ["down", "up"];
    let xr = (-0.5, loads.len() as f64 - 0.5);
    let yr = range(g.iter().flat_map(|x| x.3.iter().copied()), true);
    let mut p = Plot::new(
        "CPU hotplug: operation latency against background load",
        720.0,
        320.0,
        xr,
        yr,
    );
    p.y_axis("latency per operation (ms)");
    let labels: Vec<String> = loads.iter().map(|l| format!("load {l}")).collect();
    p.x_categories(&labels, "loader instances in the background");
    let configs: Vec<String> = e.configurations.iter().map(|c| c.label.clone()).collect();
    let series = |d: usize, c: usize| d * configs.len() + c;
    let mut legend = Vec::new();
    for (d, dir) in dirs.iter().enumerate() {
        for (c, conf) in configs.iter().enumerate() {
            let col = colour(series(d, c));
            let mut p50 = Vec::new();
            let mut p99 = Vec::new();
            for (li, load) in loads.iter().enumerate() {
                let Some((_, _, _, xs)) = g
                    .iter()
                    .find(|x| x.0 == *dir && x.1 == *load && &x.2 == conf)
                else {
                    continue;
                };
                let base = li as f64 + (d as f64 - 0.5) * 0.3 + c as f64 * 0.06;
                for (k, y) in xs.iter().enumerate() {
                    let jitter = ((k * 37) % 11) as f64 / 11.0 * 0.1 - 0.05;
                    let _ = write!(
                        p.body,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{col}" fill-opacity="0.6"><title>{dir} {conf} load {load}: {} ms</title></circle>"#,
                        p.x.at(base + jitter),
                        p.y.at(*y),
                        fmt_num(*y)
                    );
                }
                p50.push(format!(
                    "{:.1},{:.1}",
                    p.x.at(base),
                    p.y.at(percentile(xs, 0.5))
                ));
                p99.push(format!(
                    "{:.1},{:.1}",
                    p.x.at(base),
                    p.y.at(percentile(xs, 0.99))
                ));
            }
            if p50.is_empty() {
                continue;
            }
            let _ = write!(
                p.body,
                r#"<polyline points="{}" fill="none" stroke="{col}" stroke-width="2"><title>{dir} {conf} p50</title></polyline><polyline points="{}" fill="none" stroke="{col}" stroke-width="1.5" stroke-dasharray="6,4"><title>{dir} {conf} p99</title></polyline>"#,
                p50.join(" "),
                p99.join(" ")
            );
            legend.push((
                format!(
                    "{} {conf} (p50 solid, p99 dashed)",
                    if *dir == "down" { "offline" } else { "online" }
                ),
                col,
            ));
        }
    }
    p.legend(&legend);
    let rows: Vec<Vec<String>> = g
        .iter()
        .map(|(dir, load, conf, xs)| {
            vec![
                format!("{dir} load {load} {conf}"),
                xs.len().to_string(),
                fmt_num(percentile(xs, 0.5)),
                fmt_num(percentile(xs, 0.99)),
                fmt_num(xs.iter().cloned().fold(f64::NAN, f64::max)),
            ]
        })
        .collect();
    Some(format!(
        "{}{}",
        p.finish(),
        table::plain(&["operation", "n", "p50 ms", "p99 ms", "max ms"], &rows)
    ))
}

/// A step of an operation: (state, callback, exclusive ms).
pub type Step = (String, String, f64);

/// The slowest operation (what, wall ms) and its steps in cpuhp state order.
pub fn slowest_steps(e: &StoredExperiment) -> Option<(String, f64, Vec<Step>)> {
    let run = e
        .runs
        .iter()
        .filter(|r| !r.warmup && wall(r).is_finite())
        .max_by(|a, b| wall(a).total_cmp(&wall(b)))?;
    let (dir, load) = workload_key(&e.workloads.get(run.workload)?.argv);
    let mut steps: Vec<(i64, String, String, f64)> = run
        .metrics
        .iter()
        .filter_map(|m| {
            let rest = m.name.strip_prefix("step_ms:")?;
            let (state, cb) = rest.split_once(':')?;
            Some((
                state.parse().unwrap_or(0),
                state.to_string(),
                cb.to_string(),
                m.value,
            ))
        })
        .collect();
    steps.sort_by_key(|s| s.0);
    if dir == "down" {
        steps.reverse();
    }
    let what = format!(
        "{} of cpu{} at load {load}, {}",
        if dir == "down" { "offline" } else { "online" },
        cpu(run).map_or("?".to_string(), |c| c.to_string()),
        e.configurations
            .get(run.configuration)
            .map(|c| c.label.as_str())
            .unwrap_or("")
    );
    Some((
        what,
        wall(run),
        steps.into_iter().map(|s| (s.1, s.2, s.3)).collect(),
    ))
}

/// The waterfall of the slowest operation, and its table; None without traced steps.
pub fn waterfall(e: &StoredExperiment) -> Option<String> {
    let (what, total, steps) = slowest_steps(e)?;
    if steps.is_empty() {
        return None;
    }
    // The 14 largest steps in order; the rest summed as one bar at the end.
    let mut by_size: Vec<usize> = (0..steps.len()).collect();
    by_size.sort_by(|a, b| steps[*b].2.total_cmp(&steps[*a].2));
    let keep: Vec<usize> = {
        let mut k: Vec<usize> = by_size.iter().take(14).copied().collect();
        k.sort();
        k
    };
    let mut bars: Vec<(String, f64)> = keep
        .iter()
        .map(|&i| (format!("{} {}", steps[i].0, steps[i].1), steps[i].2))
        .collect();
    let rest: f64 = by_size.iter().skip(14).map(|&i| steps[i].2).sum();
    if by_size.len() > 14 {
        bars.push((format!("{} other steps", by_size.len() - 14), rest));
    }
    let sum: f64 = bars.iter().map(|b| b.1).sum();
    let n = bars.len();
    let height = 60.0 + 18.0 * n as f64 + 40.0;
    let mut p = Plot::new(
        &format!(
            "slowest operation: {what} — {} ms, step by step",
            fmt_num(total)
        ),
        720.0,
        height,
        (0.0, sum.max(total) * 1.6),
        (n as f64 - 0.5, -0.5),
    );
    p.x_axis("time since the first step (ms, exclusive step times)");
    let mut acc = 0.0;
    for (i, (name, ms)) in bars.iter().enumerate() {
        let (x0, x1) = (p.x.at(acc), p.x.at(acc + ms));
        let y = p.y.at(i as f64);
        let _ = write!(
            p.body,
            r#"<g><title>{}: {} ms</title><rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="12" fill="{}"/><text class="tick" x="{:.1}" y="{:.1}">{} ({} ms)</text></g>"#,
            esc(name),
            fmt_num(*ms),
            y - 6.0,
            (x1 - x0).max(1.0),
            colour(i),
            x1.max(x0 + 1.0) + 4.0,
            y + 4.0,
            esc(&shorten(name, 48)),
            fmt_num(*ms)
        );
        acc += ms;
    }
    let rows: Vec<Vec<String>> = steps
        .iter()
        .map(|(s, cb, ms)| vec![format!("{s} {cb}"), fmt_num(*ms)])
        .collect();
    Some(format!(
        "{}<details><summary>all {} steps</summary>{}</details>",
        p.finish(),
        steps.len(),
        table::plain(&["step (state callback)", "exclusive ms"], &rows)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Configuration, Experiment, WorkloadDef};
    use crate::store::Store;
    use crate::system::SystemSnapshot;
    use pmlab_kernel::{Direction, Metric};

    /// A hotplug session as the lab stores it: every metric of a run on the CPU it wrote.
    #[test]
    fn reads_the_wall_times_and_the_slowest_operations_cpu_from_metric_cpu() {
        let mut store = Store::in_memory().unwrap();
        let argv = |dir: &str| -> Vec<String> {
            [
                "hotplug", dir, "--cpus", "3", "--load", "2", "--loader", "spin",
            ]
            .map(String::from)
            .to_vec()
        };
        let exp = Experiment::new(
            Kind::Hotplug,
            "hotplug".into(),
            vec![Configuration {
                label: "none".into(),
                knobs: Vec::new(),
            }],
            vec![
                WorkloadDef::new(argv("down")).unwrap(),
                WorkloadDef::new(argv("up")).unwrap(),
            ],
            None,
        )
        .unwrap();
        // Wall times per (round, workload): round 1 down 20 up 40, round 2 down 22 up 90.
        let walls = [[20.0, 40.0], [22.0, 90.0]];
        let outcome = pmlab_lab::scripted::store_scripted(
            &mut store,
            &exp,
            2,
            SystemSnapshot::default(),
            "pmlab hotplug",
            &mut |p| {
                let wall = walls[p.round - 1][p.workload];
                let on3 =
                    |name: &str, v: f64| Metric::new(name, v, "ms", Direction::Lower).on_cpu(3);
                pmlab_lab::executor::RunOutput {
                    metrics: vec![on3(WALL_METRIC, wall)],
                    side_metrics: vec![on3("step_ms:83:bringup_cpu", wall / 2.0)],
                    trace_path: None,
                }
            },
        )
        .unwrap();
        let e = store.load(outcome.experiment_id).unwrap();
        assert!(is_hotplug(&e));
        let g = groups(&e);
        assert_eq!(
            g,
            [
                ("down".into(), 2, "none".into(), vec![20.0, 22.0]),
                ("up".into(), 2, "none".into(), vec![40.0, 90.0])
            ]
        );
        let (what, wall, steps) = slowest_steps(&e).unwrap();
        assert_eq!(what, "online of cpu3 at load 2, none");
        assert_eq!(wall, 90.0);
        assert_eq!(steps, [("83".into(), "bringup_cpu".into(), 45.0)]);
    }
}
