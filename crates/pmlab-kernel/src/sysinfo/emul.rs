//! Fake roots from Intel pepc's emulation data (`tests/emul-data/MACHINE` in
//! github.com/intel/pepc, BSD-3): real machines' sysfs as `sys/inlinefiles.txt`
//! (`ro|PATH|VALUE` lines), their `proc/` files, and `msr/msr.txt`. The data stays out of
//! this repository; tests find it through [`data_dir`] and build trees with [`build`].

use crate::Root;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Environment variable naming pepc's `tests/emul-data` directory (or a pepc checkout).
pub const DATA_ENV: &str = "PMLAB_PEPC_EMUL_DATA";

/// Where a pepc checkout is looked for when [`DATA_ENV`] is unset:
/// `$XDG_CACHE_HOME/pmlab/pepc` (or `~/.cache/pmlab/pepc`).
pub fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("pmlab/pepc"))
}

/// pepc's `emul-data` directory, from [`DATA_ENV`] or [`cache_dir`]; the error says how to
/// get it (for a test's skip reason).
pub fn data_dir() -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = match std::env::var_os(DATA_ENV) {
        Some(d) => vec![PathBuf::from(d)],
        None => cache_dir().into_iter().collect(),
    };
    for c in &candidates {
        for d in [c.clone(), c.join("tests/emul-data")] {
            if d.join("spr1/sys/inlinefiles.txt").is_file() || has_machines(&d) {
                return Ok(d);
            }
        }
    }
    Err(format!(
        "pepc's emulation data not found (set {DATA_ENV} to pepc's tests/emul-data, or run \
         `git clone --depth 1 https://github.com/intel/pepc {}`)",
        cache_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| "~/.cache/pmlab/pepc".into())
    ))
}

fn has_machines(d: &Path) -> bool {
    !machines(d).is_empty()
}

/// Machines (directory names) of an `emul-data` directory, sorted.
pub fn machines(data: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(data)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().join("sys/inlinefiles.txt").is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// What [`build`] made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Built {
    /// sysfs files written.
    pub sysfs_files: usize,
    /// procfs files copied.
    pub proc_files: usize,
    /// `/dev/cpu/N/msr` files written (sparse: the value of MSR `A` at offset `A`).
    pub msr_cpus: usize,
}

/// Build the fake root of one machine directory (`.../emul-data/spr1`) under `dest`.
/// `ro` files get mode 0444 and `rw` files 0644, as in sysfs; each value ends in a newline,
/// as the kernel prints it. Lines that are not `ro|PATH|VALUE` or `rw|PATH|VALUE` with an
/// absolute path below `/sys` are refused with their line number.
pub fn build(machine: &Path, dest: &Path) -> io::Result<Built> {
    let mut built = Built::default();
    let inline = machine.join("sys/inlinefiles.txt");
    let text = fs::read_to_string(&inline)?;
    let bad = |n: usize, why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}:{}: {why}", inline.display(), n + 1),
        )
    };
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, '|');
        let (Some(mode), Some(path), Some(value)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad(n, "expected <ro|rw>|PATH|VALUE"));
        };
        let mode = match mode {
            "ro" => 0o444,
            "rw" => 0o644,
            _ => return Err(bad(n, "mode is neither ro nor rw")),
        };
        if !path.starts_with("/sys/") || path.split('/').any(|c| c == "..") {
            return Err(bad(n, "path is not below /sys"));
        }
        let full = dest.join(path.trim_start_matches('/'));
        if let Some(d) = full.parent() {
            fs::create_dir_all(d)?;
        }
        fs::write(&full, format!("{value}\n"))?;
        fs::set_permissions(&full, fs::Permissions::from_mode(mode))?;
        built.sysfs_files += 1;
    }
    let proc_src = machine.join("proc");
    if proc_src.is_dir() {
        let proc_dst = dest.join("proc");
        fs::create_dir_all(&proc_dst)?;
        for e in fs::read_dir(&proc_src)?.flatten() {
            if e.path().is_file() {
                fs::copy(e.path(), proc_dst.join(e.file_name()))?;
                built.proc_files += 1;
            }
        }
    }
    let msr = machine.join("msr/msr.txt");
    if msr.is_file() {
        built.msr_cpus = write_msrs(&fs::read_to_string(&msr)?, &dest.join("dev/cpu"))?;
    }
    fs::create_dir_all(dest.join("sys/kernel/debug"))?;
    Ok(built)
}

