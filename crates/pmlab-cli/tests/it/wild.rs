//! The public corpus (tests/fixtures/wild: trace.dat files others recorded and published,
//! listed with their sources in its README) against trace-cmd, every view, line by line:
//! `pmlab dump` against `trace-cmd report`, `pmlab dump -R -t` against `trace-cmd report -R -t`,
//! and every value of `pmlab dump --json` against the raw view's text of the same field;
//! and each v6 file converted to v7 prints the same in every view.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::trace::{convert_v7, dats_in, has_trace_cmd, normalized};
use crate::util::pmlab;

/// Fields whose JSON list may be empty where the raw view prints an array: JSON (as the
/// Python tables) holds what the record holds, and ftrace's `kernel_stack` records only
/// the frames it has of its declared `caller[8]`; the raw view prints, as trace-cmd, the
/// bytes that follow the record in its page (docs/reader.md).
const JSON_HOLDS_THE_RECORD: &[(&str, &str)] = &[("kernel_stack", "caller")];

fn corpus() -> Vec<PathBuf> {
    // The repository's own copy, also where PMLAB_FIXTURES points elsewhere.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/wild");
    let v = dats_in(&dir);
    assert!(
        v.len() >= 5,
        "expected the public corpus in {}",
        dir.display()
    );
    v
}

/// (stdout, stderr) of a command that must have succeeded.
fn run(out: std::io::Result<Output>, what: &str) -> (Vec<u8>, String) {
    let out = out.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The event name of a report line (`comm-pid [cpu] ts: NAME: ...`).
fn kind(line: &str) -> &str {
    line.split(": ").nth(1).unwrap_or(line)
}

/// pmlab's view against trace-cmd's, line by line (whitespace runs aside). A line may differ
/// only when its event type was warned about on stderr, by `system:name`. Returns (lines,
/// differing lines).
fn compare(file: &Path, ours_args: &[&str], theirs_args: &[&str]) -> (usize, usize) {
    let what = format!("pmlab dump {ours_args:?} {}", file.display());
    let (ours, err) = run(
        pmlab().arg("dump").args(ours_args).arg(file).output(),
        &what,
    );
    let theirs = &crate::util::trace_cmd_report(theirs_args, file).stdout;
    let warned: BTreeSet<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("pmlab dump: warning: "))
        .filter_map(|l| l.split(": ").next())
        .filter_map(|sn| sn.split_once(':').map(|(_, n)| n))
        .collect();
    assert!(
        err.lines().all(|l| l.starts_with("pmlab dump: warning: ")),
        "{what}: {err}"
    );
    let (a, b) = (normalized(&ours), normalized(theirs));
    assert_eq!(a.len(), b.len(), "{what}: line count (pmlab, trace-cmd)");
    let mut differ = 0;
    for (n, (x, y)) in a.iter().zip(&b).enumerate() {
        if x != y {
            assert!(
                warned.contains(kind(y)),
                "{what}: line {} differs and pmlab did not warn about its kind (pmlab first, \
                 trace-cmd second)\n{x}\n{y}",
                n + 1
            );
            differ += 1;
        }
    }
    (a.len(), differ)
}

/// A raw view's event line: (comm, pid, cpu, ts in ns, event, the ` name=value` text).
fn parse_raw(line: &str) -> Option<(&str, i64, u64, u64, &str, &str)> {
    let (head, rest) = line.split_once("] ")?;
    let (task, cpu) = head.rsplit_once(" [")?;
    let (comm, pid) = task.trim().rsplit_once('-')?;
    let (ts, rest) = rest.trim_start().split_once(": ")?;
    let (secs, ns) = ts.split_once('.')?;
    let ts = secs.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?;
    let (event, fields) = rest.split_once(':')?;
    Some((
        comm,
        pid.parse().ok()?,
        cpu.parse().ok()?,
        ts,
        event,
        fields,
    ))
}

/// The bytes of a raw `ARRAY[xx, yy, ...]`.
fn array_bytes(t: &str) -> Option<Vec<u8>> {
    let inner = t.strip_prefix("ARRAY[")?.strip_suffix(']')?;
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(", ")
        .map(|b| u8::from_str_radix(b, 16).ok())
        .collect()
}

