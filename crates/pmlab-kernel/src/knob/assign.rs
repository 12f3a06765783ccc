//! Knob assignments as values: `KnobId` (a knob's name and the CPUs it is limited to) and
//! `Assignment` (a knob and the value to give it), parsed once from `NAME[@CPUS]=VALUE` at
//! the edges (command line, spec files, Python) and written back in the same canonical text.

use crate::cpulist::{format_cpu_list, parse_cpu_list, CpuListError};
use std::fmt;
use std::str::FromStr;

/// Why a text is not a knob name or an assignment. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    /// No `=` (or nothing before it).
    #[error("`{text}`: expected NAME[@CPUS]=VALUE (example: haltpoll.guest_halt_poll_ns=200us)")]
    NotAnAssignment {
        /// The text as given.
        text: String,
    },
    /// No knob name (empty, or only `@CPUS`).
    #[error("`{text}`: no knob name (expected NAME[@CPUS], example: cpuidle.POLL.disable@1)")]
    NoName {
        /// The text as given.
        text: String,
    },
    /// The part after `@` is not a CPU list.
    #[error("`{text}`: bad CPUs after `@`")]
    Cpus {
        /// The text as given.
        text: String,
        /// Why the CPU list did not parse.
        #[source]
        source: CpuListError,
    },
    /// The part after `@` names a unit pmlab does not know.
    #[error("`{text}`: bad scope `@{scope}` (expected CPUs like 0-3, `all`, or units like package1, die0, package0.die1, module2, core3, node0)")]
    Scope {
        /// The text as given.
        text: String,
        /// The scope as given.
        scope: String,
    },
    /// A value with a line break: a kernel file takes one line.
    #[error("`{text}`: the value must be one line")]
    Multiline {
        /// The text as given.
        text: String,
    },
}

/// A topology unit a scope can name (pepc's `--packages`, `--dies`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UnitKind {
    /// A package (socket).
    Package,
    /// A die; die numbers count within a package, so `die0` is die 0 of every package.
    Die,
    /// A module (CPUs sharing an L2 cache) or cluster.
    Module,
    /// A core; core numbers count within a package, so `core3` is core 3 of every package.
    Core,
    /// A NUMA node.
    Node,
}

impl UnitKind {
    /// Every kind, in the order of the text form's words.
    pub const ALL: [UnitKind; 5] = [
        UnitKind::Package,
        UnitKind::Die,
        UnitKind::Module,
        UnitKind::Core,
        UnitKind::Node,
    ];
    /// The word (`package`, `die`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            UnitKind::Package => "package",
            UnitKind::Die => "die",
            UnitKind::Module => "module",
            UnitKind::Core => "core",
            UnitKind::Node => "node",
        }
    }
}

/// Units a scope names: `package1.die0` is die 0 of package 1 (every part must hold).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Units {
    /// `@all`: every CPU (or unit) the knob applies to, said explicitly.
    All,
    /// `@package1`, `@die0-1`, `@package0.die1`: the intersection of each kind's numbers.
    Of(Vec<(UnitKind, Vec<u32>)>),
}

impl fmt::Display for Units {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Units::All => f.write_str("all"),
            Units::Of(parts) => {
                let words: Vec<String> = parts
                    .iter()
                    .map(|(k, ids)| format!("{}{}", k.as_str(), format_cpu_list(ids)))
                    .collect();
                f.write_str(&words.join("."))
            }
        }
    }
}

impl Units {
    fn parse(s: &str) -> Option<Units> {
        if s == "all" {
            return Some(Units::All);
        }
        let mut parts: Vec<(UnitKind, Vec<u32>)> = Vec::new();
        for w in s.split('.') {
            let kind = UnitKind::ALL
                .into_iter()
                .find(|k| w.starts_with(k.as_str()))?;
            let ids = parse_cpu_list(&w[kind.as_str().len()..]).ok()?;
            if ids.is_empty() || parts.iter().any(|(k, _)| *k == kind) {
                return None;
            }
            parts.push((kind, ids));
        }
        parts.sort_by_key(|p| p.0);
        (!parts.is_empty()).then_some(Units::Of(parts))
    }
}

/// A knob: its name (`cpuidle.POLL.disable`, `rcu.expedited`, `sysfs:/sys/PATH`) and, for a
/// per-CPU, per-policy or per-die knob, the CPUs (`@1`, `@0-3`) or units (`@package1`,
/// `@die0`, `@all`) it is limited to (none: all of them).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KnobId {
    name: String,
    cpus: Option<Vec<u32>>,
    units: Option<Units>,
}

