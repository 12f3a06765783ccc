"""Shared fixtures of the Python tests: the trace fixtures, the pmlab binary, and traces
recorded on this machine (pipe, hotplug cycles, 3 s idle) under the live-machine lock."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(os.environ.get("PMLAB_FIXTURES", ROOT.parent / "shared" / "fixtures"))
if not FIXTURES.is_dir():
    FIXTURES = Path("/work/shared/fixtures")
LIVE_LOCK = "/tmp/pmlab-live.lock"
CPU1_ONLINE = "/sys/devices/system/cpu/cpu1/online"


def fixture_traces():
    return sorted(FIXTURES.glob("*.dat"))


def pmlab_bin():
    p = Path(os.environ.get("PMLAB_BIN", ROOT / "target" / "release" / "pmlab"))
    if not p.is_file():
        pytest.skip(f"skipped: {p} is not built (cargo build --release --bins)")
    return p


def live(cmd, **kw):
    """Run a command that touches the live kernel under the lock the helpers share."""
    return subprocess.run(["flock", LIVE_LOCK, *map(str, cmd)], check=True, **kw)


def _can_record():
    if os.geteuid() != 0:
        return "needs root to record"
    if not Path("/sys/kernel/tracing/events").is_dir():
        return "no tracefs at /sys/kernel/tracing"
    return None


@pytest.fixture(scope="session")
def recordings(tmp_path_factory):
    """pipe, hotplug and idle traces recorded here with `pmlab record` (skipped without root)."""
    why = _can_record()
    if why:
        pytest.skip(f"skipped: {why}")
    pm = pmlab_bin()
    d = tmp_path_factory.mktemp("rec")
    out = {}
    pipe = d / "pipe.dat"
    live([pm, "record", "-o", pipe, "--", pm, "run", "pipe", "--loops", "20000"],
         stdout=subprocess.DEVNULL)
    out["pipe"] = pipe
    idle = d / "idle.dat"
    live([pm, "record", "-o", idle, "--duration", "3s"], stdout=subprocess.DEVNULL)
    out["idle"] = idle
    if Path(CPU1_ONLINE).exists():
        hp = d / "hotplug.dat"
        # cpu1 goes back online however the script ends (the machine is left as found)
        script = (f"trap 'echo 1 > {CPU1_ONLINE}' EXIT; for i in 1 2; do "
                  f"echo 0 > {CPU1_ONLINE}; sleep 0.1; echo 1 > {CPU1_ONLINE}; sleep 0.1; done")
        live([pm, "record", "-o", hp, "-e", "sched", "-e", "power", "-e", "cpuhp",
              "-e", "irq", "-e", "ipi", "--", "sh", "-c", script],
             stdout=subprocess.DEVNULL)
        out["hotplug"] = hp
    return out


@pytest.fixture(scope="session")
def trace_cmd():
    tc = shutil.which("trace-cmd")
    if not tc:
        pytest.skip("skipped: trace-cmd is not installed (scripts/setup.sh installs it)")
    return tc
