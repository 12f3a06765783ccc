//! pmlab from Python (`import pmlab`): trace events, analyses and stored results as Arrow
//! tables through the Arrow C stream interface. No logic of its own: it calls the decoder
//! (pmlab-trace), the analyses (pmlab-analysis) and the result store (pmlab-lab).

mod arrow;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pyo3::create_exception;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use pmlab_trace::columns::Window;
use pmlab_trace::dat::LoadOptions;
use pmlab_trace::TraceError;

use crate::arrow::Table;

create_exception!(
    _pmlab,
    PmlabError,
    PyValueError,
    "A trace, store or argument pmlab cannot use; the message says which and why."
);

/// A pmlab error as a Python exception with pmlab's message (the cause chain joined by ": ").
fn py_err(e: &(dyn std::error::Error + 'static)) -> PyErr {
    PmlabError::new_err(pmlab_kernel::error_chain(e))
}

/// [`py_err`] for an error about the file at `path`.
fn path_err(path: &Path, e: &(dyn std::error::Error + 'static)) -> PyErr {
    PmlabError::new_err(format!(
        "{}: {}",
        path.display(),
        pmlab_kernel::error_chain(e)
    ))
}

/// Trace errors: file-system ones as the matching `OSError`, the others as [`PmlabError`].
fn trace_err(e: TraceError) -> PyErr {
    if let TraceError::Io { err, .. } = &e {
        let msg = e.to_string();
        return match err.kind() {
            std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
            std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
            _ => PyOSError::new_err(msg),
        };
    }
    py_err(&e)
}

/// A trace file: its headers at once, its events decoded on first use (once).
#[pyclass(frozen, module = "pmlab")]
struct Trace {
    path: PathBuf,
    /// Formats, CPUs, clock, uname: read by `open`.
    head: Arc<pmlab_trace::Trace>,
    /// The decoded events, when first needed.
    full: Mutex<Option<Arc<pmlab_trace::Trace>>>,
    /// Event names and counts, counted once (each count walks every event).
    names: std::sync::OnceLock<Vec<(String, u16, u64)>>,
}

impl Trace {
    /// The decoded trace; the first call decodes it, without the GIL.
    fn full(&self, py: Python<'_>) -> PyResult<Arc<pmlab_trace::Trace>> {
        py.detach(|| {
            let mut g = self.full.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(t) = &*g {
                return Ok(t.clone());
            }
            let t = Arc::new(
                pmlab_trace::open_with(&self.path, &LoadOptions::without_kallsyms())
                    .map_err(trace_err)?,
            );
            *g = Some(t.clone());
            Ok(t)
        })
    }

    /// The event id named `name` (`NAME` or `SYSTEM:NAME`). Unknown, the error lists the
    /// trace's events with their counts, close matches first (the events are decoded for that).
    fn event_id(&self, py: Python<'_>, name: &str) -> PyResult<u16> {
        let (sys, ev) = name.split_once(':').unwrap_or(("", name));
        match self.head.event_id(sys, ev) {
            Some(id) => Ok(id),
            None => {
                let full = self.full(py)?;
                Err(path_err(&self.path, &full.unknown_event(name)))
            }
        }
    }
}

/// Selected CPUs and time window of `arrow()`, checked.
fn window(cpus: Option<Vec<i64>>, start: Option<u64>, end: Option<u64>) -> PyResult<Window> {
    let cpus = cpus
        .map(|v| {
            v.into_iter()
                .map(|c| {
                    u32::try_from(c)
                        .map_err(|_| PmlabError::new_err(format!("cpus: {c} is not a CPU number")))
                })
                .collect::<PyResult<Vec<u32>>>()
        })
        .transpose()?;
    if let (Some(s), Some(e)) = (start, end) {
        if e < s {
            return Err(PmlabError::new_err(format!(
                "end ({e}) is before start ({s})"
            )));
        }
    }
    Ok(Window { cpus, start, end })
}

#[pymethods]
impl Trace {
    /// Write the trace for Perfetto (`pmlab export --perfetto`): one file, streamed, renamed
    /// into place when complete. Returns the number of events written.
    fn to_perfetto(&self, py: Python<'_>, path: PathBuf) -> PyResult<u64> {
        let full = self.full(py)?;
        py.detach(|| {
            pmlab_dump::perfetto::export_to_path(&full, &path)
                .map(|s| s.events_per_cpu.iter().sum())
                .map_err(|e| py_err(&e))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<pmlab.Trace {} ({}, {} CPUs, {} event formats)>",
            self.path.display(),
            self.head.source,
            self.head.cpus,
            self.head.formats.len()
        )
    }

    /// The file this trace was opened from.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Number of CPUs the trace covers (`cpus=` of `trace-cmd report`).
    #[getter]
    fn cpus(&self) -> u32 {
        self.head.cpus
    }

    /// Events by name with their counts, most frequent first (decodes the trace once).
    #[getter]
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let full = self.full(py)?;
        let d = PyDict::new(py);
        for (name, _, n) in self.names.get_or_init(|| full.event_names()) {
            d.set_item(name, n)?;
        }
        Ok(d)
    }

    /// Kernel release, clock, file format version, lost events per CPU and more.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let full = self.full(py)?;
        let s = pmlab_trace::summary::summarize(&full);
        let m = &full.meta;
        let d = PyDict::new(py);
        d.set_item("kernel_release", m.kernel_release().map(str::to_string))?;
        d.set_item("uname", m.uname.clone())?;
        d.set_item("clock", m.clock.clone())?;
        d.set_item("ts_in_ns", m.ts_in_ns)?;
        d.set_item("version", m.version)?;
        d.set_item("compression", m.compression.clone())?;
        d.set_item("source", full.source.clone())?;
        d.set_item("endian", s.endian)?;
        d.set_item("long_size", full.long_size)?;
        d.set_item("page_size", full.page_size)?;
        d.set_item("cpus", full.cpus)?;
        d.set_item("buffers", m.buffers.clone())?;
        d.set_item("events", s.events)?;
        d.set_item("first_ts", s.first_ts)?;
        d.set_item("last_ts", s.last_ts)?;
        let lost = PyDict::new(py);
        for c in &s.per_cpu {
            lost.set_item(c.cpu, c.lost)?;
        }
        d.set_item("lost_events", lost)?;
        Ok(d)
    }

    /// One event as an Arrow table: `ts` (ns, uint64), `cpu`, `pid`, `comm` (dictionary),
    /// then every field of its format, typed. `columns` picks and orders columns; `cpus`,
    /// `start` and `end` (`start <= ts < end`) select rows. The GIL is released meanwhile.
    #[pyo3(signature = (event, columns=None, cpus=None, start=None, end=None))]
    fn arrow(
        &self,
        py: Python<'_>,
        event: &str,
        columns: Option<Vec<String>>,
        cpus: Option<Vec<i64>>,
        start: Option<u64>,
        end: Option<u64>,
    ) -> PyResult<Table> {
        let id = self.event_id(py, event)?;
        let win = window(cpus, start, end)?;
        let full = self.full(py)?;
        let path = self.path.clone();
        py.detach(move || {
            let rows = full.rows(id, &win);
            arrow::event_table(&full, id, columns.as_deref(), &rows)
                .map_err(|e| path_err(&path, &e))
        })
    }

    /// Every event (or those named) as Arrow tables, by name: the whole trace at once,
    /// built on all cores without the GIL.
    #[pyo3(signature = (events=None))]
    fn tables<'py>(
        &self,
        py: Python<'py>,
        events: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let built = self.build_all(py, events)?;
        let d = PyDict::new(py);
        for (name, t) in built {
            d.set_item(name, Bound::new(py, t)?)?;
        }
        Ok(d)
    }

    /// One Parquet file per event into `dir` (`DIR/EVENT.parquet`); returns the paths
    /// written. `layout="pmlab"` (default): the columns of `t.arrow(event)`. `layout="lisa"`:
    /// the columns, types and `meta.json` of LISA's `trace-dump parquet`, for LISA's loader.
    #[pyo3(signature = (dir, events=None, layout="pmlab"))]
    fn to_parquet(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        events: Option<Vec<String>>,
        layout: &str,
    ) -> PyResult<Vec<PathBuf>> {
        match layout {
            "pmlab" => {}
            "lisa" => return self.to_lisa(py, dir, events),
            other => {
                let e = pmlab_trace::names::Unknown::new(
                    pmlab_trace::names::NameKind::Layout,
                    other,
                    "for to_parquet",
                    ["pmlab", "lisa"]
                        .map(pmlab_trace::names::Known::new)
                        .to_vec(),
                );
                return Err(py_err(&e));
            }
        }
        let built = self.build_all(py, events)?;
        py.detach(|| {
            std::fs::create_dir_all(&dir)
                .map_err(|e| PyOSError::new_err(format!("{}: {e}", dir.display())))?;
            let mut out = Vec::new();
            for (name, t) in &built {
                let p = dir.join(pmlab_dump::lisa::file_name(name));
                arrow::write_parquet(&p, t).map_err(|e| py_err(e.as_ref()))?;
                out.push(p);
            }
            Ok(out)
        })
    }

    /// `t.arrow(...)` as a polars DataFrame (needs polars).
    #[pyo3(signature = (event, columns=None, cpus=None, start=None, end=None))]
    fn polars<'py>(
        &self,
        py: Python<'py>,
        event: &str,
        columns: Option<Vec<String>>,
        cpus: Option<Vec<i64>>,
        start: Option<u64>,
        end: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = Bound::new(py, self.arrow(py, event, columns, cpus, start, end)?)?;
        Table::to_polars(&t)
    }

    /// `t.arrow(...)` as a pandas DataFrame (needs pandas and pyarrow).
    #[pyo3(signature = (event, columns=None, cpus=None, start=None, end=None))]
    fn pandas<'py>(
        &self,
        py: Python<'py>,
        event: &str,
        columns: Option<Vec<String>>,
        cpus: Option<Vec<i64>>,
        start: Option<u64>,
        end: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = Bound::new(py, self.arrow(py, event, columns, cpus, start, end)?)?;
        Table::to_pandas(&t)
    }
}

