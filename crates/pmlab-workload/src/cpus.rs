//! CPUs this process may use, and pinning the calling thread.

use std::io;

pub use pmlab_kernel::cpulist::{format_cpu_list, parse_cpu_list};

/// CPUs this process may run on (online and in its affinity mask), sorted.
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    let set = get_affinity()?;
    Ok((0..libc::CPU_SETSIZE as u32)
        .filter(|c| unsafe { libc::CPU_ISSET(*c as usize, &set) })
        .collect())
}

/// The calling thread's affinity mask.
pub(crate) fn get_affinity() -> io::Result<libc::cpu_set_t> {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// Set the calling thread's affinity mask.
pub(crate) fn set_affinity(set: &libc::cpu_set_t) -> io::Result<()> {
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pin the calling thread to one CPU. Async-signal-safe (usable after fork).
pub(crate) fn pin_to(cpu: u32) -> io::Result<()> {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        set_affinity(&set)
    }
}

/// Restores the calling thread's affinity when dropped.
pub(crate) struct AffinityGuard(libc::cpu_set_t);

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
