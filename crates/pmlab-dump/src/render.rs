//! Rendering of decoded events as `trace-cmd report -R -t` prints them: one line per
//! event, raw fields as libtraceevent's `tep_print_fields` writes them (print-format
//! conversions for plain `REC->field` arguments, raw numbers, strings and byte arrays
//! otherwise). Allocation-free per event: everything is appended to a caller's buffer.

use std::io::Write;

use crate::kallsyms::Kallsyms;
use crate::model::{Endian, EventFormat, FieldKind, Trace};
use crate::printfmt::{
    pad_since, pointer_ext_len, push_hex_case as push_hex, push_i64, push_line_prefix, push_u64,
    split_print_fmt, Spec,
};

// ---------------------------------------------------------------------------
// Small formatting helpers (no allocation; decimal digits by itoa).

/// `%0Nllu` for N ≤ 20.
#[inline]
fn push_u64_zero_padded(out: &mut Vec<u8>, v: u64, width: usize) {
    push_u64_padded(out, v, width, b'0');
}

/// `v` right-aligned in `width` columns, padded with `pad`.
#[inline]
fn push_u64_padded(out: &mut Vec<u8>, v: u64, width: usize, pad: u8) {
    let mut ib = itoa::Buffer::new();
    let d = ib.format(v).as_bytes();
    if d.len() < width {
        out.resize(out.len() + width - d.len(), pad);
    }
    out.extend_from_slice(d);
}

// ---------------------------------------------------------------------------
// Print-format analysis (what libtraceevent builds as `print_cache`).

#[derive(Debug, Clone, PartialEq, Eq)]
enum Arg {
    /// `REC->field`; its typecasts (libtraceevent's `eval_type_str`, each a mask or
    /// nothing) folded into one mask.
    Field { index: usize, mask: u64 },
    /// A number literal.
    Number(u64),
    /// Anything else (expressions, helper calls).
    Other,
}

#[derive(Debug, Clone)]
enum Item {
    Text {
        ends_0x: bool,
    },
    Digit {
        spec: Spec,
        arg: Arg,
        len_arg: Option<Arg>,
    },
    Pointer {
        fmt: u8,
        arg: Arg,
    },
    Str {
        spec: Spec,
        arg: Arg,
        len_arg: Option<Arg>,
    },
}

fn matching_paren(s: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn is_ident(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn looks_like_type(s: &str) -> bool {
    !s.is_empty()
        && !s.contains("REC")
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ' || c == '*')
}

fn classify(arg: &str, fmt: &EventFormat) -> Arg {
    let mut a = arg.trim();
    let mut casts = Vec::new();
    loop {
        if let Some(rest) = a.strip_prefix("REC->") {
            let rest = rest.trim();
            if is_ident(rest) {
                if let Some(index) = fmt.fields.iter().position(|f| f.name == rest) {
                    let mask = casts.iter().fold(u64::MAX, |m, t: &String| eval_type(m, t));
                    return Arg::Field { index, mask };
                }
            }
            return Arg::Other;
        }
        if a.starts_with('(') {
            let Some(close) = matching_paren(a) else {
                return Arg::Other;
            };
            let inner = a[1..close].trim();
            let after = a[close + 1..].trim();
            if after.is_empty() {
                a = inner;
                continue;
            }
            let starts_item =
                after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '(');
            if looks_like_type(inner) && starts_item {
                let t = inner.split_whitespace().collect::<Vec<_>>().join(" ");
                casts.push(normalize_type(&t));
                a = after;
                continue;
            }
            return Arg::Other;
        }
        if casts.is_empty() {
            let t = a.trim();
            let parsed = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                u64::from_str_radix(h, 16).ok()
            } else {
                t.parse::<u64>().ok()
            };
            if let Some(n) = parsed {
                return Arg::Number(n);
            }
        }
        return Arg::Other;
    }
}

/// libtraceevent joins type tokens with single spaces and writes pointers as `type *`.
fn normalize_type(t: &str) -> String {
    let mut s = String::new();
    for tok in t.replace('*', " * ").split_whitespace() {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(tok);
    }
    s
}

/// Helper functions libtraceevent (with its plugins) knows; any other call fails the event's parse.
const KNOWN_FUNCS: &[&str] = &[
    "__print_flags",
    "__print_symbolic",
    "__print_hex",
    "__print_hex_str",
    "__print_array",
    "__print_dynamic_array",
    "__get_str",
    "__get_rel_str",
    "__get_bitmask",
    "__get_rel_bitmask",
    "__get_cpumask",
    "__get_rel_cpumask",
    "__get_dynamic_array",
    "__get_rel_dynamic_array",
    "__get_dynamic_array_len",
    "__get_rel_dynamic_array_len",
    "__get_sockaddr",
    "__get_sockaddr_rel",
    "__builtin_expect",
    "sizeof",
    "jiffies_to_msecs",
    "__le16_to_cpu",
    "scsi_trace_parse_cdb",
    "xen_hypercall_name",
    "xen_hypercall_name",
];

