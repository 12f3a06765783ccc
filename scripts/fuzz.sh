#!/usr/bin/env bash
# Fuzz the trace.dat reader (`dat`) and the ring-buffer page decoder (`page`) with cargo-fuzz.
# Usage: scripts/fuzz.sh [dat|page] [SECONDS]   (default: dat, 600 s). Needs nightly Rust and
# cargo-fuzz (installed here when missing). The corpus is seeded from tests/fixtures and,
# for `page`, from the fixtures' data pages; crashes land in fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${1:-dat}
SECONDS_TO_RUN=${2:-600}
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz --locked
CORPUS=fuzz/corpus/$TARGET
mkdir -p "$CORPUS"
case $TARGET in
    dat)
        for f in tests/fixtures/*.dat; do cp -n "$f" "$CORPUS/"; done
        ;;
    page)
        # one seed per fixture: a selector byte (little-endian, 8-byte long, 4 KiB pages)
        # followed by the file's last 16 KiB, which holds data pages
        for f in tests/fixtures/*.dat; do
            { printf '\0'; tail -c 16384 "$f"; } > "$CORPUS/$(basename "$f" .dat).page"
        done
        ;;
    *) echo "unknown target $TARGET (dat or page)" >&2; exit 2 ;;
esac
exec cargo +nightly fuzz run "$TARGET" -- \
    -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=4096 -max_len=4194304
