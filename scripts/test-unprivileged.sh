#!/usr/bin/env bash
# Runs the sandbox tests as an unprivileged user (uid 65534 unless
# UNPRIV_UID says otherwise), the way a non-root developer or a CI runner
# runs warden: user namespaces instead of root, no writable cgroups.
#
#   sudo scripts/test-unprivileged.sh [TEST-BINARY-FILTER]
#
# As root it installs the test servers, builds the test binaries into a
# world-readable target folder (UNPRIV_TARGET, default
# /var/tmp/warden-unpriv-target: /root is not readable by other users),
# builds a venv of the PyPI test server with the system python there, then
# runs every tests/sandbox_*.rs binary and the warden-sandbox unit tests
# through `setpriv --reuid --regid --clear-groups` with a scratch HOME and
# TMPDIR. Tests that need root say so ("SKIPPED …") instead of passing
# silently; the summary lists them. Exit status: 0 when every binary passed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
UNPRIV_UID="${UNPRIV_UID:-65534}"
TARGET="${UNPRIV_TARGET:-/var/tmp/warden-unpriv-target}"
FILTER="${1:-}"
if [ "$(id -u)" != 0 ]; then
  echo "test-unprivileged: run as root (it builds as root, then drops to uid $UNPRIV_UID)" >&2
  exit 1
fi
command -v setpriv >/dev/null || { echo "test-unprivileged: setpriv (util-linux) missing" >&2; exit 1; }
start=$(date +%s)

# Every folder on the way to the sources and the target must be searchable.
for d in "$root" "$(dirname "$TARGET")"; do
  p="$d"
  while [ "$p" != / ]; do
    if ! setpriv --reuid="$UNPRIV_UID" --regid="$UNPRIV_UID" --clear-groups test -x "$p"; then
      echo "test-unprivileged: uid $UNPRIV_UID cannot enter $p" >&2
      exit 1
    fi
    p=$(dirname "$p")
  done
done

# 1. Test servers: npm ones in tests/npm (world-readable), and a venv made
#    with the system python inside the target folder (root's pyenv is not
#    readable by other users).
scripts/test-deps.sh
mkdir -p "$TARGET"
venv="$TARGET/venv-mcp-server-time"
WARDEN_TEST_VENV="$venv" PYTHON=/usr/bin/python3 tests/python/setup-venv.sh >/dev/null

# 2. Build the test binaries; collect their paths.
build_start=$(date +%s)
list=$(mktemp)
CARGO_TARGET_DIR="$TARGET" cargo test --locked --no-run --message-format=json \
    --test 'sandbox_*' -p warden --lib -p warden-sandbox 2>/dev/null \
  | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        t = m["target"]
        if t["name"].startswith("sandbox_") or t["name"] == "warden_sandbox":
            print(t["name"], m["executable"])
' | sort -u > "$list"
build_s=$(( $(date +%s) - build_start ))
chmod -R a+rX "$TARGET"

# 3. Run them as the unprivileged user.
scratch=$(mktemp -d /tmp/warden-unpriv-XXXXXX)
chmod 0755 "$scratch"
trap 'rm -rf "$scratch" "$list"' EXIT
passed=(); failed=(); skipped_lines=()
run_start=$(date +%s)
while read -r name exe; do
  [ -n "$FILTER" ] && [[ "$name" != *"$FILTER"* ]] && continue
  home="$scratch/$name/home"; tmp="$scratch/$name/tmp"; log="$scratch/$name.log"
  mkdir -p "$home" "$tmp"
  chown -R "$UNPRIV_UID:$UNPRIV_UID" "$scratch/$name"
  echo "== $name (uid $UNPRIV_UID)" >&2
  if (cd "$scratch/$name" && setpriv --reuid="$UNPRIV_UID" --regid="$UNPRIV_UID" --clear-groups \
        env -i HOME="$home" TMPDIR="$tmp" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
        WARDEN_TEST_VENV="$venv" RUST_BACKTRACE=1 \
        "$exe" --test-threads=2 --show-output) >"$log" 2>&1; then
    passed+=("$name")
  else
    failed+=("$name")
    tail -n 60 "$log" >&2
  fi
  grep -E '^(test .* \.\.\. |test result:)' "$log" | grep -v ' ok$' >&2 || true
  while IFS= read -r l; do skipped_lines+=("$name: $l"); done < <(grep -o 'SKIPPED .*' "$log" || true)
done < "$list"
run_s=$(( $(date +%s) - run_start ))

echo
echo "unprivileged run (uid $UNPRIV_UID): ${#passed[@]} test binaries passed, ${#failed[@]} failed"
for f in "${failed[@]}"; do echo "  FAILED $f"; done
echo "skipped for lack of privilege: ${#skipped_lines[@]}"
for s in "${skipped_lines[@]}"; do echo "  $s"; done
echo "time: build ${build_s}s, tests ${run_s}s, total $(( $(date +%s) - start ))s"
[ "${#failed[@]}" = 0 ]
