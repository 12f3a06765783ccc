//! Result bundles: one immutable directory per experiment, laid out as
//! `host=H/kernel=K/experiment=UID/` so DuckDB, Spark or Trino read a fleet's bundles with
//! hive partitioning, each holding `manifest.json` (identity, spec, pmlab version), the
//! Parquet tables of `export` and `experiment.db` (a one-experiment store that `import`
//! loads losslessly into another store).

use crate::export::{self, ExportError};
use crate::store::{Imported, Store, StoreError};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The bundle format written here.
pub const FORMAT: &str = "pmlab-bundle/1";
/// The store file inside a bundle.
pub const STORE_FILE: &str = "experiment.db";
/// The manifest inside a bundle.
pub const MANIFEST: &str = "manifest.json";

/// Why a bundle could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The store the bundle is made from, or its own store, failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the bundle's Parquet tables failed.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// A file or directory of the bundle could not be read or written.
    #[error("{}", .path.display())]
    Io {
        /// That file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The path holds no bundle (no `experiment.db` in it or below).
    #[error("{}: no pmlab bundle here (no {STORE_FILE} in it or below)", .0.display())]
    NoBundle(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A hive partition value: path-safe (letters, digits, `.`, `_`, `-`, `+`; others `_`).
fn partition(s: &str) -> String {
    let v: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if v.is_empty() {
        "unknown".into()
    } else {
        v
    }
}

#[derive(Serialize)]
struct Manifest<'a> {
    format: &'static str,
    uid: &'a str,
    experiment: &'a crate::store::ExperimentInfo,
    identity: &'a crate::system::SystemSnapshot,
    spec: serde_json::Value,
    /// The pmlab that wrote the bundle (the one that ran it is in `identity`).
    pmlab_version: &'static str,
    files: Vec<String>,
}

/// What [`export()`] did with one experiment.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The experiment's id in the source store.
    pub id: i64,
    /// The bundle's directory.
    pub dir: PathBuf,
    /// False: the bundle was there already (bundles are never rewritten).
    pub written: bool,
}

/// Write experiment `id` of `store` as a bundle under `root`; an existing bundle of the same
/// experiment is left as it is. Written in a temporary directory beside it and renamed, so a
/// bundle is whole or absent.
pub fn export(store: &Store, id: i64, root: &Path) -> Result<Exported, BundleError> {
    let e = store.load(id)?;
    let sys = e.system.clone().unwrap_or_default();
    let dir = root
        .join(format!("host={}", partition(&sys.hostname)))
        .join(format!("kernel={}", partition(&sys.kernel_release)))
        .join(format!("experiment={}", partition(&e.info.uid)));
    if dir.join(MANIFEST).is_file() {
        return Ok(Exported {
            id,
            dir,
            written: false,
        });
    }
    let parent = dir.parent().expect("bundle dir has a parent");
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".pmlab-bundle-")
        .tempdir_in(parent)
        .map_err(io(parent))?;
    let mut files: Vec<String> = export::write_parquet_named(&e, tmp.path(), "")?
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let mut one = Store::open(&tmp.path().join(STORE_FILE))?;
    one.import(store.path(), Some(&[id]), &mut |_, _| None)?;
    drop(one);
    files.push(STORE_FILE.into());
    let spec = serde_json::from_str(&store.spec_json(id)?).unwrap_or(serde_json::Value::Null);
    let manifest = Manifest {
        format: FORMAT,
        uid: &e.info.uid,
        experiment: &e.info,
        identity: &sys,
        spec,
        pmlab_version: env!("CARGO_PKG_VERSION"),
        files,
    };
    let path = tmp.path().join(MANIFEST);
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serialises");
    std::fs::write(&path, text + "\n").map_err(io(&path))?;
    let tmp = tmp.keep();
    std::fs::rename(&tmp, &dir).map_err(|source| {
        let _ = std::fs::remove_dir_all(&tmp);
        BundleError::Io {
            path: dir.clone(),
            source,
        }
    })?;
    Ok(Exported {
        id,
        dir,
        written: true,
    })
}