impl KnobId {
    /// The knob `name` on every CPU it applies to (or a knob of the machine).
    ///
    /// Panics when `name` is empty or holds `=` or `@` (a programming error; text from
    /// people goes through `FromStr`).
    pub fn new(name: impl Into<String>) -> KnobId {
        let name = name.into();
        assert!(
            !name.is_empty()
                && !name.contains('=')
                && (name.starts_with("sysfs:") || !name.contains('@')),
            "not a knob name: {name:?}"
        );
        KnobId {
            name,
            cpus: None,
            units: None,
        }
    }

    /// A name read from the machine, taken as it is.
    pub(super) fn of(name: String, cpus: Option<Vec<u32>>) -> KnobId {
        KnobId {
            name,
            cpus,
            units: None,
        }
    }

    /// This knob limited to topology units (`@package1`, `@all`).
    pub fn in_units(mut self, units: Units) -> KnobId {
        self.cpus = None;
        self.units = Some(units);
        self
    }

    /// The units it is limited to (`@package1`, `@die0`, `@all`); `None` for a CPU list or
    /// no scope.
    pub fn units(&self) -> Option<&Units> {
        self.units.as_ref()
    }

    /// This knob limited to `cpus` (sorted, without duplicates).
    pub fn at(mut self, cpus: &[u32]) -> KnobId {
        let mut c = cpus.to_vec();
        c.sort_unstable();
        c.dedup();
        self.cpus = Some(c);
        self.units = None;
        self
    }

    /// Any file under `/sys` (`sysfs:/sys/PATH`), as the machine names it.
    pub fn sysfs(path: &str) -> KnobId {
        KnobId::new(format!("sysfs:{path}"))
    }

    /// `cpuN/online`, the CPU hotplug knob.
    pub fn cpu_online(cpu: u32) -> KnobId {
        KnobId::new("cpu.online").at(&[cpu])
    }

    /// `/sys/kernel/rcu_expedited`.
    pub fn rcu_expedited() -> KnobId {
        KnobId::new("rcu.expedited")
    }

    /// `cpuN/hotplug/fail`, the CPU hotplug fault injection (a `sysfs:` knob: not in the table).
    pub fn hotplug_fail(cpu: u32) -> KnobId {
        KnobId::sysfs(&format!("/sys/devices/system/cpu/cpu{cpu}/hotplug/fail"))
    }

    /// The name without `@CPUS`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The CPUs it is limited to; `None`: all CPUs it applies to.
    pub fn cpus(&self) -> Option<&[u32]> {
        self.cpus.as_deref()
    }

    /// The path of a `sysfs:/sys/PATH` knob.
    pub fn sysfs_path(&self) -> Option<&str> {
        self.name.strip_prefix("sysfs:")
    }

    /// This knob given `value` (as people write it: `200us`, `on`, `menu`).
    pub fn set(self, value: impl Into<String>) -> Assignment {
        Assignment {
            knob: self,
            value: value.into(),
        }
    }

    /// Parse `NAME[@CPUS]` of `whole` (the text to name in errors).
    fn parse_in(text: &str, whole: &str) -> Result<KnobId, AssignmentError> {
        let text = text.trim();
        // A sysfs path may hold `@`: it has no CPU list.
        let (name, cpus) = match text.rsplit_once('@') {
            Some((n, c)) if !text.starts_with("sysfs:") => (n.trim(), Some(c)),
            _ => (text, None),
        };
        if name.is_empty() || name.contains('=') {
            return Err(AssignmentError::NoName { text: whole.into() });
        }
        let (mut units, mut list) = (None, None);
        match cpus.map(str::trim) {
            Some(c)
                if c.starts_with("all")
                    || UnitKind::ALL.iter().any(|k| c.starts_with(k.as_str())) =>
            {
                units = Some(Units::parse(c).ok_or_else(|| AssignmentError::Scope {
                    text: whole.into(),
                    scope: c.into(),
                })?);
            }
            Some(c) => {
                list = Some(parse_cpu_list(c).map_err(|source| AssignmentError::Cpus {
                    text: whole.into(),
                    source,
                })?)
            }
            None => {}
        }
        Ok(KnobId {
            name: name.to_string(),
            cpus: list,
            units,
        })
    }
}

impl FromStr for KnobId {
    type Err = AssignmentError;

