//! Durations written with units (`200us`, `1.5ms`, `10s`, `2m`), parsed, printed and (de)serialised.

use pmlab_kernel::Nanos;

const UNITS: &[(&str, f64)] = &[
    ("ns", 1.0),
    ("us", 1e3),
    ("µs", 1e3),
    ("ms", 1e6),
    ("s", 1e9),
    ("m", 60e9),
    ("min", 60e9),
    ("h", 3600e9),
];

/// Why a time did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text had a minus sign.
    #[error("{0:?}: must not be negative")]
    Negative(String),
    /// No number at the start of the text.
    #[error("'{0}' is not a duration (examples: 10s, 1ms, 200us)")]
    NotADuration(String),
    /// A bare number: durations need a unit.
    #[error("'{text}' needs a unit: ns, us, ms, s, m or h (e.g. {number}ms)")]
    NoUnit {
        /// The text given.
        text: String,
        /// The number, for the hint.
        number: String,
    },
    /// A number with a unit that is not one of ns, us (µs), ms, s, m (min), h.
    #[error("'{text}': unknown unit '{unit}' (use ns, us, ms, s, m or h)")]
    UnknownUnit {
        /// The text given.
        text: String,
        /// The unit found.
        unit: String,
    },
    /// More than `u64::MAX` nanoseconds (about 584 years).
    #[error("'{0}' is too long")]
    TooLong(String),
}

/// A non-negative time in ns: a bare number of ns (`200000`) or a duration (`200us`); for
/// poll limits and windows, where 0 is a value.
pub fn parse_ns(text: &str) -> Result<u64, DurationError> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(DurationError::Negative(t.to_string()));
    }
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    parse_duration(t).map(|d| d.0)
}

/// Parse `10s`, `1ms`, `200us`, `1.5ms`, `100ns`, `2m`, `1h`. A unit is required; the value must be > 0
/// is NOT checked here (zero parses, validation refuses it with the option's name).
pub fn parse_duration(text: &str) -> Result<Nanos, DurationError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let value: f64 = num
        .parse()
        .map_err(|_| DurationError::NotADuration(text.to_string()))?;
    if unit.is_empty() {
        return Err(DurationError::NoUnit {
            text: text.to_string(),
            number: num.to_string(),
        });
    }
    let scale = UNITS
        .iter()
        .find(|(u, _)| *u == unit)
        .map(|(_, s)| *s)
        .ok_or_else(|| DurationError::UnknownUnit {
            text: text.to_string(),
            unit: unit.to_string(),
        })?;
    if value < 0.0 || value.is_nan() {
        return Err(DurationError::Negative(text.to_string()));
    }
    let ns = value * scale;
    if ns > u64::MAX as f64 {
        return Err(DurationError::TooLong(text.to_string()));
    }
    Ok(Nanos(ns.round() as u64))
}

/// The shortest exact form: `1ms`, `1500us`, `10s`, `2m`.
pub fn format_duration(d: Nanos) -> String {
    let ns = d.0;
    if ns == 0 {
        return "0s".into();
    }
    for (unit, scale) in [
        ("h", 3_600_000_000_000u64),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1000),
    ] {
        if (ns / scale) * scale == ns {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// Serde for a duration: written as a string with a unit, read from such a string or integer nanoseconds.
pub mod serde_duration {
    use super::*;
    use serde::{de, Deserializer, Serializer};

    /// Write a duration as a string with the largest exact unit (`200us`).
    pub fn serialize<S: Serializer>(d: &Nanos, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }

    /// Read a duration from a string with a unit or from integer nanoseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
        d.deserialize_any(DurationVisitor)
    }

    pub(super) struct DurationVisitor;

    impl de::Visitor<'_> for DurationVisitor {
        type Value = Nanos;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a duration like \"10s\" or \"200us\", or integer nanoseconds")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Nanos, E> {
            parse_duration(v).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Nanos, E> {
            Ok(Nanos(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Nanos, E> {
            u64::try_from(v)
                .map(Nanos)
                .map_err(|_| E::custom(format!("duration must not be negative: {v}")))
        }
    }
}

/// Serde for an optional duration (same forms as [`serde_duration`]).
pub mod serde_opt_duration {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Write `Some` as a string with a unit, `None` as none (TOML: the key is left out).
    pub fn serialize<S: Serializer>(d: &Option<Nanos>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&format_duration(*d)),
            None => s.serialize_none(),
        }
    }

    /// Read an optional duration (same forms as [`serde_duration::deserialize`]).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Nanos>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "super::serde_duration")] Nanos);
        Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("10s").unwrap(), Nanos(10_000_000_000));
        assert_eq!(parse_duration("1ms").unwrap(), Nanos(1_000_000));
        assert_eq!(parse_duration("200us").unwrap(), Nanos(200_000));
        assert_eq!(parse_duration("200µs").unwrap(), Nanos(200_000));
        assert_eq!(parse_duration("1.5ms").unwrap(), Nanos(1_500_000));
        assert_eq!(parse_duration("2m").unwrap(), Nanos(120_000_000_000));
        assert_eq!(parse_duration("0s").unwrap(), Nanos(0));
    }

    #[test]
    fn refuses_bad_text() {
        assert!(parse_duration("10")
            .unwrap_err()
            .to_string()
            .contains("needs a unit"));
        assert!(parse_duration("-5s")
            .unwrap_err()
            .to_string()
            .contains("negative"));
        assert!(parse_duration("5 parsecs")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert!(matches!(parse_ns("-5us"), Err(DurationError::Negative(_))));
        assert!(parse_duration("ms")
            .unwrap_err()
            .to_string()
            .contains("not a duration"));
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn formats_shortest_exact() {
        assert_eq!(format_duration(Nanos(1_000_000)), "1ms");
        assert_eq!(format_duration(Nanos(1_500_000)), "1500us");
        assert_eq!(format_duration(Nanos(120_000_000_000)), "2m");
        assert_eq!(format_duration(Nanos(7)), "7ns");
    }
}
