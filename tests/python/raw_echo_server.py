"""An MCP server in plain Python (no SDK) that answers each request with
the request line exactly as it received it, so a test sees what warden
sent: `tools/call` (tools `echo`, and `touch`, which first says that
resource `uri` was updated) as a text result, `prompts/get` (prompt
`p`, argument `path`) as a message, `completion/complete` as the one
completion value; the template `file:///{+path}` is listed.

With `--resource URI` it lists that resource and declares subscriptions;
with `--updates URI DATA`, from `notifications/initialized` on, it says
every 0.2 s, unasked, that URI was updated, with DATA in the
notification's `_meta` (as a server would that wants its data to reach a
client subscribed to another server's resource).

With `--changes`, from `notifications/initialized` on, it says every
0.2 s, unasked, that its tools, resources and prompts changed.

With `--sample PARAMS` (JSON), tool `sample` asks its client to sample
(`sampling/createMessage` with exactly those parameters, whatever the
client declared) and answers with the answer's line as it received it.

    python3 raw_echo_server.py [--marker M] [--resource URI] [--updates URI DATA]
                               [--changes] [--sample PARAMS]
"""

import argparse
import json
import sys
import threading
import time

WRITE = threading.Lock()
OPTIONS = argparse.Namespace(resource=None, updates=None, sample=None, changes=False)
# Sampling requests sent → the id of the tool call waiting for each.
WAITING = {}


def send(message):
    with WRITE:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def announce(uri, data):
    for _ in range(100):
        send({"jsonrpc": "2.0", "method": "notifications/resources/updated",
              "params": {"uri": uri, "_meta": {"data": data}}})
        time.sleep(0.2)


def change():
    for _ in range(100):
        for what in ("tools", "resources", "prompts"):
            send({"jsonrpc": "2.0", "method": f"notifications/{what}/list_changed"})
        time.sleep(0.2)


def answer(method, params, raw, request_id=None):
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": OPTIONS.changes},
                             "resources": {"subscribe": bool(OPTIONS.resource),
                                           "listChanged": OPTIONS.changes},
                             "prompts": {"listChanged": OPTIONS.changes}, "completions": {}},
            "serverInfo": {"name": "raw-echo", "version": "1"},
        }
    if method == "tools/list":
        tools = [{"name": "echo", "inputSchema": {"type": "object"}},
                 {"name": "touch", "inputSchema": {"type": "object"}}]
        if OPTIONS.sample:
            tools.append({"name": "sample", "inputSchema": {"type": "object"}})
        return {"tools": tools}
    if method == "tools/call":
        if params.get("name") == "sample" and OPTIONS.sample:
            asked = f"sample-{request_id}"
            WAITING[asked] = request_id
            send({"jsonrpc": "2.0", "id": asked, "method": "sampling/createMessage",
                  "params": json.loads(OPTIONS.sample)})
            return None
        if params.get("name") == "touch":
            uri = (params.get("arguments") or {}).get("uri")
            send({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                  "params": {"uri": uri}})
        return {"content": [{"type": "text", "text": raw}]}
    if method == "prompts/list":
        return {"prompts": [{"name": "p", "arguments": [{"name": "path"}, {"name": "dir"}]}]}
    if method == "prompts/get":
        return {"messages": [{"role": "user", "content": {"type": "text", "text": raw}}]}
    if method == "resources/list":
        listed = [{"uri": OPTIONS.resource, "name": "r"}] if OPTIONS.resource else []
        return {"resources": listed}
    if method == "resources/read":
        return {"contents": [{"uri": params.get("uri"), "text": raw}]}
    if method == "resources/templates/list":
        return {"resourceTemplates": [{"uriTemplate": "file:///{+path}", "name": "f"}]}
    if method == "completion/complete":
        return {"completion": {"values": [raw]}}
    return {}


parser = argparse.ArgumentParser()
parser.add_argument("--marker", help="ignored: lets a test find this process")
parser.add_argument("--resource")
parser.add_argument("--updates", nargs=2)
parser.add_argument("--sample")
parser.add_argument("--changes", action="store_true")
OPTIONS = parser.parse_args()

for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if not isinstance(message, dict):
        continue
    if "method" not in message:
        call = WAITING.pop(message.get("id"), None)
        if call is not None:
            send({"jsonrpc": "2.0", "id": call,
                  "result": {"content": [{"type": "text", "text": line.strip()}]}})
        continue
    if message["method"] == "notifications/initialized" and OPTIONS.updates:
        threading.Thread(target=announce, args=OPTIONS.updates, daemon=True).start()
    if message["method"] == "notifications/initialized" and OPTIONS.changes:
        threading.Thread(target=change, daemon=True).start()
    if "id" not in message:
        continue
    result = answer(message["method"], message.get("params") or {}, line.strip(), message["id"])
    if result is not None:
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})
