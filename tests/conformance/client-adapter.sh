#!/bin/sh
# warden as the client in the official MCP conformance suite's client
# scenarios (npm @modelcontextprotocol/conformance):
#
#   conformance client --command tests/conformance/client-adapter.sh --scenario NAME
#
# The suite starts its test server and runs this script with the server's
# URL as the LAST argument and the scenario's name in
# MCP_CONFORMANCE_SCENARIO. The script writes a throw-away warden
# configuration for that URL (one streamable-HTTP server, `srv`, its tools
# allowed) and runs the warden binary (WARDEN_BIN, else `warden` on PATH) the
# way the scenario expects. HOME and WARDEN_CONFIG_DIR are the caller's
# (tests/conformance_client.rs gives private ones); pins go to a lock file
# in the throw-away folder. WARDEN_CONFORMANCE_AUDIT, when set, is where the
# audit log is kept (for the test to verify); else it is thrown away too.
set -eu

for url in "$@"; do :; done
if [ -z "${url:-}" ]; then
    echo "client-adapter.sh: no server URL (the suite passes it as the last argument)" >&2
    exit 2
fi
warden=${WARDEN_BIN:-warden}
dir=$(mktemp -d "${TMPDIR:-/tmp}/warden-conformance.XXXXXX")
trap 'rm -rf "$dir"' EXIT
audit=${WARDEN_CONFORMANCE_AUDIT:-$dir/audit.jsonl}

cat >"$dir/warden.json" <<JSON
{
  "mcpServers": {"srv": {"type": "http", "url": "$url", "timeout": 20}},
  "permissions": {"allow": ["mcp__srv__*"]},
  "audit": {"path": "$audit"}
}
JSON

w() {
    "$warden" --config "$dir/warden.json" --lock "$dir/pins.json" --workspace "$dir" "$@"
}

scenario=${MCP_CONFORMANCE_SCENARIO:-}
case "$scenario" in
initialize)
    # Connecting is the scenario: initialize, then list tools.
    w --ci --json mcp status >"$dir/status.json"
    grep -q '"connected"' "$dir/status.json" || {
        cat "$dir/status.json" >&2
        exit 1
    }
    ;;
tools_call)
    w --ci call srv add_numbers --args '{"a": 5, "b": 3}'
    ;;
elicitation-sep1034-client-defaults)
    # The person's answer, given in advance: accept, filling in nothing,
    # so every field takes the schema's default (SEP-1034).
    echo '[{"action": "accept", "content": {}, "server": "srv"}]' >"$dir/answers.json"
    w call srv test_client_elicitation_defaults --answers "$dir/answers.json"
    ;;
sse-retry)
    # The server closes the call's SSE stream; the answer arrives on a
    # GET stream resumed with Last-Event-ID after the server's `retry`.
    w --ci call srv test_reconnection
    ;;
auth/*)
    # The OAuth scenarios: a login through the suite's authorization
    # server, then a tool call (tests/conformance_auth.rs runs them).
    rm -rf "$dir" # exec skips the EXIT trap
    exec bash "$(dirname "$0")/auth-adapter.sh" "$@"
    ;;
*)
    echo "client-adapter.sh: unknown scenario '$scenario'" >&2
    exit 2
    ;;
esac