/// Whether the raw text `t` shows the integer `n` (decimal, `0x` hex, or bare hex as the
/// function tracer's `ip=`; negative values as their 32- or 64-bit two's complement).
fn same_int(t: &str, n: i128) -> bool {
    let mut seen = Vec::new();
    if let Ok(d) = t.parse::<i128>() {
        seen.push(d);
    }
    if let Ok(h) = i128::from_str_radix(t.strip_prefix("0x").unwrap_or(t), 16) {
        seen.push(h);
    }
    let masks = [n, n & 0xffff_ffff, n & 0xffff_ffff_ffff_ffff];
    seen.iter().any(|s| masks.contains(s))
}

/// Every value of `pmlab dump --json` against the raw view's text of the same field, and
/// each object's ts, cpu, pid, comm and event against its raw line. Returns the values checked.
fn json_against_raw(file: &Path) -> usize {
    let trace = pmlab_trace::open(file).unwrap();
    let size_of = |event: &str, field: &str| {
        trace
            .formats
            .values()
            .find(|f| f.name == event)
            .and_then(|f| f.field(field))
            .map(|f| f.size)
    };
    let (json, _) = run(
        pmlab().args(["dump", "--json"]).arg(file).output(),
        "pmlab dump --json",
    );
    let (raw, _) = run(
        pmlab().args(["dump", "-R", "-t"]).arg(file).output(),
        "pmlab dump -R -t",
    );
    let raw = String::from_utf8(raw).unwrap();
    let events: Vec<&str> = raw.lines().filter(|l| parse_raw(l).is_some()).collect();
    let objs: Vec<Value> = json
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(objs.len(), events.len(), "{}: events", file.display());
    let mut checked = 0;
    for (o, line) in objs.iter().zip(&events) {
        let ctx = || format!("{}\n{line}\n{o}", file.display());
        let (comm, pid, cpu, ts, event, fields) = parse_raw(line).unwrap();
        let m = o.as_object().unwrap();
        // `comm`/`pid` are `common_comm`/`common_pid` when the event has fields so named.
        let common = |k: &str| m.get(&format!("common_{k}")).or_else(|| m.get(k));
        assert_eq!(o["ts"].as_u64(), Some(ts), "{}", ctx());
        assert_eq!(o["cpu"].as_u64(), Some(cpu), "{}", ctx());
        assert_eq!(
            common("pid").and_then(Value::as_i64),
            Some(pid),
            "{}",
            ctx()
        );
        match common("comm").and_then(Value::as_str) {
            Some(c) => assert_eq!(c, comm, "{}", ctx()),
            None => assert_eq!(comm, "<...>", "{}", ctx()),
        }
        let ev_key = if m.contains_key("common_event") {
            "common_event"
        } else {
            "event"
        };
        assert_eq!(o[ev_key].as_str(), Some(event), "{}", ctx());
        // The raw text of each field: from after ` name=` to the next field's ` name=`.
        let skip = [
            "ts",
            "cpu",
            "pid",
            "comm",
            "event",
            "system",
            "common_pid",
            "common_comm",
            "common_event",
            "common_system",
        ];
        let keys: Vec<&String> = m.keys().filter(|k| !skip.contains(&k.as_str())).collect();
        let mut at: Vec<(usize, &String)> = keys
            .iter()
            .map(|k| {
                let pos = fields
                    .find(&format!(" {k}="))
                    .unwrap_or_else(|| panic!("no {k}= in the raw line: {}", ctx()));
                (pos, *k)
            })
            .collect();
        at.sort();
        for (j, &(pos, k)) in at.iter().enumerate() {
            let end = at.get(j + 1).map_or(fields.len(), |n| n.0);
            let text = fields[pos + k.len() + 2..end].trim_end();
            match &m[k] {
                Value::String(s) => match array_bytes(text) {
                    Some(b) => {
                        let nul = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                        assert_eq!(String::from_utf8_lossy(&b[..nul]), *s, "{k}: {}", ctx());
                    }
                    // a text's closing newline ends the raw line
                    None => assert_eq!(text, s.trim_end(), "{k}: {}", ctx()),
                },
                Value::Number(n) => {
                    let n = n
                        .as_i64()
                        .map(i128::from)
                        .or(n.as_u64().map(i128::from))
                        .unwrap();
                    assert!(same_int(text, n), "{k}={text} against {n}: {}", ctx());
                }
                Value::Array(list) => {
                    // Older kernels' `u32 buf;` of size 0 (bprint): trace-cmd reads zero
                    // bytes as the number 0; JSON has the field's no elements.
                    if list.is_empty() && text == "0" && size_of(event, k) == Some(0) {
                        checked += 1;
                        continue;
                    }
                    let bytes =
                        array_bytes(text).unwrap_or_else(|| panic!("{k}: not an array: {}", ctx()));
                    if list.is_empty() {
                        assert!(
                            bytes.is_empty() || JSON_HOLDS_THE_RECORD.contains(&(event, k)),
                            "{k}: empty in JSON: {}",
                            ctx()
                        );
                        continue;
                    }
                    assert_eq!(bytes.len() % list.len(), 0, "{k}: {}", ctx());
                    let size = bytes.len() / list.len();
                    for (e, chunk) in list.iter().zip(bytes.chunks(size)) {
                        let v = chunk
                            .iter()
                            .rev()
                            .fold(0u128, |acc, &b| (acc << 8) | u128::from(b));
                        let e = e
                            .as_i64()
                            .map(i128::from)
                            .or(e.as_u64().map(i128::from))
                            .unwrap();
                        let mask = (1u128 << (8 * size)) - 1;
                        assert_eq!(v, (e as u128) & mask, "{k}: {}", ctx());
                    }
                }
                other => panic!("{k}: unexpected JSON value {other}: {}", ctx()),
            }
            checked += 1;
        }
    }
    checked
}

