#!/usr/bin/env python3
"""Checks a `pmlab export --perfetto` file with the protobuf classes of the `perfetto` PyPI
package (no trace processor): it decodes; per-CPU and per-event counts equal
`pmlab trace info --json`'s; timestamps are ordered per CPU; every sched_switch's fields equal
`pmlab dump --json`'s, event for event; threads group under processes of the tree.

Usage: perfetto_check.py PMLAB TRACE PFTRACE [--release RELEASE] [--grouped]
Prints one summary line; exits non-zero with the first mismatch.
"""

import argparse
import collections
import json
import subprocess
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

# Typed payloads (FtraceEvent oneof) and the ftrace event they stand for.
TYPED = {
    "sched_switch": "sched_switch",
    "sched_waking": "sched_waking",
    "sched_wakeup": "sched_wakeup",
    "cpu_idle": "cpu_idle",
    "cpu_frequency": "cpu_frequency",
    "print": "print",
}
SWITCH_FIELDS = ("prev_comm", "prev_pid", "prev_prio", "prev_state", "next_comm", "next_pid", "next_prio")


def fail(msg):
    print(f"perfetto_check: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pmlab")
    ap.add_argument("trace")
    ap.add_argument("pftrace")
    ap.add_argument("--release", help="kernel release SystemInfo must name")
    ap.add_argument("--grouped", action="store_true",
                    help="some process of the tree must hold more than one thread")
    a = ap.parse_args()

    t = pb.Trace()
    with open(a.pftrace, "rb") as f:
        t.ParseFromString(f.read())
    info = json.loads(subprocess.run([a.pmlab, "trace", "info", "--json", a.trace],
                                     check=True, capture_output=True).stdout)

    per_cpu = collections.Counter()
    by_name = collections.Counter()
    last_ts = {}
    switches = collections.defaultdict(list)  # cpu -> [(ts, fields...)]
    system_info = None
    tree = None
    for p in t.packet:
        if p.HasField("system_info"):
            system_info = p.system_info
        if p.HasField("process_tree"):
            tree = p.process_tree
        if not p.HasField("ftrace_events"):
            continue
        b = p.ftrace_events
        cpu = b.cpu
        for e in b.event:
            per_cpu[cpu] += 1
            if e.timestamp < last_ts.get(cpu, 0):
                fail(f"cpu {cpu}: timestamp {e.timestamp} after {last_ts[cpu]}")
            last_ts[cpu] = e.timestamp
            kind = e.WhichOneof("event")
            if kind == "generic":
                by_name[e.generic.event_name] += 1
            elif kind in TYPED:
                by_name[TYPED[kind]] += 1
            else:
                fail(f"cpu {cpu}: event without a payload or of an unexpected kind {kind!r}")
            if kind == "sched_switch":
                s = e.sched_switch
                for k in SWITCH_FIELDS:
                    if not s.HasField(k):
                        fail(f"cpu {cpu} ts {e.timestamp}: sched_switch without {k}")
                switches[cpu].append((e.timestamp,) + tuple(getattr(s, k) for k in SWITCH_FIELDS))

    want_cpu = {c["cpu"]: c["events"] for c in info["per_cpu"] if c["events"]}
    if dict(per_cpu) != want_cpu:
        fail(f"events per CPU {dict(per_cpu)}, pmlab trace info says {want_cpu}")
    want_name = collections.Counter()
    for ev in info["by_event"]:
        want_name[ev["name"]] += ev["count"]
    if info.get("unknown_events"):
        want_name["unknown"] = info["unknown_events"]
    got_name = collections.Counter({("unknown" if k.startswith("unknown_") else k): 0 for k in by_name})
    for k, n in by_name.items():
        got_name["unknown" if k.startswith("unknown_") else k] += n
    if got_name != want_name:
        fail(f"events by name {dict(got_name)}, pmlab trace info says {dict(want_name)}")

    if system_info is None:
        fail("no SystemInfo packet")
    if a.release and system_info.utsname.release != a.release:
        fail(f"SystemInfo release {system_info.utsname.release!r}, want {a.release!r}")
    if tree is None:
        fail("no ProcessTree packet")
    pids = {p.pid for p in tree.processes}
    for th in tree.threads:
        if th.tgid not in pids:
            fail(f"thread {th.tid} names process {th.tgid}, which the tree lacks")

    sizes = collections.Counter(th.tgid for th in tree.threads)
    if a.grouped and not any(n > 1 for n in sizes.values()):
        fail("no process holds more than one thread")

    # sched_switch field by field against pmlab's own decode (itself equal to trace-cmd report).
    want_sw = collections.defaultdict(list)
    dump = subprocess.Popen([a.pmlab, "dump", "--json", a.trace], stdout=subprocess.PIPE, text=True)
    for line in dump.stdout:
        if '"sched_switch"' not in line:
            continue
        d = json.loads(line)
        if d["event"] != "sched_switch":
            continue
        f = d  # fields are top-level keys, typed as the Python tables
        want_sw[d["cpu"]].append((d["ts"],) + tuple(f[k] for k in SWITCH_FIELDS))
    if dump.wait() != 0:
        fail("pmlab dump --json failed")
    for cpu in set(want_sw) | set(switches):
        got, want = switches.get(cpu, []), want_sw.get(cpu, [])
        if len(got) != len(want):
            fail(f"cpu {cpu}: {len(got)} sched_switch events, pmlab dump has {len(want)}")
        for g, w in zip(got, want):
            if g != w:
                fail(f"cpu {cpu}: sched_switch {g} != pmlab dump {w}")
    n_sw = sum(len(v) for v in switches.values())
    print(f"ok: {sum(per_cpu.values())} events on {len(per_cpu)} CPUs, {n_sw} sched_switch equal, "
          f"{len(tree.threads)} threads in {len(tree.processes)} processes, "
          f"release {system_info.utsname.release or '-'}")


if __name__ == "__main__":
    main()
