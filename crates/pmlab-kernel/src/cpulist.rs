//! CPU lists as the kernel writes them (`0-3,5`): parsing and formatting.

/// Parse a CPU list: `1`, `0-3`, `0,2-3`. Sorted, without duplicates.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    let t = text.trim();
    if t.is_empty() {
        return Err("empty CPU list".into());
    }
    for part in t.split(',') {
        let part = part.trim();
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("'{text}' is not a CPU list (examples: 1, 0-3, 0,2)"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("'{text}': range {a}-{b} runs backwards"));
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
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("-1").is_err());
        assert!(parse_cpu_list("").is_err());
    }
}
