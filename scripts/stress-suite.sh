#!/usr/bin/env bash
# Runs the whole test suite twice at once, N times: the flake hunt of
# issue 16 ("three full-suite runs under double load").
#
#   scripts/stress-suite.sh N [NAME...]
#
# Builds the test executables once (`cargo test --no-run`), then each run
# starts two copies of the suite side by side, each running every test
# executable in turn, as `cargo test` would (two `cargo test` processes
# would serialise on cargo's build lock instead of loading the machine).
# NAME... builds and runs only those integration tests (tests/NAME.rs; to
# try the script on a few). Doc tests are not run (they need rustdoc;
# `cargo test --doc` covers them). Needs jq; test dependencies as for
# scripts/test.sh (scripts/test-deps.sh).
#
# Prints, per run, each failing executable and the tests it reported
# FAILED; logs stay in $STRESS_LOG_DIR (default: a new temp folder).
# Exits non-zero when any run had a failure. STRESS_TIMEOUT (seconds,
# default 1200) bounds one executable, so a hang is a failure, not a wait.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:?usage: scripts/stress-suite.sh N [NAME...]}
shift
only=("$@")
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/warden-target}"
limit=${STRESS_TIMEOUT:-1200}
logs=${STRESS_LOG_DIR:-$(mktemp -d -t warden-stress-XXXXXX)}
mkdir -p "$logs"
cd "$root"

# Each test executable with its package folder (its working directory
# under `cargo test`), one "EXE<TAB>DIR<TAB>NAME" line each.
list="$logs/executables.tsv"
targets=(--workspace)
if [ ${#only[@]} -gt 0 ]; then
  targets=()
  for name in "${only[@]}"; do targets+=(--test "$name"); done
fi
cargo test --locked "${targets[@]}" --no-run --message-format=json 2>"$logs/build.log" \
  | jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
           | [.executable, (.manifest_path | sub("/Cargo.toml$"; "")), .target.name] | @tsv' \
  | sort -u >"$list.all"
if [ ${#only[@]} -gt 0 ]; then
  : >"$list"
  for name in "${only[@]}"; do
    awk -F'\t' -v n="$name" '$3 == n' "$list.all" >>"$list"
  done
else
  cp "$list.all" "$list"
fi
count=$(wc -l <"$list")
[ "$count" -gt 0 ] || { echo "stress-suite: no test executables (build log: $logs/build.log)" >&2; exit 2; }
echo "stress-suite: $count test executables, $runs run(s) of two suites at once; logs in $logs"

# One copy of the suite: every executable in turn; a line per failure.
suite() {
  local out=$1
  mkdir -p "$out"
  while IFS=$'\t' read -r exe dir name; do
    local log
    log="$out/$(basename "$exe").log"
    local rc=0
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" timeout --kill-after=30 "$limit" "$exe") \
      >"$log" 2>&1 </dev/null || rc=$?
    if [ "$rc" -ne 0 ]; then
      local failed why
      failed=$(grep -E '^test .* \.\.\. FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/' | paste -sd, - || true)
      why="exit $rc"
      [ "$rc" -eq 124 ] && why="timed out after ${limit}s"
      echo "$name: ${failed:-$why} ($log)" >>"$out/failures"
    fi
  done <"$list"
}

status=0
for run in $(seq 1 "$runs"); do
  started=$(date +%s)
  suite "$logs/run$run-a" &
  a=$!
  suite "$logs/run$run-b" &
  b=$!
  wait "$a" "$b"
  took=$(($(date +%s) - started))
  fails=0
  for side in a b; do
    f="$logs/run$run-$side/failures"
    if [ -s "$f" ]; then
      fails=$((fails + $(wc -l <"$f")))
      sed "s/^/  run $run ($side): /" "$f"
    fi
  done
  echo "stress-suite: run $run: $fails failing executable(s) in ${took}s"
  [ "$fails" -eq 0 ] || status=1
done
exit "$status"