fn has_unknown_function(args: &[String]) -> bool {
    for a in args {
        let b = a.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i].is_ascii_alphabetic() || b[i] == b'_' {
                let s = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let word = &a[s..i];
                let mut j = i;
                while j < b.len() && b[j] == b' ' {
                    j += 1;
                }
                let prev_arrow = s >= 2 && &b[s - 2..s] == b"->";
                if j < b.len() && b[j] == b'(' && !prev_arrow && !KNOWN_FUNCS.contains(&word) {
                    // `(type)(expr)` casts look like calls only after a ')'.
                    return true;
                }
            } else if b[i] == b'"' {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            } else {
                i += 1;
            }
        }
    }
    false
}

/// Constructs libtraceevent's expression parser rejects: statement expressions,
/// empty `{ }` symbol tables and `sizeof` of a typedef.
fn unparseable_arg(a: &str) -> bool {
    if a.contains("({") {
        return true;
    }
    // sizeof() of anything but int/unsigned/long or a REC field.
    let mut rest = a;
    while let Some(k) = rest.find("sizeof(") {
        let inner = rest[k + 7..].trim_start();
        let ok = ["int", "unsigned", "long", "REC"]
            .iter()
            .any(|t| inner.starts_with(t));
        if !ok {
            return true;
        }
        rest = &rest[k + 7..];
    }
    let b = a.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if c == b'{' {
            let rest = a[i + 1..].trim_start();
            if rest.starts_with('}') {
                return true;
            }
        }
        i += 1;
    }
    false
}

/// Build the parse list of a print format: text pieces and conversions with their args.
fn parse_print_items(fmt_text: &str, args: Vec<Arg>) -> (Vec<Item>, bool) {
    let b = fmt_text.as_bytes();
    let mut items = Vec::new();
    let mut args = args.into_iter();
    let mut failed = false;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && b.get(i + 1) != Some(&b'%') {
            let start = i;
            i += 1;
            let mut len_arg = None;
            while let Some(&c) = b.get(i) {
                match c {
                    b'#' | b'h' | b'l' | b'L' | b'z' | b'Z' | b'.' | b'-' | b'0'..=b'9' => i += 1,
                    b'*' => {
                        match args.next() {
                            Some(a) => len_arg = Some(a),
                            None => failed = true,
                        }
                        i += 1;
                    }
                    b'p' => {
                        let ext = pointer_ext_len(&b[i + 1..]);
                        let fmt_char = b.get(i + 1).copied().filter(|_| ext > 0).unwrap_or(b'p');
                        i += 1 + ext;
                        match args.next() {
                            Some(arg) => items.push(Item::Pointer { fmt: fmt_char, arg }),
                            None => failed = true,
                        }
                        break;
                    }
                    b'd' | b'u' | b'i' | b'x' | b'X' | b'o' => {
                        let spec = Spec::parse(&b[start..=i]);
                        i += 1;
                        if !(-2..=2).contains(&spec.ls) {
                            failed = true;
                        }
                        match args.next() {
                            Some(arg) => items.push(Item::Digit {
                                spec,
                                arg,
                                len_arg: len_arg.take(),
                            }),
                            None => failed = true,
                        }
                        break;
                    }
                    b's' => {
                        let spec = Spec::parse(&b[start..=i]);
                        i += 1;
                        match args.next() {
                            Some(arg) => items.push(Item::Str {
                                spec,
                                arg,
                                len_arg: len_arg.take(),
                            }),
                            None => failed = true,
                        }
                        break;
                    }
                    _ => {
                        // Unknown conversion: libtraceevent keeps it as text `>c<`.
                        i += 1;
                        items.push(Item::Text { ends_0x: false });
                        break;
                    }
                }
            }
            if failed {
                break;
            }
        } else {
            // Text up to the next conversion; `\n`-style escapes and `%%` collapse.
            let mut text: Vec<u8> = Vec::new();
            while i < b.len() {
                if b[i] == b'\\' {
                    i += 1;
                    let c = b.get(i).copied().unwrap_or(b'\\');
                    text.push(match c {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        other => other,
                    });
                } else if b[i] == b'%' {
                    if b.get(i + 1) == Some(&b'%') {
                        text.push(b'%');
                        i += 1;
                    } else {
                        break;
                    }
                } else {
                    text.push(b[i]);
                }
                i += 1;
            }
            items.push(Item::Text {
                ends_0x: text.len() > 1 && text.ends_with(b"0x"),
            });
        }
    }
    (items, failed)
}

