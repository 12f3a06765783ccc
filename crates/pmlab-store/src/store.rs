//! The result store: one SQLite file (WAL mode, busy timeout) holding experiments, their
//! configurations and knobs, workloads, runs, metrics and a system snapshot. Raw data only;
//! statistics are derived at read time (see `report`).
//!
//! The file is recognised by its SQLite header's application id (`PMLB`), checked before
//! anything is written; the schema version is kept in `PRAGMA user_version` and in the `meta`
//! table, and older stores are migrated on open.

use crate::spec::{self, Budget};
use crate::system::SystemSnapshot;
use pmlab_kernel::{Direction, Metric, MetricKey};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// SQLite application id of a pmlab store: "PMLB".
pub(crate) const APPLICATION_ID: i32 = 0x504D_4C42;
/// How long a writer waits for another writer before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Schema migrations; migration `i` brings the store from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 0 → 1: the first schema.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE experiments (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        command TEXT NOT NULL,
        created_ns INTEGER NOT NULL,
        finished_ns INTEGER,
        status TEXT NOT NULL,
        stop_reason TEXT,
        seed INTEGER NOT NULL,
        target_ci REAL NOT NULL,
        max_runs INTEGER,
        max_time_s REAL,
        reference INTEGER NOT NULL,
        spec_json TEXT NOT NULL,
        owner_pid INTEGER,
        owner_start INTEGER);
     CREATE TABLE configurations (
        id INTEGER PRIMARY KEY,
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        position INTEGER NOT NULL,
        label TEXT NOT NULL);
     CREATE TABLE knobs (
        configuration_id INTEGER NOT NULL REFERENCES configurations(id),
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        value TEXT NOT NULL);
     CREATE TABLE workloads (
        id INTEGER PRIMARY KEY,
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        position INTEGER NOT NULL,
        label TEXT NOT NULL,
        argv_json TEXT NOT NULL);
     CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        configuration_id INTEGER NOT NULL REFERENCES configurations(id),
        workload_id INTEGER NOT NULL REFERENCES workloads(id),
        round INTEGER NOT NULL,
        position INTEGER NOT NULL,
        warmup INTEGER NOT NULL,
        started_ns INTEGER NOT NULL,
        duration_ns INTEGER NOT NULL,
        status TEXT NOT NULL,
        error TEXT);
     CREATE TABLE metrics (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        value REAL NOT NULL,
        unit TEXT NOT NULL,
        direction TEXT NOT NULL,
        side INTEGER NOT NULL);
     CREATE TABLE system (
        experiment_id INTEGER PRIMARY KEY REFERENCES experiments(id),
        kernel_release TEXT NOT NULL,
        cmdline TEXT NOT NULL,
        cpu_model TEXT NOT NULL,
        cpus INTEGER NOT NULL,
        virtualization TEXT NOT NULL,
        knobs_json TEXT NOT NULL);
     CREATE INDEX runs_by_experiment ON runs(experiment_id);
     CREATE INDEX metrics_by_run ON metrics(run_id);",
    // 1 → 2: traces per run; host and boot id to tell boots apart.
    "ALTER TABLE runs ADD COLUMN trace_path TEXT;
     ALTER TABLE system ADD COLUMN hostname TEXT NOT NULL DEFAULT '';
     ALTER TABLE system ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';",
    // 2 → 3: the cpuidle driver (`none`: idle is the arch default and polling knobs do nothing).
    "ALTER TABLE system ADD COLUMN cpuidle_driver TEXT NOT NULL DEFAULT '';",
    // 3 → 4: a metric's CPU in a column of its own; names written `NAME@cpuN` by older
    // versions are split into NAME and N.
    "ALTER TABLE metrics ADD COLUMN cpu INTEGER;
     UPDATE metrics
        SET cpu = CAST(substr(name, instr(name, '@cpu') + 4) AS INTEGER),
            name = substr(name, 1, instr(name, '@cpu') - 1)
      WHERE instr(name, '@cpu') > 1
        AND substr(name, instr(name, '@cpu') + 4) <> ''
        AND substr(name, instr(name, '@cpu') + 4) NOT GLOB '*[^0-9]*';",
    // 4 → 5: an id that stays with an experiment across stores (imports skip what they hold),
    // and the rest of the machine's identity: kernel build (`uname -v`) and pmlab version.
    "ALTER TABLE experiments ADD COLUMN uid TEXT;
     UPDATE experiments SET uid = lower(hex(randomblob(16)));
     CREATE UNIQUE INDEX experiments_by_uid ON experiments(uid);
     ALTER TABLE system ADD COLUMN kernel_build TEXT NOT NULL DEFAULT '';
     ALTER TABLE system ADD COLUMN pmlab_version TEXT NOT NULL DEFAULT '';",
    // 5 → 6: the idle time before each measured run (NULL: not recorded, older versions).
    "ALTER TABLE experiments ADD COLUMN settle_s REAL;",
    // 6 → 7: hotplug sessions and injection walks get kinds of their own; older versions
    // stored them as `run-spec` with workloads whose argv starts with `hotplug` (the walk
    // named `hotplug inject-fail`). The kind is in the row and in the stored spec.
    "UPDATE experiments SET kind = CASE WHEN name = 'hotplug inject-fail' THEN 'inject' ELSE 'hotplug' END
      WHERE kind = 'run-spec'
        AND EXISTS (SELECT 1 FROM workloads w
                     WHERE w.experiment_id = experiments.id
                       AND json_valid(w.argv_json)
                       AND json_extract(w.argv_json, '$[0]') = 'hotplug');
     UPDATE experiments SET spec_json = json_set(spec_json, '$.kind', kind)
      WHERE kind IN ('hotplug', 'inject') AND json_valid(spec_json);",
    // 7 → 8: a hotplug or injection run's CPU is the `cpu` of its metrics; older versions
    // stored it as a value metric named `cpu`, which goes.
    "CREATE TEMP TABLE run_cpu AS
       SELECT m.run_id AS run_id, CAST(m.value AS INTEGER) AS cpu FROM metrics m
         JOIN runs r ON r.id = m.run_id
         JOIN experiments e ON e.id = r.experiment_id
        WHERE e.kind IN ('hotplug', 'inject') AND m.name = 'cpu' AND m.cpu IS NULL;
     UPDATE metrics SET cpu = (SELECT c.cpu FROM run_cpu c WHERE c.run_id = metrics.run_id)
      WHERE cpu IS NULL AND name <> 'cpu' AND run_id IN (SELECT run_id FROM run_cpu);
     DELETE FROM metrics WHERE name = 'cpu' AND cpu IS NULL
        AND run_id IN (SELECT run_id FROM run_cpu);
     DROP TABLE run_cpu;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Store errors; each names the store file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file exists but is not a pmlab store; it is left untouched.
    #[error("{path}: not a pmlab result store ({why}); refusing to touch it")]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// Why it is not a store.
        why: String,
    },
    /// The store's schema is newer than this build knows.
    #[error("{path}: store schema version {found} is newer than this pmlab understands ({known}); upgrade pmlab")]
    TooNew {
        /// The store file.
        path: PathBuf,
        /// The store's schema version.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// The store file (or its trace directory) could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// SQLite failed.
    #[error("{path}: {source}")]
    Sqlite {
        /// The store file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// No store file where one was to be read ([`Store::open_existing`] never creates one).
    #[error("{path}: {}", if *.is_dir { "is a directory, not a pmlab result store" } else {
        "no such result store (experiments and `pmlab study` create one; give --db PATH)"
    })]
    Missing {
        /// The path given.
        path: PathBuf,
        /// It is a directory.
        is_dir: bool,
    },
    /// An experiment id that is neither a number nor `latest`.
    #[error("`{given}` is not an experiment id (a number, or `latest`)")]
    BadId {
        /// What was given.
        given: String,
    },
    /// `latest` asked of a store that holds no experiment.
    #[error("{path}: the store has no experiment yet")]
    Empty {
        /// The store file.
        path: PathBuf,
    },
    /// The store holds no experiment with that id.
    #[error("{path}: no experiment {id}")]
    NoSuchExperiment {
        /// The store file.
        path: PathBuf,
        /// The id asked for.
        id: i64,
    },
    /// The store holds no run with that id.
    #[error("{path}: no run {run}")]
    NoSuchRun {
        /// The store file.
        path: PathBuf,
        /// The run id asked for.
        run: i64,
    },
    /// The run was not traced.
    #[error("{path}: run {run} recorded no trace (run the experiment with --trace)")]
    RunNotTraced {
        /// The store file.
        path: PathBuf,
        /// The run's id.
        run: i64,
    },
    /// A run's trace file is no longer where the store says.
    #[error("{path}: run {run}'s trace {} is gone", .trace.display())]
    TraceMissing {
        /// The store file.
        path: PathBuf,
        /// The run's id.
        run: i64,
        /// Where the trace was.
        trace: PathBuf,
    },
}