impl Trace {
    /// `to_parquet(dir, events, layout="lisa")`: the events named (all when None) checked
    /// first, then written with the file's kallsyms (`symbols-address`).
    fn to_lisa(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        events: Option<Vec<String>>,
    ) -> PyResult<Vec<PathBuf>> {
        let full = self.full(py)?;
        let wanted: Option<Vec<(String, u16)>> = events
            .map(|list| {
                list.iter()
                    .map(|e| Ok((e.clone(), self.event_id(py, e)?)))
                    .collect::<PyResult<_>>()
            })
            .transpose()?;
        let path = self.path.clone();
        py.detach(move || {
            let opts = LoadOptions {
                kallsyms: true,
                events: false,
            };
            let head = pmlab_trace::open_with(&path, &opts).map_err(trace_err)?;
            pmlab_dump::lisa::write_dir(&full, &head.kallsyms, &dir, wanted.as_deref())
                .map(|w| w.files)
                .map_err(|e| py_err(&e))
        })
    }

    /// Tables of the named events (all with events when None), built in parallel.
    fn build_all(
        &self,
        py: Python<'_>,
        events: Option<Vec<String>>,
    ) -> PyResult<Vec<(String, Table)>> {
        let full = self.full(py)?;
        let named = self.names.get_or_init(|| full.event_names());
        let wanted: Vec<(String, u16)> = match events {
            None => named.iter().map(|(n, id, _)| (n.clone(), *id)).collect(),
            Some(list) => list
                .iter()
                .map(|e| Ok((e.clone(), self.event_id(py, e)?)))
                .collect::<PyResult<_>>()?,
        };
        let path = self.path.clone();
        py.detach(move || arrow::event_tables(&full, &wanted).map_err(|e| path_err(&path, &e)))
    }
}

