//! Event print formats (`print fmt: "...", args`) parsed once per event type into a list of
//! text pieces and conversions over an expression tree, and evaluated per event into a
//! caller's buffer as libtraceevent's `pretty_print` writes them (`trace-cmd report`).
//!
//! Where libtraceevent 1.7 does something defined that C would not, pmlab does it too
//! (docs/reader.md lists the cases): names a format does not define are 0 inside an
//! operation consolidated at parse time ([`consolidate`]), their kernel symbol's address
//! when evaluated ([`PrintFormat::resolve_names`]), and looked up among a few known names
//! or -1 in flag tables ([`flag_value`]); character constants are their text's `strtoull`;
//! `%p` prints every argument as a number; equal precedences group to the right, a
//! parenthesized lower-precedence right operand (`?:` too) is rotated and so is a unary
//! `-`/`+` after `*`, `/`, `%` ([`Parser::binary_from`]); a `?:`'s false branch is one
//! operand, what follows applying to the whole conditional ([`Parser::expr`]); `^` in an
//! evaluated expression is 0; casts mask without sign extension; a field the record does
//! not hold is 0. Division by zero, which kills trace-cmd, gives 0.

use std::collections::HashMap;

use crate::kallsyms::Kallsyms;
use crate::model::{EventFormat, FieldKind};

// ---------------------------------------------------------------------------
// Output helpers (no allocation).

#[inline]
pub(crate) fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

#[inline]
pub(crate) fn push_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Lower-case hex digits of `v` into the end of `buf`; returns where they start.
#[inline]
fn hex_digits(buf: &mut [u8; 24], mut v: u64, upper: bool) -> usize {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = digits[(v & 15) as usize];
        v >>= 4;
        if v == 0 {
            return i;
        }
    }
}

#[inline]
pub(crate) fn push_hex(out: &mut Vec<u8>, v: u64) {
    push_hex_case(out, v, false);
}

/// Hex digits of `v`, upper-case when asked.
#[inline]
pub(crate) fn push_hex_case(out: &mut Vec<u8>, v: u64, upper: bool) {
    let mut b = [0u8; 24];
    let s = hex_digits(&mut b, v, upper);
    out.extend_from_slice(&b[s..]);
}

/// What both views print before an event: its buffer's name, padded to `buffer_width`, when
/// the file has more than one buffer, and the "CPU:N [M EVENTS DROPPED]" line when `missed`.
#[inline]
pub(crate) fn push_line_prefix(
    trace: &crate::model::Trace,
    buffer_width: usize,
    i: usize,
    missed: Option<i64>,
    out: &mut Vec<u8>,
) {
    if trace.meta.buffers.len() > 1 {
        let b = trace.meta.event_buffer.get(i).copied().unwrap_or(0) as usize;
        let name = trace.meta.buffers.get(b).map_or("", |s| s.as_str());
        let s = out.len();
        out.extend_from_slice(name.as_bytes());
        pad_since(out, s, buffer_width, false);
        out.extend_from_slice(if name.is_empty() { b"  " } else { b": " });
    }
    if let Some(m) = missed {
        out.extend_from_slice(b"CPU:");
        push_u64(out, trace.events.cpu[i] as u64);
        if m >= 0 {
            out.extend_from_slice(b" [");
            push_i64(out, m);
            out.extend_from_slice(b" EVENTS DROPPED]\n");
        } else {
            out.extend_from_slice(b" [EVENTS DROPPED]\n");
        }
    }
}

/// Right- (or left-) align what was written since `start` in `width` columns.
#[inline]
pub(crate) fn pad_since(out: &mut Vec<u8>, start: usize, width: usize, left: bool) {
    let n = out.len() - start;
    if n >= width {
        return;
    }
    let pad = width - n;
    if left {
        out.resize(out.len() + pad, b' ');
    } else {
        let old = out.len();
        out.resize(old + pad, b' ');
        out.copy_within(start..old, start + pad);
        out[start..start + pad].fill(b' ');
    }
}

// ---------------------------------------------------------------------------
// printf conversions.

/// One printf conversion: flags, width, precision (each may be `*`), conversion char.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alt: bool,
    width: Option<usize>,
    width_star: bool,
    prec: Option<usize>,
    prec_star: bool,
    /// Length modifiers: -2 `hh`, -1 `h`, 0 none, 1 `l`/`z`, 2 `ll`/`L` (libtraceevent's
    /// `ls`); out of that range for a malformed conversion.
    pub(crate) ls: i8,
    pub(crate) conv: u8,
}

impl Spec {
    /// Parse `%[flags][width][.prec][length]conv` (the whole conversion text).
    pub(crate) fn parse(f: &[u8]) -> Spec {
        let mut s = Spec::default();
        let mut i = 1;
        while i < f.len() {
            match f[i] {
                b'-' => s.left = true,
                b'0' => s.zero = true,
                b'+' => s.plus = true,
                b' ' => s.space = true,
                b'#' => s.alt = true,
                _ => break,
            }
            i += 1;
        }
        if f.get(i) == Some(&b'*') {
            s.width_star = true;
            i += 1;
        } else {
            let mut w = None;
            while let Some(d) = f.get(i).filter(|c| c.is_ascii_digit()) {
                w = Some(w.unwrap_or(0) * 10 + (d - b'0') as usize);
                i += 1;
            }
            s.width = w;
        }
        if f.get(i) == Some(&b'.') {
            i += 1;
            if f.get(i) == Some(&b'*') {
                s.prec_star = true;
            } else {
                let mut p = 0;
                while let Some(d) = f.get(i).filter(|c| c.is_ascii_digit()) {
                    p = p * 10 + (d - b'0') as usize;
                    i += 1;
                }
                s.prec = Some(p);
            }
        }
        for &c in f.get(i..f.len().saturating_sub(1)).unwrap_or(&[]) {
            match c {
                b'h' => s.ls = s.ls.saturating_sub(1),
                b'l' => s.ls = s.ls.saturating_add(1),
                b'L' => s.ls = 2,
                b'z' | b'Z' => s.ls = 1,
                _ => {}
            }
        }
        s.conv = f.last().copied().unwrap_or(b's');
        s
    }

    /// The width in bits an integer conversion casts its value to (its length modifiers).
    pub(crate) fn bits(&self) -> u32 {
        match self.ls {
            i8::MIN..=-2 => 8,
            -1 => 16,
            0 => 32,
            _ => 64,
        }
    }

    /// The spec with a `*` filled in from an argument (C: a negative width means `-`).
    fn with_star(mut self, star: Option<i64>) -> Spec {
        if let Some(v) = star {
            if self.width_star {
                if v < 0 {
                    self.left = true;
                }
                self.width = Some(v.unsigned_abs() as usize);
            } else if self.prec_star {
                self.prec = (v >= 0).then_some(v as usize);
            }
        }
        self
    }

    /// Write `body` (already converted) with this spec's width and alignment.
    fn pad(&self, out: &mut Vec<u8>, prefix: &[u8], body: &[u8], zero_ok: bool) {
        let len = prefix.len() + body.len();
        let width = self.width.unwrap_or(0);
        if len >= width {
            out.extend_from_slice(prefix);
            out.extend_from_slice(body);
        } else if self.left {
            out.extend_from_slice(prefix);
            out.extend_from_slice(body);
            out.resize(out.len() + width - len, b' ');
        } else if self.zero && zero_ok {
            out.extend_from_slice(prefix);
            out.resize(out.len() + width - len, b'0');
            out.extend_from_slice(body);
        } else {
            out.resize(out.len() + width - len, b' ');
            out.extend_from_slice(prefix);
            out.extend_from_slice(body);
        }
    }

    /// printf an integer conversion (d i u x X o c) of a value of `bits` bits.
    pub(crate) fn int(&self, out: &mut Vec<u8>, val: u64, bits: u32, star: Option<i64>) {
        let s = self.with_star(star);
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let u = val & mask;
        if s.conv == b'c' {
            let b = [u as u8];
            s.pad(out, b"", &b, false);
            return;
        }
        let mut buf = [0u8; 24];
        let mut neg = false;
        let mut start = match s.conv {
            b'd' | b'i' => {
                let sv = if bits >= 64 {
                    u as i64
                } else {
                    ((u << (64 - bits)) as i64) >> (64 - bits)
                };
                neg = sv < 0;
                let mut ib = itoa::Buffer::new();
                let d = ib.format(sv.unsigned_abs()).as_bytes();
                buf[24 - d.len()..].copy_from_slice(d);
                24 - d.len()
            }
            b'x' | b'X' => hex_digits(&mut buf, u, s.conv == b'X'),
            b'o' => {
                let (mut v, mut i) = (u, 24);
                loop {
                    i -= 1;
                    buf[i] = b'0' + (v & 7) as u8;
                    v >>= 3;
                    if v == 0 {
                        break i;
                    }
                }
            }
            _ => {
                let mut ib = itoa::Buffer::new();
                let d = ib.format(u).as_bytes();
                buf[24 - d.len()..].copy_from_slice(d);
                24 - d.len()
            }
        };
        if let Some(p) = s.prec {
            if p == 0 && u == 0 {
                start = 24;
            }
            while 24 - start < p.min(23) {
                start -= 1;
                buf[start] = b'0';
            }
        }
        if s.alt && s.conv == b'o' && (start == 24 || buf[start] != b'0') {
            start -= 1;
            buf[start] = b'0';
        }
        let prefix: &[u8] = if neg {
            b"-"
        } else if matches!(s.conv, b'd' | b'i') && s.plus {
            b"+"
        } else if matches!(s.conv, b'd' | b'i') && s.space {
            b" "
        } else if s.alt && u != 0 && s.conv == b'x' {
            b"0x"
        } else if s.alt && u != 0 && s.conv == b'X' {
            b"0X"
        } else {
            b""
        };
        s.pad(out, prefix, &buf[start..], s.prec.is_none());
    }

    /// printf `%s` of `text` (cut at its first NUL).
    pub(crate) fn str(&self, out: &mut Vec<u8>, text: &[u8], star: Option<i64>) {
        let s = self.with_star(star);
        let end = text.iter().position(|&c| c == 0).unwrap_or(text.len());
        let mut t = &text[..end];
        if let Some(p) = s.prec {
            t = &t[..t.len().min(p)];
        }
        s.pad(out, b"", t, false);
    }
}