    /// `NAME[@CPUS]`.
    fn from_str(s: &str) -> Result<KnobId, AssignmentError> {
        KnobId::parse_in(s, s)
    }
}

impl fmt::Display for KnobId {
    /// `NAME[@CPUS]`, the CPU list as the kernel writes it (`0-3,5`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(c) = &self.cpus {
            write!(f, "@{}", format_cpu_list(c))?;
        }
        if let Some(u) = &self.units {
            write!(f, "@{u}")?;
        }
        Ok(())
    }
}

/// One knob assignment: a knob and the value to give it, as people write it. The value is
/// checked against the knob (type, unit, range, the kernel's allowed list) when it is
/// resolved on a machine (`knob::plan`), since that depends on the machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Assignment {
    knob: KnobId,
    value: String,
}

impl Assignment {
    /// `cpu.online@CPU=1|0`.
    pub fn cpu_online(cpu: u32, online: bool) -> Assignment {
        KnobId::cpu_online(cpu).set(u8::from(online).to_string())
    }

    /// `rcu.expedited=1|0`.
    pub fn rcu_expedited(on: bool) -> Assignment {
        KnobId::rcu_expedited().set(u8::from(on).to_string())
    }

    /// `sysfs:/sys/devices/system/cpu/cpuCPU/hotplug/fail=STATE` (-1: no fault armed).
    pub fn hotplug_fail(cpu: u32, state: i64) -> Assignment {
        KnobId::hotplug_fail(cpu).set(state.to_string())
    }

    /// The knob it sets.
    pub fn knob(&self) -> &KnobId {
        &self.knob
    }

    /// The value, as given (trimmed).
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Parse each text; the first bad one is the error.
    pub fn parse_all<S: AsRef<str>>(texts: &[S]) -> Result<Vec<Assignment>, AssignmentError> {
        texts.iter().map(|t| t.as_ref().parse()).collect()
    }
}

impl FromStr for Assignment {
    type Err = AssignmentError;

    /// `NAME[@CPUS]=VALUE`; name and value are trimmed.
    fn from_str(s: &str) -> Result<Assignment, AssignmentError> {
        let Some((name, value)) = s.split_once('=') else {
            return Err(AssignmentError::NotAnAssignment { text: s.into() });
        };
        if name.trim().is_empty() {
            return Err(AssignmentError::NotAnAssignment { text: s.into() });
        }
        let value = value.trim();
        if value.contains('\n') {
            return Err(AssignmentError::Multiline { text: s.into() });
        }
        Ok(Assignment {
            knob: KnobId::parse_in(name, s)?,
            value: value.to_string(),
        })
    }
}

impl fmt::Display for Assignment {
    /// `NAME[@CPUS]=VALUE`: the text it was parsed from, in canonical form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.knob, self.value)
    }
}

/// Equal to a text that parses into the same assignment (`a == "cpu.online@1=0"`).
impl PartialEq<str> for Assignment {
    fn eq(&self, other: &str) -> bool {
        other.parse::<Assignment>().is_ok_and(|o| o == *self)
    }
}

impl PartialEq<&str> for Assignment {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

/// Stored and sent as its text (`"cpu.online@1=0"`), so specs and JSON keep their form.
impl serde::Serialize for Assignment {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Assignment {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Assignment, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for KnobId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_texts_parse_into_their_parts() {
        let a: Assignment = "cpuidle.POLL.disable@0-1=1".parse().unwrap();
        assert_eq!(a.knob().name(), "cpuidle.POLL.disable");
        assert_eq!(a.knob().cpus(), Some(&[0, 1][..]));
        assert_eq!(a.value(), "1");
        let a: Assignment = " haltpoll.guest_halt_poll_ns = 200us ".parse().unwrap();
        assert_eq!(a.knob().name(), "haltpoll.guest_halt_poll_ns");
        assert_eq!(a.knob().cpus(), None);
        assert_eq!(a.value(), "200us");
        assert_eq!(a.to_string(), "haltpoll.guest_halt_poll_ns=200us");
        // A sysfs path keeps its `@`; the value may hold `=`.
        let a: Assignment = "sysfs:/sys/a@b/c=x=y".parse().unwrap();
        assert_eq!(a.knob().sysfs_path(), Some("/sys/a@b/c"));
        assert_eq!(a.knob().cpus(), None);
        assert_eq!(a.value(), "x=y");
        // An empty value is the knob's to judge.
        assert_eq!("x.y=".parse::<Assignment>().unwrap().value(), "");
    }

