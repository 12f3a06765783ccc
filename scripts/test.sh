#!/usr/bin/env bash
# The test command: every unit and integration test, as root on a machine with tracefs, cpuidle
# and hotplug, then how many tests were skipped and why (a skipped test never counts as passed).
# PMLAB_TEST_NO_ROOT=1 runs the integration tests as `nobody`, to see what needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
# Idempotent: installs the peers the tests compare against. .ci/run has just run it (its
# checks alone take 2 CPU s and up to 15 s here: eight Python imports) and says so.
[ -n "${PMLAB_SETUP_DONE:-}" ] || bash scripts/setup.sh
# The Python package (crates/pmlab-py), built into the shared target dir and installed for its
# tests; the main job never needs it, so set-up leaves it to here.
# Each phase's wall time, printed at the end with the slowest tests.
phases=()
t=$SECONDS
rm -f target/wheels/pmlab-*.whl
python3 -m maturin build --release -q -m crates/pmlab-py/Cargo.toml -o target/wheels
python3 -m pip install -q --root-user-action=ignore --force-reinstall --no-deps target/wheels/pmlab-*.whl ||
  python3 -m pip install -q --root-user-action=ignore --break-system-packages --force-reinstall --no-deps target/wheels/pmlab-*.whl
# The test build reuses the binary's: a crate of the binary's build that the test build
# compiles again (a feature only tests or only some members turn on: docs/development.md)
# is named here, with how many.
phases+=("python package: $((SECONDS - t)) s")
t=$SECONDS
built=$(mktemp -d)
cargo build --release --bins --message-format=json-render-diagnostics >"$built/bins"
cargo test --release --workspace --no-run --message-format=json-render-diagnostics >"$built/tests"
python3 - "$built/bins" "$built/tests" <<'EOF_PY'
import json, sys
def artifacts(path):
    for line in open(path):
        m = json.loads(line) if line.startswith("{") else {}
        if m.get("reason") == "compiler-artifact" and not m["profile"]["test"]:
            yield (m["package_id"], m["target"]["name"]), m["fresh"]
bins = {k for k, _ in artifacts(sys.argv[1])}
again = sorted({k[1] for k, fresh in artifacts(sys.argv[2]) if k in bins and not fresh})
print(f"test build: {len(again)} of the binary's {len(bins)} crates compiled again",
      (": " + " ".join(again)) if again else "", file=sys.stderr)
EOF_PY
rm -rf "$built"
phases+=("test build: $((SECONDS - t)) s")
t=$SECONDS

logs=$(mktemp -d)
export PMLAB_TEST_SKIP_LOG="$logs/skips"
: >"$PMLAB_TEST_SKIP_LOG"
# Each integration test's wall time (tests/support/harness.rs): the slowest are printed.
export PMLAB_TEST_TIME_LOG="$logs/times"
: >"$PMLAB_TEST_TIME_LOG"
# How many tests were skipped and why, printed however the run ends: the `ignored` counts of
# cargo test's closing lines, pytest's `skipped`, and the reasons the harness and pytest gave.
summary() {
  local status=$? rust py
  # A count that finds nothing (no pytest skip) must not turn a passing run into a failure.
  set +e +o pipefail
  rust=$(sed -nE 's/^test result: .* ([0-9]+) ignored;.*/\1/p' "$logs/cargo" 2>/dev/null | awk '{s += $1} END {print s + 0}')
  py=$(grep -oE '[0-9]+ skipped' "$logs/pytest" 2>/dev/null | tail -1 | cut -d' ' -f1)
  printf 'phase %s\n' "${phases[@]}"
  echo "slowest tests (s):"
  sort -rn "$PMLAB_TEST_TIME_LOG" 2>/dev/null | head -12 | sed 's/^/  /'
  echo "skipped: $((rust + ${py:-0}))"
  sed 's/^/  /' "$PMLAB_TEST_SKIP_LOG"
  # libtest's own `#[ignore = "..."]` tests (none today) and pytest's skips, with reasons.
  sed -nE 's/^test (.*) \.\.\. ignored, (.*)$/  \1: \2/p' "$logs/cargo" 2>/dev/null
  sed -nE 's/^SKIPPED \[[0-9]+\] (.*)$/  pytest: \1/p' "$logs/pytest" 2>/dev/null
  rm -rf "$logs"
  exit "$status"
}
trap summary EXIT
cargo test --release --workspace -- --test-threads=1 | tee "$logs/cargo"
phases+=("cargo test: $((SECONDS - t)) s")
t=$SECONDS
# The Python package's tests (the wheel installed above), against the binary built above.
python3 -m pytest -q -rs crates/pmlab-py/tests | tee "$logs/pytest"
phases+=("pytest: $((SECONDS - t)) s")