// ---------------------------------------------------------------------------
// Per-event renderers.

#[derive(Debug)]
struct FieldR {
    name: String,
    offset: usize,
    size: usize,
    array: bool,
    /// ` name=`.
    label: Box<[u8]>,
    /// Printed as a string while printable: libtraceevent clears this the first time a
    /// "string" is not printable, for the rest of the trace ([`Carry`]).
    string: bool,
    /// This field's index in a [`Carry`].
    slot: usize,
    dynamic: bool,
    relative: bool,
    long: bool,
    pointer: bool,
    signed: bool,
}

#[derive(Debug)]
struct EventR {
    /// `: name: ` and the padding to 20 columns, as the line shows it.
    head: Box<[u8]>,
    fields: Vec<FieldR>,
    items: Vec<Item>,
    /// Index in `fields` of each format field (formats include common fields, `fields` does not).
    format_index: Vec<Option<usize>>,
    failed: bool,
    bprint: bool,
    /// (offset, size) of every format field, common ones included.
    all: Vec<(usize, usize)>,
    /// How each field prints while `carry_fields` are all printable ([`plan`]).
    plan: Option<Vec<Option<(usize, bool)>>>,
    /// Fields (in `fields`) whose printing the carry changes: string fields not arrays.
    carry_fields: Vec<usize>,
}

/// The parse-list item that prints field `fi`, walking from `start` circularly, and
/// whether the text before it ends in `0x` (libtraceevent's `print_cache` lookup).
fn find_item(er: &EventR, fi: usize, start: usize) -> Option<(usize, bool)> {
    let n = er.items.len();
    let mut p = start;
    let mut has_0x = false;
    loop {
        match &er.items[p] {
            Item::Text { ends_0x } => has_0x = *ends_0x,
            Item::Digit { arg, .. } | Item::Pointer { arg, .. } | Item::Str { arg, .. } => {
                if matches!(arg, Arg::Field { index, .. } if er.format_index[*index] == Some(fi)) {
                    return Some((p, has_0x));
                }
                has_0x = false;
            }
        }
        p = if p + 1 < n { p + 1 } else { 0 };
        if p == start {
            return None;
        }
    }
}

/// What `Renderer::fields` does for each field while no string field of the event has
/// been found not printable: the item that prints it (and a `0x` before it), or raw.
fn plan(er: &EventR) -> Option<Vec<Option<(usize, bool)>>> {
    if er.failed || er.bprint {
        return None;
    }
    let mut parse: Option<usize> = if er.items.is_empty() { None } else { Some(0) };
    let mut steps = Vec::with_capacity(er.fields.len());
    for (fi, f) in er.fields.iter().enumerate() {
        let mut step = None;
        if !f.array && !f.string {
            if let Some(p) = parse {
                if let Some((q, has_0x)) = find_item(er, fi, p) {
                    parse = (q + 1 < er.items.len()).then_some(q + 1);
                    step = Some((q, has_0x));
                }
            }
        }
        steps.push(step);
    }
    Some(steps)
}

/// `%16s-%-5d` of a line: the task name right-aligned in 16 columns, its pid left-aligned in 5.
fn pid_head(out: &mut Vec<u8>, comm: &[u8], pid: i32) {
    if comm.len() < 16 {
        out.resize(out.len() + 16 - comm.len(), b' ');
    }
    out.extend_from_slice(comm);
    out.push(b'-');
    let s = out.len();
    push_i64(out, pid as i64);
    pad_since(out, s, 5, true);
}

/// Renders events of one trace.
pub struct Renderer<'t> {
    trace: &'t Trace,
    /// By event id.
    events: Vec<Option<EventR>>,
    /// Task names by pid (the saved cmdlines).
    comms: crate::report::Comms,
    /// Per pid of the trace's events, its line's `%16s-%-5d` as a range of `pid_arena`.
    pid_heads: Vec<(u32, u32)>,
    pid_arena: Vec<u8>,
    /// kallsyms in libtraceevent's order, for `%pS`.
    funcs: &'t Kallsyms,
    big: bool,
    long_size: u32,
    buffer_width: usize,
}

/// What libtraceevent carries from one event to the next in this view: the string fields
/// found not printable once (by field slot), which print as arrays from then on. Blocks of
/// events formatted apart agree when they started from the same carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carry(Vec<bool>);

