//! Export: one CSV file per table into a directory (`pmlab analyze FILE --export DIR`).
//! Parquet output is added when the `parquet` writer module lands.

use crate::table::Table;
use std::path::{Path, PathBuf};

/// Write `DIR/<table>.csv` for each table; returns the paths written.
pub fn write_csv(dir: &Path, tables: &[Table]) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    for t in tables {
        let p = dir.join(format!("{}.csv", t.name));
        std::fs::write(&p, t.to_csv())?;
        out.push(p);
    }
    Ok(out)
}
