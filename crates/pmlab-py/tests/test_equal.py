"""Every event's every field, as read from Python, equals `trace-cmd report -R -t`'s text,
on every fixture and on traces recorded here; row counts equal `pmlab trace info`'s."""

import json
import re
import subprocess

import pyarrow as pa
import pytest

import pmlab
from conftest import fixture_traces, pmlab_bin

# "COMM-PID [CPU] SECS.NSEC: EVENT: FIELDS" as `trace-cmd report -R -t` prints it.
LINE = re.compile(r"^(?P<comm>.*?)-(?P<pid>-?\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<s>\d+)\.(?P<ns>\d+): "
                  r"(?P<event>[^:]+):\s(?P<rest>.*)$")


def report_lines(trace_cmd, path):
    out = subprocess.run([trace_cmd, "report", "-R", "-t", "-i", str(path)], check=True,
                         capture_output=True).stdout
    by_event = {}
    for raw in out.split(b"\n"):
        line = raw.decode("utf-8", "surrogateescape")
        m = LINE.match(line)
        if m:
            by_event.setdefault(m["event"], []).append(m)
    return by_event


def split_fields(rest, names):
    """`name=value` pairs in format order; a value runs up to the next ` name=`."""
    vals = {}
    pos = 0
    for k, name in enumerate(names):
        key = f"{name}="
        start = rest.find(key, pos)
        assert start >= 0, f"no {key} in {rest!r}"
        start += len(key)
        if k + 1 < len(names):
            end = rest.find(f" {names[k + 1]}=", start)
            assert end >= 0, f"no {names[k + 1]}= after {name} in {rest!r}"
        else:
            end = len(rest)
        vals[name] = rest[start:end]
        pos = end
    return vals


def as_int(text):
    t = text.strip()
    if t == "(nil)":  # %p of a null pointer
        return 0
    neg = t.startswith("-")
    t = t.lstrip("-")
    v = int(t, 16) if t.lower().startswith("0x") else int(t, 10)
    return -v if neg else v


def int_bits(dtype):
    return dtype.bit_width if pa.types.is_integer(dtype) else 64


def array_bytes(values, dtype, big):
    size = int_bits(dtype) // 8
    order = "big" if big else "little"
    return b"".join((v % (1 << (8 * size))).to_bytes(size, order) for v in values)


def check_value(text, value, dtype, big, syms, where):
    if pa.types.is_integer(dtype):
        try:
            want = as_int(text)
        except ValueError:
            # print formats that name a kernel symbol (%ps, %pS): resolve the value the way
            # trace-cmd did, from the file's own kallsyms (`trace-cmd report -f`).
            name = syms(value)
            assert name is not None and text.strip().split("+")[0] == name, where
            return
        mod = 1 << int_bits(dtype)
        assert (want - value) % mod == 0, f"{where}: trace-cmd {text!r}, pmlab {value}"
    elif pa.types.is_string_view(dtype) or pa.types.is_large_string(dtype):
        if text.startswith("ARRAY[") and text != value:
            got = bytes(int(x, 16) for x in text[6:-1].split(", ") if x)
            assert got.split(b"\0")[0] == value.encode(), f"{where}: {text!r} vs {value!r}"
        else:
            # A string ending in a newline (`print`'s text) ends trace-cmd's line there.
            shown = value[:-1] if value.endswith("\n") else value
            assert text == shown, f"{where}: trace-cmd {text!r}, pmlab {value!r}"
    else:  # lists of integers: trace-cmd prints their bytes, or the string they spell
        raw = array_bytes(value, dtype.value_type, big)
        if text.startswith("ARRAY["):
            got = bytes(int(x, 16) for x in text[6:-1].split(", ") if x)
            assert got == raw, f"{where}: trace-cmd {text!r}, pmlab {list(value)}"
        elif raw:
            assert text == raw.split(b"\0")[0].decode("latin-1"), f"{where}: {text!r} vs {raw!r}"


class Symbols:
    """Address -> symbol from `trace-cmd report -f` (the file's kallsyms)."""

    def __init__(self, trace_cmd, path):
        self.trace_cmd, self.path, self.addrs = trace_cmd, path, None

    def __call__(self, addr):
        if self.addrs is None:
            out = subprocess.run([self.trace_cmd, "report", "-f", "-i", str(self.path)],
                                 capture_output=True, text=True, errors="replace").stdout
            pairs = []
            for line in out.splitlines():
                parts = line.split()
                if len(parts) >= 2:
                    try:
                        pairs.append((int(parts[0], 16), parts[1]))
                    except ValueError:
                        pass
            pairs.sort()
            self.addrs = pairs
        import bisect
        k = bisect.bisect_right(self.addrs, (addr, "\uffff")) - 1
        return self.addrs[k][1] if k >= 0 else None


def check_trace(trace_cmd, path):
    t = pmlab.open(path)
    meta = t.metadata
    big = meta["endian"] == "big"
    lines = report_lines(trace_cmd, path)
    counts = t.events
    # every event trace-cmd shows, with as many rows (and no event pmlab alone shows)
    assert {k.split(":")[-1]: v for k, v in counts.items()} == {k: len(v) for k, v in lines.items()}
    syms = Symbols(trace_cmd, path)
    checked = 0
    for event, n in counts.items():
        tab = pa.table(t.arrow(event))
        assert tab.num_rows == n
        cols = tab.column_names
        common = {c: (f"common_{c}" if f"common_{c}" in cols else c)
                  for c in ("ts", "cpu", "pid", "comm")}
        fields = [c for c in cols if c not in common.values()]
        data = {c: tab.column(c).to_pylist() for c in cols}
        types = {c: tab.schema.field(c).type for c in cols}
        for i, m in enumerate(lines[event.split(":")[-1]]):
            where = f"{path.name} {event} #{i}"
            ns = m["ns"].ljust(9, "0")[:9]
            assert data[common["ts"]][i] == int(m["s"]) * 1_000_000_000 + int(ns), where
            assert data[common["cpu"]][i] == int(m["cpu"]), where
            assert data[common["pid"]][i] == int(m["pid"]), where
            comm = data[common["comm"]][i]
            want = m["comm"].strip(" ")  # only padding: comms may hold control bytes Python calls whitespace
            assert (comm if comm is not None else "<...>") == want, f"{where}: comm {comm!r} vs {want!r}"
            vals = split_fields(m["rest"], fields)
            for f in fields:
                check_value(vals[f], data[f][i], types[f], big, syms, f"{where} {f}")
                checked += 1
    return t, checked


def trace_info_counts(path):
    out = subprocess.run([str(pmlab_bin()), "trace", "info", "--json", str(path)],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return {e["name"]: e["count"] for e in j["by_event"]}


@pytest.mark.parametrize("path", fixture_traces(), ids=lambda p: p.name)
def test_fixture_equals_trace_cmd(trace_cmd, path):
    t, checked = check_trace(trace_cmd, path)
    assert checked > 0
    assert {k.split(":")[-1]: v for k, v in t.events.items()} == trace_info_counts(path)


@pytest.mark.parametrize("kind", ["pipe", "hotplug", "idle"])
def test_recording_equals_trace_cmd(trace_cmd, recordings, kind):
    if kind not in recordings:
        pytest.skip(f"skipped: no {kind} recording (no hot-pluggable cpu1)")
    path = recordings[kind]
    t, checked = check_trace(trace_cmd, path)
    assert sum(t.events.values()) > 0
    assert {k.split(":")[-1]: v for k, v in t.events.items()} == trace_info_counts(path)
    if kind == "hotplug":
        assert any(k.startswith("cpuhp") for k in t.events), t.events
