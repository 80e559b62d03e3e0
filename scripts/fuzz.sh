#!/usr/bin/env bash
# Fuzzes warden's parsers and protocol handling (fuzz/, cargo fuzz, nightly).
#
#   scripts/fuzz.sh SECONDS [TARGET...]
#
# Runs each target (all of them by default) for SECONDS, starting from the
# committed seeds in fuzz/corpus/TARGET; what libFuzzer adds goes to
# fuzz/work/TARGET (ignored by git), a crashing input to
# fuzz/artifacts/TARGET. Prints executions per target. Exits non-zero when
# a target fails. Needs `rustup toolchain install nightly` and
# `cargo install cargo-fuzz --locked` (scripts/install-tools.sh).
# FUZZ_SANITIZER=address for ASan (slower; the fuzzed code is safe Rust,
# so the default is none).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/warden-target}/fuzz"
sanitizer=${FUZZ_SANITIZER:-none}
cd "$root/fuzz"
if [ $# -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
else
  targets=("$@")
fi
# The lock file is committed: refuse to change it (cargo fuzz has no --locked).
cargo +nightly fetch --locked --quiet
cargo +nightly fuzz build -s "$sanitizer" -a --codegen-units 16
failed=0
for t in "${targets[@]}"; do
  mkdir -p "work/$t" "corpus/$t"
  log=$(mktemp)
  if cargo +nightly fuzz run -s "$sanitizer" -a --codegen-units 16 "$t" "work/$t" "corpus/$t" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed=1
    tail -n 40 "$log" >&2
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  echo "fuzz: $t: $status, $execs executions in ${seconds}s"
  rm -f "$log"
done
exit "$failed"
