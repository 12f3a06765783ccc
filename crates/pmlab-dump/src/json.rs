//! `pmlab dump --json`: every event as one JSON object per line, typed as the Python tables
//! type it ([`crate::columns::ColumnType`]): `ts` (ns), `cpu`, `pid`, `comm`, `event`,
//! `system`, then every format field (integers by size and sign, `char` arrays and strings
//! as strings, other arrays as lists). Written into one reusable buffer: keys are escaped
//! once per event type, task names once per pid, numbers by itoa, strings copied as they
//! are unless they hold a byte JSON must escape.

use std::io::Write;

use crate::columns::{table_column_names, ColumnType, Scalar};
use crate::model::{field_bytes, uint, Endian, FieldKind, LocKind, Trace};

/// How one field's value is written.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Int { size: u8, signed: bool },
    Str,
    List { elem: u8, signed: bool },
}

#[derive(Debug)]
struct FieldPlan {
    /// `,"name":`, escaped.
    key: Vec<u8>,
    at: (usize, usize, LocKind),
    /// A size-0 char array (`print`'s `char buf[]`): the rest of the record.
    flexible: bool,
    kind: Kind,
}

/// What an event type writes around its values, worked out once.
#[derive(Debug)]
struct Plan {
    /// `{"ts":`, `,"cpu":`, `,"pid":`, `,"comm":` (each `common_*` when a field has the name).
    common: [Vec<u8>; 4],
    /// `,"event":"NAME","system":"SYS"` (or `common_event`/`common_system`).
    name: Vec<u8>,
    fields: Vec<FieldPlan>,
}

/// Append `s` as a JSON string; bytes that are not UTF-8 become U+FFFD, as in the Python tables.
#[inline]
pub(crate) fn push_json_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    // Task names and most strings need no escape and are ASCII: one scan, one copy.
    if s.iter()
        .all(|&c| (0x20..0x80).contains(&c) && c != b'"' && c != b'\\')
    {
        out.extend_from_slice(s);
    } else {
        escape_slow(out, &String::from_utf8_lossy(s));
    }
    out.push(b'"');
}

#[cold]
fn escape_slow(out: &mut Vec<u8>, s: &str) {
    let mut start = 0;
    let b = s.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(b"0123456789abcdef"[(c >> 4) as usize]);
            out.push(b"0123456789abcdef"[(c & 15) as usize]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&b[start..]);
}

fn key(prefix: &[u8], name: &str) -> Vec<u8> {
    let mut k = prefix.to_vec();
    push_json_str(&mut k, name.as_bytes());
    k.push(b':');
    k
}

impl Plan {
    fn new(trace: &Trace, id: u16) -> Plan {
        let fields = trace.payload_fields(id);
        let names = table_column_names(&fields);
        let has = |n: &str| fields.iter().any(|f| f.name == n);
        let tag = |n: &str| {
            if has(n) {
                format!("common_{n}")
            } else {
                n.to_string()
            }
        };
        let mut name = Vec::new();
        match trace.formats.get(&id) {
            Some(f) => {
                name.extend(key(b",", &tag("event")));
                push_json_str(&mut name, f.name.as_bytes());
                name.extend(key(b",", &tag("system")));
                push_json_str(&mut name, f.system.as_bytes());
            }
            None => {
                name.extend(key(b",", &tag("event")));
                name.extend_from_slice(b"null");
            }
        }
        Plan {
            common: [
                key(b"{", &names[0]),
                key(b",", &names[1]),
                key(b",", &names[2]),
                key(b",", &names[3]),
            ],
            name,
            fields: fields
                .iter()
                .map(|f| {
                    let loc = match f.kind {
                        FieldKind::DataLoc { .. } => LocKind::DataLoc,
                        FieldKind::RelLoc { .. } => LocKind::RelLoc,
                        _ => LocKind::Inline,
                    };
                    let ty = ColumnType::of(f, trace.long_size);
                    FieldPlan {
                        key: key(b",", &f.name),
                        at: (f.offset as usize, f.size as usize, loc),
                        flexible: f.size == 0 && ty == ColumnType::Scalar(Scalar::Str),
                        kind: match ty {
                            ColumnType::Scalar(Scalar::Int { size, signed }) => {
                                Kind::Int { size, signed }
                            }
                            ColumnType::Scalar(Scalar::Str) => Kind::Str,
                            ColumnType::List { size, signed } => Kind::List { elem: size, signed },
                        },
                    }
                })
                .collect(),
        }
    }
}

