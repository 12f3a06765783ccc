# The full event set the reader benches record (sourced): the events of a real wakeup
# study (sched, csd/IPI, idle, haltpoll, softirq, timer and irq), not only sched_switch.
# record_full FILE LOOPS: a `pmlab run pipe` of LOOPS round trips traced with that set
# (trace.dat v6, default buffer). Needs root; run it under `flock /tmp/pmlab-live.lock`.

FULL_EVENTS=(
    -e sched:sched_switch -e sched:sched_waking -e sched:sched_wakeup
    -e csd:csd_function_entry -e ipi:ipi_send_cpu -e irq_vectors:call_function_single_entry
    -e power:cpu_idle -e power:guest_halt_poll_ns
    -e irq -e timer
)

record_full() {
    local out=$1 loops=$2 pmlab=${PMLAB:-target/release/pmlab}
    [ "$(id -u)" = 0 ] || { echo "recording $out needs root" >&2; exit 1; }
    mkdir -p "$(dirname "$out")"
    echo "recording $out (pipe, $loops loops, full event set) ..." >&2
    "$pmlab" record "${FULL_EVENTS[@]}" -o "$out" -- "$pmlab" run pipe --loops "$loops" > /dev/null
}
