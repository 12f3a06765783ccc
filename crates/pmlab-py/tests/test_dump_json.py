"""`pmlab dump --json` (one object per line) equals the Python tables, event by event and
value by value, on every fixture and on a pipe recording: the same keys (`ts`, `cpu`, `pid`,
`comm` or their `common_*` names, then every field), the same numbers and strings. The
tables themselves equal `trace-cmd report` (test_equal.py)."""

import json
import subprocess

import pyarrow as pa
import pytest

import pmlab
from conftest import fixture_traces, pmlab_bin


def check(path):
    out = subprocess.run([str(pmlab_bin()), "dump", "--json", str(path)], check=True,
                         capture_output=True).stdout
    t = pmlab.open(path)
    events = t.events  # built anew by each access: once here, not once per line
    by_event = {}
    n = 0
    prev_ts = -1
    for line in out.splitlines():
        obj = json.loads(line)
        n += 1
        ts = obj.get("ts", obj.get("common_ts"))
        assert ts >= prev_ts, "time order"
        prev_ts = ts
        name = obj.get("event", obj.get("common_event"))
        key = name if name in events else f"{obj.get('system')}:{name}"
        by_event.setdefault(key, []).append(obj)
    assert n == sum(events.values())
    assert set(by_event) == set(events)
    for event, objs in by_event.items():
        tab = pa.table(t.arrow(event))
        cols = tab.column_names
        for c in cols:
            want = tab.column(c).to_pylist()
            got = [o[c] for o in objs]
            if c in ("comm", "common_comm"):
                want = [str(x) if x is not None else None for x in want]
            assert got == want, (path.name, event, c)
        extra = set(objs[0]) - set(cols)
        assert extra <= {"event", "system", "common_event", "common_system"}, extra


@pytest.mark.parametrize("path", fixture_traces(), ids=lambda p: p.name)
def test_fixture_json_equals_the_tables(path):
    check(path)


def test_recording_json_equals_the_tables(recordings):
    check(recordings["pipe"])