impl Carry {
    #[inline]
    fn cleared(&self, slot: usize) -> bool {
        self.0.get(slot).copied().unwrap_or(false)
    }
    /// `self` with what `other` cleared too (both only ever clear).
    pub(crate) fn merge(&mut self, other: &Carry) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), false);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= *b;
        }
    }
}

fn event_renderer(f: &EventFormat, slots: &mut usize) -> EventR {
    let mut fields = Vec::new();
    let mut format_index = Vec::with_capacity(f.fields.len());
    for fl in &f.fields {
        if fl.common {
            format_index.push(None);
            continue;
        }
        let t = &fl.type_name;
        let array = t.contains('[')
            || (matches!(
                fl.kind,
                FieldKind::DataLoc { .. } | FieldKind::RelLoc { .. }
            ) && fl.size == 2);
        let string = (array && (t.contains("char") || t.contains("u8") || t.contains("s8")))
            || (matches!(
                fl.kind,
                FieldKind::DataLoc { .. } | FieldKind::RelLoc { .. }
            ) && fl.size == 2);
        format_index.push(Some(fields.len()));
        fields.push(FieldR {
            name: fl.name.clone(),
            label: format!(" {}=", fl.name).into_bytes().into(),
            offset: fl.offset as usize,
            size: fl.size as usize,
            array,
            string,
            slot: {
                *slots += 1;
                *slots - 1
            },
            dynamic: t.starts_with("__data_loc") || t.starts_with("__rel_loc"),
            relative: t.starts_with("__rel_loc"),
            long: t.contains("long"),
            pointer: t.contains('*'),
            signed: fl.signed,
        });
    }
    let bprint = f.system == "ftrace" && f.name == "bprint";
    let (items, failed) = match split_print_fmt(&f.print_fmt) {
        Some((text, args)) => {
            let text = String::from_utf8_lossy(&text).into_owned();
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let unknown = has_unknown_function(&args)
                || text.contains('\t')
                || args.iter().any(|a| unparseable_arg(a));
            let args: Vec<Arg> = args.iter().map(|a| classify(a, f)).collect();
            let (items, failed) = parse_print_items(&text, args);
            (items, failed || unknown)
        }
        None => (Vec::new(), true),
    };
    let all = f
        .fields
        .iter()
        .map(|x| (x.offset as usize, x.size as usize))
        .collect();
    let carry_fields = fields
        .iter()
        .enumerate()
        .filter(|(_, f)| f.string && !f.array)
        .map(|(i, _)| i)
        .collect();
    let mut head = format!(": {}: ", f.name).into_bytes();
    head.resize(head.len() + 20usize.saturating_sub(f.name.len()), b' ');
    let mut er = EventR {
        head: head.into(),
        fields,
        items,
        format_index,
        failed,
        bprint,
        all,
        plan: None,
        carry_fields,
    };
    er.plan = plan(&er);
    er
}

impl<'t> Renderer<'t> {
    /// A renderer for `trace`: print formats parsed once per event type.
    pub fn new(trace: &'t Trace) -> Renderer<'t> {
        let max = trace.formats.keys().copied().max().unwrap_or(0) as usize;
        let mut events: Vec<Option<EventR>> = (0..=max).map(|_| None).collect();
        let mut slots = 0;
        let mut ids: Vec<u16> = trace.formats.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            events[id as usize] = Some(event_renderer(&trace.formats[&id], &mut slots));
        }
        let buffer_width = trace
            .meta
            .buffers
            .iter()
            .map(|b| b.len())
            .max()
            .unwrap_or(0);
        let comms = crate::report::Comms::new(trace);
        let (mut pid_heads, mut pid_arena) = (Vec::new(), Vec::new());
        for &pid in &trace.events.pid {
            let Some(p) = usize::try_from(pid).ok().filter(|&p| p < 1 << 22) else {
                continue;
            };
            if p >= pid_heads.len() {
                pid_heads.resize(p + 1, (0, 0));
            }
            if pid_heads[p].1 == 0 {
                let a = pid_arena.len() as u32;
                pid_head(&mut pid_arena, comms.get(pid), pid);
                pid_heads[p] = (a, pid_arena.len() as u32);
            }
        }
        Renderer {
            trace,
            comms,
            pid_heads,
            pid_arena,
            events,
            funcs: &trace.kallsyms,
            big: trace.endian == Endian::Big,
            long_size: trace.long_size,
            buffer_width,
        }
    }

