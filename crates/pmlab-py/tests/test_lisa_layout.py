"""`t.to_parquet(dir, layout="lisa")` and `pmlab export --parquet DIR --layout lisa` write the
directory LISA's `trace-dump parquet` writes: for every fixture and a pipe recording, each
file's column names, types and row count against a schema written from LISA's source, the
event formats read by `trace-cmd dump` (not by pmlab), and meta.json as LISA's loader reads it.

LISA's source, ARM-software/lisa at commit bb5ff50d0ff5f5e3620634dc3342103dcfa1d6d2:
- tools/trace-parser/trace-tools/src/lib/tracedat/parquet/dump.rs: `FixedCols::arrow_fields`
  (common_ts UInt64 and common_cpu UInt32, not null), `make_schemas`/`guess_typ` (every field
  of the event's struct, common ones included, nullable; C types to Arrow types),
  `TableState::new` (`{name}.parquet`), `Metadata::dump` and `EventMetadata` (meta.json keys).
- tools/trace-parser/trace-tools/src/bin/trace-dump.rs: `--unique-timestamps`
  (`prev = max(ts, prev + 2)`), meta.json written beside the files.
- lisa/trace.py: `TraceDumpTraceParser` (`_process_metadata`, `parse_event`, `_fixup_df`).
"""

import json
import re
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import polars as pl
import pytest

import pmlab
from conftest import fixture_traces, pmlab_bin

FIELD = re.compile(r"^\s*field:(?P<decl>[^;]*);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);"
                   r"\s*signed:(?P<signed>\d+);")


def formats(trace_cmd, path):
    """name → [(field name, declaration type, is array, size, signed, element count)] from
    `trace-cmd dump` (system and ftrace events)."""
    out = {}
    for flag in ("--events", "--ftrace-events"):
        text = subprocess.run([trace_cmd, "dump", flag, "-i", str(path)], capture_output=True,
                              check=False).stdout.decode("utf-8", "replace")
        name = None
        for line in text.splitlines():
            m = re.match(r"^\s*name: (\S+)$", line)
            if m:
                name = m[1]
                out[name] = []
                continue
            m = FIELD.match(line)
            if m and name:
                decl = m["decl"].strip()
                # "TYPE NAME", "TYPE NAME[N]" or "__data_loc TYPE[] NAME"
                arr = re.search(r"\[(\d*)\]", decl)
                count = int(arr[1]) if arr and arr[1] else None
                plain = re.sub(r"\[\d*\]", "", decl).strip()
                typ, fname = plain.rsplit(" ", 1) if " " in plain else ("", plain)
                out[name].append((fname.lstrip("*"), typ + "*" * fname.count("*"),
                                  bool(arr), int(m["size"]), m["signed"] == "1", count))
    return out


INT = {(1, False): pa.uint8(), (1, True): pa.int8(), (2, False): pa.uint16(),
       (2, True): pa.int16(), (4, False): pa.uint32(), (4, True): pa.int32(),
       (8, False): pa.uint64(), (8, True): pa.int64()}
ELEM = {"char": 1, "u8": 1, "s8": 1, "__u8": 1, "uint8_t": 1, "unsigned char": 1,
        "u16": 2, "s16": 2, "short": 2, "unsigned short": 2,
        "u32": 4, "s32": 4, "int": 4, "unsigned int": 4, "unsigned": 4, "pid_t": 4,
        "u64": 8, "s64": 8, "long": 8, "unsigned long": 8, "long long": 8,
        "unsigned long long": 8}


def lisa_type(typ, is_array, size, signed, count):
    """guess_typ of dump.rs, for a 64-bit kernel whose `char` is signed (x86, these fixtures'
    char arrays): char arrays and char pointers are Utf8, u8/uint8_t arrays Binary, other
    integer arrays List (nullable items), other pointers UInt64, bool Boolean, cpumask_t a
    List of Boolean, integers by size and sign. Beyond LISA (it rejects them): an old kernel's
    size-0 `char buf` is Utf8 and `u32 buf` a List, read to the end of the record."""
    loc = typ.startswith("__data_loc") or typ.startswith("__rel_loc")
    base = " ".join(w for w in typ.replace("__data_loc", "").replace("__rel_loc", "").split()
                    if w not in ("const", "volatile"))
    is_array = is_array or loc
    if "cpumask_t" in base:
        return pa.list_(pa.bool_())
    if not is_array and size == 0:
        if base == "char":
            return pa.string()
        return pa.list_(INT[(ELEM.get(base, 1), signed)])
    if not is_array:
        if base.endswith("*"):
            return pa.string() if base[:-1].strip() == "char" else pa.uint64()
        if base in ("bool", "_Bool"):
            return pa.bool_()
        return INT[(size, signed)]
    if base in ("char", "signed char"):
        return pa.string()
    if base in ("u8", "uint8_t"):
        return pa.binary()
    if loc or not count:
        elem = 8 if base.endswith("*") else ELEM.get(base, 1)
    else:
        elem = size // count
    return pa.list_(INT[(elem, signed and (elem > 1 or not loc))])


