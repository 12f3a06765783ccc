#!/usr/bin/env bash
# The test command: every unit and integration test, as root on a machine with tracefs, cpuidle and hotplug.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh   # idempotent: installs the peers the tests compare against
cargo build --release --bins
cargo test --release --workspace -- --test-threads=1
# The Python package's tests (the wheel setup.sh installed), against the binary built above.
python3 -m pytest -q crates/pmlab-py/tests
