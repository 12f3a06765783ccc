//! Kernel symbols from a trace's kallsyms section, sorted by address, with the names left in
//! the section's own text (in the mapped file where it can be): one allocation for 100k+
//! symbols instead of one each.

use std::ops::Range;
use std::sync::Arc;

/// Where the names are.
#[derive(Debug, Clone)]
enum Text {
    Owned(String),
    /// A part of a mapped trace file, found UTF-8 when indexed.
    Mapped(Arc<memmap2::Mmap>, Range<usize>),
}

impl Default for Text {
    fn default() -> Text {
        Text::Owned(String::new())
    }
}

/// A trace's kernel symbols.
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    text: Text,
    /// (address, start, length) of each name in `text`, sorted by address.
    entries: Vec<(u64, u32, u32)>,
}

impl Kallsyms {
    /// `/proc/kallsyms` text, keeping what libtraceevent keeps (no `$` names, no absolute
    /// symbols). Equal addresses end in reverse file order, as libtraceevent leaves them (it
    /// prepends each symbol to a list, then sorts).
    pub fn parse(text: String) -> Kallsyms {
        let entries = index(&text);
        Kallsyms {
            text: Text::Owned(text),
            entries,
        }
    }

    /// Like [`Kallsyms::parse`] for the text at `range` of a mapped trace, the names left in
    /// the file. Once indexed, the text's pages are given back to the kernel: the few names
    /// an analysis looks up fault back in from the page cache, and the megabytes nobody reads
    /// again stop counting in this process's memory (a kernel's 5 MB, more than the event
    /// data of a 100k-event trace).
    pub fn parse_mapped(map: Arc<memmap2::Mmap>, range: Range<usize>) -> Kallsyms {
        let Some(bytes) = map.get(range.clone()) else {
            return Kallsyms::default();
        };
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Kallsyms::parse(String::from_utf8_lossy(bytes).into_owned());
        };
        let entries = index(text);
        // Whole pages inside the range only: the pages at its ends hold other sections too.
        let page = 4096;
        let (start, end) = (range.start.div_ceil(page) * page, range.end / page * page);
        if end > start {
            // SAFETY: the map is read-only and shared with the file: dropped pages read the
            // same bytes back from the file when touched again.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
        Kallsyms {
            text: Text::Mapped(map, range),
            entries,
        }
    }

    /// Symbols from (address, name) pairs, sorted by address (equal addresses keep their
    /// order).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (u64, &'a str)>) -> Kallsyms {
        let mut text = String::new();
        let mut entries = Vec::new();
        for (addr, name) in pairs {
            entries.push((addr, text.len() as u32, name.len() as u32));
            text.push_str(name);
        }
        sort(&mut entries, false);
        Kallsyms {
            text: Text::Owned(text),
            entries,
        }
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// No symbols (the trace has no kallsyms).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `k`-th symbol in address order.
    pub fn get(&self, k: usize) -> (u64, &str) {
        let (addr, start, len) = self.entries[k];
        let at = start as usize..(start + len) as usize;
        let name = match &self.text {
            Text::Owned(t) => &t[at],
            // UTF-8 when indexed; checked again, as a mapped file can change underneath.
            Text::Mapped(..) => std::str::from_utf8(self.name_bytes(k)).unwrap_or("?"),
        };
        (addr, name)
    }

    /// The `k`-th symbol's name as bytes, unchecked (the renderer copies them out).
    fn name_bytes(&self, k: usize) -> &[u8] {
        let (_, start, len) = self.entries[k];
        let (start, len) = (start as usize, len as usize);
        match &self.text {
            Text::Owned(t) => &t.as_bytes()[start..start + len],
            Text::Mapped(m, r) => m
                .get(r.start + start..r.start + start + len)
                .unwrap_or(b"?"),
        }
    }