/// Every bundle store (`experiment.db` beside a manifest) in or below `dir`, sorted.
pub fn find(dir: &Path) -> Result<Vec<PathBuf>, BundleError> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) -> Result<(), BundleError> {
        if d.join(MANIFEST).is_file() && d.join(STORE_FILE).is_file() {
            out.push(d.join(STORE_FILE));
            return Ok(());
        }
        for entry in std::fs::read_dir(d).map_err(io(d))? {
            let entry = entry.map_err(io(d))?;
            let hidden = entry.file_name().to_string_lossy().starts_with('.');
            if entry.file_type().map_err(io(d))?.is_dir() && !hidden {
                walk(&entry.path(), out)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    if out.is_empty() {
        return Err(BundleError::NoBundle(dir.to_path_buf()));
    }
    out.sort();
    Ok(out)
}

/// Load every bundle in or below each of `dirs` into `store` (all checked to exist first);
/// experiments already there are skipped.
pub fn import(store: &mut Store, dirs: &[PathBuf]) -> Result<Vec<Imported>, BundleError> {
    let mut files = Vec::new();
    for d in dirs {
        files.extend(find(d)?);
    }
    let mut out = Vec::new();
    for f in files {
        out.extend(store.import(&f, None, &mut |_, _| None)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Budget, Configuration, Experiment, Kind, WorkloadDef};
    use crate::store::{ExperimentStatus, NewRun, RunStatus};
    use crate::system::SystemSnapshot;
    use pmlab_kernel::{Direction, Metric};

    /// A store at `path` with one finished experiment run on `host`.
    fn store_on(path: &Path, host: &str) -> i64 {
        let mut s = Store::open(path).unwrap();
        let e = Experiment::new(
            Kind::Compare,
            "t".into(),
            vec![Configuration::parse("a", "").unwrap()],
            vec![WorkloadDef::new(vec!["idle".into()]).unwrap()],
            None,
        )
        .unwrap();
        let sys = SystemSnapshot {
            hostname: host.into(),
            kernel_release: "6.18.0/x".into(),
            ..Default::default()
        };
        let ids = s
            .create_experiment(&e, &Budget::default(), "pmlab compare", &sys)
            .unwrap();
        s.insert_run(&NewRun {
            experiment: ids.experiment,
            configuration: ids.configurations[0],
            workload: ids.workloads[0],
            round: 1,
            position: 0,
            warmup: false,
            started_ns: 1,
            duration_ns: 1000,
            status: RunStatus::Ok,
            error: None,
            metrics: vec![Metric::new("t", 3.0, "us", Direction::Lower)],
            side_metrics: vec![],
            trace_path: None,
        })
        .unwrap();
        s.finish_experiment(ids.experiment, ExperimentStatus::Complete, "done")
            .unwrap();
        ids.experiment
    }

    #[test]
    fn export_then_import_round_trips_once() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("a.db");
        let id = store_on(&src, "host a");
        let store = Store::open(&src).unwrap();
        let root = dir.path().join("bundles");
        let b = export(&store, id, &root).unwrap();
        assert!(b.written);
        let uid = store.load(id).unwrap().info.uid;
        assert_eq!(
            b.dir,
            root.join(format!("host=host_a/kernel=6.18.0_x/experiment={uid}"))
        );
        for f in [MANIFEST, STORE_FILE, "runs.parquet", "metrics.parquet"] {
            assert!(b.dir.join(f).is_file(), "{f}");
        }
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(b.dir.join(MANIFEST)).unwrap()).unwrap();
        assert_eq!(m["format"], FORMAT);
        assert_eq!(m["identity"]["hostname"], "host a");
        assert_eq!(m["spec"]["name"], "t");
        // Bundles are immutable: a second export leaves it alone.
        let before = std::fs::read(b.dir.join(MANIFEST)).unwrap();
        assert!(!export(&store, id, &root).unwrap().written);
        assert_eq!(std::fs::read(b.dir.join(MANIFEST)).unwrap(), before);
        let mut dst = Store::open(&dir.path().join("fleet.db")).unwrap();
        let got = import(&mut dst, std::slice::from_ref(&root)).unwrap();
        assert_eq!(got.len(), 1);
        let e = dst.load(got[0].id.unwrap()).unwrap();
        assert_eq!(e.info.uid, uid);
        assert_eq!(e.samples(0, 0, "t"), vec![3.0]);
        let again = import(&mut dst, &[root]).unwrap();
        assert_eq!(again[0].id, None);
        assert_eq!(dst.list().unwrap().len(), 1);
    }

    #[test]
    fn a_directory_without_bundles_is_refused_and_nothing_is_imported() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("a.db");
        let id = store_on(&src, "a");
        let root = dir.path().join("bundles");
        export(&Store::open(&src).unwrap(), id, &root).unwrap();
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let mut dst = Store::open(&dir.path().join("fleet.db")).unwrap();
        for bad in [empty.clone(), dir.path().join("missing")] {
            let e = import(&mut dst, &[root.clone(), bad.clone()]).unwrap_err();
            assert!(e.to_string().contains(&bad.display().to_string()), "{e}");
        }
        assert!(dst.list().unwrap().is_empty(), "checked before any import");
    }
}