// ---------------------------------------------------------------------------
// Expressions.

/// What a field is, as libtraceevent's field flags have it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldInfo {
    pub offset: usize,
    pub size: usize,
    pub elem_size: usize,
    pub array: bool,
    pub relative: bool,
}

impl FieldInfo {
    fn of(f: &crate::model::Field) -> FieldInfo {
        let (array, relative, elem_size) = match f.kind {
            FieldKind::Int => (f.type_name.contains('['), false, f.size as usize),
            FieldKind::Array { elem_size, .. } => (true, false, elem_size as usize),
            FieldKind::DataLoc { is_char } => (true, false, elem_of(&f.type_name, is_char)),
            FieldKind::RelLoc { is_char } => (true, true, elem_of(&f.type_name, is_char)),
        };
        FieldInfo {
            offset: f.offset as usize,
            size: f.size as usize,
            elem_size,
            array,
            relative,
        }
    }
}

fn elem_of(type_name: &str, is_char: bool) -> usize {
    if is_char {
        return 1;
    }
    let t = type_name
        .trim_start_matches("__data_loc")
        .trim_start_matches("__rel_loc")
        .split('[')
        .next()
        .unwrap_or("")
        .trim();
    match t {
        "u8" | "s8" | "__u8" | "__s8" | "char" | "unsigned char" | "signed char" | "bool" => 1,
        "u16" | "s16" | "__u16" | "__s16" | "short" | "unsigned short" => 2,
        "u32" | "s32" | "__u32" | "__s32" | "int" | "unsigned int" | "unsigned" => 4,
        _ => 8,
    }
}

/// `{ value, "text" }` pairs of `__print_flags`/`__print_symbolic` (value -1: unknown name).
pub(crate) type Symbols = Box<[(i64, Box<[u8]>)]>;

#[derive(Debug, Clone)]
pub(crate) enum Expr {
    /// A number, or a word or string used as text (`"grow"`).
    Atom {
        num: u64,
        text: Box<[u8]>,
    },
    /// `REC->name`; None when the event has no such field (evaluates to 0).
    Field(Option<FieldInfo>),
    /// `__get_str(name)`.
    Str(Option<FieldInfo>),
    DynArray(Option<FieldInfo>),
    DynArrayLen(Option<FieldInfo>),
    Bitmask(Option<FieldInfo>),
    Cpumask(Option<FieldInfo>),
    Flags {
        val: Box<Expr>,
        delim: Box<[u8]>,
        list: Symbols,
    },
    Symbolic {
        val: Box<Expr>,
        list: Symbols,
    },
    Hex {
        field: Box<Expr>,
        len: Box<Expr>,
        spaced: bool,
    },
    IntArray {
        field: Box<Expr>,
        count: Box<Expr>,
        el_size: Box<Expr>,
    },
    Cast {
        ty: Box<str>,
        item: Box<Expr>,
    },
    Unary(u8, Box<Expr>),
    Binary(Op, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Index(Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Mul,
    Div,
    Rem,
    Add,
    Sub,
    Shl,
    Shr,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    BitAnd,
    Xor,
    BitOr,
    And,
    Or,
}

/// What evaluation needs besides the record.
pub(crate) struct Env<'a> {
    pub big: bool,
    pub long_size: u32,
    pub kallsyms: &'a Kallsyms,
    pub printk: &'a HashMap<u64, String>,
    /// Symbol lookups by address, direct-mapped: a trace repeats a few hundred call sites
    /// and callbacks, and a binary search of kallsyms misses the cache at every step.
    syms: std::cell::RefCell<Vec<SymSlot<'a>>>,
}

/// A cached lookup: the address, and the function containing it (start, name) if any.
type SymSlot<'a> = (u64, Option<(u64, &'a [u8])>);

const SYM_SLOTS: usize = 4096;

impl<'a> Env<'a> {
    pub(crate) fn new(
        big: bool,
        long_size: u32,
        kallsyms: &'a Kallsyms,
        printk: &'a HashMap<u64, String>,
    ) -> Env<'a> {
        Env {
            big,
            long_size,
            kallsyms,
            printk,
            // Address 1 is never looked up (slots start out as a miss for every address).
            syms: std::cell::RefCell::new(vec![(1, None); SYM_SLOTS]),
        }
    }

    /// libtraceevent's `find_func`: the function containing `addr` (start, name).
    #[inline]
    pub(crate) fn function_at(&self, addr: u64) -> Option<(u64, &'a [u8])> {
        let slot = ((addr ^ (addr >> 12)) as usize) % SYM_SLOTS;
        let mut syms = self.syms.borrow_mut();
        if syms[slot].0 == addr && addr != 1 {
            return syms[slot].1;
        }
        let r = self.kallsyms.function_bytes_at(addr);
        syms[slot] = (addr, r);
        r
    }

    #[inline]
    pub(crate) fn num(&self, b: &[u8]) -> u64 {
        match b.len() {
            1 | 2 | 4 | 8 => crate::model::uint(b, self.big),
            _ => 0,
        }
    }
    /// A field's value, 0 when outside the record.
    #[inline]
    pub(crate) fn read(&self, rec: &[u8], offset: usize, size: usize) -> u64 {
        rec.get(offset..offset + size).map_or(0, |b| self.num(b))
    }
    /// libtraceevent's `dynamic_offset_field`: (offset, len) of a dynamic array's data.
    pub(crate) fn dyn_loc(&self, rec: &[u8], f: &FieldInfo) -> (usize, usize) {
        let v = self.read(rec, f.offset, f.size.min(4));
        let mut off = (v & 0xffff) as usize;
        let len = ((v >> 16) & 0xffff) as usize;
        if f.relative {
            off += f.offset + f.size;
        }
        (off, len)
    }
    /// Start of an array field's data in the record.
    fn array_start(&self, rec: &[u8], e: &Expr) -> Option<usize> {
        match e {
            Expr::DynArray(Some(f)) => Some(self.dyn_loc(rec, f).0),
            Expr::Field(Some(f)) => Some(f.offset),
            _ => None,
        }
    }

    /// libtraceevent's `eval_num_arg`.
    pub(crate) fn eval(&self, rec: &[u8], e: &Expr) -> u64 {
        match e {
            Expr::Atom { num, .. } => *num,
            Expr::Field(Some(f)) => self.read(rec, f.offset, f.size),
            Expr::Field(None) | Expr::Str(_) | Expr::Bitmask(_) | Expr::Cpumask(_) => 0,
            Expr::Flags { .. }
            | Expr::Symbolic { .. }
            | Expr::Hex { .. }
            | Expr::IntArray { .. } => 0,
            Expr::DynArrayLen(Some(f)) => self.dyn_loc(rec, f).1 as u64,
            Expr::DynArrayLen(None) => 0,
            // The address of the data: meaningless outside libtraceevent; pmlab gives the offset.
            Expr::DynArray(Some(f)) => self.dyn_loc(rec, f).0 as u64,
            Expr::DynArray(None) => 0,
            Expr::Cast { ty, item } => eval_type(self.eval(rec, item), ty),
            Expr::Unary(op, r) => {
                let r = self.eval(rec, r);
                match op {
                    b'!' => (r == 0) as u64,
                    b'~' => !r,
                    b'-' => 0u64.wrapping_sub(r),
                    _ => r,
                }
            }
            Expr::Cond(c, a, b) => {
                if self.eval(rec, c) != 0 {
                    self.eval(rec, a)
                } else {
                    self.eval(rec, b)
                }
            }
            Expr::Index(l, r) => {
                let idx = self.eval(rec, r) as usize;
                let mut inner = &**l;
                let mut cast = None;
                while let Expr::Cast { ty, item } = inner {
                    cast.get_or_insert(ty);
                    inner = item;
                }
                let (offset, size) = match inner {
                    Expr::DynArray(Some(f)) => (self.dyn_loc(rec, f).0 + idx, f.elem_size.max(1)),
                    Expr::Field(Some(f)) => (f.offset + idx * f.elem_size, f.elem_size),
                    _ => return 0,
                };
                let v = self.read(rec, offset, size);
                match cast {
                    Some(t) => eval_type(v, t.strip_suffix('*').unwrap_or(t).trim_end()),
                    None => v,
                }
            }
            Expr::Binary(op, l, r) => {
                let (l, r) = (self.eval(rec, l), self.eval(rec, r));
                // libtraceevent's eval_num_arg has no '^' (it warns and gives 0).
                if *op == Op::Xor {
                    0
                } else {
                    apply(*op, l, r)
                }
            }
        }
    }

    /// libtraceevent's `print_str_arg`: `e` printed with a `%s` conversion.
    pub(crate) fn print_str(
        &self,
        out: &mut Vec<u8>,
        rec: &[u8],
        spec: &Spec,
        star: Option<i64>,
        e: &Expr,
    ) {
        match e {
            Expr::Atom { text, .. } => spec.str(out, text, star),
            Expr::Field(Some(f)) => {
                if !f.array && f.size == self.long_size as usize {
                    let addr = self.read(rec, f.offset, f.size);
                    match self.printk.get(&addr) {
                        Some(s) => out.extend_from_slice(s.as_bytes()),
                        None => push_hex(out, addr),
                    }
                    return;
                }
                let len = if f.size > 0 {
                    f.size
                } else {
                    rec.len().saturating_sub(f.offset)
                };
                let b = rec
                    .get(f.offset..(f.offset + len).min(rec.len()))
                    .unwrap_or(&[]);
                spec.str(out, b, star);
            }
            Expr::Flags { val, delim, list } => {
                let mut v = self.eval(rec, val);
                let mut printed = false;
                for (fval, s) in list.iter() {
                    if v == 0 && *fval < 0 {
                        spec.str(out, s, star);
                        break;
                    }
                    let fv = *fval as u64;
                    if *fval > 0 && v & fv == fv {
                        if printed {
                            out.extend_from_slice(delim);
                        }
                        spec.str(out, s, star);
                        printed = true;
                        v &= !fv;
                    }
                }
                if v != 0 {
                    if printed {
                        out.extend_from_slice(delim);
                    }
                    out.extend_from_slice(b"0x");
                    push_hex(out, v);
                }
            }
            Expr::Symbolic { val, list } => {
                let v = self.eval(rec, val);
                match list.iter().find(|(f, _)| *f as u64 == v) {
                    Some((_, s)) => spec.str(out, s, star),
                    None => {
                        out.extend_from_slice(b"0x");
                        push_hex(out, v);
                    }
                }
            }
            Expr::Hex { field, len, spaced } => {
                let Some(start) = self.array_start(rec, field) else {
                    return;
                };
                let n = self.eval(rec, len) as usize;
                for i in 0..n {
                    if i > 0 && *spaced {
                        out.push(b' ');
                    }
                    let b = rec.get(start + i).copied().unwrap_or(0);
                    if b < 16 {
                        out.push(b'0');
                    }
                    push_hex(out, b as u64);
                }
            }
            Expr::IntArray {
                field,
                count,
                el_size,
            } => {
                let Some(mut at) = self.array_start(rec, field) else {
                    return;
                };
                let n = self.eval(rec, count) as usize;
                let mut es = self.eval(rec, el_size) as usize;
                // libtraceevent 1.7 (the trace-cmd 3.1 of Debian 12): decimal, space-separated.
                for i in 0..n {
                    if i > 0 {
                        out.push(b' ');
                    }
                    if matches!(es, 1 | 2 | 4 | 8) {
                        push_u64(out, self.read(rec, at, es));
                    } else {
                        out.extend_from_slice(b"BAD SIZE:");
                        push_i64(out, es as i64);
                        out.extend_from_slice(b" 0x");
                        push_hex(out, rec.get(at).copied().unwrap_or(0) as u64);
                        es = 1;
                    }
                    at += es;
                }
            }
            Expr::Str(Some(f)) => {
                let (off, len) = self.dyn_loc(rec, f);
                if len == 0 {
                    return;
                }
                spec.str(out, rec.get(off..).unwrap_or(&[]), star);
            }
            Expr::Bitmask(Some(f)) => {
                let (off, len) = self.dyn_loc(rec, f);
                let data = rec.get(off..off + len).unwrap_or(&[]);
                let start = out.len();
                bitmask(out, data, self.big);
                let s = out.split_off(start);
                spec.str(out, &s, star);
            }
            Expr::Cpumask(Some(f)) => {
                let (off, len) = self.dyn_loc(rec, f);
                let data = rec.get(off..off + len).unwrap_or(&[]);
                let start = out.len();
                cpumask(out, data, self.big);
                let s = out.split_off(start);
                spec.str(out, &s, star);
            }
            Expr::Cond(c, a, b) => {
                let e = if self.eval(rec, c) != 0 { a } else { b };
                self.print_str(out, rec, spec, star, e);
            }
            _ => {}
        }
    }

    /// `%pS`/`%ps`/`%pF`/`%pf`: the symbol (with `+0x` offset for S and F), or the address.
    pub(crate) fn print_function(&self, out: &mut Vec<u8>, addr: u64, offset: bool) {
        match self.function_at(addr) {
            Some((a, name)) => {
                out.extend_from_slice(name);
                if offset {
                    out.extend_from_slice(b"+0x");
                    push_hex(out, addr.wrapping_sub(a));
                }
            }
            None => {
                out.extend_from_slice(b"0x");
                push_hex(out, addr);
            }
        }
    }
}

