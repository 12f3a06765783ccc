//! `--trace`: a [`SideSource`] that records each run's measured part with
//! `pmlab_trace::record::Recorder` into a trace.dat file next to the result store
//! (`STORE.traces/experiment-ID/run-NNNN-LABEL.dat`), and reports side metrics from it:
//! recording counts, and idle share/entries, idle exits by cause and needless exits per CPU
//! (pmlab-analysis), and who else ran on the workload's CPUs (`crate::disturbance::intruders`).

use crate::executor::RunContext;
use crate::machine::SideSource;
use pmlab_kernel::tracefs::TracefsError;
use pmlab_kernel::{Direction, Metric, Root};
use pmlab_trace::record::{RecordError, RecordOptions, Recorder};
use pmlab_workload::ProbeError;
use std::path::{Path, PathBuf};

/// Why `--trace` could not record.
#[derive(Debug, thiserror::Error)]
pub enum TraceSourceError {
    /// No tracefs is mounted or mountable.
    #[error("--trace: no tracefs")]
    NoTracefs(#[source] TracefsError),
    /// The trace directory could not be made: the directory, and why.
    #[error("--trace: {}", .0.display())]
    Dir(PathBuf, #[source] std::io::Error),
    /// The recorder failed.
    #[error("--trace")]
    Record(#[source] RecordError),
}

/// Records one trace per run.
pub struct TraceSource {
    root: Root,
    /// `STORE.traces`, absolute.
    dir: PathBuf,
    events: Vec<String>,
    current: Option<PathBuf>,
    recorder: Option<Recorder>,
    last: Option<PathBuf>,
    workload_cpus: Vec<u32>,
    /// The experiment's threads seen while recording (the recorder's own included).
    own: Vec<i32>,
}

pub use crate::store::traces_dir;

impl TraceSource {
    /// Check that tracing is possible (tracefs found or mountable) before any run.
    pub fn new(
        root: Root,
        db: &Path,
        events: Vec<String>,
    ) -> Result<TraceSource, TraceSourceError> {
        pmlab_kernel::tracefs::tracefs_dir(&root).map_err(TraceSourceError::NoTracefs)?;
        Ok(TraceSource {
            root,
            dir: traces_dir(db),
            events,
            current: None,
            recorder: None,
            last: None,
            workload_cpus: Vec::new(),
            own: Vec::new(),
        })
    }
}

/// A file-name-safe version of a configuration label.
fn safe(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    if s.is_empty() {
        "run".into()
    } else {
        s
    }
}

/// Where a run's trace file goes beside the store `db`:
/// `STORE.traces/experiment-ID/run-NNNN-LABEL[-warmup].dat`.
pub fn run_trace_path(db: &Path, ctx: &RunContext, label: &str) -> PathBuf {
    run_trace_in(&traces_dir(db), ctx, label)
}

fn run_trace_in(dir: &Path, ctx: &RunContext, label: &str) -> PathBuf {
    let kind = if ctx.warmup { "-warmup" } else { "" };
    dir.join(format!("experiment-{}", ctx.experiment_id))
        .join(format!(
            "run-{:04}-{}{kind}.dat",
            ctx.sequence + 1,
            safe(label)
        ))
}

impl SideSource for TraceSource {
    fn begin_run(&mut self, ctx: &RunContext, label: &str) {
        self.current = Some(run_trace_in(&self.dir, ctx, label));
        self.last = None;
    }

    fn workload_cpus(&mut self, cpus: &[u32]) {
        self.workload_cpus = cpus.to_vec();
    }

    fn before(&mut self) -> Result<(), ProbeError> {
        let output = self
            .current
            .clone()
            .unwrap_or_else(|| self.dir.join("trace.dat"));
        if let Some(parent) = output.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| TraceSourceError::Dir(parent.to_path_buf(), e))?;
        }
        let opts = RecordOptions {
            events: self.events.clone(),
            output,
            ..RecordOptions::default()
        };
        let rec = Recorder::start(&self.root, opts).map_err(TraceSourceError::Record)?;
        self.recorder = Some(rec);
        self.own = crate::disturbance::own_tasks();
        Ok(())
    }

    fn after(&mut self) -> Result<Vec<Metric>, ProbeError> {
        let Some(rec) = self.recorder.take() else {
            return Ok(Vec::new());
        };
        // Threads that started during the run and still live were forked in the trace too;
        // these are for threads that began before it.
        self.own.extend(crate::disturbance::own_tasks());
        let s = rec.stop().map_err(TraceSourceError::Record)?;
        self.last = Some(s.path.clone());
        let m = |name: &str, v: u64, unit: &str| {
            Metric::new(name.to_string(), v as f64, unit, Direction::Neutral)
        };
        let mut out = vec![
            m("trace.events", s.total_events(), ""),
            m("trace.lost", s.total_lost(), ""),
            m("trace.bytes", s.bytes, "B"),
        ];
        out.extend(analysis_metrics(
            &s.path,
            &std::mem::take(&mut self.own),
            &self.workload_cpus,
        ));
        Ok(out)
    }

    fn trace_path(&mut self) -> Option<PathBuf> {
        self.last.take()
    }
}

/// Side metrics from the idle and wakeups analyses of a trace (none when it lacks the events),
/// and, given the experiment's tasks (`own`, none: skipped), who else ran on the workload's
/// CPUs.
pub(crate) fn analysis_metrics(path: &Path, own: &[i32], workload_cpus: &[u32]) -> Vec<Metric> {
    let Ok(trace) = pmlab_trace::open(path) else {
        return Vec::new();
    };
    let opts = pmlab_analysis::Options::default();
    let mut out = Vec::new();
    if !own.is_empty() {
        out.extend(crate::disturbance::intruders(&trace, own, workload_cpus));
    }
    let n = |name: String, v: f64, unit: &str| Metric::new(name, v, unit, Direction::Neutral);
    if let Ok(idle) = pmlab_analysis::idle::analyze(&trace, &opts) {
        let span_s = idle.span_ns.max(1) as f64 / 1e9;
        let known: Vec<_> = idle
            .cpus
            .iter()
            .filter(|c| c.source != pmlab_analysis::idle::Source::None)
            .collect();
        if !known.is_empty() {
            let share = known.iter().map(|c| c.share).sum::<f64>() / known.len() as f64;
            let entries: u64 = known.iter().map(|c| c.entries).sum();
            out.push(n("trace.idle.share_pct".into(), share * 100.0, "%"));
            out.push(n(
                "trace.idle.entries_per_s".into(),
                entries as f64 / span_s,
                "/s",
            ));
            for c in &known {
                out.push(n("trace.idle.share_pct".into(), c.share * 100.0, "%").on_cpu(c.cpu));
            }
        }
    }
    if let Ok(w) = pmlab_analysis::wakeups::analyze(&trace, &opts) {
        out.push(n(
            "trace.wakeups.per_s".into(),
            w.cpus.iter().map(|c| c.per_s).sum(),
            "/s",
        ));
        let mut by_kind: Vec<(pmlab_analysis::wakeups::CauseKind, f64)> = Vec::new();
        for c in w.causes.iter().filter(|c| c.cpu == u32::MAX) {
            match by_kind.iter_mut().find(|(k, _)| *k == c.cause.kind) {
                Some((_, v)) => *v += c.per_s,
                None => by_kind.push((c.cause.kind, c.per_s)),
            }
        }
        for (kind, v) in by_kind {
            out.push(n(format!("trace.wakeups.{kind}.per_s"), v, "/s"));
        }
        for c in &w.cpus {
            out.push(n("trace.wakeups.per_s".into(), c.per_s, "/s").on_cpu(c.cpu));
        }
        // Needless exits (no task ran before the next idle entry): only on CPUs where they
        // can be seen (cpu_idle logged), never a silent 0 on the others; the total only
        // when every CPU can be seen.
        let mut all = Some(0.0);
        for c in &w.cpus {
            match c.needless_per_s {
                Some(v) => {
                    all = all.map(|a| a + v);
                    out.push(n("trace.wakeups.needless.per_s".into(), v, "/s").on_cpu(c.cpu));
                }
                None => all = None,
            }
        }
        if let Some(v) = all.filter(|_| !w.cpus.is_empty()) {
            out.push(n("trace.wakeups.needless.per_s".into(), v, "/s"));
        }
    }
    out
}

impl Drop for TraceSource {
    fn drop(&mut self) {
        // An interrupted run: stop (and remove the instance of) a recording still going.
        if let Some(rec) = self.recorder.take() {
            let _ = rec.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_dir_is_beside_the_store_and_names_are_safe() {
        assert_eq!(
            traces_dir(Path::new("/srv/x/pmlab.db")),
            PathBuf::from("/srv/x/pmlab.db.traces")
        );
        assert!(traces_dir(Path::new("a.db")).is_absolute());
        assert_eq!(safe("poll ns=200us/x"), "poll_ns_200us_x");
        assert_eq!(safe(""), "run");
    }

    /// Needless wakeups per second where they can be seen: CPU 0 of the haltpoll fixture
    /// logs cpu_idle; CPU 1 does not, so it has no needless metric (not a 0), and there is
    /// no all-CPUs total either.
    #[test]
    fn needless_side_metric_only_where_decidable() {
        let f = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/haltpoll_pipe_off.dat");
        let m = analysis_metrics(&f, &[], &[]);
        let needless: Vec<&Metric> = m
            .iter()
            .filter(|m| m.name == "trace.wakeups.needless.per_s")
            .collect();
        assert_eq!(needless.len(), 1, "{needless:?}");
        assert_eq!(needless[0].cpu, Some(0));
        // 44 needless exits of CPU 0 in the trace's 1.3116 s
        assert!(
            (needless[0].value - 44.0 / 1.311579).abs() < 0.5,
            "{}",
            needless[0].value
        );
    }
}