/// An integer of `b.len()` bytes (1, 2, 4 or 8) as its column type reads it.
#[inline(always)]
fn push_int(out: &mut Vec<u8>, b: &[u8], big: bool, signed: bool) {
    let v = uint(b, big);
    let mut buf = itoa::Buffer::new();
    let s = if signed {
        let bits = 64 - 8 * b.len() as u32;
        buf.format(((v << bits) as i64) >> bits)
    } else {
        buf.format(v)
    };
    out.extend_from_slice(s.as_bytes());
}

/// Everything the writer threads share: per-event plans and every task name, escaped.
struct Writer<'t> {
    trace: &'t Trace,
    big: bool,
    /// Plan index by event id (`u16::MAX`: no plan made, the id has no events).
    slot: Vec<u16>,
    plans: Vec<Plan>,
    /// pid → `"comm"` (or `null`), escaped, as a range of `names`.
    comm: std::collections::HashMap<i32, (u32, u32)>,
    names: Vec<u8>,
}

impl<'t> Writer<'t> {
    fn new(trace: &'t Trace) -> Writer<'t> {
        let mut seen = vec![false; 1 << 16];
        for &id in &trace.events.id {
            seen[id as usize] = true;
        }
        let mut slot = vec![u16::MAX; 1 << 16];
        let mut plans = Vec::new();
        for (id, _) in seen.iter().enumerate().filter(|(_, &s)| s) {
            slot[id] = plans.len() as u16;
            plans.push(Plan::new(trace, id as u16));
        }
        let mut names = Vec::new();
        let mut comm = std::collections::HashMap::new();
        let mut add = |pid: i32, name: &str| {
            let s = names.len() as u32;
            push_json_str(&mut names, name.as_bytes());
            comm.insert(pid, (s, names.len() as u32));
        };
        add(0, "<idle>");
        for (&pid, name) in &trace.cmdlines {
            if pid != 0 {
                add(pid, name);
            }
        }
        Writer {
            trace,
            big: trace.endian == Endian::Big,
            slot,
            plans,
            comm,
            names,
        }
    }

    /// Events `range` as JSON lines appended to `out`.
    fn write(&self, range: std::ops::Range<usize>, out: &mut Vec<u8>) {
        let ev = &self.trace.events;
        // Most events repeat a recent pid: a direct-mapped cache before the map.
        let mut cache = [(i32::MIN, 0u32, 0u32); 256];
        let mut itoa = itoa::Buffer::new();
        for i in range {
            ev.prefetch_ahead(i);
            let plan = &self.plans[self.slot[ev.id[i] as usize] as usize];
            out.extend_from_slice(&plan.common[0]);
            out.extend_from_slice(itoa.format(ev.ts[i]).as_bytes());
            out.extend_from_slice(&plan.common[1]);
            out.extend_from_slice(itoa.format(ev.cpu[i]).as_bytes());
            out.extend_from_slice(&plan.common[2]);
            let pid = ev.pid[i];
            out.extend_from_slice(itoa.format(pid).as_bytes());
            out.extend_from_slice(&plan.common[3]);
            let c = &mut cache[(pid as u32 & 255) as usize];
            if c.0 != pid {
                let (s, e) = self.comm.get(&pid).copied().unwrap_or((u32::MAX, 0));
                *c = (pid, s, e);
            }
            if c.1 == u32::MAX {
                out.extend_from_slice(b"null");
            } else {
                out.extend_from_slice(&self.names[c.1 as usize..c.2 as usize]);
            }
            out.extend_from_slice(&plan.name);
            let rec = ev.record(i);
            for f in &plan.fields {
                out.extend_from_slice(&f.key);
                match f.kind {
                    Kind::Int { size, signed } => {
                        let (o, n) = (f.at.0, size as usize);
                        match rec.get(o..o + n) {
                            Some(b) => push_int(out, b, self.big, signed),
                            None => out.push(b'0'),
                        }
                    }
                    Kind::Str => {
                        let b = field_bytes(rec, f.at, self.big, f.flexible);
                        let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
                        push_json_str(out, b);
                    }
                    Kind::List { elem, signed } => {
                        out.push(b'[');
                        let b = field_bytes(rec, f.at, self.big, false);
                        for (k, x) in b.chunks_exact(elem as usize).enumerate() {
                            if k > 0 {
                                out.push(b',');
                            }
                            push_int(out, x, self.big, signed);
                        }
                        out.push(b']');
                    }
                }
            }
            out.extend_from_slice(b"}\n");
        }
    }
}

impl crate::lines::Lines for Writer<'_> {
    /// JSON lines depend on nothing printed before them.
    type Carry = ();
    fn lines(&self, range: std::ops::Range<usize>, _: &mut (), out: &mut Vec<u8>) {
        self.write(range, out);
    }
    fn merge(_: &mut (), _: &()) {}
}

