//! Restore on SIGINT/SIGTERM/SIGHUP: a watcher thread sets the stop flag, gives the main
//! thread a grace period to restore by itself, then restores every live journal of this
//! process and exits. Knob writes and restores share one lock, so a signal never lands
//! between a write and its journal.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

static ENGINE: Mutex<()> = Mutex::new(());
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static STOP: AtomicBool = AtomicBool::new(false);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The lock every knob write and restore holds.
pub(crate) fn engine_lock() -> MutexGuard<'static, ()> {
    ENGINE.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn register(path: &Path) {
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(path.to_path_buf());
}

pub(crate) fn unregister(path: &Path) {
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|p| p != path);
}

fn live() -> Vec<PathBuf> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Whether a signal asked this process to stop (no new knob writes are made then).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Install the handlers (once per process). On the first SIGINT/SIGTERM/SIGHUP the returned
/// flag is set; if the main thread has not restored its transactions within `grace`
/// (or a second signal comes), they are restored here and the process exits with 128+signal.
/// With a zero grace, restore and exit happen at once.
pub fn install_signal_restore(grace: Duration) -> Result<Arc<AtomicBool>, super::KnobError> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    if INSTALLED.swap(true, Ordering::SeqCst) {
        // A second install shares the process-wide stop state through a watcher.
        let f = Arc::clone(&flag);
        std::thread::spawn(move || loop {
            if STOP.load(Ordering::SeqCst) {
                f.store(true, Ordering::SeqCst);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        });
        return Ok(flag);
    }
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(|e| {
            super::KnobError::Journal {
                path: "(signal handlers)".into(),
                reason: e.to_string(),
            }
        })?;
    let f = Arc::clone(&flag);
    std::thread::Builder::new()
        .name("pmlab-knob-signals".into())
        .spawn(move || {
            let mut first: Option<(i32, Instant)> = None;
            loop {
                let mut got = None;
                for s in signals.pending() {
                    got = Some(s);
                }
                if let Some(s) = got {
                    STOP.store(true, Ordering::SeqCst);
                    f.store(true, Ordering::SeqCst);
                    if let Some((sig, _)) = first {
                        restore_and_exit(sig);
                    }
                    first = Some((s, Instant::now()));
                }
                if let Some((sig, at)) = first {
                    if grace.is_zero() {
                        restore_and_exit(sig);
                    }
                    if at.elapsed() >= grace {
                        if live().is_empty() {
                            // The main thread restored by itself; it exits on its own.
                            first = None;
                        } else {
                            restore_and_exit(sig);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .map_err(|e| super::KnobError::Journal {
            path: "(signal thread)".into(),
            reason: e.to_string(),
        })?;
    Ok(flag)
}

fn restore_and_exit(sig: i32) -> ! {
    let _g = engine_lock();
    let paths = live();
    let errors = super::txn::restore_paths(&paths);
    if !paths.is_empty() {
        if errors.is_empty() {
            eprintln!("pmlab: interrupted (signal {sig}): knobs restored");
        } else {
            eprintln!(
                "pmlab: error: interrupted (signal {sig}): restore incomplete: {}",
                errors.join("; ")
            );
        }
    }
    std::process::exit(128 + sig);
}
