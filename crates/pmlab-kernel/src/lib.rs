//! pmlab-kernel: access to the kernel's files (sysfs, procfs, debugfs, tracefs),
//! topology, counters, knobs and the knob journal. Every reader takes a root path.

pub mod counters;
pub mod cpulist;
pub mod hwmon;
pub mod knob;
pub mod msr;
pub mod procstat;
pub mod sysinfo;
pub mod tracefs;
pub mod units;

pub mod root;
pub use root::Root;

pub use units::{Direction, KHz, Metric, MetricKey, Micros, Nanos};

/// An error with its causes, `a: b: c`, each cause said once (some errors already say
/// their source in their own message). The one way pmlab turns an error into text: the
/// CLI's message, a run's stored error, a Python exception.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let m = c.to_string();
        if !s.ends_with(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod error_chain_tests {
    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("outer")]
        Wraps(#[source] std::io::Error),
        #[error("outer: {0}")]
        Says(#[source] std::io::Error),
    }

    #[test]
    fn each_cause_is_said_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "inner");
        assert_eq!(super::error_chain(&Outer::Wraps(io())), "outer: inner");
        assert_eq!(super::error_chain(&Outer::Says(io())), "outer: inner");
    }
}