/// Status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// The run finished and its metrics count.
    Ok,
    /// The run failed; `error` says why.
    Failed,
    /// Cut short by an interruption; its metrics (if any) are not used.
    Interrupted,
}

impl RunStatus {
    /// The name the store records (`ok`, `failed`, `interrupted`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }
    fn parse(s: &str) -> RunStatus {
        match s {
            "ok" => RunStatus::Ok,
            "interrupted" => RunStatus::Interrupted,
            _ => RunStatus::Failed,
        }
    }
}

/// Status of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentStatus {
    /// Runs are still being added (or its process died: see `ExperimentInfo::status`).
    Running,
    /// Ended by its stopping rule.
    Complete,
    /// Interrupted (signal, error, or its process died); the runs so far are kept.
    Incomplete,
}

impl ExperimentStatus {
    /// The name the store records (`running`, `complete`, `incomplete`).
    pub fn as_str(self) -> &'static str {
        match self {
            ExperimentStatus::Running => "running",
            ExperimentStatus::Complete => "complete",
            ExperimentStatus::Incomplete => "incomplete",
        }
    }
    fn parse(s: &str) -> ExperimentStatus {
        match s {
            "running" => ExperimentStatus::Running,
            "complete" => ExperimentStatus::Complete,
            _ => ExperimentStatus::Incomplete,
        }
    }
}

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) for a time in ns since the epoch.
pub fn format_time(ns: i64) -> String {
    jiff::Timestamp::from_nanosecond(i128::from(ns))
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|_| ns.to_string())
}

/// Start time (in clock ticks since boot) of a process, to tell a live owner from a reused pid.
fn process_start(pid: u32) -> Option<u64> {
    pmlab_kernel::procstat::ProcStat::of(i64::from(pid)).map(|s| s.start_ticks)
}

/// An open result store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// Ids given to a new experiment's rows.
#[derive(Debug, Clone)]
pub struct ExperimentIds {
    /// The experiment's id.
    pub experiment: i64,
    /// Configuration ids, in the experiment's configuration order.
    pub configurations: Vec<i64>,
    /// Workload ids, in the experiment's workload order.
    pub workloads: Vec<i64>,
}

/// One run to insert.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// The experiment's id.
    pub experiment: i64,
    /// The configuration's id (from [`ExperimentIds`]).
    pub configuration: i64,
    /// The workload's id (from [`ExperimentIds`]).
    pub workload: i64,
    /// The round, from 0.
    pub round: usize,
    /// Position of the run within its round, from 0.
    pub position: usize,
    /// A discarded warm-up run.
    pub warmup: bool,
    /// Start, ns since the Unix epoch.
    pub started_ns: i64,
    /// Wall time of the run, ns.
    pub duration_ns: i64,
    /// How the run ended.
    pub status: RunStatus,
    /// Why it failed; None when it did not.
    pub error: Option<String>,
    /// The workload's metrics, primary first.
    pub metrics: Vec<Metric>,
    /// Side metrics (counters, traces).
    pub side_metrics: Vec<Metric>,
    /// The run's trace file; None: not traced.
    pub trace_path: Option<PathBuf>,
}

/// An experiment's row, as listed.
#[derive(Debug, Clone, Serialize)]
pub struct ExperimentInfo {
    /// Its id in this store.
    pub id: i64,
    /// Stays with the experiment when it is copied to another store (remote runs, bundles).
    pub uid: String,
    /// The experiment's kind (`compare`, `sweep`, `run-spec`, `hotplug`, `inject`).
    pub kind: spec::Kind,
    /// The experiment's name.
    pub name: String,
    /// The command line that made it.
    pub command: String,
    /// Creation time, ns since the Unix epoch.
    pub created_ns: i64,
    /// End time, ns since the Unix epoch; None: not finished.
    pub finished_ns: Option<i64>,
    /// Effective status: a `running` experiment whose process is gone reads as incomplete.
    pub status: ExperimentStatus,
    /// Why it stopped, in words; None: not stopped yet.
    pub stop_reason: Option<String>,
    /// Seed of the per-round shuffles.
    pub seed: u64,
    /// Target relative CI half-width of the stopping rule (e.g. 0.02).
    pub target_ci: f64,
    /// Run limit; None: none.
    pub max_runs: Option<i64>,
    /// Wall time limit, s; None: none.
    pub max_time_s: Option<f64>,
    /// Idle time before each measured run (None: not recorded by the pmlab that ran it).
    pub settle_s: Option<f64>,
    /// Index of the reference configuration.
    pub reference: usize,
    /// Number of configurations.
    pub configurations: usize,
    /// Number of workloads.
    pub workloads: usize,
    /// Number of measured runs stored (warm-ups not counted).
    pub runs: usize,
    /// Number of measured runs that did not end ok (failed or interrupted).
    pub failed_runs: usize,
}

/// A stored configuration.
#[derive(Debug, Clone, Serialize)]
pub struct StoredConfiguration {
    /// Its id in this store.
    pub id: i64,
    /// The configuration's label.
    pub label: String,
    /// Its knob assignments, `NAME[@CPUS]=VALUE` each.
    pub knobs: Vec<String>,
}

/// A stored workload.
#[derive(Debug, Clone, Serialize)]
pub struct StoredWorkload {
    /// Its id in this store.
    pub id: i64,
    /// The workload's label.
    pub label: String,
    /// The arguments of `pmlab run`.
    pub argv: Vec<String>,
}

/// A stored metric of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredMetric {
    /// The metric's name.
    pub name: String,
    /// The CPU of a per-CPU metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// The value, in `unit`.
    pub value: f64,
    /// Its unit (`ns`, `us/op`, `1/s`, ...).
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// A side metric (counters, traces), not the workload's own.
    pub side: bool,
}

/// A stored run; `configuration` and `workload` are indices into the experiment's lists.
#[derive(Debug, Clone, Serialize)]
pub struct StoredRun {
    /// Its id in this store.
    pub id: i64,
    /// Index into the experiment's configurations.
    pub configuration: usize,
    /// Index into the experiment's workloads.
    pub workload: usize,
    /// The round, from 0.
    pub round: usize,
    /// Position of the run within its round, from 0.
    pub position: usize,
    /// A discarded warm-up run.
    pub warmup: bool,
    /// Start, ns since the Unix epoch.
    pub started_ns: i64,
    /// Wall time of the run, ns.
    pub duration_ns: i64,
    /// How the run ended.
    pub status: RunStatus,
    /// Why it failed; None when it did not.
    pub error: Option<String>,
    /// The run's trace file; None: not traced.
    pub trace_path: Option<String>,
    /// Its metrics, the workload's primary first.
    pub metrics: Vec<StoredMetric>,
}

/// Everything stored about one experiment.
#[derive(Debug, Clone, Serialize)]
pub struct StoredExperiment {
    /// The experiment's row.
    pub info: ExperimentInfo,
    /// Its configurations, in order.
    pub configurations: Vec<StoredConfiguration>,
    /// Its workloads, in order.
    pub workloads: Vec<StoredWorkload>,
    /// In the order they ran.
    pub runs: Vec<StoredRun>,
    /// The machine when it began; None: not recorded.
    pub system: Option<SystemSnapshot>,
    /// Swept knob names (sweeps only).
    pub swept: Vec<String>,
    /// What each configuration booted (boot experiments only).
    pub guests: Vec<spec::GuestSpec>,
}

impl StoredRun {
    /// The regime the run measured, when its workload reports one.
    pub fn regime(&self) -> Option<pmlab_workload::Regime> {
        pmlab_workload::Regime::of_metrics(
            self.metrics
                .iter()
                .filter(|m| !m.side && m.cpu.is_none())
                .map(|m| (m.name.as_str(), m.value)),
        )
    }

    /// What other tasks took of the workload's CPUs during the run, when it was measured.
    pub fn disturbance(&self) -> Option<pmlab_stats::disturbance::RunDisturbance> {
        pmlab_stats::disturbance::RunDisturbance::of_metrics(
            self.metrics
                .iter()
                .filter(|m| m.side)
                .map(|m| (m.name.as_str(), m.cpu, m.value)),
        )
    }
}

impl StoredMetric {
    /// Whether this is the metric `key` names.
    pub fn is(&self, key: &MetricKey) -> bool {
        self.name == key.name && self.cpu == key.cpu
    }

    /// Its name as tables, CSV and Parquet exports write it (`NAME` or `NAME@cpuN`).
    pub fn label(&self) -> String {
        MetricKey {
            name: self.name.clone(),
            cpu: self.cpu,
        }
        .to_string()
    }
}

/// Name (with CPU), unit and direction of a metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricInfo {
    /// The metric's name.
    pub name: String,
    /// The CPU of a per-CPU metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Its unit.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// A side metric, not the workload's own.
    pub side: bool,
}

