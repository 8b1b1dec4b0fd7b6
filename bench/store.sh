#!/usr/bin/env bash
# The PostgreSQL store next to SQLite (BENCHMARKS.md, "PostgreSQL HA and shards"): about 3 minutes
# on 2 cores once built. Starts a throwaway PostgreSQL server (initdb in a temporary directory,
# Unix socket only, default durability settings: fsync and synchronous_commit on), runs
# `bench-loadgen store` against it and SQLite, and stops it. Report: target/bench/store-report.json.
#   bench/store.sh                 full run (100,000 objects at takeover)
#   BENCH_QUICK=1 bench/store.sh   a short smoke run
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
if [ -z "$PG_BINDIR" ] || [ ! -x "$PG_BINDIR/initdb" ]; then
  echo "PostgreSQL server binaries not found: install Debian's postgresql package or set PG_BINDIR" >&2
  exit 1
fi

echo "==> cargo build --release (drift-sentinel, bench-ceiling, bench-loadgen)"
cargo build --release --locked --bin drift-sentinel --example bench-ceiling --example bench-loadgen

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="$TARGET/bench"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/drift-sentinel-store.XXXXXX")
PG="$WORK/pg"
chmod 755 "$WORK"
mkdir -p "$PG/sock" "$OUT"
RUN=()
if [ "$(id -u)" -eq 0 ]; then
  chown -R postgres:postgres "$PG"
  RUN=(runuser -u postgres --)
fi
stop_pg() {
  "${RUN[@]}" "$PG_BINDIR/pg_ctl" -D "$PG/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap stop_pg EXIT
"${RUN[@]}" "$PG_BINDIR/initdb" -D "$PG/data" --auth=trust -U postgres --encoding=UTF8 --locale=C.UTF-8 >/dev/null
"${RUN[@]}" "$PG_BINDIR/pg_ctl" -D "$PG/data" -l "$PG/log" -w \
  -o "-p 5432 -k $PG/sock -c listen_addresses='' -c shared_buffers=256MB" start >/dev/null
for db in throughput takeover; do
  "${RUN[@]}" "$PG_BINDIR/createdb" -h "$PG/sock" -p 5432 -U postgres "$db"
done
url() { echo "postgres:///$1?host=$PG/sock&port=5432&user=postgres"; }

ARGS=()
if [ "${BENCH_QUICK:-}" = "1" ]; then
  ARGS=(--duration 3 --latency-duration 2 --objects 20000)
fi
timeout 1200 "$TARGET/release/examples/bench-loadgen" store \
  --bin "$TARGET/release/drift-sentinel" \
  --ceiling "$TARGET/release/examples/bench-ceiling" \
  --lua "$ROOT/bench/events.lua" \
  --work "$WORK/run" --out "$OUT" \
  --throughput-url "$(url throughput)" --takeover-url "$(url takeover)" "${ARGS[@]}" "$@"
echo "==> Report: $OUT/store-report.json"