    /// The lines `trace-cmd report` prints before the events.
    pub fn header(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"cpus=");
        push_u64(
            out,
            self.trace.meta.cpus_reported.max(self.trace.cpus) as u64,
        );
        out.push(b'\n');
    }

    #[inline]
    fn num(&self, b: &[u8]) -> u64 {
        match b.len() {
            1 => b[0] as u64,
            2 => {
                let a = [b[0], b[1]];
                (if self.big {
                    u16::from_be_bytes(a)
                } else {
                    u16::from_le_bytes(a)
                }) as u64
            }
            4 => {
                let a = [b[0], b[1], b[2], b[3]];
                (if self.big {
                    u32::from_be_bytes(a)
                } else {
                    u32::from_le_bytes(a)
                }) as u64
            }
            8 => {
                let a: [u8; 8] = b.try_into().unwrap();
                if self.big {
                    u64::from_be_bytes(a)
                } else {
                    u64::from_le_bytes(a)
                }
            }
            _ => 0,
        }
    }

    /// Append event `i` as one line (with its newline, and any "EVENTS DROPPED" line before it).
    pub fn event(&self, i: usize, missed: Option<i64>, carry: &mut Carry, out: &mut Vec<u8>) {
        let ev = &self.trace.events;
        let cpu = ev.cpu[i];
        let line_start = out.len();
        push_line_prefix(self.trace, self.buffer_width, i, missed, out);
        let rec = ev.record(i);
        let Some(er) = self.events.get(ev.id[i] as usize).and_then(|e| e.as_ref()) else {
            out.extend_from_slice(
                b"[UNKNOWN EVENT][UNKNOWN EVENT] (NULL):               [UNKNOWN EVENT]\n",
            );
            return;
        };
        let pid = ev.pid[i];
        // "%16s-%-5d [%03d]": the part before " [" made once per pid.
        match usize::try_from(pid)
            .ok()
            .and_then(|p| self.pid_heads.get(p))
        {
            Some(&(a, b)) if b > a => {
                out.extend_from_slice(&self.pid_arena[a as usize..b as usize])
            }
            _ => pid_head(out, self.comms.get(pid), pid),
        }
        out.extend_from_slice(b" [");
        push_u64_zero_padded(out, cpu as u64, 3);
        out.push(b']');
        let ts = ev.ts[i];
        if self.trace.meta.ts_in_ns || self.trace.meta.version == 0 {
            out.push(b' ');
            push_u64_padded(out, ts / 1_000_000_000, 5, b' ');
            out.push(b'.');
            push_u64_zero_padded(out, ts % 1_000_000_000, 9);
        } else {
            push_u64_padded(out, ts / 1_000_000_000_000, 5, b' ');
            out.push(b'.');
            push_u64_zero_padded(out, ts % 1_000_000_000_000, 12);
        }
        out.extend_from_slice(&er.head);
        self.fields(er, rec, i, carry, out);
        if out.len() > line_start && out[out.len() - 1] == b'\n' {
            out.pop();
        }
        out.push(b'\n');
    }

    /// Event `i`'s fields as ` name=value` pairs (libtraceevent's `tep_print_fields`), the
    /// text `trace-cmd report` prints after `[FAILED TO PARSE]` and, with `-R`, for every event.
    /// False when the trace has no format for the event's id.
    pub(crate) fn raw_fields(&self, i: usize, carry: &mut Carry, out: &mut Vec<u8>) -> bool {
        let ev = &self.trace.events;
        match self.events.get(ev.id[i] as usize).and_then(|e| e.as_ref()) {
            Some(er) => {
                self.fields(er, ev.record(i), i, carry, out);
                true
            }
            None => false,
        }
    }

    /// The bytes after event `i`'s record up to the end of its ring-buffer page (the next
    /// records, then the page's unused rest). libtraceevent reads a fixed-size field at its
    /// offset in the page it was handed, whether or not the record holds it: ftrace's
    /// `kernel_stack` declares `caller[8]` and records only the frames it has, so trace-cmd's
    /// raw `caller=` shows the next record's bytes. Pages start at multiples of the page size
    /// in `raw` (trace-cmd aligns each CPU's data in a v6 file; v7 and live pages are
    /// decompressed or copied as whole pages); ftrace text has no pages.
    fn page_tail(&self, i: usize) -> &[u8] {
        let ps = self.trace.page_size as usize;
        if ps == 0 || self.trace.meta.version == 0 {
            return &[];
        }
        let ev = &self.trace.events;
        let (off, end) = (ev.off(i), ev.off(i) + ev.rec_len(i));
        let page_end = ((off / ps + 1) * ps).min(ev.raw.len());
        ev.raw.get(end..page_end).unwrap_or(&[])
    }

    /// Ids of the event types with a record shorter than the type's fixed-size fields whose
    /// page ends before them: libtraceevent reads such a field's last bytes from beyond the
    /// page buffer (whatever memory follows it), which pmlab cannot know and prints as zeros.
    pub(crate) fn ids_past_page(&self) -> Vec<u16> {
        let ev = &self.trace.events;
        let ps = self.trace.page_size as usize;
        if ps == 0 || self.trace.meta.version == 0 {
            return Vec::new();
        }
        let need: Vec<usize> = self
            .events
            .iter()
            .map(|e| {
                e.as_ref().map_or(0, |e| {
                    e.fields
                        .iter()
                        .filter(|f| !f.dynamic)
                        .map(|f| f.offset + f.size)
                        .max()
                        .unwrap_or(0)
                })
            })
            .collect();
        let mut hit = vec![false; need.len()];
        for (i, &id) in ev.id.iter().enumerate() {
            let Some(&n) = need.get(id as usize) else {
                continue;
            };
            if ev.rec_len(i) < n && !hit[id as usize] {
                let off = ev.off(i);
                let page_end = ((off / ps + 1) * ps).min(ev.raw.len());
                hit[id as usize] = off + n > page_end;
            }
        }
        (0..hit.len() as u16)
            .filter(|&id| hit[id as usize])
            .collect()
    }

    /// Event `i`'s fields (`rec` its record).
    fn fields(&self, er: &EventR, rec: &[u8], i: usize, carry: &mut Carry, out: &mut Vec<u8>) {
        if let Some(plan) = &er.plan {
            if er
                .carry_fields
                .iter()
                .all(|f| !carry.cleared(er.fields[*f].slot))
            {
                for (f, step) in er.fields.iter().zip(plan.iter()) {
                    out.extend_from_slice(&f.label);
                    match *step {
                        Some((p, has_0x)) => {
                            if has_0x {
                                out.extend_from_slice(b"0x");
                            }
                            self.print_item(er, &er.items[p], rec, out);
                        }
                        None => self.print_raw(f, rec, i, carry, out),
                    }
                }
                return;
            }
        }
        let mut parse: Option<usize> = if er.items.is_empty() { None } else { Some(0) };
        let use_cache = !er.failed && !er.bprint;
        for (fi, f) in er.fields.iter().enumerate() {
            out.push(b' ');
            out.extend_from_slice(f.name.as_bytes());
            out.push(b'=');
            let mut done = false;
            if use_cache && !f.array && (!f.string || carry.cleared(f.slot)) {
                if let Some(p) = parse {
                    if let Some(next) = self.print_via_cache(er, fi, p, rec, out) {
                        parse = next;
                        done = true;
                    }
                }
            }
            if !done {
                self.print_raw(f, rec, i, carry, out);
            }
        }
    }

    /// Walk the parse list from `start` (circularly) for a conversion of field `fi`; print it.
    /// Returns Some(next position) when printed, None when the field has no conversion.
    fn print_via_cache(
        &self,
        er: &EventR,
        fi: usize,
        start: usize,
        rec: &[u8],
        out: &mut Vec<u8>,
    ) -> Option<Option<usize>> {
        let (p, has_0x) = find_item(er, fi, start)?;
        if has_0x {
            out.extend_from_slice(b"0x");
        }
        self.print_item(er, &er.items[p], rec, out);
        Some(if p + 1 < er.items.len() {
            Some(p + 1)
        } else {
            None
        })
    }

    fn field_of<'a>(&self, er: &'a EventR, index: usize) -> Option<&'a FieldR> {
        er.format_index
            .get(index)
            .copied()
            .flatten()
            .map(|k| &er.fields[k])
    }

    /// eval_num_arg for the argument kinds a conversion can carry here.
    fn eval(&self, er: &EventR, arg: &Arg, rec: &[u8]) -> u64 {
        match arg {
            Arg::Number(n) => *n,
            Arg::Other => 0,
            Arg::Field { index, mask } => {
                let v = match er.all.get(*index) {
                    Some(&(o, s)) if o + s <= rec.len() => self.num(&rec[o..o + s]),
                    _ => 0,
                };
                v & mask
            }
        }
    }

    fn print_item(&self, er: &EventR, item: &Item, rec: &[u8], out: &mut Vec<u8>) {
        match item {
            Item::Text { .. } => {}
            Item::Digit { spec, arg, len_arg } => {
                let v = self.eval(er, arg, rec);
                // A `*` argument is a C int.
                let star = len_arg
                    .as_ref()
                    .map(|a| i64::from(self.eval(er, a, rec) as i32));
                spec.int(out, v, spec.bits(), star);
            }
            Item::Pointer { fmt, arg } => {
                let v = self.eval(er, arg, rec);
                match fmt {
                    b'F' | b'f' | b'S' | b's' => {
                        self.print_function(out, v, matches!(fmt, b'F' | b'S'))
                    }
                    _ => {
                        if v == 0 {
                            out.extend_from_slice(b"(nil)");
                        } else {
                            out.extend_from_slice(b"0x");
                            push_hex(out, v, false);
                        }
                    }
                }
            }
            Item::Str { spec, arg, len_arg } => {
                let Arg::Field { index, .. } = arg else {
                    return;
                };
                let Some(f) = self.field_of(er, *index) else {
                    return;
                };
                let star = len_arg
                    .as_ref()
                    .map(|a| i64::from(self.eval(er, a, rec) as i32));
                if !f.array && f.size == self.long_size as usize {
                    let addr = if f.offset + f.size <= rec.len() {
                        self.num(&rec[f.offset..f.offset + f.size])
                    } else {
                        0
                    };
                    match self.trace.printk_formats.get(&addr) {
                        Some(s) => out.extend_from_slice(s.as_bytes()),
                        None => push_hex(out, addr, false),
                    }
                    return;
                }
                let len = if f.size > 0 {
                    f.size
                } else {
                    rec.len().saturating_sub(f.offset)
                };
                let bytes = rec
                    .get(f.offset..(f.offset + len).min(rec.len()))
                    .unwrap_or(&[]);
                let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
                spec.str(out, &bytes[..end], star);
            }
        }
    }

    /// `%pS`-style: symbol (+offset), or the address in hex.
    fn print_function(&self, out: &mut Vec<u8>, addr: u64, with_offset: bool) {
        match self.funcs.function_bytes_at(addr) {
            Some((a, name)) => {
                out.extend_from_slice(name);
                if with_offset {
                    out.extend_from_slice(b"+0x");
                    push_hex(out, addr.wrapping_sub(a), false);
                }
            }
            None => {
                out.extend_from_slice(b"0x");
                let v = if self.long_size == 4 {
                    addr as i64 as u64
                } else {
                    addr
                };
                push_hex(out, v, false);
            }
        }
    }

    /// A field's raw value from event `i`'s record `rec`; a fixed-size field that runs past
    /// the record is read on into its page ([`Self::page_tail`]), as libtraceevent reads it.
    fn print_raw(&self, f: &FieldR, rec: &[u8], i: usize, carry: &mut Carry, out: &mut Vec<u8>) {
        let joined: Vec<u8>;
        let rec = if !f.dynamic && f.offset + f.size > rec.len() {
            let tail = self.page_tail(i);
            let more = (f.offset + f.size - rec.len()).min(tail.len());
            joined = [rec, &tail[..more]].concat();
            &joined[..]
        } else {
            rec
        };
        if f.array {
            let (offset, len) = if f.dynamic {
                if f.offset + f.size > rec.len() {
                    (0, 0)
                } else {
                    let v = self.num(&rec[f.offset..f.offset + f.size]);
                    let o = (v & 0xffff) as usize;
                    let l = if f.size == 2 {
                        rec.len().saturating_sub(o)
                    } else {
                        ((v >> 16) & 0xffff) as usize
                    };
                    let mut off = if o > rec.len() { 0 } else { o };
                    let len = if o + l > rec.len() { 0 } else { l };
                    if f.relative {
                        off += f.offset + f.size;
                    }
                    (off, len)
                }
            } else {
                (f.offset, f.size)
            };
            let data = rec.get(offset..).unwrap_or(&[]);
            let bounded = &data[..len.min(data.len())];
            if f.string && !carry.cleared(f.slot) && is_printable(bounded) {
                let end = data.iter().position(|&c| c == 0).unwrap_or(data.len());
                out.extend_from_slice(&data[..end]);
            } else {
                out.extend_from_slice(b"ARRAY[");
                for (k, byte) in (0..len).map(|k| (k, data.get(k).copied().unwrap_or(0))) {
                    if k > 0 {
                        out.extend_from_slice(b", ");
                    }
                    if byte < 16 {
                        out.push(b'0');
                    }
                    push_hex(out, byte as u64, false);
                }
                out.push(b']');
                if f.string {
                    if carry.0.len() <= f.slot {
                        carry.0.resize(f.slot + 1, false);
                    }
                    carry.0[f.slot] = true;
                }
            }
            return;
        }
        let val = if f.offset + f.size <= rec.len() {
            self.num(&rec[f.offset..f.offset + f.size])
        } else {
            0
        };
        if f.pointer {
            out.extend_from_slice(b"0x");
            push_hex(out, val, false);
        } else if f.signed {
            match f.size {
                4 => {
                    if f.long {
                        out.extend_from_slice(b"0x");
                        push_hex(out, val & 0xffff_ffff, false);
                    } else {
                        push_i64(out, val as u32 as i32 as i64);
                    }
                }
                2 => {
                    let s = out.len();
                    push_i64(out, val as u16 as i16 as i64);
                    pad_since(out, s, 2, false);
                }
                1 => push_i64(out, val as u8 as i8 as i64),
                _ => push_i64(out, val as i64),
            }
        } else if f.long {
            out.extend_from_slice(b"0x");
            push_hex(out, val, false);
        } else {
            push_u64(out, val);
        }
    }
}