    /// All symbols in address order: (address, name).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        (0..self.len()).map(|k| self.get(k))
    }

    /// The symbol at or below `addr` (the last of several at one address).
    pub fn containing(&self, addr: u64) -> Option<&str> {
        let idx = self.entries.partition_point(|e| e.0 <= addr);
        idx.checked_sub(1).map(|k| self.get(k).1)
    }

    /// libtraceevent's function lookup: glibc bsearch over the sorted map where entry `k`
    /// covers [addr_k, addr_{k+1}), and the last entry only its exact address.
    pub fn function_at(&self, addr: u64) -> Option<(u64, &str)> {
        self.function_index(addr).map(|k| self.get(k))
    }

    /// [`Kallsyms::function_at`] with the name as bytes, for text output.
    pub fn function_bytes_at(&self, addr: u64) -> Option<(u64, &[u8])> {
        self.function_index(addr)
            .map(|k| (self.entries[k].0, self.name_bytes(k)))
    }

    fn function_index(&self, addr: u64) -> Option<usize> {
        let v = &self.entries;
        let (mut l, mut u) = (0usize, v.len());
        while l < u {
            let idx = (l + u) / 2;
            let a = v[idx].0;
            let next = v.get(idx + 1).map_or(0, |e| e.0);
            if addr == a || (addr > a && addr < next) {
                return Some(idx);
            }
            if addr < a {
                u = idx;
            } else {
                l = idx + 1;
            }
        }
        None
    }
}

/// (address, name start, name length) of each symbol of `text` that libtraceevent keeps,
/// sorted as [`Kallsyms::parse`] says.
fn index(text: &str) -> Vec<(u64, u32, u32)> {
    let b = text.as_bytes();
    let mut entries = Vec::with_capacity(b.len() / 40);
    let mut pos = 0;
    while pos < b.len() {
        let (sym, read) = line_symbol(&text[pos..]);
        if let Some((addr, start, len)) = sym {
            if let (Ok(s), Ok(l)) = (u32::try_from(pos + start), u32::try_from(len)) {
                entries.push((addr, s, l));
            }
        }
        let from = pos + read;
        pos = b[from..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |e| from + e + 1);
    }
    sort(&mut entries, true);
    entries
}

/// A stable sort by address (the file is nearly sorted already), then, if `reverse_ties`,
/// each run of equal addresses reversed.
fn sort(v: &mut [(u64, u32, u32)], reverse_ties: bool) {
    v.sort_by_key(|e| e.0);
    let mut i = 0;
    while reverse_ties && i < v.len() {
        let j = i + v[i..].iter().take_while(|e| e.0 == v[i].0).count();
        v[i..j].reverse();
        i = j;
    }
}