/// Open a trace (trace.dat v6/v7 or ftrace text): reads the headers only; events are
/// decoded when first asked for.
#[pyfunction]
fn open(py: Python<'_>, path: PathBuf) -> PyResult<Trace> {
    let opts = LoadOptions {
        kallsyms: false,
        events: false,
    };
    let head = py
        .detach(|| pmlab_trace::open_with(&path, &opts))
        .map_err(trace_err)?;
    // ftrace text has no separate headers: its one read decoded everything.
    let head = Arc::new(head);
    let full = (head.meta.version == 0).then(|| head.clone());
    Ok(Trace {
        path,
        head,
        full: Mutex::new(full),
        names: std::sync::OnceLock::new(),
    })
}

/// The tables `pmlab analyze --export` writes, by name, as Arrow tables. `only` selects
/// analyses (idle, wakeups, hotplug, sched, freq, energy, haltpoll, whatif, kicks, kvm); default all.
#[pyfunction]
#[pyo3(signature = (path, only=None))]
fn analyze<'py>(
    py: Python<'py>,
    path: PathBuf,
    only: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    use pmlab_analysis::all;
    let only: Vec<all::Analysis> = only
        .unwrap_or_default()
        .iter()
        .map(|o| o.parse())
        .collect::<Result<_, all::UnknownAnalysis>>()
        .map_err(|e| PmlabError::new_err(e.to_string()))?;
    let tables = py.detach(|| -> PyResult<Vec<(String, Table)>> {
        use pmlab_analysis::file::{self, FileRequest, InputError};
        let req = FileRequest {
            only,
            ..FileRequest::default()
        };
        let analyzed = file::analyze_file(&path, &req, false).map_err(|e| match e {
            InputError::Trace { source, .. } => trace_err(source),
            e => py_err(&e),
        })?;
        analyzed
            .tables()
            .iter()
            .map(|t| {
                Ok((
                    t.name.clone(),
                    arrow::analysis_table(t).map_err(|e| py_err(&e))?,
                ))
            })
            .collect()
    })?;
    let d = PyDict::new(py);
    for (name, t) in tables {
        d.set_item(name, Bound::new(py, t)?)?;
    }
    Ok(d)
}

