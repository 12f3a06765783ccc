//! Studies in the result store: a `pmlab_studies` table beside the experiments (one row per
//! study: options, detected capabilities and stage notes as JSON), on its own connection.

use crate::store::{now_ns, Store, StoreError};
use pmlab_report::html::StageNote;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One study.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct StudyRecord {
    /// Its id in the store.
    pub id: i64,
    /// Creation time, ns since the Unix epoch.
    pub created_ns: i64,
    /// The quick battery was run.
    pub quick: bool,
    /// Where the report is written.
    pub out_dir: String,
    /// The command line that ran it.
    pub command: String,
    /// Each stage's outcome, in run order.
    pub stages: Vec<StageNote>,
    /// What the machine has, as (name, value) lines for the report.
    pub facts: Vec<(String, String)>,
    /// The study was interrupted.
    pub interrupted: bool,
}

fn sql(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

fn connect(db: &Path) -> Result<Connection, StoreError> {
    // Store::open checks the file is a pmlab store (or creates one) and migrates it.
    drop(Store::open(db)?);
    let c = Connection::open(db).map_err(sql(db))?;
    c.busy_timeout(crate::store::BUSY_TIMEOUT)
        .map_err(sql(db))?;
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS pmlab_studies (
            id INTEGER PRIMARY KEY, created_ns INTEGER NOT NULL, json TEXT NOT NULL)",
    )
    .map_err(sql(db))?;
    Ok(c)
}

/// Insert (id 0) or update a study; returns its id.
pub fn save(db: &Path, r: &StudyRecord) -> Result<i64, StoreError> {
    let c = connect(db)?;
    let json = serde_json::to_string(r).expect("study record serialises");
    if r.id == 0 {
        c.execute(
            "INSERT INTO pmlab_studies(created_ns, json) VALUES (?1, ?2)",
            params![now_ns(), json],
        )
        .map_err(sql(db))?;
        Ok(c.last_insert_rowid())
    } else {
        c.execute(
            "UPDATE pmlab_studies SET json = ?2 WHERE id = ?1",
            params![r.id, json],
        )
        .map_err(sql(db))?;
        Ok(r.id)
    }
}

/// A study by id, or the latest one (`None`).
pub fn load(db: &Path, id: Option<i64>) -> Result<Option<StudyRecord>, StoreError> {
    let c = connect(db)?;
    let row: Option<(i64, String)> = match id {
        Some(id) => c
            .query_row(
                "SELECT id, json FROM pmlab_studies WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional(),
        None => c
            .query_row(
                "SELECT id, json FROM pmlab_studies ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional(),
    }
    .map_err(sql(db))?;
    Ok(row.and_then(|(id, json)| {
        let mut r: StudyRecord = serde_json::from_str(&json).ok()?;
        r.id = id;
        Some(r)
    }))
}

/// The default output directory of a study.
pub(crate) fn default_out(id: i64) -> PathBuf {
    PathBuf::from(format!("pmlab-study-{id}"))
}
