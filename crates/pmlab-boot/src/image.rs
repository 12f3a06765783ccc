//! What a kernel file is: an x86 bzImage (its setup header's `HdrS` and version string) or
//! an arm64 Image (its `ARM\x64` magic, also inside a gzip-compressed `vmlinuz`). Anything
//! else is refused before QEMU runs.

use crate::BootError;
use pmlab_store::spec::GuestArch;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A kernel image pmlab can boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelImage {
    /// The file.
    pub path: PathBuf,
    /// Its architecture.
    pub arch: GuestArch,
    /// Its release, from the image's version string, when it has one where pmlab looks.
    pub release: Option<String>,
}

impl KernelImage {
    /// Look at `path` and say what kernel it is, or why it is none.
    pub fn inspect(path: &Path) -> Result<KernelImage, BootError> {
        let io = |source| BootError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut head = Vec::new();
        std::fs::File::open(path)
            .map_err(io)?
            .take(64 * 1024)
            .read_to_end(&mut head)
            .map_err(|source| BootError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        let not = |why: &str| BootError::NotAKernel {
            path: path.to_path_buf(),
            why: why.to_string(),
        };
        if head.len() >= 0x210 && &head[0x202..0x206] == b"HdrS" {
            // The setup header's kernel_version: offset of the version string, minus 0x200.
            let off = u16::from_le_bytes([head[0x20e], head[0x20f]]) as usize + 0x200;
            let release = head.get(off..).and_then(|v| {
                let end = v.iter().position(|&b| b == 0 || b == b' ')?;
                std::str::from_utf8(&v[..end]).ok().map(str::to_string)
            });
            return Ok(KernelImage {
                path: path.to_path_buf(),
                arch: GuestArch::X86_64,
                release: release.filter(|r| !r.is_empty()),
            });
        }
        let arm64 = |b: &[u8]| b.len() >= 0x40 && &b[0x38..0x3c] == b"ARM\x64";
        let open = || {
            std::fs::File::open(path).map_err(|source| BootError::Io {
                path: path.to_path_buf(),
                source,
            })
        };
        if arm64(&head) {
            return Ok(KernelImage {
                path: path.to_path_buf(),
                arch: GuestArch::Arm64,
                release: banner_release(open()?),
            });
        }
        if head.starts_with(&[0x1f, 0x8b]) {
            let mut inner = Vec::new();
            let file = std::fs::File::open(path).map_err(|source| BootError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            let _ = flate2::read::GzDecoder::new(file)
                .take(0x40)
                .read_to_end(&mut inner);
            if arm64(&inner) {
                return Ok(KernelImage {
                    path: path.to_path_buf(),
                    arch: GuestArch::Arm64,
                    release: banner_release(flate2::read::GzDecoder::new(open()?)),
                });
            }
            return Err(not("a gzip file that holds no arm64 kernel Image"));
        }
        Err(not(
            "neither an x86 bzImage (no `HdrS` setup header) nor an arm64 Image (no `ARM\\x64` magic)",
        ))
    }
}

/// The release in an image's `Linux version RELEASE (` banner (arm64 Images have no header
/// field for it), read through once.
fn banner_release(mut r: impl Read) -> Option<String> {
    const NEEDLE: &[u8] = b"Linux version ";
    let mut buf = vec![0u8; 1 << 20];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = r.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        carry.extend_from_slice(&buf[..n]);
        if let Some(at) = carry.windows(NEEDLE.len()).position(|w| w == NEEDLE) {
            let rest = &carry[at + NEEDLE.len()..];
            if let Some(end) = rest.iter().position(|&b| b == b' ' || b == 0) {
                return std::str::from_utf8(&rest[..end])
                    .ok()
                    .filter(|s| !s.is_empty() && !s.contains('%'))
                    .map(str::to_string);
            }
            if rest.len() > 256 {
                return None;
            }
            continue;
        }
        let keep = carry.len().saturating_sub(NEEDLE.len() + 256);
        carry.drain(..keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_file_is_not_a_kernel() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("notes.txt");
        std::fs::write(&p, "hello").unwrap();
        let e = KernelImage::inspect(&p).unwrap_err().to_string();
        assert!(e.contains("is not a kernel"), "{e}");
        assert!(e.contains("HdrS"), "{e}");
    }

    #[test]
    fn a_bzimage_header_gives_arch_and_release() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bz");
        let mut b = vec![0u8; 0x1000];
        b[0x202..0x206].copy_from_slice(b"HdrS");
        b[0x20e..0x210].copy_from_slice(&0x300u16.to_le_bytes());
        b[0x500..0x50a].copy_from_slice(b"6.12.1-x (");
        std::fs::write(&p, &b).unwrap();
        let k = KernelImage::inspect(&p).unwrap();
        assert_eq!(k.arch, GuestArch::X86_64);
        assert_eq!(k.release.as_deref(), Some("6.12.1-x"));
    }

    #[test]
    fn a_gzipped_arm64_image_is_found() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vmlinuz");
        let mut img = vec![0u8; 0x100];
        img[0x38..0x3c].copy_from_slice(b"ARM\x64");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&img).unwrap();
        std::fs::write(&p, gz.finish().unwrap()).unwrap();
        assert_eq!(KernelImage::inspect(&p).unwrap().arch, GuestArch::Arm64);
    }
}
