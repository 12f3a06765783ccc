//! Background loads a test starts and stops: a bounded small-file writer (the steady mix of
//! I/O, page cache and CPU a backup or an indexer makes) and a CPU hog. Both stop when
//! dropped, on every exit path of the test.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writes small files (1–8 KiB) into a temporary directory, syncing every 64th and keeping
/// at most 2000 on disk, until dropped or until `max_files` or `max_time` is reached.
pub struct SmallFileWriter {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl SmallFileWriter {
    /// Start writing, bounded by a file count and a duration.
    pub fn start(max_files: u64, max_time: Duration) -> SmallFileWriter {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let (s, w) = (stop.clone(), written.clone());
        let thread = std::thread::Builder::new()
            .name("small-file-writer".into())
            .spawn(move || {
                let started = Instant::now();
                let block = vec![0x5au8; 8192];
                let mut n: u64 = 0;
                while !s.load(Ordering::Relaxed) && n < max_files && started.elapsed() < max_time {
                    let p = path.join(format!("f{}", n % 2000));
                    if let Ok(mut f) = std::fs::File::create(&p) {
                        let len = 1024 + (n as usize * 7919) % 7168;
                        let _ = f.write_all(&block[..len]);
                        if n.is_multiple_of(64) {
                            let _ = f.sync_data();
                        }
                    }
                    n += 1;
                    w.store(n, Ordering::Relaxed);
                }
            })
            .unwrap();
        SmallFileWriter {
            stop,
            written,
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// Files written so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

impl Drop for SmallFileWriter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `stress-ng --cpu 1` (niced as asked), killed and reaped when dropped.
pub struct CpuHog(std::process::Child);

impl CpuHog {
    /// Start one CPU hog at nice `nice`.
    pub fn start(nice: i32) -> CpuHog {
        CpuHog::spawn(nice, &[])
    }

    /// Start one CPU hog at nice `nice`, pinned to `cpu`; its worker's name is `stress-ng-cpu`.
    pub fn start_on(nice: i32, cpu: u32) -> CpuHog {
        CpuHog::spawn(nice, &["--taskset", &cpu.to_string()])
    }

    fn spawn(nice: i32, more: &[&str]) -> CpuHog {
        CpuHog(
            std::process::Command::new("nice")
                .args([
                    "-n",
                    &nice.to_string(),
                    "stress-ng",
                    "--cpu",
                    "1",
                    "--quiet",
                ])
                .args(more)
                .spawn()
                .expect("stress-ng (scripts/setup.sh installs it)"),
        )
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        // stress-ng's workers are its children: SIGTERM lets it stop them.
        crate::util::kill(self.0.id() as i32, libc::SIGTERM);
        let _ = self.0.wait();
    }
}