/// What idle polling would have done (`pmlab whatif --json`), as a dict. `values` are poll
/// values: ints (ns) or strings with a unit (`"200us"`); default 0..500 µs. `calibrate`: a
/// trace recorded with polling on, whose polls give the poll-path costs.
#[pyfunction]
#[pyo3(signature = (path, policy="haltpoll", values=None, reverse=false, calibrate=None))]
fn whatif<'py>(
    py: Python<'py>,
    path: PathBuf,
    policy: &str,
    values: Option<Vec<Bound<'py, PyAny>>>,
    reverse: bool,
    calibrate: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    use pmlab_analysis::replay::{self, Config, Policy};
    // Everything given is checked before any trace is read.
    let policy: Policy = policy
        .parse()
        .map_err(|e: replay::UnknownPolicy| PmlabError::new_err(e.to_string()))?;
    let values_ns = match values {
        None => replay::DEFAULT_VALUES_NS.to_vec(),
        Some(v) => v
            .iter()
            .map(|x| {
                let s = x.str()?.to_string();
                pmlab_workload::units::parse_ns(&s)
                    .map_err(|e| PmlabError::new_err(format!("poll value {e}")))
            })
            .collect::<PyResult<_>>()?,
    };
    let json = py.detach(|| -> PyResult<String> {
        let opts = pmlab_analysis::Options::default();
        let calibration = match &calibrate {
            Some(p) => {
                let t = pmlab_trace::open_with(p, &LoadOptions::without_kallsyms())
                    .map_err(trace_err)?;
                let input = replay::prepare(&t, &opts).map_err(|e| py_err(&e))?;
                Some(input.own_calibration.from_other(&p.display().to_string()))
            }
            None => None,
        };
        let (haltpoll, note) = replay::governor::machine_or_default();
        let trace =
            pmlab_trace::open_with(&path, &LoadOptions::without_kallsyms()).map_err(trace_err)?;
        let cfg = Config {
            policy,
            values_ns,
            haltpoll,
            reverse,
            pingpong: None,
            calibration,
            spent: replay::Spent::FreedInBackground,
        };
        let mut report = replay::run(&trace, &opts, &cfg).map_err(|e| py_err(&e))?;
        if policy == Policy::Haltpoll {
            report.notes.push(note.into());
        }
        serde_json::to_string(&report).map_err(|e| py_err(&e))
    })?;
    py.import("json")?.call_method1("loads", (json,))
}

