//! Unknown names (an event, a column, an analysis): the error that says what exists
//! instead, close matches first and at most a screenful, for the CLI and Python alike.

/// What kind of name was not found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// A trace event (`sched_switch`, `sched:sched_switch`).
    Event,
    /// A field column of an event.
    Column,
    /// An analysis (`idle`, `wakeups`, ...).
    Analysis,
    /// A Parquet layout (`to_parquet(layout=...)`).
    Layout,
}

impl NameKind {
    fn as_str(self) -> &'static str {
        match self {
            NameKind::Event => "event",
            NameKind::Column => "column",
            NameKind::Analysis => "analysis",
            NameKind::Layout => "layout",
        }
    }
}

/// One name that exists, with what to show beside it (an event's count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    /// The name.
    pub name: String,
    /// What to show beside it (an event's count), if anything.
    pub note: Option<String>,
}

impl Known {
    /// A name with nothing beside it.
    pub fn new(name: impl Into<String>) -> Known {
        Known {
            name: name.into(),
            note: None,
        }
    }
    /// A name with a note beside it.
    pub(crate) fn with_note(name: impl Into<String>, note: impl Into<String>) -> Known {
        Known {
            name: name.into(),
            note: Some(note.into()),
        }
    }
}

/// At most this many names are listed after the close matches (a screenful).
const LISTED: usize = 24;
/// At most this many close matches.
const CLOSE: usize = 5;

/// A name that is not there: its kind, where it was looked for (`in this trace`, `in
/// sched_switch`), and the names that are, in the order to list them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct Unknown {
    /// What kind of name it was.
    pub kind: NameKind,
    /// The name as given.
    pub name: String,
    /// Where it was looked for (`in this trace`, `in sched_switch`).
    pub place: String,
    /// The names that exist there, in the order to list them.
    pub known: Vec<Known>,
}

impl Unknown {
    /// The error for `name` of `kind`, not found in `place`; `known` is sorted here, close matches first.
    pub fn new(
        kind: NameKind,
        name: impl Into<String>,
        place: impl Into<String>,
        known: Vec<Known>,
    ) -> Unknown {
        Unknown {
            kind,
            name: name.into(),
            place: place.into(),
            known,
        }
    }

    /// The known names closest to the one asked for, best first: those that contain it or
    /// that it contains, then by Jaro-Winkler similarity above 0.8 (case ignored).
    pub fn close_matches(&self) -> Vec<&str> {
        let want = self.name.to_lowercase();
        let mut scored: Vec<(f64, &str)> = self
            .known
            .iter()
            .filter_map(|k| {
                let have = k.name.to_lowercase();
                // `SYSTEM:NAME` is compared by its name too.
                let short = have.rsplit(':').next().unwrap_or(&have).to_string();
                let contains = !want.is_empty()
                    && want.len() >= 3
                    && (have.contains(&want) || want.contains(short.as_str()));
                let sim =
                    strsim::jaro_winkler(&want, &have).max(strsim::jaro_winkler(&want, &short));
                let score = if contains { 1.0 + sim } else { sim };
                (score > 0.8).then_some((score, k.name.as_str()))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored.into_iter().take(CLOSE).map(|(_, n)| n).collect()
    }

    /// The message: what was asked, the close matches, then the known names (a screenful).
    pub fn message(&self) -> String {
        use std::fmt::Write;
        let kind = self.kind.as_str();
        let mut m = format!("no {kind} {:?}", self.name);
        if !self.place.is_empty() {
            let _ = write!(m, " {}", self.place);
        }
        let close = self.close_matches();
        if !close.is_empty() {
            let _ = write!(m, "; did you mean {}?", close.join(", "));
        }
        if self.known.is_empty() {
            let _ = write!(m, " (there is none)");
            return m;
        }
        let plural = match self.kind {
            NameKind::Analysis => "analyses",
            NameKind::Event => "events",
            NameKind::Column => "columns",
            NameKind::Layout => "layouts",
        };
        let _ = write!(m, " ({} {plural}: ", self.known.len());
        for (i, k) in self.known.iter().take(LISTED).enumerate() {
            if i > 0 {
                m.push_str(", ");
            }
            // Long names are cut: the list stays a screenful whatever the trace holds.
            let name: String = k.name.chars().take(48).collect();
            m.push_str(&name);
            if let Some(n) = &k.note {
                let _ = write!(m, " ({n})");
            }
        }
        if self.known.len() > LISTED {
            let _ = write!(m, ", and {} more", self.known.len() - LISTED);
        }
        m.push(')');
        m
    }
}

impl crate::Trace {
    /// Event names with events, as Python's `t.events` keys them (`name`, or `system:name`
    /// where two systems share a name), with their ids and counts, most frequent first.
    pub fn event_names(&self) -> Vec<(String, u16, u64)> {
        let mut by_id = vec![0u64; 1 << 16];
        for &id in &self.events.id {
            by_id[id as usize] += 1;
        }
        let mut present: Vec<(&crate::EventFormat, u16, u64)> = by_id
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .filter_map(|(id, &n)| Some((self.formats.get(&(id as u16))?, id as u16, n)))
            .collect();
        // As `pmlab trace info` lists them: most frequent first, then by name.
        present.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.name.cmp(&b.0.name)));
        present
            .iter()
            .map(|(f, id, n)| {
                let shared = present.iter().filter(|x| x.0.name == f.name).count() > 1;
                let key = if shared {
                    format!("{}:{}", f.system, f.name)
                } else {
                    f.name.clone()
                };
                (key, *id, *n)
            })
            .collect()
    }