/// is_printable_array: up to `len` bytes or the first NUL, all printable or space.
fn is_printable(b: &[u8]) -> bool {
    for &c in b {
        if c == 0 {
            break;
        }
        if !((0x20..0x7f).contains(&c) || matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r')) {
            return false;
        }
    }
    true
}

/// libtraceevent's eval_type_str.
fn eval_type(val: u64, ty: &str) -> u64 {
    if ty.len() < 2 || ty.ends_with('*') || ty.starts_with("struct") {
        return val;
    }
    match ty {
        "u8" => val & 0xff,
        "u16" => val & 0xffff,
        "u32" => val & 0xffff_ffff,
        "u64" | "s64" => val,
        "s8" => val as u8 as i8 as i64 as u64 & 0xff,
        "s16" => val as u16 as i16 as i64 as u64 & 0xffff,
        "s32" => val as u32 as i32 as i64 as u64 & 0xffff_ffff,
        _ => {
            let t = ty.strip_prefix("unsigned ").unwrap_or(ty);
            match t {
                "char" => val & 0xff,
                "short" => val & 0xffff,
                "int" => val & 0xffff_ffff,
                _ => val,
            }
        }
    }
}

impl crate::lines::Lines for Renderer<'_> {
    type Carry = Carry;
    fn lines(&self, range: std::ops::Range<usize>, carry: &mut Carry, out: &mut Vec<u8>) {
        let missed = &self.trace.meta.missed_before;
        let mut mi = missed.partition_point(|m| m.0 < range.start);
        for i in range {
            let m = if mi < missed.len() && missed[mi].0 == i {
                mi += 1;
                Some(missed[mi - 1].1)
            } else {
                None
            };
            self.event(i, m, carry, out);
        }
    }
    fn merge(a: &mut Carry, b: &Carry) {
        a.merge(b);
    }
}