/// The result store at `db` as Arrow tables: `experiments`, `configurations`, `runs` and
/// `metrics` (every experiment; they join on `experiment`, `configuration` and `run`).
#[pyfunction]
fn results<'py>(py: Python<'py>, db: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let tables = py.detach(|| -> PyResult<BTreeMap<&'static str, Table>> {
        use pmlab_store::store::{Store, StoreError};
        let store = Store::open_existing(&db).map_err(|e| match e {
            StoreError::Missing { .. } => PyFileNotFoundError::new_err(e.to_string()),
            e => py_err(&e),
        })?;
        let mut per: BTreeMap<&'static str, Vec<pmlab_analysis::parquet::Table>> = BTreeMap::new();
        for info in store.list().map_err(|e| py_err(&e))? {
            let e = store.load(info.id).map_err(|e| py_err(&e))?;
            for (name, t) in pmlab_store::export::parquet_tables(&e) {
                per.entry(name).or_default().push(t);
            }
        }
        let mut out = BTreeMap::new();
        for name in ["experiment", "configurations", "runs", "metrics"] {
            let key = if name == "experiment" {
                "experiments"
            } else {
                name
            };
            let parts = per.remove(name).unwrap_or_default();
            out.insert(key, arrow::store_table(&parts).map_err(|e| py_err(&e))?);
        }
        Ok(out)
    })?;
    let d = PyDict::new(py);
    for (name, t) in tables {
        d.set_item(name, Bound::new(py, t)?)?;
    }
    Ok(d)
}

/// A knob assignment, `NAME[@CPUS]=VALUE`, parsed as pmlab parses it (once, by
/// pmlab-kernel); `str()` gives back the same text. Bad text raises `PmlabError` (a
/// `ValueError`) saying what is wrong.
#[pyclass(frozen, eq, hash, module = "pmlab")]
#[derive(PartialEq, Hash)]
struct Assignment(pmlab_kernel::knob::Assignment);

#[pymethods]
impl Assignment {
    #[new]
    fn new(text: &str) -> PyResult<Self> {
        text.parse().map(Assignment).map_err(|e| py_err(&e))
    }
    /// The knob's name, without `@CPUS` (`cpuidle.POLL.disable`).
    #[getter]
    fn knob(&self) -> &str {
        self.0.knob().name()
    }
    /// The CPUs it is limited to, sorted; None: every CPU the knob applies to.
    #[getter]
    fn cpus(&self) -> Option<Vec<u32>> {
        self.0.knob().cpus().map(<[u32]>::to_vec)
    }
    /// The value as written (`200us`, `on`): the knob checks it when it is set.
    #[getter]
    fn value(&self) -> &str {
        self.0.value()
    }
    fn __str__(&self) -> String {
        self.0.to_string()
    }
    fn __repr__(&self) -> String {
        format!("Assignment({:?})", self.0.to_string())
    }
}

#[pymodule]
fn _pmlab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(results, m)?)?;
    m.add_function(wrap_pyfunction!(whatif, m)?)?;
    m.add_class::<Trace>()?;
    m.add_class::<Table>()?;
    m.add_class::<Assignment>()?;
    m.add("PmlabError", m.py().get_type::<PmlabError>())?;
    m.add("KINDS", PyList::new(m.py(), pmlab_analysis::all::KINDS)?)?;
    Ok(())
}