impl StoredExperiment {
    /// Measured (not warm-up) successful runs of one workload and configuration.
    pub fn measured_runs(
        &self,
        workload: usize,
        configuration: usize,
    ) -> impl Iterator<Item = &StoredRun> {
        self.runs.iter().filter(move |r| {
            r.workload == workload
                && r.configuration == configuration
                && !r.warmup
                && r.status == RunStatus::Ok
        })
    }

    /// The values of `metric` over the measured runs of one workload and configuration, in run order.
    pub fn samples(
        &self,
        workload: usize,
        configuration: usize,
        metric: impl Into<MetricKey>,
    ) -> Vec<f64> {
        let key = metric.into();
        self.measured_runs(workload, configuration)
            .filter_map(|r| r.metrics.iter().find(|m| m.is(&key)).map(|m| m.value))
            .collect()
    }

    /// Each measured run's value of `metric`, with the regime the run measured.
    pub fn runs_of(
        &self,
        workload: usize,
        configuration: usize,
        metric: impl Into<MetricKey>,
    ) -> Vec<pmlab_stats::populations::Run> {
        let key = metric.into();
        self.measured_runs(workload, configuration)
            .filter_map(|r| {
                let value = r.metrics.iter().find(|m| m.is(&key))?.value;
                Some(pmlab_stats::populations::Run {
                    value,
                    regime: r.regime(),
                    disturbance: r.disturbance(),
                })
            })
            .collect()
    }

    /// The primary metric of a workload: the first workload metric of its first successful run.
    pub fn primary_metric(&self, workload: usize) -> Option<MetricInfo> {
        self.runs
            .iter()
            .filter(|r| r.workload == workload && r.status == RunStatus::Ok)
            .find_map(|r| {
                r.metrics.iter().find(|m| !m.side).map(|m| MetricInfo {
                    name: m.name.clone(),
                    cpu: m.cpu,
                    unit: m.unit.clone(),
                    direction: m.direction,
                    side: false,
                })
            })
    }

    /// Every metric seen for a workload (primary first, then workload metrics, then side metrics),
    /// in first-seen order.
    pub fn metric_keys(&self, workload: usize) -> Vec<MetricInfo> {
        let mut keys: Vec<MetricInfo> = Vec::new();
        for r in self
            .runs
            .iter()
            .filter(|r| r.workload == workload && r.status == RunStatus::Ok)
        {
            for m in &r.metrics {
                if !keys.iter().any(|k| k.name == m.name && k.cpu == m.cpu) {
                    keys.push(MetricInfo {
                        name: m.name.clone(),
                        cpu: m.cpu,
                        unit: m.unit.clone(),
                        direction: m.direction,
                        side: m.side,
                    });
                }
            }
        }
        keys.sort_by_key(|k| k.side);
        keys
    }
}

impl MetricInfo {
    /// The metric's identity.
    pub fn key(&self) -> MetricKey {
        MetricKey {
            name: self.name.clone(),
            cpu: self.cpu,
        }
    }
    /// Its name as tables and CSV write it (`NAME` or `NAME@cpuN`).
    pub fn label(&self) -> String {
        self.key().to_string()
    }
}

fn parse_direction(s: &str) -> Direction {
    match s {
        "lower" => Direction::Lower,
        "higher" => Direction::Higher,
        _ => Direction::Neutral,
    }
}