/// The kernel's bitmask text: hex, a comma every 32 bits.
fn bitmask(out: &mut Vec<u8>, data: &[u8], big: bool) {
    let size = data.len();
    let nr_bits = size * 8;
    let str_size = nr_bits.div_ceil(4) + nr_bits.saturating_sub(1) / 32;
    let mut s = vec![b'0'; str_size];
    let mut len = 0usize;
    let mut i = str_size as isize - 2;
    while i >= 0 {
        let index = if big { size - (len + 1) } else { len };
        let b = data[index];
        let h = b"0123456789abcdef";
        s[i as usize] = h[(b >> 4) as usize];
        s[i as usize + 1] = h[(b & 15) as usize];
        len += 1;
        if len & 3 == 0 && i > 0 {
            i -= 1;
            s[i as usize] = b',';
        }
        i -= 2;
    }
    out.extend_from_slice(&s);
}

/// A CPU list (`0-3,7`) from a cpumask.
fn cpumask(out: &mut Vec<u8>, data: &[u8], big: bool) {
    let size = data.len();
    let bit = |n: usize| {
        let byte = n / 8;
        let index = if big { size - (byte + 1) } else { byte };
        data[index] >> (n % 8) & 1 == 1
    };
    let mut first = true;
    let mut n = 0;
    while n < size * 8 {
        if !bit(n) {
            n += 1;
            continue;
        }
        let start = n;
        while n < size * 8 && bit(n) {
            n += 1;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        push_u64(out, start as u64);
        if n > start + 1 {
            out.push(b'-');
            push_u64(out, (n - 1) as u64);
        }
    }
}

/// libtraceevent's `eval_type_str` (signedness is never applied there either).
pub(crate) fn eval_type(val: u64, ty: &str) -> u64 {
    if ty.len() < 2 || ty.ends_with('*') || ty.starts_with("struct") {
        return val;
    }
    match ty {
        "u8" => val & 0xff,
        "u16" => val & 0xffff,
        "u32" => val & 0xffff_ffff,
        "s8" => val & 0xff,
        "s16" => val & 0xffff,
        "s32" => val & 0xffff_ffff,
        _ => match ty.strip_prefix("unsigned ").unwrap_or(ty) {
            "char" => val & 0xff,
            "short" => val & 0xffff,
            "int" => val & 0xffff_ffff,
            _ => val,
        },
    }
}

// ---------------------------------------------------------------------------
// Tokens and the parser.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Item(String),
    Str(Vec<u8>),
    Op(&'static str),
    Delim(u8),
}

/// Why a print format cannot be evaluated (libtraceevent then prints `[FAILED TO PARSE]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("print format: {0}")]
pub struct ParseError(pub String);

fn err<T>(m: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(m.into()))
}

const OPS: &[&str] = &[
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--", "+", "-", "*", "/", "%", "<",
    ">", "&", "|", "^", "!", "~", "?", ":", "=", ".",
];

fn unescape(b: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            i += 1;
            v.push(match b[i] {
                b'n' => b'\n',
                b't' => b'\t',
                b'r' => b'\r',
                c => c,
            });
        } else {
            v.push(b[i]);
        }
        i += 1;
    }
    v
}

fn tokenize(s: &str) -> Result<Vec<Tok>, ParseError> {
    let b = s.as_bytes();
    let mut t = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            t.push(Tok::Item(s[st..i].to_string()));
        } else if c == b'"' || c == b'\'' {
            let st = i + 1;
            i += 1;
            while i < b.len() && b[i] != c {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            if i >= b.len() {
                return err("unterminated string");
            }
            let text = unescape(&b[st..i]);
            i += 1;
            if c == b'\'' {
                // libtraceevent reads a character constant as it reads a string: an atom of
                // its text, whose value is strtoull's ('1' is 1, 'a' is 0), not the character.
                t.push(Tok::Str(text));
            } else if let Some(Tok::Str(prev)) = t.last_mut() {
                prev.extend_from_slice(&text);
            } else {
                t.push(Tok::Str(text));
            }
        } else if matches!(c, b'(' | b')' | b'[' | b']' | b'{' | b'}' | b',' | b';') {
            t.push(Tok::Delim(c));
            i += 1;
        } else if let Some(op) = OPS.iter().find(|op| b[i..].starts_with(op.as_bytes())) {
            t.push(Tok::Op(op));
            i += op.len();
        } else {
            return err(format!("unexpected character {:?}", c as char));
        }
    }
    Ok(t)
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    fmt: &'a EventFormat,
    long_size: u32,
}

fn binop(op: &str) -> Option<(Op, u8)> {
    // (operator, precedence: higher binds tighter)
    Some(match op {
        "*" => (Op::Mul, 10),
        "/" => (Op::Div, 10),
        "%" => (Op::Rem, 10),
        "+" => (Op::Add, 9),
        "-" => (Op::Sub, 9),
        "<<" => (Op::Shl, 8),
        ">>" => (Op::Shr, 8),
        "<" => (Op::Lt, 7),
        ">" => (Op::Gt, 7),
        "<=" => (Op::Le, 7),
        ">=" => (Op::Ge, 7),
        "==" => (Op::Eq, 6),
        "!=" => (Op::Ne, 6),
        "&" => (Op::BitAnd, 5),
        "^" => (Op::Xor, 4),
        "|" => (Op::BitOr, 3),
        "&&" => (Op::And, 2),
        "||" => (Op::Or, 1),
        _ => return None,
    })
}

/// Calls `f` on every atom of `e` that libtraceevent evaluates as a number (`numeric`: `e`
/// itself is; a `?:`'s branches are what its context makes them).
fn each_numeric_atom(e: &mut Expr, numeric: bool, f: &mut impl FnMut(&mut u64, &[u8])) {
    match e {
        Expr::Atom { num, text } if numeric => f(num, text),
        Expr::Flags { val, .. } | Expr::Symbolic { val, .. } => each_numeric_atom(val, true, f),
        Expr::Cast { item, .. } | Expr::Unary(_, item) => each_numeric_atom(item, true, f),
        Expr::Hex { field, len, .. } => {
            each_numeric_atom(field, true, f);
            each_numeric_atom(len, true, f);
        }
        Expr::IntArray {
            field,
            count,
            el_size,
        } => {
            each_numeric_atom(field, true, f);
            each_numeric_atom(count, true, f);
            each_numeric_atom(el_size, true, f);
        }
        Expr::Binary(_, a, b) | Expr::Index(a, b) => {
            each_numeric_atom(a, true, f);
            each_numeric_atom(b, true, f);
        }
        Expr::Cond(c, a, b) => {
            each_numeric_atom(c, true, f);
            each_numeric_atom(a, numeric, f);
            each_numeric_atom(b, numeric, f);
        }
        _ => {}
    }
}

/// libtraceevent's `get_op_prio` (lower binds tighter).
fn lib_prio(op: Op) -> u8 {
    match op {
        Op::Mul | Op::Div | Op::Rem => 6,
        Op::Add | Op::Sub => 7,
        Op::Shl | Op::Shr => 8,
        Op::Lt | Op::Gt | Op::Le | Op::Ge => 9,
        Op::Eq | Op::Ne => 10,
        Op::BitAnd => 11,
        Op::Xor => 12,
        Op::BitOr => 13,
        Op::And => 14,
        Op::Or => 15,
    }
}

