//! Fuzz target: the ring-buffer page decoder on raw pages, for every layout (both
//! endiannesses, 4- and 8-byte commit fields) and a few page sizes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pmlab_trace::format::HeaderPage;
use pmlab_trace::page::{read_header, PageCursor, PageLayout};
use pmlab_trace::Endian;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, pages)) = data.split_first() else {
        return;
    };
    let endian = if sel & 1 == 0 { Endian::Little } else { Endian::Big };
    let long = if sel & 2 == 0 { 8 } else { 4 };
    let page_size = [4096usize, 64, 256, 1][(sel as usize >> 2) & 3];
    let layout = PageLayout::new(endian, &HeaderPage::for_long_size(long));
    let _ = read_header(&layout, pages);
    let mut c = PageCursor::new(layout, pages, page_size);
    let mut n = 0usize;
    while let Ok(Some(r)) = c.next_record() {
        // a record always lies inside the data
        assert!(r.offset as u64 + r.len <= pages.len() as u64);
        n += 1;
        if n > 1 << 20 {
            break;
        }
    }
});
