"""pmlab's tables in the libraries people use: pyarrow, polars, pandas, DuckDB; Parquet
files read back by DuckDB and polars; the analyses and the result store as tables."""

import os
import subprocess

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pmlab
from conftest import FIXTURES, pmlab_bin

HALTPOLL = FIXTURES / "haltpoll_pipe_200us.dat"
LISA = FIXTURES / "lisa_sched_load.dat"


def test_open_reads_headers_and_metadata():
    t = pmlab.open(HALTPOLL)
    assert t.cpus == 2
    m = t.metadata
    assert m["kernel_release"] == "6.18.44-fc-v669"
    assert m["clock"] == "local"
    assert m["version"] == 7 and m["compression"] == "zstd"
    assert m["lost_events"] == {0: 0, 1: 0}
    assert sum(t.events.values()) == m["events"] == 240394
    assert list(t.events)[0] == max(t.events, key=t.events.get)


def test_same_event_in_pyarrow_polars_pandas():
    t = pmlab.open(HALTPOLL)
    tab = pa.table(t.arrow("sched_switch"))
    assert tab.schema.field("ts").type == pa.uint64()
    assert tab.schema.field("cpu").type == pa.uint32()
    assert tab.schema.field("pid").type == pa.int32()
    assert pa.types.is_dictionary(tab.schema.field("comm").type)
    assert tab.schema.field("prev_comm").type == pa.string_view()
    assert tab.schema.field("prev_pid").type == pa.int32()
    assert tab.schema.field("prev_state").type == pa.int64()
    df = t.polars("sched_switch")
    assert df.schema["ts"] == pl.UInt64
    assert df.schema["comm"] == pl.Categorical
    assert df.schema["prev_pid"] == pl.Int32
    assert df.schema["next_comm"] == pl.String
    pdf = t.pandas("sched_switch")
    assert str(pdf["ts"].dtype) == "uint64"
    assert str(pdf["comm"].dtype) == "category"
    assert str(pdf["next_pid"].dtype) == "int32"
    assert len(tab) == df.height == len(pdf) == t.events["sched_switch"]
    for col in ("ts", "cpu", "pid", "prev_comm", "prev_state", "next_pid"):
        a = tab.column(col).to_pylist()
        assert a == df[col].to_list() == pdf[col].tolist(), col
    assert [str(x) for x in tab.column("comm").to_pylist()] == [str(x) for x in df["comm"].to_list()]
    # polars also reads the stream straight from the table object
    assert pl.DataFrame(t.arrow("sched_switch")).equals(df)
    assert pl.from_arrow(tab).height == df.height


def test_field_named_like_a_common_column():
    # sched_waking has its own pid and comm (the woken task): the common ones become common_*
    t = pmlab.open(HALTPOLL)
    tab = pa.table(t.arrow("sched_waking"))
    assert tab.column_names[:4] == ["ts", "cpu", "common_pid", "common_comm"]
    assert {"pid", "comm", "prio", "target_cpu"} <= set(tab.column_names)