/// The value of a `{ value, "text" }` entry of `__print_flags`/`__print_symbolic`, as
/// libtraceevent computes it: `arg_eval` turns the parsed value into text (a word as it is,
/// a cast dropped, an operation evaluated by `arg_num_eval` and printed with `%lld`), then
/// `eval_flag` reads that text (a leading digit: `strtoull`; else one of the few names it
/// knows; else -1). A name inside an operation is `strtoll` of the name, 0: the kernel's
/// `{ (1 << ES_WRITTEN_B), "W" }` is 1 there. What `arg_eval` cannot evaluate (a field, a
/// ternary, `*`, `/`, `%`, `^`, unary `!`) fails the whole print format, as in libtraceevent.
fn flag_value(e: &Expr) -> Result<i64, ParseError> {
    match e {
        Expr::Atom { text, .. } => Ok(eval_flag(text)),
        Expr::Cast { item, .. } => flag_value(item),
        Expr::Unary(..) | Expr::Binary(..) => match arg_num_eval(e) {
            // "%lld" then eval_flag: a negative number does not start with a digit.
            Some(v) if v >= 0 => Ok(v),
            Some(_) => Ok(-1),
            None => err("a flag value libtraceevent cannot evaluate"),
        },
        _ => err("a flag value that is not a constant"),
    }
}

/// libtraceevent's `eval_flag` of a value's text.
fn eval_flag(text: &[u8]) -> i64 {
    const NAMES: &[(&str, i64)] = &[
        ("HI_SOFTIRQ", 0),
        ("TIMER_SOFTIRQ", 1),
        ("NET_TX_SOFTIRQ", 2),
        ("NET_RX_SOFTIRQ", 3),
        ("BLOCK_SOFTIRQ", 4),
        ("IRQ_POLL_SOFTIRQ", 5),
        ("TASKLET_SOFTIRQ", 6),
        ("SCHED_SOFTIRQ", 7),
        ("HRTIMER_SOFTIRQ", 8),
        ("RCU_SOFTIRQ", 9),
        ("HRTIMER_NORESTART", 0),
        ("HRTIMER_RESTART", 1),
    ];
    if text.first().is_some_and(|c| c.is_ascii_digit()) {
        return c_strtoull(text) as i64;
    }
    NAMES
        .iter()
        .find(|(n, _)| n.as_bytes() == text)
        .map_or(-1, |(_, v)| *v)
}

/// libtraceevent's `arg_num_eval`: signed 64-bit arithmetic over the operators it knows
/// (None for the others, and for anything but numbers, names, casts and operations).
fn arg_num_eval(e: &Expr) -> Option<i64> {
    Some(match e {
        Expr::Atom { text, .. } => c_strtoll(text),
        Expr::Cast { ty, item } => eval_type(arg_num_eval(item)? as u64, ty) as i64,
        Expr::Unary(op, r) => {
            let r = arg_num_eval(r)?;
            match op {
                b'~' => !r,
                b'-' => 0i64.wrapping_sub(r),
                b'+' => r,
                _ => return None, // '!': its empty left operand does not evaluate
            }
        }
        Expr::Binary(op, l, r) => {
            let (l, r) = (arg_num_eval(l)?, arg_num_eval(r)?);
            match op {
                Op::BitOr => l | r,
                Op::Or => (l != 0 || r != 0) as i64,
                Op::BitAnd => l & r,
                Op::And => (l != 0 && r != 0) as i64,
                Op::Lt => (l < r) as i64,
                Op::Le => (l <= r) as i64,
                Op::Gt => (l > r) as i64,
                Op::Ge => (l >= r) as i64,
                Op::Shl => l.wrapping_shl(r as u32),
                Op::Shr => l.wrapping_shr(r as u32),
                Op::Eq => (l == r) as i64,
                Op::Ne => (l != r) as i64,
                Op::Add => l.wrapping_add(r),
                Op::Sub => l.wrapping_sub(r),
                Op::Mul | Op::Div | Op::Rem | Op::Xor => return None,
            }
        }
        _ => return None,
    })
}

/// The digits C's `strtoull`/`strtoll` with base 0 read from the start of `s` (leading
/// blanks, a sign, `0x` or `0` prefixes): (negative, magnitude, overflowed).
fn c_strto(s: &[u8]) -> (bool, u64, bool) {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let neg = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut base = 10;
    if s.get(i) == Some(&b'0') {
        if matches!(s.get(i + 1), Some(b'x' | b'X'))
            && s.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit())
        {
            base = 16;
            i += 2;
        } else {
            base = 8;
        }
    }
    let (mut v, mut over) = (0u64, false);
    while let Some(d) = s.get(i).and_then(|&c| (c as char).to_digit(base)) {
        match v
            .checked_mul(base as u64)
            .and_then(|x| x.checked_add(d as u64))
        {
            Some(x) => v = x,
            None => over = true,
        }
        i += 1;
    }
    (neg, v, over)
}

/// C's `strtoull(s, NULL, 0)`: saturates at `u64::MAX`, a minus sign negates.
fn c_strtoull(s: &[u8]) -> u64 {
    match c_strto(s) {
        (_, _, true) => u64::MAX,
        (true, v, _) => v.wrapping_neg(),
        (false, v, _) => v,
    }
}

/// C's `strtoll(s, NULL, 0)`: saturates at `i64::MIN`/`i64::MAX`.
fn c_strtoll(s: &[u8]) -> i64 {
    match c_strto(s) {
        (false, v, over) if over || v > i64::MAX as u64 => i64::MAX,
        (true, v, over) if over || v > 1u64 << 63 => i64::MIN,
        (true, v, _) => (v as i64).wrapping_neg(),
        (false, v, _) => v as i64,
    }
}

/// A binary operator on two values, as C on unsigned long long.
fn apply(op: Op, l: u64, r: u64) -> u64 {
    match op {
        Op::Mul => l.wrapping_mul(r),
        Op::Div => l.checked_div(r).unwrap_or(0),
        Op::Rem => l.checked_rem(r).unwrap_or(0),
        Op::Add => l.wrapping_add(r),
        Op::Sub => l.wrapping_sub(r),
        Op::Shl => l.wrapping_shl(r as u32),
        Op::Shr => l.wrapping_shr(r as u32),
        Op::Lt => (l < r) as u64,
        Op::Gt => (l > r) as u64,
        Op::Le => (l <= r) as u64,
        Op::Ge => (l >= r) as u64,
        Op::Eq => (l == r) as u64,
        Op::Ne => (l != r) as u64,
        Op::BitAnd => l & r,
        Op::Xor => l ^ r,
        Op::BitOr => l | r,
        Op::And => (l != 0 && r != 0) as u64,
        Op::Or => (l != 0 || r != 0) as u64,
    }
}

fn num(v: u64) -> Expr {
    Expr::Atom {
        num: v,
        text: v.to_string().into_bytes().into(),
    }
}

/// libtraceevent's `consolidate_op_arg`, which it runs on a print argument (and on
/// `__print_hex`'s and `__print_array`'s arguments) whose first operand an operator follows:
/// bottom-up, an operation on two atoms becomes the atom of its value (`strtoull` of both,
/// unsigned 64-bit, `^` and `*` included, printed `%lld`). Its names are thus 0 (`1 << NAME`
/// is 1), where a name left to the evaluation is looked up among the kernel's symbols
/// ([`PrintFormat::resolve_names`]). Division by zero there kills trace-cmd (SIGFPE): pmlab
/// gives 0. Operands of casts and helpers are not consolidated.
fn consolidate(e: &mut Expr) {
    match e {
        Expr::Binary(op, l, r) => {
            consolidate(l);
            consolidate(r);
            if let (Expr::Atom { num: a, .. }, Expr::Atom { num: b, .. }) = (&**l, &**r) {
                let v = apply(*op, *a, *b);
                *e = Expr::Atom {
                    num: v,
                    text: (v as i64).to_string().into_bytes().into(),
                };
            }
        }
        Expr::Unary(_, r) => consolidate(r),
        Expr::Cond(c, a, b) => {
            consolidate(c);
            consolidate(a);
            consolidate(b);
        }
        Expr::Index(a, i) => {
            consolidate(a);
            consolidate(i);
        }
        _ => {}
    }
}

