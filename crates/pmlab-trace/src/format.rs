//! Parsing of tracefs event `format` files and of `header_page` into typed field layouts.

use crate::error::{FormatError, FormatProblem as P};
use crate::model::{EventFormat, Field, FieldKind};

/// The ring-buffer page header layout, from `events/header_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct HeaderPage {
    /// Offset of the timestamp field in a page header, bytes.
    pub timestamp_offset: u32,
    /// Size of the timestamp field, bytes (always 8).
    pub timestamp_size: u32,
    /// Offset of the commit (data length and flags) field, bytes.
    pub commit_offset: u32,
    /// The kernel's long size: 8 on 64-bit kernels, 4 on 32-bit ones.
    pub commit_size: u32,
    /// Where event data starts in a page.
    pub data_offset: u32,
}

impl HeaderPage {
    /// The layout of a kernel whose `long` is `long_size` bytes.
    pub fn for_long_size(long_size: u32) -> HeaderPage {
        HeaderPage {
            timestamp_offset: 0,
            timestamp_size: 8,
            commit_offset: 8,
            commit_size: long_size,
            data_offset: 8 + long_size,
        }
    }
}

/// Parse `events/header_page`.
pub fn parse_header_page(text: &str) -> Result<HeaderPage, FormatError> {
    let err = |problem: P| FormatError {
        event: "header_page".into(),
        problem: Box::new(problem),
    };
    let mut ts = None;
    let mut commit = None;
    let mut data = None;
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        // `field: TYPE NAME;\toffset:N;\tsize:N;...` (data is a char of the page's data size).
        let mut parts = rest.split(';');
        let decl = parts.next().unwrap_or("").trim();
        let offset = parse_num(parts.next().unwrap_or(""), "offset").map_err(err)?;
        let size = parse_num(parts.next().unwrap_or(""), "size").map_err(err)?;
        match decl.rsplit(' ').next().unwrap_or("") {
            "timestamp" => ts = Some((offset, size)),
            "commit" => commit = Some((offset, size)),
            "data" => data = Some(offset),
            _ => {}
        }
    }
    let (timestamp_offset, timestamp_size) =
        ts.ok_or_else(|| err(P::NoHeaderField("timestamp")))?;
    let (commit_offset, commit_size) = commit.ok_or_else(|| err(P::NoHeaderField("commit")))?;
    let data_offset = data.ok_or_else(|| err(P::NoHeaderField("data")))?;
    if timestamp_size != 8 {
        return Err(err(P::TimestampSize(timestamp_size)));
    }
    if commit_size != 4 && commit_size != 8 {
        return Err(err(P::CommitSize(commit_size)));
    }
    if data_offset < commit_offset + commit_size {
        return Err(err(P::DataOverlapsCommit(data_offset)));
    }
    Ok(HeaderPage {
        timestamp_offset,
        timestamp_size,
        commit_offset,
        commit_size,
        data_offset,
    })
}

/// Parse an event `format` file. `long_size` (4 or 8) sizes arrays of longs.
/// The system name is not in the file: the caller fills `EventFormat::system`.
pub fn parse_format(text: &str) -> Result<EventFormat, FormatError> {
    parse_format_long(text, 8)
}

/// [`parse_format`] for a trace whose kernel `long` is `long_size` bytes.
pub fn parse_format_long(text: &str, long_size: u32) -> Result<EventFormat, FormatError> {
    parse_format_opts(text, long_size, true)
}

/// Like [`parse_format_long`]; with `strict` false, a field of an unsupported type
/// (a struct embedded by value) becomes opaque bytes instead of an error, as trace-cmd keeps it.
pub fn parse_format_opts(
    text: &str,
    long_size: u32,
    strict: bool,
) -> Result<EventFormat, FormatError> {
    let mut name: Option<String> = None;
    let mut id: Option<u16> = None;
    let mut fields = Vec::new();
    let mut print_fmt = String::new();
    let mut in_format = false;
    let err = |name: &Option<String>, problem: P| FormatError {
        event: name.clone().unwrap_or_else(|| "?".into()),
        problem: Box::new(problem),
    };
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let line = raw.trim();
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("ID:") {
            let v = v.trim();
            let n: u32 = v.parse().map_err(|_| err(&name, P::BadId(v.to_string())))?;
            if n > u16::MAX as u32 {
                return Err(err(&name, P::IdTooLarge(n)));
            }
            id = Some(n as u16);
        } else if line == "format:" {
            in_format = true;
        } else if let Some(rest) = line.strip_prefix("field:") {
            if !in_format {
                return Err(err(&name, P::FieldBeforeFormat));
            }
            let f = parse_field_line(rest, long_size, strict).map_err(|m| err(&name, m))?;
            fields.push(f);
        } else if let Some(v) = line.strip_prefix("print fmt:") {
            // The print format runs to the end of the file (it is one line in practice).
            let mut s = v.trim_start().to_string();
            for more in lines.by_ref() {
                s.push('\n');
                s.push_str(more);
            }
            print_fmt = s.trim_end().to_string();
        } else if !line.is_empty() && !in_format {
            return Err(err(&name, P::UnexpectedLine(line.to_string())));
        }
    }
    let name = name.ok_or_else(|| err(&None, P::NoLine("name")))?;
    let id = id.ok_or_else(|| err(&Some(name.clone()), P::NoLine("ID")))?;
    if fields.is_empty() {
        return Err(err(&Some(name), P::NoFields));
    }
    Ok(EventFormat {
        id,
        system: String::new(),
        name,
        fields,
        print_fmt,
    })
}

