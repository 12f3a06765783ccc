//! Model-specific registers through `/dev/cpu/N/msr` (the kernel's msr module): 8 bytes at
//! offset ADDR read with pread and written with pwrite, and bit fields of a register changed
//! by read-modify-write so that every other bit keeps its value.

use crate::Root;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// `MSR_PKG_CST_CONFIG_CONTROL`: package C-state limit, C1 demotion, CFG lock.
pub const PKG_CST_CONFIG_CONTROL: u32 = 0xe2;
/// `MSR_POWER_CTL`: C1E autopromote.
pub const POWER_CTL: u32 = 0x1fc;

/// A bit field of one MSR: `width` bits from bit `lo`, optionally frozen by a lock bit of
/// the same register (the firmware's CFG lock on `MSR_PKG_CST_CONFIG_CONTROL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Field {
    /// The register's address.
    pub addr: u32,
    /// Lowest bit of the field.
    pub lo: u8,
    /// Number of bits.
    pub width: u8,
    /// A bit that, when set, makes the field read-only until reset.
    pub lock: Option<u8>,
}

impl Field {
    /// `width` bits from bit `lo` of MSR `addr`, with no lock bit.
    pub const fn new(addr: u32, lo: u8, width: u8) -> Field {
        Field {
            addr,
            lo,
            width,
            lock: None,
        }
    }

    /// The same field, frozen when bit `bit` of the register is set.
    pub const fn locked_by(self, bit: u8) -> Field {
        Field {
            lock: Some(bit),
            ..self
        }
    }

    /// The field's bits within the register.
    pub fn mask(&self) -> u64 {
        let ones = if self.width >= 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        };
        ones << self.lo
    }

    /// The largest value the field holds.
    pub fn max(&self) -> u64 {
        self.mask() >> self.lo
    }

    /// The field's value in register value `reg`.
    pub fn get(&self, reg: u64) -> u64 {
        (reg & self.mask()) >> self.lo
    }

    /// `reg` with the field set to `v` and every other bit unchanged.
    pub fn put(&self, reg: u64, v: u64) -> Result<u64, MsrError> {
        if v > self.max() {
            return Err(MsrError::TooWide {
                addr: self.addr,
                value: v,
                width: self.width,
            });
        }
        Ok((reg & !self.mask()) | (v << self.lo))
    }

    /// The lock bit is set in register value `reg`.
    pub fn is_locked(&self, reg: u64) -> bool {
        self.lock.is_some_and(|b| reg & (1u64 << b) != 0)
    }
}

/// Why an MSR could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MsrError {
    /// No `/dev/cpu/N/msr` (msr module not loaded, CPU offline or absent).
    #[error("{} is absent: load the msr module (modprobe msr)", path.display())]
    Absent {
        /// The device file.
        path: PathBuf,
        /// The open error.
        #[source]
        source: io::Error,
    },
    /// Opening, reading or writing the device failed (EIO: the CPU lacks this MSR).
    #[error("{op} MSR {addr:#x} through {}", path.display())]
    Io {
        /// `reading` or `writing`.
        op: &'static str,
        /// The device file.
        path: PathBuf,
        /// The register.
        addr: u32,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A value wider than its field.
    #[error("{value} does not fit in the {width}-bit field of MSR {addr:#x}")]
    TooWide {
        /// The register.
        addr: u32,
        /// The value given.
        value: u64,
        /// The field's width in bits.
        width: u8,
    },
    /// The field's lock bit is set: the write is refused before anything is written.
    #[error("MSR {addr:#x} through {} is locked (bit {bit} is set, by the firmware): it cannot be changed until reset", path.display())]
    Locked {
        /// The device file.
        path: PathBuf,
        /// The register.
        addr: u32,
        /// The lock bit.
        bit: u8,
    },
}

impl MsrError {
    /// The `io::ErrorKind` this error stands for (absent device: `NotFound`).
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            MsrError::Absent { .. } => io::ErrorKind::NotFound,
            MsrError::Io { source, .. } => source.kind(),
            MsrError::TooWide { .. } => io::ErrorKind::InvalidInput,
            MsrError::Locked { .. } => io::ErrorKind::PermissionDenied,
        }
    }
}