def test_columns_cpus_and_window():
    t = pmlab.open(HALTPOLL)
    full = pa.table(t.arrow("sched_switch"))
    ts = full.column("ts").to_pylist()
    start, end = ts[len(ts) // 4], ts[len(ts) // 2]
    part = pa.table(t.arrow("sched_switch", columns=["next_pid", "ts"], cpus=[1],
                            start=start, end=end))
    assert part.column_names == ["next_pid", "ts"]
    want = [(n, s) for n, s, c in zip(full.column("next_pid").to_pylist(), ts,
                                      full.column("cpu").to_pylist())
            if c == 1 and start <= s < end]
    assert list(zip(*[part.column(c).to_pylist() for c in part.column_names])) == want
    assert 0 < part.num_rows < full.num_rows


def test_arrays_and_lists():
    # bprint's `u32 buf[]` and cpumask-style arrays are lists; char arrays are strings
    t = pmlab.open(FIXTURES / "lisa_rtapp.dat")
    tab = pa.table(t.arrow("bprint"))
    assert pa.types.is_large_list(tab.schema.field("buf").type)
    assert tab.schema.field("ip").type == pa.uint64()


def test_to_parquet_read_back_by_duckdb_and_polars(tmp_path):
    t = pmlab.open(LISA)
    paths = t.to_parquet(tmp_path)
    assert sorted(p.name for p in map(__import__("pathlib").Path, paths)) == sorted(
        f"{e}.parquet" for e in t.events)
    for event, n in t.events.items():
        f = tmp_path / f"{event}.parquet"
        want = pa.table(t.arrow(event))
        got_pl = pl.read_parquet(f)
        got_duck = duckdb.sql(f"select * from read_parquet('{f}')").arrow()
        if hasattr(got_duck, "read_all"):
            got_duck = got_duck.read_all()
        assert got_pl.height == got_duck.num_rows == n
        for col in want.column_names:
            w = [str(x) if col in ("comm", "common_comm") else x for x in want.column(col).to_pylist()]
            p = [str(x) if col in ("comm", "common_comm") else x for x in got_pl[col].to_list()]
            d = [str(x) if col in ("comm", "common_comm") else x for x in got_duck.column(col).to_pylist()]
            assert w == p == d, (event, col)
    sel = t.to_parquet(tmp_path / "some", events=["cpu_idle"])
    assert len(sel) == 1 and pq.read_table(sel[0]).num_rows == t.events["cpu_idle"]


def test_tables_of_every_event():
    t = pmlab.open(HALTPOLL)
    tabs = t.tables()
    assert set(tabs) == set(t.events)
    assert all(tabs[e].num_rows == n for e, n in t.events.items())

    # Read in parts (one per core, in file order), each table equals the event read alone.
    def plain(tab):
        tab = pa.table(tab)
        cols = [c.cast(pa.string()) if pa.types.is_dictionary(c.type) else c for c in tab.columns]
        return pa.table(cols, names=tab.column_names).combine_chunks()

    chunked = [e for e in tabs if pa.table(tabs[e]).column(0).num_chunks > 1]
    assert chunked or (os.cpu_count() or 1) == 1, "the 300k-event fixture is read in parts"
    for e in t.events:
        assert plain(tabs[e]).equals(plain(t.arrow(e))), e


def test_analyze_gives_the_export_tables(tmp_path):
    out = tmp_path / "export"
    subprocess.run([str(pmlab_bin()), "analyze", str(HALTPOLL), "--export", str(out)],
                   check=True, capture_output=True)
    tabs = pmlab.analyze(HALTPOLL)
    files = {p.stem: p for p in out.glob("*.parquet")}
    assert set(tabs) == set(files) and tabs
    for name, tab in tabs.items():
        got = pa.table(tab)
        want = pq.read_table(files[name])
        assert got.column_names == want.column_names, name
        assert got.to_pylist() == want.to_pylist(), name
    only = pmlab.analyze(HALTPOLL, only=["idle"])
    assert only and set(only) < set(tabs)
    with pytest.raises(pmlab.PmlabError, match="no analysis"):
        pmlab.analyze(HALTPOLL, only=["nope"])


def test_results_from_the_store(tmp_path):
    db = tmp_path / "r.db"
    pm = pmlab_bin()
    # the hidden fake executor: a real store without touching the machine
    subprocess.run([str(pm), "compare", "--a", "", "--b", "", "--fake-executor", "sd=2",
                    "--seed", "1", "-q", "--db", str(db), "pipe", "--loops", "1000"],
                   check=True, capture_output=True)
    r = pmlab.results(db)
    assert set(r) == {"experiments", "configurations", "runs", "metrics"}
    runs = pa.table(r["runs"])
    metrics = pl.DataFrame(r["metrics"])
    assert runs.num_rows >= 1 and metrics.height >= 1
    exported = tmp_path / "x"
    subprocess.run([str(pm), "results", "export", "latest", "--db", str(db), "--format",
                    "parquet", "--output", str(exported)], check=True, capture_output=True)
    for name, key in (("experiment", "experiments"), ("runs", "runs"), ("metrics", "metrics")):
        (f,) = exported.glob(f"experiment-*-{name}.parquet")
        assert pq.read_table(f).to_pylist() == pa.table(r[key]).to_pylist(), name