def check_dir(trace_cmd, path, out, events=None):
    t = pmlab.open(path)
    fmts = formats(trace_cmd, path)
    meta = json.loads((out / "meta.json").read_text())
    assert set(meta) >= {"pid-comms", "cpus-count", "symbols-address", "events-info",
                         "time-range"}, meta.keys()
    assert meta["cpus-count"] == t.cpus
    want = events or list(t.events)
    info = {d["event"]: d for d in meta["events-info"]}
    assert set(info) == set(want)
    for event in want:
        d = info[event]
        assert d["errors"] == [] and d["format"] == "parquet" and d["path"] == f"{event}.parquet"
        assert d["nr-rows"] == t.events[event], event
        f = out / d["path"]
        schema = pq.read_schema(f)
        table = pq.read_table(f)
        assert table.num_rows == t.events[event], event
        name = event.split(":")[-1]
        expect = [pa.field("common_ts", pa.uint64(), nullable=False),
                  pa.field("common_cpu", pa.uint32(), nullable=False)]
        for fname, typ, arr, size, signed, count in fmts[name]:
            expect.append(pa.field(fname, lisa_type(typ, arr, size, signed, count)))
        got = [(x.name, x.type, x.nullable) for x in schema]
        exp = [(x.name, x.type, x.nullable) for x in expect]
        assert got == exp, (path.name, event)
        ts = table.column("common_ts").to_pylist()
        assert all(b > a for a, b in zip(ts, ts[1:])), "unique, increasing timestamps"
    start, end = meta["time-range"]
    assert start <= end
    # LISA's loader: pid-comms and symbols-address as lists of pairs, then its _fixup_df.
    pid_comms = {0: "<idle>", **dict(meta["pid-comms"])}
    assert all(isinstance(p, int) and isinstance(c, str) for p, c in meta["pid-comms"])
    syms = dict(meta["symbols-address"])
    assert all(isinstance(v, list) for v in syms.values())
    for event in want:
        df = (pl.scan_parquet(out / f"{event}.parquet")
              .rename({"common_ts": "Time", "common_pid": "__pid", "common_cpu": "__cpu"})
              .with_columns(pl.col("Time").cast(pl.Duration("ns")),
                            pl.col("__pid").replace_strict(pid_comms, default=None,
                                                           return_dtype=pl.Categorical)
                            .alias("__comm"))
              .drop(("common_type", "common_flags", "common_preempt_count"), strict=False)
              .collect())
        assert df.height == t.events[event]
    return meta


@pytest.mark.parametrize("path", fixture_traces(), ids=lambda p: p.name)
def test_fixture_in_lisa_layout(trace_cmd, tmp_path, path):
    out = tmp_path / "lisa"
    files = pmlab.open(path).to_parquet(out, layout="lisa")
    assert sorted(p.name for p in map(__import__("pathlib").Path, files)) == sorted(
        f"{e}.parquet" for e in pmlab.open(path).events)
    check_dir(trace_cmd, path, out)
    # the CLI writes the same files
    cli = tmp_path / "cli"
    subprocess.run([str(pmlab_bin()), "export", "--parquet", str(cli), "--layout", "lisa",
                    str(path)], check=True, capture_output=True)
    for f in out.iterdir():
        if f.suffix == ".parquet":
            assert pq.read_table(cli / f.name).equals(pq.read_table(f)), f.name
    assert json.loads((cli / "meta.json").read_text()) == json.loads((out / "meta.json").read_text())


def test_pipe_recording_in_lisa_layout(trace_cmd, recordings, tmp_path):
    path = recordings["pipe"]
    out = tmp_path / "lisa"
    pmlab.open(path).to_parquet(out, layout="lisa")
    meta = check_dir(trace_cmd, path, out)
    assert meta["trace-clock"] == "local"
    # the kernel's symbols come along (pmlab record saves kallsyms)
    assert len(meta["symbols-address"]) > 1000


def test_old_kernel_print_and_bprint_are_kept(tmp_path):
    from conftest import FIXTURES
    out = tmp_path / "lisa"
    pmlab.open(FIXTURES / "lisa_rtapp.dat").to_parquet(out, layout="lisa", events=["print", "bprint"])
    pr = pq.read_table(out / "print.parquet")
    assert pr.column("buf").to_pylist()[0] == "TRACE_MARKER_START\n"
    bp = pq.read_table(out / "bprint.parquet")
    assert bp.num_rows == 6242
    assert bp.column("fmt").to_pylist()[0].startswith("evt=util_est_rq")
    assert len(bp.column("buf").to_pylist()[0]) > 0


def test_bad_layout_and_event_change_nothing(tmp_path):
    from conftest import FIXTURES
    t = pmlab.open(FIXTURES / "trappy_idle.dat")
    with pytest.raises(pmlab.PmlabError, match='no layout "lsia".*did you mean lisa'):
        t.to_parquet(tmp_path / "a", layout="lsia")
    with pytest.raises(pmlab.PmlabError, match='no event "sched_swich".*did you mean sched_switch'):
        t.to_parquet(tmp_path / "b", layout="lisa", events=["sched_swich"])
    assert list(tmp_path.iterdir()) == []