it_test!(every_view_of_every_public_trace_equals_trace_cmds, fixture);
fn every_view_of_every_public_trace_equals_trace_cmds() {
    if !has_trace_cmd() {
        skip!("trace-cmd is not installed: it is the reference the corpus is compared with");
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut versions = BTreeSet::new();
    for f in corpus() {
        let trace = pmlab_trace::open(&f).unwrap();
        versions.insert(trace.meta.version);
        let (n, differ) = compare(&f, &[], &[]);
        assert!(n > 5, "{}: {n} lines", f.display());
        assert_eq!(differ, 0, "{}: formatted lines differ", f.display());
        let (raw, differ) = compare(&f, &["-R", "-t"], &["-R", "-t"]);
        // Raw lines differ only where a field runs past its page (warned; 4 of 41401
        // kernel_stack lines in langraph's trace).
        assert!(
            differ * 1000 <= raw,
            "{}: {differ} of {raw} raw lines differ",
            f.display()
        );
        let values = json_against_raw(&f);
        assert!(values > 0, "{}: no JSON values checked", f.display());
        // The same events as v7 zstd: pmlab prints the same bytes in every view. (Not
        // against trace-cmd: 3.1.6 misreads bprint in its own v7 conversion of the older
        // arm32 files, while its v6 lines equal pmlab's.)
        if trace.meta.version == 6 {
            let v7 = tmp.path().join(f.file_name().unwrap());
            let v7 = convert_v7(&f, "zstd", &v7).expect("trace-cmd convert to v7 zstd");
            for args in [&[][..], &["-R", "-t"], &["--json"]] {
                let view = |file: &Path| {
                    run(
                        pmlab().arg("dump").args(args).arg(file).output(),
                        "pmlab dump",
                    )
                    .0
                };
                assert!(
                    view(&f) == view(&v7),
                    "{} {args:?}: v7 prints differently",
                    f.display()
                );
            }
        }
    }
    assert!(
        versions.contains(&6) && versions.contains(&7),
        "v6 and v7: {versions:?}"
    );
}
