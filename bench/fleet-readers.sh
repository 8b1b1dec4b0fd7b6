#!/usr/bin/env bash
# Fleet readers against ingest (BENCHMARKS.md, "Fleet readers and ingest"; issue 27): ingest
# p50/p99 alone and with 64 concurrent /ui/fleet (then /api/v1/fleet) readers, 5,000 compared
# objects. About two minutes on 2 cores once built.
#   bench/fleet-readers.sh                      builds the release binary and runs
#   bench/fleet-readers.sh --bin PATH [ARGS]    runs against PATH (e.g. an older build, for A/B)
# ARGS go to bench/fleet_readers.py (--objects, --readers, --duration, --out, --label). Needs wrk
# (bench/run.sh installs it) and python3. Traffic goes to 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-$(pwd)/target}"
if [ "${1:-}" = "--bin" ]; then
  BIN="$2"; shift 2
else
  cargo build --release --locked --bin drift-sentinel
  BIN="$TARGET/release/drift-sentinel"
fi
exec python3 bench/fleet_readers.py --bin "$BIN" "$@"
