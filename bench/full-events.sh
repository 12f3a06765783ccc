# The full event set the reader benches record (sourced): the events of a real wakeup
# study (sched, csd/IPI, idle, haltpoll, softirq, timer and irq), not only sched_switch.
# record_full FILE EVENTS: a `pmlab run pipe` traced with that set (trace.dat v6, default
# buffer), re-recorded with a scaled loop count until it holds EVENTS within 25% (events
# per round trip vary with the machine's load). The two sides are pinned to CPUs 0 and 1:
# unpinned, a short run lands on one CPU or on two by the scheduler's choice, with 5-10x
# fewer events per round trip on one, and the loop count never converges. Needs root; takes the machine lock itself.

FULL_EVENTS=(
    -e sched:sched_switch -e sched:sched_waking -e sched:sched_wakeup
    -e csd:csd_function_entry -e ipi:ipi_send_cpu -e irq_vectors:call_function_single_entry
    -e power:cpu_idle -e power:guest_halt_poll_ns
    -e irq -e timer
)

record_full() {
    local out=$1 want=$2 pmlab=${PMLAB:-target/release/pmlab}
    local loops=$((want / 10)) n=0 try
    [ "$(id -u)" = 0 ] || { echo "recording $out needs root" >&2; exit 1; }
    mkdir -p "$(dirname "$out")"
    for try in 1 2 3 4; do
        echo "recording $out (pipe, $loops loops, full event set) ..." >&2
        flock /tmp/pmlab-live.lock "$pmlab" record "${FULL_EVENTS[@]}" -o "$out" -- \
            "$pmlab" run pipe --loops "$loops" --cpus 0,1 > /dev/null
        n=$("$pmlab" trace info --json "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"])')
        if [ $((n * 4)) -ge $((want * 3)) ] && [ $((n * 4)) -le $((want * 5)) ]; then
            return 0
        fi
        loops=$((loops * want / (n > 0 ? n : 1) + 1))
    done
    echo "warning: $out has $n events, not about $want" >&2
}