/// Write every event of `trace` as one JSON object per line, in time order (the text
/// views' one output path, [`crate::lines::write`]).
pub fn dump_json<W: Write>(trace: &Trace, w: &mut W) -> std::io::Result<()> {
    crate::lines::write(&Writer::new(trace), trace.events.len(), b"", w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_what_json_needs_and_replace_invalid_utf8() {
        let mut o = Vec::new();
        push_json_str(&mut o, b"swapper/0");
        o.push(b' ');
        push_json_str(&mut o, b"a\"b\\c\nd\te\x01f\x7f");
        o.push(b' ');
        push_json_str(&mut o, "caf\u{e9}".as_bytes());
        o.push(b' ');
        push_json_str(&mut o, b"bad\xffbyte");
        let s = String::from_utf8(o).unwrap();
        assert_eq!(
            s,
            "\"swapper/0\" \"a\\\"b\\\\c\\nd\\te\\u0001f\u{7f}\" \"caf\u{e9}\" \"bad\u{fffd}byte\""
        );
        for part in s.split(' ') {
            let v: serde_json::Value = serde_json::from_str(part).unwrap();
            assert!(v.is_string());
        }
    }

    #[test]
    fn integers_by_size_and_sign() {
        let mut o = Vec::new();
        push_int(&mut o, &[0xff], false, true);
        o.push(b' ');
        push_int(&mut o, &[0xff], false, false);
        o.push(b' ');
        push_int(&mut o, &[0xfe, 0xff, 0xff, 0xff], false, true);
        o.push(b' ');
        push_int(&mut o, &[0, 0, 0, 1], true, false);
        o.push(b' ');
        push_int(&mut o, &[0xff; 8], false, false);
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "-1 255 -2 1 18446744073709551615"
        );
    }

    /// Both ways of writing (one thread, two threads block by block) give the same bytes.
    #[test]
    fn threaded_output_equals_one_pass() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/haltpoll_pipe_off.dat"
        );
        let t = pmlab_trace::open(std::path::Path::new(path)).unwrap();
        assert!(
            t.events.len() > 4 * crate::lines::BLOCK,
            "{} events",
            t.events.len()
        );
        let mut threaded = Vec::new();
        dump_json(&t, &mut threaded).unwrap();
        let mut one = Vec::new();
        Writer::new(&t).write(0..t.events.len(), &mut one);
        assert!(threaded == one, "outputs differ");
        assert_eq!(one.iter().filter(|&&c| c == b'\n').count(), t.events.len());
    }

    /// A reader that goes away (`pmlab dump --json | head`): the error comes back, the helper
    /// thread stops, nothing waits forever.
    #[test]
    fn a_failed_write_returns_its_error_from_two_threads() {
        struct Fails(usize);
        impl Write for Fails {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(std::io::ErrorKind::BrokenPipe.into());
                }
                self.0 -= 1;
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/haltpoll_pipe_off.dat"
        );
        let t = pmlab_trace::open(std::path::Path::new(path)).unwrap();
        for ok_writes in [0, 1, 2] {
            let e = dump_json(&t, &mut Fails(ok_writes)).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
        }
    }
}