    #[test]
    fn bad_texts_say_what_is_wrong() {
        let e = |t: &str| t.parse::<Assignment>().unwrap_err();
        assert!(matches!(
            e("rcu.expedited"),
            AssignmentError::NotAnAssignment { .. }
        ));
        assert!(matches!(e("=1"), AssignmentError::NotAnAssignment { .. }));
        assert!(matches!(e("@1=1"), AssignmentError::NoName { .. }));
        assert!(e("rcu.expedited").to_string().contains("NAME[@CPUS]=VALUE"));
        let bad = e("cpu.online@x=1");
        assert!(matches!(
            &bad,
            AssignmentError::Cpus { text, source: CpuListError::NotAList { .. } }
                if text == "cpu.online@x=1"
        ));
        let cause = std::error::Error::source(&bad).unwrap().to_string();
        assert!(cause.contains("'x' is not a CPU list"), "{cause}");
        assert!(matches!(
            e("cpu.online@3-1=1"),
            AssignmentError::Cpus { .. }
        ));
        assert!(matches!(e("cpu.online@=1"), AssignmentError::Cpus { .. }));
        assert!(matches!(e("x.y=a\nb"), AssignmentError::Multiline { .. }));
        assert!(matches!(e("x.y@socket1=1"), AssignmentError::Cpus { .. }));
        for bad in ["x.y@package=1", "x.y@die0.die1=1", "x.y@all.die0=1"] {
            assert!(matches!(e(bad), AssignmentError::Scope { .. }), "{bad}");
        }
        let k: KnobId = "x.y@die0.package1-2".parse().unwrap();
        assert_eq!(k.to_string(), "x.y@package1-2.die0");
        assert_eq!(k.cpus(), None);
        assert!(matches!(k.units(), Some(Units::Of(p)) if p.len() == 2));
        assert!(matches!(
            "a@1".parse::<KnobId>(),
            Ok(k) if k.name() == "a" && k.cpus() == Some(&[1][..])
        ));
        assert!(matches!(
            "".parse::<KnobId>(),
            Err(AssignmentError::NoName { .. })
        ));
    }

    #[test]
    fn display_gives_back_the_text_parsed() {
        for t in [
            "cpu.online@1=0",
            "cpuidle.POLL.disable@0-3,5=1",
            "cpufreq.max_freq@1=2.1GHz",
            "rcu.expedited=on",
            "sched.feature.TTWU_QUEUE=off",
            "pmqos.resume_latency_us@0=n/a",
            "sysfs:/sys/devices/system/cpu/cpu1/hotplug/fail=-1",
            "haltpoll.guest_halt_poll_ns=200us",
            "uncore.max_freq@package1=2GHz",
            "cpuidle.C6.disable@all=1",
            "cpufreq.epp@package0.die1=power",
            "cpu.online@core3=0",
        ] {
            let a: Assignment = t.parse().unwrap();
            assert_eq!(a.to_string(), t);
            assert_eq!(a.to_string().parse::<Assignment>().unwrap(), a);
        }
        // CPU lists come back in the kernel's form.
        let a: Assignment = "x.y@3,1,2=1".parse().unwrap();
        assert_eq!(a.to_string(), "x.y@1-3=1");
    }

    #[test]
    fn typed_constructors_write_the_same_text() {
        assert_eq!(
            Assignment::cpu_online(1, false).to_string(),
            "cpu.online@1=0"
        );
        assert_eq!(
            Assignment::cpu_online(3, true).to_string(),
            "cpu.online@3=1"
        );
        assert_eq!(
            Assignment::rcu_expedited(true).to_string(),
            "rcu.expedited=1"
        );
        assert_eq!(
            Assignment::hotplug_fail(1, -1).to_string(),
            "sysfs:/sys/devices/system/cpu/cpu1/hotplug/fail=-1"
        );
        assert_eq!(
            KnobId::new("cpuidle.POLL.disable").at(&[2, 0, 1]).set("1"),
            "cpuidle.POLL.disable@0-2=1".parse::<Assignment>().unwrap()
        );
        let j = serde_json::to_string(&Assignment::cpu_online(1, false)).unwrap();
        assert_eq!(j, "\"cpu.online@1=0\"");
        let back: Assignment = serde_json::from_str(&j).unwrap();
        assert_eq!(back, Assignment::cpu_online(1, false));
        assert!(serde_json::from_str::<Assignment>("\"nope\"").is_err());
    }
}
