#!/usr/bin/env bash
# warden as the client of the MCP conformance suite's `auth/*` scenarios
# (`conformance client --command "bash tests/conformance/auth-adapter.sh"`;
# tests/conformance_auth.rs). The suite passes the server URL as the last
# argument, the scenario in MCP_CONFORMANCE_SCENARIO and, for some, data in
# MCP_CONFORMANCE_CONTEXT (the pre-registered client).
#
# What a user does, in a throw-away WARDEN_CONFIG_DIR:
#   1. a configuration naming the server (`"type": "http"`, `oauth`);
#   2. `warden mcp login remote` with BROWSER set to a script that follows
#      the authorization URL (the suite's authorization servers approve at
#      once) back to warden's loopback redirect URI;
#   3. `warden call remote test-tool`; when warden answers that the server
#      wants more scope (403 insufficient_scope) or a new login, it says
#      "run `warden mcp login remote`", and this script does, as a person
#      would. warden itself stops asking after its step-up limit; the loop
#      here is only a backstop.
# WARDEN_BIN names the warden binary (default: `warden` on PATH).
set -uo pipefail
url="${!#}"
here=$(cd "$(dirname "$0")" && pwd)
warden="${WARDEN_BIN:-warden}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export WARDEN_CONFIG_DIR="$work/config" HOME="$work/home"
mkdir -p "$WARDEN_CONFIG_DIR" "$HOME" "$work/ws"

# The configuration. A pre-registered client comes from the scenario's
# context; its secret reaches the file as `${VAR}`, like any secret.
# `client_metadata_url` is the client ID metadata document the suite's
# CIMD scenario expects (used only where a server advertises support).
export CONFORMANCE_CLIENT_SECRET=""
client_id=""
if [ -n "${MCP_CONFORMANCE_CONTEXT:-}" ]; then
  client_id=$(node -e 'const c=JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT);process.stdout.write(c.client_id||"")')
  CONFORMANCE_CLIENT_SECRET=$(node -e 'const c=JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT);process.stdout.write(c.client_secret||"")')
fi
URL="$url" CLIENT_ID="$client_id" node -e '
  const oauth = {client_metadata_url: "https://conformance-test.local/client-metadata.json"};
  if (process.env.CLIENT_ID) {
    oauth.client_id = process.env.CLIENT_ID;
    if (process.env.CONFORMANCE_CLIENT_SECRET) oauth.client_secret = "${CONFORMANCE_CLIENT_SECRET}";
  }
  const config = {
    mcpServers: {remote: {type: "http", url: process.env.URL, timeout: 20, oauth}},
    permissions: {allow: ["mcp__remote__*"]},
    policy: []
  };
  process.stdout.write(JSON.stringify(config, null, 2));
' >"$work/config.json"

w() { "$warden" --config "$work/config.json" --workspace "$work/ws" "$@"; }
login() { BROWSER="$here/../fixtures/oauth/browser-follow.sh" timeout 25 "$warden" \
  --config "$work/config.json" --workspace "$work/ws" mcp login remote; }

echo "auth-adapter: ${MCP_CONFORMANCE_SCENARIO:-?} against $url" >&2
login || exit 1
for _ in 1 2 3 4 5 6; do
  if w call remote test-tool --args '{}' 2>"$work/err"; then
    cat "$work/err" >&2
    exit 0
  fi
  cat "$work/err" >&2
  grep -q 'run `warden mcp login remote`' "$work/err" || exit 1
  login || exit 1
done
exit 1
