# Shared helpers of the workload bench scripts (sourced): pmlab binary, haltpoll save/restore, medians.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PMLAB="${PMLAB:-$REPO/target/release/pmlab}"
HALTPOLL_NS=/sys/module/haltpoll/parameters/guest_halt_poll_ns

ensure_pmlab() {
    if [[ ! -x "$PMLAB" ]]; then
        (cd "$REPO" && cargo build --release -p pmlab-cli >&2)
    fi
}

# Save haltpoll's poll limit now; put it back on every exit path.
haltpoll_save() {
    if [[ -w "$HALTPOLL_NS" ]]; then
        HALTPOLL_ORIGINAL="$(cat "$HALTPOLL_NS")"
        trap 'haltpoll_restore' EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
        trap 'exit 129' HUP
    fi
}

haltpoll_restore() {
    if [[ -n "${HALTPOLL_ORIGINAL:-}" ]]; then
        echo "$HALTPOLL_ORIGINAL" > "$HALTPOLL_NS"
    fi
}

haltpoll_set() {
    if [[ ! -w "$HALTPOLL_NS" ]]; then
        echo "bench: $HALTPOLL_NS is not writable (needs root and the haltpoll cpuidle driver)" >&2
        exit 1
    fi
    echo "$1" > "$HALTPOLL_NS"
    # Restart every CPU's adaptive window, as pmlab's knob writes do: the governor changes a
    # window only when that CPU halts, so the previous setting's windows could go on polling.
    local gov=/sys/devices/system/cpu/cpuidle
    if [[ "$(cat $gov/current_governor 2>/dev/null)" == haltpoll ]]; then
        local other
        other=$(tr ' ' '\n' < $gov/available_governors | grep -v -x -m1 haltpoll || true)
        if [[ -n "$other" ]]; then
            echo "$other" > $gov/current_governor
            echo haltpoll > $gov/current_governor
        fi
    fi
}

# The value of metric NAME in `pmlab run --json` output read from stdin.
# stdin is read to its end by the shell before python starts: a python started alongside
# pmlab spends its ~30 ms start-up on one CPU while pmlab measures, which puts both pipe
# tasks on the other CPU (pipe runs at 4-6 instead of ~11 µs/op for 20000 loops).
json_metric() {
    local json
    IFS= read -r -d '' json || true
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(next(m["value"] for m in d["metrics"] if m["name"]==sys.argv[1]))' "$1" <<<"$json"
}

# Median of the numbers given as arguments.
median() {
    printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.6g\n", (a[NR/2]+a[NR/2+1])/2}'
}

# a / b with 4 decimals.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {printf "%.4f\n", a/b}'
}
