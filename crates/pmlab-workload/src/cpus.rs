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
    Affinity::of(&[cpu]).apply()
}

/// A thread affinity mask.
#[derive(Clone, Copy)]
pub struct Affinity(CpuSet);

impl Affinity {
    /// The calling thread's mask.
    pub fn current() -> io::Result<Affinity> {
        Ok(Affinity(get_affinity()?))
    }

    /// The mask of exactly `cpus`.
    pub fn of(cpus: &[u32]) -> Affinity {
        let mut set = CpuSet::new();
        for &c in cpus {
            set.set(c as usize);
        }
        Affinity(set)
    }

    /// Give the calling thread this mask. Async-signal-safe (usable between fork and exec).
    pub fn apply(&self) -> io::Result<()> {
        set_affinity(&self.0)
    }
}

/// Restores the calling thread's affinity when dropped.
pub struct AffinityGuard(Affinity);

impl AffinityGuard {
    /// Remember the calling thread's current affinity, to restore it when the guard drops.
    pub fn save() -> io::Result<Self> {
        Ok(AffinityGuard(Affinity::current()?))
    }

    /// The mask restored on drop.
    pub fn saved(&self) -> Affinity {
        self.0
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        let _ = self.0.apply();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpus() {
        assert!(!allowed_cpus().unwrap().is_empty());
    }

    #[test]
    fn a_guard_restores_the_mask_it_saved() {
        let all = allowed_cpus().unwrap();
        {
            let _g = AffinityGuard::save().unwrap();
            Affinity::of(&all[..1]).apply().unwrap();
            assert_eq!(allowed_cpus().unwrap(), all[..1]);
        }
        assert_eq!(allowed_cpus().unwrap(), all);
    }
}