/// Whether libtraceevent consolidates an argument parsed as `e`: an operator follows its
/// first operand (a whole argument in parentheses, a cast or a unary operator first: no).
fn consolidated(e: &Expr) -> bool {
    matches!(e, Expr::Binary(..) | Expr::Cond(..) | Expr::Index(..))
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn expect_delim(&mut self, d: u8) -> Result<(), ParseError> {
        match self.next() {
            Some(Tok::Delim(x)) if x == d => Ok(()),
            other => err(format!("expected {:?}, found {other:?}", d as char)),
        }
    }
    fn field(&self, name: &str) -> Option<FieldInfo> {
        self.fmt.field(name).map(FieldInfo::of)
    }

    /// libtraceevent's `process_cond`: the true branch runs to the `:`, the false branch is
    /// one operand (a whole expression only when it starts with a unary operator), and an
    /// operator after it takes the whole conditional as its left operand. So
    /// `c1 ? "a" : REC->x == 2 ? "b" : "c"` is `((c1 ? "a" : REC->x) == 2) ? "b" : "c"`
    /// there, and trace-cmd prints "c" where C would print "a"; pmlab prints what it prints.
    fn expr(&mut self) -> Result<Expr, ParseError> {
        let mut c = self.binary(0)?;
        while self.peek() == Some(&Tok::Op("?")) {
            self.pos += 1;
            let a = self.expr()?;
            match self.next() {
                Some(Tok::Op(":")) => {}
                other => return err(format!("expected ':', found {other:?}")),
            }
            let b = match self.peek() {
                Some(Tok::Op("!" | "~" | "-" | "+")) => self.expr()?,
                _ => self.unary()?,
            };
            c = self.binary_from(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)), 0)?;
        }
        Ok(c)
    }

    fn binary(&mut self, min: u8) -> Result<Expr, ParseError> {
        let l = self.unary()?;
        self.binary_from(l, min)
    }

    /// Operators of precedence above `min` after the operand `l`.
    fn binary_from(&mut self, mut l: Expr, min: u8) -> Result<Expr, ParseError> {
        loop {
            let Some(Tok::Op(op)) = self.peek() else {
                return Ok(l);
            };
            let Some((op, prec)) = binop(op) else {
                return Ok(l);
            };
            if prec <= min {
                return Ok(l);
            }
            self.pos += 1;
            let start = self.pos;
            // A right operand that starts with a unary `-`/`+` takes every operator after it
            // in libtraceevent (a unary node ranks below them all), and binds looser than
            // `*`, `/`, `%` (prio 7 against 6), so those rotate it: `a * -b` is
            // `(a * 0) - b` there, and trace-cmd prints -b.
            let unary_first = matches!(self.peek(), Some(Tok::Op("-" | "+"))) && lib_prio(op) < 7;
            // A parenthesized `?:` as the right operand rotates at once (`?` ranks below
            // every operator), and what follows applies to the whole conditional:
            // `1 + (c ? a : b) * 4` is `((1 + c) ? a : b) * 4` there.
            let paren_cond = if self.toks.get(start) == Some(&Tok::Delim(b'('))
                && self.cast_at(start).is_none()
            {
                match self.unary()? {
                    Expr::Cond(c, a, b) if self.matching(start) == Some(self.pos - 1) => Some(
                        Expr::Cond(Box::new(Expr::Binary(op, Box::new(l.clone()), c)), a, b),
                    ),
                    _ => {
                        self.pos = start;
                        None
                    }
                }
            } else {
                None
            };
            if let Some(cond) = paren_cond {
                l = cond;
                continue;
            }
            // Operators of equal precedence group to the right in libtraceevent
            // (`a - b - c` is `a - (b - c)` there); pmlab prints what trace-cmd prints.
            let r = if unary_first {
                self.binary(0)?
            } else {
                self.binary(prec - 1)?
            };
            // libtraceevent's process_op rotates a right operand that is an operator of
            // lower precedence as if its parentheses were not there: `a & (b | c)` is
            // evaluated as `(a & b) | c`. trace-cmd prints that, so pmlab does too.
            let paren = self.toks.get(start) == Some(&Tok::Delim(b'('))
                && self.cast_at(start).is_none()
                && self.matching(start) == Some(self.pos - 1);
            l = match r {
                Expr::Binary(rop, rl, rr)
                    if (paren || unary_first) && lib_prio(op) < lib_prio(rop) =>
                {
                    Expr::Binary(rop, Box::new(Expr::Binary(op, Box::new(l), rl)), rr)
                }
                Expr::Unary(u @ (b'-' | b'+'), x) if unary_first => {
                    let sum = if u == b'-' { Op::Sub } else { Op::Add };
                    Expr::Binary(
                        sum,
                        Box::new(Expr::Binary(op, Box::new(l), Box::new(num(0)))),
                        x,
                    )
                }
                r => Expr::Binary(op, Box::new(l), Box::new(r)),
            };
        }
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        match self.peek() {
            Some(Tok::Op(op @ ("!" | "~" | "-" | "+"))) => {
                let c = op.as_bytes()[0];
                self.pos += 1;
                let r = self.unary()?;
                Ok(Expr::Unary(c, Box::new(r)))
            }
            Some(Tok::Delim(b'(')) => {
                if let Some((ty, after)) = self.cast_at(self.pos) {
                    self.pos = after;
                    let item = self.unary()?;
                    return Ok(Expr::Cast {
                        ty: ty.into(),
                        item: Box::new(item),
                    });
                }
                self.postfix()
            }
            _ => self.postfix(),
        }
    }

    /// `(type)` at `at` followed by an operand: the type text and the position after `)`.
    fn cast_at(&self, at: usize) -> Option<(String, usize)> {
        let mut words: Vec<&str> = Vec::new();
        let mut i = at + 1;
        loop {
            match self.toks.get(i)? {
                Tok::Item(w) if w != "REC" && !w.as_bytes()[0].is_ascii_digit() => words.push(w),
                Tok::Op("*") if !words.is_empty() => words.push("*"),
                Tok::Delim(b')') => break,
                _ => return None,
            }
            i += 1;
        }
        if words.is_empty() {
            return None;
        }
        match self.toks.get(i + 1) {
            Some(Tok::Item(_)) | Some(Tok::Str(_)) | Some(Tok::Delim(b'(')) => {}
            _ => return None,
        }
        Some((words.join(" "), i + 1))
    }

    fn postfix(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.primary()?;
        while self.peek() == Some(&Tok::Delim(b'[')) {
            self.pos += 1;
            let idx = self.expr()?;
            self.expect_delim(b']')?;
            e = Expr::Index(Box::new(e), Box::new(idx));
        }
        Ok(e)
    }

    /// The index of the `)` closing the `(` at `at`.
    fn matching(&self, at: usize) -> Option<usize> {
        let mut depth = 0;
        for (k, t) in self.toks.iter().enumerate().skip(at) {
            match t {
                Tok::Delim(b'(') => depth += 1,
                Tok::Delim(b')') => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(k);
                    }
                }
                _ => {}
            }
        }
        None
    }

    fn name_arg(&mut self) -> Result<String, ParseError> {
        // `name` or `REC->name` inside a helper's parentheses.
        match self.next() {
            Some(Tok::Item(w)) if w == "REC" => {
                if self.next() != Some(Tok::Op("->")) {
                    return err("expected -> after REC");
                }
                match self.next() {
                    Some(Tok::Item(n)) => Ok(n),
                    other => err(format!("expected a field name, found {other:?}")),
                }
            }
            Some(Tok::Item(w)) => Ok(w),
            other => err(format!("expected a field name, found {other:?}")),
        }
    }

    fn symbol_list(&mut self) -> Result<Symbols, ParseError> {
        let mut list = Vec::new();
        loop {
            match self.next() {
                Some(Tok::Delim(b')')) => break,
                Some(Tok::Delim(b',')) => continue,
                Some(Tok::Delim(b'{')) => {
                    let v = self.expr()?;
                    self.expect_delim(b',')?;
                    let s = match self.next() {
                        Some(Tok::Str(s)) => s,
                        other => return err(format!("expected a string, found {other:?}")),
                    };
                    self.expect_delim(b'}')?;
                    list.push((flag_value(&v)?, s.into_boxed_slice()));
                }
                other => return err(format!("bad symbol list at {other:?}")),
            }
        }
        Ok(list.into_boxed_slice())
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        match self.next() {
            Some(Tok::Str(s)) => Ok(Expr::Atom {
                num: c_strtoull(&s),
                text: s.into_boxed_slice(),
            }),
            Some(Tok::Delim(b'(')) => {
                let e = self.expr()?;
                self.expect_delim(b')')?;
                Ok(e)
            }
            Some(Tok::Item(w)) if w == "REC" => {
                if self.next() != Some(Tok::Op("->")) {
                    return err("expected -> after REC");
                }
                match self.next() {
                    Some(Tok::Item(n)) => Ok(Expr::Field(self.field(&n))),
                    other => err(format!("expected a field name, found {other:?}")),
                }
            }
            Some(Tok::Item(w)) if self.peek() == Some(&Tok::Delim(b'(')) => {
                self.pos += 1;
                self.call(&w)
            }
            Some(Tok::Item(w)) => Ok(Expr::Atom {
                num: c_strtoull(w.as_bytes()),
                text: w.into_bytes().into_boxed_slice(),
            }),
            other => err(format!("unexpected {other:?}")),
        }
    }

    /// A helper call, after its `(`.
    fn call(&mut self, name: &str) -> Result<Expr, ParseError> {
        let e = match name {
            "__print_flags" | "__print_symbolic" => {
                let val = Box::new(self.expr()?);
                self.expect_delim(b',')?;
                if name == "__print_flags" {
                    let delim = match self.next() {
                        Some(Tok::Str(s)) => s,
                        other => return err(format!("expected a delimiter, found {other:?}")),
                    };
                    self.expect_delim(b',')?;
                    let list = self.symbol_list()?;
                    return Ok(Expr::Flags {
                        val,
                        delim: delim.into_boxed_slice(),
                        list,
                    });
                }
                let list = self.symbol_list()?;
                return Ok(Expr::Symbolic { val, list });
            }
            "__print_hex" | "__print_hex_str" => {
                let field = self.delim_arg()?;
                self.expect_delim(b',')?;
                let len = self.delim_arg()?;
                Expr::Hex {
                    field,
                    len,
                    spaced: name == "__print_hex",
                }
            }
            "__print_array" => {
                let field = self.delim_arg()?;
                self.expect_delim(b',')?;
                let count = self.delim_arg()?;
                self.expect_delim(b',')?;
                let el_size = self.delim_arg()?;
                Expr::IntArray {
                    field,
                    count,
                    el_size,
                }
            }
            "__get_str" | "__get_rel_str" => {
                let n = self.name_arg()?;
                Expr::Str(self.field(&n))
            }
            "__get_bitmask" | "__get_rel_bitmask" => {
                let n = self.name_arg()?;
                Expr::Bitmask(self.field(&n))
            }
            "__get_cpumask" | "__get_rel_cpumask" => {
                let n = self.name_arg()?;
                Expr::Cpumask(self.field(&n))
            }
            "__get_dynamic_array"
            | "__get_rel_dynamic_array"
            | "__get_sockaddr"
            | "__get_sockaddr_rel" => {
                let n = self.name_arg()?;
                Expr::DynArray(self.field(&n))
            }
            "__get_dynamic_array_len" | "__get_rel_dynamic_array_len" => {
                let n = self.name_arg()?;
                Expr::DynArrayLen(self.field(&n))
            }
            "__builtin_expect" => {
                let e = self.expr()?;
                self.expect_delim(b',')?;
                let _ = self.expr()?;
                e
            }
            "__le16_to_cpu" | "__le32_to_cpu" | "__le64_to_cpu" => self.expr()?,
            "sizeof" => {
                let mut words = Vec::new();
                let mut rec_field = None;
                loop {
                    match self.peek() {
                        Some(Tok::Delim(b')')) => break,
                        Some(Tok::Item(w)) if w == "REC" => {
                            self.pos += 1;
                            rec_field = Some(self.name_arg_after_rec()?);
                        }
                        Some(Tok::Item(w)) => {
                            words.push(w.clone());
                            self.pos += 1;
                        }
                        other => return err(format!("sizeof of {other:?}")),
                    }
                }
                let n = if let Some(f) = rec_field {
                    match self.field(&f) {
                        Some(f) if !f.array => f.size as u64,
                        _ => return err("sizeof of an array field"),
                    }
                } else {
                    let w: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
                    match w.as_slice() {
                        ["int"] | ["unsigned"] | ["unsigned", "int"] => 4,
                        ["long", "long"] | ["unsigned", "long", "long"] => 8,
                        ["long"] | ["unsigned", "long"] => u64::from(self.long_size),
                        [t] if matches!(*t, "u64" | "__u64" | "s64" | "__s64") => 8,
                        [t] if matches!(*t, "u32" | "__u32" | "s32" | "__s32") => 4,
                        [t] if matches!(*t, "u16" | "__u16" | "s16" | "__s16") => 2,
                        [t] if matches!(*t, "u8" | "__u8" | "s8" | "__8") => 1,
                        _ => return err(format!("sizeof({})", w.join(" "))),
                    }
                };
                num(n)
            }
            other => return err(format!("unknown function {other}()")),
        };
        self.expect_delim(b')')?;
        Ok(e)
    }

    /// A helper's argument that libtraceevent reads with `alloc_and_process_delim`, which
    /// consolidates it as a print argument ([`consolidate`]).
    fn delim_arg(&mut self) -> Result<Box<Expr>, ParseError> {
        let start = self.pos;
        let mut e = self.expr()?;
        let whole_paren = self.toks.get(start) == Some(&Tok::Delim(b'('))
            && self.cast_at(start).is_none()
            && self.matching(start) == Some(self.pos - 1);
        if consolidated(&e) && !whole_paren {
            consolidate(&mut e);
        }
        Ok(Box::new(e))
    }

    fn name_arg_after_rec(&mut self) -> Result<String, ParseError> {
        if self.next() != Some(Tok::Op("->")) {
            return err("expected -> after REC");
        }
        match self.next() {
            Some(Tok::Item(n)) => Ok(n),
            other => err(format!("expected a field name, found {other:?}")),
        }
    }
}

