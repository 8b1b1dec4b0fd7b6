#!/usr/bin/env bash
# Fuzzes drift-sentinel's input parsers with cargo-fuzz (libFuzzer).
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 seconds, every target
#   FUZZ_QUICK=1 scripts/fuzz.sh 20                      the short run scripts/test.sh makes in CI
#
# Default (long runs): optimised build with AddressSanitizer, on nightly (installed when missing),
# one target after the other.
# FUZZ_QUICK=1: unoptimised build without a sanitizer, which the stable toolchain builds in about
# one to two minutes on two cores (every flag cargo-fuzz then passes is stable), two targets at a time.
# Safe Rust needs no AddressSanitizer to find panics, aborts, hangs and runaway allocations, which
# is what the run looks for; the long runs add it for the unsafe code in dependencies.
# FUZZ_BACKGROUND=1 (scripts/test.sh, beside the tests): the build, which only needs CPU, at the
# lowest priority; the runs, which last a fixed time each, at normal priority. Run it in a
# session of its own (setsid): with the kernel's autogroups a session is a CPU group, whose own
# nice value is set too (lowered back for the runs where allowed, as for root).
#
# cargo-fuzz is installed when missing. New interesting inputs go to fuzz/corpus/<target>/ (not
# committed); a crash stops the run and leaves its input in fuzz/artifacts/<target>/. Keep a fixed
# crash as a regression seed by copying it into fuzz/seeds/<target>/: `cargo test` replays every
# seed (tests/it/fuzz_seeds.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(decode_request parse_object managed_fields diff config cel)

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "==> Installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi

if [ "${FUZZ_QUICK:-0}" = 1 ]; then
  TOOLCHAIN=()
  BUILD=(--dev --sanitizer none)
  PARALLEL=2
else
  if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "==> Installing the nightly toolchain (AddressSanitizer needs it)"
    rustup toolchain install nightly --profile minimal
  fi
  TOOLCHAIN=(+nightly)
  BUILD=(-O)
  PARALLEL=1
fi

NICE=()
if [ "${FUZZ_BACKGROUND:-0}" = 1 ]; then
  NICE=(nice -n 19)
  echo 19 > /proc/self/autogroup 2>/dev/null || true
fi
echo "==> Building the fuzz targets (${BUILD[*]})"
mkdir -p fuzz/target
if ! "${NICE[@]}" cargo "${TOOLCHAIN[@]}" fuzz build "${BUILD[@]}" >fuzz/target/build.log 2>&1; then
  tail -n 60 fuzz/target/build.log >&2
  echo "building the fuzz targets failed; the log is fuzz/target/build.log" >&2
  exit 1
fi
if [ "${FUZZ_BACKGROUND:-0}" = 1 ]; then
  echo 0 > /proc/self/autogroup 2>/dev/null || true
fi

run_target() {
  local target=$1 log="fuzz/target/fuzz-$1.log"
  mkdir -p "fuzz/corpus/$target"
  # The first directory collects new inputs; the committed seeds are only read.
  # -timeout: one input may take at most 10 s (a hang is a bug); -rss_limit_mb and
  # -malloc_limit_mb: memory per process and per allocation (an unbounded allocation is a bug).
  if ! cargo "${TOOLCHAIN[@]}" fuzz run "${BUILD[@]}" "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
      -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $target failed: the input is in fuzz/artifacts/$target/, the log in $log" >&2
    return 1
  fi
  echo "==> $target: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') inputs in ${SECONDS_PER_TARGET}s, no crash"
}

echo "==> Fuzzing ${#TARGETS[@]} targets for ${SECONDS_PER_TARGET}s each, ${PARALLEL} at a time"
failed=0
running=0
for target in "${TARGETS[@]}"; do
  run_target "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$PARALLEL" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
