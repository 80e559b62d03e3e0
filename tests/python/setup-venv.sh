#!/usr/bin/env bash
# Creates (or reuses) a venv with the PyPI MCP server `mcp-server-time`,
# used by tests/sandbox_runs_real_servers.rs. Kept outside the clone so CI
# runs reuse it. Prints the venv path on stdout.
#
#   WARDEN_TEST_VENV   venv folder (default: ${XDG_CACHE_HOME:-$HOME/.cache}/warden-tests/venv-mcp-server-time)
#   PYTHON             interpreter to build it with (default: python3)
set -euo pipefail
VENV="${WARDEN_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/warden-tests/venv-mcp-server-time}"
PY="${PYTHON:-python3}"
PIN="mcp-server-time==2026.10.19"
if [ -x "$VENV/bin/mcp-server-time" ] && [ -f "$VENV/.warden-pin" ] && [ "$(cat "$VENV/.warden-pin")" = "$PIN" ]; then
  echo "$VENV"
  exit 0
fi
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV" >&2
"$VENV/bin/pip" install --quiet --disable-pip-version-check "$PIN" >&2
echo "$PIN" > "$VENV/.warden-pin"
echo "$VENV"
