//! The kernel's hotplug state table (`/sys/devices/system/cpu/hotplug/states`): numbers and
//! names, resolving a user's STATE (name or number), and which states are the "arch part".

use std::path::Path;

use serde::Serialize;

use super::{HotplugError, InputError};

/// One line of `hotplug/states`: ` 83: cpu:bringup`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HotplugState {
    /// The state's number (its index in the kernel's `enum cpuhp_state`).
    pub number: i32,
    /// The state's name (`sched:active`).
    pub name: String,
}

/// The whole table, in kernel order (ascending numbers).
#[derive(Debug, Clone, Default, Serialize)]
pub struct StateTable {
    /// Every state, in number order.
    pub states: Vec<HotplugState>,
}

impl StateTable {
    /// Read `sys_cpu/hotplug/states`.
    pub fn read(sys_cpu: &Path) -> Result<StateTable, HotplugError> {
        let path = sys_cpu.join("hotplug/states");
        let text = std::fs::read_to_string(&path).map_err(|source| HotplugError::Io {
            path: path.clone(),
            source,
        })?;
        StateTable::parse(&text).map_err(|source| HotplugError::States { path, source })
    }

    /// Parse the text of `hotplug/states`.
    pub fn parse(text: &str) -> Result<StateTable, InputError> {
        let mut states = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let (num, name) = line.split_once(':').ok_or_else(|| InputError::StateLine {
                line: i + 1,
                text: line.to_string(),
            })?;
            // The number's own error adds nothing to "bad state number".
            let number = num.trim().parse().map_err(|_| InputError::StateNumber {
                line: i + 1,
                text: num.to_string(),
            })?;
            states.push(HotplugState {
                number,
                name: name.trim().to_string(),
            });
        }
        if states.is_empty() {
            return Err(InputError::NoStates);
        }
        Ok(StateTable { states })
    }

    /// The name of state `number`, if the table has it.
    pub fn name_of(&self, number: i32) -> Option<&str> {
        self.states
            .iter()
            .find(|s| s.number == number)
            .map(|s| s.name.as_str())
    }

    fn number_of(&self, name: &str) -> Option<i32> {
        self.states
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.number)
    }

    /// Resolve a user's STATE: a number present in the table, or an exact name.
    pub fn resolve(&self, spec: &str) -> Result<HotplugState, InputError> {
        let spec = spec.trim();
        let found: Vec<&HotplugState> = match spec.parse::<i32>() {
            Ok(n) => self.states.iter().filter(|s| s.number == n).collect(),
            Err(_) => self.states.iter().filter(|s| s.name == spec).collect(),
        };
        match found.as_slice() {
            [one] => Ok((*one).clone()),
            [] => {
                let similar = self
                    .states
                    .iter()
                    .filter(|s| {
                        let base = spec.split(':').next().unwrap_or(spec);
                        !base.is_empty() && s.name.contains(base)
                    })
                    .map(|s| s.name.clone())
                    .take(5)
                    .collect();
                Err(InputError::UnknownState {
                    spec: spec.to_string(),
                    similar,
                })
            }
            many => Err(InputError::AmbiguousState {
                spec: spec.to_string(),
                numbers: many.iter().map(|s| s.number).collect(),
            }),
        }
    }

    /// The range of states that make up the arch part: from `cpu:kick_ap` (or `cpu:bringup`)
    /// through `ap:online`, plus `cpu:teardown` — the bringup and teardown of the CPU itself
    /// and the STARTING/DYING states that run on it with interrupts off.
    pub fn arch_range(&self) -> ArchRange {
        let first = self
            .number_of("cpu:kick_ap")
            .or_else(|| self.number_of("cpu:bringup"))
            .unwrap_or(i32::MAX);
        let last = self
            .number_of("ap:online")
            .or_else(|| self.number_of("cpu:teardown"))
            .unwrap_or(i32::MIN);
        ArchRange {
            first,
            last,
            teardown: self.number_of("cpu:teardown"),
        }
    }
}

/// See [`StateTable::arch_range`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ArchRange {
    /// First state of the arch part.
    pub first: i32,
    /// Last state of the arch part.
    pub last: i32,
    /// `cpu:teardown`, when the kernel has it.
    pub teardown: Option<i32>,
}

impl ArchRange {
    /// Whether `state` is in the arch part.
    pub fn contains(&self, state: i32) -> bool {
        (self.first <= state && state <= self.last) || self.teardown == Some(state)
    }
}

#[cfg(test)]
pub(crate) const SAMPLE: &str = "  0: offline
  1: threads:prepare
 30: mm/page_alloc:pcp
 82: cpu:kick_ap
 83: cpu:bringup
 84: idle:dead
 85: ap:offline
 87: sched:starting
143: ap:online
144: cpu:teardown
147: kvm/cpu:online
203: cpuidle/haltpoll:online
235: sched:active
236: online
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_table() {
        let t = StateTable::parse(SAMPLE).unwrap();
        assert_eq!(t.states.len(), 14);
        assert_eq!(t.name_of(235), Some("sched:active"));
        assert_eq!(t.states[0].number, 0);
    }

    #[test]
    fn resolves_by_name_and_number() {
        let t = StateTable::parse(SAMPLE).unwrap();
        assert_eq!(t.resolve("sched:active").unwrap().number, 235);
        assert_eq!(t.resolve("83").unwrap().name, "cpu:bringup");
    }

    #[test]
    fn unknown_state_is_refused_with_hint() {
        let t = StateTable::parse(SAMPLE).unwrap();
        let e = t.resolve("sched:nonesuch").unwrap_err().to_string();
        assert!(e.contains("no hotplug state"), "{e}");
        assert!(e.contains("sched:active"), "{e}");
        assert!(t.resolve("999").is_err());
    }

    #[test]
    fn ambiguous_name_asks_for_number() {
        let t = StateTable::parse("1: a:x\n2: a:x\n").unwrap();
        let e = t.resolve("a:x").unwrap_err();
        assert!(e.to_string().contains("ambiguous"));
        assert_eq!(
            e.to_string(),
            "hotplug state name \"a:x\" is ambiguous: numbers 1, 2; give the number"
        );
    }

    #[test]
    fn arch_range_covers_bringup_through_ap_online_and_teardown() {
        let t = StateTable::parse(SAMPLE).unwrap();
        let a = t.arch_range();
        assert!(a.contains(82) && a.contains(83) && a.contains(87) && a.contains(143));
        assert!(a.contains(144));
        assert!(!a.contains(147) && !a.contains(30) && !a.contains(235));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(StateTable::parse("hello\n").is_err());
        assert!(StateTable::parse("").is_err());
        assert_eq!(
            StateTable::parse("x: a\n").unwrap_err(),
            InputError::StateNumber {
                line: 1,
                text: "x".into()
            }
        );
        // Read from a file: the path, then the line as its cause.
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("hotplug")).unwrap();
        std::fs::write(t.path().join("hotplug/states"), "  0: offline\nhello\n").unwrap();
        let e = StateTable::read(t.path()).unwrap_err();
        assert!(matches!(e, HotplugError::States { .. }), "{e:?}");
        assert!(e.to_string().ends_with("hotplug/states"), "{e}");
        let cause = std::error::Error::source(&e).unwrap().to_string();
        assert_eq!(cause, "line 2: expected `N: name`, found \"hello\"");
    }
}