impl Store {
    /// Open (or create) a store. A file that is not a pmlab store is refused before anything
    /// is written to it; an older schema is migrated.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        check_file(path, false)?;
        let sql = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(&sql)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(&sql)?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store.initialise()?;
        Ok(store)
    }

    /// A store in memory, gone when dropped: for commands told not to keep their results
    /// (`--no-store`), which still go through the protocol.
    pub fn in_memory() -> Result<Store, StoreError> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Sqlite {
            path: path.clone(),
            source,
        })?;
        let mut store = Store { conn, path };
        store.initialise()?;
        Ok(store)
    }

    /// Add side metrics to measured runs of an experiment, each given by its (round,
    /// position), after their source (a trace read at the end of a session) is known; one
    /// transaction for all.
    pub fn add_side_metrics(
        &mut self,
        experiment: i64,
        runs: &[((usize, usize), Vec<Metric>)],
    ) -> Result<(), StoreError> {
        let (tx, sql) = self.immediate()?;
        for ((round, position), metrics) in runs {
            let (run_id, next): (i64, i64) = tx
                .query_row(
                    "SELECT r.id, COALESCE((SELECT MAX(position) + 1 FROM metrics WHERE run_id = r.id), 0)
                     FROM runs r WHERE r.experiment_id = ?1 AND r.round = ?2 AND r.position = ?3 AND NOT r.warmup",
                    params![experiment, *round as i64, *position as i64],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .map_err(&sql)?;
            insert_metrics(&tx, run_id, next, metrics.iter().map(|m| (m, true))).map_err(&sql)?;
        }
        tx.commit().map_err(&sql)?;
        Ok(())
    }

    /// Create a store at an old schema version (for migration tests).
    #[doc(hidden)]
    pub fn create_at_version(path: &Path, version: i64) -> Result<Store, StoreError> {
        let conn = Connection::open(path).map_err(|source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store.migrate_to(version)?;
        Ok(store)
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn initialise(&mut self) -> Result<(), StoreError> {
        self.migrate_to(SCHEMA_VERSION)
    }

    /// Stamp the application id, switch to WAL and apply the missing migrations up to `target`.
    fn migrate_to(&mut self, target: i64) -> Result<(), StoreError> {
        let app: i32 = self
            .conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(|e| self.sql(e))?;
        if app != APPLICATION_ID {
            // Only reached for a new (empty) file: stamp it before switching to WAL, so the id
            // is in the main file's header from the start.
            self.conn
                .execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))
                .map_err(|e| self.sql(e))?;
        }
        // Entering WAL takes an exclusive lock without SQLite's busy handler: a second pmlab
        // opening a new store at the same moment (reading its header) makes it fail at once
        // with "database is locked". It is retried, at open time only, within the timeout.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mode: String = loop {
            match self
                .conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            {
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                r => break r.map_err(|e| self.sql(e))?,
            }
        };
        // An in-memory store has no file to share: its journal stays in memory.
        let in_memory = mode.eq_ignore_ascii_case("memory") && self.path.as_os_str() == ":memory:";
        if !mode.eq_ignore_ascii_case("wal") && !in_memory {
            return Err(StoreError::Io {
                path: self.path.clone(),
                source: std::io::Error::other(format!("cannot switch to WAL mode (got {mode})")),
            });
        }
        // In WAL mode NORMAL still survives a crash of pmlab; it skips the fsync at every
        // commit, so storing a run as it finishes writes no disk I/O between runs.
        self.conn
            .execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL")
            .map_err(|e| self.sql(e))?;
        let path = self.path.clone();
        let (tx, sql) = self.immediate()?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(&sql)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: path.clone(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        for (i, migration) in MIGRATIONS
            .iter()
            .enumerate()
            .take(target as usize)
            .skip(version as usize)
        {
            tx.execute_batch(migration).map_err(&sql)?;
            let new_version = i as i64 + 1;
            tx.execute_batch(&format!("PRAGMA user_version = {new_version}"))
                .map_err(&sql)?;
            tx.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?1)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![new_version.to_string()],
            )
            .map_err(&sql)?;
            tx.execute(
                "INSERT INTO meta(key, value) VALUES ('application', 'pmlab')
                 ON CONFLICT(key) DO NOTHING",
                [],
            )
            .map_err(&sql)?;
        }
        tx.commit().map_err(&sql)
    }

    /// The schema version of the open store.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.sql(e))
    }

    /// Record a new experiment (status `running`, owned by this process) and its system snapshot.
    pub fn create_experiment(
        &mut self,
        experiment: &spec::Experiment,
        budget: &Budget,
        command: &str,
        system: &SystemSnapshot,
    ) -> Result<ExperimentIds, StoreError> {
        let spec_json = serde_json::to_string(experiment).expect("experiment serialises");
        let pid = std::process::id();
        let (tx, sql) = self.immediate()?;
        tx.execute(
            "INSERT INTO experiments(kind, name, command, created_ns, status, seed, target_ci, max_runs, max_time_s,
                                     reference, spec_json, owner_pid, owner_start, uid, settle_s)
             VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                experiment.kind.as_str(),
                experiment.name,
                command,
                now_ns(),
                budget.seed as i64,
                budget.target_ci,
                budget.max_runs.map(|n| n as i64),
                budget.max_time.map(|d| d.as_secs_f64()),
                experiment.reference as i64,
                spec_json,
                pid as i64,
                process_start(pid).map(|s| s as i64),
                new_uid(),
                budget.settle.as_secs_f64(),
            ],
        )
        .map_err(&sql)?;
        let id = tx.last_insert_rowid();
        let mut configurations = Vec::new();
        for (i, c) in experiment.configurations.iter().enumerate() {
            tx.execute(
                "INSERT INTO configurations(experiment_id, position, label) VALUES (?1, ?2, ?3)",
                params![id, i as i64, c.label],
            )
            .map_err(&sql)?;
            let cid = tx.last_insert_rowid();
            for (j, k) in c.knobs.iter().enumerate() {
                tx.execute(
                    "INSERT INTO knobs(configuration_id, position, name, value) VALUES (?1, ?2, ?3, ?4)",
                    params![cid, j as i64, k.knob().to_string(), k.value()],
                )
                .map_err(&sql)?;
            }
            configurations.push(cid);
        }
        let mut workloads = Vec::new();
        for (i, w) in experiment.workloads.iter().enumerate() {
            tx.execute(
                "INSERT INTO workloads(experiment_id, position, label, argv_json) VALUES (?1, ?2, ?3, ?4)",
                params![id, i as i64, w.label, serde_json::to_string(&w.argv).expect("argv serialises")],
            )
            .map_err(&sql)?;
            workloads.push(tx.last_insert_rowid());
        }
        put_system(&tx, id, system).map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        Ok(ExperimentIds {
            experiment: id,
            configurations,
            workloads,
        })
    }

    /// An immediate (write-locking) transaction, and how an SQLite error of this store reads.
    fn immediate(
        &mut self,
    ) -> Result<
        (
            rusqlite::Transaction<'_>,
            impl Fn(rusqlite::Error) -> StoreError,
        ),
        StoreError,
    > {
        let path = self.path.clone();
        let sql = move |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        Ok((tx, sql))
    }

    /// Insert one run and its metrics (one transaction).
    pub fn insert_run(&mut self, run: &NewRun) -> Result<i64, StoreError> {
        let (tx, sql) = self.immediate()?;
        tx.execute(
            "INSERT INTO runs(experiment_id, configuration_id, workload_id, round, position, warmup, started_ns,
                              duration_ns, status, error, trace_path)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                run.experiment,
                run.configuration,
                run.workload,
                run.round as i64,
                run.position as i64,
                run.warmup,
                run.started_ns,
                run.duration_ns,
                run.status.as_str(),
                run.error,
                run.trace_path.as_ref().map(|p| p.display().to_string()),
            ],
        )
        .map_err(&sql)?;
        let run_id = tx.last_insert_rowid();
        let all = run
            .metrics
            .iter()
            .map(|m| (m, false))
            .chain(run.side_metrics.iter().map(|m| (m, true)));
        insert_metrics(&tx, run_id, 0, all).map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        Ok(run_id)
    }

    /// Mark an experiment finished (`complete` or `incomplete`) with the reason it stopped.
    pub fn finish_experiment(
        &mut self,
        id: i64,
        status: ExperimentStatus,
        stop_reason: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE experiments SET status = ?2, stop_reason = ?3, finished_ns = ?4 WHERE id = ?1",
                params![id, status.as_str(), stop_reason, now_ns()],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    fn info_from_row(row: &rusqlite::Row) -> rusqlite::Result<ExperimentInfo> {
        let stored_status: String = row.get("status")?;
        let mut status = ExperimentStatus::parse(&stored_status);
        let mut stop_reason: Option<String> = row.get("stop_reason")?;
        if status == ExperimentStatus::Running {
            let pid: Option<i64> = row.get("owner_pid")?;
            let start: Option<i64> = row.get("owner_start")?;
            let alive = pid.is_some_and(|p| process_start(p as u32).map(|s| s as i64) == start);
            if !alive {
                status = ExperimentStatus::Incomplete;
                stop_reason
                    .get_or_insert_with(|| "its pmlab process ended without finishing it".into());
            }
        }
        Ok(ExperimentInfo {
            id: row.get("id")?,
            uid: row.get::<_, Option<String>>("uid")?.unwrap_or_default(),
            kind: spec::Kind::parse(&row.get::<_, String>("kind")?),
            name: row.get("name")?,
            command: row.get("command")?,
            created_ns: row.get("created_ns")?,
            finished_ns: row.get("finished_ns")?,
            status,
            stop_reason,
            seed: row.get::<_, i64>("seed")? as u64,
            target_ci: row.get("target_ci")?,
            max_runs: row.get("max_runs")?,
            max_time_s: row.get("max_time_s")?,
            settle_s: row.get("settle_s")?,
            reference: row.get::<_, i64>("reference")? as usize,
            configurations: row.get::<_, i64>("n_configurations")? as usize,
            workloads: row.get::<_, i64>("n_workloads")? as usize,
            runs: row.get::<_, i64>("n_runs")? as usize,
            failed_runs: row.get::<_, i64>("n_failed")? as usize,
        })
    }

    const INFO_QUERY: &'static str = "SELECT e.*,
            (SELECT COUNT(*) FROM configurations c WHERE c.experiment_id = e.id) AS n_configurations,
            (SELECT COUNT(*) FROM workloads w WHERE w.experiment_id = e.id) AS n_workloads,
            (SELECT COUNT(*) FROM runs r WHERE r.experiment_id = e.id AND r.warmup = 0) AS n_runs,
            (SELECT COUNT(*) FROM runs r WHERE r.experiment_id = e.id AND r.warmup = 0 AND r.status != 'ok') AS n_failed
         FROM experiments e";

    /// Every experiment, oldest first.
    pub fn list(&self) -> Result<Vec<ExperimentInfo>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!("{} ORDER BY e.id", Self::INFO_QUERY))
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], Self::info_from_row)
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }

    /// The trace a run recorded (`--trace`), checked to exist.
    pub fn trace_of_run(&self, run: i64) -> Result<PathBuf, StoreError> {
        let row: Option<Option<String>> = self
            .conn
            .query_row(
                "SELECT trace_path FROM runs WHERE id = ?1",
                params![run],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let path = self.path.clone();
        match row {
            None => Err(StoreError::NoSuchRun { path, run }),
            Some(None) => Err(StoreError::RunNotTraced { path, run }),
            Some(Some(t)) if !Path::new(&t).is_file() => Err(StoreError::TraceMissing {
                path,
                run,
                trace: t.into(),
            }),
            Some(Some(t)) => Ok(t.into()),
        }
    }

    /// The id of the newest experiment, if any.
    pub fn latest_id(&self) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row("SELECT MAX(id) FROM experiments", [], |r| r.get(0))
            .map_err(|e| self.sql(e))
    }

    /// Open the store at `path` to read it: a missing file is an error, never a new store.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
                is_dir: path.is_dir(),
            });
        }
        Store::open(path)
    }

    /// An experiment id as people type it: a number, or `latest` (the newest experiment).
    pub fn resolve_id(&self, id: &str) -> Result<i64, StoreError> {
        if id == "latest" {
            return self.latest_id()?.ok_or_else(|| StoreError::Empty {
                path: self.path.clone(),
            });
        }
        id.parse().map_err(|_| StoreError::BadId {
            given: id.to_string(),
        })
    }

    /// Everything about one experiment.
    pub fn load(&self, id: i64) -> Result<StoredExperiment, StoreError> {
        let sql = |source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        };
        let info = self
            .conn
            .query_row(
                &format!("{} WHERE e.id = ?1", Self::INFO_QUERY),
                params![id],
                Self::info_from_row,
            )
            .optional()
            .map_err(&sql)?
            .ok_or_else(|| StoreError::NoSuchExperiment {
                path: self.path.clone(),
                id,
            })?;
        let spec_json = self.spec_json(id)?;
        let (swept, guests) = serde_json::from_str::<spec::Experiment>(&spec_json)
            .map(|e| (e.swept, e.guests))
            .unwrap_or_default();

        let mut configurations = Vec::new();
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, label FROM configurations WHERE experiment_id = ?1 ORDER BY position",
            )
            .map_err(&sql)?;
        let rows: Vec<(i64, String)> = stmt
            .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(&sql)?
            .collect::<Result<_, _>>()
            .map_err(&sql)?;
        let mut knob_stmt = self
            .conn
            .prepare("SELECT name, value FROM knobs WHERE configuration_id = ?1 ORDER BY position")
            .map_err(&sql)?;
        for (cid, label) in rows {
            let knobs: Vec<String> = knob_stmt
                .query_map(params![cid], |r| {
                    Ok(format!(
                        "{}={}",
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?
                    ))
                })
                .map_err(&sql)?
                .collect::<Result<_, _>>()
                .map_err(&sql)?;
            configurations.push(StoredConfiguration {
                id: cid,
                label,
                knobs,
            });
        }

        let mut stmt = self.conn.prepare("SELECT id, label, argv_json FROM workloads WHERE experiment_id = ?1 ORDER BY position").map_err(&sql)?;
        let workloads: Vec<StoredWorkload> = stmt
            .query_map(params![id], |r| {
                let argv_json: String = r.get(2)?;
                Ok(StoredWorkload {
                    id: r.get(0)?,
                    label: r.get(1)?,
                    argv: serde_json::from_str(&argv_json).unwrap_or_default(),
                })
            })
            .map_err(&sql)?
            .collect::<Result<_, _>>()
            .map_err(&sql)?;

        let mut runs: Vec<StoredRun> = Vec::new();
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, configuration_id, workload_id, round, position, warmup, started_ns, duration_ns, status, error, trace_path
                 FROM runs WHERE experiment_id = ?1 ORDER BY id",
            )
            .map_err(&sql)?;
        let mut rows = stmt.query(params![id]).map_err(&sql)?;
        while let Some(r) = rows.next().map_err(&sql)? {
            let cid: i64 = r.get(1).map_err(&sql)?;
            let wid: i64 = r.get(2).map_err(&sql)?;
            let status: String = r.get(8).map_err(&sql)?;
            runs.push(StoredRun {
                id: r.get(0).map_err(&sql)?,
                configuration: configurations.iter().position(|c| c.id == cid).unwrap_or(0),
                workload: workloads.iter().position(|w| w.id == wid).unwrap_or(0),
                round: r.get::<_, i64>(3).map_err(&sql)? as usize,
                position: r.get::<_, i64>(4).map_err(&sql)? as usize,
                warmup: r.get(5).map_err(&sql)?,
                started_ns: r.get(6).map_err(&sql)?,
                duration_ns: r.get(7).map_err(&sql)?,
                status: RunStatus::parse(&status),
                error: r.get(9).map_err(&sql)?,
                trace_path: r.get(10).map_err(&sql)?,
                metrics: Vec::new(),
            });
        }
        drop(rows);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT m.run_id, m.name, m.value, m.unit, m.direction, m.side, m.cpu FROM metrics m
                 JOIN runs r ON r.id = m.run_id WHERE r.experiment_id = ?1 ORDER BY m.run_id, m.position",
            )
            .map_err(&sql)?;
        let mut rows = stmt.query(params![id]).map_err(&sql)?;
        let mut index = 0;
        while let Some(r) = rows.next().map_err(&sql)? {
            let run_id: i64 = r.get(0).map_err(&sql)?;
            while index < runs.len() && runs[index].id != run_id {
                index += 1;
            }
            if index == runs.len() {
                break;
            }
            let direction: String = r.get(4).map_err(&sql)?;
            runs[index].metrics.push(StoredMetric {
                name: r.get(1).map_err(&sql)?,
                cpu: r.get(6).map_err(&sql)?,
                value: r.get(2).map_err(&sql)?,
                unit: r.get(3).map_err(&sql)?,
                direction: parse_direction(&direction),
                side: r.get(5).map_err(&sql)?,
            });
        }
        drop(rows);
        let system = self
            .conn
            .query_row(
                "SELECT kernel_release, cmdline, cpu_model, cpus, virtualization, knobs_json, hostname, boot_id,
                 cpuidle_driver, kernel_build, pmlab_version FROM system WHERE experiment_id = ?1",
                params![id],
                |r| {
                    let knobs_json: String = r.get(5)?;
                    Ok(SystemSnapshot {
                        kernel_release: r.get(0)?,
                        cmdline: r.get(1)?,
                        cpu_model: r.get(2)?,
                        cpus: r.get(3)?,
                        virtualization: r.get(4)?,
                        knobs: serde_json::from_str(&knobs_json).unwrap_or_default(),
                        hostname: r.get(6)?,
                        boot_id: r.get(7)?,
                        cpuidle_driver: r.get(8)?,
                        kernel_build: r.get(9)?,
                        pmlab_version: r.get(10)?,
                    })
                },
            )
            .optional()
            .map_err(&sql)?;
        Ok(StoredExperiment {
            info,
            configurations,
            workloads,
            runs,
            system,
            swept,
            guests,
        })
    }
}