fn parse_num(part: &str, key: &'static str) -> Result<u32, P> {
    let v = part
        .trim()
        .strip_prefix(key)
        .and_then(|s| s.trim_start().strip_prefix(':'))
        .ok_or_else(|| P::MissingKey {
            key,
            part: part.to_string(),
        })?;
    v.trim().parse::<u32>().map_err(|_| P::BadNumber {
        key,
        value: v.trim().to_string(),
    })
}

/// Parse the part of a field line after `field:`:
/// `DECL;\toffset:N;\tsize:N;\tsigned:N;`
fn parse_field_line(rest: &str, long_size: u32, strict: bool) -> Result<Field, P> {
    let mut parts = rest.split(';');
    let decl = parts.next().unwrap_or("").trim();
    let offset = parse_num(parts.next().unwrap_or(""), "offset")?;
    let size = parse_num(parts.next().unwrap_or(""), "size")?;
    let signed = match parts.next().map(str::trim) {
        Some(p) if !p.is_empty() => parse_num(p, "signed")? != 0,
        _ => false,
    };
    let (type_name, name, brackets) = split_decl(decl)?;
    let dynamic = type_name.starts_with("__data_loc");
    let relative = type_name.starts_with("__rel_loc");
    let is_char = brackets.is_some()
        && (type_name.contains("char") || type_name.contains("u8") || type_name.contains("s8"));
    let kind = if dynamic || relative {
        if size != 4 && size != 2 {
            return Err(P::DynamicSize { field: name, size });
        }
        let is_char = type_name.contains("char");
        if relative {
            FieldKind::RelLoc { is_char }
        } else {
            FieldKind::DataLoc { is_char }
        }
    } else if let Some(count) = brackets {
        let elem_size = if let Some(per) = size.checked_div(count) {
            per
        } else if is_char {
            1
        } else if type_name.contains("long") {
            long_size
        } else {
            elem_size_of(&type_name).unwrap_or(0)
        };
        FieldKind::Array {
            elem_size,
            count,
            is_char,
        }
    } else {
        if !matches!(size, 0 | 1 | 2 | 4 | 8) {
            if !strict {
                return Ok(Field {
                    common: name.starts_with("common_"),
                    name,
                    type_name,
                    offset,
                    size,
                    signed,
                    kind: FieldKind::Array {
                        elem_size: 1,
                        count: size,
                        is_char: false,
                    },
                });
            }
            return Err(P::UnsupportedSize {
                field: name,
                type_name,
                size,
            });
        }
        FieldKind::Int
    };
    let common = name.starts_with("common_");
    Ok(Field {
        name,
        type_name,
        offset,
        size,
        signed,
        kind,
        common,
    })
}

fn elem_size_of(type_name: &str) -> Option<u32> {
    let base = type_name.split('[').next()?.trim();
    let last = base.rsplit(' ').next()?;
    Some(match last {
        "u8" | "s8" | "char" | "__u8" | "__s8" | "bool" => 1,
        "u16" | "s16" | "short" | "__u16" | "__s16" => 2,
        "u32" | "s32" | "int" | "__u32" | "__s32" | "unsigned" => 4,
        "u64" | "s64" | "__u64" | "__s64" => 8,
        _ => return None,
    })
}

/// Split `unsigned long ip`, `char comm[16]`, `__data_loc char[] name` into
/// (type as libtraceevent spells it, name, array length if an array).
fn split_decl(decl: &str) -> Result<(String, String, Option<u32>), P> {
    if decl.is_empty() {
        return Err(P::EmptyDeclaration);
    }
    if let Some(open) = decl.find('[') {
        let close = decl[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| P::UnclosedBracket(decl.to_string()))?;
        let inside = &decl[open + 1..close];
        let count = inside
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .rfind(|t| !t.is_empty())
            .map(parse_c_ulong)
            .unwrap_or(0);
        let after = decl[close + 1..].trim();
        let before = decl[..open].trim_end();
        if !after.is_empty() {
            // `type[] name`
            if !is_ident(after) {
                return Err(P::BadFieldName(after.to_string()));
            }
            return Ok((
                format!("{before}{}", &decl[open..=close]),
                after.to_string(),
                Some(count),
            ));
        }
        // `type name[N]`
        let (ty, name) = split_last_ident(before).ok_or_else(|| P::NoType(decl.to_string()))?;
        return Ok((format!("{ty}{}", &decl[open..=close]), name, Some(count)));
    }
    let (ty, name) = split_last_ident(decl).ok_or_else(|| P::NoType(decl.to_string()))?;
    Ok((ty, name, None))
}

