//! CPU lists as the kernel writes them (`0-3,5`): parsing and formatting.

/// Why a CPU list did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// The text was empty or blank.
    #[error("empty CPU list")]
    Empty,
    /// Not a list of numbers and ranges.
    #[error("'{text}' is not a CPU list (examples: 1, 0-3, 0,2)")]
    NotAList {
        /// The text given.
        text: String,
    },
    /// A range whose end is below its start (`3-1`).
    #[error("'{text}': range {from}-{to} runs backwards")]
    Backwards {
        /// The text given.
        text: String,
        /// The range's first number.
        from: u32,
        /// The range's last number.
        to: u32,
    },
}

/// Parse a CPU list: `1`, `0-3`, `0,2-3`. Sorted, without duplicates.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, CpuListError> {
    let mut out = Vec::new();
    let t = text.trim();
    if t.is_empty() {
        return Err(CpuListError::Empty);
    }
    for part in t.split(',') {
        let part = part.trim();
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| CpuListError::NotAList { text: text.into() })
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(CpuListError::Backwards {
                        text: text.into(),
                        from: a,
                        to: b,
                    });
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `0-3,5` from a sorted list.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_lists() {
        assert_eq!(parse_cpu_list("0-3,5").unwrap(), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("1,0,1").unwrap(), vec![0, 1]);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(
            parse_cpu_list("3-1"),
            Err(CpuListError::Backwards {
                text: "3-1".into(),
                from: 3,
                to: 1
            })
        );
        let not = |t: &str| Err(CpuListError::NotAList { text: t.into() });
        assert_eq!(parse_cpu_list("a"), not("a"));
        assert_eq!(parse_cpu_list("-1"), not("-1"));
        assert_eq!(parse_cpu_list(" "), Err(CpuListError::Empty));
        assert_eq!(
            CpuListError::NotAList { text: "x".into() }.to_string(),
            "'x' is not a CPU list (examples: 1, 0-3, 0,2)"
        );
    }
}