/// What [`Store::import`] did with one experiment of the source store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Imported {
    /// Its id in the source store.
    pub source_id: i64,
    /// Its id here; `None`: this store already held it (same uid), nothing was written.
    pub id: Option<i64>,
    /// The experiment's uid, which stays with it across stores.
    pub uid: String,
}

impl Store {
    /// Copy experiments (all, or those `only` names by id) of the store at `source` into
    /// this one with fresh ids, in one transaction; experiments this store already holds
    /// (same uid) are skipped, so importing twice changes nothing. `trace` gives each copied
    /// run's new trace path from (new experiment id, source path); `None` drops it. The
    /// source is only read; an older source is migrated in a temporary copy.
    pub fn import(
        &mut self,
        source: &Path,
        only: Option<&[i64]>,
        trace: &mut dyn FnMut(i64, &str) -> Option<String>,
    ) -> Result<Vec<Imported>, StoreError> {
        let src_err = |source_err| StoreError::Sqlite {
            path: source.to_path_buf(),
            source: source_err,
        };
        // Checks the header and version; never writes to `source` unless it needs migrating,
        // and then a copy is migrated instead.
        check_file(source, true)?;
        let version = {
            let c = Connection::open_with_flags(source, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .map_err(src_err)?;
            c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
                .map_err(src_err)?
        };
        let _migrated;
        let source = if version < SCHEMA_VERSION {
            let dir = tempfile::tempdir().map_err(|e| StoreError::Io {
                path: source.to_path_buf(),
                source: e,
            })?;
            let copy = dir.path().join("source.db");
            std::fs::copy(source, &copy).map_err(|e| StoreError::Io {
                path: source.to_path_buf(),
                source: e,
            })?;
            Store::open(&copy)?;
            _migrated = dir;
            copy
        } else if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: source.to_path_buf(),
                found: version,
                known: SCHEMA_VERSION,
            });
        } else {
            source.to_path_buf()
        };
        let uri = format!(
            "file:{}?mode=ro",
            source
                .display()
                .to_string()
                .replace('%', "%25")
                .replace('?', "%3f")
                .replace('#', "%23")
        );
        let path = self.path.clone();
        let sql = |e| StoreError::Sqlite {
            path: path.clone(),
            source: e,
        };
        self.conn
            .execute("ATTACH DATABASE ?1 AS src", params![uri])
            .map_err(&sql)?;
        let result = copy_attached(&mut self.conn, only, trace).map_err(&sql);
        let detached = self.conn.execute_batch("DETACH DATABASE src").map_err(&sql);
        let imported = result?;
        detached?;
        Ok(imported)
    }

    /// The experiment's description as it was run (the spec, as JSON).
    pub(crate) fn spec_json(&self, id: i64) -> Result<String, StoreError> {
        self.conn
            .query_row(
                "SELECT spec_json FROM experiments WHERE id = ?1",
                params![id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?
            .ok_or_else(|| StoreError::NoSuchExperiment {
                path: self.path.clone(),
                id,
            })
    }

    /// Replace an experiment's system snapshot (its machine identity); for tools and tests
    /// that line up runs across kernels.
    pub fn set_system(&mut self, id: i64, system: &SystemSnapshot) -> Result<(), StoreError> {
        let sql = |e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        };
        let known: bool = self
            .conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM experiments WHERE id = ?1)",
                params![id],
                |r| r.get(0),
            )
            .map_err(&sql)?;
        let n = if known {
            put_system(&self.conn, id, system).map_err(&sql)?
        } else {
            0
        };
        if n == 0 {
            return Err(StoreError::NoSuchExperiment {
                path: self.path.clone(),
                id,
            });
        }
        Ok(())
    }
}