/// `ADDR:CPU|VAL CPU|VAL ...` lines (hex address and value) into sparse `N/msr` files.
fn write_msrs(text: &str, dir: &Path) -> io::Result<usize> {
    let mut cpus = std::collections::BTreeSet::new();
    let mut files: std::collections::BTreeMap<u32, fs::File> = Default::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((addr, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else {
            continue;
        };
        for pair in rest.split_whitespace() {
            let Some((cpu, val)) = pair.split_once('|') else {
                continue;
            };
            let (Ok(cpu), Ok(val)) = (cpu.parse::<u32>(), u64::from_str_radix(val, 16)) else {
                continue;
            };
            if let std::collections::btree_map::Entry::Vacant(v) = files.entry(cpu) {
                let d = dir.join(cpu.to_string());
                fs::create_dir_all(&d)?;
                v.insert(fs::File::create(d.join("msr"))?);
            }
            files[&cpu].write_all_at(&val.to_le_bytes(), addr)?;
            cpus.insert(cpu);
        }
    }
    for f in files.values_mut() {
        f.flush()?;
    }
    Ok(cpus.len())
}

/// A machine's fake root in a temp dir (removed on drop).
pub struct EmulRoot {
    _dir: tempfile::TempDir,
    /// The root to hand to readers and writers.
    pub root: Root,
    /// What was built.
    pub built: Built,
}

/// [`build`] into a fresh temp dir.
pub fn build_temp(machine: &Path) -> io::Result<EmulRoot> {
    let dir = tempfile::tempdir()?;
    let built = build(machine, dir.path())?;
    Ok(EmulRoot {
        root: Root::new(dir.path()),
        _dir: dir,
        built,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_files_become_a_tree_with_modes_and_msrs() {
        let src = tempfile::tempdir().unwrap();
        let m = src.path().join("box");
        fs::create_dir_all(m.join("sys")).unwrap();
        fs::create_dir_all(m.join("proc")).unwrap();
        fs::create_dir_all(m.join("msr")).unwrap();
        fs::write(
            m.join("sys/inlinefiles.txt"),
            "# Format: <ro|rw>|<sysfs_path>|<value>\n\
             rw|/sys/module/pcie_aspm/parameters/policy|[default] performance \n\
             ro|/sys/devices/system/cpu/online|0-1\n\
             rw|/sys/devices/system/cpu/cpu1/online|1\n",
        )
        .unwrap();
        fs::write(m.join("proc/version"), "Linux version 6.9.0-x (gcc) #1\n").unwrap();
        fs::write(m.join("msr/msr.txt"), "# MSR data\ne2:0|1f 1|403\n").unwrap();
        let dst = tempfile::tempdir().unwrap();
        let b = build(&m, dst.path()).unwrap();
        assert_eq!(
            b,
            Built {
                sysfs_files: 3,
                proc_files: 1,
                msr_cpus: 2
            }
        );
        let p = dst.path().join("sys/module/pcie_aspm/parameters/policy");
        assert_eq!(fs::read_to_string(&p).unwrap(), "[default] performance \n");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), 0o644);
        assert_eq!(
            mode(&dst.path().join("sys/devices/system/cpu/online")),
            0o444
        );
        let msr = fs::read(dst.path().join("dev/cpu/1/msr")).unwrap();
        assert_eq!(&msr[0xe2..0xea], &0x403u64.to_le_bytes());
        fs::write(m.join("sys/inlinefiles.txt"), "rw|/etc/passwd|x\n").unwrap();
        let e = build(&m, dst.path()).unwrap_err().to_string();
        assert!(e.contains(":1: path is not below /sys"), "{e}");
    }
}
