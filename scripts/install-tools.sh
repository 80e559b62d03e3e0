#!/usr/bin/env bash
# Installs the optional tools around the build (each compiles from source;
# cargo-deny takes a long while on 2 cores):
#   cargo-deny  licenses, bans, sources, advisories (deny.toml; .ci/run
#               runs it when installed)
#   cargo-fuzz  + the nightly toolchain, for scripts/fuzz.sh
# Idempotent: what is installed already is skipped.
#   scripts/install-tools.sh [deny] [fuzz]     (default: both)
set -euo pipefail
want=("$@")
[ ${#want[@]} -eq 0 ] && want=(deny fuzz)
for tool in "${want[@]}"; do
  case "$tool" in
    deny)
      command -v cargo-deny >/dev/null 2>&1 \
        || cargo install cargo-deny --locked --version '^0.20'
      ;;
    fuzz)
      rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
      command -v cargo-fuzz >/dev/null 2>&1 \
        || cargo install cargo-fuzz --locked --version '^0.13'
      ;;
    *) echo "install-tools: unknown tool '$tool' (deny, fuzz)" >&2; exit 2 ;;
  esac
done
