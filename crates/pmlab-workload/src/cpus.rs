//! CPUs this process may use, and pinning the calling thread.

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
use std::io;

pub use pmlab_kernel::cpulist::{format_cpu_list, parse_cpu_list};

/// CPUs this process may run on (online and in its affinity mask), sorted.
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    let set = get_affinity()?;
    Ok((0..CpuSet::MAX_CPU as u32)
        .filter(|c| set.is_set(*c as usize))
        .collect())
}

/// The calling thread's affinity mask.
pub(crate) fn get_affinity() -> io::Result<CpuSet> {
    Ok(sched_getaffinity(None)?)
}

/// Set the calling thread's affinity mask.
pub(crate) fn set_affinity(set: &CpuSet) -> io::Result<()> {
    Ok(sched_setaffinity(None, set)?)
}

/// Pin the calling thread to one CPU. Async-signal-safe (usable after fork).
pub(crate) fn pin_to(cpu: u32) -> io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu as usize);
    set_affinity(&set)
}

/// Restores the calling thread's affinity when dropped.
pub(crate) struct AffinityGuard(CpuSet);

impl AffinityGuard {
    pub(crate) fn save() -> io::Result<Self> {
        Ok(AffinityGuard(get_affinity()?))
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        let _ = set_affinity(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpus() {
        assert!(!allowed_cpus().unwrap().is_empty());
    }
}