impl From<MsrError> for io::Error {
    fn from(e: MsrError) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

/// The device file of `cpu`'s MSRs under `root`.
pub fn device(root: &Root, cpu: u32) -> PathBuf {
    root.path(&format!("/dev/cpu/{cpu}/msr"))
}

fn open(path: &Path, write: bool) -> Result<std::fs::File, MsrError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => MsrError::Absent {
                path: path.to_path_buf(),
                source,
            },
            _ => MsrError::Io {
                op: if write { "writing" } else { "reading" },
                path: path.to_path_buf(),
                addr: 0,
                source,
            },
        })
}

/// The 8-byte value of MSR `addr` through device file `path` (pread at offset `addr`).
pub fn read(path: &Path, addr: u32) -> Result<u64, MsrError> {
    let f = open(path, false)?;
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, u64::from(addr))
        .map_err(|source| MsrError::Io {
            op: "reading",
            path: path.to_path_buf(),
            addr,
            source,
        })?;
    Ok(u64::from_le_bytes(b))
}

/// Write the whole 8-byte value of MSR `addr` (pwrite at offset `addr`).
pub fn write(path: &Path, addr: u32, value: u64) -> Result<(), MsrError> {
    let f = open(path, true)?;
    f.write_all_at(&value.to_le_bytes(), u64::from(addr))
        .map_err(|source| MsrError::Io {
            op: "writing",
            path: path.to_path_buf(),
            addr,
            source,
        })
}

/// The value of field `f`.
pub fn read_field(path: &Path, f: Field) -> Result<u64, MsrError> {
    Ok(f.get(read(path, f.addr)?))
}

/// Set field `f` to `v` by read-modify-write (other bits unchanged; nothing written when
/// the field already holds `v`); refused when the lock bit is set. Returns the register's
/// value before.
pub fn write_field(path: &Path, f: Field, v: u64) -> Result<u64, MsrError> {
    let before = read(path, f.addr)?;
    let after = f.put(before, v)?;
    if after == before {
        return Ok(before);
    }
    if let (true, Some(bit)) = (f.is_locked(before), f.lock) {
        return Err(MsrError::Locked {
            path: path.to_path_buf(),
            addr: f.addr,
            bit,
        });
    }
    write(path, f.addr, after)?;
    Ok(before)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(regs: &[(u32, u64)]) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("msr");
        std::fs::File::create(&p).unwrap();
        for (a, v) in regs {
            write(&p, *a, *v).unwrap();
        }
        (d, p)
    }

    #[test]
    fn a_field_write_changes_only_its_bits() {
        let (_d, p) = dev(&[(0xe2, 0x1400_0403), (0x1fc, 0x12_00a4_0059)]);
        let limit = Field::new(0xe2, 0, 4).locked_by(15);
        assert_eq!(read_field(&p, limit).unwrap(), 3);
        assert_eq!(write_field(&p, limit, 0).unwrap(), 0x1400_0403);
        assert_eq!(read(&p, 0xe2).unwrap(), 0x1400_0400);
        let demote = Field::new(0xe2, 26, 1);
        write_field(&p, demote, 0).unwrap();
        assert_eq!(read(&p, 0xe2).unwrap(), 0x1000_0400);
        assert_eq!(read(&p, 0x1fc).unwrap(), 0x12_00a4_0059, "other register");
    }

    #[test]
    fn bad_writes_are_refused_and_change_nothing() {
        let (_d, p) = dev(&[(0xe2, 0x1400_8403)]);
        let limit = Field::new(0xe2, 0, 4).locked_by(15);
        let e = write_field(&p, limit, 1).unwrap_err();
        assert!(matches!(e, MsrError::Locked { bit: 15, .. }), "{e}");
        assert!(e.to_string().contains("locked (bit 15"), "{e}");
        // The value it already holds is not a write, locked or not.
        write_field(&p, limit, 3).unwrap();
        let e = write_field(&p, Field::new(0xe2, 26, 1), 2).unwrap_err();
        assert!(matches!(e, MsrError::TooWide { width: 1, .. }), "{e}");
        assert_eq!(read(&p, 0xe2).unwrap(), 0x1400_8403);
        let e = read(&p.with_file_name("none"), 0xe2).unwrap_err();
        assert!(matches!(e, MsrError::Absent { .. }), "{e}");
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::NotFound);
        // Beyond the end of the (sparse) file: the read fails with its cause kept.
        let e = read(&p, 0x10_0000).unwrap_err();
        assert!(std::error::Error::source(&e).is_some(), "{e}");
    }
}