/// The body of [`Store::import`], with the source attached as `src`.
fn copy_attached(
    conn: &mut Connection,
    only: Option<&[i64]>,
    trace: &mut dyn FnMut(i64, &str) -> Option<String>,
) -> rusqlite::Result<Vec<Imported>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let experiments: Vec<(i64, String)> = {
        let mut st = tx.prepare("SELECT id, uid FROM src.experiments ORDER BY id")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut out = Vec::new();
    for (old, uid) in experiments {
        if only.is_some_and(|ids| !ids.contains(&old)) {
            continue;
        }
        let held: bool = tx.query_row(
            "SELECT EXISTS(SELECT 1 FROM main.experiments WHERE uid = ?1)",
            params![uid],
            |r| r.get(0),
        )?;
        if held {
            out.push(Imported {
                source_id: old,
                id: None,
                uid,
            });
            continue;
        }
        // Owner columns stay empty: the source's process is not one of this machine's.
        tx.execute(
            "INSERT INTO main.experiments(kind, name, command, created_ns, finished_ns, status, stop_reason, seed,
                 target_ci, max_runs, max_time_s, reference, spec_json, uid, settle_s)
             SELECT kind, name, command, created_ns, finished_ns, status, stop_reason, seed, target_ci, max_runs,
                 max_time_s, reference, spec_json, uid, settle_s FROM src.experiments WHERE id = ?1",
            params![old],
        )?;
        let new = tx.last_insert_rowid();
        tx.execute(
            "INSERT INTO main.system(experiment_id, kernel_release, cmdline, cpu_model, cpus, virtualization,
                 knobs_json, hostname, boot_id, cpuidle_driver, kernel_build, pmlab_version)
             SELECT ?2, kernel_release, cmdline, cpu_model, cpus, virtualization, knobs_json, hostname, boot_id,
                 cpuidle_driver, kernel_build, pmlab_version FROM src.system WHERE experiment_id = ?1",
            params![old, new],
        )?;
        let mut configurations = std::collections::HashMap::new();
        let rows: Vec<i64> = {
            let mut st =
                tx.prepare("SELECT id FROM src.configurations WHERE experiment_id = ?1")?;
            let r = st.query_map(params![old], |r| r.get(0))?;
            r.collect::<Result<_, _>>()?
        };
        for cid in rows {
            tx.execute(
                "INSERT INTO main.configurations(experiment_id, position, label)
                 SELECT ?2, position, label FROM src.configurations WHERE id = ?1",
                params![cid, new],
            )?;
            let ncid = tx.last_insert_rowid();
            tx.execute(
                "INSERT INTO main.knobs(configuration_id, position, name, value)
                 SELECT ?2, position, name, value FROM src.knobs WHERE configuration_id = ?1",
                params![cid, ncid],
            )?;
            configurations.insert(cid, ncid);
        }
        let mut workloads = std::collections::HashMap::new();
        let rows: Vec<i64> = {
            let mut st = tx.prepare("SELECT id FROM src.workloads WHERE experiment_id = ?1")?;
            let r = st.query_map(params![old], |r| r.get(0))?;
            r.collect::<Result<_, _>>()?
        };
        for wid in rows {
            tx.execute(
                "INSERT INTO main.workloads(experiment_id, position, label, argv_json)
                 SELECT ?2, position, label, argv_json FROM src.workloads WHERE id = ?1",
                params![wid, new],
            )?;
            workloads.insert(wid, tx.last_insert_rowid());
        }
        type RunRow = (i64, i64, i64, Option<String>);
        let runs: Vec<RunRow> = {
            let mut st = tx.prepare(
                "SELECT id, configuration_id, workload_id, trace_path FROM src.runs WHERE experiment_id = ?1 ORDER BY id",
            )?;
            let r = st.query_map(params![old], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?;
            r.collect::<Result<_, _>>()?
        };
        for (rid, cid, wid, path) in runs {
            let path = path.and_then(|p| trace(new, &p));
            tx.execute(
                "INSERT INTO main.runs(experiment_id, configuration_id, workload_id, round, position, warmup,
                     started_ns, duration_ns, status, error, trace_path)
                 SELECT ?2, ?3, ?4, round, position, warmup, started_ns, duration_ns, status, error, ?5
                 FROM src.runs WHERE id = ?1",
                params![
                    rid,
                    new,
                    configurations.get(&cid).copied().unwrap_or(cid),
                    workloads.get(&wid).copied().unwrap_or(wid),
                    path
                ],
            )?;
            let nrid = tx.last_insert_rowid();
            tx.execute(
                "INSERT INTO main.metrics(run_id, position, name, value, unit, direction, side, cpu)
                 SELECT ?2, position, name, value, unit, direction, side, cpu FROM src.metrics WHERE run_id = ?1",
                params![rid, nrid],
            )?;
        }
        out.push(Imported {
            source_id: old,
            id: Some(new),
            uid,
        });
    }
    tx.commit()?;
    Ok(out)
}

/// Refuse `path` unless it is a pmlab store, or (unless `must_exist`) empty or missing;
/// reads the SQLite header only.
/// Insert a run's metrics (each with whether it is a side metric) from `first` position on.
fn insert_metrics<'m>(
    tx: &rusqlite::Transaction,
    run_id: i64,
    first: i64,
    metrics: impl Iterator<Item = (&'m Metric, bool)>,
) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO metrics(run_id, position, name, value, unit, direction, side, cpu) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for (i, (m, side)) in metrics.enumerate() {
        stmt.execute(params![
            run_id,
            first + i as i64,
            m.name,
            m.value,
            m.unit,
            m.direction.as_str(),
            side,
            m.cpu
        ])?;
    }
    Ok(())
}

fn check_file(path: &Path, must_exist: bool) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let not_store = |why: &str| StoreError::NotAStore {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(not_store("a directory")),
        Ok(m) if m.len() > 0 => {
            let mut header = [0u8; 100];
            let mut f = std::fs::File::open(path).map_err(io)?;
            let mut got = 0;
            while got < header.len() {
                let n = f.read(&mut header[got..]).map_err(io)?;
                if n == 0 {
                    break;
                }
                got += n;
            }
            if got < 100 || &header[..16] != b"SQLite format 3\0" {
                return Err(not_store("not an SQLite database"));
            }
            let app = i32::from_be_bytes([header[68], header[69], header[70], header[71]]);
            if app != APPLICATION_ID {
                return Err(not_store(&format!(
                    "an SQLite database with application id {app:#x}, not pmlab's"
                )));
            }
        }
        Ok(_) if must_exist => return Err(not_store("an empty file")),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {}
        Err(e) => return Err(io(e)),
    }
    Ok(())
}

/// Write (or replace) an experiment's system snapshot.
fn put_system(conn: &Connection, id: i64, system: &SystemSnapshot) -> rusqlite::Result<usize> {
    conn.execute(
        "INSERT OR REPLACE INTO system(experiment_id, kernel_release, cmdline, cpu_model, cpus, virtualization,
                knobs_json, hostname, boot_id, cpuidle_driver, kernel_build, pmlab_version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            id,
            system.kernel_release,
            system.cmdline,
            system.cpu_model,
            system.cpus,
            system.virtualization,
            serde_json::to_string(&system.knobs).expect("knobs serialise"),
            system.hostname,
            system.boot_id,
            system.cpuidle_driver,
            system.kernel_build,
            system.pmlab_version,
        ],
    )
}

