#!/usr/bin/env bash
# One-time machine set-up: peer tools the tests compare against, and the Rust toolchain parts.
set -euo pipefail
need=()
for p in trace-cmd:trace-cmd cyclictest:rt-tests stress-ng:stress-ng perf:linux-perf hyperfine:hyperfine chromium:chromium; do
  command -v "${p%%:*}" >/dev/null 2>&1 || need+=("${p#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q "${need[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust (rustup) first" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# Independent Parquet readers for the pmlab_analysis::parquet test.
if ! python3 -c 'import pyarrow, duckdb' >/dev/null 2>&1; then
  python3 -m pip install -q --root-user-action=ignore pyarrow duckdb ||
    python3 -m pip install -q --root-user-action=ignore --break-system-packages pyarrow duckdb
fi
# Perfetto's protobuf classes (no trace processor download) for tests/perfetto_check.py.
if ! python3 -c 'from perfetto.protos.perfetto.trace import perfetto_trace_pb2' >/dev/null 2>&1; then
  python3 -m pip install -q --root-user-action=ignore perfetto ||
    python3 -m pip install -q --root-user-action=ignore --break-system-packages perfetto
fi
