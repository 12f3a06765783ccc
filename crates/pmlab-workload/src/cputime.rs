//! The CPU time of the experiment's own tasks: this process (every thread, exited ones
//! included) and its reaped children (workload workers, `cmd` programs), from `getrusage`.
//! The lab subtracts it from the machine's busy time to find what other tasks used.
//!
//! Why `getrusage` and not `/proc/PID/stat`: the kernel scales a thread group's user+system
//! time to its precise runtime (`sum_exec_runtime`), and `getrusage` gives it in µs where
//! `/proc/PID/stat` rounds to 10 ms clock ticks; and it counts children only once reaped,
//! which every built-in workload does before its measured part ends.

use pmlab_kernel::Nanos;

/// CPU time (user + system) of this process and of its reaped children, at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnCpuTime {
    /// This process, all its threads.
    pub process: Nanos,
    /// Children waited for, and their waited-for descendants.
    pub children: Nanos,
}

impl OwnCpuTime {
    /// Both together.
    pub fn total(&self) -> Nanos {
        Nanos(self.process.0 + self.children.0)
    }
}

fn usage(who: libc::c_int) -> std::io::Result<Nanos> {
    // SAFETY: rusage is plain integers, for which all-zero bytes are a valid value.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes only the struct it is given, which lives through the call.
    if unsafe { libc::getrusage(who, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Ok(Nanos(ns(r.ru_utime) + ns(r.ru_stime)))
}

/// The CPU time used so far by this process and its reaped children.
pub fn own() -> std::io::Result<OwnCpuTime> {
    Ok(OwnCpuTime {
        process: usage(libc::RUSAGE_SELF)?,
        children: usage(libc::RUSAGE_CHILDREN)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_work_of_a_thread_and_of_a_reaped_child() {
        let a = own().unwrap();
        let spin = |ms: u128| {
            let t = std::time::Instant::now();
            let mut x = 1u64;
            while t.elapsed().as_millis() < ms {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        };
        std::thread::spawn(move || spin(30)).join().unwrap();
        let b = own().unwrap();
        assert!(b.process.0 >= a.process.0 + 20_000_000, "{a:?} {b:?}");
        let st = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(st.success());
        let c = own().unwrap();
        assert!(c.children.0 > b.children.0, "{b:?} {c:?}");
        assert_eq!(c.total().0, c.process.0 + c.children.0);
    }
}
