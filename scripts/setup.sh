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
# OpenSSH's server for the remote (-H) tests, which start their own sshd on 127.0.0.1; the
# package's own service is stopped where systemd runs it (nothing listens elsewhere).
if [ ! -x /usr/sbin/sshd ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q openssh-server
  if [ -d /run/systemd/system ]; then systemctl disable --now ssh >/dev/null 2>&1 || true; fi
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
# The Python package (crates/pmlab-py) and the libraries its tests use it with; ansible-core
# for the fleet playbook's test (contrib/ansible).
py_need=()
for m in maturin:maturin pyarrow:pyarrow polars:polars pandas:pandas duckdb:duckdb pytest:pytest ansible:ansible-core; do
  python3 -c "import ${m%%:*}" >/dev/null 2>&1 || py_need+=("${m#*:}")
done
if [ ${#py_need[@]} -gt 0 ]; then
  python3 -m pip install -q --root-user-action=ignore "${py_need[@]}" ||
    python3 -m pip install -q --root-user-action=ignore --break-system-packages "${py_need[@]}"
fi
# Build the abi3 wheel into the shared target dir (incremental) and install it.
cd "$(dirname "$0")/.."
rm -f target/wheels/pmlab-*.whl
python3 -m maturin build --release -q -m crates/pmlab-py/Cargo.toml -o target/wheels
python3 -m pip install -q --root-user-action=ignore --force-reinstall --no-deps target/wheels/pmlab-*.whl ||
  python3 -m pip install -q --root-user-action=ignore --break-system-packages --force-reinstall --no-deps target/wheels/pmlab-*.whl