/// The symbol on the line `text` begins with (`ADDR TYPE NAME[\tMODULE]`) as (address, name
/// start, name length), unless libtraceevent drops it; and how many bytes of the line were read.
fn line_symbol(text: &str) -> (Option<(u64, usize, usize)>, usize) {
    let b = text.as_bytes();
    // The kernel's own layout first: hex, a space, the type, a space, the name up to a tab.
    let mut addr = 0u64;
    let mut i = 0;
    while i < b.len() && i <= 16 {
        let Some(d) = (b[i] as char).to_digit(16) else {
            break;
        };
        addr = (addr << 4) | u64::from(d);
        i += 1;
    }
    if (1..=16).contains(&i)
        && b.len() > i + 3
        && b[i] == b' '
        && b[i + 2] == b' '
        && !b[i + 1].is_ascii_whitespace()
    {
        let (kind, rest) = (b[i + 1], &b[i + 3..]);
        let n = rest
            .iter()
            .position(|c| c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        if n > 0 && rest.get(n).is_none_or(|&c| c == b'\t' || c == b'\n') {
            let kept = rest[0] != b'$' && kind != b'A' && kind != b'a';
            return (kept.then_some((addr, i + 3, n)), i + 3 + n);
        }
    }
    // Any other spacing: whitespace-separated fields.
    let line = text.split('\n').next().unwrap_or("");
    let mut it = line.split_ascii_whitespace();
    let (Some(a), Some(t), Some(name)) = (it.next(), it.next(), it.next()) else {
        return (None, 0);
    };
    let Ok(addr) = u64::from_str_radix(a, 16) else {
        return (None, 0);
    };
    if name.starts_with('$') || t == "A" || t == "a" {
        return (None, 0);
    }
    let start = name.as_ptr() as usize - text.as_ptr() as usize;
    (Some((addr, start, name.len())), 0)
}

#[cfg(test)]
mod tests {
    use super::Kallsyms;

    /// The rule in its plainest form: whitespace-separated fields, reversed, stably sorted.
    fn reference(text: &str) -> Vec<(u64, String)> {
        let mut v = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            let (Some(a), Some(t), Some(name)) = (f.first(), f.get(1), f.get(2)) else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(a, 16) else {
                continue;
            };
            if !name.starts_with('$') && *t != "A" && *t != "a" {
                v.push((addr, name.to_string()));
            }
        }
        v.reverse();
        v.sort_by_key(|e| e.0);
        v
    }

    #[test]
    fn parse_matches_the_plain_rule() {
        let text = "ffffffff81000000 T _stext\n\
                    ffffffff81000010 t same_a\n\
                    ffffffff81000010 t same_b\tsome_mod\n\
                    ffffffff81000010 T same_c\n\
                    ffffffff80000000 t earlier\t[kvm]\n\
                    0000000000000000 A fixed_percpu_data\n\
                    ffffffff81000020 a abs_local\n\
                    ffffffff81000030 t $x\n\
                    \n\
                    zz\n\
                    qq T not_hex\n\
                    +1f T plus\n\
                    -1 T minus\n\
                    00000000000000000001 T twenty_digits\n\
                    fffffffffffffffff T seventeen_digits\n\
                    2 T  two_spaces  \n\
                    3 tt long_type\n\
                    4 t cr_end\r\n\
                    5\tt\ttabs\n\
                    6 t name with spaces\n\
                    7 t\n\
                    8 t last_without_newline";
        let k = Kallsyms::parse(text.to_string());
        let got: Vec<(u64, String)> = k.iter().map(|(a, n)| (a, n.to_string())).collect();
        assert_eq!(got, reference(text));
        // Equal addresses in reverse file order.
        let same: Vec<&str> = k
            .iter()
            .filter(|e| e.0 == 0xffffffff81000010)
            .map(|e| e.1)
            .collect();
        assert_eq!(same, ["same_c", "same_b", "same_a"]);
        assert_eq!(k.get(0).1, "twenty_digits");
    }

    #[test]
    fn symbols_left_in_a_mapped_file_equal_parsed_ones() {
        use std::io::Write;
        // Other bytes around the section, and a text of several pages (some dropped).
        let mut text = String::new();
        for k in 0..3000u64 {
            text.push_str(&format!(
                "{:016x} t sym_{k}\n",
                0xffffffff81000000 + 16 * (k % 1000)
            ));
        }
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"before").unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f.write_all(b"after").unwrap();
        // SAFETY: a private temporary file nobody else writes.
        let map = std::sync::Arc::new(unsafe { memmap2::Mmap::map(f.as_file()) }.unwrap());
        let mapped = Kallsyms::parse_mapped(map.clone(), 6..6 + text.len());
        let parsed = Kallsyms::parse(text.clone());
        assert_eq!(mapped.len(), 3000);
        assert!(mapped.iter().eq(parsed.iter()));
        assert_eq!(mapped.containing(0xffffffff81000011), Some("sym_1"));
        assert_eq!(parsed.containing(0xffffffff81000011), Some("sym_1"));
        assert_eq!(&map[..6], b"before");
        // Not UTF-8: read as the owned text would be.
        let mut g = tempfile::NamedTempFile::new().unwrap();
        g.write_all(b"0000000000000010 t caf\xe9\n").unwrap();
        // SAFETY: as above.
        let map = std::sync::Arc::new(unsafe { memmap2::Mmap::map(g.as_file()) }.unwrap());
        let k = Kallsyms::parse_mapped(map.clone(), 0..map.len());
        assert_eq!(k.get(0), (0x10, "caf\u{fffd}"));
        // A range past the file: no symbols, no panic.
        assert!(Kallsyms::parse_mapped(map.clone(), 0..map.len() + 1).is_empty());
    }

    #[test]
    fn lookups() {
        let k = Kallsyms::from_pairs([(0x300, "c"), (0x100, "a"), (0x200, "b")]);
        assert_eq!(k.containing(0x0ff), None);
        assert_eq!(k.containing(0x100), Some("a"));
        assert_eq!(k.containing(0x2ff), Some("b"));
        assert_eq!(k.containing(0x9999), Some("c"));
        assert_eq!(k.function_at(0x1ff), Some((0x100, "a")));
        assert_eq!(k.function_at(0x300), Some((0x300, "c")));
        // The last symbol covers its own address only, as in libtraceevent.
        assert_eq!(k.function_at(0x301), None);
        assert_eq!(k.function_at(0x0ff), None);
        assert_eq!(k.function_bytes_at(0x1ff), Some((0x100, &b"a"[..])));
        assert_eq!(k.function_bytes_at(0x301), None);
    }
}
