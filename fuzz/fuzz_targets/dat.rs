//! Fuzz target: the trace.dat v6/v7 reader (and the ftrace text reader for other input),
//! then the renderer over every decoded event. Any panic is a bug; errors are fine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pmlab_trace::dat::{self, LoadOptions};

fuzz_target!(|data: &[u8]| {
    let trace = if data.starts_with(&dat::MAGIC[..3]) {
        dat::parse(data, &LoadOptions { kallsyms: true }).ok()
    } else {
        pmlab_trace::text::parse(data).ok()
    };
    if let Some(t) = trace {
        let _ = pmlab_trace::summary::summarize(&t);
        let mut sink = std::io::sink();
        let _ = pmlab_trace::render::dump(&t, &mut sink);
        let _ = pmlab_trace::render::dump_json(&t, &mut sink);
    }
});