/// Write every event of `trace` as `trace-cmd report -R -t` does, header first (the text
/// views' one output path, [`crate::lines::write`]).
pub fn dump<W: Write>(trace: &Trace, w: &mut W) -> std::io::Result<()> {
    let r = Renderer::new(trace);
    let mut head = Vec::new();
    r.header(&mut head);
    crate::lines::write(&r, trace.events.len(), &head, w)
}

/// Whether libtraceevent would fail to parse this event's print format (then every field prints raw).
#[doc(hidden)]
pub fn print_fmt_fails(f: &EventFormat) -> bool {
    event_renderer(f, &mut 0).failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_function_check_after_a_multibyte_character() {
        // found by fuzzing: a print-fmt argument with a non-ASCII character before a name
        assert!(has_unknown_function(&["\u{fffd}x(1)".to_string()]));
        assert!(!has_unknown_function(&["\u{fffd}->x".to_string()]));
    }

    #[test]
    fn printf_ints_take_their_length_modifiers() {
        let mut o = Vec::new();
        for (f, v) in [
            ("%lu", 4294967295),
            ("%d", 0xffff_ffff),
            ("%03d", 7),
            ("%#lx", 255),
            ("%-4u", 9),
            ("%llx", u64::MAX),
            ("%hhu", 0x1ff),
        ] {
            let spec = Spec::parse(f.as_bytes());
            spec.int(&mut o, v, spec.bits(), None);
            o.push(b'|');
        }
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "4294967295|-1|007|0xff|9   |ffffffffffffffff|255|"
        );
    }

    #[test]
    fn splits_print_fmt() {
        let (f, a) = split_print_fmt("\"a=%d b=%s\", REC->a, __get_str(b, (1,2))").unwrap();
        assert_eq!(f, b"a=%d b=%s");
        assert_eq!(a, vec!["REC->a", "__get_str(b, (1,2))"]);
    }
}