    /// The id of event `name` (`NAME` or `SYSTEM:NAME`); unknown, the error lists this
    /// trace's events with their counts (`self` must have its events decoded for those).
    pub fn event_by_name(&self, name: &str) -> Result<u16, Unknown> {
        let (sys, ev) = name.split_once(':').unwrap_or(("", name));
        self.event_id(sys, ev)
            .ok_or_else(|| self.unknown_event(name))
    }

    /// The error for an event `name` this trace does not have.
    pub fn unknown_event(&self, name: &str) -> Unknown {
        let known = self
            .event_names()
            .into_iter()
            .map(|(n, _, c)| Known::with_note(n, c.to_string()))
            .collect();
        Unknown::new(NameKind::Event, name, "in this trace", known)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(n: usize) -> Vec<Known> {
        let mut v = vec![
            Known::with_note("sched_switch", "144808"),
            Known::with_note("sched_waking", "93604"),
            Known::with_note("sched_wakeup", "92389"),
            Known::with_note("cpu_idle", "85907"),
        ];
        v.extend((0..n).map(|i| Known::with_note(format!("some_event_with_a_long_name_{i}"), "1")));
        v
    }

    #[test]
    fn close_matches_come_first_and_the_list_stays_a_screenful() {
        let e = Unknown::new(
            NameKind::Event,
            "sched_swich",
            "in this trace",
            events(2000),
        );
        let m = e.to_string();
        assert!(
            m.starts_with("no event \"sched_swich\" in this trace; did you mean sched_switch"),
            "{m}"
        );
        assert!(m.contains("2004 events"), "{m}");
        assert!(m.contains("and 1980 more"), "{m}");
        assert!(m.len() < 2048, "{} bytes: {m}", m.len());
        assert_eq!(e.kind, NameKind::Event);
    }

    #[test]
    fn a_part_of_a_name_matches() {
        let e = Unknown::new(NameKind::Event, "wakeup", "in this trace", events(0));
        assert_eq!(e.close_matches()[0], "sched_wakeup");
        let e = Unknown::new(
            NameKind::Analysis,
            "wakeup",
            "",
            vec![Known::new("idle"), Known::new("wakeups")],
        );
        assert_eq!(e.close_matches(), vec!["wakeups"]);
    }

    #[test]
    fn nothing_close_lists_without_suggestion() {
        let e = Unknown::new(
            NameKind::Column,
            "zzzz",
            "in sched_switch",
            vec![Known::new("ts"), Known::new("prev_comm")],
        );
        let m = e.to_string();
        assert_eq!(
            m,
            "no column \"zzzz\" in sched_switch (2 columns: ts, prev_comm)"
        );
        let none = Unknown::new(NameKind::Event, "x", "in this trace", vec![]);
        assert_eq!(
            none.to_string(),
            "no event \"x\" in this trace (there is none)"
        );
    }
}
