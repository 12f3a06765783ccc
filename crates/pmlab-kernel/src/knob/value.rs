//! Knob values: booleans, integers with units (`200us` -> `200000` for a `_ns` knob,
//! `2.1GHz` -> kHz) and their comparison on read-back.

/// Parse a boolean as the kernel and people write it.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "y" | "yes" | "on" | "true" => Some(true),
        "0" | "n" | "no" | "off" | "false" => Some(false),
        _ => None,
    }
}

/// Scale of a unit suffix relative to its base (ns for times, kHz for frequencies).
fn suffix_scale(suffix: &str) -> Option<(&'static str, f64)> {
    Some(match suffix {
        "ns" => ("time", 1.0),
        "us" | "µs" => ("time", 1e3),
        "ms" => ("time", 1e6),
        "s" => ("time", 1e9),
        "hz" => ("frequency", 1e-3),
        "khz" => ("frequency", 1.0),
        "mhz" => ("frequency", 1e3),
        "ghz" => ("frequency", 1e6),
        _ => return None,
    })
}

/// Parse an integer value for a knob whose kernel unit is `unit` (`ns`, `us`, `ms`, `kHz`,
/// or empty). A bare number is in the knob's unit. Errors say what was expected.
/// (The reason is a sentence for `KnobError::Invalid`, which names the assignment.)
pub(crate) fn parse_int(text: &str, unit: &str) -> Result<i64, String> {
    let t = text.trim();
    if unit == "%" {
        let n = t.strip_suffix('%').unwrap_or(t).trim();
        return n
            .parse()
            .map_err(|_| format!("`{text}` is not a whole percentage (example: 50%)"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let suffix = suffix.trim().to_ascii_lowercase();
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a number{}", unit_hint(unit)))?;
    if suffix.is_empty() {
        if n.fract() != 0.0 {
            return Err(format!("`{text}` is not a whole number{}", unit_hint(unit)));
        }
        return Ok(n as i64);
    }
    let (kind, scale) = suffix_scale(&suffix)
        .ok_or_else(|| format!("`{text}`: unknown unit `{suffix}`{}", unit_hint(unit)))?;
    let (target_kind, target_scale) = match suffix_scale(&unit.to_ascii_lowercase()) {
        Some(s) => s,
        None => return Err(format!("`{text}`: this knob takes a plain number, no unit")),
    };
    if kind != target_kind {
        return Err(format!(
            "`{text}`: a {kind} unit for a knob in {unit}{}",
            unit_hint(unit)
        ));
    }
    let v = n * scale / target_scale;
    if (v - v.round()).abs() > 1e-6 * v.abs().max(1.0) {
        return Err(format!("`{text}` is not a whole number of {unit}"));
    }
    Ok(v.round() as i64)
}

fn unit_hint(unit: &str) -> String {
    match unit.to_ascii_lowercase().as_str() {
        "ns" | "us" | "ms" => format!(" (a time in {unit}, or with a unit: 200us, 0.2ms)"),
        "khz" => " (a frequency in kHz, or with a unit: 2.1GHz, 800MHz)".into(),
        _ => String::new(),
    }
}

/// Words of a kernel list file: `ladder menu [haltpoll]` -> `ladder menu haltpoll`.
pub fn list_words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Levenshtein distance, for "did you mean".
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_convert_to_the_knob_unit() {
        assert_eq!(parse_int("200us", "ns").unwrap(), 200_000);
        assert_eq!(parse_int("0.2ms", "ns").unwrap(), 200_000);
        assert_eq!(parse_int("200000", "ns").unwrap(), 200_000);
        assert_eq!(parse_int("150us", "us").unwrap(), 150);
        assert_eq!(parse_int("2.1GHz", "kHz").unwrap(), 2_100_000);
        assert_eq!(parse_int("800MHz", "kHz").unwrap(), 800_000);
        assert!(parse_int("1.5ns", "ns").is_err());
        assert!(parse_int("2GHz", "ns")
            .unwrap_err()
            .contains("frequency unit"));
        assert!(parse_int("abc", "ns").is_err());
        assert!(parse_int("5us", "").is_err());
        assert_eq!(parse_int("-1", "").unwrap(), -1);
    }

    #[test]
    fn booleans_and_lists() {
        for t in ["on", "1", "Y", "yes", "true"] {
            assert_eq!(parse_bool(t), Some(true));
        }
        for t in ["off", "0", "N", "no", "false"] {
            assert_eq!(parse_bool(t), Some(false));
        }
        assert_eq!(parse_bool("2"), None);
        assert_eq!(
            list_words("ladder [menu] haltpoll \n"),
            ["ladder", "menu", "haltpoll"]
        );
        assert_eq!(distance("haltpol", "haltpoll"), 1);
    }
}