/// Parse one argument expression of an event's print format.
pub(crate) fn parse_expr(
    text: &str,
    fmt: &EventFormat,
    long_size: u32,
) -> Result<Expr, ParseError> {
    let toks = tokenize(text)?;
    let mut p = Parser {
        toks,
        pos: 0,
        fmt,
        long_size,
    };
    let mut e = p.expr()?;
    if p.pos != p.toks.len() {
        return err(format!("trailing {:?}", p.toks.get(p.pos)));
    }
    let whole_paren = p.toks.first() == Some(&Tok::Delim(b'('))
        && p.cast_at(0).is_none()
        && p.matching(0) == Some(p.toks.len() - 1);
    if consolidated(&e) && !whole_paren {
        consolidate(&mut e);
    }
    Ok(e)
}

// ---------------------------------------------------------------------------
// The format string.

/// A piece of a print format: text, or a conversion and its argument(s).
#[derive(Debug, Clone)]
pub(crate) enum Piece<A> {
    Text(Box<[u8]>),
    /// `%d`-style: value cast to `bits`.
    Int {
        spec: Spec,
        bits: u32,
        arg: A,
        star: Option<A>,
    },
    /// `%p...`: the character after `p` (b'p' when none).
    Pointer {
        kind: u8,
        arg: A,
    },
    Str {
        spec: Spec,
        arg: A,
        star: Option<A>,
    },
}

/// Split a format string into pieces, taking arguments from `args` in order (libtraceevent's
/// `parse_args`). Fails when a conversion has no argument left.
pub(crate) fn parse_pieces<A>(
    fmt: &[u8],
    mut args: impl Iterator<Item = A>,
    long_size: u32,
) -> Result<Vec<Piece<A>>, ParseError> {
    let mut out = Vec::new();
    let mut i = 0;
    let _ = long_size;
    while i < fmt.len() {
        if fmt[i] == b'%' && fmt.get(i + 1) != Some(&b'%') && i + 1 < fmt.len() {
            let start = i;
            i += 1;
            let mut ls: i32 = 0;
            let mut star = None;
            loop {
                let Some(&c) = fmt.get(i) else {
                    return Ok(out);
                };
                match c {
                    b'#' | b'.' | b'0'..=b'9' | b'-' | b'+' | b' ' => {}
                    b'h' => ls -= 1,
                    b'l' => ls += 1,
                    b'L' => ls = 2,
                    b'z' | b'Z' => ls = 1,
                    b'*' => {
                        if star.is_some() {
                            return err("two * in one conversion");
                        }
                        star = Some(
                            args.next()
                                .ok_or_else(|| ParseError("no argument for *".into()))?,
                        );
                    }
                    b'p' => {
                        let ext = pointer_ext_len(&fmt[i + 1..]);
                        let kind = if ext > 0 { fmt[i + 1] } else { b'p' };
                        i += 1 + ext;
                        let arg = args
                            .next()
                            .ok_or_else(|| ParseError("no argument for %p".into()))?;
                        out.push(Piece::Pointer { kind, arg });
                        break;
                    }
                    // libtraceevent 1.7 has no %c: it prints `>c<` (below) and takes no argument.
                    b'd' | b'u' | b'i' | b'x' | b'X' | b'o' => {
                        if !(-2..=2).contains(&ls) {
                            return err(format!("bad length count {ls}"));
                        }
                        i += 1;
                        let arg = args
                            .next()
                            .ok_or_else(|| ParseError("no argument for a number".into()))?;
                        let spec = Spec::parse(&fmt[start..i]);
                        out.push(Piece::Int {
                            spec,
                            bits: spec.bits(),
                            arg,
                            star,
                        });
                        break;
                    }
                    b's' => {
                        i += 1;
                        let arg = args
                            .next()
                            .ok_or_else(|| ParseError("no argument for %s".into()))?;
                        out.push(Piece::Str {
                            spec: Spec::parse(&fmt[start..i]),
                            arg,
                            star,
                        });
                        break;
                    }
                    other => {
                        // libtraceevent keeps an unknown conversion as the text `>c<`.
                        i += 1;
                        out.push(Piece::Text(vec![b'>', other, b'<'].into()));
                        break;
                    }
                }
                i += 1;
            }
        } else {
            let mut text = Vec::new();
            while i < fmt.len() {
                match fmt[i] {
                    b'\\' if i + 1 < fmt.len() => {
                        i += 1;
                        text.push(match fmt[i] {
                            b'n' => b'\n',
                            b't' => b'\t',
                            b'r' => b'\r',
                            c => c,
                        });
                    }
                    b'%' if fmt.get(i + 1) == Some(&b'%') => {
                        text.push(b'%');
                        i += 1;
                    }
                    b'%' if i + 1 < fmt.len() => break,
                    c => text.push(c),
                }
                i += 1;
            }
            out.push(Piece::Text(text.into()));
        }
    }
    Ok(out)
}

/// Characters after `%p` that belong to the conversion (libtraceevent's
/// `parse_arg_format_pointer`).
pub(crate) fn pointer_ext_len(f: &[u8]) -> usize {
    let at = |k: usize| f.get(k).copied().unwrap_or(0);
    match at(0) {
        b'F' | b'S' | b'f' | b's' => 1,
        b'M' | b'm' => 1 + matches!(at(1), b'R' | b'F') as usize,
        b'I' | b'i' => {
            let mut ret = 0;
            let mut index = 2;
            match at(1) {
                b'S' => {
                    while matches!(at(index), b'p' | b'f' | b's') {
                        ret += 1;
                        index += 1;
                    }
                    if matches!(at(index), b'h' | b'n' | b'l' | b'b') {
                        ret += 1;
                        index += 1;
                    }
                    if at(index) == b'c' {
                        ret += 1;
                    }
                    ret += 1;
                }
                b'4' => {
                    if matches!(at(index), b'h' | b'n' | b'l' | b'b') {
                        ret += 1;
                    }
                    ret += 1;
                }
                b'6' => {
                    if at(index) == b'c' {
                        ret += 1;
                    }
                    ret += 1;
                }
                _ => {}
            }
            ret + 1
        }
        b'U' => 1 + matches!(at(1), b'L' | b'l' | b'B' | b'b') as usize,
        b'h' => 1 + matches!(at(1), b'C' | b'D' | b'N') as usize,
        _ => 0,
    }
}

/// Split `"fmt" "more", a, b` into the format text (escapes kept) and the top-level arguments.
pub(crate) fn split_print_fmt(pf: &str) -> Option<(Vec<u8>, Vec<&str>)> {
    let b = pf.as_bytes();
    let mut i = 0;
    let mut fmt = Vec::new();
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() || b[i] != b'"' {
            break;
        }
        i += 1;
        let start = i;
        while i < b.len() && b[i] != b'"' {
            if b[i] == b'\\' {
                i += 1;
            }
            i += 1;
        }
        if i > b.len() {
            return None;
        }
        fmt.extend_from_slice(&b[start..i.min(b.len())]);
        i += 1;
    }
    let rest = pf.get(i.min(pf.len())..)?.trim_start();
    let mut args = Vec::new();
    let Some(rest) = rest.strip_prefix(',') else {
        return Some((fmt, args));
    };
    let rb = rest.as_bytes();
    let (mut depth, mut start, mut j) = (0i32, 0usize, 0usize);
    while j < rb.len() {
        match rb[j] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'"' | b'\'' => {
                let q = rb[j];
                j += 1;
                while j < rb.len() && rb[j] != q {
                    if rb[j] == b'\\' {
                        j += 1;
                    }
                    j += 1;
                }
            }
            b',' if depth == 0 => {
                args.push(rest.get(start..j)?.trim());
                start = j + 1;
            }
            _ => {}
        }
        j += 1;
    }
    let last = rest.get(start..).unwrap_or("").trim();
    if !last.is_empty() {
        args.push(last);
    }
    Some((fmt, args))
}

/// An event's print format, parsed once.
#[derive(Debug, Clone)]
pub(crate) struct PrintFormat {
    pub pieces: Vec<Piece<Expr>>,
}

impl PrintFormat {
    pub(crate) fn parse(f: &EventFormat, long_size: u32) -> Result<PrintFormat, ParseError> {
        let (text, args) =
            split_print_fmt(&f.print_fmt).ok_or_else(|| ParseError("no quoted format".into()))?;
        let exprs = args
            .iter()
            .map(|a| parse_expr(a, f, long_size))
            .collect::<Result<Vec<_>, _>>()?;
        let pieces = parse_pieces(&text, exprs.into_iter(), long_size)?;
        Ok(PrintFormat { pieces })
    }

