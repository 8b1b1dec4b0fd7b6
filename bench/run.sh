#!/usr/bin/env bash
# The benchmark (BENCHMARKS.md): one command, about 5 minutes on 2 cores once built.
#   bench/run.sh              full run; report in target/bench/report.{md,json}
#   BENCH_QUICK=1 bench/run.sh  a short smoke run (seconds per phase, not figures to quote)
#   bench/run.sh --phases flatness,large   only some phases (throughput, memory, cold, drift,
#                                          flatness, large); any other bench-loadgen run option too
# Installs wrk (Debian) when missing, builds the release binary and the benchmark programs
# (bench-ceiling, bench-loadgen), then runs every phase. Traffic goes to 127.0.0.1 only; every
# process it starts is stopped by pid. Not part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

if ! command -v wrk >/dev/null 2>&1; then
  echo "==> Installing wrk (Debian)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wrk
fi

echo "==> cargo build --release (drift-sentinel, bench-ceiling, bench-loadgen)"
cargo build --release --locked --bin drift-sentinel --example bench-ceiling --example bench-loadgen

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="$TARGET/bench"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/drift-sentinel-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

ARGS=()
if [ "${BENCH_QUICK:-}" = "1" ]; then
  ARGS=(--duration 3 --latency-duration 2 --objects 20000 --cold-runs 5 --drift-samples 20
    --flat-sizes 1000,10000 --flat-duration 3 --rounds 2 --large-events 2000)
fi

timeout 900 "$TARGET/release/examples/bench-loadgen" run \
  --bin "$TARGET/release/drift-sentinel" \
  --ceiling "$TARGET/release/examples/bench-ceiling" \
  --lua "$ROOT/bench/events.lua" \
  --work "$WORK" --out "$OUT" "${ARGS[@]}" "$@"
echo "==> Report: $OUT/report.md ($OUT/report.json)"
