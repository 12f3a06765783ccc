//! The guest's initramfs: busybox and pmlab's init script (`guest/init.sh`), written as a
//! newc cpio archive into the session's work directory.

use crate::BootError;
use pmlab_store::spec::GuestArch;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The init script every guest runs.
pub const INIT: &str = include_str!("../guest/init.sh");

/// Where busybox for a guest architecture is found (Debian's `busybox-static`, and its arm64
/// package unpacked by `scripts/setup.sh`).
pub fn busybox_candidates(arch: GuestArch) -> Vec<PathBuf> {
    let cache = crate::cache_dir();
    match arch {
        GuestArch::X86_64 => vec![
            PathBuf::from("/bin/busybox"),
            PathBuf::from("/usr/bin/busybox"),
            cache.join("busybox-x86_64"),
        ],
        GuestArch::Arm64 => vec![cache.join("busybox-arm64")],
    }
}

/// The static busybox for `arch`, or why there is none.
pub fn busybox(arch: GuestArch, given: Option<&Path>) -> Result<PathBuf, BootError> {
    if let Some(p) = given {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(BootError::Missing {
                what: format!("busybox {}", p.display()),
                hint: "give a static busybox for the guest's architecture".into(),
            })
        };
    }
    busybox_candidates(arch)
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| BootError::Missing {
            what: format!("a static busybox for {arch} guests"),
            hint: match arch {
                GuestArch::X86_64 => "apt-get install busybox-static (or run scripts/setup.sh)",
                GuestArch::Arm64 => "run scripts/setup.sh with PMLAB_GUEST_ARM64=1",
            }
            .into(),
        })
}

/// Write the initramfs (`busybox` as `/bin/busybox`, [`INIT`] as `/init`) to `out`.
pub fn write_initramfs(busybox: &Path, out: &Path) -> Result<(), BootError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BootError::Io { path, source }
    };
    let bb = std::fs::read(busybox).map_err(err(busybox))?;
    let f = std::fs::File::create(out).map_err(err(out))?;
    let mut w = std::io::BufWriter::new(f);
    let mut ino = 0;
    let mut entry =
        |w: &mut std::io::BufWriter<std::fs::File>, name: &str, mode: u32, data: &[u8]| {
            ino += 1;
            let mut fw = cpio::newc::Builder::new(name)
                .ino(ino)
                .mode(mode)
                .nlink(if mode & 0o040000 != 0 { 2 } else { 1 })
                .write(w, data.len() as u32);
            fw.write_all(data)?;
            fw.finish().map(|_| ())
        };
    for d in ["bin", "dev", "proc", "sys", "tmp"] {
        entry(&mut w, d, 0o040755, &[]).map_err(err(out))?;
    }
    entry(&mut w, "init", 0o100755, INIT.as_bytes()).map_err(err(out))?;
    entry(&mut w, "bin/busybox", 0o100755, &bb).map_err(err(out))?;
    cpio::newc::trailer(&mut w).map_err(err(out))?;
    w.flush().map_err(err(out))?;
    Ok(())
}
