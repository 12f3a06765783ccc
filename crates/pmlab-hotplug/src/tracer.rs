//! The lab's tracer: a private `pmlab_trace::record::Recorder` (cpuhp events and
//! sched_switch, on CLOCK_MONOTONIC like the timed writes) whose trace is cut into the timed
//! operations by `pmlab_analysis::hotplug`.

use std::path::PathBuf;

use pmlab_analysis::hotplug::{self as analysis, Window};
use pmlab_kernel::Root;
use pmlab_trace::record::{RecordOptions, Recorder};

use super::states::StateTable;
use super::sysfs::Direction;
use super::trace::OpTrace;
use super::{HotplugError, Paths};

/// A recording in progress; dropping it removes the instance and the temp file.
pub struct LabTracer {
    rec: Option<Recorder>,
    dir: PathBuf,
}

/// One timed operation to find in the trace.
#[derive(Debug, Clone, Copy)]
pub struct TimedOp {
    /// The CPU written.
    pub cpu: u32,
    /// Offline or online.
    pub direction: Direction,
    /// CLOCK_MONOTONIC just before the write.
    pub start_ns: u64,
    /// CLOCK_MONOTONIC just after it returned.
    pub end_ns: u64,
}

fn err(what: impl std::fmt::Display) -> HotplugError {
    HotplugError::Unexpected(format!("tracing: {what}"))
}

impl LabTracer {
    /// Start recording; the reader threads run on online CPUs outside `cycled` where any.
    pub fn start(paths: &Paths, cycled: &[u32]) -> Result<LabTracer, HotplugError> {
        let root = Root::new(paths.root.clone());
        let dir = std::env::temp_dir().join(format!("pmlab-hotplug-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|source| HotplugError::Io {
            path: dir.clone(),
            source,
        })?;
        let others: Vec<u32> = super::sysfs::online_cpus(&paths.sys_cpu())?
            .into_iter()
            .filter(|c| !cycled.contains(c))
            .collect();
        let opts = RecordOptions {
            reader_cpus: (!others.is_empty()).then_some(others),
            // Interrupt entries and exits account for time between steps.
            events: [
                "cpuhp",
                "sched:sched_switch",
                "irq:irq_handler_entry",
                "irq:irq_handler_exit",
                "irq:softirq_entry",
                "irq:softirq_exit",
                "irq_vectors",
            ]
            .map(String::from)
            .to_vec(),
            buffer_kb: Some(4096),
            output: dir.join("hotplug.dat"),
            ..RecordOptions::default()
        };
        let mut t = LabTracer { rec: None, dir };
        let rec = Recorder::start(&root, opts).map_err(err)?;
        // The writes are timed with CLOCK_MONOTONIC: trace with the same clock. (Setting the
        // clock clears the buffer; nothing has been measured yet.)
        let clock = rec
            .instance_dir()
            .map(|d| d.join("trace_clock"))
            .ok_or_else(|| err("the recorder has no instance"))?;
        t.rec = Some(rec);
        std::fs::write(&clock, "mono").map_err(|source| HotplugError::Io {
            path: clock,
            source,
        })?;
        Ok(t)
    }

    /// Stop, read the trace and return each operation's steps (None where none were traced),
    /// with notes (lost events, analysis remarks).
    pub fn finish(
        mut self,
        ops: &[TimedOp],
        table: &StateTable,
    ) -> Result<(Vec<Option<OpTrace>>, Vec<String>), HotplugError> {
        let rec = self.rec.take().ok_or_else(|| err("not recording"))?;
        let summary = rec.stop().map_err(err)?;
        let mut notes = Vec::new();
        if summary.total_lost() > 0 {
            notes.push(format!(
                "the trace lost {} events; some operations may lack steps",
                summary.total_lost()
            ));
        }
        let trace = pmlab_trace::open(&summary.path).map_err(err)?;
        let states: Vec<(u32, String)> = table
            .states
            .iter()
            .filter(|s| s.number >= 0)
            .map(|s| (s.number as u32, s.name.clone()))
            .collect();
        let windows: Vec<Window> = ops
            .iter()
            .map(|o| Window {
                cpu: o.cpu,
                direction: o.direction,
                start_ns: o.start_ns,
                end_ns: o.end_ns,
            })
            .collect();
        let (report, index) =
            analysis::analyze_windows(&trace, Some(&states), &windows).map_err(err)?;
        notes.extend(report.notes.iter().cloned());
        let traces = index
            .iter()
            .map(|k| k.map(|k| OpTrace::from_operation(&report.operations[k])))
            .collect();
        Ok((traces, notes))
    }
}

impl Drop for LabTracer {
    fn drop(&mut self) {
        drop(self.rec.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
