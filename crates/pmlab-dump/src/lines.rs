//! The one output path of the text views (formatted, raw, JSON): events formatted a block
//! at a time, on two threads where the machine has two cores, and written in order.

use std::io::Write;
use std::ops::Range;
use std::sync::Mutex;

/// Events formatted by one thread before its buffer goes to the writer, in order.
pub(crate) const BLOCK: usize = 32 * 1024;
/// Output is handed to the writer in pieces of about this size (one thread).
const FLUSH_AT: usize = 1 << 20;

/// A text view: the lines of a range of events.
pub(crate) trait Lines: Sync {
    /// What a line can change for the lines after it (libtraceevent's once-per-trace
    /// switches). It only ever grows: [`Lines::merge`] of two carries is their union.
    type Carry: Clone + PartialEq + Send + Default;
    /// Append the lines of events `range`, starting from `carry` and leaving it as the
    /// next event finds it.
    fn lines(&self, range: Range<usize>, carry: &mut Self::Carry, out: &mut Vec<u8>);
    /// Add to `a` what `b` has.
    fn merge(a: &mut Self::Carry, b: &Self::Carry);
    /// False when blocks cannot be formatted apart at all (state the carry does not hold).
    fn parallel(&self) -> bool {
        true
    }
}

/// Write `head`, then the lines of events `0..n` of `view`, in order. With two cores a
/// helper thread formats every other block from its best guess of the carry (its own
/// last one with what the writer has published); a block whose guess was not the carry
/// it really starts from is formatted again by the writer, so the bytes are those of one
/// pass. A carry grows a few times per trace, so that almost never happens.
pub(crate) fn write<W: Write, L: Lines>(
    view: &L,
    n: usize,
    head: &[u8],
    w: &mut W,
) -> std::io::Result<()> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |c| c.get())
        .min(2);
    let range = |b: usize| b * BLOCK..((b + 1) * BLOCK).min(n);
    if threads < 2 || n < 4 * BLOCK || !view.parallel() {
        let mut out = Vec::with_capacity(FLUSH_AT + (64 << 10));
        out.extend_from_slice(head);
        let mut carry = L::Carry::default();
        for b in 0..n.div_ceil(BLOCK) {
            view.lines(range(b), &mut carry, &mut out);
            if out.len() >= FLUSH_AT {
                w.write_all(&out)?;
                out.clear();
            }
        }
        w.write_all(&out)?;
        return w.flush();
    }
    w.write_all(head)?;
    let blocks = n.div_ceil(BLOCK);
    type Formatted<C> = (Vec<u8>, C, C);
    let (to_main, from_helper) = std::sync::mpsc::sync_channel::<Formatted<L::Carry>>(2);
    let (to_helper, spare) = std::sync::mpsc::channel::<Vec<u8>>();
    let published = Mutex::new(L::Carry::default());
    std::thread::scope(|sc| {
        // Owned here: when a write fails and this returns, the helper's next send fails and
        // it stops, instead of the scope waiting on it forever (`pmlab dump | head`).
        let from_helper = from_helper;
        let published = &published;
        sc.spawn(move || {
            let mut carry = L::Carry::default();
            for b in (1..blocks).step_by(2) {
                let mut buf = spare.try_recv().unwrap_or_default();
                buf.clear();
                if let Ok(p) = published.lock() {
                    L::merge(&mut carry, &p);
                }
                let start = carry.clone();
                view.lines(range(b), &mut carry, &mut buf);
                if to_main.send((buf, start, carry.clone())).is_err() {
                    return; // the writer failed and stopped
                }
            }
        });
        let mut carry = L::Carry::default();
        let mut out = Vec::new();
        for b in (0..blocks).step_by(2) {
            out.clear();
            view.lines(range(b), &mut carry, &mut out);
            w.write_all(&out)?;
            if b + 1 < blocks {
                // Ok: the helper sends one buffer per odd block.
                let (mut buf, start, end) = from_helper.recv().map_err(std::io::Error::other)?;
                if start == carry {
                    carry = end;
                } else {
                    buf.clear();
                    view.lines(range(b + 1), &mut carry, &mut buf);
                }
                w.write_all(&buf)?;
                let _ = to_helper.send(buf);
                if let Ok(mut p) = published.lock() {
                    L::merge(&mut p, &carry);
                }
            }
        }
        w.flush()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view whose lines depend on the carry: numbers print as `x` once a multiple of
    /// `every` has been seen, as libtraceevent's string fields turn into arrays.
    struct Switching {
        every: usize,
    }
    impl Lines for Switching {
        type Carry = bool;
        fn lines(&self, range: Range<usize>, carry: &mut bool, out: &mut Vec<u8>) {
            for i in range {
                if *carry {
                    out.extend_from_slice(b"x\n");
                } else {
                    out.extend_from_slice(format!("{i}\n").as_bytes());
                }
                *carry |= i > 0 && i % self.every == 0;
            }
        }
        fn merge(a: &mut bool, b: &bool) {
            *a |= *b;
        }
    }

    /// Two threads give the bytes of one pass, whichever block the carry changes in.
    #[test]
    fn blocks_formatted_apart_equal_one_pass() {
        let n = 9 * BLOCK + 17;
        for every in [3, BLOCK + 5, 2 * BLOCK, 5 * BLOCK + 1, n + 1] {
            let v = Switching { every };
            let mut one = b"head\n".to_vec();
            v.lines(0..n, &mut false, &mut one);
            let mut two = Vec::new();
            write(&v, n, b"head\n", &mut two).unwrap();
            assert!(one == two, "every {every}: outputs differ");
        }
    }

    /// A failed write returns its error; the helper stops, nothing waits forever.
    #[test]
    fn a_failed_write_returns_its_error() {
        struct Full(usize);
        impl Write for Full {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                if self.0 < b.len() {
                    return Err(std::io::ErrorKind::BrokenPipe.into());
                }
                self.0 -= b.len();
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let v = Switching { every: usize::MAX };
        let e = write(&v, 20 * BLOCK, b"", &mut Full(100_000)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
    }
}
