"""pmlab.whatif and Trace.to_perfetto: the same answers as the CLI's `whatif --json` and
`export --perfetto`, and bad input refused with pmlab's message before any work."""

import json
import subprocess

import pytest

import pmlab
from conftest import FIXTURES, pmlab_bin

OFF = FIXTURES / "haltpoll_pipe_off.dat"


def test_whatif_equals_the_cli():
    got = pmlab.whatif(OFF, values=[0, "50us", "200us"])
    out = subprocess.run(
        [pmlab_bin(), "whatif", "--json", "--values", "0,50us,200us", OFF],
        check=True,
        capture_output=True,
    )
    want = json.loads(out.stdout)
    assert got["values"] == want["values"]
    assert got["values"][0]["caught"] == 0
    assert got["values"][2]["catch_rate"] > 0.9
    assert got["notes"] == want["notes"]


def test_whatif_reverse_and_fixed_policy():
    on = FIXTURES / "haltpoll_pipe_200us.dat"
    rev = pmlab.whatif(on, reverse=True)
    assert rev["reverse"], "reverse prediction present"
    assert rev["values"] == [], "a reverse replay predicts polling off, not poll values"
    fixed = pmlab.whatif(OFF, policy="fixed", values=["10us", "100us"])
    assert [v["value_ns"] for v in fixed["values"]] == [10000, 100000]


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"policy": "sometimes"}, "policy"),
        ({"values": [-5]}, "negative"),
        ({"values": ["fast"]}, "duration"),
    ],
)
def test_whatif_bad_arguments(kw, needle):
    with pytest.raises(pmlab.PmlabError, match=needle):
        pmlab.whatif(OFF, **kw)


def test_whatif_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        pmlab.whatif(tmp_path / "none.dat")


def test_to_perfetto_equals_the_cli(tmp_path):
    t = pmlab.open(OFF)
    events = t.to_perfetto(tmp_path / "py.pftrace")
    assert events == sum(t.events.values())
    subprocess.run(
        [pmlab_bin(), "export", "--perfetto", tmp_path / "cli.pftrace", OFF],
        check=True,
        capture_output=True,
    )
    assert (tmp_path / "py.pftrace").read_bytes() == (tmp_path / "cli.pftrace").read_bytes()
