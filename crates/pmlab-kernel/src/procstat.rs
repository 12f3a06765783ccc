//! `/proc/PID/stat`: the one reader of a process's state, parent and start time (used to
//! tell a live owner from a reused pid, and to walk a process tree).

use crate::Root;

/// The fields of `/proc/PID/stat` that pmlab uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 3: `R`, `S`, `D`, `Z`, `X`, ...
    pub state: char,
    /// Field 4: the parent's pid.
    pub ppid: i32,
    /// Field 22: start time in clock ticks since boot.
    pub start_ticks: u64,
}

impl ProcStat {
    /// Parse the text of `/proc/PID/stat`. The command name may hold spaces and parentheses,
    /// so the fields are counted after its last `)`.
    pub fn parse(text: &str) -> Option<ProcStat> {
        let rest = &text[text.rfind(')')? + 1..];
        let mut f = rest.split_whitespace();
        let state = f.next()?.chars().next()?;
        let ppid = f.next()?.parse().ok()?;
        // After state (field 3) and ppid (field 4), starttime (field 22) is the 18th more.
        let start_ticks = f.nth(17)?.parse().ok()?;
        Some(ProcStat {
            state,
            ppid,
            start_ticks,
        })
    }

    /// Read process `pid` under `root`; `None` when it does not exist.
    pub fn read(root: &Root, pid: i64) -> Option<ProcStat> {
        let text = std::fs::read_to_string(root.path(&format!("/proc/{pid}/stat"))).ok()?;
        ProcStat::parse(&text)
    }

    /// Read process `pid` on this machine.
    pub fn of(pid: i64) -> Option<ProcStat> {
        ProcStat::read(&Root::system(), pid)
    }

    /// A zombie (or dead) process: gone for every purpose of pmlab's.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_counted_after_the_last_parenthesis() {
        let text = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 200 18446744073709551615\n";
        let s = ProcStat::parse(text).unwrap();
        assert_eq!(
            s,
            ProcStat {
                state: 'S',
                ppid: 17,
                start_ticks: 987654
            }
        );
        assert!(!s.is_dead());
        assert!(ProcStat::parse("1 (x) Z 0").is_none());
        assert!(ProcStat::parse("garbage").is_none());
    }

    #[test]
    fn reads_this_process() {
        let me = ProcStat::of(i64::from(std::process::id())).unwrap();
        assert_eq!(me.ppid as u32, std::os::unix::process::parent_id());
        assert!(!me.is_dead());
        assert!(ProcStat::of(i64::from(i32::MAX)).is_none());
    }
}
