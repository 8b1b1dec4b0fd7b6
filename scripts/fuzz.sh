#!/usr/bin/env bash
# Fuzzes drift-sentinel's input parsers with cargo-fuzz (libFuzzer + AddressSanitizer).
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 seconds, every target
# Installs what it needs when missing (a nightly toolchain, cargo-fuzz). The first build of the
# targets compiles the crate and its dependencies with sanitizers: several minutes on two cores.
# New interesting inputs go to fuzz/corpus/<target>/ (not committed); a crash stops the run and
# leaves its input in fuzz/artifacts/<target>/. Keep a fixed crash as a regression seed by copying
# it into fuzz/seeds/<target>/: `cargo test` replays every seed (tests/it/fuzz_seeds.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(decode_request parse_object managed_fields diff config)

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "==> Installing the nightly toolchain (cargo-fuzz needs it)"
  rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "==> Installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

for target in "${TARGETS[@]}"; do
  echo "==> Fuzzing $target for ${SECONDS_PER_TARGET}s"
  mkdir -p "fuzz/corpus/$target"
  # -timeout: one input may take at most 10 s (a hang is a bug); -rss_limit_mb and
  # -malloc_limit_mb: memory per process and per allocation (an unbounded allocation is a bug).
  log="fuzz/target/fuzz-$target.log"
  mkdir -p fuzz/target
  if ! cargo +nightly fuzz run -O "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
      -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $target failed: the input is in fuzz/artifacts/$target/, the log in $log" >&2
    exit 1
  fi
  grep -E '^(Done|stat::(number_of_executed_units|peak_rss_mb))' "$log" || true
done
