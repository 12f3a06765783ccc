"""Bad input from Python raises an exception with pmlab's message and changes nothing:
a missing file, a directory, every 4 KiB prefix of a fixture, an unknown event or column."""

import os
import subprocess
import sys

import pytest

import pmlab
from conftest import FIXTURES

SMALL = FIXTURES / "trappy_idle.dat"


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="nope.dat"):
        pmlab.open("/nonexistent/nope.dat")
    with pytest.raises(FileNotFoundError, match="nope.dat"):
        pmlab.analyze("/nonexistent/nope.dat")
    with pytest.raises(FileNotFoundError, match="no such result store"):
        pmlab.results("/nonexistent/pmlab.db")
    assert not os.path.exists("/nonexistent")


def test_directory(tmp_path):
    with pytest.raises(pmlab.PmlabError, match="is a directory"):
        pmlab.open(tmp_path)
    with pytest.raises(FileNotFoundError, match="is a directory"):
        pmlab.results(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_not_a_store_is_left_alone(tmp_path):
    f = tmp_path / "x.db"
    f.write_bytes(b"hello, not sqlite" * 10)
    with pytest.raises(pmlab.PmlabError, match="not a pmlab|not an SQLite"):
        pmlab.results(f)
    assert f.read_bytes() == b"hello, not sqlite" * 10


def test_unknown_event_and_column():
    t = pmlab.open(SMALL)
    with pytest.raises(pmlab.PmlabError, match="no event \"nope\".*sched_switch"):
        t.arrow("nope")
    with pytest.raises(pmlab.PmlabError, match="no column \"nope\""):
        t.arrow("sched_switch", columns=["nope"])
    with pytest.raises(pmlab.PmlabError, match="before start"):
        t.arrow("sched_switch", start=10, end=5)
    with pytest.raises(pmlab.PmlabError, match="no event"):
        t.to_parquet("/nonexistent/never", events=["nope"])
    assert not os.path.exists("/nonexistent")


@pytest.mark.parametrize("path", [SMALL, FIXTURES / "haltpoll_pipe_off.dat"], ids=lambda p: p.name)
def test_unknown_names_give_a_short_message_with_close_matches(path):
    # The error lists the trace's events with their counts, not every format in the file's
    # header (about 2,000 on a recent kernel: 30 KB of text), close matches first.
    t = pmlab.open(path)
    for call, needle in [
        (lambda: t.polars("nosuch"), None),
        (lambda: t.polars("sched_swich"), "did you mean sched_switch"),
        (lambda: t.arrow("switch"), "did you mean sched_switch"),
        (lambda: t.pandas("sched_switch", columns=["prev_pdi"]), "did you mean prev_pid"),
        (lambda: t.arrow("sched_switch", columns=["nosuch"]), "prev_comm"),
        (lambda: pmlab.analyze(path, only=["wakeup"]), "did you mean wakeups"),
        (lambda: t.to_parquet("/nonexistent/never", layout="lsia"), "did you mean lisa"),
    ]:
        with pytest.raises(pmlab.PmlabError) as e:
            call()
        msg = str(e.value)
        assert len(msg.encode()) < 2048, (len(msg), msg)
        if needle:
            assert needle in msg, msg
    msg = ""
    try:
        t.polars("nosuch")
    except pmlab.PmlabError as e:
        msg = str(e)
    # every event of this trace with its count (the small one has few), most frequent first
    top = next(iter(t.events))
    assert f"{top} ({t.events[top]})" in msg, msg
    assert not os.path.exists("/nonexistent")


# Run in a child interpreter so that a crash (a signal) fails the test instead of pytest.
PREFIXES = r"""
import sys, pmlab
data = open(sys.argv[1], "rb").read()
path = sys.argv[2]
raised = ok = 0
for n in range(0, len(data), 4096):
    with open(path, "wb") as f:
        f.write(data[:n])
    try:
        t = pmlab.open(path)
        t.events; t.metadata
        for e in t.events:
            t.arrow(e)
        ok += 1
    except (pmlab.PmlabError, OSError) as e:
        assert str(e), "an exception without a message"
        raised += 1
print(raised, ok)
"""


@pytest.mark.parametrize("name", ["trappy_idle.dat", "haltpoll_pipe_200us.dat"])
def test_every_4k_prefix_raises_or_reads(tmp_path, name):
    src = FIXTURES / name
    r = subprocess.run([sys.executable, "-c", PREFIXES, str(src), str(tmp_path / "cut.dat")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"interpreter died ({r.returncode}): {r.stderr[-2000:]}"
    raised, ok = map(int, r.stdout.split())
    assert raised + ok == (src.stat().st_size + 4095) // 4096
    assert raised > 0