fn parse_c_ulong(t: &str) -> u32 {
    // strtoul(token, NULL, 0): decimal, 0x hex or 0 octal prefix; non-numbers give 0.

    let (s, radix) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (h, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    let digits: String = s.chars().take_while(|c| c.is_digit(radix)).collect();
    u32::from_str_radix(&digits, radix).unwrap_or(0)
}

fn is_ident(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn split_last_ident(s: &str) -> Option<(String, String)> {
    let s = s.trim_end();
    let start = s
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(0);
    let name = &s[start..];
    let ty = s[..start].trim();
    if name.is_empty() || ty.is_empty() {
        return None;
    }
    Some((ty.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHED_SWITCH: &str = "name: sched_switch\nID: 316\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n\tfield:const char * fmt;\toffset:32;\tsize:8;\tsigned:0;\n\tfield:u32 buf[];\toffset:40;\tsize:0;\tsigned:0;\n\nprint fmt: \"prev_comm=%s prev_pid=%d\", REC->prev_comm, REC->prev_pid\n";

    #[test]
    fn last_identifier_after_a_multibyte_character() {
        // found by fuzzing: a non-ASCII byte sequence right before the field name
        assert_eq!(
            split_last_ident("unsigned \u{fffd}x"),
            Some(("unsigned \u{fffd}".into(), "x".into()))
        );
        assert_eq!(split_last_ident("\u{fffd}"), None);
    }

    #[test]
    fn parses_fields_and_kinds() {
        let f = parse_format(SCHED_SWITCH).unwrap();
        assert_eq!(f.id, 316);
        assert_eq!(f.name, "sched_switch");
        assert_eq!(f.fields.len(), 9);
        let comm = f.field("prev_comm").unwrap();
        assert_eq!(
            comm.kind,
            FieldKind::Array {
                elem_size: 1,
                count: 16,
                is_char: true
            }
        );
        assert_eq!(comm.type_name, "char[16]");
        let pid = f.field("prev_pid").unwrap();
        assert!(pid.signed && pid.kind == FieldKind::Int && pid.offset == 24);
        assert_eq!(
            f.field("name").unwrap().kind,
            FieldKind::DataLoc { is_char: true }
        );
        assert_eq!(f.field("name").unwrap().type_name, "__data_loc char[]");
        assert_eq!(f.field("fmt").unwrap().type_name, "const char *");
        assert_eq!(
            f.field("buf").unwrap().kind,
            FieldKind::Array {
                elem_size: 4,
                count: 0,
                is_char: false
            }
        );
        assert!(f.field("common_pid").unwrap().common);
        assert!(f.print_fmt.starts_with("\"prev_comm"));
    }

    #[test]
    fn unknown_type_is_a_clear_error() {
        let text = SCHED_SWITCH.replace(
            "field:pid_t prev_pid;\toffset:24;\tsize:4;",
            "field:struct foo prev_pid;\toffset:24;\tsize:12;",
        );
        let e = parse_format(&text).unwrap_err();
        assert_eq!(e.event, "sched_switch");
        assert_eq!(
            *e.problem,
            P::UnsupportedSize {
                field: "prev_pid".into(),
                type_name: "struct foo".into(),
                size: 12
            }
        );
        assert!(
            e.to_string()
                .contains("unsupported type `struct foo` of size 12"),
            "{e}"
        );
    }

    #[test]
    fn missing_pieces_are_errors() {
        assert!(parse_format("ID: 3\nformat:\n").is_err());
        assert!(parse_format("name: x\nformat:\n\tfield:int a;\toffset:0;\tsize:4;\n").is_err());
        assert!(
            parse_format("name: x\nID: 1\nformat:\n\tfield:int a;\toffset:zz;\tsize:4;\n").is_err()
        );
        assert!(parse_format("name: x\nID: 1\nformat:\n\tfield:int a;\toffset:0;\n").is_err());
    }

    #[test]
    fn header_page_64_and_32() {
        let hp = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        assert_eq!(parse_header_page(hp).unwrap(), HeaderPage::for_long_size(8));
        let hp32 = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:4;\tsigned:1;\n\tfield: char data;\toffset:12;\tsize:4084;\tsigned:1;\n";
        assert_eq!(
            parse_header_page(hp32).unwrap(),
            HeaderPage::for_long_size(4)
        );
        assert!(parse_header_page("junk").is_err());
    }

    #[test]
    fn all_formats_of_this_machine_parse() {
        let root = std::path::Path::new("/sys/kernel/tracing/events");
        let Ok(systems) = std::fs::read_dir(root) else {
            return;
        };
        let mut n = 0;
        for sys in systems.flatten() {
            let Ok(events) = std::fs::read_dir(sys.path()) else {
                continue;
            };
            for ev in events.flatten() {
                let p = ev.path().join("format");
                if let Ok(text) = std::fs::read_to_string(&p) {
                    parse_format(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                    n += 1;
                }
            }
        }
        assert!(n > 100, "only {n} formats found");
    }
}