    /// Gives each name left to the evaluation the address of the kernel symbol so named
    /// (libtraceevent's `test_for_symbol`: an atom whose `strtoull` is 0 and that does not
    /// start with a digit is looked up among the trace's kallsyms, first in address order,
    /// once; 0 when there is none). `"%lx", schedule` prints schedule's address in
    /// trace-cmd; names consolidated away at parse time (`1 << NAME`) and those of flag
    /// tables are not looked up.
    pub(crate) fn resolve_names(&mut self, kallsyms: &Kallsyms) {
        if kallsyms.is_empty() {
            return;
        }
        for p in &mut self.pieces {
            let (arg, numeric, star) = match p {
                Piece::Text(_) => continue,
                Piece::Int { arg, star, .. } => (arg, true, star.as_mut()),
                Piece::Str { arg, star, .. } => (arg, false, star.as_mut()),
                Piece::Pointer { arg, .. } => (arg, true, None),
            };
            let mut resolve = |num: &mut u64, text: &[u8]| {
                if *num == 0 && text.first().is_some_and(|c| !c.is_ascii_digit()) {
                    if let Some((addr, _)) = kallsyms.iter().find(|(_, n)| n.as_bytes() == text) {
                        *num = addr;
                    }
                }
            };
            each_numeric_atom(arg, numeric, &mut resolve);
            if let Some(star) = star {
                each_numeric_atom(star, true, &mut resolve);
            }
        }
    }

    /// Write the event's text (libtraceevent's `print_event_cache`).
    pub(crate) fn write(&self, env: &Env, rec: &[u8], out: &mut Vec<u8>) {
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.extend_from_slice(t),
                Piece::Int {
                    spec,
                    bits,
                    arg,
                    star,
                } => {
                    let star = star.as_ref().map(|s| env.eval(rec, s) as i32 as i64);
                    spec.int(out, env.eval(rec, arg), *bits, star);
                }
                // A print format's `%p` argument is a number, even a string or a name
                // (`(nil)` when 0); only bprint's `%s`-read strings print as themselves.
                Piece::Pointer { kind, arg } => pointer(env, out, *kind, env.eval(rec, arg)),
                Piece::Str { spec, arg, star } => {
                    let star = star.as_ref().map(|s| env.eval(rec, s) as i32 as i64);
                    env.print_str(out, rec, spec, star, arg);
                }
            }
        }
    }
}

