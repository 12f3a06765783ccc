//! What a signal needs from the knob engine: the live journals of this process, one lock
//! shared by every knob write and restore (so a signal never lands between a write and
//! its journal), the process-wide stop state (no knob write starts after it), and the
//! restore-and-exit used when the main thread cannot restore by itself. The one signal
//! watcher that calls these lives in `pmlab_lab::lab` (it blocks; nothing here polls).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

static ENGINE: Mutex<()> = Mutex::new(());
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static STOP: AtomicBool = AtomicBool::new(false);

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

/// Whether this process holds journaled knob changes not yet restored.
pub fn has_live_journals() -> bool {
    !live().is_empty()
}

/// Record that a signal asked this process to stop: no new knob write starts after this.
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a signal asked this process to stop (no new knob writes are made then).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Restore every live journal of this process (under the engine lock, so after any write
/// in progress) and exit with 128+`sig`.
pub fn restore_live_and_exit(sig: i32) -> ! {
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
