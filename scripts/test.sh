#!/usr/bin/env bash
# Runs the whole test suite, installing what the tests need first (idempotently).
#   scripts/test.sh          everything: lint, Rust tests, process and interop tests
#   FUZZ_SECONDS=10 scripts/test.sh   also fuzz every target for 10 s (nightly, cargo-fuzz)
# Used as is by CI (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

log() { printf '\n==> %s\n' "$*"; }

# --- System packages (Debian). Installed only when missing. -------------------------------------
# prometheus: promtool, for the alerting rules in k8s/monitoring/. kubectl builds k8s/ with its
# built-in kustomize; when no kubectl is installed, Debian's kubernetes-client provides one (its
# kustomize is old, v2.0.3, and k8s/kustomization.yaml is kept simple enough for it).
# prometheus-alertmanager: the real Alertmanager the alertmanager channel is tested against.
# chromium: the headless browser that loads the dashboard and takes a screenshot.
APT_PACKAGES=(prometheus prometheus-alertmanager chromium)
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

# --- Rust toolchain components --------------------------------------------------------------------
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy"
cargo clippy --all-targets --quiet -- -D warnings

log "cargo test (unit, router, engine, store)"
cargo test --quiet 2>&1

log "Building the binary for process tests"
cargo build --quiet
export DRIFT_SENTINEL_BIN="$ROOT/target/debug/drift-sentinel"

log "Process and interop tests (pytest)"
cd "$ROOT/tests/python"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider
cd "$ROOT"

# --- Fuzzing ----------------------------------------------------------------------------------------
# `cargo test` above replays the committed seed corpus (fuzz/seeds/) through the fuzz targets on
# stable. Real fuzzing needs nightly and cargo-fuzz, and building the targets with sanitizers takes
# several minutes on two cores, so it runs when asked: FUZZ_SECONDS=10 scripts/test.sh (per target;
# installs nightly and cargo-fuzz when missing). Longer runs: scripts/fuzz.sh (fuzz/README.md).
if [ "${FUZZ_SECONDS:-0}" -gt 0 ]; then
  log "Fuzzing every target for ${FUZZ_SECONDS}s"
  scripts/fuzz.sh "$FUZZ_SECONDS"
fi
