//! The process allocator: the system's, with large blocks offered to transparent huge pages,
//! and an arena for the large blocks of trace analyses.
//! Decoding and analysing a trace fills hundreds of MB of fresh memory; 2 MiB pages take
//! far fewer faults than 4 KiB ones (in a VM each fault is costly). Freeing a large block
//! unmaps it, and with threads on other CPUs that costs TLB-shootdown IPIs, which are dear
//! in a VM too: the arena hands out blocks in order from one mapping and never frees them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Blocks of at least this many bytes are advised for huge pages.
const HUGE_FROM: usize = 4 << 20;
/// Blocks of at least this many bytes come from the arena while it has room.
const ARENA_FROM: usize = 64 << 10;

pub struct HugeForLarge;

fn advise(p: *mut u8, size: usize) {
    if size < HUGE_FROM || p.is_null() {
        return;
    }
    let start = (p as usize + 4095) & !4095;
    let end = (p as usize + size) & !4095;
    if end > start {
        // SAFETY: advisory call on memory this block owns; failure is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// The arena's mapping `[START, END)`, handed out up to `NEXT`; all zero while unset.
static ARENA_START: AtomicUsize = AtomicUsize::new(0);
static ARENA_END: AtomicUsize = AtomicUsize::new(0);
static ARENA_NEXT: AtomicUsize = AtomicUsize::new(0);

fn in_arena(p: *mut u8) -> bool {
    let a = p as usize;
    a >= ARENA_START.load(Ordering::Relaxed) && a < ARENA_END.load(Ordering::Relaxed)
}

/// A block of `layout` from the arena, or null when there is none or it is full.
fn arena_alloc(layout: Layout) -> *mut u8 {
    if layout.size() < ARENA_FROM {
        return std::ptr::null_mut();
    }
    let end = ARENA_END.load(Ordering::Acquire);
    let mut next = ARENA_NEXT.load(Ordering::Relaxed);
    loop {
        if next == 0 {
            return std::ptr::null_mut();
        }
        let start = (next + layout.align() - 1) & !(layout.align() - 1);
        let Some(stop) = start.checked_add(layout.size()).filter(|&s| s <= end) else {
            return std::ptr::null_mut();
        };
        match ARENA_NEXT.compare_exchange_weak(next, stop, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return start as *mut u8,
            Err(seen) => next = seen,
        }
    }
}

/// Grows the arena's last block in place; false if `p` is not the last block or the arena
/// has no room. (Never shrinks: freed arena memory is not handed out again, so new blocks
/// are always zero.)
fn arena_grow_last(p: *mut u8, old: usize, new: usize) -> bool {
    let (a, end) = (p as usize, ARENA_END.load(Ordering::Relaxed));
    match a.checked_add(new).filter(|&s| s <= end) {
        Some(stop) => ARENA_NEXT
            .compare_exchange(a + old, stop, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok(),
        None => false,
    }
}

/// Makes blocks of 64 KiB or more come from a new arena of `bytes` of address space (pages
/// cost nothing until touched) until it is full. Once per process; false if mapping fails
/// or an arena exists already.
pub fn start_arena(bytes: usize) -> bool {
    let len = bytes.div_ceil(2 << 20) * (2 << 20);
    if len == 0 || ARENA_START.load(Ordering::Relaxed) != 0 {
        return false;
    }
    // SAFETY: a new private anonymous mapping; nothing else refers to it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    // SAFETY: advisory call on the mapping just made.
    unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
    let start = p as usize;
    ARENA_START.store(start, Ordering::Relaxed);
    ARENA_END.store(start + len, Ordering::Release);
    ARENA_NEXT.store(start, Ordering::Release);
    true
}

/// A block from the arena, else from `system` with the huge-page hint.
fn arena_or(layout: Layout, system: impl FnOnce() -> *mut u8) -> *mut u8 {
    let p = arena_alloc(layout);
    if !p.is_null() {
        return p;
    }
    let p = system();
    advise(p, layout.size());
    p
}

// SAFETY: every call goes to `System`, except blocks handed out from the arena, a mapping
// this allocator owns for the life of the process; arena blocks are never reused.
unsafe impl GlobalAlloc for HugeForLarge {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        arena_or(layout, || System.alloc(layout))
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Arena memory is fresh and never reused: already zero.
        arena_or(layout, || System.alloc_zeroed(layout))
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if in_arena(p) {
            // Left unused until exit.
            return;
        }
        System.dealloc(p, layout)
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if in_arena(p) {
            if new_size <= layout.size() || arena_grow_last(p, layout.size(), new_size) {
                return p;
            }
            let new = Layout::from_size_align_unchecked(new_size, layout.align());
            let q = self.alloc(new);
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
            }
            return q;
        }
        let q = System.realloc(p, layout, new_size);
        advise(q, new_size);
        q
    }
}
