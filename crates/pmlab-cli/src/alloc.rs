//! The process allocator: the system's, with large blocks offered to transparent huge pages.
//! Decoding and analysing a trace fills hundreds of MB of fresh memory; 2 MiB pages take
//! far fewer faults than 4 KiB ones (in a VM each fault is costly).

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes are advised for huge pages.
const HUGE_FROM: usize = 4 << 20;

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

// SAFETY: every call goes to `System`; `advise` only adds a hint on the returned block.
unsafe impl GlobalAlloc for HugeForLarge {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        advise(p, layout.size());
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        advise(p, layout.size());
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        System.dealloc(p, layout)
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = System.realloc(p, layout, new_size);
        advise(q, new_size);
        q
    }
}
