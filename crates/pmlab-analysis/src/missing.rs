//! `Missing`: the error an analysis returns when the trace lacks the events it needs,
//! naming them and the `pmlab record` command that records them.

use serde::Serialize;

/// An analysis could not run: the trace lacks the events it needs.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[error("{analysis}: the trace has no {} events; record them with `{hint}`", events.join(", "))]
pub struct Missing {
    /// The analysis (`idle`, `wakeups`...).
    pub analysis: String,
    /// `system:event` names the analysis needs (any one of them, where it says "or").
    pub events: Vec<String>,
    /// The command that records them.
    pub hint: String,
}

impl Missing {
    /// The error for `analysis`, needing `events` (`system:event`; "a or b" for alternatives).
    pub fn new(analysis: &str, events: &[&str]) -> Missing {
        let flags: Vec<String> = events
            .iter()
            .map(|e| format!("-e {}", e.split(" or ").next().unwrap_or(e)))
            .collect();
        Missing {
            analysis: analysis.to_string(),
            events: events.iter().map(|s| s.to_string()).collect(),
            hint: format!("pmlab record {} -- CMD", flags.join(" ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn message_names_events_and_command() {
        let m = Missing::new("freq", &["power:cpu_frequency"]);
        let s = m.to_string();
        assert!(s.contains("power:cpu_frequency"), "{s}");
        assert!(
            s.contains("pmlab record -e power:cpu_frequency -- CMD"),
            "{s}"
        );
    }
}
