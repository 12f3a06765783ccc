"""pmlab from Python: trace.dat events, pmlab's analyses and its result store as Arrow tables.

    import pmlab
    t = pmlab.open("trace.dat")            # headers only; events decode on first use
    t.events                               # {"sched_switch": 396, ...}
    df = t.polars("sched_switch")          # or t.pandas(...), pyarrow.table(t.arrow(...))
    pmlab.analyze("trace.dat", only=["idle"])["idle_states"].to_pandas()
    pmlab.whatif("trace.dat", values=["50us", "200us"])["values"]   # polling, predicted
    t.to_perfetto("trace.pftrace")         # open at https://ui.perfetto.dev

Tables implement the Arrow C stream interface (``__arrow_c_stream__``): pyarrow,
polars, pandas (through pyarrow) and DuckDB take them without a copy.
"""

from ._pmlab import KINDS, Assignment, PmlabError, Table, Trace, analyze, open, results, whatif

__all__ = [
    "open",
    "analyze",
    "results",
    "whatif",
    "Trace",
    "Table",
    "Assignment",
    "PmlabError",
    "KINDS",
]