/// libtraceevent's `print_arg_pointer` for a value.
pub(crate) fn pointer(env: &Env, out: &mut Vec<u8>, kind: u8, v: u64) {
    match kind {
        b'F' | b'f' | b'S' | b's' => env.print_function(out, v, matches!(kind, b'F' | b'S')),
        _ => {
            if v == 0 {
                out.extend_from_slice(b"(nil)");
            } else {
                out.extend_from_slice(b"0x");
                push_hex(out, v);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// bprint: the format comes from the file's printk formats, the arguments from the record.

/// An argument of a bprint record: a number, or a string at (offset, len) in the record.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BArg {
    Num(u64),
    Str(usize, usize),
}

/// A printk format of bprint records, parsed once: its pieces (argument indexes into the
/// record's [`BArg`]s, 0 being the ip) and how to read the arguments out of `buf`.
#[derive(Debug, Clone)]
pub(crate) struct BprintFormat {
    pub pieces: Vec<Piece<usize>>,
    /// How each argument after the ip is stored in `buf`, in order.
    reads: Vec<BRead>,
}

#[derive(Debug, Clone, Copy)]
enum BRead {
    /// A number of this many bytes, 4-byte aligned.
    Num(usize),
    /// A NUL-terminated string.
    Str,
    /// A `%p<x>` whose first byte decides: a string when printable, else a long.
    PtrOrStr(usize),
}

impl BprintFormat {
    /// `%ps: ` followed by the printk format (libtraceevent's `get_bprint_format`).
    pub(crate) fn parse(printk: &[u8], long_size: u32) -> BprintFormat {
        let mut fmt = b"%ps: ".to_vec();
        fmt.extend_from_slice(printk);
        let reads = bprint_reads(printk, long_size as usize);
        let n = reads.len() + 1;
        let pieces = match parse_pieces(&fmt, 0..n, long_size) {
            Ok(p) => p,
            // Fewer arguments than conversions: print what parses (libtraceevent stops too).
            Err(_) => parse_pieces_lenient(&fmt, n, long_size),
        };
        BprintFormat { pieces, reads }
    }

    /// The arguments of one record (`buf` starts at `buf_off`; the ip is `ip`).
    pub(crate) fn args(&self, env: &Env, rec: &[u8], buf_off: usize, ip: u64, out: &mut Vec<BArg>) {
        out.clear();
        out.push(BArg::Num(ip));
        let mut at = buf_off;
        for r in &self.reads {
            if at >= rec.len() {
                break;
            }
            let r = match *r {
                BRead::PtrOrStr(n) => {
                    let b = rec[at];
                    if (0x20..0x7f).contains(&b) {
                        BRead::Str
                    } else {
                        BRead::Num(n)
                    }
                }
                x => x,
            };
            match r {
                BRead::Num(n) => {
                    at = (at + 3) & !3;
                    out.push(BArg::Num(env.read(rec, at, n)));
                    at += n;
                }
                _ => {
                    let s = &rec[at..];
                    let len = s.iter().position(|&c| c == 0).unwrap_or(s.len());
                    out.push(BArg::Str(at, len));
                    at += len + 1;
                }
            }
        }
    }

    pub(crate) fn write(&self, env: &Env, rec: &[u8], args: &[BArg], out: &mut Vec<u8>) {
        let num = |k: usize| match args.get(k) {
            Some(BArg::Num(v)) => *v,
            _ => 0,
        };
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.extend_from_slice(t),
                Piece::Int {
                    spec,
                    bits,
                    arg,
                    star,
                } => {
                    let star = star.map(|s| num(s) as i32 as i64);
                    spec.int(out, num(*arg), *bits, star);
                }
                Piece::Pointer { kind, arg } => match args.get(*arg) {
                    Some(BArg::Str(o, l)) => out.extend_from_slice(&rec[*o..*o + *l]),
                    Some(BArg::Num(v)) => pointer(env, out, *kind, *v),
                    None => pointer(env, out, *kind, 0),
                },
                Piece::Str { spec, arg, star } => {
                    let star = star.map(|s| num(s) as i32 as i64);
                    match args.get(*arg) {
                        Some(BArg::Str(o, l)) => spec.str(out, &rec[*o..*o + *l], star),
                        // An ATOM printed as a string: its decimal text.
                        Some(BArg::Num(v)) => {
                            let mut ib = itoa::Buffer::new();
                            spec.str(out, ib.format(*v as i64).as_bytes(), star)
                        }
                        None => {}
                    }
                }
            }
        }
    }
}

fn parse_pieces_lenient(fmt: &[u8], n: usize, long_size: u32) -> Vec<Piece<usize>> {
    // Find the longest prefix of the format that parses with n arguments.
    let mut end = fmt.len();
    while end > 0 {
        end -= 1;
        if let Ok(p) = parse_pieces(&fmt[..end], 0..n, long_size) {
            return p;
        }
    }
    Vec::new()
}

/// How libtraceevent's `make_bprint_args` reads each argument of a printk format.
fn bprint_reads(f: &[u8], long_size: usize) -> Vec<BRead> {
    let mut v = Vec::new();
    let mut i = 0;
    while i < f.len() {
        if f[i] != b'%' {
            i += 1;
            continue;
        }
        let mut ls = 0;
        loop {
            i += 1;
            let Some(&c) = f.get(i) else {
                return v;
            };
            match c {
                b'%' => break,
                b'l' => ls += 1,
                b'L' => ls = 2,
                // libtraceevent 1.7 stops at a '+' flag (later versions skip it).
                b'0'..=b'9' | b'.' | b'#' => {}
                b'z' | b'Z' => ls = 1,
                b'p' => {
                    let next = f.get(i + 1).copied().unwrap_or(0);
                    if next.is_ascii_alphanumeric() {
                        i += 1;
                        let special = match next {
                            b's' | b'S' | b'x' => false,
                            b'f' | b'F' => f.get(i + 1) == Some(&b'w'),
                            _ => true,
                        };
                        if special {
                            v.push(BRead::PtrOrStr(long_size));
                            break;
                        }
                    }
                    v.push(BRead::Num(long_size));
                    break;
                }
                b'd' | b'u' | b'i' | b'x' | b'X' | b'o' => {
                    v.push(BRead::Num(match ls {
                        0 => 4,
                        1 => long_size,
                        2 => 8,
                        n => n,
                    }));
                    break;
                }
                b'*' => v.push(BRead::Num(4)),
                b's' => {
                    v.push(BRead::Str);
                    break;
                }
                _ => break,
            }
        }
        i += 1;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(f: &str, v: u64, bits: u32) -> String {
        let mut o = Vec::new();
        Spec::parse(f.as_bytes()).int(&mut o, v, bits, None);
        String::from_utf8(o).unwrap()
    }

    #[test]
    fn printf_integers_as_glibc() {
        assert_eq!(int("%d", 0xffff_ffff, 32), "-1");
        assert_eq!(int("%u", 0xffff_ffff, 32), "4294967295");
        assert_eq!(int("%03d", 7, 32), "007");
        assert_eq!(int("%04u", 1, 32), "0001");
        assert_eq!(int("%3d", 5, 32), "  5");
        assert_eq!(int("%-4d", 5, 32), "5   ");
        assert_eq!(int("%#x", 255, 32), "0xff");
        assert_eq!(int("%#x", 0, 32), "0");
        assert_eq!(int("%08x", 0xab, 32), "000000ab");
        assert_eq!(int("%llx", u64::MAX, 64), "ffffffffffffffff");
        assert_eq!(int("%.3d", 5, 32), "005");
        assert_eq!(int("%+d", 5, 32), "+5");
        assert_eq!(int("%hhu", 0x1ff, 8), "255");
    }

    #[test]
    fn strings_with_width_and_precision() {
        let mut o = Vec::new();
        Spec::parse(b"%-5s").str(&mut o, b"ab", None);
        Spec::parse(b"%.2s").str(&mut o, b"abcdef\0x", None);
        Spec::parse(b"%*s").str(&mut o, b"z", Some(3));
        assert_eq!(o, b"ab   ab  z");
    }

    fn fmt_with(fields: &[(&str, &str, u32, u32)], pf: &str) -> EventFormat {
        EventFormat {
            id: 1,
            system: "s".into(),
            name: "e".into(),
            fields: fields
                .iter()
                .map(|(n, t, o, s)| crate::model::Field {
                    name: n.to_string(),
                    type_name: t.to_string(),
                    offset: *o,
                    size: *s,
                    signed: false,
                    kind: FieldKind::Int,
                    common: false,
                })
                .collect(),
            print_fmt: pf.into(),
        }
    }

    fn render(f: &EventFormat, rec: &[u8]) -> String {
        let k = Kallsyms::default();
        let p = HashMap::new();
        let env = Env::new(false, 8, &k, &p);
        let pf = PrintFormat::parse(f, 8).unwrap();
        let mut o = Vec::new();
        pf.write(&env, rec, &mut o);
        String::from_utf8(o).unwrap()
    }

    #[test]
    fn flags_symbols_ternaries_and_arithmetic() {
        let f = fmt_with(
            &[("state", "long", 0, 8), ("grow", "int", 8, 4)],
            r#""s=%s%s g=%s x=%d", REC->state & (1024-1) ? __print_flags(REC->state & (1024-1), "|", { 1, "S"} , { 2, "D" }) : "R", REC->state & 1024 ? "+" : "", __print_symbolic(REC->grow, { 0, "zero" }, { RCU_SOFTIRQ, "nine" }), (REC->grow + 1) * 2 - 1"#,
        );
        let mut rec = vec![0u8; 12];
        rec[0] = 3;
        rec[1] = 4; // 1024
        rec[8] = 9;
        assert_eq!(render(&f, &rec), "s=S|D+ g=nine x=19");
        rec[0] = 0;
        rec[1] = 0;
        rec[8] = 7;
        assert_eq!(render(&f, &rec), "s=R g=0x7 x=15");
    }

    /// Flag values as libtraceevent evaluates them: names inside operations are 0, a name
    /// alone is -1 (unless it knows it), a cast alone is dropped, a negative result is -1.
    #[test]
    fn flag_values_follow_libtraceevents_evaluation() {
        let f = fmt_with(
            &[("s", "unsigned int", 0, 4)],
            r#""%s|%s|%s", __print_flags(REC->s, "", { (1 << ES_WRITTEN_B), "W" }, { (1 << ES_HOLE_B), "H" }, { 0x20 | (FOO + 2), "F" }), __print_flags(REC->s, ",", { UNKNOWN_NAME, "none" }, { (u8)0x102, "T" }, { ~0x3, "N" }, { 0x7fffffffffffffffffff >> 60, "B" }), __print_symbolic(REC->s, { -2, "neg" }, { TIMER_SOFTIRQ, "timer" }, { 1 - 2 + 4, "three" })"#,
        );
        let out = |v: u32| render(&f, &v.to_le_bytes());
        // W is 1, H too (already cleared), F is 0x22; the rest is hex
        assert_eq!(out(0x11), "W0x10|0x11|0x11");
        assert_eq!(out(1), "W|0x1|timer");
        assert_eq!(out(0x23), "WF|0x23|0x23");
        // a name alone is -1: printed for 0 and nothing else; (u8)0x102 is 0x102 here;
        // ~0x3 is negative: -1 once printed as text, never matched; a saturated strtoll
        assert_eq!(out(0), "|none|0x0");
        // once T has cleared every bit, the -1 of ~0x3 prints
        assert_eq!(out(0x102), "0x102|TN|0x102");
        assert_eq!(out(0x7), "W0x6|B|0x7");
        // `1 - 2 + 4` groups to the right there: 1 - (2 + 4) = -5, never matched
        assert_eq!(out(3), "W0x2|0x3|0x3");
    }

    /// Names and constants outside flag tables, as trace-cmd prints them: a name left to
    /// the evaluation is its kernel symbol's address (else 0); one an operation on two atoms
    /// consolidates at parse time is 0 (`1 + schedule` is 1, unless the whole argument is in
    /// parentheses); character constants are strtoull of their text; `%p` of a name or a
    /// string is a number.
    #[test]
    fn names_and_constants_follow_libtraceevents_evaluation() {
        let k = Kallsyms::from_pairs([(0x1000, "schedule"), (0x2000, "jiffies")]);
        let p = HashMap::new();
        let env = Env::new(false, 8, &k, &p);
        let f = fmt_with(
            &[("x", "unsigned int", 0, 4)],
            r#""%llx %llx %llx %llx %d %d %d %d %d %p %p %d %s", schedule, (schedule + 4), (1 + schedule) + 0, -jiffies, '1', 'a', 3 ^ 5, REC->x ^ 5, "12", UNDEF, "str", REC->x == 'a', REC->x ? NAME : "lit""#,
        );
        let mut pf = PrintFormat::parse(&f, 8).unwrap();
        pf.resolve_names(&k);
        let mut o = Vec::new();
        pf.write(&env, &97u32.to_le_bytes(), &mut o);
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "1000 1004 1 ffffffffffffe000 1 0 6 0 12 (nil) (nil) 0 NAME"
        );
    }

    /// libtraceevent's grouping where it is not C's: a `?:`'s false branch is one operand
    /// and what follows applies to the whole conditional; a parenthesized `?:` on the right
    /// rotates; `* -x` is `(_ * 0) - x`. Values as trace-cmd 3.1.6 printed them.
    #[test]
    fn conditionals_and_unary_operands_group_as_in_libtraceevent() {
        let f = fmt_with(
            &[("x", "int", 0, 4)],
            r#""%d %d %d %d %d %d", REC->x == 1 ? 10 : REC->x == 2 ? 20 : 30, REC->x ? 1 : 0 ? 7 : 8, 1 + (REC->x ? 2 : 3) * 4, REC->x * -1, REC->x * -REC->x + 3, REC->x ? 5 : -REC->x + 100"#,
        );
        let out = |v: u32| render(&f, &v.to_le_bytes());
        assert_eq!(out(1), "30 7 8 -1 2 5");
        assert_eq!(out(2), "20 7 8 -1 -1 5");
        assert_eq!(out(0), "30 8 8 -1 3 100");
    }

    /// What `arg_num_eval` cannot evaluate fails the whole format, as in libtraceevent.
    #[test]
    fn flag_values_libtraceevent_cannot_evaluate_fail_the_format() {
        for v in ["2 * 3", "REC->s", "!1", "4 / 2", "1 ^ 2", "REC->s ? 1 : 2"] {
            let f = fmt_with(
                &[("s", "unsigned int", 0, 4)],
                &format!(r#""%s", __print_flags(REC->s, "", {{ {v}, "X" }})"#),
            );
            assert!(PrintFormat::parse(&f, 8).is_err(), "{v} accepted");
        }
    }

    #[test]
    fn c_strtoll_and_strtoull() {
        assert_eq!(c_strtoll(b"ES_WRITTEN_B"), 0);
        assert_eq!(c_strtoll(b"0x1fUL"), 31);
        assert_eq!(c_strtoll(b"017"), 15);
        assert_eq!(c_strtoll(b"-12"), -12);
        assert_eq!(c_strtoll(b"0xffffffffffffffff"), i64::MAX);
        assert_eq!(c_strtoll(b"-0x8000000000000000"), i64::MIN);
        assert_eq!(c_strtoll(b"-99999999999999999999"), i64::MIN);
        assert_eq!(c_strtoll(b"0x"), 0);
        assert_eq!(c_strtoull(b"0xffffffffffffffff"), u64::MAX);
        assert_eq!(c_strtoull(b"99999999999999999999"), u64::MAX);
        assert_eq!(c_strtoull(b"-1"), u64::MAX);
    }

    #[test]
    fn casts_bind_to_their_operand() {
        let f = fmt_with(
            &[("a", "unsigned long", 0, 8), ("b", "unsigned long", 8, 8)],
            r#""t=%ld u=%u", (long)REC->a - REC->b, (u8)REC->a"#,
        );
        let mut rec = vec![0u8; 16];
        rec[0] = 0x05;
        rec[1] = 0x01;
        rec[8] = 0x10;
        assert_eq!(render(&f, &rec), "t=245 u=5");
    }

    #[test]
    fn libtraceevent_quirks_are_kept() {
        // `a & (b | c)` is `(a & b) | c` in libtraceevent (timer_start's flags show it).
        let f = fmt_with(
            &[("flags", "unsigned int", 0, 4)],
            r#""%s", __print_flags(REC->flags & (0x04 | 0x08 | 0x10), "|", { 0x04, "M" }, { 0x08, "D" }, { 0x10, "P" })"#,
        );
        assert_eq!(render(&f, &[0, 0, 0, 0]), "D|P");
        assert_eq!(render(&f, &[4, 0, 0, 0]), "M|D|P");
        // equal precedence groups to the right: 10 - 3 - 2 = 10 - (3 - 2)
        let f = fmt_with(&[("a", "int", 0, 4)], r#""%d", REC->a - 3 - 2"#);
        assert_eq!(render(&f, &[10, 0, 0, 0]), "9");
        // no %c in libtraceevent 1.7: the text `>c<`, no argument taken
        let f = fmt_with(&[("a", "int", 0, 4)], r#""%c%d", REC->a"#);
        assert_eq!(render(&f, &[65, 0, 0, 0]), ">c<65");
    }

    #[test]
    fn unknown_function_fails_the_parse() {
        let f = fmt_with(&[("a", "int", 0, 4)], r#""%d", foo(REC->a)"#);
        assert!(PrintFormat::parse(&f, 8).is_err());
        let f = fmt_with(&[("a", "int", 0, 4)], r#""%d %d", REC->a"#);
        assert!(PrintFormat::parse(&f, 8).is_err());
    }

    #[test]
    fn bprint_reads_follow_the_format() {
        let r = bprint_reads(b"a=%d b=%lu s=%s p=%pS c=%llx", 8);
        assert_eq!(r.len(), 5);
        assert!(matches!(r[0], BRead::Num(4)));
        assert!(matches!(r[1], BRead::Num(8)));
        assert!(matches!(r[2], BRead::Str));
        assert!(matches!(r[3], BRead::Num(8)));
        assert!(matches!(r[4], BRead::Num(8)));
    }
}