/// A fresh experiment uid: 128 random bits in hex.
fn new_uid() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The trace directory of a store: `pmlab.db` → `pmlab.db.traces` beside it.
pub fn traces_dir(db: &Path) -> PathBuf {
    let abs = std::path::absolute(db).unwrap_or_else(|_| db.to_path_buf());
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pmlab.db".into());
    abs.with_file_name(format!("{name}.traces"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Configuration, WorkloadDef};

    #[test]
    fn a_store_opened_while_another_process_writes_the_new_file_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        // Another pmlab's moment on a new store: stamped, still in rollback mode, writing.
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch(&format!(
                "PRAGMA application_id = {APPLICATION_ID}; CREATE TABLE t(x); \
                 BEGIN IMMEDIATE; INSERT INTO t VALUES (1);"
            ))
            .unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            other.execute_batch("COMMIT").unwrap();
        });
        let store = Store::open(&path);
        release.join().unwrap();
        assert!(store.is_ok(), "{:?}", store.err());
    }
    use crate::spec::{Experiment, Kind};

    fn experiment() -> Experiment {
        Experiment::new(
            Kind::Compare,
            "t".into(),
            vec![
                Configuration::parse("a", "").unwrap(),
                Configuration::parse("b", "x.y=1 z@1=2").unwrap(),
            ],
            vec![WorkloadDef::new(vec!["pipe".into(), "--loops".into(), "10".into()]).unwrap()],
            None,
        )
        .unwrap()
    }

    fn run(ids: &ExperimentIds, c: usize, value: f64, status: RunStatus) -> NewRun {
        NewRun {
            experiment: ids.experiment,
            configuration: ids.configurations[c],
            workload: ids.workloads[0],
            round: 1,
            position: c,
            warmup: false,
            started_ns: now_ns(),
            duration_ns: 1000,
            status,
            error: (status != RunStatus::Ok).then(|| "boom".into()),
            metrics: if status == RunStatus::Ok {
                vec![Metric::new("t", value, "us/op", Direction::Lower)]
            } else {
                vec![]
            },
            side_metrics: vec![Metric::new("idle.exits", 5.0, "1/s", Direction::Neutral)],
            trace_path: None,
        }
    }

    /// A store with one experiment of two runs (the second traced); returns its id.
    fn filled(path: &Path, kernel: &str) -> i64 {
        let mut s = Store::open(path).unwrap();
        let sys = SystemSnapshot {
            kernel_release: kernel.into(),
            hostname: "target".into(),
            kernel_build: "#1 SMP".into(),
            ..Default::default()
        };
        let ids = s
            .create_experiment(&experiment(), &Budget::default(), "pmlab compare", &sys)
            .unwrap();
        s.insert_run(&run(&ids, 0, 10.0, RunStatus::Ok)).unwrap();
        let mut traced = run(&ids, 1, 12.0, RunStatus::Ok);
        traced.trace_path = Some("/remote/t.dat".into());
        s.insert_run(&traced).unwrap();
        s.finish_experiment(ids.experiment, ExperimentStatus::Complete, "done")
            .unwrap();
        ids.experiment
    }

    #[test]
    fn import_copies_experiments_once_with_new_ids_and_relocated_traces() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.db");
        let first = filled(&src, "6.18");
        let second = filled(&src, "6.19");
        let dst_path = dir.path().join("dst.db");
        let local = filled(&dst_path, "6.1");
        let mut dst = Store::open(&dst_path).unwrap();
        let mut seen = Vec::new();
        let got = dst
            .import(&src, None, &mut |id, p| {
                seen.push((id, p.to_string()));
                Some(format!("/here/{id}.dat"))
            })
            .unwrap();
        assert_eq!(got.len(), 2);
        let new: Vec<i64> = got.iter().map(|i| i.id.unwrap()).collect();
        assert!(new.iter().all(|&id| id != local), "fresh ids: {new:?}");
        assert_eq!(
            seen,
            vec![
                (new[0], "/remote/t.dat".to_string()),
                (new[1], "/remote/t.dat".to_string())
            ]
        );
        let source = Store::open(&src).unwrap();
        for (i, &old) in [first, second].iter().enumerate() {
            let a = source.load(old).unwrap();
            let b = dst.load(new[i]).unwrap();
            assert_eq!(a.info.uid, b.info.uid);
            assert_eq!(b.info.status, ExperimentStatus::Complete);
            assert_eq!(a.system, b.system);
            assert_eq!(b.configurations[1].knobs, vec!["x.y=1", "z@1=2"]);
            assert_eq!(b.samples(0, 1, "t"), vec![12.0]);
            assert_eq!(
                b.runs[1].trace_path.as_deref(),
                Some(format!("/here/{}.dat", new[i]).as_str())
            );
            assert_eq!(b.runs.iter().map(|r| r.metrics.len()).sum::<usize>(), 4);
        }
        assert_eq!(
            dst.load(new[1]).unwrap().system.unwrap().kernel_release,
            "6.19"
        );
        // Again: everything is already here.
        let again = dst.import(&src, None, &mut |_, _| None).unwrap();
        assert!(again.iter().all(|i| i.id.is_none()), "{again:?}");
        assert_eq!(dst.list().unwrap().len(), 3);
        // One experiment only, into a fresh store.
        let one_path = dir.path().join("one.db");
        let mut one = Store::open(&one_path).unwrap();
        let got = one.import(&src, Some(&[second]), &mut |_, _| None).unwrap();
        assert_eq!(got.len(), 1);
        let e = one.load(got[0].id.unwrap()).unwrap();
        assert_eq!(e.runs[1].trace_path, None);
    }

    #[test]
    fn import_refuses_what_is_not_a_store_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dst_path = dir.path().join("dst.db");
        filled(&dst_path, "6.1");
        let mut dst = Store::open(&dst_path).unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "hello").unwrap();
        for bad in [
            text,
            dir.path().join("missing.db"),
            dir.path().to_path_buf(),
        ] {
            let e = dst.import(&bad, None, &mut |_, _| None).unwrap_err();
            assert!(e.to_string().contains(&bad.display().to_string()), "{e}");
        }
        assert_eq!(dst.list().unwrap().len(), 1);
    }

    #[test]
    fn set_system_changes_the_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let id = filled(&path, "6.18");
        let mut s = Store::open(&path).unwrap();
        let mut sys = s.load(id).unwrap().system.unwrap();
        sys.kernel_release = "6.19-rc1".into();
        s.set_system(id, &sys).unwrap();
        assert_eq!(s.load(id).unwrap().system.unwrap(), sys);
        assert!(s.set_system(id + 100, &sys).is_err());
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let mut sys = SystemSnapshot {
            kernel_release: "6.18".into(),
            ..Default::default()
        };
        sys.knobs.push(("x.y".into(), "0".into()));
        let ids = s
            .create_experiment(&experiment(), &Budget::default(), "pmlab compare", &sys)
            .unwrap();
        s.insert_run(&run(&ids, 0, 10.0, RunStatus::Ok)).unwrap();
        s.insert_run(&run(&ids, 1, 11.0, RunStatus::Ok)).unwrap();
        s.insert_run(&run(&ids, 1, 0.0, RunStatus::Failed)).unwrap();
        let e = s.load(ids.experiment).unwrap();
        assert_eq!(
            e.info.status,
            ExperimentStatus::Running,
            "this process is alive"
        );
        assert_eq!(e.configurations[1].knobs, vec!["x.y=1", "z@1=2"]);
        assert_eq!(
            e.workloads[0].argv,
            vec!["pipe", "--loops", "10", "--placement", "spread"]
        );
        assert_eq!(e.runs.len(), 3);
        assert_eq!(e.samples(0, 1, "t"), vec![11.0]);
        assert_eq!(e.primary_metric(0).unwrap().name, "t");
        assert_eq!(e.metric_keys(0).len(), 2);
        assert_eq!(e.runs[2].error.as_deref(), Some("boom"));
        assert_eq!(e.system.as_ref().unwrap().knobs, sys.knobs);
        assert_eq!(e.info.failed_runs, 1);
        s.finish_experiment(
            ids.experiment,
            ExperimentStatus::Complete,
            "target CI reached",
        )
        .unwrap();
        let list = s.list().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].status, ExperimentStatus::Complete);
    }

    #[test]
    fn foreign_files_are_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        // A text file.
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "hello, not a database\n".repeat(10)).unwrap();
        let before = std::fs::read(&text).unwrap();
        assert!(matches!(
            Store::open(&text),
            Err(StoreError::NotAStore { .. })
        ));
        assert_eq!(std::fs::read(&text).unwrap(), before);
        // Another application's SQLite database.
        let other = dir.path().join("other.db");
        {
            let c = Connection::open(&other).unwrap();
            c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
                .unwrap();
        }
        let before = std::fs::read(&other).unwrap();
        let err = Store::open(&other).err().unwrap();
        assert!(
            err.to_string().contains("not a pmlab result store"),
            "{err}"
        );
        assert_eq!(std::fs::read(&other).unwrap(), before);
        assert!(!dir.path().join("other.db-wal").exists());
        // A directory.
        assert!(Store::open(dir.path()).is_err());
    }

    #[test]
    fn migrates_from_version_1() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let old = Store::create_at_version(&path, 1).unwrap();
            assert_eq!(old.schema_version().unwrap(), 1);
            // Write a v1 experiment by hand: v1 had no runs.trace_path / system.hostname.
            old.conn
                .execute_batch(
                    "INSERT INTO experiments(id, kind, name, command, created_ns, status, seed, target_ci, reference, spec_json)
                       VALUES (1, 'compare', 'old', 'pmlab compare', 0, 'complete', 7, 0.01, 0, '{}');
                     INSERT INTO configurations VALUES (1, 1, 0, 'a');
                     INSERT INTO workloads VALUES (1, 1, 0, 'pipe', '[\"pipe\"]');
                     INSERT INTO runs VALUES (1, 1, 1, 1, 1, 0, 0, 0, 5, 'ok', NULL);
                     INSERT INTO metrics VALUES (1, 0, 't', 3.5, 'us/op', 'lower', 0);
                     INSERT INTO system VALUES (1, '6.1', '', 'cpu', 2, 'none', '[]');",
                )
                .unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let meta: String = s
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(meta, SCHEMA_VERSION.to_string());
        let e = s.load(1).unwrap();
        assert_eq!(e.samples(0, 0, "t"), vec![3.5]);
        assert_eq!(e.runs[0].trace_path, None);
        assert_eq!(e.system.unwrap().hostname, "");
    }

    #[test]
    fn migrates_per_cpu_metric_names_from_version_3() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        let metrics = [
            ("us_per_op", 3.5, 0),
            ("irq.LOC.per_s", 300.0, 1),
            ("irq.LOC.per_s@cpu0", 100.0, 1),
            ("irq.LOC.per_s@cpu1", 200.0, 1),
            ("odd@cpu", 1.0, 1),
            ("odd@cpu2x", 2.0, 1),
            ("@cpu3", 3.0, 1),
        ];
        // What the old schema's readers made of it: the rendered report of every metric.
        {
            let old = Store::create_at_version(&path, 3).unwrap();
            let mut sql = String::from(
                "INSERT INTO experiments(id, kind, name, command, created_ns, status, seed, target_ci, reference, spec_json)
                   VALUES (1, 'compare', 'old', 'pmlab compare', 0, 'complete', 7, 0.01, 0, '{}');
                 INSERT INTO configurations VALUES (1, 1, 0, 'a');
                 INSERT INTO workloads VALUES (1, 1, 0, 'pipe', '[\"pipe\"]');
                 INSERT INTO runs VALUES (1, 1, 1, 1, 1, 0, 0, 0, 5, 'ok', NULL, NULL);
                 INSERT INTO runs VALUES (2, 1, 1, 1, 2, 1, 0, 0, 5, 'ok', NULL, NULL);",
            );
            for run in [1, 2] {
                for (i, (name, v, side)) in metrics.iter().enumerate() {
                    sql.push_str(&format!(
                        "INSERT INTO metrics VALUES ({run}, {i}, '{name}', {}, '/s', 'lower', {side});",
                        v * run as f64
                    ));
                }
            }
            old.conn.execute_batch(&sql).unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let e = s.load(1).unwrap();
        let stored: Vec<(String, Option<u32>)> = e.runs[0]
            .metrics
            .iter()
            .map(|m| (m.name.clone(), m.cpu))
            .collect();
        assert_eq!(
            stored,
            [
                ("us_per_op", None),
                ("irq.LOC.per_s", None),
                ("irq.LOC.per_s", Some(0)),
                ("irq.LOC.per_s", Some(1)),
                ("odd@cpu", None),
                ("odd@cpu2x", None),
                ("@cpu3", None),
            ]
            .map(|(n, c)| (n.to_string(), c))
        );
        // Every old name still reads the same samples, and is written the same way.
        let labels: Vec<String> = e.metric_keys(0).iter().map(|k| k.label()).collect();
        for (name, v, _) in metrics {
            assert_eq!(e.samples(0, 0, name), vec![v, 2.0 * v], "{name}");
            assert!(labels.iter().any(|l| l == name), "{name} in {labels:?}");
        }
        // A new run written after the migration keeps its CPU in its own column.
        drop(s);
        let mut s = Store::open(&path).unwrap();
        let conn_cpu: Option<u32> = {
            s.insert_run(&NewRun {
                experiment: 1,
                configuration: 1,
                workload: 1,
                round: 3,
                position: 0,
                warmup: false,
                started_ns: 0,
                duration_ns: 5,
                status: RunStatus::Ok,
                error: None,
                metrics: vec![Metric::new("us_per_op", 1.0, "us", Direction::Lower)],
                side_metrics: vec![
                    Metric::new("irq.LOC.per_s", 9.0, "/s", Direction::Neutral).on_cpu(1)
                ],
                trace_path: None,
            })
            .unwrap();
            s.conn
                .query_row("SELECT cpu FROM metrics WHERE value = 9.0", [], |r| {
                    r.get(0)
                })
                .unwrap()
        };
        assert_eq!(conn_cpu, Some(1));
    }

    #[test]
    fn migrates_hotplug_sessions_and_walks_to_their_kinds_from_version_6() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v6.db");
        {
            let old = Store::create_at_version(&path, 6).unwrap();
            let spec = |name: &str| {
                format!(
                    r#"{{"kind":"run-spec","name":"{name}","configurations":[],"workloads":[],"reference":0,"swept":[],"hooks":{{}}}}"#
                )
            };
            let mut sql = String::new();
            for (id, name, argv0) in [
                (1, "hotplug", "hotplug"),
                (2, "hotplug inject-fail", "hotplug"),
                (3, "battery", "pipe"),
            ] {
                sql.push_str(&format!(
                    "INSERT INTO experiments(id, kind, name, command, created_ns, status, seed, target_ci, reference, spec_json)
                       VALUES ({id}, 'run-spec', '{name}', 'pmlab', 0, 'complete', 7, 0.01, 0, '{}');
                     INSERT INTO workloads VALUES ({id}, {id}, 0, 'w', '[\"{argv0}\", \"down\"]');",
                    spec(name)
                ));
            }
            // A compare whose workload happens to be named hotplug keeps its kind.
            sql.push_str(
                "INSERT INTO experiments(id, kind, name, command, created_ns, status, seed, target_ci, reference, spec_json)
                   VALUES (4, 'compare', 'c', 'pmlab', 0, 'complete', 7, 0.01, 0, '{}');
                 INSERT INTO workloads VALUES (4, 4, 0, 'w', '[\"hotplug\"]');",
            );
            old.conn.execute_batch(&sql).unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let kinds: Vec<(i64, Kind)> = s.list().unwrap().iter().map(|i| (i.id, i.kind)).collect();
        let mut kinds = kinds;
        kinds.sort_by_key(|k| k.0);
        assert_eq!(
            kinds,
            [
                (1, Kind::Hotplug),
                (2, Kind::Inject),
                (3, Kind::RunSpec),
                (4, Kind::Compare)
            ]
        );
        // The stored spec says the same.
        for (id, kind) in [(1, Kind::Hotplug), (2, Kind::Inject)] {
            let e: Experiment = serde_json::from_str(&s.spec_json(id).unwrap()).unwrap();
            assert_eq!(e.kind, kind);
        }
        assert!(s.spec_json(3).unwrap().contains(r#""kind":"run-spec""#));
    }

    /// A version-7 store kept a hotplug or injection run's CPU as a value metric `cpu`; opened
    /// now, that CPU is the `cpu` of the run's other metrics and the value metric is gone.
    /// Other kinds (a compare with a metric that happens to be named `cpu`) are left alone.
    #[test]
    fn moves_the_cpu_value_metric_of_hotplug_runs_into_metric_cpu_from_version_7() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v7.db");
        {
            let old = Store::create_at_version(&path, 7).unwrap();
            let mut sql = String::new();
            for (id, kind) in [(1, "hotplug"), (2, "inject"), (3, "compare")] {
                sql.push_str(&format!(
                    "INSERT INTO experiments(id, kind, name, command, created_ns, status, seed, target_ci, reference, spec_json, uid)
                       VALUES ({id}, '{kind}', 'e', 'pmlab', 0, 'complete', 7, 0.01, 0, '{{}}', 'u{id}');
                     INSERT INTO configurations VALUES ({id}, {id}, 0, 'none');
                     INSERT INTO workloads VALUES ({id}, {id}, 0, 'w', '[\"hotplug\", \"down\"]');
                     INSERT INTO runs(id, experiment_id, configuration_id, workload_id, round, position, warmup, started_ns, duration_ns, status)
                       VALUES ({id}, {id}, {id}, {id}, 1, 0, 0, 0, 5, 'ok');
                     INSERT INTO metrics(run_id, position, name, value, unit, direction, side)
                       VALUES ({id}, 0, 'hotplug.wall_ms', 30.5, 'ms', 'lower', 0),
                              ({id}, 1, 'cpu', 3, '', 'neutral', 1),
                              ({id}, 2, 'step_ms:235:sched_cpu_deactivate', 20.0, 'ms', 'lower', 1);"
                ));
            }
            old.conn.execute_batch(&sql).unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let keys = |id| -> Vec<(String, Option<u32>)> {
            s.load(id).unwrap().runs[0]
                .metrics
                .iter()
                .map(|m| (m.name.clone(), m.cpu))
                .collect()
        };
        for id in [1, 2] {
            assert_eq!(
                keys(id),
                [
                    ("hotplug.wall_ms".to_string(), Some(3)),
                    ("step_ms:235:sched_cpu_deactivate".to_string(), Some(3))
                ],
                "experiment {id}"
            );
            let e = s.load(id).unwrap();
            let wall = MetricKey::on_cpu("hotplug.wall_ms", 3);
            assert_eq!(e.samples(0, 0, wall), vec![30.5]);
        }
        assert_eq!(
            keys(3),
            [
                ("hotplug.wall_ms".to_string(), None),
                ("cpu".to_string(), None),
                ("step_ms:235:sched_cpu_deactivate".to_string(), None)
            ]
        );
    }

    #[test]
    fn newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        {
            let s = Store::open(&path).unwrap();
            s.conn.execute_batch("PRAGMA user_version = 99").unwrap();
        }
        assert!(matches!(
            Store::open(&path),
            Err(StoreError::TooNew { found: 99, .. })
        ));
    }

    #[test]
    fn concurrent_writers_both_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut s = Store::open(&path).unwrap();
                    let ids = s
                        .create_experiment(
                            &experiment(),
                            &Budget::default(),
                            "x",
                            &SystemSnapshot::default(),
                        )
                        .unwrap();
                    for i in 0..200 {
                        s.insert_run(&run(&ids, i % 2, i as f64, RunStatus::Ok))
                            .unwrap();
                    }
                    s.finish_experiment(ids.experiment, ExperimentStatus::Complete, "done")
                        .unwrap();
                    ids.experiment
                })
            })
            .collect();
        let ids: Vec<i64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let s = Store::open(&path).unwrap();
        for id in ids {
            assert_eq!(s.load(id).unwrap().runs.len(), 200);
        }
    }

    #[test]
    fn time_formatting() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00");
        assert_eq!(
            format_time(1_700_000_000 * 1_000_000_000),
            "2023-11-14 22:13:20"
        );
    }
}
