//! Faults in the pages of columns being filled, on another core and a stretch ahead of
//! the writer, so the writer does not stop at every new page to have it zeroed.
//!
//! The helper wakes only when the writer says how far it got (a channel, no polling), and
//! asks the kernel to populate the next rows' pages (`MADV_POPULATE_WRITE`, which maps
//! pages writable without touching their contents).

use std::sync::mpsc::{channel, Sender};
use std::thread::JoinHandle;

/// Rows the helper keeps populated ahead of the writer.
const LEAD: usize = 1 << 16;
/// Rows between two of the writer's reports.
pub(crate) const STEP: usize = 1 << 15;

/// One column: its buffer's address, element size and capacity in rows.
#[derive(Clone, Copy)]
pub(crate) struct Column {
    pub addr: usize,
    pub size: usize,
    pub cap: usize,
}

/// The writer's side: reports progress; dropping it stops and joins the helper.
pub(crate) struct Prefault {
    tx: Option<Sender<usize>>,
    helper: Option<JoinHandle<()>>,
}

impl Prefault {
    /// Starts the helper for `columns` when there are rows enough and a core to spare;
    /// it populates the first [`LEAD`] rows at once.
    pub(crate) fn start(columns: Vec<Column>) -> Option<Prefault> {
        let rows = columns.iter().map(|c| c.cap).min()?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if rows < 2 * LEAD || cores < 2 {
            return None;
        }
        let (tx, rx) = channel::<usize>();
        let helper = std::thread::Builder::new()
            .name("pmlab-prefault".into())
            .spawn(move || {
                let mut done = 0usize;
                while let Ok(mut at) = rx.recv() {
                    // Catch up with the latest report when several queued.
                    while let Ok(later) = rx.try_recv() {
                        at = later;
                    }
                    let hi = (at + LEAD).min(rows);
                    if hi <= done {
                        continue;
                    }
                    for c in &columns {
                        if populate(c, done.max(at), hi).is_err() {
                            // Kernels before 5.14 lack the advice: the writer faults alone.
                            return;
                        }
                    }
                    done = hi;
                }
            })
            .ok()?;
        tx.send(0).ok()?;
        Some(Prefault {
            tx: Some(tx),
            helper: Some(helper),
        })
    }

    /// The writer has filled `rows` rows.
    pub(crate) fn reached(&self, rows: usize) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(rows);
        }
    }
}

impl Drop for Prefault {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.helper.take() {
            let _ = h.join();
        }
    }
}

/// Populates the whole pages that rows `lo..hi` of `c` lie in.
fn populate(c: &Column, lo: usize, hi: usize) -> rustix::io::Result<()> {
    const PAGE: usize = 4096;
    let start = (c.addr + lo * c.size) & !(PAGE - 1);
    let end = (c.addr + hi * c.size).div_ceil(PAGE) * PAGE;
    // SAFETY: the range lies in pages of a buffer the writer owns and keeps alive until
    // this helper is joined (Drop); populating maps pages and never changes their bytes.
    unsafe { crate::dat::advise_inside(start, end, rustix::mm::Advice::LinuxPopulateWrite) }
}
