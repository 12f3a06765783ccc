#!/usr/bin/env bash
# One-time machine set-up. pmlab itself builds first, in the background, while apt and pip
# fetch the peer tools the tests and benches compare against: the main job (README's first
# command) then starts at once. The Python wheel is left to scripts/test.sh. The installs run
# at a lower CPU priority (nice): the build is what the main job waits for.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust (rustup) first" >&2
  exit 1
fi
cargo build --release --bin pmlab &
build=$!
need=()
# man-db renders the man pages installed below; jq is in the documentation's examples.
for p in trace-cmd:trace-cmd cyclictest:rt-tests stress-ng:stress-ng perf:linux-perf hyperfine:hyperfine chromium:chromium tmux:tmux man:man-db jq:jq; do
  command -v "${p%%:*}" >/dev/null 2>&1 || need+=("${p#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  nice -n 10 apt-get install -y -q "${need[@]}"
fi
# OpenSSH's server for the remote (-H) tests, which start their own sshd on 127.0.0.1; the
# package's own service is stopped where systemd runs it (nothing listens elsewhere).
if [ ! -x /usr/sbin/sshd ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  nice -n 10 apt-get install -y -q openssh-server
  if [ -d /run/systemd/system ]; then systemctl disable --now ssh >/dev/null 2>&1 || true; fi
fi
# The boot lab's QEMU, busybox and default guest kernel (scripts/guest.sh), fetched in the
# background while pip runs: it needs apt's lock, which the peers' install has released.
nice -n 10 bash scripts/guest.sh &
guest=$!
# Independent Parquet readers (pyarrow, duckdb), Perfetto's protobuf classes (no trace
# processor download) for tests/perfetto_check.py, the Python package's build tool and the
# libraries its tests use it with, and ansible-core for the fleet playbook's test.
py_need=()
for m in pyarrow:pyarrow duckdb:duckdb perfetto.protos.perfetto.trace.perfetto_trace_pb2:perfetto \
  maturin:maturin polars:polars pandas:pandas pytest:pytest ansible:ansible-core; do
  python3 -c "import ${m%%:*}" >/dev/null 2>&1 || py_need+=("${m#*:}")
done
if [ ${#py_need[@]} -gt 0 ]; then
  nice -n 10 python3 -m pip install -q --root-user-action=ignore "${py_need[@]}" ||
    nice -n 10 python3 -m pip install -q --root-user-action=ignore --break-system-packages "${py_need[@]}"
fi
wait "$guest" || echo "setup: the boot lab's guest could not be set up (pmlab boot says what is missing)" >&2
wait "$build"
# Man pages and shell completions, generated from the CLI's own definitions, installed where
# the machine has the standard directories (the admin's /usr/local side of each).
pmlab=target/release/pmlab
install_doc() { # DIR FILE COMMAND...: writes FILE in DIR, or says why not
  local dir=$1 file=$2
  shift 2
  if mkdir -p "$dir" && "$pmlab" "$@" >"$dir/$file.tmp" && mv "$dir/$file.tmp" "$dir/$file"; then
    return 0
  fi
  rm -f "$dir/$file.tmp"
  echo "setup: could not install $dir/$file" >&2
}
if [ -d /usr/local/share/man ]; then
  mkdir -p /usr/local/share/man/man1 && "$pmlab" man /usr/local/share/man/man1 ||
    echo "setup: could not install the man pages" >&2
fi
[ -d /usr/share/bash-completion ] &&
  install_doc /usr/local/share/bash-completion/completions pmlab completions bash
[ -d /usr/share/zsh ] && install_doc /usr/local/share/zsh/site-functions _pmlab completions zsh
[ -d /usr/share/fish ] && install_doc /usr/local/share/fish/vendor_completions.d pmlab.fish completions fish
true
